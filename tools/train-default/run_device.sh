#!/usr/bin/env bash
# The default model's whole recipe on the GPU machine, in under 9 minutes:
#
#   tools/train-default/run_device.sh OUT_DIR
#
# Needs (carried from the build machine): .train/ (prepare_corpus.sh output)
# and .dev/wisp + .dev/lib (the wisp binary). Python: torch (CUDA),
# transformers 5.x, tokenizers, numpy.
#   1. train_tokenizer.py          -> WORK/tok
#   2. train.py train (TRAIN_SECONDS, default 275) -> WORK/hf (f32 safetensors + tokenizer), OUT/loss.csv
#   3. wisp convert --quant q4 / f32 -> WORK/art_q4, WORK/art_f32
#   4. hf_reference.py reference: GREEDY (128) greedy ids from PROMPT, torch f32
#      (HF weights) and torch with the weights dequantized from art_q4 (on CPU)
#   5. train.py eval: held-out (and held-out sample) loss, f32 and dequantized q4
#      (the windows of `wisp perplexity`, see train.py)
#   6. wisp perplexity / wisp run on the artifacts (a cross-check only)
#   7. OUT: results.json, expected.json (-> models/default/expected.json),
#      default-q4.tar.gz (-> models/default/), hf.tar.gz (if < 16 MB),
#      loss.csv, heldout-sample.txt, logs.tar.gz
set -uo pipefail
OUT=${1:?usage: run_device.sh OUT_DIR}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT" || exit 2
mkdir -p "$OUT" || exit 2
OUT=$(cd "$OUT" && pwd)
DATA=${DATA:-$ROOT/.train}
WORK=${WORK:-$(mktemp -d /tmp/wisp-default.XXXXXX)}
PY=${PYTHON:-python3}
WISP=${WISP:-$ROOT/.dev/wisp}
export LD_LIBRARY_PATH="$ROOT/.dev/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
TRAIN_SECONDS=${TRAIN_SECONDS:-275}
GREEDY=${GREEDY:-128}
PROMPT=${PROMPT:-"And it came to pass"}
HERE=$ROOT/tools/train-default
LOG=$OUT/device.log
mkdir -p "$WORK/logs"
exec > >(tee -a "$LOG") 2>&1
T0=$(date +%s)
step() { echo "== $(( $(date +%s) - T0 )) s: $*"; }
die() { echo "run_device.sh: $*"; finish; exit 1; }
finish() {
  cp -f "$DATA/heldout-sample.txt" "$OUT/" 2>/dev/null
  [ -d "$WORK/art_q4" ] && tar -C "$WORK" -czf "$OUT/default-q4.tar.gz" art_q4
  if [ -d "$WORK/hf" ]; then
    tar -C "$WORK" -czf "$OUT/hf.tar.gz" --exclude='*.safetensors' hf  # config + tokenizer only
    hsz=$(du -cb "$WORK"/hf/*.safetensors 2>/dev/null | tail -1 | cut -f1)
    if [ -n "$hsz" ] && [ "$hsz" -lt 15000000 ]; then tar -C "$WORK" -czf "$OUT/hf.tar.gz" hf; fi
  fi
  tar -C "$WORK" -czf "$OUT/logs.tar.gz" logs $(cd "$WORK" && ls *.json 2>/dev/null)
  echo "== $(( $(date +%s) - T0 )) s: done; files in $OUT:"; ls -la "$OUT"
}
[ -f "$DATA/train.txt" ] || die "$DATA/train.txt is missing (tools/train-default/prepare_corpus.sh $DATA)"
[ -x "$WISP" ] || die "$WISP is not executable"
nvidia-smi -L 2>/dev/null
$PY -c 'import torch, transformers, tokenizers; print("torch", torch.__version__, "cuda", torch.cuda.is_available(), "transformers", transformers.__version__, "tokenizers", tokenizers.__version__)'

step "tokenizer"
$PY "$HERE/train_tokenizer.py" --train "$DATA/train.txt" --out "$WORK/tok" || die "tokenizer training failed"

step "training ($TRAIN_SECONDS s)"
$PY "$HERE/train.py" train --data "$DATA" --tok "$WORK/tok" --hf "$WORK/hf" --seconds "$TRAIN_SECONDS" \
  --loss-csv "$OUT/loss.csv" || die "training failed"

step "wisp convert"
"$WISP" convert "$WORK/hf" -o "$WORK/art_q4" --force --quant q4 > "$WORK/logs/convert_q4.txt" 2>&1 || { cat "$WORK/logs/convert_q4.txt"; die "wisp convert q4 failed"; }
"$WISP" convert "$WORK/hf" -o "$WORK/art_f32" --force --quant f32 > "$WORK/logs/convert_f32.txt" 2>&1 || cat "$WORK/logs/convert_f32.txt"
du -sh "$WORK"/art_* "$WORK/hf"

step "greedy references"
$PY "$HERE/train.py" prompt --hf "$WORK/hf" --prompt "$PROMPT" --out "$WORK/prompts.json" || die "prompt failed"
$PY tests/parity/hf_reference.py reference --hf "$WORK/hf" --prompts "$WORK/prompts.json" --out "$WORK/ref_f32.json" \
  --greedy "$GREEDY" --device cpu || die "reference (f32) failed"
$PY tests/parity/hf_reference.py reference --hf "$WORK/hf" --prompts "$WORK/prompts.json" --out "$WORK/ref_q4.json" \
  --greedy "$GREEDY" --device cpu --dequant-from "$WORK/art_q4" || die "reference (q4) failed"

step "held-out loss"
EVDEV=$($PY -c 'import torch; print("cuda" if torch.cuda.is_available() else "cpu")')
$PY "$HERE/train.py" eval --hf "$WORK/hf" --file "$DATA/heldout.txt" --file "$DATA/heldout-sample.txt" \
  --device "$EVDEV" --dequant-from "$WORK/art_q4" --out-prefix "$WORK/eval_" || die "held-out evaluation failed"

step "wisp cross-check"
# Bounded so that the whole script stays under 9 minutes: the held-out
# sample and the greedy run first, the whole held-out file only if time is left.
left() { echo $(( 500 - ($(date +%s) - T0) )); }
wisp_ppl() { # quant file cap_seconds
  local t; t=$(left); [ "$t" -gt "$3" ] && t=$3
  [ "$t" -gt 5 ] || { echo "skipping wisp perplexity $1 $2: out of time"; return; }
  [ -d "$WORK/art_$1" ] || return
  timeout "$t" "$WISP" perplexity -m "$WORK/art_$1" -f "$DATA/$2.txt" > "$WORK/wisp_ppl_$2_$1.json" 2> "$WORK/logs/wisp_ppl_$2_$1.txt"
  echo "wisp perplexity $1 $2 (rc $?): $(cat "$WORK/wisp_ppl_$2_$1.json") $(tail -1 "$WORK/logs/wisp_ppl_$2_$1.txt")"
}
wisp_ppl q4 heldout-sample 60
wisp_ppl f32 heldout-sample 60
t=$(left); [ "$t" -gt 60 ] && t=60
[ "$t" -gt 5 ] && timeout "$t" "$WISP" run -m "$WORK/art_q4" -p "$PROMPT" -n "$GREEDY" --temp 0 --repeat-penalty 1 \
  --ignore-eos --ids > "$WORK/logs/wisp_run_q4.txt" 2>&1
cat "$WORK/logs/wisp_run_q4.txt" 2>/dev/null
wisp_ppl q4 heldout 120
wisp_ppl f32 heldout 90

step "results"
$PY - "$WORK" "$OUT" "$PROMPT" <<'PYEOF'
import json, os, sys
work, out, prompt = sys.argv[1:4]
def load(name):
    p = os.path.join(work, name)
    try:
        with open(p) as f:
            return json.load(f)
    except Exception as e:  # noqa: BLE001
        return {"error": "%s: %s" % (name, e)}
prompts = load("prompts.json")
f32, q4 = load("ref_f32.json"), load("ref_q4.json")
res = {"prompt": prompt, "prompt_ids": prompts.get("prompts", [[]])[0],
       "greedy_f32": f32.get("greedy"), "greedy_q4": q4.get("greedy"),
       "greedy_min_margin_f32": f32.get("greedy_min_margin"), "greedy_min_margin_q4": q4.get("greedy_min_margin"),
       "training": load("hf/training.json")}
for f in ("heldout", "heldout-sample"):
    for q in ("f32", "q4"):
        res["torch_%s_%s" % (f, q)] = load("eval_%s_%s.json" % (f, q))
        res["wisp_%s_%s" % (f, q)] = load("wisp_ppl_%s_%s.json" % (f, q))
try:
    with open(os.path.join(work, "logs", "wisp_run_q4.txt")) as f:
        line = [l for l in f if l.startswith("generated ids:")][0]
    res["wisp_greedy_q4"] = [int(x) for x in line.split(":", 1)[1].split()]
    res["wisp_greedy_q4_matches_torch"] = res["wisp_greedy_q4"] == q4.get("greedy")
except Exception as e:  # noqa: BLE001
    res["wisp_greedy_q4"] = "missing (%s)" % e
try:
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(work, "hf", "tokenizer.json"))
    res["text_f32"] = tok.decode(f32.get("greedy") or [], skip_special_tokens=False)
    res["text_q4"] = tok.decode(q4.get("greedy") or [], skip_special_tokens=False)
except Exception as e:  # noqa: BLE001
    res["text_error"] = str(e)
with open(os.path.join(out, "results.json"), "w") as f:
    json.dump(res, f, indent=1)
s = res["torch_heldout-sample_q4"]
exp = {"prompt": prompt, "prompt_ids": res["prompt_ids"], "n": len(q4.get("greedy") or []),
       "greedy": q4.get("greedy"), "heldout_sample": "heldout-sample.txt",
       "heldout_sample_tokens": s.get("tokens"), "heldout_sample_nll": s.get("nll"), "heldout_sample_ppl": s.get("ppl"),
       "source": "torch %s, f32, weights dequantized from the q4 artifact (tools/train-default/run_device.sh)" % s.get("torch")}
with open(os.path.join(out, "expected.json"), "w") as f:
    json.dump(exp, f, indent=1)
print(json.dumps({k: res[k] for k in ("prompt", "text_f32", "text_q4", "wisp_greedy_q4_matches_torch",
                                      "greedy_min_margin_q4") if k in res}, indent=1))
for k in sorted(res):
    if k.startswith(("torch_", "wisp_")) and isinstance(res[k], dict):
        print(k, res[k].get("nll"), res[k].get("ppl"), res[k].get("tokens"))
PYEOF
finish
