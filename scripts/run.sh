#!/usr/bin/env bash
# The main command: installs, builds, and generates tokens with the yoco CLI from the small
# random model the build makes (build/models/yoco-tiny). Arguments replace the default prompt
# and options, e.g. scripts/run.sh --tokens 0,5,6 --max-new-tokens 8 --temperature 0.7 --seed 1
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
mkdir -p build
bash scripts/build.sh > build/run-build.log 2>&1 || { cat build/run-build.log; exit 1; }

args=("$@")
if [ ${#args[@]} -eq 0 ]; then args=(--tokens 0,17,5,99,254,31 --max-new-tokens 16); fi
echo "+ build/bin/yoco generate --model build/models/yoco-tiny ${args[*]}" >&2
exec build/bin/yoco generate --model build/models/yoco-tiny "${args[@]}"
