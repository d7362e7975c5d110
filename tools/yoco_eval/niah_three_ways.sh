#!/usr/bin/env bash
# Needle in a haystack through the served stack three ways, which must agree answer for answer:
# uncached (a fresh cache salt), every document pre-cached first (prefix-cache hits), and with
# one of the two decode workers killed mid-run (the router retries its requests elsewhere).
# Starts its own router, prefill worker and two decode workers on loopback.
#   niah_three_ways.sh BIN_DIR MODEL_DIR OUT_DIR [yoco-eval niah flags...]
# Writes OUT_DIR/{uncached,precached,killed}.json (+ .png with gnuplot); exit 0 when all three
# runs finished without a failed request, agree, and the pre-cached run hit on every document.
# NIAH_PORT_BASE picks the ports (default 19000; five from it).
set -euo pipefail
BIN=$1 MODEL=$2 OUT=$3
shift 3
mkdir -p "$OUT"
export UCX_WARN_UNUSED_ENV_VARS=n
base=${NIAH_PORT_BASE:-19000}
ROUTER=127.0.0.1:$base PREFILL=127.0.0.1:$((base + 1))
DECODE1=127.0.0.1:$((base + 2)) DECODE2=127.0.0.1:$((base + 3)) METRICS=127.0.0.1:$((base + 4))
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2> /dev/null || true; done; }
trap cleanup EXIT
WORKER_FLAGS=(--model "$MODEL" --tls tcp --net-devices lo --threads 1)
"$BIN/yoco-decode" --listen "$DECODE1" "${WORKER_FLAGS[@]}" 2> "$OUT/decode1.log" &
victim=$!
pids+=("$victim")
"$BIN/yoco-decode" --listen "$DECODE2" "${WORKER_FLAGS[@]}" 2> "$OUT/decode2.log" &
pids+=($!)
"$BIN/yoco-prefill" --listen "$PREFILL" "${WORKER_FLAGS[@]}" 2> "$OUT/prefill.log" &
pids+=($!)
"$BIN/yoco-router" --listen "$ROUTER" --model "$MODEL" --prefill "$PREFILL" \
  --decode "$DECODE1,$DECODE2" --probe-interval-ms 200 --metrics-listen "$METRICS" \
  2> "$OUT/router.log" &
pids+=($!)
for i in $(seq 1 150); do
  if "$BIN/yoco-cli" --router "$ROUTER" generate --tokens 0,5 --max-new-tokens 1 > /dev/null 2>&1; then break; fi
  sleep 0.2
  if [ "$i" = 150 ]; then echo "the services did not start"; cat "$OUT"/*.log; exit 1; fi
done

counter() {  # the sum of a router counter's series
  local text
  text=$(curl -s "http://$METRICS/metrics")
  awk -v name="$1" '$1 ~ "^"name"({|$)" {s += $2} END {printf "%d\n", s}' <<< "$text"
}

failures=0
salt=niah-$$-$(date +%s)
run() {  # run NAME [flags...]
  local name=$1
  shift
  local plot=()
  if command -v gnuplot > /dev/null; then plot=(--heatmap "$OUT/$name.png"); fi
  echo "== $name"
  "$BIN/yoco-eval" niah --router "$ROUTER" --cache-salt "$salt-$name" --json "$OUT/$name.json" \
    "${plot[@]}" "$@"
}

run uncached "$@" || failures=$((failures + 1))
run precached --precache "$@" || failures=$((failures + 1))

# The third run loses a decode worker once a quarter of its questions are answered.
questions=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(sum(c["n"] for c in r["cells"]))' "$OUT/uncached.json")
start=$(counter yoco_router_requests_total)
retries_before=$(counter yoco_router_retries_total)
run killed "$@" &
eval_pid=$!
while kill -0 "$eval_pid" 2> /dev/null; do
  if [ $(($(counter yoco_router_requests_total) - start)) -ge $((questions / 4)) ]; then
    kill -9 "$victim"
    echo "killed decode worker $DECODE1 after $((questions / 4)) of $questions questions"
    break
  fi
  sleep 0.05
done
wait "$eval_pid" || failures=$((failures + 1))
retries=$(($(counter yoco_router_retries_total) - retries_before))
echo "the router retried $retries requests after the kill"

echo "== agreement"
for other in precached killed; do
  if "$BIN/yoco-eval" compare "$OUT/uncached.json" "$OUT/$other.json"; then
    echo "ok   uncached = $other, answer for answer"
  else
    echo "FAIL uncached and $other differ"
    failures=$((failures + 1))
  fi
done
# Every pre-cached document of at least one 128-token block was a hit.
if python3 - "$OUT/precached.json" << 'PY'
import json, sys
r = json.load(open(sys.argv[1]))
missed = [a for c in r["cells"] for a in c["answers"]
          if a["document_bytes"] + 1 >= 128 and a["cached_prompt_tokens"] == 0]
sys.exit(1 if missed else 0)
PY
then
  echo "ok   every pre-cached document was a prefix-cache hit"
else
  echo "FAIL some pre-cached documents missed the prefix cache"
  failures=$((failures + 1))
fi
exit $((failures > 0))
