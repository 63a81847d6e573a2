/* The batched step's integer product (quant_x8.wgsl + matvec_i8_rows.wgsl,
 * wisp_wgpu_mv8_rows) on lavapipe, for every weight type it takes (Q4, Q4Z,
 * Q4_K, Q8_0), on shapes whose rows are not a multiple of a workgroup's and
 * whose blocks are fewer than, more than and not a multiple of the lanes:
 *
 * - against an int8 reference computed here in double from the device's
 *   quantized activations (read back) and the weights' decoded values:
 *   TOL_ROWS_I8_EXACT of the largest sum of |terms| (only f32 rounding);
 * - against the CPU backend's f32 product: TOL_ROWS_I8_F32 of max|ref| (the
 *   activation rounding);
 * - a row's sums do not depend on the rest: every row of an n-row product
 *   is bit for bit that row's product alone, and the same under 1 and 8
 *   weight rows a lane group;
 * - it takes exactly the rows of its range (tuning rowsI8) and records one
 *   product a call;
 * - whole models: the throughput profile's batched steps run it, and every
 *   sequence of a step of 5 gets the greedy tokens it gets stepped alone. */
#define TOL_ROWS_I8_EXACT 1e-5
#define TOL_ROWS_I8_F32 2e-2

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/webgpu/wgpu_backend.h"
#include "backend/webgpu/wgpu_products_i8.h"
#include "engine/engine.h"
#include "engine/sampler.h"
#include "fixtures.h"
#include "format/tensor.h"
#include "random_matrix.h"
#include "st_fixture.h"
#include "test.h"
#include "util/err.h"
#include "webgpu_fixture.h"

typedef struct {
  wisp_wtype type;
  int rows, cols, acc;
} shape;

/* 1 block a row (fewer than the lanes), 24 (fewer), 40 (more, not a
 * multiple), 8 super-blocks; rows not a multiple of 8 or of 2. */
static const shape k_shapes[] = {
    {WISP_W_Q4, 37, 32, 0},  {WISP_W_Q4Z, 19, 768, 1}, {WISP_W_Q8_0, 45, 1280, 0},
    {WISP_W_Q4K, 29, 2048, 1}, {WISP_W_Q4K, 3, 256, 0},  {WISP_W_Q4, 66, 1280, 1},
};
#define NSHAPES ((int)(sizeof k_shapes / sizeof k_shapes[0]))
static const int k_ns[] = {1, 3, 9, 32}; /* NT 1, 4, 16 (twice) */
#define NNS ((int)(sizeof k_ns / sizeof k_ns[0]))

/* y = y0 (+)= W x[0..n) by matmul_rows on the backend; out[n * rows]. 0 on
 * a failure (err filled). */
static int rows_product(wisp_backend *be, const wisp_matrix *W, const float *x, const float *y0, int n, int acc,
                        float *out, char *err, size_t cap) {
  wisp_buf *xb = be->buf_new(be, (size_t)n * W->cols), *yb = be->buf_new(be, (size_t)n * W->rows);
  int ok = xb && yb;
  if (ok) {
    be->buf_write(be, xb, 0, (size_t)n * W->cols, x);
    be->buf_write(be, yb, 0, (size_t)n * W->rows, y0);
    be->matmul_rows(be, W, xb, n, yb, acc);
    be->buf_read(be, yb, 0, (size_t)n * W->rows, out);
    ok = !be->sync(be);
  }
  if (!ok) snprintf(err, cap, "%s %dx%d n %d: %s", wisp_wtype_name(W->type), W->rows, W->cols, n, wisp_last_error());
  if (xb) be->buf_free(be, xb);
  if (yb) be->buf_free(be, yb);
  return ok;
}

static wisp_backend *gpu_with(wisp_wgpu_device *d, int rpl, int lo, int hi) {
  wisp_wgpu_backend_opts go = {.device = d, .subgroups = -1};
  wisp_backend *g = NULL;
  if (wisp_wgpu_backend_new(&go, &g)) return NULL;
  wisp_wgpu_mm8_opts o = {.mode = 2, .rows_min = lo, .rows_max = hi, .rows_rpl = (uint32_t)rpl};
  if (wisp_wgpu_mm8_configure(g, &o)) {
    g->destroy(g);
    return NULL;
  }
  return g;
}

