#!/usr/bin/env bash
# The main command: installs, builds, and starts the local serving stack on loopback (one
# router, one prefill worker, one decode worker) with the small model the build makes
# (build/models/yoco-tiny) and a prefix cache whose disk tier is build/cache. Sends one request
# to show it works, prints how to send more, and serves until Ctrl-C, which stops everything.
# Ports: YOCO_PORT (router's gRPC API, default 50051), the next two (workers) and the one after
# (the router's OpenAI-compatible HTTP API).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
mkdir -p build
bash scripts/build.sh > build/run-build.log 2>&1 || { cat build/run-build.log; exit 1; }

port=${YOCO_PORT:-50051}
router=127.0.0.1:$port prefill=127.0.0.1:$((port + 1)) decode=127.0.0.1:$((port + 2))
http=127.0.0.1:$((port + 3))
model=build/models/yoco-tiny
export UCX_WARN_UNUSED_ENV_VARS=n
pids=()
stop() {
  trap - INT TERM EXIT
  echo "stopping..." >&2
  for p in "${pids[@]}"; do kill "$p" 2> /dev/null || true; done
  wait 2> /dev/null || true
}
trap 'stop; exit 0' INT TERM
trap stop EXIT

build/bin/yoco-decode --listen "$decode" --model "$model" --tls tcp --net-devices lo &
pids+=($!)
build/bin/yoco-prefill --listen "$prefill" --model "$model" --tls tcp --net-devices lo \
  --cache-dir build/cache &
pids+=($!)
build/bin/yoco-router --listen "$router" --model "$model" --prefill "$prefill" --decode "$decode" \
  --http-listen "$http" &
pids+=($!)

cli=(build/bin/yoco-cli --router "$router" generate --tokens 0,17,5,99,254,31 --max-new-tokens 16 --stats)
for i in $(seq 1 100); do
  if "${cli[@]}" > /dev/null 2>&1; then break; fi
  if [ "$i" = 100 ]; then echo "the services did not start" >&2; exit 1; fi
  sleep 0.2
done
echo "+ ${cli[*]}" >&2
"${cli[@]}"
completion=(curl -s "http://$http/v1/completions" -H "Content-Type: application/json"
            -d '{"prompt": "Hello", "max_tokens": 16, "seed": 1}')
echo "+ ${completion[*]}" >&2
"${completion[@]}"
echo
cat >&2 << MSG

YOCO Serve is running: router $router (gRPC) and http://$http (OpenAI-compatible HTTP API),
prefill worker $prefill, decode worker $decode.
Send requests with:
  build/bin/yoco-cli --router $router generate --tokens 0,17,5 --max-new-tokens 16 --stats
  build/bin/yoco-cli --router $router generate --prompt "Hello" --max-new-tokens 16
Pre-cache a document (this model: up to 4096 bytes; kept in memory and in build/cache), then
ask about it (the stats show cached_prompt_tokens):
  build/bin/yoco-cli --router $router precache --file DOC.txt --pin
  build/bin/yoco-cli --router $router generate --prompt "\$(cat DOC.txt) Q: ..." --max-new-tokens 16 --stats
  build/bin/yoco-cli --router $router list-cache
Over HTTP, as any OpenAI client (base URL http://$http/v1, model "yoco-tiny"):
  curl -N http://$http/v1/chat/completions -H "Content-Type: application/json" \\
    -d '{"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 16, "stream": true}'
Ctrl-C stops everything.
MSG
wait
