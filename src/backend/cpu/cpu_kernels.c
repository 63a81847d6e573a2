/* Scalar, AVX2 and AVX-512 inner loops; see cpu_kernels.h. The vector
 * functions carry target attributes so the rest of the build stays portable
 * x86-64. */
#include "backend/cpu/cpu_kernels.h"

#include "backend/cpu/cpu_blocks.h"
#include "backend/cpu/cpu_i8.h" /* wisp_cpu_features_get */

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- scalar reference ---- */

static float dot_f32_scalar(const float *a, const float *b, int n) {
  float s = 0;
  for (int i = 0; i < n; i++) s += a[i] * b[i];
  return s;
}

static int zero_point(const wisp_matrix *m, size_t block) {
  return m->type == WISP_W_Q4Z ? wisp_q4z_zero_point(m->zp, block) : 8;
}

static float dot_q4_row_scalar(const wisp_matrix *m, int row, const float *x) {
  const int nb = m->cols / WISP_Q4_BLOCK;
  const uint8_t *q = m->q + (size_t)row * (size_t)(m->cols / 2);
  const float *s = m->scales + (size_t)row * nb;
  float total = 0;
  for (int b = 0; b < nb; b++) {
    float z = (float)zero_point(m, (size_t)row * nb + b);
    float acc = 0;
    for (int j = 0; j < 16; j++) {
      uint8_t byte = q[b * 16 + j];
      acc += ((float)(byte & 15) - z) * x[b * 32 + 2 * j];
      acc += ((float)(byte >> 4) - z) * x[b * 32 + 2 * j + 1];
    }
    total += s[b] * acc;
  }
  return total;
}

static void dot4_f32_scalar(const float *w, const float *const x[4], int n, float out[4]) {
  for (int k = 0; k < 4; k++) out[k] = dot_f32_scalar(w, x[k], n);
}

static void dot2x4_f32_scalar(const float *const w[2], const float *const x[4], int n, float out[2][4]) {
  dot4_f32_scalar(w[0], x, n, out[0]);
  dot4_f32_scalar(w[1], x, n, out[1]);
}

/* Q4_K (layout in tensor.h): per sub-block j, sum_i (d*sc*q_i - dmin*m) x_i
 * = d*sc * sum q_i x_i - dmin*m * sum x_i. */
static float dot_q4k_row_scalar(const wisp_matrix *m, int row, const float *x) {
  const int nsb = m->cols / WISP_Q4K_BLOCK;
  const uint8_t *blk = m->q + (size_t)row * nsb * WISP_Q4K_BYTES;
  float total = 0;
  for (int b = 0; b < nsb; b++, blk += WISP_Q4K_BYTES, x += WISP_Q4K_BLOCK) {
    float d = wisp_f16_to_f32((uint16_t)(blk[0] | blk[1] << 8));
    float dmin = wisp_f16_to_f32((uint16_t)(blk[2] | blk[3] << 8));
    const uint8_t *qs = blk + 16;
    for (int c = 0; c < 4; c++) {
      int sc0, m0, sc1, m1;
      wisp_q4k_scale_min(blk + 4, 2 * c, &sc0, &m0);
      wisp_q4k_scale_min(blk + 4, 2 * c + 1, &sc1, &m1);
      float qx0 = 0, qx1 = 0, sx0 = 0, sx1 = 0;
      for (int l = 0; l < 32; l++) {
        float a = x[64 * c + l], e = x[64 * c + 32 + l];
        qx0 += (float)(qs[32 * c + l] & 15) * a;
        qx1 += (float)(qs[32 * c + l] >> 4) * e;
        sx0 += a;
        sx1 += e;
      }
      total += d * (float)sc0 * qx0 - dmin * (float)m0 * sx0 + d * (float)sc1 * qx1 - dmin * (float)m1 * sx1;
    }
  }
  return total;
}

static float dot_f16_row_scalar(const wisp_matrix *m, int row, const float *x) {
  const uint8_t *h = m->q + (size_t)row * (size_t)m->cols * 2;
  float s = 0;
  for (int i = 0; i < m->cols; i++) s += wisp_f16_to_f32((uint16_t)(h[2 * i] | h[2 * i + 1] << 8)) * x[i];
  return s;
}

/* Q8_0: sum over blocks of d * sum q_i x_i. */
static float dot_q8_0_row_scalar(const wisp_matrix *m, int row, const float *x) {
  const int nb = m->cols / WISP_Q8_0_BLOCK;
  const uint8_t *blk = m->q + (size_t)row * nb * WISP_Q8_0_BYTES;
  float total = 0;
  for (int b = 0; b < nb; b++, blk += WISP_Q8_0_BYTES, x += WISP_Q8_0_BLOCK) {
    float d = wisp_f16_to_f32((uint16_t)(blk[0] | blk[1] << 8));
    float acc = 0;
    for (int i = 0; i < WISP_Q8_0_BLOCK; i++) acc += (float)(int8_t)blk[2 + i] * x[i];
    total += d * acc;
  }
  return total;
}

static void deltanet_step_scalar(float *S, int dk, int dv, const float *k, const float *q, const float *v,
                                 float decay, float beta, float *kv, float *o) {
  for (int e = 0; e < dv; e++) kv[e] = 0;
  for (int i = 0; i < dk; i++) {
    float *Si = S + (size_t)i * dv;
    for (int e = 0; e < dv; e++) {
      Si[e] *= decay;
      kv[e] += Si[e] * k[i];
    }
  }
  for (int e = 0; e < dv; e++) kv[e] = (v[e] - kv[e]) * beta;
  for (int e = 0; e < dv; e++) o[e] = 0;
  for (int i = 0; i < dk; i++) {
    float *Si = S + (size_t)i * dv;
    for (int e = 0; e < dv; e++) {
      Si[e] += k[i] * kv[e];
      o[e] += Si[e] * q[i];
    }
  }
}

/* y[i] += a * x[i]: a multiply, then an add (wsum_f32's definition). */
static void axpy_f32_scalar(float *y, float a, const float *x, int n) {
  for (int i = 0; i < n; i++) y[i] += a * x[i];
}

static int argmax_f32_scalar(const float *x, int n, int *finite) {
  int best = 0, ok = 1;
  for (int i = 0; i < n; i++) {
    ok &= isfinite(x[i]) != 0;
    if (x[i] > x[best]) best = i;
  }
  *finite = ok;
  return best;
}

static void dots_f32_scalar(const float *q, const float *k, size_t stride, int n, int D, float scale, float *s) {
  for (int p = 0; p < n; p++) s[p] = dot_f32_scalar(q, k + (size_t)p * stride, D) * scale;
}

static void exp_f32_scalar(float *y, const float *x, int n) {
  for (int i = 0; i < n; i++) y[i] = expf(x[i]);
}

static void silu_f32_scalar(float *y, const float *x, int n) {
  for (int i = 0; i < n; i++) y[i] = x[i] / (1.0f + expf(-x[i]));
}