/* Every n of k_ns for one shape: the reference checks, the count, and
 * each row against its own one-row product. */
static int run_shape(wisp_backend *gpu, wisp_backend *cpu, const shape *c, uint64_t *seed, double *worst,
                     char *err, size_t cap) {
  test_host_mat h;
  const int rows = c->rows, cols = c->cols, nb = cols / 32, nmax = 32;
  int ok = test_mat_make(&h, c->type, rows, cols, seed, 1);
  ok = ok && !gpu->prepare_matrix(gpu, &h.m) && !cpu->prepare_matrix(cpu, &h.m);
  float *wd = malloc(sizeof(float) * (size_t)rows * cols), *x = malloc(sizeof(float) * (size_t)nmax * cols);
  float *y0 = malloc(sizeof(float) * (size_t)nmax * rows), *yg = malloc(sizeof(float) * (size_t)nmax * rows);
  float *yc = malloc(sizeof(float) * (size_t)nmax * rows), *y1 = malloc(sizeof(float) * (size_t)rows);
  int8_t *xq = malloc((size_t)nmax * cols);
  float *xd = malloc(sizeof(float) * (size_t)nmax * nb);
  ok = ok && wd && x && y0 && yg && yc && y1 && xq && xd;
  if (!ok && !err[0]) snprintf(err, cap, "%s %dx%d: setup: %s", wisp_wtype_name(c->type), rows, cols, wisp_last_error());
  for (int r = 0; ok && r < rows; r++) wisp_matrix_row_f32(&h.m, r, wd + (size_t)r * cols);
  /* rows of different magnitudes, an all-zero block now and then */
  for (int t = 0; ok && t < nmax; t++)
    for (int b = 0; b < nb; b++) {
      const float mag = (t + b) % 7 == 3 ? 0.0f : powf(2.0f, (float)((t * 3 + b) % 9) - 4.0f);
      for (int k = 0; k < 32; k++) x[(size_t)t * cols + b * 32 + k] = mag * test_rand_float(seed);
    }
  for (size_t i = 0; ok && i < (size_t)nmax * rows; i++) y0[i] = test_rand_float(seed);
  for (int ni = 0; ok && ni < NNS; ni++) {
    const int n = k_ns[ni];
    const uint64_t before = wisp_wgpu_mv8_count(gpu);
    ok = rows_product(gpu, &h.m, x, y0, n, c->acc, yg, err, cap) &&
         rows_product(cpu, &h.m, x, y0, n, c->acc, yc, err, cap);
    if (ok && wisp_wgpu_mv8_count(gpu) != before + 1) {
      snprintf(err, cap, "%s n %d: %llu int8 multi-row products recorded, 1 expected", wisp_wtype_name(c->type), n,
               (unsigned long long)(wisp_wgpu_mv8_count(gpu) - before));
      ok = 0;
    }
    if (ok && wisp_wgpu_mm8_read_quantized(gpu, n, cols, xq, xd)) {
      snprintf(err, cap, "read back: %s", wisp_last_error());
      ok = 0;
    }
    double rel = 0, relc = 0;
    if (ok) test_i8_errors(wd, rows, cols, xq, xd, n, y0, c->acc, yg, yc, &rel, &relc);
    if (ok) worst[0] = fmax(worst[0], rel), worst[1] = fmax(worst[1], relc);
    if (ok && !(rel <= TOL_ROWS_I8_EXACT)) {
      snprintf(err, cap, "%s %dx%d n %d: vs the int8 reference: %.3g of the largest |terms| sum (tol %g)",
               wisp_wtype_name(c->type), rows, cols, n, rel, TOL_ROWS_I8_EXACT);
      ok = 0;
    } else if (ok && !(relc <= TOL_ROWS_I8_F32)) {
      snprintf(err, cap, "%s %dx%d n %d: vs the CPU f32 product: %.3g of max|ref| (tol %g)", wisp_wtype_name(c->type),
               rows, cols, n, relc, TOL_ROWS_I8_F32);
      ok = 0;
    }
    /* each row alone: the same bits (rows 0 and n - 1 of every n > 1) */
    for (int k = 0; ok && n > 1 && k < 2; k++) {
      const int t = k ? n - 1 : 0;
      ok = rows_product(gpu, &h.m, x + (size_t)t * cols, y0 + (size_t)t * rows, 1, c->acc, y1, err, cap);
      if (ok && memcmp(y1, yg + (size_t)t * rows, sizeof(float) * (size_t)rows)) {
        snprintf(err, cap, "%s %dx%d: row %d of %d differs from its product alone", wisp_wtype_name(c->type), rows,
                 cols, t, n);
        ok = 0;
      }
    }
  }
  free(wd), free(x), free(y0), free(yg), free(yc), free(y1), free(xq), free(xd);
  free(h.a), free(h.b), free(h.c);
  return ok;
}

