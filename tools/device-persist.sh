#!/usr/bin/env bash
# On the GPU machine (tools/device-bundle.sh first): the persistent decode
# against the op-by-op one: greedy tokens (CPU, WebGPU op by op, WebGPU
# persistent) and `wisp bench` decode speed under several grids/batches.
#   PERSIST_MODELS="seed"   PERSIST_GRIDS="auto 132 264"   PERSIST_BATCHES="1 64"
#   PERSIST_SKIPS="1 2 4 8 16" (timing: 1 attention, 2 head, 4 MLP, 8 conv in_proj, 16 qkv left out)
set -uo pipefail
. tools/device-env.sh
W=.dev/wisp
OUT=${OUT_DIR:-/tmp/persist}
mkdir -p "$OUT" models
[ -d models/seed ] || $W gen-synthetic --like assets/lfm2-hybrid-q4.manifest.json -o models/seed --force --seed 1 >/dev/null 2>&1
for m in ${PERSIST_MODELS:-seed}; do
  dir=models/$m
  P="Once upon a time there was a small town by the sea where"
  $W run -m $dir --backend cpu -p "$P" -n ${PERSIST_N:-128} --temp 0 >"$OUT/$m-cpu.txt" 2>/dev/null
  WISP_WEBGPU_PERSIST=0 $W run -m $dir --backend webgpu -p "$P" -n ${PERSIST_N:-128} --temp 0 >"$OUT/$m-op.txt" 2>/dev/null
  WISP_WEBGPU_PERSIST=1 WISP_WEBGPU_PERSIST_DEBUG=1 $W run -m $dir --backend webgpu -p "$P" -n ${PERSIST_N:-128} --temp 0 >"$OUT/$m-persist.txt" 2>"$OUT/$m-persist.err"
  for v in op persist; do
    if cmp -s "$OUT/$m-cpu.txt" "$OUT/$m-$v.txt"; then echo "$m: $v text == cpu"; else echo "$m: $v text DIFFERS from cpu"; fi
  done
  grep -h "persistent" "$OUT/$m-persist.err" | head -3
  for b in ${PERSIST_BATCHES:-1 64}; do
    printf '%-6s batch %-3s %-14s ' "$m" "$b" "op-by-op"
    WISP_WEBGPU_PERSIST=0 $W bench -m $dir --backend webgpu --prompt 128 --decode 256 --batch $b -o "$OUT/$m-op-b$b.json" --force 2>/dev/null | grep -o "decode: .*" | head -1
    for gwg in ${PERSIST_GRIDS:-auto 132 264}; do
      printf '%-6s batch %-3s %-14s ' "$m" "$b" "persist-$gwg"
      if [ "$gwg" = auto ]; then e=""; else e="WISP_WEBGPU_PERSIST_WG=$gwg"; fi
      env WISP_WEBGPU_PERSIST=1 $e $W bench -m $dir --backend webgpu --prompt 128 --decode 256 --batch $b -o "$OUT/$m-persist$gwg-b$b.json" --force 2>/dev/null | grep -o "decode: .*" | head -1
    done
  done
  # Other settings, "label:ENV=V,ENV=V" (persistent on), batch PERSIST_VBATCH (64).
  for v in ${PERSIST_VARIANTS:-}; do
    printf '%-6s batch %-3s %-14s ' "$m" "${PERSIST_VBATCH:-64}" "${v%%:*}"
    env WISP_WEBGPU_PERSIST=1 $(echo "${v#*:}" | tr ',' ' ') $W bench -m $dir --backend webgpu --prompt 128 --decode 256 --batch ${PERSIST_VBATCH:-64} -o /tmp/v.json --force 2>/dev/null | grep -o "decode: .*" | head -1
  done
  # Timing probes (wrong tokens on purpose): a phase family left out.
  for sk in ${PERSIST_SKIPS:-}; do
    printf '%-6s batch 64  %-14s ' "$m" "skip-$sk"
    WISP_WEBGPU_PERSIST=1 WISP_WEBGPU_PERSIST_SKIP=$sk $W bench -m $dir --backend webgpu --prompt 128 --decode 256 --batch 64 -o /tmp/skip.json --force 2>/dev/null | grep -o "decode: .*" | head -1
  done
done
