#!/usr/bin/env bash
# `make test`: build and run the whole suite twice, optimised and then under
# ASan+UBSan, smoke-run every fuzz harness, and print one combined closing
# line that CI can read.
set -uo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
# WebGPU tests must run for real (lavapipe on CPU-only machines), not skip.
export WISP_REQUIRE_WEBGPU=${WISP_REQUIRE_WEBGPU:-1}
total_pass=0; total_fail=0; total_skip=0
run_suite() { # $1 = label, $2 = build dir, rest = make variables
  local label=$1 dir=$2; shift 2
  echo "== build ($label) =="
  # The optimised build also makes libwisp.so, which the install test installs.
  local extra=""; [ "$dir" = build ] && extra=lib
  if ! make -s -j"$jobs" BUILD="$dir" "$@" all $extra; then
    echo "build ($label) failed"; total_fail=$((total_fail + 1)); return
  fi
  echo "== tests ($label) =="
  local log; log=$(mktemp)
  WISP_BIN="$dir/wisp" "$dir/wisp_tests" 2>&1 | tee "$log"
  local line; line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -n1)
  if [ -z "$line" ]; then total_fail=$((total_fail + 1)); rm -f "$log"; return; fi
  local p f; p=$(echo "$line" | awk '{print $1}'); f=$(echo "$line" | awk '{print $3}')
  local k; k=$(echo "$line" | sed -n 's/.*, \([0-9][0-9]*\) skipped.*/\1/p')
  total_pass=$((total_pass + p)); total_fail=$((total_fail + f)); total_skip=$((total_skip + ${k:-0})); rm -f "$log"
}
run_suite optimised build
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# Leaks inside the Dawn library (Vulkan drivers' one-time allocations) are not
# wisp's: suppressed for that library only, see scripts/lsan-webgpu.supp.
export LSAN_OPTIONS="suppressions=$PWD/scripts/lsan-webgpu.supp:print_suppressions=0"
run_suite sanitized build-san OPT=-O1 "SAN=-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
# Every fuzz harness briefly (docs/fuzzing.md): its seeds plus a fixed number
# of generated inputs, under ASan+UBSan; a crash or leak fails the run.
echo "== fuzz smoke =="
if make -s fuzz-smoke; then total_pass=$((total_pass + 1)); else total_fail=$((total_fail + 1)); fi
if [ "$total_skip" -gt 0 ]; then
  echo "total: $total_pass passed, $total_fail failed, $total_skip skipped"
else
  echo "total: $total_pass passed, $total_fail failed"
fi
[ "$total_fail" -eq 0 ]