TEST(webgpu_rows_i8_every_type_against_references) {
  WEBGPU_OR_SKIP(d);
  wisp_backend *gpu = gpu_with(d, 2, 1, 32), *cpu = NULL;
  CHECKF(gpu && !wisp_cpu_backend_new(1, &cpu), "backends: %s", wisp_last_error());
  double worst[2] = {0, 0};
  char err[600] = "";
  uint64_t seed = 41;
  int ok = 1;
  for (int i = 0; ok && i < NSHAPES; i++) ok = run_shape(gpu, cpu, &k_shapes[i], &seed, worst, err, sizeof err);
  gpu->destroy(gpu);
  cpu->destroy(cpu);
  CHECKF(ok, "%s", err);
  printf("     int8 multi-row products (Q4, Q4Z, Q8_0, Q4_K; 1-32 rows): %.3g of the |terms| sum vs the int8 "
         "reference, %.3g of max|ref| vs the CPU f32 product\n",
         worst[0], worst[1]);
}

/* The rows a lane group takes change which lane does what, never a sum. */
TEST(webgpu_rows_i8_same_bits_for_every_lane_split) {
  WEBGPU_OR_SKIP(d);
  static const int rpls[] = {1, 8};
  static const shape sh[] = {{WISP_W_Q4K, 29, 1024, 1}, {WISP_W_Q4Z, 19, 1280, 0}};
  const int n = 9;
  char err[400] = "";
  int ok = 1;
  for (int si = 0; ok && si < 2; si++) {
    const int rows = sh[si].rows, cols = sh[si].cols;
    uint64_t seed = 5;
    test_host_mat h;
    float *x = malloc(sizeof(float) * (size_t)n * cols), *y0 = malloc(sizeof(float) * (size_t)n * rows);
    float *y[2] = {malloc(sizeof(float) * (size_t)n * rows), malloc(sizeof(float) * (size_t)n * rows)};
    ok = test_mat_make(&h, sh[si].type, rows, cols, &seed, 1) && x && y0 && y[0] && y[1];
    for (size_t i = 0; ok && i < (size_t)n * cols; i++) x[i] = test_rand_float(&seed) * (float)(1 + i % 5);
    for (size_t i = 0; ok && i < (size_t)n * rows; i++) y0[i] = test_rand_float(&seed);
    for (int k = 0; ok && k < 2; k++) {
      wisp_backend *g = gpu_with(d, rpls[k], 1, 32);
      ok = g && !g->prepare_matrix(g, &h.m) && rows_product(g, &h.m, x, y0, n, sh[si].acc, y[k], err, sizeof err);
      if (!ok && !err[0]) snprintf(err, sizeof err, "rows a lane group %d: %s", rpls[k], wisp_last_error());
      if (g) g->destroy(g);
      if (ok && k && memcmp(y[0], y[k], sizeof(float) * (size_t)n * rows)) {
        snprintf(err, sizeof err, "%s: %d rows a lane group changed the bits from %d", wisp_wtype_name(sh[si].type),
                 rpls[k], rpls[0]);
        ok = 0;
      }
    }
    free(x), free(y0), free(y[0]), free(y[1]);
    free(h.a), free(h.b), free(h.c);
  }
  CHECKF(ok, "%s", err);
}

/* It takes the rows of its range and no others; outside it the step's
 * products go the other ways (the multi-row f32 kernels here). */
