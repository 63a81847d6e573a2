#!/usr/bin/env bash
# On the GPU machine (see tools/device-bundle.sh): WebGPU correctness and speed
# on the H200. Writes receipts into $1 (default bench/results).
set -uo pipefail
OUT=${1:-bench/results}
mkdir -p "$OUT" models
. tools/device-env.sh
W=.dev/wisp
$W devices 2>&1 | head -12
$W gen-synthetic --like assets/lfm2-hybrid-q4.manifest.json -o models/seed --force --seed 1 2>/dev/null
$W gen-synthetic --small -o models/small --force --seed 1 2>/dev/null
for m in small seed; do
  $W run -m models/$m -p "Hello" -n 128 --temp 0 --ids --backend cpu -t 16 2>&1 >/dev/null | grep "generated ids" > /tmp/cpu-$m.txt
  $W run -m models/$m -p "Hello" -n 128 --temp 0 --ids --backend webgpu 2>&1 >/dev/null | grep "generated ids" > /tmp/gpu-$m.txt
  if cmp -s /tmp/cpu-$m.txt /tmp/gpu-$m.txt; then echo "greedy $m: 128 tokens identical (cpu vs webgpu)";
  else echo "greedy $m: DIFFER"; cat /tmp/cpu-$m.txt /tmp/gpu-$m.txt | cut -c1-300; fi
done
$W plan -m models/seed --backend webgpu | head -3
$W bench -m models/seed --backend webgpu --prompt 128 --decode 256 -o "$OUT/h200-seed-webgpu-decode-batch1.json" --force | head -1
$W bench -m models/seed --backend webgpu --prompt 128 --decode 256 --profile throughput -o "$OUT/h200-seed-webgpu-decode-throughput.json" --force | head -1
$W bench -m models/seed --backend webgpu --prompt 1024 --decode 16 -o "$OUT/h200-seed-webgpu-prefill1024.json" --force | head -1
# The prefill product: int8 (default plan) above; the f32 path, and larger chunks.
WISP_WEBGPU_I8=0 $W bench -m models/seed --backend webgpu --prompt 1024 --decode 16 -o "$OUT/h200-seed-webgpu-prefill1024-f32.json" --force | head -1 | sed 's/^/f32 path: /'
WISP_PREFILL_CHUNK=1024 $W bench -m models/seed --backend webgpu --prompt 1024 --decode 16 -o "$OUT/h200-seed-webgpu-prefill1024-chunk1024.json" --force | head -1 | sed 's/^/chunk 1024: /'
echo "== default model (trained) on webgpu vs the recorded PyTorch greedy ids"
want=$(python3 -c "import json;d=json.load(open('models/default/expected.json'));print(' '.join(map(str,d.get('greedy_ids') or d.get('ids') or d.get('greedy'))))" 2>/dev/null)
got=$($W run -m models/default -p "$(python3 -c "import json;print(json.load(open('models/default/expected.json')).get('prompt','And it came to pass'))")" -n 128 --temp 0 --ignore-eos --ids --backend webgpu 2>&1 >/dev/null | sed -n 's/^generated ids: //p')
if [ -n "$want" ] && [ "$want" = "$got" ]; then echo "default model webgpu: 128 greedy ids identical to PyTorch"; else echo "default model webgpu: differ"; echo "want $want" | cut -c1-200; echo "got  $got" | cut -c1-200; fi
echo "== webgpu tests on the H200"
WISP_BIN=$W WISP_REQUIRE_WEBGPU=1 .dev/wisp_tests webgpu 2>&1 | grep -E "FAIL|passed"
