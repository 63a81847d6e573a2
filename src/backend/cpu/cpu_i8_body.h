/* The body of one x86 integer kernel set (cpu_i8.h), included by
 * cpu_i8_x86.c once per instruction set with these macros defined:
 *   SFX        suffix of the function names (avx2, avxvnni, avx512vnni)
 *   TGT        the function attribute naming the target features
 *   IDOT(u, q) 8 int32 lanes, each the sum of 4 products u8(u) * s8(q)
 *   IDOT2(u1, q1, u2, q2)  IDOT(u1, q1) + IDOT(u2, q2)
 *   PREFETCH_BYTES  how far ahead of the rows being read decode prefetches
 *   TILE_R, TILE_T  rows x tokens of one prefill tile (registers permitting)
 * Every function computes the integers of cpu_i8.h exactly; only the
 * order of the f32 sums differs from the scalar reference. */

#define CAT2(a, b) a##_##b
#define CAT(a, b) CAT2(a, b)
#define FN(x) CAT(x, SFX)

enum { FN(Q4) = 0, FN(Q4Z) = 1, FN(Q4K) = 2, FN(Q8) = 3, FN(Q5) = 4, FN(Q41) = 5, FN(Q51) = 6, FN(Q5K) = 7 };
/* the types with a scale per 16 values (cpu_i8.h) */
enum { FN(Q6K) = 8, FN(Q3K) = 9, FN(Q2K) = 10 };
#define PER16(type) ((type) >= FN(Q6K))

/* Bytes of a block of 256 (the K-quants) or 32 (the others). */
TGT static inline __attribute__((always_inline)) size_t FN(block_bytes)(const int type) {
  switch (type) {
    case FN(Q4K): return WISP_Q4K_BYTES;
    case FN(Q5K): return WISP_Q5K_BYTES;
    case FN(Q6K): return WISP_Q6K_BYTES;
    case FN(Q3K): return WISP_Q3K_BYTES;
    case FN(Q2K): return WISP_Q2K_BYTES;
    case FN(Q5): return WISP_Q5_0_BYTES;
    case FN(Q41): return WISP_Q4_1_BYTES;
    case FN(Q51): return WISP_Q5_1_BYTES;
    default: return WISP_Q8_0_BYTES;
  }
}
#define KQUANT(type) ((type) == FN(Q4K) || (type) == FN(Q5K) || PER16(type))

/* Bytes of one weight row of K columns. */
TGT static inline __attribute__((always_inline)) size_t FN(row_bytes)(const int type, int K) {
  return type <= FN(Q4Z) ? (size_t)K / 2 : (size_t)(K / (KQUANT(type) ? 256 : 32)) * FN(block_bytes)(type);
}

/* The 32 weight integers of block b of a row, in the activation layout:
 * Q4 (PAIRED) low nibbles then high nibbles of its 16 bytes; Q4_K the low
 * or high nibbles of the 32 bytes its sub-block shares with its neighbour;
 * Q5_0 (NATURAL) its nibbles (element j low, j + 16 high in byte j) with
 * bit e of its 32-bit qh as 16 (0..31); Q8_0 the signed bytes. */
/* Bits 0..1 of each byte of v >> sh (sh 0..6, a 16-bit shift: the bits
 * taken stay within their byte). */
TGT static inline __attribute__((always_inline)) __m256i FN(bits2)(__m256i v, int sh) {
  return _mm256_and_si256(_mm256_srl_epi16(v, _mm_cvtsi32_si128(sh)), _mm256_set1_epi8(3));
}

/* Bit `bit` (0..7) of each byte of v, moved to bit `to` (2, 4 or 5). */
TGT static inline __attribute__((always_inline)) __m256i FN(bit_to)(__m256i v, int bit, int to) {
  const __m256i m = _mm256_set1_epi8((char)(1 << to));
  if (bit <= to) return _mm256_and_si256(_mm256_sll_epi16(v, _mm_cvtsi32_si128(to - bit)), m);
  return _mm256_and_si256(_mm256_srl_epi16(v, _mm_cvtsi32_si128(bit - to)), m);
}

/* The 32 unsigned weights u of block jb (0..7) of a super-block of the
 * per-16 types, in element order (layouts: format/qblocks.h). Q6_K: a
 * nibble of ql and two bits of qh (0..63); Q3_K: two bits of qs and a bit
 * of hmask (0..7; the value is u - 4); Q2_K: two bits of qs (0..3). */
TGT static inline __attribute__((always_inline)) __m256i FN(unpack_k16)(const int type, const uint8_t *blk, int jb) {
  const int h = jb >> 2, k = jb & 3;
  if (type == FN(Q6K)) {
    const __m256i ql = _mm256_loadu_si256((const __m256i *)(blk + 64 * h + 32 * (k & 1)));
    const __m256i qh = _mm256_loadu_si256((const __m256i *)(blk + 128 + 32 * h));
    const __m256i nib = _mm256_and_si256(k < 2 ? ql : _mm256_srli_epi16(ql, 4), _mm256_set1_epi8(15));
    const __m256i top = _mm256_and_si256(_mm256_sll_epi16(FN(bits2)(qh, 2 * k), _mm_cvtsi32_si128(4)), _mm256_set1_epi8(0x30));
    return _mm256_or_si256(nib, top);
  }
  const __m256i qs = _mm256_loadu_si256((const __m256i *)(blk + (type == FN(Q3K) ? 32 : 16) + 32 * h));
  const __m256i low = FN(bits2)(qs, 2 * k);
  if (type == FN(Q2K)) return low;
  return _mm256_or_si256(low, FN(bit_to)(_mm256_loadu_si256((const __m256i *)blk), 4 * h + k, 2));
}

TGT static inline __attribute__((always_inline)) __m256i FN(unpack)(const int type, const uint8_t *row, int b) {
  const __m256i m4 = _mm256_set1_epi8(15);
  if (PER16(type)) return FN(unpack_k16)(type, row + (size_t)(b >> 3) * FN(block_bytes)(type), b & 7);
  if (type == FN(Q5K)) { /* Q4_K's nibbles with bit j of qh[l] as 16 */
    const uint8_t *blk = row + (size_t)(b >> 3) * WISP_Q5K_BYTES;
    const int j = b & 7;
    __m256i bytes = _mm256_loadu_si256((const __m256i *)(blk + 48 + 32 * (j >> 1)));
    __m256i nib = _mm256_and_si256(j & 1 ? _mm256_srli_epi16(bytes, 4) : bytes, m4);
    return _mm256_or_si256(nib, FN(bit_to)(_mm256_loadu_si256((const __m256i *)(blk + 16)), j, 4));
  }
  if (type == FN(Q41)) { /* d, m, then 16 bytes of nibbles as Q5_0's */
    __m128i bytes = _mm_loadu_si128((const __m128i *)(row + (size_t)b * WISP_Q4_1_BYTES + 4));
    return _mm256_and_si256(_mm256_inserti128_si256(_mm256_castsi128_si256(bytes), _mm_srli_epi16(bytes, 4), 1), m4);
  }
  if (type == FN(Q4) || type == FN(Q4Z)) {
    __m128i bytes = _mm_loadu_si128((const __m128i *)(row + 16 * b));
    __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(bytes), _mm_srli_epi16(bytes, 4), 1);
    return _mm256_and_si256(v, m4);
  }
  if (type == FN(Q4K)) {
    const uint8_t *qs = row + (size_t)(b >> 3) * WISP_Q4K_BYTES + 16 + 32 * ((b & 7) >> 1);
    __m256i bytes = _mm256_loadu_si256((const __m256i *)qs);
    return _mm256_and_si256(b & 1 ? _mm256_srli_epi16(bytes, 4) : bytes, m4);
  }
  if (type == FN(Q5) || type == FN(Q51)) { /* Q5_1: m between d and qh */
    const int head = type == FN(Q51) ? 2 : 0;
    const uint8_t *blk = row + (size_t)b * FN(block_bytes)(type);
    uint32_t qh;
    memcpy(&qh, blk + 2 + head, 4);
    __m128i bytes = _mm_loadu_si128((const __m128i *)(blk + 6 + head));
    __m256i v = _mm256_and_si256(_mm256_inserti128_si256(_mm256_castsi128_si256(bytes), _mm_srli_epi16(bytes, 4), 1), m4);
    /* byte e <- byte e / 8 of qh, then its bit e % 8 -> 16 */
    const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3,
                                            3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    __m256i h = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32((int)qh), spread), bit);
    h = _mm256_and_si256(_mm256_cmpeq_epi8(h, bit), _mm256_set1_epi8(16));
    return _mm256_or_si256(v, h);
  }
  return _mm256_loadu_si256((const __m256i *)(row + (size_t)b * WISP_Q8_0_BYTES + 2));
}

TGT static inline __attribute__((always_inline)) float FN(hsum)(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

/* sum_b o[b] * ds[b] */
TGT static inline float FN(dot_f32)(const float *o, const float *ds, int nb) {
  __m256 acc = _mm256_setzero_ps();
  int b = 0;
  for (; b + 8 <= nb; b += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(o + b), _mm256_loadu_ps(ds + b), acc);
  float s = FN(hsum)(acc);
  for (; b < nb; b++) s += o[b] * ds[b];
  return s;
}

/* The 8 scales d sc_j and offsets dmin m_j of one Q4_K super-block: the
 * twelve bytes of 6-bit values unpacked four at a time in 32-bit words
 * (bytes 0-3 hold sc 0-3 and the top bits of sc 4-7, bytes 4-7 the same
 * for m, bytes 8-11 the low four bits of sc 4-7 and of m 4-7). */
TGT static inline __attribute__((always_inline)) void FN(q4k_scales)(const uint8_t *blk, __m256 *s, __m256 *o) {
  uint16_t hd, hm;
  uint32_t u0, u1, u2;
  memcpy(&hd, blk, 2);
  memcpy(&hm, blk + 2, 2);
  memcpy(&u0, blk + 4, 4);
  memcpy(&u1, blk + 8, 4);
  memcpy(&u2, blk + 12, 4);
  uint64_t sc = (u0 & 0x3f3f3f3fu) | (uint64_t)((u2 & 0x0f0f0f0fu) | (u0 >> 2 & 0x30303030u)) << 32;
  uint64_t mn = (u1 & 0x3f3f3f3fu) | (uint64_t)((u2 >> 4 & 0x0f0f0f0fu) | (u1 >> 2 & 0x30303030u)) << 32;
  *s = _mm256_mul_ps(_mm256_set1_ps(_cvtsh_ss(hd)), _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)sc))));
  *o = _mm256_mul_ps(_mm256_set1_ps(_cvtsh_ss(hm)), _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)mn))));
}

/* n f16 values at h as f32 into out (exact: every f16 is an f32). */
TGT static inline void FN(halves)(const uint16_t *h, int n, float *out) {
  int b = 0;
  for (; b + 8 <= n; b += 8) _mm256_storeu_ps(out + b, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + b))));
  for (; b < n; b++) out[b] = _cvtsh_ss(h[b]);
}

/* The block scales s[] and offsets o[] of one row (cpu_i8.h). Q4 / Q4Z's
 * s are the f16 copy s16 widened (Q4's o = 8 s is applied in the tile);
 * Q4Z's o = zp * s, Q4_K's s = d sc and o = dmin m, Q8_0's s = d (o = 0).
 * *s_out points at the scales to use. */
