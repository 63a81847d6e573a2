/* Random weight matrices for the product tests (random_matrix.h). */
#include "random_matrix.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "format/quant.h"
#include "webgpu_fixture.h" /* test_rand_u32, test_rand_float */

int test_mat_make(test_host_mat *h, wisp_wtype type, int rows, int cols, uint64_t *seed, int varied_rows) {
  memset(h, 0, sizeof *h);
  h->m = (wisp_matrix){.type = type, .rows = rows, .cols = cols};
  if (type == WISP_W_Q4 || type == WISP_W_Q4Z) {
    size_t nq = wisp_q4_quant_bytes(rows, cols), ns = (size_t)rows * (cols / 32), nz = wisp_q4_zp_bytes(rows, cols);
    uint8_t *q = malloc(nq), *z = malloc(nz ? nz : 1);
    float *s = malloc(sizeof(float) * ns);
    h->a = q, h->b = s, h->c = z;
    if (!q || !z || !s) return 0;
    for (size_t i = 0; i < nq; i++) q[i] = (uint8_t)test_rand_u32(seed);
    for (size_t i = 0; i < ns; i++) s[i] = 0.002f + 0.02f * fabsf(test_rand_float(seed));
    for (size_t i = 0; i < nz; i++) z[i] = (uint8_t)test_rand_u32(seed);
    h->m.q = q;
    h->m.scales = s;
    if (type == WISP_W_Q4Z) h->m.zp = z;
    return 1;
  }
  float *f = malloc(sizeof(float) * (size_t)rows * cols);
  if (!f) return 0;
  for (int r = 0; r < rows; r++)
    for (int c = 0; c < cols; c++)
      f[(size_t)r * cols + c] = varied_rows ? 0.05f * (float)(1 + r % 5) * (test_rand_float(seed) + (r % 3 == 0 ? 0.7f : 0.0f))
                                            : 0.1f * test_rand_float(seed);
  if (type == WISP_W_F32) {
    h->m.f32 = f;
    h->a = f;
    return 1;
  }
  size_t nb = type == WISP_W_F16 ? wisp_f16_bytes(rows, cols)
              : type == WISP_W_Q8_0 ? wisp_q8_0_bytes(rows, cols)
                                    : wisp_q4k_bytes(rows, cols);
  uint8_t *q = malloc(nb);
  if (q && type == WISP_W_F16) wisp_quantize_f16(f, rows, cols, q);
  if (q && type == WISP_W_Q8_0) wisp_quantize_q8_0_rows(f, rows, cols, q);
  if (q && type == WISP_W_Q4K) wisp_quantize_q4k(f, rows, cols, q);
  free(f);
  h->m.q = q;
  h->a = q;
  return q != NULL;
}

void test_i8_errors(const float *wd, int rows, int cols, const int8_t *xq, const float *xd, int n, const float *y0,
                    int acc, const float *y, const float *yc, double *exact, double *f32) {
  const int nb = cols / 32;
  double e = 0, mag = 0, ec = 0, mxc = 0;
  for (int t = 0; t < n; t++)
    for (int r = 0; r < rows; r++) {
      const size_t i = (size_t)t * rows + r;
      double ref = acc ? y0[i] : 0.0, sabs = fabs(ref);
      for (int b = 0; xq && b < nb; b++) {
        double dot = 0, dabs = 0;
        for (int k = 0; k < 32; k++) {
          const double v = (double)wd[(size_t)r * cols + b * 32 + k] * xq[(size_t)t * cols + b * 32 + k];
          dot += v;
          dabs += fabs(v);
        }
        ref += xd[(size_t)t * nb + b] * dot;
        sabs += xd[(size_t)t * nb + b] * dabs;
      }
      if (xq) {
        mag = fmax(mag, sabs);
        e = fmax(e, isnan(y[i]) ? INFINITY : fabs(y[i] - ref));
      }
      mxc = fmax(mxc, fabs(yc[i]));
      ec = fmax(ec, isnan(y[i]) ? INFINITY : fabs((double)y[i] - yc[i]));
    }
  *exact = mag > 0 ? e / mag : e;
  *f32 = mxc > 0 ? ec / mxc : ec;
}
