#!/usr/bin/env bash
# The wisp-alone probes behind bench/results/h100-session-20261206/ and the
# prepare call of bench/results/h100-attn-long-20261206-2/, one subcommand a
# device call (each within its 10 minutes). Wisp against wisp only: no peer
# runs here, so nothing in them is a ratio to llama.cpp. The runs of
# 2026-12-06 were made before attnLong took a plain 0 (and while its default
# was off, then 4,096): the receipts name what each compared; these
# commands compare the same kernels explicitly.
#
# Here: SLIM=1 tools/device.sh bundle, then build/seq_probe into .dev (see
# bench/attn-long-h200.sh's header); `ab` also needs PREV=REV in the bundle
# (.dev/wisp_prev). There: `bash bench/probes-h100.sh CMD "$OUT"`, carry
# [".dev", ".gl", ".cache/webgpu"] (and ".peer", ".tok" for `prepare`).
#   choose    decode at 8,192 / 32,768 with and without attn_decode_long
#             (attnLong, three workgroup counts, f16 K/V), seq_probe S = 8 / 32 / 64
#             with rowsPrefill 0 / 8 / 16, the Qwen 3.5 0.8B prefill profile under
#             the DeltaNet switches, matmulI8 geometries (depth.txt, rows.txt, dn.txt,
#             i8.txt)
#   prepare   llama.cpp's CUDA build, the models and GGUFs of the receipt
#             (attn-long-h200.sh PREPARE_ONLY=1) and beside the build decode at
#             2,048 / 4,096 with the long kernel off (attnLong=0) and on from the
#             first key (attnLong=1), and the per-kernel
#             profile of decode at 32,768 (threshold.txt, profile.txt); the timed
#             receipt is then `VARIANTS= bash bench/attn-long-h200.sh OUT` on the
#             warm machine
#   tune      the receipt's preparation (llama.cpp's CUDA build, models, GGUFs:
#             attn-long-h200.sh PREPARE_ONLY=1) in the background and beside it
#             `wisp tune` against the default (tools/device.sh tune: MODELS
#             "seed qwen08", TUNE_BUDGET 110 s a model, REPS 3; tune.txt,
#             tune-ab.txt and the tuner's receipts and plots in tune.tgz); the
#             timed receipt is then run as after `prepare`
#   tunequiet `tune` with nothing beside it (after the receipt, on the warm machine)
#   rowsq     seq_probe S = 8 / 16 / 32 / 64 under rowsPrefill 8 (the default), 0, 32
#   seqmatch  seq_probe S = 8 on Qwen 3.5 0.8B under the fast and the exact profile:
#             do the sequences of a batched step get the tokens they get alone
#   next      the A/Bs the closing note of 2026-12-06 names, wisp alone:
#             seq_probe S = 8 / 32 / 64 with the head through the integer
#             kernel (i8=1), small-token integer tiles (matmulI8=32x8x4x2x2,
#             32x16x4x4x2) and the tile-quantizing product (i8Fuseq=1)
#             (rows-next.txt); decode at 2,048 / 8,192 with the grouped
#             persistent attention (persistOpt=105), every split wide
#             (persistOpt=89) and f16 K/V (kv=f16) (depth-next.txt); decode
#             at 32,768 op by op against persistent (persistMaxKeys=0), f32
#             and f16 K/V (depth-far.txt)
#   stream    decode at 2,048 / 8,192 with the streamed persistent attention
#             (the default, persistOpt bit 256) against the chunked one
#             (persistOpt=201), f16 K/V; at 32,768 persistent (persistMaxKeys=0)
#             against op by op (depth-stream.txt, depth-stream-far.txt)
#   early     decode at 8,192 / 32,768 with attn_stream's value loads issued
#             with its key loads (persistOpt=969: bit 512) against after the
#             softmax (the default), f32 and f16 K/V (depth-early.txt)
#   dn        the binaries BINS (default "wisp_prev wisp", from .dev): Qwen 3.5
#             0.8B / 2B and the seed shape, prefill 1,024 and 4,096 (alternated,
#             twice), and each binary's per-kernel profile of the Qwen 4,096
#             prefills (prefill-ab.txt, prefill-profile.txt)
#   rows2     prefill 4,096 (Qwen 3.5 0.8B / 2B, seedlong; alternated, twice) under
#             the defaults against one query row a lane group in the tiled
#             prefill attention (attnRows=1), prefill chunks of 1,024 and 2,048
#             tokens (prefillChunk; the GPU's default is 512) and dn_chunk_state
#             a step a batch of loads (dnChunkUnroll=1), each model once
#             attn-long-h200.sh's preparation (running beside it) has made its
#             GGUF (rows2.txt)
#   prep2     the receipt's preparation in the background and beside it
#             the Q4_K long parity of the Qwen 3.5 persistent decode
#             (longparity-h200.sh QUANT=q4k BACKENDS=webgpu+persist; lp/),
#             then prefill under matmulI8 geometries, beside the build
#             (i8-real-beside-build.txt)
#   quiet     after prep2, nothing beside it: prefill 1,024 / 4,096 under
#             matmulI8 geometries (i8-real.txt), decode at depth 0 with
#             persistGrid=256 and op by op (decode-grid.txt), the op-by-op
#             decode's GPU time per kernel (decode-profile-2b.txt)
#   seedfix   the seed shape's prefill 512 / 1,024 / 4,096, .dev/wisp against
#             .dev/wisp_prev and attnRows=1, beside llama.cpp's build and
#             then quiet, with llama-bench's prefill of the same GGUF in
#             the same call; decode at depth 0 of both (seedfix.txt)
#   chunk     the seed shape's prefill 1,024 / 4,096 under prefillChunk and
#             attnRows (chunk.txt)
#   bisect    the seed shape's prefill 4,096 / 1,024 under each binary of
#             BINS (.dev/wisp_<hash>: tools/device.sh bundle REVS=...),
#             under TUNINGS (default "none attnRows=1"), twice, and each binary's GPU time per
#             kernel at 4,096 (bisect.txt)
#   prep3     the receipt's preparation in the background and `bisect` beside it
#   phases    Qwen 3.5 2B / 0.8B decode at depth 0: the persistent decode whole,
#             without each kind of work (persistSkip: its cost is the
#             difference; the tokens are wrong), under persistGrid=132 (and,
#             at 8c6d99a, persistOpt=971: a variant measured slower and
#             removed), and the op-by-op decode's GPU time per kernel (phases.txt,
#             decode-profile-2b.txt, decode-profile-08.txt)
#   prep4     the receipt's preparation in the background and beside it, once
#             its models are made, decode at depth 0 of .dev/wisp against
#             .dev/wisp_prev (alternated, twice; Qwen 3.5 2B / 0.8B, seed shape)
#             and .dev/wisp under persistGrid 132 / 264 and its phase costs
#             (persistSkip) on the 2B (decode-ab.txt)
#   ab4       prep4's runs alone (the models made first)
#   grids     the grid the Qwen 3.5 0.8B persistent decode ran under persistGrid
#             264 / 132 / the default, as WISP_VERBOSE=1 prints it (grids.txt)
#   prep5     the receipt's preparation with `rowsi8` beside it
#   s16       S = 16 / 24: the default against rowsI8=0 and rowsI8=2x16 (s16.txt)
#   all6      prep6 (prep5, the seed shape first), then a short receipt (depth 0 / 2,048, prefill 1,024, S = 8 /
#             32 / 64) against llama.cpp on the same machine (receipt/; R_DEPTHS,
#             R_PREFILLS, R_BUDGET: fewer)
#   rowsi8    the batched step's int8 multi-row product (matvec_i8_rows, tuning
#             rowsI8) against the paths before it (rowsI8=0): seq_probe S = 1, 4..64
#             on the seed shape and Qwen 3.5 0.8B / 2B, at S = 16 / 24 also rowsI8=2x16,
#             at S = 8 / 32 also 1 and 4
#             weight rows a lane group and quant_x8 apart (rowsI8Fuse=0), at S = 64 the product up to 64 rows, at
#             S = 1 from one row (RI8_MODELS, RI8_S: fewer); the GPU profile of S = 8 (and Qwen 3.5 0.8B's S = 64) (rowsi8.txt,
#             rowsi8-profile.txt)
#   sampled7  the receipt's preparation in the background; beside it the sampled
#             decode `wisp run` makes (T 0.8, top-k 40, top-p 0.95, min-p 0.05),
#             .dev/wisp against .dev/wisp_prev, and `wisp bench --temp 0.8`
#             persistent / op by op / greedy (sampled.txt, bench-*.json); the
#             head of S = 32 / 64 through i8=1 (head-i8.txt); then llama.cpp's
#             llama-completion with the same sampling (CPU sampler and -bs)
#             and greedy, and llama-bench tg256, on the same GGUFs
#             (llama-sampled.txt)
#   runab8    `wisp run` greedy / sampled / sampled persist=1, .dev/wisp against
#             .dev/wisp_prev (runs.txt), seq_probe S = 32 / 64 against
#             .dev/seq_probe_prev (seq-ab.txt), beside the preparation; then
#             llama.cpp's sampled and greedy decode (llama-sampled.txt) and wisp
#             alone after it (quiet.txt)
#   sampledab sampled7's wisp runs alone, on models/seed (sampled.txt, head-i8.txt)
#   ab        .dev/wisp against .dev/wisp_prev op by op at 32,768 / 8,192, with
#             f16 K/V, the long kernel's GPU time, seq_probe at S = 64 / 32
#             (depthC.txt, profileC.txt)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
cmd=${1:-}
O=${2:-/tmp/probes}
mkdir -p "$O" models
WISP_DEVICE_LIB=1 source tools/device.sh
setup_env
{ nvidia-smi -L; cat .dev/COMMIT; } > "$O/gpu.txt" 2>&1

