#!/usr/bin/env bash
# The router's OpenAI-compatible HTTP API on loopback, with real clients: the official OpenAI SDK
# (node; its answers equal the gRPC API's for the same seed, stream or not, and show a pre-cached
# document's tokens), curl for Server-Sent Events framing byte for byte, a client that hangs up
# mid-stream (its sequence leaves the decode worker), every kind of malformed request (a 4xx
# naming the field, the acceptor keeps serving), a slow-loris client, HTTPS (also with client
# certificates) and tenants' bearer tokens. Run by OpenAiHttpTest (openai_http_test.cc), which
# starts the services and says where they are in the environment:
#   BIN, SDK (a folder with node_modules/openai), LOG (a folder for this script; the certificates
#   ca.pem, client.pem/key are there), MODEL_NAME, ROUTER (gRPC), HTTP, METRICS_ROUTER,
#   METRICS_DECODE, ROUTER_LOG (its log), HTTP2 (HTTPS, tenants: TOKEN is one's bearer token),
#   HTTP3 (HTTPS, client certificates).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
log=$LOG

failures=0
pass() { echo "ok   $1"; }
fail() { echo "FAIL $1: $2"; failures=$((failures + 1)); }
post() { curl -s -w '\n%{http_code}' "http://$HTTP$1" -H 'Content-Type: application/json' --data-binary "$2"; }

# The same requests through the gRPC API, for the SDK to compare with.
prompt="The quick brown fox"
"$BIN/yoco-cli" --router "$ROUTER" generate --prompt "$prompt" --temperature 0.8 --top-p 0.95 \
  --seed 7 --max-new-tokens 24 --stop-at-eos > "$log/want_sampled.txt"
python3 -c "import random; r=random.Random(5); print(''.join(r.choice('abcdefghij ') for _ in range(700)), end='')" > "$log/doc.txt"
precache=$(post /v1/cache/precache "{\"text\": \"$(cat "$log/doc.txt")\", \"pin\": true}")
if [ "$(tail -n1 <<< "$precache")" = 200 ]; then pass precache; else fail precache "$precache"; fi
head -n1 <<< "$precache" | python3 -c 'import json,sys; print(json.load(sys.stdin)["cached_tokens"], end="")' \
  > "$log/doc_cached_tokens.txt"

# --- The OpenAI SDK ---
cp "$HERE/openai_sdk_check.mjs" "$SDK/"
if node "$SDK/openai_sdk_check.mjs" "http://$HTTP/v1" "$MODEL_NAME" "$log" > "$log/sdk" 2>&1; then
  cat "$log/sdk"
else
  cat "$log/sdk"; fail sdk "see above"
fi

