/* The integer prefill product (quant_x8.wgsl + matmul_i8.wgsl) for every
 * weight type it takes, Q4_K and Q8_0 beside Q4 and Q4Z, on lavapipe, on odd
 * shapes: 1, 7, 8, 9, 33 and 64 tokens, row counts that are not a multiple
 * of the tile, and a geometry whose KB does not divide the blocks.
 *
 * - against an int8 reference computed here in double from the device's
 *   quantized activations (read back) and the weights' decoded values
 *   (wisp_matrix_row_f32, which for these types is exactly scale * integer
 *   - offset): TOL_I8K_EXACT of the largest sum of |terms| (only the f32
 *   rounding of the per-block scaling and of the sum; Q4_K subtracts its
 *   offsets, so max|ref| alone would understate the rounding);
 * - against the CPU backend's f32 product: TOL_I8K_F32 of max|ref| (the
 *   activation rounding, max|x|/254 per element at most);
 * - the fused quantization (FUSEQ) gives the two-dispatch path's bits. */
#define TOL_I8K_EXACT 1e-5
#define TOL_I8K_F32 2e-2

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/webgpu/wgpu_backend.h"
#include "backend/webgpu/wgpu_products_i8.h"
#include "engine/engine.h"
#include "format/quant.h"
#include "format/tensor.h"
#include "st_fixture.h"
#include "random_matrix.h"
#include "test.h"
#include "util/err.h"
#include "webgpu_fixture.h"

typedef struct {
  wisp_wtype type;
  int rows, cols, acc, x_row0;
} shape;

static const int k_ns[] = {1, 7, 8, 9, 33, 64};
#define NNS ((int)(sizeof k_ns / sizeof k_ns[0]))

typedef struct {
  double exact, f32;
} worst_t;

