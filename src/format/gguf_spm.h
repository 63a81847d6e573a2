/* SentencePiece vocabularies in GGUF (tokenizer.ggml.model = "llama"):
 * tokens, scores, token types, <0xXX> byte tokens, "▁" for the space and
 * add_space_prefix. Import turns them into the tokenizer.json Hugging Face
 * writes for Llama 2 style tokenizers (BPE with byte_fallback, merges in
 * score order, Prepend/Replace normalizer, Replace/ByteFallback/Fuse/Strip
 * decoder), which wisp's BPE tokenizer reads. */
#ifndef WISP_GGUF_SPM_H
#define WISP_GGUF_SPM_H

#include <cJSON.h>

#include "format/gguf.h"
#include "wisp.h"

#define WISP_SPM_SPACE "\xe2\x96\x81" /* U+2581, SentencePiece's space */

/* tokenizer.json for the vocabulary `tok` (strings) with optional token
 * types `types`; the scores and flags come from g. *out is cJSON. */
wisp_status wisp_gguf_spm_json(const wisp_gguf *g, const wisp_gguf_kv *tok, const wisp_gguf_kv *types, cJSON **out);
/* tokenizer.ggml.add_space_prefix, true when absent (llama.cpp's default). */
int wisp_gguf_spm_add_space_prefix(const wisp_gguf *g);

/* The other way, for export-gguf: a SentencePiece-style tokenizer.json
 * (BPE with byte_fallback, no ByteLevel) as tokenizer.ggml.* arrays for n
 * ids. Strings point into root (or pad); valid while both live. */
typedef struct {
  int n;
  const char **tokens;
  float *scores;
  int32_t *types; /* llama.cpp's: 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte */
  char *pad;      /* "[PADi]" names of ids without a token */
  int add_space_prefix;
  int32_t unk; /* -1: none */
} wisp_spm_vocab;

int wisp_spm_is_sentencepiece(const cJSON *root);
wisp_status wisp_spm_vocab_from_json(const cJSON *root, int n, const char *label, wisp_spm_vocab *out);
void wisp_spm_vocab_free(wisp_spm_vocab *v);

#endif
