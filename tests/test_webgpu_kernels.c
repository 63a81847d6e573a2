/* wisp's WGSL kernels against plain C references, random data, odd shapes,
 * several geometries (override constants), subgroup and plain variants. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/webgpu/wgpu_kernels.h"
#include "test.h"
#include "util/err.h"
#include "webgpu_fixture.h"

/* ---- Q4 block-32 reference ---------------------------------------------- */

typedef struct {
  uint32_t rows, cols;
  uint8_t *quant; /* rows * cols/2 */
  float *scales;  /* rows * cols/32 */
  float *x;       /* cols */
  double *ref;    /* rows: sum_c W[r][c] x[c] */
  double *mag;    /* rows: sum_c |W[r][c] x[c]| */
} q4_case;

static float q4_value(const q4_case *c, uint32_t r, uint32_t col) {
  uint8_t byte = c->quant[(size_t)r * (c->cols / 2) + col / 2];
  int nib = (col & 1) ? (byte >> 4) : (byte & 15);
  return c->scales[(size_t)r * (c->cols / 32) + col / 32] * (float)(nib - 8);
}

static int q4_make(q4_case *c, uint32_t rows, uint32_t cols, uint64_t seed) {
  memset(c, 0, sizeof *c);
  c->rows = rows;
  c->cols = cols;
  c->quant = malloc((size_t)rows * cols / 2);
  c->scales = malloc((size_t)rows * (cols / 32) * sizeof(float));
  c->x = malloc((size_t)cols * sizeof(float));
  c->ref = malloc((size_t)rows * sizeof(double));
  c->mag = malloc((size_t)rows * sizeof(double));
  if (!c->quant || !c->scales || !c->x || !c->ref || !c->mag) return 0;
  for (size_t i = 0; i < (size_t)rows * cols / 2; i++) c->quant[i] = (uint8_t)test_rand_u32(&seed);
  for (size_t i = 0; i < (size_t)rows * (cols / 32); i++) c->scales[i] = 0.001f + 0.05f * fabsf(test_rand_float(&seed));
  for (uint32_t i = 0; i < cols; i++) c->x[i] = test_rand_float(&seed);
  for (uint32_t r = 0; r < rows; r++) {
    double s = 0, m = 0;
    for (uint32_t col = 0; col < cols; col++) {
      double t = (double)q4_value(c, r, col) * c->x[col];
      s += t;
      m += fabs(t);
    }
    c->ref[r] = s;
    c->mag[r] = m;
  }
  return 1;
}

static void q4_free(q4_case *c) {
  free(c->quant);
  free(c->scales);
  free(c->x);
  free(c->ref);
  free(c->mag);
}

/* |gpu - ref| <= 1e-4 * max(|ref|, 1% of the sum of |terms|): relative 1e-4,
 * with a floor so that a row summing to nearly zero is not judged on noise. */
static int q4_close(double got, double ref, double mag) {
  double scale = fmax(fabs(ref), 0.01 * mag);
  return fabs(got - ref) <= 1e-4 * scale + 1e-12;
}

typedef struct {
  wisp_wgpu_buf q, s, x, y;
} q4_bufs;

static wisp_status q4_upload(wisp_wgpu_device *d, const q4_case *c, q4_bufs *b) {
  memset(b, 0, sizeof *b);
  wisp_status st;
  if ((st = wisp_wgpu_buf_from(d, c->quant, (uint64_t)c->rows * c->cols / 2, "q4 quant", &b->q)) ||
      (st = wisp_wgpu_buf_from(d, c->scales, (uint64_t)c->rows * (c->cols / 32) * 4, "q4 scales", &b->s)) ||
      (st = wisp_wgpu_buf_from(d, c->x, (uint64_t)c->cols * 4, "q4 x", &b->x)) ||
      (st = wisp_wgpu_buf_create(d, (uint64_t)c->rows * 4, WISP_WGPU_STORAGE, "q4 y", &b->y)))
    return st;
  return WISP_OK;
}

