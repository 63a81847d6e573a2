#!/usr/bin/env python3
"""Copies a GGUF file, adding tokenizer.ggml.model = "none" when it has no
tokenizer, so that llama.cpp loads a model without a vocabulary (wisp's
synthetic artifacts have none; llama.cpp then makes <arch>.vocab_size dummy
tokens). Standard library only.

    tools/gguf-none-vocab.py IN.gguf OUT.gguf
"""
import struct
import sys

# GGUF value types: size in bytes of the fixed-size ones
FIXED = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
STRING, ARRAY = 8, 9


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


def main(src, dst):
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
        for _ in range(n_tensors):
            read_str(f)
            (nd,) = struct.unpack("<I", f.read(4))
            f.read(8 * nd + 4 + 8)
        infos_end = f.tell()
        data_start = (infos_end + align - 1) // align * align
        if "tokenizer.ggml.model" in keys:
            raise SystemExit("gguf-none-vocab: %s already has a tokenizer" % src)
        f.seek(kv_start)
        kv = f.read(kv_bytes_end - kv_start)
        infos = f.read(infos_end - kv_bytes_end)
        key, val = b"tokenizer.ggml.model", b"none"
        extra = struct.pack("<Q", len(key)) + key + struct.pack("<I", STRING) + struct.pack("<Q", len(val)) + val
        with open(dst + ".part", "wb") as o:
            o.write(struct.pack("<4sIQQ", magic, version, n_tensors, n_kv + 1))
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
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    main(sys.argv[1], sys.argv[2])
