#!/usr/bin/env bash
# Where conditional disaggregation pays: time to first token of uncached prompts of rising
# length, prefilled on a prefill worker and shipped over UCX, against prefilled on the decode
# worker itself. Two routers share one prefill and one decode worker: one never prefills
# locally, the other always; requests alternate between them (so machine noise hits both
# alike), every prompt distinct (no cache hits). Prints a Markdown table of median TTFT per
# length and the ratio, then capacity under load: yoco-loadtest at 16 concurrent streams of
# each length (32 output tokens) against each router, output tokens/s and TTFT percentiles.
#   loadtest/local_prefill_crossover.sh [MODEL_DIR] [REQUESTS_PER_LENGTH]
set -euo pipefail
cd "$(dirname "$0")/.."
source loadtest/wait_for_routers.sh
model=${1:-build/models/yoco-tiny}
n=${2:-15}
port=${YOCO_PORT:-50181}
remote=127.0.0.1:$port local=127.0.0.1:$((port + 1))
prefill=127.0.0.1:$((port + 2)) decode=127.0.0.1:$((port + 3))
log=$(mktemp -d)
export UCX_WARN_UNUSED_ENV_VARS=n
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2> /dev/null || true; done; rm -rf "$log"' EXIT
build/bin/yoco-decode --listen "$decode" --model "$model" --tls tcp --net-devices lo \
  2> "$log/decode" &
pids+=($!)
build/bin/yoco-prefill --listen "$prefill" --model "$model" --tls tcp --net-devices lo \
  --cache-mb 0 2> "$log/prefill" &
pids+=($!)
for r in "$remote 0" "$local 1000000"; do
  set -- $r
  build/bin/yoco-router --listen "$1" --model "$model" --prefill "$prefill" --decode "$decode" \
    --local-prefill-max-tokens "$2" --snapshot-conversations=false 2>> "$log/router" &
  pids+=($!)
done
wait_for_routers "$remote" "$local"
vocab=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["vocab_size"])' \
  "$model/params.json")
ttft() {  # router, length, seed -> ms
  local tokens
  tokens=$(python3 -c 'import random, sys
n, v, s = map(int, sys.argv[1:])
r = random.Random(s)
print(",".join(["0"] + [str(r.randrange(3, v)) for _ in range(n - 1)]))' "$2" "$vocab" "$3")
  build/bin/yoco-cli --router "$1" generate --tokens "$tokens" --max-new-tokens 2 --stats \
    2>&1 > /dev/null | python3 -c 'import json, sys; print(json.loads(sys.stdin.read())["ttft_ms"])'
}
tps_list=() ttft_list=()
median() { sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
echo "| prompt tokens | TTFT shipped (ms) | TTFT local (ms) | local / shipped |"
echo "|---|---|---|---|"
for len in 16 64 128 256 512 1024 2048; do
  : > "$log/r" && : > "$log/l"
  for i in $(seq 1 "$n"); do
    ttft "$remote" "$len" "$((len * 1000 + 2 * i))" >> "$log/r"
    ttft "$local" "$len" "$((len * 1000 + 2 * i + 1))" >> "$log/l"
  done
  r=$(median < "$log/r") l=$(median < "$log/l")
  echo "| $len | $r | $l | $(awk -v a="$l" -v b="$r" 'BEGIN {printf "%.2f", a / b}') |"
done
echo
echo "| prompt tokens | tokens/s shipped | tokens/s local | TTFT p50 / p99 shipped (ms) | TTFT p50 / p99 local (ms) |"
echo "|---|---|---|---|---|"
for len in 64 128 256 512 1024; do
  row="| $len"
  for address in "$remote" "$local"; do
    build/bin/yoco-loadtest --router "$address" --workload random --input-tokens "$len" \
      --input-spread 0 --output-tokens 32 --requests 64 --concurrency 16 --seed "$len" --quiet \
      --json "$log/cap.json" > /dev/null 2>&1 || true
    eval "$(python3 -c 'import json, sys
s = json.load(open(sys.argv[1]))
print("tps=%.0f ttft=\"%.0f / %.0f\"" % (s["output_tokens_per_s"], s["ttft_ms"]["p50"], s["ttft_ms"]["p99"]))' "$log/cap.json")"
    tps_list+=("$tps") ttft_list+=("$ttft")
  done
  echo "$row | ${tps_list[0]} | ${tps_list[1]} | ${ttft_list[0]} | ${ttft_list[1]} |"
  tps_list=() ttft_list=()
done