TGT static inline __attribute__((always_inline)) void FN(row_scales)(const int type, const wisp_matrix *W,
                                                                    const uint16_t *s16, int row, float *s, float *o,
                                                                    const float **s_out) {
  const int nb = W->cols / 32;
  *s_out = s;
  if (type == FN(Q4)) {
    FN(halves)(s16 + (size_t)row * nb, nb, s);
    return;
  }
  if (type == FN(Q4Z)) {
    FN(halves)(s16 + (size_t)row * nb, nb, s);
    const float *sc = s;
    size_t first = (size_t)row * nb;
    int b = 0;
    if (!(first & 1)) /* whole zero-point bytes: 8 blocks from 4 bytes */
      for (; b + 8 <= nb; b += 8) {
        uint32_t four;
        memcpy(&four, W->zp + ((first + b) >> 1), 4);
        __m128i bytes = _mm_cvtsi32_si128((int)four);
        __m128i lo = _mm_and_si128(bytes, _mm_set1_epi8(15)), hi = _mm_and_si128(_mm_srli_epi16(bytes, 4), _mm_set1_epi8(15));
        __m256 z = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_unpacklo_epi8(lo, hi)));
        _mm256_storeu_ps(o + b, _mm256_mul_ps(z, _mm256_loadu_ps(sc + b)));
      }
    for (; b < nb; b++) o[b] = (float)wisp_q4z_zero_point(W->zp, first + b) * sc[b];
    return;
  }
  if (type == FN(Q4K) || type == FN(Q5K)) { /* the same head: d, dmin, 12 bytes of sc and m */
    const int nsb = W->cols / WISP_Q4K_BLOCK;
    const size_t bb = FN(block_bytes)(type);
    const uint8_t *blk = W->q + (size_t)row * nsb * bb;
    for (int k = 0; k < nsb; k++, blk += bb) {
      __m256 sk, ok;
      FN(q4k_scales)(blk, &sk, &ok);
      _mm256_storeu_ps(s + 8 * k, sk);
      _mm256_storeu_ps(o + 8 * k, ok);
    }
    return;
  }
  /* Q5_0, Q8_0, Q4_1, Q5_1: the f16 d at the head of each block; Q5_0's
   * w = d (u - 16), Q4_1's and Q5_1's d u + m (o = -m) */
  const size_t bb = FN(block_bytes)(type);
  const uint8_t *blk = W->q + (size_t)row * nb * bb;
  for (int b = 0; b < nb; b++) {
    uint16_t h;
    memcpy(&h, blk + (size_t)b * bb, 2);
    s[b] = _cvtsh_ss(h);
    if (type == FN(Q5)) o[b] = 16.0f * s[b];
    if (type == FN(Q41) || type == FN(Q51)) {
      memcpy(&h, blk + (size_t)b * bb + 2, 2);
      o[b] = -_cvtsh_ss(h);
    }
  }
}

/* R rows (from `row`) x T tokens (from `t`); s/o hold the rows' block
 * scales and offsets (R x nb each). R <= 4, T <= 4, both constants after
 * inlining so that the accumulators stay in registers. */
TGT static inline __attribute__((always_inline)) void FN(tile)(const int type, const int R, const int T,
                                                              const wisp_matrix *W, int row, const wisp_i8_act *a,
                                                              int t, float *y, size_t ldy, int accumulate,
                                                              const float *const *s, const float *o) {
  const int K = W->cols, nb = K / 32;
  const size_t row_bytes = FN(row_bytes)(type, K);
  const uint8_t *rq[4];
#pragma GCC unroll 4
  for (int i = 0; i < R; i++) rq[i] = W->q + (size_t)(row + i) * row_bytes;
  __m256 acc[4][4];
#pragma GCC unroll 4
  for (int i = 0; i < R; i++)
#pragma GCC unroll 4
    for (int j = 0; j < T; j++) acc[i][j] = _mm256_setzero_ps();
  const int8_t *aq = a->q + (size_t)t * K;
  const float *ad = a->d + (size_t)t * nb;
  for (int b = 0; b < nb; b++) {
    __m256i u[4];
    if (T == 1 && (b & 1) == 0) /* decode streams the weights once: ask for the next tile's now */
#pragma GCC unroll 4
      for (int i = 0; i < R; i++) _mm_prefetch((const char *)(rq[i] + (size_t)R * row_bytes + (size_t)b * (row_bytes / nb)), DECODE_PREFETCH_HINT);
#pragma GCC unroll 4
    for (int i = 0; i < R; i++) u[i] = FN(unpack)(type, rq[i], b);
#pragma GCC unroll 4
    for (int j = 0; j < T; j++) {
      __m256i q = _mm256_loadu_si256((const __m256i *)(aq + (size_t)j * K + 32 * b));
      __m256 dj = _mm256_broadcast_ss(ad + (size_t)j * nb + b);
#pragma GCC unroll 4
      for (int i = 0; i < R; i++) {
        __m256i p = type == FN(Q8) ? IDOT(_mm256_sign_epi8(u[i], u[i]), _mm256_sign_epi8(q, u[i])) : IDOT(u[i], q);
        __m256 sc = _mm256_mul_ps(_mm256_broadcast_ss(s[i] + b), dj);
        acc[i][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), sc, acc[i][j]);
      }
    }
  }
#pragma GCC unroll 4
  for (int j = 0; j < T; j++)
#pragma GCC unroll 4
    for (int i = 0; i < R; i++) {
      float v = FN(hsum)(acc[i][j]);
      if (type == FN(Q4)) v -= 8.0f * FN(dot_f32)(s[i], a->ds + (size_t)(t + j) * nb, nb);
      else if (type != FN(Q8)) v -= FN(dot_f32)(o + (size_t)i * nb, a->ds + (size_t)(t + j) * nb, nb);
      float *dst = y + (size_t)j * ldy + i;
      *dst = accumulate ? *dst + v : v;
    }
}


/* ---- prefill: eight rows in the eight lanes ----
 * A group of 8 rows is transposed once into scratch so that one 32-byte
 * vector holds 4 consecutive weights of each of the 8 rows; a token's 4
 * matching int8 values are broadcast to all lanes, and one IDOT_ACC then
 * advances 8 rows by 4 elements. The group's weights stay in L1 while every
 * token of the call passes over them. Activations are NATURAL; Q8_0's
 * signed weights are stored as w + 128 (offset o = 128 s), which the
 * non-saturating VNNI products take (AVX2's maddubs would saturate, so
 * AVX2 keeps Q8_0 on the row tiles). */

/* 8 rows x 8 dwords -> 8 vectors, vector c holding dword c of each row. */
TGT static inline __attribute__((always_inline)) void FN(transpose8)(__m256i r[8]) {
  __m256i t[8], u[8];
  for (int i = 0; i < 4; i++) {
    t[2 * i] = _mm256_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  for (int h = 0; h < 2; h++) { /* rows 0-3, rows 4-7 */
    u[4 * h + 0] = _mm256_unpacklo_epi64(t[4 * h + 0], t[4 * h + 2]);
    u[4 * h + 1] = _mm256_unpackhi_epi64(t[4 * h + 0], t[4 * h + 2]);
    u[4 * h + 2] = _mm256_unpacklo_epi64(t[4 * h + 1], t[4 * h + 3]);
    u[4 * h + 3] = _mm256_unpackhi_epi64(t[4 * h + 1], t[4 * h + 3]);
  }
  for (int c = 0; c < 4; c++) {
    r[c] = _mm256_permute2x128_si256(u[c], u[4 + c], 0x20);
    r[c + 4] = _mm256_permute2x128_si256(u[c], u[4 + c], 0x31);
  }
}

/* The 32 weights of block b of a row as unsigned bytes in element order. */
TGT static inline __attribute__((always_inline)) __m256i FN(unpack_natural)(const int type, const uint8_t *row, int b) {
  if (type == FN(Q4) || type == FN(Q4Z)) {
    __m128i bytes = _mm_loadu_si128((const __m128i *)(row + 16 * b));
    __m128i m4 = _mm_set1_epi8(15);
    __m128i lo = _mm_and_si128(bytes, m4), hi = _mm_and_si128(_mm_srli_epi16(bytes, 4), m4);
    return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_unpacklo_epi8(lo, hi)), _mm_unpackhi_epi8(lo, hi), 1);
  }
  if (type == FN(Q8)) return _mm256_xor_si256(FN(unpack)(type, row, b), _mm256_set1_epi8((char)0x80));
  return FN(unpack)(type, row, b);
}

/* Q3_K's sub-scales 8h..8h+7 (-32..31) as int32: sub-block i = 8h + k
 * takes a nibble of byte k of its scale bytes (h = 0 the low one, 1 the
 * high one) and, as its top two bits, bits 2 (i / 4) of byte 8 + k % 4:
 * one variable shift of those four bytes gives all eight. */
TGT static inline __attribute__((always_inline)) __m256i FN(q3k_sc8)(const uint8_t *blk, int h) {
  uint64_t low8;
  uint32_t top4;
  memcpy(&low8, blk + 96, 8);
  memcpy(&top4, blk + 104, 4);
  __m256i low = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)low8));
  low = h ? _mm256_srli_epi32(low, 4) : _mm256_and_si256(low, _mm256_set1_epi32(15));
  const __m256i shift = _mm256_add_epi32(_mm256_setr_epi32(0, 8, 16, 24, 2, 10, 18, 26), _mm256_set1_epi32(4 * h));
  const __m256i top = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)top4), shift), _mm256_set1_epi32(3));
  return _mm256_sub_epi32(_mm256_or_si256(low, _mm256_slli_epi32(top, 4)), _mm256_set1_epi32(32));
}

/* The integer sub-scales sc[16] and (Q2_K) mins m[16] of a per-16
 * super-block, with its d and dmin (0 where the type has none). */
TGT static inline __attribute__((always_inline)) void FN(sub_scales)(const int type, const uint8_t *blk, int32_t *sc,
                                                                    int32_t *m, float *d, float *dmin) {
  uint16_t h;
  *dmin = 0;
  if (type == FN(Q6K)) {
    for (int i = 0; i < 16; i++) sc[i] = (int8_t)blk[192 + i], m[i] = 0;
    memcpy(&h, blk + 208, 2);
    *d = _cvtsh_ss(h);
  } else if (type == FN(Q3K)) {
    _mm256_storeu_si256((__m256i *)sc, FN(q3k_sc8)(blk, 0));
    _mm256_storeu_si256((__m256i *)(sc + 8), FN(q3k_sc8)(blk, 1));
    memset(m, 0, 16 * sizeof *m);
    memcpy(&h, blk + 108, 2);
    *d = _cvtsh_ss(h);
  } else { /* Q2_K: scale in the low nibble, min in the high one */
    for (int i = 0; i < 16; i++) sc[i] = blk[i] & 15, m[i] = blk[i] >> 4;
    memcpy(&h, blk + 80, 2);
    *d = _cvtsh_ss(h);
    memcpy(&h, blk + 82, 2);
    *dmin = _cvtsh_ss(h);
  }
}

/* The zero of a per-16 type: its unsigned u minus this is the value. */
#define ZERO16(type) ((type) == FN(Q6K) ? 32 : (type) == FN(Q3K) ? 4 : 0)

/* Q3_K and Q2_K prefill on the one-scale lanes (VNNI; AVX2 Q2_K too): a
 * half's integer sub-scale fits into its weights' bytes. Q3_K's sc (u - 4)
 * is in -124..128, stored as sc (u - 4) + 124 (0..252: w = d (byte - 124),
 * one scale d and one offset 124 d a block); Q2_K's sc u is in 0..45
 * (w = d byte - dmin m: one scale d, the two halves' offsets dmin m with
 * the halves' activation sums, ds16). AVX2's pairwise maddubs would
 * saturate on Q3_K's bytes: there it takes the two-scale lanes. */
#define PRESCALED(type) ((type) == FN(Q2K) || ((type) == FN(Q3K) && LANES_Q8))

/* The 32 bytes of block b of a PRESCALED type's row, each half's values
 * times its sub-scale sc[0], sc[1] (Q3_K: of u - 4, plus 124; every
 * result fits a byte). */
