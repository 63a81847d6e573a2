#!/usr/bin/env bash
# Runs wisp on a GPU machine that has no build tools, no Debian packages and
# no network (the H200 machine), and collects what comes back. docs/device.md
# describes the whole round trip.
#
# Here, in the repository:
#   tools/device.sh bundle            build, then pack into .dev/ the binaries
#                                     (wisp, wisp_tests, the probes), the shared
#                                     libraries the machine lacks and .dev/COMMIT
#                                     (the tree they were built from), and into
#                                     .gl/ the Vulkan loader .deb (libvulkan1).
#                                     Carry .dev, .gl and .cache/webgpu.
#   PREV=REV tools/device.sh bundle   also builds REV (a commit) as .dev/wisp_prev,
#                                     for `ab` between two binaries; REVS="A B ..."
#                                     builds each as .dev/wisp_<short hash> (a bisect).
#   SLIM=1 tools/device.sh bundle     wisp alone (no tests, no probes): a smaller
#                                     carry, for bench/serve-h200.sh.
# There, from the repository root (each sets the environment up first):
#   tools/device.sh check OUT         adapters; greedy tokens CPU vs WebGPU (seed
#                                     shape, small synthetic, the default model
#                                     against its recorded PyTorch ids); the
#                                     suite's WebGPU tests
#   tools/device.sh receipts OUT      speed receipts (wisp bench JSON) of
#                                     SECTIONS (default "seed qwen lfm350"), each
#                                     with a CPU-vs-WebGPU greedy check first
#   tools/device.sh parity OUT        transformers parity (tests/parity/
#                                     run_device.sh) of CONFIGS (default
#                                     "qwen35-0.8b lfm2-350m"), QUANTS (default: per
#                                     architecture), CPU and WebGPU. CONFIGS
#                                     qwen25-0.5b / gemma3-1b (real shapes; -small:
#                                     hidden 128) run tools/gemma-qwen2-oracle.py
#                                     instead: 128 greedy tokens under --profile
#                                     exact on cpu and webgpu, of the f32 artifact
#                                     and of llama.cpp's Q4_K_M of wisp's GGUF
#                                     export, run in place (-m FILE.gguf), against
#                                     transformers (Q4_K_M: with llama.cpp's
#                                     dequantized values; webgpu_loop: WebGPU's
#                                     tokens from the decode loop, the persistent
#                                     decode); llama-bench loads both
#                                     GGUFs with no override. llama-quantize and
#                                     llama-bench from LC (default /tmp/llama.cpp-cpu,
#                                     built there by .peer/build.sh cpu when absent:
#                                     carry .peer; LC_WAIT=S: run the f32 part first and
#                                     wait up to S seconds for a build started elsewhere).
#                                     One such config a call (~3-8 min)
#   tools/device.sh ab OUT            the speed A/B of a change: `wisp bench` of BINS
#                                     (binaries in .dev/, default "wisp_prev wisp")
#                                     alternated REPS (2) times on MODELS (default
#                                     "seed qwen08 qwen2b") for WORKLOADS (default
#                                     "batch1 throughput prefill1024": decode 128+256
#                                     at one token a submit and under the throughput
#                                     profile, prefill 1,024; batchN any batch;
#                                     opbyop: decode 128+256 with the persistent
#                                     decode off, every step through the graph's
#                                     fused ops; persist: the same with it on (the
#                                     exact profile's default: opbyop's pair);
#                                     throughput_opbyop: throughput's with it off).
#                                     Each line ends with the receipt's
#                                     persistent_steps (0: it did not run).
#                                     Gemma 3 1B persistent vs op by op:
#                                     MODELS=gemma1b BINS=wisp REPS=2 WORKLOADS="persist
#                                     opbyop throughput throughput_opbyop" ... ab OUT
#   tools/device.sh profile OUT       per-kernel GPU time tables (timestamp
#                                     queries) of decode and prefill on MODELS
#   tools/device.sh dnchunk OUT       the chunked Gated DeltaNet prefill on MODELS
#                                     (default "qwen08"; qwen2b in a second call keeps
#                                     each call within 10 minutes): greedy ids of a long
#                                     prompt chunked / token by token (dnChunkMin=1000000)
#                                     / CPU; per-kernel GPU time of a 1,024-token prefill
#                                     both ways; prefill receipts at PREFILLS (default
#                                     "512 1024") for dnChunkCols 8, 16, 32 and token by
#                                     token; the dnChunkMin crossover (prefills of 4..32)
#   tools/device.sh tune OUT          `wisp tune` against the default in one run: on
#                                     MODELS (default "seed qwen08") a copy of the
#                                     artifact is tuned (TUNE_BUDGET seconds, default
#                                     600; TUNE_ARGS e.g. --quick), then `wisp bench`
#                                     of the untuned and the tuned artifact alternate
#                                     REPS (3) times for WORKLOADS (default "batch1
#                                     default opbyop prefill1024"); tune.txt has tuned/default
#                                     per workload and whether tuned was ever slower
#                                     than the default beyond the runs' own spread
#   tools/device.sh tiles OUT         the prefill tile sweep: `wisp bench` prefill of
#                                     PROMPTS (default "128 1024") on MODELS (default
#                                     "seed qwen08") under --profile exact for each of
#                                     EXACT_TUNINGS and under the throughput profile for
#                                     each of I8_TUNINGS ("none": the defaults; "prev":
#                                     .dev/wisp_prev, no tuning), REPS (1) times; tiles.txt
#   tools/device.sh probe OUT         tools/phase_probe.c on one workgroup per SM
#   tools/device.sh templates OUT     the chat-template renderings of
#                                     tests/data/chat_templates/expected.json
#                                     against transformers' own renderer
#                                     (tools/chat-template-oracle.py --transformers;
#                                     needs only python3 with transformers)
#   tools/device.sh rows OUT          several sequences a decode step (tools/seq_probe.c)
#                                     on WebGPU: aggregate tok/s of S in SEQS (default
#                                     "2 4 8 16 32") sequences on MODELS (default "seed
#                                     qwen08"), the multi-row products (matvec_rows)
#                                     against row by row (tuning rowsShared=0; or the
#                                     TUNINGS given, e.g. "rowsNt=4 rowsNt=8"), and
#                                     whether the first ALONE (2) sequences got the
#                                     tokens they get alone;
#                                     then the suite's webgpu_rows_ and sequences tests
#   tools/device.sh sched OUT         the serving scheduler without HTTP (tools/sched_probe.c)
#                                     on WebGPU: C in CONCS (default "1 8 32 64") streams of
#                                     P=128 prompt and D=128 tokens on MODELS (default "seed
#                                     qwen08"): aggregate tok/s, TTFT and ITL; then a 6-turn
#                                     chat (TTFT per turn with prompt reuse); then the
#                                     suite's sched_ tests
#   tools/device.sh products OUT      each prefill product kernel's GFLOP/s and fraction
#                                     of the FP32 (67 TFLOP/s) or DP4A (134 TOP/s) peak
#                                     (tools/prod_probe.c, GPU timestamps): f32 activations
#                                     (matmul.wgsl, the exact profile) for f32, F16, Q4, Q4Z,
#                                     Q4_K, Q8_0 and int8 ones (matmul_i8.wgsl, the throughput
#                                     profile) for Q4, Q4Z, Q4_K, Q8_0, on SHAPES (default the
#                                     Qwen 3.5 0.8B products "2048x1024 7168x1024 1024x3584")
#                                     x TOKENS ("512 2048"), each under the TUNINGS given
#                                     (default: the tile by size, then "matmul=64x32"); the
#                                     receipt OUT/products.json; then the suite's product tests
#   tools/device.sh mixed OUT         a llama.cpp Q4_K_M file run in place, whose fused
#                                     sections mix types (matrices in row parts,
#                                     docs/gguf.md): CONFIG (default qwen25-0.5b, whose
#                                     896 columns take Q5_0 / Q8_0; gemma3-1b; or
#                                     qwen35-0.8b / lfm2-350m, K types: Q4_K beside Q6_K;
#                                     real shapes, random weights) quantized by llama-quantize
#                                     (carry .peer); for BINS (default "wisp_prev wisp")
#                                     the bytes mapped / built at open (wisp verify), the
#                                     peak RSS of a CPU decode, `wisp plan`; then
#                                     `wisp bench` alternated REPS (2) times: WebGPU
#                                     decode 128+256 and prefill 1,024 (exact), CPU
#                                     decode (throughput); mixed.txt
# OUT (default /tmp/device-OUT) ends packed as OUT.tgz, and the folder removed: the
# machine returns 8 files at most.
# Models: seed = the seed-shaped synthetic LFM2 (assets/; seedlong: the same
# made for 40,960 positions, its rope computed), qwen08 / qwen2b =
# Qwen 3.5 0.8B / 2B shapes and lfm350 = LFM2-350M (random weights from the
# real configurations, built with tests/parity/hf_reference.py; Q4_K / Q4);
# gemma1b / gemma1b_q4k = Gemma 3 1B's shape (tools/gemma-qwen2-oracle.py
# build --shape real; Q4, or Q4_K where the width allows and Q4 elsewhere).
set -uo pipefail
cd "$(dirname "$0")/.."
cmd=${1:-}
shift || true

