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

void wisp_q4_0_block_f32(const uint8_t *b, float *out) {
  int q[32];
  const float d = f16_at(b);
  nibbles32(b + 2, q);
  for (int i = 0; i < 32; i++) out[i] = d * (float)(q[i] - 8);
}

void wisp_q4_1_block_f32(const uint8_t *b, float *out) {
  int q[32];
  const float d = f16_at(b), m = f16_at(b + 2);
  nibbles32(b + 4, q);
  for (int i = 0; i < 32; i++) out[i] = d * (float)q[i] + m;
}

void wisp_q5_0_block_f32(const uint8_t *b, float *out) {
  int q[32];
  const float d = f16_at(b);
  const uint32_t qh = u32_at(b + 2);
  nibbles32(b + 6, q);
  for (int i = 0; i < 32; i++) out[i] = d * (float)((q[i] | (int)(qh >> i & 1) << 4) - 16);
}

void wisp_q5_1_block_f32(const uint8_t *b, float *out) {
  int q[32];
  const float d = f16_at(b), m = f16_at(b + 2);
  const uint32_t qh = u32_at(b + 4);
  nibbles32(b + 8, q);
  for (int i = 0; i < 32; i++) out[i] = d * (float)(q[i] | (int)(qh >> i & 1) << 4) + m;
}

void wisp_q8_0_block_f32(const uint8_t *b, float *out) {
  const float d = f16_at(b);
  for (int i = 0; i < 32; i++) out[i] = d * (float)(int8_t)b[2 + i];
}

void wisp_q2k_block_f32(const uint8_t *b, float *out) {
  const uint8_t *sc = b, *qs = b + 16;
  const float d = f16_at(b + 80), dmin = f16_at(b + 82);
  for (int h = 0; h < 2; h++)
    for (int j = 0; j < 4; j++)
      for (int g = 0; g < 2; g++) {
        const int s = sc[8 * h + 2 * j + g];
        const float dl = d * (float)(s & 15), ml = dmin * (float)(s >> 4);
        const uint8_t *q = qs + 32 * h + 16 * g;
        float *y = out + 128 * h + 32 * j + 16 * g;
        for (int l = 0; l < 16; l++) y[l] = dl * (float)(q[l] >> (2 * j) & 3) - ml;
      }
}

/* The 6-bit scale of Q3_K sub-block i (0..15), unbiased (-32..31). */
static int q3k_scale(const uint8_t *s, int i) {
  const int low = i < 8 ? s[i] & 15 : s[i - 8] >> 4;
  const int high = s[8 + i % 4] >> (2 * (i / 4)) & 3;
  return (low | high << 4) - 32;
}

void wisp_q3k_block_f32(const uint8_t *b, float *out) {
  const uint8_t *hm = b, *qs = b + 32, *sc = b + 96;
  const float d = f16_at(b + 108);
  for (int h = 0; h < 2; h++)
    for (int j = 0; j < 4; j++)
      for (int g = 0; g < 2; g++) {
        const float dl = d * (float)q3k_scale(sc, 8 * h + 2 * j + g);
        const uint8_t *q = qs + 32 * h + 16 * g, *m = hm + 16 * g;
        float *y = out + 128 * h + 32 * j + 16 * g;
        for (int l = 0; l < 16; l++) {
          const int low = q[l] >> (2 * j) & 3, high = m[l] >> (4 * h + j) & 1;
          y[l] = dl * (float)(low - (high ? 0 : 4));
        }
      }
}

void wisp_q5k_block_f32(const uint8_t *b, float *out) {
  const float d = f16_at(b), dmin = f16_at(b + 2);
  const uint8_t *qh = b + 16, *qs = b + 48;
  for (int c = 0; c < 4; c++) {
    int sc0, m0, sc1, m1;
    wisp_q4k_scale_min(b + 4, 2 * c, &sc0, &m0);
    wisp_q4k_scale_min(b + 4, 2 * c + 1, &sc1, &m1);
    const float d0 = d * (float)sc0, n0 = dmin * (float)m0, d1 = d * (float)sc1, n1 = dmin * (float)m1;
    for (int l = 0; l < 32; l++) {
      const int lo = (qs[32 * c + l] & 15) | (qh[l] >> (2 * c) & 1) << 4;
      const int hi = (qs[32 * c + l] >> 4) | (qh[l] >> (2 * c + 1) & 1) << 4;
      out[64 * c + l] = d0 * (float)lo - n0;
      out[64 * c + 32 + l] = d1 * (float)hi - n1;
    }
  }
}

void wisp_q6k_block_f32(const uint8_t *b, float *out) {
  const uint8_t *ql = b, *qh = b + 128;
  const int8_t *sc = (const int8_t *)(b + 192);
  const float d = f16_at(b + 208);
  for (int h = 0; h < 2; h++)
    for (int k = 0; k < 4; k++)
      for (int l = 0; l < 32; l++) {
        const uint8_t lq = ql[64 * h + 32 * (k % 2) + l];
        const int low = k < 2 ? lq & 15 : lq >> 4;
        const int high = qh[32 * h + l] >> (2 * k) & 3;
        const int e = 128 * h + 32 * k + l;
        out[e] = d * (float)sc[e / 16] * (float)((low | high << 4) - 32);
      }
}