TGT static inline __attribute__((always_inline)) __m256i FN(unpack_scaled)(const int type, const uint8_t *row, int b,
                                                                          const int8_t *sc) {
  /* u is 0..7: each half's eight results are a table (in its 128-bit
   * lane, the lane of its 16 values) that one byte shuffle looks up */
  const __m256i k = type == FN(Q3K) ? _mm256_setr_epi16(-4, -3, -2, -1, 0, 1, 2, 3, -4, -3, -2, -1, 0, 1, 2, 3)
                                    : _mm256_setr_epi16(0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i scv = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_set1_epi16(sc[0])), _mm_set1_epi16(sc[1]), 1);
  const __m256i t16 = _mm256_add_epi16(_mm256_mullo_epi16(scv, k), _mm256_set1_epi16(type == FN(Q3K) ? 124 : 0));
  return _mm256_shuffle_epi8(_mm256_packus_epi16(t16, t16), FN(unpack)(type, row, b));
}

/* Packs rows row0..row0+7 (clamped to last) into ws (nb x 8 vectors of 32
 * bytes, `vstride` bytes apart), their scales and offsets into S, O (nb
 * groups of 8 floats, `lstride` floats apart; Q2_K two offsets a block,
 * 2 lstride apart). tmp holds 6 nb floats. */
TGT static inline __attribute__((always_inline)) void FN(pack8)(const int type, const wisp_matrix *W,
                                                               const uint16_t *s16, int row0, int last, uint8_t *ws,
                                                               float *S, float *O, float *tmp, const int vstride,
                                                               const int lstride) {
  const int K = W->cols, nb = K / 32;
  const size_t row_bytes = FN(row_bytes)(type, K);
  const uint8_t *rq[8];
  int8_t *sc = (int8_t *)(tmp + 2 * (size_t)nb); /* PRESCALED: the 8 rows' sub-scales, [8][2 nb] */
  for (int k = 0; k < 8; k++) {
    int r = row0 + k > last ? last : row0 + k;
    rq[k] = W->q + (size_t)r * row_bytes;
    if (PRESCALED(type)) {
      for (int sb = 0; sb < nb / 8; sb++) {
        int32_t isc[16], im[16];
        float d, dmin;
        FN(sub_scales)(type, rq[k] + (size_t)sb * FN(block_bytes)(type), isc, im, &d, &dmin);
        for (int jb = 0; jb < 8; jb++) {
          const size_t b = (size_t)8 * sb + jb;
          S[lstride * b + k] = d;
          for (int h = 0; h < 2; h++) sc[(size_t)k * 2 * nb + 2 * b + h] = (int8_t)isc[2 * jb + h];
          if (type == FN(Q3K)) O[lstride * b + k] = 124.0f * d;
          else
            for (int h = 0; h < 2; h++) O[2 * lstride * b + (size_t)h * lstride + k] = dmin * (float)im[2 * jb + h];
        }
      }
      continue;
    }
    const float *sp;
    FN(row_scales)(type, W, s16, r, tmp, tmp + nb, &sp);
    for (int b = 0; b < nb; b++) {
      S[(size_t)lstride * b + k] = sp[b];
      O[(size_t)lstride * b + k] = type == FN(Q4) ? 8.0f * sp[b] : type == FN(Q8) ? 128.0f * sp[b] : tmp[nb + b];
    }
  }
  for (int b = 0; b < nb; b++) {
    __m256i v[8];
    for (int k = 0; k < 8; k++)
      v[k] = PRESCALED(type) ? FN(unpack_scaled)(type, rq[k], b, sc + (size_t)k * 2 * nb + 2 * b)
                             : FN(unpack_natural)(type, rq[k], b);
    FN(transpose8)(v);
    for (int c = 0; c < 8; c++) _mm256_storeu_si256((__m256i *)(ws + ((size_t)b * 8 + c) * vstride), v[c]);
  }
}

/* T tokens (from t) x the packed group; writes lanes < nlanes. */
TGT static inline __attribute__((always_inline)) void FN(lanes_tile)(const int oh, const int T, int nb, const uint8_t *ws,
                                                                    const float *S, const float *O,
                                                                    const wisp_i8_act *a, int t, float *y, size_t ldy,
                                                                    int nlanes, int accumulate) {
  const int K = nb * 32;
  __m256 acc[8];
#pragma GCC unroll 8
  for (int j = 0; j < T; j++) acc[j] = _mm256_setzero_ps();
  for (int b = 0; b < nb; b++) {
    __m256i ia[8];
#pragma GCC unroll 8
    for (int j = 0; j < T; j++) ia[j] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int c = 0; c < 8; c++) {
      __m256i w = _mm256_loadu_si256((const __m256i *)(ws + ((size_t)b * 8 + c) * 32));
#pragma GCC unroll 8
      for (int j = 0; j < T; j++) {
        int32_t four;
        memcpy(&four, a->q + (size_t)(t + j) * K + 32 * b + 4 * c, 4);
        ia[j] = IDOT_ACC(ia[j], w, _mm256_set1_epi32(four));
      }
    }
    __m256 sb = _mm256_loadu_ps(S + 8 * b), ob = _mm256_loadu_ps(O + 8 * oh * b);
#pragma GCC unroll 8
    for (int j = 0; j < T; j++) {
      const size_t at = (size_t)(t + j) * nb + b;
      acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ia[j]), _mm256_mul_ps(sb, _mm256_broadcast_ss(a->d + at)), acc[j]);
      if (oh == 2) { /* an offset a half (Q2_K's mins) */
        acc[j] = _mm256_fnmadd_ps(ob, _mm256_broadcast_ss(a->ds16 + 2 * at), acc[j]);
        acc[j] = _mm256_fnmadd_ps(_mm256_loadu_ps(O + 16 * b + 8), _mm256_broadcast_ss(a->ds16 + 2 * at + 1), acc[j]);
      } else {
        acc[j] = _mm256_fnmadd_ps(ob, _mm256_broadcast_ss(a->ds + at), acc[j]);
      }
    }
  }
#pragma GCC unroll 8
  for (int j = 0; j < T; j++) {
    float *dst = y + (size_t)j * ldy;
    if (nlanes == 8) {
      __m256 v = accumulate ? _mm256_add_ps(acc[j], _mm256_loadu_ps(dst)) : acc[j];
      _mm256_storeu_ps(dst, v);
    } else {
      float v[8];
      _mm256_storeu_ps(v, acc[j]);
      for (int k = 0; k < nlanes; k++) dst[k] = accumulate ? dst[k] + v[k] : v[k];
    }
  }
}

TGT static inline __attribute__((always_inline)) void FN(lanes)(const int type, const wisp_matrix *W,
                                                               const uint16_t *s16, int r0, int nr,
                                                               const wisp_i8_act *a, int t0, int nt, float *y,
                                                               size_t ldy, int accumulate, float *scratch) {
  const int nb = W->cols / 32, oh = type == FN(Q2K) ? 2 : 1;
  float *S = scratch, *O = S + 8 * (size_t)nb, *tmp = O + 16 * (size_t)nb;
  uint8_t *ws = (uint8_t *)(tmp + 6 * (size_t)nb);
  for (int g = 0; g < nr; g += 8) {
    const int nl = nr - g < 8 ? nr - g : 8;
    FN(pack8)(type, W, s16, r0 + g, r0 + nr - 1, ws, S, O, tmp, 32, 8);
    int t = 0;
    for (; t + LANES_T <= nt; t += LANES_T)
      FN(lanes_tile)(oh, LANES_T, nb, ws, S, O, a, t0 + t, y + (size_t)t * ldy + g, ldy, nl, accumulate);
    for (; t < nt; t++) FN(lanes_tile)(oh, 1, nb, ws, S, O, a, t0 + t, y + (size_t)t * ldy + g, ldy, nl, accumulate);
  }
}

#if LANES16
/* AVX-512: sixteen rows in the sixteen lanes of a 512-bit vector, packed as
 * two groups of eight side by side; otherwise as the eight-lane path. */
TGT static inline __attribute__((always_inline)) void FN(lanes16_tile)(const int oh, const int T, int nb, const uint8_t *ws,
                                                                      const float *S, const float *O,
                                                                      const wisp_i8_act *a, int t, float *y,
                                                                      size_t ldy, int nlanes, int accumulate) {
  const int K = nb * 32;
  __m512 acc[8];
#pragma GCC unroll 8
  for (int j = 0; j < T; j++) acc[j] = _mm512_setzero_ps();
  for (int b = 0; b < nb; b++) {
    __m512i ia[8];
#pragma GCC unroll 8
    for (int j = 0; j < T; j++) ia[j] = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int c = 0; c < 8; c++) {
      __m512i w = _mm512_loadu_si512((const void *)(ws + ((size_t)b * 8 + c) * 64));
#pragma GCC unroll 8
      for (int j = 0; j < T; j++) {
        int32_t four;
        memcpy(&four, a->q + (size_t)(t + j) * K + 32 * b + 4 * c, 4);
        ia[j] = _mm512_dpbusd_epi32(ia[j], w, _mm512_set1_epi32(four));
      }
    }
    __m512 sb = _mm512_loadu_ps(S + 16 * b), ob = _mm512_loadu_ps(O + 16 * oh * b);
#pragma GCC unroll 8
    for (int j = 0; j < T; j++) {
      const size_t at = (size_t)(t + j) * nb + b;
      acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ia[j]), _mm512_mul_ps(sb, _mm512_set1_ps(a->d[at])), acc[j]);
      if (oh == 2) { /* an offset a half (Q2_K's mins) */
        acc[j] = _mm512_fnmadd_ps(ob, _mm512_set1_ps(a->ds16[2 * at]), acc[j]);
        acc[j] = _mm512_fnmadd_ps(_mm512_loadu_ps(O + 32 * b + 16), _mm512_set1_ps(a->ds16[2 * at + 1]), acc[j]);
      } else {
        acc[j] = _mm512_fnmadd_ps(ob, _mm512_set1_ps(a->ds[at]), acc[j]);
      }
    }
  }
  const __mmask16 keep = (__mmask16)((1u << nlanes) - 1);
#pragma GCC unroll 8
  for (int j = 0; j < T; j++) {
    float *dst = y + (size_t)j * ldy;
    __m512 v = accumulate ? _mm512_add_ps(acc[j], _mm512_maskz_loadu_ps(keep, dst)) : acc[j];
    _mm512_mask_storeu_ps(dst, keep, v);
  }
}

TGT static inline __attribute__((always_inline)) void FN(lanes16)(const int type, const wisp_matrix *W,
                                                                 const uint16_t *s16, int r0, int nr,
                                                                 const wisp_i8_act *a, int t0, int nt, float *y,
                                                                 size_t ldy, int accumulate, float *scratch) {
  const int nb = W->cols / 32, oh = type == FN(Q2K) ? 2 : 1;
  float *S = scratch, *O = S + 16 * (size_t)nb, *tmp = O + 32 * (size_t)nb;
  uint8_t *ws = (uint8_t *)(tmp + 6 * (size_t)nb);
  for (int g = 0; g < nr; g += 16) {
    const int nl = nr - g < 16 ? nr - g : 16;
    FN(pack8)(type, W, s16, r0 + g, r0 + nr - 1, ws, S, O, tmp, 64, 16);
    FN(pack8)(type, W, s16, r0 + g + 8, r0 + nr - 1, ws + 32, S + 8, O + 8, tmp, 64, 16);
    int t = 0;
    for (; t + 8 <= nt; t += 8)
      FN(lanes16_tile)(oh, 8, nb, ws, S, O, a, t0 + t, y + (size_t)t * ldy + g, ldy, nl, accumulate);
    for (; t < nt; t++) FN(lanes16_tile)(oh, 1, nb, ws, S, O, a, t0 + t, y + (size_t)t * ldy + g, ldy, nl, accumulate);
  }
}
#define LANES_FN FN(lanes16)
#else
#define LANES_FN FN(lanes)
#endif

