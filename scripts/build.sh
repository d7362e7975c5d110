#!/usr/bin/env bash
# Configures and builds everything into build/ (executables in build/bin/). Extra arguments go
# to CMake, e.g. scripts/build.sh -DYOCO_CUDA=OFF.
set -euo pipefail
cd "$(dirname "$0")/.."

# nvcc, when the CUDA toolkit is installed, so kernels/cuda is built too.
if [ -d /usr/local/cuda/bin ]; then export PATH="/usr/local/cuda/bin:$PATH"; fi

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "$@"
cmake --build build --parallel "$(nproc)"