static void swiglu_f32_scalar(float *y, const float *g, const float *u, int n) {
  for (int i = 0; i < n; i++) y[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

/* gelu with the tanh approximation, as PyTorch's gelu(approximate="tanh")
 * and ggml's gelu compute it, times u */
static inline float geglu1(float g, float u) {
  const float k = 0.7978845608028654f; /* sqrt(2 / pi) */
  return 0.5f * g * (1.0f + tanhf(k * (g + 0.044715f * g * g * g))) * u;
}

static void geglu_f32_scalar(float *y, const float *g, const float *u, int n) {
  for (int i = 0; i < n; i++) y[i] = geglu1(g[i], u[i]);
}

static void conv_silu_f32_scalar(float *y, const float *const *x, const float *taps, size_t tap_stride, int L,
                                 int n) {
  for (int c = 0; c < n; c++) {
    float acc = 0;
    for (int k = 0; k < L; k++) acc += taps[(size_t)k * tap_stride + c] * x[k][c];
    y[c] = acc / (1.0f + expf(-acc));
  }
}

static void conv_f32_scalar(float *y, const float *const *x, const float *taps, size_t tap_stride, int L, int n) {
  for (int c = 0; c < n; c++) {
    float acc = taps[c] * x[0][c];
    for (int k = 1; k < L; k++) acc += taps[(size_t)k * tap_stride + c] * x[k][c];
    y[c] = acc;
  }
}

static void gemm_f32_scalar(float *c, int ldc, const float *a, int lda, const float *b, int ldb, int m, int n, int k,
                            float beta) {
  for (int i = 0; i < m; i++) {
    float *ci = c + (size_t)i * ldc;
    for (int j = 0; j < n; j++) ci[j] = beta == 0 ? 0 : beta * ci[j];
    for (int p = 0; p < k; p++) {
      const float aip = a[(size_t)i * lda + p], *bp = b + (size_t)p * ldb;
      for (int j = 0; j < n; j++) ci[j] += aip * bp[j];
    }
  }
}

/* ---- f16 KV caches ---- */

/* dot(q, k) of D f32 queries and D f16 keys in the one order every set
 * follows, that of dot_f32_avx2: element i goes to lane i % 16 of sixteen
 * fused multiply-add accumulators while whole 16s remain (then a last 8 to
 * lanes 0..7); lanes l and l + 8 are added, then the eight sums as
 * hsum256 adds them ((0+4)+(2+6)) + ((1+5)+(3+7)); the last D % 8
 * products are rounded and added one by one. fmaf is the fused operation
 * _mm256_fmadd_ps does, so the AVX2 set gets these bits. */
static float dot_f16kv_scalar(const float *q, const uint16_t *k, int D) {
  float acc[16] = {0};
  int i = 0;
  for (; i + 16 <= D; i += 16)
    for (int l = 0; l < 16; l++) acc[l] = fmaf(q[i + l], wisp_f16_to_f32(k[i + l]), acc[l]);
  for (; i + 8 <= D; i += 8)
    for (int l = 0; l < 8; l++) acc[l] = fmaf(q[i + l], wisp_f16_to_f32(k[i + l]), acc[l]);
  float v[8];
  for (int l = 0; l < 8; l++) v[l] = acc[l] + acc[l + 8];
  float s = ((v[0] + v[4]) + (v[2] + v[6])) + ((v[1] + v[5]) + (v[3] + v[7]));
  for (; i < D; i++) {
    float p = q[i] * wisp_f16_to_f32(k[i]); /* its own statement: never contracted into an fma */
    s += p;
  }
  return s;
}

static void dots_f16_scalar(const float *q, const uint16_t *k, size_t stride, int n, int D, float scale, float *s) {
  for (int p = 0; p < n; p++) s[p] = dot_f16kv_scalar(q, k + (size_t)p * stride, D) * scale;
}

static void wsum_f32_scalar(float *o, const float *w, float scale, int n, const float *v, size_t stride, int D) {
  memset(o, 0, (size_t)D * sizeof(float));
  for (int p = 0; p < n; p++) axpy_f32_scalar(o, w[p] * scale, v + (size_t)p * stride, D);
}

static void wsum_f16_scalar(float *o, const float *w, float scale, int n, const uint16_t *v, size_t stride, int D) {
  memset(o, 0, (size_t)D * sizeof(float));
  for (int p = 0; p < n; p++) {
    const float a = w[p] * scale;
    const uint16_t *x = v + (size_t)p * stride;
    for (int i = 0; i < D; i++) {
      float t = a * wisp_f16_to_f32(x[i]); /* its own statement: never contracted into an fma */
      o[i] += t;
    }
  }
}

static void f32_to_f16_scalar(uint16_t *dst, const float *x, int n) {
  for (int i = 0; i < n; i++) dst[i] = wisp_f32_to_f16(x[i]);
}

static const wisp_cpu_kernels k_scalar = {
    .name = "scalar", .dot_f32 = dot_f32_scalar, .dot4_f32 = dot4_f32_scalar, .dot2x4_f32 = dot2x4_f32_scalar,
    .dot_q4_row = dot_q4_row_scalar, .dot_q4k_row = dot_q4k_row_scalar, .dot_f16_row = dot_f16_row_scalar,
    .dot_q8_0_row = dot_q8_0_row_scalar, .dot_blocks_row = wisp_cpu_dot_blocks_scalar, .row_f32 = wisp_matrix_row_f32, .deltanet_step = deltanet_step_scalar,
    .argmax_f32 = argmax_f32_scalar, .dots_f32 = dots_f32_scalar,
    .exp_f32 = exp_f32_scalar, .silu_f32 = silu_f32_scalar, .swiglu_f32 = swiglu_f32_scalar,
    .geglu_f32 = geglu_f32_scalar,
    .conv_silu_f32 = conv_silu_f32_scalar, .conv_f32 = conv_f32_scalar, .gemm_f32 = gemm_f32_scalar, .dots_f16 = dots_f16_scalar,
    .f32_to_f16 = f32_to_f16_scalar, .wsum_f32 = wsum_f32_scalar, .wsum_f16 = wsum_f16_scalar, .avx2 = 0};

/* ---- AVX2 + FMA ---- */
#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>

__attribute__((target("avx2,fma"), always_inline)) static inline float hsum256(__m256 v) {
  __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
  __m128 s = _mm_add_ps(lo, hi);
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

__attribute__((target("avx2,fma"))) static float dot_f32_avx2(const float *a, const float *b, int n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
  }
  for (; i + 8 <= n; i += 8) acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
  float s = hsum256(_mm256_add_ps(acc0, acc1));
  for (; i < n; i++) s += a[i] * b[i];
  return s;
}

/* One row against four token vectors at once: each row load feeds four FMAs. */
__attribute__((target("avx2,fma"))) static void dot4_f32_avx2(const float *w, const float *const x[4], int n,
                                                             float out[4]) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 r = _mm256_loadu_ps(w + i);
    a0 = _mm256_fmadd_ps(r, _mm256_loadu_ps(x[0] + i), a0);
    a1 = _mm256_fmadd_ps(r, _mm256_loadu_ps(x[1] + i), a1);
    a2 = _mm256_fmadd_ps(r, _mm256_loadu_ps(x[2] + i), a2);
    a3 = _mm256_fmadd_ps(r, _mm256_loadu_ps(x[3] + i), a3);
  }
  out[0] = hsum256(a0);
  out[1] = hsum256(a1);
  out[2] = hsum256(a2);
  out[3] = hsum256(a3);
  for (; i < n; i++)
    for (int k = 0; k < 4; k++) out[k] += w[i] * x[k][i];
}

/* Two rows against four tokens: each row load feeds four FMAs and each
 * token load two; per (row, token) one accumulator in dot4_f32_avx2's order. */
