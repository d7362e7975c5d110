#!/bin/bash
# Whether one tenant's long pre-cache holds up another tenant's chat. One stack on loopback (a
# router with --tenants, one prefill and one decode worker) over the tiny shape with
# max_seq_len 65536: tenant "chat" sends 30 short requests one at a time (256-token prompts, 4
# tokens out) alone, then while tenant "documents" pre-caches a new 60K-token document at the
# same priority; ROUNDS times. A prefill holding the engine hands it to another tenant whose
# share is behind between its 128-token blocks, so a chat request should wait one block, not
# the rest of the document.
#   [ROUNDS=3] [PREFILL=path/to/yoco-prefill] scripts/document-beside-chat.sh
set -euo pipefail
cd "$(dirname "$0")/.."
B=build/bin
ROUNDS=${ROUNDS:-3}
PREFILL=${PREFILL:-$B/yoco-prefill}
export UCX_WARN_UNUSED_ENV_VARS=n
log=$(mktemp -d)
pids=()
trap '{ kill -9 "${pids[@]}"; wait; } 2>/dev/null; rm -rf "$log"' EXIT

python3 - "$log" "$ROUNDS" <<'PY'
import json, random, sys
d = sys.argv[1]
params = {"dim": 256, "hidden_dim": 512, "max_seq_len": 65536, "n_attn_heads": 4,
          "n_attn_kv_heads": 2, "n_layers": 4, "n_self_heads": 2, "norm_eps": 1e-05,
          "rope_theta": 10000.0, "vocab_size": 512}
json.dump(params, open(f"{d}/params.json", "w"))
for r in range(1, int(sys.argv[2]) + 1):
    random.seed(r)
    open(f"{d}/doc{r}.txt", "w").write(
        "".join(random.choice("abcdefghijklmnopqrstuvwxyz ,.") for _ in range(60000)))
PY
$B/yoco init-model --params "$log/params.json" --seed 1 --out "$log/model" > /dev/null
M=$log/model
echo "docs-token-0123456789abcdef" > "$log/documents.token"
echo "chat-token-0123456789abcdef" > "$log/chat.token"
cat > "$log/tenants.json" <<JSON
{"tenants": {"documents": {"tokens": ["docs-token-0123456789abcdef"]},
             "chat": {"tokens": ["chat-token-0123456789abcdef"]}}}
JSON
base=$((41000 + RANDOM % 1000 * 8))
P=127.0.0.1:$((base + 1)) D=127.0.0.1:$((base + 2)) R=127.0.0.1:$base
$B/yoco-decode --listen $D --model "$M" --tls tcp --net-devices lo 2>"$log/decode" &
pids+=($!)
"$PREFILL" --listen $P --model "$M" --tls tcp --net-devices lo --cache-mb 2048 2>"$log/prefill" &
pids+=($!)
$B/yoco-router --listen $R --model "$M" --prefill $P --decode $D --tenants "$log/tenants.json" \
  --local-prefill-max-tokens 0 2>"$log/router" &
pids+=($!)
for _ in $(seq 1 300); do
  $B/yoco-cli --router $R --token-file "$log/chat.token" generate --tokens 0,5 \
    --max-new-tokens 1 >/dev/null 2>&1 && break
  sleep 0.2
done

chat() {  # chat SEED OUT_JSONL
  $B/yoco-loadtest --router $R --token-file "$log/chat.token" --workload random \
    --input-tokens 256 --output-tokens 4 --requests 30 --concurrency 1 --seed "$1" --quiet \
    --jsonl "$2" > /dev/null
}
for r in $(seq 1 "$ROUNDS"); do
  chat "$r" "$log/alone.$r.jsonl"
  start=$(date +%s.%N)
  (
    $B/yoco-cli --router $R --token-file "$log/documents.token" precache \
      --file "$log/doc$r.txt" > "$log/precache.$r.json"
    date +%s.%N > "$log/precache.$r.end"
  ) &
  precache=$!
  sleep 0.5  # the document's prefill is under way
  chat $((r + 100)) "$log/during.$r.jsonl"
  chat_end=$(date +%s.%N)
  wait "$precache"
  end=$(cat "$log/precache.$r.end")
  cached=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["cached_tokens"])' \
    "$log/precache.$r.json")
  if [ "$cached" -lt 59000 ]; then
    echo "round $r: the document was not cached: $(cat "$log/precache.$r.json")" >&2
    exit 1
  fi
  echo "round $r: the pre-cache took $(python3 -c "print(f'{$end - $start:.2f}')") s," \
    "the chat requests ended $(python3 -c "print(f'{$chat_end - $start:.2f}')") s after it began"
done

python3 - "$log" <<'PY'
import glob, json, math, sys
d = sys.argv[1]

def pct(values, q):  # nearest rank
    v = sorted(values)
    return v[max(0, math.ceil(q / 100 * len(v)) - 1)]

for phase in ("alone", "during"):
    ttft = [json.loads(line)["ttft_ms"] for path in sorted(glob.glob(f"{d}/{phase}.*.jsonl"))
            for line in open(path) if line.strip()]
    print(f"chat {phase:7s} {len(ttft):3d} requests  TTFT p50 {pct(ttft, 50):7.1f} ms  "
          f"p99 {pct(ttft, 99):7.1f} ms  max {max(ttft):7.1f} ms")
PY
