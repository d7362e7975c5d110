#!/bin/bash
# Whether one tenant's flood starves another's interactive requests. One stack on loopback over
# MODEL (a router with --tenants, one prefill and one decode worker that batches 8): tenant
# "quiet" sends one request at a time (256-token prompts, 16 tokens out) alone, then while tenant
# "flood" keeps 48 long requests (512 tokens out) in flight; the workers' queues order waiting
# requests by tenant (FairOrder), so the quiet tenant's TTFT should stay near its unloaded value.
# The two phases alternate ROUNDS times (the machine's own speed drifts within minutes) and each
# phase's TTFTs are pooled from every round's per-request records. The control runs the quiet
# client under the flood's tenant once at the end: arrival order, as before per-tenant ordering.
#
# SPLIT=1 gives the decode worker (and the flood's client) one half of the CPUs and the router,
# the prefill worker and the quiet client the other, as separate nodes would: on a 2-core machine
# the services otherwise share both cores, and the quiet request's prefill runs beside the flood's
# decode batch.
#
# FLOOD_IN / FLOOD_OUT set the flood's prompt and answer lengths (256 / 512: a flood that waits
# for decode seats; 2048 / 16: one that keeps the prefill engine busy).
#   [SPLIT=1] [ROUNDS=3] [FLOOD_IN=256] [FLOOD_OUT=512] scripts/tenant-fairness.sh [MODEL] [REQUESTS]
set -euo pipefail
cd "$(dirname "$0")/.."
B=build/bin
M=${1:-build/models/yoco-tiny} REQUESTS=${2:-60}
ROUNDS=${ROUNDS:-3}
FLOOD_IN=${FLOOD_IN:-256} FLOOD_OUT=${FLOOD_OUT:-512}
export UCX_WARN_UNUSED_ENV_VARS=n
log=$(mktemp -d)
pids=()
trap '{ kill -9 "${pids[@]}"; wait; } 2>/dev/null; rm -rf "$log"' EXIT

serving=() decoding=()  # command prefixes: which CPUs each side runs on
if [ "${SPLIT:-0}" = 1 ]; then
  n=$(nproc)
  if [ "$n" -lt 2 ]; then
    echo "SPLIT=1 needs two CPUs or more" >&2
    exit 1
  fi
  serving=(taskset -c "0-$((n / 2 - 1))") decoding=(taskset -c "$((n / 2))-$((n - 1))")
fi

echo "quiet-tenant-token-0123456789" > "$log/quiet.token"
echo "flood-tenant-token-0123456789" > "$log/flood.token"
cat > "$log/tenants.json" <<JSON
{"tenants": {"quiet": {"tokens": ["quiet-tenant-token-0123456789"]},
             "flood": {"tokens": ["flood-tenant-token-0123456789"]}}}
JSON
base=$((47000 + RANDOM % 1000 * 8))
P=127.0.0.1:$((base + 1)) D=127.0.0.1:$((base + 2)) R=127.0.0.1:$base
"${decoding[@]}" $B/yoco-decode --listen $D --model "$M" --tls tcp --net-devices lo \
  --max-batch 8 --max-queue 256 2>"$log/decode" &
pids+=($!)
"${serving[@]}" $B/yoco-prefill --listen $P --model "$M" --tls tcp --net-devices lo \
  --metrics-listen 127.0.0.1:0 \
  2>"$log/prefill" &
pids+=($!)
"${serving[@]}" $B/yoco-router --listen $R --model "$M" --prefill $P --decode $D \
  --tenants "$log/tenants.json" --local-prefill-max-tokens 0 2>"$log/router" &
pids+=($!)
for _ in $(seq 1 300); do
  $B/yoco-cli --router $R --token-file "$log/quiet.token" generate --tokens 0,5 \
    --max-new-tokens 1 >/dev/null 2>&1 && break
  sleep 0.2
done

