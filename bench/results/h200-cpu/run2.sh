#!/usr/bin/env bash
# Second device call (warm machine, llama.cpp built): the prefill chunk of 128 against 64, and where the time goes by thread count.
set -uo pipefail
ROOT=$PWD; R=$OUT; mkdir -p $R
export LD_LIBRARY_PATH=$ROOT/.dev/lib WISP=.dev/wisp
[ -d models/qwen35-0.8b-q4k ] || { python3 tests/parity/hf_reference.py build --config qwen35-0.8b --seed 1234 --out /tmp/hf08 > /dev/null 2>&1; .dev/wisp convert /tmp/hf08 -o models/qwen35-0.8b-q4k --quant q4k --quiet; }
[ -x /tmp/lc/build/bin/llama-bench ] || { echo "no llama.cpp build"; exit 1; }
THREADS="2 8 16" REPS=1 WISP_TUNING=prefillChunk=128 timeout 200 tools/bench-cpu-vs-llama.sh /tmp/lc/build/bin $R/cpu-vs-llama-h200host-keepquant-chunk128.json 2>&1 | tail -8 | tee $R/cpu128.txt
for m in synthetic-seed qwen35-0.8b-q4k; do
  THREADS="2 16" REPS=1 timeout 100 tools/cpu-scaling.sh models/$m /tmp/scal-$m > /dev/null 2>&1
  cp /tmp/scal-$m/scaling.txt $R/scaling-$m.txt
done
echo "all done $(date +%T)"
