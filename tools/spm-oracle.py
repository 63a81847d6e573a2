#!/usr/bin/env python3
"""Reference ids for wisp's SentencePiece tokenizer (tests/test_tokenizer_spm.c).

  spm-oracle.py train [N]
      Needs Debian's python3-sentencepiece (/usr/bin/python3 on bookworm).
      Trains a SentencePiece BPE model the way Llama 2's was configured
      (byte_fallback, identity normalization, whitespace kept, dummy prefix,
      split digits) on tests/tokenizer/corpus.txt and writes
      tests/tokenizer/spm/:
        vocab.tsv     piece<TAB>score<TAB>llama.cpp token type (1 normal,
                      2 unknown, 3 control, 6 byte), one id per line; the
                      piece is written with \\ \\n \\r \\t escaped
        expected.txt  the ids sentencepiece gives for the first N corpus
                      entries (N = 1500), one line per entry
      The test turns vocab.tsv into a GGUF (tokenizer.ggml.model = llama),
      imports it and must give the same ids.

  spm-oracle.py transformers OUT.txt [N]
      For the GPU machine (transformers + sentencepiece + protobuf): loads
      tests/tokenizer/spm/tokenizer.model with LlamaTokenizerFast (the
      tokenizer.json transformers converts it to) and LlamaTokenizer (the
      slow, sentencepiece one), encodes the same N entries without special
      tokens, writes the fast ids to OUT.txt and says how many entries
      differ from expected.txt. Also checks llama.cpp's vocab test ids
      (tests/tokenizer/llama-spm) when `tokenizer.model` of Llama 2 is given
      as LLAMA2_MODEL in the environment.
"""
import os
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
TOK = os.path.join(ROOT, "tests", "tokenizer")
OUT = os.path.join(TOK, "spm")


def corpus_entries(n):
    """The first n entries of corpus.txt with its escapes undone."""
    out = []
    with open(os.path.join(TOK, "corpus.txt"), encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            s, i = [], 0
            while i < len(line):
                c = line[i]
                if c == "\\" and i + 1 < len(line) and line[i + 1] in "\\nr":
                    s.append({"\\": "\\", "n": "\n", "r": "\r"}[line[i + 1]])
                    i += 2
                else:
                    s.append(c)
                    i += 1
            out.append("".join(s))
            if len(out) == n:
                break
    return out


def escape(p):
    return p.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")


def train(n):
    import sentencepiece as spm

    os.makedirs(OUT, exist_ok=True)
    spm.SentencePieceTrainer.train(
        input=os.path.join(TOK, "corpus.txt"), model_prefix=os.path.join(OUT, "tokenizer"),
        model_type="bpe", vocab_size=3000, character_coverage=0.995, byte_fallback=True,
        normalization_rule_name="identity", remove_extra_whitespaces=False, add_dummy_prefix=True,
        split_digits=True, allow_whitespace_only_pieces=True, max_sentence_length=100000,
        unk_id=0, bos_id=1, eos_id=2, pad_id=-1, minloglevel=2)
    sp = spm.SentencePieceProcessor(model_file=os.path.join(OUT, "tokenizer.model"))
    with open(os.path.join(OUT, "vocab.tsv"), "w", encoding="utf-8") as f:
        for i in range(sp.get_piece_size()):
            t = 2 if sp.is_unknown(i) else 3 if sp.is_control(i) else 6 if sp.is_byte(i) else 5 if sp.is_unused(i) else 1
            f.write("%s\t%r\t%d\n" % (escape(sp.id_to_piece(i)), sp.get_score(i), t))
    with open(os.path.join(OUT, "expected.txt"), "w", encoding="utf-8") as f:
        for text in corpus_entries(n):
            f.write(" ".join(str(i) for i in sp.encode(text)) + "\n")
    os.remove(os.path.join(OUT, "tokenizer.vocab"))
    print("wrote", OUT, "(sentencepiece %s)" % spm.__version__)


def transformers_ids(path, n):
    from transformers import LlamaTokenizer, LlamaTokenizerFast

    model = os.path.join(OUT, "tokenizer.model")
    fast = LlamaTokenizerFast(vocab_file=model, legacy=True, add_bos_token=False)
    slow = LlamaTokenizer(vocab_file=model, legacy=True, add_bos_token=False)
    want = open(os.path.join(OUT, "expected.txt"), encoding="utf-8").read().split("\n")
    diff_fast = diff_slow = 0
    with open(path, "w", encoding="utf-8") as f:
        for i, text in enumerate(corpus_entries(n)):
            ids = fast.encode(text, add_special_tokens=False)
            f.write(" ".join(map(str, ids)) + "\n")
            diff_fast += " ".join(map(str, ids)) != want[i]
            diff_slow += " ".join(map(str, slow.encode(text, add_special_tokens=False))) != want[i]
    print("transformers fast: %d of %d entries differ from sentencepiece; slow: %d" % (diff_fast, n, diff_slow))
    llama2 = os.environ.get("LLAMA2_MODEL")
    if llama2:
        base = os.path.join(TOK, "llama-spm", "ggml-vocab-llama-spm.gguf")
        texts = open(base + ".inp", encoding="utf-8").read().split("\n__ggml_vocab_test__\n")[:-1]
        outs = open(base + ".out", encoding="utf-8").read().split("\n")
        t = LlamaTokenizerFast(vocab_file=llama2, legacy=True, add_bos_token=False)
        bad = sum(" ".join(map(str, t.encode(x, add_special_tokens=False))) != outs[i].strip() for i, x in enumerate(texts))
        print("llama-spm vocab test: %d of %d differ" % (bad, len(texts)))


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "train":
        train(int(sys.argv[2]) if len(sys.argv) > 2 else 1500)
    elif len(sys.argv) >= 3 and sys.argv[1] == "transformers":
        transformers_ids(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 1500)
    else:
        sys.exit(__doc__)