static void q4_bufs_free(wisp_wgpu_device *d, q4_bufs *b) {
  wisp_wgpu_buf_free(d, &b->q);
  wisp_wgpu_buf_free(d, &b->s);
  wisp_wgpu_buf_free(d, &b->x);
  wisp_wgpu_buf_free(d, &b->y);
}

/* Runs one op and reads y back; returns WISP_OK or the error. */
static wisp_status run_op(wisp_wgpu_device *d, const wisp_wgpu_op *op, wisp_wgpu_buf y, float *out, size_t n) {
  memset(out, 0xFF, n * sizeof(float)); /* NaN: rows left unwritten show up */
  wisp_wgpu_batch b;
  wisp_status st = wisp_wgpu_batch_begin(d, &b);
  if (st) return st;
  wisp_wgpu_op_record(&b, op);
  st = wisp_wgpu_batch_submit(&b);
  if (st) return st;
  return wisp_wgpu_buf_read(d, y, 0, out, n * sizeof(float));
}

typedef struct {
  uint32_t wg, rows;
} geometry;

/* All shapes x geometries for one variant. Returns 0 on a failure, with the
 * message in err. */
static int q4_suite(wisp_wgpu_device *d, int subgroups, const geometry *geos, int n_geo, char *err, size_t cap) {
  static const uint32_t shapes_rows[] = {1, 7, 33, 1000};
  static const uint32_t shapes_cols[] = {32, 96, 2560};
  wisp_wgpu_kernel *k[8] = {0};
  int ok = 1;
  for (int g = 0; g < n_geo && ok; g++) {
    if (wisp_wgpu_q4_matvec_kernel(d, geos[g].wg, geos[g].rows, subgroups, &k[g])) {
      snprintf(err, cap, "WG=%u ROWS=%u: %s", geos[g].wg, geos[g].rows, wisp_last_error());
      ok = 0;
    }
  }
  uint64_t seed = 1234;
  for (size_t ri = 0; ok && ri < sizeof shapes_rows / sizeof shapes_rows[0]; ri++) {
    for (size_t ci = 0; ok && ci < sizeof shapes_cols / sizeof shapes_cols[0]; ci++) {
      uint32_t rows = shapes_rows[ri], cols = shapes_cols[ci];
      q4_case c;
      q4_bufs bufs;
      float *y = malloc(rows * sizeof(float));
      if (!y || !q4_make(&c, rows, cols, seed++)) {
        snprintf(err, cap, "out of memory");
        ok = 0;
      } else if (q4_upload(d, &c, &bufs)) {
        snprintf(err, cap, "upload %ux%u: %s", rows, cols, wisp_last_error());
        ok = 0;
        q4_bufs_free(d, &bufs);
      } else {
        for (int g = 0; g < n_geo && ok; g++) {
          wisp_wgpu_op op;
          wisp_status st = wisp_wgpu_q4_matvec_op(d, k[g], (wisp_wgpu_binding){bufs.q.b, 0, 0},
                                                  (wisp_wgpu_binding){bufs.s.b, 0, 0},
                                                  (wisp_wgpu_binding){bufs.x.b, 0, 0},
                                                  (wisp_wgpu_binding){bufs.y.b, 0, 0}, rows, cols, &op);
          if (!st) st = run_op(d, &op, bufs.y, y, rows);
          wisp_wgpu_op_free(d, &op);
          if (st) {
            snprintf(err, cap, "%ux%u WG=%u ROWS=%u: %s", rows, cols, geos[g].wg, geos[g].rows, wisp_last_error());
            ok = 0;
          }
          for (uint32_t r = 0; ok && r < rows; r++)
            if (!q4_close(y[r], c.ref[r], c.mag[r])) {
              snprintf(err, cap, "%ux%u WG=%u ROWS=%u %s: y[%u] = %.9g, reference %.9g", rows, cols, geos[g].wg,
                       geos[g].rows, subgroups ? "subgroups" : "plain", r, y[r], c.ref[r]);
              ok = 0;
            }
        }
        q4_bufs_free(d, &bufs);
      }
      if (y) q4_free(&c);
      free(y);
    }
  }
  for (int g = 0; g < n_geo; g++) wisp_wgpu_kernel_free(d, k[g]);
  return ok;
}

