#!/usr/bin/env python3
"""Builds the tokenizer reference data that tests/test_tokenizer.c checks wisp
against. Runs on a machine with `tokenizers` (0.23) and `transformers` (5.x),
not in CI:

    python3 tests/tokenizer/make_reference.py            # from the repository root

It trains two small byte-level BPE tokenizers with the `tokenizers` library
on text from make_corpus.py (a different seed than the held-out corpus):

  lfm2/    LFM2-like: GPT-4/llama-3 style Split regex, ignore_merges, special
           tokens <|pad|> <|startoftext|> <|endoftext|> <|im_start|> <|im_end|>
           in the model vocabulary, TemplateProcessing adding <|startoftext|>.
  qwen35/  Qwen-3.5-like: Qwen2 Split regex (single digits), NFC normalizer,
           specials <|endoftext|> <|im_start|> <|im_end|> appended after the
           model vocabulary, <think> </think> as added non-special tokens,
           no BOS.

and writes, for each, tokenizer.json, tokenizer_config.json (with a
chat_template), generation_config.json (eos_token_id list), expected.jsonl
(one JSON array of ids per line of tests/tokenizer/corpus.txt: LFM2 with
add_special_tokens=True, Qwen with False) and chat.json (chat templates
rendered by transformers for a fixed conversation).
"""
import argparse
import json
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_corpus  # noqa: E402

LFM2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")

LFM2_TEMPLATE = ("{{- bos_token -}}{%- for message in messages -%}"
                 "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' -}}"
                 "{%- endfor -%}{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}")
QWEN_TEMPLATE = ("{%- for message in messages -%}"
                 "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' -}}"
                 "{%- endfor -%}{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}"
                 "{%- if enable_thinking is defined and enable_thinking is false -%}"
                 "{{- '<think>\\n\\n</think>\\n\\n' -}}{%- endif -%}{%- endif -%}")

CONVERSATION = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "Hello, who are you?"},
    {"role": "assistant", "content": "I am wisp."},
    {"role": "user", "content": "Tell me a joke."},
]


def unescape(line):
    out, i = [], 0
    while i < len(line):
        c = line[i]
        if c == "\\" and i + 1 < len(line) and line[i + 1] in "\\nr":
            out.append({"\\": "\\", "n": "\n", "r": "\r"}[line[i + 1]])
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def read_corpus(path):
    with open(path, encoding="utf-8", newline="") as f:
        data = f.read()
    lines = data.split("\n")  # not splitlines(): U+2028 and friends are text
    if lines and lines[-1] == "":
        lines.pop()
    return [unescape(x) for x in lines]


def training_text(seed, n):
    rng = random.Random(seed)
    gens = [g for g, _ in make_corpus.GENERATORS]
    weights = [w for _, w in make_corpus.GENERATORS]
    for _ in range(n):
        yield rng.choices(gens, weights)[0](rng)
    # Random code points add rarer characters and byte sequences.
    for _ in range(n // 10):
        yield "".join(chr(rng.choice([rng.randint(0x20, 0x7e), rng.randint(0xa0, 0x2fff), rng.randint(0x3000, 0x9fff),
                                      rng.randint(0x1f300, 0x1faff)])) for _ in range(rng.randint(1, 30)))


def build(kind, vocab_size, seed, n_train):
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    lfm2 = kind == "lfm2"
    tok = Tokenizer(models.BPE(ignore_merges=lfm2))
    pattern = LFM2_PATTERN if lfm2 else QWEN_PATTERN
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    if not lfm2:
        tok.normalizer = normalizers.NFC()
    specials = ["<|pad|>", "<|startoftext|>", "<|endoftext|>", "<|im_start|>", "<|im_end|>"] if lfm2 else []
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(training_text(seed, n_train), trainer=trainer)
    if lfm2:
        bos = tok.token_to_id("<|startoftext|>")
        tok.post_processor = processors.TemplateProcessing(
            single="<|startoftext|> $A", pair="<|startoftext|> $A <|startoftext|> $B",
            special_tokens=[("<|startoftext|>", bos)])
    else:
        tok.add_special_tokens([AddedToken(t, special=True, normalized=False)
                                for t in ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]])
        tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in ["<think>", "</think>"]])
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
    return tok


def write_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False, indent=2)
        f.write("\n")


