#!/usr/bin/env python3
"""Writes the small seed corpora of the fuzz harnesses (tests/fuzz/corpus/).

Every file is built here from the formats' definitions (no downloads):
tiny GGUF files (metadata of every value type, one tensor of each ggml type
wisp reads, an LFM2-shaped header), a safetensors file, a manifest, a
byte-level BPE tokenizer.json, and the chat side: tokenizer_config.json and
generation_config.json in the forms Hugging Face models ship, and chat
templates (template, bos_token and messages separated by NUL bytes)."""
import json, os, struct, sys

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")

def s(x):
    b = x.encode()
    return struct.pack("<Q", len(b)) + b

def kv_u32(k, v): return s(k) + struct.pack("<II", 4, v)
def kv_f32(k, v): return s(k) + struct.pack("<If", 6, v)
def kv_str(k, v): return s(k) + struct.pack("<I", 8) + s(v)
def kv_arr_i32(k, vs): return s(k) + struct.pack("<IIQ", 9, 5, len(vs)) + b"".join(struct.pack("<i", v) for v in vs)
def kv_arr_str(k, vs): return s(k) + struct.pack("<IIQ", 9, 8, len(vs)) + b"".join(s(v) for v in vs)

BLOCK = {0: (1, 4), 1: (1, 2), 30: (1, 2), 2: (32, 18), 8: (32, 34), 12: (256, 144), 14: (256, 210)}

def gguf(kvs, tensors):
    """tensors: [(name, ne list, type)]; data is a deterministic byte pattern."""
    hdr = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs)) + b"".join(kvs)
    off, infos, datas = 0, b"", []
    for spec in tensors:
        name, ne, t = spec[:3]
        n = 1
        for d in ne: n *= d
        bn, bb = BLOCK[t]
        size = n // bn * bb
        infos += s(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne) + struct.pack("<IQ", t, off)
        data = bytes((i * 37 + 11) % 251 for i in range(size))
        if t in (1, 2, 8):  # keep f16 scales finite and small
            data = bytearray(data)
            step = bb if t != 1 else 2
            for i in range(0, size, step): data[i + 1 if t != 1 else i + 1] = 0x30
            data = bytes(data)
        if t in (12, 14):  # finite f16 scales: d, dmin (Q4_K) / d (Q6_K)
            data = bytearray(data)
            for i in range(0, size, bb):
                for o in ((1, 3) if t == 12 else (209,)): data[i + o] = 0x30
            data = bytes(data)
        if t == 0: data = b"".join(struct.pack("<f", (i % 7) * 0.125) for i in range(n))
        if len(spec) > 3: data = b"".join(struct.pack("<f", spec[3](i)) for i in range(n))  # F32 values given
        datas.append(data + b"\0" * ((-size) % 32))
        off += size + (-size) % 32
    blob = hdr + infos
    blob += b"\0" * ((-len(blob)) % 32)
    return blob + b"".join(datas)

def write(sub, name, data):
    d = os.path.join(out, sub)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())

# GGUF: every value type, every tensor type
allkv = [s("k.u8") + struct.pack("<IB", 0, 7), s("k.i8") + struct.pack("<Ib", 1, -7), s("k.u16") + struct.pack("<IH", 2, 7),
         s("k.i16") + struct.pack("<Ih", 3, -7), kv_u32("general.alignment", 32), s("k.i32") + struct.pack("<Ii", 5, -7),
         kv_f32("k.f32", 0.5), s("k.bool") + struct.pack("<IB", 7, 1), kv_str("k.str", "x"), kv_arr_i32("k.arr", [1, 2]),
         s("k.u64") + struct.pack("<IQ", 10, 7), s("k.i64") + struct.pack("<Iq", 11, -7), s("k.f64") + struct.pack("<Id", 12, 0.5),
         s("k.nested") + struct.pack("<IIQ", 9, 9, 1) + struct.pack("<IQ", 4, 1) + struct.pack("<I", 3)]
write("gguf", "types.gguf", gguf(allkv, [("f32", [32, 2], 0), ("f16", [32], 1), ("bf16", [32], 30), ("q4_0", [64], 2),
                                         ("q8_0", [32], 8), ("q4_k", [256], 12), ("q6_k", [256], 14)]))
