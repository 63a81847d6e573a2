#!/usr/bin/env bash
# Device call: wisp CPU vs llama.cpp CPU (same weights via export-gguf --keep-quant) on the H200 host.
set -uo pipefail
ROOT=$PWD; R=$OUT; mkdir -p $R
export LD_LIBRARY_PATH=$ROOT/.dev/lib WISP=.dev/wisp
(setsid nohup bash .peer/build.sh cpu /tmp/lc > /tmp/lc.log 2>&1 < /dev/null &)
python3 tests/parity/hf_reference.py build --config qwen35-0.8b --seed 1234 --out /tmp/hf08 > /dev/null 2>&1
.dev/wisp convert /tmp/hf08 -o models/qwen35-0.8b-q4k --quant q4k --quiet
echo "qwen built $(date +%T)"
while ! [ -x /tmp/lc/build/bin/llama-bench ] || pgrep -f "cmake --build" > /dev/null; do sleep 5; done
echo "llama.cpp built $(date +%T)"
THREADS="2 8 16" REPS=1 timeout 260 tools/bench-cpu-vs-llama.sh /tmp/lc/build/bin $R/cpu-vs-llama-h200host-keepquant.json 2>&1 | tail -12 | tee $R/cpu.txt
echo "first done $(date +%T)"
THREADS="16" REPS=1 WISP_TUNING=prefillChunk=128 timeout 100 tools/bench-cpu-vs-llama.sh /tmp/lc/build/bin $R/cpu-vs-llama-h200host-keepquant-chunk128.json 2>&1 | tail -6 | tee $R/cpu128.txt
echo "all done $(date +%T)"
