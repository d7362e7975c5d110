#!/usr/bin/env bash
# Clang's thread-safety analysis over every library and service: each mutex-guarded member is
# annotated (ABSL_GUARDED_BY, ABSL_EXCLUSIVE_LOCKS_REQUIRED) and a use without its lock is a
# compile error (-Werror=thread-safety, set by CMakeLists.txt for clang). A Debug build without
# tests into build-tsa/, for speed; CI runs it. Boost 1.74 sees clang's C++20 coroutines only
# with libc++, so they are named for it (the Kubernetes watch is written with them).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p build-tsa
log=build-tsa/build.log
cmake -S . -B build-tsa -G Ninja -DCMAKE_BUILD_TYPE=Debug -DYOCO_BUILD_TESTS=OFF -DYOCO_CUDA=OFF \
  -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 \
  -DCMAKE_CXX_FLAGS="-DBOOST_ASIO_HAS_CO_AWAIT=1 -DBOOST_ASIO_HAS_STD_COROUTINE=1" > "$log" 2>&1 ||
  { cat "$log"; exit 1; }
cmake --build build-tsa --parallel "$(nproc)" --target \
  yoco_router_service yoco_openai_front yoco_prefill_service yoco_decode_service yoco_loadtest \
  yoco_workers yoco_routing yoco_batching yoco_transport yoco_cache yoco_http yoco_auth \
  yoco_rpc yoco_engine -- -k 0 >> "$log" 2>&1 ||
  { grep -E "error|warning: .*thread" "$log" | head -n 60; exit 1; }
rm -f "$log"
echo "thread-safety: clean"