# One prefill of N tokens by .dev binary BIN on model dir A under tuning T
# ("none": the defaults): its "prefill:" line (the receipt to JSON).
prefill_line() { # BIN A N T [JSON]
  local tu=(); [ "$4" = none ] || tu=(--tuning "$4")
  ".dev/$1" bench -m "$2" --backend webgpu -p "$3" -n 4 "${tu[@]}" -o "${5:-/tmp/probe.json}" --force 2> /dev/null |
    grep '^prefill' | cut -c1-60
}

choose() {
  MODELS="seedlong qwen08" DEPTHS="32768 8192" PROFILE_MODELS= \
    VARIANTS="none persist=0,attnLong=0 persist=0,attnLong=1024x1024 persist=0,attnLong=1024x512 persist=0,attnLong=1024x2048 persist=0,attnLong=1024x1024,kv=f16 persist=0,attnLong=0,kv=f16" \
    timeout 230 bash bench/depth-probe-h200.sh > "$O/depth.txt" 2>&1
  (MODELS="seed qwen08" SEQS="8 32 64" TUNINGS="rowsPrefill=0 rowsPrefill=8 rowsPrefill=16" ALONE=2 STEPS=48 \
    timeout 170 tools/device.sh rows /tmp/rows) > "$O/rows.txt" 2>&1
  local q t tu m a
  q=$(model_dir qwen08)
  for t in none dnPrepShared=0 dnChunkCols=8 dnChunkCols=4; do
    tu=(); [ "$t" = none ] || tu=(--tuning "$t")
    echo "== qwen08 prefill 1024 $t"
    $W bench -m "$q" --backend webgpu -p 1024 -n 4 "${tu[@]}" -o /tmp/b.json --force 2>&1 | grep -v compiling | head -2
    WISP_WEBGPU_PROFILE=1 $W bench -m "$q" --backend webgpu -p 1024 -n 4 "${tu[@]}" -o /tmp/b.json --force 2>&1 |
      grep -v '^bench:\|compiling' | head -14
  done > "$O/dn.txt" 2>&1
  for m in qwen08 seed; do
    a=$(model_dir "$m")
    for t in none matmulI8=128x64x8x4x2 matmulI8=128x32x8x4x2 matmulI8=64x64x4x8x2 matmulI8=64x32x4x4x4 matmulI8=128x64x8x8x1; do
      printf '%-7s %-28s ' "$m" "$t"
      prefill_line wisp "$a" 1024 "$t"
    done
  done > "$O/i8.txt" 2>&1
}

