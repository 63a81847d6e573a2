/* BPE from a Hugging Face tokenizer.json (byte-level or SentencePiece style) (internal to
 * src/tokenizer; the public face is tokenizer.h). */
#ifndef WISP_BPE_H
#define WISP_BPE_H

#include <stddef.h>
#include <stdint.h>

#include "wisp.h"

typedef struct wisp_bpe wisp_bpe;

wisp_status wisp_bpe_load(const char *json, const char *label, wisp_bpe **out);
void wisp_bpe_free(wisp_bpe *b);
wisp_status wisp_bpe_encode(const wisp_bpe *b, const char *text, size_t len, int add_special, int32_t **ids, int *n);
const char *wisp_bpe_token(const wisp_bpe *b, int32_t id, size_t *len);
int32_t wisp_bpe_token_id(const wisp_bpe *b, const char *content);
int wisp_bpe_is_special(const wisp_bpe *b, int32_t id);
int wisp_bpe_n_ids(const wisp_bpe *b);
int32_t wisp_bpe_bos(const wisp_bpe *b);
/* How many leading spaces the decoder drops from a whole decoded text
 * (Strip / Metaspace: the space SentencePiece put before the first word). */
int wisp_bpe_strip_start(const wisp_bpe *b);
/* The ids the post-processor puts before and after the text. */
void wisp_bpe_template_ids(const wisp_bpe *b, const int32_t **prefix, int *n_prefix, const int32_t **suffix,
                           int *n_suffix);

#endif
