#!/usr/bin/env bash
# On the GPU machine (tools/device-bundle.sh first): tools/phase_probe.c on a
# grid of one workgroup per SM, then (PREFILL=1) the prefill receipts of the
# seed and LFM2-350M shapes. Output under $1.
set -uo pipefail
OUT=${1:-/tmp/phase}
mkdir -p "$OUT" models
. tools/device-env.sh
W=.dev/wisp
timeout "${PHASE_SECONDS:-150}" .dev/phase_probe "${PHASE_WG:-132}" "${PHASE_ROUNDS:-2000}" 2>&1 | tee "$OUT/phase-probe.txt"
[ -n "${PREFILL:-}" ] || exit 0
b() { n=$1; shift; printf '%-44s ' "$n"; $W bench "$@" -o "$OUT/$n.json" --force 2>/dev/null | head -1; }
[ -d models/seed ] || $W gen-synthetic --like assets/lfm2-hybrid-q4.manifest.json -o models/seed --force --seed 1 >/dev/null 2>&1
b h200-seed-webgpu-prefill1024 -m models/seed --backend webgpu --prompt 1024 --decode 16
b h200-seed-webgpu-prefill1024-int8 -m models/seed --backend webgpu --prompt 1024 --decode 16 --profile throughput
A=/tmp/wq/lfm2-350m/art_q4
python3 tests/parity/hf_reference.py build --config lfm2-350m --seed 1234 --out /tmp/wq/lfm2-350m/hf >/dev/null 2>&1 &&
  $W convert /tmp/wq/lfm2-350m/hf -o "$A" --force --quant q4 --quiet
b h200-lfm2-350m-q4-webgpu-prefill1024 -m "$A" --backend webgpu --prompt 1024 --decode 16
b h200-lfm2-350m-q4-webgpu-prefill1024-int8 -m "$A" --backend webgpu --prompt 1024 --decode 16 --profile throughput