/* ---- the per-16 types (Q6_K, Q3_K, Q2_K): two scales a block ----
 * A block of 32 holds two halves of 16 with a small integer scale each
 * (Q2_K also a min each). The integer dots of the halves are kept apart
 * (prefill: the first four of a block's eight 4-element steps, then the
 * last four; decode: lanes 0-3 and 4-7 of a block's product), multiplied
 * by their integer sub-scales and added in integers, so that a block
 * still takes one f32 scale (the super-block's d times the token's) as the
 * one-scale types do. The zero z of Q6_K (32) and Q3_K (4) goes into the
 * integers too: prefill starts a half's dot at -z times the token's sum of
 * those 16 values (qs16), so it ends as the dot of the signed values;
 * decode subtracts z sum_h s_h ds16_h once a row. Q2_K's mins take
 * dmin m_h ds16_h in f32. */

/* Packs rows row0..row0+7 (clamped to last) of a per-16 matrix into ws as
 * pack8 does, and per lane and block: D the super-block's d, SC the two
 * integer sub-scales (lstride apart), O (Q2_K) the two dmin * m. */
TGT static inline __attribute__((always_inline)) void FN(pack8_h)(const int type, const wisp_matrix *W, int row0,
                                                                 int last, uint8_t *ws, float *D, int32_t *SC, float *O,
                                                                 const int vstride, const int lstride) {
  const int K = W->cols, nb = K / 32, nsb = K / 256;
  const size_t bb = FN(block_bytes)(type), row_bytes = (size_t)nsb * bb;
  const uint8_t *rq[8];
  for (int k = 0; k < 8; k++) {
    int r = row0 + k > last ? last : row0 + k;
    rq[k] = W->q + (size_t)r * row_bytes;
    for (int sb = 0; sb < nsb; sb++) {
      int32_t sc[16], m[16];
      float d, dmin;
      FN(sub_scales)(type, rq[k] + (size_t)sb * bb, sc, m, &d, &dmin);
      for (int jb = 0; jb < 8; jb++) {
        const size_t b = (size_t)8 * sb + jb;
        D[lstride * b + k] = d;
        SC[2 * lstride * b + k] = sc[2 * jb];
        SC[2 * lstride * b + lstride + k] = sc[2 * jb + 1];
        O[2 * lstride * b + k] = dmin * (float)m[2 * jb];
        O[2 * lstride * b + lstride + k] = dmin * (float)m[2 * jb + 1];
      }
    }
  }
  for (int b = 0; b < nb; b++) {
    __m256i v[8];
    for (int k = 0; k < 8; k++) v[k] = FN(unpack)(type, rq[k], b);
    FN(transpose8)(v);
    for (int c = 0; c < 8; c++) _mm256_storeu_si256((__m256i *)(ws + ((size_t)b * 8 + c) * vstride), v[c]);
  }
}

/* T tokens (from t) x a packed group of 8 rows of a per-16 type. */
TGT static inline __attribute__((always_inline)) void FN(lanes_tile_h)(const int type, const int T, int nb,
                                                                      const uint8_t *ws, const float *D,
                                                                      const int32_t *SC, const float *O,
                                                                      const wisp_i8_act *a, int t, float *y,
                                                                      size_t ldy, int nlanes, int accumulate) {
  const int K = nb * 32, z = ZERO16(type);
  __m256 acc[8];
#pragma GCC unroll 8
  for (int j = 0; j < T; j++) acc[j] = _mm256_setzero_ps();
  for (int b = 0; b < nb; b++) {
    __m256i lo[8], hi[8];
#pragma GCC unroll 8
    for (int j = 0; j < T; j++) {
      const int16_t *qs = a->qs16 + (size_t)(t + j) * 2 * nb + 2 * b;
      lo[j] = _mm256_set1_epi32(-z * qs[0]);
      hi[j] = _mm256_set1_epi32(-z * qs[1]);
    }
#pragma GCC unroll 8
    for (int c = 0; c < 8; c++) {
      __m256i w = _mm256_loadu_si256((const __m256i *)(ws + ((size_t)b * 8 + c) * 32));
#pragma GCC unroll 8
      for (int j = 0; j < T; j++) {
        int32_t four;
        memcpy(&four, a->q + (size_t)(t + j) * K + 32 * b + 4 * c, 4);
        if (c < 4) lo[j] = IDOT_ACC(lo[j], w, _mm256_set1_epi32(four));
        else hi[j] = IDOT_ACC(hi[j], w, _mm256_set1_epi32(four));
      }
    }
    const __m256i sl = _mm256_loadu_si256((const __m256i *)(SC + 16 * b)), sh = _mm256_loadu_si256((const __m256i *)(SC + 16 * b + 8));
    const __m256 db = _mm256_loadu_ps(D + 8 * b);
#pragma GCC unroll 8
    for (int j = 0; j < T; j++) {
      const size_t at = (size_t)(t + j) * nb + b;
      const __m256i isum = _mm256_add_epi32(_mm256_mullo_epi32(lo[j], sl), _mm256_mullo_epi32(hi[j], sh));
      acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(db, _mm256_broadcast_ss(a->d + at)), acc[j]);
      if (type == FN(Q2K)) {
        acc[j] = _mm256_fnmadd_ps(_mm256_loadu_ps(O + 16 * b), _mm256_broadcast_ss(a->ds16 + 2 * at), acc[j]);
        acc[j] = _mm256_fnmadd_ps(_mm256_loadu_ps(O + 16 * b + 8), _mm256_broadcast_ss(a->ds16 + 2 * at + 1), acc[j]);
      }
    }
  }
#pragma GCC unroll 8
  for (int j = 0; j < T; j++) {
    float *dst = y + (size_t)j * ldy;
    float v[8];
    _mm256_storeu_ps(v, acc[j]);
    for (int k = 0; k < nlanes; k++) dst[k] = accumulate ? dst[k] + v[k] : v[k];
  }
}

#if LANES16
/* Sixteen rows in the lanes of a 512-bit vector (two packed groups of
 * eight side by side), as lanes_tile_h. */
TGT static inline __attribute__((always_inline)) void FN(lanes16_tile_h)(const int type, const int T, int nb,
                                                                        const uint8_t *ws, const float *D,
                                                                        const int32_t *SC, const float *O,
                                                                        const wisp_i8_act *a, int t, float *y,
                                                                        size_t ldy, int nlanes, int accumulate) {
  const int K = nb * 32, z = ZERO16(type);
  __m512 acc[8];
#pragma GCC unroll 8
  for (int j = 0; j < T; j++) acc[j] = _mm512_setzero_ps();
  for (int b = 0; b < nb; b++) {
    __m512i lo[8], hi[8];
#pragma GCC unroll 8
    for (int j = 0; j < T; j++) {
      const int16_t *qs = a->qs16 + (size_t)(t + j) * 2 * nb + 2 * b;
      lo[j] = _mm512_set1_epi32(-z * qs[0]);
      hi[j] = _mm512_set1_epi32(-z * qs[1]);
    }
#pragma GCC unroll 8
    for (int c = 0; c < 8; c++) {
      __m512i w = _mm512_loadu_si512((const void *)(ws + ((size_t)b * 8 + c) * 64));
#pragma GCC unroll 8
      for (int j = 0; j < T; j++) {
        int32_t four;
        memcpy(&four, a->q + (size_t)(t + j) * K + 32 * b + 4 * c, 4);
        if (c < 4) lo[j] = _mm512_dpbusd_epi32(lo[j], w, _mm512_set1_epi32(four));
        else hi[j] = _mm512_dpbusd_epi32(hi[j], w, _mm512_set1_epi32(four));
      }
    }
    const __m512i sl = _mm512_loadu_si512((const void *)(SC + 32 * b)), sh = _mm512_loadu_si512((const void *)(SC + 32 * b + 16));
    const __m512 db = _mm512_loadu_ps(D + 16 * b);
#pragma GCC unroll 8
    for (int j = 0; j < T; j++) {
      const size_t at = (size_t)(t + j) * nb + b;
      const __m512i isum = _mm512_add_epi32(_mm512_mullo_epi32(lo[j], sl), _mm512_mullo_epi32(hi[j], sh));
      acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(db, _mm512_set1_ps(a->d[at])), acc[j]);
      if (type == FN(Q2K)) {
        acc[j] = _mm512_fnmadd_ps(_mm512_loadu_ps(O + 32 * b), _mm512_set1_ps(a->ds16[2 * at]), acc[j]);
        acc[j] = _mm512_fnmadd_ps(_mm512_loadu_ps(O + 32 * b + 16), _mm512_set1_ps(a->ds16[2 * at + 1]), acc[j]);
      }
    }
  }
  const __mmask16 keep = (__mmask16)((1u << nlanes) - 1);
#pragma GCC unroll 8
  for (int j = 0; j < T; j++) {
    float *dst = y + (size_t)j * ldy;
    __m512 v = accumulate ? _mm512_add_ps(acc[j], _mm512_maskz_loadu_ps(keep, dst)) : acc[j];
    _mm512_mask_storeu_ps(dst, keep, v);
  }
}
#define LANES_H 16
#else
#define LANES_H 8
#endif

/* Prefill of a per-16 type: groups of LANES_H rows packed once, every
 * token of the call passed over them. */
TGT static inline __attribute__((always_inline)) void FN(lanes_h)(const int type, const wisp_matrix *W, int r0, int nr,
                                                                 const wisp_i8_act *a, int t0, int nt, float *y,
                                                                 size_t ldy, int accumulate, float *scratch) {
  const int nb = W->cols / 32, L = LANES_H;
  float *D = scratch;
  int32_t *SC = (int32_t *)(D + (size_t)L * nb);
  float *O = (float *)(SC + 2 * (size_t)L * nb);
  uint8_t *ws = (uint8_t *)(O + 2 * (size_t)L * nb);
  for (int g = 0; g < nr; g += L) {
    const int nl = nr - g < L ? nr - g : L;
#if LANES16
    FN(pack8_h)(type, W, r0 + g, r0 + nr - 1, ws, D, SC, O, 64, 16);
    FN(pack8_h)(type, W, r0 + g + 8, r0 + nr - 1, ws + 32, D + 8, SC + 8, O + 8, 64, 16);
    enum { TT = 8 };
#define TILE_H FN(lanes16_tile_h)
#else
    FN(pack8_h)(type, W, r0 + g, r0 + nr - 1, ws, D, SC, O, 32, 8);
    enum { TT = LANES_T };
#define TILE_H FN(lanes_tile_h)
#endif
    int t = 0;
    for (; t + TT <= nt; t += TT)
      TILE_H(type, TT, nb, ws, D, SC, O, a, t0 + t, y + (size_t)t * ldy + g, ldy, nl, accumulate);
    for (; t < nt; t++) TILE_H(type, 1, nb, ws, D, SC, O, a, t0 + t, y + (size_t)t * ldy + g, ldy, nl, accumulate);
#undef TILE_H
  }
}

/* The f32 sub-scales d sc_h and (Q2_K) mins dmin m_h of halves 8h..8h+7 of
 * a per-16 super-block (the halves of its blocks 4h..4h+3). */
TGT static inline __attribute__((always_inline)) void FN(sub8)(const int type, const uint8_t *blk, int h, __m256 *s,
                                                              __m256 *m) {
  uint16_t hd;
  if (type == FN(Q6K)) {
    memcpy(&hd, blk + 208, 2);
    __m256i sc = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(blk + 192 + 8 * h)));
    *s = _mm256_mul_ps(_mm256_set1_ps(_cvtsh_ss(hd)), _mm256_cvtepi32_ps(sc));
    *m = _mm256_setzero_ps();
  } else if (type == FN(Q2K)) {
    uint16_t hm;
    memcpy(&hd, blk + 80, 2);
    memcpy(&hm, blk + 82, 2);
    __m256i bytes = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(blk + 8 * h)));
    *s = _mm256_mul_ps(_mm256_set1_ps(_cvtsh_ss(hd)), _mm256_cvtepi32_ps(_mm256_and_si256(bytes, _mm256_set1_epi32(15))));
    *m = _mm256_mul_ps(_mm256_set1_ps(_cvtsh_ss(hm)), _mm256_cvtepi32_ps(_mm256_srli_epi32(bytes, 4)));
  } else { /* Q3_K */
    memcpy(&hd, blk + 108, 2);
    *s = _mm256_mul_ps(_mm256_set1_ps(_cvtsh_ss(hd)), _mm256_cvtepi32_ps(FN(q3k_sc8)(blk, h)));
    *m = _mm256_setzero_ps();
  }
}

