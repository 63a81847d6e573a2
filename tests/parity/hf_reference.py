#!/usr/bin/env python3
"""Hugging Face reference for wisp's LFM2 and Qwen 3.5 parity checks.

Runs where torch + transformers (5.x) + numpy are installed (the GPU machine);
wisp itself never imports this.

  build     --config small|lfm2-350m|qwen35-small|qwen35-0.8b|qwen35-2b|qwen3-small|llama-small|llama32-1b
            --seed S --out HF_DIR
            A random Lfm2ForCausalLM or Qwen3_5ForCausalLM (text) in float32,
            saved with save_pretrained
            (config.json + model.safetensors), plus HF_DIR/prompts.json:
            {"prompts": [[ids], ...], "greedy_prompt": 1} with prompts of 1, 17
            and 300 token ids from a seeded RNG.

  reference --hf HF_DIR --prompts P --out REF.json [--greedy 128]
            [--dequant-from ARTIFACT_DIR] [--device cpu|cuda]
            Final-position logits of each prompt (one plain forward over the
            whole prompt) and N greedy tokens from prompt `greedy_prompt`
            (argmax, ties to the lowest id, with the KV/conv cache). With
            --dequant-from, every weight is first replaced by the values
            dequantized from wisp's artifact (Q4 / Q4Z / Q4_K / f32 sections, byte
            layouts of src/format/tensor.h), so the q4 comparison measures the
            engine, not the quantizer.
            Writes {"logits": [[...], ...], "greedy": [...]} (9 significant
            digits), the format of `wisp logits`, plus diagnostic keys
            (greedy_min_margin, greedy_nocache_agrees) that compare.py ignores.
"""
import argparse
import inspect
import json
import math
import os
import random
import sys

PROMPT_LENGTHS = (1, 17, 300)
GREEDY_PROMPT = 1

CONFIGS = {
    # The released LFM2-350M shape (FFN width 4608 after the auto-adjust rule).
    "lfm2-350m": dict(
        hidden_size=1024, num_hidden_layers=16, num_attention_heads=16, num_key_value_heads=8,
        intermediate_size=6656, block_auto_adjust_ff_dim=True, block_ffn_dim_multiplier=1.0,
        block_multiple_of=256, conv_L_cache=3, attn_layers=(2, 5, 8, 10, 12, 14), vocab_size=65536,
        rope_theta=1000000.0, norm_eps=1e-5, max_position_embeddings=128000, tie=True,
    ),
    # A small model for CI: FFN int(2*192/3)=128, rounded up to 256.
    "small": dict(
        hidden_size=64, num_hidden_layers=6, num_attention_heads=4, num_key_value_heads=2,
        intermediate_size=192, block_auto_adjust_ff_dim=True, block_ffn_dim_multiplier=1.0,
        block_multiple_of=256, conv_L_cache=3, attn_layers=(2, 4), vocab_size=512,
        rope_theta=1000000.0, norm_eps=1e-5, max_position_embeddings=1024, tie=True,
    ),
}

