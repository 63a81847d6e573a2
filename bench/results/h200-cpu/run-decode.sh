#!/usr/bin/env bash
# Device call for the CPU decode kernels (pairs of blocks, issue 19): wisp CPU
# against llama.cpp CPU on the same weights (export-gguf --keep-quant) at 2, 8
# and 16 threads, two rounds a cell, then (time permitting: one device call
# is at most 10 minutes) the per-op tables at 2 and 16 threads. Same
# environment as run.sh / run2.sh (.dev/wisp, .peer/build.sh); builds
# llama.cpp and the Qwen 3.5 0.8B q4k artifact when missing (minutes: then
# the tables are skipped, and a second call with both present runs them).
set -uo pipefail
ROOT=$PWD; R=$OUT; mkdir -p $R
export LD_LIBRARY_PATH=$ROOT/.dev/lib WISP=.dev/wisp
built=0
[ -x /tmp/lc/build/bin/llama-bench ] || built=1
[ -x /tmp/lc/build/bin/llama-bench ] || { bash .peer/build.sh cpu /tmp/lc > /tmp/lc.log 2>&1 < /dev/null || { echo "llama.cpp build failed"; tail -5 /tmp/lc.log; exit 1; }; }
[ -d models/qwen35-0.8b-q4k ] || { python3 tests/parity/hf_reference.py build --config qwen35-0.8b --seed 1234 --out /tmp/hf08 > /dev/null 2>&1; .dev/wisp convert /tmp/hf08 -o models/qwen35-0.8b-q4k --quant q4k --quiet; }
echo "ready $(date +%T)"
THREADS="2 8 16" REPS=2 timeout 330 tools/bench-cpu-vs-llama.sh /tmp/lc/build/bin $R/cpu-vs-llama-h200host-decode-pairs.json 2>&1 | tail -8 | tee $R/cpu.txt
[ $built = 1 ] && { echo "built llama.cpp this call: per-op tables skipped"; exit 0; }
for m in synthetic-seed qwen35-0.8b-q4k; do
  THREADS="2 16" REPS=1 timeout 90 tools/cpu-scaling.sh models/$m /tmp/scal-$m > /dev/null 2>&1
  cp /tmp/scal-$m/scaling.txt $R/scaling-$m.txt
done
echo "all done $(date +%T)"
