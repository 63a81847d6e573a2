/* The chunked Gated DeltaNet recurrence of one head (cpu_deltanet.h).
 *
 * Per token t of a chunk, with S0 the state before the chunk and
 * gamma_t = exp(G_t), G_t = g_0 + ... + g_t (so gamma_t / gamma_s =
 * exp(G_t - G_s) <= 1 for s <= t, computed from the difference, never as a
 * quotient of two underflowing products), unrolling the recurrence gives
 *   S_t = gamma_t S0 + sum_{s<=t} (gamma_t/gamma_s) k_s u_s^T
 * and therefore
 *   u_t = beta_t v_t - (beta_t gamma_t k_t) S0 - beta_t sum_{s<t} (gamma_t/gamma_s) (k_t . k_s) u_s
 *   o_t = (gamma_t q_t) S0 + sum_{s<=t} (gamma_t/gamma_s) (q_t . k_s) u_s
 *   S_next = gamma_last S0 + sum_s (gamma_last/gamma_s) k_s u_s^T
 * The u_t are a forward substitution (row t needs the rows before it); the
 * rest are dense products: [K;Q] S0, [K;Q] K^T, (ratio-masked) Q K^T U and
 * the scaled K^T U, which run as register-blocked products (gemm_f32)
 * where the per-token update streams the whole state through the cache
 * four times a token.
 *
 * Everything that does not involve S0 or the values (the decays, [K;Q]
 * K^T and its ratio masks, the scaled keys and queries) is the same for
 * every value column: wisp_dn_chunk_prepare makes it once per head and
 * chunk, and wisp_dn_chunk_columns runs any block of columns from it. */
#include "backend/cpu/cpu_deltanet.h"

#include <math.h>

/* Rows a block of the masked products and of the forward substitution:
 * the triangle's blocks stop at their last row's column. */
#define DN_ROWS 16

size_t wisp_dn_prep_floats(int dk) {
  const size_t C = WISP_DN_CHUNK;
  return 3 * C * (size_t)dk + 2 * C * C + 2 * C;
}

void wisp_dn_prep_init(wisp_dn_prep *p, float *mem, int dk, int c) {
  const size_t C = WISP_DN_CHUNK;
  p->c = c, p->dk = dk;
  p->kq = mem;
  p->ks = p->kq + 2 * C * (size_t)dk;
  p->gram = p->ks + C * (size_t)dk;
  p->beta = p->gram + 2 * C * C;
  p->gam = p->beta + C;
}

size_t wisp_dn_prepare_scratch(int dk) {
  (void)dk;
  return (size_t)WISP_DN_CHUNK * WISP_DN_CHUNK;
}

size_t wisp_dn_columns_scratch(int n) { return (size_t)WISP_DN_CHUNK * n; }

