#!/usr/bin/env bash
# On the GPU machine: Qwen 3.5 on the WebGPU backend against transformers
# (small and 0.8B-shaped), a q4k decode benchmark of the 0.8B shape, and the
# LFM2 seed shape with the packed-f16 KV cache. Receipts go to $1.
set -uo pipefail
OUT=${1:-bench/results}
mkdir -p "$OUT" models
. tools/device-env.sh
W=.dev/wisp
echo "== qwen35 parity on webgpu"
CONFIGS="qwen35-small qwen35-0.8b" QUANTS="f32 q4k" BACKEND=webgpu REF_DEVICE=cuda THREADS=16 WORK=/tmp/wq \
  timeout 200 bash tests/parity/run_device.sh $W /tmp/unused /tmp/wq 2>&1 | grep -E "PASS|FAIL|summary|greedy|worst|^qwen"
A=/tmp/wq/qwen35-0.8b/art_q4k
if [ -d "$A" ]; then
  $W bench -m "$A" --backend webgpu --prompt 128 --decode 256 -o "$OUT/h200-qwen35-0.8b-q4k-webgpu-decode.json" --force 2>/dev/null | head -1
  $W bench -m "$A" --backend webgpu --prompt 128 --decode 256 --profile throughput -o "$OUT/h200-qwen35-0.8b-q4k-webgpu-throughput.json" --force 2>/dev/null | head -1
fi
if [ -d models/seed ] || $W gen-synthetic --like assets/lfm2-hybrid-q4.manifest.json -o models/seed --force --seed 1 2>/dev/null; then
  WISP_WEBGPU_KV=f16 $W bench -m models/seed --backend webgpu --prompt 128 --decode 256 --profile throughput -o "$OUT/h200-seed-webgpu-kv16-throughput.json" --force 2>/dev/null | head -1
  a=$($W run -m models/seed -p Hello -n 64 --temp 0 --ids --backend webgpu 2>&1 >/dev/null | grep "generated ids")
  b=$(WISP_WEBGPU_KV=f16 $W run -m models/seed -p Hello -n 64 --temp 0 --ids --backend webgpu 2>&1 >/dev/null | grep "generated ids")
  [ "$a" = "$b" ] && echo "kv16 seed: 64 greedy tokens identical to f32 KV" || echo "kv16 seed: tokens differ from f32 KV"
fi
