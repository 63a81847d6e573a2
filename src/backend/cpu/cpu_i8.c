/* Integer products (see cpu_i8.h): activation buffers, per-row block scales,
 * the scalar reference kernels and the run-time choice between kernel sets. */
#include "backend/cpu/cpu_i8.h"
#include "format/qblocks.h"
#include "format/quant.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int wisp_i8_act_reserve(wisp_i8_act *a, int n, int K) {
  size_t nq = (size_t)n * (size_t)K, nb = nq / 32;
  if (nq > a->cap_q) {
    int8_t *q = realloc(a->q, nq);
    if (!q) return 0;
    a->q = q;
    a->cap_q = nq;
  }
  if (nb > a->cap_b) {
    float *d = realloc(a->d, nb * sizeof(float));
    if (!d) return 0;
    a->d = d;
    float *ds = realloc(a->ds, nb * sizeof(float));
    if (!ds) return 0;
    a->ds = ds;
    float *ds16 = realloc(a->ds16, 2 * nb * sizeof(float));
    if (!ds16) return 0;
    a->ds16 = ds16;
    int16_t *qs16 = realloc(a->qs16, 2 * nb * sizeof(int16_t));
    if (!qs16) return 0;
    a->qs16 = qs16;
    float *d256 = realloc(a->d256, (nb / 8 + 1) * sizeof(float)); /* per256: K/256 a token */
    if (!d256) return 0;
    a->d256 = d256;
    a->cap_b = nb;
  }
  a->n = n;
  a->K = K;
  return 1;
}

void wisp_i8_act_free(wisp_i8_act *a) {
  free(a->q);
  free(a->d);
  free(a->ds);
  free(a->ds16);
  free(a->qs16);
  free(a->d256);
  memset(a, 0, sizeof *a);
}

int wisp_i8_layout_for(wisp_wtype t, int n) {
  return (t == WISP_W_Q4 || t == WISP_W_Q4Z) && n == 1 ? WISP_I8_PAIRED : WISP_I8_NATURAL;
}

int wisp_i8_per256_for(wisp_wtype t, int n) { return wisp_i8_per16(t) && n == 1; }

int wisp_i8_supported(const wisp_matrix *m) {
  switch (m->type) {
    case WISP_W_Q4:
    case WISP_W_Q4Z:
    case WISP_W_Q8_0:
    case WISP_W_Q5_0:
    case WISP_W_Q4_1:
    case WISP_W_Q5_1: return m->cols > 0 && m->cols % 32 == 0;
    case WISP_W_Q4K:
    case WISP_W_Q5K:
    case WISP_W_Q6K:
    case WISP_W_Q3K:
    case WISP_W_Q2K: return m->cols > 0 && m->cols % 256 == 0;
    default: return 0;
  }
}

int wisp_i8_per16(wisp_wtype t) { return t == WISP_W_Q6K || t == WISP_W_Q3K || t == WISP_W_Q2K; }

int wisp_i8_needs_f16_scales(const wisp_matrix *m) { return m->type == WISP_W_Q4 || m->type == WISP_W_Q4Z; }

void wisp_i8_scales_f16(const wisp_matrix *m, uint16_t *s16) {
  const size_t n = (size_t)m->rows * (size_t)(m->cols / 32);
  for (size_t i = 0; i < n; i++) s16[i] = wisp_f32_to_f16(m->scales[i]);
}

void wisp_i8_q8_0_of_f16_rows(const wisp_matrix *m, int r0, int r1, uint8_t *out, float *row,
                              void (*row_f32)(const wisp_matrix *m, int row, float *out)) {
  const size_t row_bytes = wisp_q8_0_bytes(1, m->cols);
  for (int r = r0; r < r1; r++) {
    row_f32(m, r, row);
    wisp_quantize_q8_0_rows(row, 1, m->cols, out + (size_t)r * row_bytes);
  }
}

int wisp_i8_q8_0_of_f16(const wisp_matrix *m, uint8_t *out) {
  float *row = malloc((size_t)(m->cols > 0 ? m->cols : 1) * sizeof *row);
  if (!row) return 0;
  wisp_i8_q8_0_of_f16_rows(m, 0, m->rows, out, row, wisp_matrix_row_f32);
  free(row);
  return 1;
}

wisp_matrix wisp_i8_q8_0_view(const wisp_matrix *m, const uint8_t *blocks) {
  wisp_matrix v = *m;
  v.type = WISP_W_Q8_0;
  v.q = blocks;
  v.f32 = NULL;
  v.scales = NULL;
  v.zp = NULL;
  return v;
}

