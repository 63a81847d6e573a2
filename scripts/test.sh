#!/usr/bin/env bash
# `make test`: build and run the whole suite twice, optimised and then under
# ASan+UBSan, smoke-run every fuzz harness, and print one combined closing
# line that CI can read.
#
# Three halves start at once, each from its own build directory and into
# its own log: (1) the optimised build and its suite, (2) the sanitized
# build (niced), whose suite starts when the optimised suite is over (see
# below), (3) the fuzz harnesses' build and smoke run (niced: it fills the
# gaps).
# Each suite runs in as many worker processes as there are cores
# (`wisp_tests -j N`). On a 2-core machine this keeps both cores busy where
# one step after the other left one mostly idle (docs/testing.md). The logs
# are printed whole, in that order, once all three are done.
set -uo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
# WebGPU tests must run for real (lavapipe on CPU-only machines), not skip.
export WISP_REQUIRE_WEBGPU=${WISP_REQUIRE_WEBGPU:-1}
logs=build/test-logs
rm -rf "$logs" && mkdir -p "$logs"
start=$(date +%s)

# 0 when the only failure in test output $1 is LeakSanitizer's tracer
# crashing as a worker exited between tests: its fatal-error line, no leak
# report, no test that failed or did not report, every FAIL line a worker's
# "between tests" exit.
lsan_tool_crash_only() {
  grep -q 'LeakSanitizer has encountered a fatal error' "$1" &&
    ! grep -q 'ERROR: LeakSanitizer: detected memory leaks' "$1" &&
    ! grep -q 'did not report: their worker died' "$1" &&
    ! grep '^FAIL ' "$1" | grep -qvE '^FAIL worker [0-9]+ ended with status [0-9]+ in \(between tests\)$'
}

# $1 = log name, $2 = build dir, rest = make variables. The last line of
# the log is "result: P F S" (passed, failed, skipped).
run_suite() {
  local name=$1 dir=$2; shift 2
  local log="$logs/$name.log"
  {
    echo "== build ($name) =="
    # The optimised build also makes libwisp.so, which the install test
    # installs, and the browser build (build/wasm/), which test_web.c runs.
    # The sanitized build is niced: its suite waits for the optimised one
    # anyway (below), so it need not take half the cores from the optimised
    # build, which is what the optimised suite waits for; it runs in the
    # cycles the optimised suite leaves (a test waiting on a process or on
    # the device, the last test of the run).
    local extra="" prio=""; [ "$dir" = build ] && extra="lib wasm" || prio="nice -n 10"
    if ! $prio make -s -j"$jobs" BUILD="$dir" "$@" all $extra; then
      echo "build ($name) failed"; echo "result: 0 1 0"; touch "$logs/$name.tested"; return
    fi
    # The sanitized suite waits for the optimised one to end: its WebGPU
    # tests then find every shader already compiled in Mesa's shader cache
    # (~/.cache/mesa_shader_cache*), where compiling it again inside the
    # ASan process (LLVM on ASan's allocator) would cost several times the
    # CPU. This also keeps its install test (`make lib install
    # BUILD=build`) from running while build/ is being built.
    [ "$dir" = build ] || while [ ! -e "$logs/optimised.tested" ]; do sleep 1; done
    echo "== tests ($name, $jobs workers, from $(($(date +%s) - start)) s) =="
    local first="$logs/$name.first" rc
    WISP_BIN="$dir/wisp" "$dir/wisp_tests" -j "$jobs" >"$first" 2>&1
    rc=$?
    cat "$first"
    echo "wisp_tests exit status: $rc"
    if [ "$rc" -ne 0 ] && lsan_tool_crash_only "$first"; then
      # LeakSanitizer's own tracer crashed as a worker exited after its
      # tests (a sanitizer-runtime flake): no leak was reported and no test
      # failed, but the leak check did not run, so the suite runs once more
      # and that run alone counts.
      echo "== tests ($name) again: LeakSanitizer's tracer crashed at a worker's exit; its leak check did not run =="
      WISP_BIN="$dir/wisp" "$dir/wisp_tests" -j "$jobs" 2>&1
      echo "wisp_tests exit status: $?"
    fi
    rm -f "$first"
    touch "$logs/$name.tested"
  } >"$log" 2>&1
  local line; line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -n1)
  if [ -z "$line" ]; then echo "result: 0 1 0" >>"$log"; return; fi
  local p f k
  p=$(echo "$line" | awk '{print $1}'); f=$(echo "$line" | awk '{print $3}')
  k=$(echo "$line" | sed -n 's/.*, \([0-9][0-9]*\) skipped.*/\1/p')
  # A non-zero exit with no failure counted (a crash after the summary).
  if [ "$f" -eq 0 ] && ! grep -q '^wisp_tests exit status: 0$' "$log"; then f=1; fi
  echo "result: $p $f ${k:-0}" >>"$log"
}

# Every fuzz harness briefly (docs/fuzzing.md): its seeds plus a fixed number
# of generated inputs, under ASan+UBSan; a crash or leak fails the run.
run_fuzz() {
  local log="$logs/fuzz.log"
  echo "== fuzz smoke ==" >"$log"
  if nice make -s -j"$jobs" fuzz-smoke >>"$log" 2>&1; then echo "result: 1 0 0" >>"$log"
  else echo "result: 0 1 0" >>"$log"; fi
}

done_line() { echo "$1 done after $(($(date +%s) - start)) s"; }

run_suite optimised build && done_line optimised &
p1=$!
(
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  # Leaks inside the Dawn library (Vulkan drivers' one-time allocations) are not
  # wisp's: suppressed for that library only, see scripts/lsan-webgpu.supp.
  export LSAN_OPTIONS="suppressions=$PWD/scripts/lsan-webgpu.supp:print_suppressions=0"
  # -g1 (line tables): the sanitizers' reports still name file, line and
  # inlined frames, and the build takes a third less CPU than with -g.
  run_suite sanitized build-san "OPT=-O1 -g1" "SAN=-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
  done_line sanitized
) &
p2=$!
(run_fuzz; done_line "fuzz smoke") &
p3=$!
echo "building and running the optimised suite, the sanitized suite (after it) and the fuzz smoke run (logs in $logs/)"
wait $p1 $p2 $p3

total_pass=0; total_fail=0; total_skip=0
for name in optimised sanitized fuzz; do
  log="$logs/$name.log"
  grep -v '^result: ' "$log"
  read -r p f k < <(sed -n 's/^result: //p' "$log" | tail -n1)
  [ -n "${p:-}" ] || { p=0; f=1; k=0; }
  total_pass=$((total_pass + p)); total_fail=$((total_fail + f)); total_skip=$((total_skip + k))
done
echo "make test: $(($(date +%s) - start)) s"
if [ "$total_skip" -gt 0 ]; then
  echo "total: $total_pass passed, $total_fail failed, $total_skip skipped"
else
  echo "total: $total_pass passed, $total_fail failed"
fi
[ "$total_fail" -eq 0 ]