/* Decode of a per-16 type: R rows x one token, a super-block's halves of
 * four blocks at a time (Q6_K: their 128 values from two 32-byte runs of ql
 * and one of qh). A block's product has its first half in lanes 0-3 and
 * its second in lanes 4-7, so one permute of the group's eight scales
 * (times the tokens' d, one multiply a row) gives each lane its own. */
TGT static inline __attribute__((always_inline)) void FN(dec_h)(const int type, const int R, const wisp_matrix *W,
                                                               int row, int row_end, const wisp_i8_act *a, int t,
                                                               float *y, int accumulate) {
  const int K = W->cols, nb = K / 32, nsb = K / 256;
  const size_t bb = FN(block_bytes)(type), row_bytes = (size_t)nsb * bb;
  const uint8_t *rq[4];
#pragma GCC unroll 4
  for (int i = 0; i < R; i++) rq[i] = W->q + (size_t)(row + i) * row_bytes;
  const size_t ahead = (size_t)(row + R) * row_bytes + PREFETCH_BYTES <= (size_t)row_end * row_bytes ? PREFETCH_BYTES : 0;
  const int8_t *aq = a->q + (size_t)t * K;
  const float *ad = a->d + (size_t)t * nb, *ads = a->ds16 + (size_t)t * 2 * nb;
  const __m256i spread = _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3);
  __m256 acc[4], off[4];
#pragma GCC unroll 4
  for (int i = 0; i < R; i++) acc[i] = off[i] = _mm256_setzero_ps();
  for (int sb = 0; sb < nsb; sb++)
    for (int h = 0; h < 2; h++) {
      const int b0 = 8 * sb + 4 * h;
      const __m256 dexp = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_loadu_ps(ad + b0)), spread);
      const __m256 dsv = _mm256_loadu_ps(ads + 2 * b0);
      __m256i q[4];
#pragma GCC unroll 4
      for (int k = 0; k < 4; k++) q[k] = _mm256_loadu_si256((const __m256i *)(aq + 32 * (b0 + k)));
#pragma GCC unroll 4
      for (int i = 0; i < R; i++) {
        const uint8_t *blk = rq[i] + (size_t)sb * bb;
        _mm_prefetch((const char *)(blk + ahead + 128 * h), DECODE_PREFETCH_HINT);
        _mm_prefetch((const char *)(blk + ahead + 128 * h + 64), DECODE_PREFETCH_HINT);
        __m256 sv, mv;
        FN(sub8)(type, blk, h, &sv, &mv);
        const __m256 sd = _mm256_mul_ps(sv, dexp);
        off[i] = _mm256_fmadd_ps(type == FN(Q2K) ? mv : sv, dsv, off[i]);
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
          const __m256i prod = IDOT(FN(unpack_k16)(type, blk, 4 * h + k), q[k]);
          const __m256i idx = _mm256_setr_epi32(2 * k, 2 * k, 2 * k, 2 * k, 2 * k + 1, 2 * k + 1, 2 * k + 1, 2 * k + 1);
          acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(prod), _mm256_permutevar8x32_ps(sd, idx), acc[i]);
        }
      }
    }
  __m256 v[4];
  const __m256 zf = _mm256_set1_ps(type == FN(Q2K) ? 1.0f : (float)ZERO16(type));
#pragma GCC unroll 4
  for (int i = 0; i < R; i++) v[i] = _mm256_fnmadd_ps(zf, off[i], acc[i]);
  if (R == 4) {
    __m256 x = _mm256_hadd_ps(_mm256_hadd_ps(v[0], v[1]), _mm256_hadd_ps(v[2], v[3]));
    __m128 r = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
    if (accumulate) r = _mm_add_ps(r, _mm_loadu_ps(y));
    _mm_storeu_ps(y, r);
  } else {
#pragma GCC unroll 4
    for (int i = 0; i < R; i++) {
      float r = FN(hsum)(v[i]);
      y[i] = accumulate ? y[i] + r : r;
    }
  }
}

/* ---- per-16 types against per256 activations (decode) ----
 * With one activation scale a super-block (cpu_i8.h, like ggml's Q8_K) a
 * row's whole super-block is one integer: each block's pairwise products
 * (vpmaddubsw: u <= 63 and |q| <= 127 keep a pair within 16002) are
 * multiplied by their halves' sub-scales and summed pairwise into int32
 * (vpmaddwd, or vpdpwssd on the VNNI sets: IDOT16_ACC), the zero z times
 * sum_h sc_h qs16_h (one vpmaddwd a super-block) is taken off, and the
 * super-block takes one f32 multiply-add: d * d256 (Q2_K: and its mins,
 * dmin * d256 * sum_h m_h qs16_h). The largest integer, Q6_K's
 * 16 x 128 x 16 x 63 x 127, is 2^28. */

/* The sixteen integer sub-scales of a per-16 super-block as int16, in
 * order (lane 0: halves 0-7, lane 1: halves 8-15); Q2_K's mins into *m. */
TGT static inline __attribute__((always_inline)) __m256i FN(sc16)(const int type, const uint8_t *blk, __m256i *m) {
  if (type == FN(Q6K)) return _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(blk + 192)));
  if (type == FN(Q3K)) { /* as q3k_sc8, all sixteen as bytes: low nibbles of bytes 0-7, then their high
                           * nibbles; top bits 2 (i / 4) of byte 8 + i % 4, one shift a group of four */
    uint64_t low8;
    uint32_t top4;
    memcpy(&low8, blk + 96, 8);
    memcpy(&top4, blk + 104, 4);
    const __m128i v = _mm_cvtsi64_si128((long long)low8), m3 = _mm_set1_epi8(3);
    const __m128i lo = _mm_and_si128(_mm_unpacklo_epi64(v, _mm_srli_epi16(v, 4)), _mm_set1_epi8(15));
    const __m128i top = _mm_and_si128(_mm_srlv_epi32(_mm_set1_epi32((int)top4), _mm_setr_epi32(0, 2, 4, 6)), m3);
    return _mm256_cvtepi8_epi16(_mm_sub_epi8(_mm_or_si128(lo, _mm_slli_epi16(top, 4)), _mm_set1_epi8(32)));
  }
  const __m128i bytes = _mm_loadu_si128((const __m128i *)blk), m4 = _mm_set1_epi8(15);
  *m = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(bytes, 4), m4));
  return _mm256_cvtepu8_epi16(_mm_and_si128(bytes, m4));
}

/* The unsigned weights of blocks 4h..4h+3 of a per-16 super-block (the
 * values of unpack_k16, the shared runs loaded once). */
TGT static inline __attribute__((always_inline)) void FN(unpack4_k16)(const int type, const uint8_t *blk, int h,
                                                                     __m256i u[4]) {
  if (type == FN(Q6K)) { /* ql's two runs give blocks 0,1 (low nibbles) and 2,3 (high); qh's bits 2k..2k+1 the top */
    const __m256i m4 = _mm256_set1_epi8(15), top = _mm256_set1_epi8(0x30);
    const __m256i l0 = _mm256_loadu_si256((const __m256i *)(blk + 64 * h));
    const __m256i l1 = _mm256_loadu_si256((const __m256i *)(blk + 64 * h + 32));
    const __m256i qh = _mm256_loadu_si256((const __m256i *)(blk + 128 + 32 * h));
    u[0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), top));
    u[1] = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), top));
    u[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(qh, top));
    u[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4), _mm256_and_si256(_mm256_srli_epi16(qh, 2), top));
    return;
  }
  const __m256i qs = _mm256_loadu_si256((const __m256i *)(blk + (type == FN(Q3K) ? 32 : 16) + 32 * h));
  const __m256i hm = type == FN(Q3K) ? _mm256_loadu_si256((const __m256i *)blk) : _mm256_setzero_si256();
#pragma GCC unroll 4
  for (int k = 0; k < 4; k++) {
    u[k] = FN(bits2)(qs, 2 * k);
    if (type == FN(Q3K)) u[k] = _mm256_or_si256(u[k], FN(bit_to)(hm, 4 * h + k, 2));
  }
}

/* R rows x one token t of a per-16 type against per256 activations. */
TGT static inline __attribute__((always_inline)) void FN(dec_k)(const int type, const int R, const wisp_matrix *W,
                                                               int row, int row_end, const wisp_i8_act *a, int t,
                                                               float *y, int accumulate) {
  const int K = W->cols, nsb = K / 256, z = ZERO16(type);
  const size_t bb = FN(block_bytes)(type), row_bytes = (size_t)nsb * bb;
  const int d_at = type == FN(Q6K) ? 208 : type == FN(Q3K) ? 108 : 80;
  const uint8_t *rq[4];
#pragma GCC unroll 4
  for (int i = 0; i < R; i++) rq[i] = W->q + (size_t)(row + i) * row_bytes;
  const size_t ahead = (size_t)(row + R) * row_bytes + PREFETCH_BYTES <= (size_t)row_end * row_bytes ? PREFETCH_BYTES : 0;
  const int8_t *aq = a->q + (size_t)t * K;
  const int16_t *aqs = a->qs16 + (size_t)t * (K / 16);
  const float *ad = a->d256 + (size_t)t * nsb;
  /* a block's sub-scale pair from the super-block's sixteen, duplicated
   * lane (its quarter's): word 2k across lane 0, word 2k+1 across lane 1 */
  __m256i pick[4];
#pragma GCC unroll 4
  for (int k = 0; k < 4; k++) {
    const int lo = (4 * k) | (4 * k + 1) << 8, hi = (4 * k + 2) | (4 * k + 3) << 8;
    pick[k] = _mm256_setr_epi16(lo, lo, lo, lo, lo, lo, lo, lo, hi, hi, hi, hi, hi, hi, hi, hi);
  }
  __m256 acc[4];
#pragma GCC unroll 4
  for (int i = 0; i < R; i++) acc[i] = _mm256_setzero_ps();
  for (int sb = 0; sb < nsb; sb++) {
    const __m256i qs16 = _mm256_loadu_si256((const __m256i *)(aqs + 16 * sb));
    const int8_t *q = aq + 256 * sb;
#pragma GCC unroll 4
    for (int i = 0; i < R; i++) {
      const uint8_t *blk = rq[i] + (size_t)sb * bb;
      for (size_t at = 0; at < bb; at += 64) _mm_prefetch((const char *)(blk + ahead + at), DECODE_PREFETCH_HINT);
      __m256i mins = _mm256_setzero_si256();
      const __m256i sc = FN(sc16)(type, blk, &mins);
      /* the zero's share, -z sum_h sc_h qs16_h (z 32 or 4), starts the sum */
      __m256i isum = _mm256_setzero_si256();
      if (z) isum = _mm256_sub_epi32(isum, _mm256_slli_epi32(_mm256_madd_epi16(sc, qs16), z == 32 ? 5 : 2));
#pragma GCC unroll 2
      for (int h = 0; h < 2; h++) {
        __m256i u[4];
        FN(unpack4_k16)(type, blk, h, u);
        const __m256i quarter = h ? _mm256_permute2x128_si256(sc, sc, 0x11) : _mm256_permute2x128_si256(sc, sc, 0x00);
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
          const __m256i p = _mm256_maddubs_epi16(u[k], _mm256_loadu_si256((const __m256i *)(q + 128 * h + 32 * k)));
          isum = IDOT16_ACC(isum, p, _mm256_shuffle_epi8(quarter, pick[k]));
        }
      }
      uint16_t hd;
      memcpy(&hd, blk + d_at, 2);
      acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(_cvtsh_ss(hd) * ad[sb]), acc[i]);
      if (type == FN(Q2K)) {
        memcpy(&hd, blk + 82, 2);
        acc[i] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(mins, qs16)),
                                  _mm256_set1_ps(_cvtsh_ss(hd) * ad[sb]), acc[i]);
      }
    }
  }
  if (R == 4) {
    __m256 x = _mm256_hadd_ps(_mm256_hadd_ps(acc[0], acc[1]), _mm256_hadd_ps(acc[2], acc[3]));
    __m128 r = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
    if (accumulate) r = _mm_add_ps(r, _mm_loadu_ps(y));
    _mm_storeu_ps(y, r);
  } else {
#pragma GCC unroll 4
    for (int i = 0; i < R; i++) {
      float r = FN(hsum)(acc[i]);
      y[i] = accumulate ? y[i] + r : r;
    }
  }
}

