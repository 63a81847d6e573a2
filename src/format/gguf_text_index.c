/* Text -> first id, over a GGUF vocabulary: see gguf_text_index.h. */
#include "format/gguf_text_index.h"

#include <stdlib.h>
#include <string.h>

static uint64_t hash_text(const char *s, size_t n) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
  return h;
}

int32_t wisp_text_index_get(const wisp_text_index *x, const char *s, size_t n) {
  uint64_t h = hash_text(s, n);
  size_t mask = x->cap - 1, i = (size_t)h & mask;
  for (;; i = (i + 1) & mask) { /* ends: the table is at most half full */
    int32_t id = x->slot[i];
    if (id < 0) return -1;
    if (x->tag[i] != (uint32_t)(h >> 32)) continue;
    const wisp_gguf_str *t = &x->tok->strs[id];
    if (t->len == n && !memcmp(t->s, s, n)) return id;
  }
}

int wisp_text_index_build(wisp_text_index *x, const wisp_gguf_kv *tok, int (*keep)(const void *ctx, uint64_t id),
                          const void *ctx) {
  x->tok = tok;
  x->cap = 16;
  while (x->cap < tok->n * 2 + 2) x->cap *= 2;
  x->slot = malloc(sizeof(int32_t) * x->cap);
  x->tag = malloc(sizeof(uint32_t) * x->cap);
  if (!x->slot || !x->tag) {
    wisp_text_index_free(x);
    return 0;
  }
  for (size_t i = 0; i < x->cap; i++) x->slot[i] = -1;
  for (uint64_t id = 0; id < tok->n; id++) {
    if (keep && !keep(ctx, id)) continue;
    const wisp_gguf_str *t = &tok->strs[id];
    uint64_t h = hash_text(t->s, (size_t)t->len);
    size_t i = (size_t)h & (x->cap - 1);
    for (; x->slot[i] >= 0; i = (i + 1) & (x->cap - 1)) {
      const wisp_gguf_str *u = &tok->strs[x->slot[i]];
      if (u->len == t->len && !memcmp(u->s, t->s, (size_t)t->len)) break; /* a repeated text: the first id stays */
    }
    if (x->slot[i] < 0) {
      x->slot[i] = (int32_t)id;
      x->tag[i] = (uint32_t)(h >> 32);
    }
  }
  return 1;
}

void wisp_text_index_free(wisp_text_index *x) {
  free(x->slot);
  free(x->tag);
  x->slot = NULL;
  x->tag = NULL;
  x->cap = 0;
}
