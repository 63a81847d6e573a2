/* LFM2: Liquid's hybrid of gated short convolutions and grouped-query
 * attention, as Hugging Face's Lfm2ForCausalLM computes it.
 *
 *   x = embed(token)
 *   for each layer:
 *     h = rmsnorm(x, operator_norm)
 *     conv layer:      B, C, u = split(in_proj h); y = C * conv(B * u); x += out_proj y
 *     attention layer: q, k, v = split(qkv h); q, k = rope(rmsnorm_head(q), rmsnorm_head(k));
 *                      x += o_proj attend(q, k, v)
 *     x += down(silu(gate h') * up h'),  h' = rmsnorm(x, ffn_norm)
 *   logits = head(rmsnorm(x, final_norm))          (head tied to embed)
 *
 * Section names follow the seed manifest (docs/artifact.md): a matrix
 * NAME is NAME.quant + NAME.scales (Q4, + NAME.zero_points for Q4Z) or
 * NAME.weight (f32). This file binds them and records the graph as backend
 * calls; it never does arithmetic itself. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/common.h"
#include "model/model.h"
#include "format/quant.h"
#include "util/err.h"

typedef struct {
  int type;
  wisp_vector op_norm, ffn_norm;
  wisp_matrix in_proj, out_proj; /* conv */
  wisp_vector taps;              /* conv: [hidden][L] */
  wisp_matrix qkv, o_proj;       /* attention */
  wisp_vector q_norm, k_norm;
  wisp_matrix gate_up, down;     /* gate rows first, then up rows */
} lfm2_layer;

typedef struct {
  wisp_shape shape;
  float eps;
  int qk_norm; /* 0: attention without q/k norm (wisp.qkNorm false) */
  int positions; /* rows of the rope tables */
  lfm2_layer *layers;
  wisp_matrix embed, head;
  wisp_vector final_norm, rope_cos, rope_sin;
  float *rope_owned; /* computed tables when the artifact has none */
  int max_positions;
} lfm2_weights;

typedef struct {
  int chunk, max_pos, n_layers;
  wisp_buf *x, *xn, *big, *mid, *logits;
  wisp_buf **conv_state, **k_cache, **v_cache; /* per layer, NULL where unused */
  size_t conv_len; /* floats in each conv_state */
} lfm2_state;

/* ---- binding ---- */

static wisp_status bind_vector(const wisp_artifact *a, const char *name, int n, wisp_vector *v) {
  const uint8_t *p;
  wisp_status st = wisp_artifact_bytes(a, name, (uint64_t)n * 4, &p);
  if (st) return st;
  v->n = n;
  v->data = (const float *)p;
  return WISP_OK;
}


/* Uses the artifact's rope tables (the longer *_ext pair when present), or
 * computes them from ropeTheta for maxPositions rows. */
static wisp_status bind_rope(const wisp_artifact *a, lfm2_weights *w) {
  const int half = w->shape.head_dim / 2;
  const char *pairs[2][2] = {{"rope.cos_ext", "rope.sin_ext"}, {"rope.cos", "rope.sin"}};
  for (int i = 0; i < 2; i++) {
    const wisp_section *c = wisp_artifact_section(a, pairs[i][0]);
    if (!c) continue;
    if (c->bytes == 0 || c->bytes % ((uint64_t)half * 4))
      return wisp_fail(WISP_EFORMAT, "%s: section '%s' (%llu bytes) is not a whole number of %d-float rows",
                       a->dir ? a->dir : "artifact", pairs[i][0], (unsigned long long)c->bytes, half);
    int rows = (int)(c->bytes / ((uint64_t)half * 4));
    wisp_status st;
    if ((st = bind_vector(a, pairs[i][0], rows * half, &w->rope_cos)) ||
        (st = bind_vector(a, pairs[i][1], rows * half, &w->rope_sin)))
      return st;
    w->positions = rows;
    return WISP_OK;
  }
  int rows = a->max_positions;
  w->rope_owned = malloc(sizeof(float) * 2 * (size_t)rows * half);
  if (!w->rope_owned) return wisp_fail(WISP_ENOMEM, "out of memory for rope tables");
  float *cs = w->rope_owned, *sn = w->rope_owned + (size_t)rows * half;
  wisp_rope_table(a->rope_theta, w->shape.head_dim, rows, cs, sn);
  w->rope_cos = (wisp_vector){rows * half, cs, NULL};
  w->rope_sin = (wisp_vector){rows * half, sn, NULL};
  w->positions = rows;
  return WISP_OK;
}

