/* The byte-level tokenizer; see tokenizer.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer.h"
#include "util/err.h"

struct wisp_tokenizer {
  int vocab;
};

wisp_status wisp_tokenizer_new(const char *kind, int vocab, wisp_tokenizer **out) {
  *out = NULL;
  if (strcmp(kind, "byte") != 0) return wisp_fail(WISP_EUNSUPPORTED, "unknown tokenizer kind '%s'", kind);
  if (vocab < 256) return wisp_fail(WISP_EFORMAT, "a byte tokenizer needs a vocabulary of at least 256, not %d", vocab);
  wisp_tokenizer *t = calloc(1, sizeof *t);
  if (!t) return wisp_fail(WISP_ENOMEM, "out of memory");
  t->vocab = vocab;
  *out = t;
  return WISP_OK;
}

void wisp_tokenizer_free(wisp_tokenizer *t) { free(t); }

wisp_status wisp_tokenizer_encode(const wisp_tokenizer *t, const char *text, int32_t **ids, int *n) {
  (void)t;
  size_t len = strlen(text);
  *ids = malloc(sizeof(int32_t) * (len ? len : 1));
  if (!*ids) return wisp_fail(WISP_ENOMEM, "out of memory");
  for (size_t i = 0; i < len; i++) (*ids)[i] = (uint8_t)text[i];
  *n = (int)len;
  return WISP_OK;
}

size_t wisp_tokenizer_piece(const wisp_tokenizer *t, int32_t id, char *out, size_t cap) {
  (void)t;
  if (cap == 0) return 0;
  if (id >= 0 && id < 256) {
    out[0] = (char)id;
    return 1;
  }
  int n = snprintf(out, cap, "<|%d|>", (int)id);
  return n < 0 ? 0 : ((size_t)n < cap ? (size_t)n : cap - 1);
}
