#!/usr/bin/env bash
# End to end on loopback: router + two prefill + two decode workers as real processes, every
# gRPC connection mutual TLS, the cluster keys on every worker. Greedy
# and sampled tokens through the router equal `yoco generate` in-process, also for prompts
# longer than one retention chunk and for 32 concurrent streams; killing the decode worker
# mid-stream loses no token; killing a prefill worker fails nothing; bad input is refused with
# INVALID_ARGUMENT (or RESOURCE_EXHAUSTED) and the services keep serving. Prefix cache: a
# pre-cached document's hits give the tokens of a miss, eviction and a router restart included.
# Requests that end on their first token leave no bundle behind. A poisoned snapshot file and
# forged internal calls are refused.
#   serving_test.sh BIN_DIR MODEL_DIR
set -euo pipefail
BIN=$1
MODEL=$2
export UCX_WARN_UNUSED_ENV_VARS=n
base=$((20000 + (RANDOM % 200) * 10))  # 20000-21999: below the ephemeral ports, apart from the other tests
METRICS_ROUTER=127.0.0.1:$((base + 5)) METRICS_DECODE=127.0.0.1:$((base + 6)) METRICS_PREFILL=127.0.0.1:$((base + 7))
ROUTER=127.0.0.1:$base PREFILL=127.0.0.1:$((base + 1)) DECODE1=127.0.0.1:$((base + 2)) DECODE2=127.0.0.1:$((base + 3))
PREFILL2=127.0.0.1:$((base + 4))
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2> /dev/null || true; done; rm -rf "${log:-}"; }
trap cleanup EXIT
log=$(mktemp -d)
# The cluster's secrets, as a deployment mounts them: workers connect only to transport addresses
# sealed with the transport key, and prefill workers use only snapshots tagged with the cache key.
printf 'integration-transport-key\n' > "$log/transport.key"
printf 'integration-cache-key\n' > "$log/cache.key"
# Every gRPC connection is mutual TLS, as in a cluster (certificates made here with openssl).
source "$(dirname "$0")/test_certs.sh"
make_ca ca
make_cert server ca 2 100
make_cert client ca 2 200
MTLS=(--tls-cert "$log/server.pem" --tls-key "$log/server.key" --tls-ca "$log/ca.pem")
CLIENT_TLS=(--tls-ca "$log/ca.pem" --tls-cert "$log/client.pem" --tls-key "$log/client.key")
WORKER_FLAGS=(--model "$MODEL" --tls tcp --net-devices lo --threads 1 --transport-key-file "$log/transport.key"
              "${MTLS[@]}" --allowed-callers server)
PREFILL_FLAGS=("${WORKER_FLAGS[@]}" --cache-key-file "$log/cache.key")
"$BIN/yoco-decode" --listen "$DECODE1" "${WORKER_FLAGS[@]}" --metrics-listen "$METRICS_DECODE" 2> "$log/d1" &
d1=$!; pids+=("$d1")
"$BIN/yoco-decode" --listen "$DECODE2" "${WORKER_FLAGS[@]}" 2> "$log/d2" &
d2=$!; pids+=("$d2")
start_prefill1() {
  "$BIN/yoco-prefill" --listen "$PREFILL" "${PREFILL_FLAGS[@]}" --metrics-listen "$METRICS_PREFILL" \
    --cache-dir "$log/cache1" 2>> "$log/p" &
  p1=$!; pids+=("$p1")
}
start_prefill1
"$BIN/yoco-prefill" --listen "$PREFILL2" "${PREFILL_FLAGS[@]}" 2> "$log/p2" &
pids+=($!)
start_router() {
  "$BIN/yoco-router" --listen "$ROUTER" --model "$MODEL" --prefill "$PREFILL,$PREFILL2" \
    --decode "$DECODE1,$DECODE2" --metrics-listen "$METRICS_ROUTER" --probe-interval-ms 200 \
    "${MTLS[@]}" 2>> "$log/r" &
  router_pid=$!; pids+=("$router_pid")
}
start_router

