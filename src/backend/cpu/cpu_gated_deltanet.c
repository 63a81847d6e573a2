/* The Gated DeltaNet mixer on the CPU: its causal conv, the recurrence
 * (per token for decode, chunked for prefill, cpu_deltanet.c) and the
 * gated norm: docs/cpu.md "Gated DeltaNet". */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_deltanet.h"
#include "backend/cpu/cpu_internal.h"
#include "util/err.h"

/* ---- Gated DeltaNet ---- */

static float softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); } /* torch's threshold 20 */

/* Prefills of this many tokens or more run the recurrence in chunks
 * (cpu_deltanet.c); shorter calls, decode among them, token by token. */
#define DN_CHUNKED_MIN 4

/* Prefill runs in waves of chunks (wisp_cpu_gated_deltanet): a wave's
 * preparations (wisp_dn_prep, about 128 KB each for keys of 128) sit in
 * the backend's heap, at most this many of them. */
#define DN_WAVE_PREPS 32
/* Value columns a task of the chunked recurrence takes (a head's dv when
 * it is not a multiple of this): the columns of a head's state are
 * independent, so a head splits into blocks that keep every thread busy
 * with fewer heads than threads; fixed by the shape, not the thread count. */
#define DN_COLUMN_BLOCK 32

typedef struct {
  cpu_backend *c;
  const wisp_deltanet_args *a;
  /* the chunked form's current wave: its first token and chunks, their
   * preparations ([v_heads][chunks]), the blocks of value columns */
  int t0, chunks;
  float *prep;
  int col_block, col_blocks;
} dn_job;

/* Token t's inputs to v-head h: the normalised key and the normalised,
 * scaled query of its k-head, its log decay g and its beta. */
static void dn_token_inputs(const dn_job *j, int t, int h, float *q, float *k, float *g, float *beta) {
  const wisp_deltanet_args *a = j->a;
  const int dk = a->k_dim, K = a->k_heads * dk, V = a->v_heads * a->v_dim;
  const int conv_dim = 2 * K + V, proj_row = 2 * K + 2 * V + 2 * a->v_heads;
  const int kh = h / (a->v_heads / a->k_heads);
  const float *cv = j->c->dnbuf + (size_t)t * conv_dim;
  const float *pr = a->proj->data + (size_t)t * proj_row;
  double sq = 0, sk = 0;
  for (int i = 0; i < dk; i++) {
    q[i] = cv[kh * dk + i];
    k[i] = cv[K + kh * dk + i];
    sq += (double)q[i] * q[i];
    sk += (double)k[i] * k[i];
  }
  const float iq = 1.0f / sqrtf((float)sq + 1e-6f), ik = 1.0f / sqrtf((float)sk + 1e-6f);
  const float qscale = 1.0f / sqrtf((float)dk);
  for (int i = 0; i < dk; i++) { q[i] = q[i] * iq * qscale; k[i] *= ik; }
  const float b = pr[conv_dim + V + h], av = pr[conv_dim + V + a->v_heads + h];
  *beta = 1.0f / (1.0f + expf(-b));
  *g = -expf(a->a_log->data[h]) * softplus(av + a->dt_bias->data[h]);
}

/* Token t's value row of v-head h (in the conv output). */
static const float *dn_value(const dn_job *j, int t, int h) {
  const wisp_deltanet_args *a = j->a;
  const int K = a->k_heads * a->k_dim, conv_dim = 2 * K + a->v_heads * a->v_dim;
  return j->c->dnbuf + (size_t)t * conv_dim + 2 * K + (size_t)h * a->v_dim;
}

/* out[t] of v-head h = rmsnorm(o) * w * silu(z); o may be that output row;
 * zs: v_dim floats of scratch. */
