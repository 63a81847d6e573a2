/* Products of the ggml block types and BF16; see cpu_blocks.h. */
#include "backend/cpu/cpu_blocks.h"

#include <string.h>

#include "format/qblocks.h"
#include "format/quant.h"
#include "format/safetensors.h"

int wisp_cpu_is_block_type(wisp_wtype t) {
  switch (t) {
    case WISP_W_Q6K:
    case WISP_W_Q5K:
    case WISP_W_Q3K:
    case WISP_W_Q2K:
    case WISP_W_Q4_0:
    case WISP_W_Q4_1:
    case WISP_W_Q5_0:
    case WISP_W_Q5_1:
    case WISP_W_BF16: return 1;
    default: return 0;
  }
}

/* Blocks decoded a chunk at a time: 256 elements (one K block, eight
 * blocks of 32) fit one buffer on the stack. */
enum { CHUNK = 256 };

static float bf16_at(const uint8_t *p) { return wisp_bf16_to_f32((uint16_t)(p[0] | p[1] << 8)); }

float wisp_cpu_dot_blocks_scalar(const wisp_matrix *m, int row, const float *x) {
  float s = 0;
  if (m->type == WISP_W_BF16) {
    const uint8_t *h = m->q + (size_t)row * m->cols * 2;
    for (int i = 0; i < m->cols; i++) s += bf16_at(h + 2 * i) * x[i];
    return s;
  }
  const wisp_quant_traits *t = wisp_quant_traits_of(m->type);
  const int nb = m->cols / t->block;
  const uint8_t *blk = m->q + (size_t)row * nb * t->block_bytes;
  float w[CHUNK];
  for (int b = 0; b < nb; b++, blk += t->block_bytes, x += t->block) {
    t->block_f32(blk, w);
    for (int i = 0; i < t->block; i++) s += w[i] * x[i];
  }
  return s;
}

#if defined(__x86_64__)
#include <immintrin.h>

__attribute__((target("avx2,fma"), always_inline)) static inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

/* The 32 signed 6-bit values of Q6_K group (h, k) (layout in qblocks.h),
 * as four vectors of eight floats in element order. */
__attribute__((target("avx2,fma"), always_inline)) static inline void q6k_group(const uint8_t *b, int h, int k,
                                                                              __m256 q[4]) {
  const __m256i low4 = _mm256_set1_epi8(15), two = _mm256_set1_epi8(3);
  __m256i lq = _mm256_loadu_si256((const __m256i *)(b + 64 * h + 32 * (k % 2)));
  __m256i hq = _mm256_loadu_si256((const __m256i *)(b + 128 + 32 * h));
  lq = k < 2 ? _mm256_and_si256(lq, low4) : _mm256_and_si256(_mm256_srli_epi16(lq, 4), low4);
  hq = _mm256_and_si256(_mm256_srl_epi16(hq, _mm_cvtsi32_si128(2 * k)), two);
  __m256i v = _mm256_sub_epi8(_mm256_or_si256(lq, _mm256_slli_epi16(hq, 4)), _mm256_set1_epi8(32));
  __m128i lo = _mm256_castsi256_si128(v), hi = _mm256_extracti128_si256(v, 1);
  q[0] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo));
  q[1] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8)));
  q[2] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi));
  q[3] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8)));
}

/* Q6_K: per sub-block of 16, sum q_i x_i, then times d * scale. */
__attribute__((target("avx2,fma"))) static float dot_q6k_avx2(const wisp_matrix *m, int row, const float *x) {
  const int nb = m->cols / 256;
  const uint8_t *b = m->q + (size_t)row * nb * WISP_Q6K_BYTES;
  __m256 acc = _mm256_setzero_ps();
  for (int n = 0; n < nb; n++, b += WISP_Q6K_BYTES, x += 256) {
    const int8_t *sc = (const int8_t *)(b + 192);
    const float d = wisp_f16_to_f32((uint16_t)(b[208] | b[209] << 8));
    for (int h = 0; h < 2; h++)
      for (int k = 0; k < 4; k++) {
        __m256 q[4];
        q6k_group(b, h, k, q);
        const float *xs = x + 128 * h + 32 * k;
        const int s = 8 * h + 2 * k;
        __m256 s0 = _mm256_fmadd_ps(q[1], _mm256_loadu_ps(xs + 8), _mm256_mul_ps(q[0], _mm256_loadu_ps(xs)));
        __m256 s1 = _mm256_fmadd_ps(q[3], _mm256_loadu_ps(xs + 24), _mm256_mul_ps(q[2], _mm256_loadu_ps(xs + 16)));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d * (float)sc[s]), s0, acc);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d * (float)sc[s + 1]), s1, acc);
      }
  }
  return hsum(acc);
}