static void lfm2_free_weights(void *p) {
  lfm2_weights *w = p;
  if (!w) return;
  free(w->layers);
  free(w->rope_owned);
  free(w);
}

static wisp_status lfm2_bind(const wisp_artifact *a, void **out) {
  *out = NULL;
  lfm2_weights *w = calloc(1, sizeof *w);
  if (!w) return wisp_fail(WISP_ENOMEM, "out of memory");
  w->shape = a->shape;
  w->eps = (float)a->norm_eps;
  /* wisp.qkNorm false (Llama imports): attention without per-head q/k RMSNorm. */
  const cJSON *qkn = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(a->manifest, "wisp"), "qkNorm");
  w->qk_norm = !cJSON_IsFalse(qkn);
  const wisp_shape *s = &a->shape;
  const int H = s->hidden, F = s->ffn, D = s->head_dim;
  wisp_status st = WISP_OK;
  w->layers = calloc((size_t)s->n_layers, sizeof(lfm2_layer));
  if (!w->layers) { st = wisp_fail(WISP_ENOMEM, "out of memory"); goto fail; }
  if (s->conv_cache < 1) { st = wisp_fail(WISP_EFORMAT, "convCache must be >= 1"); goto fail; }
  for (int i = 0; i < s->n_layers; i++) {
    lfm2_layer *L = &w->layers[i];
    char base[64], name[96];
    L->type = s->layer_types[i];
    if (L->type != WISP_LAYER_CONV && L->type != WISP_LAYER_ATTENTION) {
      st = wisp_fail(WISP_EFORMAT, "%s: layer %d is 'linear_attention', which architecture lfm2 does not have",
                     a->dir ? a->dir : "artifact", i);
      goto fail;
    }
    if (L->type == WISP_LAYER_CONV) {
      snprintf(base, sizeof base, "L%d.conv.in_proj", i);
      if ((st = wisp_matrix_bind(a, base, 3 * H, H, &L->in_proj))) goto fail;
      snprintf(name, sizeof name, "%s.norm", base);
      if ((st = bind_vector(a, name, H, &L->op_norm))) goto fail;
      snprintf(name, sizeof name, "L%d.conv.core.taps", i);
      if ((st = bind_vector(a, name, H * s->conv_cache, &L->taps))) goto fail;
      snprintf(base, sizeof base, "L%d.conv.out_proj", i);
      if ((st = wisp_matrix_bind(a, base, H, H, &L->out_proj))) goto fail;
    } else {
      snprintf(base, sizeof base, "L%d.attn.qkv", i);
      if ((st = wisp_matrix_bind(a, base, (s->heads + 2 * s->kv_heads) * D, H, &L->qkv))) goto fail;
      snprintf(name, sizeof name, "%s.norm", base);
      if ((st = bind_vector(a, name, H, &L->op_norm))) goto fail;
      if (w->qk_norm) {
        snprintf(name, sizeof name, "%s.q_norm", base);
        if ((st = bind_vector(a, name, D, &L->q_norm))) goto fail;
        snprintf(name, sizeof name, "%s.k_norm", base);
        if ((st = bind_vector(a, name, D, &L->k_norm))) goto fail;
      }
      snprintf(base, sizeof base, "L%d.attn.o_proj", i);
      if ((st = wisp_matrix_bind(a, base, H, s->heads * D, &L->o_proj))) goto fail;
    }
    snprintf(base, sizeof base, "L%d.mlp.gate_up", i);
    if ((st = wisp_matrix_bind(a, base, 2 * F, H, &L->gate_up))) goto fail;
    snprintf(name, sizeof name, "%s.norm", base);
    if ((st = bind_vector(a, name, H, &L->ffn_norm))) goto fail;
    snprintf(base, sizeof base, "L%d.mlp.down", i);
    if ((st = wisp_matrix_bind(a, base, H, F, &L->down))) goto fail;
    /* The seed's transposed copy of down (kquant/kscales) is for kernels
     * that walk the input dimension; when present its size must agree. */
    snprintf(name, sizeof name, "L%d.mlp.down.kquant", i);
    if (wisp_artifact_section(a, name)) {
      const uint8_t *p;
      if ((st = wisp_artifact_bytes(a, name, wisp_q4_quant_bytes(F, H), &p))) goto fail;
      snprintf(name, sizeof name, "L%d.mlp.down.kscales", i);
      if ((st = wisp_artifact_bytes(a, name, wisp_q4_scale_bytes(F, H), &p))) goto fail;
    }
  }
  if ((st = wisp_matrix_bind(a, "embed", s->vocab, H, &w->embed))) goto fail;
  if (wisp_matrix_present(a, "head")) {
    if ((st = wisp_matrix_bind(a, "head", s->vocab, H, &w->head))) goto fail;
  } else {
    w->head = w->embed; /* tied */
  }
  if ((st = bind_vector(a, "head.norm", H, &w->final_norm))) goto fail;
  if ((st = bind_rope(a, w))) goto fail;
  w->max_positions = a->max_positions < w->positions ? a->max_positions : w->positions;
  *out = w;
  return WISP_OK;