static void dn_gated_norm(const dn_job *j, int t, int h, const float *o, float *zs) {
  const wisp_deltanet_args *a = j->a;
  const int dv = a->v_dim, K = a->k_heads * a->k_dim, V = a->v_heads * dv;
  const int proj_row = 2 * K + 2 * V + 2 * a->v_heads;
  const float *z = a->proj->data + (size_t)t * proj_row + 2 * K + V + (size_t)h * dv;
  float *out = a->out->data + (size_t)t * V + (size_t)h * dv;
  j->c->k->silu_f32(zs, z, dv);
  double ss = 0;
  for (int e = 0; e < dv; e++) ss += (double)o[e] * o[e];
  const float inv = 1.0f / sqrtf((float)(ss / dv) + a->eps);
  for (int e = 0; e < dv; e++) out[e] = a->norm->data[e] * (o[e] * inv) * zs[e];
}

static int dn_column_block(const wisp_deltanet_args *a) {
  return a->v_dim % DN_COLUMN_BLOCK == 0 ? DN_COLUMN_BLOCK : a->v_dim;
}

/* Per-thread scratch floats of dn_task or of the chunked form's tasks. */
static size_t dn_scratch_floats(const wisp_deltanet_args *a) {
  const size_t dk = (size_t)a->k_dim, dv = (size_t)a->v_dim, C = WISP_DN_CHUNK;
  const size_t by_token = 2 * dk + 3 * dv;
  const size_t prepare = C + wisp_dn_prepare_scratch(a->k_dim), columns = wisp_dn_columns_scratch(dn_column_block(a));
  const size_t chunked = prepare > columns ? prepare : columns;
  return a->n >= DN_CHUNKED_MIN ? (chunked > dv ? chunked : dv) : by_token;
}

/* One v-head token by token (decode, short calls). */
static void dn_head_by_token(const dn_job *j, int h, float *scratch) {
  const wisp_deltanet_args *a = j->a;
  const int dk = a->k_dim, dv = a->v_dim, V = a->v_heads * dv;
  float *q = scratch, *k = q + dk, *kv = k + dk, *zs = kv + dv;
  float *S = a->state->data + (size_t)h * dk * dv;
  for (int t = 0; t < a->n; t++) {
    float g, beta;
    dn_token_inputs(j, t, h, q, k, &g, &beta);
    float *o = a->out->data + (size_t)t * V + (size_t)h * dv;
    j->c->k->deltanet_step(S, dk, dv, k, q, dn_value(j, t, h), expf(g), beta, kv, o);
    dn_gated_norm(j, t, h, o, zs);
  }
}

/* One v-head over all n tokens: the recurrence is sequential in t. */
static void dn_task(void *ctx, int h, int thread) {
  const dn_job *j = ctx;
  dn_head_by_token(j, h, j->c->scratch[thread]);
}

/* Chunk ci of the current wave for v-head h: its first token, and its
 * preparation pointed into the wave's memory. */
static int dn_chunk_at(const dn_job *j, int h, int ci, wisp_dn_prep *p) {
  const int t0 = j->t0 + ci * WISP_DN_CHUNK, c = j->a->n - t0 < WISP_DN_CHUNK ? j->a->n - t0 : WISP_DN_CHUNK;
  const size_t slot = (size_t)h * j->chunks + ci;
  wisp_dn_prep_init(p, j->prep + slot * wisp_dn_prep_floats(j->a->k_dim), j->a->k_dim, c);
  return t0;
}

/* Task h * chunks + ci: what every value column of head h shares in chunk
 * ci (its keys, queries, betas and decays through wisp_dn_chunk_prepare). */
static void dn_prepare_task(void *ctx, int task, int thread) {
  const dn_job *j = ctx;
  const int h = task / j->chunks, dk = j->a->k_dim;
  wisp_dn_prep p;
  const int t0 = dn_chunk_at(j, h, task % j->chunks, &p);
  float *g = j->c->scratch[thread], *work = g + WISP_DN_CHUNK;
  for (int i = 0; i < p.c; i++)
    dn_token_inputs(j, t0 + i, h, p.kq + (size_t)(p.c + i) * dk, p.kq + (size_t)i * dk, &g[i], &p.beta[i]);
  wisp_dn_chunk_prepare(j->c->k, &p, g, work);
}

