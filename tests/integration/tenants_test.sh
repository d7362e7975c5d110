#!/usr/bin/env bash
# Tenants end to end (router --tenants, mutual TLS): a caller is a tenant by bearer token or by
# client certificate; no or unknown credentials are UNAUTHENTICATED. Tenant A's pre-cached
# document is a hit for A only: B asking the same prompt misses (and gets the same tokens), sees
# none of A's snapshots, cannot evict A's handle (NOT_FOUND) and cannot pick a salt; a tenant's
# certificate cannot call the workers at all. The tenant
# file is reloaded without a restart; per-tenant counters appear in /metrics.
#   tenants_test.sh BIN_DIR MODEL_DIR
set -euo pipefail
BIN=$1
MODEL=$2
export UCX_WARN_UNUSED_ENV_VARS=n
base=$((30000 + (RANDOM % 200) * 10))  # 30000-31999: below the ephemeral ports, apart from the other tests
ROUTER=127.0.0.1:$base PREFILL=127.0.0.1:$((base + 1)) DECODE=127.0.0.1:$((base + 2))
METRICS=127.0.0.1:$((base + 3))
log=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2> /dev/null || true; done; rm -rf "$log"; }
trap cleanup EXIT
failures=0
total=0

source "$(dirname "$0")/test_certs.sh"
make_ca ca
make_cert server ca 2 100
make_cert router ca 2 150                        # the router's: the only one the workers answer
make_cert stranger ca 2 200                      # a valid certificate no tenant owns
make_cert team-c-client ca 2 300 DNS:team-c.clients  # tenant C by its certificate
printf 'token-of-team-a-8f2b61d0c4\n' > "$log/a.token"
printf 'token-of-team-b-3e9d07aa51\n' > "$log/b.token"
printf 'token-of-team-d-77c1e0b2f9\n' > "$log/d.token"
printf 'token-of-nobody-000000000\n' > "$log/unknown.token"
cat > "$log/tenants.json" << 'JSON'
{"tenants": {
  "team-a": {"tokens": ["token-of-team-a-8f2b61d0c4"]},
  "team-b": {"tokens": ["token-of-team-b-3e9d07aa51"]},
  "team-c": {"client_identities": ["team-c.clients"]}}}
JSON

TLS=(--tls-cert "$log/server.pem" --tls-key "$log/server.key" --tls-ca "$log/ca.pem"
     --allowed-callers router)
"$BIN/yoco-decode" --listen "$DECODE" --model "$MODEL" --tls tcp --net-devices lo --threads 1 \
  "${TLS[@]}" 2> "$log/d" &
pids+=($!)
"$BIN/yoco-prefill" --listen "$PREFILL" --model "$MODEL" --tls tcp --net-devices lo --threads 1 \
  "${TLS[@]}" 2> "$log/p" &
pids+=($!)
"$BIN/yoco-router" --listen "$ROUTER" --model "$MODEL" --prefill "$PREFILL" --decode "$DECODE" \
  --probe-interval-ms 200 --metrics-listen "$METRICS" --tenants "$log/tenants.json" \
  --tenants-reload-seconds 1 --tls-cert "$log/router.pem" --tls-key "$log/router.key" \
  --tls-ca "$log/ca.pem" 2> "$log/r" &
pids+=($!)

as() {  # as WHO yoco-cli-command... (WHO: a, b, d, unknown: that token; c: C's certificate;
        # nobody: a certificate without a token)
  local who=$1
  shift
  local cert=stranger
  local token=()
  case $who in
    c) cert=team-c-client ;;
    nobody) ;;
    *) token=(--token-file "$log/$who.token") ;;
  esac
  timeout 60 "$BIN/yoco-cli" --router "$ROUTER" --tls-ca "$log/ca.pem" --tls-cert "$log/$cert.pem" \
    --tls-key "$log/$cert.key" "${token[@]}" "$@"
}
for i in $(seq 1 100); do
  as a generate --tokens 0,5 --max-new-tokens 1 > /dev/null 2>&1 && break
  sleep 0.2
  if [ "$i" = 100 ]; then echo "services did not come up"; cat "$log"/{d,p,r}; exit 1; fi
done

result() {  # name, condition (0/1), detail
  total=$((total + 1))
  if [ "$2" = 0 ]; then echo "ok   $1"; else echo "FAIL $1: $3"; failures=$((failures + 1)); fi
}
refused_with() {  # code, command output -> 0 when it holds yoco-cli's error of that code
  grep -q "^yoco-cli: $1: " <<< "$2"
}
json() { python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }
prompt() { python3 -c "import random; r=random.Random($1); print(','.join(['0']+[str(r.randrange(4,512)) for _ in range($2-1)]))"; }
doc=$(prompt 20 400)
question=$(prompt 21 30 | cut -d, -f2-)
want=$("$BIN/yoco" generate --model "$MODEL" --tokens "$doc,$question" --max-new-tokens 12)

out=$(as nobody generate --tokens 0,5 --max-new-tokens 2 2>&1) && st=0 || st=$?
refused_with 16 "$out" && c=0 || c=1
result no-credentials-unauthenticated "$c" "$out"
out=$(as unknown generate --tokens 0,5 --max-new-tokens 2 2>&1) && st=0 || st=$?
refused_with 16 "$out" && c=0 || c=1
result unknown-token-unauthenticated "$c" "$out"

