#!/usr/bin/env bash
# On the GPU machine (tools/device-bundle.sh first): the seed shape's
# 1,024-token int8 prefill (--profile throughput): the per-kernel profile,
# then whole-run prefill tok/s under several settings, two runs each.
#   GEOMS="plan:X=1 g6464:WISP_WEBGPU_MATMUL_I8=64x64x4x4x2"
set -uo pipefail
. tools/device-env.sh
W=.dev/wisp
mkdir -p models
[ -d models/seed ] || $W gen-synthetic --like assets/lfm2-hybrid-q4.manifest.json -o models/seed --force --seed 1 >/dev/null 2>&1
WISP_WEBGPU_PROFILE=1 $W bench -m models/seed --backend webgpu --prompt 1024 --decode 1 --profile throughput -o /tmp/p.json --force 2>&1 |
  grep -v XDG | head -${PROFILE_LINES:-24}
for s in ${GEOMS:-plan:X=1}; do
  for rep in 1 2; do
    printf '%-10s ' "${s%%:*}"
    env $(echo "${s#*:}" | tr "," " ") $W bench -m models/seed --backend webgpu --prompt 1024 --decode 4 --profile throughput \
      -o /tmp/g.json --force 2>/dev/null | grep -o "prefill: [^|]*" | head -1
  done
done
