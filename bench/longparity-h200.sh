#!/usr/bin/env bash
# Long-context parity against transformers (issue 30 item 9): a prompt of
# 16,384 token ids on the Qwen 3.5 0.8B and LFM2-350M shapes (the released
# configurations, random weights), in one device call.
#
# Here, once: tools/device.sh bundle (or SLIM=1: wisp alone is enough).
# The call: command `bash bench/longparity-h200.sh "$OUT"`, carry [".dev", ".gl",
# ".cache/webgpu"], timeout_s 600 (~6-8 min). Back come $OUT/longparity.tgz
# (references, wisp's logits, logs; re-packed after each step) and
# $OUT/summary.txt.
#
# Per config of CONFIGS (default "qwen35-0.8b lfm2-350m"), with a clock (BUDGET,
# default 540 s: no step starts past it):
#  1. tests/parity/hf_reference.py build --seed 1234 (the checkpoint
#     tools/device.sh's models use, reused from /tmp/wq while the machine is
#     warm) and `wisp convert --quant f32`;
#  2. prompts.json: nested prompts of LENS (default "16384") seeded random ids,
#     the greedy continuation from the longest (the last: `wisp logits`
#     continues its state, no second prefill);
#  3. transformers' final-position logits of each prompt and NGREEDY (32)
#     greedy tokens on cuda, float32, eager attention, TF32 off
#     (hf_reference.py reference);
#  4. `wisp logits --profile exact -c CTX` on webgpu for every config first,
#     then on the CPU (-t 16) in the time left. Measured on the 2-core
#     development machine (Qwen 3.5 0.8B shape, f32, --profile exact): 53.5
#     CPU-seconds for 2,048 tokens, 118.8 for 4,096, i.e. 23 ms a token plus
#     1.4e-6 s x tokens^2 (attention): ~760 CPU-seconds for 16,384, about
#     1-1.5 min on the H200 host's 16 cores (LFM2-350M less); a CPU run that
#     would pass the budget is cut by `timeout` and reported as not run;
#  5. tests/parity/compare.py: max|logit difference| / max|logit| per prompt
#     (tolerance TOL, default 1e-3) and greedy agreement (first divergence);
#     summary.txt, one line per config and backend.
# QUANT (default f32): the artifacts' weights; another (q4, q4k) converts
# to it and runs the reference on the transformers model with wisp's
# dequantized weights (hf_reference.py --dequant-from, as
# tests/parity/run_device.sh does), in WORK/CONFIG-QUANT. Qwen 3.5's
# persistent decode needs Q4 embedding and head weights: QUANT=q4k with
# BACKENDS=webgpu+persist checks it at this length.
# Environment: OUT, BUDGET, CONFIGS, LENS, NGREEDY, TOL, QUANT, BACKENDS (default
# "webgpu cpu"; "webgpu+loop": the greedy tokens after the first from the
# decode loop, `wisp logits --decode-loop`, which on WebGPU is the
# persistent decode where the plan takes it: not under --profile exact for
# graphs whose persistent variant needs batches of 32 steps, as Qwen 3.5's;
# "webgpu+persist": the same with tuning persistMinSteps=1, every step of
# the loop through the persistent decode), WORK (default /tmp/longparity), PYTHON (python3), REUSE_REF=1
# (keep a reference an earlier run left in WORK), LOCAL=1
# (a dry run here: build/wisp, lavapipe, the reference on the CPU; e.g.
# CONFIGS=qwen35-small LENS="200 600" where transformers is installed).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
OUT=${1:-${OUT:-/tmp/longparity-h200}}
BUDGET=${BUDGET:-540}
CONFIGS=${CONFIGS:-qwen35-0.8b lfm2-350m}
LENS=${LENS:-16384}
NGREEDY=${NGREEDY:-32}
TOL=${TOL:-1e-3}
BACKENDS=${BACKENDS:-webgpu cpu}
WORK=${WORK:-/tmp/longparity}
QUANT=${QUANT:-f32}
QTAG=; [ "$QUANT" = f32 ] || QTAG=-$QUANT # a quantized run's folder: WORK/CONFIG-QUANT
PY=${PYTHON:-python3}
T0=$SECONDS
mkdir -p "$OUT" "$WORK" models
REF_DEVICE=cuda THREADS=16
if [ -n "${LOCAL:-}" ]; then
  W=$PWD/build/wisp REF_DEVICE=cpu THREADS=2
  export VK_DRIVER_FILES=${VK_DRIVER_FILES:-/usr/share/vulkan/icd.d/lvp_icd.json}
else
  WISP_DEVICE_LIB=1 source tools/device.sh # setup_env
  setup_env
  W=$PWD/.dev/wisp
fi
say() { echo "== $* ($((SECONDS - T0)) s)"; }
left_s() { echo $((BUDGET - (SECONDS - T0))); }
pack() {
  tar czf "$OUT/longparity.tgz.tmp" --exclude=hf --exclude='art_*' -C "$WORK" . -C "$OUT" longparity.log 2> /dev/null
  mv "$OUT/longparity.tgz.tmp" "$OUT/longparity.tgz"
}
exec > >(tee -a "$OUT/longparity.log") 2>&1
max=0; for n in $LENS; do [ "$n" -gt "$max" ] && max=$n; done
CTX=$((max + NGREEDY + 16))
say "prompts of $LENS ids, $NGREEDY greedy tokens, context $CTX, reference on $REF_DEVICE"

