#!/usr/bin/env bash
# What local prefill costs a busy decode batch when the decode worker does not share its cores
# with the prefill worker (as on separate machines): the decode worker is pinned to core 0,
# the prefill worker, the routers and the load generator to core 1, one kernel thread each.
# Three routers share the two workers: one never prefills locally, one always does (no
# length or load limit), one runs the defaults (128 tokens, fewer than 8 requests). For each
# prompt length, yoco-loadtest holds CONCURRENCY streams of uncached prompts (OUTPUT_TOKENS, 64
# by default, each) against each router in turn and the script prints output tokens/s, TTFT and TPOT
# percentiles: TPOT is what every stream already in the batch pays for the prefills run beside
# it. Needs at least 2 cores.
#   loadtest/local_prefill_busy_decode.sh [MODEL_DIR] [CONCURRENCY] [REQUESTS]
set -euo pipefail
cd "$(dirname "$0")/.."
source loadtest/wait_for_routers.sh
model=${1:-build/models/yoco-tiny}
concurrency=${2:-16}
requests=${3:-96}
output=${OUTPUT_TOKENS:-64}
port=${YOCO_PORT:-50191}
shipped=127.0.0.1:$port local=127.0.0.1:$((port + 1)) defaults=127.0.0.1:$((port + 2))
prefill=127.0.0.1:$((port + 3)) decode=127.0.0.1:$((port + 4)) metrics=127.0.0.1:$((port + 5))
if [ "$(nproc)" -lt 2 ]; then
  echo "needs 2 cores (one for the decode worker, one for the rest)" >&2
  exit 2
fi
log=$(mktemp -d)
export UCX_WARN_UNUSED_ENV_VARS=n OMP_NUM_THREADS=1
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2> /dev/null || true; done; rm -rf "$log"' EXIT
taskset -c 0 build/bin/yoco-decode --listen "$decode" --model "$model" --tls tcp \
  --net-devices lo --threads 1 --max-batch 64 --metrics_listen "$metrics" 2> "$log/decode" &
pids+=($!)
taskset -c 1 build/bin/yoco-prefill --listen "$prefill" --model "$model" --tls tcp \
  --net-devices lo --threads 1 --cache-mb 0 --max-queue 256 2> "$log/prefill" &
pids+=($!)
for r in "$shipped 0 8" "$local 1000000 1000000" "$defaults 128 8"; do
  set -- $r
  taskset -c 1 build/bin/yoco-router --listen "$1" --model "$model" --prefill "$prefill" \
    --decode "$decode" --local-prefill-max-tokens "$2" --local-prefill-max-load "$3" \
    --snapshot-conversations=false 2>> "$log/router" &
  pids+=($!)
done
wait_for_routers "$shipped" "$local" "$defaults"
echo "| prompt tokens | router | output tokens/s | TTFT p50 / p99 (ms) | TPOT p50 / p99 (ms) | local prefills |"
echo "|---|---|---|---|---|---|"
for len in 32 128 512; do
  for r in "shipped $shipped" "always-local $local" "defaults $defaults"; do
    set -- $r
    taskset -c 1 build/bin/yoco-loadtest --router "$2" --workload random --input-tokens "$len" \
      --input-spread 0 --output-tokens "$output" --requests "$requests" --concurrency "$concurrency" \
      --seed "$len" --scrape "http://$metrics/metrics" --quiet --json "$log/run.json" > /dev/null 2>&1 || true
    python3 - "$log/run.json" "$len" "$1" << 'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
errors = sum(s["errors"].values()) if isinstance(s["errors"], dict) else s["errors"]
def local_prefills(summary):
    for series in summary.get("server_metrics_delta", {}).values():
        for name, value in series.items():
            if name.startswith("yoco_decode_local_prefills_total"):
                return "%d" % value
    return "0"
note = "" if not errors else " (%d errors)" % errors
print("| %s | %s | %.0f%s | %.0f / %.0f | %.1f / %.1f | %s |" % (
    sys.argv[2], sys.argv[3], s["output_tokens_per_s"], note, s["ttft_ms"]["p50"],
    s["ttft_ms"]["p99"], s["tpot_ms"]["p50"], s["tpot_ms"]["p99"],
    local_prefills(s)))
EOF
  done
done
