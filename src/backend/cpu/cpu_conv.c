/* cpu_conv.h. Why a blocked version: one channel of one token at a time
 * reloads and shifts the channel's taps and state for every token, and a
 * thread's channel range (thousands of channels) cycles its whole state
 * through the cache once per token; with the Qwen 3.5 0.8B shape that made
 * the conv a quarter of a prefill's time. The blocked version keeps BW
 * channels' taps and state in small local arrays for all n tokens, so each
 * token costs a contiguous read of x, a contiguous write of out and
 * arithmetic on L1-resident data; loops over the block's channels are
 * innermost, so the compiler may run them in vector lanes, which changes
 * no rounding. */
#include "backend/cpu/cpu_conv.h"

#include <math.h>

enum {
  BW = 32,  /* channels a block */
  MAXL = 16 /* most taps the blocked version holds */
};

static float silu(float x) { return x / (1.0f + expf(-x)); }

void wisp_cpu_dn_conv_reference(const float *x, size_t x_stride, const float *taps, float *state, int L, int n,
                                int c0, int c1, float *out, size_t out_stride) {
  const int S = L - 1;
  for (int t = 0; t < n; t++) {
    const float *xt = x + (size_t)t * x_stride;
    float *o = out + (size_t)t * out_stride;
    for (int ch = c0; ch < c1; ch++) {
      const float *w = taps + (size_t)ch * L;
      float *st = state + (size_t)ch * S;
      float acc = 0;
      for (int k = 0; k < S; k++) acc += w[k] * st[k];
      acc += w[S] * xt[ch];
      for (int k = 0; k + 1 < S; k++) st[k] = st[k + 1];
      if (S > 0) st[S - 1] = xt[ch];
      o[ch] = silu(acc);
    }
  }
}

void wisp_cpu_dn_conv(const float *x, size_t x_stride, const float *taps, float *state, int L, int n, int c0, int c1,
                      float *out, size_t out_stride) {
  if (n == 1 || L < 1 || L > MAXL) { /* one token (decode): nothing to keep between tokens */
    wisp_cpu_dn_conv_reference(x, x_stride, taps, state, L, n, c0, c1, out, out_stride);
    return;
  }
  const int S = L - 1;
  float w[MAXL][BW], st[MAXL][BW], acc[BW]; /* [tap][channel of the block] */
  for (int b0 = c0; b0 < c1; b0 += BW) {
    const int nb = c1 - b0 < BW ? c1 - b0 : BW;
    for (int j = 0; j < nb; j++) {
      for (int k = 0; k < L; k++) w[k][j] = taps[(size_t)(b0 + j) * L + k];
      for (int k = 0; k < S; k++) st[k][j] = state[(size_t)(b0 + j) * S + k];
    }
    for (int t = 0; t < n; t++) {
      const float *xt = x + (size_t)t * x_stride + b0;
      float *o = out + (size_t)t * out_stride + b0;
      for (int j = 0; j < nb; j++) acc[j] = 0;
      for (int k = 0; k < S; k++)
        for (int j = 0; j < nb; j++) acc[j] += w[k][j] * st[k][j];
      for (int j = 0; j < nb; j++) acc[j] += w[S][j] * xt[j];
      for (int k = 0; k + 1 < S; k++)
        for (int j = 0; j < nb; j++) st[k][j] = st[k + 1][j];
      if (S > 0)
        for (int j = 0; j < nb; j++) st[S - 1][j] = xt[j];
      for (int j = 0; j < nb; j++) o[j] = silu(acc[j]);
    }
    for (int j = 0; j < nb; j++)
      for (int k = 0; k < S; k++) state[(size_t)(b0 + j) * S + k] = st[k][j];
  }
}
