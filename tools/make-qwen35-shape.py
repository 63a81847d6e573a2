#!/usr/bin/env python3
"""A Qwen 3.5 0.8B- or 2B-shaped text checkpoint for speed runs on machines without
torch (tests/parity/hf_reference.py needs it): config.json +
model.safetensors (f32) with the tensor names and shapes `wisp convert`
reads, in plain Python (no numpy).

    tools/make-qwen35-shape.py OUT_DIR [0.8b|2b]   (then: wisp convert OUT_DIR -o ART --quant q4k)

The values are not a trained or HF-initialised model: norms, conv taps,
dt_bias and A_log get small plausible values; every matrix is a run of one
seeded table of 2^20 uniform values in [-0.5, 0.5) (starting at a different
place per tensor), because drawing 0.8 billion values one by one in Python
takes many minutes. Its speed is that of the shape; use hf_reference.py
for anything numerical."""
import json, struct, array, random, os, sys
if len(sys.argv) not in (2, 3) or sys.argv[1].startswith("-") or sys.argv[2:] not in ([], ["0.8b"], ["2b"]):
    sys.exit(__doc__)
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
# Qwen3.5-0.8B and Qwen3.5-2B differ in hidden size and MLP width only
H, F = (2048, 6144) if sys.argv[2:] == ["2b"] else (1024, 3584)
L, NH, KVH, D = 24, 8, 2, 256
LK, LVH, DK, DV, CK, V = 16, 16, 128, 128, 4, 248320
types = ["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(L)]
cfg = {"architectures": ["Qwen3_5ForCausalLM"], "model_type": "qwen3_5_text", "hidden_size": H,
       "intermediate_size": F, "num_hidden_layers": L, "num_attention_heads": NH, "num_key_value_heads": KVH,
       "head_dim": D, "linear_conv_kernel_dim": CK, "linear_num_key_heads": LK, "linear_num_value_heads": LVH,
       "linear_key_head_dim": DK, "linear_value_head_dim": DV, "layer_types": types, "vocab_size": V,
       "rms_norm_eps": 1e-6, "max_position_embeddings": 262144,
       "rope_parameters": {"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25},
       "tie_word_embeddings": True, "hidden_act": "silu"}
json.dump(cfg, open(os.path.join(out, "config.json"), "w"))
K, VW = LK * DK, LVH * DV
CONV = 2 * K + VW
t = [("model.embed_tokens.weight", [V, H], "mat"), ("model.norm.weight", [H], "norm")]
for i in range(L):
    p = "model.layers.%d." % i
    t += [(p + "input_layernorm.weight", [H], "norm"), (p + "post_attention_layernorm.weight", [H], "norm"),
          (p + "mlp.gate_proj.weight", [F, H], "mat"), (p + "mlp.up_proj.weight", [F, H], "mat"),
          (p + "mlp.down_proj.weight", [H, F], "mat")]
    if types[i] == "full_attention":
        t += [(p + "self_attn.q_proj.weight", [NH * 2 * D, H], "mat"), (p + "self_attn.k_proj.weight", [KVH * D, H], "mat"),
              (p + "self_attn.v_proj.weight", [KVH * D, H], "mat"), (p + "self_attn.o_proj.weight", [H, NH * D], "mat"),
              (p + "self_attn.q_norm.weight", [D], "norm"), (p + "self_attn.k_norm.weight", [D], "norm")]
    else:
        t += [(p + "linear_attn.in_proj_qkv.weight", [CONV, H], "mat"), (p + "linear_attn.in_proj_z.weight", [VW, H], "mat"),
              (p + "linear_attn.in_proj_b.weight", [LVH, H], "mat"), (p + "linear_attn.in_proj_a.weight", [LVH, H], "mat"),
              (p + "linear_attn.conv1d.weight", [CONV, 1, CK], "mat"), (p + "linear_attn.dt_bias", [LVH], "dt"),
              (p + "linear_attn.A_log", [LVH], "alog"), (p + "linear_attn.norm.weight", [DV], "gnorm"),
              (p + "linear_attn.out_proj.weight", [H, VW], "mat")]
rng = random.Random(1)
base = array.array("f", [rng.random() - 0.5 for _ in range(1 << 20)])
hdr, off = {}, 0
for name, shape, kind in t:
    n = 1
    for s in shape: n *= s
    hdr[name] = {"dtype": "F32", "shape": shape, "data_offsets": [off, off + 4 * n]}
    off += 4 * n
h = json.dumps(hdr).encode()
h += b" " * ((8 - len(h) % 8) % 8)
with open(os.path.join(out, "model.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(h))); f.write(h)
    for k, (name, shape, kind) in enumerate(t):
        n = 1
        for s in shape: n *= s
        if kind == "norm": a = array.array("f", [0.1 * (rng.random() - 0.5) for _ in range(n)])
        elif kind == "gnorm": a = array.array("f", [1.0 + 0.1 * (rng.random() - 0.5) for _ in range(n)])
        elif kind == "dt": a = array.array("f", [-2.0 + 0.5 * (rng.random() - 0.5) for _ in range(n)])
        elif kind == "alog": a = array.array("f", [-1.5 + rng.random() for _ in range(n)])
        else:  # the table from a per-tensor start, repeated
            a = array.array("f")
            s = (k * 7919) % (1 << 20)
            while len(a) < n:
                a.extend(base[s:s + min(n - len(a), (1 << 20) - s)])
                s = 0
        a.tofile(f)
print("wrote", off / 1e9, "GB")