#if LANES16
/* dec_k in 512-bit vectors: two blocks an instruction (their 64 values
 * from one load of each plane broadcast or shifted per 256-bit half), the
 * sub-scale pairs picked from the sixteen by one vpermw, the hidden
 * bit / nibble merged by one vpternlogd. */
TGT static inline __attribute__((always_inline)) __m512i FN(split16)(int lo, int hi) {
  return _mm512_inserti64x4(_mm512_set1_epi16((short)lo), _mm256_set1_epi16((short)hi), 1);
}

/* The unsigned weights of blocks 4h+2j, 4h+2j+1 of a per-16 super-block. */
TGT static inline __attribute__((always_inline)) __m512i FN(unpack2_k16)(const int type, const uint8_t *blk, int h, int j) {
  /* (A & C) | B, A = 0xf0, B = 0xcc, C = 0xaa */
  enum { OR_MASKED = 0xec };
  if (type == FN(Q6K)) { /* ql's 64 bytes: blocks 0,1 low nibbles, 2,3 high; qh bits 4j + 2 half, moved to 4-5 */
    const __m512i l = _mm512_loadu_si512((const void *)(blk + 64 * h));
    const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(blk + 128 + 32 * h)));
    const __m512i top = _mm512_and_si512(j ? _mm512_srlv_epi16(qh, FN(split16)(0, 2)) : _mm512_sllv_epi16(qh, FN(split16)(4, 2)),
                                         _mm512_set1_epi8(0x30));
    return _mm512_ternarylogic_epi32(j ? _mm512_srli_epi16(l, 4) : l, top, _mm512_set1_epi8(15), OR_MASKED);
  }
  const __m512i qs = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(blk + (type == FN(Q3K) ? 32 : 16) + 32 * h)));
  const __m512i low = _mm512_and_si512(_mm512_srlv_epi16(qs, FN(split16)(4 * j, 4 * j + 2)), _mm512_set1_epi8(3));
  if (type == FN(Q2K)) return low;
  /* Q3_K: bit jb of hmask byte e to bit 2 */
  const int jb = 4 * h + 2 * j;
  const __m512i hm = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)blk));
  const __m512i hb = jb < 2 ? _mm512_sllv_epi16(hm, FN(split16)(2 - jb, 1 - jb)) : _mm512_srlv_epi16(hm, FN(split16)(jb - 2, jb - 1));
  return _mm512_ternarylogic_epi32(hb, low, _mm512_set1_epi8(4), OR_MASKED);
}

TGT static inline __attribute__((always_inline)) void FN(dec_k512)(const int type, const int R, const wisp_matrix *W,
                                                                  int row, int row_end, const wisp_i8_act *a, int t,
                                                                  float *y, int accumulate) {
  const int K = W->cols, nsb = K / 256, z = ZERO16(type);
  const size_t bb = FN(block_bytes)(type), row_bytes = (size_t)nsb * bb;
  const int d_at = type == FN(Q6K) ? 208 : type == FN(Q3K) ? 108 : 80;
  const uint8_t *rq[4];
#pragma GCC unroll 4
  for (int i = 0; i < R; i++) rq[i] = W->q + (size_t)(row + i) * row_bytes;
  const size_t ahead = (size_t)(row + R) * row_bytes + PREFETCH_BYTES <= (size_t)row_end * row_bytes ? PREFETCH_BYTES : 0;
  const int8_t *aq = a->q + (size_t)t * K;
  const int16_t *aqs = a->qs16 + (size_t)t * (K / 16);
  const float *ad = a->d256 + (size_t)t * nsb;
  /* pair p (blocks 2p, 2p+1) takes sub-scales 4p..4p+3, eight words each */
  __m512i pick[4];
#pragma GCC unroll 4
  for (int p = 0; p < 4; p++)
    pick[p] = _mm512_add_epi16(_mm512_srli_epi16(_mm512_set_epi32(0x001f001e, 0x001d001c, 0x001b001a, 0x00190018, 0x00170016,
                                                                   0x00150014, 0x00130012, 0x00110010, 0x000f000e, 0x000d000c,
                                                                   0x000b000a, 0x00090008, 0x00070006, 0x00050004, 0x00030002,
                                                                   0x00010000),
                                                  3),
                               _mm512_set1_epi16((short)(4 * p)));
  __m512 acc[4];
#pragma GCC unroll 4
  for (int i = 0; i < R; i++) acc[i] = _mm512_setzero_ps();
  for (int sb = 0; sb < nsb; sb++) {
    const __m256i qs16 = _mm256_loadu_si256((const __m256i *)(aqs + 16 * sb));
    const int8_t *q = aq + 256 * sb;
#pragma GCC unroll 4
    for (int i = 0; i < R; i++) {
      const uint8_t *blk = rq[i] + (size_t)sb * bb;
      for (size_t at = 0; at < bb; at += 64) _mm_prefetch((const char *)(blk + ahead + at), DECODE_PREFETCH_HINT);
      __m256i mins = _mm256_setzero_si256();
      const __m256i sc = FN(sc16)(type, blk, &mins);
      const __m512i scz = _mm512_zextsi256_si512(sc);
      /* the zero's share, -z sum_h sc_h qs16_h (z 32 or 4), starts the sum */
      __m512i isum = _mm512_setzero_si512();
      if (z) isum = _mm512_zextsi256_si512(_mm256_sub_epi32(_mm256_setzero_si256(),
                                                            _mm256_slli_epi32(_mm256_madd_epi16(sc, qs16), z == 32 ? 5 : 2)));
#pragma GCC unroll 4
      for (int p = 0; p < 4; p++) {
        const __m512i u = FN(unpack2_k16)(type, blk, p >> 1, p & 1);
        const __m512i prod = _mm512_maddubs_epi16(u, _mm512_loadu_si512((const void *)(q + 64 * p)));
        isum = _mm512_dpwssd_epi32(isum, prod, _mm512_permutexvar_epi16(pick[p], scz));
      }
      uint16_t hd;
      memcpy(&hd, blk + d_at, 2);
      acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_set1_ps(_cvtsh_ss(hd) * ad[sb]), acc[i]);
      if (type == FN(Q2K)) {
        memcpy(&hd, blk + 82, 2);
        acc[i] = _mm512_fnmadd_ps(_mm512_zextps256_ps512(_mm256_cvtepi32_ps(_mm256_madd_epi16(mins, qs16))),
                                  _mm512_set1_ps(_cvtsh_ss(hd) * ad[sb]), acc[i]);
      }
    }
  }
#pragma GCC unroll 4
  for (int i = 0; i < R; i++) {
    float r = _mm512_reduce_add_ps(acc[i]);
    y[i] = accumulate ? y[i] + r : r;
  }
}
#define DEC_K FN(dec_k512)
#else
#define DEC_K FN(dec_k)
#endif

/* A product of a per-16 type: decode by four rows, prefill in lanes. */
TGT static inline __attribute__((always_inline)) void FN(gemm_h)(const int type, const wisp_matrix *W, int r0, int nr,
                                                                const wisp_i8_act *a, int t0, int nt, float *y,
                                                                size_t ldy, int accumulate, float *scratch) {
  if (a->per256) { /* token by token: the decode path (the tests run it on several) */
    for (int j = 0; j < nt; j++) {
      float *yt = y + (size_t)j * ldy;
      int r = 0;
      for (; r + 4 <= nr; r += 4) DEC_K(type, 4, W, r0 + r, r0 + nr, a, t0 + j, yt + r, accumulate);
      for (; r < nr; r++) DEC_K(type, 1, W, r0 + r, r0 + nr, a, t0 + j, yt + r, accumulate);
    }
    return;
  }
  if (nt > 1 && PRESCALED(type)) {
    LANES_FN(type, W, NULL, r0, nr, a, t0, nt, y, ldy, accumulate, scratch);
    return;
  }
  if (nt > 1) {
    FN(lanes_h)(type, W, r0, nr, a, t0, nt, y, ldy, accumulate, scratch);
    return;
  }
  int r = 0;
  for (; r + 4 <= nr; r += 4) FN(dec_h)(type, 4, W, r0 + r, r0 + nr, a, t0, y + r, accumulate);
  for (; r < nr; r++) FN(dec_h)(type, 1, W, r0 + r, r0 + nr, a, t0, y + r, accumulate);
}
#undef LANES_H
#undef DEC_K

/* ---- decode (one token): rows against the PAIRED / NATURAL activations ----
 * Work goes by pairs of blocks: one 32-byte load of weights holds both
 * (Q4 / Q4Z: the pair's 2 x 16 nibble bytes; Q4_K: one 32-byte run whose
 * low and high nibbles are two sub-blocks), and one shift and one mask
 * give its 64 unsigned values in the activations' order, so one pair is
 * one (AVX-512) or two (AVX2) integer dot products. The block scales
 * s_b d_b of a run of blocks are one vector multiply per row; a permute
 * spreads each pair's two over the lanes. The offset sum_b o_b ds_b is a
 * vector multiply-add per run of blocks, and R rows end in one reduction
 * together (the products of R rows share each activation load). Rows are
 * consecutive in memory: the rows PREFETCH_BYTES ahead are prefetched while
 * these run, within the rows of the call. */
#if LANES16
/* The 32 weight bytes at p as 64 values: [low nibbles | 16 x high
 * nibbles]: the bytes in both halves and one mask, no shift (512-bit
 * shifts, vpdpbusd and conversions all queue for the same port on Intel
 * cores). The upper half's sums come out 16 times too large, and its
 * scales are taken 16 times smaller: (16 X) (r / 16) rounds as X r, since
 * a division by 16 is exact. */
TGT static inline __attribute__((always_inline)) __m512i FN(nib64)(const uint8_t *p) {
  const __m512i mask = _mm512_inserti64x4(_mm512_set1_epi8(15), _mm256_set1_epi8((char)0xf0), 1);
  return _mm512_and_si512(_mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)p)), mask);
}

/* Zero points of blocks first .. first+n-1 (n <= 16) of a Q4Z matrix as
 * floats; lanes past n are 0. */
TGT static inline __attribute__((always_inline)) __m512 FN(zp16)(const uint8_t *zp, size_t first, int n) {
  if (!(first & 1)) {
    __m128i bytes = _mm_maskz_loadu_epi8((__mmask16)((1u << ((n + 1) / 2)) - 1), zp + (first >> 1));
    const __m128i m4 = _mm_set1_epi8(15);
    __m128i z = _mm_unpacklo_epi8(_mm_and_si128(bytes, m4), _mm_and_si128(_mm_srli_epi16(bytes, 4), m4));
    return _mm512_maskz_mov_ps((__mmask16)((1u << n) - 1), _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(z)));
  }
  float z[16] = {0};
  for (int k = 0; k < n; k++) z[k] = (float)wisp_q4z_zero_point(zp, first + (size_t)k);
  return _mm512_loadu_ps(z);
}

