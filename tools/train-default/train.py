#!/usr/bin/env python3
"""Trains wisp's built-in default model: a small Lfm2ForCausalLM on the King
James Bible (tools/train-default/prepare_corpus.sh), with the tokenizer of
train_tokenizer.py. Runs on the GPU machine (torch + transformers 5.x).

  train.py train --data DATA_DIR --tok TOK_DIR --hf OUT_HF_DIR [--seconds 275]
                 [--loss-csv loss.csv] [--seed 1234]
      Trains for a fixed wall budget (the step count is fixed after timing
      the first steps, so the cosine schedule ends exactly at the last step),
      keeps the weights with the best validation loss (the last 2% of
      train.txt's tokens, never trained on), saves them in float32 with
      save_pretrained (safetensors) and copies the tokenizer files next to
      them.
  train.py eval --hf HF_DIR --file TEXT [--file TEXT2 ...] [--dequant-from ARTIFACT]
                [--max-tokens N] [--device cuda|cpu] [--out-prefix PREFIX]
      Held-out loss in float32 (TF32 off, eager attention) with the HF
      weights, then (with --dequant-from) with the weights replaced by those
      dequantized from a wisp artifact; writes PREFIX<name>_f32.json and
      PREFIX<name>_q4.json.
  train.py prompt --hf HF_DIR --prompt TEXT --out prompts.json
      The prompt's ids (with BOS) as tests/parity/hf_reference.py reads them.

Evaluation windows (identical in `wisp perplexity`, src/cli/cmd_perplexity.c):
the file is encoded as one text WITHOUT special tokens; the ids are cut into
consecutive chunks of 255 (the last may be shorter); each window is BOS
followed by one chunk, evaluated from an empty state; every chunk token is
predicted from the tokens before it in its window (BOS predicts the first).
The loss is the mean negative log-likelihood (natural log) over all chunk
tokens, the perplexity exp(loss). --max-tokens N keeps only the first N ids.
"""
import argparse
import csv
import json
import math
import os
import random
import shutil
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "parity"))
import hf_reference  # noqa: E402  (make_config, load_model, load_dequantized)

SEQ = 256  # training and evaluation window, BOS included
TOKENIZER_FILES = ["tokenizer.json", "tokenizer_config.json", "generation_config.json"]

# The model: 8 layers, LFM2's conv/attention mix (attention at 2 and 5),
# hidden 256, 4 heads of 64 (2 KV heads), FFN int(2*1152/3) = 768 (a multiple
# of 256), conv kernel 3, tied embeddings, 512 positions.
MODEL = dict(
    hidden_size=256, num_hidden_layers=8, num_attention_heads=4, num_key_value_heads=2,
    intermediate_size=1152, block_auto_adjust_ff_dim=True, block_ffn_dim_multiplier=1.0,
    block_multiple_of=256, conv_L_cache=3, attn_layers=(2, 5), vocab_size=None,
    rope_theta=1000000.0, norm_eps=1e-5, max_position_embeddings=512, tie=True,
)


def log(msg):
    print("train.py: " + msg, flush=True)


def load_tokenizer(path):
    from tokenizers import Tokenizer

    return Tokenizer.from_file(os.path.join(path, "tokenizer.json"))


def encode_file(tok, path, max_tokens=None):
    with open(path, encoding="utf-8", newline="") as f:
        text = f.read()
    ids = tok.encode(text, add_special_tokens=False).ids
    return ids[:max_tokens] if max_tokens else ids


def windows(ids, bos):
    step = SEQ - 1
    return [[bos] + ids[i:i + step] for i in range(0, len(ids), step)]


def mean_nll(model, wins, device, batch=64):
    """Sum of -log p over every non-BOS token of the windows, and the count."""
    import torch

    total, count = 0.0, 0
    groups = {}
    for w in wins:
        groups.setdefault(len(w), []).append(w)
    with torch.no_grad():
        for n, ws in sorted(groups.items()):
            if n < 2:
                continue
            for b in range(0, len(ws), batch):
                x = torch.tensor(ws[b:b + batch], dtype=torch.long, device=device)
                logits = model(input_ids=x, use_cache=False).logits.float()
                lp = torch.log_softmax(logits[:, :-1].double(), dim=-1)
                nll = -lp.gather(-1, x[:, 1:, None]).squeeze(-1)
                total += float(nll.sum())
                count += nll.numel()
    return total, count


def make_config(vocab, ids):
    spec = dict(MODEL)
    spec["vocab_size"] = vocab
    hf_reference.CONFIGS["wisp-default"] = spec
    cfg = hf_reference.make_config("wisp-default")
    cfg.bos_token_id = ids["bos"]
    cfg.eos_token_id = ids["eos"]
    cfg.pad_token_id = ids["pad"]
    return cfg