stream() {
  MODELS="seedlong qwen08" DEPTHS="2048 8192" PROFILE_MODELS= \
    VARIANTS="persistOpt=201 none kv=f16 persistOpt=201 none" timeout 260 bash bench/depth-probe-h200.sh > "$O/depth-stream.txt" 2>&1
  MODELS="seedlong qwen08" DEPTHS="32768" PROFILE_MODELS= \
    VARIANTS="none persistMaxKeys=0 persistMaxKeys=0,kv=f16" timeout 200 bash bench/depth-probe-h200.sh > "$O/depth-stream-far.txt" 2>&1
}

early() {
  MODELS="seedlong qwen08" DEPTHS="8192 32768" PROFILE_MODELS= \
    VARIANTS="none persistOpt=969 kv=f16 persistOpt=969,kv=f16 none persistOpt=969" timeout 330 bash bench/depth-probe-h200.sh > "$O/depth-early.txt" 2>&1
}

# The receipt's preparation in the background (llama.cpp's CUDA build, the
# models and their GGUFs), its clock BUDGET $1 seconds; the caller waits on $!.
start_prepare() {
  PREPARE_ONLY=1 DEPTHS= PREFILLS= SEQS= VARIANTS= MODELS="seedlong qwen08 qwen2b" BUDGET=$1 \
    bash bench/attn-long-h200.sh "$O/prep" > "$O/prep.log" 2>&1 &
}

# Waits for the preparation started by start_prepare (its pid $1) and
# prints how it ended.
end_prepare() {
  wait "$1"
  tail -3 "$O/prep.log"
}

# Waits up to 2 s x $2 for the preparation's GGUF of model $1 (made
# after its artifact: both are ready then).
wait_gguf() {
  local i
  for i in $(seq 1 "$2"); do [ -s "/tmp/attn-long-$1.gguf" ] && break; sleep 2; done
}

# Waits up to 2 s x $1 for llama.cpp's CUDA build that the preparation started.
wait_llama_build() {
  local i
  for i in $(seq 1 "$1"); do pgrep -f "build.sh cuda" > /dev/null || break; sleep 2; done
}

prepare() {
  start_prepare 520
  local pp=$! m a dep r t i
  waitm() { for i in $(seq 1 120); do [ -s "/tmp/attn-long-$1.gguf" ] && return 0; sleep 2; done; return 1; }
  for m in seedlong qwen08; do
    waitm "$m" || { echo "$m: no model"; continue; }
    a=$(model_dir "$m")
    for dep in 2048 4096; do for r in 1 2; do for t in persist=0,attnLong=0 persist=0,attnLong=1; do
      printf '%-8s depth %-6s %-28s ' "$m" "$dep" "$t"
      $W bench -m "$a" --backend webgpu -p "$dep" -n 64 --tuning "$t" -o /tmp/d.json --force 2> /dev/null | grep decode | cut -c1-120
    done; done; done
  done > "$O/threshold.txt" 2>&1
  for m in seedlong qwen08; do
    a=$(model_dir "$m")
    echo "== $m decode at depth 32768, op by op (persist=0): GPU time per kernel (the prefill's kernels too)"
    WISP_WEBGPU_PROFILE=1 $W bench -m "$a" --backend webgpu -p 32768 -n 16 --tuning persist=0 -o /tmp/d.json --force 2>&1 |
      grep -v '^bench:\|compiling' | head -24
  done > "$O/profile.txt" 2>&1
  wait "$pp"
}

# wisp tune against the default (tools/device.sh tune), within $1 seconds
run_tune() {
  # tools/device.sh packs its OUT into OUT.tgz (and removes the folder)
  MODELS="seed qwen08" TUNE_BUDGET=${TUNE_BUDGET:-110} REPS=${REPS:-3} timeout "$1" tools/device.sh tune /tmp/tune > "$O/tune.log" 2>&1
  cp /tmp/tune.tgz "$O/tune.tgz" 2> /dev/null
  tar xzf /tmp/tune.tgz -C "$O" --strip-components=1 tune/tune.txt tune/tune-ab.txt 2> /dev/null
}

tune() {
  start_prepare 540
  local pp=$!
  run_tune 500
  wait "$pp"
}

# The same on a quiet machine (after the receipt: its models are made)
tunequiet() { run_tune "${TUNE_TIMEOUT:-570}"; }

