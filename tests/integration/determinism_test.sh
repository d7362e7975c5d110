#!/usr/bin/env bash
# A seed reproduces its tokens under any load: for every weight format and K/V dtype, 64 streams
# (half greedy, half seeded sampling) opened at once through router, prefill and decode workers
# give exactly the tokens each request gets alone in process (concurrent_streams.cc), although
# the decode worker batches them 32 at a time, in whatever order they arrive (and the prefill
# worker queues 32, so half of them wait at the router for room first).
#   determinism_test.sh BIN_DIR MODEL_DIR
set -euo pipefail
BIN=$1
MODEL=$2
export UCX_WARN_UNUSED_ENV_VARS=n
base=$((34000 + (RANDOM % 200) * 10))  # 34000-35999: below the ephemeral ports, apart from the other tests
ROUTER=127.0.0.1:$base PREFILL=127.0.0.1:$((base + 1)) DECODE=127.0.0.1:$((base + 2))
log=$(mktemp -d)
pids=()
stop_all() { for p in "${pids[@]}"; do kill -9 "$p" 2> /dev/null || true; done; pids=(); }
trap 'stop_all; rm -rf "$log"' EXIT
failures=0
total=0

for weights in as-stored bf16 q8; do
  for kv in f32 bf16; do
    FORMAT=(--weights "$weights" --kv-dtype "$kv")
    "$BIN/yoco-decode" --listen "$DECODE" --model "$MODEL" --tls tcp --net-devices lo ${DECODE_EXTRA:-} \
      "${FORMAT[@]}" 2> "$log/d" &
    pids+=($!)
    "$BIN/yoco-prefill" --listen "$PREFILL" --model "$MODEL" --tls tcp --net-devices lo \
      "${FORMAT[@]}" 2> "$log/p" &
    pids+=($!)
    "$BIN/yoco-router" --listen "$ROUTER" --model "$MODEL" --prefill "$PREFILL" \
      --decode "$DECODE" --probe-interval-ms 200 2> "$log/r" &
    pids+=($!)
    for i in $(seq 1 100); do
      timeout 20 "$BIN/yoco-cli" --router "$ROUTER" generate --tokens 0,5 --max-new-tokens 1 \
        > /dev/null 2>&1 && break
      sleep 0.2
      if [ "$i" = 100 ]; then echo "services did not come up"; cat "$log"/{d,p,r}; exit 1; fi
    done
    total=$((total + 1))
    if out=$(timeout 300 "$BIN/concurrent_streams" "$ROUTER" "$MODEL" "$weights" "$kv" 64 "${TOKENS:-120}" 2>&1); then
      echo "ok   $out"
    else
      echo "FAIL $weights weights, $kv K/V: $out"
      failures=$((failures + 1))
    fi
    stop_all
    sleep 0.2  # the ports are free again
  done
done

echo "$((total - failures))/$total checks passed"
[ "$failures" = 0 ]