TEST(webgpu_q4_matvec_subgroups) {
  WEBGPU_OR_SKIP(d);
  if (!d->has_subgroups) SKIP("device has no subgroups");
  /* WG=20 leaves a partial subgroup on 8- and 16-wide subgroups. */
  static const geometry geos[] = {{32, 1}, {64, 4}, {128, 8}, {256, 2}, {20, 3}};
  char err[1200] = "";
  CHECKF(q4_suite(d, 1, geos, 5, err, sizeof err), "%s", err);
}

TEST(webgpu_q4_matvec_plain) {
  WEBGPU_OR_SKIP(d);
  static const geometry geos[] = {{32, 1}, {64, 4}, {256, 8}};
  char err[1200] = "";
  CHECKF(q4_suite(d, 0, geos, 3, err, sizeof err), "%s", err);
}

/* A matrix bound as two row ranges (buffer offsets), as wisp must do for
 * weights over maxStorageBufferBindingSize; both ops in one batch. Also a
 * grid over the per-dimension workgroup limit (2-D grid). */
TEST(webgpu_q4_matvec_split_and_big_grid) {
  WEBGPU_OR_SKIP(d);
  uint32_t rows = 200, cols = 2560, split = 64;
  /* Offsets: quant split*1280, scales split*320, y split*4 bytes. */
  uint64_t align = d->info.min_storage_buffer_offset_alignment;
  CHECKF((split * 4u) % align == 0, "alignment %llu too large for the split test", (unsigned long long)align);
  q4_case c;
  CHECK(q4_make(&c, rows, cols, 99));
  q4_bufs bufs;
  wisp_wgpu_kernel *k = NULL;
  float *y = malloc(rows * sizeof(float));
  wisp_wgpu_op op[2];
  memset(op, 0, sizeof op);
  wisp_status st = q4_upload(d, &c, &bufs);
  if (!st) st = wisp_wgpu_q4_matvec_kernel(d, 64, 4, -1, &k);
  const uint64_t qrow = cols / 2, srow = cols / 32 * 4;
  if (!st)
    st = wisp_wgpu_q4_matvec_op(d, k, (wisp_wgpu_binding){bufs.q.b, 0, split * qrow},
                                (wisp_wgpu_binding){bufs.s.b, 0, split * srow}, (wisp_wgpu_binding){bufs.x.b, 0, 0},
                                (wisp_wgpu_binding){bufs.y.b, 0, split * 4}, split, cols, &op[0]);
  if (!st)
    st = wisp_wgpu_q4_matvec_op(d, k, (wisp_wgpu_binding){bufs.q.b, split * qrow, 0},
                                (wisp_wgpu_binding){bufs.s.b, split * srow, 0}, (wisp_wgpu_binding){bufs.x.b, 0, 0},
                                (wisp_wgpu_binding){bufs.y.b, split * 4, 0}, rows - split, cols, &op[1]);
  if (!st) {
    wisp_wgpu_batch b;
    st = wisp_wgpu_batch_begin(d, &b);
    if (!st) {
      wisp_wgpu_op_record(&b, &op[0]);
      wisp_wgpu_op_record(&b, &op[1]);
      st = wisp_wgpu_batch_submit(&b);
    }
    if (!st) st = wisp_wgpu_buf_read(d, bufs.y, 0, y, rows * sizeof(float));
  }
  char err[1200] = "";
  if (st) snprintf(err, sizeof err, "%s", wisp_last_error());
  for (uint32_t r = 0; !st && !err[0] && r < rows; r++)
    if (!q4_close(y[r], c.ref[r], c.mag[r])) snprintf(err, sizeof err, "split: y[%u] = %g vs %g", r, y[r], c.ref[r]);
  wisp_wgpu_op_free(d, &op[0]);
  wisp_wgpu_op_free(d, &op[1]);
  wisp_wgpu_kernel_free(d, k);
  q4_bufs_free(d, &bufs);
  q4_free(&c);
  free(y);
  CHECKF(!err[0], "%s", err);

  /* 70000 rows, one per workgroup: more workgroups than one grid dimension. */
  rows = 70000;
  cols = 32;
  CHECK(q4_make(&c, rows, cols, 5));
  y = malloc(rows * sizeof(float));
  st = q4_upload(d, &c, &bufs);
  k = NULL;
  if (!st) st = wisp_wgpu_q4_matvec_kernel(d, 32, 1, -1, &k);
  if (!st) st = wisp_wgpu_q4_matvec_op(d, k, (wisp_wgpu_binding){bufs.q.b, 0, 0}, (wisp_wgpu_binding){bufs.s.b, 0, 0},
                                       (wisp_wgpu_binding){bufs.x.b, 0, 0}, (wisp_wgpu_binding){bufs.y.b, 0, 0}, rows,
                                       cols, &op[0]);
  uint32_t gy = op[0].gy;
  if (!st) st = run_op(d, &op[0], bufs.y, y, rows);
  if (st) snprintf(err, sizeof err, "big grid: %s", wisp_last_error());
  for (uint32_t r = 0; !err[0] && r < rows; r++)
    if (!q4_close(y[r], c.ref[r], c.mag[r])) snprintf(err, sizeof err, "big grid: y[%u] = %g vs %g", r, y[r], c.ref[r]);
  wisp_wgpu_op_free(d, &op[0]);
  wisp_wgpu_kernel_free(d, k);
  q4_bufs_free(d, &bufs);
  q4_free(&c);
  free(y);
  CHECKF(!err[0], "%s", err);
  CHECKF(gy > 1, "grid was not split (gy=%u)", gy);
}

