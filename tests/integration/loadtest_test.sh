#!/usr/bin/env bash
# yoco-loadtest end to end, bounded to seconds: a closed-loop rag run against the local stack
# with its documents pre-cached (every request a hit), writing the JSON summary, the JSONL and
# the plot, with the router's own counters scraped; then an open-loop random run and a short
# rate sweep, chat sessions and a replayed file. The numbers the tool reports are checked
# against what the router counted.
#   loadtest_test.sh BIN_DIR MODEL_DIR
set -euo pipefail
BIN=$1
MODEL=$2
export UCX_WARN_UNUSED_ENV_VARS=n
base=$((32700 + (RANDOM % 6) * 10))  # 32700-32759: below the ephemeral ports, apart from the other tests
ROUTER=127.0.0.1:$base PREFILL=127.0.0.1:$((base + 1)) DECODE=127.0.0.1:$((base + 2))
METRICS=127.0.0.1:$((base + 3)) HTTP=127.0.0.1:$((base + 4))
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2> /dev/null || true; done; rm -rf "${log:-}"; }
trap cleanup EXIT
log=$(mktemp -d)
WORKER_FLAGS=(--model "$MODEL" --tls tcp --net-devices lo --threads 1)
"$BIN/yoco-decode" --listen "$DECODE" "${WORKER_FLAGS[@]}" 2> "$log/d" &
pids+=($!)
"$BIN/yoco-prefill" --listen "$PREFILL" "${WORKER_FLAGS[@]}" 2> "$log/p" &
pids+=($!)
"$BIN/yoco-router" --listen "$ROUTER" --model "$MODEL" --prefill "$PREFILL" --decode "$DECODE" \
  --probe-interval-ms 200 --metrics-listen "$METRICS" --snapshot-conversations=false \
  --http-listen "$HTTP" 2> "$log/r" &