# 1-3: checkpoints, artifacts, prompts, references
for cfg in $CONFIGS; do
  [ "$(left_s)" -gt 0 ] || break
  d=$WORK/$cfg$QTAG
  mkdir -p "$d"
  hf=/tmp/wq/$cfg/hf
  if [ ! -f "$hf/config.json" ]; then
    say "$cfg: checkpoint"
    hf=$d/hf
    [ -f "$hf/config.json" ] || $PY tests/parity/hf_reference.py build --config "$cfg" --seed 1234 --out "$hf" ||
      { echo "$cfg: build failed"; continue; }
  fi
  if [ ! -f "$d/art_$QUANT/manifest.json" ]; then
    say "$cfg: wisp convert --quant $QUANT"
    "$W" convert "$hf" -o "$d/art_$QUANT" --quant "$QUANT" --quiet --force || { echo "$cfg: convert failed"; continue; }
  fi
  echo "$hf" > "$d/hf.path"
  $PY - "$hf/config.json" "$d/prompts.json" "$LENS" << 'EOF'
import json, random, sys
cfg = json.load(open(sys.argv[1]))
vocab = cfg.get("vocab_size") or cfg.get("text_config", {}).get("vocab_size")
lens = sorted(int(x) for x in sys.argv[3].split())
ids = [random.Random(16384).randrange(vocab) for _ in range(lens[-1])]  # one seeded sequence, its prefixes
json.dump({"prompts": [ids[:n] for n in lens], "greedy_prompt": len(lens) - 1}, open(sys.argv[2], "w"))
EOF
  # REUSE_REF=1: a reference an earlier run of this machine left stays
  # (a second run for the CPU backend beside other work)
  if [ -n "${REUSE_REF:-}" ] && [ -s "$d/ref.json" ]; then say "$cfg: the reference of an earlier run"; continue; fi
  say "$cfg: transformers reference ($REF_DEVICE)"
  dq=(); [ "$QUANT" = f32 ] || dq=(--dequant-from "$d/art_$QUANT") # the transformers model with wisp's dequantized weights
  $PY tests/parity/hf_reference.py reference --hf "$hf" --prompts "$d/prompts.json" --out "$d/ref.json" "${dq[@]}" \
    --greedy "$NGREEDY" --device "$REF_DEVICE" > "$d/ref.log" 2>&1 || { tail -5 "$d/ref.log"; continue; }
  tail -1 "$d/ref.log"
  pack
done

# 4-5: wisp on each backend (webgpu for every config first: the CPU takes longest)
for be in $BACKENDS; do
  for cfg in $CONFIGS; do
    d=$WORK/$cfg$QTAG
    [ -f "$d/ref.json" ] || continue
    t=$(left_s)
    [ "$t" -gt 10 ] || { echo "$cfg $be: not run (budget)" | tee "$d/compare_$be.txt"; continue; }
    say "$cfg: wisp logits $be (at most $t s)"
    bf=(--backend "$be")
    [ "$be" = webgpu+loop ] && bf=(--backend webgpu --decode-loop)
    [ "$be" = webgpu+persist ] && bf=(--backend webgpu --decode-loop --tuning persistMinSteps=1)
    if timeout "$t" "$W" logits -m "$d/art_$QUANT" --prompts "$d/prompts.json" --greedy "$NGREEDY" "${bf[@]}" \
         --profile exact -c "$CTX" -t "$THREADS" -o "$d/wisp_$be.json" --force > "$d/wisp_$be.log" 2>&1; then
      $PY tests/parity/compare.py "$d/ref.json" "$d/wisp_$be.json" --tol="$TOL" > "$d/compare_$be.txt" 2>&1
      cat "$d/compare_$be.txt"
    else
      echo "$cfg $be: wisp logits failed or ran past the budget: $(tail -1 "$d/wisp_$be.log")" | tee "$d/compare_$be.txt"
    fi
    echo "$((SECONDS - T0))" > "$d/done_$be.s"
    pack
  done
done

# summary: one line per config and backend
{
  echo "long-context parity: prompts of $LENS ids, $NGREEDY greedy tokens from the longest, --profile exact, tolerance $TOL"
  for cfg in $CONFIGS; do
    d=$WORK/$cfg$QTAG
    [ -f "$d/ref.json" ] || { echo "FAIL $cfg: no transformers reference ($(tail -1 "$d/ref.log" 2> /dev/null))"; continue; }
    margin=$(grep -o '"greedy_min_margin": [^,}]*' "$d/ref.json" | cut -d' ' -f2)
    for be in $BACKENDS; do
      c=$d/compare_$be.txt
      worst=$(grep -o 'worst ratio [^ ]*' "$c" 2> /dev/null | awk '{print $3}')
      greedy=$(grep '^greedy:' "$c" 2> /dev/null | sed 's/^greedy: //')
      if grep -q ': PASS' "$c" 2> /dev/null; then v=PASS; else v=FAIL; fi
      grep -q "not run" "$c" 2> /dev/null && v="NOT RUN"
      ps=$(grep -o '"persistent_steps": [0-9]*' "$d/wisp_$be.json" 2> /dev/null | cut -d' ' -f2)
      echo "$v $cfg $QUANT $be: max|diff|/max|logit| $worst; greedy $greedy${ps:+ (persistent decode steps $ps)}; reference min top-2 margin $margin"
    done
  done
} | tee "$OUT/summary.txt"
cp "$OUT/summary.txt" "$WORK/"
pack
say "done"
