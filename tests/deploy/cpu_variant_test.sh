#!/usr/bin/env bash
# The hand-over from the image's x86-64-v3 build to its x86-64-v4 build (lib/cpu_check): a probe
# linked with the start-up check as a v3 build executes its namesake in YOCO_AVX512_VARIANT_DIR
# with the same arguments on a CPU with AVX-512, and runs itself everywhere else: no AVX-512
# (QEMU emulating a Haswell), no variant directory, no namesake there, one that is not
# executable, the probe's own directory (no loop), and a namesake that cannot be executed (one
# line on stderr, then the probe).
# Usage: cpu_variant_test.sh PROBE
set -uo pipefail
probe=$1
name=$(basename "$probe")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0

expect() {  # expect DESCRIPTION WANTED_STDOUT COMMAND...
  local what=$1 want=$2
  shift 2
  local out
  out=$(timeout 20 "$@" 2> "$work/stderr")
  if [ "$out" != "$want" ]; then
    echo "FAIL $what: got '$out' (stderr: $(cat "$work/stderr")), want '$want'" >&2
    fail=1
  else
    echo "ok   $what"
  fi
}

mkdir -p "$work/v4" "$work/empty" "$work/noexec" "$work/broken"
printf '#!/bin/sh\necho "variant ran: $*"\n' > "$work/v4/$name"
chmod 755 "$work/v4/$name"
cp "$work/v4/$name" "$work/noexec/$name"
chmod 644 "$work/noexec/$name"
printf '#!/nonexistent/interpreter\n' > "$work/broken/$name"
chmod 755 "$work/broken/$name"

avx512=1
for flag in avx512f avx512bw avx512cd avx512dq avx512vl; do
  grep -m1 '^flags' /proc/cpuinfo | grep -qw "$flag" || avx512=0
done
if [ "$avx512" = 1 ]; then
  expect "AVX-512 CPU, variant present" "variant ran: --a b" \
    env YOCO_AVX512_VARIANT_DIR="$work/v4" "$probe" --a b
else
  echo "this CPU has no AVX-512: only the cases that keep the probe are checked"
  expect "no AVX-512, variant present" "probe ran: --a b" \
    env YOCO_AVX512_VARIANT_DIR="$work/v4" "$probe" --a b
fi
expect "hand-over turned off" "probe ran: x" env YOCO_AVX512_VARIANT_DIR= "$probe" x
expect "no variant directory compiled in" "probe ran: x" env -u YOCO_AVX512_VARIANT_DIR "$probe" x
expect "no namesake in the directory" "probe ran: x" \
  env YOCO_AVX512_VARIANT_DIR="$work/empty" "$probe" x
expect "namesake not executable" "probe ran: x" \
  env YOCO_AVX512_VARIANT_DIR="$work/noexec" "$probe" x
expect "the probe's own directory" "probe ran: x" \
  env YOCO_AVX512_VARIANT_DIR="$(dirname "$probe")" "$probe" x
expect "namesake fails to execute" "probe ran: x" \
  env YOCO_AVX512_VARIANT_DIR="$work/broken" "$probe" x
if [ "$avx512" = 1 ] && ! grep -q "cannot execute the AVX-512 build" "$work/stderr"; then
  echo "FAIL namesake fails to execute: no line on stderr" >&2
  fail=1
fi
if command -v qemu-x86_64 > /dev/null; then
  expect "Haswell (QEMU), variant present" "probe ran: x" \
    env YOCO_AVX512_VARIANT_DIR="$work/v4" qemu-x86_64 -cpu Haswell "$probe" x
else
  echo "FAIL qemu-x86_64 missing (Debian package qemu-user; scripts/setup.sh installs it)" >&2
  fail=1
fi
exit $fail
