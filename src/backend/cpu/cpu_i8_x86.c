/* The x86 integer kernel sets of cpu_i8.h: AVX2 (maddubs), AVX-VNNI and
 * AVX-512 VNNI (vpdpbusd: 512-bit vectors of sixteen rows for prefill,
 * 256-bit with the 32 registers of AVX-512 for the decode tiles). Every set is compiled in any x86-64 build
 * through function target attributes; cpu_i8.c picks one at run time. The
 * kernel bodies are shared (cpu_i8_body.h), the activation quantizer is the
 * AVX2 one for all three. */
#include "backend/cpu/cpu_i8.h"
#include "format/qblocks.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include <string.h>

#define STR2(x) #x
#define STR(x) STR2(x)

/* max|x| lane by lane over the 32 floats at x. */
__attribute__((target("avx2,fma"))) static inline __attribute__((always_inline)) __m256 amax32_avx2(const float *x) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  return _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x)), _mm256_andnot_ps(sign, _mm256_loadu_ps(x + 8))),
                       _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + 16)),
                                     _mm256_andnot_ps(sign, _mm256_loadu_ps(x + 24))));
}

__attribute__((target("avx2,fma"))) static inline __attribute__((always_inline)) float hmax_avx2(__m256 m) {
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  h = _mm_max_ss(h, _mm_movehdup_ps(h));
  return _mm_cvtss_f32(h);
}

/* 32 floats times id, rounded to nearest even by cvtps (the scalar
 * reference's lrintf) -> 32 int8 in element order, and the sums of
 * elements 0-15 and 16-31. */
__attribute__((target("avx2,fma"))) static inline __attribute__((always_inline)) __m256i q32_avx2(const float *x, __m256 vid,
                                                                                               int *half0, int *half1) {
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  __m256i i0 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x), vid));
  __m256i i1 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8), vid));
  __m256i i2 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 16), vid));
  __m256i i3 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 24), vid));
  /* the sums of elements 0-15 and 16-31: lanes 0 and 4 of sum after two folds */
  __m256i lo = _mm256_add_epi32(i0, i1), hi = _mm256_add_epi32(i2, i3);
  __m256i mix = _mm256_permute2x128_si256(lo, hi, 0x20), mix2 = _mm256_permute2x128_si256(lo, hi, 0x31);
  __m256i sum = _mm256_add_epi32(mix, mix2); /* [lo 4 | hi 4] */
  sum = _mm256_add_epi32(sum, _mm256_shuffle_epi32(sum, 0x4e));
  sum = _mm256_add_epi32(sum, _mm256_shuffle_epi32(sum, 0xb1));
  *half0 = _mm256_extract_epi32(sum, 0);
  *half1 = _mm256_extract_epi32(sum, 4);
  __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
  return _mm256_permutevar8x32_epi32(p, order); /* elements 0..31 in order */
}

/* per256 (cpu_i8.h): one scale a super-block, each 16's sum */
__attribute__((target("avx2,fma"))) static void quantize256_avx2(const float *x, int t0, int t1, wisp_i8_act *a) {
  const int K = a->K, nsb = K / 256;
  for (int t = t0; t < t1; t++)
    for (int k = 0; k < nsb; k++) {
      const float *xk = x + (size_t)t * K + 256 * k;
      __m256 m = amax32_avx2(xk);
      for (int b = 1; b < 8; b++) m = _mm256_max_ps(m, amax32_avx2(xk + 32 * b));
      const float amax = hmax_avx2(m);
      const __m256 vid = _mm256_set1_ps(amax > 0 ? 127.0f / amax : 0.0f);
      int8_t *q = a->q + (size_t)t * K + 256 * k;
      int16_t *qs = a->qs16 + (size_t)t * (K / 16) + 16 * k;
      for (int b = 0; b < 8; b++) {
        int h0, h1;
        _mm256_storeu_si256((__m256i *)(q + 32 * b), q32_avx2(xk + 32 * b, vid, &h0, &h1));
        qs[2 * b] = (int16_t)h0;
        qs[2 * b + 1] = (int16_t)h1;
      }
      a->d256[(size_t)t * nsb + k] = amax / 127.0f;
    }
}

