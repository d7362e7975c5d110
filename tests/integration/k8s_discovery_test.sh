#!/usr/bin/env bash
# The router finds its workers through the Kubernetes API (k8s://), against a stand-in API
# server (fake_kube_api.py: HTTPS, PodList, chunked watch stream) that lists a prefill and a
# decode worker on 127.0.0.2 and, during traffic, sends watch events: a second decode worker on
# 127.0.0.3 becomes Ready (it is used), then the first is deleted (no new requests; the stream it
# serves finishes with the right tokens). The router authenticates with the token file and
# verifies the API server against the CA file; workers are verified by their tls_name.
#   k8s_discovery_test.sh BIN_DIR MODEL_DIR
set -euo pipefail
BIN=$1
MODEL=$2
export UCX_WARN_UNUSED_ENV_VARS=n
base=$((32000 + (RANDOM % 20) * 10))  # 32000-32199: below the ephemeral ports (32768), apart from the other tests
API_PORT=$base PREFILL_PORT=$((base + 1)) DECODE_PORT=$((base + 2)) ROUTER=127.0.0.1:$((base + 3))
METRICS1=127.0.0.1:$((base + 5)) METRICS2=127.0.0.1:$((base + 4))
log=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2> /dev/null || true; done; rm -rf "$log"; }
trap cleanup EXIT
failures=0
total=0

source "$(dirname "$0")/test_certs.sh"
source "$(dirname "$0")/watchdog.sh"
make_ca ca
make_ca apica
make_cert apiserver apica 2 50
make_cert server ca 2 100 DNS:yoco-workers
make_cert server3 ca 2 110 DNS:yoco-workers,IP:127.0.0.3
make_cert router ca 2 150
make_cert client ca 2 200
printf 'service-account-token-0123456789\n' > "$log/token"
cat > "$log/pods.json" << 'JSON'
{"prefill": [["yoco-prefill-0", "127.0.0.2", true]],
 "decode": [["yoco-decode-0", "127.0.0.2", true], ["yoco-decode-1", "127.0.0.3", false]]}
JSON
python3 "$(dirname "$0")/fake_kube_api.py" "$API_PORT" "$log/apiserver.pem" "$log/apiserver.key" \
  "$log/auth.log" "$log/pods.json" 2> "$log/api" &
pids+=($!)
control() {  # role type name ip ready
  curl -s -m 10 --cacert "$log/apica.pem" -X POST "https://127.0.0.1:$API_PORT/control/$1" \
    -d "{\"type\": \"$2\", \"name\": \"$3\", \"ip\": \"$4\", \"ready\": $5}"
}

MTLS=(--tls-cert "$log/server.pem" --tls-key "$log/server.key" --tls-ca "$log/ca.pem")
CLIENT=(--tls-ca "$log/ca.pem" --tls-cert "$log/client.pem" --tls-key "$log/client.key")
WORKER=(--model "$MODEL" --tls tcp --net-devices lo --threads 1 "${MTLS[@]}" --allowed-callers router)
"$BIN/yoco-prefill" --listen "127.0.0.2:$PREFILL_PORT" "${WORKER[@]}" 2> "$log/p" &
pids+=($!)
"$BIN/yoco-decode" --listen "127.0.0.2:$DECODE_PORT" "${WORKER[@]}" --metrics-listen "$METRICS1" \
  2> "$log/d1" &
d1=$!; pids+=("$d1")
"$BIN/yoco-decode" --listen "127.0.0.3:$DECODE_PORT" "${WORKER[@]}" --metrics-listen "$METRICS2" \
  --tls-cert "$log/server3.pem" --tls-key "$log/server3.key" 2> "$log/d2" &
pids+=($!)
"$BIN/yoco-router" --listen "$ROUTER" --model "$MODEL" \
  --prefill "k8s://yoco/role=prefill?port=$PREFILL_PORT&tls_name=yoco-workers" \
  --decode "k8s://yoco/role=decode?port=$DECODE_PORT&tls_name=yoco-workers" \
  --k8s-api-server "https://127.0.0.1:$API_PORT" --k8s-token-file "$log/token" \
  --k8s-ca-file "$log/apica.pem" --discovery-interval-ms 200 --probe-interval-ms 200 \
  --min-stall-ms 60000 \
  --tls-cert "$log/router.pem" --tls-key "$log/router.key" --tls-ca "$log/ca.pem" 2> "$log/r" &
