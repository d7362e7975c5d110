#!/usr/bin/env bash
# A hung decode worker loses no stream: the worker carrying a long stream is stopped (SIGSTOP,
# its connections stay open) and the stream goes on from the other decode worker, ending long
# before the client's deadline (without the move it would wait for it, the worker stopped for
# good), with exactly the in-process engine's tokens (none lost, none twice); the stopped
# worker, let go again, serves new requests. Also: yoco-cli --prompt-file.
#   stall_test.sh BIN_DIR MODEL_DIR
set -euo pipefail
BIN=$1
MODEL=$2
export UCX_WARN_UNUSED_ENV_VARS=n
base=$((38000 + (RANDOM % 200) * 10))  # 38000-39999: below the ephemeral ports, apart from the other tests
ROUTER=127.0.0.1:$base PREFILL=127.0.0.1:$((base + 1)) DECODE1=127.0.0.1:$((base + 2))
DECODE2=127.0.0.1:$((base + 3)) METRICS=127.0.0.1:$((base + 4)) METRICS1=127.0.0.1:$((base + 5))
METRICS2=127.0.0.1:$((base + 6))
log=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill -CONT "$p" 2> /dev/null; kill -9 "$p" 2> /dev/null || true; done; rm -rf "$log"' EXIT
failures=0

"$BIN/yoco-decode" --listen "$DECODE1" --metrics-listen "$METRICS1" --model "$MODEL" --tls tcp \
  --net-devices lo --threads 1 2> "$log/d1" &
d1=$!; pids+=("$d1")
"$BIN/yoco-decode" --listen "$DECODE2" --metrics-listen "$METRICS2" --model "$MODEL" --tls tcp \
  --net-devices lo --threads 1 2> "$log/d2" &
d2=$!; pids+=("$d2")
"$BIN/yoco-prefill" --listen "$PREFILL" --model "$MODEL" --tls tcp --net-devices lo --threads 1 \
  2> "$log/p" &
pids+=($!)
"$BIN/yoco-router" --listen "$ROUTER" --model "$MODEL" --prefill "$PREFILL" \
  --decode "$DECODE1,$DECODE2" --probe-interval-ms 200 --metrics-listen "$METRICS" 2> "$log/r" &
pids+=($!)
for i in $(seq 1 100); do
  timeout 20 "$BIN/yoco-cli" --router "$ROUTER" generate --tokens 0,5 --max-new-tokens 1 \
    > /dev/null 2>&1 && break
  sleep 0.2
  if [ "$i" = 100 ]; then echo "services did not come up"; cat "$log"/*; exit 1; fi
done
sleep 0.5  # both decode workers probed healthy

prompt=0,17,5,99,254,31,8,44,3,120
want=$("$BIN/yoco" generate --model "$MODEL" --tokens "$prompt" --max-new-tokens 1500 --temperature 0.9 --top-k 50 --seed 7)
timeout 120 "$BIN/yoco-cli" --router "$ROUTER" generate --tokens "$prompt" --max-new-tokens 1500 \
  --temperature 0.9 --top-k 50 --seed 7 > "$log/out" 2> "$log/err" &
cli=$!
active() { curl -s "http://$1/metrics" | sed -n 's/^yoco_decode_active_sequences \([0-9]*\).*/\1/p'; }
victim=
for i in $(seq 1 500); do  # until the stream runs on a decode worker
  if [ "$(active "$METRICS1")" = 1 ]; then victim=$d1; break; fi
  if [ "$(active "$METRICS2")" = 1 ]; then victim=$d2; break; fi
  sleep 0.01
done
if [ -z "$victim" ]; then echo "FAIL the stream never reached a decode worker"; exit 1; fi
kill -STOP "$victim"
stopped=$(date +%s%N)
wait "$cli" && st=0 || st=$?
ms=$((($(date +%s%N) - stopped) / 1000000))
got=$(cat "$log/out")
stalled=$(curl -s "http://$METRICS/metrics" | sed -n 's/^yoco_router_stalled_streams_total \(.*\)$/\1/p')
if [ "$st" = 0 ] && [ "$got" = "$want" ] && [ "${stalled%.*}" -ge 1 ] && [ "$ms" -lt 60000 ]; then
  echo "ok   stream-moves-off-a-stopped-worker (done $ms ms after the stop, tokens exact)"
else
  echo "FAIL stream-moves-off-a-stopped-worker: exit $st after $ms ms, stalled=$stalled," \
    "$(wc -c < "$log/out") bytes: $(tail -c 300 "$log/err")"
  failures=$((failures + 1))
fi

kill -CONT "$victim"
sleep 1  # probed healthy again
ok=0
for i in 1 2 3 4; do  # both workers serve again (the router alternates by load)
  out=$(timeout 30 "$BIN/yoco-cli" --router "$ROUTER" generate --tokens 0,5,9 --max-new-tokens 8) \
    && ok=$((ok + 1))
done
if [ "$ok" = 4 ]; then echo "ok   served-after-the-worker-came-back"
else echo "FAIL served-after-the-worker-came-back: $ok of 4"; failures=$((failures + 1)); fi

# A long prompt from a file (yoco-cli --prompt-file): the tokens of the same text given inline;
# a FIFO is refused at once instead of blocking the client.
printf 'Once upon a time, in a cluster far away, ' > "$log/prompt.txt"
inline=$(timeout 30 "$BIN/yoco-cli" --router "$ROUTER" generate --prompt "$(cat "$log/prompt.txt")" \
  --max-new-tokens 12 | od -An -tx1)
from_file=$(timeout 30 "$BIN/yoco-cli" --router "$ROUTER" generate --prompt-file "$log/prompt.txt" \
  --max-new-tokens 12 | od -An -tx1)
mkfifo "$log/fifo"
fifo=$(timeout 10 "$BIN/yoco-cli" --router "$ROUTER" generate --prompt-file "$log/fifo" 2>&1) || true
if [ -n "$inline" ] && [ "$inline" = "$from_file" ] && [[ "$fifo" == *"not a regular file"* ]]; then
  echo "ok   prompt-file"
else
  echo "FAIL prompt-file: inline $inline file $from_file fifo $fifo"; failures=$((failures + 1))
fi

[ "$failures" = 0 ] && echo "3/3 checks passed"
[ "$failures" = 0 ]