# Whether S sequences a step get the tokens each gets alone, Qwen 3.5 0.8B,
# under the fast profile and the reference one (seqmatch.txt)
seqmatch() {
  local a p
  a=$(model_dir qwen08)
  for p in throughput exact; do
    printf '%-10s ' "$p"
    timeout 60 .dev/seq_probe -m "$a" --backend webgpu -S 8 -n 32 -a 4 --profile "$p" 2> /dev/null | tail -1
  done > "$O/seqmatch.txt" 2>&1
  for m in qwen08 seed; do # where a step of 8 rows spends its GPU time
    echo "== $m seq_probe S = 8: GPU time per kernel"
    WISP_WEBGPU_PROFILE=1 timeout 60 .dev/seq_probe -m "$(model_dir "$m")" --backend webgpu -S 8 -n 32 -a 1 2>&1 |
      grep -v '^{' | head -24
  done > "$O/seq8-profile.txt" 2>&1
}

next() {
  local m a S t tu
  for m in seed qwen08; do
    a=$(model_dir "$m")
    for S in 8 32 64; do for t in none i8=1 matmulI8=32x8x4x2x2 matmulI8=32x16x4x4x2 i8Fuseq=1; do
      tu=(); [ "$t" = none ] || tu=(--tuning "$t")
      printf '%-7s S %-3s %-22s ' "$m" "$S" "$t"
      timeout 60 .dev/seq_probe -m "$a" --backend webgpu -S "$S" -n 64 -a 1 "${tu[@]}" 2> /dev/null | tail -1 | cut -c1-200
    done; done
  done > "$O/rows-next.txt" 2>&1
  MODELS="seedlong qwen08" DEPTHS="2048 8192" PROFILE_MODELS= \
    VARIANTS="none persistOpt=105 persistOpt=89 kv=f16 none" timeout 200 bash bench/depth-probe-h200.sh > "$O/depth-next.txt" 2>&1
  MODELS="seedlong qwen08" DEPTHS="32768" PROFILE_MODELS= \
    VARIANTS="none persistMaxKeys=0 persistMaxKeys=0,kv=f16 kv=f16" timeout 150 bash bench/depth-probe-h200.sh > "$O/depth-far.txt" 2>&1
}

ab() {
  local s q q8 dep r b t S
  s=$(model_dir seedlong) q=$(model_dir seed)
  for dep in 32768 8192; do for r in 1 2; do for b in wisp_prev wisp; do for t in persist=0 persist=0,kv=f16; do
    [ "$b" = wisp_prev ] && [ "$t" = persist=0,kv=f16 ] && continue
    printf 'seedlong depth %-6s %-10s %-18s ' "$dep" "$b" "$t"
    ".dev/$b" bench -m "$s" --backend webgpu -p "$dep" -n 64 --tuning "$t" -o /tmp/d.json --force 2> /dev/null | grep decode
  done; done; done; done > "$O/depthC.txt" 2>&1
  for S in 64 32; do
    printf 'seed S %s default ' "$S"; .dev/seq_probe -m "$q" --backend webgpu -S "$S" -n 64 -a 1 2> /dev/null | tail -1
  done >> "$O/depthC.txt" 2>&1
  WISP_WEBGPU_PROFILE=1 .dev/wisp bench -m "$s" --backend webgpu -p 32768 -n 16 --tuning persist=0 -o /tmp/d.json --force 2>&1 |
    grep -E 'attn_decode_long|attn_combine|attn_rope|webgpu profile' > "$O/profileC.txt" 2>&1
  q8=$(model_dir qwen08)
  for r in 1 2; do for b in wisp_prev wisp; do
    printf 'qwen08 depth 32768 %-10s ' "$b"
    ".dev/$b" bench -m "$q8" --backend webgpu -p 32768 -n 64 --tuning persist=0 -o /tmp/d.json --force 2> /dev/null | grep decode
  done; done >> "$O/depthC.txt" 2>&1
}

dn() {
  local m a p r b bins=${BINS:-wisp_prev wisp}
  for m in qwen08 qwen2b seed; do
    a=$(model_dir "$m")
    for p in 1024 4096; do for r in 1 2; do for b in $bins; do
      printf '%-7s prefill %-5s %-16s ' "$m" "$p" "$b"
      prefill_line "$b" "$a" "$p" none
    done; done; done
  done > "$O/prefill-ab.txt" 2>&1
  for m in qwen08 qwen2b; do for b in $bins; do
    echo "== $m prefill 4096, $b: GPU time per kernel (warm-up, prefill and 4 decode steps)"
    WISP_WEBGPU_PROFILE=1 ".dev/$b" bench -m "$(model_dir "$m")" --backend webgpu -p 4096 -n 4 -o /tmp/d.json --force 2>&1 |
      grep -v '^bench:\|compiling' | head -16
  done; done > "$O/prefill-profile.txt" 2>&1
}

rows2() {
  local m a r t vs
  for m in qwen08 qwen2b seedlong; do
    wait_gguf "$m" 150
    a=$(model_dir "$m")
    vs="none attnRows=1 prefillChunk=1024 prefillChunk=2048 dnChunkUnroll=1"
    [ "$m" = seedlong ] && vs="none attnRows=1 prefillChunk=2048"
    for r in 1 2; do for t in $vs; do
      printf '%-8s prefill 4096 %-18s ' "$m" "$t"
      prefill_line wisp "$a" 4096 "$t"
    done; done
  done > "$O/rows2.txt" 2>&1
}

# The receipt's preparation (background) and beside it the Q4_K long parity
# of the Qwen 3.5 persistent decode at 16,384 tokens.
prep2() {
  start_prepare 540
  local pp=$!
  QUANT=q4k CONFIGS=qwen35-0.8b NGREEDY=48 BACKENDS=webgpu+persist BUDGET=300 \
    bash bench/longparity-h200.sh "$O/lp" > "$O/longparity.log" 2>&1
  local m a t n
  for m in qwen08 qwen2b; do # beside the build: directions only
    wait_gguf "$m" 60
    a=$(model_dir "$m")
    for n in 1024 4096; do
      for t in none matmulI8=64x64x4x4x2 matmulI8=64x64x4x8x2 matmulI8=64x64x8x4x2 none; do
        [ $SECONDS -lt 480 ] || break
        printf '%-8s prefill %-5s %-24s ' "$m" "$n" "$t"
        prefill_line wisp "$a" "$n" "$t"
      done
    done
  done > "$O/i8-real-beside-build.txt" 2>&1
  end_prepare "$pp"
}

