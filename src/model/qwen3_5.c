/* Qwen 3.5 (text): hybrid of Gated DeltaNet ("linear_attention") and gated
 * grouped-query attention ("full_attention") layers, as Hugging Face
 * transformers 5.x's Qwen3_5ForCausalLM computes it (checked against
 * transformers/models/qwen3_5/modeling_qwen3_5.py):
 *
 *   x = embed(token)
 *   for each layer:
 *     h = rmsnorm(x) * (1 + input_layernorm.w)           (Qwen3_5RMSNorm)
 *     linear_attention (Qwen3_5GatedDeltaNet):
 *       qkv = in_proj_qkv h; z = in_proj_z h; b = in_proj_b h; a = in_proj_a h
 *       c = silu(causal depthwise conv1d(qkv), kernel linear_conv_kernel_dim,
 *           no bias); q, k, v = split(c, [K, K, V])
 *       q, k = l2norm per head (x * rsqrt(sum x^2 + 1e-6)); q *= k_dim^-0.5
 *       beta = sigmoid(b); g = -exp(A_log) * softplus(a + dt_bias)
 *       q/k heads repeat_interleave'd to v heads (v-head h uses k-head
 *       h / (v_heads / k_heads))
 *       per v-head, S [k_dim][v_dim]: S *= exp(g); kv = S^T k;
 *         delta = (v - kv) * beta; S += k delta^T; o = S^T q
 *       o = rmsnorm(o) * norm.w * silu(z)  (Qwen3_5RMSNormGated: plain w)
 *       x += out_proj o
 *     full_attention (Qwen3_5Attention):
 *       (q|gate) per head = q_proj h viewed [heads][2*head_dim], q first;
 *       q = rmsnorm(q)*(1+q_norm.w), k = rmsnorm(k_proj h)*(1+k_norm.w) per head
 *       RoPE (NEOX rotate-half) on the first rotary_dim = partial_rotary_factor
 *       * head_dim dims of q and k; softmax(q k^T / sqrt(head_dim)) v, GQA
 *       x += o_proj (attn * sigmoid(gate))
 *     x += down(silu(gate_proj h') * up_proj h'),
 *       h' = rmsnorm(x) * (1 + post_attention_layernorm.w)
 *   logits = lm_head(rmsnorm(x) * (1 + norm.w))        (tied to embed when
 *                                                       tie_word_embeddings)
 *
 * The artifact stores every (1 + w) norm weight already added (docs/artifact.md,
 * "Qwen 3.5"), so the generic rmsnorm op applies; HF computes 1 + w in f32
 * too, so this is exact. The text model's mrope sections collapse to plain
 * RoPE because all three position ids are equal for text. */
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
  wisp_matrix in_proj, out_proj;             /* linear: [qkv | z | b | a] rows */
  wisp_vector taps, a_log, dt_bias, gnorm;   /* linear */
  wisp_matrix qkv, o_proj;                   /* full */
  wisp_vector q_norm, k_norm;
  wisp_matrix gate_up, down;
  wisp_kernel_choice attn_choice[2]; /* the plan's attention_gated kernel [prefill, decode] */
} q35_layer;

typedef struct {
  wisp_shape shape;
  float eps;
  int positions;
  q35_layer *layers;
  wisp_matrix embed, head;
  wisp_vector final_norm, rope_cos, rope_sin;
  float *rope_owned;
  int max_positions;
} q35_weights;

typedef struct {
  int chunk, max_pos, n_layers;
  wisp_buf *x, *xn, *big, *mid, *logits;
  wisp_buf **conv_state, **rec_state, **k_cache, **v_cache;
  size_t conv_len, rec_len; /* floats in each conv_state / rec_state */
} q35_state;

static const char *dir_of(const wisp_artifact *a) { return a->dir ? a->dir : "artifact"; }

static wisp_status bind_vector(const wisp_artifact *a, const char *name, int n, wisp_vector *v) {
  const uint8_t *p;
  wisp_status st = wisp_artifact_bytes(a, name, (uint64_t)n * 4, &p);
  if (st) return st;
  v->n = n;
  v->data = (const float *)p;
  return WISP_OK;
}


