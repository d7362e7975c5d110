#!/usr/bin/env bash
# The whole stack as a cluster runs it: mutual TLS on every call, and the router finds its
# workers through DNS (dns://SERVER/NAME:PORT against a real DNS server, dnsmasq on a loopback
# port), as it does with a Kubernetes headless Service. Workers listen on 127.0.0.2 and
# 127.0.0.3 with the same port, one A record each. While traffic runs, the records change: a
# decode worker added is used; one removed gets no new requests, and the stream it is serving
# finishes with the right tokens. No request fails. A decode worker whose state memory (2 MiB)
# holds one long sequence (~1.6 MB) reports NOT_SERVING while it decodes one, and SERVING again
# after.
#   dns_discovery_test.sh BIN_DIR MODEL_DIR
set -euo pipefail
BIN=$1
MODEL=$2
export UCX_WARN_UNUSED_ENV_VARS=n
command -v dnsmasq > /dev/null || PATH=$PATH:/usr/sbin
base=$((28000 + (RANDOM % 200) * 10))  # 28000-29999: below the ephemeral ports, apart from the other tests
DNS_PORT=$base PREFILL_PORT=$((base + 1)) DECODE_PORT=$((base + 2)) ROUTER=127.0.0.1:$((base + 3))
METRICS1=127.0.0.1:$((base + 5)) METRICS2=127.0.0.1:$((base + 4))
log=$(mktemp -d)
chmod 755 "$log"
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2> /dev/null || true; done; rm -rf "$log"; }
trap cleanup EXIT
failures=0
total=0

records() {  # the decode workers' addresses; prefill stays on 127.0.0.2
  { echo "127.0.0.2 prefill.yoco.test"; for ip in "$@"; do echo "$ip decode.yoco.test"; done; } \
    > "$log/hosts.new"
  chmod 644 "$log/hosts.new"
  mv "$log/hosts.new" "$log/hosts"
}
records 127.0.0.2
dnsmasq --keep-in-foreground --port="$DNS_PORT" --listen-address=127.0.0.1 --bind-interfaces \
  --no-resolv --no-hosts --addn-hosts="$log/hosts" --local-ttl=0 --pid-file= --user=root \
  --log-facility="$log/dnsmasq.log" &
dns_pid=$!; pids+=("$dns_pid")
reload_dns() { kill -HUP "$dns_pid"; }

source "$(dirname "$0")/test_certs.sh"
source "$(dirname "$0")/watchdog.sh"
make_ca ca
# Workers found by name present a certificate for the name (as a Service's pods do), not for
# their addresses: the router verifies the name.
# The second decode worker's also names its address: the readiness check below calls it directly.
make_cert server ca 2 100 DNS:prefill.yoco.test,DNS:decode.yoco.test
make_cert server3 ca 2 110 DNS:decode.yoco.test,IP:127.0.0.3
make_cert router ca 2 150
make_cert client ca 2 200
MTLS=(--tls-cert "$log/server.pem" --tls-key "$log/server.key" --tls-ca "$log/ca.pem")
CLIENT=(--tls-ca "$log/ca.pem" --tls-cert "$log/client.pem" --tls-key "$log/client.key")
WORKER=(--model "$MODEL" --tls tcp --net-devices lo --threads 1 "${MTLS[@]}" --allowed-callers router)
"$BIN/yoco-prefill" --listen "127.0.0.2:$PREFILL_PORT" "${WORKER[@]}" 2> "$log/p" &
pids+=($!)
"$BIN/yoco-decode" --listen "127.0.0.2:$DECODE_PORT" "${WORKER[@]}" --metrics-listen "$METRICS1" \
  2> "$log/d1" &
d1=$!; pids+=("$d1")
"$BIN/yoco-decode" --listen "127.0.0.3:$DECODE_PORT" "${WORKER[@]}" --metrics-listen "$METRICS2" \
  --memory-budget-mb 2 --tls-cert "$log/server3.pem" --tls-key "$log/server3.key" 2> "$log/d2" &
pids+=($!)
"$BIN/yoco-router" --listen "$ROUTER" --model "$MODEL" \
  --prefill "dns://127.0.0.1:$DNS_PORT/prefill.yoco.test:$PREFILL_PORT" \
  --decode "dns://127.0.0.1:$DNS_PORT/decode.yoco.test:$DECODE_PORT" \
  --discovery-interval-ms 200 --probe-interval-ms 200 --min-stall-ms 60000 \
  --tls-cert "$log/router.pem" \
  --tls-key "$log/router.key" --tls-ca "$log/ca.pem" 2> "$log/r" &
pids+=($!)

start_watchdog 150  # CTest's TIMEOUT is 180
step "services-come-up"
cli() { timeout 60 "$BIN/yoco-cli" "${CLIENT[@]}" --router "$ROUTER" generate "$@"; }
for i in $(seq 1 100); do
  cli --tokens 0,5 --max-new-tokens 1 > /dev/null 2>&1 && break
  sleep 0.2
  if [ "$i" = 100 ]; then echo "services did not come up"; cat "$log"/{r,p,d1,dnsmasq.log}; exit 1; fi
