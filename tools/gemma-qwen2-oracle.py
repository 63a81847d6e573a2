#!/usr/bin/env python3
"""Reference logits and greedy tokens for wisp's Gemma 3 and Qwen 2.5 parity.

  build --arch gemma3|qwen2 --shape real|small [--seed S] --out HF_DIR
      A random Gemma3ForCausalLM / Qwen2ForCausalLM checkpoint (config.json
      + model.safetensors, float32) and HF_DIR/prompts.json ({"prompts":
      [[ids], ...], "greedy_prompt": 1}: prompts of 1, 17 and 300 ids).
      real: the released configurations (Gemma 3 1B: google/gemma-3-1b-pt;
      Qwen 2.5 0.5B: Qwen/Qwen2.5-0.5B; their vocabularies); small: the same
      architecture at hidden 128 (a sliding window of 8 keys for Gemma 3).
      With transformers installed the model is transformers' own, saved
      with save_pretrained; without it the tensors are written here, under
      the same names and shapes.

  reference --hf HF_DIR --prompts P --out REF.json [--greedy N]
            [--dequant-from ARTIFACT] [--device cpu|cuda] [--torch-only]
      Final-position logits of each prompt and N greedy tokens from prompt
      `greedy_prompt` (argmax, ties to the lowest id), written as `wisp
      logits` writes them, for tests/parity/compare.py. With transformers
      (and without --torch-only): the model's own forward (eager attention,
      float32, TF32 off), from_pretrained. Otherwise: the plain torch forward
      written below from the two modeling files' formulas (a second,
      independent implementation, not transformers). --dequant-from: every
      weight replaced first by the values of an f32 wisp artifact (e.g.
      `wisp convert Q4_K_M.gguf -o ART --quant f32`: llama.cpp's quantized
      values, dequantized), so a quantized comparison measures the engine.

  layers --hf HF_DIR --prompts P [--prompt I] [--device cuda|cpu]
      Where transformers and the torch forward below part: each layer's
      attention output and residual stream for prompt I, from both, as the
      largest difference over the largest value (needs transformers).

  check --arch gemma3|qwen2 --wisp WISP_BIN [--work DIR]
      The local round trip: build --shape small, wisp convert --quant f32,
      reference, `wisp logits` on cpu (and webgpu where it runs), compare.

Only the H200 machine has transformers (tools/device.sh parity with CONFIGS
"qwen25-0.5b" / "gemma3-1b"); Debian's python3-torch runs the torch-only path.
"""
import argparse
import json
import math
import os
import random
import struct
import subprocess
import sys

PROMPT_LENGTHS = (1, 17, 300)
GREEDY_PROMPT = 1
HERE = os.path.dirname(os.path.abspath(__file__))

CONFIGS = {
    ("gemma3", "real"): dict(
        architectures=["Gemma3ForCausalLM"], model_type="gemma3_text", hidden_size=1152, intermediate_size=6912,
        num_hidden_layers=26, num_attention_heads=4, num_key_value_heads=1, head_dim=256, vocab_size=262144,
        max_position_embeddings=32768, rms_norm_eps=1e-6, rope_theta=1000000.0, rope_local_base_freq=10000.0,
        rope_scaling=None, sliding_window=512, sliding_window_pattern=6, query_pre_attn_scalar=256,
        final_logit_softcapping=None, attn_logit_softcapping=None, hidden_activation="gelu_pytorch_tanh",
        attention_bias=False, tie_word_embeddings=True),
    ("gemma3", "small"): dict(
        architectures=["Gemma3ForCausalLM"], model_type="gemma3_text", hidden_size=128, intermediate_size=256,
        num_hidden_layers=6, num_attention_heads=2, num_key_value_heads=1, head_dim=64, vocab_size=512,
        max_position_embeddings=1024, rms_norm_eps=1e-6, rope_theta=1000000.0, rope_local_base_freq=10000.0,
        rope_scaling=None, sliding_window=8, sliding_window_pattern=6, query_pre_attn_scalar=64,
        final_logit_softcapping=None, attn_logit_softcapping=None, hidden_activation="gelu_pytorch_tanh",
        attention_bias=False, tie_word_embeddings=True),
    ("qwen2", "real"): dict(
        architectures=["Qwen2ForCausalLM"], model_type="qwen2", hidden_size=896, intermediate_size=4864,
        num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2, vocab_size=151936,
        max_position_embeddings=32768, rms_norm_eps=1e-6, rope_theta=1000000.0, hidden_act="silu",
        use_sliding_window=False, sliding_window=32768, max_window_layers=24, tie_word_embeddings=True),
    ("qwen2", "small"): dict(
        architectures=["Qwen2ForCausalLM"], model_type="qwen2", hidden_size=128, intermediate_size=256,
        num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, vocab_size=512,
        max_position_embeddings=1024, rms_norm_eps=1e-6, rope_theta=1000000.0, hidden_act="silu",
        use_sliding_window=False, sliding_window=1024, max_window_layers=4, tie_word_embeddings=True),
}