__attribute__((target("avx2,fma"))) static void dot2x4_f32_avx2(const float *const w[2], const float *const x[4],
                                                               int n, float out[2][4]) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
  const float *w0 = w[0], *w1 = w[1], *x0 = x[0], *x1 = x[1], *x2 = x[2], *x3 = x[3];
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 r0 = _mm256_loadu_ps(w0 + i), r1 = _mm256_loadu_ps(w1 + i), v;
    v = _mm256_loadu_ps(x0 + i);
    a0 = _mm256_fmadd_ps(r0, v, a0);
    b0 = _mm256_fmadd_ps(r1, v, b0);
    v = _mm256_loadu_ps(x1 + i);
    a1 = _mm256_fmadd_ps(r0, v, a1);
    b1 = _mm256_fmadd_ps(r1, v, b1);
    v = _mm256_loadu_ps(x2 + i);
    a2 = _mm256_fmadd_ps(r0, v, a2);
    b2 = _mm256_fmadd_ps(r1, v, b2);
    v = _mm256_loadu_ps(x3 + i);
    a3 = _mm256_fmadd_ps(r0, v, a3);
    b3 = _mm256_fmadd_ps(r1, v, b3);
  }
  out[0][0] = hsum256(a0), out[0][1] = hsum256(a1), out[0][2] = hsum256(a2), out[0][3] = hsum256(a3);
  out[1][0] = hsum256(b0), out[1][1] = hsum256(b1), out[1][2] = hsum256(b2), out[1][3] = hsum256(b3);
  for (; i < n; i++)
    for (int r = 0; r < 2; r++)
      for (int k = 0; k < 4; k++) out[r][k] += w[r][i] * x[k][i];
}

/* One block of 32 nibbles -> four vectors of 8 floats in element order,
 * minus the zero point. Byte j holds element 2j (low) and 2j+1 (high), so
 * interleaving the low and high nibbles restores the order. */
__attribute__((target("avx2,fma"), always_inline)) static inline void unpack_block(const uint8_t *q, __m256 zero, __m256 out[4]) {
  __m128i bytes = _mm_loadu_si128((const __m128i *)q);
  __m128i mask = _mm_set1_epi8(15);
  __m128i lo = _mm_and_si128(bytes, mask);
  __m128i hi = _mm_and_si128(_mm_srli_epi16(bytes, 4), mask);
  __m128i e0 = _mm_unpacklo_epi8(lo, hi); /* elements 0..15 */
  __m128i e1 = _mm_unpackhi_epi8(lo, hi); /* elements 16..31 */
  out[0] = _mm256_sub_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(e0)), zero);
  out[1] = _mm256_sub_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(e0, 8))), zero);
  out[2] = _mm256_sub_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(e1)), zero);
  out[3] = _mm256_sub_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(e1, 8))), zero);
}

__attribute__((target("avx2,fma"))) static float dot_q4_row_avx2(const wisp_matrix *m, int row, const float *x) {
  const int nb = m->cols / WISP_Q4_BLOCK;
  const uint8_t *q = m->q + (size_t)row * (size_t)(m->cols / 2);
  const float *s = m->scales + (size_t)row * nb;
  __m256 total = _mm256_setzero_ps();
  for (int b = 0; b < nb; b++) {
    __m256 w[4];
    unpack_block(q + b * 16, _mm256_set1_ps((float)zero_point(m, (size_t)row * nb + b)), w);
    const float *xb = x + b * 32;
    __m256 acc = _mm256_mul_ps(w[0], _mm256_loadu_ps(xb));
    acc = _mm256_fmadd_ps(w[1], _mm256_loadu_ps(xb + 8), acc);
    acc = _mm256_fmadd_ps(w[2], _mm256_loadu_ps(xb + 16), acc);
    acc = _mm256_fmadd_ps(w[3], _mm256_loadu_ps(xb + 24), acc);
    total = _mm256_fmadd_ps(_mm256_set1_ps(s[b]), acc, total);
  }
  return hsum256(total);
}

/* 32 bytes of Q4_K quants -> the 32 low nibbles and the 32 high nibbles as
 * 4 + 4 vectors of 8 floats in element order. */
__attribute__((target("avx2,fma"), always_inline)) static inline void unpack_q4k_64(const uint8_t *qs, __m256 lo[4],
                                                                                  __m256 hi[4]) {
  __m256i bytes = _mm256_loadu_si256((const __m256i *)qs);
  __m256i mask = _mm256_set1_epi8(15);
  __m256i l = _mm256_and_si256(bytes, mask);
  __m256i h = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), mask);
  __m128i l0 = _mm256_castsi256_si128(l), l1 = _mm256_extracti128_si256(l, 1);
  __m128i h0 = _mm256_castsi256_si128(h), h1 = _mm256_extracti128_si256(h, 1);
  lo[0] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(l0));
  lo[1] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(l0, 8)));
  lo[2] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(l1));
  lo[3] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(l1, 8)));
  hi[0] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(h0));
  hi[1] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(h0, 8)));
  hi[2] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(h1));
  hi[3] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(h1, 8)));
}

__attribute__((target("avx2,fma"))) static float dot_q4k_row_avx2(const wisp_matrix *m, int row, const float *x) {
  const int nsb = m->cols / WISP_Q4K_BLOCK;
  const uint8_t *blk = m->q + (size_t)row * nsb * WISP_Q4K_BYTES;
  __m256 total = _mm256_setzero_ps();
  for (int b = 0; b < nsb; b++, blk += WISP_Q4K_BYTES, x += WISP_Q4K_BLOCK) {
    float d = wisp_f16_to_f32((uint16_t)(blk[0] | blk[1] << 8));
    float dmin = wisp_f16_to_f32((uint16_t)(blk[2] | blk[3] << 8));
    for (int c = 0; c < 4; c++) {
      int sc0, m0, sc1, m1;
      wisp_q4k_scale_min(blk + 4, 2 * c, &sc0, &m0);
      wisp_q4k_scale_min(blk + 4, 2 * c + 1, &sc1, &m1);
      __m256 lo[4], hi[4];
      unpack_q4k_64(blk + 16 + 32 * c, lo, hi);
      const float *x0 = x + 64 * c, *x1 = x0 + 32;
      __m256 qx0 = _mm256_setzero_ps(), qx1 = _mm256_setzero_ps(), sx0 = _mm256_setzero_ps(), sx1 = _mm256_setzero_ps();
      for (int k = 0; k < 4; k++) {
        __m256 a = _mm256_loadu_ps(x0 + 8 * k), e = _mm256_loadu_ps(x1 + 8 * k);
        qx0 = _mm256_fmadd_ps(lo[k], a, qx0);
        qx1 = _mm256_fmadd_ps(hi[k], e, qx1);
        sx0 = _mm256_add_ps(sx0, a);
        sx1 = _mm256_add_ps(sx1, e);
      }
      total = _mm256_fmadd_ps(_mm256_set1_ps(d * (float)sc0), qx0, total);
      total = _mm256_fmadd_ps(_mm256_set1_ps(-dmin * (float)m0), sx0, total);
      total = _mm256_fmadd_ps(_mm256_set1_ps(d * (float)sc1), qx1, total);
      total = _mm256_fmadd_ps(_mm256_set1_ps(-dmin * (float)m1), sx1, total);
    }
  }
  return hsum256(total);
}

/* F16 via F16C: eight halves at a time; cols need not be a multiple of 8. */
__attribute__((target("avx2,fma,f16c"))) static float dot_f16_row_avx2(const wisp_matrix *m, int row, const float *x) {
  const int n = m->cols;
  const uint8_t *h = m->q + (size_t)row * (size_t)n * 2;
  __m256 acc = _mm256_setzero_ps();
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 w = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + 2 * i)));
    acc = _mm256_fmadd_ps(w, _mm256_loadu_ps(x + i), acc);
  }
  float s = hsum256(acc);
  for (; i < n; i++) s += wisp_f16_to_f32((uint16_t)(h[2 * i] | h[2 * i + 1] << 8)) * x[i];
  return s;
}

