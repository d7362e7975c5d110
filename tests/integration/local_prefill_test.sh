#!/usr/bin/env bash
# Conditional disaggregation end to end: a router with --local-prefill-max-tokens 300 in front of
# one prefill worker and two decode workers, the second started with --local-prefill=false.
# Prompts up to 300 tokens are prefilled on the first decode worker, longer ones are shipped,
# and every answer equals `yoco generate` in-process, on lengths around the cache's 128-token
# grid, greedy and sampled. A prompt whose prefix is cached goes to the prefill worker however
# short. Killing the decode worker mid-stream after a local prefill loses no token; a decode
# worker that does not prefill is never asked to; forged local prefills are refused.
#   local_prefill_test.sh BIN_DIR MODEL_DIR
set -euo pipefail
BIN=$1
MODEL=$2
export UCX_WARN_UNUSED_ENV_VARS=n
base=$((18000 + (RANDOM % 100) * 10))  # 18000-18999: below the ephemeral ports, apart from the other tests
ROUTER=127.0.0.1:$base PREFILL=127.0.0.1:$((base + 1)) DECODE1=127.0.0.1:$((base + 2))
DECODE2=127.0.0.1:$((base + 3)) METRICS_ROUTER=127.0.0.1:$((base + 4))
METRICS_D1=127.0.0.1:$((base + 5)) METRICS_D2=127.0.0.1:$((base + 6))
log=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2> /dev/null || true; done; rm -rf "$log"; }
trap cleanup EXIT
WORKER=(--model "$MODEL" --tls tcp --net-devices lo --threads 1)
"$BIN/yoco-decode" --listen "$DECODE1" "${WORKER[@]}" --metrics-listen "$METRICS_D1" 2> "$log/d1" &
d1=$!; pids+=("$d1")
"$BIN/yoco-decode" --listen "$DECODE2" "${WORKER[@]}" --metrics-listen "$METRICS_D2" \
  --local-prefill=false 2> "$log/d2" &
pids+=($!)
"$BIN/yoco-prefill" --listen "$PREFILL" "${WORKER[@]}" 2> "$log/p" &
pids+=($!)
"$BIN/yoco-router" --listen "$ROUTER" --model "$MODEL" --prefill "$PREFILL" \
  --decode "$DECODE1,$DECODE2" --local-prefill-max-tokens 300 --probe-interval-ms 200 \
  --metrics-listen "$METRICS_ROUTER" --snapshot-conversations=false 2> "$log/r" &
pids+=($!)
cli() { timeout 120 "$BIN/yoco-cli" --router "$ROUTER" "$@"; }
for i in $(seq 1 150); do
  cli generate --tokens 0,5 --max-new-tokens 1 > /dev/null 2>&1 && break
  sleep 0.2
  if [ "$i" = 150 ]; then echo "services did not come up"; cat "$log"/{r,p,d1,d2}; exit 1; fi
done
failures=0 total=0
result() {  # name, condition (0/1), detail
  total=$((total + 1))
  if [ "$2" = 0 ]; then echo "ok   $1"; else echo "FAIL $1: $3"; failures=$((failures + 1)); fi
}
prompt() {  # seed, length -> comma-separated ids below 512
  python3 -c 'import random, sys
r = random.Random(int(sys.argv[1]))
print(",".join(["0"] + [str(r.randrange(3, 512)) for _ in range(int(sys.argv[2]) - 1)]))' "$1" "$2"
}
metric() {  # address, name -> value (0 when absent)
  curl -s "http://$1/metrics" | awk -v n="$2" '$1 == n {v = $2} END {printf "%d\n", v + 0}'
}
stat() { python3 -c 'import json, sys; print(str(json.loads(sys.argv[1])[sys.argv[2]]).lower())' "$1" "$2"; }

# Equality with the in-process engine on the grid; which side prefilled, from the stats.
# Sequential requests with both decode workers idle: the router picks the first, which prefills.
d1_before=$(metric "$METRICS_D1" yoco_decode_local_prefills_total)
router_before=$(metric "$METRICS_ROUTER" yoco_router_local_prefills_total)
for len in 1 2 127 128 129 255 256 257 300 301 383; do
  for sampling in greedy sampled; do
    flags=(--max-new-tokens 12)
    [ "$sampling" = sampled ] && flags+=(--temperature 0.8 --top-k 20 --seed "$len")
    tokens=$(prompt "$len" "$len")
    want=$("$BIN/yoco" generate --model "$MODEL" --tokens "$tokens" "${flags[@]}")
    got=$(cli generate --tokens "$tokens" "${flags[@]}" --stats 2> "$log/stats") || true
    local_flag=$(stat "$(cat "$log/stats")" local_prefill 2> /dev/null || echo "?")
    expect=false
    [ "$len" -le 300 ] && expect=true
    [ "$want" = "$got" ] && [ "$local_flag" = "$expect" ] && c=0 || c=1
    result "length-$len-$sampling" "$c" "local_prefill=$local_flag (want $expect), want $want got $got"
  done
