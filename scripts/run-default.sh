#!/usr/bin/env bash
# `make run`: generate text with the built-in default model: models/default
# (a small LFM2 trained on the King James Bible, docs/default-model.md) when it
# is there, else a seed-shaped synthetic LFM2 (168 MB, random weights), which
# the first run generates under models/.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--bench-only" ]; then
  exec build/wisp bench
fi
if [ -f models/default/manifest.json ]; then
  prompt=${WISP_PROMPT:-"And it came to pass"}
else
  prompt=${WISP_PROMPT:-"The meaning of life is"}
fi
build/wisp run -p "$prompt" -n "${WISP_N:-64}" --temp "${WISP_TEMP:-0.8}" --seed "${WISP_SEED:-42}"