pids+=($!)
for i in $(seq 1 100); do
  if "$BIN/yoco-cli" --router "$ROUTER" generate --tokens 0,5 --max-new-tokens 1 > /dev/null 2>&1; then break; fi
  sleep 0.2
  if [ "$i" = 100 ]; then echo "services did not come up"; cat "$log"/*; exit 1; fi
done

failures=0
pass() { echo "ok   $1"; }
fail() { echo "FAIL $1: $2"; failures=$((failures + 1)); }

plot=()
if command -v gnuplot > /dev/null; then plot=(--plot "$log/rag.png"); fi
if "$BIN/yoco-loadtest" --router "$ROUTER" --workload rag --documents 2 --document-tokens 300 \
    --question-tokens 16 --output-tokens 8 --requests 24 --concurrency 4 --precache --seed 1 \
    --slo ttft=60000,tpot=60000 --json "$log/rag.json" --jsonl "$log/rag.jsonl" "${plot[@]}" \
    --scrape "http://$METRICS/metrics" --quiet > "$log/rag.out" 2> "$log/rag.err"; then
  pass rag-run
else
  fail rag-run "$(cat "$log/rag.err")"
fi
check=$(python3 - "$log/rag.json" "$log/rag.jsonl" "http://$METRICS/metrics" << 'PY'
import json, sys
s = json.load(open(sys.argv[1]))
lines = [json.loads(l) for l in open(sys.argv[2])]
problems = []
def want(cond, what):
    if not cond: problems.append(what)
want(s["requests"] == 24 and s["ok"] == 24 and s["errors"] == {}, "24 requests, no errors")
for k in ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms"):
    want(all(q in s[k] for q in ("p50", "p90", "p99", "max")), k + " percentiles")
    want(s[k]["p50"] <= s[k]["p90"] <= s[k]["p99"] <= s[k]["max"], k + " ordered")
want(s["cache_hit_rate"] == 1.0, "every request a hit (documents pre-cached)")
# Each prompt is 300 + 16 tokens; a hit covers the document's 256-token block boundary.
want(abs(s["cached_token_fraction"] - 256 / 316) < 1e-9, "cached fraction %r" % s["cached_token_fraction"])
want(s["goodput_requests_per_s"] == s["requests_per_s"] > 0, "all within a generous SLO")
want(len(lines) == 24 and sorted(l["index"] for l in lines) == list(range(24)), "24 JSONL lines")
want(all(l["output_tokens"] == 8 and len(l["itl_ms"]) == 7 for l in lines), "8 tokens, 7 gaps each")
want(abs(s["output_tokens_per_s"] * s["duration_s"] - 24 * 8) < 1e-6, "output tokens")
delta = s["server_metrics_delta"][sys.argv[3]]
want(delta.get('yoco_router_requests_total{outcome="ok"}') == 24, "the router counted 24: %r" % delta.get('yoco_router_requests_total{outcome="ok"}'))
want(delta.get("yoco_router_cache_hits_total") == 24, "the router counted 24 hits")
print("; ".join(problems) if problems else "ok")
PY
)
if [ "$check" = ok ]; then pass rag-report; else fail rag-report "$check"; fi
if [ ${#plot[@]} -gt 0 ]; then
  if [ "$(head -c 4 "$log/rag.png" | tail -c 3)" = PNG ]; then pass plot; else fail plot "no PNG"; fi
fi

# Open loop, constant arrivals: 12 requests at 40/s start within about 0.3 s.
if "$BIN/yoco-loadtest" --router "$ROUTER" --workload random --input-tokens 40 --input-spread 8 \
    --output-tokens 4 --requests 12 --rate 40 --arrivals constant --seed 2 --json "$log/random.json" \
    --jsonl "$log/random.jsonl" --quiet > /dev/null 2> "$log/random.err"; then
  starts=$(python3 -c 'import json,sys; l=[json.loads(x) for x in open(sys.argv[1])]; s=sorted(x["start_s"] for x in l); print("ok" if len(l)==12 and all(abs(b-a-0.025)<0.02 for a,b in zip(s,s[1:])) else s)' "$log/random.jsonl")
  if [ "$starts" = ok ]; then pass open-loop-arrivals; else fail open-loop-arrivals "$starts"; fi
else
  fail open-loop "$(cat "$log/random.err")"
fi
# A sweep: two rates that hold a generous SLO (the second 1.5 times the first), then one that
# cannot hold an impossible one.
if "$BIN/yoco-loadtest" --router "$ROUTER" --workload random --input-tokens 40 --output-tokens 4 \
    --requests 4 --rate 4 --sweep --sweep-steps 2 --slo ttft=60000 --seed 3 --json "$log/sweep.json" \
    --jsonl "$log/sweep.jsonl" "${plot[@]/rag.png/sweep.png}" --quiet > /dev/null 2> "$log/sweep.err" &&
   "$BIN/yoco-loadtest" --router "$ROUTER" --workload random --input-tokens 40 --output-tokens 4 \
    --requests 4 --rate 4 --sweep --slo ttft=0.001 --seed 4 --json "$log/broken.json" --quiet \
    > /dev/null 2>> "$log/sweep.err"; then
  swept=$(python3 -c '
import json, sys
s = json.load(open(sys.argv[1])); b = json.load(open(sys.argv[2]))
lines = [json.loads(l) for l in open(sys.argv[3])]
ok = ([x["offered_rate"] for x in s["steps"]] == [4, 6] and s["max_sustainable_rate"] == 6 and
      len(lines) == 8 and sorted(l["index"] for l in lines) == list(range(8)) and
      len(b["steps"]) == 1 and b["max_sustainable_rate"] == 0)
print("ok" if ok else (s["max_sustainable_rate"], b["max_sustainable_rate"], len(lines)))' \
    "$log/sweep.json" "$log/broken.json" "$log/sweep.jsonl")
  if [ "$swept" = ok ]; then pass sweep; else fail sweep "$swept"; fi
  if [ ${#plot[@]} -gt 0 ]; then
    if [ "$(head -c 4 "$log/sweep.png" | tail -c 3)" = PNG ]; then pass sweep-plot; else fail sweep-plot "no PNG"; fi
  fi
else
  fail sweep "$(cat "$log/sweep.err")"
fi
# Chat sessions: each turn repeats the last one's prompt and answer, and hits its snapshot.
if "$BIN/yoco-loadtest" --router "$ROUTER" --workload chat --turns 3 --system-tokens 128 \
    --user-tokens 32 --output-tokens 8 --requests 6 --concurrency 2 --seed 5 \
    --jsonl "$log/chat.jsonl" --quiet > /dev/null 2> "$log/chat.err"; then
  chat=$(python3 -c '
import json, sys
l = {x["index"]: x for x in map(json.loads, open(sys.argv[1]))}
ok = sorted(l) == list(range(6)) and all(
    l[i]["prompt_tokens"] == 160 + (i % 3) * 40 and (i % 3 == 0 or l[i]["cached_tokens"] >= 128)
    for i in l)
print("ok" if ok else [(i, l[i]["prompt_tokens"], l[i]["cached_tokens"]) for i in sorted(l)])' "$log/chat.jsonl")
  if [ "$chat" = ok ]; then pass chat-sessions; else fail chat-sessions "$chat"; fi
else
  fail chat-sessions "$(cat "$log/chat.err")"
fi
# Replay: requests at the file's timestamps, a text prompt tokenised by the router.
printf '%s\n' '{"timestamp_ms": 0, "prompt_tokens": [0, 9, 10, 11], "max_tokens": 3}' \
  '{"timestamp_ms": 300, "prompt": "hello there", "max_tokens": 2}' > "$log/replay.jsonl"
if "$BIN/yoco-loadtest" --router "$ROUTER" --workload replay --replay "$log/replay.jsonl" \
    --jsonl "$log/replayed.jsonl" --quiet > /dev/null 2> "$log/replay.err"; then
  replayed=$(python3 -c '
import json, sys
l = sorted(map(json.loads, open(sys.argv[1])), key=lambda x: x["index"])
ok = (len(l) == 2 and l[0]["prompt_tokens"] == 4 and l[0]["output_tokens"] == 3 and
      l[1]["prompt_tokens"] == 12 and l[1]["output_tokens"] == 2 and
      0.25 < l[1]["start_s"] - l[0]["start_s"] < 0.45)
print("ok" if ok else l)' "$log/replayed.jsonl")
  if [ "$replayed" = ok ]; then pass replay; else fail replay "$replayed"; fi
else
  fail replay "$(cat "$log/replay.err")"
fi
# The same workload through the router's OpenAI HTTP API (--http): the same prompts, arrivals
# measured from the SSE chunks (this random model's ids past the bytes have no text, so a chunk
# may carry more than one token: at most 5 gaps for 6 tokens), the model found in /v1/models.
if "$BIN/yoco-loadtest" --http "http://$HTTP" --vocab-size 512 --workload random \
    --input-tokens 40 --input-spread 8 --output-tokens 6 --requests 8 --concurrency 3 --seed 6 \
    --jsonl "$log/http.jsonl" --quiet > "$log/http.json" 2> "$log/http.err" &&
   "$BIN/yoco-loadtest" --router "$ROUTER" --workload random --input-tokens 40 --input-spread 8 \
    --output-tokens 6 --requests 8 --concurrency 3 --seed 6 --jsonl "$log/grpc.jsonl" --quiet \
    > /dev/null 2>> "$log/http.err"; then
  over_http=$(python3 -c '
import json, sys
h = sorted(map(json.loads, open(sys.argv[1])), key=lambda x: x["index"])
g = sorted(map(json.loads, open(sys.argv[2])), key=lambda x: x["index"])
ok = (len(h) == len(g) == 8 and all(x["status"] == "OK" and x["output_tokens"] == 6 and
      1 <= len(x["itl_ms"]) <= 5 and x["ttft_ms"] > 0 and x["finish_reason"] == "length" for x in h) and
      [x["prompt_tokens"] for x in h] == [x["prompt_tokens"] for x in g])
print("ok" if ok else [(x["status"], x["output_tokens"], x["prompt_tokens"], x.get("error")) for x in h])' \
    "$log/http.jsonl" "$log/grpc.jsonl")
  if [ "$over_http" = ok ]; then pass http-endpoint; else fail http-endpoint "$over_http"; fi
else
  fail http-endpoint "$(cat "$log/http.err")"
fi
if out=$("$BIN/yoco-loadtest" --http "http://$HTTP" --vocab-size 512 --workload chat --requests 2 \
    --concurrency 1 2>&1); then fail http-chat-refused "accepted"; else
  if [[ "$out" == *"needs the gRPC API"* ]]; then pass http-chat-refused; else fail http-chat-refused "$out"; fi
fi
# Bad flags are refused with a message.
if "$BIN/yoco-loadtest" --router "$ROUTER" --workload chaos --requests 1 --concurrency 1 2> "$log/bad"; then
  fail bad-workload "accepted"
elif grep -q "not rag, shared-prefix, chat, random or replay" "$log/bad"; then pass bad-workload; else fail bad-workload "$(cat "$log/bad")"; fi

echo "$failures failures"
[ "$failures" = 0 ]