# ---- here ------------------------------------------------------------------
bundle() {
  local jobs; jobs=$(nproc)
  local bins="build/wisp build/wisp_tests build/grid_probe build/phase_probe build/stream_probe build/seq_probe build/sched_probe build/prod_probe"
  [ -n "${SLIM:-}" ] && bins=build/wisp # SLIM=1: wisp alone, for calls that carry more (bench/serve-h200.sh)
  # shellcheck disable=SC2086
  make -s -j"$jobs" $bins
  rm -rf .dev && mkdir -p .dev/lib .gl
  # shellcheck disable=SC2086
  cp $bins .dev/
  # every shared library wisp links beyond the C and C++ runtimes (cJSON,
  # libcrypto, utf8proc, PCRE2, and libmicrohttpd with its own needs once
  # `wisp serve` links it): the machine has none of Debian's
  ldd build/wisp | awk '$2 == "=>" && $3 ~ /^\// {print $3}' |
    grep -Ev '/(libc|libm|libmvec|libdl|libpthread|librt|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so' |
    while read -r lib; do cp -L "$lib" .dev/lib/; done
  # the Vulkan loader and the GL vendor-neutral libraries: with libvulkan1
  # alone some machines' NVIDIA ICD (libGLX_nvidia.so.0) fails to load and
  # Dawn finds only its Null adapter
  local p; for p in libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2; do
    ls .gl/"$p"_*.deb > /dev/null 2>&1 || (cd .gl && apt-get download "$p")
  done
  # PREV: one older binary (.dev/wisp_prev); REVS: several, .dev/wisp_<short hash>
  # each (a bisect: BINS="wisp_<a> wisp_<b> ..." for `ab`), stripped
  local rev name
  for rev in ${PREV:+PREV} ${REVS:-}; do
    name=wisp_$(git rev-parse --short "$rev" 2>/dev/null)
    [ "$rev" = PREV ] && { rev=$PREV; name=wisp_prev; }
    local tmp; tmp=$(mktemp -d)
    git worktree add -q --detach "$tmp" "$rev"
    make -s -C "$tmp" -j"$jobs" build/wisp && cp "$tmp/build/wisp" ".dev/$name" && strip ".dev/$name"
    git worktree remove --force "$tmp"
  done
  echo "$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src include tests || echo +dirty) $(date -u +%FT%TZ)" \
    > .dev/COMMIT
  ls -la .dev .dev/lib .gl
}

# ---- there -------------------------------------------------------------------
W=.dev/wisp
say() { echo "== $* ($(date +%T))"; }