# An LFM2-shaped header: one conv layer, hidden 32, ffn 32, vocab 8, + tokenizer
H, F, V = 32, 32, 8
lkv = [kv_str("general.architecture", "lfm2"), kv_u32("lfm2.block_count", 1), kv_u32("lfm2.embedding_length", H),
       kv_u32("lfm2.feed_forward_length", F), kv_u32("lfm2.attention.head_count", 2), kv_arr_i32("lfm2.attention.head_count_kv", [0]),
       kv_f32("lfm2.rope.freq_base", 10000.0), kv_f32("lfm2.attention.layer_norm_rms_epsilon", 1e-5), kv_u32("lfm2.shortconv.l_cache", 3),
       kv_u32("lfm2.context_length", 64), kv_str("tokenizer.ggml.model", "gpt2"), kv_str("tokenizer.ggml.pre", "llama-bpe"),
       kv_arr_str("tokenizer.ggml.tokens", ["a", "b", "ab", "c", "<s>", "d", "e", "f"]), kv_arr_i32("tokenizer.ggml.token_type", [1, 1, 1, 1, 3, 1, 1, 1]),
       kv_arr_str("tokenizer.ggml.merges", ["a b"]), kv_u32("tokenizer.ggml.bos_token_id", 4)]
write("gguf", "lfm2.gguf", gguf(lkv, [("token_embd.weight", [H, V], 0), ("token_embd_norm.weight", [H], 0),
                                      ("blk.0.attn_norm.weight", [H], 0), ("blk.0.ffn_norm.weight", [H], 0),
                                      ("blk.0.shortconv.in_proj.weight", [H, 3 * H], 8), ("blk.0.shortconv.out_proj.weight", [H, H], 2),
                                      ("blk.0.shortconv.conv.weight", [3, H], 0), ("blk.0.ffn_gate.weight", [H, F], 1),
                                      ("blk.0.ffn_up.weight", [H, F], 30), ("blk.0.ffn_down.weight", [F, H], 0)]))

# A qwen3-shaped header: one attention layer with q/k norm, Q4_K and Q6_K matrices
qkv = [kv_str("general.architecture", "qwen3"), kv_u32("qwen3.block_count", 1), kv_u32("qwen3.embedding_length", 256),
       kv_u32("qwen3.attention.head_count", 1), kv_u32("qwen3.attention.head_count_kv", 1), kv_u32("qwen3.attention.key_length", 32),
       kv_f32("qwen3.rope.freq_base", 1000000.0), kv_f32("qwen3.attention.layer_norm_rms_epsilon", 1e-6), kv_u32("qwen3.context_length", 64)]
write("gguf", "qwen3.gguf", gguf(qkv, [("token_embd.weight", [256, 4], 0), ("output_norm.weight", [256], 0),
                                       ("blk.0.attn_norm.weight", [256], 0), ("blk.0.ffn_norm.weight", [256], 0),
                                       ("blk.0.attn_q.weight", [256, 32], 12), ("blk.0.attn_k.weight", [256, 32], 14),
                                       ("blk.0.attn_v.weight", [256, 32], 8), ("blk.0.attn_output.weight", [32, 256], 2),
                                       ("blk.0.attn_q_norm.weight", [32], 0), ("blk.0.attn_k_norm.weight", [32], 0),
                                       ("blk.0.ffn_gate.weight", [256, 32], 8), ("blk.0.ffn_up.weight", [256, 32], 1),
                                       ("blk.0.ffn_down.weight", [32, 256], 8)]))

# A llama-shaped header: one layer, q/k rows in llama.cpp's rope order, llama3 rope_freqs
lmkv = [kv_str("general.architecture", "llama"), kv_u32("llama.block_count", 1), kv_u32("llama.embedding_length", 64),
        kv_u32("llama.attention.head_count", 2), kv_u32("llama.attention.head_count_kv", 1), kv_u32("llama.rope.dimension_count", 32),
        kv_f32("llama.rope.freq_base", 500000.0), kv_f32("llama.attention.layer_norm_rms_epsilon", 1e-5), kv_u32("llama.context_length", 64)]
write("gguf", "llama.gguf", gguf(lmkv, [("rope_freqs.weight", [16], 0, lambda i: 1.0 + i % 3), ("token_embd.weight", [64, 4], 0),
                                        ("output_norm.weight", [64], 0), ("output.weight", [64, 4], 8),
                                        ("blk.0.attn_norm.weight", [64], 0), ("blk.0.ffn_norm.weight", [64], 0),
                                        ("blk.0.attn_q.weight", [64, 64], 8), ("blk.0.attn_k.weight", [64, 32], 1),
                                        ("blk.0.attn_v.weight", [64, 32], 0), ("blk.0.attn_output.weight", [64, 64], 2),
                                        ("blk.0.ffn_gate.weight", [64, 32], 8), ("blk.0.ffn_up.weight", [64, 32], 0),
                                        ("blk.0.ffn_down.weight", [32, 64], 8)]))