/* One block of 32 floats -> 32 int8 in `layout`, its scale and its sums;
 * the same arithmetic as the scalar reference, so the bytes are
 * identical. */
__attribute__((target("avx2,fma"))) static void quantize_avx2(const float *x, int t0, int t1, wisp_i8_act *a) {
  if (a->per256) {
    quantize256_avx2(x, t0, t1, a);
    return;
  }
  const int K = a->K, nb = K / 32;
  /* per 128-bit lane: even bytes, then odd bytes */
  const __m256i evens_odds = _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15, 0, 2, 4, 6, 8, 10,
                                              12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
  for (int t = t0; t < t1; t++)
    for (int b = 0; b < nb; b++) {
      const float *xb = x + (size_t)t * K + 32 * b;
      const float amax = hmax_avx2(amax32_avx2(xb));
      float d = amax / 127.0f, id = amax > 0 ? 127.0f / amax : 0.0f;
      int half0, half1;
      __m256i p = q32_avx2(xb, _mm256_set1_ps(id), &half0, &half1);
      int8_t *q = a->q + (size_t)t * K;
      if (a->layout == WISP_I8_PAIRED && !((nb & 1) && b == nb - 1)) { /* one block of a pair (cpu_i8.h) */
        p = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(p, evens_odds), 0xd8); /* [evens | odds] */
        int8_t *at = q + 64 * (b >> 1) + 16 * (b & 1);
        _mm_storeu_si128((__m128i *)at, _mm256_castsi256_si128(p));
        _mm_storeu_si128((__m128i *)(at + 32), _mm256_extracti128_si256(p, 1));
      } else {
        if (a->layout == WISP_I8_PAIRED) /* lanes [e0 o0 | e1 o1] -> [e0 e1 | o0 o1] */
          p = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(p, evens_odds), 0xd8);
        _mm256_storeu_si256((__m256i *)(q + 32 * b), p);
      }
      a->d[(size_t)t * nb + b] = d;
      a->ds[(size_t)t * nb + b] = d * (float)(half0 + half1);
      a->qs16[(size_t)t * 2 * nb + 2 * b] = (int16_t)half0;
      a->qs16[(size_t)t * 2 * nb + 2 * b + 1] = (int16_t)half1;
      a->ds16[(size_t)t * 2 * nb + 2 * b] = d * (float)half0;
      a->ds16[(size_t)t * 2 * nb + 2 * b + 1] = d * (float)half1;
    }
}

/* Decode streams each weight once: it asks for the bytes this far ahead of
 * the rows it reads (8 KB: a few rows of a matrix; one tile of four rows
 * ahead was too close to hide the memory's latency). */
#define PREFETCH_BYTES 8192
/* Every decode prefetch goes into L2, not L1. A prefetch to L1 holds one of
 * the core's few L1 miss buffers until its line comes from memory; that
 * capped one AMD EPYC (Zen 4) core at about 10 GB/s, about half of what the
 * same kernels read out of L3. L2 keeps many more misses in flight, and the
 * L1 prefetcher pulls the lines on from L2. One thread, a 262144-row
 * matrix streamed from memory: Q4 x 1152 (170 MB) 17 -> 8.5 ms (two
 * threads 8 -> 4.1), Q6_K x 1536 33 -> 16 ms, Q8_0 x 1152 19 -> 16 ms. */
#define DECODE_PREFETCH_HINT _MM_HINT_T1

/* AVX2: u8 x s8 pairs to int16 (no saturation: |u| <= 128 and |q| <= 127
 * keep a pair within 32512), then pairs of int16 to int32. */