/* rope.cos_ext/sin_ext or rope.cos/sin: [rows][rotaryDim/2]; computed from
 * ropeTheta over the rotated dims when absent (inv_freq = theta^(-2i/rd)). */
static wisp_status bind_rope(const wisp_artifact *a, q35_weights *w) {
  const int rd = w->shape.rotary_dim, half = rd / 2;
  const char *pairs[2][2] = {{"rope.cos_ext", "rope.sin_ext"}, {"rope.cos", "rope.sin"}};
  for (int i = 0; i < 2; i++) {
    const wisp_section *c = wisp_artifact_section(a, pairs[i][0]);
    if (!c) continue;
    if (c->bytes == 0 || c->bytes % ((uint64_t)half * 4))
      return wisp_fail(WISP_EFORMAT, "%s: section '%s' (%llu bytes) is not a whole number of %d-float rows", dir_of(a),
                       pairs[i][0], (unsigned long long)c->bytes, half);
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
  for (int i = 0; i < half; i++) {
    float inv = 1.0f / powf((float)a->rope_theta, (float)(2 * i) / (float)rd);
    for (int p = 0; p < rows; p++) {
      float ang = (float)p * inv;
      cs[(size_t)p * half + i] = cosf(ang);
      sn[(size_t)p * half + i] = sinf(ang);
    }
  }
  w->rope_cos = (wisp_vector){rows * half, cs, NULL};
  w->rope_sin = (wisp_vector){rows * half, sn, NULL};
  w->positions = rows;
  return WISP_OK;
}

static void q35_free_weights(void *p) {
  q35_weights *w = p;
  if (!w) return;
  free(w->layers);
  free(w->rope_owned);
  free(w);
}

/* Rows of the fused linear in_proj: qkv (2K + V), z (V), b, a (v_heads each). */
static int in_proj_rows(const wisp_shape *s) {
  int K = s->lin_k_heads * s->lin_k_dim, V = s->lin_v_heads * s->lin_v_dim;
  return 2 * K + 2 * V + 2 * s->lin_v_heads;
}

static wisp_status check_shape(const wisp_artifact *a) {
  const wisp_shape *s = &a->shape;
  int has_linear = 0;
  for (int i = 0; i < s->n_layers; i++) {
    if (s->layer_types[i] == WISP_LAYER_CONV)
      return wisp_fail(WISP_EFORMAT, "%s: layer %d is 'conv', which architecture qwen3_5 does not have "
                       "(linear_attention, full_attention)", dir_of(a), i);
    has_linear |= s->layer_types[i] == WISP_LAYER_LINEAR;
  }
  if (s->rotary_dim <= 0 || s->rotary_dim > s->head_dim || s->rotary_dim % 2)
    return wisp_fail(WISP_EFORMAT, "%s: runtime.shape.rotaryDim (%d) must be even and in 2..headDim (%d)", dir_of(a),
                     s->rotary_dim, s->head_dim);
  if (has_linear) {
    if (s->lin_k_heads <= 0 || s->lin_v_heads <= 0 || s->lin_k_dim <= 0 || s->lin_v_dim <= 0)
      return wisp_fail(WISP_EFORMAT, "%s: runtime.shape needs linearKeyHeads, linearValueHeads, linearKeyDim and "
                       "linearValueDim for linear_attention layers", dir_of(a));
    if (s->lin_v_heads % s->lin_k_heads)
      return wisp_fail(WISP_EFORMAT, "%s: runtime.shape.linearValueHeads (%d) must be a multiple of linearKeyHeads (%d)",
                       dir_of(a), s->lin_v_heads, s->lin_k_heads);
    if (s->conv_cache < 1) return wisp_fail(WISP_EFORMAT, "%s: runtime.shape.convCache must be >= 1", dir_of(a));
  }
  return WISP_OK;
}

static wisp_status q35_bind(const wisp_artifact *a, void **out) {
  *out = NULL;
  wisp_status st = check_shape(a);
  if (st) return st;
  q35_weights *w = calloc(1, sizeof *w);
  if (!w) return wisp_fail(WISP_ENOMEM, "out of memory");
  w->shape = a->shape;
  w->shape.layer_types = NULL; /* the artifact owns it; use a->shape for types */
  w->eps = (float)a->norm_eps;
  const wisp_shape *s = &a->shape;
  const int H = s->hidden, F = s->ffn, D = s->head_dim;
  const int K = s->lin_k_heads * s->lin_k_dim, V = s->lin_v_heads * s->lin_v_dim;
  w->layers = calloc((size_t)s->n_layers, sizeof(q35_layer));
  if (!w->layers) { st = wisp_fail(WISP_ENOMEM, "out of memory"); goto fail; }
  for (int i = 0; i < s->n_layers; i++) {
    q35_layer *L = &w->layers[i];
    char base[64], name[96];
    L->type = s->layer_types[i];
    if (L->type == WISP_LAYER_LINEAR) {
      snprintf(base, sizeof base, "L%d.lin.in_proj", i);
      if ((st = wisp_matrix_bind(a, base, in_proj_rows(s), H, &L->in_proj))) goto fail;
      snprintf(name, sizeof name, "%s.norm", base);
      if ((st = bind_vector(a, name, H, &L->op_norm))) goto fail;
      snprintf(name, sizeof name, "L%d.lin.conv.taps", i);
      if ((st = bind_vector(a, name, (2 * K + V) * s->conv_cache, &L->taps))) goto fail;
      snprintf(name, sizeof name, "L%d.lin.A_log", i);
      if ((st = bind_vector(a, name, s->lin_v_heads, &L->a_log))) goto fail;
      snprintf(name, sizeof name, "L%d.lin.dt_bias", i);
      if ((st = bind_vector(a, name, s->lin_v_heads, &L->dt_bias))) goto fail;
      snprintf(name, sizeof name, "L%d.lin.norm", i);
      if ((st = bind_vector(a, name, s->lin_v_dim, &L->gnorm))) goto fail;
      snprintf(base, sizeof base, "L%d.lin.out_proj", i);
      if ((st = wisp_matrix_bind(a, base, H, V, &L->out_proj))) goto fail;
    } else {
      snprintf(base, sizeof base, "L%d.attn.qkv", i);
      if ((st = wisp_matrix_bind(a, base, (2 * s->heads + 2 * s->kv_heads) * D, H, &L->qkv))) goto fail;
      snprintf(name, sizeof name, "%s.norm", base);
      if ((st = bind_vector(a, name, H, &L->op_norm))) goto fail;
      snprintf(name, sizeof name, "%s.q_norm", base);
      if ((st = bind_vector(a, name, D, &L->q_norm))) goto fail;
      snprintf(name, sizeof name, "%s.k_norm", base);
      if ((st = bind_vector(a, name, D, &L->k_norm))) goto fail;
      snprintf(base, sizeof base, "L%d.attn.o_proj", i);
      if ((st = wisp_matrix_bind(a, base, H, s->heads * D, &L->o_proj))) goto fail;
    }
    snprintf(base, sizeof base, "L%d.mlp.gate_up", i);
    if ((st = wisp_matrix_bind(a, base, 2 * F, H, &L->gate_up))) goto fail;
    snprintf(name, sizeof name, "%s.norm", base);
    if ((st = bind_vector(a, name, H, &L->ffn_norm))) goto fail;
    snprintf(base, sizeof base, "L%d.mlp.down", i);
    if ((st = wisp_matrix_bind(a, base, H, F, &L->down))) goto fail;
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
  q35_free_weights(w);
  return st;
}

static wisp_matrix *q35_matrix(void *p, int layer, const char *section) {
  q35_weights *w = p;
  if (layer < 0) {
    if (!strcmp(section, "head")) return &w->head;
    if (!strcmp(section, "embed")) return &w->embed;
    return NULL;
  }
  if (layer >= w->shape.n_layers) return NULL;
  q35_layer *L = &w->layers[layer];
  const char *names[] = {"lin.in_proj", "lin.out_proj", "attn.qkv", "attn.o_proj", "mlp.gate_up", "mlp.down"};
  wisp_matrix *ms[] = {&L->in_proj, &L->out_proj, &L->qkv, &L->o_proj, &L->gate_up, &L->down};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (!strcmp(section, names[i])) return ms[i]->rows ? ms[i] : NULL;
  return NULL;
}

static wisp_kernel_choice *q35_op_choice(void *p, int layer, const char *op) {
  q35_weights *w = p;
  if (layer < 0 || layer >= w->shape.n_layers || strcmp(op, "attention_gated")) return NULL;
  return w->layers[layer].attn_choice;
}

static wisp_status q35_plan_shape(const void *p, wisp_model_shape *out) {
  const q35_weights *w = p;
  const wisp_shape *s = &w->shape;
  if (s->n_layers > WISP_MAX_LAYERS)
    return wisp_fail(WISP_EUNSUPPORTED, "%d layers: plans hold at most %d", s->n_layers, WISP_MAX_LAYERS);
  memset(out, 0, sizeof *out);
  out->n_layers = s->n_layers;
  for (int i = 0; i < s->n_layers; i++) out->layer_types[i] = w->layers[i].type;
  out->hidden = s->hidden;
  out->ffn = s->ffn;
  out->vocab = s->vocab;
  out->heads = s->heads;
  out->kv_heads = s->kv_heads;
  out->head_dim = s->head_dim;
  out->conv_cache = s->conv_cache;
  out->qwen3_5 = 1;
  out->lin_k_heads = s->lin_k_heads;
  out->lin_v_heads = s->lin_v_heads;
  out->lin_k_dim = s->lin_k_dim;
  out->lin_v_dim = s->lin_v_dim;
  out->quant_bits = wisp_quant_traits_of(w->layers[0].gate_up.type)->quant_bits;
  for (int i = 0; i < s->n_layers; i++)
    if (w->layers[i].down.type == WISP_W_Q4K || w->layers[i].gate_up.type == WISP_W_Q4K) out->q4k = 1;
  return WISP_OK;
}

static int q35_max_positions(const void *p) { return ((const q35_weights *)p)->max_positions; }

static wisp_status q35_prepare(void *p, wisp_backend *be) {
  q35_weights *w = p;
  wisp_status st;
  int need_lin = 0, need_full = 0;
  for (int i = 0; i < w->shape.n_layers; i++) {
    need_lin |= w->layers[i].type == WISP_LAYER_LINEAR;
    need_full |= w->layers[i].type == WISP_LAYER_ATTENTION;
  }
  if (need_lin && !be->gated_deltanet)
    return wisp_fail(WISP_EUNSUPPORTED, "backend '%s' lacks op 'gated_deltanet', which architecture qwen3_5 needs",
                     be->name);
  if (need_full && !be->attention_gated)
    return wisp_fail(WISP_EUNSUPPORTED, "backend '%s' lacks op 'attention_gated', which architecture qwen3_5 needs",
                     be->name);
  for (int i = 0; i < w->shape.n_layers; i++) {
    q35_layer *L = &w->layers[i];
    wisp_matrix *ms[] = {&L->in_proj, &L->out_proj, &L->qkv, &L->o_proj, &L->gate_up, &L->down};
    for (size_t k = 0; k < sizeof ms / sizeof ms[0]; k++)
      if (ms[k]->rows && (st = be->prepare_matrix(be, ms[k]))) return st;
    wisp_vector *vs[] = {&L->op_norm, &L->ffn_norm, &L->taps, &L->a_log, &L->dt_bias, &L->gnorm, &L->q_norm, &L->k_norm};
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

static void q35_state_free(void *p, wisp_backend *be) {
  q35_state *s = p;
  if (!s) return;
  wisp_buf *bufs[] = {s->x, s->xn, s->big, s->mid, s->logits};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    if (bufs[i]) be->buf_free(be, bufs[i]);
  for (int i = 0; i < s->n_layers; i++) {
    wisp_buf *per[] = {s->conv_state ? s->conv_state[i] : NULL, s->rec_state ? s->rec_state[i] : NULL,
                       s->k_cache ? s->k_cache[i] : NULL, s->v_cache ? s->v_cache[i] : NULL};
    for (int k = 0; k < 4; k++)
      if (per[k]) be->buf_free(be, per[k]);
  }
  free(s->conv_state);
  free(s->rec_state);
  free(s->k_cache);
  free(s->v_cache);
  free(s);
}

static int imax(int a, int b) { return a > b ? a : b; }

static wisp_status q35_state_new(const void *p, wisp_backend *be, int chunk, int max_pos, void **out) {
  const q35_weights *w = p;
  const wisp_shape *sh = &w->shape;
  *out = NULL;
  if (max_pos <= 0 || max_pos > w->max_positions) max_pos = w->max_positions;
  q35_state *s = calloc(1, sizeof *s);
  if (!s) return wisp_fail(WISP_ENOMEM, "out of memory");
  s->chunk = chunk;
  s->max_pos = max_pos;
  const int H = sh->hidden, F = sh->ffn, D = sh->head_dim;
  const int K = sh->lin_k_heads * sh->lin_k_dim, V = sh->lin_v_heads * sh->lin_v_dim;
  int big = imax(2 * F, (2 * sh->heads + 2 * sh->kv_heads) * D);
  big = imax(big, in_proj_rows(sh));
  int mid = imax(imax(F, H), imax(sh->heads * D, V));
  size_t nl = (size_t)sh->n_layers;
  s->conv_state = calloc(nl, sizeof(wisp_buf *));
  s->rec_state = calloc(nl, sizeof(wisp_buf *));
  s->k_cache = calloc(nl, sizeof(wisp_buf *));
  s->v_cache = calloc(nl, sizeof(wisp_buf *));
  if (!s->conv_state || !s->rec_state || !s->k_cache || !s->v_cache) goto oom;
  s->n_layers = sh->n_layers;
  s->x = be->buf_new(be, (size_t)chunk * H);
  s->xn = be->buf_new(be, (size_t)chunk * H);
  s->big = be->buf_new(be, (size_t)chunk * big);
  s->mid = be->buf_new(be, (size_t)chunk * mid);
  s->logits = be->buf_new(be, (size_t)sh->vocab);
  if (!s->x || !s->xn || !s->big || !s->mid || !s->logits) goto oom;
  for (int i = 0; i < sh->n_layers; i++) {
    if (w->layers[i].type == WISP_LAYER_LINEAR) {
      /* conv_len slots a channel: the WebGPU backend keeps the conv state as a ring (backend.h) */
      s->conv_len = (size_t)(2 * K + V) * (size_t)imax(sh->conv_cache, 1);
      s->rec_len = (size_t)sh->lin_v_heads * sh->lin_k_dim * sh->lin_v_dim;
      s->conv_state[i] = be->buf_new(be, s->conv_len);
      s->rec_state[i] = be->buf_new(be, s->rec_len);
      if (!s->conv_state[i] || !s->rec_state[i]) goto oom;
    } else {
      size_t kv = (size_t)max_pos * sh->kv_heads * D;
      /* kv_buf_new: the backend's KV storage (WebGPU with f16 KV: packed
       * halves, half the bytes); the caches are only read by its attention. */
      s->k_cache[i] = be->kv_buf_new ? be->kv_buf_new(be, kv) : be->buf_new(be, kv);
      s->v_cache[i] = be->kv_buf_new ? be->kv_buf_new(be, kv) : be->buf_new(be, kv);
      if (!s->k_cache[i] || !s->v_cache[i]) goto oom;
    }
  }
  *out = s;
  return WISP_OK;
oom:
  q35_state_free(s, be);
  return wisp_fail(WISP_ENOMEM, "out of memory for the session state (context %d)", max_pos);
}

static void q35_state_reset(void *p, wisp_backend *be) {
  q35_state *s = p;
  for (int i = 0; i < s->n_layers; i++) {
    if (s->conv_state[i]) be->buf_zero(be, s->conv_state[i]);
    if (s->rec_state[i]) be->buf_zero(be, s->rec_state[i]);
  }
}

/* ---- forward ---- */

/* The layers of one forward call, recorded on the backend: n tokens at
 * positions pos0.. whose embeddings are in s->x. With rows (a batched
 * decode step), row r is another sequence's token: the products run over
 * all n rows at once, and the Gated DeltaNet and attention run row by row
 * on that row's own sequence state (rows->states[r], at rows->pos[r]), the
 * row moved into that state's buffers and its output back. */
static void q35_layers(const q35_weights *w, q35_state *s, wisp_backend *be, int n, int pos0,
                       const wisp_model_rows *rows) {
  const wisp_shape *sh = &w->shape;
  const int H = sh->hidden, F = sh->ffn;
  for (int i = 0; i < sh->n_layers; i++) {
    const q35_layer *L = &w->layers[i];
    be->rmsnorm(be, s->x, &L->op_norm, w->eps, n, H, s->xn);
    const int linear = L->type == WISP_LAYER_LINEAR;
    const wisp_matrix *in = linear ? &L->in_proj : &L->qkv, *out = linear ? &L->out_proj : &L->o_proj;
    wisp_model_matmul(be, in, s->xn, n, s->big, 0, rows);
    for (int r = 0; r < (rows ? n : 1); r++) {
      q35_state *q = rows ? rows->states[r] : s; /* whose state this row's mixer uses */
      int qn = rows ? 1 : n, qpos = rows ? rows->pos[r] : pos0;
      if (rows) be->buf_copy_at(be, q->big, 0, s->big, (size_t)r * in->rows, (size_t)in->rows);
      if (linear) {
        wisp_deltanet_args d = {
            .proj = q->big, .n = qn, .pos0 = qpos, .k_heads = sh->lin_k_heads, .v_heads = sh->lin_v_heads,
            .k_dim = sh->lin_k_dim, .v_dim = sh->lin_v_dim, .conv_len = sh->conv_cache, .conv_taps = &L->taps,
            .a_log = &L->a_log, .dt_bias = &L->dt_bias, .norm = &L->gnorm, .eps = w->eps,
            .conv_state = q->conv_state[i], .state = q->rec_state[i], .out = q->mid};
        be->gated_deltanet(be, &d);
      } else {
        wisp_gated_attention_args a = {
            .qkv = q->big, .n = qn, .pos0 = qpos, .heads = sh->heads, .kv_heads = sh->kv_heads,
            .head_dim = sh->head_dim, .rotary_dim = sh->rotary_dim, .q_norm = &L->q_norm, .k_norm = &L->k_norm,
            .eps = w->eps, .rope_cos = &w->rope_cos, .rope_sin = &w->rope_sin, .k_cache = q->k_cache[i],
            .v_cache = q->v_cache[i], .out = q->mid, .choice = L->attn_choice};
        be->attention_gated(be, &a);
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

static wisp_model_head q35_head(const q35_weights *w, q35_state *s) {
  return (wisp_model_head){&w->final_norm, w->eps, &w->head, w->shape.hidden, w->shape.vocab, s->xn, s->logits};
}

static wisp_status q35_forward(const void *p, void *sp, wisp_backend *be, const int32_t *tokens, int n, int pos0,
                               float *logits, int all_logits) {
  const q35_weights *w = p;
  q35_state *s = sp;
  wisp_status st = wisp_model_check_forward(tokens, n, pos0, s->chunk, s->max_pos, w->shape.vocab);
  if (st) return st;
  be->embed(be, &w->embed, tokens, n, s->x);
  q35_layers(w, s, be, n, pos0, NULL);
  wisp_model_head h = q35_head(w, s);
  return wisp_model_head_logits(be, &h, s->x, n, logits, all_logits);
}

static wisp_status q35_decode_step(const void *p, void *sp, wisp_backend *be, wisp_buf *ids, int slot, int pos,
                                   const wisp_sampling *sampling, uint32_t step) {
  const q35_weights *w = p;
  q35_state *s = sp;
  wisp_status st = wisp_model_check_forward(NULL, 1, pos, s->chunk, s->max_pos, w->shape.vocab);
  if (st) return st;
  be->embed_id(be, &w->embed, ids, slot, s->x);
  q35_layers(w, s, be, 1, pos, NULL);
  wisp_model_head h = q35_head(w, s);
  wisp_model_head_sample(be, &h, s->x, sampling, step, ids, slot + 1, pos);
  return WISP_OK;
}

static wisp_status q35_step_rows(const void *p, void *scratch, wisp_backend *be, const int32_t *tokens,
                                 const wisp_model_rows *rows, const wisp_sampling *sampling, wisp_buf *logits,
                                 wisp_buf *ids) {
  const q35_weights *w = p;
  q35_state *s = scratch;
  int max_pos[WISP_MAX_ROWS];
  if (rows->n > WISP_MAX_ROWS) return wisp_fail(WISP_EINVAL, "step: %d sequences, at most %d", rows->n, WISP_MAX_ROWS);
  for (int r = 0; r < rows->n; r++) max_pos[r] = ((const q35_state *)rows->states[r])->max_pos;
  wisp_status st = wisp_model_check_rows(tokens, rows, s->chunk, max_pos, w->shape.vocab);
  if (st) return st;
  be->embed(be, &w->embed, tokens, rows->n, s->x);
  q35_layers(w, s, be, rows->n, 0, rows);
  wisp_model_head h = q35_head(w, s);
  wisp_model_head_sample_rows(be, &h, s->x, rows, logits, sampling, ids);
  return WISP_OK;
}

/* The decode step of q35_decode_step as data (backend.h). */
static wisp_status q35_decode_graph(const void *p, void *sp, wisp_decode_graph *g) {
  const q35_weights *w = p;
  q35_state *s = sp;
  const wisp_shape *sh = &w->shape;
  if (sh->n_layers > WISP_GRAPH_MAX_LAYERS) return WISP_EUNSUPPORTED;
  *g = (wisp_decode_graph){.n_layers = sh->n_layers, .hidden = sh->hidden, .ffn = sh->ffn, .vocab = sh->vocab,
                           .heads = sh->heads, .kv_heads = sh->kv_heads, .head_dim = sh->head_dim,
                           .conv_len = sh->conv_cache, .max_pos = s->max_pos, .rope_rows = w->positions,
                           .gated_layers = 1, .rotary_dim = sh->rotary_dim, .lin_k_heads = sh->lin_k_heads,
                           .lin_v_heads = sh->lin_v_heads, .lin_k_dim = sh->lin_k_dim, .lin_v_dim = sh->lin_v_dim,
                           .eps = w->eps, .embed = &w->embed, .head = &w->head, .final_norm = &w->final_norm,
                           .rope_cos = &w->rope_cos, .rope_sin = &w->rope_sin};
  for (int i = 0; i < sh->n_layers; i++) {
    const q35_layer *L = &w->layers[i];
    wisp_graph_layer *G = &g->layers[i];
    G->attention = L->type == WISP_LAYER_ATTENTION;
    G->op_norm = &L->op_norm;
    G->ffn_norm = &L->ffn_norm;
    G->gate_up = &L->gate_up;
    G->down = &L->down;
    if (G->attention) {
      G->in = &L->qkv;
      G->out = &L->o_proj;
      G->q_norm = &L->q_norm;
      G->k_norm = &L->k_norm;
      G->state = s->k_cache[i];
      G->v_cache = s->v_cache[i];
    } else {
      G->in = &L->in_proj;
      G->out = &L->out_proj;
      G->taps = &L->taps;
      G->a_log = &L->a_log;
      G->dt_bias = &L->dt_bias;
      G->gnorm = &L->gnorm;
      G->state = s->conv_state[i];
      G->rec_state = s->rec_state[i];
    }
  }
  return WISP_OK;
}

static int q35_state_bufs(void *state, wisp_buf **bufs, size_t *lens, int cap) {
  q35_state *s = state;
  int n = 0;
  for (int i = 0; i < s->n_layers && n + 1 < cap; i++)
    if (s->conv_state[i]) {
      bufs[n] = s->conv_state[i];
      lens[n++] = s->conv_len;
      bufs[n] = s->rec_state[i];
      lens[n++] = s->rec_len;
    }
  return n;
}

const wisp_arch wisp_arch_qwen3_5 = {
    .name = "qwen3_5",
    .bind = q35_bind,
    .free_weights = q35_free_weights,
    .max_positions = q35_max_positions,
    .matrix = q35_matrix,
    .plan_shape = q35_plan_shape,
    .op_choice = q35_op_choice,
    .prepare = q35_prepare,
    .state_new = q35_state_new,
    .state_reset = q35_state_reset,
    .state_free = q35_state_free,
    .state_bufs = q35_state_bufs,
    .forward = q35_forward,
    .decode_step = q35_decode_step,
    .decode_graph = q35_decode_graph,
    .step_rows = q35_step_rows,
};