# On a quiet machine after prep2: prefill under matmulI8 geometries, decode
# at depth 0 with two persistent workgroups a SM and op by op, and the
# op-by-op decode's GPU time per kernel (Qwen 3.5 2B).
quiet() {
  local m a r t n
  for m in qwen08 qwen2b; do
    a=$(model_dir "$m")
    for r in 1 2; do for n in 1024 4096; do
      for t in none matmulI8=64x64x4x4x2 matmulI8=64x64x4x8x2 matmulI8=64x64x8x4x2; do
        printf '%-8s prefill %-5s %-24s ' "$m" "$n" "$t"
        prefill_line wisp "$a" "$n" "$t"
      done
    done; done
  done > "$O/i8-real.txt" 2>&1
  for m in qwen2b qwen08; do
    a=$(model_dir "$m")
    for r in 1 2; do for t in none persistGrid=256 persist=0; do
      tu=(); [ "$t" = none ] || tu=(--tuning "$t")
      printf '%-8s decode %-18s ' "$m" "$t"
      $W bench -m "$a" --backend webgpu -p 1 -n 64 "${tu[@]}" -o /tmp/d.json --force 2> /dev/null | grep decode | cut -c1-110
    done; done
  done > "$O/decode-grid.txt" 2>&1
  WISP_WEBGPU_PROFILE=1 $W bench -m "$(model_dir qwen2b)" --backend webgpu -p 1 -n 16 --tuning persist=0 \
    -o /tmp/d.json --force > "$O/decode-profile-2b.txt" 2>&1
}

# The seed shape's prefill after two rows a lane group took twice a row's
# lanes: .dev/wisp against .dev/wisp_prev (the binary before) beside
# llama.cpp's build (directions), then llama-bench's prefill on the same
# GGUF and both binaries again on the quiet machine (seedfix.txt).
seedfix() {
  local LC=/tmp/lcc m=seedlong a g b n r t0=$SECONDS
  setsid nohup bash .peer/build.sh cuda "$LC" > "$O/llama-build.log" 2>&1 < /dev/null &
  a=$(model_dir "$m"); g=/tmp/attn-long-$m.gguf
  $W export-gguf "$a" -o "$g" --keep-quant > /dev/null 2>&1 || echo "export-gguf failed"
  python3 tools/gguf-none-vocab.py "$g" "$g.nv" 2> /dev/null && mv "$g.nv" "$g"
  run() { # binary, tuning, label
    for n in 512 1024 4096; do
      printf '%-6s %-10s %-11s prefill %-5s ' "$3" "$1" "$2" "$n"
      prefill_line "$1" "$a" "$n" "$2" "$O/$3-$1-$2-$n.json"
    done
  }
  for r in 1 2; do run wisp none beside; run wisp_prev none beside; run wisp attnRows=1 beside; done
  while [ ! -x "$LC/build/bin/llama-bench" ] && [ $((SECONDS - t0)) -lt 420 ]; do sleep 5; done
  "$LC/build/bin/llama-bench" -m "$g" -fa 1 -ngl 99 -p 512,1024,4096 -n 0 -r 2 -o json > "$O/llama-$m-prefill.json" 2> "$O/llama.log" ||
    tail -3 "$O/llama.log"
  run wisp none quiet; run wisp_prev none quiet; run wisp attnRows=1 quiet; run wisp none quiet
  for b in wisp wisp_prev; do
    printf 'quiet  %-10s decode at depth 0 ' "$b"
    ".dev/$b" bench -m "$a" --backend webgpu -p 1 -n 64 -o "$O/quiet-$b-depth0.json" --force 2> /dev/null | grep decode | cut -c1-100
  done
  python3 -c 'import json,sys
for r in json.load(open(sys.argv[1])): print("llama.cpp prefill", r["n_prompt"], round(r["avg_ts"]), r["samples_ts"])' "$O/llama-$m-prefill.json"
}

# The seed shape's prefill 1,024 / 4,096 under prefill chunks and attnRows
# (chunk.txt).
chunk() {
  local a t n
  a=$(model_dir seedlong)
  exec > "$O/chunk.txt" 2>&1
  for t in prefillChunk=512 none prefillChunk=512,attnRows=1 prefillChunk=2048 prefillChunk=512; do
    for n in 1024 4096; do
      printf '%-28s prefill %-5s ' "$t" "$n"
      prefill_line wisp "$a" "$n" "$t"
    done
  done
}

# The seed shape's prefill 4,096 / 1,024 under each binary of BINS (from
# .dev), default and attnRows=1, twice (bisect.txt).
bisect() {
  local a b t n r
  a=$(model_dir seedlong)
  exec > >(tee "$O/bisect.txt") 2>&1
  for r in 1 2; do for b in ${BINS:-wisp_prev wisp}; do for t in ${TUNINGS:-none attnRows=1}; do for n in 4096 1024; do
    printf '%-14s %-11s prefill %-5s ' "$b" "$t" "$n"
    prefill_line "$b" "$a" "$n" "$t"
  done; done; done; done
  for b in ${BINS:-wisp_prev wisp}; do
    echo "== $b prefill 4096: GPU time per kernel (warm-up, prefill and 4 decode steps)"
    WISP_WEBGPU_PROFILE=1 ".dev/$b" bench -m "$a" --backend webgpu -p 4096 -n 4 -o /tmp/d.json --force 2>&1 |
      grep -v '^bench:\|compiling' | head -14
  done
}