def die(msg):
    print("gemma-qwen2-oracle.py: " + msg, file=sys.stderr)
    sys.exit(1)


def have_transformers():
    try:
        import transformers  # noqa: F401
        return True
    except ImportError:
        return False


def arch_of(cfg):
    return "gemma3" if cfg.get("model_type") in ("gemma3_text", "gemma3") else "qwen2"


def head_dim(cfg):
    return cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]


def flat_config(cfg):
    """transformers 5 saves Gemma 3's two rope bases as rope_parameters
    {full_attention, sliding_attention}; the torch forward reads the older
    top-level rope_theta / rope_local_base_freq."""
    cfg = dict(cfg)
    rp = cfg.get("rope_parameters") or {}
    if "full_attention" in rp:
        cfg.setdefault("rope_theta", rp["full_attention"]["rope_theta"])
        cfg.setdefault("rope_local_base_freq", rp["sliding_attention"]["rope_theta"])
    elif "rope_theta" in rp:
        cfg.setdefault("rope_theta", rp["rope_theta"])
    if arch_of(cfg) == "gemma3":  # Gemma3TextConfig's defaults
        cfg.setdefault("rope_theta", 1000000.0)
        cfg.setdefault("rope_local_base_freq", 10000.0)
        cfg.setdefault("query_pre_attn_scalar", head_dim(cfg))
    return cfg


def global_layers(cfg):
    """Gemma 3: which layers attend to every key (the rest slide)."""
    n = cfg["num_hidden_layers"]
    if cfg.get("layer_types"):
        return [t == "full_attention" for t in cfg["layer_types"]]
    p = cfg.get("sliding_window_pattern", 6)
    return [(i + 1) % p == 0 for i in range(n)]


# ---------------------------------------------------------------- tensors

def tensor_shapes(cfg):
    """HF name -> shape, for both architectures."""
    H, F, V, L = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"], cfg["num_hidden_layers"]
    D, NH, KV = head_dim(cfg), cfg["num_attention_heads"], cfg["num_key_value_heads"]
    gemma = arch_of(cfg) == "gemma3"
    out = {"model.embed_tokens.weight": (V, H), "model.norm.weight": (H,)}
    if not cfg.get("tie_word_embeddings", True):
        out["lm_head.weight"] = (V, H)
    for i in range(L):
        p = "model.layers.%d." % i
        out.update({
            p + "input_layernorm.weight": (H,), p + "post_attention_layernorm.weight": (H,),
            p + "self_attn.q_proj.weight": (NH * D, H), p + "self_attn.k_proj.weight": (KV * D, H),
            p + "self_attn.v_proj.weight": (KV * D, H), p + "self_attn.o_proj.weight": (H, NH * D),
            p + "mlp.gate_proj.weight": (F, H), p + "mlp.up_proj.weight": (F, H), p + "mlp.down_proj.weight": (H, F)})
        if gemma:
            out.update({p + "pre_feedforward_layernorm.weight": (H,), p + "post_feedforward_layernorm.weight": (H,),
                        p + "self_attn.q_norm.weight": (D,), p + "self_attn.k_norm.weight": (D,)})
        else:
            out.update({p + "self_attn.q_proj.bias": (NH * D,), p + "self_attn.k_proj.bias": (KV * D,),
                        p + "self_attn.v_proj.bias": (KV * D,)})
    return out


