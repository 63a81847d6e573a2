# The set-up every call here shares, sourced from the repository root with
# OUT set: llama.cpp's CPU build (detached, from .peer/), the seed-shaped
# artifact and Qwen 3.5 0.8B (transformers' random init from the real
# config where torch is there, else tools/make-qwen35-shape.py) converted
# to q4k by $SETUP_WISP (default .dev/wisp); then it waits for llama.cpp,
# so that no measurement shares the cores with a compiler.
set -uo pipefail
ROOT=$PWD; R=$OUT; mkdir -p $R
export LD_LIBRARY_PATH=$ROOT/.dev/lib
SETUP_WISP=${SETUP_WISP:-.dev/wisp}
lscpu > $R/lscpu.txt
( setsid bash .peer/build.sh cpu /tmp/lc > /tmp/lc.log 2>&1 < /dev/null & )
$SETUP_WISP gen-synthetic --like assets/lfm2-hybrid-q4.manifest.json -o models/synthetic-seed --seed 1 > /dev/null
{ python3 tests/parity/hf_reference.py build --config qwen35-0.8b --seed 1234 --out /tmp/q08hf ||
  python3 tools/make-qwen35-shape.py /tmp/q08hf; } > /tmp/make-qwen.log 2>&1
$SETUP_WISP convert /tmp/q08hf -o models/qwen35-0.8b-q4k --quant q4k --quiet
for i in $(seq 1 80); do [ -x /tmp/lc/build/bin/llama-bench ] && break; sleep 5; done
sleep 3; echo "ready $(date +%T)"