/* Task h * col_blocks + b: block b of head h's value columns through the
 * wave's chunks in order (its slice of the state carried from one to the
 * next), the raw outputs written to the op's output (normed afterwards). */
static void dn_columns_task(void *ctx, int task, int thread) {
  const dn_job *j = ctx;
  const wisp_deltanet_args *a = j->a;
  const int h = task / j->col_blocks, e0 = task % j->col_blocks * j->col_block;
  const int dk = a->k_dim, dv = a->v_dim, V = a->v_heads * dv, K = a->k_heads * dk, conv_dim = 2 * K + V;
  const int n = dv - e0 < j->col_block ? dv - e0 : j->col_block;
  float *S = a->state->data + (size_t)h * dk * dv + e0;
  for (int ci = 0; ci < j->chunks; ci++) {
    wisp_dn_prep p;
    const int t0 = dn_chunk_at(j, h, ci, &p);
    float *o = a->out->data + (size_t)t0 * V + (size_t)h * dv + e0;
    wisp_dn_chunk_columns(j->c->k, &p, S, dv, n, dn_value(j, t0, h) + e0, conv_dim, o, V, j->c->scratch[thread]);
  }
}

/* Task i: the gated norm of a run of tokens, every head, in place. */
#define DN_NORM_TOKENS 8
static void dn_norm_task(void *ctx, int task, int thread) {
  const dn_job *j = ctx;
  const wisp_deltanet_args *a = j->a;
  const int dv = a->v_dim, V = a->v_heads * dv, t0 = task * DN_NORM_TOKENS;
  const int t1 = t0 + DN_NORM_TOKENS < a->n ? t0 + DN_NORM_TOKENS : a->n;
  for (int t = t0; t < t1; t++)
    for (int h = 0; h < a->v_heads; h++)
      dn_gated_norm(j, t, h, a->out->data + (size_t)t * V + (size_t)h * dv, j->c->scratch[thread]);
}

/* fn over tasks [0, n): on the caller alone when the call is small (the
 * pool itself runs one task, or a pool of one thread, on the caller). */
static void dn_run(dn_job *j, int serial, int tasks, wisp_task_fn fn) {
  if (serial)
    for (int t = 0; t < tasks; t++) fn(j, t, 0);
  else
    wisp_pool_run(j->c->pool, tasks, fn, j);
}

static int dn_wave_chunks(const wisp_deltanet_args *a) {
  const int chunks = (a->n + WISP_DN_CHUNK - 1) / WISP_DN_CHUNK, fit = DN_WAVE_PREPS / a->v_heads;
  return fit < 1 ? 1 : fit < chunks ? fit : chunks;
}

/* The chunked recurrence over the call, wave by wave, then the gated norm. */
static void dn_chunked(dn_job *j, int serial) {
  const wisp_deltanet_args *a = j->a;
  const int wave = dn_wave_chunks(a);
  j->prep = j->c->dnprep;
  j->col_block = dn_column_block(a);
  j->col_blocks = a->v_dim / j->col_block;
  for (j->t0 = 0; j->t0 < a->n; j->t0 += wave * WISP_DN_CHUNK) {
    const int left = (a->n - j->t0 + WISP_DN_CHUNK - 1) / WISP_DN_CHUNK;
    j->chunks = left < wave ? left : wave;
    dn_run(j, serial, a->v_heads * j->chunks, dn_prepare_task);
    dn_run(j, serial, a->v_heads * j->col_blocks, dn_columns_task);
  }
  dn_run(j, serial, (a->n + DN_NORM_TOKENS - 1) / DN_NORM_TOKENS, dn_norm_task);
}

/* The causal depthwise conv + SiLU, out[t][ch] = silu(sum_k w[ch][k] x[t-S+k][ch])
 * with S = L-1 and x[-S..-1] the conv state ([ch][S], oldest first). */
