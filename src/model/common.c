/* Shared forward-pass pieces; see common.h. */
#include "model/common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/quant.h"
#include "util/err.h"

wisp_status wisp_model_check_forward(const int32_t *tokens, int n, int pos0, int chunk, int max_pos, int vocab) {
  if (n < 1 || n > chunk) return wisp_fail(WISP_EINVAL, "forward: %d tokens, chunk is %d", n, chunk);
  if (pos0 < 0 || pos0 + n > max_pos)
    return wisp_fail(WISP_EINVAL, "context full: %d + %d tokens exceed %d positions", pos0, n, max_pos);
  for (int t = 0; tokens && t < n; t++)
    if (tokens[t] < 0 || tokens[t] >= vocab)
      return wisp_fail(WISP_EINVAL, "token id %d is outside the vocabulary (%d)", tokens[t], vocab);
  return WISP_OK;
}

/* One row: logits = head(rmsnorm(x)), the norm inside the product where
 * the session's plan applies that fusion, and with ids the greedy choice
 * into ids[slot] too (sampling s, step). Returns 1 when that choice was
 * made (else the caller samples). */
static int head_norm_product(wisp_backend *be, const wisp_model_head *h, const wisp_buf *x, const wisp_sampling *s,
                             uint32_t step, wisp_buf *ids, int slot) {
  const int norm = (h->fused & WISP_FUSE_NORM_MATMUL) != 0;
  if (be->matmul_fused && (norm || ids)) {
    wisp_fused_matmul f = {.pre = norm ? WISP_PRE_RMSNORM : WISP_PRE_NONE, .pre_in = x, .pre_dim = h->hidden,
                           .norm = h->norm, .eps = h->eps, .W = h->head, .x = h->xn, .y = h->logits,
                           .post = ids ? WISP_POST_ARGMAX : WISP_POST_NONE, .sampling = s, .step = step, .ids = ids,
                           .slot = slot};
    if (!norm) be->rmsnorm(be, x, h->norm, h->eps, 1, h->hidden, h->xn);
    return be->matmul_fused(be, &f) && ids;
  }
  if (norm && be->rmsnorm_matmul) {
    be->rmsnorm_matmul(be, x, h->norm, h->eps, 1, h->xn, h->head, h->logits, 0);
    return 0;
  }
  be->rmsnorm(be, x, h->norm, h->eps, 1, h->hidden, h->xn);
  be->matmul(be, h->head, h->xn, 0, 1, h->logits, 0);
  return 0;
}

wisp_status wisp_model_head_logits(wisp_backend *be, const wisp_model_head *h, const wisp_buf *x, int n, float *logits,
                                   int all) {
  if (!logits) return be->sync(be);
  /* One row at a time through the one-row logits buffer: the last row, or
   * every row into logits[r * vocab]. */
  /* The final norm always feeds the head product: one op where the
   * session's plan applies that fusion (one row: the head reads the
   * norm's only row). */
  if (n == 1 && (h->fused & WISP_FUSE_NORM_MATMUL) && (be->matmul_fused || be->rmsnorm_matmul)) {
    head_norm_product(be, h, x, NULL, 0, NULL, 0);
    wisp_status st = be->sync(be);
    if (st) return st;
    be->buf_read(be, h->logits, 0, (size_t)h->vocab, logits);
    return WISP_OK;
  }
  be->rmsnorm(be, x, h->norm, h->eps, n, h->hidden, h->xn);
  for (int r = all ? 0 : n - 1; r < n; r++) {
    be->matmul(be, h->head, h->xn, r, 1, h->logits, 0);
    wisp_status st = be->sync(be);
    if (st) return st;
    be->buf_read(be, h->logits, 0, (size_t)h->vocab, logits + (all ? (size_t)r * h->vocab : 0));
  }
  return WISP_OK;
}

void wisp_model_head_sample(wisp_backend *be, const wisp_model_head *h, const wisp_buf *x, const wisp_sampling *s,
                            uint32_t step, wisp_buf *ids, int slot, int pos) {
  const int penalized = wisp_sampling_penalized(s);
  /* the greedy choice inside the head product where the plan applies it
   * (and no penalty comes between them) */
  const int argmax = (h->fused & WISP_FUSE_HEAD_ARGMAX) && be->matmul_fused && s->temperature <= 0 && !penalized;
  if (head_norm_product(be, h, x, s, step, argmax ? ids : NULL, slot)) return;
  if (penalized) {
    be->buf_copy(be, ids, s->hist_off + (uint32_t)(pos % s->hist_n), (size_t)slot - 1, 1);
    be->penalize(be, h->logits, h->vocab, ids, s->hist_off, s->hist_n, s->repeat_penalty);
  }
  be->sample_id(be, h->logits, h->vocab, s, step, ids, slot);
}

