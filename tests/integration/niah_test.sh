#!/usr/bin/env bash
# yoco-eval's needle in a haystack through the stack three ways (uncached, pre-cached, a decode
# worker killed mid-run), which must agree answer for answer with no failed request; with
# MIN_ACCURACY set, the uncached run must also answer at least that fraction right. The lengths
# are those yoco-docqa-tiny was trained on (documents of 64-600 bytes).
#   niah_test.sh BIN_DIR MODEL_DIR
set -euo pipefail
BIN=$1
MODEL=$2
export NIAH_PORT_BASE=$((19000 + (RANDOM % 100) * 10))  # 19000-19999: apart from the other tests
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
status=0
"$(dirname "$0")/../../tools/yoco_eval/niah_three_ways.sh" "$BIN" "$MODEL" "$out" --seed 11 \
  --lengths 256,512 --depths 0,25,50,75,100 --questions 4 > "$out/run.log" 2>&1 || status=$?
cat "$out/run.log"
if [ "$status" != 0 ]; then
  echo "FAIL the three runs (exit $status)"
  tail -n 40 "$out"/*.log
  exit 1
fi
if [ -n "${MIN_ACCURACY:-}" ]; then
  accuracy=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["overall_accuracy"])' \
    "$out/uncached.json")
  if python3 -c "import sys; sys.exit(0 if $accuracy >= $MIN_ACCURACY else 1)"; then
    echo "ok   accuracy $accuracy >= $MIN_ACCURACY"
  else
    echo "FAIL accuracy $accuracy < $MIN_ACCURACY"
    exit 1
  fi
fi
echo "all passed"
