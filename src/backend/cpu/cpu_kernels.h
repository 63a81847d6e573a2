/* Inner loops of the CPU backend: a scalar reference, an AVX2+FMA(+F16C)
 * set, and an AVX-512F set (the AVX2 set with AVX-512 products, gemm_f32),
 * the best this processor (and its OS's saved register state) runs chosen
 * at run time. Tests compare each runnable set with the scalar one. */
#ifndef WISP_CPU_KERNELS_H
#define WISP_CPU_KERNELS_H

#include "format/tensor.h"

typedef struct {
  const char *name; /* "scalar", "avx2" or "avx512" */
  float (*dot_f32)(const float *a, const float *b, int n);
  /* out[k] = dot(w, x[k]) for four vectors at once (prefill). */
  void (*dot4_f32)(const float *w, const float *const x[4], int n, float out[4]);
  /* dot4_f32 for two rows at once (out[r][k] = dot(w[r], x[k])), summed in
   * the same order as dot4_f32 so that both give the same bits. */
  void (*dot2x4_f32)(const float *const w[2], const float *const x[4], int n, float out[2][4]);
  /* dot of one Q4/Q4Z row (`cols` elements) with x; zero point 8 for Q4. */
  float (*dot_q4_row)(const wisp_matrix *m, int row, const float *x);
  /* dot of one Q4_K row with x */
  float (*dot_q4k_row)(const wisp_matrix *m, int row, const float *x);
  /* dot of one F16 row / one Q8_0 row with x */
  float (*dot_f16_row)(const wisp_matrix *m, int row, const float *x);
  float (*dot_q8_0_row)(const wisp_matrix *m, int row, const float *x);
  /* dot of one row of a ggml block type kept in its GGUF bytes (Q6_K, Q5_K,
   * Q3_K, Q2_K, Q4_0, Q4_1, Q5_0, Q5_1) or of BF16 with x (cpu_blocks.h) */
  float (*dot_blocks_row)(const wisp_matrix *m, int row, const float *x);
  /* dequantize one row of any matrix type into out[cols] */
  void (*row_f32)(const wisp_matrix *m, int row, float *out);
  /* One Gated DeltaNet state update of one head (backend.h), S [dk][dv]:
   *   S *= decay; kv = S^T k; delta = (v - kv) * beta; S += k delta^T; o = S^T q
   * kv is scratch of dv floats. */
  void (*deltanet_step)(float *S, int dk, int dv, const float *k, const float *q, const float *v, float decay,
                        float beta, float *kv, float *o);
  /* The index of the first maximum of x[0..n) (n >= 1); *finite = 0 when
   * some x[i] is a NaN or an infinity (the index is then meaningless). */
  int (*argmax_f32)(const float *x, int n, int *finite);
  /* s[p] = dot_f32(q, k + p * stride, D) * scale for p in [0, n): the same
   * bits as dot_f32 one position at a time (attention scores). */
  void (*dots_f32)(const float *q, const float *k, size_t stride, int n, int D, float scale, float *s);
  /* Elementwise exponentials (in place allowed). The scalar set is libm's
   * expf; the AVX2 set takes glibc's vector expf (libmvec, within a few
   * ulp of it, the same results for 0, infinities and NaN) where the build
   * links it (WISP_HAVE_LIBMVEC), else the scalar loop. */
  void (*exp_f32)(float *y, const float *x, int n);
  /* y[i] = x[i] / (1 + exp(-x[i])) (SiLU; in place allowed) */
  void (*silu_f32)(float *y, const float *x, int n);
  /* y[i] = silu(g[i]) * u[i] (SwiGLU; y may be g) */
  void (*swiglu_f32)(float *y, const float *g, const float *u, int n);
  /* y[i] = gelu_tanh(g[i]) * u[i] (GeGLU: 0.5 g (1 + tanh(sqrt(2/pi) (g +
   * 0.044715 g^3))), PyTorch's approximate="tanh"; y may be g). The scalar
   * set is libm's tanhf; the AVX2 set glibc's vector tanhf (libmvec) where
   * the build links it, else the scalar loop. */
  void (*geglu_f32)(float *y, const float *g, const float *u, int n);
  /* The causal depthwise conv of one token over n consecutive channels:
   * y[c] = silu(sum_k taps[k * tap_stride + c] * x[k][c]) for k in [0, L),
   * summed in the order of k, taps transposed ([L][channels]) so that a
   * vector of channels loads each tap contiguously. */
  void (*conv_silu_f32)(float *y, const float *const *x, const float *taps, size_t tap_stride, int L, int n);
  /* y[c] = taps[0][c] * x[0][c] + taps[1][c] * x[1][c] + ... for c < n:
   * the first product, then each next one added in the order of k, each
   * a multiply then an add (the short conv's sum, whose first term is its
   * newest input), with no activation. */
  void (*conv_f32)(float *y, const float *const *x, const float *taps, size_t tap_stride, int L, int n);
  /* c[i][j] = beta * c[i][j] + sum_p a[i][p] * b[p][j] for i < m, j < n,
   * p < k, all row-major with leading dimensions lda, ldb, ldc; beta = 0
   * overwrites c without reading it (the chunked Gated DeltaNet's
   * products). Every set sums each element as beta * c (c itself for
   * beta = 1), then one multiply-add per p in the order of p, whatever
   * its row or column, so a product split into blocks of rows or columns
   * gives the same bits as the whole (the vector sets fuse the
   * multiply-add, the scalar set rounds the product first). */
  void (*gemm_f32)(float *c, int ldc, const float *a, int lda, const float *b, int ldb, int m, int n, int k,
                   float beta);
  /* 1 where the set's other paths are the AVX2+FMA+F16C ones (the avx2 and
   * avx512 sets): the kernels the plans name *_avx2 run */
  int avx2;
  /* The same over an f16 KV cache (IEEE binary16 keys, k + p * stride
   * halves for position p). Every set sums in one order, written out in
   * cpu_kernels.c (dot_f16kv_scalar), so that all give the same bits. */
  void (*dots_f16)(const float *q, const uint16_t *k, size_t stride, int n, int D, float scale, float *s);
  /* dst[i] = x[i] as binary16, rounded to nearest even (wisp_f32_to_f16's
   * bits for every finite or infinite x; a NaN stays a NaN). */
  void (*f32_to_f16)(uint16_t *dst, const float *x, int n);
  /* The weighted sum of n value rows (attention's output of one head):
   * o[i] = sum over p < n of (w[p] * scale) * v[p * stride + i], i < D,
   * added in position order from zero, each term a multiply then an add:
   * the bits of o[i] += (w[p] * scale) * v[...] (a multiply, then an add)
   * position by position on a zeroed o, on every path. The sums
   * stay in registers a block of columns at a time instead of o being
   * loaded and stored for every position. f32 rows, and binary16 rows (an
   * f16 V cache). */
  void (*wsum_f32)(float *o, const float *w, float scale, int n, const float *v, size_t stride, int D);
  void (*wsum_f16)(float *o, const float *w, float scale, int n, const uint16_t *v, size_t stride, int D);
} wisp_cpu_kernels;

/* The best kernels this machine runs. */
const wisp_cpu_kernels *wisp_cpu_kernels_get(void);
const wisp_cpu_kernels *wisp_cpu_kernels_scalar(void);
/* Every set compiled here (scalar first, then in order of preference),
 * runnable[i] = 1 where this CPU runs sets[i]; returns how many (<= cap). */
int wisp_cpu_kernels_all(const wisp_cpu_kernels **sets, int *runnable, int cap);

#endif
