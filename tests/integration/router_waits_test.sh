#!/usr/bin/env bash
# A request that reaches the router while no worker is up (a rollout, a crash, a cold start)
# waits for one within its deadline instead of failing at once: started before the workers, it
# gets the in-process engine's tokens once they come up. One whose deadline passes first fails
# when its deadline says, not later. A request longer than any decode worker's state budget can
# hold is refused at once (RESOURCE_EXHAUSTED naming the budget) before any work, while one at
# exactly the longest is served.
#   router_waits_test.sh BIN_DIR MODEL_DIR
set -euo pipefail
BIN=$1
MODEL=$2
export UCX_WARN_UNUSED_ENV_VARS=n
base=$((22000 + (RANDOM % 200) * 10))  # 22000-23999: below the ephemeral ports, apart from the other tests
ROUTER=127.0.0.1:$base PREFILL=127.0.0.1:$((base + 1)) DECODE=127.0.0.1:$((base + 2))
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2> /dev/null || true; done; rm -rf "${log:-}"; }
trap cleanup EXIT
log=$(mktemp -d)
"$BIN/yoco-router" --listen "$ROUTER" --model "$MODEL" --prefill "$PREFILL" --decode "$DECODE" \
  --probe-interval-ms 200 2> "$log/r" &
pids+=($!)
failures=0

tokens=0,17,5,99,254,31,8
want=$("$BIN/yoco" generate --model "$MODEL" --tokens "$tokens" --max-new-tokens 10)
sleep 0.5  # the router is listening
"$BIN/yoco-cli" --router "$ROUTER" generate --tokens "$tokens" --max-new-tokens 10 \
  --timeout-ms 30000 > "$log/early.out" 2> "$log/early.err" &
early=$!

# A short deadline with nobody there: refused within about its deadline.
start=$(date +%s%N)
if "$BIN/yoco-cli" --router "$ROUTER" generate --tokens 0,5 --max-new-tokens 2 --timeout-ms 800 \
    > /dev/null 2> "$log/short.err"; then
  echo "FAIL short-deadline: served with no worker"; failures=$((failures + 1))
else
  ms=$((($(date +%s%N) - start) / 1000000))
  if [ "$ms" -lt 4000 ]; then echo "ok   short-deadline ($ms ms: $(cat "$log/short.err"))"; else
    echo "FAIL short-deadline: took $ms ms"; failures=$((failures + 1)); fi
fi

sleep 1
"$BIN/yoco-decode" --listen "$DECODE" --model "$MODEL" --tls tcp --net-devices lo --threads 1 2> "$log/d" &
pids+=($!)
"$BIN/yoco-prefill" --listen "$PREFILL" --model "$MODEL" --tls tcp --net-devices lo --threads 1 \
  --cache-mb 0 2> "$log/p" &
pids+=($!)
if wait "$early" && [ "$(cat "$log/early.out")" = "$want" ]; then
  echo "ok   waits-for-workers"
else
  echo "FAIL waits-for-workers: $(cat "$log/early.out") $(cat "$log/early.err")"
  failures=$((failures + 1))
fi
# A decode worker with a 1 MiB state budget (yoco-tiny: 256 KiB of retention states, 1 KiB of
# K/V per row: 768 rows) behind a router whose prefill worker never comes (the decode worker
# prefills short prompts itself).
ROUTER2=127.0.0.1:$((base + 3)) DECODE2=127.0.0.1:$((base + 4)) METRICS2=127.0.0.1:$((base + 5))
"$BIN/yoco-decode" --listen "$DECODE2" --model "$MODEL" --tls tcp --net-devices lo --threads 1 \
  --memory-budget-mb 1 --metrics-listen "$METRICS2" 2> "$log/d2" &
pids+=($!)
"$BIN/yoco-router" --listen "$ROUTER2" --model "$MODEL" --prefill 127.0.0.1:$((base + 6)) \
  --decode "$DECODE2" --probe-interval-ms 200 2> "$log/r2" &
pids+=($!)
steps() {
  curl -s -m 5 "http://$METRICS2/metrics" | awk '/^yoco_decode_steps_total/ {print int($2)}'
}
for i in $(seq 1 100); do
  "$BIN/yoco-cli" --router "$ROUTER2" generate --tokens 0,5 --max-new-tokens 1 --timeout-ms 2000 \
    > /dev/null 2>&1 && break
  sleep 0.2
done
before=$(steps)
start=$(date +%s%N)
if "$BIN/yoco-cli" --router "$ROUTER2" generate --tokens 0,5 --max-new-tokens 768 \
    --timeout-ms 30000 > /dev/null 2> "$log/long.err"; then
  echo "FAIL too-long-for-every-budget: served"; failures=$((failures + 1))
else
  ms=$((($(date +%s%N) - start) / 1000000))
  if grep -q "^yoco-cli: 8: the request needs 769 K/V rows.*--memory-budget-mb) holds 768" \
      "$log/long.err" && [ "$(steps)" = "$before" ]; then
    echo "ok   too-long-for-every-budget ($ms ms, no decode step: $(cat "$log/long.err"))"
  else
    echo "FAIL too-long-for-every-budget: $(cat "$log/long.err"); steps $before -> $(steps)"
    failures=$((failures + 1))
  fi
fi
want=$("$BIN/yoco" generate --model "$MODEL" --tokens 0,5 --max-new-tokens 767)
got=$("$BIN/yoco-cli" --router "$ROUTER2" generate --tokens 0,5 --max-new-tokens 767 \
  --timeout-ms 60000 2>&1) || true
if [ "$got" = "$want" ]; then echo "ok   longest-that-fits-is-served"; else
  echo "FAIL longest-that-fits-is-served: $got"; failures=$((failures + 1)); fi
exit $failures
