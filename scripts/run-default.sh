#!/usr/bin/env bash
# `make run`: generate text with the built-in default model. The first run
# generates that model (a seed-shaped synthetic LFM2, 168 MB) under models/.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--bench-only" ]; then
  exec build/wisp bench
fi
build/wisp run -p "${WISP_PROMPT:-The meaning of life is}" -n "${WISP_N:-64}" --temp 0.8 --seed 42