/* y = W x for each n of k_ns on both backends; the checks of the header. */
static int run_shape(wisp_backend *gpu, wisp_backend *cpu, const shape *c, test_host_mat *h, uint64_t *seed, worst_t *w,
                     char *err, size_t cap) {
  const int rows = c->rows, cols = c->cols, nb = cols / 32;
  int ok = test_mat_make(h, c->type, rows, cols, seed, 1);
  if (ok) ok = !gpu->prepare_matrix(gpu, &h->m) && !cpu->prepare_matrix(cpu, &h->m);
  float *wd = malloc(sizeof(float) * (size_t)rows * cols);
  ok = ok && wd;
  if (!ok) snprintf(err, cap, "%s %dx%d: setup: %s", wisp_wtype_name(c->type), rows, cols, wisp_last_error());
  for (int r = 0; ok && r < rows; r++) wisp_matrix_row_f32(&h->m, r, wd + (size_t)r * cols);
  for (int ni = 0; ok && ni < NNS; ni++) {
    const int n = k_ns[ni], xr = c->x_row0 + n;
    float *x = malloc(sizeof(float) * (size_t)xr * cols), *y0 = malloc(sizeof(float) * (size_t)n * rows);
    float *yg = malloc(sizeof(float) * (size_t)n * rows), *yc = malloc(sizeof(float) * (size_t)n * rows);
    int8_t *xq = malloc((size_t)n * cols);
    float *xd = malloc(sizeof(float) * (size_t)n * nb);
    ok = x && y0 && yg && yc && xq && xd;
    for (int t = 0; ok && t < xr; t++)
      for (int b = 0; b < nb; b++) {
        const float mag = (t + b) % 7 == 3 ? 0.0f : powf(2.0f, (float)((t * 3 + b) % 9) - 4.0f);
        for (int k = 0; k < 32; k++) x[(size_t)t * cols + b * 32 + k] = mag * test_rand_float(seed);
      }
    for (size_t i = 0; ok && i < (size_t)n * rows; i++) y0[i] = test_rand_float(seed);
    wisp_buf *xg = NULL, *xc = NULL, *ybg = NULL, *ybc = NULL;
    if (ok) {
      xg = gpu->buf_new(gpu, (size_t)xr * cols), xc = cpu->buf_new(cpu, (size_t)xr * cols);
      ybg = gpu->buf_new(gpu, (size_t)n * rows), ybc = cpu->buf_new(cpu, (size_t)n * rows);
      ok = xg && xc && ybg && ybc;
    }
    if (ok) {
      gpu->buf_write(gpu, xg, 0, (size_t)xr * cols, x);
      cpu->buf_write(cpu, xc, 0, (size_t)xr * cols, x);
      gpu->buf_write(gpu, ybg, 0, (size_t)n * rows, y0);
      cpu->buf_write(cpu, ybc, 0, (size_t)n * rows, y0);
      uint64_t p0, p1, qz;
      wisp_wgpu_mm8_counts(gpu, &p0, &qz);
      gpu->matmul(gpu, &h->m, xg, c->x_row0, n, ybg, c->acc);
      wisp_wgpu_mm8_counts(gpu, &p1, &qz);
      cpu->matmul(cpu, &h->m, xc, c->x_row0, n, ybc, c->acc);
      gpu->buf_read(gpu, ybg, 0, (size_t)n * rows, yg);
      cpu->buf_read(cpu, ybc, 0, (size_t)n * rows, yc);
      ok = !gpu->sync(gpu) && !cpu->sync(cpu);
      if (!ok) snprintf(err, cap, "run: %s", wisp_last_error());
      /* Q4_K's one-token product is its own kernel; every other n (and
       * every n of the other types, the path forced) is the int8 one. */
      const int want = !(c->type == WISP_W_Q4K && n == 1);
      if (ok && (p1 - p0 == 1) != want) {
        snprintf(err, cap, "%s n %d: the int8 product %s", wisp_wtype_name(c->type), n, want ? "did not run" : "ran");
        ok = 0;
      }
      if (ok && want) ok = !wisp_wgpu_mm8_read_quantized(gpu, n, cols, xq, xd);
      if (!ok && !err[0]) snprintf(err, cap, "read back: %s", wisp_last_error());
      double rel = 0, relc = 0;
      if (ok) test_i8_errors(wd, rows, cols, want ? xq : NULL, xd, n, y0, c->acc, yg, yc, &rel, &relc);
      if (ok) {
        w->exact = fmax(w->exact, rel);
        w->f32 = fmax(w->f32, relc);
      }
      if (ok && !(rel <= TOL_I8K_EXACT)) {
        snprintf(err, cap, "%s %dx%d n %d: vs the int8 reference: %.3g of the largest |terms| sum (tol %g)",
                 wisp_wtype_name(c->type), rows, cols, n, rel, TOL_I8K_EXACT);
        ok = 0;
      } else if (ok && !(relc <= TOL_I8K_F32)) {
        snprintf(err, cap, "%s %dx%d n %d: vs the CPU f32 product: %.3g of max|ref| (tol %g)",
                 wisp_wtype_name(c->type), rows, cols, n, relc, TOL_I8K_F32);
        ok = 0;
      }
    }
    if (xg) gpu->buf_free(gpu, xg);
    if (ybg) gpu->buf_free(gpu, ybg);
    if (xc) cpu->buf_free(cpu, xc);
    if (ybc) cpu->buf_free(cpu, ybc);
    free(x), free(y0), free(yg), free(yc), free(xq), free(xd);
  }
  free(wd);
  return ok;
}

static int suite(wisp_wgpu_device *d, const wisp_wgpu_mm8_opts *o, const shape *shapes, int ns, worst_t *w, char *err,
                 size_t cap) {
  wisp_wgpu_backend_opts go = {.device = d, .subgroups = -1};
  wisp_backend *gpu = NULL, *cpu = NULL;
  if (wisp_cpu_backend_new(1, &cpu) || wisp_wgpu_backend_new(&go, &gpu)) {
    snprintf(err, cap, "backends: %s", wisp_last_error());
    if (cpu) cpu->destroy(cpu);
    return 0;
  }
  int ok = !wisp_wgpu_mm8_configure(gpu, o);
  if (!ok) snprintf(err, cap, "configure: %s", wisp_last_error());
  test_host_mat *hs = calloc((size_t)ns, sizeof *hs);
  uint64_t seed = 77;
  for (int i = 0; ok && hs && i < ns; i++) ok = run_shape(gpu, cpu, &shapes[i], &hs[i], &seed, w, err, cap);
  gpu->destroy(gpu);
  cpu->destroy(cpu);
  for (int i = 0; hs && i < ns; i++) free(hs[i].a), free(hs[i].b), free(hs[i].c);
  free(hs);
  return ok && hs;
}