fail:
  lfm2_free_weights(w);
  return st;
}

static wisp_matrix *lfm2_matrix(void *p, int layer, const char *section) {
  lfm2_weights *w = p;
  if (layer < 0) {
    if (!strcmp(section, "head")) return &w->head;
    if (!strcmp(section, "embed")) return &w->embed;
    return NULL;
  }
  if (layer >= w->shape.n_layers) return NULL;
  lfm2_layer *L = &w->layers[layer];
  const char *names[] = {"conv.in_proj", "conv.out_proj", "attn.qkv", "attn.o_proj", "mlp.gate_up", "mlp.down"};
  wisp_matrix *ms[] = {&L->in_proj, &L->out_proj, &L->qkv, &L->o_proj, &L->gate_up, &L->down};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (!strcmp(section, names[i])) return ms[i]->rows ? ms[i] : NULL;
  return NULL;
}

static wisp_status lfm2_plan_shape(const void *p, wisp_model_shape *out) {
  const lfm2_weights *w = p;
  const wisp_shape *s = &w->shape;
  if (s->n_layers > WISP_MAX_LAYERS) return wisp_fail(WISP_EUNSUPPORTED, "%d layers: plans hold at most %d", s->n_layers, WISP_MAX_LAYERS);
  memset(out, 0, sizeof *out);
  out->n_layers = s->n_layers;
  for (int i = 0; i < s->n_layers; i++) out->layer_types[i] = s->layer_types[i];
  out->hidden = s->hidden;
  out->ffn = s->ffn;
  out->vocab = s->vocab;
  out->heads = s->heads;
  out->kv_heads = s->kv_heads;
  out->head_dim = s->head_dim;
  out->conv_cache = s->conv_cache;
  /* The weight dtype the kernels see: f32 artifacts plan f32 matmuls. */
  out->quant_bits = wisp_quant_traits_of(w->layers[0].gate_up.type)->quant_bits;
  for (int i = 0; i < s->n_layers; i++)
    if (w->layers[i].down.type == WISP_W_Q4K || w->layers[i].gate_up.type == WISP_W_Q4K) out->q4k = 1;
  return WISP_OK;
}

static int lfm2_max_positions(const void *p) { return ((const lfm2_weights *)p)->max_positions; }

static wisp_status lfm2_prepare(void *p, wisp_backend *be) {
  lfm2_weights *w = p;
  wisp_status st;
  for (int i = 0; i < w->shape.n_layers; i++) {
    lfm2_layer *L = &w->layers[i];
    wisp_matrix *ms[] = {&L->in_proj, &L->out_proj, &L->qkv, &L->o_proj, &L->gate_up, &L->down};
    for (size_t k = 0; k < sizeof ms / sizeof ms[0]; k++)
      if (ms[k]->rows && (st = be->prepare_matrix(be, ms[k]))) return st;
    wisp_vector *vs[] = {&L->op_norm, &L->ffn_norm, &L->taps, &L->q_norm, &L->k_norm};
    for (size_t k = 0; k < sizeof vs / sizeof vs[0]; k++)
      if (vs[k]->n && (st = be->prepare_vector(be, vs[k]))) return st;
  }
  if ((st = be->prepare_matrix(be, &w->embed))) return st;
  if (w->head.q != w->embed.q || w->head.f32 != w->embed.f32) {
    if ((st = be->prepare_matrix(be, &w->head))) return st;
  } else {
    w->head.device = w->embed.device;
  }
  if ((st = be->prepare_vector(be, &w->final_norm)) || (st = be->prepare_vector(be, &w->rope_cos)) ||
      (st = be->prepare_vector(be, &w->rope_sin)))
    return st;
  return WISP_OK;
}

