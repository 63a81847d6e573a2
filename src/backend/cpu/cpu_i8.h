/* Integer products for the CPU backend: activations quantized to int8 per
 * block of 32 (one f32 scale per block, like ggml's Q8_0), multiplied with
 * the 4-bit and 8-bit weight types in integer arithmetic.
 *
 * Every weight type with 32-element blocks is read as
 *     w = s[b] * u - o[b]          (u an unsigned nibble, or int8 for Q8_0)
 * so that for one row and one token
 *     y = sum_b s[b] * d[b] * idot(u_b, q_b)  -  sum_b o[b] * d[b] * sum(q_b)
 * with d[b] the activation block's scale and q_b its int8 values:
 *     Q4   s = scale, o = 8 * scale        Q4Z  s = scale, o = zp * scale
 *     Q4_K s = d * sc[j], o = dmin * m[j]  Q8_0 s = d, o = 0 (signed weights)
 * where Q4 / Q4Z's scale is the f32 block scale rounded to f16: the kernels
 * read a copy of the scales as f16 (wisp_i8_scales_f16), 2 bytes a block
 * instead of 4, so that a block is 18 bytes (Q4Z: 18.5 with its zero
 * point), the bytes of ggml's Q4_0. One-token products stream every weight
 * once and are bound by memory bandwidth; prefill reads the same copy, so
 * that a token gets the same numbers prefilled or decoded.
 * The kernel sets (scalar reference, AVX2 maddubs, AVX-VNNI, AVX-512 VNNI)
 * compute exactly these integers; they differ only in the order of the f32
 * sums. F16 weights take the integer product through a Q8_0 copy made
 * once, at session start (wisp_i8_q8_0_of_f16): the Q8_0 kernels read it,
 * so the weights are rounded too, to 8 bits a value and one f16 scale a
 * block; so does BF16. Q4_0 runs as a Q4 copy (its nibbles in Q4's order,
 * its f16 scales as stored): the same values, no rounding
 * (cpu_backend.c's i8_through_q4).
 * The other ggml block types are read in their own bytes:
 *     Q4_1 s = d, o = -m (u 0..15)    Q5_1 s = d, o = -m (u 0..31)
 *     Q5_K s = d * sc[j], o = dmin * m[j] (u 0..31)
 * fit the form above; Q6_K, Q3_K and Q2_K have a scale (Q2_K also a min)
 * per 16 values, two a block of 32:
 *     y = sum_h s[h] * d[b(h)] * idot16(u_h - z, q_h) - sum_h o[h] * ds16[h]
 * over the halves h of the blocks, with z the type's zero (Q6_K 32, Q3_K
 * 4, Q2_K 0: u - z the signed value) and ds16 = d * (sum of the 16 q):
 *     Q6_K s = d * sc[h] (int8)   Q3_K s = d * (sc[h] - 32)   o = 0
 *     Q2_K s = d * sc[h], o = dmin * m[h] (4-bit sc, m)
 * The kernels keep s[h] = d * sc[h] apart: the integer sc[h] multiplies
 * the integer dot of its half, and the two halves' sum takes d * d[b] as
 * one f32 scale a block (Q2_K's and, on the VNNI sets, Q3_K's prefill
 * multiply sc[h] into the packed weight bytes instead). The scalar
 * reference computes these types from the format's own decoder
 * (wisp_qblock_split: integers and a scale and offset per 16) in exact
 * integers per half. Every set runs every type in both phases; the
 * backend gives these three types' prefill a Q8_0 copy instead on the
 * VNNI sets, whose Q8_0 lanes run it faster (q8_0_lanes; docs/cpu.md).
 * Their decode reads per256 activations (wisp_i8_act): with one d256 a
 * super-block k,
 *     y = sum_k d256_k (d_k (sum_h sc_h idot16(u_h, q_h) - z sum_h sc_h qs16_h)
 *                       - dmin_k sum_h m_h qs16_h)
 * all in integers but the one f32 multiply-add a super-block (the scalar
 * reference: s[h] d256 idot16 + o[h] d256 qs16 per half, in f32).
 * F32 weights have no integer product (they keep f32 activations). */
#ifndef WISP_CPU_I8_H
#define WISP_CPU_I8_H

#include <stddef.h>
#include <stdint.h>

#include "format/tensor.h"

