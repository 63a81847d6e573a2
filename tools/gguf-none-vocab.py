#!/usr/bin/env python3
"""Copies a GGUF file that has no tokenizer, adding one llama.cpp accepts
(wisp's synthetic artifacts have none). Standard library only.

    tools/gguf-none-vocab.py [--spm] IN.gguf OUT.gguf

Default: tokenizer.ggml.model = "none". llama.cpp then loads the model and
llama-bench runs it, but llama-server aborts at its first token
(GGML_ASSERT(type != LLAMA_VOCAB_TYPE_NONE)).
--spm: a SentencePiece vocabulary ("llama") of the model's size, taken from
token_embd.weight's rows: <unk>, <s> and </s>, then placeholder pieces
(no byte tokens). llama-server serves it with token-id prompts.
"""
import struct
import sys

# GGUF value types: size in bytes of the fixed-size ones
FIXED = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
STRING, ARRAY, U32, I32, F32, BOOL = 8, 9, 4, 5, 6, 7


def skip_value(f, t):
    if t in FIXED:
        f.read(FIXED[t])
    elif t == STRING:
        (n,) = struct.unpack("<Q", f.read(8))
        f.read(n)
    elif t == ARRAY:
        et, n = struct.unpack("<IQ", f.read(12))
        if et in FIXED:
            f.read(FIXED[et] * n)
        else:
            for _ in range(n):
                skip_value(f, et)
    else:
        raise SystemExit("gguf-none-vocab: unknown value type %d" % t)


def read_str(f):
    (n,) = struct.unpack("<Q", f.read(8))
    return f.read(n).decode("utf-8", "replace")


def gguf_str(b):
    return struct.pack("<Q", len(b)) + b


def kv_str(key, val):
    return gguf_str(key.encode()) + struct.pack("<I", STRING) + gguf_str(val.encode())


def kv_u32(key, val):
    return gguf_str(key.encode()) + struct.pack("<II", U32, val)


def kv_array(key, et, items):
    head = gguf_str(key.encode()) + struct.pack("<IIQ", ARRAY, et, len(items))
    if et == STRING:
        return head + b"".join(gguf_str(x.encode()) for x in items)
    return head + struct.pack("<%d%s" % (len(items), {F32: "f", I32: "i"}[et]), *items)


def spm_vocab(n):
    """(key-value bytes, count): a SentencePiece vocabulary of n tokens."""
    # no byte tokens: a random model draws them, and lone bytes are not the
    # UTF-8 text llama-server's reply must be
    tokens, types = ["<unk>", "<s>", "</s>"], [2, 3, 3]  # unknown, control, control
    while len(tokens) < n:
        tokens.append("\u2581t%d" % len(tokens))
        types.append(1)  # normal
    tokens, types = tokens[:n], types[:n]
    scores = [-float(i) for i in range(n)]
    kv = (kv_str("tokenizer.ggml.model", "llama") + kv_array("tokenizer.ggml.tokens", STRING, tokens) +
          kv_array("tokenizer.ggml.scores", F32, scores) + kv_array("tokenizer.ggml.token_type", I32, types) +
          kv_u32("tokenizer.ggml.unknown_token_id", 0) + kv_u32("tokenizer.ggml.bos_token_id", 1) +
          kv_u32("tokenizer.ggml.eos_token_id", 2))
    return kv, 7


def main(src, dst, spm=False):
    with open(src, "rb") as f:
        magic, version, n_tensors, n_kv = struct.unpack("<4sIQQ", f.read(24))
        if magic != b"GGUF" or version < 2:
            raise SystemExit("gguf-none-vocab: %s is not a GGUF v2+ file" % src)
        kv_start = f.tell()
        keys, align = [], 32
        for _ in range(n_kv):
            key = read_str(f)
            (t,) = struct.unpack("<I", f.read(4))
            at = f.tell()
            skip_value(f, t)
            if key == "general.alignment" and t == 4:
                end = f.tell()
                f.seek(at)
                (align,) = struct.unpack("<I", f.read(4))
                f.seek(end)
            keys.append(key)
        kv_bytes_end = f.tell()
        vocab = 0
        for _ in range(n_tensors):
            name = read_str(f)
            (nd,) = struct.unpack("<I", f.read(4))
            dims = struct.unpack("<%dQ" % nd, f.read(8 * nd))
            f.read(4 + 8)
            if name == "token_embd.weight" and nd == 2:
                vocab = dims[1]
        infos_end = f.tell()
        data_start = (infos_end + align - 1) // align * align
        if "tokenizer.ggml.model" in keys:
            raise SystemExit("gguf-none-vocab: %s already has a tokenizer" % src)
        f.seek(kv_start)
        kv = f.read(kv_bytes_end - kv_start)
        infos = f.read(infos_end - kv_bytes_end)
        if spm:
            if not vocab:
                raise SystemExit("gguf-none-vocab: %s has no token_embd.weight to size a vocabulary by" % src)
            extra, n_extra = spm_vocab(vocab)
        else:
            extra, n_extra = kv_str("tokenizer.ggml.model", "none"), 1
        with open(dst + ".part", "wb") as o:
            o.write(struct.pack("<4sIQQ", magic, version, n_tensors, n_kv + n_extra))
            o.write(kv + extra + infos)
            o.write(b"\0" * ((-o.tell()) % align))
            f.seek(data_start)
            while True:
                chunk = f.read(1 << 24)
                if not chunk:
                    break
                o.write(chunk)
    import os
    os.replace(dst + ".part", dst)


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--spm"]
    if len(args) != 2:
        raise SystemExit(__doc__)
    main(args[0], args[1], spm="--spm" in sys.argv[1:])
