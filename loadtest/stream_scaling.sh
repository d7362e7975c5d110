#!/usr/bin/env bash
# What many concurrent streams cost the local stack: one wave of C requests (C = 64, 256, 1024)
# held open together, with the workers' queues raised so that none is refused. Samples the
# router's and decode worker's threads and resident memory every 0.2 s (peaks reported) and
# prints a Markdown table with yoco-loadtest's throughput, TTFT p99 and errors.
#   loadtest/stream_scaling.sh [OUT_DIR]
# ROUTER_BIN (default build/bin/yoco-router) and ROUTER_FLAGS compare router builds and settings.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build/loadtest}
mkdir -p "$out"
port=${YOCO_PORT:-50161}
router=127.0.0.1:$port prefill=127.0.0.1:$((port + 1)) decode=127.0.0.1:$((port + 2))
model=build/models/yoco-tiny
export UCX_WARN_UNUSED_ENV_VARS=n
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2> /dev/null || true; done' EXIT
build/bin/yoco-decode --listen "$decode" --model "$model" --tls tcp --net-devices lo \
  --max-batch 64 --max-queue 4096 2> "$out/scaling-decode.log" &
decode_pid=$!; pids+=($!)
build/bin/yoco-prefill --listen "$prefill" --model "$model" --tls tcp --net-devices lo \
  --max-queue 4096 2> "$out/scaling-prefill.log" &
pids+=($!)
# shellcheck disable=SC2086
"${ROUTER_BIN:-build/bin/yoco-router}" --listen "$router" --model "$model" --prefill "$prefill" \
  --decode "$decode" --snapshot-conversations=false ${ROUTER_FLAGS:-} 2> "$out/scaling-router.log" &
router_pid=$!; pids+=($!)
for i in $(seq 1 100); do
  build/bin/yoco-cli --router "$router" generate --tokens 0,5 --max-new-tokens 1 > /dev/null 2>&1 && break
  sleep 0.2
done
field() { awk -v k="$2:" '$1 == k {print $2}' "/proc/$1/status"; }
echo "| streams | router threads (peak) | router RSS MiB (peak) | decode threads (peak) | decode RSS MiB (peak) | output tokens/s | TTFT p99 (ms) | TPOT p99 (ms) | errors |"
echo "|---|---|---|---|---|---|---|---|---|"
for c in 64 256 1024; do
  build/bin/yoco-loadtest --router "$router" --workload random --input-tokens 64 --output-tokens 32 \
    --requests "$c" --concurrency "$c" --seed "$c" --timeout-seconds 300 --quiet \
    --json "$out/scaling-$c.json" > /dev/null &
  lt=$!
  peak=(0 0 0 0)
  while kill -0 "$lt" 2> /dev/null; do
    now=("$(field $router_pid Threads)" "$(field $router_pid VmRSS)" "$(field $decode_pid Threads)" "$(field $decode_pid VmRSS)")
    for k in 0 1 2 3; do [ "${now[$k]}" -gt "${peak[$k]}" ] && peak[$k]=${now[$k]}; done
    sleep 0.2
  done
  wait "$lt" || true
  python3 - "$out/scaling-$c.json" "$c" "${peak[@]}" << 'PY'
import json, sys
s = json.load(open(sys.argv[1]))
c, rt, rr, dt, dr = sys.argv[2:7]
errors = ", ".join("%d %s" % (n, k) for k, n in s["errors"].items()) or "0"
print("| %s | %s | %.0f | %s | %.0f | %.0f | %.0f | %.1f | %s |" % (
    c, rt, int(rr) / 1024, dt, int(dr) / 1024, s["output_tokens_per_s"], s["ttft_ms"]["p99"],
    s["tpot_ms"]["p99"], errors))
PY
done
