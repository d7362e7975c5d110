#!/usr/bin/env bash
# The test command: installs what the project needs, builds everything, runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
cd build
ctest --output-on-failure --parallel "$(nproc)" --timeout 900
