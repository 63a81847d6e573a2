#!/usr/bin/env bash
# Does llama.cpp read wisp's export of a SentencePiece vocabulary and give
# the same ids? For a machine with llama.cpp built by
# shared/peers/llama.cpp/build.sh (e.g. the GPU machine):
#   tools/spm-llama-check.sh LLAMA_DEST [N]      # LLAMA_DEST as given to build.sh
# 1. builds llama-tokenize there (one more cmake target);
# 2. runs the round-trip test with WISP_SPM_EXPORT_TO, which keeps the GGUF
#    `wisp export-gguf` wrote for the SentencePiece model of
#    tests/tokenizer/spm (tokenizer.ggml.model llama, scores, token types);
# 3. tokenizes the first N (default 300) corpus entries with llama-tokenize
#    (--ids --no-bos) and compares with tests/tokenizer/spm/expected.txt
#    (sentencepiece's ids, which wisp matches: tests/test_tokenizer_spm.c).
# Prints "llama.cpp: K of N entries differ"; exit status 1 when K > 0.
set -euo pipefail
dest=${1:?usage: tools/spm-llama-check.sh LLAMA_DEST [N]}
n=${2:-300}
cd "$(dirname "$0")/.."
cmake --build "$dest/build" -j"$(nproc)" --target llama-tokenize > /tmp/spm-llama-build.log 2>&1 ||
  { tail -20 /tmp/spm-llama-build.log; exit 1; }
make -j"$(nproc)" build/wisp build/wisp_tests > /dev/null
work=$(mktemp -d)
WISP_SPM_EXPORT_TO="$work/spm.gguf" build/wisp_tests spm_round_trip | tail -1
python3 - "$dest/build/bin/llama-tokenize" "$work" "$n" <<'PY'
import subprocess, sys
tok, work, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
def unescape(l):
    out, i = [], 0
    while i < len(l):
        if l[i] == "\\" and i + 1 < len(l) and l[i + 1] in "\\nr":
            out.append({"\\": "\\", "n": "\n", "r": "\r"}[l[i + 1]]); i += 2
        else:
            out.append(l[i]); i += 1
    return "".join(out)
texts = open("tests/tokenizer/corpus.txt", encoding="utf-8").read().split("\n")[:n]
want = open("tests/tokenizer/spm/expected.txt", encoding="utf-8").read().split("\n")[:n]
bad = 0
for i, t in enumerate(texts):
    p = work + "/entry.txt"
    open(p, "w", encoding="utf-8").write(unescape(t))
    r = subprocess.run([tok, "-m", work + "/spm.gguf", "-f", p, "--ids", "--no-bos", "--log-disable"],
                       capture_output=True, text=True)
    got = " ".join(x.strip() for x in r.stdout.strip().strip("[]").split(",") if x.strip())
    if got != want[i].strip():
        bad += 1
        if bad <= 5: print("entry %d: want %s\n          got  %s %s" % (i + 1, want[i], got, r.stderr[-200:]))
print("llama.cpp: %d of %d entries differ" % (bad, n))
sys.exit(1 if bad else 0)
PY