done
d1_after=$(metric "$METRICS_D1" yoco_decode_local_prefills_total)
router_after=$(metric "$METRICS_ROUTER" yoco_router_local_prefills_total)
[ $((d1_after - d1_before)) = 18 ] && c=0 || c=1
result decode-worker-counted-its-prefills "$c" "$d1_before -> $d1_after"
[ $((router_after - router_before)) = 18 ] && c=0 || c=1
result router-counted-local-prefills "$c" "$router_before -> $router_after"

# A cached prefix: the prefill worker resumes from it, however short the prompt.
doc=$(prompt 77 256)
cli precache --tokens "$doc" > /dev/null
tokens="$doc,7,8,9"
want=$("$BIN/yoco" generate --model "$MODEL" --tokens "$tokens" --max-new-tokens 8)
got=$(cli generate --tokens "$tokens" --max-new-tokens 8 --stats 2> "$log/stats")
[ "$want" = "$got" ] && [ "$(stat "$(cat "$log/stats")" local_prefill)" = false ] &&
  [ "$(stat "$(cat "$log/stats")" cached_prompt_tokens)" = 256 ] && c=0 || c=1
result cached-prefix-goes-to-the-prefill-worker "$c" "$(cat "$log/stats")"

# Forged local prefills straight to the decode workers: refused (INVALID_ARGUMENT where it
# prefills, FAILED_PRECONDITION where it does not), and they keep serving.
out=$("$BIN/forged_call" local-prefill "$DECODE1" yes 2>&1) && c=0 || c=1
result forged-local-prefills-refused "$c" "$out"
out=$("$BIN/forged_call" local-prefill "$DECODE2" no 2>&1) && c=0 || c=1
result forged-local-prefills-refused-where-none "$c" "$out"

# The decode worker that prefilled is killed mid-stream (frozen first, so certainly midway):
# the router continues on the other with the tokens sent so far. (600 tokens, as in
# tests/cluster/serving_test.cc: the retry's prefill matches decoding to rounding only.)
tokens=$(prompt 5 40)
want=$("$BIN/yoco" generate --model "$MODEL" --tokens "$tokens" --max-new-tokens 600)
cli generate --tokens "$tokens" --max-new-tokens 600 --stats > "$log/killed.out" \
  2> "$log/killed.stats" &
cli_pid=$!
for i in $(seq 1 500); do [ -s "$log/killed.out" ] && break; sleep 0.01; done
kill -STOP "$d1"
sleep 0.2
seen=$(tr -cd , < "$log/killed.out" | wc -c)
kill -9 "$d1"
wait "$cli_pid" || true
[ "$want" = "$(cat "$log/killed.out")" ] && [ "$seen" -lt 599 ] &&
  grep -q '"local_prefill": true' "$log/killed.stats" && c=0 || c=1
result decode-worker-killed-after-local-prefill "$c" "cut after $seen; $(cat "$log/killed.stats")"

# Only the worker without local prefill is left: short prompts are shipped to it.
tokens=$(prompt 9 30)
want=$("$BIN/yoco" generate --model "$MODEL" --tokens "$tokens" --max-new-tokens 8)
got=$(cli generate --tokens "$tokens" --max-new-tokens 8 --stats 2> "$log/stats")
[ "$want" = "$got" ] && [ "$(stat "$(cat "$log/stats")" local_prefill)" = false ] && c=0 || c=1
result worker-without-local-prefill-gets-shipped-state "$c" "$(cat "$log/stats")"
[ "$(metric "$METRICS_D2" yoco_decode_local_prefills_total)" = 0 ] && c=0 || c=1
result worker-without-local-prefill-never-prefilled "$c" "$(metric "$METRICS_D2" yoco_decode_local_prefills_total)"
got=$(cli generate --tokens "$tokens" --max-new-tokens 8)
[ "$want" = "$got" ] && c=0 || c=1
result still-serving "$c" "$got"

echo "$((total - failures))/$total checks passed"
[ "$failures" = 0 ]