TEST(webgpu_rows_i8_takes_only_its_range) {
  WEBGPU_OR_SKIP(d);
  wisp_backend *gpu = gpu_with(d, 2, 3, 5);
  CHECKF(gpu != NULL, "backend: %s", wisp_last_error());
  uint64_t seed = 3;
  test_host_mat h;
  const int rows = 40, cols = 256;
  int ok = test_mat_make(&h, WISP_W_Q4K, rows, cols, &seed, 1) && !gpu->prepare_matrix(gpu, &h.m);
  float *x = calloc((size_t)8 * cols, sizeof(float)), *y = calloc((size_t)8 * rows, sizeof(float));
  char err[300] = "";
  int took[9] = {0};
  for (int n = 1; ok && x && y && n <= 8; n++) {
    const uint64_t before = wisp_wgpu_mv8_count(gpu);
    ok = rows_product(gpu, &h.m, x, y, n, 0, y, err, sizeof err);
    took[n] = (int)(wisp_wgpu_mv8_count(gpu) - before);
  }
  gpu->destroy(gpu);
  free(x), free(y), free(h.a), free(h.b), free(h.c);
  CHECKF(ok, "%s", err);
  for (int n = 1; n <= 8; n++) CHECKF(took[n] == (n >= 3 && n <= 5), "%d rows: %d int8 multi-row products", n, took[n]);
}

/* The throughput profile's batched steps run it (the products of a step of
 * 5 rows of the tiny Qwen 3.5 in Q4_K, the head's too), and every sequence
 * gets the greedy tokens it gets stepped alone (its rows' sums do not
 * depend on the others). */
/* The tiny Qwen 3.5 in Q4_K (made once a run), or NULL with the reason in
 * err. */
static const char *tiny_qwen_q4k(char *err, size_t cap) {
  static char art[600];
  static int made;
  if (made) return art;
  char hf[600], cmd[1600];
  snprintf(hf, sizeof hf, "%s/rows_i8_qwen_hf", test_tmpdir());
  snprintf(art, sizeof art, "%s/rows_i8_qwen_q4k", test_tmpdir());
  snprintf(cmd, sizeof cmd, "mkdir -p %s", hf);
  if (system(cmd) != 0 || fx_write_tiny_qwen35(hf) != 0) {
    snprintf(err, cap, "could not write the tiny Qwen 3.5 to %s", hf);
    return NULL;
  }
  snprintf(cmd, sizeof cmd, "%s convert %s -o %s --quant q4k --quiet", test_wisp_bin(), hf, art);
  if (test_run(cmd, err, cap) != 0) return NULL;
  made = 1;
  return art;
}

TEST(webgpu_rows_i8_qwen_steps_match_alone) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  char log[2048];
  const char *art = tiny_qwen_q4k(log, sizeof log);
  CHECKF(art != NULL, "%s", log);
  wisp_model *m = NULL;
  CHECKF(wisp_model_open(art, &m) == WISP_OK, "%s", wisp_last_error());
  enum { S = 5, STEPS = 10 };
  const int V = wisp_model_vocab(m);
  int32_t together[S][STEPS], alone[STEPS];
  uint64_t products = 0;
  int ok = 1, same = 0;
  /* rowsI8=1x8 pinned (the default, 1x16, also starts at one row): "alone" runs the same kernel */
  for (int run = 0; ok && run <= S; run++) {
    const int ns = run ? 1 : S;
    wisp_session_options o = {.backend = "webgpu", .profile = "throughput", .threads = 1, .slots = ns,
                              .tuning = "rowsI8=1x8"};
    wisp_session *s = NULL;
    ok = !wisp_session_new(m, &o, &s);
    int slots[S];
    int32_t cur[S], next[S], prompt[12];
    float *lg = malloc(sizeof(float) * (size_t)V);
    ok = ok && lg;
    for (int i = 0; ok && i < ns; i++) {
      const int seq = run ? run - 1 : i, np = 3 + seq * 2;
      for (int k = 0; k < np; k++) prompt[k] = (int32_t)((7 + 31 * seq + 13 * k) % V);
      slots[i] = i;
      ok = wisp_slot_eval(s, i, prompt, np, lg) == WISP_OK;
      cur[i] = (int32_t)wisp_argmax(lg, V);
    }
    for (int t = 0; ok && t < STEPS; t++) {
      int32_t in[S];
      for (int i = 0; i < ns; i++) in[i] = cur[i];
      ok = wisp_session_step(s, slots, in, ns, NULL, next, NULL) == WISP_OK;
      for (int i = 0; ok && i < ns; i++) {
        cur[i] = next[i];
        if (run) alone[t] = next[i];
        else together[i][t] = next[i];
      }
    }
    if (ok && !run) products = wisp_wgpu_mv8_count(s->backend);
    if (ok && run) same += !memcmp(alone, together[run - 1], sizeof alone);
    free(lg);
    wisp_session_free(s);
  }
  char why[400];
  snprintf(why, sizeof why, "%s", ok ? "" : wisp_last_error());
  wisp_model_close(m);
  CHECKF(ok, "%s", why);
  CHECKF(products > 0, "no int8 multi-row product in the throughput profile's steps");
  CHECKF(same == S, "%d of %d sequences got the tokens they get stepped alone", same, S);
  printf("     tiny Qwen 3.5 Q4_K, %d sequences a step: %llu int8 multi-row products, all %d match alone\n", S,
         (unsigned long long)products, S);
}