/* Q8_0: the 32 int8 of a block widened to f32 in four groups of eight. */
__attribute__((target("avx2,fma"))) static float dot_q8_0_row_avx2(const wisp_matrix *m, int row, const float *x) {
  const int nb = m->cols / WISP_Q8_0_BLOCK;
  const uint8_t *blk = m->q + (size_t)row * nb * WISP_Q8_0_BYTES;
  __m256 total = _mm256_setzero_ps();
  for (int b = 0; b < nb; b++, blk += WISP_Q8_0_BYTES, x += WISP_Q8_0_BLOCK) {
    float d = wisp_f16_to_f32((uint16_t)(blk[0] | blk[1] << 8));
    __m256 acc = _mm256_setzero_ps();
    for (int k = 0; k < 4; k++) {
      __m128i q8 = _mm_loadl_epi64((const __m128i *)(blk + 2 + 8 * k));
      __m256 w = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q8));
      acc = _mm256_fmadd_ps(w, _mm256_loadu_ps(x + 8 * k), acc);
    }
    total = _mm256_fmadd_ps(_mm256_set1_ps(d), acc, total);
  }
  return hsum256(total);
}

/* An F16 row widened eight halves at a time (F16C: exact, as every f16 is
 * an f32): the exact path's prefill reads F16 rows through here, and so
 * does the making of their Q8_0 copies for f16_i8. */
__attribute__((target("avx2,fma,f16c"))) static void row_f16_avx2(const wisp_matrix *m, int row, float *out) {
  const uint8_t *h = m->q + (size_t)row * m->cols * 2;
  int i = 0;
  for (; i + 8 <= m->cols; i += 8) _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + 2 * i))));
  for (; i < m->cols; i++) out[i] = wisp_f16_to_f32((uint16_t)(h[2 * i] | h[2 * i + 1] << 8));
}

__attribute__((target("avx2,fma"))) static void row_f32_avx2(const wisp_matrix *m, int row, float *out) {
  if (wisp_cpu_is_block_type(m->type)) {
    wisp_cpu_row_blocks_avx2(m, row, out);
    return;
  }
  if (m->type == WISP_W_F16) {
    row_f16_avx2(m, row, out);
    return;
  }
  if (m->type == WISP_W_Q8_0) {
    wisp_matrix_row_f32(m, row, out);
    return;
  }
  if (m->type == WISP_W_F32) {
    memcpy(out, m->f32 + (size_t)row * m->cols, (size_t)m->cols * sizeof(float));
    return;
  }
  if (m->type == WISP_W_Q4K) {
    const int nsb = m->cols / WISP_Q4K_BLOCK;
    const uint8_t *blk = m->q + (size_t)row * nsb * WISP_Q4K_BYTES;
    for (int b = 0; b < nsb; b++, blk += WISP_Q4K_BYTES, out += WISP_Q4K_BLOCK) {
      float d = wisp_f16_to_f32((uint16_t)(blk[0] | blk[1] << 8));
      float dmin = wisp_f16_to_f32((uint16_t)(blk[2] | blk[3] << 8));
      for (int c = 0; c < 4; c++) {
        int sc0, m0, sc1, m1;
        wisp_q4k_scale_min(blk + 4, 2 * c, &sc0, &m0);
        wisp_q4k_scale_min(blk + 4, 2 * c + 1, &sc1, &m1);
        __m256 lo[4], hi[4];
        unpack_q4k_64(blk + 16 + 32 * c, lo, hi);
        __m256 d0 = _mm256_set1_ps(d * (float)sc0), n0 = _mm256_set1_ps(dmin * (float)m0);
        __m256 d1 = _mm256_set1_ps(d * (float)sc1), n1 = _mm256_set1_ps(dmin * (float)m1);
        for (int k = 0; k < 4; k++) {
          /* d*q - n, rounded as the scalar path: (d*q) then subtract */
          _mm256_storeu_ps(out + 64 * c + 8 * k, _mm256_sub_ps(_mm256_mul_ps(d0, lo[k]), n0));
          _mm256_storeu_ps(out + 64 * c + 32 + 8 * k, _mm256_sub_ps(_mm256_mul_ps(d1, hi[k]), n1));
        }
      }
    }
    return;
  }
  const int nb = m->cols / WISP_Q4_BLOCK;
  const uint8_t *q = m->q + (size_t)row * (size_t)(m->cols / 2);
  const float *s = m->scales + (size_t)row * nb;
  for (int b = 0; b < nb; b++) {
    __m256 w[4];
    unpack_block(q + b * 16, _mm256_set1_ps((float)zero_point(m, (size_t)row * nb + b)), w);
    __m256 d = _mm256_set1_ps(s[b]);
    for (int k = 0; k < 4; k++) _mm256_storeu_ps(out + b * 32 + 8 * k, _mm256_mul_ps(w[k], d));
  }
}

/* The same update, eight columns of S at a time; dv not a multiple of 8
 * falls back to the scalar loop. */
__attribute__((target("avx2,fma"))) static void deltanet_step_avx2(float *S, int dk, int dv, const float *k,
                                                                  const float *q, const float *v, float decay,
                                                                  float beta, float *kv, float *o) {
  if (dv % 8) {
    deltanet_step_scalar(S, dk, dv, k, q, v, decay, beta, kv, o);
    return;
  }
  const __m256 dc = _mm256_set1_ps(decay), bt = _mm256_set1_ps(beta);
  for (int e = 0; e < dv; e += 8) _mm256_storeu_ps(kv + e, _mm256_setzero_ps());
  for (int i = 0; i < dk; i++) {
    float *Si = S + (size_t)i * dv;
    const __m256 ki = _mm256_set1_ps(k[i]);
    for (int e = 0; e < dv; e += 8) {
      __m256 s = _mm256_mul_ps(_mm256_loadu_ps(Si + e), dc);
      _mm256_storeu_ps(Si + e, s);
      _mm256_storeu_ps(kv + e, _mm256_fmadd_ps(s, ki, _mm256_loadu_ps(kv + e)));
    }
  }
  for (int e = 0; e < dv; e += 8) {
    __m256 d = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(v + e), _mm256_loadu_ps(kv + e)), bt);
    _mm256_storeu_ps(kv + e, d);
    _mm256_storeu_ps(o + e, _mm256_setzero_ps());
  }
  for (int i = 0; i < dk; i++) {
    float *Si = S + (size_t)i * dv;
    const __m256 ki = _mm256_set1_ps(k[i]), qi = _mm256_set1_ps(q[i]);
    for (int e = 0; e < dv; e += 8) {
      __m256 s = _mm256_fmadd_ps(ki, _mm256_loadu_ps(kv + e), _mm256_loadu_ps(Si + e));
      _mm256_storeu_ps(Si + e, s);
      _mm256_storeu_ps(o + e, _mm256_fmadd_ps(s, qi, _mm256_loadu_ps(o + e)));
    }
  }
}

/* Two passes over the (cache-resident) run: the maximum and the finite
 * check eight lanes at a time (x - x is 0 only for a finite x), then the
 * first index holding that maximum: the scalar loop's answer. */