cli() { timeout 60 "$BIN/yoco-cli" "${CLIENT_TLS[@]}" --router "$ROUTER" generate "$@"; }
for i in $(seq 1 100); do
  if cli --tokens 0,5 --max-new-tokens 1 > /dev/null 2>&1; then break; fi
  sleep 0.2
  if [ "$i" = 100 ]; then echo "services did not come up"; cat "$log"/*; exit 1; fi
done

prompt() { python3 -c "import random; r=random.Random($1); print(','.join(['0']+[str(r.randrange(4,512)) for _ in range($2-1)]))"; }
failures=0
total=0
check() {  # name, prompt, extra flags...
  local name=$1 p=$2; shift 2
  local want got
  total=$((total + 1))
  want=$("$BIN/yoco" generate --model "$MODEL" --tokens "$p" "$@")
  got=$(cli --tokens "$p" "$@")
  if [ "$want" = "$got" ]; then echo "ok   $name"; else echo "FAIL $name: want $want got $got"; failures=$((failures + 1)); fi
}
check greedy-short "$(prompt 1 12)" --max-new-tokens 20
check greedy-long "$(prompt 2 300)" --max-new-tokens 20
check greedy-one-token-prompt "0" --max-new-tokens 8
check sampled "$(prompt 3 100)" --max-new-tokens 30 --temperature 0.8 --top-k 50 --seed 7
check sampled-top-p "$(prompt 4 40)" --max-new-tokens 30 --temperature 1.2 --top-p 0.9 --seed 9

# Questions on one document: the router sends them to the decode worker it sent the document
# to, which keeps the document's K/V (ResidentKv), so every question after the first ships only
# its own rows and the self-decoder states (with this tiny model those are 260 KB of a 1 MB
# bundle); the tokens stay the in-process engine's.
doc=$(prompt 50 700)
resident_ok=1
resident_bytes=()
for q in 1 2 3; do
  p="$doc,$(prompt $((60 + q)) 20 | cut -d, -f2-)"
  want=$("$BIN/yoco" generate --model "$MODEL" --tokens "$p" --max-new-tokens 6)
  got=$(cli --tokens "$p" --max-new-tokens 6 --stats 2> "$log/resident$q.stats")
  [ "$want" = "$got" ] || resident_ok=0
  resident_bytes+=("$(python3 -c "import json, sys; print(json.load(open(sys.argv[1]))['transfer_bytes'])" \
    "$log/resident$q.stats")")
done
total=$((total + 1))
if [ "$resident_ok" = 1 ] && [ $((2 * resident_bytes[1])) -lt "${resident_bytes[0]}" ] &&
   [ $((2 * resident_bytes[2])) -lt "${resident_bytes[0]}" ]; then
  echo "ok   resident-document (bundles ${resident_bytes[*]} bytes)"; else
  echo "FAIL resident-document: tokens ok=$resident_ok, bundles ${resident_bytes[*]} bytes"
  failures=$((failures + 1)); fi

# 32 concurrent streams of mixed lengths, each checked against the in-process engine.
for i in $(seq 1 32); do
  p=$(prompt $((100 + i)) $((5 + 13 * i)))
  echo "$p" > "$log/c$i.prompt"
  "$BIN/yoco" generate --model "$MODEL" --tokens "$p" --max-new-tokens $((4 + i)) --temperature 0.7 --seed "$i" \
    > "$log/c$i.want"
done
cpids=()
for i in $(seq 1 32); do
  cli --tokens "$(cat "$log/c$i.prompt")" --max-new-tokens $((4 + i)) --temperature 0.7 --seed "$i" > "$log/c$i.got" &
  cpids+=($!)
done
for p in "${cpids[@]}"; do wait "$p" || true; done
concurrent_ok=0
for i in $(seq 1 32); do cmp -s "$log/c$i.want" "$log/c$i.got" && concurrent_ok=$((concurrent_ok + 1)); done
total=$((total + 1))
if [ "$concurrent_ok" = 32 ]; then echo "ok   32-concurrent-streams"; else
  echo "FAIL 32-concurrent-streams: $concurrent_ok of 32 correct"; failures=$((failures + 1)); fi

# Prometheus metrics: the counters saw the traffic above.
# curl, not a Python interpreter: the waits below poll it, and an interpreter's start-up (0.1-0.4
# s) would let a fast machine finish the work being watched between two polls.
metric() {  # address, metric line prefix -> value summed over its lines (0 when absent)
  curl -s --max-time 5 "http://$1/metrics" |
    awk -v p="$2" 'index($0, p) == 1 {s += $NF} END {printf "%d\n", s}'
}
total=$((total + 1))
ok=$(metric "$METRICS_ROUTER" 'yoco_router_requests_total{outcome="ok"}')
ttft=$(metric "$METRICS_ROUTER" 'yoco_router_time_to_first_token_seconds_count')
steps=$(metric "$METRICS_DECODE" 'yoco_decode_steps_total')
received=$(metric "$METRICS_DECODE" 'yoco_decode_transfers_received_total')
sent=$(metric "$METRICS_PREFILL" 'yoco_prefill_transfers_sent_total')
# Both workers say where they run the model (here: the CPU, the default --backend).
cpu_decode=$(metric "$METRICS_DECODE" 'yoco_worker_backend_info{backend="cpu"')
cpu_prefill=$(metric "$METRICS_PREFILL" 'yoco_worker_backend_info{backend="cpu"')
if [ "$ok" -ge 37 ] && [ "$ttft" -ge 37 ] && [ "$steps" -gt 0 ] && [ "$received" -gt 0 ] && [ "$sent" -gt 0 ] &&
   [ "$cpu_decode" = 1 ] && [ "$cpu_prefill" = 1 ]; then
  echo "ok   metrics"
else
  echo "FAIL metrics: ok=$ok ttft=$ttft steps=$steps received=$received sent=$sent" \
    "backend_info decode=$cpu_decode prefill=$cpu_prefill"
  failures=$((failures + 1))
fi

# Requests that end on their first token ship no state bundle: nothing is left waiting on a
# decode worker (these used to pile up outside its budget until another bundle arrived).
sent_before=$(metric "$METRICS_PREFILL" yoco_prefill_transfers_sent_total)
received_before=$(metric "$METRICS_DECODE" yoco_decode_transfers_received_total)
for i in $(seq 1 12); do cli --tokens "$(prompt $((40 + i)) 300)" --max-new-tokens 1 > /dev/null; done
total=$((total + 1))
sent_after=$(metric "$METRICS_PREFILL" yoco_prefill_transfers_sent_total)
received_after=$(metric "$METRICS_DECODE" yoco_decode_transfers_received_total)
waiting=$(metric "$METRICS_DECODE" yoco_decode_waiting_bundles)
if [ "$sent_before" = "$sent_after" ] && [ "$received_before" = "$received_after" ] && [ "$waiting" = 0 ]; then
  echo "ok   first-token-requests-ship-nothing"
else
  echo "FAIL first-token-requests-ship-nothing: sent $sent_before->$sent_after received $received_before->$received_after waiting $waiting"
  failures=$((failures + 1))
fi

# A client that goes away mid-stream, and one whose deadline passes: either way the decode
# worker ends the sequence and frees its memory (its gauges return to zero).
freed() {
  for _ in $(seq 1 50); do
    if [ "$(metric "$METRICS_DECODE" yoco_decode_active_sequences)" = 0 ] &&
       [ "$(metric "$METRICS_DECODE" yoco_decode_state_memory_bytes)" = 0 ]; then return 0; fi
    sleep 0.1
  done
  return 1
}
"$BIN/yoco-cli" "${CLIENT_TLS[@]}" --router "$ROUTER" generate --tokens "$(prompt 8 30)" --max-new-tokens 4000 > /dev/null 2>&1 &
gone=$!
# Until the stream is running: under the sanitizers the start alone can take longer than a
# fixed wait, and 4000 tokens take a few seconds even on a fast machine.
busy=0
for _ in $(seq 1 100); do
  busy=$(metric "$METRICS_DECODE" yoco_decode_active_sequences)
  [ "$busy" = 1 ] && break
  sleep 0.1
done
kill -9 "$gone"
wait "$gone" 2> /dev/null || true
total=$((total + 1))
if [ "$busy" = 1 ] && freed; then echo "ok   client-gone-frees-decode"; else
  echo "FAIL client-gone-frees-decode (busy=$busy)"; failures=$((failures + 1)); fi
total=$((total + 1))
out=$(cli --tokens "$(prompt 9 30)" --max-new-tokens 4000 --timeout-ms 500 2>&1 > /dev/null) || true
if [[ "$out" == *"yoco-cli: 4:"* ]] && freed; then echo "ok   deadline-frees-decode"; else
  echo "FAIL deadline-frees-decode: $out"; failures=$((failures + 1)); fi

# A deadline that passes during prefill stops the prefill: no bundle is shipped for it and the
# prefill worker's active requests return to zero.
total=$((total + 1))
sent_before=$(metric "$METRICS_PREFILL" 'yoco_prefill_transfers_sent_total')
marked_before=$(metric "$METRICS_ROUTER" 'yoco_router_worker_failures_total{role="prefill"}')
out=$(cli --tokens "$(prompt 11 4090)" --max-new-tokens 4 --timeout-ms 30 2>&1 > /dev/null) || true
prefill_idle=no
for _ in $(seq 1 50); do
  [ "$(metric "$METRICS_PREFILL" yoco_prefill_active_requests)" = 0 ] && { prefill_idle=yes; break; }
  sleep 0.1
done
sent_after=$(metric "$METRICS_PREFILL" 'yoco_prefill_transfers_sent_total')
# The client's own deadline says nothing about the worker: it is not marked failed.
marked_after=$(metric "$METRICS_ROUTER" 'yoco_router_worker_failures_total{role="prefill"}')
if [[ "$out" == *"yoco-cli: 4:"* ]] && [ "$prefill_idle" = yes ] && [ "$sent_after" = "$sent_before" ] &&
   [ "$marked_after" = "$marked_before" ]; then
  echo "ok   deadline-frees-prefill (cancelled so far: $(metric "$METRICS_PREFILL" yoco_prefill_cancelled_total))"
else echo "FAIL deadline-frees-prefill: $out idle=$prefill_idle sent $sent_before -> $sent_after, workers marked failed $marked_before -> $marked_after"; failures=$((failures + 1)); fi

# A stop string ends the stream right after the token that completes it: take a printable
# character from a greedy text run and stop at it.
total=$((total + 1))
full=$(cli --prompt "Hello, world" --max-new-tokens 60)
stop=$(python3 -c 'import sys; t=sys.argv[1]; print(next((c for c in t[3:] if c.isascii() and c.isalnum()), ""))' "$full")
if [ -z "$stop" ]; then echo "FAIL stop-string: no character to stop at in: $full"; failures=$((failures + 1)); else
  cut=$(cli --prompt "Hello, world" --max-new-tokens 60 --stop-string "$stop" --stats 2> "$log/stop.stats")
  if [[ "$full" == "$cut"* ]] && [[ "$cut" == *"$stop" ]] && grep -q '"finish_reason": "stop"' "$log/stop.stats" &&
     [ "${#cut}" -lt "${#full}" ]; then echo "ok   stop-string"; else
    echo "FAIL stop-string: stop='$stop' cut='$cut' full='$full'"; failures=$((failures + 1)); fi
fi

# Prefix cache: pre-cache a 400-token document (snapshot at its last block boundary, 384), then
# ask questions after it: the tokens equal the in-process engine's, and the stats show the hit.
ctl() { timeout 60 "$BIN/yoco-cli" "${CLIENT_TLS[@]}" --router "$ROUTER" "$@"; }
json() { python3 -c 'import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$1" "$2"; }
doc=$(prompt 20 400)
question=$(prompt 21 30 | cut -d, -f2-)
cached_check() {  # name, expected cached tokens, expected miss reason, flags...
  local name=$1 want_cached=$2 want_reason=$3; shift 3
  local want got stats
  total=$((total + 1))
  want=$("$BIN/yoco" generate --model "$MODEL" --tokens "$doc,$question" "$@")
  got=$(cli --tokens "$doc,$question" --stats "$@" 2> "$log/cache.stats")
  stats=$(cat "$log/cache.stats")
  if [ "$want" = "$got" ] && [ "$(json "$stats" cached_prompt_tokens)" = "$want_cached" ] &&
     [ "$(json "$stats" cache_miss_reason)" = "$want_reason" ]; then echo "ok   $name"; else
    echo "FAIL $name: want $want got $got stats $stats"; failures=$((failures + 1)); fi
}
total=$((total + 1))
pre=$(ctl precache --tokens "$doc" --pin --progress 2> "$log/progress")
handle=$(json "$pre" handle)
# Progress through the router from the prefill worker: one line per 128-token segment (each a
# new percent), then the end.
total=$((total + 1))
if [ "$(tr '\n' '|' < "$log/progress")" = "pre-cache:  32% (128 of 400 tokens)|pre-cache:  64% (256 of 400 tokens)|pre-cache:  96% (384 of 400 tokens)|pre-cache: 100% (400 of 400 tokens)|" ]; then
  echo "ok   precache-progress"; else
  echo "FAIL precache-progress: $(cat "$log/progress")"; failures=$((failures + 1)); fi
if [ "$(json "$pre" tokens)" = 400 ] && [ "$(json "$pre" cached_tokens)" = 384 ] &&
   [ "$(json "$pre" bytes)" -gt 0 ]; then echo "ok   precache"; else echo "FAIL precache: $pre"; failures=$((failures + 1)); fi
cached_check cache-hit-greedy 384 "" --max-new-tokens 16
cached_check cache-hit-sampled 384 "" --max-new-tokens 16 --temperature 0.8 --seed 3
total=$((total + 1))
if ctl list-cache | grep -q "\"handle\": \"$handle\", \"tokens\": 384, .*\"pinned\": true"; then
  echo "ok   list-cache"; else echo "FAIL list-cache: $(ctl list-cache)"; failures=$((failures + 1)); fi
total=$((total + 1))
if [ "$(json "$(ctl evict-cache --handle "$handle")" evicted)" = 1 ]; then echo "ok   evict-cache"; else
  echo "FAIL evict-cache"; failures=$((failures + 1)); fi
cached_check cache-miss-after-evict 0 evicted --max-new-tokens 16
# That prefill saved the prompt's last full block (384 again): the next one hits, also through
# a restarted router, which rebuilds its index from the workers.
kill -9 "$router_pid"
wait "$router_pid" 2> /dev/null || true
start_router
for i in $(seq 1 100); do cli --tokens 0,5 --max-new-tokens 1 > /dev/null 2>&1 && break; sleep 0.1; done
cached_check cache-hit-after-router-restart 384 "" --max-new-tokens 16
total=$((total + 1))
hits=$(metric "$METRICS_ROUTER" yoco_router_cache_hits_total)
hit_tokens=$(metric "$METRICS_ROUTER" yoco_router_cached_prompt_tokens_total)
if [ "$hits" = 1 ] && [ "$hit_tokens" = 384 ]; then echo "ok   cache-metrics"; else
  echo "FAIL cache-metrics: hits=$hits tokens=$hit_tokens"; failures=$((failures + 1)); fi

# A hot snapshot on a busy worker: the router serves the question on the idle worker and copies
# the snapshot there over UCX, so both hold it afterwards. The load: two long prompts that
# extend a document pre-cached on the same worker, so both are routed there.
doc=$(prompt 26 400)
question=$(prompt 27 30 | cut -d, -f2-)
long=$(prompt 34 2048)
pre_long=$(ctl precache --tokens "$long" --pin)
pre4=$(ctl precache --tokens "$doc" --pin)
total=$((total + 1))
if [ "$(json "$pre_long" worker)" = "$(json "$pre4" worker)" ]; then echo "ok   precache-same-worker"; else
  echo "FAIL precache-same-worker: $pre_long $pre4"; failures=$((failures + 1)); fi
want=$("$BIN/yoco" generate --model "$MODEL" --tokens "$doc,$question" --max-new-tokens 8)
for s in 35 36 37; do prompt $s 2040 | cut -d, -f2- > "$log/busy$s"; done
busy_pids=()
for s in 35 36 37; do
  cli --tokens "$long,$(cat "$log/busy$s")" --max-new-tokens 1 > /dev/null 2>&1 &
  busy_pids+=($!)
done
for i in $(seq 1 100); do  # until the worker holding both documents is busy
  [ "$(metric "$METRICS_PREFILL" yoco_prefill_active_requests)" -ge 2 ] && break
  sleep 0.01
done
got=$(cli --tokens "$doc,$question" --max-new-tokens 8)
total=$((total + 1))
if [ "$want" = "$got" ]; then echo "ok   hot-snapshot-question"; else
  echo "FAIL hot-snapshot-question: want $want got $got"; failures=$((failures + 1)); fi
for p in "${busy_pids[@]}"; do wait "$p" || true; done
for i in $(seq 1 100); do
  [ "$(metric "$METRICS_ROUTER" yoco_router_background_jobs)" = 0 ] && break
  sleep 0.1
done
total=$((total + 1))
for i in $(seq 1 50); do  # the receiving worker keeps the copy off its transport thread
  holders=$(ctl list-cache | grep -o "\"handle\": \"$(json "$pre4" handle)\"" | wc -l)
  [ "$holders" = 2 ] && break
  sleep 0.1
done
copies=$(metric "$METRICS_ROUTER" yoco_router_snapshot_copies_total)
if [ "$holders" = 2 ] && [ "$copies" -ge 1 ]; then echo "ok   hot-snapshot-copied"; else
  echo "FAIL hot-snapshot-copied: holders=$holders copies=$copies"; failures=$((failures + 1)); fi

# Conversation snapshots: after a request, the router extends its prefill worker's cache over
# the generated tokens, so a follow-up turn that repeats the conversation hits beyond the first
# prompt (200 + 100 generated tokens: the block boundary at 256, past the prompt's 128).
conv=$(prompt 24 200)
answer=$(cli --tokens "$conv" --max-new-tokens 100)
doc="$conv,$answer"
question=$(prompt 25 20 | cut -d, -f2-)
for i in $(seq 1 100); do  # the snapshot is made in the background
  [ "$(metric "$METRICS_ROUTER" yoco_router_background_jobs)" = 0 ] && break
  sleep 0.1
done
cached_check follow-up-turn-hits-conversation 256 "" --max-new-tokens 8

# Disk tier: pre-cached documents are written through to the prefill worker's --cache-dir.
# Restart that worker: one document comes back from disk; the other's file was corrupted while
# it was down, so it is refused and the request is served by recomputing, with the same tokens.
# A third file was poisoned: its state changed and every CRC recomputed, as an attacker who can
# write the cache volume would; without the cache key its tag cannot be right, so it is refused.
doc2=$(prompt 22 300)
doc3=$(prompt 23 260)
doc5=$(prompt 25 280)
pre2=$(ctl precache --tokens "$doc2" --pin)
pre3=$(ctl precache --tokens "$doc3" --pin)
pre5=$(ctl precache --tokens "$doc5" --pin)
total=$((total + 1))
if [ "$(json "$pre2" worker)" = "$PREFILL" ] && [ "$(json "$pre3" worker)" = "$PREFILL" ] &&
   [ "$(json "$pre5" worker)" = "$PREFILL" ] &&
   [ -f "$log/cache1/$(json "$pre3" handle).snap" ]; then echo "ok   precache-written-to-disk"; else
  echo "FAIL precache-written-to-disk: $pre2 $pre3 $pre5"; failures=$((failures + 1)); fi
kill -9 "$p1"
wait "$p1" 2> /dev/null || true
python3 - "$log/cache1/$(json "$pre3" handle).snap" << 'PY'
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(200); b = f.read(1); f.seek(200); f.write(bytes([b[0] ^ 0x55]))
PY
python3 "$(dirname "$0")/poison_snapshot.py" "$log/cache1/$(json "$pre5" handle).snap"
start_prefill1
for i in $(seq 1 100); do  # until the router lists the restarted worker's snapshots again
  ctl list-cache 2> /dev/null | grep -q "$(json "$pre2" handle)" && break
  sleep 0.1
done
doc="$doc2"
cached_check disk-hit-after-worker-restart 256 "" --max-new-tokens 16
total=$((total + 1))
if grep -q '"cache_tier": "disk"' "$log/cache.stats"; then echo "ok   disk-tier-reported"; else
  echo "FAIL disk-tier-reported: $(cat "$log/cache.stats")"; failures=$((failures + 1)); fi
doc="$doc3"
cached_check corrupt-snapshot-recomputed 0 corrupt --max-new-tokens 16
total=$((total + 1))
if grep -q "discarded snapshot $(json "$pre3" handle)" "$log/p"; then echo "ok   corrupt-snapshot-reported"; else
  echo "FAIL corrupt-snapshot-reported: $(cat "$log/p")"; failures=$((failures + 1)); fi
doc="$doc5"
cached_check poisoned-snapshot-refused 0 unauthenticated --max-new-tokens 16
total=$((total + 1))
if grep -q "discarded snapshot $(json "$pre5" handle): .*cache key" "$log/p"; then
  echo "ok   poisoned-snapshot-reported"; else
  echo "FAIL poisoned-snapshot-reported: $(cat "$log/p")"; failures=$((failures + 1)); fi

# Kill a prefill worker: requests go to the other one.
kill -9 "$p1"
check prefill-worker-killed "$(prompt 7 60)" --max-new-tokens 12

# Kill the decode worker that serves a long stream: the router continues on the other one.
# (Both idle: the router picks the first.) Frozen with SIGSTOP first, so that on a fast machine
# too the stream is certainly cut midway. Not much longer: the retry prefills what was sent,
# which matches decoding it to rounding only, and over thousands of greedy steps a near-tie of
# this random-weight model can then flip.
long=$(prompt 5 50)
want=$("$BIN/yoco" generate --model "$MODEL" --tokens "$long" --max-new-tokens 600)
cli --tokens "$long" --max-new-tokens 600 > "$log/killed.out" &
cli_pid=$!
# The stream was on the first worker when freezing it stops the stream (nothing is read of it
# meanwhile: its /metrics is frozen too).
for i in $(seq 1 500); do [ -s "$log/killed.out" ] && break; sleep 0.01; done
kill -STOP "$d1"
sleep 0.1
seen=$(tr -cd , < "$log/killed.out" | wc -c)
sleep 0.3
on_d1=0
[ "$(tr -cd , < "$log/killed.out" | wc -c)" = "$seen" ] && on_d1=1
kill -9 "$d1"
wait "$cli_pid" || true
got=$(cat "$log/killed.out")
total=$((total + 1))
if [ "$want" = "$got" ] && [ "$on_d1" = 1 ] && [ "$seen" -lt 599 ]; then
  echo "ok   decode-worker-killed-mid-stream (cut after $seen tokens)"; else
  echo "FAIL decode-worker-killed-mid-stream: $(echo "$got" | tr ',' '\n' | wc -l) tokens," \
    "on the first worker: $on_d1, cut after $seen"; failures=$((failures + 1)); fi

# Bad input: a clear INVALID_ARGUMENT (code 3), and the services keep serving.
bad() {
  local name=$1; shift
  total=$((total + 1))
  if out=$(cli "$@" 2>&1); then echo "FAIL $name: accepted"; failures=$((failures + 1)); return; fi
  if [[ "$out" == *"yoco-cli: 3:"* ]]; then echo "ok   $name"; else echo "FAIL $name: $out"; failures=$((failures + 1)); fi
}
bad out-of-range-token --tokens 0,512 --max-new-tokens 4
bad negative-token --tokens 0,-3 --max-new-tokens 4
bad negative-temperature --tokens 0,5 --max-new-tokens 4 --temperature -1
bad top-p-above-one --tokens 0,5 --max-new-tokens 4 --top-p 1.5
bad absurd-max-new-tokens --tokens 0,5 --max-new-tokens 100000000
bad prompt-beyond-max-seq-len --tokens "$(prompt 10 4100)" --max-new-tokens 4
bad empty-prompt --prompt "" --max-new-tokens 4
# A document beyond what one request carries (the servers' 64 MiB limit): refused by the client
# saying what to do, nothing else disturbed.
total=$((total + 1))
head -c $((65 << 20)) /dev/zero | tr '\0' 'a' > "$log/huge.txt"
if out=$(ctl precache --file "$log/huge.txt" 2>&1); then echo "FAIL oversized-message: accepted"; failures=$((failures + 1))
elif [[ "$out" == *"one request to the router carries"* ]]; then echo "ok   oversized-message"; else
  echo "FAIL oversized-message: $out"; failures=$((failures + 1)); fi
rm -f "$log/huge.txt"
# Forged internal calls: Prefill and CopySnapshot with UCX addresses that are random bytes behind
# our envelope, or an envelope tagged without the transport key, made with the router's own
# certificate (an insider's). Refused, and the worker lives.
pre6=$(ctl precache --tokens "$(prompt 26 200)" --pin)
total=$((total + 1))
if out=$("$BIN/forged_call" "$(json "$pre6" worker)" "$(json "$pre6" handle)" "$log/ca.pem" \
    "$log/server.pem" "$log/server.key" 2>&1); then
  echo "ok   forged-internal-calls-refused"; else
  echo "FAIL forged-internal-calls-refused: $out"; failures=$((failures + 1)); fi
check still-serving "$(prompt 6 20)" --max-new-tokens 10

# Graceful shutdown: SIGTERM to the last decode worker mid-stream. It stops taking new calls
# but lets the stream run to its end (nowhere else to go: a cut stream would fail), then exits.
drain=$(prompt 12 40)
want=$("$BIN/yoco" generate --model "$MODEL" --tokens "$drain" --max-new-tokens 1500)
cli --tokens "$drain" --max-new-tokens 1500 > "$log/drain.out" 2> "$log/drain.err" &
cli_pid=$!
for i in $(seq 1 500); do  # until tokens flow
  [ -s "$log/drain.out" ] && break
  sleep 0.01
done
# Frozen while the signal is sent, so it certainly arrives mid-stream on a fast machine too.
kill -STOP "$d2"
kill -TERM "$d2"
seen=$(tr -cd , < "$log/drain.out" | wc -c)
kill -CONT "$d2"
wait "$cli_pid" || true
drain_rc=0
wait "$d2" || drain_rc=$?
total=$((total + 1))
if [ "$want" = "$(cat "$log/drain.out")" ] && [ "$drain_rc" = 0 ] && grep -q "draining" "$log/d2" &&
   [ "$seen" -lt 1499 ]; then
  echo "ok   sigterm-drains-decode-stream (signalled after $seen tokens)"; else
  echo "FAIL sigterm-drains-decode-stream: rc=$drain_rc after $seen tokens $(cat "$log/drain.err") $(tail -2 "$log/d2")"
  failures=$((failures + 1)); fi

echo "$((total - failures)) passed, $failures failed"
[ "$failures" = 0 ]
