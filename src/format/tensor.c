/* Q4 block-32 layouts: sizes, reference dequantization and quantizers.
 * See tensor.h and docs/artifact.md for the byte layouts. */
#include "format/tensor.h"

#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

size_t wisp_q4_quant_bytes(int rows, int cols) { return (size_t)rows * (size_t)cols / 2; }
size_t wisp_q4_scale_bytes(int rows, int cols) { return (size_t)rows * (size_t)(cols / WISP_Q4_BLOCK) * 4; }
size_t wisp_q4_zp_bytes(int rows, int cols) {
  size_t blocks = (size_t)rows * (size_t)(cols / WISP_Q4_BLOCK);
  return (blocks + 1) / 2;
}

size_t wisp_q4k_bytes(int rows, int cols) {
  return (size_t)rows * (size_t)(cols / WISP_Q4K_BLOCK) * WISP_Q4K_BYTES;
}

size_t wisp_f16_bytes(int rows, int cols) { return (size_t)rows * (size_t)cols * 2; }
size_t wisp_q8_0_bytes(int rows, int cols) {
  return (size_t)rows * (size_t)(cols / WISP_Q8_0_BLOCK) * WISP_Q8_0_BYTES;
}

uint16_t wisp_f32_to_f16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
  float a = fabsf(f);
  if (a != a) return (uint16_t)(sign | 0x7e00);
  if (a >= 65520.0f) return (uint16_t)(sign | 0x7c00); /* rounds to infinity */
  if (a < ldexpf(1.0f, -14)) {
    /* subnormal: units of 2^-24, round to nearest even */
    float u = a * ldexpf(1.0f, 24);
    long r = lrintf(u);
    return (uint16_t)(sign | (uint16_t)r); /* r == 1024 becomes the smallest normal */
  }
  int e;
  float m = frexpf(a, &e); /* a = m * 2^e, m in [0.5, 1) */
  /* 11 significant bits: mantissa in [1024, 2048) */
  long r = lrintf(ldexpf(m, 11));
  if (r == 2048) { r = 1024; e++; }
  int he = e - 1 + 15;
  if (he >= 31) return (uint16_t)(sign | 0x7c00);
  return (uint16_t)(sign | (uint16_t)(he << 10) | (uint16_t)(r - 1024));
}

void wisp_q4k_scale_min(const uint8_t *b, int j, int *sc, int *m) {
  if (j < 4) {
    *sc = b[j] & 63;
    *m = b[j + 4] & 63;
  } else {
    *sc = (b[j + 4] & 15) | ((b[j - 4] >> 6) << 4);
    *m = (b[j + 4] >> 4) | ((b[j] >> 6) << 4);
  }
}

void wisp_q4k_block_f32(const uint8_t *blk, float *out) {
  float d = wisp_f16_to_f32((uint16_t)(blk[0] | blk[1] << 8));
  float dmin = wisp_f16_to_f32((uint16_t)(blk[2] | blk[3] << 8));
  const uint8_t *qs = blk + 16;
  for (int c = 0; c < 4; c++) {
    int sc0, m0, sc1, m1;
    wisp_q4k_scale_min(blk + 4, 2 * c, &sc0, &m0);
    wisp_q4k_scale_min(blk + 4, 2 * c + 1, &sc1, &m1);
    float d0 = d * (float)sc0, n0 = dmin * (float)m0, d1 = d * (float)sc1, n1 = dmin * (float)m1;
    for (int l = 0; l < 32; l++) {
      out[64 * c + l] = d0 * (float)(qs[32 * c + l] & 15) - n0;
      out[64 * c + 32 + l] = d1 * (float)(qs[32 * c + l] >> 4) - n1;
    }
  }
}

static int clamp_nibble(float v) {
  int q = (int)lrintf(v);
  return q < 0 ? 0 : (q > 15 ? 15 : q);
}

