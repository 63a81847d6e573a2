/* Text -> first id with that text, over a GGUF string array
 * (tokenizer.ggml.tokens). Vocabularies hold 100k-260k strings, so the
 * importers look texts up in this open-addressing table (FNV-1a, linear
 * probing, at most half full), built once a vocabulary. */
#ifndef WISP_GGUF_TEXT_INDEX_H
#define WISP_GGUF_TEXT_INDEX_H

#include <stddef.h>
#include <stdint.h>

#include "format/gguf.h"

typedef struct {
  const wisp_gguf_kv *tok;
  int32_t *slot;  /* an id, -1 empty */
  uint32_t *tag;  /* the slot's text's hash, high half: most mismatches end here, without reading the text */
  size_t cap;    /* a power of two */
} wisp_text_index;

/* Index the ids of tok for which keep(ctx, id) is true (every id when keep
 * is NULL); a text repeated among them keeps its first id. 0 when out of
 * memory. */
int wisp_text_index_build(wisp_text_index *x, const wisp_gguf_kv *tok, int (*keep)(const void *ctx, uint64_t id),
                          const void *ctx);
/* The id indexed for the n bytes at s, -1 when none. */
int32_t wisp_text_index_get(const wisp_text_index *x, const char *s, size_t n);
void wisp_text_index_free(wisp_text_index *x);

#endif
