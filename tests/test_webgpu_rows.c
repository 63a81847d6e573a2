/* WebGPU matmul_rows (the products of a batched decode step, several
 * sequences at once): the multi-row kernels (matvec_rows.wgsl,
 * q4k_matvec_rows.wgsl) give every row bit for bit what the one-row product
 * gives that row alone, for every weight type the decode product serves,
 * and rows do not leak into one another. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/webgpu/wgpu_backend.h"
#include "backend/sampling.h"
#include "format/tensor.h"
#include "random_matrix.h"
#include "test.h"
#include "webgpu_fixture.h"

/* The backend knows an uploaded weight by its host address, so weights stay
 * allocated until their backend is gone (a new matrix at a freed one's
 * address would be taken for it). */
typedef struct {
  void *p[256];
  int n;
} keep_list;
static keep_list g_keep;

static void mat_free(test_host_mat *h) {
  void *ps[3] = {h->a, h->b, h->c};
  for (int i = 0; i < 3; i++) {
    if (g_keep.n < 256) g_keep.p[g_keep.n++] = ps[i];
    else free(ps[i]);
  }
}

static void destroy_gpu(wisp_backend *be) {
  be->destroy(be);
  for (int i = 0; i < g_keep.n; i++) free(g_keep.p[i]);
  g_keep.n = 0;
}

static uint32_t g_rows_nt; /* the next open_gpu's rows_nt (tuning rowsNt), then 0 again */

static wisp_backend *open_gpu(wisp_wgpu_device *d, uint64_t max_binding, int no_rows_shared, int no_xstage) {
  wisp_wgpu_backend_opts o;
  memset(&o, 0, sizeof o);
  o.device = d;
  o.subgroups = -1;
  o.max_binding = max_binding;
  o.no_rows_shared = no_rows_shared;
  o.no_xstage = no_xstage;
  o.rows_stage_always = 1; /* the staged inputs wherever they fit (tuning rowsStage=1): the tiles are tested too */
  o.rows_nt = g_rows_nt;
  g_rows_nt = 0;
  wisp_backend *be = NULL;
  return wisp_wgpu_backend_new(&o, &be) ? NULL : be;
}

static uint64_t rows_shared(const wisp_backend *be) {
  wisp_wgpu_backend_stats st;
  return wisp_wgpu_backend_stats_get(be, &st) ? st.rows_shared : 0;
}

/* y (n rows of W->rows, starting from y0 when acc) = W x (n rows of
 * W->cols) through matmul_rows with all n rows in one call (several = 1) or
 * each row alone in a one-row call on buffers of its own (several = 0). */
static int rows_product(wisp_backend *be, const wisp_matrix *W, const float *x, const float *y0, int n, int acc,
                        int several, float *y, char *err, size_t cap) {
  const size_t R = (size_t)W->rows, C = (size_t)W->cols;
  int ok = 1;
  for (int t0 = 0; ok && t0 < n; t0 += several ? n : 1) {
    const int k = several ? n : 1;
    wisp_buf *xb = be->buf_new(be, (size_t)k * C), *yb = be->buf_new(be, (size_t)k * R);
    ok = xb && yb;
    if (ok) {
      be->buf_write(be, xb, 0, (size_t)k * C, x + (size_t)t0 * C);
      be->buf_write(be, yb, 0, (size_t)k * R, y0 + (size_t)t0 * R);
      be->matmul_rows(be, W, xb, k, yb, acc);
      ok = !be->sync(be);
      if (ok) be->buf_read(be, yb, 0, (size_t)k * R, y + (size_t)t0 * R);
      ok = ok && !be->sync(be);
    }
    if (!ok) snprintf(err, cap, "matmul_rows of %d rows: %s", k, wisp_last_error());
    if (xb) be->buf_free(be, xb);
    if (yb) be->buf_free(be, yb);
  }
  return ok;
}

/* The first element where a and b differ in their bits, or -1. */
static long first_diff(const float *a, const float *b, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (memcmp(&a[i], &b[i], sizeof(float))) return (long)i;
  return -1;
}

/* One weight: for each n, all rows in one call against each row alone,
 * bit for bit, with and without accumulation; the multi-row kernel must
 * have run (rows_shared) for every n > 1. */
