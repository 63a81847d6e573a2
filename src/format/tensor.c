/* Q4 block-32 layouts: sizes, reference dequantization and quantizers.
 * See tensor.h and docs/artifact.md for the byte layouts. */
#include "format/tensor.h"

#include <math.h>
#include <string.h>

const char *wisp_wtype_name(wisp_wtype t) {
  switch (t) {
    case WISP_W_F32: return "f32";
    case WISP_W_Q4: return "q4";
    case WISP_W_Q4Z: return "q4z";
  }
  return "?";
}

size_t wisp_q4_quant_bytes(int rows, int cols) { return (size_t)rows * (size_t)cols / 2; }
size_t wisp_q4_scale_bytes(int rows, int cols) { return (size_t)rows * (size_t)(cols / WISP_Q4_BLOCK) * 4; }
size_t wisp_q4_zp_bytes(int rows, int cols) {
  size_t blocks = (size_t)rows * (size_t)(cols / WISP_Q4_BLOCK);
  return (blocks + 1) / 2;
}

static int zp_at(const uint8_t *zp, size_t block) {
  uint8_t b = zp[block >> 1];
  return (block & 1) ? (b >> 4) : (b & 15);
}

void wisp_matrix_row_f32(const wisp_matrix *m, int row, float *out) {
  if (m->type == WISP_W_F32) {
    memcpy(out, m->f32 + (size_t)row * m->cols, (size_t)m->cols * sizeof(float));
    return;
  }
  const int nb = m->cols / WISP_Q4_BLOCK;
  const uint8_t *q = m->q + (size_t)row * (m->cols / 2);
  const float *s = m->scales + (size_t)row * nb;
  for (int b = 0; b < nb; b++) {
    int zero = 8;
    if (m->type == WISP_W_Q4Z) zero = zp_at(m->zp, (size_t)row * nb + b);
    for (int j = 0; j < WISP_Q4_BLOCK / 2; j++) {
      uint8_t byte = q[b * 16 + j];
      out[b * 32 + 2 * j] = s[b] * (float)((byte & 15) - zero);
      out[b * 32 + 2 * j + 1] = s[b] * (float)((byte >> 4) - zero);
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
