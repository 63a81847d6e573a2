#!/usr/bin/env bash
# HF-vs-wisp parity on the machine that has torch + transformers + numpy.
#
#   tests/parity/run_device.sh WISP_BIN SMALL_OUT_DIR [WORK_DIR]
#
# For each config (default: small lfm2-350m qwen35-small qwen35-0.8b
# qwen35-2b; also qwen3-small llama-small; override with CONFIGS="small
# qwen35-small"), for each quant (LFM2: f32 q4; Qwen 3.5, Qwen3, Llama: f32 q4
# q4k; override with QUANTS="f32 q4k"):
#   1. hf_reference.py build      -> WORK/<cfg>/hf (config.json, model.safetensors, prompts.json)
#   2. wisp convert --quant Q     -> WORK/<cfg>/art_Q
#   3. hf_reference.py reference  -> WORK/<cfg>/ref_f32.json (HF weights)
#      hf_reference.py reference --dequant-from art_Q -> WORK/<cfg>/ref_Q.json (Q != f32)
#   4. wisp logits (cpu)          -> WORK/<cfg>/wisp_Q.json
#   5. compare.py                 -> WORK/<cfg>/compare_Q.txt
# then prints a summary table and copies the small models' config.json,
# model.safetensors, prompts.json and ref_*.json into SMALL_OUT_DIR (LFM2
# "small", commit as tests/parity/small/ for test_parity.c) and QWEN_SMALL_OUT
# (default SMALL_OUT_DIR/../qwen35-small; commit as tests/parity/qwen35-small/
# for test_parity_qwen.c).
#
# Environment: PYTHON (python3), SEED (1234), GREEDY (128), BACKENDS (cpu; wisp's
# backends for `wisp logits`, e.g. "cpu webgpu webgpu+loop", +loop: greedy tokens
# through the decode loop; +fast: --profile throughput, not exact;
# BACKEND still works), REF_DEVICE (cpu; "cuda" runs the reference on the
# GPU with TF32 off), THREADS (nproc), QUANTS, QWEN_SMALL_OUT (see above).
# Exit status: 0 only if every comparison passed.
set -uo pipefail

