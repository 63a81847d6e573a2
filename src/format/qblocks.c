/* Block decoders of the ggml formats; layouts in qblocks.h. */
#include "format/qblocks.h"

#include "format/tensor.h"

static float f16_at(const uint8_t *p) { return wisp_f16_to_f32((uint16_t)(p[0] | p[1] << 8)); }

static uint32_t u32_at(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The 32 nibbles of a block-32 type as unsigned values 0..15. */
static void nibbles32(const uint8_t *qs, int q[32]) {
  for (int j = 0; j < 16; j++) {
    q[j] = qs[j] & 15;
    q[j + 16] = qs[j] >> 4;
  }
}

/* ---- each type split into integers q (element by element) and, per 16
 * elements, a scale s and an offset o: value = s * q + o, computed so in
 * f32 (s and o are exact products of the block's f16 fields and its small
 * integer scales and mins) ---- */

static void split_q4_0(const uint8_t *b, int8_t *q, float *s, float *o) {
  int n[32];
  nibbles32(b + 2, n);
  for (int i = 0; i < 32; i++) q[i] = (int8_t)(n[i] - 8);
  s[0] = s[1] = f16_at(b);
  o[0] = o[1] = 0;
}

static void split_q4_1(const uint8_t *b, int8_t *q, float *s, float *o) {
  int n[32];
  nibbles32(b + 4, n);
  for (int i = 0; i < 32; i++) q[i] = (int8_t)n[i];
  s[0] = s[1] = f16_at(b);
  o[0] = o[1] = f16_at(b + 2);
}

static void split_q5_0(const uint8_t *b, int8_t *q, float *s, float *o) {
  int n[32];
  const uint32_t qh = u32_at(b + 2);
  nibbles32(b + 6, n);
  for (int i = 0; i < 32; i++) q[i] = (int8_t)((n[i] | (int)(qh >> i & 1) << 4) - 16);
  s[0] = s[1] = f16_at(b);
  o[0] = o[1] = 0;
}

static void split_q5_1(const uint8_t *b, int8_t *q, float *s, float *o) {
  int n[32];
  const uint32_t qh = u32_at(b + 4);
  nibbles32(b + 8, n);
  for (int i = 0; i < 32; i++) q[i] = (int8_t)(n[i] | (int)(qh >> i & 1) << 4);
  s[0] = s[1] = f16_at(b);
  o[0] = o[1] = f16_at(b + 2);
}

static void split_q2k(const uint8_t *b, int8_t *q, float *s, float *o) {
  const uint8_t *sc = b, *qs = b + 16;
  const float d = f16_at(b + 80), dmin = f16_at(b + 82);
  for (int h = 0; h < 2; h++)
    for (int j = 0; j < 4; j++)
      for (int g = 0; g < 2; g++) {
        const int i = 8 * h + 2 * j + g; /* the 16 elements from 16 * i */
        s[i] = d * (float)(sc[i] & 15);
        o[i] = -(dmin * (float)(sc[i] >> 4));
        for (int l = 0; l < 16; l++) q[16 * i + l] = (int8_t)(qs[32 * h + 16 * g + l] >> (2 * j) & 3);
      }
}

/* The 6-bit scale of Q3_K sub-block i (0..15), unbiased (-32..31). */
static int q3k_scale(const uint8_t *s, int i) {
  const int low = i < 8 ? s[i] & 15 : s[i - 8] >> 4;
  const int high = s[8 + i % 4] >> (2 * (i / 4)) & 3;
  return (low | high << 4) - 32;
}

static void split_q3k(const uint8_t *b, int8_t *q, float *s, float *o) {
  const uint8_t *hm = b, *qs = b + 32, *sc = b + 96;
  const float d = f16_at(b + 108);
  for (int h = 0; h < 2; h++)
    for (int j = 0; j < 4; j++)
      for (int g = 0; g < 2; g++) {
        const int i = 8 * h + 2 * j + g;
        s[i] = d * (float)q3k_scale(sc, i);
        o[i] = 0;
        for (int l = 0; l < 16; l++) {
          const int low = qs[32 * h + 16 * g + l] >> (2 * j) & 3, high = hm[16 * g + l] >> (4 * h + j) & 1;
          q[16 * i + l] = (int8_t)(low - (high ? 0 : 4));
        }
      }
}

static void split_q5k(const uint8_t *b, int8_t *q, float *s, float *o) {
  const float d = f16_at(b), dmin = f16_at(b + 2);
  const uint8_t *qh = b + 16, *qs = b + 48;
  for (int c = 0; c < 4; c++) {
    int sc0, m0, sc1, m1;
    wisp_q4k_scale_min(b + 4, 2 * c, &sc0, &m0);
    wisp_q4k_scale_min(b + 4, 2 * c + 1, &sc1, &m1);
    s[4 * c] = s[4 * c + 1] = d * (float)sc0;
    o[4 * c] = o[4 * c + 1] = -(dmin * (float)m0);
    s[4 * c + 2] = s[4 * c + 3] = d * (float)sc1;
    o[4 * c + 2] = o[4 * c + 3] = -(dmin * (float)m1);
    for (int l = 0; l < 32; l++) {
      q[64 * c + l] = (int8_t)((qs[32 * c + l] & 15) | (qh[l] >> (2 * c) & 1) << 4);
      q[64 * c + 32 + l] = (int8_t)((qs[32 * c + l] >> 4) | (qh[l] >> (2 * c + 1) & 1) << 4);
    }
  }
}

static void split_q6k(const uint8_t *b, int8_t *q, float *s, float *o) {
  const uint8_t *ql = b, *qh = b + 128;
  const int8_t *sc = (const int8_t *)(b + 192);
  const float d = f16_at(b + 208);
  for (int i = 0; i < 16; i++) s[i] = d * (float)sc[i], o[i] = 0;
  for (int h = 0; h < 2; h++)
    for (int k = 0; k < 4; k++)
      for (int l = 0; l < 32; l++) {
        const uint8_t lq = ql[64 * h + 32 * (k % 2) + l];
        const int low = k < 2 ? lq & 15 : lq >> 4;
        const int high = qh[32 * h + l] >> (2 * k) & 3;
        q[128 * h + 32 * k + l] = (int8_t)((low | high << 4) - 32);
      }
}

int wisp_qblock_split(wisp_wtype t, const uint8_t *blk, int8_t *q, float *s, float *o) {
  switch (t) {
    case WISP_W_Q4_0: split_q4_0(blk, q, s, o); return 32;
    case WISP_W_Q4_1: split_q4_1(blk, q, s, o); return 32;
    case WISP_W_Q5_0: split_q5_0(blk, q, s, o); return 32;
    case WISP_W_Q5_1: split_q5_1(blk, q, s, o); return 32;
    case WISP_W_Q2K: split_q2k(blk, q, s, o); return 256;
    case WISP_W_Q3K: split_q3k(blk, q, s, o); return 256;
    case WISP_W_Q5K: split_q5k(blk, q, s, o); return 256;
    case WISP_W_Q6K: split_q6k(blk, q, s, o); return 256;
    default: return 0;
  }
}

/* A block decoded: s * q + o, 16 elements at a time. */
static void combine(wisp_wtype t, const uint8_t *b, float *out) {
  int8_t q[256];
  float s[16], o[16];
  const int n = wisp_qblock_split(t, b, q, s, o);
  for (int i = 0; i < n; i++) out[i] = s[i / 16] * (float)q[i] + o[i / 16];
}

void wisp_q4_0_block_f32(const uint8_t *b, float *out) { combine(WISP_W_Q4_0, b, out); }
void wisp_q4_1_block_f32(const uint8_t *b, float *out) { combine(WISP_W_Q4_1, b, out); }
void wisp_q5_0_block_f32(const uint8_t *b, float *out) { combine(WISP_W_Q5_0, b, out); }
void wisp_q5_1_block_f32(const uint8_t *b, float *out) { combine(WISP_W_Q5_1, b, out); }
void wisp_q2k_block_f32(const uint8_t *b, float *out) { combine(WISP_W_Q2K, b, out); }
void wisp_q3k_block_f32(const uint8_t *b, float *out) { combine(WISP_W_Q3K, b, out); }
void wisp_q5k_block_f32(const uint8_t *b, float *out) { combine(WISP_W_Q5K, b, out); }
void wisp_q6k_block_f32(const uint8_t *b, float *out) { combine(WISP_W_Q6K, b, out); }

void wisp_q8_0_block_f32(const uint8_t *b, float *out) {
  const float d = f16_at(b);
  for (int i = 0; i < 32; i++) out[i] = d * (float)(int8_t)b[2 + i];
}