def random_value(name, shape, cfg, gen):
    """Weights with O(1) activations: matrices N(0, 0.64/sqrt(hidden));
    Gemma's norms (used as 1 + w) 0.1 N(0,1), Qwen2's 1 + 0.1 N(0,1); Qwen2's
    q/k/v biases 0.5 N(0,1) (the released ones are large), so that every
    norm, bias and the embedding scale really matter."""
    import torch

    std = 0.64 / math.sqrt(cfg["hidden_size"])
    r = torch.randn(shape, generator=gen, dtype=torch.float32)
    if name.endswith("norm.weight"):
        return 0.1 * r if arch_of(cfg) == "gemma3" else 1.0 + 0.1 * r
    if name.endswith(".bias"):
        return 0.5 * r
    if len(shape) == 2:
        return std * r
    die("unexpected tensor %s %s" % (name, shape))


def write_safetensors(path, tensors):
    """The safetensors format: an 8-byte header length, a JSON header of
    name -> dtype, shape, data offsets, then the little-endian data."""
    header, blobs, at = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name].contiguous().to("cpu")
        data = t.numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [at, at + len(data)]}
        blobs.append(data)
        at += len(data)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def read_safetensors(path):
    import numpy as np
    import torch

    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        base = 8 + n
        out = {}
        for name, e in header.items():
            if name == "__metadata__":
                continue
            if e["dtype"] != "F32":
                die("%s: tensor %s is %s; the torch-only path reads F32" % (path, name, e["dtype"]))
            f.seek(base + e["data_offsets"][0])
            raw = f.read(e["data_offsets"][1] - e["data_offsets"][0])
            out[name] = torch.from_numpy(np.frombuffer(raw, dtype="<f4").copy()).reshape(e["shape"])
    return out


def cmd_build(args):
    import torch

    cfg = dict(CONFIGS[(args.arch, args.shape)])
    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    shapes = tensor_shapes(cfg)
    tensors = {n: random_value(n, s, cfg, gen) for n, s in shapes.items()}
    if have_transformers() and not args.torch_only:
        import transformers

        import inspect

        kw = {k: v for k, v in cfg.items() if k not in ("architectures", "model_type")}
        conf_cls = transformers.Gemma3TextConfig if args.arch == "gemma3" else transformers.Qwen2Config
        if "rope_parameters" in inspect.signature(conf_cls.__init__).parameters:  # transformers 5: one dict
            theta = kw.pop("rope_theta")
            kw.pop("rope_scaling", None)
            if args.arch == "gemma3":
                kw["rope_parameters"] = {
                    "full_attention": {"rope_type": "default", "rope_theta": theta},
                    "sliding_attention": {"rope_type": "default", "rope_theta": kw.pop("rope_local_base_freq")}}
            else:
                kw["rope_parameters"] = {"rope_type": "default", "rope_theta": theta}
        conf = conf_cls(**kw)
        cls = transformers.Gemma3ForCausalLM if args.arch == "gemma3" else transformers.Qwen2ForCausalLM
        model = cls(conf).to(torch.float32).eval()
        missing, unexpected = model.load_state_dict(tensors, strict=False)
        missing = [m for m in missing if not m.endswith("lm_head.weight")]
        if missing or unexpected:
            die("transformers' %s has other tensors: missing %s, unexpected %s" % (cls.__name__, missing, unexpected))
        model.save_pretrained(args.out)
        how = "transformers %s" % transformers.__version__
    else:
        with open(os.path.join(args.out, "config.json"), "w") as f:
            json.dump(cfg, f, indent=1)
        write_safetensors(os.path.join(args.out, "model.safetensors"), tensors)
        how = "torch only"
    rng = random.Random(args.seed)
    prompts = [[rng.randrange(cfg["vocab_size"]) for _ in range(n)] for n in PROMPT_LENGTHS]
    with open(os.path.join(args.out, "prompts.json"), "w") as f:
        json.dump({"prompts": prompts, "greedy_prompt": GREEDY_PROMPT}, f)
    print("built %s %s (%s): %.1f M parameters -> %s" % (
        args.arch, args.shape, how, sum(t.numel() for t in tensors.values()) / 1e6, args.out))