__attribute__((target("avx2,fma"))) static int argmax_f32_avx2(const float *x, int n, int *finite) {
  __m256 mx = _mm256_set1_ps(-INFINITY), bad = _mm256_setzero_ps();
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_loadu_ps(x + i);
    mx = _mm256_max_ps(mx, v);
    bad = _mm256_or_ps(bad, _mm256_cmp_ps(_mm256_sub_ps(v, v), _mm256_setzero_ps(), _CMP_NEQ_UQ));
  }
  float lanes[8], m = -INFINITY;
  _mm256_storeu_ps(lanes, mx);
  for (int k = 0; k < 8; k++) m = lanes[k] > m ? lanes[k] : m;
  int ok = _mm256_movemask_ps(bad) == 0;
  for (int k = i; k < n; k++) {
    ok &= isfinite(x[k]) != 0;
    if (x[k] > m) m = x[k];
  }
  *finite = ok;
  if (!ok) return 0;
  const __m256 vm = _mm256_set1_ps(m);
  for (i = 0; i + 8 <= n; i += 8) {
    int hit = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), vm, _CMP_EQ_OQ));
    if (hit) return i + __builtin_ctz((unsigned)hit);
  }
  for (; i < n; i++)
    if (x[i] == m) return i;
  return 0;
}

/* The horizontal sums of eight vectors as one vector (lane j: v[j]'s sum),
 * each in hsum256's order (lo + hi, lanes two apart, lanes one apart), the
 * eight reductions done side by side in three steps of shuffles. */
__attribute__((target("avx2,fma"), always_inline)) static inline __m256 hsum256_x8(const __m256 v[8]) {
  __m256 u[4], w[2];
  for (int j = 0; j < 4; j++) /* [lo + hi of v2j | of v2j+1] */
    u[j] = _mm256_add_ps(_mm256_permute2f128_ps(v[2 * j], v[2 * j + 1], 0x20),
                         _mm256_permute2f128_ps(v[2 * j], v[2 * j + 1], 0x31));
  for (int j = 0; j < 2; j++) /* lanes 0+2, 1+3 */
    w[j] = _mm256_add_ps(_mm256_shuffle_ps(u[2 * j], u[2 * j + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm256_shuffle_ps(u[2 * j], u[2 * j + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  __m256 r = _mm256_add_ps(_mm256_shuffle_ps(w[0], w[1], _MM_SHUFFLE(2, 0, 2, 0)),
                           _mm256_shuffle_ps(w[0], w[1], _MM_SHUFFLE(3, 1, 3, 1))); /* positions 0 2 4 6 | 1 3 5 7 */
  return _mm256_permutevar8x32_ps(r, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* Eight positions at a time, each summed as dot_f32_avx2 sums (two
 * accumulators, added, then reduced as hsum256 does: hsum256_x8). */
__attribute__((target("avx2,fma"))) static void dots_f32_avx2(const float *q, const float *k, size_t stride, int n,
                                                            int D, float scale, float *s) {
  int p = 0;
  if (D % 16 == 0)
    for (; p + 8 <= n; p += 8) {
      __m256 v[8];
      /* The rows are a cache's positions, stride apart: far enough apart
       * that the hardware prefetcher does not follow, so fetch the rows of
       * two groups ahead while this group is summed (a decode reads every
       * cached key once, from memory). */
      if (p + 24 <= n)
        for (int j = 16; j < 24; j++)
          for (int i = 0; i < D; i += 16) _mm_prefetch((const char *)(k + (size_t)(p + j) * stride + i), _MM_HINT_T0);
      for (int j = 0; j < 8; j++) {
        const float *kr = k + (size_t)(p + j) * stride;
        __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
        for (int i = 0; i < D; i += 16) {
          acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), _mm256_loadu_ps(kr + i), acc0);
          acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i + 8), _mm256_loadu_ps(kr + i + 8), acc1);
        }
        v[j] = _mm256_add_ps(acc0, acc1);
      }
      _mm256_storeu_ps(s + p, _mm256_mul_ps(hsum256_x8(v), _mm256_set1_ps(scale)));
    }
  for (; p < n; p++) s[p] = dot_f32_avx2(q, k + (size_t)p * stride, D) * scale;
}

/* Eight expf (tanhf) at once: glibc's AVX2 vector functions (libmvec)
 * where the build links it, else libm's lane by lane. */
#if defined(WISP_HAVE_LIBMVEC)
/* (declared with the target so that the call passes x in a ymm register, as
 * the vector ABI wants, under every compiler) */
__attribute__((target("avx2,fma"))) __m256 _ZGVdN8v_expf(__m256 x);
__attribute__((target("avx2,fma"))) __m256 _ZGVdN8v_tanhf(__m256 x);
__attribute__((target("avx2,fma"), always_inline)) static inline __m256 exp8(__m256 x) { return _ZGVdN8v_expf(x); }
__attribute__((target("avx2,fma"), always_inline)) static inline __m256 tanh8(__m256 x) { return _ZGVdN8v_tanhf(x); }
#else
__attribute__((target("avx2,fma"), always_inline)) static inline __m256 by_lanes8(__m256 x, float (*f)(float)) {
  float v[8];
  _mm256_storeu_ps(v, x);
  for (int i = 0; i < 8; i++) v[i] = f(v[i]);
  return _mm256_loadu_ps(v);
}
__attribute__((target("avx2,fma"), always_inline)) static inline __m256 exp8(__m256 x) { return by_lanes8(x, expf); }
__attribute__((target("avx2,fma"), always_inline)) static inline __m256 tanh8(__m256 x) { return by_lanes8(x, tanhf); }
#endif

/* x / (1 + exp(-x)), the division exact as in the scalar loop */
__attribute__((target("avx2,fma"), always_inline)) static inline __m256 silu8(__m256 x) {
  const __m256 one = _mm256_set1_ps(1.0f);
  return _mm256_div_ps(x, _mm256_add_ps(one, exp8(_mm256_sub_ps(_mm256_setzero_ps(), x))));
}

__attribute__((target("avx2,fma"))) static void exp_f32_avx2(float *y, const float *x, int n) {
  int i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, exp8(_mm256_loadu_ps(x + i)));
  exp_f32_scalar(y + i, x + i, n - i);
}

__attribute__((target("avx2,fma"))) static void silu_f32_avx2(float *y, const float *x, int n) {
  int i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, silu8(_mm256_loadu_ps(x + i)));
  silu_f32_scalar(y + i, x + i, n - i);
}

__attribute__((target("avx2,fma"))) static void swiglu_f32_avx2(float *y, const float *g, const float *u, int n) {
  int i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_mul_ps(silu8(_mm256_loadu_ps(g + i)), _mm256_loadu_ps(u + i)));
  swiglu_f32_scalar(y + i, g + i, u + i, n - i);
}

/* the scalar loop's operations in its order (no FMA contraction), so that
 * only tanh differs */
__attribute__((target("avx2,fma"))) static void geglu_f32_avx2(float *y, const float *g, const float *u, int n) {
  const __m256 k = _mm256_set1_ps(0.7978845608028654f), c = _mm256_set1_ps(0.044715f);
  const __m256 half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f);
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(g + i);
    const __m256 cube = _mm256_mul_ps(_mm256_mul_ps(_mm256_mul_ps(c, x), x), x);
    const __m256 t = tanh8(_mm256_mul_ps(k, _mm256_add_ps(x, cube)));
    const __m256 gelu = _mm256_mul_ps(_mm256_mul_ps(half, x), _mm256_add_ps(one, t));
    _mm256_storeu_ps(y + i, _mm256_mul_ps(gelu, _mm256_loadu_ps(u + i)));
  }
  geglu_f32_scalar(y + i, g + i, u + i, n - i);
}

