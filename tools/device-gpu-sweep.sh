#!/usr/bin/env bash
# On the GPU machine: sweep the WebGPU backend's tuning variables on the
# seed-shaped model and print one line per setting (decode and prefill tok/s),
# so the defaults can be chosen from measurements. Assumes
# tools/device-gpu-check.sh ran (models/seed exists, environment set up).
set -uo pipefail
. tools/device-env.sh
W=.dev/wisp
M=${1:-models/seed}
dec() { # label, env...
  local label=$1; shift
  local line; line=$(env "$@" $W bench -m "$M" --backend webgpu --prompt 128 --decode 256 --batch 64 -o /tmp/sweep.json --force 2>/dev/null | head -1)
  printf '%-34s %s\n' "$label" "$line"
}
pre() {
  local label=$1; shift
  local line; line=$(env "$@" $W bench -m "$M" --backend webgpu --prompt 1024 --decode 1 --batch 1 -o /tmp/sweep.json --force 2>/dev/null | head -1)
  printf '%-34s %s\n' "$label" "$line"
}
dec "plan geometry"
# matvec WGxROWS: WG threads, ROWS rows per 32-lane group (matvec.wgsl)
for g in ${SWEEP_MATVEC:-64x1 64x2 128x1 128x2 128x4 256x1 256x2 256x4 512x1}; do dec "matvec $g" WISP_WEBGPU_MATVEC=$g; done
for b in ${SWEEP_BIG:-2 4 8 16}; do dec "head rows $b" WISP_WEBGPU_MATVEC=128x2 WISP_WEBGPU_MATVEC_BIG_ROWS=$b; done
for s in ${SWEEP_SPLITS:-1 8 32}; do dec "attn splits $s" WISP_WEBGPU_ATTN_SPLITS=$s; done
[ -n "${SWEEP_NOFUSE-x}" ] && dec "no fusion" WISP_WEBGPU_FUSE=0
for t in ${SWEEP_MATMUL-32x32 64x32 64x64 128x32 128x64}; do pre "prefill matmul $t" WISP_WEBGPU_MATMUL=$t; done
if [ -n "${SWEEP_PREFILL-x}" ]; then
# Prefill product: the Q4 x int8 kernel's geometry (TMxTNxRMxRNxKB), the f32
# path for comparison, and the prefill chunk (tokens per forward; default 64).
pre "prefill f32 path" WISP_WEBGPU_I8=0
for g in 64x32x4x4x2 64x32x8x4x2 32x32x4x4x2 32x64x4x4x2 64x64x8x4x2 64x64x8x8x2 128x32x8x4x2 128x64x8x8x2 64x32x4x4x1 64x32x4x4x4; do
  pre "prefill i8 $g" WISP_WEBGPU_MATMUL_I8=$g
done
pre "prefill i8 fused quantize" WISP_WEBGPU_I8_FUSEQ=1
pre "prefill i8 fused quantize 32x32x4x4x2" WISP_WEBGPU_I8_FUSEQ=1 WISP_WEBGPU_MATMUL_I8=32x32x4x4x2
for c in 128 256 512 1024; do
  pre "prefill chunk $c" WISP_PREFILL_CHUNK=$c
  pre "prefill chunk $c f32" WISP_PREFILL_CHUNK=$c WISP_WEBGPU_I8=0
  pre "prefill chunk $c i8 64x64x8x4x2" WISP_PREFILL_CHUNK=$c WISP_WEBGPU_MATMUL_I8=64x64x8x4x2
  pre "prefill chunk $c i8 128x64x8x8x2" WISP_PREFILL_CHUNK=$c WISP_WEBGPU_MATMUL_I8=128x64x8x8x2
done
fi