# The receipt's preparation in the background and beside it `bisect`
# (directions: the build shares the host); the receipt follows on the
# warm machine.
prep3() { beside_prepare seedlong 90 bisect; } # the preparation makes models/seedlong first

# The preparation in the background and, once model $1's GGUF is made
# (waiting at most $2 * 2 s: the runs use its models, not race to make
# them), function $3 beside it
beside_prepare() {
  start_prepare 540
  local pp=$!
  wait_gguf "$1" "$2"
  "$3"
  end_prepare "$pp"
}

# The batched step under rowsPrefill (from how many rows its products run
# as an int8 prefill; the throughput default 8), S = 8 / 16 / 32 / 64
# (rowsq.txt, a line a run as it goes)
rowsq() {
  local m a S t tu
  for m in qwen08 seed; do
    a=$(model_dir "$m")
    for S in 8 16 32 64; do for t in none rowsPrefill=0 rowsPrefill=32; do
      tu=(); [ "$t" = none ] || tu=(--tuning "$t")
      printf '%-7s S %-3s %-15s ' "$m" "$S" "$t"
      timeout 30 .dev/seq_probe -m "$a" --backend webgpu -S "$S" -n 32 -a 1 "${tu[@]}" 2> /dev/null | tail -1 |
        grep -o '"tokens_per_s": [0-9.]*'
    done; done
  done 2>&1 | tee "$O/rowsq.txt"
}

rowsi8() {
  local m a S t tu vs
  case " ${RI8_MODELS:-qwen} " in *qwen*) qwen_models ;; esac
  for m in ${RI8_MODELS:-seed qwen08 qwen2b}; do
    a=$(model_dir "$m")
    timeout 60 .dev/seq_probe -m "$a" --backend webgpu -S 8 -n 8 -a 1 > /dev/null 2>&1 # a fresh machine's first run
    for S in ${RI8_S:-1 4 8 16 32 64}; do
      case $S in
        1) vs="none rowsI8=1x64" ;;
        8) vs="none rowsI8=0 rowsI8Fuse=0 rowsI8Rpl=1 rowsI8Rpl=4" ;;
        32) vs="none rowsI8=0 rowsI8Fuse=0 rowsI8Rpl=4" ;;
        64) vs="none rowsI8=0 rowsI8=2x64" ;;
        16 | 24) vs="none rowsI8=0 rowsI8=2x16" ;;
        *) vs="none rowsI8=0" ;;
      esac
      for t in $vs; do
        tu=(); [ "$t" = none ] || tu=(--tuning "$t")
        printf '%-7s S %-3s %-14s ' "$m" "$S" "$t"
        timeout 40 .dev/seq_probe -m "$a" --backend webgpu -S "$S" -n 32 -a 1 "${tu[@]}" 2> /dev/null | tail -1 |
          grep -o '"tokens_per_s": [0-9.]*\|"sequences_matching_alone": [0-9]*' | tr '\n' ' '
        echo
      done
    done
  done 2>&1 | tee -a "$O/${RI8_OUT:-rowsi8.txt}"
  [ -n "${RI8_NOPROFILE:-}" ] && return
  for m in "seed 8" "qwen08 8" "qwen08 64"; do
    set -- $m
    echo "== $1 S=$2"
    WISP_WEBGPU_PROFILE=1 timeout 60 .dev/seq_probe -m "$(model_dir "$1")" --backend webgpu -S "$2" -n 32 -a 1 2>&1 |
      head -24
  done > "$O/rowsi8-profile.txt" 2>&1
}

# S = 16 / 24 on the three models: the default against rowsI8=0 and
# rowsI8=2x16 (s16.txt; run after rowsi8 on the same machine)
s16() { RI8_S="16 24" RI8_NOPROFILE=1 RI8_OUT=s16.txt rowsi8; }

# One decode line (tok/s) of model dir $1 under tuning $2 (none: defaults)
decode_line() {
  local tu=(); [ "$2" = none ] || tu=(--tuning "$2")
  timeout 60 $W bench -m "$1" --backend webgpu -p 1 -n 128 "${tu[@]}" -o /tmp/d.json --force 2> /dev/null |
    grep -o 'decode:.*' | cut -c1-90
}

phases() {
  local m a t r
  qwen_models
  say "models" > "$O/phases.txt"
  for m in qwen2b qwen08; do
    a=$(model_dir "$m")
    decode_line "$a" none > /dev/null # the first run on a fresh machine is slow
    for r in 1 2; do for t in none persistGrid=132; do
      printf '%-7s %-26s ' "$m" "$t"; decode_line "$a" "$t"
    done; done
    # works: 1 in, 4 qkv, 16 gated attention, 32 DeltaNet, 64 out, 128 ffn, 256 down, 512 head
    for t in persistSkip=512 persistSkip=128 persistSkip=256 persistSkip=1 persistSkip=64 persistSkip=32 persistSkip=16 \
      persistSkip=1009 persist=0 none; do
      printf '%-7s %-26s ' "$m" "$t"; decode_line "$a" "$t"
    done
  done >> "$O/phases.txt" 2>&1
  WISP_WEBGPU_PROFILE=1 timeout 60 $W bench -m "$(model_dir qwen2b)" --backend webgpu -p 1 -n 16 --tuning persist=0 \
    -o /tmp/d.json --force > "$O/decode-profile-2b.txt" 2>&1
  WISP_WEBGPU_PROFILE=1 timeout 60 $W bench -m "$(model_dir qwen08)" --backend webgpu -p 1 -n 16 --tuning persist=0 \
    -o /tmp/d.json --force > "$O/decode-profile-08.txt" 2>&1
}