/* ---- state ---- */

static void lfm2_state_free(void *p, wisp_backend *be) {
  lfm2_state *s = p;
  if (!s) return;
  wisp_buf *bufs[] = {s->x, s->xn, s->big, s->mid, s->logits};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    if (bufs[i]) be->buf_free(be, bufs[i]);
  for (int i = 0; i < s->n_layers; i++) {
    if (s->conv_state) be->buf_free(be, s->conv_state[i]);
    if (s->k_cache) be->buf_free(be, s->k_cache[i]);
    if (s->v_cache) be->buf_free(be, s->v_cache[i]);
  }
  free(s->conv_state);
  free(s->k_cache);
  free(s->v_cache);
  free(s);
}

static wisp_status lfm2_state_new(const void *p, wisp_backend *be, int chunk, int max_pos, void **out) {
  const lfm2_weights *w = p;
  const wisp_shape *sh = &w->shape;
  *out = NULL;
  if (max_pos <= 0 || max_pos > w->max_positions) max_pos = w->max_positions;
  lfm2_state *s = calloc(1, sizeof *s);
  if (!s) return wisp_fail(WISP_ENOMEM, "out of memory");
  s->chunk = chunk;
  s->max_pos = max_pos;
  const int H = sh->hidden, F = sh->ffn, D = sh->head_dim;
  int qkv = (sh->heads + 2 * sh->kv_heads) * D;
  int big = 3 * H > 2 * F ? 3 * H : 2 * F;
  if (qkv > big) big = qkv;
  int mid = F > H ? F : H;
  if (sh->heads * D > mid) mid = sh->heads * D;
  size_t nl = (size_t)sh->n_layers;
  s->conv_state = calloc(nl, sizeof(wisp_buf *));
  s->k_cache = calloc(nl, sizeof(wisp_buf *));
  s->v_cache = calloc(nl, sizeof(wisp_buf *));
  if (!s->conv_state || !s->k_cache || !s->v_cache) goto oom;
  s->n_layers = sh->n_layers;
  s->x = be->buf_new(be, (size_t)chunk * H);
  s->xn = be->buf_new(be, (size_t)chunk * H);
  s->big = be->buf_new(be, (size_t)chunk * big);
  s->mid = be->buf_new(be, (size_t)chunk * mid);
  s->logits = be->buf_new(be, (size_t)sh->vocab);
  if (!s->x || !s->xn || !s->big || !s->mid || !s->logits) goto oom;
  for (int i = 0; i < sh->n_layers; i++) {
    if (sh->layer_types[i] == WISP_LAYER_CONV) {
      s->conv_len = (size_t)H * (sh->conv_cache - 1 > 0 ? sh->conv_cache - 1 : 1);
      s->conv_state[i] = be->buf_new(be, s->conv_len);
      if (!s->conv_state[i]) goto oom;
    } else {
      size_t kv = (size_t)max_pos * sh->kv_heads * D;
      s->k_cache[i] = be->kv_buf_new ? be->kv_buf_new(be, kv) : be->buf_new(be, kv);
      s->v_cache[i] = be->kv_buf_new ? be->kv_buf_new(be, kv) : be->buf_new(be, kv);
      if (!s->k_cache[i] || !s->v_cache[i]) goto oom;
    }
  }
  *out = s;
  return WISP_OK;
oom:
  lfm2_state_free(s, be);
  return wisp_fail(WISP_ENOMEM, "out of memory for the session state (context %d)", max_pos);
}

static void lfm2_state_reset(void *p, wisp_backend *be) {
  lfm2_state *s = p;
  for (int i = 0; i < s->n_layers; i++)
    if (s->conv_state[i]) be->buf_zero(be, s->conv_state[i]);
  /* KV rows beyond the position are never read, so the caches need no clearing. */
}

/* ---- forward ---- */

