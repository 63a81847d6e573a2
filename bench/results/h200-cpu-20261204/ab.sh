#!/usr/bin/env bash
# Calls 2 and 3: per-op tables of the builds in BINS (default "main new":
# .dev/wisp_main and .dev/wisp_new), seed shape at 2, 8, 16 threads and Qwen
# 3.5 0.8B at 2 and 8, then each against llama.cpp CPU on MODELS (default
# seed), REPS (default 3) rounds a cell.
B1=${BINS:-main new}; SETUP_WISP=.dev/wisp_${B1%% *}
. bench/results/h200-cpu-20261204/setup.sh
for b in ${BINS:-main new}; do
  ldd .dev/wisp_$b | grep -i "mvec\|not found" > $R/ldd-$b.txt
  WISP=.dev/wisp_$b THREADS="2 8 16" REPS=2 timeout 120 tools/cpu-scaling.sh models/synthetic-seed /tmp/scal-seed-$b > /dev/null 2>&1
  cp /tmp/scal-seed-$b/scaling.txt $R/scaling-seed-$b.txt
  WISP=.dev/wisp_$b THREADS="2 8" REPS=1 timeout 100 tools/cpu-scaling.sh models/qwen35-0.8b-q4k /tmp/scal-q-$b > /dev/null 2>&1
  cp /tmp/scal-q-$b/scaling.txt $R/scaling-qwen-$b.txt; echo "tables $b $(date +%T)"
done
for b in ${BINS:-main new}; do
  WISP=.dev/wisp_$b MODELS="${MODELS:-seed}" THREADS="2 8 16" REPS=${REPS:-3} timeout 200 tools/bench-cpu-vs-llama.sh /tmp/lc/build/bin $R/cpu-vs-llama-$b.json 2>&1 | tail -5 | tee -a $R/cpu.txt
done
echo "all done $(date +%T)"