typedef struct {
  const wisp_deltanet_args *a;
  const wisp_cpu_kernels *k;
  float *out;
  const float *taps_t, *hist; /* [L][conv_dim] taps and [S][conv_dim] state, transposed (blocked form) */
  int conv_dim, proj_row;
  int tokens_per_task, channels_per_task, channel_tasks;
} dn_conv_job;

/* Few tokens (decode): a range of channels, each with its own taps and
 * state, shifted in place token by token; SiLU over the range at the end of
 * each token. */
static void dn_conv_channels(void *ctx, int c0, int c1) {
  const dn_conv_job *j = ctx;
  const wisp_deltanet_args *a = j->a;
  const int L = a->conv_len, S = L - 1;
  for (int t = 0; t < a->n; t++) {
    const float *x = a->proj->data + (size_t)t * j->proj_row;
    float *o = j->out + (size_t)t * j->conv_dim;
    for (int ch = c0; ch < c1; ch++) {
      const float *w = a->conv_taps->data + (size_t)ch * L;
      float *st = a->conv_state->data + (size_t)ch * S;
      float acc = 0;
      for (int k = 0; k < S; k++) acc += w[k] * st[k];
      acc += w[S] * x[ch];
      for (int k = 0; k + 1 < S; k++) st[k] = st[k + 1];
      if (S > 0) st[S - 1] = x[ch];
      o[ch] = acc;
    }
    j->k->silu_f32(o + c0, o + c0, c1 - c0);
  }
}

/* Input row i of the conv (i < 0: the state's row i + S), from channel 0. */
static const float *dn_conv_input(const dn_conv_job *j, int i) {
  const int S = j->a->conv_len - 1;
  return i >= 0 ? j->a->proj->data + (size_t)i * j->proj_row : j->hist + (size_t)(i + S) * j->conv_dim;
}

/* Many tokens: a task is a run of tokens by a block of channels; each
 * output is independent of the others, and the state is read from its
 * transposed copy and written after all tasks (dn_conv_update_state). */
#define DN_CONV_MAX_TAPS 16
static void dn_conv_block(void *ctx, int task, int thread) {
  (void)thread;
  const dn_conv_job *j = ctx;
  const int L = j->a->conv_len, S = L - 1;
  const int t0 = task / j->channel_tasks * j->tokens_per_task, c0 = task % j->channel_tasks * j->channels_per_task;
  const int t1 = t0 + j->tokens_per_task < j->a->n ? t0 + j->tokens_per_task : j->a->n;
  const int nc = c0 + j->channels_per_task < j->conv_dim ? j->channels_per_task : j->conv_dim - c0;
  const float *x[DN_CONV_MAX_TAPS];
  for (int t = t0; t < t1; t++) {
    for (int k = 0; k < L; k++) x[k] = dn_conv_input(j, t - S + k) + c0;
    j->k->conv_silu_f32(j->out + (size_t)t * j->conv_dim + c0, x, j->taps_t + c0, (size_t)j->conv_dim, L, nc);
  }
}

/* The state after the call: each channel's last S inputs, from the old
 * state where the call had fewer than S tokens. */
static void dn_conv_update_state(const dn_conv_job *j) {
  const int S = j->a->conv_len - 1, n = j->a->n;
  float *st = j->a->conv_state->data;
  for (int s = 0; s < S; s++) {
    const float *x = dn_conv_input(j, n - S + s);
    for (int ch = 0; ch < j->conv_dim; ch++) st[(size_t)ch * S + s] = x[ch];
  }
}

