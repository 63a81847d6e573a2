/* Tokenizers. Two kinds:
 *   - "byte": ids 0..255 are the bytes themselves (synthetic models); larger
 *     ids have no text and are shown as "<|id|>".
 *   - "bpe": a Hugging Face tokenizer.json with a byte-level BPE model
 *     (src/tokenizer/bpe.c; docs/tokenizer.md says what is supported).
 * An artifact says which in wisp.tokenizer; wisp_tokenizer_for_artifact
 * builds the right one. */
#ifndef WISP_TOKENIZER_H
#define WISP_TOKENIZER_H

#include <cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "wisp.h"

typedef struct wisp_tokenizer wisp_tokenizer;

/* kind: "byte" (vocab = the model's vocabulary). A "bpe" tokenizer needs its
 * file: wisp_tokenizer_from_file or wisp_tokenizer_for_artifact. */
wisp_status wisp_tokenizer_new(const char *kind, int vocab, wisp_tokenizer **out);
/* A BPE tokenizer from a Hugging Face tokenizer.json. */
wisp_status wisp_tokenizer_from_file(const char *path, wisp_tokenizer **out);
/* The same from JSON text; `label` names it in error messages. */
wisp_status wisp_tokenizer_from_json(const char *json, const char *label, wisp_tokenizer **out);
/* The tokenizer an artifact directory declares: wisp.tokenizer "byte" (model
 * vocab `vocab`) or "bpe" (DIR/<wisp.tokenizerFiles.tokenizer>). */
wisp_status wisp_tokenizer_for_artifact(const char *dir, const char *kind, const cJSON *manifest, int vocab,
                                        wisp_tokenizer **out);
/* Path of one of the artifact's tokenizer files: which = "tokenizer",
 * "config" or "generation" (wisp.tokenizerFiles); 0 when absent. */
int wisp_tokenizer_artifact_file(const char *dir, const cJSON *manifest, const char *which, char *path, size_t cap);
void wisp_tokenizer_free(wisp_tokenizer *t);

/* Encodes NUL-terminated text with the post-processor's special tokens (BOS
 * for LFM2-style tokenizers); *ids is malloc'd. */
wisp_status wisp_tokenizer_encode(const wisp_tokenizer *t, const char *text, int32_t **ids, int *n);
/* Encodes len bytes (valid UTF-8 for BPE); add_special: apply the
 * post-processor (TemplateProcessing BOS/EOS). Added and special tokens in
 * the text are always recognised. */
wisp_status wisp_tokenizer_encode_n(const wisp_tokenizer *t, const char *text, size_t len, int add_special,
                                    int32_t **ids, int *n);
/* Decodes ids to their exact bytes (special tokens included); *out is
 * malloc'd and NUL-terminated. Unknown ids produce nothing. */
wisp_status wisp_tokenizer_decode(const wisp_tokenizer *t, const int32_t *ids, int n, char **out, size_t *len);
/* The bytes of one token (not NUL-terminated); NULL/0 when unknown. */
const char *wisp_tokenizer_token_bytes(const wisp_tokenizer *t, int32_t id, size_t *len);
/* Appends the bytes of one token to out (cap bytes); returns their count. */
size_t wisp_tokenizer_piece(const wisp_tokenizer *t, int32_t id, char *out, size_t cap);
/* Id of a token by its content (added/special tokens first, then the
 * vocabulary); -1 when there is none. */
int32_t wisp_tokenizer_token_id(const wisp_tokenizer *t, const char *content);
/* 1 when id is a special added token (e.g. <|im_end|>). */
int wisp_tokenizer_is_special(const wisp_tokenizer *t, int32_t id);
/* Largest id + 1. */
int wisp_tokenizer_vocab_size(const wisp_tokenizer *t);
/* The BOS id the post-processor adds, or -1. */
int32_t wisp_tokenizer_bos(const wisp_tokenizer *t);
/* The ids encoding with add_special puts before (*prefix) and after
 * (*suffix) the text; none for the byte kind. Valid while t lives. */
void wisp_tokenizer_template_ids(const wisp_tokenizer *t, const int32_t **prefix, int *n_prefix,
                                 const int32_t **suffix, int *n_suffix);
const char *wisp_tokenizer_kind(const wisp_tokenizer *t);

/* Streaming decoder: feed ids one at a time and get the bytes that are safe
 * to print. A UTF-8 sequence split across tokens is held back until it is
 * complete (or proven invalid), so the output never ends mid-character until
 * the final flush. */
typedef struct {
  const wisp_tokenizer *tok;
  char *buf;
  size_t len, cap, held; /* buf[0..len): returned bytes then held bytes */
} wisp_stream_decoder;

void wisp_stream_init(wisp_stream_decoder *d, const wisp_tokenizer *t);
/* Pushes one id; *out and *out_len are the bytes ready now (valid until the next
 * call). Returns WISP_ENOMEM on allocation failure. */
wisp_status wisp_stream_push(wisp_stream_decoder *d, int32_t id, const char **out, size_t *out_len);
/* Returns whatever is still held (an incomplete sequence at the end). */
void wisp_stream_flush(wisp_stream_decoder *d, const char **out, size_t *out_len);
void wisp_stream_free(wisp_stream_decoder *d);

/* Length of the longest prefix of s[0..len) that does not end inside an
 * incomplete (but so far valid) UTF-8 sequence. */
size_t wisp_utf8_complete_prefix(const char *s, size_t len);
/* 1 when s[0..len) is valid UTF-8 (no overlongs, surrogates or > U+10FFFF). */
int wisp_utf8_valid(const char *s, size_t len);

#endif
