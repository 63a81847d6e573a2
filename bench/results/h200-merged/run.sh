#!/usr/bin/env bash
# One device call after the session's merges: the speed A/B against 05266a1 (tools/device.sh ab:
# .dev/wisp_prev = 05266a1, .dev/wisp = the merged main) and the multi-row products (tools/device.sh rows).
set -uo pipefail
OUT=${OUT:-/tmp/merged}
timeout 330 tools/device.sh ab $OUT/ab > $OUT/ab-log.txt 2>&1
mkdir -p models /tmp/wq/qwen35-0.8b
ln -sfn /tmp/art/seed models/seed
ln -sfn /tmp/art/qwen35-0.8b /tmp/wq/qwen35-0.8b/art_q4k
SEQS="2 8 32" timeout 200 tools/device.sh rows $OUT/rows > $OUT/rows-log.txt 2>&1
