#!/usr/bin/env bash
# On the GPU machine (see tools/device-bundle.sh): WebGPU correctness and speed
# on the H200. Writes receipts into $1 (default bench/results).
set -uo pipefail
OUT=${1:-bench/results}
mkdir -p "$OUT" models
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
export LD_LIBRARY_PATH=$PWD/.dev/lib VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export WISP_WEBGPU_LIB=$PWD/.cache/webgpu/libwebgpu_wrapper.so
W=.dev/wisp
$W devices 2>&1 | head -12
$W gen-synthetic --like assets/lfm2-hybrid-q4.manifest.json -o models/seed --seed 1 2>/dev/null
$W gen-synthetic --small -o models/small --seed 1 2>/dev/null
for m in small seed; do
  $W run -m models/$m -p "Hello" -n 128 --temp 0 --ids --backend cpu -t 16 2>&1 >/dev/null | grep "generated ids" > /tmp/cpu-$m.txt
  $W run -m models/$m -p "Hello" -n 128 --temp 0 --ids --backend webgpu 2>&1 >/dev/null | grep "generated ids" > /tmp/gpu-$m.txt
  if cmp -s /tmp/cpu-$m.txt /tmp/gpu-$m.txt; then echo "greedy $m: 128 tokens identical (cpu vs webgpu)";
  else echo "greedy $m: DIFFER"; cat /tmp/cpu-$m.txt /tmp/gpu-$m.txt | cut -c1-300; fi
done
$W plan -m models/seed --backend webgpu | head -3
$W bench -m models/seed --backend webgpu --prompt 128 --decode 256 -o "$OUT/h200-seed-webgpu-decode.json" | head -1
$W bench -m models/seed --backend webgpu --prompt 1024 --decode 16 -o "$OUT/h200-seed-webgpu-prefill1024.json" | head -1
WISP_WEBGPU_MATVEC=128x4 $W bench -m models/seed --backend webgpu --prompt 128 --decode 256 -o /tmp/geom-default.json | head -1
echo "== webgpu tests on the H200"
WISP_BIN=$W WISP_REQUIRE_WEBGPU=1 .dev/wisp_tests webgpu 2>&1 | grep -E "FAIL|passed"