# --- Server-Sent Events, byte for byte, and equal to the whole response ---
body='{"prompt": "Once upon", "max_tokens": 20, "seed": 3, "temperature": 0.7, "stream": true, "stream_options": {"include_usage": true}}'
curl -sN "http://$HTTP/v1/completions" --data-binary "$body" > "$log/sse"
if sse=$(python3 "$HERE/sse_check.py" "$log/sse" completion usage 2>&1); then pass sse-framing; else fail sse-framing "$sse"; fi
whole=$(curl -s "http://$HTTP/v1/completions" --data-binary "${body/\"stream\": true, \"stream_options\": {\"include_usage\": true\}/\"stream\": false}")
same=$(python3 -c 'import json,sys; s=json.loads(sys.argv[1]); w=json.loads(sys.argv[2]); print(s["text"]==w["choices"][0]["text"] and s["usage"]==w["usage"] and s["finish_reason"]==w["choices"][0]["finish_reason"])' "$sse" "$whole" 2>&1 || true)
if [ "$same" = True ]; then pass sse-equals-whole; else fail sse-equals-whole "$sse / $whole"; fi
curl -sN "http://$HTTP/v1/chat/completions" --data-binary '{"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 12, "seed": 1, "stream": true}' > "$log/chat_sse"
if out=$(python3 "$HERE/sse_check.py" "$log/chat_sse" chat 2>&1); then pass chat-sse-framing; else fail chat-sse-framing "$out"; fi
# Stop strings end the text before them, as OpenAI's do (the character picked is one the
# unstopped answer contains after its first few characters).
full=$(curl -s "http://$HTTP/v1/completions" --data-binary '{"prompt": "abc", "max_tokens": 40, "seed": 11, "temperature": 0}' |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["choices"][0]["text"])')
stop=$(python3 -c 'import sys; t=sys.argv[1]; print(next((c for c in t[3:] if c.isascii() and c.isalnum()), ""))' "$full")
if [ -n "$stop" ]; then
  cut=$(curl -s "http://$HTTP/v1/completions" --data-binary "{\"prompt\": \"abc\", \"max_tokens\": 40, \"seed\": 11, \"temperature\": 0, \"stop\": \"$stop\"}" |
    python3 -c 'import json,sys; c=json.load(sys.stdin)["choices"][0]; print(c["finish_reason"], c["text"])')
  want="stop ${full%%"$stop"*}"
  if [ "$cut" = "$want" ]; then pass stop-string-cut; else fail stop-string-cut "got [$cut] want [$want]"; fi
fi

# --- A client that hangs up mid-stream cancels its request on every worker ---
active() { curl -s "http://$METRICS_DECODE/metrics" | awk '/^yoco_decode_active_sequences /{print $2}'; }
curl -sN "http://$HTTP/v1/completions" --data-binary '{"prompt": "x", "max_tokens": 4000, "ignore_eos": true, "stream": true}' > /dev/null &
curl_pid=$!
for i in $(seq 1 100); do [ "$(active)" = 1 ] && break; sleep 0.05; done
if [ "$(active)" = 1 ]; then
  kill "$curl_pid"; wait "$curl_pid" 2> /dev/null || true
  for i in $(seq 1 50); do [ "$(active)" = 0 ] && break; sleep 0.1; done
  cancelled=$(curl -s "http://$METRICS_ROUTER/metrics" | awk -F' ' '/^yoco_router_requests_total\{outcome="cancelled"\}/{print $2}')
  if [ "$(active)" = 0 ] && [ "${cancelled:-0}" -ge 1 ]; then pass disconnect-cancels; else
    fail disconnect-cancels "active $(active), cancelled ${cancelled:-none}"; fi
else
  fail disconnect-cancels "the stream never became active"
fi