static float f16_at(const uint8_t *p) { return wisp_f16_to_f32((uint16_t)(p[0] | p[1] << 8)); }

void wisp_i8_row_scales(const wisp_matrix *m, const uint16_t *s16, int row, float *s, float *o) {
  const int nb = m->cols / 32;
  if (m->type == WISP_W_Q4 || m->type == WISP_W_Q4Z) {
    const uint16_t *sc = s16 + (size_t)row * nb;
    for (int b = 0; b < nb; b++) {
      int z = 8;
      if (m->type == WISP_W_Q4Z) z = wisp_q4z_zero_point(m->zp, (size_t)row * nb + b);
      s[b] = wisp_f16_to_f32(sc[b]);
      o[b] = (float)z * s[b];
    }
  } else if (m->type == WISP_W_Q4K || m->type == WISP_W_Q5K) { /* the same head: d, dmin, 12 bytes of sc and m */
    const int nsb = m->cols / WISP_Q4K_BLOCK;
    const size_t bb = m->type == WISP_W_Q4K ? WISP_Q4K_BYTES : WISP_Q5K_BYTES;
    const uint8_t *blk = m->q + (size_t)row * nsb * bb;
    for (int k = 0; k < nsb; k++, blk += bb) {
      float d = f16_at(blk), dmin = f16_at(blk + 2);
      for (int j = 0; j < 8; j++) {
        int sc, mn;
        wisp_q4k_scale_min(blk + 4, j, &sc, &mn);
        s[8 * k + j] = d * (float)sc;
        o[8 * k + j] = dmin * (float)mn;
      }
    }
  } else if (m->type == WISP_W_Q4_1 || m->type == WISP_W_Q5_1) { /* w = d u + m: s = d, o = -m */
    const size_t bb = m->type == WISP_W_Q4_1 ? WISP_Q4_1_BYTES : WISP_Q5_1_BYTES;
    const uint8_t *blk = m->q + (size_t)row * nb * bb;
    for (int b = 0; b < nb; b++) {
      s[b] = f16_at(blk + (size_t)b * bb);
      o[b] = -f16_at(blk + (size_t)b * bb + 2);
    }
  } else { /* Q5_0 (w = d (u - 16): s = d, o = 16 d) and Q8_0 (signed: o = 0), d at each block's head */
    const int q5 = m->type == WISP_W_Q5_0;
    const size_t bb = q5 ? WISP_Q5_0_BYTES : WISP_Q8_0_BYTES;
    const uint8_t *blk = m->q + (size_t)row * nb * bb;
    for (int b = 0; b < nb; b++) {
      s[b] = f16_at(blk + (size_t)b * bb);
      o[b] = q5 ? 16.0f * s[b] : 0;
    }
  }
}

/* ---- scalar reference ---- */

/* per256: one scale a super-block of 256, each 16's sum (cpu_i8.h) */
static void quantize256_scalar(const float *x, int t0, int t1, wisp_i8_act *a) {
  const int K = a->K, nsb = K / 256;
  for (int t = t0; t < t1; t++)
    for (int k = 0; k < nsb; k++) {
      const float *xk = x + (size_t)t * K + 256 * k;
      int8_t *q = a->q + (size_t)t * K + 256 * k;
      float amax = 0;
      for (int e = 0; e < 256; e++) amax = fmaxf(amax, fabsf(xk[e]));
      const float id = amax > 0 ? 127.0f / amax : 0.0f;
      for (int h = 0; h < 16; h++) {
        int sum = 0;
        for (int e = 16 * h; e < 16 * h + 16; e++) sum += q[e] = (int8_t)lrintf(xk[e] * id);
        a->qs16[(size_t)t * (K / 16) + 16 * k + h] = (int16_t)sum;
      }
      a->d256[(size_t)t * nsb + k] = amax / 127.0f;
    }
}