prep4() { beside_prepare qwen2b 150 decode_ab; } # the preparation makes the 2B last
prep5() { beside_prepare qwen2b 150 rowsi8; }
# prep5 with the seed shape's runs while the Qwen models are made
prep6() {
  start_prepare 540
  local pp=$!
  RI8_MODELS=seed RI8_NOPROFILE=1 rowsi8
  wait_gguf qwen2b 150
  RI8_MODELS="qwen08 qwen2b" rowsi8
  end_prepare "$pp"
}
# prep5, then on the same machine a short receipt against llama.cpp (decode
# at depth 0 and 2,048, prefill 1,024, S = 8 / 32 / 64), for a session with
# one machine's start left
all6() {
  prep6
  VARIANTS= DEPTHS="${R_DEPTHS-0 2048}" PREFILLS="${R_PREFILLS-1024}" SEQS="8 32 64" BUDGET=${R_BUDGET:-200} \
    bash bench/attn-long-h200.sh "$O/receipt" > "$O/receipt.log" 2>&1
}

# The two Qwen 3.5 models, both HF builds at once
qwen_models() {
  model_dir qwen08 > /dev/null &
  model_dir qwen2b > /dev/null
  wait
}

# Which grid the persistent decode of Qwen 3.5 0.8B ran under persistGrid
# 264 / 132 / the default (WISP_VERBOSE=1 prints the probe's choice and
# the kernel's; grids.txt)
grids() {
  local a t
  a=$(model_dir qwen08)
  for t in persistGrid=264 persistGrid=132 none; do
    echo "== $t"
    WISP_VERBOSE=1 timeout 40 $W bench -m "$a" --backend webgpu -p 1 -n 32 --tuning "$t" -o /tmp/d.json --force 2>&1 |
      grep -i 'persist\|grid\|decode:' | head -8
  done > "$O/grids.txt" 2>&1
}

# prep4's runs alone: the models made here
ab4() {
  qwen_models
  decode_ab
}

decode_ab() {
  local m a r b t
  say "models" > "$O/decode-ab.txt"
  for m in qwen2b qwen08 seed; do
    a=$(model_dir "$m")
    W=.dev/wisp decode_line "$a" none > /dev/null
    for r in 1 2; do for b in wisp_prev wisp; do
      printf '%-7s %-10s ' "$m" "$b"; W=.dev/$b decode_line "$a" none
    done; done
  done >> "$O/decode-ab.txt" 2>&1
  a=$(model_dir qwen2b)
  for m in qwen2b qwen08 seed; do for t in persistGrid=132 persistGrid=264 none; do
    printf '%-7s %-26s ' "$m" "$t"; decode_line "$(model_dir "$m")" "$t"
  done; done >> "$O/decode-ab.txt" 2>&1
  for t in persistSkip=512 persistSkip=128 persistSkip=256 persistSkip=1 persistSkip=64 persistSkip=32 persistSkip=1009 none; do
    printf '%-7s %-26s ' qwen2b "$t"; decode_line "$a" "$t"
  done >> "$O/decode-ab.txt" 2>&1
  for b in wisp_prev wisp; do # op by op: the q4k kernels convert their nibbles alike
    printf '%-7s %-10s persist=0 ' qwen08 "$b"; W=.dev/$b decode_line "$(model_dir qwen08)" persist=0
  done >> "$O/decode-ab.txt" 2>&1
}

# Sampled decode as `wisp run` makes it (temperature 0.8, top-k 40, top-p
# 0.95, min-p 0.05): .dev/wisp (the persistent kernel draws, kept-token
# lists) against .dev/wisp_prev (op by op, every pass over the vocabulary),
# `wisp run` of both twice, then `wisp bench --temp 0.8` (op by op too:
# persist=0) and greedy; model $1 (sampled.txt)
sampled_runs() {
  local a r b
  a=$(model_dir "$1")
  timeout 60 .dev/wisp bench -m "$a" --backend webgpu -p 16 -n 64 --temp 0.8 -o /tmp/s.json --force > /dev/null 2>&1
  for r in 1 2; do for b in wisp_prev wisp; do
    printf '%-8s run %-10s ' "$1" "$b"
    timeout 60 ".dev/$b" run -m "$a" --backend webgpu -p "Once upon a time" -n 256 --seed 1 2>&1 | grep -o 'decode:.*'
  done; done
  for t in "--temp 0.8" "--temp 0.8 --tuning persist=0" ""; do
    printf '%-8s bench %-32s ' "$1" "${t:-greedy}"
    timeout 60 .dev/wisp bench -m "$a" --backend webgpu -p 16 -n 256 $t -o "$O/bench-$1-$(echo "${t:-greedy}" | tr -c 'a-z0-9.\n' _).json" \
      --force 2> /dev/null | grep -o 'decode:.*' | cut -c1-70
  done
}

# llama.cpp on the same GGUFs: llama-completion sampling with the same
# settings (its CPU sampler, then -bs, its experimental backend sampling) and
# greedy, 256 tokens past a 4-token prompt, EOS ignored; llama-bench tg256
# (llama-sampled.txt: its perf lines)
llama_sampled() {
  local m g s
  for m in seedlong qwen08 qwen2b; do
    g=/tmp/attn-long-$m.gguf
    [ -s "$g" ] || { echo "$m: no GGUF"; continue; }
    for s in "--temp 0.8" "--temp 0.8 -bs" "--temp 0"; do
      echo "== $m llama-completion $s"
      timeout 60 "$LC/build/bin/llama-completion" -m "$g" -ngl 99 -fa 1 -p "Once upon a time" -n 256 $s --top-k 40 \
        --top-p 0.95 --min-p 0.05 --seed 1 --ignore-eos -no-cnv < /dev/null 2>&1 | grep 'eval time\|sampling time\|total time\|error'
    done
    echo "== $m llama-bench tg256"
    timeout 60 "$LC/build/bin/llama-bench" -m "$g" -fa 1 -ngl 99 -p 0 -n 256 -r 2 2>&1 | grep 'tg256'
  done
}