# --- Malformed requests: a 4xx naming the problem ---
expect() {  # name, status, param ("-": none), METHOD PATH [BODY]
  local name=$1 status=$2 param=$3 method=$4 path=$5 body=${6:-}
  local out code
  out=$(curl -s -X "$method" -w '\n%{http_code}' "http://$HTTP$path" ${body:+--data-binary "$body"})
  code=$(tail -n1 <<< "$out")
  got_param=$(head -n -1 <<< "$out" | python3 -c 'import json,sys; e=json.load(sys.stdin)["error"]; assert e["message"] and e["type"]; print(e["param"] or "-")' 2>&1 || echo "no error body")
  if [ "$code" = "$status" ] && [ "$got_param" = "$param" ]; then pass "$name"; else fail "$name" "$code $got_param: $out"; fi
}
expect bad-json 400 - POST /v1/completions '{"prompt": "x",'
expect not-an-object 400 - POST /v1/completions '[1, 2]'
expect invalid-utf8 400 - POST /v1/completions "$(printf '{"prompt": "\xff\xfe"}')"
expect deep-json 400 - POST /v1/completions "{\"prompt\": \"x\", \"stop\": $(printf '[%.0s' $(seq 1 50))$(printf ']%.0s' $(seq 1 50))}"
expect wrong-type 400 max_tokens POST /v1/completions '{"prompt": "x", "max_tokens": "10"}'
expect negative 400 max_tokens POST /v1/completions '{"prompt": "x", "max_tokens": -3}'
expect negative-seed 400 seed POST /v1/completions '{"prompt": "x", "seed": -1}'
expect unknown-field 400 frobnicate POST /v1/completions '{"prompt": "x", "frobnicate": 1}'
expect n-17 400 n POST /v1/completions '{"prompt": "x", "n": 17}'
expect echo-generating 400 echo POST /v1/completions '{"prompt": "x", "echo": true, "max_tokens": 4}'
expect logprobs-21 400 logprobs POST /v1/completions '{"prompt": "x", "logprobs": 21}'
expect token-outside-vocabulary 400 prompt POST /v1/completions '{"prompt": [0, 99999]}'
expect too-long 400 max_tokens POST /v1/completions "{\"prompt\": \"x\", \"max_tokens\": 1000000}"
expect past-max-seq-len 400 max_tokens POST /v1/completions "{\"prompt\": [0, 5, 6], \"max_tokens\": 4094}"
expect too-many-stops 400 stop POST /v1/completions "{\"prompt\": \"x\", \"stop\": [$(seq -s, 1 17 | sed 's/[0-9]*/"&"/g')]}"
expect chat-no-messages 400 messages POST /v1/chat/completions '{"messages": []}'
expect chat-bad-role 400 'messages[0].role' POST /v1/chat/completions '{"messages": [{"role": "robot", "content": "x"}]}'
expect unknown-model 404 - POST /v1/completions '{"model": "gpt-9", "prompt": "x"}'
expect unknown-path 404 - GET /v2/whatever
expect wrong-method 405 - GET /v1/completions
out=$(curl -s -X DELETE "http://$HTTP/v1/cache/00000000000000000000000000000000")
if [ "$out" = '{"evicted":0}' ]; then pass evict-unknown; else fail evict-unknown "$out"; fi
expect evict-all-unasked 400 all DELETE /v1/cache
code=$(printf '{"prompt": "x"}' | gzip | curl -s -o "$log/gzip" -w '%{http_code}' -H 'Content-Encoding: gzip' "http://$HTTP/v1/completions" --data-binary @-)
if [ "$code" = 415 ] && grep -q "uncompressed" "$log/gzip"; then pass gzip-body-415; else fail gzip-body-415 "$code $(cat "$log/gzip")"; fi
code=$(curl -s -o /dev/null -w '%{http_code}' -H 'X-Request-Timeout: soon' "http://$HTTP/v1/completions" --data-binary '{"prompt": "x"}')
if [ "$code" = 400 ]; then pass bad-timeout-header; else fail bad-timeout-header "$code"; fi
code=$(curl -s -o "$log/deadline" -w '%{http_code}' -H 'X-Request-Timeout: 0.05' "http://$HTTP/v1/completions" --data-binary '{"prompt": "x", "max_tokens": 4000, "ignore_eos": true}')
if [ "$code" = 504 ]; then pass deadline; else fail deadline "$code $(cat "$log/deadline")"; fi
# The request id: the client's echoed, one made when it sent none, and the router's access log
# names it; an id that is not printable ASCII is refused by name.
headers=$(curl -s -D - -o /dev/null -H 'X-Request-Id: rag-doc-7-q-3' "http://$HTTP/v1/completions" --data-binary '{"prompt": "x", "max_tokens": 2}')
if grep -qi "^x-request-id: rag-doc-7-q-3" <<< "$headers" && grep -q "request finished request_id=rag-doc-7-q-3 outcome=ok" "$ROUTER_LOG"; then
  pass request-id-echoed-and-logged; else fail request-id-echoed-and-logged "$headers"; fi
