#!/usr/bin/env bash
# On the GPU machine (see tools/device-bundle.sh): where the GPU time of a
# token goes. Runs `wisp bench` with WISP_WEBGPU_PROFILE=1 (per-kernel
# timestamp queries, src/backend/webgpu/wgpu_profile.h) on the seed-shaped
# LFM2 (decode and a 1,024-token prefill) and, when python3 with transformers
# is there, on a Qwen 3.5 0.8B-shaped Q4_K artifact; then a normal bench of
# each for the real speed. Output: $1/profile-*.txt and receipts.
#   REPEAT=R   also profile decode with WISP_WEBGPU_PROFILE_REPEAT=R (each
#              dispatch recorded R times: marginal per-dispatch times)
#   NOPREFILL=1  skip the prefill profile
set -uo pipefail
OUT=${1:-bench/results}
mkdir -p "$OUT" models
W=.dev/wisp
[ -d models/seed ] || $W gen-synthetic --like assets/lfm2-hybrid-q4.manifest.json -o models/seed --force --seed 1 2>/dev/null
prof() { # name, bench args...
  local name=$1; shift
  WISP_WEBGPU_PROFILE=1 $W bench "$@" -o /tmp/prof-$name.json --force 2>&1 | grep -v XDG > "$OUT/profile-$name.txt"
  echo "== $name"; head -30 "$OUT/profile-$name.txt"
}
profs() { # name, bench args...: plain, and with REPEAT
  prof "$@"
  if [ -n "${REPEAT:-}" ]; then
    local name=$1; shift
    WISP_WEBGPU_PROFILE_REPEAT=$REPEAT prof "$name-repeat$REPEAT" "$@"
  fi
}
profs seed-decode -m models/seed --backend webgpu --prompt 128 --decode 128
[ -n "${NOPREFILL:-}" ] || prof seed-prefill1024 -m models/seed --backend webgpu --prompt 1024 --decode 1
Q=${QWEN08:-/tmp/wq/qwen35-0.8b/art_q4k}
if [ ! -d "$Q" ] && python3 -c "import transformers" 2>/dev/null; then
  python3 tests/parity/hf_reference.py build --config qwen35-0.8b --seed 1234 --out /tmp/wq/qwen35-0.8b/hf >/dev/null 2>&1 &&
    $W convert /tmp/wq/qwen35-0.8b/hf -o "$Q" --force --quant q4k --quiet
fi
if [ -d "$Q" ]; then
  profs qwen08-decode -m "$Q" --backend webgpu --prompt 128 --decode 128
  $W bench -m "$Q" --backend webgpu --prompt 128 --decode 256 -o "$OUT/h200-qwen35-0.8b-q4k-webgpu-decode.json" --force 2>/dev/null | tail -1
fi
$W bench -m models/seed --backend webgpu --prompt 128 --decode 256 -o "$OUT/h200-seed-webgpu-decode-batch1.json" --force 2>/dev/null | tail -1
[ -n "${NOPREFILL:-}" ] || $W bench -m models/seed --backend webgpu --prompt 1024 --decode 16 -o "$OUT/h200-seed-webgpu-prefill1024.json" --force 2>/dev/null | tail -1
