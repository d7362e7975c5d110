#!/usr/bin/env bash
# A request that reaches the router while no worker is up (a rollout, a crash, a cold start)
# waits for one within its deadline instead of failing at once: started before the workers, it
# gets the in-process engine's tokens once they come up. One whose deadline passes first fails
# when its deadline says, not later.
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
exit $failures