# Qwen 3.5 text models (Qwen3_5TextConfig + Qwen3_5ForCausalLM). layer_types
# default to Qwen's pattern: "linear_attention" x3 then "full_attention".
# vocab_size None = Qwen3_5TextConfig()'s default (the released 248320).
QWEN_CONFIGS = {
    # Qwen3.5-0.8B text shape (~752 M parameters with the default vocab).
    "qwen35-0.8b": dict(
        hidden_size=1024, num_hidden_layers=24, num_attention_heads=8, num_key_value_heads=2, head_dim=256,
        linear_num_key_heads=16, linear_num_value_heads=16, linear_key_head_dim=128, linear_value_head_dim=128,
        linear_conv_kernel_dim=4, intermediate_size=3584, vocab_size=None, rope_theta=10000000.0,
        partial_rotary_factor=0.25, rms_norm_eps=1e-6, max_position_embeddings=262144, tie=True,
    ),
    # Qwen3.5-2B text shape (the released 2B text config as stated in the brief;
    # Qwen3_5TextConfig()'s defaults are a larger model, hidden 4096).
    "qwen35-2b": dict(
        hidden_size=2048, num_hidden_layers=24, num_attention_heads=8, num_key_value_heads=2, head_dim=256,
        linear_num_key_heads=16, linear_num_value_heads=16, linear_key_head_dim=128, linear_value_head_dim=128,
        linear_conv_kernel_dim=4, intermediate_size=6144, vocab_size=None, rope_theta=10000000.0,
        partial_rotary_factor=0.25, rms_norm_eps=1e-6, max_position_embeddings=262144, tie=True,
    ),
    # A small model for CI: 3 linear + 1 full layer; intermediate 256 so that
    # --quant q4k has Q4_K matrices (down_proj) next to Q4 fallbacks (cols 128).
    "qwen35-small": dict(
        hidden_size=128, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, head_dim=32,
        linear_num_key_heads=4, linear_num_value_heads=4, linear_key_head_dim=32, linear_value_head_dim=32,
        linear_conv_kernel_dim=4, intermediate_size=256, vocab_size=512, rope_theta=10000000.0,
        partial_rotary_factor=0.25, rms_norm_eps=1e-6, max_position_embeddings=1024, tie=True,
    ),
}
# Dense Llama-style models (LlamaConfig / Qwen3Config, random init). wisp
# imports Qwen3ForCausalLM (as an all-attention lfm2 graph); LlamaForCausalLM
# (no q/k norm, llama3 rope scaling) is reference data for the coming llama
# architecture. intermediate 256 so that --quant q4k has Q4_K down matrices.
DENSE_CONFIGS = {
    "qwen3-small": dict(
        cls="Qwen3", hidden_size=128, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, head_dim=64,
        intermediate_size=256, vocab_size=512, rope_theta=1000000.0, rms_norm_eps=1e-6, max_position_embeddings=1024,
        tie_word_embeddings=True, attention_bias=False, use_sliding_window=False,
    ),
    "llama-small": dict(
        cls="Llama", hidden_size=128, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, head_dim=32,
        intermediate_size=256, vocab_size=512, rope_theta=500000.0, rms_norm_eps=1e-5, max_position_embeddings=1024,
        tie_word_embeddings=False, attention_bias=False, mlp_bias=False,
        rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                          original_max_position_embeddings=256),
    ),
    # The released Llama 3.2 1B shape (meta-llama/Llama-3.2-1B's config.json; ~1.24 B
    # parameters), for bench/realfile-h200.sh: llama.cpp's own converter reads it.
    "llama32-1b": dict(
        cls="Llama", hidden_size=2048, num_hidden_layers=16, num_attention_heads=32, num_key_value_heads=8, head_dim=64,
        intermediate_size=8192, vocab_size=128256, rope_theta=500000.0, rms_norm_eps=1e-5,
        max_position_embeddings=131072, tie_word_embeddings=True, attention_bias=False, mlp_bias=False,
        bos_token_id=128000, eos_token_id=128001,
        rope_scaling=dict(rope_type="llama3", factor=32.0, low_freq_factor=1.0, high_freq_factor=4.0,
                          original_max_position_embeddings=8192),
    ),
}
ALL_CONFIGS = sorted(list(CONFIGS) + list(QWEN_CONFIGS) + list(DENSE_CONFIGS))

# Effective FFN widths after Lfm2MLP's auto-adjust (int(2*I/3), x1.0, round up to 256).
EXPECTED_FFN = {"lfm2-350m": 4608, "small": 256}


def dense_class_of_dir(hf_dir):
    """'Qwen3' / 'Llama' for a dense checkpoint, else None."""
    with open(os.path.join(hf_dir, "config.json")) as f:
        cfg = json.load(f)
    archs = cfg.get("architectures") or []
    if cfg.get("model_type") == "qwen3" or "Qwen3ForCausalLM" in archs:
        return "Qwen3"
    if cfg.get("model_type") == "llama" or "LlamaForCausalLM" in archs:
        return "Llama"
    return None


def build_dense(args):
    import torch
    import transformers

    c = dict(DENSE_CONFIGS[args.config])
    cls = c.pop("cls")
    torch.set_default_dtype(torch.float32)
    config_cls = getattr(transformers, cls + "Config")
    params = inspect.signature(config_cls.__init__).parameters
    if "rope_parameters" in params:  # transformers 5: rope settings in one dict
        rp = dict(c.pop("rope_scaling", None) or {"rope_type": "default"})
        rp["rope_theta"] = c.pop("rope_theta")
        c["rope_parameters"] = rp
    cfg = config_cls(**c)
    torch.manual_seed(args.seed)
    model = getattr(transformers, cls + "ForCausalLM")(cfg).to(torch.float32).eval()
    randomize(model, cfg.hidden_size)
    return model, cfg, "%s dense" % cls


def is_qwen_dir(hf_dir):
    with open(os.path.join(hf_dir, "config.json")) as f:
        cfg = json.load(f)
    return cfg.get("model_type") in ("qwen3_5", "qwen3_5_text") or "Qwen3_5ForCausalLM" in (cfg.get("architectures") or [])


def die(msg):
    print("hf_reference.py: " + msg, file=sys.stderr)
    sys.exit(1)


# ---------------------------------------------------------------- build