/* Eight channels at a time, each tap a multiply then an add in the order of
 * k (the scalar loop's sum, so only the exponential differs). */
__attribute__((target("avx2,fma"))) static void conv_silu_f32_avx2(float *y, const float *const *x, const float *taps,
                                                                  size_t tap_stride, int L, int n) {
  int c = 0;
  for (; c + 8 <= n; c += 8) {
    __m256 acc = _mm256_setzero_ps();
    for (int k = 0; k < L; k++)
      acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_loadu_ps(taps + (size_t)k * tap_stride + c),
                                             _mm256_loadu_ps(x[k] + c)));
    _mm256_storeu_ps(y + c, silu8(acc));
  }
  for (; c < n; c++) { /* the last channels one at a time */
    float acc = 0;
    for (int k = 0; k < L; k++) acc += taps[(size_t)k * tap_stride + c] * x[k][c];
    y[c] = acc / (1.0f + expf(-acc));
  }
}

/* conv_f32_scalar eight channels at a time (a multiply, then an add: its
 * bits). */
__attribute__((target("avx2,fma"))) static void conv_f32_avx2(float *y, const float *const *x, const float *taps,
                                                             size_t tap_stride, int L, int n) {
  int c = 0;
  for (; c + 8 <= n; c += 8) {
    __m256 acc = _mm256_mul_ps(_mm256_loadu_ps(taps + c), _mm256_loadu_ps(x[0] + c));
    for (int k = 1; k < L; k++)
      acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_loadu_ps(taps + (size_t)k * tap_stride + c),
                                             _mm256_loadu_ps(x[k] + c)));
    _mm256_storeu_ps(y + c, acc);
  }
  for (; c < n; c++) { /* the last channels one at a time */
    float acc = taps[c] * x[0][c];
    for (int k = 1; k < L; k++) acc += taps[(size_t)k * tap_stride + c] * x[k][c];
    y[c] = acc;
  }
}

/* The products: register blocks of four rows by sixteen columns (eight
 * accumulators; per step of p, two loads of b and four broadcasts of a feed
 * eight FMAs). Rows past the last four go one at a time (32 columns at
 * once, then 8, then one by one), as do the columns past the last sixteen
 * of the four-row blocks. Every element is beta * c, then one FMA a p. */
__attribute__((target("avx2,fma"), always_inline)) static inline __m256 gemm_init8(const float *c, float beta) {
  if (beta == 0) return _mm256_setzero_ps();
  const __m256 v = _mm256_loadu_ps(c);
  return beta == 1 ? v : _mm256_mul_ps(v, _mm256_set1_ps(beta));
}

__attribute__((target("avx2,fma"))) static void gemm_row_tail(float *ci, const float *ai, const float *b, int ldb,
                                                             int j0, int n, int k, float beta) {
  int j = j0;
  for (; j + 32 <= n; j += 32) { /* four independent sums: one FMA's latency does not hold up the next */
    __m256 r0 = gemm_init8(ci + j, beta), r1 = gemm_init8(ci + j + 8, beta);
    __m256 r2 = gemm_init8(ci + j + 16, beta), r3 = gemm_init8(ci + j + 24, beta);
    const float *bp = b + j;
    for (int p = 0; p < k; p++, bp += ldb) {
      const __m256 s = _mm256_set1_ps(ai[p]);
      r0 = _mm256_fmadd_ps(s, _mm256_loadu_ps(bp), r0), r1 = _mm256_fmadd_ps(s, _mm256_loadu_ps(bp + 8), r1);
      r2 = _mm256_fmadd_ps(s, _mm256_loadu_ps(bp + 16), r2), r3 = _mm256_fmadd_ps(s, _mm256_loadu_ps(bp + 24), r3);
    }
    _mm256_storeu_ps(ci + j, r0), _mm256_storeu_ps(ci + j + 8, r1);
    _mm256_storeu_ps(ci + j + 16, r2), _mm256_storeu_ps(ci + j + 24, r3);
  }
  for (; j + 8 <= n; j += 8) {
    __m256 acc = gemm_init8(ci + j, beta);
    for (int p = 0; p < k; p++)
      acc = _mm256_fmadd_ps(_mm256_set1_ps(ai[p]), _mm256_loadu_ps(b + (size_t)p * ldb + j), acc);
    _mm256_storeu_ps(ci + j, acc);
  }
  for (; j < n; j++) { /* fused as the vectors, so a column's bits do not depend on where it sits */
    float acc = beta == 0 ? 0 : beta == 1 ? ci[j] : beta * ci[j];
    for (int p = 0; p < k; p++) acc = fmaf(ai[p], b[(size_t)p * ldb + j], acc);
    ci[j] = acc;
  }
}

/* c[0..4)[0..16) = beta c + a[0..4)[0..k) b[0..k)[0..16), all in registers. */
__attribute__((target("avx2,fma"), always_inline)) static inline void gemm_4x16(float *c, int ldc, const float *a,
                                                                               int lda, const float *b, int ldb,
                                                                               int k, float beta) {
  const float *a0 = a, *a1 = a0 + lda, *a2 = a1 + lda, *a3 = a2 + lda;
  float *c0 = c, *c1 = c0 + ldc, *c2 = c1 + ldc, *c3 = c2 + ldc;
  __m256 r00 = gemm_init8(c0, beta), r01 = gemm_init8(c0 + 8, beta);
  __m256 r10 = gemm_init8(c1, beta), r11 = gemm_init8(c1 + 8, beta);
  __m256 r20 = gemm_init8(c2, beta), r21 = gemm_init8(c2 + 8, beta);
  __m256 r30 = gemm_init8(c3, beta), r31 = gemm_init8(c3 + 8, beta);
  for (int p = 0; p < k; p++, b += ldb) {
    const __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
    __m256 s = _mm256_set1_ps(a0[p]);
    r00 = _mm256_fmadd_ps(s, b0, r00), r01 = _mm256_fmadd_ps(s, b1, r01);
    s = _mm256_set1_ps(a1[p]);
    r10 = _mm256_fmadd_ps(s, b0, r10), r11 = _mm256_fmadd_ps(s, b1, r11);
    s = _mm256_set1_ps(a2[p]);
    r20 = _mm256_fmadd_ps(s, b0, r20), r21 = _mm256_fmadd_ps(s, b1, r21);
    s = _mm256_set1_ps(a3[p]);
    r30 = _mm256_fmadd_ps(s, b0, r30), r31 = _mm256_fmadd_ps(s, b1, r31);
  }
  _mm256_storeu_ps(c0, r00), _mm256_storeu_ps(c0 + 8, r01);
  _mm256_storeu_ps(c1, r10), _mm256_storeu_ps(c1 + 8, r11);
  _mm256_storeu_ps(c2, r20), _mm256_storeu_ps(c2 + 8, r21);
  _mm256_storeu_ps(c3, r30), _mm256_storeu_ps(c3 + 8, r31);
}

/* A panel of sixteen columns of b at a time, run down all the row blocks:
 * the panel (k x 64 bytes) stays in L1 while the rows of a stream by (a
 * 128 x 128 b does not fit L1; the rows of a are read once a panel). */