static int exact_case(wisp_backend *be, wisp_wtype type, int rows, int cols, const int *ns, int nn, uint64_t *seed,
                      char *err, size_t cap) {
  test_host_mat h;
  int ok = test_mat_make(&h, type, rows, cols, seed, 0) && !be->prepare_matrix(be, &h.m);
  if (!ok) snprintf(err, cap, "%s %dx%d: setup: %s", wisp_wtype_name(type), rows, cols, wisp_last_error());
  for (int ni = 0; ok && ni < nn; ni++) {
    const int n = ns[ni], acc = ni % 2;
    const size_t nx = (size_t)n * cols, ny = (size_t)n * rows;
    float *x = malloc(sizeof(float) * nx), *y0 = malloc(sizeof(float) * ny);
    float *ya = malloc(sizeof(float) * ny), *yb = malloc(sizeof(float) * ny);
    ok = x && y0 && ya && yb;
    for (size_t i = 0; ok && i < nx; i++) x[i] = test_rand_float(seed);
    for (size_t i = 0; ok && i < ny; i++) y0[i] = test_rand_float(seed);
    const uint64_t before = rows_shared(be);
    ok = ok && rows_product(be, &h.m, x, y0, n, acc, 1, ya, err, cap);
    const uint64_t used = rows_shared(be) - before;
    ok = ok && rows_product(be, &h.m, x, y0, n, acc, 0, yb, err, cap);
    if (ok && n > 1 && used == 0) {
      snprintf(err, cap, "%s %dx%d n %d: the multi-row kernel did not run", wisp_wtype_name(type), rows, cols, n);
      ok = 0;
    }
    long d = ok ? first_diff(ya, yb, ny) : -1;
    if (d >= 0) {
      snprintf(err, cap, "%s %dx%d n %d acc %d: row %ld output %ld: %.9g together, %.9g alone", wisp_wtype_name(type),
               rows, cols, n, acc, d / rows, d % rows, ya[d], yb[d]);
      ok = 0;
    }
    free(x);
    free(y0);
    free(ya);
    free(yb);
  }
  mat_free(&h);
  return ok;
}

static const wisp_wtype k_types[] = {WISP_W_F32, WISP_W_Q4, WISP_W_Q4Z, WISP_W_F16, WISP_W_Q8_0, WISP_W_Q4K};

/* n = 1, 2, 3, 8 (2, 4 and 8 tokens a workgroup) and 20 (three workgroup
 * token chunks, the last partial); rows not a multiple of a workgroup's;
 * columns whose staged input ends in a partial run (96), and rows too long
 * to stage whole (2560, 4352: staged in tiles, the last one partial, or on
 * a small workgroup memory not staged). */
TEST(webgpu_rows_bit_exact_per_type) {
  WEBGPU_OR_SKIP(d);
  if (!d->has_subgroups) SKIP("the multi-row kernels need subgroups");
  wisp_backend *be = open_gpu(d, 0, 0, 0);
  CHECKF(be, "webgpu backend: %s", wisp_last_error());
  static const int ns[] = {1, 2, 3, 8, 20};
  uint64_t seed = 21;
  char err[300] = "";
  int ok = 1;
  for (size_t ti = 0; ok && ti < sizeof k_types / sizeof k_types[0]; ti++) {
    const int q4k = k_types[ti] == WISP_W_Q4K;
    ok = exact_case(be, k_types[ti], 37, q4k ? 256 : 96, ns, 5, &seed, err, sizeof err) &&
         exact_case(be, k_types[ti], 300, q4k ? 768 : 2560, ns, 5, &seed, err, sizeof err) &&
         exact_case(be, k_types[ti], 70, 4352, ns + 2, 2, &seed, err, sizeof err);
  }
  destroy_gpu(be);
  CHECKF(ok, "%s", err);
}

/* Many rows (odd counts up to 64, the most one workgroup column takes):
 * every type, bit for bit the one-row product, the weight read once for all
 * of them where the step has at most 64 (wisp_wgpu_rows_nt). */