void wisp_model_matmul(wisp_backend *be, const wisp_matrix *W, const wisp_buf *x, int n, wisp_buf *y, int accumulate,
                       const wisp_model_rows *rows) {
  if (rows) be->matmul_rows(be, W, x, n, y, accumulate);
  else be->matmul(be, W, x, 0, n, y, accumulate);
}

wisp_status wisp_model_check_rows(const int32_t *tokens, const wisp_model_rows *rows, int chunk, const int *max_pos,
                                  int vocab) {
  if (rows->n < 1 || rows->n > chunk) return wisp_fail(WISP_EINVAL, "step: %d sequences, at most %d", rows->n, chunk);
  for (int r = 0; r < rows->n; r++) {
    if (rows->pos[r] < 0 || rows->pos[r] >= max_pos[r])
      return wisp_fail(WISP_EINVAL, "context full: sequence %d is at %d of %d positions", r, rows->pos[r], max_pos[r]);
    if (tokens[r] < 0 || tokens[r] >= vocab)
      return wisp_fail(WISP_EINVAL, "token id %d is outside the vocabulary (%d)", tokens[r], vocab);
  }
  return WISP_OK;
}

void wisp_model_head_sample_rows(wisp_backend *be, const wisp_model_head *h, const wisp_buf *x,
                                 const wisp_model_rows *rows, wisp_buf *rows_logits, const wisp_sampling *s,
                                 wisp_buf *ids) {
  be->rmsnorm(be, x, h->norm, h->eps, rows->n, h->hidden, h->xn);
  be->matmul_rows(be, h->head, h->xn, rows->n, rows_logits, 0);
  uint32_t steps[WISP_MAX_ROWS];
  for (int r = 0; r < rows->n && r < WISP_MAX_ROWS; r++) steps[r] = (uint32_t)rows->pos[r] + 1u;
  if (be->sample_rows && rows->n <= WISP_MAX_ROWS && be->sample_rows(be, rows_logits, h->vocab, rows->n, s, steps, ids))
    return; /* one dispatch for all rows */
  for (int r = 0; r < rows->n; r++) {
    be->buf_copy_at(be, h->logits, 0, rows_logits, (size_t)r * h->vocab, (size_t)h->vocab);
    be->sample_id(be, h->logits, h->vocab, &s[r], (uint32_t)rows->pos[r] + 1u, ids, r);
  }
}

/* ---- binding ---- */

wisp_status wisp_model_bind_vector(const wisp_artifact *a, const char *name, int n, wisp_vector *v) {
  const uint8_t *p;
  wisp_status st = wisp_artifact_bytes_resident(a, name, (uint64_t)n * 4, &p);
  if (st) return st;
  v->n = n;
  v->data = (const float *)p;
  return WISP_OK;
}

/* Rows of the table computed at load where the artifact stores none; a
 * session whose context is longer builds its own (engine/session.c). */
#define ROPE_LOAD_ROWS 4096

static wisp_status bind_rope(const wisp_artifact *a, int rotary_dim, int f32_freq, wisp_model_globals *g) {
  const int half = rotary_dim / 2;
  wisp_status st;
  const wisp_section *fs = wisp_artifact_section(a, "rope.freq");
  if (fs && (st = wisp_model_bind_vector(a, "rope.freq", half, &g->rope_freq))) return st;
  const char *pairs[2][2] = {{"rope.cos_ext", "rope.sin_ext"}, {"rope.cos", "rope.sin"}};
  for (int i = 0; i < 2; i++) {
    const wisp_section *c = wisp_artifact_section(a, pairs[i][0]);
    if (!c) continue;
    if (c->bytes == 0 || c->bytes % ((uint64_t)half * 4))
      return wisp_fail(WISP_EFORMAT, "%s: section '%s' (%llu bytes) is not a whole number of %d-float rows",
                       a->dir ? a->dir : "artifact", pairs[i][0], (unsigned long long)c->bytes, half);
    int rows = (int)(c->bytes / ((uint64_t)half * 4));
    if ((st = wisp_model_bind_vector(a, pairs[i][0], rows * half, &g->rope_cos)) ||
        (st = wisp_model_bind_vector(a, pairs[i][1], rows * half, &g->rope_sin)))
      return st;
    g->positions = rows;
    return WISP_OK;
  }
  /* No tables: the frequencies from ropeTheta (rope.freq where stored), the
   * tables for the first rows. */
  const int rows = a->max_positions < ROPE_LOAD_ROWS ? a->max_positions : ROPE_LOAD_ROWS;
  g->rope_owned = malloc(sizeof(float) * ((size_t)2 * rows * half + (size_t)half));
  if (!g->rope_owned) return wisp_fail(WISP_ENOMEM, "out of memory for rope tables");
  float *cs = g->rope_owned, *sn = g->rope_owned + (size_t)rows * half, *inv = sn + (size_t)rows * half;
  for (int i = 0; i < half; i++)
    inv[i] = g->rope_freq.data ? g->rope_freq.data[i]
             : f32_freq        ? 1.0f / powf((float)a->rope_theta, (float)(2 * i) / (float)rotary_dim)
                               : (float)(1.0 / pow(a->rope_theta, (double)(2 * i) / (double)rotary_dim));
  wisp_rope_rows(inv, half, rows, cs, sn);
  g->rope_freq = (wisp_vector){half, inv, NULL};
  g->rope_cos = (wisp_vector){rows * half, cs, NULL};
  g->rope_sin = (wisp_vector){rows * half, sn, NULL};
  g->positions = rows;
  return WISP_OK;
}