def make_config(name):
    from transformers import Lfm2Config

    c = dict(CONFIGS[name])
    attn = set(c.pop("attn_layers"))
    theta = c.pop("rope_theta")
    tie = c.pop("tie")
    n = c["num_hidden_layers"]
    params = inspect.signature(Lfm2Config.__init__).parameters
    kw = dict(c)
    kw["conv_bias"] = False
    # Both spellings, consistent: releases that know only one store the other
    # as a plain attribute. The result is checked below either way.
    kw["layer_types"] = ["full_attention" if i in attn else "conv" for i in range(n)]
    kw["full_attn_idxs"] = sorted(attn)
    if "rope_parameters" in params:
        kw["rope_parameters"] = {"rope_type": "default", "rope_theta": theta}
    else:
        kw["rope_theta"] = theta
    if "tie_embedding" in params:
        kw["tie_embedding"] = tie
    kw["tie_word_embeddings"] = tie
    cfg = Lfm2Config(**kw)
    types = getattr(cfg, "layer_types", None)
    got = [i for i, t in enumerate(types or []) if t == "full_attention"]
    if got != sorted(attn):
        die("config %s: attention layers %s, wanted %s" % (name, got, sorted(attn)))
    rp = getattr(cfg, "rope_parameters", None)
    if isinstance(rp, dict) and isinstance(rp.get("full_attention"), dict):
        rp = rp["full_attention"]  # parameters keyed by layer type
    eff = rp.get("rope_theta") if isinstance(rp, dict) else getattr(cfg, "rope_theta", None)
    if eff is None or float(eff) != theta:
        die("config %s: rope theta is %s, wanted %s" % (name, eff, theta))
    return cfg


