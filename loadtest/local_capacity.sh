#!/usr/bin/env bash
# Capacity of the local stack (1 router, 1 prefill, 1 decode worker, build/models/yoco-tiny) for
# the rag workload: closed-loop runs at rising concurrency with the documents pre-cached, then
# the same questions about documents never seen (misses). Prints a Markdown table; the JSON,
# JSONL and plots stay in OUT_DIR (default build/loadtest).
#   loadtest/local_capacity.sh [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build/loadtest}
mkdir -p "$out"
port=${YOCO_PORT:-50151}
router=127.0.0.1:$port prefill=127.0.0.1:$((port + 1)) decode=127.0.0.1:$((port + 2))
metrics=127.0.0.1:$((port + 3))
model=build/models/yoco-tiny
export UCX_WARN_UNUSED_ENV_VARS=n
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2> /dev/null || true; done' EXIT
build/bin/yoco-decode --listen "$decode" --model "$model" --tls tcp --net-devices lo 2> "$out/decode.log" &
pids+=($!)
build/bin/yoco-prefill --listen "$prefill" --model "$model" --tls tcp --net-devices lo 2> "$out/prefill.log" &
pids+=($!)
build/bin/yoco-router --listen "$router" --model "$model" --prefill "$prefill" --decode "$decode" \
  --metrics-listen "$metrics" --snapshot-conversations=false 2> "$out/router.log" &
pids+=($!)
for i in $(seq 1 100); do
  build/bin/yoco-cli --router "$router" generate --tokens 0,5 --max-new-tokens 1 > /dev/null 2>&1 && break
  sleep 0.2
done
rag=(--workload rag --documents 8 --document-tokens 1024 --question-tokens 32 --output-tokens 64
     --seed 1 --slo ttft=1000,tpot=100 --quiet)
run() {  # name, flags...
  local name=$1; shift
  local rc=0
  build/bin/yoco-loadtest --router "$router" "${rag[@]}" "$@" --json "$out/$name.json" \
    --jsonl "$out/$name.jsonl" --plot "$out/$name.png" > /dev/null || rc=$?
  [ "$rc" = 0 ] || [ "$rc" = 3 ]  # 3: some requests failed, which the table shows
}
echo "| run | concurrency | requests/s | output tokens/s | TTFT p50 / p99 (ms) | TPOT p50 / p99 (ms) | goodput (req/s, TTFT ≤ 1 s, TPOT ≤ 100 ms) | cache hit rate | errors |"
echo "|---|---|---|---|---|---|---|---|---|"
row() {  # name, concurrency
  python3 - "$out/$1.json" "$1" "$2" << 'PY'
import json, sys
s = json.load(open(sys.argv[1]))
errors = ", ".join("%d %s" % (n, code) for code, n in s["errors"].items()) or "0"
print("| %s | %s | %.2f | %.0f | %.0f / %.0f | %.1f / %.1f | %.2f | %.2f | %s of %d |" % (
    sys.argv[2], sys.argv[3], s["requests_per_s"], s["output_tokens_per_s"], s["ttft_ms"]["p50"],
    s["ttft_ms"]["p99"], s["tpot_ms"]["p50"], s["tpot_ms"]["p99"], s["goodput_requests_per_s"],
    s["cache_hit_rate"], errors, s["requests"]))
PY
}
first=1
for c in 1 4 16 64; do
  flags=(--concurrency "$c" --requests $((c < 8 ? 32 : 4 * c)))
  if [ $first = 1 ]; then flags+=(--precache --pin); first=0; fi
  run "hits-c$c" "${flags[@]}"
  row "hits-c$c" "$c"
done
for c in 1 16; do
  # A seed of their own: the documents of one run must not be cached by another.
  run "misses-c$c" --concurrency "$c" --requests $((c < 8 ? 32 : 4 * c)) --unseen-fraction 1 \
    --seed $((100 + c))
  row "misses-c$c" "$c"
done
