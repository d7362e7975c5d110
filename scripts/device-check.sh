#!/bin/bash
# The GPU check of the CUDA backend: the CUDA kernel tests, the engine tests (the golden sets
# and the GPU-against-CPU checks included) and `yoco bench --backend cuda`, ending with one
# short table. Three ways to run it:
#   scripts/device-check.sh                build-cuda/ here, then run: a machine with a GPU and
#                                          the project's build dependencies (scripts/setup.sh)
#   scripts/device-check.sh bundle DIR     build here (no GPU needed) and pack the binaries with
#                                          the shared libraries they need into DIR
#   scripts/device-check.sh run DIR        run a bundle on a GPU machine that lacks the build
#                                          dependencies (it needs the CUDA 13 driver and cuBLAS)
# BENCH_ARGS adds flags to the benchmark (e.g. a shorter run: --prefill-lengths 32768).
# Results go to $OUT (or DIR/results): test XML, bench.json, the log.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-all}
if [ -d /usr/local/cuda/bin ]; then export PATH="/usr/local/cuda/bin:$PATH"; fi

build() {  # build DIR
  cmake -S . -B "$1" -G Ninja -DCMAKE_BUILD_TYPE=Release -DYOCO_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS:-90}" >/dev/null
  cmake --build "$1" --parallel "$(nproc)" --target kernels_cuda_test engine_test yoco
}

bundle() {  # bundle DIR
  local dir=$1
  build build-cuda
  rm -rf "$dir" && mkdir -p "$dir/bin" "$dir/lib"
  cp build-cuda/bin/kernels_cuda_test build-cuda/bin/engine_test build-cuda/bin/yoco "$dir/bin/"
  # Every shared library the binaries load except the C runtime, the driver and cuBLAS (the
  # GPU machine's CUDA installation has those; cuBLASLt alone is 540 MB).
  ldd "$dir"/bin/* | awk '/=> \//{print $3}' | sort -u |
    grep -Ev '/(libc|libm|libpthread|libdl|librt|ld-linux[^/]*|libgcc_s|libstdc\+\+|libcuda|libcublas|libcublasLt)\.so' |
    xargs -r cp -L -t "$dir/lib/"
  strip "$dir"/bin/* "$dir"/lib/*.so* 2>/dev/null || true
  du -sh "$dir"
}

run() {  # run DIR
  local dir=$1
  local out=${OUT:-$dir/results}
  mkdir -p "$out"
  local cublas
  cublas=$(find /usr/local/cuda* /usr/lib /opt -name 'libcublas.so.13*' 2>/dev/null | head -1 || true)
  export LD_LIBRARY_PATH="$dir/lib${cublas:+:$(dirname "$cublas")}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export YOCO_TEST_DATA_DIR="$PWD/tests/data" OMP_WAIT_POLICY=passive
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm --format=csv,noheader || true
  local status=0
  timeout 300 "$dir/bin/kernels_cuda_test" --gtest_output="xml:$out/kernels_cuda_test.xml" \
    >"$out/kernels_cuda_test.log" 2>&1 || status=1
  timeout 300 "$dir/bin/engine_test" --gtest_output="xml:$out/engine_test.xml" \
    >"$out/engine_test.log" 2>&1 || status=1
  grep -E '^\[  (FAILED|SKIPPED) |^bf16|Failure|error' "$out"/*_test.log | head -40 || true
  # shellcheck disable=SC2086
  timeout 420 "$dir/bin/yoco" bench --backend cuda --json "$out/bench.json" ${BENCH_ARGS:-} \
    >"$out/bench.txt" 2>"$out/bench.log" || { status=1; tail -5 "$out/bench.log"; }
  echo
  echo "== CUDA backend check =="
  for t in kernels_cuda_test engine_test; do
    printf '%-18s %s\n' "$t" "$(grep -E '^\[  (PASSED|FAILED|SKIPPED) +\]' "$out/$t.log" |
      tr -s ' ' | tr '\n' ' ')"
  done
  cat "$out/bench.txt" 2>/dev/null || true
  return $status
}

case "$mode" in
  bundle) bundle "$2" ;;
  run) run "$2" ;;
  all)
    build build-cuda
    mkdir -p build-cuda/lib
    run build-cuda
    ;;
  *) echo "usage: $0 [bundle DIR | run DIR]" >&2; exit 2 ;;
esac