/* Q6_K decoded as the scalar decoder rounds it: (d * scale) * q. */
__attribute__((target("avx2,fma"))) static void row_q6k_avx2(const wisp_matrix *m, int row, float *out) {
  const int nb = m->cols / 256;
  const uint8_t *b = m->q + (size_t)row * nb * WISP_Q6K_BYTES;
  for (int n = 0; n < nb; n++, b += WISP_Q6K_BYTES, out += 256) {
    const int8_t *sc = (const int8_t *)(b + 192);
    const float d = wisp_f16_to_f32((uint16_t)(b[208] | b[209] << 8));
    for (int h = 0; h < 2; h++)
      for (int k = 0; k < 4; k++) {
        __m256 q[4];
        q6k_group(b, h, k, q);
        float *o = out + 128 * h + 32 * k;
        const __m256 d0 = _mm256_set1_ps(d * (float)sc[8 * h + 2 * k]), d1 = _mm256_set1_ps(d * (float)sc[8 * h + 2 * k + 1]);
        _mm256_storeu_ps(o, _mm256_mul_ps(d0, q[0]));
        _mm256_storeu_ps(o + 8, _mm256_mul_ps(d0, q[1]));
        _mm256_storeu_ps(o + 16, _mm256_mul_ps(d1, q[2]));
        _mm256_storeu_ps(o + 24, _mm256_mul_ps(d1, q[3]));
      }
  }
}

/* Eight BF16 as f32: each the top half of its float. */
__attribute__((target("avx2,fma"), always_inline)) static inline __m256 bf16x8(const uint8_t *p) {
  __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

__attribute__((target("avx2,fma"))) static float dot_bf16_avx2(const wisp_matrix *m, int row, const float *x) {
  const uint8_t *h = m->q + (size_t)row * m->cols * 2;
  __m256 acc = _mm256_setzero_ps();
  int i = 0;
  for (; i + 8 <= m->cols; i += 8) acc = _mm256_fmadd_ps(bf16x8(h + 2 * i), _mm256_loadu_ps(x + i), acc);
  float s = hsum(acc);
  for (; i < m->cols; i++) s += bf16_at(h + 2 * i) * x[i];
  return s;
}

/* The 32 nibbles of a Q4_0 / Q4_1 block's qs[16] (element j the low nibble
 * of byte j, j + 16 its high nibble) as four vectors of eight floats in
 * element order. */
__attribute__((target("avx2,fma"), always_inline)) static inline void q4_nibbles(const uint8_t *qs, __m256 q[4]) {
  const __m128i bytes = _mm_loadu_si128((const __m128i *)qs), mask = _mm_set1_epi8(15);
  const __m128i lo = _mm_and_si128(bytes, mask), hi = _mm_and_si128(_mm_srli_epi16(bytes, 4), mask);
  q[0] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(lo));
  q[1] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(lo, 8)));
  q[2] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(hi));
  q[3] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(hi, 8)));
}

static float f16_at(const uint8_t *p) { return wisp_f16_to_f32((uint16_t)(p[0] | p[1] << 8)); }

/* Q4_0 and Q4_1 read in place, a block at a time: per block
 * d * sum (q - 8) x (Q4_0) or d * sum q x + m * sum x (Q4_1), so a product
 * of a Q4_0 file's matrices streams its 18-byte blocks as wisp's Q4 kernel
 * streams its own layout. */
__attribute__((target("avx2,fma"))) static float dot_q4_0_avx2(const wisp_matrix *m, int row, const float *x) {
  const int nb = m->cols / 32;
  const uint8_t *blk = m->q + (size_t)row * nb * WISP_Q4_0_BYTES;
  const __m256 eight = _mm256_set1_ps(8.0f);
  __m256 total = _mm256_setzero_ps();
  for (int b = 0; b < nb; b++, blk += WISP_Q4_0_BYTES, x += 32) {
    __m256 q[4];
    q4_nibbles(blk + 2, q);
    __m256 acc = _mm256_mul_ps(_mm256_sub_ps(q[0], eight), _mm256_loadu_ps(x));
    acc = _mm256_fmadd_ps(_mm256_sub_ps(q[1], eight), _mm256_loadu_ps(x + 8), acc);
    acc = _mm256_fmadd_ps(_mm256_sub_ps(q[2], eight), _mm256_loadu_ps(x + 16), acc);
    acc = _mm256_fmadd_ps(_mm256_sub_ps(q[3], eight), _mm256_loadu_ps(x + 24), acc);
    total = _mm256_fmadd_ps(_mm256_set1_ps(f16_at(blk)), acc, total);
  }
  return hsum(total);
}

