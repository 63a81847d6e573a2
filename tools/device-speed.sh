#!/usr/bin/env bash
# On the GPU machine (see tools/device-bundle.sh): correctness spot checks and
# the speed receipts of issues #4 and #5. Receipts and logs go to $1.
#   seed-shaped LFM2: greedy 128 CPU vs WebGPU; decode batch 1 (pipelined and
#   sequential), 64 per submit, 1,024 tokens; prefill 1,024
#   Qwen 3.5 0.8B- and 2B-shaped Q4_K (random weights from the real configs):
#   greedy 64 CPU vs WebGPU; decode 128 + 256 at batch 1 and 8/64 per submit
#   SECTIONS="seed qwen lfm350" picks the parts and their order.
set -uo pipefail
SECTIONS=${SECTIONS:-seed lfm350 qwen}
OUT=${1:-bench/results}
mkdir -p "$OUT" models
W=.dev/wisp
say() { echo "== $*"; }
[ -d models/seed ] || $W gen-synthetic --like assets/lfm2-hybrid-q4.manifest.json -o models/seed --force --seed 1 >/dev/null 2>&1
same() { # name model n
  local a b
  a=$($W run -m "$2" -p Hello -n "$3" --temp 0 --ids --ignore-eos --backend cpu -t 16 2>&1 >/dev/null | grep "generated ids")
  b=$($W run -m "$2" -p Hello -n "$3" --temp 0 --ids --ignore-eos --backend webgpu 2>&1 >/dev/null | grep "generated ids")
  if [ -n "$a" ] && [ "$a" = "$b" ]; then echo "$1: $3 greedy tokens identical (cpu vs webgpu)"; else echo "$1: DIFFER"; echo "$a" | cut -c1-200; echo "$b" | cut -c1-200; fi
}
bench() { # receipt-name, args...
  local name=$1; shift
  printf '%-44s ' "$name"; $W bench "$@" -o "$OUT/$name.json" --force 2>/dev/null | head -1
}
seed_part() {
say seed
same seed models/seed 128
bench h200-seed-webgpu-decode-batch1 -m models/seed --backend webgpu --prompt 128 --decode 256 --batch 1
bench h200-seed-webgpu-decode-batch1-sequential -m models/seed --backend webgpu --prompt 128 --decode 256 --batch 1 --sequential
bench h200-seed-webgpu-decode-throughput -m models/seed --backend webgpu --prompt 128 --decode 256 --profile throughput
bench h200-seed-webgpu-decode-throughput-1024 -m models/seed --backend webgpu --prompt 128 --decode 1024 --profile throughput
bench h200-seed-webgpu-prefill1024 -m models/seed --backend webgpu --prompt 1024 --decode 16
bench h200-seed-webgpu-prefill1024-int8 -m models/seed --backend webgpu --prompt 1024 --decode 16 --profile throughput
# Dawn's robustness transform is off by default; ROBUST=1 times it on for comparison.
[ -n "${ROBUST:-}" ] && WISP_WEBGPU_ROBUST=1 bench h200-seed-webgpu-decode-throughput-robust -m models/seed --backend webgpu --prompt 128 --decode 256 --profile throughput
}
# LFM2-350M shape (random weights from the real config), the shape of
# ../shared/notes/anchors.md's llama.cpp CUDA numbers on this GPU.
lfm350_part() {
  A=/tmp/wq/lfm2-350m/art_q4
  if [ ! -d "$A" ]; then
    python3 tests/parity/hf_reference.py build --config lfm2-350m --seed 1234 --out /tmp/wq/lfm2-350m/hf >/dev/null 2>&1 &&
      $W convert /tmp/wq/lfm2-350m/hf -o "$A" --force --quant q4 --quiet
  fi
  if [ -d "$A" ]; then
    say lfm2-350m
    same "lfm2-350m q4" "$A" 64
    bench h200-lfm2-350m-q4-webgpu-decode-batch1 -m "$A" --backend webgpu --prompt 128 --decode 256 --batch 1
    bench h200-lfm2-350m-q4-webgpu-decode-throughput -m "$A" --backend webgpu --prompt 128 --decode 256 --profile throughput
    bench h200-lfm2-350m-q4-webgpu-prefill1024 -m "$A" --backend webgpu --prompt 1024 --decode 16
    bench h200-lfm2-350m-q4-webgpu-prefill1024-int8 -m "$A" --backend webgpu --prompt 1024 --decode 16 --profile throughput
  fi
}
qwen_part() {
for cfg in ${QWEN_CONFIGS:-qwen35-0.8b qwen35-2b}; do
  A=/tmp/wq/$cfg/art_q4k
  if [ ! -d "$A" ]; then
    python3 tests/parity/hf_reference.py build --config "$cfg" --seed 1234 --out /tmp/wq/$cfg/hf >/dev/null 2>&1 &&
      $W convert /tmp/wq/$cfg/hf -o "$A" --force --quant q4k --quiet
  fi
  [ -d "$A" ] || { echo "$cfg: no artifact"; continue; }
  say "$cfg"
  same "$cfg q4k" "$A" 64
  bench h200-$cfg-q4k-webgpu-decode-batch1 -m "$A" --backend webgpu --prompt 128 --decode 256 --batch 1
  bench h200-$cfg-q4k-webgpu-decode-throughput -m "$A" --backend webgpu --prompt 128 --decode 256 --profile throughput
  [ -n "${PROFILE_QWEN:-}" ] && WISP_WEBGPU_PROFILE=1 $W bench -m "$A" --backend webgpu --prompt 16 --decode 64 -o /tmp/p.json --force 2>&1 | grep -v XDG | head -24
done
}
for part in $SECTIONS; do "${part}_part"; done
