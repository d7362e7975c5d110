#!/usr/bin/env bash
# The test command: installs what the project needs, builds everything, runs every test, then
# runs the transport tests again under AddressSanitizer/LeakSanitizer.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
(cd build && ctest --output-on-failure --parallel "$(nproc)" --timeout 900)

# Sanitizer pass: only what owns raw resources across a process boundary (UCX handles,
# buffers, threads), to keep the run short on two cores.
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DYOCO_SANITIZE=ON -DYOCO_CUDA=OFF
cmake --build build-asan --parallel "$(nproc)" --target ucx_transport_test transfer_peer
(cd build-asan && ctest --output-on-failure --timeout 900 -R 'Transport')
