#!/usr/bin/env bash
# Cross-check wisp's tokenizer against tokenizers.js (@huggingface/tokenizers,
# an independent implementation that mirrors the Rust crate and Oniguruma),
# here, without the GPU machine:
#   tests/tokenizer/crosscheck/run.sh        # from the repository root, after make
# Trains two small tokenizers (make_tokenizers.py, ~1.5 min), encodes
# tests/tokenizer/corpus.txt with tokenizers.js and with `wisp tokenize`, and
# compares every line. npm packages go to build/tokenizer-crosscheck/js.
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=build/tokenizer-crosscheck
mkdir -p "$out/js"
[ -d "$out/js/node_modules/@huggingface/tokenizers" ] ||
  (cd "$out/js" && npm install --silent --no-audit --no-fund --ignore-scripts @huggingface/tokenizers@0.2.0 @huggingface/jinja >/dev/null)
cp tests/tokenizer/crosscheck/*.mjs "$out/js/"
[ -s "$out/qwen35/tokenizer.json" ] || python3 tests/tokenizer/crosscheck/make_tokenizers.py "$out"
status=0
for kind in lfm2 qwen35; do
  special=1; flag=""
  [ "$kind" = qwen35 ] && { special=0; flag=--no-special; }
  node "$out/js/encode.mjs" "$PWD/$out/$kind" "$PWD/tests/tokenizer/corpus.txt" "$special"
  build/wisp tokenize --tokenizer "$out/$kind/tokenizer.json" $flag --corpus tests/tokenizer/corpus.txt > "$out/$kind/wisp.jsonl"
  bad=$(diff <(tr -d ' ' < "$out/$kind/expected.jsonl") "$out/$kind/wisp.jsonl" | grep -c '^<' || true)
  echo "$kind: $bad of $(wc -l < tests/tokenizer/corpus.txt) lines differ from tokenizers.js"
  [ "$bad" = 0 ] || status=1
done
exit $status
