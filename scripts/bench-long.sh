#!/bin/bash
# One long document, many questions, through the whole stack on loopback: router + one prefill
# and one decode worker over MODEL, a DOC_BYTES-byte document (one token per byte) pre-cached and
# pinned, then:
#   - a question on it whose bundle must ship the document's K/V (the decode worker never saw it),
#   - three more (the decode worker holds the document: only the question's rows ship),
#   - one question of 32 tokens alone, then CONCURRENT at once (32 tokens each): wall time and
#     the decode worker's peak RSS,
#   - with MISS=1, one question on another document of the same length (a miss).
# With PREFAULT=1 both workers start with --prefault (bundle buffers and the decode worker's
# resident K/V touched at start, as a production worker would run); without it the first
# bundles go through fresh memory. PART_MB sets the prefill worker's --bundle-part-mb (0: whole
# bundles); KEEP_LOG=DIR keeps the workers' logs there.
# Each line gives TTFT, its prefill / transfer / decode parts (ms) and the bytes shipped.
#   scripts/bench-long.sh MODEL DOC_BYTES [CONCURRENT]
# MODEL's params.json sets the shape and max_seq_len (the document must fit).
set -euo pipefail
cd "$(dirname "$0")/.."
B=build/bin
M=$1 N=$2 CONC=${3:-8}
export UCX_WARN_UNUSED_ENV_VARS=n
base=$((47000 + RANDOM % 1000 * 4))
P=127.0.0.1:$((base + 1)) D=127.0.0.1:$((base + 2)) R=127.0.0.1:$base
log=${KEEP_LOG:-$(mktemp -d)}
$B/yoco-decode --listen $D --model "$M" --tls tcp --net-devices lo --memory-budget-mb 32768 \
  --resident-kv-mb 8192 --transfer-buffer-mb 2048 ${PREFAULT:+--prefault} 2>"$log/decode" &
dp=$!
$B/yoco-prefill --listen $P --model "$M" --tls tcp --net-devices lo --cache-mb 65536 \
  --transfer-buffer-mb 2048 ${PREFAULT:+--prefault} ${PART_MB:+--bundle-part-mb $PART_MB} \
  2>"$log/prefill" &
pp=$!
$B/yoco-router --listen $R --model "$M" --prefill $P --decode $D --probe-interval-ms 200 \
  --min-stall-ms 600000 2>"$log/router" &
rp=$!
trap 'kill -9 $dp $pp $rp 2>/dev/null; [ -n "${KEEP_LOG:-}" ] || rm -rf "$log"' EXIT
for _ in $(seq 1 600); do  # --prefault: seconds of touching memory first
  $B/yoco-cli --router $R generate --tokens 0,5 --max-new-tokens 1 >/dev/null 2>&1 && break
  sleep 0.2
done
text() { python3 -c "import random, sys; r = random.Random(int(sys.argv[1])); \
print(''.join(chr(r.randrange(97, 123)) for _ in range($N)), end='')" "$1"; }
rss_mb() { echo $(($(awk '/VmRSS/{print $2}' /proc/$dp/status) / 1024)); }
show() {
  python3 -c "import json, sys; s = json.load(open(sys.argv[1])); print('%-10s ttft %8.1f  \
prefill %8.1f  transfer %8.1f  decode %7.1f  cached %8d  shipped %11s' % (sys.argv[2], \
s['ttft_ms'], s.get('prefill_ms', 0), s.get('transfer_ms', 0), s.get('decode_ms', 0), \
s.get('cached_prompt_tokens', 0), s.get('transfer_bytes', 0)))" "$1" "$2"
}
ask() {  # ask PROMPT_FILE LABEL MAX_NEW
  $B/yoco-cli --router $R generate --prompt-file "$1" --max-new-tokens "$3" --stats \
    2>"$1.stats" >/dev/null
  show "$1.stats" "$2"
}
text 1 >"$log/doc"
start=$(date +%s%N)
$B/yoco-cli --router $R precache --file "$log/doc" --pin >/dev/null
echo "pre-cache $N tokens: $((($(date +%s%N) - start) / 1000000)) ms"
echo "decode worker RSS: $(rss_mb) MB"
for i in 1 2 3 4; do
  printf '%s Question number %d?' "$(cat "$log/doc")" $i >"$log/q$i"
  ask "$log/q$i" "question$i" 4
done
# The first question's bundle against UCX itself (UcxTransport and ucx_perftest) at its size,
# on the same loopback, in the same run.
python3 -c "import json, sys; s = json.load(open(sys.argv[1])); \
print(s.get('transfer_bytes', 0), s.get('transfer_ms', 0))" "$log/q1.stats" >"$log/q1.rate"
read -r bytes ms <"$log/q1.rate"
if [ "$bytes" -gt 0 ]; then
  UCX_NET_DEVICES=lo $B/yoco-transfer-bench --tls tcp --size "$bytes" --count 3 --perftest \
    >"$log/perf" 2>&1 || true
  python3 -c "import re, sys; t = open(sys.argv[1]).read(); m = re.search(r'ucx_perftest \
([0-9.]+) GB/s', t); b = float(sys.argv[2]) / float(sys.argv[3]) / 1e6; print('question1 \
bundle %.2f GB/s; %s' % (b, t.strip()) + ('; bundle / ucx_perftest %.0f%%' % (100 * b / \
float(m[1])) if m else ''))" "$log/perf" "$bytes" "$ms"
fi
echo "decode worker RSS: $(rss_mb) MB"
printf '%s One question alone?' "$(cat "$log/doc")" >"$log/alone"
ask "$log/alone" alone-x32 32
pids=()
for i in $(seq 1 "$CONC"); do
  printf '%s Concurrent question %d?' "$(cat "$log/doc")" "$i" >"$log/c$i"
done
start=$(date +%s%N)
for i in $(seq 1 "$CONC"); do
  $B/yoco-cli --router $R generate --prompt-file "$log/c$i" --max-new-tokens 32 --stats \
    2>"$log/c$i.stats" >/dev/null &
  pids+=($!)
done
peak=0
running() {
  for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && return 0; done
  return 1
}
while running; do
  r=$(rss_mb)
  [ "$r" -gt "$peak" ] && peak=$r
  sleep 0.1
done
wait "${pids[@]}"
echo "$CONC concurrent questions x 32 tokens: $((($(date +%s%N) - start) / 1000000)) ms," \
  "decode worker peak RSS $peak MB"
show "$log/c1.stats" concurrent1
if [ -n "${MISS:-}" ]; then
  text 2 >"$log/other"
  printf ' Question number 1?' >>"$log/other"
  ask "$log/other" miss 4
fi
