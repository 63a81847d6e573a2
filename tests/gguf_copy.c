/* Copying a GGUF's metadata into a writer, for tests that rewrite a file
 * (gguf_copy.h). */
#include "gguf_copy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "util/err.h"

/* The metadata of src into w, every type an export writes. 0: a type this
 * copy does not know. */
int gguf_copy_kv(wisp_gguf_writer *w, const wisp_gguf_kv *kv) {
  char str[4096];
  switch (kv->type) {
    case WISP_GGUF_UINT32: wisp_gguf_put_u32(w, kv->key, (uint32_t)kv->num.u); return 1;
    case WISP_GGUF_INT32: wisp_gguf_put_i32(w, kv->key, (int32_t)kv->num.i); return 1;
    case WISP_GGUF_FLOAT32: wisp_gguf_put_f32(w, kv->key, (float)kv->num.f); return 1;
    case WISP_GGUF_BOOL: wisp_gguf_put_bool(w, kv->key, kv->num.u != 0); return 1;
    case WISP_GGUF_STRING:
      if (kv->str.len >= sizeof str) return 0;
      memcpy(str, kv->str.s, kv->str.len);
      str[kv->str.len] = 0;
      wisp_gguf_put_str(w, kv->key, str);
      return 1;
    case WISP_GGUF_ARRAY: break;
    default: return 0;
  }
  int ok = 1;
  if (kv->arr_type == WISP_GGUF_STRING) {
    char **v = calloc(kv->n ? kv->n : 1, sizeof *v);
    for (uint64_t i = 0; v && i < kv->n && ok; i++)
      if ((v[i] = malloc(kv->strs[i].len + 1))) {
        memcpy(v[i], kv->strs[i].s, kv->strs[i].len);
        v[i][kv->strs[i].len] = 0;
      } else {
        ok = 0;
      }
    if (v && ok) wisp_gguf_put_arr_str(w, kv->key, (const char *const *)v, kv->n);
    for (uint64_t i = 0; v && i < kv->n; i++) free(v[i]);
    free(v);
    return v && ok;
  }
  if (kv->arr_type == WISP_GGUF_INT32 || kv->arr_type == WISP_GGUF_UINT32) {
    int32_t *v = malloc(sizeof *v * (kv->n ? kv->n : 1));
    for (uint64_t i = 0; v && i < kv->n; i++) v[i] = (int32_t)wisp_gguf_arr_int(kv, i);
    if (v) wisp_gguf_put_arr_i32(w, kv->key, v, kv->n);
    free(v);
    return v != NULL;
  }
  if (kv->arr_type == WISP_GGUF_FLOAT32) {
    float *v = malloc(sizeof *v * (kv->n ? kv->n : 1));
    for (uint64_t i = 0; v && i < kv->n; i++) v[i] = (float)wisp_gguf_arr_float(kv, i);
    if (v) wisp_gguf_put_arr_f32(w, kv->key, v, kv->n);
    free(v);
    return v != NULL;
  }
  return 0;
}

int gguf_copy_tensor_as(wisp_gguf_writer *w, const wisp_gguf *g, const wisp_gguf_tensor *t, uint32_t type,
                        gguf_quantize_fn quantize, char *err, size_t cap) {
  size_t bb = 4;
  const int block = type == WISP_GGML_F32 ? 1 : wisp_ggml_block(type, &bb);
  const size_t bytes = t->numel / (size_t)block * bb;
  float *f = malloc(sizeof(float) * t->numel);
  uint8_t *q = malloc(bytes);
  int ok = 1;
  if (!f || !q || wisp_gguf_read_f32(g, t, f)) {
    ok = 0, snprintf(err, cap, "%s: not read", t->name);
  } else {
    if (quantize) quantize(f, (int)t->ne[1], (int)t->ne[0], q);
    else memcpy(q, f, bytes);
    if (wisp_gguf_add_tensor(w, t->name, t->n_dims, t->ne, type, q, bytes))
      ok = 0, snprintf(err, cap, "%s: %s", t->name, wisp_last_error());
  }
  free(f), free(q);
  return ok;
}

int gguf_logits_json(const char *model, const char *backend, const char *extra, const char *out, char *log,
                     size_t cap) {
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "%s logits -m %s --backend %s --tokens 1,5,9,3,7,11,2 --greedy 12 %s -o %s --force 2>&1",
           test_wisp_bin(), model, backend, extra, out);
  return test_run(cmd, log, cap);
}

wisp_gguf_writer *gguf_gpt2_vocab_writer(const char *pre, const char *const *tokens, const int32_t *types, int n,
                                         const char *const *merges, int n_merges) {
  wisp_gguf_writer *w = wisp_gguf_writer_new();
  if (!w) return NULL;
  wisp_gguf_put_str(w, "tokenizer.ggml.model", "gpt2");
  wisp_gguf_put_str(w, "tokenizer.ggml.pre", pre);
  wisp_gguf_put_arr_str(w, "tokenizer.ggml.tokens", tokens, (uint64_t)n);
  if (types) wisp_gguf_put_arr_i32(w, "tokenizer.ggml.token_type", types, (uint64_t)n);
  wisp_gguf_put_arr_str(w, "tokenizer.ggml.merges", merges, (uint64_t)n_merges);
  return w;
}