__attribute__((target("avx2,fma"))) static void gemm_f32_avx2(float *c, int ldc, const float *a, int lda,
                                                             const float *b, int ldb, int m, int n, int k,
                                                             float beta) {
  const int n16 = n / 16 * 16, m4 = m / 4 * 4;
  for (int j = 0; j < n16; j += 16)
    for (int i = 0; i < m4; i += 4)
      gemm_4x16(c + (size_t)i * ldc + j, ldc, a + (size_t)i * lda, lda, b + j, ldb, k, beta);
  if (n16 < n)
    for (int i = 0; i < m4; i++) gemm_row_tail(c + (size_t)i * ldc, a + (size_t)i * lda, b, ldb, n16, n, k, beta);
  for (int i = m4; i < m; i++) gemm_row_tail(c + (size_t)i * ldc, a + (size_t)i * lda, b, ldb, 0, n, k, beta);
}

/* dot_f16kv_scalar's order with eight lanes a vector: accumulators for
 * lanes 0..7 and 8..15, the halves converted by F16C (exactly). */
__attribute__((target("avx2,fma,f16c"), always_inline)) static inline __m256 dot_f16kv_lanes(const float *q,
                                                                                            const uint16_t *k, int D) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int i = 0;
  for (; i + 16 <= D; i += 16) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(k + i))), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i + 8), _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(k + i + 8))),
                           acc1);
  }
  if (i + 8 <= D)
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(k + i))), acc0);
  return _mm256_add_ps(acc0, acc1);
}

__attribute__((target("avx2,fma,f16c"))) static float dot_f16kv_avx2(const float *q, const uint16_t *k, int D) {
  float s = hsum256(dot_f16kv_lanes(q, k, D));
  for (int i = D - D % 8; i < D; i++) {
    float p = q[i] * wisp_f16_to_f32(k[i]); /* its own statement: never contracted into an fma */
    s += p;
  }
  return s;
}

/* Eight positions at a time (heads of whole 8s), reduced side by side. */
__attribute__((target("avx2,fma,f16c"))) static void dots_f16_avx2(const float *q, const uint16_t *k, size_t stride,
                                                                 int n, int D, float scale, float *s) {
  int p = 0;
  if (D % 8 == 0)
    for (; p + 8 <= n; p += 8) {
      __m256 v[8];
      if (p + 24 <= n) /* the rows of two groups ahead, as dots_f32_avx2 fetches them */
        for (int j = 16; j < 24; j++)
          for (int i = 0; i < D; i += 32) _mm_prefetch((const char *)(k + (size_t)(p + j) * stride + i), _MM_HINT_T0);
      for (int j = 0; j < 8; j++) v[j] = dot_f16kv_lanes(q, k + (size_t)(p + j) * stride, D);
      _mm256_storeu_ps(s + p, _mm256_mul_ps(hsum256_x8(v), _mm256_set1_ps(scale)));
    }
  for (; p < n; p++) s[p] = dot_f16kv_avx2(q, k + (size_t)p * stride, D) * scale;
}

/* wsum: columns [c, c + 8 * B) of o over all n rows, B (1, 4 or 8)
 * accumulators of eight columns kept in registers (B independent add
 * chains). Each lane's sum is the scalar loop's: zero, then
 * + (w[p] * scale) * x in position order, the product rounded. */
__attribute__((target("avx2,fma"), always_inline)) static inline void wsum_block_f32(float *o, const float *w,
                                                                                   float scale, int n, const float *v,
                                                                                   size_t stride, int c, int B) {
  __m256 acc[8];
  for (int b = 0; b < B; b++) acc[b] = _mm256_setzero_ps();
  for (int p = 0; p < n; p++) {
    const __m256 a = _mm256_set1_ps(w[p] * scale);
    const float *x = v + (size_t)p * stride + c;
    if (p + 16 < n) /* the rows are a cache stride apart: fetch the ones 16 positions on */
      for (int i = 0; i < 8 * B; i += 16) _mm_prefetch((const char *)(x + 16 * stride + i), _MM_HINT_T0);
    for (int b = 0; b < B; b++) acc[b] = _mm256_add_ps(acc[b], _mm256_mul_ps(a, _mm256_loadu_ps(x + 8 * b)));
  }
  for (int b = 0; b < B; b++) _mm256_storeu_ps(o + c + 8 * b, acc[b]);
}

/* The same over binary16 rows, converted by F16C (exactly). */
__attribute__((target("avx2,fma,f16c"), always_inline)) static inline void wsum_block_f16(float *o, const float *w,
                                                                                        float scale, int n,
                                                                                        const uint16_t *v,
                                                                                        size_t stride, int c, int B) {
  __m256 acc[8];
  for (int b = 0; b < B; b++) acc[b] = _mm256_setzero_ps();
  for (int p = 0; p < n; p++) {
    const __m256 a = _mm256_set1_ps(w[p] * scale);
    const uint16_t *x = v + (size_t)p * stride + c;
    if (p + 16 < n)
      for (int i = 0; i < 8 * B; i += 32) _mm_prefetch((const char *)(x + 16 * stride + i), _MM_HINT_T0);
    for (int b = 0; b < B; b++)
      acc[b] = _mm256_add_ps(acc[b], _mm256_mul_ps(a, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + 8 * b)))));
  }
  for (int b = 0; b < B; b++) _mm256_storeu_ps(o + c + 8 * b, acc[b]);
}

/* Eight blocks of eight columns a pass over the rows (a 64-wide head in
 * one pass: each row's lines read once), then four, then single blocks,
 * then the last D % 8 columns one by one. Eight against four blocks made
 * the seed shape's value sum (D 64, 2048 positions) about a third faster
 * on the 2-core EPYC dev machine (a best-of-25 micro-benchmark). */
__attribute__((target("avx2,fma"))) static void wsum_f32_avx2(float *o, const float *w, float scale, int n,
                                                            const float *v, size_t stride, int D) {
  int c = 0;
  for (; c + 64 <= D; c += 64) wsum_block_f32(o, w, scale, n, v, stride, c, 8);
  for (; c + 32 <= D; c += 32) wsum_block_f32(o, w, scale, n, v, stride, c, 4);
  for (; c + 8 <= D; c += 8) wsum_block_f32(o, w, scale, n, v, stride, c, 1);
  for (; c < D; c++) {
    float s = 0;
    for (int p = 0; p < n; p++) {
      float t = (w[p] * scale) * v[(size_t)p * stride + c];
      s += t;
    }
    o[c] = s;
  }
}

__attribute__((target("avx2,fma,f16c"))) static void wsum_f16_avx2(float *o, const float *w, float scale, int n,
                                                                 const uint16_t *v, size_t stride, int D) {
  int c = 0;
  for (; c + 64 <= D; c += 64) wsum_block_f16(o, w, scale, n, v, stride, c, 8);
  for (; c + 32 <= D; c += 32) wsum_block_f16(o, w, scale, n, v, stride, c, 4);
  for (; c + 8 <= D; c += 8) wsum_block_f16(o, w, scale, n, v, stride, c, 1);
  for (; c < D; c++) {
    float s = 0;
    for (int p = 0; p < n; p++) {
      float t = (w[p] * scale) * wisp_f16_to_f32(v[(size_t)p * stride + c]);
      s += t;
    }
    o[c] = s;
  }
}