/* Where the int8 values of a token sit. NATURAL: element e of block b at
 * 32 b + e. PAIRED (Q4 / Q4Z decode; a weight byte holds elements 2j and
 * 2j+1 of its block): blocks go by pairs b = 2k, 2k+1, whose 64 bytes are
 * the 16 even elements of 2k, the 16 even of 2k+1, the 16 odd of 2k, the
 * 16 odd of 2k+1: the low nibbles of the pair's 32 weight bytes, then the
 * high nibbles, so that one 32-byte load of weights and one shift and mask
 * line up with the activations. The last block of an odd count stands
 * alone: its 16 even elements, then its 16 odd ones. */
enum { WISP_I8_NATURAL = 0, WISP_I8_PAIRED = 1 };

/* Offset of element e of block b (of nb a token) from the token's start. */
static inline int wisp_i8_pos(int layout, int nb, int b, int e) {
  if (layout != WISP_I8_PAIRED) return 32 * b + e;
  if ((nb & 1) && b == nb - 1) return 32 * b + (e & 1) * 16 + (e >> 1);
  return 64 * (b >> 1) + 32 * (e & 1) + 16 * (b & 1) + (e >> 1);
}

/* n tokens of K values quantized: q [n][K], d and ds [n][K/32], where
 * ds = d * (sum of the block's q); qs16 and ds16 [n][K/16], the sum of
 * each 16 q and d times it (for the types with a scale per 16 values).
 * With per256 set (K a multiple of 256) the scale is one a super-block of
 * 256 values instead, like ggml's Q8_K: q [n][K], d256 [n][K/256] and
 * qs16 [n][K/16] are written, d, ds and ds16 are not. A per-16 type's
 * decode reads these (wisp_i8_per256_for): its sub-scales then multiply
 * integers summed over a whole super-block, one f32 multiply-add a
 * super-block and row.
 * Grown on demand by wisp_i8_act_reserve. */
typedef struct {
  int n, K, layout, per256;
  int8_t *q;
  float *d, *ds, *ds16, *d256;
  int16_t *qs16;
  size_t cap_q, cap_b;
} wisp_i8_act;

/* 1 on success, 0 out of memory. */
int wisp_i8_act_reserve(wisp_i8_act *a, int n, int K);
void wisp_i8_act_free(wisp_i8_act *a);
/* The layout the kernels read for a product of n tokens: PAIRED for Q4 /
 * Q4Z decode (n == 1), else NATURAL. Every kernel set takes both. */
int wisp_i8_layout_for(wisp_wtype t, int n);
/* 1 when a product of n tokens with a type-t matrix reads per256
 * activations: the per-16 types' decode (n == 1). Every kernel set takes
 * them for any n with those types (the tests run them on several tokens). */
int wisp_i8_per256_for(wisp_wtype t, int n);
/* 1 when a matrix can take the integer product in its own bytes (Q4, Q4Z,
 * Q8_0, Q5_0, Q4_1, Q5_1 with whole 32-blocks; Q4_K, Q5_K, Q6_K, Q3_K,
 * Q2_K with whole 256-blocks). */
int wisp_i8_supported(const wisp_matrix *m);
/* 1 when the kernels read a matrix's block scales from an f16 copy (Q4,
 * Q4Z), which the caller makes once with wisp_i8_scales_f16. */
int wisp_i8_needs_f16_scales(const wisp_matrix *m);
/* The block scales of a Q4 / Q4Z matrix (rows * cols/32) rounded to f16,
 * to nearest even by wisp_f32_to_f16, the rounding of export-gguf's Q4_0
 * (so a GGUF reader of the export sees the very same scales). Into s16
 * (that many halves). */
void wisp_i8_scales_f16(const wisp_matrix *m, uint16_t *s16);
/* The Q8_0 copy of F16 matrix m that the integer products read in its
 * place (variant f16_i8): wisp_q8_0_bytes(rows, cols) bytes into out, each
 * row widened to f32 (exact) and rounded by wisp_quantize_q8_0_rows,
 * convert's Q8_0 quantizer (per 32-block d = max|w|/127 rounded to
 * nearest-even f16, q = round(w/d) clamped to [-127, 127]), so that the copy
 * holds the very bytes `wisp convert --quant q8_0` would write from these
 * weights. 1 on success, 0 out of memory (for a row buffer). */
