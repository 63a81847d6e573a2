"""Trains two small byte-level BPE tokenizers (LFM2-like and Qwen-like, the
same pre-tokenizer regexes, specials and flags as make_reference.py) with a
plain-Python BPE trainer and writes them as tokenizer.json. Standard library
only; used by run.sh to cross-check wisp against tokenizers.js."""
import collections, json, os, re, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
import make_reference as mr
import make_corpus, random

def byte_table():
    n = 0; t = {}
    for b in range(256):
        p = (33 <= b <= 126) or (161 <= b <= 172) or (174 <= b <= 255)
        t[b] = chr(b) if p else chr(256 + n)
        if not p: n += 1
    return t
BT = byte_table()
def bl(s): return ''.join(BT[b] for b in s.encode('utf-8'))

def train(kind, nmerges):
    rng = random.Random(5)
    text = list(mr.training_text(3, 6000))
    pat = re.compile(r"'s|'t|'re|'ve|'m|'ll|'d| ?[^\W\d_]+| ?\d{1,3}| ?[^\s\w]+|\s+")
    wc = collections.Counter()
    for line in text:
        for w in pat.findall(line): wc[tuple(bl(w))] += 1
    words = {w: c for w, c in wc.items()}
    merges = []
    vocab = {}
    specials = ["<|pad|>", "<|startoftext|>", "<|endoftext|>", "<|im_start|>", "<|im_end|>"] if kind == 'lfm2' else []
    for s in specials: vocab[s] = len(vocab)
    for b in range(256): vocab[BT[b]] = len(vocab)
    for it in range(nmerges):
        pc = collections.Counter()
        for w, c in words.items():
            for i in range(len(w) - 1): pc[(w[i], w[i+1])] += c
        if not pc: break
        (a, b), c = max(pc.items(), key=lambda kv: (kv[1], kv[0]))
        if c < 2: break
        merges.append([a, b]); vocab[a + b] = len(vocab)
        nw = {}
        for w, cnt in words.items():
            out = []; i = 0
            while i < len(w):
                if i + 1 < len(w) and w[i] == a and w[i+1] == b: out.append(a + b); i += 2
                else: out.append(w[i]); i += 1
            nw[tuple(out)] = nw.get(tuple(out), 0) + cnt
        words = nw
    # whole words not reachable by merges (ignore_merges matters for them)
    for w in [" world", " façades", "Привет", " 2026", "\n\n"]:
        k = bl(w)
        if k not in vocab: vocab[k] = len(vocab)
    return vocab, merges

def make(kind, out):
    vocab, merges = train(kind, 1500 if kind == 'lfm2' else 1200)
    lfm2 = kind == 'lfm2'
    added = []
    if lfm2:
        for s in ["<|pad|>", "<|startoftext|>", "<|endoftext|>", "<|im_start|>", "<|im_end|>"]:
            added.append({"id": vocab[s], "content": s, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": True})
    else:
        n = len(vocab)
        for i, s in enumerate(["<|endoftext|>", "<|im_start|>", "<|im_end|>"]):
            added.append({"id": n + i, "content": s, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": True})
        for i, s in enumerate(["<think>", "</think>"]):
            added.append({"id": n + 3 + i, "content": s, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": False})
    doc = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
           "normalizer": None if lfm2 else {"type": "NFC"},
           "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
               {"type": "Split", "pattern": {"Regex": mr.LFM2_PATTERN if lfm2 else mr.QWEN_PATTERN}, "behavior": "Isolated", "invert": False},
               {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]},
           "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<|startoftext|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                              "pair": [{"SpecialToken": {"id": "<|startoftext|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "<|startoftext|>", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
                              "special_tokens": {"<|startoftext|>": {"id": "<|startoftext|>", "ids": [vocab["<|startoftext|>"]], "tokens": ["<|startoftext|>"]}}} if lfm2 else
                             {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
           "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
           "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None, "end_of_word_suffix": None,
                     "fuse_unk": False, "byte_fallback": False, "ignore_merges": lfm2, "vocab": vocab,
                     "merges": merges if lfm2 else [a + " " + b for a, b in merges]}}
    import os
    os.makedirs(out, exist_ok=True)
    json.dump(doc, open(out + "/tokenizer.json", "w"), ensure_ascii=False, indent=1)
    json.dump({"bos_token": "<|startoftext|>" if lfm2 else None, "eos_token": "<|im_end|>", "chat_template": mr.LFM2_TEMPLATE if lfm2 else mr.QWEN_TEMPLATE},
              open(out + "/tokenizer_config.json", "w"))
    print(kind, len(vocab), len(merges))

OUT = sys.argv[1] if len(sys.argv) > 1 else 'build/tokenizer-crosscheck'
make('lfm2', OUT + '/lfm2')
make('qwen35', OUT + '/qwen35')