/* F16C's conversion rounds to nearest even as wisp_f32_to_f16 does. */
__attribute__((target("avx2,fma,f16c"))) static void f32_to_f16_avx2(uint16_t *dst, const float *x, int n) {
  int i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128((__m128i *)(dst + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; i++) dst[i] = wisp_f32_to_f16(x[i]);
}

static const wisp_cpu_kernels k_avx2 = {
    .name = "avx2", .dot_f32 = dot_f32_avx2, .dot4_f32 = dot4_f32_avx2, .dot2x4_f32 = dot2x4_f32_avx2,
    .dot_q4_row = dot_q4_row_avx2, .dot_q4k_row = dot_q4k_row_avx2, .dot_f16_row = dot_f16_row_avx2,
    .dot_q8_0_row = dot_q8_0_row_avx2, .dot_blocks_row = wisp_cpu_dot_blocks_avx2, .row_f32 = row_f32_avx2, .deltanet_step = deltanet_step_avx2,
    .argmax_f32 = argmax_f32_avx2, .dots_f32 = dots_f32_avx2, .exp_f32 = exp_f32_avx2,
    .silu_f32 = silu_f32_avx2, .swiglu_f32 = swiglu_f32_avx2, .geglu_f32 = geglu_f32_avx2, .conv_silu_f32 = conv_silu_f32_avx2, .conv_f32 = conv_f32_avx2,
    .gemm_f32 = gemm_f32_avx2, .dots_f16 = dots_f16_avx2, .f32_to_f16 = f32_to_f16_avx2, .wsum_f32 = wsum_f32_avx2,
    .wsum_f16 = wsum_f16_avx2, .avx2 = 1};

/* ---- AVX-512F: the chunked Gated DeltaNet's products; everything else is
 * the AVX2 set's. Compiled through the target attribute like the rest, and
 * chosen only where cpuid has AVX-512F and the OS saves the zmm state. ---- */
#define TGT512 __attribute__((target("avx2,fma,f16c,avx512f")))

TGT512 __attribute__((always_inline)) static inline __m512 gemm_init16(const float *c, __mmask16 m, float beta) {
  if (beta == 0) return _mm512_setzero_ps();
  const __m512 v = _mm512_maskz_loadu_ps(m, c);
  return beta == 1 ? v : _mm512_mul_ps(v, _mm512_set1_ps(beta));
}

/* c[0..R)[0..32) = beta c + a[0..R)[0..k) b[0..k)[0..32), columns past the
 * masks m0 (the first 16) and m1 (the next 16) neither read nor written.
 * R is a constant where it is called, so the accumulators stay in zmm
 * registers: eight rows take sixteen of the 32, and each step of p feeds
 * sixteen FMAs from two loads of b and eight broadcasts of a. Every element
 * is the AVX2 set's chain: beta c, then one FMA a p in the order of p. */
TGT512 __attribute__((always_inline)) static inline void gemm_rx32(float *c, int ldc, const float *a, int lda,
                                                                   const float *b, int ldb, int k, float beta,
                                                                   __mmask16 m0, __mmask16 m1, const int R) {
  __m512 r0[8], r1[8];
  _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) {
    r0[r] = gemm_init16(c + (size_t)r * ldc, m0, beta);
    r1[r] = gemm_init16(c + (size_t)r * ldc + 16, m1, beta);
  }
  for (int p = 0; p < k; p++, b += ldb) {
    const __m512 b0 = _mm512_maskz_loadu_ps(m0, b), b1 = _mm512_maskz_loadu_ps(m1, b + 16);
    _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) {
      const __m512 s = _mm512_set1_ps(a[(size_t)r * lda + p]);
      r0[r] = _mm512_fmadd_ps(s, b0, r0[r]), r1[r] = _mm512_fmadd_ps(s, b1, r1[r]);
    }
  }
  _Pragma("GCC unroll 8") for (int r = 0; r < R; r++) {
    _mm512_mask_storeu_ps(c + (size_t)r * ldc, m0, r0[r]);
    _mm512_mask_storeu_ps(c + (size_t)r * ldc + 16, m1, r1[r]);
  }
}

/* A panel of 32 columns of b (the last one narrower, through the masks) at
 * a time, run down all the rows of a in blocks of eight, then four, then
 * one, as the AVX2 set's panels of sixteen. */
TGT512 static void gemm_f32_avx512(float *c, int ldc, const float *a, int lda, const float *b, int ldb, int m, int n,
                                   int k, float beta) {
  for (int j = 0; j < n; j += 32) {
    const int w = n - j < 32 ? n - j : 32;
    const __mmask16 m0 = (__mmask16)(w >= 16 ? 0xffff : (1u << w) - 1);
    const __mmask16 m1 = (__mmask16)(w >= 32 ? 0xffff : w > 16 ? (1u << (w - 16)) - 1 : 0);
    float *cj = c + j;
    const float *bj = b + j;
    int i = 0;
    for (; i + 8 <= m; i += 8)
      gemm_rx32(cj + (size_t)i * ldc, ldc, a + (size_t)i * lda, lda, bj, ldb, k, beta, m0, m1, 8);
    for (; i + 4 <= m; i += 4)
      gemm_rx32(cj + (size_t)i * ldc, ldc, a + (size_t)i * lda, lda, bj, ldb, k, beta, m0, m1, 4);
    for (; i < m; i++) gemm_rx32(cj + (size_t)i * ldc, ldc, a + (size_t)i * lda, lda, bj, ldb, k, beta, m0, m1, 1);
  }
}

static const wisp_cpu_kernels k_avx512 = {
    .name = "avx512", .dot_f32 = dot_f32_avx2, .dot4_f32 = dot4_f32_avx2, .dot2x4_f32 = dot2x4_f32_avx2,
    .dot_q4_row = dot_q4_row_avx2, .dot_q4k_row = dot_q4k_row_avx2, .dot_f16_row = dot_f16_row_avx2,
    .dot_q8_0_row = dot_q8_0_row_avx2, .dot_blocks_row = wisp_cpu_dot_blocks_avx2, .row_f32 = row_f32_avx2, .deltanet_step = deltanet_step_avx2,
    .argmax_f32 = argmax_f32_avx2, .dots_f32 = dots_f32_avx2, .exp_f32 = exp_f32_avx2,
    .silu_f32 = silu_f32_avx2, .swiglu_f32 = swiglu_f32_avx2, .geglu_f32 = geglu_f32_avx2, .conv_silu_f32 = conv_silu_f32_avx2, .conv_f32 = conv_f32_avx2,
    .gemm_f32 = gemm_f32_avx512, .dots_f16 = dots_f16_avx2, .f32_to_f16 = f32_to_f16_avx2, .wsum_f32 = wsum_f32_avx2,
    .wsum_f16 = wsum_f16_avx2, .avx2 = 1};
#endif

const wisp_cpu_kernels *wisp_cpu_kernels_scalar(void) { return &k_scalar; }

const wisp_cpu_kernels *wisp_cpu_kernels_get(void) {
  const wisp_cpu_kernels *sets[3];
  int can[3], best = 0;
  const int n = wisp_cpu_kernels_all(sets, can, 3);
  for (int i = 1; i < n; i++)
    if (can[i]) best = i;
  return sets[best];
}

int wisp_cpu_kernels_all(const wisp_cpu_kernels **sets, int *runnable, int cap) {
  int n = 0;
  if (n < cap) sets[n] = &k_scalar, runnable[n++] = 1;
#if defined(__x86_64__)
  wisp_cpu_features f;
  wisp_cpu_features_get(&f);
  if (n < cap) sets[n] = &k_avx2, runnable[n++] = f.avx2_fma_f16c;
  if (n < cap) sets[n] = &k_avx512, runnable[n++] = f.avx512f;
#endif
  return n;
}