int wisp_i8_q8_0_of_f16(const wisp_matrix *m, uint8_t *out);
/* Rows r0..r1-1 of that copy (out is the whole copy), row a buffer of cols
 * floats, widened by row_f32 (wisp_matrix_row_f32 or a kernel set's SIMD
 * one: every f16 is an f32, so any gives the same floats): for callers that
 * split the rows over threads. */
void wisp_i8_q8_0_of_f16_rows(const wisp_matrix *m, int r0, int r1, uint8_t *out, float *row,
                              void (*row_f32)(const wisp_matrix *m, int row, float *out));
/* m read through such a copy: its shape and choices, type Q8_0, q = blocks. */
wisp_matrix wisp_i8_q8_0_view(const wisp_matrix *m, const uint8_t *blocks);
/* 1 for the types with a scale per 16 values (Q6_K, Q3_K, Q2_K). */
int wisp_i8_per16(wisp_wtype t);
/* The per-block s[] and o[] of one row (cols/32 each) of a type with one
 * scale a block; s16 is the f16 copy of the scales for Q4 / Q4Z (ignored
 * for the others). */
void wisp_i8_row_scales(const wisp_matrix *m, const uint16_t *s16, int row, float *s, float *o);

/* Per-thread scratch of a product with `cols` columns, in floats: a group
 * of up to 16 rows transposed (16 * cols bytes) plus their scales and
 * offsets (up to 80 * cols/32 floats: per-16 types keep two integer
 * sub-scales, a block scale and two offsets a row and block). */
#define WISP_I8_SCRATCH(cols) ((size_t)(cols) * 7)

typedef struct {
  const char *name; /* "scalar", "avx2", "avxvnni", "avx512vnni" */
  /* 1 when Q8_0 prefill runs on the lanes (the VNNI sets; AVX2's pairwise
   * products would saturate on Q8_0's w + 128, the scalar set has none):
   * there a Q8_0 copy of a type with a scale per 16 values prefills
   * faster than the type's own blocks (cpu_backend.c) */
  int q8_0_lanes;
  /* Quantizes rows t0..t1-1 of x ([n][K] f32, K a multiple of 32) into a
   * (already reserved for K and at least t1 rows, layout and per256 set):
   * per block of 32 (per256: of 256) d = max|x|/127, q =
   * round-to-nearest-even(x * (127/max|x|)), and the sums ds, qs16, ds16
   * (per256: qs16). Every kernel set writes the same bytes. */
  void (*quantize)(const float *x, int t0, int t1, wisp_i8_act *a);
  /* y[(t - t0) * ldy + (r - r0)] (+)= row r of W . token t of a, for r in
   * [r0, r0+nr), t in [t0, t0+nt). s16: W's block scales as f16
   * (wisp_i8_scales_f16) when wisp_i8_needs_f16_scales(W), read instead of
   * W->scales; else NULL. scratch holds WISP_I8_SCRATCH(cols) floats. */
  void (*gemm)(const wisp_matrix *W, const uint16_t *s16, int r0, int nr, const wisp_i8_act *a, int t0, int nt,
               float *y, size_t ldy, int accumulate, float *scratch);
} wisp_i8_kernels;

/* Kernel sets, best first; wisp_i8_kernels_get picks the best this CPU runs
 * (cpuid), wisp_i8_kernels_all lists all compiled ones with whether this CPU
 * can run each (for the tests). */
const wisp_i8_kernels *wisp_i8_kernels_get(void);
const wisp_i8_kernels *wisp_i8_kernels_scalar(void);
int wisp_i8_kernels_all(const wisp_i8_kernels **sets, int *runnable, int cap);

/* Set implementations (cpu_i8_x86.c); NULL off x86-64. */
const wisp_i8_kernels *wisp_i8_kernels_avx2(void);
const wisp_i8_kernels *wisp_i8_kernels_avxvnni(void);
const wisp_i8_kernels *wisp_i8_kernels_avx512vnni(void);

/* What this CPU offers (cpuid + the OS's saved register state). */
typedef struct {
  int avx2_fma_f16c, avxvnni, avx512vnni;
  int avx512f; /* AVX-512F with the zmm state saved by the OS (and AVX2+FMA+F16C) */
} wisp_cpu_features;
void wisp_cpu_features_get(wisp_cpu_features *f);

#endif
