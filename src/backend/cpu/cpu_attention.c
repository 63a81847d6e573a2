/* Attention on the CPU, plain and gated (q/k norm, rope, the KV cache
 * append, then a task per group of query heads and run of tokens; f32 or
 * f16 caches): docs/cpu.md "Attention". */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_internal.h"
#include "util/err.h"

static void rmsnorm_inplace(float *v, const float *w, int d, float eps) {
  double ss = 0;
  for (int i = 0; i < d; i++) ss += (double)v[i] * v[i];
  float inv = 1.0f / sqrtf((float)(ss / d) + eps);
  for (int i = 0; i < d; i++) v[i] = v[i] * inv * w[i];
}

/* RoPE over d dims: pairs (i, i + d/2) (halves, NEOX), or (2i, 2i + 1)
 * (adjacent: q/k rows in the order GGUF converters store them), pair i at angle i. */
static void rope_inplace(float *v, const float *cs, const float *sn, int d, int pairs) {
  int h = d / 2;
  if (pairs == WISP_ROPE_ADJACENT) {
    for (int i = 0; i < h; i++) {
      float a = v[2 * i], b = v[2 * i + 1];
      v[2 * i] = a * cs[i] - b * sn[i];
      v[2 * i + 1] = b * cs[i] + a * sn[i];
    }
    return;
  }
  for (int i = 0; i < h; i++) {
    float a = v[i], b = v[i + h];
    v[i] = a * cs[i] - b * sn[i];
    v[i + h] = b * cs[i] + a * sn[i];
  }
}

/* The pre-pass of an attention call, token by token (tokens are
 * independent: each writes its own queries and its own cache position):
 * q and k heads normed (when the model has the norms) and rotated, k and
 * v appended to the caches. Plain attention's qkv row is [q | k | v];
 * gated attention's is [(q | gate) per head | k | v]. An f16 cache gets
 * each value rounded to nearest even once, at this append; its keys are
 * normed and rotated in f32 first (in kbuf), as the f32 cache's are. */
typedef struct {
  const wisp_cpu_kernels *k;
  const float *qkv, *q_norm, *k_norm, *cos, *sin;
  float *qbuf, *kbuf;
  wisp_buf *kc, *vc;
  float eps;
  int row, H, KVH, D, rot, q_stride, k_off, pos0;
  int pairs; /* wisp_rope_pairs */
} attn_prep_job;

/* Where token t's key head h is normed and rotated: its cache row (f32
 * cache), else its row of kbuf. */
static float *key_work_row(const attn_prep_job *j, int t, int h) {
  if (j->kc->f16) return j->kbuf + ((size_t)t * j->KVH + h) * j->D;
  return j->kc->data + ((size_t)(j->pos0 + t) * j->KVH + h) * j->D;
}

/* Cache row (pos, h) of c := x (D values), rounded when the cache is f16. */
static void cache_put(const attn_prep_job *j, wisp_buf *c, int pos, int h, const float *x) {
  const size_t at = ((size_t)pos * j->KVH + h) * j->D;
  if (c->f16) j->k->f32_to_f16(halves(c) + at, x, j->D);
  else if (c->data + at != x) memcpy(c->data + at, x, (size_t)j->D * sizeof(float));
}

/* Heads [h0, h1) of token t: query heads first (0..H-1), then KV heads. */
static void attn_prep_heads_of(const attn_prep_job *j, int t, int h0, int h1) {
  const int D = j->D, half = j->rot / 2;
  const int pos = j->pos0 + t;
  const float *src = j->qkv + (size_t)t * j->row;
  const float *cs = j->cos + (size_t)pos * half, *sn = j->sin + (size_t)pos * half;
  for (int h = h0; h < h1 && h < j->H; h++) {
    float *q = j->qbuf + ((size_t)t * j->H + h) * D;
    memcpy(q, src + (size_t)h * j->q_stride, (size_t)D * sizeof(float));
    if (j->q_norm) rmsnorm_inplace(q, j->q_norm, D, j->eps);
    rope_inplace(q, cs, sn, j->rot, j->pairs);
  }
  const float *ks = src + j->k_off, *vs = ks + (size_t)j->KVH * D;
  for (int h = h0 > j->H ? h0 - j->H : 0; h < h1 - j->H; h++) {
    float *kd = key_work_row(j, t, h);
    memcpy(kd, ks + (size_t)h * D, (size_t)D * sizeof(float));
    if (j->k_norm) rmsnorm_inplace(kd, j->k_norm, D, j->eps);
    rope_inplace(kd, cs, sn, j->rot, j->pairs);
    cache_put(j, j->kc, pos, h, kd);
    cache_put(j, j->vc, pos, h, vs + (size_t)h * D);
  }
}

static void attn_prep_tokens(void *ctx, int t0, int t1) {
  const attn_prep_job *j = ctx;
  for (int t = t0; t < t1; t++) attn_prep_heads_of(j, t, 0, j->H + j->KVH);
}

/* A decode token's pre-pass by heads (its qkv row was just written by the
 * product before it, spread over every core's cache: see wisp_cpu_channel_grain). */