void wisp_quantize_q4(const float *w, int rows, int cols, uint8_t *q, float *scales) {
  const int nb = cols / WISP_Q4_BLOCK;
  for (int r = 0; r < rows; r++) {
    for (int b = 0; b < nb; b++) {
      const float *x = w + (size_t)r * cols + b * 32;
      float amax = 0;
      for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[j]));
      float d = amax / 7.0f;
      float inv = d > 0 ? 1.0f / d : 0.0f;
      scales[(size_t)r * nb + b] = d;
      uint8_t *out = q + (size_t)r * (cols / 2) + b * 16;
      for (int j = 0; j < 16; j++) {
        int lo = clamp_nibble(x[2 * j] * inv + 8.0f);
        int hi = clamp_nibble(x[2 * j + 1] * inv + 8.0f);
        out[j] = (uint8_t)(lo | (hi << 4));
      }
    }
  }
}

void wisp_quantize_q4z(const float *w, int rows, int cols, uint8_t *q, float *scales, uint8_t *zp) {
  const int nb = cols / WISP_Q4_BLOCK;
  memset(zp, 0, wisp_q4_zp_bytes(rows, cols));
  for (int r = 0; r < rows; r++) {
    for (int b = 0; b < nb; b++) {
      const float *x = w + (size_t)r * cols + b * 32;
      float lo = x[0], hi = x[0];
      for (int j = 1; j < 32; j++) { lo = fminf(lo, x[j]); hi = fmaxf(hi, x[j]); }
      if (lo > 0) lo = 0; /* keep 0 representable */
      if (hi < 0) hi = 0;
      float scale = (hi - lo) / 15.0f;
      float inv = scale > 0 ? 1.0f / scale : 0.0f;
      int z = scale > 0 ? clamp_nibble(-lo * inv) : 8;
      size_t block = (size_t)r * nb + b;
      scales[block] = scale;
      zp[block >> 1] |= (uint8_t)((block & 1) ? (z << 4) : z);
      uint8_t *out = q + (size_t)r * (cols / 2) + b * 16;
      for (int j = 0; j < 16; j++) {
        int a = clamp_nibble(x[2 * j] * inv + (float)z);
        int c = clamp_nibble(x[2 * j + 1] * inv + (float)z);
        out[j] = (uint8_t)(a | (c << 4));
      }
    }
  }
}

/* ---- Q4_K quantizer ---- */

/* Affine fit of 32 values as s*q - mn, q = clamp(round((x+mn)/s), 0, 15),
 * mn >= 0 (so the range includes 0 or lies above it). Tries scales around
 * (max-min)/15, refitting s and mn by least squares for each candidate's
 * nibbles; returns the squared error of the best. */
static float fit_subblock(const float *x, float *s_out, float *mn_out) {
  float lo = x[0], hi = x[0];
  for (int i = 1; i < 32; i++) { lo = fminf(lo, x[i]); hi = fmaxf(hi, x[i]); }
  if (lo > 0) lo = 0;
  if (hi <= lo) { *s_out = 0; *mn_out = -lo; return 0; }
  float best_err = INFINITY, best_s = (hi - lo) / 15.0f, best_mn = -lo;
  for (int step = -6; step <= 6; step++) {
    float s = (hi - lo) / (15.0f + 0.25f * (float)step);
    if (s <= 0) continue;
    float mn = -lo;
    int q[32];
    for (int i = 0; i < 32; i++) q[i] = clamp_nibble((x[i] + mn) / s);
    /* least squares for x ~ s*q - mn over the chosen nibbles */
    double sq = 0, sqq = 0, sx = 0, sqx = 0;
    for (int i = 0; i < 32; i++) { sq += q[i]; sqq += (double)q[i] * q[i]; sx += x[i]; sqx += (double)q[i] * x[i]; }
    double det = 32 * sqq - sq * sq;
    if (det > 0) {
      double ns = (32 * sqx - sq * sx) / det, nb = (sx - ns * sq) / 32; /* x ~ ns*q + nb */
      if (ns > 0 && nb <= 0) { s = (float)ns; mn = (float)-nb; }
    }
    float err = 0;
    for (int i = 0; i < 32; i++) {
      int qq = clamp_nibble((x[i] + mn) / s);
      float e = s * (float)qq - mn - x[i];
      err += e * e;
    }
    if (err < best_err) { best_err = err; best_s = s; best_mn = mn; }
  }
  *s_out = best_s;
  *mn_out = best_mn;
  return best_err;
}

