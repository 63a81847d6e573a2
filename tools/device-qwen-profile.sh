#!/usr/bin/env bash
# On the GPU machine (tools/device-bundle.sh first): where a Qwen 3.5 decode
# token's GPU time goes, and A/B runs of tuning switches. For each
# QWEN_CONFIGS shape (random weights from the real configuration, Q4_K):
# the batch-1 bench of each VARIANTS entry ("base" = defaults, else
# comma-separated VAR=value settings), base again at the end (drift), and
# WISP_WEBGPU_PROFILE=1 decode profiles (one pass per dispatch, then
# REPEAT=8 for marginal per-dispatch times; PROFILE=0 skips them); BATCHES
# lists decode batch sizes (tokens a submit) to bench with the defaults.
# RECEIPTS=1 then takes tools/device-speed.sh's Qwen receipts under
# $1/receipts. Output under $1, packed into $1.tgz.
set -uo pipefail
OUT=${1:-/tmp/qprof}
mkdir -p "$OUT"
. tools/device-env.sh
W=.dev/wisp
say() { echo "== $* ($(date +%T))"; }
# SEED_AB="A B": seed-shaped LFM2 decode (batch 1 and 64 a dispatch) with
# binaries .dev/A and .dev/B, alternated twice (e.g. a build of the previous
# commit carried as .dev/wisp_prev).
if [ -n "${SEED_AB:-}" ]; then
  [ -d models/seed ] || $W gen-synthetic --like assets/lfm2-hybrid-q4.manifest.json -o models/seed --seed 1 >/dev/null 2>&1
  say "seed A/B: $SEED_AB"
  for rep in 1 2; do
    for b in $SEED_AB; do
      for bt in 1 64; do
        printf '%-12s batch %-3s ' "$b" "$bt"
        .dev/$b bench -m models/seed --backend webgpu --prompt 128 --decode 256 --batch $bt -o /tmp/s.json 2>/dev/null | head -1
      done
    done
  done
fi
for cfg in ${QWEN_CONFIGS:-qwen35-0.8b qwen35-2b}; do
  A=/tmp/wq/$cfg/art_q4k
  if [ ! -d "$A" ]; then
    say "build $cfg"
    python3 tests/parity/hf_reference.py build --config "$cfg" --seed 1234 --out /tmp/wq/$cfg/hf >/dev/null 2>&1 &&
      $W convert /tmp/wq/$cfg/hf -o "$A" --quant q4k --quiet
  fi
  [ -d "$A" ] || { echo "$cfg: no artifact"; continue; }
  say "$cfg"
  for v in ${VARIANTS:-base} base; do
    envs=""; [ "$v" = base ] || envs=$(echo "$v" | tr ',' ' ')
    printf '%-10s %-56s ' "$cfg" "$v"
    env $envs $W bench -m "$A" --backend webgpu --prompt 128 --decode 256 --batch 1 -o /tmp/x.json 2>/dev/null | head -1
  done
  for bt in ${BATCHES:-}; do # decode tokens a submit (default settings)
    printf '%-10s %-56s ' "$cfg" "--batch $bt"
    $W bench -m "$A" --backend webgpu --prompt 128 --decode 256 --batch "$bt" -o /tmp/x.json 2>/dev/null | head -1
  done
  if [ "${PROFILE:-1}" = 1 ]; then
    WISP_WEBGPU_PROFILE=1 $W bench -m "$A" --backend webgpu --prompt 16 --decode 64 -o /tmp/p.json 2>&1 | grep -v XDG > "$OUT/$cfg-profile.txt"
    WISP_WEBGPU_PROFILE=1 WISP_WEBGPU_PROFILE_REPEAT=8 $W bench -m "$A" --backend webgpu --prompt 16 --decode 64 -o /tmp/p.json 2>&1 | grep -v XDG > "$OUT/$cfg-profile-r8.txt"
    head -16 "$OUT/$cfg-profile-r8.txt" | tail -12
  fi
done
if [ "${RECEIPTS:-0}" = 1 ]; then
  say receipts
  SECTIONS=qwen timeout 300 bash tools/device-speed.sh "$OUT/receipts" 2>&1 | tee "$OUT/receipts.log"
fi
tar czf "$OUT.tgz" -C "$(dirname "$OUT")" "$(basename "$OUT")"
say done
