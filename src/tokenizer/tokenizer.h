/* Tokenizers. For now wisp has the byte-level one that synthetic models use:
 * ids 0..255 are the bytes themselves; larger ids have no text and are shown
 * as "<|id|>". A BPE tokenizer (tokenizer.json) is a later addition. */
#ifndef WISP_TOKENIZER_H
#define WISP_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "wisp.h"

typedef struct wisp_tokenizer wisp_tokenizer;

/* kind: "byte" (the manifest's wisp.tokenizer). */
wisp_status wisp_tokenizer_new(const char *kind, int vocab, wisp_tokenizer **out);
void wisp_tokenizer_free(wisp_tokenizer *t);
/* Encodes text; *ids is malloc'd. */
wisp_status wisp_tokenizer_encode(const wisp_tokenizer *t, const char *text, int32_t **ids, int *n);
/* Appends the bytes of one token to out (cap bytes); returns their count. */
size_t wisp_tokenizer_piece(const wisp_tokenizer *t, int32_t id, char *out, size_t cap);

#endif