static int clamp6(float v) {
  int q = (int)lrintf(v);
  return q < 0 ? 0 : (q > 63 ? 63 : q);
}

static void quantize_q4k_block(const float *x, uint8_t *blk) {
  float s[8], mn[8], smax = 0, mmax = 0;
  for (int j = 0; j < 8; j++) {
    fit_subblock(x + 32 * j, &s[j], &mn[j]);
    smax = fmaxf(smax, s[j]);
    mmax = fmaxf(mmax, mn[j]);
  }
  uint16_t hd = wisp_f32_to_f16(smax / 63.0f), hm = wisp_f32_to_f16(mmax / 63.0f);
  float d = wisp_f16_to_f32(hd), dmin = wisp_f16_to_f32(hm);
  int sc[8], m[8];
  for (int j = 0; j < 8; j++) {
    sc[j] = d > 0 ? clamp6(s[j] / d) : 0;
    m[j] = dmin > 0 ? clamp6(mn[j] / dmin) : 0;
  }
  memset(blk, 0, WISP_Q4K_BYTES);
  blk[0] = (uint8_t)(hd & 255);
  blk[1] = (uint8_t)(hd >> 8);
  blk[2] = (uint8_t)(hm & 255);
  blk[3] = (uint8_t)(hm >> 8);
  uint8_t *p = blk + 4;
  for (int j = 0; j < 4; j++) {
    p[j] = (uint8_t)(sc[j] | ((sc[j + 4] >> 4) << 6));
    p[j + 4] = (uint8_t)(m[j] | ((m[j + 4] >> 4) << 6));
    p[j + 8] = (uint8_t)((sc[j + 4] & 15) | ((m[j + 4] & 15) << 4));
  }
  uint8_t *qs = blk + 16;
  for (int j = 0; j < 8; j++) {
    float ds = d * (float)sc[j], dm = dmin * (float)m[j];
    float inv = ds > 0 ? 1.0f / ds : 0.0f;
    int c = j / 2, hi = j & 1;
    for (int l = 0; l < 32; l++) {
      int q = ds > 0 ? clamp_nibble((x[32 * j + l] + dm) * inv) : 0;
      qs[32 * c + l] |= (uint8_t)(hi ? q << 4 : q);
    }
  }
}

typedef struct {
  const float *w;
  uint8_t *out;
  int r0, r1, cols;
} q4k_rows;

static void *quantize_q4k_rows(void *arg) {
  const q4k_rows *j = arg;
  const int nsb = j->cols / WISP_Q4K_BLOCK;
  for (int r = j->r0; r < j->r1; r++)
    for (int b = 0; b < nsb; b++)
      quantize_q4k_block(j->w + (size_t)r * j->cols + (size_t)b * WISP_Q4K_BLOCK,
                         j->out + ((size_t)r * nsb + b) * WISP_Q4K_BYTES);
  return NULL;
}

/* Rows are independent, so large matrices are split over the machine's
 * cores (the fit above costs ~40 operations an element: a 2B-parameter
 * model took minutes on one). The bytes do not depend on the split. */
