#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, clang 14, ASan + UBSan) into build-fuzz/ and runs each
# for SECONDS (default 600) from its committed seed corpus (fuzz/corpus/<target>), then prints
# executions, coverage and corpus size per target. A crash stops the run; the input that caused
# it is in build-fuzz/artifacts/. CI runs this for 20 seconds per target.
#   scripts/fuzz.sh [SECONDS] [TARGET ...]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-600}
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(params_json_fuzz safetensors_fuzz state_bundle_fuzz snapshot_file_fuzz
           disk_tier_scan_fuzz transport_address_fuzz text_fuzz tiktoken_fuzz
           public_request_fuzz openai_request_fuzz json_schema_fuzz regex_fuzz)
fi
if [ -d /usr/local/cuda/bin ]; then export PATH="/usr/local/cuda/bin:$PATH"; fi
cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DYOCO_FUZZ=ON \
  -DYOCO_BUILD_TESTS=OFF -DYOCO_CUDA=OFF -DCMAKE_C_COMPILER=clang-14 \
  -DCMAKE_CXX_COMPILER=clang++-14 > build-fuzz.log 2>&1 || { cat build-fuzz.log; exit 1; }
cmake --build build-fuzz --parallel "$(nproc)" --target yoco_fuzzers >> build-fuzz.log 2>&1 ||
  { tail -n 50 build-fuzz.log; exit 1; }
rm -f build-fuzz.log
mkdir -p build-fuzz/artifacts
# One target per core at a time: each fuzzes on one thread, and CI's run of 12 targets x 20 s
# took 4 minutes one after another.
run_target() {
  local t=$1 corpus=build-fuzz/corpus/$1 log=build-fuzz/$1.log scratch rc=0
  mkdir -p "$corpus"
  # A temp folder per target, removed after it: libFuzzer exits without running the targets'
  # clean-up, so what they write under $TMPDIR stays otherwise.
  scratch=$(mktemp -d)
  TMPDIR=$scratch ASAN_OPTIONS=detect_leaks=1 "build-fuzz/fuzz/$t" -max_total_time="$seconds" \
    -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="build-fuzz/artifacts/$t-" "$corpus" "fuzz/corpus/$t" > "$log" 2>&1 || rc=$?
  rm -rf "$scratch"
  return $rc
}
jobs_at_once=$(nproc)
for ((i = 0; i < ${#targets[@]}; i += jobs_at_once)); do
  pids=()
  batch=("${targets[@]:i:jobs_at_once}")
  for t in "${batch[@]}"; do
    run_target "$t" &
    pids+=($!)
  done
  failed=()
  for k in "${!batch[@]}"; do wait "${pids[$k]}" || failed+=("${batch[$k]}"); done
  for t in "${failed[@]}"; do
    tail -n 40 "build-fuzz/$t.log"
    echo "fuzz: $t FAILED; reproducer in build-fuzz/artifacts/" >&2
  done
  [ ${#failed[@]} -eq 0 ] || exit 1
done
summary=()
for t in "${targets[@]}"; do
  log=build-fuzz/$t.log
  corpus=build-fuzz/corpus/$t
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1 | grep -o '[0-9]*' || echo 0)
  summary+=("$(printf '%-24s %10s execs  cov %5s  corpus %4s' "$t" "$execs" "$cov" \
    "$(ls "$corpus" | wc -l)")")
done
printf '%s\n' "${summary[@]}"