#define SFX avx2
/* acc + the pairwise int16 products of p and s, summed into int32 */
#define IDOT16_ACC(acc, p, s) _mm256_add_epi32((acc), _mm256_madd_epi16((p), (s)))
#define TGT __attribute__((target("avx2,fma,f16c")))
#define IDOT(u, q) _mm256_madd_epi16(_mm256_maddubs_epi16((u), (q)), _mm256_set1_epi16(1))
#define IDOT_ACC(acc, u, q) _mm256_add_epi32((acc), IDOT(u, q))
/* two products summed: the int16 pair sums of both stay within 7620 */
#define IDOT2(u1, q1, u2, q2) \
  _mm256_madd_epi16(_mm256_add_epi16(_mm256_maddubs_epi16((u1), (q1)), _mm256_maddubs_epi16((u2), (q2))), _mm256_set1_epi16(1))
#define TILE_R 2
#define TILE_T 4
#define LANES_T 4
#define LANES_Q8 0
#define LANES16 0
#include "backend/cpu/cpu_i8_body.h"
#undef SFX
#undef TGT
#undef IDOT
#undef IDOT_ACC
#undef IDOT2
#undef IDOT16_ACC
#undef TILE_R
#undef TILE_T
#undef LANES_T
#undef LANES_Q8
#undef LANES16

#define SFX avxvnni
/* acc + the pairwise int16 products of p and s, summed into int32 */
#define IDOT16_ACC(acc, p, s) _mm256_dpwssd_avx_epi32((acc), (p), (s))
#define TGT __attribute__((target("avx2,fma,f16c,avxvnni")))
#define IDOT(u, q) _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), (u), (q))
#define IDOT_ACC(acc, u, q) _mm256_dpbusd_avx_epi32((acc), (u), (q))
#define IDOT2(u1, q1, u2, q2) _mm256_dpbusd_avx_epi32(IDOT(u1, q1), (u2), (q2))
#define TILE_R 2
#define TILE_T 4
#define LANES_T 4
#define LANES_Q8 1
#define LANES16 0
#include "backend/cpu/cpu_i8_body.h"
#undef SFX
#undef TGT
#undef IDOT
#undef IDOT_ACC
#undef IDOT2
#undef IDOT16_ACC
#undef TILE_R
#undef TILE_T
#undef LANES_T
#undef LANES_Q8
#undef LANES16

#define SFX avx512vnni
/* acc + the pairwise int16 products of p and s, summed into int32 */
#define IDOT16_ACC(acc, p, s) _mm256_dpwssd_epi32((acc), (p), (s))
#define TGT __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))
#define IDOT(u, q) _mm256_dpbusd_epi32(_mm256_setzero_si256(), (u), (q))
#define IDOT_ACC(acc, u, q) _mm256_dpbusd_epi32((acc), (u), (q))
#define IDOT2(u1, q1, u2, q2) _mm256_dpbusd_epi32(IDOT(u1, q1), (u2), (q2))
#define TILE_R 4
#define TILE_T 4
#define LANES_T 8
#define LANES_Q8 1
#define LANES16 1
#include "backend/cpu/cpu_i8_body.h"
#undef SFX
#undef TGT
#undef IDOT
#undef IDOT_ACC
#undef IDOT2
#undef IDOT16_ACC
#undef TILE_R
#undef TILE_T
#undef LANES_T
#undef LANES_Q8
#undef LANES16

const wisp_i8_kernels *wisp_i8_kernels_avx2(void) { return &kernels_avx2; }
const wisp_i8_kernels *wisp_i8_kernels_avxvnni(void) { return &kernels_avxvnni; }
const wisp_i8_kernels *wisp_i8_kernels_avx512vnni(void) { return &kernels_avx512vnni; }

#else
const wisp_i8_kernels *wisp_i8_kernels_avx2(void) { return NULL; }
const wisp_i8_kernels *wisp_i8_kernels_avxvnni(void) { return NULL; }
const wisp_i8_kernels *wisp_i8_kernels_avx512vnni(void) { return NULL; }
#endif
