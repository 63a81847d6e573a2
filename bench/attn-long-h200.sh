#!/usr/bin/env bash
# Long-context attention on one H200 against llama.cpp CUDA (-fa 1), in one
# device call, on the same weights: decode at depth 0, 2,048, 8,192 and
# 32,768 and prefill of 512, 1,024 and 4,096 tokens (issue 30 item 4).
#
# Here, once (the carry must stay under 64 MiB: SLIM bundles wisp alone):
#   SLIM=1 tools/device.sh bundle && make build/seq_probe && cp build/seq_probe .dev/ && strip .dev/seq_probe
#   (cd .dev && tar cJf lib.txz lib && rm -rf lib)   # the carry's 64 MiB
#   mkdir -p .peer && cp ../shared/peers/llama.cpp/build.sh ../shared/peers/llama.cpp/llama.cpp-*-src.tar.xz .peer/
#   grep -qx /.peer/ .git/info/exclude || echo /.peer/ >> .git/info/exclude
# The call: command `bash bench/attn-long-h200.sh "$OUT"`, carry [".dev", ".gl",
# ".cache/webgpu", ".peer"], timeout_s 600. Back come $OUT/attn-long.tgz (every
# receipt, re-packed after each model) and $OUT/summary.txt.
#
# What it does, with a clock (BUDGET, default 560 s: no run starts past it):
#  1. starts llama.cpp's CUDA build detached (.peer/build.sh cuda, ~5.5 min;
#     kept in LC while the machine stays warm);
#  2. meanwhile, per model of MODELS (tools/device.sh's model_dir: seed, qwen08,
#     qwen2b), `wisp bench --backend webgpu` of each DEPTHS (-p DEPTH -n 64:
#     the decode runs at depth DEPTH) and each PREFILLS (-p N -n 4), then the
#     long depths again with the long split rule off (tuning
#     attnSplitsLong=1x1: the split count capped at attnSplits, as before it)
#     and from depth 2,048 with the persistent decode's attention in chunks
#     of 256 keys (tuning persistOpt=25: bits 1 + 8 + 16, every split wide), and
#     at every depth with the query heads of a KV head attended together
#     (persistOpt=41: bit 32, attn_group),
#     and each prefill again with attn_flash.wgsl instead of the default tiled
#     kernel (tuning attnPrefill=0), and exports the GGUF llama-bench reads (`wisp export-gguf --keep-quant`,
#     tools/gguf-none-vocab.py: the same quantized blocks);
#  3. once the build is there, `llama-bench -fa 1 -ngl 99 -n 64 -p 0 -d DEPTHS`
#     and `-n 0 -p PREFILLS` on each GGUF;
#  3b. with SEQS (default "8 32 64"; set and empty: none): S sequences a step,
#     `seq_probe -S S -n 64` (wisp's aggregate decode tok/s over S slots, 16-token
#     prompts, timed from the second step) against `llama-batched-bench -npp 16
#     -ntg 64 -npl SEQS` (S_TG, its decode tok/s over the S sequences);
#  4. summary.txt: tok/s of both and the ratio per workload (wisp's default
#     path; then decode with the long split rule off / prefill with attn_flash
#     instead of the default tiled kernel, and decode with the 256-key chunks
#     and with the grouped queries).
# seed stores rope tables of 2,560 positions (its context) and is refused
# past them; seedlong (the same shape from `gen-synthetic --context 40960`)
# and the Qwen 3.5 and LFM2-350M shapes (real configurations) take every depth.
# VARIANTS (default "nolong wide grouped"; set and empty: none) picks the
# extra decode runs of step 2 (attnSplitsLong=1x1, persistOpt=25, persistOpt=41;
# f16: kv=f16, llama.cpp's default K/V type, with its own ratio column).
# TUNED_DECODE / TUNED_PREFILL (tuning strings, e.g. a candidate default) run
# every decode / prefill again under them (the prefill's in place of its
# attn_flash run); their ratio to llama.cpp is the last column.
# PREPARE_ONLY=1 (with DEPTHS= PREFILLS= SEQS=) makes the models, their GGUFs and
# the build and stops: a second call on the warm machine then times both engines
# with no build beside them (16 cores compiling make wisp's decode noisy).
# Environment: OUT, BUDGET, MODELS (default "seedlong qwen08 qwen2b"), SEQS, VARIANTS, DEPTHS (set and empty: none; default
# "0 2048 8192 32768"), PREFILLS (default "512 1024 4096"), LC (default /tmp/lcc).
set -uo pipefail
cd "$(dirname "$0")/.."
BACK=${1:-${OUT:-/tmp/attn-long-h200}} # what comes back: the .tgz and summary.txt alone
OUT=/tmp/attn-long-work                 # every receipt, packed into BACK (the machine returns 8 files at most)
BUDGET=${BUDGET:-560}
MODELS=${MODELS:-seedlong qwen08 qwen2b}
DEPTHS=${DEPTHS-0 2048 8192 32768}
PREFILLS=${PREFILLS-512 1024 4096}
SEQS=${SEQS-8 32 64}
VARIANTS=" ${VARIANTS-nolong wide grouped} "
LC=${LC:-/tmp/lcc}
T0=$SECONDS
mkdir -p "$OUT" "$BACK" models
WISP_DEVICE_LIB=1 source tools/device.sh # setup_env, model_dir, W
setup_env
say() { echo "== $* ($((SECONDS - T0)) s)"; }
left() { [ $((SECONDS - T0)) -lt "$BUDGET" ]; }
pack() { tar czf "$BACK/attn-long.tgz" -C "$OUT" . 2>/dev/null; cp "$OUT/summary.txt" "$BACK/" 2>/dev/null; }