static void attn_prep_heads(void *ctx, int h0, int h1) { attn_prep_heads_of(ctx, 0, h0, h1); }

/* Attention proper: a task is a few query heads of one KV head (a group
 * reads the same cached keys and values, so they are read from memory once
 * a group instead of once a head) over a run of tokens, so that a prefill
 * keeps every thread busy even when there are fewer heads than threads.
 * Later tokens see more positions: the runs are handed out last first, so
 * the long ones do not end up alone at the end. */
typedef struct {
  cpu_backend *c;
  const wisp_attention_args *a;
  const float *gate; /* gated attention: the qkv rows (head h's gate at h*2D + D); NULL: no gate */
  int gate_row, tokens_per_task, runs, heads_per_task;
} attn_job;

/* One query head h at token t: scores of every cached position, softmax,
 * the weighted sum of the value rows, the gate. */
static void attn_head_token(const attn_job *j, int h, int t, float *scores) {
  const wisp_attention_args *a = j->a;
  const int D = a->head_dim, KVH = a->kv_heads, kvh = h / (a->heads / a->kv_heads);
  const int pos = a->pos0 + t;
  const wisp_cpu_kernels *k = j->c->k;
  const float *q = j->c->qbuf + ((size_t)t * a->heads + h) * D;
  const float scale = a->scale > 0 ? a->scale : 1.0f / sqrtf((float)D);
  /* the keys lo..pos: all of them, or the last `window` (a sliding window) */
  const int lo = a->window > 0 && pos + 1 > a->window ? pos + 1 - a->window : 0, cnt = pos + 1 - lo;
  const size_t row = (size_t)KVH * D, first = (size_t)lo * row + (size_t)kvh * D;
  if (a->k_cache->f16) k->dots_f16(q, halves(a->k_cache) + first, row, cnt, D, scale, scores);
  else k->dots_f32(q, a->k_cache->data + first, row, cnt, D, scale, scores);
  float mx = -INFINITY;
  for (int p = 0; p < cnt; p++)
    if (scores[p] > mx) mx = scores[p];
  double sum = 0;
  for (int p = 0; p < cnt; p++) {
    scores[p] = expf(scores[p] - mx);
    sum += scores[p];
  }
  float inv = (float)(1.0 / sum);
  float *o = a->out->data + ((size_t)t * a->heads + h) * D;
  /* o = sum of scores[p] * inv * value row lo + p, added in position order
   * from zero (wsum), from an f32 or f16 cache; wsum fetches the rows ahead */
  if (a->v_cache->f16) k->wsum_f16(o, scores, inv, cnt, halves(a->v_cache) + first, row, D);
  else k->wsum_f32(o, scores, inv, cnt, a->v_cache->data + first, row, D);
  if (j->gate) { /* out *= sigmoid(gate) */
    const float *g = j->gate + (size_t)t * j->gate_row + (size_t)h * 2 * D + D;
    for (int i = 0; i < D; i++) o[i] *= 1.0f / (1.0f + expf(-g[i]));
  }
}

static void attn_task(void *ctx, int task, int thread) {
  attn_job *j = ctx;
  const int groups = j->a->heads / j->heads_per_task;
  const int h0 = task % groups * j->heads_per_task, run = j->runs - 1 - task / groups;
  const int t0 = run * j->tokens_per_task, t1 = t0 + j->tokens_per_task < j->a->n ? t0 + j->tokens_per_task : j->a->n;
  for (int t = t0; t < t1; t++)
    for (int h = h0; h < h0 + j->heads_per_task; h++) attn_head_token(j, h, t, j->c->scratch[thread]);
}

/* Query heads a task: all the heads of a KV head while that still leaves a
 * task for every thread, else fewer (a divisor of the group). */
static int attn_heads_per_task(int heads, int kv_heads, int runs, int threads) {
  int hpt = heads / kv_heads;
  while (hpt > 1 && (heads / hpt) * runs < threads) {
    do hpt--;
    while (heads / kv_heads % hpt);
  }
  return hpt;
}

