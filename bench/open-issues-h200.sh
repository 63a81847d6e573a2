#!/usr/bin/env bash
# One device call (under 10 min on a cold H200) for what the open issues
# still need measured, each part under its own clock, writing as it goes:
#   1. issue 29's A/B: wisp_prev (PREV=6cab9e8, PREV_EXACT=profiles/default)
#      against this wisp, seed and Qwen 3.5 0.8B, decode at one token a
#      submit, under the throughput profile, and prefill 1,024, alternated
#      twice (tools/device.sh ab) -> OUT/ab.tgz;
#   2. issue 30's grouped-query persistent attention (persistOpt bit 32):
#      Qwen 3.5 0.8B decode at depths 0, 8,192 and 32,768 with the default
#      OPT bits, then with bit 32 (persistOpt=41) -> OUT/grouped.txt and the
#      receipts in OUT/grouped.tgz.
# Here first:
#   PREV=6cab9e8 SLIM=1 tools/device.sh bundle
#   (cd .dev && strip wisp wisp_prev && tar cJf lib.txz lib && rm -rf lib)
# The call: `bash bench/open-issues-h200.sh "$OUT"`, carry [".dev", ".gl",
# ".cache/webgpu"], timeout_s 600. Issue 33's Gemma 3 parity is a call of its
# own (it builds llama.cpp for the CPU, the second oracle; carry .peer too):
#   CONFIGS="gemma3-1b qwen25-0.5b" tools/device.sh parity "$OUT/parity".
# Back come, already packed (the machine returns 8 files at most; do not
# re-pack or delete them in the call): OUT/ab.tgz (every run's receipt),
# OUT/ab.log, OUT/parity.tgz, OUT/parity.log, OUT/grouped.tgz, OUT/log.txt.
# PARTS (default "ab grouped") picks the parts: "prepare" starts the
# real-file check's preparation, detached (below); "parity" does too, then
# runs issue 33's Gemma 3 parity beside it.
# The order of calls that fits (the preparation keeps 16 cores busy for about
# 6 minutes, so no CPU-sensitive timing runs beside it; each call within 30 s
# of the last, while the machine and its /tmp stay):
#   1. PARTS="prepare grouped" bash bench/open-issues-h200.sh "$OUT"
#      (the grouped decode is GPU-bound; the A/B's batch-1 records on the CPU);
#   2. LC=/tmp/llama.cpp-cpu LC_KIND=cpu MODELS="qwen25-0.5b llama32-1b" bash bench/realfile-h200.sh "$OUT"
#      (waits for each model's preparation: one lock per model);
#   3. the same with MODELS="gemma3-1b qwen35-0.8b";
#   4. PARTS=ab bash bench/open-issues-h200.sh "$OUT", on a quiet machine.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
OUT=${1:?usage: bench/open-issues-h200.sh OUT}
PARTS=" ${PARTS:-ab grouped} "
mkdir -p "$OUT"
T0=$SECONDS
say() { echo "== $* ($((SECONDS - T0)) s)" | tee -a "$OUT/log.txt"; }

if [[ $PARTS == *" ab "* ]]; then
say "1. issue 29 A/B"
PREV_EXACT=profiles/default WORKLOADS="batch1 throughput prefill1024" MODELS="seed qwen08" REPS=2 \
  timeout 300 bash tools/device.sh ab "$OUT/ab" > "$OUT/ab.log" 2>&1
tail -30 "$OUT/ab.log"
fi
# Issue 33: the real-file check's checkpoints and converter GGUFs of
# RF_MODELS (set and empty: none) and llama.cpp's CPU build, detached
# (setsid: they go on past this call while the machine stays warm, for the
# next call's bench/realfile-h200.sh checks; the parity's Q4_K_M part waits
# for the build). The preparation starts the build; without one it starts here.
LC=/tmp/llama.cpp-cpu
RF_MODELS=${RF_MODELS-qwen25-0.5b llama32-1b gemma3-1b qwen35-0.8b}
if [[ $PARTS == *" prepare "* || $PARTS == *" parity "* ]]; then
  say "3. issue 33: real-file preparation (detached): ${RF_MODELS:-none, the llama.cpp build alone}"
  if [ -n "$RF_MODELS" ]; then
    mkdir -p "$OUT/rf0"
    LC=$LC LC_KIND=cpu MODELS="" PREPARE_ALL=1 PREPARE_UNTIL=900 BUDGET=900 PREPARE="$RF_MODELS" \
      setsid nohup bash bench/realfile-h200.sh "$OUT/rf0" > /dev/null 2>&1 < /dev/null &
  elif [ ! -x $LC/build/bin/llama-quantize ]; then
    setsid nohup bash -c "bash .peer/build.sh cpu $LC && cmake --build $LC/build -j\$(nproc) --target llama-perplexity llama-tokenize" \
      > "$OUT/llama-build.log" 2>&1 < /dev/null &
  fi
fi
if [[ $PARTS == *" parity "* ]]; then
  # 3b. issue 33's Gemma 3 parity (transformers and llama.cpp) beside it
  say "3b. issue 33: Gemma 3 parity"
  sleep 2
  LC=$LC LC_WAIT=400 CONFIGS=gemma3-1b timeout $((${CALL_LIMIT:-600} - 30 - (SECONDS - T0))) \
    bash tools/device.sh parity "$OUT/parity" > "$OUT/parity.log" 2>&1
  tail -40 "$OUT/parity.log"
  tail -5 "$OUT/rf0/realfile.log" 2> /dev/null
fi
[[ $PARTS == *" grouped "* ]] || { say done; exit 0; }

say "2. issue 30 grouped-query persistent attention"
WISP_DEVICE_LIB=1 source tools/device.sh
setup_env > /dev/null
a=$(model_dir qwen08)
mkdir -p "$OUT/grouped"
for dep in 0 8192 32768; do
  p=$dep; [ "$p" -gt 0 ] || p=1
  for opt in 9 41; do
    [ $((SECONDS - T0)) -lt 560 ] || break 2
    line=$(timeout 60 "$W" bench -m "$a" --backend webgpu -p "$p" -n 64 --tuning persistOpt=$opt \
      -o "$OUT/grouped/d$dep-opt$opt.json" --force 2> /dev/null | grep "decode:")
    echo "qwen08 depth $dep persistOpt=$opt: $line" | tee -a "$OUT/grouped.txt"
  done
done
# the machine returns 8 files at most: the receipts as one archive
tar czf "$OUT/grouped.tgz" -C "$OUT" grouped && rm -rf "$OUT/grouped"
say done
