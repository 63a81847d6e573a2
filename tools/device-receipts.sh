#!/usr/bin/env bash
# On the GPU machine (see tools/device-bundle.sh): one device call for a
# session's closing receipts. A short A/B of the tuning switches still open
# (AB, MODELS as tools/device-ab.sh), then tools/device-speed.sh's sections
# (SECTIONS, default "seed qwen lfm350" with the Qwen 0.8B shape before the
# 2B one, whose artifact takes longest to build), then everything under $1
# packed into one tarball (the device returns at most 8 files).
set -uo pipefail
OUT=${1:-/tmp/receipts}
mkdir -p "$OUT"
. tools/device-env.sh
if [ -n "${AB:-}" ]; then
  timeout "${AB_SECONDS:-90}" bash tools/device-ab.sh > "$OUT/ab.txt" 2>&1
  cat "$OUT/ab.txt"
fi
SECTIONS=${SECTIONS:-seed qwen lfm350} timeout "${SPEED_SECONDS:-480}" bash tools/device-speed.sh "$OUT" 2>&1 |
  tee "$OUT/speed.log"
tar czf "$OUT.tgz" -C "$(dirname "$OUT")" "$(basename "$OUT")"
