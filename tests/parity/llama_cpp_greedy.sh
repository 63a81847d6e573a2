#!/usr/bin/env bash
# Does llama.cpp, run on a GGUF that `wisp export-gguf` wrote, give the same
# greedy tokens as wisp, with no override (no --override-kv, no BOS flag)?
#
#   tests/parity/llama_cpp_greedy.sh LLAMA_BIN_DIR WISP_BIN [ARTIFACT] [N]
#
# LLAMA_BIN_DIR holds llama-completion and libllama (a llama.cpp build's
# bin/); ARTIFACT defaults to models/default, N (tokens per prompt) to 32;
# WISP_BACKEND=cpu|webgpu picks wisp's backend (default: wisp's auto).
# For each prompt it compares:
#   - the prompt ids: `wisp run --ids` against llama-completion --verbose-prompt
#     (so BOS and special tokens are added alike);
#   - the generated text: `wisp run --temp 0 --ignore-eos` against
#     `llama-completion --temp 0 --ignore-eos`, byte for byte;
#   - the generated ids, when llama.cpp's headers are found (LLAMA_SRC, or
#     the tree above LLAMA_BIN_DIR): tests/parity/llama_greedy.c built against
#     libllama, greedy by argmax, against wisp's `generated ids`.
# wisp runs the artifact itself and its re-import (`convert FILE.gguf`); a
# Q4 artifact is exported with dequantized F32 weights, so llama.cpp computes
# with the very values wisp's Q4 kernels expand. Exit 0 when all match.
set -uo pipefail
if [ $# -lt 2 ]; then
  awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
  exit 2
fi
LLAMA_BIN=$(cd "$1" && pwd) || exit 2
WISP=$(realpath "$2") || exit 2
ART=${3:-models/default}
N=${4:-32}
COMPLETION="$LLAMA_BIN/llama-completion"
[ -x "$COMPLETION" ] || { echo "no llama-completion in $LLAMA_BIN" >&2; exit 2; }
export LD_LIBRARY_PATH="$LLAMA_BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$WISP" export-gguf "$ART" -o "$tmp/model.gguf" >/dev/null || exit 1
"$WISP" convert "$tmp/model.gguf" -o "$tmp/reimport" --quant f32 --quiet || exit 1

# The id probe, when llama.h can be found.
probe=""
src=${LLAMA_SRC:-}
for cand in "$src" "$LLAMA_BIN/../.." "$LLAMA_BIN/../../llama.cpp" "$LLAMA_BIN/../llama.cpp"; do
  if [ -n "$cand" ] && [ -f "$cand/include/llama.h" ] && [ -f "$cand/ggml/include/ggml.h" ]; then
    if cc -std=c11 -O1 -I"$cand/include" -I"$cand/ggml/include" "$here/llama_greedy.c" -o "$tmp/llama_greedy" \
         -L"$LLAMA_BIN" -lllama -Wl,-rpath,"$LLAMA_BIN" 2>"$tmp/probe.log"; then
      probe="$tmp/llama_greedy"
    else
      echo "note: llama_greedy.c did not build against $cand:"; head -n 5 "$tmp/probe.log"
    fi
    break
  fi
done
[ -z "$probe" ] && echo "note: no llama.h found (set LLAMA_SRC): generated ids are compared through their text only"

prompts=("In the beginning God created the heaven and the earth."
         "And the LORD said unto Moses,"
         "<|im_start|>user
Who art thou?<|im_end|>
<|im_start|>assistant
")
fail=0
ids_of() { sed -n "s/^$1 ids: *//p"; }
for p in "${prompts[@]}"; do
  label=$(printf '%s' "$p" | head -n 1 | cut -c1-40)
  # wisp: stdout is the prompt, the generated text and a newline
  for side in art re; do
    dir=$ART; [ "$side" = re ] && dir="$tmp/reimport"
    "$WISP" run -m "$dir" -p "$p" -n "$N" --temp 0 --ignore-eos --ids ${WISP_BACKEND:+--backend "$WISP_BACKEND"} >"$tmp/w_$side.out" 2>"$tmp/w_$side.err" ||
      { echo "FAIL [$label]: wisp run on $dir failed: $(tail -n 1 "$tmp/w_$side.err")"; fail=1; continue 2; }
  done
  python3 - "$tmp/w_art.out" "$p" >"$tmp/w.txt" <<'EOF'
import sys
out = open(sys.argv[1], "rb").read()
p = sys.argv[2].encode()
assert out.startswith(p) and out.endswith(b"\n"), "unexpected wisp output"
sys.stdout.buffer.write(out[len(p):-1])
EOF
  "$COMPLETION" -m "$tmp/model.gguf" -p "$p" -n "$N" --temp 0 --ignore-eos -no-cnv --no-display-prompt \
    --verbose-prompt --no-warmup -c $((N + 256)) -t 2 -s 1 </dev/null >"$tmp/l.out" 2>"$tmp/l.err" ||
    { echo "FAIL [$label]: llama-completion failed: $(tail -n 3 "$tmp/l.err")"; fail=1; continue; }
  w_prompt=$(ids_of prompt <"$tmp/w_art.err")
  w_gen=$(ids_of generated <"$tmp/w_art.err")
  r_prompt=$(ids_of prompt <"$tmp/w_re.err")
  r_gen=$(ids_of generated <"$tmp/w_re.err")
  # --verbose-prompt lists the prompt as "ID -> 'piece'" lines, after a log
  # prefix ("0.00.285.780 I ") in recent versions, on stderr
  l_prompt=$(cat "$tmp/l.err" | grep -E "^([0-9.]+ [A-Z] )? *[0-9]+ -> '" | sed -E "s/^([0-9.]+ [A-Z] )? *([0-9]+) -> '.*/\2/" |
    tr '\n' ' ' | sed 's/ $//')
  ok=1
  [ "$w_prompt" = "$l_prompt" ] || { echo "  prompt ids differ: wisp [$w_prompt] llama.cpp [$l_prompt]"; ok=0; }
  [ "$w_prompt" = "$r_prompt" ] && [ "$w_gen" = "$r_gen" ] ||
    { echo "  wisp's re-import differs: [$r_prompt] [$r_gen]"; ok=0; }
  # llama-completion ends its output with blank lines, and under load its
  # asynchronous log can lose the last piece: one text must be a prefix of
  # the other, with at least 3/4 of wisp's text compared (the probe, when it
  # runs, compares the ids exactly)
  if ! python3 - "$tmp/w.txt" "$tmp/l.out" <<'EOF'
import sys
w = open(sys.argv[1], "rb").read()
l = open(sys.argv[2], "rb").read().rstrip(b"\n")
n = min(len(w), len(l))
if n < len(w):
    print("  note: llama-completion printed %d of wisp's %d bytes; compared those" % (n, len(w)))
sys.exit(0 if len(w) > 0 and l[:n] == w[:n] and 4 * n >= 3 * len(w) else 1)
EOF
  then
    echo "  generated text differs:"; echo "    wisp:      $(head -c 200 "$tmp/w.txt" | tr '\n' '|')"
    echo "    llama.cpp: $(head -c 200 "$tmp/l.out" | tr '\n' '|')"; ok=0
  fi
  if [ -n "$probe" ]; then
    "$probe" "$tmp/model.gguf" "$p" "$N" >"$tmp/probe.out" 2>"$tmp/probe.err" ||
      { echo "  llama_greedy failed: $(tail -n 1 "$tmp/probe.err")"; ok=0; }
    p_prompt=$(ids_of prompt <"$tmp/probe.out")
    p_gen=$(ids_of generated <"$tmp/probe.out")
    [ "$p_prompt" = "$w_prompt" ] && [ "$p_gen" = "$w_gen" ] ||
      { echo "  ids differ: wisp [$w_prompt] [$w_gen]"; echo "          llama.cpp [$p_prompt] [$p_gen]"; ok=0; }
  fi
  if [ $ok = 1 ]; then
    how="text"; [ -n "$probe" ] && how="ids and text"
    echo "ok   [$label]: $(echo "$w_prompt" | wc -w) prompt ids, $(echo "$w_gen" | wc -w) greedy ids identical ($how)"
  else
    echo "FAIL [$label]"; fail=1
  fi
done
exit $fail
