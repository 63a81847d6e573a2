#!/usr/bin/env bash
# wisp's CPU backend against llama.cpp's CPU build on the same weights, back
# to back per cell, and one JSON receipt with both engines' numbers.
#
#   tools/bench-cpu-vs-llama.sh LLAMA_BIN_DIR [OUT.json]
#
# LLAMA_BIN_DIR holds llama-bench (a CPU build of llama.cpp). For each
# model (MODELS, default "seed qwen35-0.8b"):
#   seed         models/synthetic-seed (the seed manifest's shape, generated
#                with `wisp gen-synthetic` when missing), wisp q4
#   qwen35-0.8b  $QWEN_ART (default models/qwen35-0.8b-q4k), a wisp q4k
#                artifact; make it on a machine with torch + transformers:
#                  python3 tests/parity/hf_reference.py build --config qwen35-0.8b --seed 1234 --out /tmp/q08/hf
#                  build/wisp convert /tmp/q08/hf -o models/qwen35-0.8b-q4k --quant q4k
#                (missing: the model is reported as skipped in the receipt;
#                without torch, tools/make-qwen35-shape.py writes a checkpoint
#                of the same shape for speed runs)
# the artifact goes to GGUF through `wisp export-gguf --keep-quant`: every
# matrix in the kind and size wisp reads it (Q4 -> Q4_0, Q4Z embed/head ->
# Q4_1, Q4_K as is; the receipt's llama_quant lists the GGUF's tensor types,
# count and MiB); without a tokenizer tools/gguf-none-vocab.py marks it
# vocabulary-less for llama.cpp. Then for each thread count (THREADS,
# default "2") and each of REPS rounds (default 3): `wisp bench --backend cpu --profile
# throughput -t T --prompt P --decode D` and `llama-bench -p P -n D -t T`.
# P, D: PROMPT (128), DECODE (64). The receipt keeps every round and the
# medians and ratios (wisp / llama.cpp) per cell. Default OUT:
# bench/results/cpu-vs-llama-<host>-<date>.json. Environment: WISP
# (build/wisp), WORK (a cache for the GGUF files, default /tmp/wisp-vs-llama),
# WISP_PROFILE (throughput: the int8 products; "default" for the exact ones),
# WISP_TUNING (wisp's --tuning keys, e.g. prefillChunk=128; default none).
set -uo pipefail
if [ $# -lt 1 ]; then
  sed -n "2,28p" "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
LB=$(readlink -f "$1")
OUT=${2:-bench/results/cpu-vs-llama-$(hostname -s)-$(date -u +%Y%m%d-%H%M%S).json}
cd "$(dirname "$0")/.."
WISP=${WISP:-build/wisp}
WORK=${WORK:-/tmp/wisp-vs-llama}
MODELS=${MODELS:-seed qwen35-0.8b}
THREADS=${THREADS:-2}
REPS=${REPS:-3}
PROMPT=${PROMPT:-128}
DECODE=${DECODE:-64}
QWEN_ART=${QWEN_ART:-models/qwen35-0.8b-q4k}
WISP_PROFILE=${WISP_PROFILE:-throughput}
WISP_TUNING=${WISP_TUNING:-}
TUNING_ARGS=()
[ -n "$WISP_TUNING" ] && TUNING_ARGS=(--tuning "$WISP_TUNING")
for b in llama-bench; do
  [ -x "$LB/$b" ] || { echo "bench-cpu-vs-llama: $LB/$b is missing" >&2; exit 2; }
done
[ -x "$WISP" ] || { echo "bench-cpu-vs-llama: $WISP is missing (make first)" >&2; exit 2; }
mkdir -p "$WORK" "$(dirname "$OUT")" || exit 2
ROWS=$WORK/rows.jsonl
: > "$ROWS"

note() { echo "bench-cpu-vs-llama: $*" >&2; }

# model name -> artifact directory
model_of() {
  case $1 in
    seed)
      if [ ! -f models/synthetic-seed/manifest.json ]; then
        note "generating models/synthetic-seed"
        "$WISP" gen-synthetic --like assets/lfm2-hybrid-q4.manifest.json -o models/synthetic-seed --seed 1 >&2 || return 1
      fi
      echo "models/synthetic-seed" ;;
    qwen35-0.8b) echo "$QWEN_ART" ;;
    *) return 1 ;;
  esac
}

