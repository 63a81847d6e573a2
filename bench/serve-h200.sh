#!/usr/bin/env bash
# wisp serve against llama-server on one H200, in one device call (under 10
# minutes), on the same weights: the serving benchmark of issue 28 item 6.
#
# Here, once (the carry must stay under 64 MiB: SLIM bundles wisp alone):
#   SLIM=1 tools/device.sh bundle
#   mkdir -p .peer && cp ../shared/peers/llama.cpp/build.sh ../shared/peers/llama.cpp/llama.cpp-*-src.tar.xz .peer/
#   grep -qx /.peer/ .git/info/exclude || echo /.peer/ >> .git/info/exclude
# The call: command `bash bench/serve-h200.sh "$OUT"`, carry [".dev", ".gl",
# ".cache/webgpu", ".peer"], timeout_s 600. Back come $OUT/serve-h200.tgz (every
# receipt and server log, re-packed after each run, so a cut-off call still
# returns what it measured), $OUT/summary.txt and $OUT/serve-h200-MODEL.svg.
#
# What it does, with a clock (BUDGET, default 555 s: no run starts past it):
#  1. starts llama.cpp's CUDA build detached (.peer/build.sh cuda, ~5.5 min),
#     on all cores but the first WISP_CORES (4; 0: no pinning) when taskset is
#     there (the build then takes ~7 min instead of ~5.5);
#  2. meanwhile makes the models (tools/device.sh's model_dir) and exports each
#     artifact as GGUF with `wisp export-gguf --keep-quant`, the file llama-server
#     reads: seed shape (Q4 -> Q4_0) and Qwen 3.5 0.8B (Q4_K), random weights and
#     no vocabulary, so their load sends token-id prompts (tools/gguf-none-vocab.py
#     --spm gives the GGUF placeholder pieces of the model's size: llama-server
#     aborts on a file whose vocabulary type is none); and models/default (real tokenizer and chat template) for the
#     multi-turn chat load. wisp serves the artifact the GGUF was exported
#     from (the same quantized blocks; WISP_WEIGHTS=gguf hands it the GGUF,
#     which `wisp serve` imports first);
#  3. runs wisp's side while the build runs, pinned to the first WISP_CORES
#     cores (the build has the others), then llama-server's once it is built;
#     each server: a warm-up, then C in CS (1 8 32 64) streaming /v1/completions
#     clients, P=128 token ids, D=128 tokens with ignore_eos, N = 4C, 2C or C
#     requests (C = 1, 8, >= 32); the multi-turn load MT (8x5: 8 conversations
#     of 5 turns, 32-token user turns, 32-token replies) on the default model
#     (servers at 8 slots: WISP_SERVE_ARGS_CHAT, LLAMA_ARGS_CHAT);
#     and `wisp bench` decode of each model (the C = 1 target compares with it);
#  4. each server runs in its own process group and is stopped (TERM, then
#     KILL) after its runs, on a failed start, and on exit.
# Environment: OUT, BUDGET, CS, MT, WISP_CORES, WISP_WEIGHTS (artifact or gguf), SERVE_CLIENT (node, the default
# where node is installed, or python: bench/serve_bench.py), WISP_SERVE_ARGS (default
# "--backend webgpu --parallel 64 -c 512 --prefill-chunk $WISP_PREFILL": wisp's -c is per sequence), WISP_PREFILL
# (2048), LLAMA_ARGS (default "--parallel 64
# -c 32768 -fa on -ngl 99"), MODELS (default "seed qwen08"), LC (the llama.cpp
# build folder, default /tmp/lcc: kept while the machine stays warm).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-${OUT:-/tmp/serve-h200}}
BUDGET=${BUDGET:-555}
CS=${CS:-1 8 32 64}
MT=${MT:-8x5}
WISP_CORES=${WISP_CORES:-4}
# wisp's -c is tokens per sequence; llama-server's is shared by its slots (32768 / 64 = 512)
# WISP_PREFILL: prompt tokens a scheduler step, the waiting prompts in one batched prefill (64 prompts of
# 128 tokens arriving together: 4 steps at 2048, 16 at 512, the scheduler's own default)
WISP_PREFILL=${WISP_PREFILL:-2048}
WISP_SERVE_ARGS=${WISP_SERVE_ARGS:---backend webgpu --parallel 64 -c 512 --prefill-chunk $WISP_PREFILL}
LLAMA_ARGS=${LLAMA_ARGS:---parallel 64 -c 32768 -fa on -ngl 99}
MODELS=${MODELS:-seed qwen08}
LC=${LC:-/tmp/lcc}
# the multi-turn load's model (the default model: 512 tokens of context) gets its own
WISP_SERVE_ARGS_CHAT=${WISP_SERVE_ARGS_CHAT:---backend webgpu --parallel 8 -c 512}
LLAMA_ARGS_CHAT=${LLAMA_ARGS_CHAT:---parallel 8 -c 4096 -fa on -ngl 99}
WORK=/tmp/serve-h200
PIN=()
T0=$SECONDS
mkdir -p "$OUT" "$WORK" models
# a warm machine keeps /tmp: the GGUFs are reused, an earlier call's receipts are not
rm -f "$WORK"/*.json "$WORK"/*.txt "$WORK"/wisp-*.log "$WORK"/client.log "$WORK"/models.log
for m in $MODELS default; do rm -f "$WORK/llama-$m.log"; done
left() { echo $((BUDGET - (SECONDS - T0))); }
note() { echo "[$((SECONDS - T0)) s] $*" | tee -a "$WORK/summary.txt"; }
pack() {
  tar czf "$OUT/serve-h200.tgz.tmp" --exclude='*.gguf' --exclude='*.gguf.tmp' -C /tmp serve-h200 2>/dev/null && mv "$OUT/serve-h200.tgz.tmp" "$OUT/serve-h200.tgz"
  cp "$WORK/summary.txt" "$OUT/summary.txt" 2>/dev/null
}

# tools/device.sh's set-up (Vulkan loader, carried libraries, NVIDIA ICD,
# Dawn) and model_dir, without its subcommands
set --
WISP_DEVICE_LIB=1 . tools/device.sh
W=$PWD/.dev/wisp

# 1. llama.cpp, detached, off wisp's cores
NCPU=$(nproc)
PIN_BUILD=() PIN_WISP=()
if [ "$WISP_CORES" -gt 0 ] && command -v taskset >/dev/null && [ "$NCPU" -gt $((WISP_CORES + 2)) ]; then
  PIN_BUILD=(taskset -c "$WISP_CORES-$((NCPU - 1))")
  PIN_WISP=(taskset -c "0-$((WISP_CORES - 1))")
fi
if [ ! -x "$LC/build/bin/llama-server" ] && ! pgrep -f "build.sh cuda $LC" > /dev/null; then
  if [ -f .peer/build.sh ]; then
    (setsid nohup "${PIN_BUILD[@]}" bash .peer/build.sh cuda "$LC" > "$WORK/llama-build.log" 2>&1 < /dev/null &)
  else
    echo "no .peer/build.sh: copy ../shared/peers/llama.cpp there and carry .peer" > "$WORK/llama-build.log"
  fi
fi
: > "$WORK/summary.txt"
setup_env > "$WORK/setup.txt" 2>&1
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; lscpu | head -20; } >> "$WORK/setup.txt" 2>&1
note "setup: $(head -1 "$WORK/setup.txt"); llama.cpp build started: $([ -x "$LC/build/bin/llama-server" ] && echo 'no, already built' || echo yes)"
if command -v node > /dev/null && [ "${SERVE_CLIENT:-node}" = node ]; then CLIENT=(node bench/serve-bench.mjs); else CLIENT=(python3 bench/serve_bench.py); fi
note "client: ${CLIENT[*]}"

# 2. models: name -> artifact and GGUF
declare -A ART GGUF
for m in $MODELS default; do
  a=$(model_dir "$m")
  [ -f "$a/manifest.json" ] || { note "$m: no artifact (model_dir failed)"; continue; }
  g=$WORK/$m.gguf
  if [ ! -f "$g" ]; then
    "$W" export-gguf "$a" -o "$g.tmp" --keep-quant --force > /dev/null 2>> "$WORK/models.log" || { note "$m: export-gguf failed"; continue; }
    if [ -f "$a/tokenizer.json" ]; then mv "$g.tmp" "$g"
    else python3 tools/gguf-none-vocab.py --spm "$g.tmp" "$g" 2>> "$WORK/models.log" && rm -f "$g.tmp" || { note "$m: gguf-none-vocab failed"; continue; }; fi
  fi
  ART[$m]=$a GGUF[$m]=$g
  note "$m: artifact $a, GGUF $(du -m "$g" | cut -f1) MiB"
done
pack
rm -f "$WORK"/*.gguf.tmp
WISP_TAKES_GGUF=0
[ "${WISP_WEIGHTS:-artifact}" = gguf ] && WISP_TAKES_GGUF=1

# 3. servers and loads
SERVER_PID=""
stop_server() {
  [ -n "$SERVER_PID" ] || return 0
  kill -TERM -- "-$SERVER_PID" 2> /dev/null
  for _ in $(seq 1 50); do kill -0 "$SERVER_PID" 2> /dev/null || break; sleep 0.2; done
  kill -KILL -- "-$SERVER_PID" 2> /dev/null
  wait "$SERVER_PID" 2> /dev/null
  SERVER_PID=""
}
trap 'stop_server; pack' EXIT

# start_server LOG PORT CMD...: 0 once GET /health answers 200 (within 180 s)
start_server() {
  local log=$1 port=$2; shift 2
  setsid "$@" > "$WORK/$log" 2>&1 < /dev/null &
  SERVER_PID=$!
  local t=$SECONDS
  while [ $((SECONDS - t)) -lt 180 ] && [ "$(left)" -gt 10 ]; do
    kill -0 "$SERVER_PID" 2> /dev/null || { note "$log: the server exited: $(tail -2 "$WORK/$log" | tr '\n' ' ')"; SERVER_PID=""; return 1; }
    python3 -c "import urllib.request,sys; sys.exit(urllib.request.urlopen('http://127.0.0.1:$port/health', timeout=2).status != 200)" 2> /dev/null &&
      { note "$log: ready in $((SECONDS - t)) s"; return 0; }
    sleep 1
  done
  note "$log: not healthy in time; stopping it"
  stop_server
  return 1
}

# bench_client NAME ARGS...: one receipt $WORK/NAME.json, bounded by the budget
bench_client() {
  local name=$1; shift
  local budget; budget=$(left)
  [ "$budget" -gt 15 ] || { note "$name: skipped, budget spent"; return 1; }
  [ "$budget" -gt 240 ] && budget=240
  timeout -k 5 "$budget" "${PIN[@]}" "${CLIENT[@]}" "$@" -o "$WORK/$name.json" 2>> "$WORK/client.log"
  if [ -f "$WORK/$name.json" ]; then
    note "$name: $(python3 -c "import json,sys; r=json.load(open(sys.argv[1]))['results']; print(r['requests'], r['aggregate_output_tok_s'], 'tok/s, TTFT p95', r['ttft_ms']['p95'], 'ms, TPOT p50', r['tpot_ms']['p50'], 'ms')" "$WORK/$name.json")"
  else note "$name: no receipt (timed out or failed: $(tail -1 "$WORK/client.log"))"; fi
  pack
}

# loads SERVER MODEL PORT: the C sweep (or the multi-turn load on `default`)
loads() {
  local server=$1 m=$2 port=$3 url=http://127.0.0.1:$3
  if [ "$m" = default ]; then
    bench_client "multiturn-$server-default" --url "$url" --multi-turn "$MT" --turn-tokens 32 -D 32 --label "$server default (chat)"
    return
  fi
  bench_client "warmup-$server-$m" --url "$url" -c 8 -n 8 -P 128 -D 16 --prompt-mode ids --label warmup > /dev/null
  local c n
  for c in $CS; do
    n=$c; [ "$c" -lt 32 ] && n=$((2 * c)); [ "$c" -lt 8 ] && n=$((4 * c))
    bench_client "$m-$server-c$c" --url "$url" -c "$c" -n "$n" -P 128 -D 128 --prompt-mode ids --label "$server $m" || break
  done
}

wisp_side() {
  PIN=("${PIN_WISP[@]}")
  local m model args
  for m in $MODELS default; do
    [ -n "${ART[$m]:-}" ] || continue
    [ "$(left)" -gt 30 ] || { note "wisp $m: skipped, budget spent"; continue; }
    model=${ART[$m]}; [ "$WISP_TAKES_GGUF" = 1 ] && model=${GGUF[$m]}
    args=$WISP_SERVE_ARGS; [ "$m" = default ] && args=$WISP_SERVE_ARGS_CHAT
    # shellcheck disable=SC2086
    if start_server "wisp-$m.log" 8090 "${PIN[@]}" "$W" serve -m "$model" --host 127.0.0.1 --port 8090 $args; then
      loads wisp "$m" 8090
    fi
    stop_server
    if [ "$m" != default ] && [ "$(left)" -gt 40 ]; then
      # the plan's decode loop, as `wisp bench` reports it: the server's C = 1 runs the same loop (run-ahead)
      timeout 60 "${PIN[@]}" "$W" bench -m "${ART[$m]}" --backend webgpu --prompt 128 --decode 128 -o "$WORK/wisp-bench-$m.json" > /dev/null 2>&1 &&
        note "wisp bench $m decode: $(python3 -c "import json,sys; print(round(json.load(open(sys.argv[1]))['decode']['tok_per_s'], 1))" "$WORK/wisp-bench-$m.json") tok/s" ||
        note "wisp bench $m: failed or timed out"
    fi
  done
}

llama_side() {
  PIN=()
  local m bos args
  for m in $MODELS default; do
    [ -n "${GGUF[$m]:-}" ] || continue
    [ "$(left)" -gt 30 ] || { note "llama-server $m: skipped, budget spent"; continue; }
    bos=(); [ -f "${ART[$m]}/tokenizer.json" ] || bos=(--override-kv tokenizer.ggml.add_bos_token=bool:false)
    args=$LLAMA_ARGS; [ "$m" = default ] && args="$LLAMA_ARGS_CHAT --jinja" # the GGUF's chat template
    # shellcheck disable=SC2086
    if start_server "llama-$m.log" 8091 "$LC/build/bin/llama-server" -m "${GGUF[$m]}" --host 127.0.0.1 --port 8091 $args "${bos[@]}"; then
      loads llama-server "$m" 8091
    fi
    stop_server
  done
}

note "wisp side (pinned: ${PIN_WISP[*]:-no}); serve takes GGUF: $WISP_TAKES_GGUF"
wisp_side
note "waiting for llama.cpp's build"
while [ ! -x "$LC/build/bin/llama-server" ] && [ "$(left)" -gt 60 ]; do
  pgrep -f "build.sh cuda" > /dev/null || break
  sleep 3
done
if [ -x "$LC/build/bin/llama-server" ]; then
  note "llama.cpp built; llama-server side"
  llama_side
else
  note "llama-server missing: $(tail -3 "$WORK/llama-build.log" | tr '\n' ' ')"
fi
for m in $MODELS; do
  ls "$WORK/$m"-*-c*.json > /dev/null 2>&1 &&
    python3 bench/plot-serve.py --title "$m: wisp serve vs llama-server, one H200, same weights (P=128, D=128)" \
      "$OUT/serve-h200-$m.svg" "$WORK/$m"-*-c*.json >> "$WORK/summary.txt" 2>&1
done
note "done"