static void quantize_scalar(const float *x, int t0, int t1, wisp_i8_act *a) {
  const int K = a->K, nb = K / 32;
  if (a->per256) {
    quantize256_scalar(x, t0, t1, a);
    return;
  }
  for (int t = t0; t < t1; t++)
    for (int b = 0; b < nb; b++) {
      const float *xb = x + (size_t)t * K + 32 * b;
      int8_t *q = a->q + (size_t)t * K;
      float amax = 0;
      for (int e = 0; e < 32; e++) amax = fmaxf(amax, fabsf(xb[e]));
      float d = amax / 127.0f, id = amax > 0 ? 127.0f / amax : 0.0f;
      int half[2] = {0, 0};
      for (int e = 0; e < 32; e++) {
        int v = (int)lrintf(xb[e] * id);
        q[wisp_i8_pos(a->layout, nb, b, e)] = (int8_t)v;
        half[e / 16] += v;
      }
      a->d[(size_t)t * nb + b] = d;
      a->ds[(size_t)t * nb + b] = d * (float)(half[0] + half[1]);
      for (int h = 0; h < 2; h++) {
        a->qs16[(size_t)t * 2 * nb + 2 * b + h] = (int16_t)half[h];
        a->ds16[(size_t)t * 2 * nb + 2 * b + h] = d * (float)half[h];
      }
    }
}

/* The weight integer u of element e in block b of a row (Q8_0: signed). */
static int weight_int(const wisp_matrix *m, int row, int b, int e) {
  if (m->type == WISP_W_Q4 || m->type == WISP_W_Q4Z) {
    uint8_t byte = m->q[(size_t)row * (m->cols / 2) + 16 * b + e / 2];
    return e & 1 ? byte >> 4 : byte & 15;
  }
  if (m->type == WISP_W_Q4K) {
    const uint8_t *blk = m->q + ((size_t)row * (m->cols / WISP_Q4K_BLOCK) + b / 8) * WISP_Q4K_BYTES;
    int j = b % 8;
    uint8_t byte = blk[16 + 32 * (j / 2) + e];
    return j & 1 ? byte >> 4 : byte & 15;
  }
  if (m->type == WISP_W_Q5_0) { /* d, 32 high bits, 16 nibble bytes (element j low, j + 16 high) */
    const uint8_t *blk = m->q + ((size_t)row * (m->cols / 32) + b) * WISP_Q5_0_BYTES;
    const uint32_t qh = (uint32_t)blk[2] | (uint32_t)blk[3] << 8 | (uint32_t)blk[4] << 16 | (uint32_t)blk[5] << 24;
    const int nib = e < 16 ? blk[6 + e] & 15 : blk[6 + e - 16] >> 4;
    return nib | (int)(qh >> e & 1) << 4;
  }
  return (int8_t)m->q[((size_t)row * (m->cols / 32) + b) * WISP_Q8_0_BYTES + 2 + e];
}

/* The types the scalar reference reads through wisp_qblock_split. */
static int reads_split(wisp_wtype t) {
  return t == WISP_W_Q4_1 || t == WISP_W_Q5_1 || t == WISP_W_Q5K || wisp_i8_per16(t);
}

/* The ggml block types other than Q4_K, Q8_0 and Q5_0, from the format's
 * own decoder: element i of a block is s[i/16] * q[i] + o[i/16] with q a
 * small signed integer, so a row times a token is, per 16 elements h,
 * s[h] d[b] idot16(q_h, a_h) + o[h] ds16[h], each dot in exact integers. */
static void gemm_split_scalar(const wisp_matrix *W, int r0, int nr, const wisp_i8_act *a, int t0, int nt, float *y,
                              size_t ldy, int accumulate) {
  const int K = W->cols, nb = K / 32;
  const int block = W->type == WISP_W_Q4_1 || W->type == WISP_W_Q5_1 ? 32 : 256;
  const size_t bb = wisp_quant_traits_of(W->type)->block_bytes;
  for (int r = r0; r < r0 + nr; r++)
    for (int t = t0; t < t0 + nt; t++) {
      const int8_t *q = a->q + (size_t)t * K;
      const float *d = a->d + (size_t)t * nb, *ds16 = a->ds16 + (size_t)t * 2 * nb;
      const float *d256 = a->d256 + (size_t)t * (K / 256);
      const int16_t *qs16 = a->qs16 + (size_t)t * (K / 16);
      float acc = 0, off = 0;
      for (int k = 0; k < K / block; k++) {
        int8_t wq[256];
        float s[16], o[16];
        wisp_qblock_split(W->type, W->q + ((size_t)r * (K / block) + k) * bb, wq, s, o);
        for (int h = 0; h < block / 16; h++) {
          const int e0 = k * block + 16 * h;
          int32_t dot = 0;
          for (int e = 0; e < 16; e++) dot += wq[16 * h + e] * q[wisp_i8_pos(a->layout, nb, (e0 + e) / 32, (e0 + e) % 32)];
          if (a->per256) { /* the super-block's one activation scale (block is 256 here) */
            acc += s[h] * d256[k] * (float)dot;
            off += o[h] * d256[k] * (float)qs16[e0 / 16];
          } else {
            acc += s[h] * d[e0 / 32] * (float)dot;
            off += o[h] * ds16[e0 / 16];
          }
        }
      }
      float v = acc + off;
      float *dst = y + (size_t)(t - t0) * ldy + (r - r0);
      *dst = accumulate ? *dst + v : v;
    }
}