pids+=($!)

start_watchdog 150  # CTest's TIMEOUT is 180
step "services-come-up"
cli() { timeout 60 "$BIN/yoco-cli" "${CLIENT[@]}" --router "$ROUTER" generate "$@"; }
for i in $(seq 1 100); do
  cli --tokens 0,5 --max-new-tokens 1 > /dev/null 2>&1 && break
  sleep 0.2
  if [ "$i" = 100 ]; then echo "services did not come up"; cat "$log"/{r,p,d1,api}; exit 1; fi
done
steps_on() {
  curl -s -m 5 "http://$1/metrics" 2> /dev/null | awk '/^yoco_decode_steps_total/ {print int($2)}'
}
check() {  # name, tokens, max-new
  total=$((total + 1))
  step "$1 (at ${SECONDS} s)"
  local want got
  want=$("$BIN/yoco" generate --model "$MODEL" --tokens "$2" --max-new-tokens "$3")
  got=$(cli --tokens "$2" --max-new-tokens "$3" 2>&1) || true
  if [ "$want" = "$got" ]; then echo "ok   $1"; else echo "FAIL $1: want $want got $got"; failures=$((failures + 1)); fi
}
result() {  # name, condition (0/1), detail
  total=$((total + 1))
  if [ "$2" = 0 ]; then echo "ok   $1"; else echo "FAIL $1: $3"; failures=$((failures + 1)); fi
}

check found-through-the-kubernetes-api 0,17,5,99,254 12
[ "$(steps_on "$METRICS2")" = 0 ] && c=0 || c=1
result unready-pod-unused "$c" "$(steps_on "$METRICS2") steps on 127.0.0.3"
grep -qx "Bearer service-account-token-0123456789" "$log/auth.log" && c=0 || c=1
result service-account-token-sent "$c" "$(sort -u "$log/auth.log")"

long=0,42,7,300,11,8
want_long=$("$BIN/yoco" generate --model "$MODEL" --tokens "$long" --max-new-tokens 4000)
cli --tokens "$long" --max-new-tokens 4000 > "$log/long.out" 2> "$log/long.err" &
long_pid=$!
step "long-stream-starts (at ${SECONDS} s)"
for i in $(seq 1 500); do [ -s "$log/long.out" ] && break; sleep 0.01; done
# A fast machine finishes the stream in well under a second: the worker serving it is paused
# (SIGSTOP) while the events arrive and other requests run, so it is certainly mid-stream, and
# resumed before the stream is checked. (The router's --min-stall-ms keeps the pause from
# counting as a stalled worker, whose streams would move: tests/cluster/stall_test.cc.)
kill -STOP "$d1"
control decode MODIFIED yoco-decode-1 127.0.0.3 true
control decode DELETED yoco-decode-0 127.0.0.2 true
sleep 1  # a few discovery rounds
for i in 1 2 3; do check "request-$i-after-the-events" "0,$((10 + i)),5,9" 10; done
[ "$(steps_on "$METRICS2")" -gt 0 ] && c=0 || c=1
result pod-that-became-ready-used "$c" "no steps on 127.0.0.3"
[ "$(tr -cd , < "$log/long.out" | wc -c)" -lt 3999 ] && c=0 || c=1
result long-stream-still-running-after-the-events "$c" "it ended too soon to test draining"
kill -CONT "$d1"
step "long-stream-ends (at ${SECONDS} s)"
wait "$long_pid" || true
[ "$(cat "$log/long.out")" = "$want_long" ] && c=0 || c=1
result deleted-pod-finishes-its-stream "$c" "$(cat "$log/long.err")"
before=$(steps_on "$METRICS1")
check request-after-the-stream 0,77,3 10
after=$(steps_on "$METRICS1")
[ -n "$before" ] && [ "$before" = "$after" ] && c=0 || c=1
result nothing-new-on-the-deleted-pod "$c" "steps $before -> $after"

echo "$((total - failures))/$total checks passed in ${SECONDS} s"
[ "$failures" = 0 ]
