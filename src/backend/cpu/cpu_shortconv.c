/* The gated short conv op (backend.h shortconv) on the CPU: a decode
 * token channel by channel, a prefill vectorized over channels (docs/cpu.md
 * "Short conv"). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_internal.h"

/* Channels are independent (each has its own taps and state), so a range of
 * channels runs every token; ranges spread over the pool. */
typedef struct {
  const float *bcx, *taps;
  float *state, *out;
  int L, n, dim;
} conv_job;

static void shortconv_channels(void *ctx, int c0, int c1) {
  const conv_job *j = ctx;
  const int S = j->L - 1, dim = j->dim; /* S: inputs remembered per channel */
  for (int t = 0; t < j->n; t++) {
    const float *B = j->bcx + (size_t)t * 3 * dim, *C = B + dim, *X = C + dim;
    float *o = j->out + (size_t)t * dim;
    for (int ch = c0; ch < c1; ch++) {
      const float *w = j->taps + (size_t)ch * j->L;
      float *st = j->state + (size_t)ch * S;
      float bx = B[ch] * X[ch];
      float acc = w[S] * bx;
      for (int k = 0; k < S; k++) acc += w[k] * st[k];
      for (int k = 0; k + 1 < S; k++) st[k] = st[k + 1];
      if (S > 0) st[S - 1] = bx;
      o[ch] = C[ch] * acc;
    }
  }
}

/* Channels per task for a mixer over n tokens of dim channels: about 2k
 * channel-steps a task, whole 64-byte lines of each token's output row. A
 * decode token from 4 threads up is spread over every thread instead: its
 * inputs were just written by the product before it, spread over every
 * core's cache, and one thread pulling them all over took longer (about
 * 10 us a call at 8 threads on the H200 host) than the hand-out. */
int wisp_cpu_channel_grain(const cpu_backend *c, int n, int dim) {
  const int threads = wisp_pool_size(c->pool);
  int g = n == 1 && threads >= 4 ? (dim + threads - 1) / threads : (2048 + n - 1) / n;
  return (g + 15) / 16 * 16;
}

/* A prefill's short conv, vectorized over channels: every output
 * out[t][ch] = C[t][ch] * (w[ch][S] bx[t][ch] + sum_k<S w[ch][k] bx[t-S+k][ch])
 * (bx = B * x, the state standing in for the inputs before the call) is
 * independent of the others, so tasks are runs of tokens by blocks of
 * channels reading the B * x rows made first, with the taps transposed to
 * [L][channels] in the sum's order (newest input first, as the per-token
 * loop adds them, so both give the same bits); the state is written after
 * all tasks. */
#define SCONV_MIN_TOKENS 4
#define SCONV_MAX_TAPS 16
typedef struct {
  const float *bcx;
  float *bx, *hist, *taps_t, *out;
  const wisp_cpu_kernels *k;
  int L, n, dim, tokens_per_task, channel_tasks, channels_per_task;
} sconv_job;

static void sconv_bx_rows(void *ctx, int t0, int t1) {
  const sconv_job *j = ctx;
  for (int t = t0; t < t1; t++) {
    const float *B = j->bcx + (size_t)t * 3 * j->dim, *X = B + 2 * (size_t)j->dim;
    float *bx = j->bx + (size_t)t * j->dim;
    for (int ch = 0; ch < j->dim; ch++) bx[ch] = B[ch] * X[ch];
  }
}

/* Input row i of the conv (i < 0: the state's row i + S). */
static const float *sconv_input(const sconv_job *j, int i) {
  return i >= 0 ? j->bx + (size_t)i * j->dim : j->hist + (size_t)(i + j->L - 1) * j->dim;
}