if [ $# -lt 2 ]; then
  sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'
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
BACKENDS=${BACKENDS:-${BACKEND:-cpu}}
CONFIGS=${CONFIGS:-"small lfm2-350m qwen35-small qwen35-0.8b qwen35-2b"}
QWEN_SMALL_OUT=${QWEN_SMALL_OUT:-$SMALL_OUT/../qwen35-small}
quants_for() { # config -> the quants it runs
  if [ -n "${QUANTS:-}" ]; then echo "$QUANTS"; return; fi
  case $1 in qwen35-*|qwen3-small|llama-small) echo "f32 q4 q4k" ;; *) echo "f32 q4" ;; esac
}
# A backend name with "+loop" (e.g. webgpu+loop) runs `wisp logits --decode-loop`:
# its greedy tokens after the first come from the decode loop, as `wisp run`
# decodes (on WebGPU the persistent decode where it applies: under --profile
# exact the loop decodes a step a batch, so graphs whose persistent variant
# needs batches of 32 steps, Qwen 3.5's, decode op by op there).
# "+persist" (webgpu+persist) is +loop with tuning persistMinSteps=1: every
# step of the loop through the persistent decode (`wisp logits` records how
# many, "persistent_steps").
# "+fast" (webgpu+fast, cpu+fast, webgpu+fast+loop) runs the profile `wisp
# run`, bench and serve give without flags (throughput) instead of --profile
# exact: the greedy agreement the fast path keeps (its logits are not held
# to the tolerance). (`wisp logits` alone defaults to the reference path.)
logits_args() { # backend name -> wisp logits arguments
  case $1 in
    *+fast+loop) echo "--backend ${1%+fast+loop} --profile throughput --decode-loop" ;;
    *+fast) echo "--backend ${1%+fast} --profile throughput" ;;
    *+loop) echo "--backend ${1%+loop} --profile exact --decode-loop" ;;
    *+persist) echo "--backend ${1%+persist} --profile exact --decode-loop --tuning persistMinSteps=1" ;;
    *) echo "--backend $1 --profile exact" ;;
  esac
}
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
  qs=$(quants_for "$cfg")
  for q in $qs; do
    [ $ok = 1 ] && { step "$cfg: convert $q" "$WISP" convert "$d/hf" -o "$d/art_$q" --force --quant "$q" --quiet || ok=0; }
  done
  if [ $ok = 1 ]; then
    for q in $qs; do
      if [ "$q" = f32 ]; then
        step "$cfg: HF reference f32" "$PY" "$HERE/hf_reference.py" reference --hf "$d/hf" \
          --prompts "$d/hf/prompts.json" --out "$d/ref_f32.json" --greedy "$GREEDY" --device "$REF_DEVICE" || ok=0
      else
        step "$cfg: HF reference $q (dequantized from wisp's artifact)" "$PY" "$HERE/hf_reference.py" reference \
          --hf "$d/hf" --prompts "$d/hf/prompts.json" --out "$d/ref_$q.json" --greedy "$GREEDY" \
          --device "$REF_DEVICE" --dequant-from "$d/art_$q" || ok=0
      fi
    done
  fi
  for q in $qs; do
   for be in $BACKENDS; do
    key=$cfg/$q/$be
    RESULT[$key]="not run"
    [ $ok = 1 ] && [ -f "$d/ref_$q.json" ] || continue
    if ! step "$cfg: wisp logits $q ($be)" "$WISP" logits -m "$d/art_$q" --prompts "$d/hf/prompts.json" \
        -o "$d/wisp_${q}_$be.json" --force --greedy "$GREEDY" $(logits_args "$be") --threads "$THREADS"; then
      RESULT[$key]="wisp logits failed"; fail=1; continue
    fi
    "$PY" "$HERE/compare.py" "$d/ref_$q.json" "$d/wisp_${q}_$be.json" > "$d/compare_${q}_$be.txt" 2>&1
    rc=$?
    cat "$d/compare_${q}_$be.txt"
    worst=$(grep -o 'worst ratio [^ ]*' "$d/compare_${q}_$be.txt" | awk '{print $3}')
    greedy=$(grep '^greedy:' "$d/compare_${q}_$be.txt" | sed 's/^greedy: //')
    ps=$(grep -o '"persistent_steps": [0-9]*' "$d/wisp_${q}_$be.json" | cut -d' ' -f2)
    greedy="$greedy${ps:+ (persistent decode steps $ps)}"
    if [ $rc = 0 ]; then RESULT[$key]="PASS  worst ratio $worst; $greedy"
    else RESULT[$key]="FAIL  worst ratio $worst; $greedy"; fail=1; fi
   done
  done
  [ $ok = 1 ] || fail=1
done

echo
echo "== summary (work dir $WORK)"
printf '%-12s %-4s %-6s %s\n' config quant backend result
for cfg in $CONFIGS; do
  for q in $(quants_for "$cfg"); do for be in $BACKENDS; do printf "%-12s %-4s %-6s %s\n" "$cfg" "$q" "$be" "${RESULT[$cfg/$q/$be]:-not run}"; done; done
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
if [ -f "$WORK/qwen35-small/ref_f32.json" ]; then
  mkdir -p "$QWEN_SMALL_OUT"
  cp "$WORK/qwen35-small/hf/config.json" "$WORK/qwen35-small/hf/prompts.json" "$QWEN_SMALL_OUT"/
  for q in f32 q4 q4k; do
    [ -f "$WORK/qwen35-small/ref_$q.json" ] && cp "$WORK/qwen35-small/ref_$q.json" "$QWEN_SMALL_OUT"/
    # CI re-converts and must get the bytes the reference was made from
    [ -f "$WORK/qwen35-small/art_$q/weights.bin" ] && [ "$q" != f32 ] &&
      sha256sum "$WORK/qwen35-small/art_$q/weights.bin" | awk '{print $1}' > "$QWEN_SMALL_OUT/${q}_weights.sha256"
  done
  if [ -f "$WORK/qwen35-small/hf/model.safetensors" ]; then
    cp "$WORK/qwen35-small/hf/model.safetensors" "$QWEN_SMALL_OUT"/
  else
    echo "run_device.sh: the qwen35-small model was saved sharded; copy its shards by hand" >&2; fail=1
  fi
  echo "copied the qwen35-small model and its references into $QWEN_SMALL_OUT"
fi
exit $fail