static void gemm_scalar(const wisp_matrix *W, const uint16_t *s16, int r0, int nr, const wisp_i8_act *a, int t0,
                        int nt, float *y, size_t ldy, int accumulate, float *scratch) {
  if (reads_split(W->type)) {
    gemm_split_scalar(W, r0, nr, a, t0, nt, y, ldy, accumulate);
    return;
  }
  const int K = W->cols, nb = K / 32;
  float *s = scratch, *o = scratch + nb;
  for (int r = r0; r < r0 + nr; r++) {
    wisp_i8_row_scales(W, s16, r, s, o);
    for (int t = t0; t < t0 + nt; t++) {
      const int8_t *q = a->q + (size_t)t * K;
      const float *d = a->d + (size_t)t * nb, *ds = a->ds + (size_t)t * nb;
      float acc = 0, off = 0;
      for (int b = 0; b < nb; b++) {
        int32_t dot = 0;
        for (int e = 0; e < 32; e++) dot += weight_int(W, r, b, e) * q[wisp_i8_pos(a->layout, nb, b, e)];
        acc += s[b] * d[b] * (float)dot;
        off += o[b] * ds[b];
      }
      float v = acc - off;
      float *dst = y + (size_t)(t - t0) * ldy + (r - r0);
      *dst = accumulate ? *dst + v : v;
    }
  }
}

static const wisp_i8_kernels k_scalar = {"scalar", 0, quantize_scalar, gemm_scalar};

const wisp_i8_kernels *wisp_i8_kernels_scalar(void) { return &k_scalar; }

/* ---- choosing ---- */

#if defined(__x86_64__)
#include <cpuid.h>

static uint64_t xgetbv0(void) {
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t)hi << 32 | lo;
}

void wisp_cpu_features_get(wisp_cpu_features *f) {
  memset(f, 0, sizeof *f);
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return;
  int fma = c >> 12 & 1, osxsave = c >> 27 & 1, avx = c >> 28 & 1, f16c = c >> 29 & 1;
  if (!osxsave || !avx) return;
  uint64_t xcr0 = xgetbv0();
  int ymm_state = (xcr0 & 6) == 6, zmm_state = (xcr0 & 0xe6) == 0xe6;
  if (!ymm_state || __get_cpuid_max(0, NULL) < 7) return;
  __cpuid_count(7, 0, a, b, c, d);
  int avx2 = b >> 5 & 1, avx512f = b >> 16 & 1, avx512bw = b >> 30 & 1, avx512vl = b >> 31 & 1;
  int avx512vnni = c >> 11 & 1;
  unsigned a1, b1, c1, d1;
  __cpuid_count(7, 1, a1, b1, c1, d1);
  int avxvnni = a1 >> 4 & 1;
  f->avx2_fma_f16c = avx2 && fma && f16c;
  f->avxvnni = f->avx2_fma_f16c && avxvnni;
  f->avx512vnni = f->avx2_fma_f16c && zmm_state && avx512f && avx512bw && avx512vl && avx512vnni;
  f->avx512f = f->avx2_fma_f16c && zmm_state && avx512f;
}
#else
void wisp_cpu_features_get(wisp_cpu_features *f) { memset(f, 0, sizeof *f); }
#endif

int wisp_i8_kernels_all(const wisp_i8_kernels **sets, int *runnable, int cap) {
  wisp_cpu_features f;
  wisp_cpu_features_get(&f);
  const wisp_i8_kernels *all[4] = {wisp_i8_kernels_avx512vnni(), wisp_i8_kernels_avxvnni(), wisp_i8_kernels_avx2(),
                                   &k_scalar};
  const int can[4] = {f.avx512vnni, f.avxvnni, f.avx2_fma_f16c, 1};
  int n = 0;
  for (int i = 0; i < 4 && n < cap; i++)
    if (all[i]) {
      sets[n] = all[i];
      runnable[n++] = can[i];
    }
  return n;
}

const wisp_i8_kernels *wisp_i8_kernels_get(void) {
  const wisp_i8_kernels *sets[4];
  int can[4];
  int n = wisp_i8_kernels_all(sets, can, 4);
  for (int i = 0; i < n; i++)
    if (can[i]) return sets[i];
  return &k_scalar;
}