static void sconv_block(void *ctx, int task, int thread) {
  (void)thread;
  const sconv_job *j = ctx;
  const int S = j->L - 1;
  const int t0 = task / j->channel_tasks * j->tokens_per_task, c0 = task % j->channel_tasks * j->channels_per_task;
  const int t1 = t0 + j->tokens_per_task < j->n ? t0 + j->tokens_per_task : j->n;
  const int nc = c0 + j->channels_per_task < j->dim ? j->channels_per_task : j->dim - c0;
  const float *x[SCONV_MAX_TAPS];
  for (int t = t0; t < t1; t++) {
    x[0] = sconv_input(j, t) + c0;
    for (int k = 0; k < S; k++) x[1 + k] = sconv_input(j, t - S + k) + c0;
    float *o = j->out + (size_t)t * j->dim + c0;
    j->k->conv_f32(o, x, j->taps_t + c0, (size_t)j->dim, j->L, nc);
    const float *C = j->bcx + (size_t)t * 3 * j->dim + j->dim + c0;
    for (int c = 0; c < nc; c++) o[c] = C[c] * o[c];
  }
}

static void shortconv_prefill(cpu_backend *c, const conv_job *cj) {
  const int L = cj->L, S = L - 1, n = cj->n, dim = cj->dim;
  sconv_job j = {.bcx = cj->bcx, .out = cj->out, .k = c->k, .L = L, .n = n, .dim = dim};
  j.bx = c->scbuf;
  j.taps_t = j.bx + (size_t)n * dim;
  j.hist = j.taps_t + (size_t)L * dim;
  for (int ch = 0; ch < dim; ch++) {
    j.taps_t[ch] = cj->taps[(size_t)ch * L + S];
    for (int k = 0; k < S; k++) j.taps_t[(size_t)(1 + k) * dim + ch] = cj->taps[(size_t)ch * L + k];
    for (int s = 0; s < S; s++) j.hist[(size_t)s * dim + ch] = cj->state[(size_t)ch * S + s];
  }
  wisp_cpu_run_ranges(c, n, (4096 + dim - 1) / dim, sconv_bx_rows, &j);
  /* about 16k outputs a task: 1k channels by runs of 16 tokens */
  j.channels_per_task = dim < 1024 ? dim : 1024;
  j.channel_tasks = (dim + j.channels_per_task - 1) / j.channels_per_task;
  j.tokens_per_task = 16;
  const int tasks = (n + j.tokens_per_task - 1) / j.tokens_per_task * j.channel_tasks;
  wisp_pool_run(c->pool, tasks, sconv_block, &j); /* on the caller alone for one task or one thread */
  for (int s = 0; s < S; s++) { /* the state after the call: each channel's last S inputs */
    const float *x = sconv_input(&j, n - S + s);
    for (int ch = 0; ch < dim; ch++) cj->state[(size_t)ch * S + s] = x[ch];
  }
}

static void cpu_shortconv_run(wisp_backend *be, const wisp_buf *bcx, const wisp_vector *taps, int L, int n, int dim,
                              wisp_buf *state, wisp_buf *out) {
  cpu_backend *c = as_cpu(be);
  conv_job j = {bcx->data, taps->data, state->data, out->data, L, n, dim};
  if (n >= SCONV_MIN_TOKENS && L <= SCONV_MAX_TAPS &&
      wisp_cpu_ensure_buf(&c->scbuf, &c->scbuf_len, (size_t)(n + 2 * L - 1) * dim)) {
    shortconv_prefill(c, &j);
    return;
  }
  wisp_cpu_run_ranges(c, dim, wisp_cpu_channel_grain(c, n, dim), shortconv_channels, &j);
}

void wisp_cpu_shortconv(wisp_backend *be, const wisp_buf *bcx, const wisp_vector *taps, int L, int n, int dim,
                          wisp_buf *state, wisp_buf *out) {
  double t = op_start(as_cpu(be));
  cpu_shortconv_run(be, bcx, taps, L, n, dim, state, out);
  op_stop(as_cpu(be), OP_SHORTCONV, t);
}

int wisp_cpu_shortconv_rows(wisp_backend *be, const wisp_buf *bcx, const wisp_vector *taps, int L, int dim,
                              const wisp_mixer_rows *rows, wisp_buf *out) {
  for (int r = 0; r < rows->n; r++) {
    wisp_buf in = row_view(bcx, r, 3 * dim), o = row_view(out, r, dim);
    wisp_cpu_shortconv(be, &in, taps, L, 1, dim, rows->s0[r], &o);
  }
  return 1;
}
