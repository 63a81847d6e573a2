#!/usr/bin/env bash
# Calls 4 and final: .dev/wisp against llama.cpp CPU on the seed shape and
# Qwen 3.5 0.8B at 2, 8 and 16 threads, REPS (default 5) rounds a cell
# alternating the two engines; then wisp's per-op tables at the same counts.
. bench/results/h200-cpu-20261204/setup.sh
for m in seed qwen35-0.8b; do
  MODELS=$m THREADS="2 8 16" REPS=${REPS:-5} WISP=.dev/wisp timeout 260 tools/bench-cpu-vs-llama.sh /tmp/lc/build/bin $R/cpu-vs-llama-$m.json 2>&1 | tail -4 | tee -a $R/cpu.txt
done
WISP=.dev/wisp THREADS="2 8 16" REPS=1 timeout 60 tools/cpu-scaling.sh models/synthetic-seed /tmp/scal-seed > /dev/null 2>&1; cp /tmp/scal-seed/scaling.txt $R/scaling-seed.txt
WISP=.dev/wisp THREADS="2 8 16" REPS=1 timeout 60 tools/cpu-scaling.sh models/qwen35-0.8b-q4k /tmp/scal-q > /dev/null 2>&1; cp /tmp/scal-q/scaling.txt $R/scaling-qwen35-0.8b.txt
echo "all done $(date +%T)"