def cmd_train(args):
    import numpy as np
    import torch
    import torch.nn.functional as F
    from transformers import Lfm2ForCausalLM

    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.cuda.manual_seed_all(args.seed)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    torch.backends.cuda.matmul.allow_tf32 = True  # training only; evaluation turns it off
    tok = load_tokenizer(args.tok)
    vocab = tok.get_vocab_size()
    ids = {"bos": tok.token_to_id("<|startoftext|>"), "eos": tok.token_to_id("<|im_end|>"),
           "pad": tok.token_to_id("<|pad|>")}
    t0 = time.time()
    train_ids = encode_file(tok, os.path.join(args.data, "train.txt"))
    n_val = len(train_ids) // 50
    val_ids, train_ids = train_ids[-n_val:], train_ids[:-n_val]
    log("%d training tokens, %d validation tokens, vocab %d (encoded in %.1f s)" % (
        len(train_ids), len(val_ids), vocab, time.time() - t0))
    data = torch.tensor(train_ids, dtype=torch.long, device=dev)
    val_wins = windows(val_ids, ids["bos"])

    cfg = make_config(vocab, ids)
    torch.set_default_dtype(torch.float32)
    model = None
    for impl in ("sdpa", "eager"):
        try:
            model = Lfm2ForCausalLM._from_config(cfg, attn_implementation=impl)
            break
        except Exception as e:  # noqa: BLE001 - try the next one
            log("attention %s unavailable (%s: %s)" % (impl, type(e).__name__, e))
    if model is None:
        model = Lfm2ForCausalLM(cfg)
    model = model.to(torch.float32).to(dev).train()
    ffn = model.model.layers[0].feed_forward.w1.out_features
    nparams = sum(p.numel() for p in model.parameters())
    log("model: %.2f M parameters, ffn %d, layer types %s, attention %s" % (
        nparams / 1e6, ffn, cfg.layer_types, getattr(model.config, "_attn_implementation", "?")))

    decay = [p for n, p in model.named_parameters() if p.dim() == 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() != 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.wd}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8)
    gen = torch.Generator(device=dev)
    gen.manual_seed(args.seed)
    bos_col = torch.full((args.batch, 1), ids["bos"], dtype=torch.long, device=dev)
    ar = torch.arange(SEQ - 1, device=dev)

    def batch():
        starts = torch.randint(0, len(train_ids) - (SEQ - 1), (args.batch,), generator=gen, device=dev)
        return torch.cat([bos_col, data[starts[:, None] + ar]], dim=1)

    def lr_at(step, total):
        if step < args.warmup:
            return args.lr * (step + 1) / args.warmup
        frac = min(1.0, (step - args.warmup) / max(1, total - args.warmup))
        return args.lr * (args.min_lr_frac + (1 - args.min_lr_frac) * 0.5 * (1 + math.cos(math.pi * frac)))

    def validate():
        model.eval()
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=dev == "cuda"):
            s, c = mean_nll(model, val_wins, dev)
        model.train()
        return s / c

    csv_f = open(args.loss_csv, "w", newline="")
    w = csv.writer(csv_f)
    w.writerow(["step", "seconds", "tokens", "lr", "train_loss", "val_loss"])
    total = None  # fixed after timing the first steps
    timing_steps = 30
    best, best_state, best_step = float("inf"), None, -1
    step, start = 0, time.time()
    t_timing = None
    while True:
        if total is not None and step >= total:
            break
        elapsed = time.time() - start
        if elapsed > args.seconds * 1.1:  # safety: never overrun the budget by much
            log("stopping at step %d: out of time" % step)
            break
        lr = lr_at(step, total if total is not None else 10 ** 9)
        for g in opt.param_groups:
            g["lr"] = lr
        x = batch()
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=dev == "cuda"):
            logits = model(input_ids=x, use_cache=False).logits
        loss = F.cross_entropy(logits[:, :-1].float().reshape(-1, vocab), x[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        if step == 5:
            if dev == "cuda":
                torch.cuda.synchronize()
            t_timing = time.time()
        if step == 5 + timing_steps and total is None:
            if dev == "cuda":
                torch.cuda.synchronize()
            per_step = (time.time() - t_timing) / timing_steps
            # validation passes cost about as much as a few steps each
            total = max(step + 1, int((args.seconds - (time.time() - start)) / (per_step * 1.04)) + step)
            log("%.1f ms/step (%d tokens/step, %.0f tokens/s): %d steps in the budget" % (
                per_step * 1e3, args.batch * SEQ, args.batch * SEQ / per_step, total))
        val = ""
        final = total is not None and step >= total
        if step % args.eval_every == 0 or final:
            v = validate()
            val = "%.5f" % v
            if v < best:
                best, best_step = v, step
                best_state = {k: t.detach().clone() for k, t in model.state_dict().items()}
        if step % args.log_every == 0 or val:
            w.writerow([step, "%.2f" % (time.time() - start), step * args.batch * SEQ, "%.3e" % lr,
                        "%.5f" % float(loss.detach()), val])
            csv_f.flush()
            if val:
                log("step %d/%s  %.0f s  lr %.2e  train %.4f  val %s" % (
                    step, total, time.time() - start, lr, float(loss.detach()), val))
    csv_f.close()
    log("trained %d steps in %.1f s; best validation loss %.4f at step %d" % (
        step, time.time() - start, best, best_step))
    if best_state is not None:
        model.load_state_dict(best_state)
    model = model.to("cpu").to(torch.float32).eval()
    gc = getattr(model, "generation_config", None)
    if gc is not None:
        gc.bos_token_id, gc.eos_token_id, gc.pad_token_id = ids["bos"], ids["eos"], ids["pad"]
    os.makedirs(args.hf, exist_ok=True)
    model.save_pretrained(args.hf)
    for name in TOKENIZER_FILES:  # after save_pretrained: ours replaces its generation_config.json
        shutil.copyfile(os.path.join(args.tok, name), os.path.join(args.hf, name))
    with open(os.path.join(args.hf, "training.json"), "w") as f:
        json.dump({"steps": step, "best_step": best_step, "best_val_loss": best, "seconds": args.seconds,
                   "batch": args.batch, "seq": SEQ, "lr": args.lr, "wd": args.wd, "seed": args.seed,
                   "parameters": nparams, "train_tokens": len(train_ids), "val_tokens": len(val_ids),
                   "torch": torch.__version__, "transformers": __import__("transformers").__version__}, f, indent=1)
    log("saved %s" % args.hf)


def cmd_eval(args):
    """Each --file with the HF weights (f32) and, with --dequant-from, again
    with the weights dequantized from the artifact: OUT_PREFIX<file>_f32.json
    and OUT_PREFIX<file>_q4.json (<file> without .txt)."""
    import torch

    tok = load_tokenizer(args.hf)
    bos = tok.token_to_id("<|startoftext|>")
    model = hf_reference.load_model(args.hf, args.device)  # f32, eager, TF32 off
    passes = [("f32", None)] + ([("q4", args.dequant_from)] if args.dequant_from else [])
    for tag, art in passes:
        if art:
            hf_reference.load_dequantized(model, art)
        for path in args.file:
            ids = encode_file(tok, path, args.max_tokens)
            wins = windows(ids, bos)
            s, c = mean_nll(model, wins, args.device)
            res = {"file": os.path.basename(path), "tokens": c, "windows": len(wins), "window": SEQ, "bos": bos,
                   "nll": s / c, "ppl": math.exp(s / c),
                   "weights": ("dequantized from " + art) if art else "hf f32", "device": args.device,
                   "torch": torch.__version__}
            print(json.dumps(res), flush=True)
            name = os.path.basename(path)
            if name.endswith(".txt"):
                name = name[:-4]
            with open("%s%s_%s.json" % (args.out_prefix, name, tag), "w") as f:
                json.dump(res, f, indent=1)


def cmd_prompt(args):
    tok = load_tokenizer(args.hf)
    ids = tok.encode(args.prompt).ids  # BOS via the post-processor, as `wisp run` encodes
    with open(args.out, "w") as f:
        json.dump({"prompts": [ids], "greedy_prompt": 0, "text": args.prompt}, f)
    print("prompt %r -> %s" % (args.prompt, ids))


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train")
    t.add_argument("--data", required=True)
    t.add_argument("--tok", required=True)
    t.add_argument("--hf", required=True)
    t.add_argument("--seconds", type=float, default=275.0)
    t.add_argument("--loss-csv", default="loss.csv")
    t.add_argument("--seed", type=int, default=1234)
    t.add_argument("--batch", type=int, default=128)
    t.add_argument("--lr", type=float, default=2e-3)
    t.add_argument("--min-lr-frac", type=float, default=0.1)
    t.add_argument("--wd", type=float, default=0.1)
    t.add_argument("--warmup", type=int, default=100)
    t.add_argument("--log-every", type=int, default=20)
    t.add_argument("--eval-every", type=int, default=250)
    e = sub.add_parser("eval")
    e.add_argument("--hf", required=True)
    e.add_argument("--file", required=True, action="append")
    e.add_argument("--dequant-from", default=None)
    e.add_argument("--max-tokens", type=int, default=None)
    e.add_argument("--device", default="cuda")
    e.add_argument("--out-prefix", default="eval_")
    p = sub.add_parser("prompt")
    p.add_argument("--hf", required=True)
    p.add_argument("--prompt", required=True)
    p.add_argument("--out", required=True)
    args = ap.parse_args()
    {"train": cmd_train, "eval": cmd_eval, "prompt": cmd_prompt}[args.cmd](args)


if __name__ == "__main__":
    main()