/* The layers of one forward call, recorded on the backend: n tokens at
 * positions pos0.. whose embeddings are in s->x. With rows (a batched
 * decode step), row r is another sequence's token: the products run over
 * all n rows at once, and the short conv and attention run row by row on
 * that row's own sequence state (rows->states[r], at rows->pos[r]), the
 * row moved into that state's buffers and its output back. */
static void lfm2_layers(const lfm2_weights *w, lfm2_state *s, wisp_backend *be, int n, int pos0,
                        const wisp_model_rows *rows) {
  const wisp_shape *sh = &w->shape;
  const int H = sh->hidden, F = sh->ffn;
  for (int i = 0; i < sh->n_layers; i++) {
    const lfm2_layer *L = &w->layers[i];
    be->rmsnorm(be, s->x, &L->op_norm, w->eps, n, H, s->xn);
    const wisp_matrix *in = L->type == WISP_LAYER_CONV ? &L->in_proj : &L->qkv;
    const wisp_matrix *out = L->type == WISP_LAYER_CONV ? &L->out_proj : &L->o_proj;
    wisp_model_matmul(be, in, s->xn, n, s->big, 0, rows);
    for (int r = 0; r < (rows ? n : 1); r++) {
      lfm2_state *q = rows ? rows->states[r] : s; /* whose state this row's mixer uses */
      int qn = rows ? 1 : n, qpos = rows ? rows->pos[r] : pos0;
      if (rows) be->buf_copy_at(be, q->big, 0, s->big, (size_t)r * in->rows, (size_t)in->rows);
      if (L->type == WISP_LAYER_CONV) {
        be->shortconv(be, q->big, &L->taps, sh->conv_cache, qn, H, q->conv_state[i], q->mid);
      } else {
        wisp_attention_args a = {
            .qkv = q->big, .n = qn, .pos0 = qpos, .heads = sh->heads, .kv_heads = sh->kv_heads,
            .head_dim = sh->head_dim, .q_norm = w->qk_norm ? &L->q_norm : NULL,
            .k_norm = w->qk_norm ? &L->k_norm : NULL, .eps = w->eps,
            .rope_cos = &w->rope_cos, .rope_sin = &w->rope_sin, .k_cache = q->k_cache[i],
            .v_cache = q->v_cache[i], .out = q->mid};
        be->attention(be, &a);
      }
      if (rows) be->buf_copy_at(be, s->mid, (size_t)r * out->cols, q->mid, 0, (size_t)out->cols);
    }
    wisp_model_matmul(be, out, s->mid, n, s->x, 1, rows);
    be->rmsnorm(be, s->x, &L->ffn_norm, w->eps, n, H, s->xn);
    wisp_model_matmul(be, &L->gate_up, s->xn, n, s->big, 0, rows);
    be->swiglu(be, s->big, n, F, s->mid);
    wisp_model_matmul(be, &L->down, s->mid, n, s->x, 1, rows);
  }
}

static wisp_model_head lfm2_head(const lfm2_weights *w, lfm2_state *s) {
  return (wisp_model_head){&w->final_norm, w->eps, &w->head, w->shape.hidden, w->shape.vocab, s->xn, s->logits};
}

static wisp_status lfm2_forward(const void *p, void *sp, wisp_backend *be, const int32_t *tokens, int n, int pos0,
                                float *logits, int all_logits) {
  const lfm2_weights *w = p;
  lfm2_state *s = sp;
  wisp_status st = wisp_model_check_forward(tokens, n, pos0, s->chunk, s->max_pos, w->shape.vocab);
  if (st) return st;
  be->embed(be, &w->embed, tokens, n, s->x);
  lfm2_layers(w, s, be, n, pos0, NULL);
  wisp_model_head h = lfm2_head(w, s);
  return wisp_model_head_logits(be, &h, s->x, n, logits, all_logits);
}

static wisp_status lfm2_decode_step(const void *p, void *sp, wisp_backend *be, wisp_buf *ids, int slot, int pos,
                                    const wisp_sampling *sampling, uint32_t step) {
  const lfm2_weights *w = p;
  lfm2_state *s = sp;
  wisp_status st = wisp_model_check_forward(NULL, 1, pos, s->chunk, s->max_pos, w->shape.vocab);
  if (st) return st;
  be->embed_id(be, &w->embed, ids, slot, s->x);
  lfm2_layers(w, s, be, 1, pos, NULL);
  wisp_model_head h = lfm2_head(w, s);
  wisp_model_head_sample(be, &h, s->x, sampling, step, ids, slot + 1, pos);
  return WISP_OK;
}

