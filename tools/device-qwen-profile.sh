#!/usr/bin/env bash
# On the GPU machine (tools/device-bundle.sh first): where a Qwen 3.5 decode
# token's GPU time goes, and A/B runs of tuning switches. For each
# QWEN_CONFIGS shape (random weights from the real configuration, Q4_K):
# the batch-1 bench of each VARIANTS entry ("base" = defaults, else
# comma-separated VAR=value settings; BATCH=N among them: N tokens a
# submit instead of 1), base again at the end (drift), and
# WISP_WEBGPU_PROFILE=1 decode profiles (one pass per dispatch, then
# REPEAT=8 for marginal per-dispatch times; PROFILE=0 skips them;
# PROFILE_VARIANTS: REPEAT=8 profiles of settings, see below); BATCHES
# lists decode batch sizes (tokens a submit) to bench with the defaults.
# RECEIPTS=1 then takes tools/device-speed.sh's Qwen receipts under
# $1/receipts (RECEIPT_SECTIONS, default qwen). QWEN_AB="binA binB"
# alternates two binaries' decode at AB_BATCHES tokens a submit. Output
# under $1, packed into $1.tgz.
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
  [ -d models/seed ] || $W gen-synthetic --like assets/lfm2-hybrid-q4.manifest.json -o models/seed --force --seed 1 >/dev/null 2>&1
  say "seed A/B: $SEED_AB"
  for rep in 1 2; do
    for b in $SEED_AB; do
      for bt in 1 64; do
        printf '%-12s batch %-3s ' "$b" "$bt"
        .dev/$b bench -m models/seed --backend webgpu --prompt 128 --decode 256 --batch $bt -o /tmp/s.json --force 2>/dev/null | head -1
      done
    done
  done
fi
# The artifacts, built side by side.
for cfg in ${QWEN_CONFIGS:-qwen35-0.8b qwen35-2b}; do
  A=/tmp/wq/$cfg/art_q4k
  [ -d "$A" ] && continue
  say "build $cfg"
  (python3 tests/parity/hf_reference.py build --config "$cfg" --seed 1234 --out /tmp/wq/$cfg/hf >/dev/null 2>&1 &&
    say "converting $cfg" && $W convert /tmp/wq/$cfg/hf -o "$A" --force --quant q4k --quiet) &
done
wait
say "built"
for cfg in ${QWEN_CONFIGS:-qwen35-0.8b qwen35-2b}; do
  A=/tmp/wq/$cfg/art_q4k
  [ -d "$A" ] || { echo "$cfg: no artifact"; continue; }
  say "$cfg"
  # QWEN_AB="binA binB": the decode of binaries .dev/binA and .dev/binB at
  # AB_BATCHES tokens a submit, alternated AB_REPS times (2).
  if [ -n "${QWEN_AB:-}" ]; then
    for rep in $(seq "${AB_REPS:-2}"); do
      for b in $QWEN_AB; do
        for bt in ${AB_BATCHES:-1 64}; do
          printf '%-10s %-12s batch %-3s ' "$cfg" "$b" "$bt"
          .dev/$b bench -m "$A" --backend webgpu --prompt 128 --decode 256 --batch "$bt" -o /tmp/ab.json --force 2>/dev/null | head -1
          python3 -c "import json; e=json.load(open('/tmp/ab.json'))['decode']; print('   record %.3f s, wait %.3f s, bind groups made %s' % (e.get('host_record_seconds', 0), e.get('wait_seconds', 0), e.get('bind_groups_created', '-')))"
        done
      done
    done
  fi
  # BATCHES entries run as BATCH=N variants with the default settings
  for v in ${VARIANTS:-base} $(for bt in ${BATCHES:-}; do echo "BATCH=$bt"; done) base; do
    envs=""; [ "$v" = base ] || envs=$(echo "$v" | tr ',' ' ')
    bt=1 # a BATCH=N entry sets the tokens a submit
    for e in $envs; do case $e in BATCH=*) bt=${e#BATCH=};; esac; done
    envs=$(echo "$envs" | tr ' ' '\n' | grep -v '^BATCH=' | tr '\n' ' ')
    printf '%-10s %-56s ' "$cfg" "$v"
    env $envs $W bench -m "$A" --backend webgpu --prompt 128 --decode 256 --batch "$bt" -o /tmp/x.json --force 2>/dev/null | head -1
  done
  # PROFILE_VARIANTS: REPEAT=8 decode profiles with each entry's settings
  # (comma-separated VAR=value, "base" = none); prints the lines of the
  # kernels matching PROFILE_GREP (default: every product) and the totals.
  for v in ${PROFILE_VARIANTS:-}; do
    envs=""; [ "$v" = base ] || envs=$(echo "$v" | tr ',' ' ')
    echo "-- $cfg profile $v"
    env $envs WISP_WEBGPU_PROFILE=1 WISP_WEBGPU_PROFILE_REPEAT=8 $W bench -m "$A" --backend webgpu --prompt 16 \
      --decode ${PROFILE_DECODE:-32} -o /tmp/p.json --force 2>&1 | grep -E "${PROFILE_GREP:-matvec|fused|GPU time}" | head -12
  done
  if [ "${PROFILE:-1}" = 1 ]; then
    WISP_WEBGPU_PROFILE=1 $W bench -m "$A" --backend webgpu --prompt 16 --decode 64 -o /tmp/p.json --force 2>&1 | grep -v XDG > "$OUT/$cfg-profile.txt"
    WISP_WEBGPU_PROFILE=1 WISP_WEBGPU_PROFILE_REPEAT=8 $W bench -m "$A" --backend webgpu --prompt 16 --decode 64 -o /tmp/p.json --force 2>&1 | grep -v XDG > "$OUT/$cfg-profile-r8.txt"
    head -16 "$OUT/$cfg-profile-r8.txt" | tail -12
  fi
done
if [ "${RECEIPTS:-0}" = 1 ]; then
  say receipts
  SECTIONS=${RECEIPT_SECTIONS:-qwen} timeout ${RECEIPT_TIMEOUT:-300} bash tools/device-speed.sh "$OUT/receipts" 2>&1 | tee "$OUT/receipts.log"
fi
tar czf "$OUT.tgz" -C "$(dirname "$OUT")" "$(basename "$OUT")"
say done