TGT static inline __attribute__((always_inline)) void FN(dec512)(const int type, const int R, const wisp_matrix *W,
                                                                const uint16_t *s16, int row, int row_end,
                                                                const wisp_i8_act *a, int t, float *y, int accumulate) {
  const int K = W->cols, nb = K / 32;
  const size_t row_bytes = FN(row_bytes)(type, K);
  const uint8_t *rq[4];
  const uint16_t *s[4]; /* Q4 / Q4Z: the rows' f16 block scales */
#pragma GCC unroll 4
  for (int i = 0; i < R; i++) {
    rq[i] = W->q + (size_t)(row + i) * row_bytes;
    s[i] = type == FN(Q4K) ? NULL : s16 + (size_t)(row + i) * nb;
  }
  /* prefetch only within the rows of this call (a thread's task): past
   * them are another thread's rows, or the end of the matrix; the last
   * tiles ask for their own lines instead (no branch in the loop) */
  const size_t ahead = (size_t)(row + R) * row_bytes + PREFETCH_BYTES <= (size_t)row_end * row_bytes ? PREFETCH_BYTES : 0;
  const int8_t *aq = a->q + (size_t)t * K;
  const float *ad = a->d + (size_t)t * nb, *ads = a->ds + (size_t)t * nb;
  /* lanes of a pair's product -> its block (0 or 1): Q4 [b b+1 b b+1] by
   * 128-bit lanes; Q4_K [b b+1] by 256-bit halves; the upper half (+16)
   * takes the scales divided by 16 (nib64) */
  const __m512i idx0 = type == FN(Q4K) ? _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 17, 17, 17, 17, 17, 17, 17, 17)
                                       : _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 16, 16, 16, 16, 17, 17, 17, 17);
  __m512 acc[4], off[4];
#pragma GCC unroll 4
  for (int i = 0; i < R; i++) acc[i] = off[i] = _mm512_setzero_ps();
  for (int g = 0; g < nb; g += 16) {
    const int n = nb - g < 16 ? nb - g : 16;
    const __mmask16 m = (__mmask16)((1u << n) - 1);
    const __m512 d = _mm512_maskz_loadu_ps(m, ad + g), ds = _mm512_maskz_loadu_ps(m, ads + g);
    __m512 sd[4], sd16[4];
#pragma GCC unroll 4
    for (int i = 0; i < R; i++) {
      __m512 sv, ov = _mm512_setzero_ps();
      if (type == FN(Q4K)) { /* the group's one or two super-blocks (nb is a multiple of 8) */
        __m256 s0, o0, s1 = _mm256_setzero_ps(), o1 = _mm256_setzero_ps();
        FN(q4k_scales)(rq[i] + (size_t)(g >> 3) * WISP_Q4K_BYTES, &s0, &o0);
        if (n > 8) FN(q4k_scales)(rq[i] + (size_t)((g >> 3) + 1) * WISP_Q4K_BYTES, &s1, &o1);
        sv = _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(s0)), _mm256_castps_pd(s1), 1));
        ov = _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(o0)), _mm256_castps_pd(o1), 1));
      } else { /* the f16 scales are a stream of their own (an eighth of the nibble bytes: the same rows
                * ahead), a line every 32 blocks */
        if (!(g & 31)) _mm_prefetch((const char *)(s[i] + ahead / 16 + g), DECODE_PREFETCH_HINT);
        /* a row's scales (2 nb bytes) straddle lines that its line-every-32
         * blocks can miss: its last one too */
        if (!g) _mm_prefetch((const char *)(s[i] + ahead / 16 + nb - 1), DECODE_PREFETCH_HINT);
        sv = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, s[i] + g));
      }
      sd[i] = _mm512_mul_ps(sv, d);
      sd16[i] = _mm512_mul_ps(sd[i], _mm512_set1_ps(1.0f / 16));
      if (type == FN(Q4)) off[i] = _mm512_fmadd_ps(sv, ds, off[i]); /* times 8 at the end */
      else if (type == FN(Q4Z))
        off[i] = _mm512_fmadd_ps(_mm512_mul_ps(FN(zp16)(W->zp, (size_t)(row + i) * nb + g, n), sv), ds, off[i]);
      else off[i] = _mm512_fmadd_ps(ov, ds, off[i]);
    }
    const int pairs = n / 2;
#pragma GCC unroll 8
    for (int p = 0; p < pairs; p++) {
      const int b = g + 2 * p;
      /* one line `ahead` for every 64 bytes of each row: Q4 every other
       * pair (32 bytes a pair), Q4_K every pair (36) */
      if (type == FN(Q4K)) {
#pragma GCC unroll 4
        for (int i = 0; i < R; i++) _mm_prefetch((const char *)(rq[i] + ahead + (size_t)b * (row_bytes / nb)), DECODE_PREFETCH_HINT);
      } else if ((p & 1) == 0) {
#pragma GCC unroll 4
        for (int i = 0; i < R; i++) _mm_prefetch((const char *)(rq[i] + ahead + 16 * (size_t)b), DECODE_PREFETCH_HINT);
      }
      const __m512i q = _mm512_loadu_si512((const void *)(aq + 32 * b));
      const __m512i idx = _mm512_add_epi32(idx0, _mm512_set1_epi32(2 * p));
#pragma GCC unroll 4
      for (int i = 0; i < R; i++) {
        const __m512i w = FN(nib64)(type == FN(Q4K) ? rq[i] + (size_t)(b >> 3) * WISP_Q4K_BYTES + 16 + 32 * ((b & 7) >> 1)
                                                  : rq[i] + 16 * (size_t)b);
        __m512i prod = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w, q);
        acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(prod), _mm512_permutex2var_ps(sd[i], idx, sd16[i]), acc[i]);
      }
    }
    if (n & 1) { /* the last block of an odd count (Q4 / Q4Z, alone: [evens | odds]) */
      const int b = g + n - 1;
      const __m256i q = _mm256_loadu_si256((const __m256i *)(aq + 32 * b));
      const __m512i idx = _mm512_set1_epi32(n - 1);
#pragma GCC unroll 4
      for (int i = 0; i < R; i++) {
        __m256i prod = IDOT(FN(unpack)(type, rq[i], b), q);
        __m512 v = _mm512_cvtepi32_ps(_mm512_inserti64x4(_mm512_setzero_si512(), prod, 0));
        acc[i] = _mm512_fmadd_ps(v, _mm512_permutexvar_ps(idx, sd[i]), acc[i]);
      }
    }
  }
  __m512 v[4];
#pragma GCC unroll 4
  for (int i = 0; i < R; i++)
    v[i] = type == FN(Q4) ? _mm512_fnmadd_ps(_mm512_set1_ps(8.0f), off[i], acc[i]) : _mm512_sub_ps(acc[i], off[i]);
  if (R == 4) { /* four sums at once: halves added, then a tree of horizontal adds */
    __m256 h[4];
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++)
      h[i] = _mm256_add_ps(_mm512_castps512_ps256(v[i]),
                           _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v[i]), 1)));
    __m256 x = _mm256_hadd_ps(_mm256_hadd_ps(h[0], h[1]), _mm256_hadd_ps(h[2], h[3]));
    __m128 r = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
    if (accumulate) r = _mm_add_ps(r, _mm_loadu_ps(y));
    _mm_storeu_ps(y, r);
  } else {
#pragma GCC unroll 4
    for (int i = 0; i < R; i++) {
      float r = _mm512_reduce_add_ps(v[i]);
      y[i] = accumulate ? y[i] + r : r;
    }
  }
}
/* Q8_0 and Q5_0 decode on the row tiles: for Q8_0 the paired path was
 * slower in a whole model (a 1B model with 26 layers at Q8_0 on an AMD EPYC,
 * 2 threads: 19-20 against 24 tokens/s) */
#define DECODE_ROWS(type) ((type) == FN(Q4) || (type) == FN(Q4Z) || (type) == FN(Q4K))
#define DECODE_FN FN(dec512)
#else
/* 256-bit decode. Q4 / Q4Z: a pair is two integer dot products (low
 * nibbles with the pair's even elements, high with the odd), summed in
 * integers: lanes [b x4 | b+1 x4]. Q4_K: a group of 8 blocks is one
 * super-block; a pair's two products (low nibbles: block b, high: b+1)
 * each take their block's scale. */
TGT static inline __attribute__((always_inline)) __m256 FN(load8)(const float *p, int n) {
  if (n == 8) return _mm256_loadu_ps(p);
  return _mm256_maskload_ps(p, _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
}

/* n <= 8 f16 scales as floats; lanes past n are 0. */
TGT static inline __attribute__((always_inline)) __m256 FN(load8h)(const uint16_t *p, int n) {
  if (n == 8) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
  uint16_t h[8] = {0};
  memcpy(h, p, (size_t)n * sizeof(uint16_t));
  return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h));
}

/* Zero points of blocks first .. first+n-1 (n <= 8) of a Q4Z matrix as
 * floats (lanes past n: whatever, their scales are 0). */
TGT static inline __attribute__((always_inline)) __m256 FN(zp8)(const uint8_t *zp, size_t first, int n) {
  if (!(first & 1)) {
    uint32_t four = 0;
    if (n == 8) memcpy(&four, zp + (first >> 1), 4);
    else memcpy(&four, zp + (first >> 1), (size_t)(n + 1) / 2);
    const __m128i bytes = _mm_cvtsi32_si128((int)four), m4 = _mm_set1_epi8(15);
    __m128i z = _mm_unpacklo_epi8(_mm_and_si128(bytes, m4), _mm_and_si128(_mm_srli_epi16(bytes, 4), m4));
    return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(z));
  }
  float z[8] = {0};
  for (int k = 0; k < n; k++) z[k] = (float)wisp_q4z_zero_point(zp, first + (size_t)k);
  return _mm256_loadu_ps(z);
}

TGT static inline __attribute__((always_inline)) void FN(dec256)(const int type, const int R, const wisp_matrix *W,
                                                                const uint16_t *s16, int row, int row_end,
                                                                const wisp_i8_act *a, int t, float *y, int accumulate) {
  const int K = W->cols, nb = K / 32;
  const size_t row_bytes = FN(row_bytes)(type, K);
  const uint8_t *rq[4];
  const uint16_t *s[4]; /* Q4 / Q4Z: the rows' f16 block scales */
#pragma GCC unroll 4
  for (int i = 0; i < R; i++) {
    rq[i] = W->q + (size_t)(row + i) * row_bytes;
    s[i] = type == FN(Q4K) ? NULL : s16 + (size_t)(row + i) * nb;
  }
  /* prefetch only within the rows of this call (a thread's task): past
   * them are another thread's rows, or the end of the matrix; the last
   * tiles ask for their own lines instead (no branch in the loop) */
  const size_t ahead = (size_t)(row + R) * row_bytes + PREFETCH_BYTES <= (size_t)row_end * row_bytes ? PREFETCH_BYTES : 0;
  const int8_t *aq = a->q + (size_t)t * K;
  const float *ad = a->d + (size_t)t * nb, *ads = a->ds + (size_t)t * nb;
  const __m256i idx0 = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1), m4 = _mm256_set1_epi8(15);
  __m256 acc[4], off[4];