static const shape k_shapes[] = {
    {WISP_W_Q4K, 37, 256, 0, 0}, {WISP_W_Q8_0, 37, 96, 1, 0}, {WISP_W_Q4K, 70, 768, 1, 2},
    {WISP_W_Q8_0, 65, 320, 0, 1}, {WISP_W_Q4, 33, 96, 0, 1},  {WISP_W_Q4Z, 9, 160, 1, 0},
};

TEST(webgpu_matmul_i8k_odd_shapes) {
  WEBGPU_OR_SKIP(d);
  worst_t w = {0, 0};
  char err[700] = "";
  wisp_wgpu_mm8_opts o = {.mode = 2, .min_n = 1};
  CHECKF(suite(d, &o, k_shapes, (int)(sizeof k_shapes / sizeof k_shapes[0]), &w, err, sizeof err),
         "default geometry: %s", err);
  /* KB 3 divides neither 8 (Q4_K 256 columns) nor 3 blocks (Q8_0 96); 8x2 register tiles. */
  wisp_wgpu_mm8_opts g = {.mode = 2, .min_n = 1, .tm = 32, .tn = 16, .rm = 8, .rn = 2, .kb = 3};
  CHECKF(suite(d, &g, k_shapes, 2, &w, err, sizeof err), "geometry 32x16x8x2x3: %s", err);
  printf("     int8 products (Q4_K, Q8_0, Q4, Q4Z; n 1-64): %.3g of the |terms| sum vs the int8 reference, "
         "%.3g of max|ref| vs the CPU f32 product\n",
         w.exact, w.f32);
}

/* FUSEQ = 1 (each tile quantizes its own activations, Q4_K's sums too) gives
 * the bits of the quantize-then-multiply pair (Q8_0 shares all but the
 * weight loads with Q4_K; those are covered above). */
TEST(webgpu_matmul_i8k_fused_quantize_same_bits) {
  WEBGPU_OR_SKIP(d);
  static const shape sh[] = {{WISP_W_Q4K, 70, 768, 1, 1}};
  const int n = 33;
  int ok = 1;
  char err[400] = "";
  for (int si = 0; ok && si < (int)(sizeof sh / sizeof sh[0]); si++) {
    float *y[2] = {NULL, NULL};
    for (int f = 0; ok && f < 2; f++) {
      wisp_wgpu_backend_opts go = {.device = d, .subgroups = -1};
      wisp_backend *gpu = NULL;
      ok = !wisp_wgpu_backend_new(&go, &gpu);
      wisp_wgpu_mm8_opts o = {.mode = 2, .min_n = 1, .fuseq = f ? 1 : -1};
      ok = ok && !wisp_wgpu_mm8_configure(gpu, &o);
      uint64_t seed = 9;
      test_host_mat h;
      const int rows = sh[si].rows, cols = sh[si].cols, xr = n + sh[si].x_row0;
      ok = ok && test_mat_make(&h, sh[si].type, rows, cols, &seed, 1) && !gpu->prepare_matrix(gpu, &h.m);
      float *x = malloc(sizeof(float) * (size_t)xr * cols);
      y[f] = malloc(sizeof(float) * (size_t)n * rows);
      ok = ok && x && y[f];
      for (size_t i = 0; ok && i < (size_t)xr * cols; i++) x[i] = test_rand_float(&seed) * (float)(1 + i % 3);
      for (size_t i = 0; ok && i < (size_t)n * rows; i++) y[f][i] = 0.5f;
      wisp_buf *xb = ok ? gpu->buf_new(gpu, (size_t)xr * cols) : NULL, *yb = ok ? gpu->buf_new(gpu, (size_t)n * rows) : NULL;
      ok = ok && xb && yb;
      if (ok) {
        gpu->buf_write(gpu, xb, 0, (size_t)xr * cols, x);
        gpu->buf_write(gpu, yb, 0, (size_t)n * rows, y[f]);
        gpu->matmul(gpu, &h.m, xb, sh[si].x_row0, n, yb, sh[si].acc);
        gpu->buf_read(gpu, yb, 0, (size_t)n * rows, y[f]);
        ok = !gpu->sync(gpu);
      }
      if (!ok) snprintf(err, sizeof err, "%s: %s", wisp_wtype_name(sh[si].type), wisp_last_error());
      if (xb) gpu->buf_free(gpu, xb);
      if (yb) gpu->buf_free(gpu, yb);
      if (gpu) gpu->destroy(gpu);
      free(x);
      free(h.a), free(h.b), free(h.c);
    }
    if (ok && memcmp(y[0], y[1], sizeof(float) * (size_t)n * sh[si].rows)) {
      snprintf(err, sizeof err, "%s: FUSEQ changed the bits", wisp_wtype_name(sh[si].type));
      ok = 0;
    }
    free(y[0]), free(y[1]);
  }
  CHECKF(ok, "%s", err);
}