static wisp_status lfm2_step_rows(const void *p, void *scratch, wisp_backend *be, const int32_t *tokens,
                                  const wisp_model_rows *rows, const wisp_sampling *sampling, wisp_buf *logits,
                                  wisp_buf *ids) {
  const lfm2_weights *w = p;
  lfm2_state *s = scratch;
  int max_pos[WISP_MAX_ROWS];
  if (rows->n > WISP_MAX_ROWS) return wisp_fail(WISP_EINVAL, "step: %d sequences, at most %d", rows->n, WISP_MAX_ROWS);
  for (int r = 0; r < rows->n; r++) max_pos[r] = ((const lfm2_state *)rows->states[r])->max_pos;
  wisp_status st = wisp_model_check_rows(tokens, rows, s->chunk, max_pos, w->shape.vocab);
  if (st) return st;
  be->embed(be, &w->embed, tokens, rows->n, s->x);
  lfm2_layers(w, s, be, rows->n, 0, rows);
  wisp_model_head h = lfm2_head(w, s);
  wisp_model_head_sample_rows(be, &h, s->x, rows, logits, sampling, ids);
  return WISP_OK;
}

/* The decode step of lfm2_decode_step as data (backend.h). */
static wisp_status lfm2_decode_graph(const void *p, void *sp, wisp_decode_graph *g) {
  const lfm2_weights *w = p;
  lfm2_state *s = sp;
  const wisp_shape *sh = &w->shape;
  if (sh->n_layers > WISP_GRAPH_MAX_LAYERS) return WISP_EUNSUPPORTED;
  *g = (wisp_decode_graph){.n_layers = sh->n_layers, .hidden = sh->hidden, .ffn = sh->ffn, .vocab = sh->vocab,
                           .heads = sh->heads, .kv_heads = sh->kv_heads, .head_dim = sh->head_dim,
                           .conv_len = sh->conv_cache, .max_pos = s->max_pos, .rope_rows = w->positions,
                           .eps = w->eps, .embed = &w->embed, .head = &w->head, .final_norm = &w->final_norm,
                           .rope_cos = &w->rope_cos, .rope_sin = &w->rope_sin};
  for (int i = 0; i < sh->n_layers; i++) {
    const lfm2_layer *L = &w->layers[i];
    wisp_graph_layer *G = &g->layers[i];
    G->attention = L->type == WISP_LAYER_ATTENTION;
    G->op_norm = &L->op_norm;
    G->ffn_norm = &L->ffn_norm;
    G->gate_up = &L->gate_up;
    G->down = &L->down;
    if (G->attention) {
      G->in = &L->qkv;
      G->out = &L->o_proj;
      G->q_norm = w->qk_norm ? &L->q_norm : NULL;
      G->k_norm = w->qk_norm ? &L->k_norm : NULL;
      G->state = s->k_cache[i];
      G->v_cache = s->v_cache[i];
    } else {
      G->in = &L->in_proj;
      G->out = &L->out_proj;
      G->taps = &L->taps;
      G->state = s->conv_state[i];
    }
  }
  return WISP_OK;
}

static int lfm2_state_bufs(void *state, wisp_buf **bufs, size_t *lens, int cap) {
  lfm2_state *s = state;
  int n = 0;
  for (int i = 0; i < s->n_layers && n < cap; i++)
    if (s->conv_state[i]) {
      bufs[n] = s->conv_state[i];
      lens[n++] = s->conv_len;
    }
  return n;
}

const wisp_arch wisp_arch_lfm2 = {
    .name = "lfm2",
    .bind = lfm2_bind,
    .free_weights = lfm2_free_weights,
    .max_positions = lfm2_max_positions,
    .matrix = lfm2_matrix,
    .plan_shape = lfm2_plan_shape,
    .prepare = lfm2_prepare,
    .state_new = lfm2_state_new,
    .state_reset = lfm2_state_reset,
    .state_free = lfm2_state_free,
    .state_bufs = lfm2_state_bufs,
    .forward = lfm2_forward,
    .decode_step = lfm2_decode_step,
    .decode_graph = lfm2_decode_graph,
    .step_rows = lfm2_step_rows,
};
