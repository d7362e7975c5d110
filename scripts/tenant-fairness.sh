#!/bin/bash
# Whether one tenant's flood starves another's interactive requests. One stack on loopback over
# MODEL (a router with --tenants, one prefill and one decode worker that batches 8): tenant
# "quiet" sends one request at a time (256-token prompts, 16 tokens out) alone, then while tenant
# "flood" keeps 48 long requests (512 tokens out) in flight; the workers' queues order waiting
# requests by tenant (FairOrder), so the quiet tenant's TTFT should stay near its unloaded value.
# The control runs the same two loads under one tenant (the quiet client using the flood's
# token): arrival order, as before per-tenant ordering. Prints TTFT p50/p99 of the quiet client
# in each case and the loaded/unloaded p99 ratios.
#   scripts/tenant-fairness.sh [MODEL] [REQUESTS]
set -euo pipefail
cd "$(dirname "$0")/.."
B=build/bin
M=${1:-build/models/yoco-tiny} REQUESTS=${2:-60}
export UCX_WARN_UNUSED_ENV_VARS=n
log=$(mktemp -d)
pids=()
trap '{ kill -9 "${pids[@]}"; wait; } 2>/dev/null; rm -rf "$log"' EXIT

echo "quiet-tenant-token-0123456789" > "$log/quiet.token"
echo "flood-tenant-token-0123456789" > "$log/flood.token"
cat > "$log/tenants.json" <<JSON
{"tenants": {"quiet": {"tokens": ["quiet-tenant-token-0123456789"]},
             "flood": {"tokens": ["flood-tenant-token-0123456789"]}}}
JSON
base=$((47000 + RANDOM % 1000 * 8))
P=127.0.0.1:$((base + 1)) D=127.0.0.1:$((base + 2)) R=127.0.0.1:$base
$B/yoco-decode --listen $D --model "$M" --tls tcp --net-devices lo --max-batch 8 \
  --max-queue 256 2>"$log/decode" &
pids+=($!)
$B/yoco-prefill --listen $P --model "$M" --tls tcp --net-devices lo 2>"$log/prefill" &
pids+=($!)
$B/yoco-router --listen $R --model "$M" --prefill $P --decode $D --tenants "$log/tenants.json" \
  --local-prefill-max-tokens 0 2>"$log/router" &
pids+=($!)
for _ in $(seq 1 300); do
  $B/yoco-cli --router $R --token-file "$log/quiet.token" generate --tokens 0,5 \
    --max-new-tokens 1 >/dev/null 2>&1 && break
  sleep 0.2
done

quiet() {  # quiet TOKEN OUT_JSON: the interactive client, one request at a time
  $B/yoco-loadtest --router $R --token-file "$1" --workload random --input-tokens 256 \
    --output-tokens 16 --requests "$REQUESTS" --concurrency 1 --seed 2 --quiet --json "$2" \
    > /dev/null
}
flood_start() {  # the flood: 48 long requests in flight until killed
  $B/yoco-loadtest --router $R --token-file "$log/flood.token" --workload random \
    --input-tokens 256 --output-tokens 512 --requests 0 --duration-seconds 600 \
    --concurrency 48 --seed 3 --quiet --json "$log/flood.json" > /dev/null 2>&1 &
  flood=$!
  sleep 5  # the queues fill
}
flood_stop() { kill "$flood" 2>/dev/null; wait "$flood" 2>/dev/null || true; sleep 3; }

quiet "$log/quiet.token" "$log/alone.json"
flood_start
quiet "$log/quiet.token" "$log/fair.json"
quiet "$log/flood.token" "$log/same_tenant.json"
flood_stop
python3 - "$log" <<'PY'
import json, sys
d = sys.argv[1]
runs = {k: json.load(open(f"{d}/{k}.json")) for k in ("alone", "fair", "same_tenant")}
for k, r in runs.items():
    assert r["ok"] == r["requests"], f"{k}: {r['requests'] - r['ok']} requests failed"
    print(f"{k:12s} TTFT p50 {r['ttft_ms']['p50']:8.1f} ms  p99 {r['ttft_ms']['p99']:8.1f} ms  "
          f"TPOT p50 {r['tpot_ms']['p50']:6.1f} ms")
alone = runs["alone"]["ttft_ms"]["p99"]
print(f"p99 under the flood / alone: own tenant {runs['fair']['ttft_ms']['p99'] / alone:.2f}, "
      f"the flood's tenant {runs['same_tenant']['ttft_ms']['p99'] / alone:.2f}")
PY