if [ ! -x "$LC/build/bin/llama-bench" ] && ! pgrep -f "build.sh cuda" > /dev/null; then
  say "llama.cpp cuda build (detached)"
  setsid nohup bash .peer/build.sh cuda "$LC" > "$OUT/llama-build.log" 2>&1 < /dev/null &
fi

# wisp: decode at each depth, prefill at each length, the long split rule off at the long depths
for m in $MODELS; do
  a=$(model_dir "$m"); [ -d "$a" ] || { echo "$m: no artifact"; continue; }
  for dep in $DEPTHS; do
    left || break
    p=$dep; [ "$p" -gt 0 ] || p=1
    say "$m wisp decode at depth $dep"
    $W bench -m "$a" --backend webgpu -p "$p" -n 64 -o "$OUT/wisp-$m-depth$dep.json" --force 2>&1 | tail -2
    if [[ $VARIANTS == *" nolong "* ]] && [ "$dep" -ge 8192 ] && left; then
      $W bench -m "$a" --backend webgpu -p "$p" -n 64 --tuning attnSplitsLong=1x1 \
        -o "$OUT/wisp-$m-depth$dep-nolong.json" --force 2>&1 | tail -2
    fi
    if [[ $VARIANTS == *" wide "* ]] && [ "$dep" -ge 2048 ] && left; then # the persistent decode's attention in 256-key chunks
      $W bench -m "$a" --backend webgpu -p "$p" -n 64 --tuning persistOpt=25 \
        -o "$OUT/wisp-$m-depth$dep-wide.json" --force 2>&1 | tail -2
    fi
    if [[ $VARIANTS == *" f16 "* ]] && left; then # f16 K/V, llama.cpp's default K/V type
      $W bench -m "$a" --backend webgpu -p "$p" -n 64 --tuning kv=f16 \
        -o "$OUT/wisp-$m-depth$dep-f16.json" --force 2>&1 | tail -2
    fi
    if [ -n "${TUNED_DECODE:-}" ] && left; then # a candidate default, its own column
      $W bench -m "$a" --backend webgpu -p "$p" -n 64 --tuning "$TUNED_DECODE" \
        -o "$OUT/wisp-$m-depth$dep-tuned.json" --force 2>&1 | tail -2
    fi
    if [[ $VARIANTS == *" grouped "* ]] && left; then # its query heads of a KV head together (short contexts too: it must not lose there)
      $W bench -m "$a" --backend webgpu -p "$p" -n 64 --tuning persistOpt=41 \
        -o "$OUT/wisp-$m-depth$dep-grouped.json" --force 2>&1 | tail -2
    fi
  done
  for n in $PREFILLS; do
    left || break
    say "$m wisp prefill $n (the default tiled attn_flash_tiled, then attn_flash)"
    $W bench -m "$a" --backend webgpu -p "$n" -n 4 -o "$OUT/wisp-$m-prefill$n.json" --force 2>&1 | tail -2
    if [ -n "${TUNED_PREFILL:-}" ]; then
      $W bench -m "$a" --backend webgpu -p "$n" -n 4 --tuning "$TUNED_PREFILL" \
        -o "$OUT/wisp-$m-prefill$n-tuned.json" --force 2>&1 | tail -2
    else
      $W bench -m "$a" --backend webgpu -p "$n" -n 4 --tuning attnPrefill=0 \
        -o "$OUT/wisp-$m-prefill$n-flash.json" --force 2>&1 | tail -2
    fi
  done
  for S in $SEQS; do
    left || break
    [ -x .dev/seq_probe ] || { echo "no .dev/seq_probe (see the header): no S-sequence runs"; break; }
    say "$m wisp $S sequences a step"
    .dev/seq_probe -m "$a" --backend webgpu -S "$S" -n 64 -a 1 2> /dev/null | tail -1 > "$OUT/wisp-$m-seqs$S.json"
    cat "$OUT/wisp-$m-seqs$S.json"
  done
  g=/tmp/attn-long-$m.gguf
  if [ ! -s "$g" ]; then
    $W export-gguf "$a" -o "$g" --keep-quant > /dev/null 2>&1 || echo "$m: export-gguf failed"
    if python3 tools/gguf-none-vocab.py "$g" "$g.nv" 2> /dev/null; then mv "$g.nv" "$g"; fi
  fi
  pack
