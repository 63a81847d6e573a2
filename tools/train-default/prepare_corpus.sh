#!/usr/bin/env bash
# Builds the default model's training text from the Debian package
# bible-kjv-text (the King James Bible; the KJV text is out of copyright, see
# docs/default-model.md). Runs on Debian (not on the GPU machine):
#
#   tools/train-default/prepare_corpus.sh OUT_DIR      (e.g. .train, git-ignored)
#
# Writes OUT_DIR/train.txt (Genesis .. Philemon), OUT_DIR/heldout.txt (Hebrews
# .. Revelation, about 4% of the text, never trained on) and
# OUT_DIR/heldout-sample.txt (the first 6000 bytes of heldout.txt cut at a line
# end: the slice committed as models/default/heldout-sample.txt).
#
# Format (plain UTF-8, in fact ASCII): every chapter starts with a heading line
# "Book N", then one verse per line with its verse number removed; a blank line
# separates chapters. Verse references ("Ge1:1") are not kept.
set -euo pipefail
OUT=${1:?usage: prepare_corpus.sh OUT_DIR}
if ! command -v bible >/dev/null 2>&1 || [ ! -e /usr/lib/bible.data ]; then
  if [ "$(id -u)" = 0 ]; then apt-get install -y bible-kjv-text bible-kjv >/dev/null
  else sudo apt-get install -y bible-kjv-text bible-kjv >/dev/null; fi
fi
mkdir -p "$OUT"
RAW=$(mktemp)
trap 'rm -f "$RAW"' EXIT
# A very wide line keeps each verse on one line.
COLUMNS=1000000 bible -l 1000000 "Gen1:1-Rev22:21" > "$RAW"
# Verse lines are "  N text"; headings are "Book N"; the rest is blank lines.
awk '
  /^ *[0-9]+ / { sub(/^ *[0-9]+ /, ""); sub(/[ \t]+$/, ""); print; next }
  /^[ \t]*$/   { next }
  { if (started) print ""; started = 1; sub(/[ \t]+$/, ""); print; print "" }
' "$RAW" > "$OUT/all.txt"
split_line=$(grep -n '^Hebrews 1$' "$OUT/all.txt" | cut -d: -f1)
[ -n "$split_line" ] || { echo "prepare_corpus.sh: no 'Hebrews 1' heading in the text" >&2; exit 1; }
head -n $((split_line - 1)) "$OUT/all.txt" > "$OUT/train.txt"
tail -n +"$split_line" "$OUT/all.txt" > "$OUT/heldout.txt"
rm -f "$OUT/all.txt"
# 6000 bytes, then up to the end of that line.
{ head -c 6000 "$OUT/heldout.txt"; tail -c +6001 "$OUT/heldout.txt" | head -n 1; } > "$OUT/heldout-sample.txt"
printf 'prepare_corpus.sh: train.txt %s bytes, heldout.txt %s bytes, heldout-sample.txt %s bytes (%s)\n' \
  "$(wc -c < "$OUT/train.txt")" "$(wc -c < "$OUT/heldout.txt")" "$(wc -c < "$OUT/heldout-sample.txt")" "$OUT" >&2
