#!/usr/bin/env python3
"""Trains the default model's tokenizer: a byte-level BPE with Hugging Face
`tokenizers`, in the LFM2 configuration wisp's BPE (src/tokenizer/bpe.c)
reproduces token for token (the one tests/tokenizer/make_reference.py builds
for tests/test_tokenizer.c):

  - pre-tokenizer: Split(LFM2 regex, isolated) + ByteLevel(no prefix space,
    no regex); ByteLevel decoder; BPE with ignore_merges
  - special tokens <|pad|> <|startoftext|> <|endoftext|> <|im_start|> <|im_end|>
    (ids 0..4, in the model vocabulary)
  - TemplateProcessing: <|startoftext|> (BOS) before every encoded text

    train_tokenizer.py --train TRAIN.txt --out DIR [--vocab 4096]

writes DIR/tokenizer.json, DIR/tokenizer_config.json (LFM2 chat template,
bos <|startoftext|>, eos <|im_end|>) and DIR/generation_config.json.
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "tokenizer"))
from make_reference import LFM2_PATTERN, LFM2_TEMPLATE, write_json  # noqa: E402

SPECIALS = ["<|pad|>", "<|startoftext|>", "<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def lines(path):
    with open(path, encoding="utf-8", newline="") as f:
        for line in f:
            yield line


def build(train_path, vocab_size):
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LFM2_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(lines(train_path), trainer=trainer)
    bos = tok.token_to_id("<|startoftext|>")
    tok.post_processor = processors.TemplateProcessing(
        single="<|startoftext|> $A", pair="<|startoftext|> $A <|startoftext|> $B",
        special_tokens=[("<|startoftext|>", bos)])
    return tok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--train", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--vocab", type=int, default=4096)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    tok = build(args.train, args.vocab)
    path = os.path.join(args.out, "tokenizer.json")
    tok.save(path)
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    if doc["model"].get("ignore_merges") is not True:  # make sure training kept the flag
        doc["model"]["ignore_merges"] = True
        write_json(path, doc)
    ids = {t: tok.token_to_id(t) for t in SPECIALS}
    write_json(os.path.join(args.out, "tokenizer_config.json"), {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<|startoftext|>",
        "eos_token": "<|im_end|>",
        "pad_token": "<|pad|>",
        "model_max_length": 512,
        "chat_template": LFM2_TEMPLATE,
    })
    write_json(os.path.join(args.out, "generation_config.json"), {
        "bos_token_id": ids["<|startoftext|>"],
        "eos_token_id": [ids["<|im_end|>"], ids["<|endoftext|>"]],
        "pad_token_id": ids["<|pad|>"],
    })
    from tokenizers import Tokenizer
    back = Tokenizer.from_file(path)
    sample = "In the beginning God created the heaven and the earth.\n"
    enc = back.encode(sample)
    if back.decode(enc.ids, skip_special_tokens=True) != sample:
        sys.exit("train_tokenizer.py: round trip failed")
    print("tokenizer: vocab %d, specials %s, %r -> %d ids -> %s" % (
        back.get_vocab_size(), ids, sample, len(enc.ids), args.out))


if __name__ == "__main__":
    main()