def make(kind, out_root, corpus, args):
    out = os.path.join(out_root, kind)
    os.makedirs(out, exist_ok=True)
    tok = build(kind, args.vocab, args.seed + (0 if kind == "lfm2" else 1), args.train_lines)
    lfm2 = kind == "lfm2"
    path = os.path.join(out, "tokenizer.json")
    tok.save(path)
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    if doc["model"].get("ignore_merges") != lfm2:  # make sure training kept the flag
        doc["model"]["ignore_merges"] = lfm2
        write_json(path, doc)
    im_end, eot = tok.token_to_id("<|im_end|>"), tok.token_to_id("<|endoftext|>")
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<|startoftext|>" if lfm2 else None,
        "eos_token": "<|im_end|>",
        "pad_token": "<|pad|>" if lfm2 else "<|endoftext|>",
        "model_max_length": 32768,
        "chat_template": LFM2_TEMPLATE if lfm2 else QWEN_TEMPLATE,
    }
    write_json(os.path.join(out, "tokenizer_config.json"), config)
    gen = {"eos_token_id": [im_end] if lfm2 else [im_end, eot]}
    if lfm2:
        gen["bos_token_id"] = tok.token_to_id("<|startoftext|>")
        gen["pad_token_id"] = tok.token_to_id("<|pad|>")
    else:
        gen["pad_token_id"] = eot
    write_json(os.path.join(out, "generation_config.json"), gen)

    # Reload from disk exactly as wisp will read it.
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(out, "tokenizer.json"))
    encs = tok.encode_batch(corpus, add_special_tokens=lfm2)
    with open(os.path.join(out, "expected.jsonl"), "w", encoding="utf-8") as f:
        for e in encs:
            f.write(json.dumps(e.ids, separators=(",", ":")) + "\n")

    # transformers should agree (it wraps the same tokenizer) and renders the chat template.
    chat = {}
    try:
        import transformers
        try:
            hf = transformers.AutoTokenizer.from_pretrained(out)
        except Exception as e:  # noqa: BLE001 - fall back to the explicit class
            print(f"{kind}: AutoTokenizer failed ({e}); trying PreTrainedTokenizerFast", file=sys.stderr)
            hf = transformers.PreTrainedTokenizerFast.from_pretrained(out)
        disagree = [i + 1 for i in range(0, len(corpus), 97)
                    if hf(corpus[i], add_special_tokens=lfm2)["input_ids"] != encs[i].ids]
        if disagree:
            print(f"WARNING {kind}: transformers {transformers.__version__} and tokenizers disagree on corpus lines "
                  f"{disagree[:10]} (expected.jsonl follows tokenizers)", file=sys.stderr)
        chat["generation_prompt"] = hf.apply_chat_template(CONVERSATION, tokenize=False, add_generation_prompt=True,
                                                           enable_thinking=False)
        if not lfm2:
            chat["generation_prompt_thinking"] = hf.apply_chat_template(CONVERSATION, tokenize=False,
                                                                        add_generation_prompt=True, enable_thinking=True)
        chat["conversation"] = CONVERSATION
        chat["transformers"] = transformers.__version__
    except ImportError:
        print("transformers is missing: chat.json not written", file=sys.stderr)
    except Exception as e:  # noqa: BLE001 - the ids above are what matters; say why chat.json is missing
        print(f"WARNING {kind}: transformers failed ({type(e).__name__}: {e}); chat.json not written", file=sys.stderr)
        chat = {}
    if chat:
        write_json(os.path.join(out, "chat.json"), chat)
    n_ids = sum(len(e.ids) for e in encs)
    print(f"{kind}: vocab {tok.get_vocab_size()}, {len(corpus)} lines, {n_ids} ids -> {out}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default=os.path.join(HERE, "corpus.txt"))
    ap.add_argument("--out", default=HERE)
    ap.add_argument("--vocab", type=int, default=8000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--train-lines", type=int, default=60000)
    ap.add_argument("--only", choices=["lfm2", "qwen35"])
    args = ap.parse_args()
    corpus = read_corpus(args.corpus)
    import tokenizers
    print(f"tokenizers {tokenizers.__version__}", file=sys.stderr)
    for kind in ["lfm2", "qwen35"]:
        if args.only in (None, kind):
            make(kind, args.out, corpus, args)


if __name__ == "__main__":
    main()
