#!/usr/bin/env bash
# Device call: per-op tables of wisp CPU, two builds (.dev/wisp_main: the
# start of this work; .dev/wisp_new: the change), seed shape at 2, 8, 16
# threads and Qwen 3.5 0.8B at 2, 8, then both against llama.cpp CPU on the
# seed shape (same GGUF bytes, REPS rounds, interleaved).
set -uo pipefail
ROOT=$PWD; R=$OUT; mkdir -p $R
export LD_LIBRARY_PATH=$ROOT/.dev/lib
( setsid bash .peer/build.sh cpu /tmp/lc > /tmp/lc.log 2>&1 < /dev/null & )
.dev/wisp_main gen-synthetic --like assets/lfm2-hybrid-q4.manifest.json -o models/synthetic-seed --seed 1 > /dev/null
{ python3 tests/parity/hf_reference.py build --config qwen35-0.8b --seed 1234 --out /tmp/q08hf || python3 tools/make-qwen35-shape.py /tmp/q08hf; } > $R/mk.log 2>&1
.dev/wisp_main convert /tmp/q08hf -o models/qwen35-0.8b-q4k --quant q4k --quiet
ldd .dev/wisp_new | grep -i "mvec\|not found" > $R/ldd.txt
for i in $(seq 1 80); do [ -x /tmp/lc/build/bin/llama-bench ] && break; sleep 5; done
sleep 3; echo "ready $(date +%T)"
for b in ${BINS:-main new}; do
  WISP=.dev/wisp_$b THREADS="2 8 16" REPS=2 timeout 120 tools/cpu-scaling.sh models/synthetic-seed /tmp/scal-seed-$b > /dev/null 2>&1
  cp /tmp/scal-seed-$b/scaling.txt $R/scaling-seed-$b.txt
  WISP=.dev/wisp_$b THREADS="2 8" REPS=1 timeout 100 tools/cpu-scaling.sh models/qwen35-0.8b-q4k /tmp/scal-q-$b > /dev/null 2>&1
  cp /tmp/scal-q-$b/scaling.txt $R/scaling-qwen-$b.txt; echo "tables $b $(date +%T)"
done
for b in ${BINS:-main new}; do
  WISP=.dev/wisp_$b MODELS="${MODELS:-seed}" THREADS="2 8 16" REPS=${REPS:-3} timeout 200 tools/bench-cpu-vs-llama.sh /tmp/lc/build/bin $R/cpu-vs-llama-$b.json 2>&1 | tail -5 | tee -a $R/cpu.txt
done
echo "all done $(date +%T)"
