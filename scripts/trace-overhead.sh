#!/bin/bash
# What tracing costs under load. Two stacks on loopback over MODEL (a router, one prefill and one
# decode worker each): one sends every span (--otlp-endpoint, the default --trace-sample-ratio of
# 1) to an OTLP receiver (tests/trace/otlp_receiver.mjs --count-only: on two cores, a collector
# decoding every batch would take its CPU time from the services measured), the other traces
# nothing. The same closed-loop yoco-loadtest run goes to each in turn, ROUNDS times; each round
# prints traced / untraced for output tokens/s and TTFT p50, and the last line their medians.
#   scripts/trace-overhead.sh [MODEL] [ROUNDS] [REQUESTS]
# AA=1 leaves tracing off in both (the same comparison with nothing to find: the noise floor).
# Needs the build (scripts/build.sh) and node with the receiver's npm package (the tracing tests'
# fixture installs it: ctest -R trace.otlp_receiver_install).
set -euo pipefail
cd "$(dirname "$0")/.."
B=build/bin
M=${1:-build/models/yoco-tiny} ROUNDS=${2:-3} REQUESTS=${3:-200}
RECEIVER=build/tests/trace/otlp_receiver/otlp_receiver.mjs
[ -f "$RECEIVER" ] || (cd build && ctest -R trace.otlp_receiver_install > /dev/null)
export UCX_WARN_UNUSED_ENV_VARS=n
log=$(mktemp -d)
pids=()
trap '{ kill -9 "${pids[@]}"; wait; } 2>/dev/null; rm -rf "$log"' EXIT

node "$RECEIVER" "$log/batches.jsonl" --count-only > "$log/receiver" 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do grep -q "receiving on port" "$log/receiver" && break; sleep 0.1; done
endpoint="http://127.0.0.1:$(awk '/receiving on port/{print $4}' "$log/receiver")/v1/traces"

stack() {  # stack NAME BASE_PORT [FLAGS...]: the router's address on stdout
  local name=$1 base=$2
  shift 2
  local P=127.0.0.1:$((base + 1)) D=127.0.0.1:$((base + 2)) R=127.0.0.1:$base
  $B/yoco-decode --listen $D --model "$M" --tls tcp --net-devices lo "$@" 2>"$log/$name-decode" &
  pids+=($!)
  $B/yoco-prefill --listen $P --model "$M" --tls tcp --net-devices lo "$@" 2>"$log/$name-prefill" &
  pids+=($!)
  $B/yoco-router --listen $R --model "$M" --prefill $P --decode $D "$@" 2>"$log/$name-router" &
  pids+=($!)
  for _ in $(seq 1 300); do
    $B/yoco-cli --router $R generate --tokens 0,5 --max-new-tokens 1 >/dev/null 2>&1 && break
    sleep 0.2
  done
}
base=$((47000 + RANDOM % 1000 * 8))
if [ -n "${AA:-}" ]; then stack traced $base; else stack traced $base --otlp-endpoint "$endpoint"; fi
stack plain $((base + 4))

run() {  # run ROUTER OUT_JSON
  $B/yoco-loadtest --router "$1" --workload random --input-tokens 256 --output-tokens 16 \
    --requests "$REQUESTS" --concurrency 4 --seed 1 --quiet --json "$2" > /dev/null
}
ratios=()
for round in $(seq 1 "$ROUNDS"); do
  if ((round % 2)); then  # in turn first, so neither gains from going second
    run 127.0.0.1:$base "$log/traced.json"
    run 127.0.0.1:$((base + 4)) "$log/plain.json"
  else
    run 127.0.0.1:$((base + 4)) "$log/plain.json"
    run 127.0.0.1:$base "$log/traced.json"
  fi
  ratios+=("$(python3 -c 'import json, sys
t, p = (json.load(open(f)) for f in sys.argv[1:3])
assert t["ok"] == p["ok"] == t["requests"], "failed requests"
print(t["output_tokens_per_s"] / p["output_tokens_per_s"], t["ttft_ms"]["p50"] / p["ttft_ms"]["p50"])
' "$log/traced.json" "$log/plain.json")")
  echo "round $round: traced/untraced tokens/s and TTFT p50: ${ratios[-1]}"
done
printf '%s\n' "${ratios[@]}" | python3 -c 'import statistics, sys
rows = [tuple(map(float, l.split())) for l in sys.stdin]
print("median: tokens/s %.3f  TTFT p50 %.3f" % (statistics.median(r[0] for r in rows),
                                                  statistics.median(r[1] for r in rows)))'
sleep 2  # the last batch of spans
[ -f "$log/batches.jsonl" ] && python3 -c 'import json, sys
b = [json.loads(l)["bytes"] for l in open(sys.argv[1])]
print("OTLP batches received: %d, %d bytes" % (len(b), sum(b)))' "$log/batches.jsonl"