/* The step's norms and SwiGLUs quantize their output for the int8 products
 * (rmsnorm_q8, swiglu_q8): the logits of a step of 5 rows are bit for bit
 * those with separate quant_x8 dispatches (rowsI8Fuse=0), with fewer of
 * them. */
TEST(webgpu_rows_i8_fused_quantizing_same_bits) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  char log[2048];
  const char *art = tiny_qwen_q4k(log, sizeof log);
  CHECKF(art != NULL, "%s", log);
  wisp_model *m = NULL;
  CHECKF(wisp_model_open(art, &m) == WISP_OK, "%s", wisp_last_error());
  enum { S = 5 };
  const int V = wisp_model_vocab(m);
  float *lg[2] = {malloc(sizeof(float) * (size_t)V * S), malloc(sizeof(float) * (size_t)V * S)};
  uint64_t fused[2] = {0, 0}, quants[2] = {0, 0};
  static const char *tunings[2] = {"rowsI8=1x8", "rowsI8=1x8,rowsI8Fuse=0"};
  int ok = lg[0] && lg[1];
  for (int f = 0; ok && f < 2; f++) {
    wisp_session_options o = {.backend = "webgpu", .profile = "throughput", .threads = 1, .slots = S,
                              .tuning = tunings[f]};
    wisp_session *s = NULL;
    ok = !wisp_session_new(m, &o, &s);
    int slots[S];
    int32_t cur[S], next[S], prompt[8];
    for (int i = 0; ok && i < S; i++) {
      for (int k = 0; k < 2 + i; k++) prompt[k] = (int32_t)((3 + 29 * i + 11 * k) % V);
      slots[i] = i;
      ok = wisp_slot_eval(s, i, prompt, 2 + i, lg[f]) == WISP_OK;
      cur[i] = (int32_t)wisp_argmax(lg[f], V);
    }
    uint64_t p0 = 0, q0 = 0, p1 = 0, q1 = 0;
    const uint64_t f0 = ok ? wisp_wgpu_mv8_fused_count(s->backend) : 0;
    if (ok) wisp_wgpu_mm8_counts(s->backend, &p0, &q0);
    ok = ok && wisp_session_step(s, slots, cur, S, NULL, next, lg[f]) == WISP_OK;
    if (ok) {
      wisp_wgpu_mm8_counts(s->backend, &p1, &q1);
      fused[f] = wisp_wgpu_mv8_fused_count(s->backend) - f0;
      quants[f] = q1 - q0;
    }
    if (s) wisp_session_free(s);
  }
  char why[400];
  snprintf(why, sizeof why, "%s", ok ? "" : wisp_last_error());
  wisp_model_close(m);
  const int same = ok && !memcmp(lg[0], lg[1], sizeof(float) * (size_t)V * S);
  free(lg[0]), free(lg[1]);
  CHECKF(ok, "%s", why);
  CHECKF(fused[0] > 0 && fused[1] == 0, "inputs quantized by the norm / SwiGLU: %llu fused, %llu with rowsI8Fuse=0",
         (unsigned long long)fused[0], (unsigned long long)fused[1]);
  CHECKF(quants[0] + fused[0] == quants[1] && quants[0] < quants[1],
         "quant_x8 dispatches a step: %llu (+ %llu fused) against %llu unfused", (unsigned long long)quants[0],
         (unsigned long long)fused[0], (unsigned long long)quants[1]);
  CHECKF(same, "the fused quantizing changed a step's logits");
}