quiet() {  # quiet TOKEN REQUESTS OUT_JSONL: the interactive client, one request at a time
  "${serving[@]}" $B/yoco-loadtest --router $R --token-file "$1" --workload random \
    --input-tokens 256 --output-tokens 16 --requests "$2" --concurrency 1 --seed 2 --quiet \
    --jsonl "$3" > /dev/null
}
flood_start() {  # the flood: 48 long requests in flight until killed
  "${decoding[@]}" $B/yoco-loadtest --router $R --token-file "$log/flood.token" \
    --workload random --input-tokens "$FLOOD_IN" --output-tokens "$FLOOD_OUT" --requests 0 \
    --duration-seconds 600 --concurrency 48 --seed 3 --quiet > /dev/null 2>&1 &
  flood=$!
  sleep 5  # the queues fill
}
flood_stop() { kill "$flood" 2>/dev/null; wait "$flood" 2>/dev/null || true; sleep 3; }

metrics=$(grep -o "metrics on port [0-9]*" "$log/prefill" | grep -o "[0-9]*$")
yields() {  # times the prefill worker's engine was handed over mid-prompt so far
  curl -s "http://127.0.0.1:$metrics/metrics" |
    awk '/^yoco_prefill_engine_yields_total/ { print int($2) }'
}
fair_yields=0
for r in $(seq 1 "$ROUNDS"); do
  quiet "$log/quiet.token" "$REQUESTS" "$log/alone.$r.jsonl"
  flood_start
  before=$(yields)
  quiet "$log/quiet.token" "$REQUESTS" "$log/fair.$r.jsonl"
  fair_yields=$((fair_yields + $(yields) - before))
  flood_stop
done
echo "engine hand-overs between blocks while the quiet tenant ran under the flood: $fair_yields"
# Under the flood's tenant the quiet client waits for decode seats behind the flood's long
# answers (seconds a request), so the control runs a sixth as many requests.
flood_start
quiet "$log/flood.token" $((REQUESTS / 6 > 0 ? REQUESTS / 6 : 1)) "$log/same_tenant.1.jsonl"
flood_stop

python3 - "$log" "$ROUNDS" <<'PY'
import glob, json, math, sys
d, rounds = sys.argv[1], int(sys.argv[2])

def records(pattern):
    out = []
    for path in sorted(glob.glob(f"{d}/{pattern}")):
        out += [json.loads(line) for line in open(path) if line.strip()]
    bad = [r for r in out if r["status"] != "OK"]
    assert not bad, f"{pattern}: {len(bad)} requests failed, e.g. {bad[0]}"
    return out

def pct(values, q):  # nearest rank
    v = sorted(values)
    return v[max(0, math.ceil(q / 100 * len(v)) - 1)]

def line(name, recs):
    ttft = [r["ttft_ms"] for r in recs]
    tpot = [r["tpot_ms"] for r in recs if r["tpot_ms"] is not None]
    print(f"{name:12s} {len(ttft):4d} requests  TTFT p50 {pct(ttft, 50):8.1f} ms  "
          f"p99 {pct(ttft, 99):8.1f} ms  TPOT p50 {pct(tpot, 50):6.1f} ms")
    # Where the slowest tenth's first tokens waited: the router's own TTFT and the prefill
    # worker's compute and transfer (each request's), against the median request.
    parts = {"router": lambda r: r["server"]["ttft_ms"],
             "prefill": lambda r: r["server"]["prefill_ms"],
             "transfer": lambda r: r["server"]["transfer_ms"]}
    slow = sorted(recs, key=lambda r: r["ttft_ms"])[-max(1, len(recs) // 10):]
    print(" " * 13 + "  ".join(
        f"{k} p50 {pct([f(r) for r in recs], 50):.1f} slowest tenth {sum(f(r) for r in slow) / len(slow):.1f}"
        for k, f in parts.items()) + " ms")
    return pct(ttft, 99)

for r in range(1, rounds + 1):
    a = [x["ttft_ms"] for x in records(f"alone.{r}.jsonl")]
    f = [x["ttft_ms"] for x in records(f"fair.{r}.jsonl")]
    print(f"round {r}: TTFT p99 alone {pct(a, 99):.1f} ms, under the flood {pct(f, 99):.1f} ms "
          f"({pct(f, 99) / pct(a, 99):.2f}x)")
alone = line("alone", records("alone.*.jsonl"))
fair = line("fair", records("fair.*.jsonl"))
same = line("same_tenant", records("same_tenant.*.jsonl"))
print(f"p99 under the flood / alone: own tenant {fair / alone:.2f}, "
      f"the flood's tenant {same / alone:.2f}")
PY
