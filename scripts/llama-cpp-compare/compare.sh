#!/bin/bash
# Batch-1 decode of llama.cpp (`llama-bench`) and of `yoco bench` on this machine, alternating,
# and the two ratios the README reports: YOCO bf16 and q8 against llama.cpp's f16 `tg128`.
# llama.cpp does not enter the repository: npm's node-llama-cpp package carries its source as a
# git bundle, which this script builds here with CMake (llama-bench alone, about 5 minutes on 2
# cores; needs npm, git, cmake, ninja, g++). The model is a Llama GGUF of `yoco bench`'s
# Transformer shape with random weights (write_gguf.py): speed does not depend on them.
#
#   scripts/llama-cpp-compare/compare.sh [--yoco build/bin/yoco] [--threads 2] [--context 2048]
#                                        [--passes 3] [--work DIR]
#
# Each pass runs llama-bench (f16 and Q8_0, `-p 0 -n 128` at depth 0 and at the context, 3
# repetitions) and then `yoco bench` at batch 1 (bf16 and q8 weights, bf16 K/V, the context);
# results go to DIR (default ~/.cache/yoco-llama-cpp) as JSON, the table to stdout.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
yoco="$here/../../build/bin/yoco"
threads=2 context=2048 passes=3
work="${XDG_CACHE_HOME:-$HOME/.cache}/yoco-llama-cpp"
node_llama_cpp_version=3.22.1  # llama.cpp de3ff81 (node-llama-cpp's release v0.5.0)
while [ $# -gt 0 ]; do
  case "$1" in
    --yoco) yoco=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --context) context=$2; shift 2 ;;
    --passes) passes=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    *) echo "compare.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
if [ ! -x "$yoco" ]; then
  echo "compare.sh: no yoco binary at $yoco (build first, or --yoco)" >&2
  exit 2
fi
for tool in npm git cmake ninja python3; do
  if ! command -v "$tool" >/dev/null; then
    echo "compare.sh: needs $tool (apt-get install npm git cmake ninja-build g++ python3)" >&2
    exit 2
  fi
done
mkdir -p "$work"

run() {  # run LOG COMMAND...: the command's output to LOG, its tail to stderr if it fails
  local log=$1
  shift
  "$@" >"$log" 2>&1 || { tail -20 "$log" >&2; echo "compare.sh: failed: $*" >&2; exit 1; }
}

bench="$work/llama.cpp/build/bin/llama-bench"
if [ ! -x "$bench" ]; then
  (cd "$work" && npm pack --silent "node-llama-cpp@$node_llama_cpp_version" >/dev/null)
  tar -xzf "$work/node-llama-cpp-$node_llama_cpp_version.tgz" -C "$work" \
    package/llama/gitRelease.bundle
  rm -rf "$work/llama.cpp"
  git -c advice.detachedHead=false clone --quiet "$work/package/llama/gitRelease.bundle" \
    "$work/llama.cpp"
  run "$work/configure.log" cmake -S "$work/llama.cpp" -B "$work/llama.cpp/build" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF
  run "$work/build.log" cmake --build "$work/llama.cpp/build" --target llama-bench
fi
for type in f16 q8_0; do
  [ -f "$work/$type.gguf" ] || python3 "$here/write_gguf.py" --type "$type" --out "$work/$type.gguf"
done

for pass in $(seq 1 "$passes"); do
  echo "pass $pass of $passes" >&2
  "$bench" -m "$work/f16.gguf,$work/q8_0.gguf" -t "$threads" -p 0 -n 128 -d "0,$context" -r 3 \
    -o json >"$work/llama-$pass.json" 2>"$work/llama-$pass.log" ||
    { tail -20 "$work/llama-$pass.log" >&2; echo "compare.sh: llama-bench failed" >&2; exit 1; }
  for weights in bf16 q8; do
    run "$work/yoco-$weights-$pass.log" "$yoco" bench --threads "$threads" --prefill-lengths 16 \
      --decode-batches 1 --decode-context "$context" --weights "$weights" --kv-dtype bf16 \
      --json "$work/yoco-$weights-$pass.json"
  done
done
python3 "$here/summarize.py" --work "$work" --passes "$passes" --context "$context"