void wisp_quantize_q4k(const float *w, int rows, int cols, uint8_t *out) {
  enum { MAX_THREADS = 32 };
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int nt = 1;
  if ((uint64_t)rows * (uint64_t)cols >= (1u << 20) && cores > 1) nt = cores < MAX_THREADS ? (int)cores : MAX_THREADS;
  if (nt > rows) nt = rows > 0 ? rows : 1;
  q4k_rows job[MAX_THREADS];
  pthread_t tid[MAX_THREADS];
  int running[MAX_THREADS] = {0};
  for (int t = 0; t < nt; t++)
    job[t] = (q4k_rows){w, out, (int)((int64_t)rows * t / nt), (int)((int64_t)rows * (t + 1) / nt), cols};
  for (int t = 1; t < nt; t++) running[t] = pthread_create(&tid[t], NULL, quantize_q4k_rows, &job[t]) == 0;
  for (int t = 0; t < nt; t++)
    if (!running[t]) quantize_q4k_rows(&job[t]); /* job 0, and any whose thread did not start */
  for (int t = 1; t < nt; t++)
    if (running[t]) pthread_join(tid[t], NULL);
}

void wisp_quantize_f16(const float *w, int rows, int cols, uint8_t *out) {
  size_t n = (size_t)rows * (size_t)cols;
  for (size_t i = 0; i < n; i++) {
    uint16_t h = wisp_f32_to_f16(w[i]);
    out[2 * i] = (uint8_t)(h & 0xff);
    out[2 * i + 1] = (uint8_t)(h >> 8);
  }
}

/* v rounded to the nearest integer, ties to even, for |v| < 2^22: what
 * lrintf gives in the default rounding mode, without its libm call (the
 * Q8_0 quantizer's inner loop, which also makes the f16_i8 copies at
 * session start). Adding 1.5 * 2^23 leaves no fraction bits, so the sum is
 * rounded to an integer by the FPU's own rounding; C11 without fast-math
 * keeps the add and the subtract. Where floats are evaluated wider (x87,
 * FLT_EVAL_METHOD != 0) the sum would keep the fraction: lrintf there. */
static float round_even_small(float v) {
#if FLT_EVAL_METHOD == 0
  return (v + 12582912.0f) - 12582912.0f;
#else
  return (float)lrintf(v);
#endif
}

void wisp_quantize_q8_0_rows(const float *w, int rows, int cols, uint8_t *out) {
  const int nb = cols / WISP_Q8_0_BLOCK;
  for (int r = 0; r < rows; r++)
    for (int b = 0; b < nb; b++) {
      const float *x = w + (size_t)r * cols + (size_t)b * WISP_Q8_0_BLOCK;
      uint8_t *blk = out + ((size_t)r * nb + b) * WISP_Q8_0_BYTES;
      float amax = 0; /* a compare, not fmaxf (a libm call here); a NaN is skipped by both */
      for (int i = 0; i < WISP_Q8_0_BLOCK; i++) amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
      uint16_t hd = wisp_f32_to_f16(amax / 127.0f);
      float d = wisp_f16_to_f32(hd);
      blk[0] = (uint8_t)(hd & 0xff);
      blk[1] = (uint8_t)(hd >> 8);
      for (int i = 0; i < WISP_Q8_0_BLOCK; i++) {
        float q = d > 0 ? round_even_small(x[i] / d) : 0;
        q = q > 127 ? 127 : q >= -127 ? q : -127; /* a NaN (a NaN or infinite weight) clamps to -127, as lrintf's did */
        blk[2 + i] = (uint8_t)(int8_t)q;
      }
    }
}

void wisp_rope_rows(const float *inv, int half, int rows, float *cs, float *sn) {
  for (int p = 0; p < rows; p++)
    for (int i = 0; i < half; i++) {
      float ang = (float)p * inv[i];
      if (cs) cs[(size_t)p * half + i] = cosf(ang);
      if (sn) sn[(size_t)p * half + i] = sinf(ang);
    }
}

void wisp_rope_table(double theta, int dim, int rows, float *cs, float *sn) {
  const int half = dim / 2;
  for (int i = 0; i < half; i++) {
    float inv = (float)(1.0 / pow(theta, (double)(2 * i) / (double)dim));
    for (int p = 0; p < rows; p++) {
      float ang = (float)p * inv;
      if (cs) cs[(size_t)p * half + i] = cosf(ang);
      if (sn) sn[(size_t)p * half + i] = sinf(ang);
    }
  }
}
