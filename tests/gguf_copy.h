/* For tests that write GGUF files: a vocabulary-only writer, a file
 * rewritten (other tensor types, another tensor order) with its metadata
 * and tensors copied, and the result run. */
#ifndef WISP_TEST_GGUF_COPY_H
#define WISP_TEST_GGUF_COPY_H

#include <stddef.h>
#include <stdint.h>

#include "format/gguf.h"

/* The metadata entry kv into w, every type an export writes. 0: a type
 * this copy does not know. */
int gguf_copy_kv(wisp_gguf_writer *w, const wisp_gguf_kv *kv);

/* Quantizes rows x cols f32 values into `out` (the bytes of one type). */
typedef void (*gguf_quantize_fn)(const float *x, int rows, int cols, uint8_t *out);

/* Tensor t of g into w as `type`: read as f32, then quantized (NULL:
 * stored as read, for F32). 0 with a line in err on failure. */
int gguf_copy_tensor_as(wisp_gguf_writer *w, const wisp_gguf *g, const wisp_gguf_tensor *t, uint32_t type,
                        gguf_quantize_fn quantize, char *err, size_t cap);

/* `wisp logits` of a model (a rewritten file, or the artifact made of it) on
 * one backend: a fixed 7-token prompt and 12 greedy tokens, into out (JSON);
 * extra: more arguments. The command's exit status; its output in log. */
int gguf_logits_json(const char *model, const char *backend, const char *extra, const char *out, char *log,
                     size_t cap);

/* A new writer holding a gpt2 (byte-level BPE) vocabulary:
 * tokenizer.ggml.pre `pre`, the n tokens (with their types; NULL: no
 * token_type key) and the merges. NULL when out of memory. */
wisp_gguf_writer *gguf_gpt2_vocab_writer(const char *pre, const char *const *tokens, const int32_t *types, int n,
                                         const char *const *merges, int n_merges);

#endif