#pragma GCC unroll 4
  for (int i = 0; i < R; i++) acc[i] = off[i] = _mm256_setzero_ps();
  for (int g = 0; g < nb; g += 8) {
    const int n = nb - g < 8 ? nb - g : 8;
    const __m256 d = FN(load8)(ad + g, n), ds = FN(load8)(ads + g, n);
    __m256 sd[4];
#pragma GCC unroll 4
    for (int i = 0; i < R; i++) {
      if (type == FN(Q4K)) { /* a group is one super-block */
        __m256 sv, ov;
        FN(q4k_scales)(rq[i] + (size_t)(g >> 3) * WISP_Q4K_BYTES, &sv, &ov);
        sd[i] = _mm256_mul_ps(sv, d);
        off[i] = _mm256_fmadd_ps(ov, ds, off[i]);
        continue;
      }
      if (!(g & 31)) /* the f16 scales are a stream of their own (an eighth of the nibble bytes: the same rows ahead) */
        _mm_prefetch((const char *)(s[i] + ahead / 16 + g), DECODE_PREFETCH_HINT);
      if (!g) /* and a row's last scale, whose line the above can miss */
        _mm_prefetch((const char *)(s[i] + ahead / 16 + nb - 1), DECODE_PREFETCH_HINT);
      const __m256 sv = FN(load8h)(s[i] + g, n);
      sd[i] = _mm256_mul_ps(sv, d);
      if (type == FN(Q4)) {
        off[i] = _mm256_fmadd_ps(sv, ds, off[i]); /* times 8 at the end */
      } else {
        off[i] = _mm256_fmadd_ps(_mm256_mul_ps(FN(zp8)(W->zp, (size_t)(row + i) * nb + g, n), sv), ds, off[i]);
      }
    }
    const int pairs = n / 2;
#pragma GCC unroll 4
    for (int p = 0; p < pairs; p++) {
      const int b = g + 2 * p;
      if ((p & 1) == 0)
#pragma GCC unroll 4
        for (int i = 0; i < R; i++)
          _mm_prefetch((const char *)(rq[i] + ahead + (size_t)b * (row_bytes / nb)), DECODE_PREFETCH_HINT);
      const __m256i qlo = _mm256_loadu_si256((const __m256i *)(aq + 32 * b));
      const __m256i qhi = _mm256_loadu_si256((const __m256i *)(aq + 32 * b + 32));
      const __m256i idx = _mm256_add_epi32(idx0, _mm256_set1_epi32(2 * p));
      if (type == FN(Q4K)) { /* one 32-byte run: block b in the low nibbles, b+1 in the high */
        const __m256i ib = _mm256_set1_epi32(2 * p), ib1 = _mm256_set1_epi32(2 * p + 1);
#pragma GCC unroll 4
        for (int i = 0; i < R; i++) {
          const __m256i w = _mm256_loadu_si256(
              (const __m256i *)(rq[i] + (size_t)(b >> 3) * WISP_Q4K_BYTES + 16 + 32 * ((b & 7) >> 1)));
          acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(IDOT(_mm256_and_si256(w, m4), qlo)),
                                   _mm256_permutevar8x32_ps(sd[i], ib), acc[i]);
          acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(IDOT(_mm256_and_si256(_mm256_srli_epi16(w, 4), m4), qhi)),
                                   _mm256_permutevar8x32_ps(sd[i], ib1), acc[i]);
        }
        continue;
      }
#pragma GCC unroll 4
      for (int i = 0; i < R; i++) {
        const __m256i w = _mm256_loadu_si256((const __m256i *)(rq[i] + 16 * (size_t)b));
        const __m256i prod = IDOT2(_mm256_and_si256(w, m4), qlo, _mm256_and_si256(_mm256_srli_epi16(w, 4), m4), qhi);
        acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(prod), _mm256_permutevar8x32_ps(sd[i], idx), acc[i]);
      }
    }
    if (n & 1) { /* the last block of an odd count, alone: [evens | odds] */
      const int b = g + n - 1;
      const __m256i q = _mm256_loadu_si256((const __m256i *)(aq + 32 * b));
      const __m256i idx = _mm256_set1_epi32(n - 1);
#pragma GCC unroll 4
      for (int i = 0; i < R; i++)
        acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(IDOT(FN(unpack)(type, rq[i], b), q)),
                                 _mm256_permutevar8x32_ps(sd[i], idx), acc[i]);
    }
  }
  __m256 v[4];
#pragma GCC unroll 4
  for (int i = 0; i < R; i++)
    v[i] = type == FN(Q4) ? _mm256_fnmadd_ps(_mm256_set1_ps(8.0f), off[i], acc[i]) : _mm256_sub_ps(acc[i], off[i]);
  if (R == 4) { /* four sums at once: a tree of horizontal adds, then the halves */
    __m256 x = _mm256_hadd_ps(_mm256_hadd_ps(v[0], v[1]), _mm256_hadd_ps(v[2], v[3]));
    __m128 r = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
    if (accumulate) r = _mm_add_ps(r, _mm_loadu_ps(y));
    _mm_storeu_ps(y, r);
  } else {
#pragma GCC unroll 4
    for (int i = 0; i < R; i++) {
      float r = FN(hsum)(v[i]);
      y[i] = accumulate ? y[i] + r : r;
    }
  }
}
#define DECODE_ROWS(type) ((type) == FN(Q4) || (type) == FN(Q4Z) || (type) == FN(Q4K))
#define DECODE_FN FN(dec256)
#endif

/* Tokens are taken in chunks that stay in L1 together with the rows of a
 * call (the backend calls with a few dozen rows): each weight row is read
 * from memory once per chunk and each token block once per row tile. */
enum { FN(CHUNK) = 16 };

TGT static inline __attribute__((always_inline)) void FN(drive)(const int type, const wisp_matrix *W,
                                                               const uint16_t *s16, int r0, int nr,
                                                               const wisp_i8_act *a, int t0, int nt, float *y,
                                                               size_t ldy, int accumulate, float *scratch) {
  const int nb = W->cols / 32;
  float *sb = scratch, *ob = scratch + 4 * (size_t)nb;
  const float *s[4];
#define ROWS(R)                                                                                  \
  for (int i = 0; i < (R); i++)                                                                  \
    FN(row_scales)(type, W, s16, r0 + r + i, sb + (size_t)i * nb, ob + (size_t)i * nb, &s[i])
  if (nt == 1) { /* decode: four rows share each activation block */
    int r = 0;
    if (DECODE_ROWS(type)) {
      for (; r + 4 <= nr; r += 4) DECODE_FN(type, 4, W, s16, r0 + r, r0 + nr, a, t0, y + r, accumulate);
      for (; r < nr; r++) DECODE_FN(type, 1, W, s16, r0 + r, r0 + nr, a, t0, y + r, accumulate);
      return;
    }
    for (; r + 4 <= nr; r += 4) {
      ROWS(4);
      FN(tile)(type, 4, 1, W, r0 + r, a, t0, y + r, ldy, accumulate, s, ob);
    }
    for (; r < nr; r++) {
      ROWS(1);
      FN(tile)(type, 1, 1, W, r0 + r, a, t0, y + r, ldy, accumulate, s, ob);
    }
    return;
  }
  for (int c0 = 0; c0 < nt; c0 += FN(CHUNK)) {
    const int c1 = c0 + FN(CHUNK) < nt ? c0 + FN(CHUNK) : nt;
    int r = 0;
    for (; r + TILE_R <= nr; r += TILE_R) {
      ROWS(TILE_R);
      int t = c0;
      for (; t + TILE_T <= c1; t += TILE_T)
        FN(tile)(type, TILE_R, TILE_T, W, r0 + r, a, t0 + t, y + (size_t)t * ldy + r, ldy, accumulate, s, ob);
      for (; t < c1; t++) FN(tile)(type, TILE_R, 1, W, r0 + r, a, t0 + t, y + (size_t)t * ldy + r, ldy, accumulate, s, ob);
    }
    for (; r < nr; r++) {
      ROWS(1);
      int t = c0;
      for (; t + TILE_T <= c1; t += TILE_T)
        FN(tile)(type, 1, TILE_T, W, r0 + r, a, t0 + t, y + (size_t)t * ldy + r, ldy, accumulate, s, ob);
      for (; t < c1; t++) FN(tile)(type, 1, 1, W, r0 + r, a, t0 + t, y + (size_t)t * ldy + r, ldy, accumulate, s, ob);
    }
  }
#undef ROWS
}

/* Which path: PAIRED activations (Q4 decode) take the row tiles; NATURAL
 * Q4 and several tokens of Q4_K / Q5_0 / Q8_0 take the lanes (Q5_0's
 * values are at most 31: AVX2's pairwise maddubs sums stay far from
 * saturating). */
TGT static void FN(gemm)(const wisp_matrix *W, const uint16_t *s16, int r0, int nr, const wisp_i8_act *a, int t0,
                         int nt, float *y, size_t ldy, int accumulate, float *scratch) {
  const int q4 = W->type == WISP_W_Q4 || W->type == WISP_W_Q4Z;
  const int lanes = q4 ? a->layout == WISP_I8_NATURAL : nt > 1 && (W->type != WISP_W_Q8_0 || LANES_Q8);
  switch (W->type) { /* two scales a block: their own paths */
    case WISP_W_Q6K: FN(gemm_h)(FN(Q6K), W, r0, nr, a, t0, nt, y, ldy, accumulate, scratch); return;
    case WISP_W_Q3K: FN(gemm_h)(FN(Q3K), W, r0, nr, a, t0, nt, y, ldy, accumulate, scratch); return;
    case WISP_W_Q2K: FN(gemm_h)(FN(Q2K), W, r0, nr, a, t0, nt, y, ldy, accumulate, scratch); return;
    default: break;
  }
  if (lanes) {
    switch (W->type) {
      case WISP_W_Q4_1: LANES_FN(FN(Q41), W, s16, r0, nr, a, t0, nt, y, ldy, accumulate, scratch); break;
      case WISP_W_Q5_1: LANES_FN(FN(Q51), W, s16, r0, nr, a, t0, nt, y, ldy, accumulate, scratch); break;
      case WISP_W_Q5K: LANES_FN(FN(Q5K), W, s16, r0, nr, a, t0, nt, y, ldy, accumulate, scratch); break;
      case WISP_W_Q4K: LANES_FN(FN(Q4K), W, s16, r0, nr, a, t0, nt, y, ldy, accumulate, scratch); break;
      case WISP_W_Q8_0: LANES_FN(FN(Q8), W, s16, r0, nr, a, t0, nt, y, ldy, accumulate, scratch); break;
      case WISP_W_Q4Z: LANES_FN(FN(Q4Z), W, s16, r0, nr, a, t0, nt, y, ldy, accumulate, scratch); break;
      case WISP_W_Q5_0: LANES_FN(FN(Q5), W, s16, r0, nr, a, t0, nt, y, ldy, accumulate, scratch); break;
      default: LANES_FN(FN(Q4), W, s16, r0, nr, a, t0, nt, y, ldy, accumulate, scratch); break;
    }
    return;
  }
  switch (W->type) {
    case WISP_W_Q4_1: FN(drive)(FN(Q41), W, s16, r0, nr, a, t0, nt, y, ldy, accumulate, scratch); break;
    case WISP_W_Q5_1: FN(drive)(FN(Q51), W, s16, r0, nr, a, t0, nt, y, ldy, accumulate, scratch); break;
    case WISP_W_Q5K: FN(drive)(FN(Q5K), W, s16, r0, nr, a, t0, nt, y, ldy, accumulate, scratch); break;
    case WISP_W_Q4K: FN(drive)(FN(Q4K), W, s16, r0, nr, a, t0, nt, y, ldy, accumulate, scratch); break;
    case WISP_W_Q8_0: FN(drive)(FN(Q8), W, s16, r0, nr, a, t0, nt, y, ldy, accumulate, scratch); break;
    case WISP_W_Q4Z: FN(drive)(FN(Q4Z), W, s16, r0, nr, a, t0, nt, y, ldy, accumulate, scratch); break;
    case WISP_W_Q5_0: FN(drive)(FN(Q5), W, s16, r0, nr, a, t0, nt, y, ldy, accumulate, scratch); break;
    default: FN(drive)(FN(Q4), W, s16, r0, nr, a, t0, nt, y, ldy, accumulate, scratch); break;
  }
}
static const wisp_i8_kernels FN(kernels) = {STR(SFX), LANES_Q8, quantize_avx2, FN(gemm)};

#undef LANES_FN
#undef PER16
#undef PRESCALED
#undef KQUANT
#undef ZERO16
#undef DECODE_ROWS
#undef DECODE_FN
#undef CAT2
#undef CAT
#undef FN