pre=$(as a precache --tokens "$doc" --pin)
handle=$(json "$pre" handle)
got=$(as a generate --tokens "$doc,$question" --max-new-tokens 12 --stats 2> "$log/stats")
cached=$(json "$(cat "$log/stats")" cached_prompt_tokens)
[ "$got" = "$want" ] && [ "$cached" = 384 ] && c=0 || c=1
result tenant-a-hits-its-document "$c" "got $got want $want cached $cached"

got=$(as b generate --tokens "$doc,$question" --max-new-tokens 12 --stats 2> "$log/stats")
cached=$(json "$(cat "$log/stats")" cached_prompt_tokens)
[ "$got" = "$want" ] && [ "$cached" = 0 ] && c=0 || c=1
result tenant-b-misses-a-document-and-gets-the-same-tokens "$c" "got $got want $want cached $cached"

out=$(as b generate --tokens "$doc,$question" --max-new-tokens 2 --cache-salt "" 2>&1) || true
out=$(as b generate --tokens "$doc,$question" --max-new-tokens 2 --cache-salt team-a 2>&1) && st=0 || st=$?
refused_with 3 "$out" && c=0 || c=1
result tenant-cannot-choose-a-salt "$c" "$out"

b_list=$(as b list-cache)
a_list=$(as a list-cache)
case $b_list in *"$handle"*) c=1 ;; *) c=0 ;; esac
case $a_list in *"\"handle\": \"$handle\""*) ;; *) c=1 ;; esac
result list-shows-only-the-callers-snapshots "$c" "a: $a_list b: $b_list"

out=$(as b evict-cache --handle "$handle" 2>&1) && st=0 || st=$?
refused_with 5 "$out" && c=0 || c=1
case $(as a list-cache) in *"$handle"*) ;; *) c=1 ;; esac
result foreign-handle-not-found-and-kept "$c" "$out"

evicted=$(json "$(as b evict-cache --all)" evicted)
case $(as a list-cache) in *"$handle"*) c=0 ;; *) c=1 ;; esac
[ "$evicted" -ge 1 ] || c=1
result evict-all-touches-only-the-callers "$c" "b evicted $evicted; a: $(as a list-cache)"

# The workers' API is the router's alone: a tenant's certificate (B's, C's), which the router
# takes, is PERMISSION_DENIED at every method of both workers (B can neither list nor evict A's
# pinned document there), and A's document is still cached.
for cert in stranger team-c-client; do
  out=$("$BIN/forged_call" outsider "$PREFILL" "$DECODE" "$log/ca.pem" "$log/$cert.pem" \
    "$log/$cert.key" 2>&1) && c=0 || c=1
  result "workers-refuse-tenant-certificate-$cert" "$c" "$out"
done
case $(as a list-cache) in *"$handle"*) c=0 ;; *) c=1 ;; esac
result pinned-document-survives-tenant-calls-at-workers "$c" "a: $(as a list-cache)"

got=$(as c generate --tokens "$doc,$question" --max-new-tokens 12 --stats 2> "$log/stats") && st=0 || st=$?
cached=$(json "$(cat "$log/stats")" cached_prompt_tokens 2> /dev/null || echo none)
[ "$got" = "$want" ] && [ "$cached" = 0 ] && c=0 || c=1
result client-certificate-names-tenant-c "$c" "got $got cached $cached"

# Reload: team B's token is revoked and team D's added, without a restart.
cat > "$log/tenants.json.new" << 'JSON'
{"tenants": {
  "team-a": {"tokens": ["token-of-team-a-8f2b61d0c4"]},
  "team-c": {"client_identities": ["team-c.clients"]},
  "team-d": {"tokens": ["token-of-team-d-77c1e0b2f9"]}}}
JSON
mv "$log/tenants.json.new" "$log/tenants.json"
sleep 1.5
out_d=$(as d generate --tokens 0,5 --max-new-tokens 2 2>&1) && st_d=0 || st_d=$?
out_b=$(as b generate --tokens 0,5 --max-new-tokens 2 2>&1) && st_b=0 || st_b=$?
[ "$st_d" = 0 ] && refused_with 16 "$out_b" && c=0 || c=1
result tenant-file-reloaded "$c" "d: $out_d b: $out_b"
echo 'not json' > "$log/tenants.json"
sleep 1.5
as a generate --tokens 0,5 --max-new-tokens 2 > /dev/null 2>&1 && c=0 || c=1
grep -q "keeping the last good tenant set" "$log/r" || c=1
result broken-tenant-file-keeps-the-last-good-set "$c" "$(tail -3 "$log/r")"

metrics=$(curl -s "http://$METRICS/metrics")
c=0
for line in 'yoco_router_tenant_requests_total{tenant="team-a"}' \
            'yoco_router_tenant_generated_tokens_total{tenant="team-b"}' \
            'yoco_router_tenant_prompt_tokens_total{tenant="team-c"} 429' \
            'yoco_router_unauthenticated_total'; do
  grep -qF "$line" <<< "$metrics" || c=1
done
result per-tenant-metrics "$c" "$(grep -E 'tenant|unauth' <<< "$metrics" | grep -v '^#')"

echo "$((total - failures))/$total passed"
[ "$failures" = 0 ]
