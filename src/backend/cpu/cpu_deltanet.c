/* The chunked Gated DeltaNet recurrence of one head (cpu_deltanet.h).
 *
 * Per token t of a chunk, with S0 the state before the chunk and
 * gamma_t = exp(G_t), G_t = g_0 + ... + g_t (so gamma_t / gamma_s =
 * exp(G_t - G_s) <= 1 for s <= t, computed from the difference, never as a
 * quotient of two underflowing products), unrolling the recurrence gives
 *   S_t = gamma_t S0 + sum_{s<=t} (gamma_t/gamma_s) k_s u_s^T
 * and therefore
 *   u_t = beta_t (v_t - gamma_t S0^T k_t) - beta_t sum_{s<t} (gamma_t/gamma_s) (k_t . k_s) u_s
 *   o_t = gamma_t S0^T q_t + sum_{s<=t} (gamma_t/gamma_s) (q_t . k_s) u_s
 *   S_next = gamma_last S0 + sum_s (gamma_last/gamma_s) k_s u_s^T
 * The u_t are a forward substitution (row t needs the rows before it); the
 * rest are dense products: [K;Q] S0, [K;Q] K^T, (ratio-masked) Q K^T U and
 * the scaled K^T U, which run as register-blocked products (gemm_f32)
 * where the per-token update streams the whole state through the cache
 * four times a token. */
#include "backend/cpu/cpu_deltanet.h"

#include <math.h>

/* Rows a block of the masked products: the triangle's blocks stop at their
 * last row's column. */
#define DN_ROWS 16

size_t wisp_dn_chunk_scratch(int dk, int dv) {
  const size_t C = WISP_DN_CHUNK;
  return (size_t)dk * C + 2 * C * (size_t)dv + 3 * C * C + 2 * C;
}

/* G_t (in double: a long run of tiny decays after one large one must not
 * lose the small differences) and gamma_t = exp(G_t). */
static void cumulative_decays(const wisp_cpu_kernels *kern, const float *g, int c, double *G, float *gam) {
  double acc = 0;
  for (int t = 0; t < c; t++) {
    acc += g[t];
    G[t] = acc;
    gam[t] = (float)acc;
  }
  kern->exp_f32(gam, gam, c);
}

/* d[t][s] = gamma_t / gamma_s for s <= t, 0 above the diagonal. */
static void decay_ratios(const wisp_cpu_kernels *kern, const double *G, int c, float *d) {
  for (int t = 0; t < c; t++) {
    float *row = d + (size_t)t * c;
    for (int s = 0; s <= t; s++) row[s] = (float)(G[t] - G[s]);
    kern->exp_f32(row, row, t + 1);
    for (int s = t + 1; s < c; s++) row[s] = 0;
  }
}

static void transpose(const float *a, int rows, int cols, float *at) {
  for (int r = 0; r < rows; r++)
    for (int i = 0; i < cols; i++) at[(size_t)i * rows + r] = a[(size_t)r * cols + i];
}

/* u_t in place over v_t, in order of t. */
static void solve_u(const wisp_cpu_kernels *kern, int c, int dv, const float *ks0, const float *gam,
                    const float *beta, const float *d, float *kk, float *v) {
  for (int t = 0; t < c; t++) {
    float *u = v + (size_t)t * dv, *coef = kk + (size_t)t * c;
    const float *w = ks0 + (size_t)t * dv, *dt = d + (size_t)t * c, bt = beta[t], gt = gam[t];
    for (int e = 0; e < dv; e++) u[e] = bt * (u[e] - gt * w[e]);
    for (int s = 0; s < t; s++) coef[s] = -bt * dt[s] * coef[s];
    if (t > 0) kern->gemm_f32(u, dv, coef, c, v, dv, 1, dv, t, 1);
  }
}

/* o_t = gamma_t (S0^T q_t) + sum_{s<=t} d[t][s] (q_t . k_s) u_s; the mask
 * is zero above the diagonal, and each block of rows stops at its last
 * row's column. */
static void chunk_outputs(const wisp_cpu_kernels *kern, int c, int dv, const float *qs0, const float *gam,
                          const float *d, float *qk, const float *u, float *o) {
  for (int t = 0; t < c; t++) {
    const float *w = qs0 + (size_t)t * dv;
    float *ot = o + (size_t)t * dv, *m = qk + (size_t)t * c;
    const float *dt = d + (size_t)t * c;
    for (int e = 0; e < dv; e++) ot[e] = gam[t] * w[e];
    for (int s = 0; s < c; s++) m[s] = s <= t ? m[s] * dt[s] : 0; /* above the diagonal: not computed */
  }
  for (int r0 = 0; r0 < c; r0 += DN_ROWS) {
    const int rows = c - r0 < DN_ROWS ? c - r0 : DN_ROWS;
    kern->gemm_f32(o + (size_t)r0 * dv, dv, qk + (size_t)r0 * c, c, u, dv, rows, dv, r0 + rows, 1);
  }
}

/* gram = [K;Q] K^T over the columns each block of DN_ROWS rows uses (up to
 * its last row's token), the products above that left out. */
static void chunk_gram(const wisp_cpu_kernels *kern, int c, int dk, const float *kq, const float *kt, float *gram) {
  for (int half = 0; half < 2; half++)
    for (int r0 = 0; r0 < c; r0 += DN_ROWS) {
      const int rows = c - r0 < DN_ROWS ? c - r0 : DN_ROWS, row = half * c + r0;
      kern->gemm_f32(gram + (size_t)row * c, c, kq + (size_t)row * dk, dk, kt, c, rows, r0 + rows, dk, 0);
    }
}

/* S = gamma_last S + sum_s (gamma_last / gamma_s) k_s u_s^T, the ratios
 * folded into the columns of K^T. */
static void next_state(const wisp_cpu_kernels *kern, float *S, int dk, int dv, int c, const float *gam,
                       const float *d, float *kt, const float *u) {
  const float last = gam[c - 1], *dl = d + (size_t)(c - 1) * c;
  for (size_t i = 0; i < (size_t)dk * dv; i++) S[i] *= last;
  for (int i = 0; i < dk; i++)
    for (int s = 0; s < c; s++) kt[(size_t)i * c + s] *= dl[s];
  kern->gemm_f32(S, dv, kt, c, u, dv, dk, dv, c, 1);
}

void wisp_dn_chunk(const wisp_cpu_kernels *kern, float *S, int dk, int dv, int c, const float *kq, float *v,
                   const float *g, const float *beta, float *o, float *scratch) {
  float *kt = scratch;                          /* [dk][c]  K^T */
  float *w = kt + (size_t)dk * c;               /* [2c][dv] [K;Q] S0 */
  float *gram = w + 2 * (size_t)c * dv;         /* [2c][c]  [K;Q] K^T */
  float *d = gram + 2 * (size_t)c * c;          /* [c][c]   decay ratios */
  float *gam = d + (size_t)c * c;               /* [c] */
  double G[WISP_DN_CHUNK];
  cumulative_decays(kern, g, c, G, gam);
  decay_ratios(kern, G, c, d);
  transpose(kq, c, dk, kt);
  kern->gemm_f32(w, dv, kq, dk, S, dv, 2 * c, dv, dk, 0);
  chunk_gram(kern, c, dk, kq, kt, gram);
  solve_u(kern, c, dv, w, gam, beta, d, gram, v);
  chunk_outputs(kern, c, dv, w + (size_t)c * dv, gam, d, gram + (size_t)c * c, v, o);
  next_state(kern, S, dk, dv, c, gam, d, kt, v);
}