# The Vulkan loader from .gl, the carried libraries, the NVIDIA Vulkan
# driver and the carried Dawn build.
setup_env() {
  # the libraries packed (.dev/lib.txz, to keep the carry under its limit)
  [ -d .dev/lib ] || [ ! -f .dev/lib.txz ] || { mkdir -p .dev/lib && tar xJf .dev/lib.txz -C .dev; }
  # and the extra binaries of a bisect (.dev/bins.txz: wisp_<hash>, probes)
  [ ! -f .dev/bins.txz ] || [ -f .dev/.bins-unpacked ] || { tar xJf .dev/bins.txz -C .dev && touch .dev/.bins-unpacked; }
  for f in .gl/*.deb; do dpkg -x "$f" / 2>/dev/null; done
  ldconfig 2>/dev/null
  export LD_LIBRARY_PATH=$PWD/.dev/lib VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
  export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
  export WISP_WEBGPU_LIB=$PWD/.cache/webgpu/libwebgpu_wrapper.so
  echo "== .dev bundle: $(cat .dev/COMMIT 2>/dev/null || echo 'unknown (no .dev/COMMIT)')"
}

# model name -> artifact directory, built on first use (/tmp/wq survives
# between calls while the machine stays warm)
model_dir() {
  local cfg quant
  case $1 in
    seed) [ -d models/seed ] || $W gen-synthetic --like assets/lfm2-hybrid-q4.manifest.json -o models/seed --seed 1 >/dev/null 2>&1
          echo models/seed; return ;;
    # the seed shape made for 40,960 positions (rope computed): decode at depth 32,768
    seedlong) [ -d models/seedlong ] || $W gen-synthetic --like assets/lfm2-hybrid-q4.manifest.json --context 40960 \
                -o models/seedlong --seed 1 >/dev/null 2>&1
              echo models/seedlong; return ;;
    small) [ -d models/small ] || $W gen-synthetic --small -o models/small --seed 1 >/dev/null 2>&1
           echo models/small; return ;;
    default) echo models/default; return ;;
    qwen08) cfg=qwen35-0.8b quant=q4k ;;
    qwen2b) cfg=qwen35-2b quant=q4k ;;
    lfm350) cfg=lfm2-350m quant=q4 ;;
    gemma1b) cfg=gemma3-1b quant=q4 ;;
    gemma1b_q4k) cfg=gemma3-1b quant=q4k ;;
    *) echo "/nonexistent/$1"; return ;;
  esac
  local a=/tmp/wq/$cfg/art_$quant
  if [ ! -d "$a" ]; then
    if [ ! -f "/tmp/wq/$cfg/hf/config.json" ]; then
      case $cfg in
        gemma3-*) python3 tools/gemma-qwen2-oracle.py build --arch gemma3 --shape real --out "/tmp/wq/$cfg/hf" >/dev/null 2>&1 ;;
        *) python3 tests/parity/hf_reference.py build --config "$cfg" --seed 1234 --out "/tmp/wq/$cfg/hf" >/dev/null 2>&1 ;;
      esac
    fi
    $W convert "/tmp/wq/$cfg/hf" -o "$a" --quant "$quant" --quiet >/dev/null 2>&1
  fi
  echo "$a"
}

# name model n: n greedy tokens on the CPU and on WebGPU must be the same
same() {
  local a b
  a=$($W run -m "$2" -p Hello -n "$3" --temp 0 --ids --ignore-eos --backend cpu --profile exact -t 16 2>&1 >/dev/null | grep "generated ids")
  b=$($W run -m "$2" -p Hello -n "$3" --temp 0 --ids --ignore-eos --backend webgpu --profile exact 2>&1 >/dev/null | grep "generated ids")
  if [ -n "$a" ] && [ "$a" = "$b" ]; then echo "$1: $3 greedy tokens identical (cpu vs webgpu)"
  else echo "$1: DIFFER"; echo "$a" | cut -c1-200; echo "$b" | cut -c1-200; fi
}

# receipt-name args...: one `wisp bench` receipt under $OUT
bench() {
  local name=$1; shift
  printf '%-48s ' "$name"
  $W bench "$@" -o "$OUT/$name.json" 2>/dev/null | head -1
}

check() {
  $W devices 2>&1 | head -12
  for m in small seed; do same "$m" "$(model_dir $m)" 128; done
  local prompt want got
  prompt=$(python3 -c "import json;print(json.load(open('models/default/expected.json')).get('prompt',''))")
  want=$(python3 -c "import json;d=json.load(open('models/default/expected.json'));print(' '.join(map(str,d.get('greedy_ids') or d.get('ids') or [])))")
  got=$($W run -m models/default -p "$prompt" -n 128 --temp 0 --ignore-eos --ids --backend webgpu --profile exact 2>&1 >/dev/null |
        sed -n 's/^generated ids: //p')
  if [ -n "$want" ] && [ "$want" = "$got" ]; then echo "default model webgpu: greedy ids identical to PyTorch"
  else echo "default model webgpu: differ"; echo "want $want" | cut -c1-200; echo "got  $got" | cut -c1-200; fi
  say "webgpu tests"
  WISP_BIN=$W WISP_REQUIRE_WEBGPU=1 .dev/wisp_tests webgpu 2>&1 | grep -E "FAIL|passed" | tee "$OUT/webgpu-tests.txt"
}

receipts() {
  local a
  for part in ${SECTIONS:-seed qwen lfm350}; do
    case $part in
      seed)
        a=$(model_dir seed); say seed; same seed "$a" 128
        bench h200-seed-webgpu-decode-batch1 -m "$a" --backend webgpu --prompt 128 --decode 256 --batch 1 --profile exact
        bench h200-seed-webgpu-decode-throughput -m "$a" --backend webgpu --prompt 128 --decode 256 --profile throughput
        bench h200-seed-webgpu-prefill1024 -m "$a" --backend webgpu --prompt 1024 --decode 16 --profile exact ;;
      qwen)
        for m in qwen08 qwen2b; do
          a=$(model_dir $m); [ -d "$a" ] || { echo "$m: no artifact"; continue; }
          local cfg=${a#/tmp/wq/}; cfg=${cfg%%/*}
          say "$cfg"; same "$cfg q4k" "$a" 64
          bench "h200-$cfg-q4k-webgpu-decode-batch1" -m "$a" --backend webgpu --prompt 128 --decode 256 --batch 1 --profile exact
          bench "h200-$cfg-q4k-webgpu-decode-throughput" -m "$a" --backend webgpu --prompt 128 --decode 256 --profile throughput
          bench "h200-$cfg-q4k-webgpu-prefill1024" -m "$a" --backend webgpu --prompt 1024 --decode 16 --profile exact
        done ;;
      lfm350)
        a=$(model_dir lfm350); [ -d "$a" ] || { echo "lfm350: no artifact"; continue; }
        say lfm2-350m; same "lfm2-350m q4" "$a" 64
        bench h200-lfm2-350m-q4-webgpu-decode-batch1 -m "$a" --backend webgpu --prompt 128 --decode 256 --batch 1 --profile exact
        bench h200-lfm2-350m-q4-webgpu-decode-throughput -m "$a" --backend webgpu --prompt 128 --decode 256 --profile throughput
        bench h200-lfm2-350m-q4-webgpu-prefill1024 -m "$a" --backend webgpu --prompt 1024 --decode 16 --profile exact ;;
      *) echo "receipts: unknown section '$part' (seed, qwen, lfm350)" ;;
    esac
  done
}

# Gemma 3 / Qwen 2.5 parity (tools/gemma-qwen2-oracle.py) of config $1.
gq_parity() {
  local cfg=$1 arch shape d=/tmp/wq/$1 lc=${LC:-/tmp/llama.cpp-cpu} log="$OUT/parity-$1.log"
  local oracle=tools/gemma-qwen2-oracle.py cmp=tests/parity/compare.py fail=0 q
  case $cfg in qwen25-*) arch=qwen2 ;; *) arch=gemma3 ;; esac
  case $cfg in *-small) shape=small ;; *) shape=real ;; esac
  rm -rf "$d"; mkdir -p "$d"
  # the wisp of config $1, quant $2 on each backend, against reference $3
  gq_wisp() {
    local m="$d/art_f32"; [ "$1" = q4km ] && m="$d/q4km.gguf"
    # webgpu_loop: the greedy tokens from the decode loop (the persistent decode where it takes the graph)
    for be in ${BACKENDS:-cpu webgpu webgpu_loop}; do
      say "$cfg: wisp $1 $be"
      local how=(--backend "$be"); [ "$be" = webgpu_loop ] && how=(--backend webgpu --decode-loop)
      "$W" logits -m "$m" --prompts "$d/hf/prompts.json" --greedy 128 "${how[@]}" --profile exact -t 16 \
        -o "$d/wisp_${1}_$be.json" --force || { fail=1; continue; }
      echo "-- $cfg $1 $be:"; python3 $cmp "$d/ref_$1.json" "$d/wisp_${1}_$be.json" || fail=1
    done
  }
  {
    # f32 first: it needs no llama.cpp, so a build started elsewhere (LC_WAIT seconds
    # to wait for it) runs beside it; else llama.cpp is built here when absent
    if [ ! -x "$lc/build/bin/llama-quantize" ] && [ -f .peer/build.sh ] && [ -z "${LC_WAIT:-}" ]; then
      say "building llama.cpp (cpu) in $lc"; bash .peer/build.sh cpu "$lc" > "$d/llama-build.log" 2>&1 || tail -5 "$d/llama-build.log"
    fi
    say "$cfg: build, convert, export"
    python3 "$oracle" build --arch $arch --shape $shape --out "$d/hf" &&
      "$W" convert "$d/hf" -o "$d/art_f32" --quant f32 --quiet &&
      "$W" export-gguf "$d/art_f32" -o "$d/f32.gguf" || { echo "FAILED: build/convert/export"; return 1; }
    say "$cfg: reference f32 (transformers, cuda)"
    python3 "$oracle" reference --hf "$d/hf" --prompts "$d/hf/prompts.json" --out "$d/ref_f32.json" --greedy 128 --device cuda || fail=1
    gq_wisp f32
    local waited=0
    while [ ! -x "$lc/build/bin/llama-quantize" ] && [ "$waited" -lt "${LC_WAIT:-0}" ]; do sleep 5; waited=$((waited + 5)); done
    if [ -x "$lc/build/bin/llama-quantize" ]; then
      if "$lc/build/bin/llama-quantize" "$d/f32.gguf" "$d/q4km.gguf" Q4_K_M > "$d/quantize.log" 2>&1 &&
        "$W" convert "$d/q4km.gguf" -o "$d/art_q4km_f32" --quant f32 --quiet; then
        say "$cfg: reference q4km (transformers on llama.cpp's dequantized values)"
        python3 "$oracle" reference --hf "$d/hf" --prompts "$d/hf/prompts.json" --out "$d/ref_q4km.json" \
          --greedy 128 --device cuda --dequant-from "$d/art_q4km_f32" || fail=1
        gq_wisp q4km
      else echo "FAILED: llama-quantize Q4_K_M / convert"; tail -3 "$d/quantize.log"; fail=1; fi
      for q in f32 q4km; do # llama.cpp loads and runs wisp's export (no vocabulary: marked "none")
        [ -f "$d/$q.gguf" ] || continue
        python3 tools/gguf-none-vocab.py "$d/$q.gguf" "$d/$q.nv.gguf" 2> /dev/null || cp "$d/$q.gguf" "$d/$q.nv.gguf"
        if "$lc/build/bin/llama-bench" -m "$d/$q.nv.gguf" -p 16 -n 8 -r 1 -t 8 > "$d/llama-bench-$q.txt" 2>&1; then
          echo "llama-bench runs $q.gguf: $(grep -c ' t/s\| pp16\| tg8' "$d/llama-bench-$q.txt") result lines"
        else echo "FAILED: llama-bench $q.gguf"; tail -3 "$d/llama-bench-$q.txt"; fail=1; fi
      done
    else
      echo "no llama-quantize in $lc (carry .peer): Q4_K_M skipped"; fail=1
    fi
    # the second oracle: llama.cpp's own forward of wisp's f32 export (CPU, f32 caches)
    local cc lb=$lc/build/bin
    cc=$(command -v cc || command -v gcc)
    if [ -f "$d/f32.nv.gguf" ] && [ -f "$d/wisp_f32_cpu.json" ] &&
      "$cc" -std=c11 -O1 -I"$lc/llama.cpp/include" -I"$lc/llama.cpp/ggml/include" tests/parity/llama_logits.c \
        -o "$d/llama_logits" -L"$lb" -lllama -Wl,-rpath,"$lb"; then
      say "$cfg: llama.cpp's logits of f32.gguf"
      python3 -c "import json,sys; p=json.load(open(sys.argv[1])); print(p.get('greedy_prompt', 0));
open(sys.argv[2], 'w').write(''.join(','.join(map(str, q)) + '\n' for q in p['prompts']))" \
        "$d/hf/prompts.json" "$d/prompts.txt" > "$d/greedy_prompt.txt" &&
        "$d/llama_logits" "$d/f32.nv.gguf" "$d/prompts.txt" "$(cat "$d/greedy_prompt.txt")" 128 > "$d/llama_f32.json" &&
        { echo "-- $cfg f32 cpu against llama.cpp:"; python3 $cmp "$d/llama_f32.json" "$d/wisp_f32_cpu.json"; } || fail=1
    else echo "FAILED: no llama.cpp logits (llama_logits.c did not build, or no f32 GGUF / wisp logits)"; fail=1; fi
    echo "== summary $cfg: $([ $fail = 0 ] && echo PASS || echo FAIL)"
  } > "$log" 2>&1
  grep -E "^-- |greedy|max|summary|FAILED|llama-bench runs" "$log" | head -40
}

parity() {
  for cfg in ${CONFIGS:-qwen35-0.8b lfm2-350m}; do
    case $cfg in qwen25-*|gemma3-*) gq_parity "$cfg"; continue ;; esac
    # QUANTS unset: run_device.sh's per-architecture list (LFM2 f32 q4, Qwen 3.5 f32 q4 q4k)
    env ${QUANTS:+QUANTS="$QUANTS"} CONFIGS="$cfg" BACKENDS="${BACKENDS:-cpu webgpu}" REF_DEVICE=cuda THREADS=16 \
      timeout "${PARITY_SECONDS:-400}" bash tests/parity/run_device.sh "$W" /tmp/unused /tmp/wq > "$OUT/parity-$cfg.log" 2>&1
    grep -A20 "== summary" "$OUT/parity-$cfg.log"
  done
}

# The speed A/B of a change: every WORKLOAD of every model, BINS alternated
# REPS times on the same artifacts (in turn forward and reversed: ABBA), after
# an untimed run of each binary; one receipt per run and ab.txt.
# BIN DIR: one untimed decode before timed ones. The first GPU work of a
# cold machine runs at low clocks (an H100's first seed batch-1 run, either
# binary: p50 1.23 ms against 0.51 ms in the next; the tune A/B's first
# seed batch1 run: 831 against 1,987 tok/s).
# (No --force: ab's older binaries may not take it.)
warm_up() {
  rm -f /tmp/warm-up.json
  [ -x "$1" ] && [ -d "$2" ] && timeout 60 "$1" bench -m "$2" --backend webgpu --prompt 128 --decode 512 \
    -o /tmp/warm-up.json > /dev/null 2>&1
}

ab() {
  local args bins order
  bins=${BINS:-wisp_prev wisp}
  local models=${MODELS:-seed qwen08 qwen2b} first
  first=$(model_dir "${models%% *}")
  for b in $bins; do warm_up ".dev/$b" "$first"; done
  for m in $models; do
    local a; a=$(model_dir "$m"); [ -d "$a" ] || { echo "$m: no artifact"; continue; }
    for w in ${WORKLOADS:-batch1 throughput prefill1024}; do
      case $w in
        throughput) args="--prompt 128 --decode 256 --profile throughput" ;;
        prefill1024) args="--prompt 1024 --decode 16 --profile exact" ;;
        batch[0-9]*) args="--prompt 128 --decode 256 --batch ${w#batch} --profile exact" ;;
        # decode at depth N under the default profile (as the receipts run it)
        depth[0-9]*) args="--prompt ${w#depth} --decode 64" ;;
        # the op-by-op decode (the graph's fused ops, no persistent decode), and its pair with it on
        opbyop) args="--prompt 128 --decode 256 --profile exact --tuning persist=0" ;;
        persist) args="--prompt 128 --decode 256 --profile exact" ;;
        throughput_opbyop) args="--prompt 128 --decode 256 --profile throughput --tuning persist=0" ;;
        *) echo "ab: unknown workload '$w' (batchN, depthN, throughput, prefill1024, opbyop, persist, throughput_opbyop)"; continue ;;
      esac
      for rep in $(seq "${REPS:-2}"); do
        order=$bins; [ $((rep % 2)) = 0 ] && order=$(printf '%s\n' $bins | tac | tr '\n' ' ')
        for b in $order; do
          [ -x ".dev/$b" ] || { echo "no .dev/$b"; continue; }
          local ba=$args # PREV_EXACT: the exact profile's name for an older binary (profiles/default)
          [ "$b" = wisp_prev ] && [ -n "${PREV_EXACT:-}" ] && ba=${args/--profile exact/--profile $PREV_EXACT}
          # shellcheck disable=SC2086
          local r="$OUT/ab-$m-$w-$b-$rep.json"
          printf '%-8s %-12s %-10s %s %s persistent_steps=%s\n' "$m" "$w" "$b" "$rep" \
            "$(".dev/$b" bench -m "$a" --backend webgpu $ba -o "$r" 2>/dev/null | head -1)" \
            "$(grep -o '"persistent_steps":[[:space:]]*[0-9]*' "$r" 2>/dev/null | grep -o '[0-9]*$')" |
            tee -a "$OUT/ab.txt"
        done
      done
    done
  done
}

profile() {
  for m in ${MODELS:-seed qwen08}; do
    local a; a=$(model_dir "$m"); [ -d "$a" ] || { echo "$m: no artifact"; continue; }
    WISP_WEBGPU_PROFILE=1 $W bench -m "$a" --backend webgpu --profile exact --prompt 128 --decode 128 -o /tmp/p.json 2>&1 |
      grep -v XDG > "$OUT/profile-$m-decode.txt"
    WISP_WEBGPU_PROFILE=1 $W bench -m "$a" --backend webgpu --profile exact --prompt 1024 --decode 1 -o /tmp/p.json 2>&1 |
      grep -v XDG > "$OUT/profile-$m-prefill1024.txt"
    say "$m decode"; head -30 "$OUT/profile-$m-decode.txt"
  done
}

# The chunked Gated DeltaNet (wgpu_deltanet_chunked.c) against dn_recur token
# by token (tuning dnChunkMin=1000000): the same greedy ids, where the GPU
# time goes, prefill tok/s by state-pass columns, and the prompt length
# from which chunks pay (for dnChunkMin's default in src/backend/tuning.c).
dnchunk() {
  local prompt=$OUT/dnchunk-prompt.txt off=dnChunkMin=1000000 ids t
  seq 1 400 | tr '\n' ' ' > "$prompt" # over a thousand tokens (digits are tokens of their own)
  for m in ${MODELS:-qwen08}; do
    local a; a=$(model_dir "$m"); [ -d "$a" ] || { echo "$m: no artifact"; continue; }
    say "$m: greedy ids of a long prompt"
    for t in chunked $off cpu; do
      case $t in
        chunked) ids=$($W run -m "$a" -f "$prompt" -n 32 --temp 0 --ids --ignore-eos --backend webgpu 2>&1 >/dev/null) ;;
        cpu) ids=$($W run -m "$a" -f "$prompt" -n 32 --temp 0 --ids --ignore-eos --backend cpu -t 16 2>&1 >/dev/null) ;;
        *) ids=$($W run -m "$a" -f "$prompt" -n 32 --temp 0 --ids --ignore-eos --backend webgpu --tuning "$t" 2>&1 >/dev/null) ;;
      esac
      if echo "$ids" | grep -q "generated ids"; then
        echo "$ids" | grep "generated ids" | sed "s/^/$t: /" >> "$OUT/dnchunk-$m-ids.txt"
      else
        echo "$t: no ids: $(echo "$ids" | tail -1)" | tee -a "$OUT/dnchunk-$m-ids.txt"
      fi
    done
    cut -c1-160 "$OUT/dnchunk-$m-ids.txt"
    if [ "$(grep -c "generated ids" "$OUT/dnchunk-$m-ids.txt")" = 3 ] &&
       [ "$(sed 's/^[^:]*: //' "$OUT/dnchunk-$m-ids.txt" | sort -u | wc -l)" = 1 ]; then
      echo "$m: identical greedy ids"
    else
      echo "$m: DIFFER"
    fi
    say "$m: GPU time of a 1,024-token prefill"
    for t in dnChunkMin=16 $off; do
      WISP_WEBGPU_PROFILE=1 $W bench -m "$a" --backend webgpu --prompt 1024 --decode 4 --tuning "$t" -o /tmp/p.json 2>&1 |
        grep -v XDG > "$OUT/profile-$m-prefill1024-$t.txt"
      echo "-- $t"; head -16 "$OUT/profile-$m-prefill1024-$t.txt"
    done
    say "$m: prefill"
    for p in ${PREFILLS:-512 1024}; do
      for t in dnChunkCols=8 dnChunkCols=16 dnChunkCols=32 $off; do
        bench "dnchunk-$m-prefill$p-$t" -m "$a" --backend webgpu --prompt "$p" --decode 4 --tuning "$t"
      done
    done
    say "$m: dnChunkMin crossover"
    for p in 4 8 16 32; do
      for t in dnChunkMin=1 $off; do
        bench "dnchunk-$m-prefill$p-$t" -m "$a" --backend webgpu --prompt "$p" --decode 4 --tuning "$t"
      done
    done
  done
}

# wisp tune against the default in one run: the same binary, the same
# weights, the untuned artifact and its tuned copy alternated.
tune() {
  local args
  for m in ${MODELS:-seed qwen08}; do
    local a; a=$(model_dir "$m"); [ -d "$a" ] || { echo "$m: no artifact"; continue; }
    local t=/tmp/wt-tuned-$m
    rm -rf "$t" && cp -r "$a" "$t"
    say "tune $m"
    # shellcheck disable=SC2086
    $W tune -m "$t" --budget "${TUNE_BUDGET:-600}" -o "$OUT/tune-$m" ${TUNE_ARGS:-} 2>"$OUT/tune-$m.log" | tee "$OUT/tune-$m.txt"
    $W plan -m "$t" --backend webgpu 2>&1 | grep -A12 '^tuning' > "$OUT/plan-tuned-$m.txt"
    cat "$OUT/plan-tuned-$m.txt"
    warm_up "$W" "$a"
    for w in ${WORKLOADS:-batch1 default opbyop prefill1024}; do
      case $w in
        batch1) args="--prompt 128 --decode 256 --batch 1 --profile exact" ;;
        default) args="--prompt 128 --decode 256" ;;
        # the op-by-op decode (as sampling runs it), where the tuned one-token geometry acts
        opbyop) args="--prompt 128 --decode 256 --tuning persist=0" ;;
        prefill1024) args="--prompt 1024 --decode 16" ;;
        *) echo "tune: unknown workload '$w' (batch1, default, opbyop, prefill1024)"; continue ;;
      esac
      for rep in $(seq "${REPS:-3}"); do
        local order="default tuned"; [ $((rep % 2)) = 0 ] && order="tuned default" # neither always first
        for v in $order; do
          local dir=$a; [ "$v" = tuned ] && dir=$t
          # shellcheck disable=SC2086
          printf '%-8s %-12s %-8s %s %s\n' "$m" "$w" "$v" "$rep" \
            "$($W bench -m "$dir" --backend webgpu $args -o "$OUT/tune-ab-$m-$w-$v-$rep.json" 2>/dev/null | head -1)" |
            tee -a "$OUT/tune-ab.txt"
        done
      done
    done
  done
  python3 - "$OUT" <<'PY' | tee "$OUT/tune.txt"
import glob, json, os, statistics, sys
out = sys.argv[1]
runs = {}
for f in glob.glob(os.path.join(out, "tune-ab-*.json")):
    m, w, v, rep = os.path.basename(f)[len("tune-ab-"):-len(".json")].rsplit("-", 3)
    r = json.load(open(f))
    tps = r["prefill"]["tok_per_s"] if w.startswith("prefill") else r["decode"]["tok_per_s"]
    runs.setdefault((m, w), {}).setdefault(v, []).append(tps)
slower = 0
for (m, w), v in sorted(runs.items()):
    d, t = v.get("default", []), v.get("tuned", [])
    if not d or not t: continue
    md, mt = statistics.median(d), statistics.median(t)
    # slower: below the default beyond the runs' own noise (the larger
    # spread of the two, at least 1 %)
    noise = (max(d) - min(d)) / md / 2 if len(d) > 1 else 0
    tnoise = (max(t) - min(t)) / mt / 2 if len(t) > 1 else 0
    bad = mt < md * (1 - max(noise, tnoise, 0.01))
    slower += bad
    print(f"{m:8} {w:12} default {md:10.1f} tok/s  tuned {mt:10.1f} tok/s  {mt / md:5.2f}x  (spreads {100 * noise:.1f}% / {100 * tnoise:.1f}%){'  SLOWER' if bad else ''}")
print("tuned never slower than the default beyond the spread" if not slower else f"tuned slower in {slower} workloads")
PY
}

# The prefill tile sweep (matmul= / matmulTile= / matmulI8=) against the
# defaults and against .dev/wisp_prev: one line of tok/s per run in tiles.txt.
tiles() {
  local ex=${EXACT_TUNINGS:-prev none matmul=64x32 matmul=64x64,matmulTile=4x4 matmul=128x64,matmulTile=4x8 matmul=128x64,matmulTile=8x4 matmul=64x64,matmulTile=8x8 matmul=128x128,matmulTile=8x8}
  local i8=${I8_TUNINGS:-prev none matmulI8=64x64x4x4x2 matmulI8=128x64x8x4x2 matmulI8=128x32x4x4x2}
  for m in ${MODELS:-seed qwen08}; do
    local a; a=$(model_dir "$m"); [ -d "$a" ] || { echo "$m: no artifact"; continue; }
    for rep in $(seq "${REPS:-1}"); do
      for p in ${PROMPTS:-128 1024}; do
        for prof in exact throughput; do
          local list=$ex; [ $prof = throughput ] && list=$i8
          for t in $list; do
            local bin=$W tune=(); [ "$t" = prev ] && bin=.dev/wisp_prev
            [ "$t" = prev ] || [ "$t" = none ] || tune=(--tuning "$t")
            [ -x "$bin" ] || continue
            local pf=$prof; [ "$t" = prev ] && [ $prof = exact ] && pf=${PREV_EXACT:-exact}
            printf '%-7s %-5s %-10s %-32s %s\n' "$m" "$p" "$prof" "$t" \
              "$("$bin" bench -m "$a" --backend webgpu --prompt "$p" --decode 4 --profile "$pf" "${tune[@]}" \
                 -o "$OUT/tile-$m-$p-$prof-${t//[^A-Za-z0-9]/_}-$rep.json" --force 2>>"$OUT/tile.err" | head -1 ||
                 tail -1 "$OUT/tile.err")" | tee -a "$OUT/tiles.txt"
          done
        done
      done
    done
  done
}

probe() {
  timeout "${PROBE_SECONDS:-150}" .dev/phase_probe "${PROBE_WG:-132}" "${PROBE_ROUNDS:-2000}" 2>&1 | tee "$OUT/phase-probe.txt"
}

# S sequences a step, multi-row products against row by row, per model
rows() {
  for m in ${MODELS:-seed qwen08}; do
    local a; a=$(model_dir "$m"); [ -d "$a" ] || { echo "$m: no artifact"; continue; }
    for S in ${SEQS:-2 4 8 16 32}; do
      for t in ${TUNINGS:-rowsShared=1 rowsShared=0}; do
        printf '%-8s S %-3s %-13s ' "$m" "$S" "$t"
        .dev/seq_probe -m "$a" --backend webgpu -S "$S" -n "${STEPS:-64}" -a "${ALONE:-2}" --tuning "$t" 2>&1 | tail -1 |
          tee -a "$OUT/rows-$m.jsonl"
      done
    done
  done
  WISP_BIN=$W WISP_REQUIRE_WEBGPU=1 .dev/wisp_tests webgpu_rows_ 2>&1 | tail -4
  WISP_BIN=$W WISP_REQUIRE_WEBGPU=1 .dev/wisp_tests sequences 2>&1 | tail -8
}

# the prefill products against the peaks (docs/webgpu.md, "Products")
products() {
  local args=() sh tk
  for sh in ${SHAPES:-2048x1024 7168x1024 1024x3584}; do args+=(--shape "$sh"); done
  for tk in ${TOKENS:-512 2048}; do args+=(--tokens "$tk"); done
  local t first=1
  echo '[' >"$OUT/products.json"
  for t in ${TUNINGS:-none matmul=64x32}; do
    local tune=(); [ "$t" = none ] || tune=(--tuning "$t")
    say "products $t"
    [ $first = 1 ] || echo ',' >>"$OUT/products.json"
    first=0
    .dev/prod_probe --reps "${REPS:-5}" "${args[@]}" "${tune[@]}" 2>"$OUT/products-$t.log" | tee -a "$OUT/products.json"
  done
  echo ']' >>"$OUT/products.json"
  WISP_BIN=$W WISP_REQUIRE_WEBGPU=1 .dev/wisp_tests webgpu_matmul_ 2>&1 | tail -6
}

# A Q4_K_M GGUF made by llama.cpp, run in place: memory at open and speed,
# BINS side by side (the header's `mixed`).
mixed() {
  local cfg=${CONFIG:-qwen25-0.5b} lc=${LC:-/tmp/llama.cpp-cpu} d args build
  case $cfg in
    qwen25-*) build="tools/gemma-qwen2-oracle.py build --arch qwen2 --shape real" ;;
    gemma3-*) build="tools/gemma-qwen2-oracle.py build --arch gemma3 --shape real" ;;
    *) build="tests/parity/hf_reference.py build --config $cfg --seed 1234" ;; # qwen35-0.8b, lfm2-350m: K-quant widths
  esac
  d=/tmp/wq/$cfg-mixed
  if [ ! -f "$d/q4km.gguf" ]; then
    mkdir -p "$d"
    if [ ! -x "$lc/build/bin/llama-quantize" ]; then
      [ -f .peer/build.sh ] || { echo "no .peer/build.sh: carry .peer (tools/make-quant-fixtures.sh says how)"; return 1; }
      say "building llama.cpp (cpu) in $lc"
      bash .peer/build.sh cpu "$lc" > "$d/llama-build.log" 2>&1 || { tail -5 "$d/llama-build.log"; return 1; }
    fi
    say "$cfg: build, convert, export, llama-quantize Q4_K_M"
    # shellcheck disable=SC2086
    python3 $build --out "$d/hf" > "$d/build.log" 2>&1 &&
      "$W" convert "$d/hf" -o "$d/art_f32" --quant f32 --quiet &&
      "$W" export-gguf "$d/art_f32" -o "$d/f32.gguf" > /dev/null 2>&1 &&
      "$lc/build/bin/llama-quantize" "$d/f32.gguf" "$d/q4km.gguf" Q4_K_M > "$d/quantize.log" 2>&1 ||
      { echo "FAILED: build/convert/export/quantize"; tail -5 "$d/build.log" "$d/quantize.log"; return 1; }
    grep -iE "type +(q|f|bf)[0-9a-z_]+: +[0-9]+ tensors" "$d/quantize.log" | tee "$OUT/mixed-types.txt"
  fi
  for b in ${BINS:-wisp_prev wisp}; do
    [ -x ".dev/$b" ] || { echo "no .dev/$b"; continue; }
    ".dev/$b" plan -m "$d/q4km.gguf" --backend webgpu > "$OUT/mixed-plan-$b.txt" 2>&1
    printf '%-10s open: %s\n' "$b" "$(".dev/$b" verify "$d/q4km.gguf" 2>&1 | grep -o '[0-9.]* MB mapped, [0-9.]* MB built')" |
      tee -a "$OUT/mixed.txt"
    printf '%-10s peak RSS of a CPU decode (KiB): %s\n' "$b" "$(python3 -c 'import resource, subprocess, sys
subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)' ".dev/$b" run -m "$d/q4km.gguf" -p Hello -n 32 --temp 0 \
      --ignore-eos --backend cpu -t 16)" | tee -a "$OUT/mixed.txt"
  done
  for w in decode prefill1024 cpu; do
    case $w in
      decode) args="--backend webgpu --prompt 128 --decode 256 --profile exact" ;;
      prefill1024) args="--backend webgpu --prompt 1024 --decode 16 --profile exact" ;;
      cpu) args="--backend cpu --prompt 128 --decode 64 --profile throughput -t 16" ;;
    esac
    for rep in $(seq "${REPS:-2}"); do
      for b in ${BINS:-wisp_prev wisp}; do
        [ -x ".dev/$b" ] || continue
        # shellcheck disable=SC2086
        printf '%-12s %-10s %s %s\n' "$w" "$b" "$rep" \
          "$(".dev/$b" bench -m "$d/q4km.gguf" $args -o "$OUT/mixed-$w-$b-$rep.json" 2>/dev/null | head -1)" |
          tee -a "$OUT/mixed.txt"
      done
    done
  done
}

# the serving scheduler: C streams, then a multi-turn chat, per model
sched() {
  for m in ${MODELS:-seed qwen08}; do
    local a; a=$(model_dir "$m"); [ -d "$a" ] || { echo "$m: no artifact"; continue; }
    for C in ${CONCS:-1 8 32 64}; do
      printf '%-8s C %-3s ' "$m" "$C"
      .dev/sched_probe -m "$a" --backend webgpu -C "$C" -P 128 -D 128 2>&1 | tail -1 | tee -a "$OUT/sched-$m.jsonl"
    done
    .dev/sched_probe -m "$a" --backend webgpu --turns 6 -P 128 -D 128 2>&1 | tee -a "$OUT/sched-$m-turns.jsonl"
  done
  WISP_BIN=$W WISP_REQUIRE_WEBGPU=1 .dev/wisp_tests sched_ 2>&1 | tail -4
}

# expected.json against transformers' render_jinja_template (docs/chat-templates.md)
templates() {
  python3 -c 'import transformers; print("transformers", transformers.__version__)' | tee "$OUT/templates.txt"
  python3 tools/chat-template-oracle.py --transformers 2>&1 | tee -a "$OUT/templates.txt"
}

# Sourced with WISP_DEVICE_LIB=1 (bench/serve-h200.sh does), this file only
# defines the functions above.
[ -n "${WISP_DEVICE_LIB:-}" ] && return 0
case $cmd in
  bundle) bundle ;;
  check|receipts|parity|ab|profile|dnchunk|probe|rows|sched|templates|products|tune|tiles|mixed)
    OUT=${1:-/tmp/device-$cmd}
    mkdir -p "$OUT" models
    setup_env
    say "$cmd"
    "$cmd"
    tar czf "$OUT.tgz" -C "$(dirname "$OUT")" "$(basename "$OUT")"
    # the machine returns 8 files at most: the .tgz alone, not the files in it
    rm -rf "$OUT"
    say "done: $OUT.tgz" ;;
  *)
    sed -n '2,/^set -uo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'
    [ -z "$cmd" ] || [ "$cmd" = help ] || exit 2 ;;
esac