size_t wisp_dn_chunk_scratch(int dk, int dv) {
  return wisp_dn_prep_floats(dk) + wisp_dn_prepare_scratch(dk) + wisp_dn_columns_scratch(dv);
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

/* d[t][s] = gamma_t / gamma_s for s <= t (the rest not written). */
static void decay_ratios(const wisp_cpu_kernels *kern, const double *G, int c, float *d) {
  for (int t = 0; t < c; t++) {
    float *row = d + (size_t)t * c;
    for (int s = 0; s <= t; s++) row[s] = (float)(G[t] - G[s]);
    kern->exp_f32(row, row, t + 1);
  }
}

static void transpose(const float *a, int rows, int cols, float *at) {
  for (int r = 0; r < rows; r++)
    for (int i = 0; i < cols; i++) at[(size_t)i * rows + r] = a[(size_t)r * cols + i];
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

/* The gram's rows into the solve's coefficients -beta_t d_ts (k_t . k_s)
 * (s < t) and the outputs' mask d_ts (q_t . k_s) (s <= t, zero above the
 * diagonal up to the block's last column, the part the products read). */
static void scale_gram(int c, const float *d, const float *beta, float *gram) {
  for (int t = 0; t < c; t++) {
    const float *dt = d + (size_t)t * c, bt = beta[t];
    float *coef = gram + (size_t)t * c, *m = gram + (size_t)(c + t) * c;
    const int end = (t / DN_ROWS + 1) * DN_ROWS < c ? (t / DN_ROWS + 1) * DN_ROWS : c;
    for (int s = 0; s < t; s++) coef[s] = -bt * dt[s] * coef[s];
    for (int s = 0; s <= t; s++) m[s] *= dt[s];
    for (int s = t + 1; s < end; s++) m[s] = 0;
  }
}

void wisp_dn_chunk_prepare(const wisp_cpu_kernels *kern, wisp_dn_prep *p, const float *g, float *scratch) {
  const int c = p->c, dk = p->dk;
  float *d = scratch, *gam = p->gam;
  double G[WISP_DN_CHUNK];
  cumulative_decays(kern, g, c, G, gam);
  decay_ratios(kern, G, c, d);
  transpose(p->kq, c, dk, p->ks);
  chunk_gram(kern, c, dk, p->kq, p->ks, p->gram);
  scale_gram(c, d, p->beta, p->gram);
  /* the keys and queries from here on only meet S0: the decays (and the
   * keys' betas) folded in; K^T's columns take the ratios to the last token */
  const float *dl = d + (size_t)(c - 1) * c;
  for (int i = 0; i < dk; i++)
    for (int s = 0; s < c; s++) p->ks[(size_t)i * c + s] *= dl[s];
  for (int t = 0; t < c; t++) {
    const float sk = p->beta[t] * gam[t], sq = gam[t];
    float *k = p->kq + (size_t)t * dk, *q = p->kq + (size_t)(c + t) * dk;
    for (int i = 0; i < dk; i++) k[i] *= sk, q[i] *= sq;
  }
}

/* u_t = beta_t v_t - w_t + sum_{s<t} coef[t][s] u_s in place over w, in
 * blocks of DN_ROWS rows: the rows before a block in one product, then the
 * block's own triangle row by row (each element the same chain of
 * multiply-adds in the order of s as a row-by-row solve). */
static void solve_u(const wisp_cpu_kernels *kern, const wisp_dn_prep *p, int n, const float *v, int ldv, float *u) {
  const int c = p->c;
  for (int r0 = 0; r0 < c; r0 += DN_ROWS) {
    const int r1 = c - r0 < DN_ROWS ? c : r0 + DN_ROWS;
    for (int t = r0; t < r1; t++) {
      float *ut = u + (size_t)t * n;
      const float *vt = v + (size_t)t * ldv, bt = p->beta[t];
      for (int e = 0; e < n; e++) ut[e] = bt * vt[e] - ut[e];
    }
    if (r0 > 0) kern->gemm_f32(u + (size_t)r0 * n, n, p->gram + (size_t)r0 * c, c, u, n, r1 - r0, n, r0, 1);
    for (int t = r0 + 1; t < r1; t++)
      kern->gemm_f32(u + (size_t)t * n, n, p->gram + (size_t)t * c + r0, c, u + (size_t)r0 * n, n, 1, n, t - r0, 1);
  }
}

void wisp_dn_chunk_columns(const wisp_cpu_kernels *kern, const wisp_dn_prep *p, float *S, int ldS, int n,
                           const float *v, int ldv, float *o, int ldo, float *scratch) {
  const int c = p->c, dk = p->dk;
  float *u = scratch; /* [c][n] */
  kern->gemm_f32(u, n, p->kq, dk, S, ldS, c, n, dk, 0);                    /* beta_t gamma_t k_t S0 */
  kern->gemm_f32(o, ldo, p->kq + (size_t)c * dk, dk, S, ldS, c, n, dk, 0); /* gamma_t q_t S0 */
  solve_u(kern, p, n, v, ldv, u);
  const float *mask = p->gram + (size_t)c * c;
  for (int r0 = 0; r0 < c; r0 += DN_ROWS) {
    const int rows = c - r0 < DN_ROWS ? c - r0 : DN_ROWS;
    kern->gemm_f32(o + (size_t)r0 * ldo, ldo, mask + (size_t)r0 * c, c, u, n, rows, n, r0 + rows, 1);
  }
  kern->gemm_f32(S, ldS, p->ks, c, u, n, dk, n, c, p->gam[c - 1]);
}

void wisp_dn_chunk(const wisp_cpu_kernels *kern, float *S, int dk, int dv, int c, const float *kq, const float *v,
                   const float *g, const float *beta, float *o, float *scratch) {
  wisp_dn_prep p;
  wisp_dn_prep_init(&p, scratch, dk, c);
  float *prep_scratch = scratch + wisp_dn_prep_floats(dk), *col_scratch = prep_scratch + wisp_dn_prepare_scratch(dk);
  for (size_t i = 0; i < (size_t)2 * c * dk; i++) p.kq[i] = kq[i];
  for (int t = 0; t < c; t++) p.beta[t] = beta[t];
  wisp_dn_chunk_prepare(kern, &p, g, prep_scratch);
  wisp_dn_chunk_columns(kern, &p, S, dv, dv, v, dv, o, dv, col_scratch);
}
