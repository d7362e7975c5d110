#!/usr/bin/env bash
# SIGTERM to an idle service that a health watcher (a load balancer, a service mesh) is
# streaming from: the service reports NOT_SERVING, ends the watch and exits at once instead of
# waiting the whole drain period for a stream that never ends by itself.
#   drain_with_watchers_test.sh BIN_DIR MODEL_DIR
set -euo pipefail
BIN=$1
MODEL=$2
export UCX_WARN_UNUSED_ENV_VARS=n
base=$((24000 + (RANDOM % 200) * 10))  # 24000-25999: below the ephemeral ports, apart from the other tests
log=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2> /dev/null || true; done; rm -rf "$log"; }
trap cleanup EXIT
failures=0

for role in decode prefill; do
  address=127.0.0.1:$base
  base=$((base + 1))
  "$BIN/yoco-$role" --listen "$address" --model "$MODEL" --tls tcp --net-devices lo --threads 1 \
    --drain-seconds 30 2> "$log/$role.err" &
  worker=$!; pids+=("$worker")
  service=yoco.v1.$([ "$role" = decode ] && echo DecodeWorker || echo PrefillWorker)
  for i in $(seq 1 100); do
    "$BIN/yoco-cli" --router "$address" health --service "$service" > /dev/null 2>&1 && break
    sleep 0.1
  done
  "$BIN/yoco-cli" --router "$address" health --service "$service" --watch > "$log/$role.watch" 2>&1 &
  watcher=$!; pids+=("$watcher")
  for i in $(seq 1 50); do grep -q SERVING "$log/$role.watch" && break; sleep 0.1; done
  start=$(date +%s%N)
  kill -TERM "$worker"
  status=0
  wait "$worker" || status=$?
  took_ms=$(( ($(date +%s%N) - start) / 1000000 ))
  wait "$watcher" 2> /dev/null || true
  if [ "$status" = 0 ] && [ "$took_ms" -lt 5000 ] && grep -q '^NOT_SERVING$' "$log/$role.watch"; then
    echo "ok   $role-exits-at-once-with-a-watcher ($took_ms ms)"
  else
    echo "FAIL $role-exits-at-once-with-a-watcher: exit $status after $took_ms ms; watch: $(cat "$log/$role.watch")"
    failures=$((failures + 1))
  fi
done
[ "$failures" = 0 ]