/* The pre-pass over the pool, then the (head, run of tokens) tasks. */
static void attention_common(cpu_backend *c, const attn_prep_job *prep, const wisp_attention_args *a,
                             const float *gate, int gate_row) {
  const int H = a->heads, D = a->head_dim;
  const size_t need_q = (size_t)a->n * H * D;
  if (!wisp_cpu_ensure_buf(&c->qbuf, &c->qbuf_len, need_q)) {
    c->error = wisp_fail(WISP_ENOMEM, "attention: out of memory for %zu queries", need_q);
    return;
  }
  if (!wisp_cpu_ensure_scratch(c, (size_t)(a->pos0 + a->n))) { c->error = wisp_fail(WISP_ENOMEM, "attention: out of memory"); return; }
  const size_t need_k = a->k_cache->f16 ? (size_t)a->n * a->kv_heads * D : 0;
  if (!wisp_cpu_ensure_buf(&c->kbuf, &c->kbuf_len, need_k)) {
    c->error = wisp_fail(WISP_ENOMEM, "attention: out of memory for %zu keys", need_k);
    return;
  }
  attn_prep_job pj = *prep;
  pj.k = c->k;
  pj.qbuf = c->qbuf;
  pj.kbuf = c->kbuf;
  const int per_token = (H + a->kv_heads) * D, threads = wisp_pool_size(c->pool);
  if (a->n == 1 && threads >= 4)
    wisp_cpu_run_ranges(c, H + a->kv_heads, (H + a->kv_heads + threads - 1) / threads, attn_prep_heads, &pj);
  else
    wisp_cpu_run_ranges(c, a->n, (8192 + per_token - 1) / per_token, attn_prep_tokens, &pj);
  /* about four tasks a thread, in runs of at least four tokens */
  int runs = (4 * threads + H - 1) / H;
  if (runs > (a->n + 3) / 4) runs = (a->n + 3) / 4;
  if (runs < 1) runs = 1;
  attn_job j = {c, a, gate, gate_row, (a->n + runs - 1) / runs, 0, 1};
  j.runs = (a->n + j.tokens_per_task - 1) / j.tokens_per_task;
  j.heads_per_task = attn_heads_per_task(H, a->kv_heads, j.runs, threads);
  wisp_pool_run(c->pool, H / j.heads_per_task * j.runs, attn_task, &j);
}

static void cpu_attention_run(wisp_backend *be, const wisp_attention_args *a) {
  const int D = a->head_dim, H = a->heads, KVH = a->kv_heads;
  attn_prep_job pj = {.qkv = a->qkv->data, .q_norm = a->q_norm ? a->q_norm->data : NULL,
                      .k_norm = a->k_norm ? a->k_norm->data : NULL, .cos = a->rope_cos->data,
                      .sin = a->rope_sin->data, .kc = a->k_cache, .vc = a->v_cache, .eps = a->eps,
                      .row = (H + 2 * KVH) * D, .H = H, .KVH = KVH, .D = D, .rot = D, .q_stride = D,
                      .k_off = H * D, .pos0 = a->pos0, .pairs = a->rope_pairs};
  attention_common(as_cpu(be), &pj, a, NULL, 0);
}

void wisp_cpu_attention(wisp_backend *be, const wisp_attention_args *a) {
  double t = op_start(as_cpu(be));
  cpu_attention_run(be, a);
  op_stop(as_cpu(be), OP_ATTENTION, t);
}

/* ---- gated attention ---- */

static void cpu_attention_gated_run(wisp_backend *be, const wisp_gated_attention_args *g) {
  const int D = g->head_dim, H = g->heads, KVH = g->kv_heads;
  const int row = (2 * H + 2 * KVH) * D;
  attn_prep_job pj = {.qkv = g->qkv->data, .q_norm = g->q_norm->data, .k_norm = g->k_norm->data,
                      .cos = g->rope_cos->data, .sin = g->rope_sin->data, .kc = g->k_cache,
                      .vc = g->v_cache, .eps = g->eps, .row = row, .H = H, .KVH = KVH, .D = D,
                      .rot = g->rotary_dim, .q_stride = 2 * D, .k_off = 2 * H * D, .pos0 = g->pos0,
                      .pairs = g->rope_pairs};
  wisp_attention_args a = {.n = g->n, .pos0 = g->pos0, .heads = H, .kv_heads = KVH, .head_dim = D,
                           .k_cache = g->k_cache, .v_cache = g->v_cache, .out = g->out};
  attention_common(as_cpu(be), &pj, &a, g->qkv->data, row);
}

void wisp_cpu_attention_gated(wisp_backend *be, const wisp_gated_attention_args *g) {
  double t = op_start(as_cpu(be));
  cpu_attention_gated_run(be, g);
  op_stop(as_cpu(be), OP_ATTENTION, t);
}

int wisp_cpu_attention_rows(wisp_backend *be, const wisp_attention_args *a, const wisp_mixer_rows *rows) {
  const int D = a->head_dim;
  for (int r = 0; r < rows->n; r++) {
    wisp_buf in = row_view(a->qkv, r, (a->heads + 2 * a->kv_heads) * D), o = row_view(a->out, r, a->heads * D);
    wisp_attention_args one = *a;
    one.qkv = &in;
    one.out = &o;
    one.n = 1;
    one.pos0 = rows->pos[r];
    one.k_cache = rows->s0[r];
    one.v_cache = rows->s1[r];
    wisp_cpu_attention(be, &one);
  }
  return 1;
}

int wisp_cpu_attention_gated_rows(wisp_backend *be, const wisp_gated_attention_args *a,
                                    const wisp_mixer_rows *rows) {
  const int D = a->head_dim;
  for (int r = 0; r < rows->n; r++) {
    wisp_buf in = row_view(a->qkv, r, (2 * a->heads + 2 * a->kv_heads) * D), o = row_view(a->out, r, a->heads * D);
    wisp_gated_attention_args one = *a;
    one.qkv = &in;
    one.out = &o;
    one.n = 1;
    one.pos0 = rows->pos[r];
    one.k_cache = rows->s0[r];
    one.v_cache = rows->s1[r];
    wisp_cpu_attention_gated(be, &one);
  }
  return 1;
}