TEST(webgpu_rows_bit_exact_up_to_64) {
  WEBGPU_OR_SKIP(d);
  if (!d->has_subgroups) SKIP("the multi-row kernels need subgroups");
  wisp_backend *be = open_gpu(d, 0, 0, 0);
  CHECKF(be, "webgpu backend: %s", wisp_last_error());
  static const int ns[] = {7, 9, 33, 64};
  uint64_t seed = 25;
  char err[300] = "";
  int ok = 1;
  for (size_t ti = 0; ok && ti < sizeof k_types / sizeof k_types[0]; ti++) {
    const int q4k = k_types[ti] == WISP_W_Q4K;
    ok = exact_case(be, k_types[ti], 37, q4k ? 512 : 96, ns, 4, &seed, err, sizeof err);
  }
  destroy_gpu(be);
  CHECKF(ok, "%s", err);
}

/* A tall matrix (the head: the one-row kernel takes more rows a lane group
 * there), weights split over several bindings, and inputs not staged. */
TEST(webgpu_rows_bit_exact_tall_and_split) {
  WEBGPU_OR_SKIP(d);
  if (!d->has_subgroups) SKIP("the multi-row kernels need subgroups");
  static const int ns[] = {3, 8};
  uint64_t seed = 22;
  char err[300] = "";
  wisp_backend *be = open_gpu(d, 0, 0, 0);
  CHECKF(be, "webgpu backend: %s", wisp_last_error());
  int ok = exact_case(be, WISP_W_Q4, 16500, 64, ns, 2, &seed, err, sizeof err) &&
           exact_case(be, WISP_W_Q4K, 16500, 256, ns, 2, &seed, err, sizeof err);
  destroy_gpu(be);
  CHECKF(ok, "tall: %s", err);
  be = open_gpu(d, 65536, 0, 0); /* Q4 2560 columns: 51-row parts; Q4_K 768: 150-row parts */
  CHECKF(be, "webgpu backend: %s", wisp_last_error());
  ok = exact_case(be, WISP_W_Q4, 300, 2560, ns, 2, &seed, err, sizeof err) &&
       exact_case(be, WISP_W_Q4K, 300, 768, ns, 2, &seed, err, sizeof err);
  wisp_wgpu_backend_stats st;
  CHECK(wisp_wgpu_backend_stats_get(be, &st));
  destroy_gpu(be);
  CHECKF(ok, "split: %s", err);
  CHECKF(st.weight_parts > 4, "only %llu weight parts: nothing was split", (unsigned long long)st.weight_parts);
  be = open_gpu(d, 0, 0, 1); /* tuning xstage=0: inputs from global memory */
  CHECKF(be, "webgpu backend: %s", wisp_last_error());
  ok = exact_case(be, WISP_W_F32, 70, 2560, ns, 2, &seed, err, sizeof err) &&
       exact_case(be, WISP_W_Q4K, 70, 768, ns, 2, &seed, err, sizeof err);
  destroy_gpu(be);
  CHECKF(ok, "unstaged: %s", err);
}

/* Rows do not interfere: 8 rows together; then one row's input replaced
 * (by other values, then by NaN) and the rows reversed: every other row's
 * output keeps its bits, and the changed row gets what it gets alone. */