done

# llama.cpp: wait for the build (within the budget), then the same workloads
while [ ! -x "$LC/build/bin/llama-bench" ] && left && pgrep -f "build.sh cuda" > /dev/null; do sleep 5; done
if [ -n "${PREPARE_ONLY:-}" ]; then # a first call: models, GGUFs and the build, no timing beside the build
  say "prepared: $MODELS; llama-bench $([ -x "$LC/build/bin/llama-bench" ] && echo built || echo 'not built')"
  pack
  exit 0
fi
if [ -x "$LC/build/bin/llama-bench" ]; then
  for m in $MODELS; do
    g=/tmp/attn-long-$m.gguf
    [ -s "$g" ] && left || continue
    say "$m llama-bench decode at depths"
    "$LC/build/bin/llama-bench" -m "$g" -fa 1 -ngl 99 -p 0 -n 64 -d "$(echo $DEPTHS | tr ' ' ,)" -r 2 -o json \
      > "$OUT/llama-$m-depths.json" 2> "$OUT/llama-$m-depths.log" || tail -3 "$OUT/llama-$m-depths.log"
    left || break
    say "$m llama-bench prefill"
    "$LC/build/bin/llama-bench" -m "$g" -fa 1 -ngl 99 -p "$(echo $PREFILLS | tr ' ' ,)" -n 0 -r 2 -o json \
      > "$OUT/llama-$m-prefill.json" 2> "$OUT/llama-$m-prefill.log" || tail -3 "$OUT/llama-$m-prefill.log"
    if [ -n "$SEQS" ] && left; then
      [ -x "$LC/build/bin/llama-batched-bench" ] || cmake --build "$LC/build" -j"$(nproc)" --target llama-batched-bench > /dev/null 2>&1
      say "$m llama-batched-bench $SEQS sequences"
      "$LC/build/bin/llama-batched-bench" -m "$g" -fa 1 -ngl 99 -c 8192 -b 2048 -ub 512 -npp 16 -ntg 64 \
        -npl "$(echo $SEQS | tr ' ' ,)" --output-format jsonl > "$OUT/llama-$m-seqs.jsonl" 2> "$OUT/llama-$m-seqs.log" ||
        tail -3 "$OUT/llama-$m-seqs.log"
    fi
    pack
  done
else
  say "llama.cpp not built in time: $(tail -2 "$OUT/llama-build.log" 2> /dev/null)"
fi