headers=$(curl -s -D - -o /dev/null "http://$HTTP/v1/completions" --data-binary '{"prompt": "x", "max_tokens": 2}')
if grep -qiE "^x-request-id: cmpl-" <<< "$headers"; then pass request-id-made; else fail request-id-made "$headers"; fi
code=$(curl -s -o "$log/badid" -w '%{http_code}' -H $'X-Request-Id: caf\xc3\xa9' "http://$HTTP/v1/completions" --data-binary '{"prompt": "x", "max_tokens": 2}')
if [ "$code" = 400 ] && grep -q "request id may hold only printable ASCII" "$log/badid"; then pass bad-request-id; else fail bad-request-id "$code $(cat "$log/badid")"; fi
head -c 1200000 /dev/zero | tr '\0' 'a' > "$log/big"
code=$(curl -s -o /dev/null -w '%{http_code}' "http://$HTTP/v1/completions" --data-binary @"$log/big")
if [ "$code" = 413 ]; then pass body-too-large; else fail body-too-large "$code"; fi
# A slow-loris client (headers that never end) is dropped after --http-read-timeout-seconds.
slow=$(python3 - "${HTTP#*:}" << 'PY'
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")
start = time.time()
s.settimeout(10)
try:
    data = s.recv(100)
except socket.timeout:
    data = b"still open"
print("closed" if data == b"" and time.time() - start < 5 else "not closed: %r" % data)
PY
)
if [ "$slow" = closed ]; then pass slow-loris-dropped; else fail slow-loris-dropped "$slow"; fi
# After all that the front still serves, and its responses are counted.
if [ "$(curl -s "http://$HTTP/health")" = "{}" ]; then pass still-serving; else fail still-serving "no"; fi
# (Read whole first: `grep -q` quitting early would make curl fail the pipeline under pipefail.)
router_metrics=$(curl -s "http://$METRICS_ROUTER/metrics")
if grep -q '^yoco_router_http_responses_total{status="400"}' <<< "$router_metrics"; then
  pass http-metrics; else fail http-metrics "no yoco_router_http_responses_total"; fi
if grep -qiE "assert|sanitizer|segmentation|terminate called" "$ROUTER_LOG"; then fail router-log "$(cat "$ROUTER_LOG")"; fi

# --- HTTPS and tenants: the Authorization header is the bearer token, as on gRPC ---
https=(curl -s --cacert "$log/ca.pem")
req='{"prompt": "x", "max_tokens": 2}'
c1=$("${https[@]}" -o /dev/null -w '%{http_code}' "https://$HTTP2/v1/completions" --data-binary "$req")
c2=$("${https[@]}" -o /dev/null -w '%{http_code}' -H "Authorization: Bearer wrong-token-0123456789" "https://$HTTP2/v1/completions" --data-binary "$req")
c3=$("${https[@]}" -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $TOKEN" "https://$HTTP2/v1/completions" --data-binary "$req")
c4=$("${https[@]}" -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $TOKEN" "https://$HTTP2/v1/completions" --data-binary '{"prompt": "x", "max_tokens": 2, "cache_salt": "other"}')
c5=$("${https[@]}" -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $TOKEN" "https://$HTTP2/v1/cache")
if [ "$c1 $c2 $c3 $c4 $c5" = "401 401 200 400 200" ]; then pass https-tenants; else fail https-tenants "$c1 $c2 $c3 $c4 $c5"; fi
if curl -s -o /dev/null "http://$HTTP2/health"; then fail https-only "plain HTTP answered"; else pass https-only; fi
# Mutual TLS on HTTP: a client without a certificate of the CA does not get in.
mtls=("${https[@]}" --cert "$log/client.pem" --key "$log/client.key")
if "${https[@]}" -o /dev/null "https://$HTTP3/health"; then fail https-client-cert "a client without a certificate got in"
elif [ "$("${mtls[@]}" "https://$HTTP3/health")" = "{}" ]; then pass https-client-cert
else fail https-client-cert "the client with a certificate was refused"; fi

echo "$failures failures"
[ "$failures" = 0 ]