# The head of a step of 17+ rows through the int8 tiled product (i8=1)
# against the default (seq_probe S = 32 / 64; head-i8.txt)
head_i8() {
  local m S t tu
  for m in qwen08 seedlong; do for S in 32 64; do for t in none i8=1; do
    tu=(); [ "$t" = none ] || tu=(--tuning "$t")
    printf '%-8s S %-3s %-8s ' "$m" "$S" "$t"
    timeout 40 .dev/seq_probe -m "$(model_dir "$m")" --backend webgpu -S "$S" -n 32 -a 1 "${tu[@]}" 2> /dev/null | tail -1 |
      grep -o '"tokens_per_s": [0-9.]*'
  done; done; done
}

# Function $1 of a model name on the seed shape, then Qwen 3.5 0.8B and 2B,
# each as soon as the preparation (start_prepare) has made it; into $O/$2.
models_as_prepared() {
  local m
  wait_gguf seedlong 90
  "$1" seedlong > "$O/$2" 2>&1
  wait_gguf qwen2b 150
  for m in qwen08 qwen2b; do "$1" "$m"; done >> "$O/$2" 2>&1
}

# sampled7's wisp runs alone (no llama.cpp), for a call with less time
sampledab() {
  sampled_runs seed > "$O/sampled.txt" 2>&1
  qwen_models
  for m in qwen08 qwen2b; do sampled_runs "$m"; done >> "$O/sampled.txt" 2>&1
  head_i8 > "$O/head-i8.txt" 2>&1
}

sampled7() {
  start_prepare 470
  local pp=$! m
  models_as_prepared sampled_runs sampled.txt
  head_i8 > "$O/head-i8.txt" 2>&1
  end_prepare "$pp"
  LC=${LC:-/tmp/lcc} # where attn-long-h200.sh builds it
  wait_llama_build 60
  llama_sampled > "$O/llama-sampled.txt" 2>&1
  # wisp again with nothing beside it, right after llama.cpp (sampled-quiet.txt)
  for m in seedlong qwen08 qwen2b; do for t in "--temp 0.8" ""; do
    printf '%-8s bench %-12s ' "$m" "${t:-greedy}"
    timeout 60 .dev/wisp bench -m "$(model_dir "$m")" --backend webgpu -p 16 -n 256 $t -o /tmp/q.json --force 2> /dev/null |
      grep -o 'decode:.*' | cut -c1-70
  done; done > "$O/sampled-quiet.txt" 2>&1
}

# One `wisp run` as a user makes it (its stop tokens: the decode loop
# snapshots the recurrent state before each batch): .dev binary $1, model
# dir $2, more flags after; the decode line
run_line() {
  timeout 90 ".dev/$1" run -m "$2" --backend webgpu -p "Once upon a time" -n 256 --seed 1 "${@:3}" 2>&1 |
    grep -o 'decode:.*' | head -1
}

# `wisp run` greedy, sampled (wisp run's defaults) and sampled with the
# persistent draw (persist=1): .dev/wisp against .dev/wisp_prev, twice,
# model $1 (runs.txt)
runs_ab() {
  local a r t b
  a=$(model_dir "$1")
  run_line wisp "$a" --temp 0 > /dev/null; run_line wisp_prev "$a" --temp 0 > /dev/null # the driver's shader cache
  for r in 1 2; do for t in "--temp 0" "" "--tuning persist=1"; do for b in wisp_prev wisp; do
    printf '%-8s %s %-10s %-20s ' "$1" "$r" "$b" "${t:-sampled}"; run_line "$b" "$a" $t
  done; done; done
}

# seq_probe S = 32 / 64: .dev/seq_probe against .dev/seq_probe_prev (seq-ab.txt)
seq_ab() {
  local m S b
  for m in seedlong qwen08 qwen2b; do for S in 32 64; do for b in seq_probe_prev seq_probe; do
    printf '%-8s S %-3s %-15s ' "$m" "$S" "$b"
    timeout 40 ".dev/$b" -m "$(model_dir "$m")" --backend webgpu -S "$S" -n 32 -a 1 2> /dev/null | tail -1 |
      grep -o '"tokens_per_s": [0-9.]*'
  done; done; done
}

# runs_ab and seq_ab beside the receipt's preparation, then llama.cpp's
# sampled and greedy decode on the same GGUFs (llama-sampled.txt), then
# `wisp run` alone right after it (quiet.txt)
runab8() {
  start_prepare 470
  local pp=$! m t
  models_as_prepared runs_ab runs.txt
  seq_ab > "$O/seq-ab.txt" 2>&1
  end_prepare "$pp"
  LC=${LC:-/tmp/lcc}
  wait_llama_build 90
  llama_sampled > "$O/llama-sampled.txt" 2>&1
  for m in seedlong qwen08 qwen2b; do
    for t in "--temp 0" "" "--tuning persist=1"; do
      printf '%-8s run   %-20s ' "$m" "${t:-sampled}"; run_line wisp "$(model_dir "$m")" $t
    done
  done > "$O/quiet.txt" 2>&1
}

case $cmd in
  runab8 | sampledab | sampled7 | s16 | all6 | prep6 | prep5 | rowsi8 | grids | ab4 | prep4 | phases | choose | prepare | tune | next | stream | early | ab | dn | rows2 | prep2 | prep3 | tunequiet | seqmatch | rowsq | quiet | seedfix | chunk | bisect) "$cmd" ;;
  *) sed -n '2,/^set -uo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 2 ;;
esac
