#!/usr/bin/env bash
# On the GPU machine (tools/device-bundle.sh first): everything a session
# needs from one device call, under $1 (packed into $1.tgz at the end):
#   persist/   tools/device-persist.sh (texts CPU / op by op / persistent,
#              decode speed by grid and batch, PERSIST_VARIANTS)
#   phase/     tools/phase_probe.c on 132 workgroups
#   op/        tools/device-speed.sh receipts, default settings
#   persist-receipts/  the same decode receipts with the persistent decode
#              on (WISP_WEBGPU_PERSIST=1, WISP_WEBGPU_PERSIST_WG=132)
# SECTIONS (default "seed lfm350") as tools/device-speed.sh; PHASE=0 / OP=0 leave
# the probe / the default receipts out.
set -uo pipefail
OUT=${1:-/tmp/session}
mkdir -p "$OUT"
. tools/device-env.sh
say() { echo "== $* ($(date +%T))"; }
say persist
OUT_DIR=$OUT/persist PERSIST_GRIDS="${PERSIST_GRIDS:-132 256}" PERSIST_BATCHES="1 64" \
  PERSIST_VARIANTS="${PERSIST_VARIANTS:-}" timeout 150 bash tools/device-persist.sh 2>&1 | tee "$OUT/persist.txt"
if [ "${PHASE:-1}" = 1 ]; then
  say phase
  mkdir -p "$OUT/phase"
  timeout 90 .dev/phase_probe 132 2000 2>&1 | tee "$OUT/phase/phase-probe.txt"
fi
if [ "${OP:-1}" = 1 ]; then
  say receipts, default settings
  SECTIONS=${SECTIONS:-seed lfm350} timeout 200 bash tools/device-speed.sh "$OUT/op" 2>&1 | tee "$OUT/op.log"
fi
say receipts, persistent decode
WISP_WEBGPU_PERSIST=1 WISP_WEBGPU_PERSIST_WG=132 SECTIONS=${SECTIONS:-seed lfm350} timeout 150 \
  bash tools/device-speed.sh "$OUT/persist-receipts" 2>&1 | tee "$OUT/persist-receipts.log"
rm -f "$OUT"/persist/*.txt.err 2>/dev/null
tar czf "$OUT.tgz" -C "$(dirname "$OUT")" "$(basename "$OUT")"
say done