# "TYPE:count:MiB ..." of a GGUF file's tensors (what llama.cpp reads)
gguf_types() {
  python3 - "$1" <<'PYEOF'
import struct, sys, collections
f = open(sys.argv[1], "rb")
rd = lambda fmt: struct.unpack("<" + fmt, f.read(struct.calcsize("<" + fmt)))[0]
assert f.read(4) == b"GGUF"
rd("I"); nt, nkv = rd("Q"), rd("Q")
size = {0: 4, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
def skip(t):
    if t == 8: f.seek(rd("Q"), 1)
    elif t == 9:
        et, n = rd("I"), rd("Q")
        for _ in range(n): skip(et)
    else: f.seek(size[t], 1)
for _ in range(nkv):
    f.seek(rd("Q"), 1); skip(rd("I"))
names = {0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 8: "Q8_0", 12: "Q4_K", 14: "Q6_K", 30: "BF16"}
blk = {0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 8: (32, 34), 12: (256, 144), 14: (256, 210), 30: (1, 2)}
agg = collections.OrderedDict()
for _ in range(nt):
    f.seek(rd("Q"), 1); nd = rd("I"); n = 1
    for _ in range(nd): n *= rd("Q")
    t = rd("I"); rd("Q")
    c = agg.setdefault(names.get(t, str(t)), [0, 0]); c[0] += 1
    if t in blk: c[1] += n // blk[t][0] * blk[t][1]
print(" ".join("%s:%d:%.1f" % (k, v[0], v[1] / 2**20) for k, v in agg.items()))
PYEOF
}

for m in $MODELS; do
  art=$(model_of "$m") || { note "unknown model $m"; continue; }
  if [ ! -f "$art/manifest.json" ]; then
    note "$m: $art is missing, skipped"
    printf '{"model":"%s","skipped":"%s has no manifest.json"}\n' "$m" "$art" >> "$ROWS"
    continue
  fi
  # --keep-quant: every wisp matrix in its own kind (Q4 -> Q4_0, Q4Z -> Q4_1,
  # Q4_K as is; docs/gguf.md), so llama.cpp reads the weights wisp reads,
  # in the same bytes a token; no llama-quantize (it would requantize)
  q=$WORK/$m-keep.gguf
  if [ ! -s "$q" ] || [ "$art/manifest.json" -nt "$q" ]; then
    note "$m: export-gguf --keep-quant"
    rm -f "$q"
    "$WISP" export-gguf "$art" -o "$q" --keep-quant >&2 || { note "$m: export-gguf failed"; continue; }
    # an artifact without a tokenizer (the synthetic seed): llama.cpp needs tokenizer.ggml.model
    if python3 tools/gguf-none-vocab.py "$q" "$q.nv" 2> /dev/null; then mv "$q.nv" "$q"; fi
  fi
  quant="as exported (--keep-quant): $(gguf_types "$q")"
  note "$m: llama.cpp reads $quant"
  for t in $THREADS; do
    for r in $(seq 1 "$REPS"); do
      wr=$WORK/wisp-$m-$t-$r.json lr=$WORK/llama-$m-$t-$r.json
      note "$m threads $t round $r: wisp"
      "$WISP" bench -m "$art" --backend cpu --profile "$WISP_PROFILE" ${TUNING_ARGS[@]+"${TUNING_ARGS[@]}"} -t "$t" --prompt "$PROMPT" --decode "$DECODE" -o "$wr" --force \
        > "$WORK/wisp-$m-$t-$r.log" 2>&1 || { note "wisp bench failed: $(tail -1 "$WORK/wisp-$m-$t-$r.log")"; echo '{}' > "$wr"; }
      note "$m threads $t round $r: llama.cpp"
      "$LB/llama-bench" -m "$q" -p "$PROMPT" -n "$DECODE" -t "$t" -r 1 -o json > "$lr" 2> "$WORK/llama-$m-$t-$r.log" ||
        { note "llama-bench failed: $(tail -1 "$WORK/llama-$m-$t-$r.log")"; echo '[]' > "$lr"; }
      python3 - "$m" "$t" "$r" "$wr" "$lr" "$art" "$quant" >> "$ROWS" <<'EOF'
import json, sys
m, t, r, wr, lr, art, quant = sys.argv[1:]
def load(p, empty):
    try:
        return json.load(open(p))
    except Exception:
        return empty
w, l = load(wr, {}), load(lr, [])
row = {"model": m, "artifact": art, "llama_quant": quant, "threads": int(t), "round": int(r),
       "wisp": {"prefill_tok_s": w.get("prefill", {}).get("tok_per_s"), "decode_tok_s": w.get("decode", {}).get("tok_per_s"),
                "plan_id": w.get("plan_id"), "profile": w.get("profile"), "tuning": w.get("tuning"),
                "cpu": w.get("device", {}).get("name")},
       "llama": {}}
for e in l if isinstance(l, list) else []:
    if e.get("n_prompt", 0) > 0 and e.get("n_gen", 0) == 0: row["llama"]["prefill_tok_s"] = e.get("avg_ts")
    if e.get("n_gen", 0) > 0 and e.get("n_prompt", 0) == 0: row["llama"]["decode_tok_s"] = e.get("avg_ts")
    row["llama"].setdefault("build", e.get("build_commit"))
print(json.dumps(row))
EOF
    done
  done
done

python3 - "$ROWS" "$OUT" "$PROMPT" "$DECODE" "$WISP_PROFILE" <<'EOF'
import json, platform, statistics, subprocess, sys, time
rows_path, out, prompt, decode, profile = sys.argv[1:]
rows = [json.loads(x) for x in open(rows_path) if x.strip()]
cpu = "unknown"
try:
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip(); break
except OSError:
    pass
cells = {}
for r in rows:
    if "skipped" in r: continue
    cells.setdefault((r["model"], r["threads"]), []).append(r)
summary = []
def med(xs):
    xs = [x for x in xs if isinstance(x, (int, float))]
    return statistics.median(xs) if xs else None
for (m, t), rs in sorted(cells.items()):
    c = {"model": m, "threads": t, "rounds": len(rs)}
    for ph in ("prefill_tok_s", "decode_tok_s"):
        wv, lv = med([x["wisp"].get(ph) for x in rs]), med([x["llama"].get(ph) for x in rs])
        c["wisp_" + ph], c["llama_" + ph] = wv, lv
        c["ratio_" + ph.split("_")[0]] = (wv / lv) if wv and lv else None
    summary.append(c)
receipt = {"what": "wisp cpu backend vs llama.cpp cpu, same weights, back to back per round",
           "prompt_tokens": int(prompt), "decode_tokens": int(decode), "wisp_profile": profile,
           "host": platform.node(), "cpu": cpu, "nproc": len(__import__("os").sched_getaffinity(0)),
           "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "summary": summary, "rounds": rows}
json.dump(receipt, open(out, "w"), indent=1)
print("%-12s %7s %12s %12s %7s %12s %12s %7s" % ("model", "threads", "wisp pp", "llama pp", "ratio", "wisp tg", "llama tg", "ratio"))
f = lambda v, p=1: ("%.*f" % (p, v)) if isinstance(v, (int, float)) else "-"
for c in summary:
    print("%-12s %7d %12s %12s %7s %12s %12s %7s" % (c["model"], c["threads"], f(c["wisp_prefill_tok_s"]), f(c["llama_prefill_tok_s"]),
          f(c["ratio_prefill"], 2), f(c["wisp_decode_tok_s"]), f(c["llama_decode_tok_s"]), f(c["ratio_decode"], 2)))
for r in rows:
    if "skipped" in r: print("%s: skipped (%s)" % (r["model"], r["skipped"]))
print("receipt:", out)
EOF