# A qwen35-shaped header: a Gated DeltaNet layer (1 key head, 2 value heads of 16) and a full-attention layer
q5 = "qwen35."
q5kv = [kv_str("general.architecture", "qwen35"), kv_u32(q5 + "block_count", 2), kv_u32(q5 + "embedding_length", 64),
        kv_u32(q5 + "attention.head_count", 2), kv_u32(q5 + "attention.head_count_kv", 1), kv_u32(q5 + "attention.key_length", 16),
        kv_u32(q5 + "ssm.conv_kernel", 4), kv_u32(q5 + "ssm.state_size", 16), kv_u32(q5 + "ssm.group_count", 1),
        kv_u32(q5 + "ssm.time_step_rank", 2), kv_u32(q5 + "ssm.inner_size", 32), kv_u32(q5 + "full_attention_interval", 2),
        kv_u32(q5 + "rope.dimension_count", 8), kv_arr_i32(q5 + "rope.dimension_sections", [2, 1, 1, 0]),
        kv_f32(q5 + "rope.freq_base", 10000000.0), kv_f32(q5 + "attention.layer_norm_rms_epsilon", 1e-6)]
ffn = lambda b: [(b + "ffn_gate.weight", [64, 32], 8), (b + "ffn_up.weight", [64, 32], 0), (b + "ffn_down.weight", [32, 64], 8),
                 (b + "attn_norm.weight", [64], 0), (b + "post_attention_norm.weight", [64], 0)]
write("gguf", "qwen35.gguf", gguf(q5kv, [("token_embd.weight", [64, 4], 0), ("output_norm.weight", [64], 0)] + ffn("blk.0.") +
                                        [("blk.0.attn_qkv.weight", [64, 64], 8), ("blk.0.attn_gate.weight", [64, 32], 0),
                                         ("blk.0.ssm_beta.weight", [64, 2], 0), ("blk.0.ssm_alpha.weight", [64, 2], 0),
                                         ("blk.0.ssm_conv1d.weight", [4, 64], 0), ("blk.0.ssm_a", [2], 0, lambda i: -0.5 - i),
                                         ("blk.0.ssm_dt.bias", [2], 0), ("blk.0.ssm_norm.weight", [16], 0),
                                         ("blk.0.ssm_out.weight", [32, 64], 8)] + ffn("blk.1.") +
                                        [("blk.1.attn_q.weight", [64, 64], 8), ("blk.1.attn_k.weight", [64, 16], 0),
                                         ("blk.1.attn_v.weight", [64, 16], 0), ("blk.1.attn_output.weight", [32, 64], 0),
                                         ("blk.1.attn_q_norm.weight", [16], 0), ("blk.1.attn_k_norm.weight", [16], 0)]))

# safetensors
def st(tensors):
    hdr, data, off = {}, b"", 0
    for name, dt, shape, raw in tensors:
        hdr[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(raw)]}
        data += raw
        off += len(raw)
    hdr["__metadata__"] = {"format": "pt"}
    h = json.dumps(hdr).encode()
    return struct.pack("<Q", len(h)) + h + data
write("safetensors", "small.safetensors", st([("a", "F32", [2, 2], struct.pack("<4f", 1, 2, 3, 4)), ("b", "F16", [2], b"\x00\x3c\x00\xc0"),
                                              ("c", "BF16", [1, 2], b"\x80\x3f\x00\x40")]))

# manifest (one conv layer)
secs, off = [], 0
for name, n in [("L0.conv.in_proj.quant", 1536), ("L0.conv.in_proj.scales", 384), ("head.norm", 128)]:
    secs.append({"name": name, "offset": off, "bytes": n}); off += n
man = {"runtime": {"shape": {"layerTypes": ["conv", "attention"], "hidden": 32, "ffn": 32, "vocab": 8, "heads": 2, "kvHeads": 1,
                             "headDim": 16, "convCache": 3, "quantBits": 4, "quantBlock": 32},
                   "weightBytes": off, "sections": secs, "maxPositions": 64},
       "wisp": {"architecture": "lfm2", "ropeTheta": 10000, "normEps": 1e-5, "tokenizer": "byte"}}
write("manifest", "small.json", json.dumps(man, indent=1))

# tokenizer.json (byte-level BPE)
def bytes_to_unicode():
    bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b); cs.append(256 + n); n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}