wisp_status wisp_model_bind_globals(const wisp_artifact *a, int rotary_dim, int f32_freq, wisp_model_globals *g) {
  const wisp_shape *s = &a->shape;
  wisp_status st;
  if ((st = wisp_matrix_bind(a, "embed", s->vocab, s->hidden, &g->embed))) return st;
  if (wisp_matrix_present(a, "head")) {
    if ((st = wisp_matrix_bind(a, "head", s->vocab, s->hidden, &g->head))) return st;
  } else {
    g->head = g->embed; /* tied */
  }
  if ((st = wisp_model_bind_vector(a, "head.norm", s->hidden, &g->final_norm))) return st;
  if ((st = bind_rope(a, rotary_dim, f32_freq, g))) return st;
  g->rope_pairs = s->rope_pairs;
  /* With the frequencies a session builds tables for any context up to the
   * model's; without them (older artifacts) the stored tables bound it. */
  g->max_positions = g->rope_freq.data || a->max_positions < g->positions ? a->max_positions : g->positions;
  return WISP_OK;
}

void wisp_model_globals_free(wisp_model_globals *g) {
  free(g->rope_owned);
  g->rope_owned = NULL;
}

wisp_matrix *wisp_model_globals_matrix(wisp_model_globals *g, const char *section) {
  if (!strcmp(section, "head")) return &g->head;
  if (!strcmp(section, "embed")) return &g->embed;
  return NULL;
}

void wisp_model_globals_describe(wisp_model_globals *m, wisp_graph *g) {
  g->rope_rows = m->positions;
  g->rope_pairs = m->rope_pairs;
  g->rope_freq = m->rope_freq.data;
  g->max_positions = m->max_positions;
  g->embed = &m->embed;
  g->head = &m->head;
  g->final_norm = &m->final_norm;
  g->rope_cos = &m->rope_cos;
  g->rope_sin = &m->rope_sin;
}

wisp_status wisp_model_shape_common(const wisp_shape *s, const char *arch, wisp_model_shape *out) {
  if (s->n_layers > WISP_MAX_LAYERS)
    return wisp_fail(WISP_EUNSUPPORTED, "%d layers: plans hold at most %d", s->n_layers, WISP_MAX_LAYERS);
  memset(out, 0, sizeof *out);
  snprintf(out->architecture, sizeof out->architecture, "%s", arch);
  out->n_layers = s->n_layers;
  out->rope_pairs = s->rope_pairs;
  for (int i = 0; i < s->n_layers; i++) out->layer_types[i] = WISP_LAYER_ATTENTION;
  out->hidden = s->hidden;
  out->ffn = s->ffn;
  out->vocab = s->vocab;
  out->heads = s->heads;
  out->kv_heads = s->kv_heads;
  out->head_dim = s->head_dim;
  out->conv_cache = s->conv_cache;
  return WISP_OK;
}

void wisp_model_shape_ffn_quant(wisp_model_shape *out, int n_layers, const wisp_matrix *gate_up,
                                const wisp_matrix *down, size_t stride) {
  out->quant_bits = wisp_matrix_quant_bits(gate_up);
  for (int i = 0; i < n_layers; i++) {
    const wisp_matrix *gu = (const wisp_matrix *)((const char *)gate_up + (size_t)i * stride);
    const wisp_matrix *dn = (const wisp_matrix *)((const char *)down + (size_t)i * stride);
    if (wisp_matrix_holds(dn, WISP_W_Q4K) || wisp_matrix_holds(gu, WISP_W_Q4K)) out->q4k = 1;
  }
}
