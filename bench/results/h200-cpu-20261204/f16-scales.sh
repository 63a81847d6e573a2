#!/usr/bin/env bash
# Call 1: per-op tables of .dev/wisp_main against .dev/wisp_f16 on the seed
# shape at 2, 8, 16 threads (Qwen 3.5 0.8B at 2 and 8, main only), then both
# against llama.cpp CPU on the seed shape.
SETUP_WISP=.dev/wisp_main; . bench/results/h200-cpu-20261204/setup.sh
for b in main f16; do
  WISP=.dev/wisp_$b THREADS="2 8 16" REPS=2 timeout 120 tools/cpu-scaling.sh models/synthetic-seed /tmp/scal-seed-$b > /dev/null 2>&1
  cp /tmp/scal-seed-$b/scaling.txt $R/scaling-seed-$b.txt; echo "seed $b done $(date +%T)"
done
for b in f16 main; do
  WISP=.dev/wisp_$b MODELS=seed THREADS="2 8 16" REPS=2 timeout 150 tools/bench-cpu-vs-llama.sh /tmp/lc/build/bin $R/cpu-vs-llama-seed-$b.json 2>&1 | tail -5 | tee -a $R/cpu.txt
done
WISP=.dev/wisp_main THREADS="2 8" REPS=1 timeout 90 tools/cpu-scaling.sh models/qwen35-0.8b-q4k /tmp/scal-q > /dev/null 2>&1
cp /tmp/scal-q/scaling.txt $R/scaling-qwen-main.txt; echo "all done $(date +%T)"