done
steps_on() {
  curl -s -m 5 "http://$1/metrics" 2> /dev/null | awk '/^yoco_decode_steps_total/ {print int($2)}'
}
steps_on_d2() { steps_on "$METRICS2"; }

check() {  # name, tokens, max-new
  total=$((total + 1))
  step "$1 (at ${SECONDS} s)"
  local want got
  want=$("$BIN/yoco" generate --model "$MODEL" --tokens "$2" --max-new-tokens "$3")
  got=$(cli --tokens "$2" --max-new-tokens "$3" 2>&1) || true
  if [ "$want" = "$got" ]; then echo "ok   $1"; else echo "FAIL $1: want $want got $got"; failures=$((failures + 1)); fi
}
check found-through-dns 0,17,5,99,254 12
total=$((total + 1))
if [ "$(steps_on_d2)" = 0 ]; then echo "ok   unlisted-worker-unused"; else
  echo "FAIL unlisted-worker-unused: $(steps_on_d2) steps on 127.0.0.3"; failures=$((failures + 1)); fi

# A long stream on the first decode worker; meanwhile DNS swaps it for the second.
long=0,42,7,300,11,8
want_long=$("$BIN/yoco" generate --model "$MODEL" --tokens "$long" --max-new-tokens 4000)
cli --tokens "$long" --max-new-tokens 4000 > "$log/long.out" 2> "$log/long.err" &
long_pid=$!
step "long-stream-starts (at ${SECONDS} s)"
for i in $(seq 1 500); do [ -s "$log/long.out" ] && break; sleep 0.01; done
# A fast machine finishes the stream in well under a second: the worker serving it is paused
# (SIGSTOP) while DNS changes and other requests run, so it is certainly mid-stream, and
# resumed before the stream is checked. (The router's --min-stall-ms keeps the pause from
# counting as a stalled worker, whose streams would move: tests/cluster/stall_test.cc.)
kill -STOP "$d1"
records 127.0.0.3
reload_dns
sleep 1  # a few discovery rounds
# Traffic during and after the change: every request succeeds, on the new worker.
for i in 1 2 3 4; do check "request-$i-after-the-change" "0,$((10 + i)),5,9" 10; done
total=$((total + 1))
if [ "$(steps_on_d2)" -gt 0 ]; then echo "ok   added-worker-used"; else
  echo "FAIL added-worker-used: no steps on 127.0.0.3"; failures=$((failures + 1)); fi
total=$((total + 1))
if [ "$(tr -cd , < "$log/long.out" | wc -c)" -lt 3999 ]; then echo "ok   long-stream-still-running-after-the-change"; else
  echo "FAIL long-stream-still-running-after-the-change: it ended too soon to test draining"
  failures=$((failures + 1)); fi
kill -CONT "$d1"
step "long-stream-ends (at ${SECONDS} s)"
total=$((total + 1))
wait "$long_pid" || true
if [ "$(cat "$log/long.out")" = "$want_long" ]; then echo "ok   removed-worker-finishes-its-stream"; else
  echo "FAIL removed-worker-finishes-its-stream: $(cat "$log/long.err") got $(tr -cd , < "$log/long.out" | wc -c) commas; first difference at $(python3 -c "import sys; a=sys.argv[1].split(','); b=sys.argv[2].split(','); print(next((i for i,(x,y) in enumerate(zip(a,b)) if x!=y), min(len(a),len(b))))" "$(cat "$log/long.out")" "$want_long")"; failures=$((failures + 1)); fi
# The removed worker is still up, but gets nothing new.
before=$(steps_on "$METRICS1")
check request-after-the-stream 0,77,3 10
total=$((total + 1))
after=$(steps_on "$METRICS1")
if [ -n "$before" ] && [ "$before" = "$after" ]; then echo "ok   nothing-new-on-the-removed-worker"; else
  echo "FAIL nothing-new-on-the-removed-worker: steps $before -> $after"; failures=$((failures + 1)); fi

# Readiness under a full decode worker: its state memory holds one long sequence.
step "readiness (at ${SECONDS} s)"
readiness() {
  timeout 3 "$BIN/yoco-cli" "${CLIENT[@]}" --router "127.0.0.3:$DECODE_PORT" health \
    --service yoco.v1.DecodeWorker 2> /dev/null || true
}
total=$((total + 1))
before=$(readiness)
want_full=$("$BIN/yoco" generate --model "$MODEL" --tokens "$long" --max-new-tokens 1500)
cli --tokens "$long" --max-new-tokens 1500 > "$log/full.out" 2>&1 &
full_pid=$!
during=$before
for i in $(seq 1 50); do during=$(readiness); [ "$during" = NOT_SERVING ] && break; sleep 0.05; done
wait "$full_pid" || true
after=$before
for i in $(seq 1 50); do after=$(readiness); [ "$after" = SERVING ] && break; sleep 0.05; done
if [ "$before" = SERVING ] && [ "$during" = NOT_SERVING ] && [ "$after" = SERVING ] &&
   [ "$(cat "$log/full.out")" = "$want_full" ]; then
  echo "ok   readiness-flips-while-full"
else
  echo "FAIL readiness-flips-while-full: $before / $during / $after"; failures=$((failures + 1))
fi

echo "$((total - failures))/$total checks passed in ${SECONDS} s"
[ "$failures" = 0 ]
