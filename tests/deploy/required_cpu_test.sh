#!/usr/bin/env bash
# Every executable, started on a CPU without AVX2/FMA (QEMU's user-mode emulation of a Nehalem),
# exits with one clear line and status 1 instead of dying of SIGILL. On a CPU that has the
# features (the same binary, QEMU emulating a Haswell) it gets past the check.
# Usage: required_cpu_test.sh BIN_DIR
set -uo pipefail
bin=$1
if ! command -v qemu-x86_64 > /dev/null; then
  echo "qemu-x86_64 missing (Debian package qemu-user; scripts/setup.sh installs it)" >&2
  exit 1
fi
required=$(grep -o 'YOCO_REQUIRE("[a-z0-9.]*")' "$bin/../lib/cpu_check/required_cpu_features.h" | tr -d '"' | sed 's/YOCO_REQUIRE(//; s/)//' | tr '\n' ' ')
if [[ " $required " != *" avx2 "* ]]; then
  echo "this build does not require AVX2 (YOCO_ARCH), nothing to check" >&2
  exit 0
fi
# QEMU's emulation has AVX2 but no AVX-512: a build for an AVX-512 machine (YOCO_ARCH=native
# there) can only be checked for its refusal.
positive=1
if [[ " $required " == *" avx512"* ]]; then
  echo "this build needs AVX-512, which QEMU does not emulate: only the refusal is checked"
  positive=0
fi
fail=0
for b in yoco-router yoco-prefill yoco-decode yoco-cli yoco; do
  out=$(qemu-x86_64 -cpu Nehalem "$bin/$b" --help 2>&1)
  rc=$?
  if [ $rc -ne 1 ] || [[ "$out" != "yoco: this CPU lacks"*"avx2"* ]] || [ "$(wc -l <<< "$out")" -ne 1 ]; then
    echo "FAIL $b on Nehalem: exit $rc, output: $out" >&2
    fail=1
  else
    echo "ok   $b on Nehalem: $out"
  fi
  [ "$positive" = 1 ] || continue
  out=$(qemu-x86_64 -cpu Haswell "$bin/$b" --help 2>&1)
  if [[ "$out" == *"this CPU lacks"* ]]; then
    echo "FAIL $b on Haswell refused: $out" >&2
    fail=1
  fi
done
exit $fail