/* The plan takes the Q4_K integer product under the throughput profile,
 * as the CPU takes its own (the registry's rule has no architecture): the
 * tiny Qwen 3.5 (Q4_K) prefilled on WebGPU with profiles/throughput runs
 * int8 products, the default profile none, and the throughput logits stay
 * within TOL_I8K_LOGITS of max|logit| of the exact CPU ones, same argmax. */
#define TOL_I8K_LOGITS 0.1
TEST(webgpu_matmul_i8k_qwen_throughput_profile) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  char hf[600], art[600], cmd[1600], log[2048];
  snprintf(hf, sizeof hf, "%s/i8k_qwen_hf", test_tmpdir());
  snprintf(art, sizeof art, "%s/i8k_qwen_q4k", test_tmpdir());
  snprintf(cmd, sizeof cmd, "mkdir -p %s", hf);
  CHECK(system(cmd) == 0);
  CHECK(fx_write_tiny_qwen35(hf) == 0);
  snprintf(cmd, sizeof cmd, "%s convert %s -o %s --quant q4k --quiet", test_wisp_bin(), hf, art);
  CHECKF(test_run(cmd, log, sizeof log) == 0, "%s", log);
  wisp_model *m = NULL;
  CHECKF(wisp_model_open(art, &m) == WISP_OK, "%s", wisp_last_error());
  const int V = wisp_model_vocab(m);
  float *lg[3] = {NULL, NULL, NULL};
  uint64_t prods[3] = {0, 0, 0}, quants = 0;
  static const char *backends[3] = {"cpu", "webgpu", "webgpu"}, *profiles[3] = {NULL, NULL, "throughput"};
  int32_t ids[40];
  for (int k = 0; k < 40; k++) ids[k] = (int32_t)((5 + 17 * k) % V);
  int ok = 1;
  for (int i = 0; i < 3; i++) {
    lg[i] = malloc(sizeof(float) * (size_t)V);
    wisp_session_options o = {.backend = backends[i], .profile = profiles[i], .threads = 1};
    wisp_session *s = NULL;
    ok = ok && lg[i] && !wisp_session_new(m, &o, &s) && !wisp_session_eval(s, ids, 40, lg[i]);
    if (ok && i) wisp_wgpu_mm8_counts(s->backend, &prods[i], &quants);
    wisp_session_free(s);
  }
  wisp_model_close(m);
  char why[400];
  snprintf(why, sizeof why, "%s", ok ? "" : wisp_last_error());
  double mx = 0, e = 0;
  int a0 = 0, a2 = 0;
  for (int v = 0; ok && v < V; v++) {
    mx = fmax(mx, fabs(lg[0][v]));
    e = fmax(e, fabs((double)lg[2][v] - lg[0][v]));
    if (lg[0][v] > lg[0][a0]) a0 = v;
    if (lg[2][v] > lg[2][a2]) a2 = v;
  }
  for (int i = 0; i < 3; i++) free(lg[i]);
  CHECKF(ok, "%s", why);
  CHECKF(prods[1] == 0 && prods[2] > 0, "int8 products: %llu by default, %llu with throughput",
         (unsigned long long)prods[1], (unsigned long long)prods[2]);
  CHECKF(e <= TOL_I8K_LOGITS * mx, "throughput logits %.3g of max|logit| from the exact CPU ones (tol %g)", e / mx,
         TOL_I8K_LOGITS);
  CHECKF(a0 == a2, "argmax %d exact CPU, %d throughput WebGPU", a0, a2);
  printf("     tiny Qwen 3.5 Q4_K, throughput prefill: %llu int8 products, logits %.3g of max|logit| from exact\n",
         (unsigned long long)prods[2], e / mx);
}
