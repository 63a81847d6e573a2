#!/usr/bin/env bash
# HF-vs-wisp parity on the machine that has torch + transformers + numpy.
#
#   tests/parity/run_device.sh WISP_BIN SMALL_OUT_DIR [WORK_DIR]
#
# For each config (small, lfm2-350m; override with CONFIGS="small"):
#   1. hf_reference.py build      -> WORK/<cfg>/hf (config.json, model.safetensors, prompts.json)
#   2. wisp convert --quant f32   -> WORK/<cfg>/art_f32
#      wisp convert --quant q4    -> WORK/<cfg>/art_q4
#   3. hf_reference.py reference  -> WORK/<cfg>/ref_f32.json (HF weights)
#      hf_reference.py reference --dequant-from art_q4 -> WORK/<cfg>/ref_q4.json
#   4. wisp logits (cpu)          -> WORK/<cfg>/wisp_f32.json, wisp_q4.json
#   5. compare.py                 -> WORK/<cfg>/compare_{f32,q4}.txt
# then prints a summary table and copies the small model's config.json,
# model.safetensors, prompts.json and ref_{f32,q4}.json into SMALL_OUT_DIR
# (commit them as tests/parity/small/ for test_parity.c).
#
# Environment: PYTHON (python3), SEED (1234), GREEDY (128), BACKEND (cpu; wisp's backend), REF_DEVICE (cpu;
# "cuda" runs the reference on the GPU with TF32 off), THREADS (nproc).
# Exit status: 0 only if every comparison passed.
set -uo pipefail

if [ $# -lt 2 ]; then
  sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
WISP=$(readlink -f "$1")
SMALL_OUT=$2
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=${3:-$(mktemp -d /tmp/wisp-parity.XXXXXX)}
PY=${PYTHON:-python3}
SEED=${SEED:-1234}
GREEDY=${GREEDY:-128}
REF_DEVICE=${REF_DEVICE:-cpu}
THREADS=${THREADS:-$(nproc)}
BACKEND=${BACKEND:-cpu}
CONFIGS=${CONFIGS:-"small lfm2-350m"}
mkdir -p "$WORK" || exit 2
[ -x "$WISP" ] || { echo "run_device.sh: $WISP is not executable" >&2; exit 2; }

declare -A RESULT
fail=0
step() { # label, command...
  local label=$1; shift
  local t0=$SECONDS
  echo "== $label"
  if "$@"; then
    echo "   ok ($((SECONDS - t0)) s)"
    return 0
  fi
  echo "   FAILED: $label" >&2
  return 1
}

for cfg in $CONFIGS; do
  d="$WORK/$cfg"
  rm -rf "$d"; mkdir -p "$d"
  ok=1
  step "$cfg: build" "$PY" "$HERE/hf_reference.py" build --config "$cfg" --seed "$SEED" --out "$d/hf" || ok=0
  [ $ok = 1 ] && { step "$cfg: convert f32" "$WISP" convert "$d/hf" -o "$d/art_f32" --quant f32 --quiet || ok=0; }
  [ $ok = 1 ] && { step "$cfg: convert q4" "$WISP" convert "$d/hf" -o "$d/art_q4" --quant q4 --quiet || ok=0; }
  if [ $ok = 1 ]; then
    step "$cfg: HF reference f32" "$PY" "$HERE/hf_reference.py" reference --hf "$d/hf" \
      --prompts "$d/hf/prompts.json" --out "$d/ref_f32.json" --greedy "$GREEDY" --device "$REF_DEVICE" || ok=0
    step "$cfg: HF reference q4 (dequantized from wisp's artifact)" "$PY" "$HERE/hf_reference.py" reference \
      --hf "$d/hf" --prompts "$d/hf/prompts.json" --out "$d/ref_q4.json" --greedy "$GREEDY" \
      --device "$REF_DEVICE" --dequant-from "$d/art_q4" || ok=0
  fi
  for q in f32 q4; do
    RESULT[$cfg/$q]="not run"
    [ $ok = 1 ] && [ -f "$d/ref_$q.json" ] || continue
    if ! step "$cfg: wisp logits $q" "$WISP" logits -m "$d/art_$q" --prompts "$d/hf/prompts.json" \
        -o "$d/wisp_$q.json" --greedy "$GREEDY" --backend "$BACKEND" --threads "$THREADS"; then
      RESULT[$cfg/$q]="wisp logits failed"; fail=1; continue
    fi
    "$PY" "$HERE/compare.py" "$d/ref_$q.json" "$d/wisp_$q.json" > "$d/compare_$q.txt" 2>&1
    rc=$?
    cat "$d/compare_$q.txt"
    worst=$(grep -o 'worst ratio [^ ]*' "$d/compare_$q.txt" | awk '{print $3}')
    greedy=$(grep '^greedy:' "$d/compare_$q.txt" | sed 's/^greedy: //')
    if [ $rc = 0 ]; then RESULT[$cfg/$q]="PASS  worst ratio $worst; $greedy"
    else RESULT[$cfg/$q]="FAIL  worst ratio $worst; $greedy"; fail=1; fi
  done
  [ $ok = 1 ] || fail=1
done

echo
echo "== summary (work dir $WORK)"
printf '%-10s %-4s %s\n' config quant result
for cfg in $CONFIGS; do
  for q in f32 q4; do printf '%-10s %-4s %s\n' "$cfg" "$q" "${RESULT[$cfg/$q]:-not run}"; done
done

if [ -f "$WORK/small/ref_f32.json" ] && [ -f "$WORK/small/ref_q4.json" ]; then
  mkdir -p "$SMALL_OUT"
  cp "$WORK/small/hf/config.json" "$WORK/small/hf/prompts.json" "$WORK/small/ref_f32.json" \
     "$WORK/small/ref_q4.json" "$SMALL_OUT"/
  if [ -f "$WORK/small/hf/model.safetensors" ]; then
    cp "$WORK/small/hf/model.safetensors" "$SMALL_OUT"/
  else
    echo "run_device.sh: the small model was saved sharded; copy its shards by hand" >&2; fail=1
  fi
  # Record the q4 artifact's digest: CI re-converts and must get the same bytes.
  sha256sum "$WORK/small/art_q4/weights.bin" | awk '{print $1}' > "$SMALL_OUT/q4_weights.sha256"
  echo "copied the small model and its references into $SMALL_OUT"
fi
exit $fail