def make_qwen_config(name):
    from transformers import Qwen3_5TextConfig

    c = dict(QWEN_CONFIGS[name])
    theta = c.pop("rope_theta")
    prf = c.pop("partial_rotary_factor")
    tie = c.pop("tie")
    if c["vocab_size"] is None:
        c["vocab_size"] = Qwen3_5TextConfig().vocab_size
    n = c["num_hidden_layers"]
    c["layer_types"] = ["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(n)]
    c["rope_parameters"] = {"rope_type": "default", "rope_theta": theta, "partial_rotary_factor": prf}
    c["tie_word_embeddings"] = tie
    c["hidden_act"] = "silu"
    cfg = Qwen3_5TextConfig(**c)
    rp = getattr(cfg, "rope_parameters", None) or {}
    if float(rp.get("rope_theta", -1)) != theta or float(rp.get("partial_rotary_factor", prf)) != prf:
        die("config %s: rope parameters %s, wanted theta %s factor %s" % (name, rp, theta, prf))
    if list(cfg.layer_types) != c["layer_types"]:
        die("config %s: layer types %s" % (name, cfg.layer_types))
    return cfg


def randomize_qwen(model, hidden):
    """Matrices N(0, 0.64/sqrt(hidden)); Qwen3_5RMSNorm weights (used as 1 + w)
    0.1 N(0,1); the gated norm weight 1 + 0.1 N(0,1); conv taps N(0, 0.5);
    A_log = log U(0.02, 1) and dt_bias -2 + 0.5 N(0,1), so the per-token decay
    exp(-A softplus(a + dt_bias)) stays near 1 and the recurrent state really
    carries across tokens (HF's init, A in U(0.01, 16) with dt_bias 1, forgets
    most of it at every step)."""
    import torch

    std = 0.64 / math.sqrt(hidden)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("linear_attn.norm.weight"):
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
            elif name.endswith("norm.weight"):
                p.copy_(0.1 * torch.randn_like(p))
            elif name.endswith("conv1d.weight"):
                p.copy_(0.5 * torch.randn_like(p))
            elif name.endswith("A_log"):
                p.copy_(torch.empty_like(p).uniform_(0.02, 1.0).log())
            elif name.endswith("dt_bias"):
                p.copy_(-2.0 + 0.5 * torch.randn_like(p))
            elif p.dim() == 2:
                p.copy_(std * torch.randn_like(p))
            else:
                die("unexpected parameter %s %s" % (name, tuple(p.shape)))


def build_qwen(args):
    import torch
    from transformers import Qwen3_5ForCausalLM

    torch.set_default_dtype(torch.float32)
    cfg = make_qwen_config(args.config)
    torch.manual_seed(args.seed)
    model = Qwen3_5ForCausalLM(cfg).to(torch.float32).eval()
    randomize_qwen(model, cfg.hidden_size)
    return model, cfg, "intermediate %d, layer types %s" % (
        cfg.intermediate_size, "".join("L" if t == "linear_attention" else "F" for t in cfg.layer_types))


def randomize(model, hidden):
    """Weights with O(1) activations: matrices N(0, 0.64/sqrt(hidden)) (0.02 for
    hidden 1024, transformers' default init), norms 1 + 0.1 N(0,1), conv taps
    N(0, 0.5), so every norm and the conv path is really exercised."""
    import torch

    std = 0.64 / math.sqrt(hidden)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight") or name.endswith("layernorm.weight"):
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
            elif name.endswith("conv.conv.weight"):
                p.copy_(0.5 * torch.randn_like(p))
            elif p.dim() == 2:
                p.copy_(std * torch.randn_like(p))
            else:
                die("unexpected parameter %s %s" % (name, tuple(p.shape)))


def cmd_build(args):
    import torch

    if args.config in QWEN_CONFIGS:
        model, cfg, what = build_qwen(args)
    elif args.config in DENSE_CONFIGS:
        model, cfg, what = build_dense(args)
    else:
        from transformers import Lfm2ForCausalLM

        torch.set_default_dtype(torch.float32)
        cfg = make_config(args.config)
        torch.manual_seed(args.seed)
        model = Lfm2ForCausalLM(cfg).to(torch.float32).eval()
        randomize(model, cfg.hidden_size)
        ffn = model.model.layers[0].feed_forward.w1.out_features
        if ffn != EXPECTED_FFN[args.config]:
            die("config %s: FFN width %d, expected %d" % (args.config, ffn, EXPECTED_FFN[args.config]))
        what = "ffn %d" % ffn
    nparams = sum(p.numel() for p in model.parameters())
    os.makedirs(args.out, exist_ok=True)
    try:
        model.save_pretrained(args.out, safe_serialization=True)
    except TypeError:  # newer releases always write safetensors
        model.save_pretrained(args.out)
    if not os.path.exists(os.path.join(args.out, "model.safetensors")) and not os.path.exists(
        os.path.join(args.out, "model.safetensors.index.json")
    ):
        die("save_pretrained wrote no safetensors into %s" % args.out)
    rng = random.Random(args.seed)
    prompts = [[rng.randrange(cfg.vocab_size) for _ in range(n)] for n in PROMPT_LENGTHS]
    with open(os.path.join(args.out, "prompts.json"), "w") as f:
        json.dump({"prompts": prompts, "greedy_prompt": GREEDY_PROMPT}, f)
        f.write("\n")
    print("built %s: %.1f M parameters, %s, vocab %d, tied %s -> %s" % (
        args.config, nparams / 1e6, what, cfg.vocab_size, getattr(cfg, "tie_word_embeddings", None), args.out))


# ---------------------------------------------------------------- wisp artifact

class Artifact:
    """Reads a wisp artifact's sections back as HF-shaped numpy arrays."""

    def __init__(self, path):
        import numpy as np

        self.np = np
        with open(os.path.join(path, "manifest.json")) as f:
            self.manifest = json.load(f)
        rt = self.manifest["runtime"]
        self.shape = rt["shape"]
        with open(os.path.join(path, "weights.bin"), "rb") as f:
            self.buf = f.read()
        if len(self.buf) != rt["weightBytes"]:
            die("%s/weights.bin has %d bytes, manifest says %d" % (path, len(self.buf), rt["weightBytes"]))
        self.sections = {s["name"]: (int(s["offset"]), int(s["bytes"])) for s in rt["sections"]}

    def raw(self, name, dtype, count):
        np = self.np
        if name not in self.sections:
            die("artifact has no section %s" % name)
        off, nbytes = self.sections[name]
        if nbytes != count * np.dtype(dtype).itemsize:
            die("section %s: %d bytes, expected %d x %s" % (name, nbytes, count, dtype))
        return np.frombuffer(self.buf, dtype=dtype, count=count, offset=off)

    def vector(self, name, n):
        return self.raw(name, "<f4", n).astype(self.np.float32)

    def matrix(self, base, rows, cols):
        """f32 (.weight), Q4 (.quant/.scales) or Q4Z (+ .zero_points), Q4_K (.q4k), F16 (.f16) or
        Q8_0 (.q8_0), as tensor.h lays them out."""
        np = self.np
        if base + ".weight" in self.sections:
            return self.raw(base + ".weight", "<f4", rows * cols).reshape(rows, cols).astype(np.float32)
        if base + ".q4k" in self.sections:
            return self.q4k(base, rows, cols)
        if base + ".f16" in self.sections:
            return self.raw(base + ".f16", "<f2", rows * cols).reshape(rows, cols).astype(np.float32)
        if base + ".q8_0" in self.sections:
            # ggml Q8_0: per 32 elements 34 bytes = f16 scale d, then 32 int8; value = d * q (f32)
            if cols % 32:
                die("%s.q8_0: %d columns is not a multiple of 32" % (base, cols))
            nblk = rows * cols // 32
            b = self.raw(base + ".q8_0", np.uint8, nblk * 34).reshape(nblk, 34)
            d = b[:, 0:2].copy().view("<f2").astype(np.float32)
            q = b[:, 2:].copy().view(np.int8).astype(np.float32)
            return (d * q).reshape(rows, cols).astype(np.float32)
        if cols % 32:
            die("%s: %d columns is not a multiple of 32" % (base, cols))
        nb = cols // 32
        q = self.raw(base + ".quant", np.uint8, rows * cols // 2).reshape(rows, cols // 2)
        nib = np.empty((rows, cols), dtype=np.uint8)
        nib[:, 0::2] = q & 15  # element 2j: low nibble of byte j
        nib[:, 1::2] = q >> 4  # element 2j+1: high nibble
        scales = self.raw(base + ".scales", "<f4", rows * nb).reshape(rows, nb)
        if base + ".zero_points" in self.sections:
            nblocks = rows * nb
            z = self.raw(base + ".zero_points", np.uint8, (nblocks + 1) // 2)
            zz = np.empty(z.size * 2, dtype=np.uint8)
            zz[0::2] = z & 15  # block 2k: low nibble
            zz[1::2] = z >> 4
            zero = zz[:nblocks].reshape(rows, nb).astype(np.float32)
        else:
            zero = np.full((rows, nb), 8.0, dtype=np.float32)
        w = (nib.reshape(rows, nb, 32).astype(np.float32) - zero[:, :, None]) * scales[:, :, None]
        return w.reshape(rows, cols).astype(np.float32)

    def q4k(self, base, rows, cols):
        """Q4_K, llama.cpp's super-block layout as tensor.h describes it: per 256
        elements 144 bytes = f16 d, f16 dmin, 12 bytes of 6-bit scales/mins for
        8 sub-blocks of 32, 128 bytes of nibbles (64 elements per 32 bytes: low
        nibbles first 32, high nibbles next 32); value = d*sc*q - dmin*m."""
        np = self.np
        if cols % 256:
            die("%s.q4k: %d columns is not a multiple of 256" % (base, cols))
        nsb = rows * cols // 256
        b = self.raw(base + ".q4k", np.uint8, nsb * 144).reshape(nsb, 144)
        d = b[:, 0:2].copy().view("<f2").astype(np.float32)[:, 0]
        dmin = b[:, 2:4].copy().view("<f2").astype(np.float32)[:, 0]
        p = b[:, 4:16].astype(np.int32)
        sc = np.empty((nsb, 8), dtype=np.int32)
        mn = np.empty((nsb, 8), dtype=np.int32)
        for j in range(4):
            sc[:, j] = p[:, j] & 63
            mn[:, j] = p[:, j + 4] & 63
            sc[:, j + 4] = (p[:, j + 8] & 15) | ((p[:, j] >> 6) << 4)
            mn[:, j + 4] = (p[:, j + 8] >> 4) | ((p[:, j + 4] >> 6) << 4)
        qs = b[:, 16:].reshape(nsb, 4, 32)
        nib = np.empty((nsb, 4, 2, 32), dtype=np.float32)
        nib[:, :, 0, :] = qs & 15
        nib[:, :, 1, :] = qs >> 4
        nib = nib.reshape(nsb, 8, 32)
        # in f32 as wisp computes it: (d*sc) * q - (dmin*m)
        ds = (d[:, None] * sc.astype(np.float32)).astype(np.float32)
        dm = (dmin[:, None] * mn.astype(np.float32)).astype(np.float32)
        w = ds[:, :, None] * nib - dm[:, :, None]
        return w.reshape(rows, cols).astype(np.float32)

    def shares(self, a, b):
        return a in self.sections and b in self.sections and self.sections[a] == self.sections[b]

    def head_tied(self):
        """True when the artifact has no head matrix of its own (or one sharing embed's bytes)."""
        kinds = ("quant", "weight", "q4k", "f16", "q8_0")
        if not any("head." + k in self.sections for k in kinds):
            return True
        return any(self.shares("head." + k, "embed." + k) for k in kinds)

    def hf_tensors_dense(self, qk_norm):
        """All-attention lfm2 sections of a Qwen3 / Llama import (docs/convert.md) ->
        Qwen3ForCausalLM / LlamaForCausalLM tensors (plain RMSNorm weights; Llama:
        no q/k norm)."""
        s = self.shape
        H, F, V, D = s["hidden"], s["ffn"], s["vocab"], s["headDim"]
        NH, KV = s["heads"], s["kvHeads"]
        out = {}
        for i, kind in enumerate(s["layerTypes"]):
            if kind != "attention":
                die("layer %d is %s: a dense artifact has attention layers only" % (i, kind))
            p = "model.layers.%d." % i
            qkv = self.matrix("L%d.attn.qkv" % i, (NH + 2 * KV) * D, H)
            out[p + "self_attn.q_proj.weight"] = qkv[: NH * D]
            out[p + "self_attn.k_proj.weight"] = qkv[NH * D: (NH + KV) * D]
            out[p + "self_attn.v_proj.weight"] = qkv[(NH + KV) * D:]
            out[p + "self_attn.o_proj.weight"] = self.matrix("L%d.attn.o_proj" % i, H, NH * D)
            out[p + "input_layernorm.weight"] = self.vector("L%d.attn.qkv.norm" % i, H)
            if qk_norm:
                out[p + "self_attn.q_norm.weight"] = self.vector("L%d.attn.qkv.q_norm" % i, D)
                out[p + "self_attn.k_norm.weight"] = self.vector("L%d.attn.qkv.k_norm" % i, D)
            gu = self.matrix("L%d.mlp.gate_up" % i, 2 * F, H)
            out[p + "mlp.gate_proj.weight"] = gu[:F]
            out[p + "mlp.up_proj.weight"] = gu[F:]
            out[p + "mlp.down_proj.weight"] = self.matrix("L%d.mlp.down" % i, H, F)
            out[p + "post_attention_layernorm.weight"] = self.vector("L%d.mlp.gate_up.norm" % i, H)
        out["model.embed_tokens.weight"] = self.matrix("embed", V, H)
        tied = self.head_tied()
        if not tied:
            out["lm_head.weight"] = self.matrix("head", V, H)
        out["model.norm.weight"] = self.vector("head.norm", H)
        return out, tied

    def hf_tensors(self):
        """Section -> HF tensor mapping (docs/convert.md), inverted."""
        s = self.shape
        H, F, V, D = s["hidden"], s["ffn"], s["vocab"], s["headDim"]
        NH, KV, L = s["heads"], s["kvHeads"], s["convCache"]
        out = {}
        for i, kind in enumerate(s["layerTypes"]):
            p = "model.layers.%d." % i
            if kind == "conv":
                out[p + "conv.in_proj.weight"] = self.matrix("L%d.conv.in_proj" % i, 3 * H, H)
                out[p + "conv.out_proj.weight"] = self.matrix("L%d.conv.out_proj" % i, H, H)
                out[p + "operator_norm.weight"] = self.vector("L%d.conv.in_proj.norm" % i, H)
                out[p + "conv.conv.weight"] = self.vector("L%d.conv.core.taps" % i, H * L).reshape(H, 1, L)
            else:
                qkv = self.matrix("L%d.attn.qkv" % i, (NH + 2 * KV) * D, H)
                out[p + "self_attn.q_proj.weight"] = qkv[: NH * D]
                out[p + "self_attn.k_proj.weight"] = qkv[NH * D: (NH + KV) * D]
                out[p + "self_attn.v_proj.weight"] = qkv[(NH + KV) * D:]
                out[p + "self_attn.out_proj.weight"] = self.matrix("L%d.attn.o_proj" % i, H, NH * D)
                out[p + "operator_norm.weight"] = self.vector("L%d.attn.qkv.norm" % i, H)
                out[p + "self_attn.q_layernorm.weight"] = self.vector("L%d.attn.qkv.q_norm" % i, D)
                out[p + "self_attn.k_layernorm.weight"] = self.vector("L%d.attn.qkv.k_norm" % i, D)
            gu = self.matrix("L%d.mlp.gate_up" % i, 2 * F, H)
            out[p + "feed_forward.w1.weight"] = gu[:F]
            out[p + "feed_forward.w3.weight"] = gu[F:]
            out[p + "feed_forward.w2.weight"] = self.matrix("L%d.mlp.down" % i, H, F)
            out[p + "ffn_norm.weight"] = self.vector("L%d.mlp.gate_up.norm" % i, H)
        out["model.embed_tokens.weight"] = self.matrix("embed", V, H)
        tied = self.shares("head.quant", "embed.quant") or self.shares("head.weight", "embed.weight") or not (
            "head.quant" in self.sections or "head.weight" in self.sections)
        if not tied:
            out["lm_head.weight"] = self.matrix("head", V, H)
        out["model.embedding_norm.weight"] = self.vector("head.norm", H)
        return out, tied


    def hf_tensors_qwen(self):
        """Qwen 3.5 sections (docs/artifact.md) -> Qwen3_5ForCausalLM tensors.
        (1 + w) norm sections give back w = stored - 1 (exact in f32 for
        stored in [0.5, 2], and HF recomputes 1 + w = stored)."""
        s = self.shape
        H, F, V, D = s["hidden"], s["ffn"], s["vocab"], s["headDim"]
        NH, KV, L = s["heads"], s["kvHeads"], s["convCache"]
        NK, NV, DK, DV = s["linearKeyHeads"], s["linearValueHeads"], s["linearKeyDim"], s["linearValueDim"]
        K, LV = NK * DK, NV * DV
        one = self.np.float32(1.0)
        out = {}
        for i, kind in enumerate(s["layerTypes"]):
            p = "model.layers.%d." % i
            if kind == "linear_attention":
                m = self.matrix("L%d.lin.in_proj" % i, 2 * K + 2 * LV + 2 * NV, H)
                out[p + "linear_attn.in_proj_qkv.weight"] = m[: 2 * K + LV]
                out[p + "linear_attn.in_proj_z.weight"] = m[2 * K + LV: 2 * K + 2 * LV]
                out[p + "linear_attn.in_proj_b.weight"] = m[2 * K + 2 * LV: 2 * K + 2 * LV + NV]
                out[p + "linear_attn.in_proj_a.weight"] = m[2 * K + 2 * LV + NV:]
                out[p + "linear_attn.out_proj.weight"] = self.matrix("L%d.lin.out_proj" % i, H, LV)
                out[p + "input_layernorm.weight"] = self.vector("L%d.lin.in_proj.norm" % i, H) - one
                out[p + "linear_attn.conv1d.weight"] = self.vector("L%d.lin.conv.taps" % i, (2 * K + LV) * L).reshape(
                    2 * K + LV, 1, L)
                out[p + "linear_attn.A_log"] = self.vector("L%d.lin.A_log" % i, NV)
                out[p + "linear_attn.dt_bias"] = self.vector("L%d.lin.dt_bias" % i, NV)
                out[p + "linear_attn.norm.weight"] = self.vector("L%d.lin.norm" % i, DV)
            else:
                qkv = self.matrix("L%d.attn.qkv" % i, (2 * NH + 2 * KV) * D, H)
                out[p + "self_attn.q_proj.weight"] = qkv[: 2 * NH * D]
                out[p + "self_attn.k_proj.weight"] = qkv[2 * NH * D: (2 * NH + KV) * D]
                out[p + "self_attn.v_proj.weight"] = qkv[(2 * NH + KV) * D:]
                out[p + "self_attn.o_proj.weight"] = self.matrix("L%d.attn.o_proj" % i, H, NH * D)
                out[p + "input_layernorm.weight"] = self.vector("L%d.attn.qkv.norm" % i, H) - one
                out[p + "self_attn.q_norm.weight"] = self.vector("L%d.attn.qkv.q_norm" % i, D) - one
                out[p + "self_attn.k_norm.weight"] = self.vector("L%d.attn.qkv.k_norm" % i, D) - one
            gu = self.matrix("L%d.mlp.gate_up" % i, 2 * F, H)
            out[p + "mlp.gate_proj.weight"] = gu[:F]
            out[p + "mlp.up_proj.weight"] = gu[F:]
            out[p + "mlp.down_proj.weight"] = self.matrix("L%d.mlp.down" % i, H, F)
            out[p + "post_attention_layernorm.weight"] = self.vector("L%d.mlp.gate_up.norm" % i, H) - one
        out["model.embed_tokens.weight"] = self.matrix("embed", V, H)
        tied = self.shares("head.quant", "embed.quant") or self.shares("head.weight", "embed.weight") or not (
            "head.quant" in self.sections or "head.weight" in self.sections)
        if not tied:
            out["lm_head.weight"] = self.matrix("head", V, H)
        out["model.norm.weight"] = self.vector("head.norm", H) - one
        return out, tied


def load_dequantized(model, artifact_dir, dense=None):
    """dense: 'Qwen3' / 'Llama' for a dense checkpoint (dense_class_of_dir), else None."""
    import numpy as np
    import torch

    art = Artifact(artifact_dir)
    arch = art.manifest.get("wisp", {}).get("architecture", "lfm2")
    if dense:
        tensors, tied = art.hf_tensors_dense(dense == "Qwen3")
    else:
        tensors, tied = art.hf_tensors_qwen() if arch == "qwen3_5" else art.hf_tensors()
    sd = model.state_dict()
    for name, arr in tensors.items():
        if name not in sd:
            die("%s: %s is not a parameter of the HF model" % (artifact_dir, name))
        t = sd[name]
        if tuple(t.shape) != tuple(arr.shape):
            die("%s: %s is %s in the artifact, %s in the model" % (artifact_dir, name, arr.shape, tuple(t.shape)))
        with torch.no_grad():
            t.copy_(torch.from_numpy(np.ascontiguousarray(arr, dtype=np.float32)))
    missing = [n for n, _ in model.named_parameters() if n not in tensors]
    if missing and not (tied and missing == ["lm_head.weight"]):
        die("%s: no artifact values for %s" % (artifact_dir, ", ".join(missing)))
    emb = model.get_input_embeddings().weight
    head = model.get_output_embeddings().weight
    if tied and head.data_ptr() != emb.data_ptr():
        die("the artifact ties head to embed but the HF model does not")
    print("replaced %d tensors with values dequantized from %s" % (len(tensors), artifact_dir))


# ---------------------------------------------------------------- reference

def load_model(hf_dir, device):
    import torch

    dense = dense_class_of_dir(hf_dir)
    if dense:
        import transformers

        cls = getattr(transformers, dense + "ForCausalLM")
    elif is_qwen_dir(hf_dir):
        from transformers import Qwen3_5ForCausalLM as cls
    else:
        from transformers import Lfm2ForCausalLM as cls

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    try:
        torch.set_float32_matmul_precision("highest")
    except AttributeError:
        pass
    try:
        model = cls.from_pretrained(hf_dir, dtype=torch.float32, attn_implementation="eager")
    except TypeError:
        model = cls.from_pretrained(hf_dir, torch_dtype=torch.float32, attn_implementation="eager")
    model = model.to(torch.float32).to(device).eval()
    impl = getattr(model.config, "_attn_implementation", "?")
    if impl != "eager":
        die("attention implementation is %s, not eager" % impl)
    return model


def fmt(values):
    return "[" + ", ".join("%.9g" % v for v in values) + "]"


def cmd_reference(args):
    import numpy as np
    import torch

    with open(args.prompts) as f:
        spec = json.load(f)
    prompts = spec["prompts"]
    k = int(spec.get("greedy_prompt", 0))
    model = load_model(args.hf, args.device)
    if args.dequant_from:
        load_dequantized(model, args.dequant_from, dense_class_of_dir(args.hf))
    dev = args.device

    def last_logits(ids, **kw):
        x = torch.tensor([ids], dtype=torch.long, device=dev)
        out = model(input_ids=x, **kw)
        return out, out.logits[0, -1].detach().to("cpu", torch.float32).numpy().astype(np.float64)

    logits = []
    with torch.no_grad():
        for ids in prompts:
            _, lg = last_logits(ids, use_cache=False)
            if not np.all(np.isfinite(lg)):
                die("non-finite reference logits")
            logits.append(lg)

        greedy, margins = [], []
        if args.greedy > 0:
            out, lg = last_logits(prompts[k], use_cache=True)
            past = out.past_key_values
            for step in range(args.greedy):
                tok = int(np.argmax(lg))  # first maximum: ties go to the lowest id
                top2 = np.partition(lg, -2)[-2:]
                margins.append(float(top2[1] - top2[0]))
                greedy.append(tok)
                if step + 1 == args.greedy:
                    break
                out, lg = last_logits([tok], past_key_values=past, use_cache=True)
                past = out.past_key_values
            # Cross-check the cached path against one uncached forward over
            # prompt + generated tokens: each position's argmax must be the next token.
            seq = list(prompts[k]) + greedy[:-1]
            x = torch.tensor([seq], dtype=torch.long, device=dev)
            full = model(input_ids=x, use_cache=False).logits[0].to("cpu", torch.float32).numpy()
            nocache = [int(np.argmax(full[len(prompts[k]) - 1 + i])) for i in range(len(greedy))]
            agrees = nocache == greedy
            if not agrees:
                first = next(i for i in range(len(greedy)) if nocache[i] != greedy[i])
                print("warning: cached and uncached greedy paths differ at step %d (margin there %.3g)" % (
                    first, margins[first]), file=sys.stderr)
        else:
            agrees = True

    with open(args.out, "w") as f:
        f.write('{"logits": [\n')
        f.write(",\n".join(fmt(lg) for lg in logits))
        f.write('],\n"greedy": [%s],\n' % ", ".join(str(t) for t in greedy))
        f.write('"greedy_min_margin": %.9g,\n' % (min(margins) if margins else 0.0))
        f.write('"greedy_nocache_agrees": %s,\n' % ("true" if agrees else "false"))
        f.write('"source": %s}\n' % json.dumps({
            "hf": os.path.abspath(args.hf), "dequant_from": args.dequant_from, "device": dev,
            "torch": torch.__version__, "transformers": __import__("transformers").__version__}))
    print("wrote %s: %d prompts, %d greedy tokens (min top-2 margin %.3g)" % (
        args.out, len(logits), len(greedy), min(margins) if margins else 0.0))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="build and save a random Lfm2ForCausalLM / Qwen3_5ForCausalLM + prompts.json")
    b.add_argument("--config", choices=ALL_CONFIGS, required=True)
    b.add_argument("--seed", type=int, default=1234)
    b.add_argument("--out", required=True)
    r = sub.add_parser("reference", help="final-position logits + greedy tokens from transformers")
    r.add_argument("--hf", required=True)
    r.add_argument("--prompts", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--greedy", type=int, default=128)
    r.add_argument("--dequant-from", dest="dequant_from", default=None)
    r.add_argument("--device", default="cpu", help="cpu (default) or cuda (TF32 is turned off)")
    args = ap.parse_args()
    if args.cmd == "build":
        cmd_build(args)
    else:
        cmd_reference(args)


if __name__ == "__main__":
    main()