# ---------------------------------------------------------------- wisp artifact (dequantized)

def artifact_tensors(art, cfg):
    """An f32 wisp artifact's sections as HF tensors (docs/convert.md's
    tables read backwards: fused q|k|v and gate|up rows split, Gemma's
    stored 1 + w norms back to w)."""
    import numpy as np
    import torch

    with open(os.path.join(art, "manifest.json")) as f:
        man = json.load(f)
    secs = {s["name"]: s for s in man["runtime"]["sections"]}
    data = np.memmap(os.path.join(art, "weights.bin"), dtype=np.uint8, mode="r")

    def vec(name):
        s = secs.get(name)
        if not s:
            die("%s: no section %s (convert the GGUF with --quant f32)" % (art, name))
        return torch.from_numpy(np.frombuffer(data[s["offset"]:s["offset"] + s["bytes"]].tobytes(), dtype="<f4").copy())

    H, F, L = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    D, NH, KV = head_dim(cfg), cfg["num_attention_heads"], cfg["num_key_value_heads"]
    gemma = arch_of(cfg) == "gemma3"
    norm = (lambda v: v - 1.0) if gemma else (lambda v: v)
    out = {"model.embed_tokens.weight": vec("embed.weight").reshape(-1, H), "model.norm.weight": norm(vec("head.norm"))}
    if "head.weight" in secs and secs["head.weight"]["offset"] != secs["embed.weight"]["offset"]:
        out["lm_head.weight"] = vec("head.weight").reshape(-1, H)
    for i in range(L):
        p, w = "model.layers.%d." % i, "L%d." % i
        qkv = vec(w + "attn.qkv.weight").reshape(-1, H)
        gu = vec(w + "mlp.gate_up.weight").reshape(2 * F, H)
        out.update({
            p + "self_attn.q_proj.weight": qkv[:NH * D], p + "self_attn.k_proj.weight": qkv[NH * D:NH * D + KV * D],
            p + "self_attn.v_proj.weight": qkv[NH * D + KV * D:],
            p + "self_attn.o_proj.weight": vec(w + "attn.o_proj.weight").reshape(H, NH * D),
            p + "mlp.gate_proj.weight": gu[:F], p + "mlp.up_proj.weight": gu[F:],
            p + "mlp.down_proj.weight": vec(w + "mlp.down.weight").reshape(H, F),
            p + "input_layernorm.weight": norm(vec(w + "attn.qkv.norm"))})
        if gemma:
            out.update({
                p + "self_attn.q_norm.weight": norm(vec(w + "attn.qkv.q_norm")),
                p + "self_attn.k_norm.weight": norm(vec(w + "attn.qkv.k_norm")),
                p + "post_attention_layernorm.weight": norm(vec(w + "attn.o_proj.post_norm")),
                p + "pre_feedforward_layernorm.weight": norm(vec(w + "mlp.gate_up.norm")),
                p + "post_feedforward_layernorm.weight": norm(vec(w + "mlp.down.post_norm"))})
        else:
            out.update({
                p + "post_attention_layernorm.weight": vec(w + "mlp.gate_up.norm"),
                p + "self_attn.q_proj.bias": vec(w + "attn.q_bias"), p + "self_attn.k_proj.bias": vec(w + "attn.k_bias"),
                p + "self_attn.v_proj.bias": vec(w + "attn.v_bias")})
    return out


