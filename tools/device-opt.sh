#!/usr/bin/env bash
# On the GPU machine (tools/device-bundle.sh first): the persistent decode's
# OPT bits (persist_conv_attn.wgsl) measured one by one at 64 steps a dispatch
# (tools/device-persist.sh), then the receipts (tools/device-speed.sh,
# SECTIONS default "seed lfm350") with the best setting, which must beat
# OPT 0 (best of two runs) by 3 % to be chosen. Output under $1 (+ $1.tgz).
set -uo pipefail
OUT=${1:-/tmp/opt}
mkdir -p "$OUT"
V=""
for o in ${OPTS:-0 1 2 4 8 16 31 0}; do V="$V opt$o:WISP_WEBGPU_PERSIST_OPT=$o,WISP_WEBGPU_PERSIST_WG=132"; done
OUT_DIR=$OUT/persist PERSIST_GRIDS="${PERSIST_GRIDS:-128 132}" PERSIST_BATCHES="64" PERSIST_VARIANTS="$V" \
  timeout 240 bash tools/device-persist.sh 2>&1 | tee "$OUT/opt.txt"
best=$(awk '/ opt[0-9]+ +decode:/ { o = substr($4, 4); for (i = 1; i <= NF; i++) if ($i == "tok/s,") v = $(i - 1);
         if (o == 0) { if (v > base) base = v } else if (v > bv) { bv = v; bo = o } }
       END { if (bv > base * 1.03) print bo; else print 0 }' "$OUT/opt.txt")
echo "== chosen WISP_WEBGPU_PERSIST_OPT=$best"
. tools/device-env.sh
WISP_WEBGPU_PERSIST_OPT=$best SECTIONS=${SECTIONS:-seed lfm350} timeout 240 bash tools/device-speed.sh "$OUT/receipts" 2>&1 |
  tee "$OUT/receipts.log"
tar czf "$OUT.tgz" -C "$(dirname "$OUT")" "$(basename "$OUT")"