TEST(webgpu_rows_do_not_interfere) {
  WEBGPU_OR_SKIP(d);
  if (!d->has_subgroups) SKIP("the multi-row kernels need subgroups");
  wisp_backend *be = open_gpu(d, 0, 0, 0);
  CHECKF(be, "webgpu backend: %s", wisp_last_error());
  static const wisp_wtype types[] = {WISP_W_Q4, WISP_W_Q4K};
  enum { N = 8, ROWS = 40, COLS = 512 };
  uint64_t seed = 23;
  char err[300] = "";
  int ok = 1;
  float *x = malloc(sizeof(float) * N * COLS), *x2 = malloc(sizeof(float) * N * COLS);
  float *y0 = calloc(N * ROWS, sizeof(float)), *ya = malloc(sizeof(float) * N * ROWS);
  float *yb = malloc(sizeof(float) * N * ROWS), *yc = malloc(sizeof(float) * N * ROWS);
  CHECK(x && x2 && y0 && ya && yb && yc);
  for (int ti = 0; ok && ti < 2; ti++) {
    test_host_mat h;
    ok = test_mat_make(&h, types[ti], ROWS, COLS, &seed, 0) && !be->prepare_matrix(be, &h.m);
    if (!ok) snprintf(err, sizeof err, "setup: %s", wisp_last_error());
    for (int i = 0; i < N * COLS; i++) x[i] = test_rand_float(&seed);
    ok = ok && rows_product(be, &h.m, x, y0, N, 0, 1, ya, err, sizeof err);
    for (int variant = 0; ok && variant < 2; variant++) {
      /* row 3 changed (other values, or NaN), rows in reverse order */
      for (int t = 0; t < N; t++) memcpy(x2 + (size_t)(N - 1 - t) * COLS, x + (size_t)t * COLS, sizeof(float) * COLS);
      for (int c = 0; c < COLS; c++) x2[(size_t)(N - 1 - 3) * COLS + c] = variant ? NAN : 100.0f * test_rand_float(&seed);
      ok = rows_product(be, &h.m, x2, y0, N, 0, 1, yb, err, sizeof err) &&
           rows_product(be, &h.m, x2, y0, N, 0, 0, yc, err, sizeof err);
      for (int t = 0; ok && t < N; t++) {
        const float *got = yb + (size_t)(N - 1 - t) * ROWS;
        const float *want = t == 3 ? yc + (size_t)(N - 1 - t) * ROWS : ya + (size_t)t * ROWS;
        long dd = first_diff(got, want, ROWS);
        if (dd >= 0) {
          snprintf(err, sizeof err, "%s %s: row %d output %ld: %.9g, expected %.9g", wisp_wtype_name(types[ti]),
                   variant ? "NaN row" : "changed row", t, dd, got[dd], want[dd]);
          ok = 0;
        }
        if (ok && t != 3)
          for (int r = 0; r < ROWS; r++)
            if (!isfinite(got[r])) {
              snprintf(err, sizeof err, "%s: row %d output %d is not finite", wisp_wtype_name(types[ti]), t, r);
              ok = 0;
              break;
            }
      }
    }
    mat_free(&h);
  }
  free(x), free(x2), free(y0), free(ya), free(yb), free(yc);
  destroy_gpu(be);
  CHECKF(ok, "%s", err);
}

/* tuning rowsShared=0: the same bits row by row, and the multi-row kernels
 * do not run; tuning rowsNt=3 (3 rows a workgroup): the same bits. */
TEST(webgpu_rows_shared_off_same_bits) {
  WEBGPU_OR_SKIP(d);
  if (!d->has_subgroups) SKIP("the multi-row kernels need subgroups");
  static const wisp_wtype types[] = {WISP_W_Q4, WISP_W_Q4K};
  enum { N = 8, ROWS = 300, COLS = 768 };
  wisp_backend *on = open_gpu(d, 0, 0, 0), *off = open_gpu(d, 0, 1, 0);
  g_rows_nt = 3;
  wisp_backend *nt3 = open_gpu(d, 0, 0, 0);
  CHECKF(on && off && nt3, "webgpu backend: %s", wisp_last_error());
  uint64_t seed = 24;
  char err[300] = "";
  int ok = 1;
  float *x = malloc(sizeof(float) * N * COLS), *y0 = calloc(N * ROWS, sizeof(float));
  float *ya = malloc(sizeof(float) * N * ROWS), *yb = malloc(sizeof(float) * N * ROWS);
  float *yc = malloc(sizeof(float) * N * ROWS);
  CHECK(x && y0 && ya && yb && yc);
  for (int i = 0; i < N * COLS; i++) x[i] = test_rand_float(&seed);
  for (int ti = 0; ok && ti < 2; ti++) {
    test_host_mat h;
    ok = test_mat_make(&h, types[ti], ROWS, COLS, &seed, 0) && !on->prepare_matrix(on, &h.m) &&
         !off->prepare_matrix(off, &h.m) && !nt3->prepare_matrix(nt3, &h.m);
    if (!ok) snprintf(err, sizeof err, "setup: %s", wisp_last_error());
    ok = ok && rows_product(on, &h.m, x, y0, N, 0, 1, ya, err, sizeof err) &&
         rows_product(off, &h.m, x, y0, N, 0, 1, yb, err, sizeof err) &&
         rows_product(nt3, &h.m, x, y0, N, 0, 1, yc, err, sizeof err);
    long dd = ok ? first_diff(ya, yb, (size_t)N * ROWS) : -1;
    if (dd >= 0) {
      snprintf(err, sizeof err, "%s: output %ld: %.9g shared, %.9g row by row", wisp_wtype_name(types[ti]), dd, ya[dd],
               yb[dd]);
      ok = 0;
    }
    dd = ok ? first_diff(ya, yc, (size_t)N * ROWS) : -1;
    if (dd >= 0) {
      snprintf(err, sizeof err, "%s: output %ld: %.9g 8 rows a workgroup, %.9g 3", wisp_wtype_name(types[ti]), dd,
               ya[dd], yc[dd]);
      ok = 0;
    }
    mat_free(&h);
  }
  const uint64_t shared_on = rows_shared(on), shared_off = rows_shared(off), shared_nt3 = rows_shared(nt3);
  free(x), free(y0), free(ya), free(yb), free(yc);
  off->destroy(off);
  nt3->destroy(nt3);
  destroy_gpu(on);
  CHECKF(ok, "%s", err);
  CHECKF(shared_on == 2 && shared_off == 0 && shared_nt3 == 2,
         "multi-row products: %llu on, %llu off, %llu rowsNt=3 (2, 0, 2 expected)", (unsigned long long)shared_on,
         (unsigned long long)shared_off, (unsigned long long)shared_nt3);
}