# summary: tok/s of both, ratio wisp / llama.cpp
OUT="$OUT" MODELS="$MODELS" DEPTHS="$DEPTHS" PREFILLS="$PREFILLS" SEQS="$SEQS" python3 - << 'PYEOF' | tee "$OUT/summary.txt"
import json, os
out = os.environ["OUT"]
def load(p):
    try:
        return json.load(open(os.path.join(out, p)))
    except Exception:
        return None
def llama(m, kind, key):
    rows = load("llama-%s-%s.json" % (m, kind)) or []
    for r in rows:
        if kind == "depths" and r.get("n_gen") and r.get("n_depth", 0) == key:
            return r.get("avg_ts")
        if kind == "prefill" and r.get("n_prompt") == key and not r.get("n_gen"):
            return r.get("avg_ts")
    return None
print("%-8s %-22s %12s %12s %12s %12s %12s %12s %7s %7s %7s" % ("model", "workload", "wisp", "nolong/flash", "wide", "grouped",
                                                 "f16 K/V", "llama.cpp", "ratio", "f16", "tuned"))
def tuned(m, kind, key, lt):
    t = load("wisp-%s-%s%d-tuned.json" % (m, kind, key))
    v = t and t["decode" if kind == "depth" else "prefill"]["tok_per_s"]
    return "%.2fx" % (v / lt) if v and lt else "-"

for m in os.environ["MODELS"].split():
    for d in map(int, os.environ["DEPTHS"].split()):
        w = load("wisp-%s-depth%d.json" % (m, d)); nl = load("wisp-%s-depth%d-nolong.json" % (m, d))
        wd = load("wisp-%s-depth%d-wide.json" % (m, d))
        wt = w and w["decode"]["tok_per_s"]; nt = nl and nl["decode"]["tok_per_s"]; lt = llama(m, "depths", d)
        dt = wd and wd["decode"]["tok_per_s"]
        gr = load("wisp-%s-depth%d-grouped.json" % (m, d)); gt = gr and gr["decode"]["tok_per_s"]
        hf = load("wisp-%s-depth%d-f16.json" % (m, d)); ht = hf and hf["decode"]["tok_per_s"]
        print("%-8s %-22s %12s %12s %12s %12s %12s %12s %7s %7s %7s" % (m, "decode at depth %d" % d, "%.0f" % wt if wt else "-",
              "%.0f" % nt if nt else "-", "%.0f" % dt if dt else "-", "%.0f" % gt if gt else "-",
              "%.0f" % ht if ht else "-", "%.0f" % lt if lt else "-", "%.2fx" % (wt / lt) if wt and lt else "-",
              "%.2fx" % (ht / lt) if ht and lt else "-", tuned(m, "depth", d, lt)))
    for n in map(int, os.environ["PREFILLS"].split()):
        w = load("wisp-%s-prefill%d.json" % (m, n)); ti = load("wisp-%s-prefill%d-flash.json" % (m, n))
        wt = w and w["prefill"]["tok_per_s"]; tt = ti and ti["prefill"]["tok_per_s"]; lt = llama(m, "prefill", n)
        print("%-8s %-22s %12s %12s %12s %12s %12s %12s %7s %7s %7s" % (m, "prefill %d" % n, "%.0f" % wt if wt else "-",
              "%.0f" % tt if tt else "-", "", "", "",
              "%.0f" % lt if lt else "-", "%.2fx" % (wt / lt) if wt and lt else "-", "-", tuned(m, "prefill", n, lt)))
    rows = []
    try:
        rows = [json.loads(l) for l in open(os.path.join(out, "llama-%s-seqs.jsonl" % m)) if l.startswith("{")]
    except Exception:
        pass
    for S in map(int, os.environ["SEQS"].split()):
        w = load("wisp-%s-seqs%d.json" % (m, S)); wt = w and w.get("tokens_per_s")
        lt = next((r["speed_tg"] for r in rows if r.get("pl") == S), None)
        print("%-8s %-22s %12s %12s %12s %12s %12s %12s %7s" % (m, "%d sequences a step" % S, "%.0f" % wt if wt else "-",
              "", "", "", "", "%.0f" % lt if lt else "-", "%.2fx" % (wt / lt) if wt and lt else "-"))
PYEOF
pack
say done
