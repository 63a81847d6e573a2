#!/usr/bin/env bash
# On the GPU machine (see tools/device-bundle.sh): per-kernel marginal costs
# (WISP_WEBGPU_PROFILE_REPEAT) of the seed-shaped LFM2 decode under several
# settings, one table line per kernel, so one device call compares them.
#   PROBES="label:ENV=V,ENV=V label2:..." (default: plan geometry, Dawn's
#   robustness back on, matvec geometries); Q=1 adds the Qwen 3.5 0.8B decode under QPROBES
#   (same form, default the plan).
set -uo pipefail
OUT=${1:-/tmp/probe}
mkdir -p "$OUT" models
W=.dev/wisp
[ -d models/seed ] || $W gen-synthetic --like assets/lfm2-hybrid-q4.manifest.json -o models/seed --force --seed 1 2>/dev/null
R=${REPEAT:-8}
probe() { # label, model, env assignments (comma separated)
  local label=$1 model=$2 envs=$3
  echo "== $label ($envs)"
  env ${envs//,/ } WISP_WEBGPU_PROFILE=1 WISP_WEBGPU_PROFILE_REPEAT=$R $W bench -m "$model" --backend webgpu \
    --prompt 128 --decode 64 -o /tmp/probe.json --force 2>&1 | grep -v "XDG\|^bench\|^receipt\|^prefill" | head -${LINES_PER:-14}
}
for p in ${PROBES:-plan:X=1 robust:WISP_WEBGPU_ROBUST=1 mv64x1:WISP_WEBGPU_MATVEC=64x1 mv128x2:WISP_WEBGPU_MATVEC=128x2 mv256x1:WISP_WEBGPU_MATVEC=256x1 mv256x4:WISP_WEBGPU_MATVEC=256x4}; do
  probe "${p%%:*}" models/seed "${p#*:}"
done
QM=/tmp/wq/qwen35-0.8b/art_q4k
if [ -n "${Q:-}" ]; then
  if [ ! -d "$QM" ]; then
    python3 tests/parity/hf_reference.py build --config qwen35-0.8b --seed 1234 --out /tmp/wq/qwen35-0.8b/hf >/dev/null 2>&1 &&
      $W convert /tmp/wq/qwen35-0.8b/hf -o "$QM" --force --quant q4k --quiet
  fi
  for p in ${QPROBES:-plan:X=1}; do
    probe "qwen08-${p%%:*}" "$QM" "${p#*:}"
  done
fi