/* Shape errors are caught on the host with a message. */
TEST(webgpu_q4_matvec_rejects_bad_shapes) {
  WEBGPU_OR_SKIP(d);
  wisp_wgpu_kernel *k = NULL;
  CHECKF(wisp_wgpu_q4_matvec_kernel(d, 64, 4, -1, &k) == WISP_OK, "%s", wisp_last_error());
  wisp_wgpu_buf small = {0};
  wisp_status st = wisp_wgpu_buf_create(d, 64, WISP_WGPU_STORAGE, "small", &small);
  wisp_wgpu_op op;
  wisp_wgpu_binding b = {small.b, 0, 0};
  wisp_status e1 = wisp_wgpu_q4_matvec_op(d, k, b, b, b, b, 4, 33, &op);
  char m1[1100];
  snprintf(m1, sizeof m1, "%s", wisp_last_error());
  wisp_status e2 = wisp_wgpu_q4_matvec_op(d, k, b, b, b, b, 4, 64, &op);
  char m2[1100];
  snprintf(m2, sizeof m2, "%s", wisp_last_error());
  wisp_wgpu_kernel *bad = NULL;
  wisp_status e3 = wisp_wgpu_q4_matvec_kernel(d, 64, 65, -1, &bad);
  wisp_wgpu_buf_free(d, &small);
  wisp_wgpu_kernel_free(d, k);
  wisp_wgpu_kernel_free(d, bad);
  CHECK(st == WISP_OK);
  CHECKF(e1 == WISP_EINVAL && strstr(m1, "multiple of 32"), "%s", m1);
  CHECKF(e2 == WISP_EINVAL && strstr(m2, "quant"), "%s", m2);
  CHECK(e3 == WISP_EINVAL);
}

/* ---- RMSNorm ---------------------------------------------------------------- */

