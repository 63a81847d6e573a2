#!/usr/bin/env bash
# Device call: per-op tables of wisp CPU (main vs the f16-scales build) on
# the seed shape at 2, 8, 16 threads, Qwen 3.5 0.8B at 2 and 8, then wisp
# (both builds) against llama.cpp CPU on the seed shape (same GGUF bytes).
# Set-up (llama.cpp build, artifacts) first, so that no measurement shares
# the cores with a compiler.
set -uo pipefail
ROOT=$PWD; R=$OUT; mkdir -p $R
export LD_LIBRARY_PATH=$ROOT/.dev/lib
lscpu > $R/lscpu.txt
( setsid bash .peer/build.sh cpu /tmp/lc > /tmp/lc.log 2>&1 < /dev/null & )
.dev/wisp_main gen-synthetic --like assets/lfm2-hybrid-q4.manifest.json -o models/synthetic-seed --seed 1 > /dev/null
{ python3 tests/parity/hf_reference.py build --config qwen35-0.8b --seed 1234 --out /tmp/q08hf || python3 tools/make-qwen35-shape.py /tmp/q08hf; } > $R/mk.log 2>&1
.dev/wisp_main convert /tmp/q08hf -o models/qwen35-0.8b-q4k --quant q4k --quiet
echo "artifacts $(date +%T)"
for i in $(seq 1 80); do [ -x /tmp/lc/build/bin/llama-bench ] && break; sleep 5; done
sleep 3; tail -2 /tmp/lc.log; echo "llama.cpp $(date +%T)"
for b in main f16; do
  WISP=.dev/wisp_$b THREADS="2 8 16" REPS=2 timeout 120 tools/cpu-scaling.sh models/synthetic-seed /tmp/scal-seed-$b > /dev/null 2>&1
  cp /tmp/scal-seed-$b/scaling.txt $R/scaling-seed-$b.txt; echo "seed $b done $(date +%T)"
done
for b in f16 main; do
  WISP=.dev/wisp_$b MODELS=seed THREADS="2 8 16" REPS=2 timeout 150 tools/bench-cpu-vs-llama.sh /tmp/lc/build/bin $R/cpu-vs-llama-seed-$b.json 2>&1 | tail -5 | tee -a $R/cpu.txt
done
WISP=.dev/wisp_main THREADS="2 8" REPS=1 timeout 90 tools/cpu-scaling.sh models/qwen35-0.8b-q4k /tmp/scal-q > /dev/null 2>&1
cp /tmp/scal-q/scaling.txt $R/scaling-qwen-main.txt; echo "qwen done $(date +%T)"
echo "all done $(date +%T)"