static void dn_conv(cpu_backend *c, const wisp_deltanet_args *a, int conv_dim, int proj_row) {
  const int L = a->conv_len, S = L - 1;
  dn_conv_job j = {.a = a, .k = c->k, .out = c->dnbuf, .conv_dim = conv_dim, .proj_row = proj_row};
  if (a->n < DN_CHUNKED_MIN || L > DN_CONV_MAX_TAPS) {
    wisp_cpu_run_ranges(c, conv_dim, wisp_cpu_channel_grain(c, a->n, conv_dim), dn_conv_channels, &j);
    return;
  }
  float *taps_t = c->dnconv, *hist = taps_t + (size_t)L * conv_dim;
  for (int ch = 0; ch < conv_dim; ch++) {
    for (int k = 0; k < L; k++) taps_t[(size_t)k * conv_dim + ch] = a->conv_taps->data[(size_t)ch * L + k];
    for (int s = 0; s < S; s++) hist[(size_t)s * conv_dim + ch] = a->conv_state->data[(size_t)ch * S + s];
  }
  j.taps_t = taps_t;
  j.hist = hist;
  /* about 16k outputs a task: 1k channels (4 KB of each input row, the rows
   * of a run reused from L1) by runs of 16 tokens */
  j.channels_per_task = conv_dim < 1024 ? conv_dim : 1024;
  j.channel_tasks = (conv_dim + j.channels_per_task - 1) / j.channels_per_task;
  j.tokens_per_task = 16;
  const int tasks = (a->n + j.tokens_per_task - 1) / j.tokens_per_task * j.channel_tasks;
  wisp_pool_run(c->pool, tasks, dn_conv_block, &j); /* on the caller alone for one task or one thread */
  dn_conv_update_state(&j);
}


void wisp_cpu_gated_deltanet(wisp_backend *be, const wisp_deltanet_args *a) {
  cpu_backend *c = as_cpu(be);
  const int K = a->k_heads * a->k_dim, V = a->v_heads * a->v_dim;
  const int conv_dim = 2 * K + V, proj_row = 2 * K + 2 * V + 2 * a->v_heads;
  const size_t preps = a->n >= DN_CHUNKED_MIN ? (size_t)a->v_heads * dn_wave_chunks(a) : 0;
  if (!wisp_cpu_ensure_buf(&c->dnbuf, &c->dnbuf_len, (size_t)a->n * conv_dim) ||
      !wisp_cpu_ensure_buf(&c->dnconv, &c->dnconv_len, (size_t)(2 * a->conv_len - 1) * conv_dim) ||
      !wisp_cpu_ensure_buf(&c->dnprep, &c->dnprep_len, preps * wisp_dn_prep_floats(a->k_dim)) ||
      !wisp_cpu_ensure_scratch(c, dn_scratch_floats(a))) {
    c->error = wisp_fail(WISP_ENOMEM, "gated_deltanet: out of memory");
    return;
  }
  double t0 = op_start(c);
  dn_conv(c, a, conv_dim, proj_row);
  op_stop(c, OP_DELTANET_CONV, t0);
  t0 = op_start(c);
  dn_job j = {.c = c, .a = a};
  const int serial = (double)a->n * a->v_heads * a->k_dim * a->v_dim < 65536.0;
  if (a->n >= DN_CHUNKED_MIN)
    dn_chunked(&j, serial);
  else
    dn_run(&j, serial, a->v_heads, dn_task);
  op_stop(c, OP_DELTANET_HEADS, t0);
}

int wisp_cpu_gated_deltanet_rows(wisp_backend *be, const wisp_deltanet_args *a, const wisp_mixer_rows *rows) {
  const int K = a->k_heads * a->k_dim, V = a->v_heads * a->v_dim;
  for (int r = 0; r < rows->n; r++) {
    wisp_buf in = row_view(a->proj, r, 2 * K + 2 * V + 2 * a->v_heads), o = row_view(a->out, r, V);
    wisp_deltanet_args one = *a;
    one.proj = &in;
    one.out = &o;
    one.n = 1;
    one.pos0 = rows->pos[r];
    one.conv_state = rows->s0[r];
    one.state = rows->s1[r];
    wisp_cpu_gated_deltanet(be, &one);
  }
  return 1;
}