/* The head's draws of a batched step in one dispatch (backend.h
 * sample_rows, sample_rows.wgsl): each of 64 rows, with its own settings
 * (greedy, temperature with top-k, top-p or min-p, seeds and steps), gets
 * the token sample_id draws from that row alone. */
TEST(webgpu_rows_sample_rows_match_sample_id) {
  WEBGPU_OR_SKIP(d);
  wisp_backend *be = open_gpu(d, 0, 0, 0);
  CHECKF(be, "webgpu backend: %s", wisp_last_error());
  CHECK(be->sample_rows != NULL);
  enum { N = 64, V = 1000 };
  uint64_t seed = 26;
  float *lg = malloc(sizeof(float) * N * V), got[N], want[N];
  CHECK(lg);
  wisp_sampling sp[N];
  uint32_t steps[N];
  for (int r = 0; r < N; r++) {
    for (int i = 0; i < V; i++) lg[(size_t)r * V + i] = 4.0f * test_rand_float(&seed);
    lg[(size_t)r * V + (r * 37) % V] = 6.0f; /* a clear greedy pick, different a row */
    sp[r] = (wisp_sampling){.temperature = r % 4 == 0 ? 0.0f : 0.5f + 0.1f * (float)(r % 5),
                            .top_k = r % 4 == 1 ? 5 + r : 0,
                            .top_p = r % 4 == 2 ? 0.9f : 1.0f,
                            .min_p = r % 4 == 3 ? 0.05f : 0.0f,
                            .seed = 1000u + (uint32_t)r};
    steps[r] = 7u + 3u * (uint32_t)r;
  }
  wisp_buf *lb = be->buf_new(be, (size_t)N * V), *one = be->buf_new(be, V), *ids = be->buf_new(be, N),
           *ids1 = be->buf_new(be, N);
  CHECK(lb && one && ids && ids1);
  be->buf_write(be, lb, 0, (size_t)N * V, lg);
  CHECK(be->sample_rows(be, lb, V, N, sp, steps, ids));
  for (int r = 0; r < N; r++) {
    be->buf_copy_at(be, one, 0, lb, (size_t)r * V, V);
    be->sample_id(be, one, V, &sp[r], steps[r], ids1, r);
  }
  be->buf_read(be, ids, 0, N, got);
  be->buf_read(be, ids1, 0, N, want);
  CHECKF(!be->sync(be), "%s", wisp_last_error());
  int same = 0, greedy_ok = 1, distinct = 0;
  for (int r = 0; r < N; r++) {
    uint32_t a, b;
    memcpy(&a, &got[r], 4);
    memcpy(&b, &want[r], 4);
    same += a == b;
    if (sp[r].temperature <= 0) greedy_ok &= a == (uint32_t)((r * 37) % V);
    else distinct += a != (uint32_t)((r * 37) % V);
  }
  be->buf_free(be, lb), be->buf_free(be, one), be->buf_free(be, ids), be->buf_free(be, ids1);
  free(lg);
  destroy_gpu(be);
  CHECKF(same == N, "%d of %d rows drew sample_id's token", same, N);
  CHECK(greedy_ok);
  CHECKF(distinct > 0, "no sampled row drew other than the greedy token (the settings did not reach the kernel)");
}
