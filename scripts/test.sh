#!/usr/bin/env bash
# The test command: installs what the project needs, builds everything, runs every test, then
# runs the transport, prefix-cache, routing and worker tests again under AddressSanitizer,
# LeakSanitizer and UBSan.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
(cd build && ctest --output-on-failure --parallel "$(nproc)" --timeout 900)

# Sanitizer pass: what owns raw resources across a process boundary (UCX handles, buffers,
# threads) or manages memory by hand (the snapshot store's shared blocks, the disk tier), to
# keep the run short on two cores.
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DYOCO_SANITIZE=ON -DYOCO_CUDA=OFF
cmake --build build-asan --parallel "$(nproc)" \
  --target ucx_transport_test transport_address_test transfer_peer cache_test routing_test \
  threading_test workers_test engine_test
(cd build-asan && ctest --output-on-failure --timeout 900 \
  -R 'Transport|BlockKey|SnapshotStore|SnapshotDisk|CachedPrefill|WorkerRegistry|BoundedJobQueue|Disaggregated|BundleLifetime|StateBundle')