__attribute__((target("avx2,fma"))) static float dot_q4_1_avx2(const wisp_matrix *m, int row, const float *x) {
  const int nb = m->cols / 32;
  const uint8_t *blk = m->q + (size_t)row * nb * WISP_Q4_1_BYTES;
  __m256 total = _mm256_setzero_ps();
  for (int b = 0; b < nb; b++, blk += WISP_Q4_1_BYTES, x += 32) {
    __m256 q[4];
    q4_nibbles(blk + 4, q);
    const __m256 x0 = _mm256_loadu_ps(x), x1 = _mm256_loadu_ps(x + 8), x2 = _mm256_loadu_ps(x + 16),
                 x3 = _mm256_loadu_ps(x + 24);
    __m256 acc = _mm256_mul_ps(q[0], x0);
    acc = _mm256_fmadd_ps(q[1], x1, acc);
    acc = _mm256_fmadd_ps(q[2], x2, acc);
    acc = _mm256_fmadd_ps(q[3], x3, acc);
    const __m256 xs = _mm256_add_ps(_mm256_add_ps(x0, x1), _mm256_add_ps(x2, x3));
    total = _mm256_fmadd_ps(_mm256_set1_ps(f16_at(blk)), acc, total);
    total = _mm256_fmadd_ps(_mm256_set1_ps(f16_at(blk + 2)), xs, total);
  }
  return hsum(total);
}

/* The other types: a chunk of blocks decoded into a buffer, then summed. */
__attribute__((target("avx2,fma"))) static float dot_chunks_avx2(const wisp_matrix *m, int row, const float *x) {
  const wisp_quant_traits *t = wisp_quant_traits_of(m->type);
  const int nb = m->cols / t->block, per = CHUNK / t->block;
  const uint8_t *blk = m->q + (size_t)row * nb * t->block_bytes;
  float w[CHUNK];
  __m256 acc = _mm256_setzero_ps();
  for (int b = 0; b < nb; b += per) {
    const int nc = nb - b < per ? nb - b : per;
    for (int c = 0; c < nc; c++) t->block_f32(blk + (size_t)(b + c) * t->block_bytes, w + c * t->block);
    const float *xs = x + (size_t)b * t->block;
    for (int i = 0; i < nc * t->block; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(w + i), _mm256_loadu_ps(xs + i), acc);
  }
  return hsum(acc);
}

float wisp_cpu_dot_blocks_avx2(const wisp_matrix *m, int row, const float *x) {
  if (m->type == WISP_W_Q6K) return dot_q6k_avx2(m, row, x);
  if (m->type == WISP_W_BF16) return dot_bf16_avx2(m, row, x);
  if (m->type == WISP_W_Q4_0) return dot_q4_0_avx2(m, row, x);
  if (m->type == WISP_W_Q4_1) return dot_q4_1_avx2(m, row, x);
  return dot_chunks_avx2(m, row, x);
}

__attribute__((target("avx2,fma"))) static void row_bf16_avx2(const wisp_matrix *m, int row, float *out) {
  const uint8_t *h = m->q + (size_t)row * m->cols * 2;
  int i = 0;
  for (; i + 8 <= m->cols; i += 8) _mm256_storeu_ps(out + i, bf16x8(h + 2 * i));
  for (; i < m->cols; i++) out[i] = bf16_at(h + 2 * i);
}

/* A Q4_0 row as f32: d * (q - 8), exactly what the block decoder gives
 * (one rounding of the product). */
__attribute__((target("avx2,fma"))) static void row_q4_0_avx2(const wisp_matrix *m, int row, float *out) {
  const int nb = m->cols / 32;
  const uint8_t *blk = m->q + (size_t)row * nb * WISP_Q4_0_BYTES;
  const __m256 eight = _mm256_set1_ps(8.0f);
  for (int b = 0; b < nb; b++, blk += WISP_Q4_0_BYTES, out += 32) {
    __m256 q[4];
    q4_nibbles(blk + 2, q);
    const __m256 d = _mm256_set1_ps(f16_at(blk));
    for (int k = 0; k < 4; k++) _mm256_storeu_ps(out + 8 * k, _mm256_mul_ps(d, _mm256_sub_ps(q[k], eight)));
  }
}

void wisp_cpu_row_blocks_avx2(const wisp_matrix *m, int row, float *out) {
  if (m->type == WISP_W_Q6K) row_q6k_avx2(m, row, out);
  else if (m->type == WISP_W_Q4_0) row_q4_0_avx2(m, row, out);
  else if (m->type == WISP_W_BF16) row_bf16_avx2(m, row, out);
  else wisp_matrix_row_f32(m, row, out);
}

#else /* no x86: the vector entry points are the scalar ones */

float wisp_cpu_dot_blocks_avx2(const wisp_matrix *m, int row, const float *x) {
  return wisp_cpu_dot_blocks_scalar(m, row, x);
}

void wisp_cpu_row_blocks_avx2(const wisp_matrix *m, int row, float *out) { wisp_matrix_row_f32(m, row, out); }

#endif