static int rms_suite(wisp_wgpu_device *d, int subgroups, const uint32_t *wgs, int n_wg, char *err, size_t cap) {
  static const uint32_t shapes_rows[] = {1, 3, 17};
  static const uint32_t shapes_n[] = {1, 7, 64, 2560, 4099};
  const float eps = 1e-5f;
  wisp_wgpu_kernel *k[8] = {0};
  int ok = 1;
  for (int g = 0; g < n_wg && ok; g++)
    if (wisp_wgpu_rmsnorm_kernel(d, wgs[g], subgroups, &k[g])) {
      snprintf(err, cap, "WG=%u: %s", wgs[g], wisp_last_error());
      ok = 0;
    }
  uint64_t seed = 77;
  for (size_t ri = 0; ok && ri < 3; ri++) {
    for (size_t ni = 0; ok && ni < 5; ni++) {
      uint32_t rows = shapes_rows[ri], n = shapes_n[ni];
      size_t total = (size_t)rows * n;
      float *x = malloc(total * sizeof(float)), *w = malloc(n * sizeof(float));
      float *y = malloc(total * sizeof(float));
      double *ref = malloc(total * sizeof(double));
      if (!x || !w || !y || !ref) {
        snprintf(err, cap, "out of memory");
        ok = 0;
      }
      /* every other shape's rows so small (mean square ~3e-7) that eps
       * dominates: eps's sign or absence changes them far past the tolerance */
      const float xscale = (ri + ni) % 2 ? 1e-3f : 3.0f;
      for (size_t i = 0; ok && i < total; i++) x[i] = xscale * test_rand_float(&seed);
      for (uint32_t i = 0; ok && i < n; i++) w[i] = 1.0f + 0.5f * test_rand_float(&seed);
      for (uint32_t r = 0; ok && r < rows; r++) {
        double ss = 0;
        for (uint32_t i = 0; i < n; i++) ss += (double)x[r * n + i] * x[r * n + i];
        double inv = 1.0 / sqrt(ss / n + eps);
        for (uint32_t i = 0; i < n; i++) ref[r * n + i] = x[r * n + i] * inv * w[i];
      }
      wisp_wgpu_buf bx = {0}, bw = {0}, by = {0};
      if (ok && (wisp_wgpu_buf_from(d, x, total * 4, "rms x", &bx) || wisp_wgpu_buf_from(d, w, n * 4, "rms w", &bw) ||
                 wisp_wgpu_buf_create(d, total * 4, WISP_WGPU_STORAGE, "rms y", &by))) {
        snprintf(err, cap, "upload: %s", wisp_last_error());
        ok = 0;
      }
      for (int g = 0; g < n_wg && ok; g++) {
        wisp_wgpu_op op;
        wisp_status st = wisp_wgpu_rmsnorm_op(d, k[g], (wisp_wgpu_binding){bx.b, 0, 0}, (wisp_wgpu_binding){bw.b, 0, 0},
                                              (wisp_wgpu_binding){by.b, 0, 0}, rows, n, eps, &op);
        if (!st) st = run_op(d, &op, by, y, total);
        wisp_wgpu_op_free(d, &op);
        if (st) {
          snprintf(err, cap, "%ux%u WG=%u: %s", rows, n, wgs[g], wisp_last_error());
          ok = 0;
        }
        for (size_t i = 0; ok && i < total; i++)
          if (!(fabs(y[i] - ref[i]) <= 1e-4 * fabs(ref[i]) + 1e-6)) {
            snprintf(err, cap, "%ux%u WG=%u %s: y[%zu] = %.9g, reference %.9g", rows, n, wgs[g],
                     subgroups ? "subgroups" : "plain", i, y[i], ref[i]);
            ok = 0;
          }
      }
      wisp_wgpu_buf_free(d, &bx);
      wisp_wgpu_buf_free(d, &bw);
      wisp_wgpu_buf_free(d, &by);
      free(x);
      free(w);
      free(y);
      free(ref);
    }
  }
  for (int g = 0; g < n_wg; g++) wisp_wgpu_kernel_free(d, k[g]);
  return ok;
}

TEST(webgpu_rmsnorm_subgroups) {
  WEBGPU_OR_SKIP(d);
  if (!d->has_subgroups) SKIP("device has no subgroups");
  static const uint32_t wgs[] = {32, 64, 256, 20};
  char err[1200] = "";
  CHECKF(rms_suite(d, 1, wgs, 4, err, sizeof err), "%s", err);
}

TEST(webgpu_rmsnorm_plain) {
  WEBGPU_OR_SKIP(d);
  static const uint32_t wgs[] = {32, 256};
  char err[1200] = "";
  CHECKF(rms_suite(d, 0, wgs, 2, err, sizeof err), "%s", err);
}
