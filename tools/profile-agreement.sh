#!/usr/bin/env bash
# Greedy agreement of the default profile (throughput: int8 products) with
# --profile exact (the reference path that matches transformers), on a
# trained model: the first N lines of a text (longer than 40 characters, the
# first 80 characters of each) as prompts, 128 greedy tokens each way, and
# how many of them are identical before the first difference.
#   tools/profile-agreement.sh [MODEL_DIR] [TEXT]   (defaults: models/default
#   and its heldout-sample.txt; environment: W (build/wisp), N (12 prompts),
#   BACKENDS ("cpu webgpu"), TOKENS (128))
# One line per prompt and backend, then a line per backend: prompts identical
# for all TOKENS, and the mean identical prefix.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
M=${1:-models/default}
TEXT=${2:-$M/heldout-sample.txt}
W=${W:-build/wisp}
N=${N:-12}
TOKENS=${TOKENS:-128}
ids() { # backend profile prompt -> the generated ids
  "$W" run -m "$M" -p "$3" -n "$TOKENS" --temp 0 --backend "$1" --profile "$2" --ids 2>&1 >/dev/null |
    sed -n 's/^generated ids: //p' | tail -1
}
declare -A full sum
i=0
while IFS= read -r line; do
  [ ${#line} -gt 40 ] || continue
  i=$((i + 1)); [ $i -gt "$N" ] && break
  p=${line:0:80}
  for be in ${BACKENDS:-cpu webgpu}; do
    a=$(ids "$be" exact "$p") b=$(ids "$be" throughput "$p")
    k=$(python3 -c 'import sys
a, b = sys.argv[1].split(), sys.argv[2].split()
if not a or len(a) != len(b): print(-1); sys.exit()
print(next((j for j in range(len(a)) if a[j] != b[j]), len(a)))' "$a" "$b")
    [ "$k" -ge 0 ] || { echo "prompt $i $be: no ids"; continue; }
    echo "prompt $i $be: identical for the first $k of $TOKENS"
    sum[$be]=$(( ${sum[$be]:-0} + k ))
    [ "$k" = "$TOKENS" ] && full[$be]=$(( ${full[$be]:-0} + 1 ))
  done
done < "$TEXT"
n=$((i > N ? N : i))
for be in ${BACKENDS:-cpu webgpu}; do
  echo "$be: $(( ${full[$be]:-0} )) of $n prompts identical for all $TOKENS tokens; mean identical prefix $(( ${sum[$be]:-0} / (n > 0 ? n : 1) ))"
done
