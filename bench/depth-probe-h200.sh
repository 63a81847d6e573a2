#!/usr/bin/env bash
# Decode at depth, wisp alone (no peer): the persistent decode against the
# op-by-op decode (tuning persist=0, whose flash-decoding splits grow with
# the keys: attnSplitsLong) and the persistent decode's grouped attention on
# a wider grid. A probe for choosing a rule, not a receipt against llama.cpp.
#   bash bench/depth-probe-h200.sh > OUT/depth.txt   (after tools/device.sh bundle)
# Environment: MODELS (default "qwen08 seedlong"; set and empty: no depth runs), DEPTHS (default "8192 32768"),
# PROFILE_MODELS, PROFILE_LENS (prefill profiles), PROFILE_DEPTHS (decode-at-depth profiles, op by op),
# VARIANTS (tuning strings; "none" is the default path).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
WISP_DEVICE_LIB=1 source tools/device.sh
setup_env
for m in ${MODELS-qwen08 seedlong}; do
  a=$(model_dir "$m"); [ -d "$a" ] || { echo "$m: no artifact"; continue; }
  for dep in ${DEPTHS:-8192 32768}; do
    for t in ${VARIANTS:-none persistOpt=9 persist=0 persist=0,attnSplitsLong=2x512 persistOpt=41,persistGrid=256}; do
      tu=(); [ "$t" = none ] || tu=(--tuning "$t")
      printf '%-8s depth %-6s %-40s ' "$m" "$dep" "$t"
      $W bench -m "$a" --backend webgpu -p "$dep" -n 64 "${tu[@]}" -o /tmp/depth-probe.json --force 2>/dev/null | head -1
    done
  done
done
# where a prefill's GPU time goes (WISP_WEBGPU_PROFILE=1: per kernel), PROFILE_MODELS at PROFILE_LENS
for m in ${PROFILE_MODELS-qwen08}; do
  a=$(model_dir "$m")
  for n in ${PROFILE_LENS-1024 4096}; do
    echo "== $m prefill $n: GPU time per kernel"
    WISP_WEBGPU_PROFILE=1 $W bench -m "$a" --backend webgpu -p "$n" -n 4 -o /tmp/depth-probe.json --force 2>&1 |
      grep -v '^bench:\|^wisp: compiling' | head -40
  done
done
# where decode at depth spends its GPU time (op by op, persist=0: the persistent
# kernel is one dispatch), PROFILE_MODELS at PROFILE_DEPTHS (default none): the
# prefill's kernels are in the same table; the decode's are attn_decode*, the
# split merges and the products of one token
for m in ${PROFILE_MODELS-qwen08}; do
  a=$(model_dir "$m")
  for dep in ${PROFILE_DEPTHS:-}; do
    echo "== $m decode at depth $dep, op by op: GPU time per kernel"
    WISP_WEBGPU_PROFILE=1 $W bench -m "$a" --backend webgpu -p "$dep" -n 64 --tuning persist=0 -o /tmp/depth-probe.json \
      --force 2>&1 | grep -v '^bench:\|^wisp: compiling' | head -40
  done
done
