#!/usr/bin/env bash
# Bursts are queued at the router, not refused: 96 streams opened at once against a prefill
# worker that queues 2 and a decode worker that batches and queues 8 are all served, each with
# the tokens it gets alone in process (concurrent_streams.cc), the requests every worker refused
# for load having waited at the router (yoco_router_load_waits_total). A router without a wait
# queue (--max-waiting-requests 0) refuses the same burst with RESOURCE_EXHAUSTED.
#   burst_test.sh BIN_DIR MODEL_DIR
set -euo pipefail
BIN=$1
MODEL=$2
export UCX_WARN_UNUSED_ENV_VARS=n
base=$((36000 + (RANDOM % 200) * 10))  # 36000-37999: below the ephemeral ports, apart from the other tests
ROUTER=127.0.0.1:$base PREFILL=127.0.0.1:$((base + 1)) DECODE=127.0.0.1:$((base + 2))
METRICS=127.0.0.1:$((base + 3)) UNQUEUED=127.0.0.1:$((base + 4))
log=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2> /dev/null || true; done; rm -rf "$log"' EXIT
failures=0
total=0

"$BIN/yoco-decode" --listen "$DECODE" --model "$MODEL" --tls tcp --net-devices lo --max-batch 8 \
  --max-queue 8 2> "$log/d" &
pids+=($!)
"$BIN/yoco-prefill" --listen "$PREFILL" --model "$MODEL" --tls tcp --net-devices lo --max-queue 2 \
  2> "$log/p" &
pids+=($!)
# No local prefill: every request goes through the prefill worker's short queue. A decode worker
# taking in dozens of bundles at once under the sanitizers can leave a stream silent for over
# the stall floor (2 s, 50x a gap of its first fast tokens): that is load, not a hung worker
# (integration.stall tests those), and with one decode worker a cut stream has nowhere to go.
ROUTER_FLAGS=(--model "$MODEL" --prefill "$PREFILL" --decode "$DECODE" --probe-interval-ms 200
              --local-prefill-max-tokens 0 --min-stall-ms 60000)
"$BIN/yoco-router" --listen "$ROUTER" "${ROUTER_FLAGS[@]}" --metrics-listen "$METRICS" 2> "$log/r" &
pids+=($!)
"$BIN/yoco-router" --listen "$UNQUEUED" "${ROUTER_FLAGS[@]}" --max-waiting-requests 0 \
  2> "$log/r2" &
pids+=($!)
for router in "$ROUTER" "$UNQUEUED"; do
  for i in $(seq 1 100); do
    timeout 20 "$BIN/yoco-cli" --router "$router" generate --tokens 0,5 --max-new-tokens 1 \
      > /dev/null 2>&1 && break
    sleep 0.2
    if [ "$i" = 100 ]; then echo "services did not come up"; cat "$log"/*; exit 1; fi
  done
done

total=$((total + 1))
if out=$(timeout 240 "$BIN/concurrent_streams" "$ROUTER" "$MODEL" as-stored f32 96 24 2>&1); then
  waits=$(curl -s "http://$METRICS/metrics" | sed -n 's/^yoco_router_load_waits_total \(.*\)$/\1/p')
  if [ "${waits%.*}" -gt 0 ]; then echo "ok   burst-served-exactly ($out; $waits waited)"
  else echo "FAIL burst-served-exactly: no request waited ($out)"; failures=$((failures + 1)); fi
else
  echo "FAIL burst-served-exactly: $out"; failures=$((failures + 1))
fi

total=$((total + 1))
out=$(timeout 240 "$BIN/concurrent_streams" "$UNQUEUED" "$MODEL" as-stored f32 96 24 2>&1) && st=0 || st=$?
if [ "$st" = 1 ] && grep -q "status 8 " <<< "$out"; then
  echo "ok   without-a-wait-queue-the-burst-is-refused ($(tail -1 <<< "$out"))"
else
  echo "FAIL without-a-wait-queue-the-burst-is-refused: exit $st: $(tail -3 <<< "$out")"
  failures=$((failures + 1))
fi

echo "$((total - failures))/$total checks passed"
[ "$failures" = 0 ]
