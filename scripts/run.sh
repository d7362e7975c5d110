#!/usr/bin/env bash
# The main command: installs, builds, and starts the local serving stack on loopback (one
# router, one prefill worker, one decode worker) with the document-QA model shipped in
# models/yoco-docqa-tiny (YOCO_MODEL=DIR serves another, e.g. build/models/yoco-tiny, the
# random-weight model the build makes) and a prefix cache whose disk tier is build/cache.
# Demo: pre-caches a generated document and asks two questions about it, printing the answers;
# then prints how to send more, and serves until Ctrl-C, which stops everything.
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
model=${YOCO_MODEL:-models/yoco-docqa-tiny}
[ -f "$model/model.safetensors" ] || model=build/models/yoco-tiny
name=$(basename "$model")
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
  --http-listen "$http" --served-model-name "$name" &
pids+=($!)

cli=(build/bin/yoco-cli --router "$router" generate --tokens 0,17,5,99,254,31 --max-new-tokens 16 --stats)
for i in $(seq 1 100); do
  if "${cli[@]}" > /dev/null 2>&1; then break; fi
  if [ "$i" = 100 ]; then echo "the services did not start" >&2; exit 1; fi
  sleep 0.2
done
if [ -f "$model/docqa_task.json" ]; then
  # The demo the model was trained for: a generated document (the needle-in-a-haystack task's
  # generator), pre-cached once, then two questions whose prompts start with it (cache hits).
  doc=build/demo-document.json
  build/bin/yoco-eval document --task "$model/docqa_task.json" --seed 7 --length 600 \
    --questions 2 > "$doc"
  field() { python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print(eval(sys.argv[2]), end="")' "$doc" "$1"; }
  field 'd["document"]' > build/demo-document.txt
  echo "+ build/bin/yoco-cli --router $router precache --file build/demo-document.txt" >&2
  build/bin/yoco-cli --router "$router" precache --file build/demo-document.txt
  echo "Document (build/demo-document.txt):"
  fold -s -w 100 build/demo-document.txt
  echo
  for i in 0 1; do
    suffix=$(field "d[\"questions\"][$i][\"prompt_suffix\"]")
    expected=$(field "d[\"questions\"][$i][\"answer\"]")
    echo "${suffix#$'\n'}" | head -1
    answer=$(build/bin/yoco-cli --router "$router" generate \
      --prompt "$(cat build/demo-document.txt)$suffix" --max-new-tokens 24 --stop-string $'\n')
    echo "A:${answer%$'\n'}    (the document says: $expected)"
  done
else
  echo "+ ${cli[*]}" >&2
  "${cli[@]}"
fi
body='{"prompt": "Hello", "max_tokens": 16, "seed": 1}'
if [ -f "$model/docqa_task.json" ]; then
  body='{"prompt": "Lena Vogel lives in Oslo.\nQ: Where does Lena Vogel live?\nA:", "max_tokens": 8, "stop": ["\n"]}'
fi
completion=(curl -s "http://$http/v1/completions" -H "Content-Type: application/json" -d "$body")
echo "+ ${completion[*]}" >&2
"${completion[@]}"
echo
if [ -f "$model/chat_template.json" ]; then
  http_example="  curl -N http://$http/v1/chat/completions -H \"Content-Type: application/json\" \\
    -d '{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], \"max_tokens\": 16, \"stream\": true}'"
else  # no chat template: completions only
  http_example="  curl -N http://$http/v1/completions -H \"Content-Type: application/json\" \\
    -d '{\"prompt\": \"Lena Vogel lives in Oslo.\\nQ: Where does Lena Vogel live?\\nA:\", \"max_tokens\": 8, \"stop\": [\"\\n\"]}'"
fi
cat >&2 << MSG

YOCO Serve is running: router $router (gRPC) and http://$http (OpenAI-compatible HTTP API),
prefill worker $prefill, decode worker $decode.
Send requests with:
  build/bin/yoco-cli --router $router generate --tokens 0,17,5 --max-new-tokens 16 --stats
  build/bin/yoco-cli --router $router generate --prompt "Hello" --max-new-tokens 16
Pre-cache a document (up to the model's max_seq_len bytes; kept in memory and in build/cache),
then ask about it (the stats show cached_prompt_tokens):
  build/bin/yoco-cli --router $router precache --file DOC.txt --pin
  build/bin/yoco-cli --router $router generate --prompt "\$(cat DOC.txt)
Q: What is the code of Alice Adler?
A:" --max-new-tokens 16 --stop-string '
' --stats
  build/bin/yoco-cli --router $router list-cache
Over HTTP, as any OpenAI client (base URL http://$http/v1, model "$name"):
$http_example
Ctrl-C stops everything.
MSG
wait