# ---------------------------------------------------------------- the plain torch forward

VARIANTS = ("no_causal_mask", "no_qk_norm", "qk_norm_unit_weights", "qk_norm_after_rope", "global_rope_everywhere",
            "local_rope_everywhere", "rope_bases_swapped", "global_layers_shifted", "global_rope_linear8", "no_rope",
            "scale_one")


class TorchModel:
    """Gemma3ForCausalLM / Qwen2ForCausalLM's forward in plain torch, float32,
    eager attention, written from the modeling files' formulas:
      Qwen2:  h = rmsnorm(x) * w; q,k,v = W h + b; rope; softmax(q k^T / sqrt(D)) v;
              x += o; x += down(silu(gate h') * up h'), h' = rmsnorm(x) * w'
      Gemma3: x = embed * sqrt(H) (in f32); norms * (1 + w); q, k per-head
              normed before rope; sliding layers: their own base and the
              last sliding_window keys; scores * query_pre_attn_scalar^-1/2;
              x += rmsnorm(o); x += rmsnorm(down(gelu_tanh(gate h') * up h'))."""

    def __init__(self, cfg, tensors, device):
        import torch

        self.cfg, self.dev = cfg, device
        self.t = {k: v.to(device, torch.float32) for k, v in tensors.items()}
        self.gemma = arch_of(cfg) == "gemma3"
        self.D = head_dim(cfg)
        self.glob = global_layers(cfg) if self.gemma else [True] * cfg["num_hidden_layers"]
        self.variant = None  # VARIANTS: one formula changed, to see which one a reference computes

    def inv_freq(self, theta):
        import torch

        D = self.D
        return 1.0 / (theta ** (torch.arange(0, D, 2, dtype=torch.int64).to(self.dev, torch.float32) / D))

    def rope(self, x, pos, theta):
        import torch

        freqs = pos[:, None].to(torch.float32) * self.inv_freq(theta)[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos(), emb.sin()
        half = x.shape[-1] // 2
        rot = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
        return x * cos[:, None, :] + rot * sin[:, None, :]

    def norm(self, x, name):
        import torch

        w = self.t[name]
        y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.cfg["rms_norm_eps"])
        return y * (1.0 + w) if self.gemma else w * y

    def forward(self, ids, taps=None):
        """Logits of every position of ids (a list); taps (a list), when
        given, receives each layer's attention output (after its o_proj and
        post-norm) and the residual stream after the layer."""
        import torch

        c, t, D = self.cfg, self.t, self.D
        NH, KV, T = c["num_attention_heads"], c["num_key_value_heads"], len(ids)
        x = t["model.embed_tokens.weight"][torch.tensor(ids, device=self.dev)]
        if self.gemma:
            x = x * torch.tensor(c["hidden_size"] ** 0.5, dtype=torch.float32)
        pos = torch.arange(T, device=self.dev)
        qi, ki = pos[:, None], pos[None, :]
        for i in range(c["num_hidden_layers"]):
            p = "model.layers.%d." % i
            h = self.norm(x, p + "input_layernorm.weight")
            q, k, v = (h @ t[p + "self_attn.%s_proj.weight" % n].T for n in "qkv")
            if not self.gemma:
                q, k, v = (a + t[p + "self_attn.%s_proj.bias" % n] for a, n in zip((q, k, v), "qkv"))
            q, k, v = q.view(T, NH, D), k.view(T, KV, D), v.view(T, KV, D)
            theta = c["rope_theta"]
            if self.gemma:
                if self.variant == "qk_norm_unit_weights":
                    unit = lambda x: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + c["rms_norm_eps"])
                    q, k = unit(q), unit(k)
                elif self.variant not in ("no_qk_norm", "qk_norm_after_rope"):
                    q, k = self.norm(q, p + "self_attn.q_norm.weight"), self.norm(k, p + "self_attn.k_norm.weight")
                glob = self.glob[i]
                if self.variant == "global_layers_shifted":  # global at i % 6 == 0 instead of 5
                    glob = i % 6 == 0
                if not glob and self.variant != "global_rope_everywhere":
                    theta = c["rope_local_base_freq"]
                if glob and self.variant == "local_rope_everywhere":
                    theta = c["rope_local_base_freq"]
                if self.variant == "rope_bases_swapped":
                    theta = c["rope_theta"] if not glob else c["rope_local_base_freq"]
            rpos = pos.to(torch.float32) / 8.0 if self.variant == "global_rope_linear8" and self.glob[i] else pos
            if self.variant != "no_rope":
                q, k = self.rope(q, rpos, theta), self.rope(k, rpos, theta)
            if self.gemma and self.variant == "qk_norm_after_rope":
                q, k = self.norm(q, p + "self_attn.q_norm.weight"), self.norm(k, p + "self_attn.k_norm.weight")
            k, v = k.repeat_interleave(NH // KV, dim=1), v.repeat_interleave(NH // KV, dim=1)
            scale = c["query_pre_attn_scalar"] ** -0.5 if self.gemma else D ** -0.5
            if self.variant == "scale_one":
                scale = 1.0
            s = torch.einsum("qhd,khd->hqk", q, k) * scale
            allowed = (ki <= qi) | (self.variant == "no_causal_mask")
            if self.gemma and not self.glob[i]:
                allowed = allowed & (qi - ki < c["sliding_window"])
            s = s.masked_fill(~allowed[None], float("-inf"))
            a = torch.einsum("hqk,khd->qhd", torch.softmax(s, dim=-1), v).reshape(T, NH * D)
            o = a @ t[p + "self_attn.o_proj.weight"].T
            if self.gemma:
                o = self.norm(o, p + "post_attention_layernorm.weight")
                if taps is not None:
                    taps.append(("L%d attention" % i, o))
                x = x + o
                h = self.norm(x, p + "pre_feedforward_layernorm.weight")
            else:
                x = x + o
                h = self.norm(x, p + "post_attention_layernorm.weight")
            g, u = h @ t[p + "mlp.gate_proj.weight"].T, h @ t[p + "mlp.up_proj.weight"].T
            act = torch.nn.functional.gelu(g, approximate="tanh") if self.gemma else torch.nn.functional.silu(g)
            y = (act * u) @ t[p + "mlp.down_proj.weight"].T
            x = x + (self.norm(y, p + "post_feedforward_layernorm.weight") if self.gemma else y)
            if taps is not None:
                taps.append(("L%d output" % i, x))
        x = self.norm(x, "model.norm.weight")
        head = t.get("lm_head.weight", t["model.embed_tokens.weight"])
        return x @ head.T


# ---------------------------------------------------------------- reference

def fmt(values):
    return "[" + ", ".join("%.9g" % v for v in values) + "]"


def cmd_reference(args):
    import numpy as np
    import torch

    with open(args.prompts) as f:
        spec = json.load(f)
    prompts, k = spec["prompts"], int(spec.get("greedy_prompt", 0))
    with open(os.path.join(args.hf, "config.json")) as f:
        cfg = flat_config(json.load(f))
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    tensors = artifact_tensors(args.dequant_from, cfg) if args.dequant_from else None
    use_hf = have_transformers() and not args.torch_only
    if use_hf:
        import transformers

        cls = transformers.Gemma3ForCausalLM if arch_of(cfg) == "gemma3" else transformers.Qwen2ForCausalLM
        try:
            model = cls.from_pretrained(args.hf, dtype=torch.float32, attn_implementation="eager")
        except TypeError:
            model = cls.from_pretrained(args.hf, torch_dtype=torch.float32, attn_implementation="eager")
        model = model.to(torch.float32).to(args.device).eval()
        if tensors:
            missing, unexpected = model.load_state_dict(tensors, strict=False)
            missing = [m for m in missing if not m.endswith("lm_head.weight")]
            if missing or unexpected:
                die("dequantized tensors do not cover the model: missing %s, unexpected %s" % (missing, unexpected))

        def logits_all(ids):
            x = torch.tensor([ids], dtype=torch.long, device=args.device)
            return model(input_ids=x, use_cache=False).logits[0]
        source = "transformers %s" % transformers.__version__
    else:
        if tensors is None:
            tensors = read_safetensors(os.path.join(args.hf, "model.safetensors"))
        tm = TorchModel(cfg, tensors, args.device)
        logits_all = tm.forward
        source = "plain torch forward (tools/gemma-qwen2-oracle.py)"
    out_logits, greedy = [], []
    with torch.no_grad():
        for ids in prompts:
            out_logits.append(logits_all(ids)[-1].to("cpu", torch.float32).numpy().astype(np.float64))
        seq = list(prompts[k])
        # the greedy continuation: one uncached forward per step (no KV cache
        # to get wrong; each step's argmax on the whole sequence)
        for _ in range(args.greedy):
            lg = logits_all(seq)[-1].to("cpu", torch.float32).numpy()
            tok = int(np.argmax(lg))
            greedy.append(tok)
            seq.append(tok)
    with open(args.out, "w") as f:
        f.write('{"logits": [\n' + ",\n".join(fmt(lg) for lg in out_logits) + "],\n")
        f.write('"greedy": [%s],\n' % ", ".join(str(t) for t in greedy))
        f.write('"source": %s}\n' % json.dumps({"reference": source, "hf": os.path.abspath(args.hf),
                                                   "dequant_from": args.dequant_from, "torch": torch.__version__}))
    print("wrote %s (%s): %d prompts, %d greedy tokens" % (args.out, source, len(out_logits), len(greedy)))


def cmd_layers(args):
    """Where transformers and the torch forward part: for one prompt, each
    layer's attention output and residual stream from both, and the largest
    difference relative to the largest value, layer by layer."""
    import torch
    import transformers

    with open(args.prompts) as f:
        spec = json.load(f)
    ids = spec["prompts"][args.prompt]
    with open(os.path.join(args.hf, "config.json")) as f:
        raw = json.load(f)
    cfg = flat_config(raw)
    torch.backends.cuda.matmul.allow_tf32 = False
    cls = transformers.Gemma3ForCausalLM if arch_of(cfg) == "gemma3" else transformers.Qwen2ForCausalLM
    model = cls.from_pretrained(args.hf, dtype=torch.float32, attn_implementation="eager").to(args.device).eval()
    print("config.json: " + json.dumps({k: raw.get(k) for k in ("rope_parameters", "rope_theta", "rope_local_base_freq",
          "sliding_window", "sliding_window_pattern", "layer_types", "query_pre_attn_scalar", "rope_scaling")}))
    print("model.config: layer_types %s, sliding_window %s, query_pre_attn_scalar %s, rope %s" % (
        getattr(model.config, "layer_types", None), getattr(model.config, "sliding_window", None),
        getattr(model.config, "query_pre_attn_scalar", None), getattr(model.config, "rope_parameters", None)))
    hf_taps = []
    layers = model.model.layers
    for i, layer in enumerate(layers):
        post = getattr(layer, "post_attention_layernorm", None)
        if arch_of(cfg) == "gemma3":
            post.register_forward_hook(lambda m, a, out, i=i: hf_taps.append(("L%d attention" % i, out[0])))
        layer.register_forward_hook(lambda m, a, out, i=i: hf_taps.append(
            ("L%d output" % i, (out[0] if isinstance(out, tuple) else out)[0])))
    tensors = {k: v for k, v in model.state_dict().items()}
    tm = TorchModel(cfg, tensors, args.device)
    with torch.no_grad():
        model(input_ids=torch.tensor([ids], device=args.device), use_cache=False)
        mine = []
        tm.forward(ids, taps=mine)
    theirs = dict(hf_taps)
    print("prompt %d (%d ids): layer, transformers vs torch forward max|diff| / max|value| (last position; all)" % (
        args.prompt, len(ids)))
    for name, x in mine:
        y = theirs.get(name)
        if y is None:
            print("%-16s no transformers tap" % name)
            continue
        y = y.reshape(x.shape)
        d_last = (x[-1] - y[-1]).abs().max().item() / max(y[-1].abs().max().item(), 1e-30)
        d_all = (x - y).abs().max().item() / max(y.abs().max().item(), 1e-30)
        print("%-16s %.3e  %.3e" % (name, d_last, d_all))
    # which one changed formula brings the torch forward to transformers' logits
    with torch.no_grad():
        ref = model(input_ids=torch.tensor([ids], device=args.device), use_cache=False).logits[0][-1]
        for v in (None,) + VARIANTS:
            tm.variant = v
            got = tm.forward(ids)[-1]
            print("variant %-24s last-position logits max|diff| / max|ref| %.3e" % (
                v or "(as written)", ((got - ref).abs().max() / ref.abs().max()).item()))
        tm.variant = None


# ---------------------------------------------------------------- local check

def run(cmd):
    print("+ " + " ".join(cmd), flush=True)
    return subprocess.run(cmd).returncode


def cmd_check(args):
    work = args.work or "/tmp/gemma-qwen2-oracle-%s" % args.arch
    hf, art = os.path.join(work, "hf"), os.path.join(work, "art")
    os.makedirs(work, exist_ok=True)
    me = os.path.abspath(__file__)
    if run([sys.executable, me, "build", "--arch", args.arch, "--shape", "small", "--out", hf, "--torch-only"]):
        die("build failed")
    if run([args.wisp, "convert", hf, "-o", art, "--quant", "f32", "--force", "--quiet"]):
        die("wisp convert failed")
    ref = os.path.join(work, "ref.json")
    if run([sys.executable, me, "reference", "--hf", hf, "--prompts", os.path.join(hf, "prompts.json"), "--out", ref,
            "--greedy", str(args.greedy), "--torch-only"]):
        die("reference failed")
    bad = 0
    for be in args.backends.split():
        got = os.path.join(work, "wisp-%s.json" % be)
        if run([args.wisp, "logits", "-m", art, "--prompts", os.path.join(hf, "prompts.json"), "--greedy",
                str(args.greedy), "--backend", be, "--profile", "exact", "-o", got, "--force"]):
            die("wisp logits (%s) failed" % be)
        bad |= run([sys.executable, os.path.join(HERE, "..", "tests", "parity", "compare.py"), ref, got])
    sys.exit(1 if bad else 0)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("--arch", choices=("gemma3", "qwen2"), required=True)
    b.add_argument("--shape", choices=("real", "small"), default="real")
    b.add_argument("--seed", type=int, default=1234)
    b.add_argument("--out", required=True)
    b.add_argument("--torch-only", dest="torch_only", action="store_true")
    r = sub.add_parser("reference")
    r.add_argument("--hf", required=True)
    r.add_argument("--prompts", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--greedy", type=int, default=128)
    r.add_argument("--dequant-from", dest="dequant_from", default=None)
    r.add_argument("--device", default="cpu")
    r.add_argument("--torch-only", dest="torch_only", action="store_true")
    lay = sub.add_parser("layers")
    lay.add_argument("--hf", required=True)
    lay.add_argument("--prompts", required=True)
    lay.add_argument("--prompt", type=int, default=1)
    lay.add_argument("--device", default="cuda")
    c = sub.add_parser("check")
    c.add_argument("--arch", choices=("gemma3", "qwen2"), required=True)
    c.add_argument("--wisp", required=True)
    c.add_argument("--work", default=None)
    c.add_argument("--greedy", type=int, default=32)
    c.add_argument("--backends", default="cpu")
    args = ap.parse_args()
    {"build": cmd_build, "reference": cmd_reference, "layers": cmd_layers, "check": cmd_check}[args.cmd](args)


if __name__ == "__main__":
    main()
