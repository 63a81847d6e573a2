#!/usr/bin/env bash
# Device call: wisp CPU (.dev/wisp) against llama.cpp CPU on the same GGUF
# bytes (export-gguf --keep-quant), seed shape and Qwen 3.5 0.8B, prompt 128
# + decode 64, at 2, 8 and 16 threads, REPS rounds a cell alternating the two
# engines; then wisp's per-op tables at the same counts. The set-up (the
# llama.cpp build, the artifacts) runs first, so that no measurement shares
# the cores with a compiler. Results go to $OUT as they are made.
set -uo pipefail
ROOT=$PWD; R=$OUT; mkdir -p $R
export LD_LIBRARY_PATH=$ROOT/.dev/lib
lscpu > $R/lscpu.txt
( setsid bash .peer/build.sh cpu /tmp/lc > /tmp/lc.log 2>&1 < /dev/null & )
.dev/wisp gen-synthetic --like assets/lfm2-hybrid-q4.manifest.json -o models/synthetic-seed --seed 1 > /dev/null
{ python3 tests/parity/hf_reference.py build --config qwen35-0.8b --seed 1234 --out /tmp/q08hf || python3 tools/make-qwen35-shape.py /tmp/q08hf; } > $R/make-qwen.log 2>&1
.dev/wisp convert /tmp/q08hf -o models/qwen35-0.8b-q4k --quant q4k --quiet
for i in $(seq 1 80); do [ -x /tmp/lc/build/bin/llama-bench ] && break; sleep 5; done
sleep 3; echo "ready $(date +%T)"
for m in seed qwen35-0.8b; do
  MODELS=$m THREADS="2 8 16" REPS=${REPS:-5} WISP=.dev/wisp timeout 260 tools/bench-cpu-vs-llama.sh /tmp/lc/build/bin $R/cpu-vs-llama-$m.json 2>&1 | tail -4 | tee -a $R/cpu.txt
done
WISP=.dev/wisp THREADS="2 8 16" REPS=1 timeout 60 tools/cpu-scaling.sh models/synthetic-seed /tmp/scal-seed > /dev/null 2>&1; cp /tmp/scal-seed/scaling.txt $R/scaling-seed.txt
WISP=.dev/wisp THREADS="2 8 16" REPS=1 timeout 60 tools/cpu-scaling.sh models/qwen35-0.8b-q4k /tmp/scal-q > /dev/null 2>&1; cp /tmp/scal-q/scaling.txt $R/scaling-qwen35-0.8b.txt
echo "all done $(date +%T)"