bu = bytes_to_unicode()
vocab = {bu[b]: b for b in range(256)}
vocab["he"] = 256; vocab["hel"] = 257; vocab["\u0120w"] = 258
tok = {"version": "1.0", "added_tokens": [{"id": 259, "content": "<|end|>", "special": True}],
       "normalizer": {"type": "NFC"},
       "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
           {"type": "Split", "pattern": {"Regex": "(?i:'s|'t)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
            "behavior": "Isolated", "invert": False},
           {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]},
       "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<|end|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                          "special_tokens": {"<|end|>": {"id": "<|end|>", "ids": [259], "tokens": ["<|end|>"]}}},
       "decoder": {"type": "ByteLevel"},
       "model": {"type": "BPE", "vocab": vocab, "merges": ["h e", "he l", "\u0120 w"]}}
write("tokenizer_json", "bpe.json", json.dumps(tok))

# tokenizer_config.json: LFM2 (bos_token used by the template), Qwen 3.5
# (thinking), plain ChatML, token fields as {"content": ...}, a list of named templates
lfm2_t = ("{{- bos_token -}}{%- for message in messages -%}{{- '<|im_start|>' + message['role'] + '\\n' + "
          "message['content'] + '<|im_end|>\\n' -}}{%- endfor -%}{%- if add_generation_prompt -%}"
          "{{- '<|im_start|>assistant\\n' -}}{%- endif -%}")
qwen_t = ("{%- for message in messages -%}{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
          "'<|im_end|>\\n' -}}{%- endfor -%}{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}"
          "{%- if enable_thinking is defined and enable_thinking is false -%}{{- '<think>\\n\\n</think>\\n\\n' -}}"
          "{%- endif -%}{%- endif -%}")
chatml_t = "{% for m in messages %}<|im_start|>{{ m.role }}\\n{{ m.content }}<|im_end|>\\n{% endfor %}"
write("tokenizer_config", "lfm2.json", json.dumps(
    {"bos_token": "<|startoftext|>", "eos_token": "<|im_end|>", "pad_token": "<|pad|>", "chat_template": lfm2_t}))
write("tokenizer_config", "qwen35.json", json.dumps(
    {"bos_token": None, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "chat_template": qwen_t}))
write("tokenizer_config", "objects.json", json.dumps(
    {"bos_token": {"content": "<|startoftext|>", "lstrip": False}, "eos_token": {"content": "<|endoftext|>"},
     "add_bos_token": True, "chat_template": [{"name": "tool_use", "template": "x"},
                                              {"name": "default", "template": chatml_t}]}))

# generation_config.json: eos as an integer, a list, with bos/pad ids; bad values
write("generation_config", "list.json", json.dumps({"bos_token_id": 257, "eos_token_id": [260, 258], "pad_token_id": 256}))
write("generation_config", "int.json", json.dumps({"eos_token_id": 260, "do_sample": True, "temperature": 0.7}))
write("generation_config", "odd.json", json.dumps({"eos_token_id": [1e300, -1, 3.5, "x", None], "bos_token_id": 99999}))
# regressions: more eos ids than the stop list holds (the template's <|im_end|>
# was dropped), a fractional id (was truncated into a stop token)
write("generation_config", "regress-stop-overflow.json", json.dumps({"eos_token_id": list(range(2, 20))}))
write("generation_config", "regress-fractional-id.json", json.dumps({"eos_token_id": [43.6, 2]}))

# chat templates: template NUL bos_token NUL system NUL user NUL assistant NUL user
def chat(flags, template, bos, *msgs):
    return bytes([flags]) + b"\0".join(x.encode() for x in (template, bos) + msgs)
write("chat_template", "lfm2", chat(2, lfm2_t, "<|startoftext|>", "Be brief.", "Hi", "Hello!", "Who are you?"))
write("chat_template", "qwen", chat(1, qwen_t, "", "caf\u00e9 \U0001F600", "<|im_end|>x"))
write("chat_template", "chatml", chat(0, chatml_t, "<s>", "", "a\nb"))
# the real templates of tests/data/chat_templates, each with a conversation
tdir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "chat_templates")
for fname in sorted(os.listdir(tdir)):
    if fname in ("cases.json", "expected.json") or not fname.endswith(".json"):
        continue
    cfg = json.load(open(os.path.join(tdir, fname)))
    write("chat_template", "real-" + fname[:-5], chat(3, cfg["chat_template"], cfg["bos_token"] or "",
                                                     "Be brief.", "  Hi \u00e9  ", "Hello!", "Who are you?"))
