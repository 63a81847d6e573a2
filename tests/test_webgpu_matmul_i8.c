/* The Q4 x int8 prefill product (quant_x8.wgsl + matmul_i8.wgsl,
 * src/backend/webgpu/wgpu_products_i8.c) on lavapipe:
 *
 * - the quantized activations read back from the device against a C
 *   quantizer (scales to 1e-6 relative; int8 values equal, or within one
 *   where x * 127 / max|x| lies within 1e-3 of a rounding tie);
 * - the product against an int8 reference computed here in double from those
 *   quantized activations and the weights' integers: TOL_I8_EXACT of
 *   max|ref| (only f32 rounding of the per-block scaling and summation);
 * - the product against the CPU backend's f32 product: TOL_I8_F32 of
 *   max|ref| (the activation quantization, max|x|/254 per element at most);
 * - whole models: greedy tokens after prompts prefilled through the int8
 *   path equal the CPU backend's (logits within TOL_I8_LOGITS of max|logit|).
 *
 * Tolerances and measured errors are in docs/webgpu.md. */
#define TOL_I8_EXACT 1e-5
#define TOL_I8_F32 2e-2
#define TOL_I8_LOGITS 0.1

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/webgpu/wgpu_backend.h"
#include "backend/webgpu/wgpu_core.h"
#include "backend/webgpu/wgpu_products_i8.h"
#include "engine/engine.h"
#include "fixtures.h"
#include "test.h"
#include "util/err.h"
#include "webgpu_fixture.h"

typedef struct {
  wisp_wtype type;
  int rows, cols, n, acc, x_row0;
} mm_case;

typedef struct {
  double exact, f32, qmiss; /* worst relative errors; fraction of +-1 int8 differences */
} worst_t;

static int nib(const uint8_t *q, int cols, int r, int c) {
  uint8_t b = q[(size_t)r * (cols / 2) + c / 2];
  return c % 2 ? b >> 4 : b & 15;
}

static int zero_point(const wisp_matrix *m, int r, int b) {
  if (m->type != WISP_W_Q4Z) return 8;
  size_t blk = (size_t)r * (m->cols / 32) + b;
  return blk % 2 ? m->zp[blk / 2] >> 4 : m->zp[blk / 2] & 15;
}

/* Runs one product on both backends and checks it; host memory of the
 * weights goes to *keep (freed by the caller after both backends). */
static int run_case(wisp_backend *gpu, wisp_backend *cpu, const mm_case *c, uint64_t *seed, void **keep, worst_t *w,
                    char *err, size_t cap) {
  const int rows = c->rows, cols = c->cols, n = c->n, nb = cols / 32, xr = c->x_row0 + n;
  size_t nq = wisp_q4_quant_bytes(rows, cols), nz = wisp_q4_zp_bytes(rows, cols);
  uint8_t *q = malloc(nq), *z = malloc(nz + 1);
  float *s = malloc(sizeof(float) * (size_t)rows * nb);
  float *x = malloc(sizeof(float) * (size_t)xr * cols), *y0 = malloc(sizeof(float) * (size_t)n * rows);
  float *yg = malloc(sizeof(float) * (size_t)n * rows), *yc = malloc(sizeof(float) * (size_t)n * rows);
  int8_t *xq = malloc((size_t)n * cols);
  float *xd = malloc(sizeof(float) * (size_t)n * nb);
  keep[0] = q;
  keep[1] = z;
  keep[2] = s;
  int ok = q && z && s && x && y0 && yg && yc && xq && xd;
  if (!ok) snprintf(err, cap, "out of memory");
  for (size_t i = 0; ok && i < nq; i++) q[i] = (uint8_t)test_rand_u32(seed);
  for (size_t i = 0; ok && i < nz; i++) z[i] = (uint8_t)test_rand_u32(seed);
  for (size_t i = 0; ok && i < (size_t)rows * nb; i++) s[i] = 0.002f + 0.02f * fabsf(test_rand_float(seed));
  /* Blocks of different magnitudes, one all-zero block, one with a single value. */
  for (int t = 0; ok && t < xr; t++)
    for (int b = 0; b < nb; b++) {
      float mag = (t + b) % 7 == 3 ? 0.0f : powf(2.0f, (float)((t * 3 + b) % 9) - 4.0f);
      for (int k = 0; k < 32; k++) {
        float v = mag * test_rand_float(seed);
        if ((t + 2 * b) % 11 == 5) v = k == 17 ? mag : 0.0f;
        x[(size_t)t * cols + b * 32 + k] = v;
      }
    }
  for (size_t i = 0; ok && i < (size_t)n * rows; i++) y0[i] = test_rand_float(seed);
  wisp_matrix m = {.type = c->type, .rows = rows, .cols = cols, .q = q, .scales = s,
                   .zp = c->type == WISP_W_Q4Z ? z : NULL};
  wisp_buf *xg = NULL, *xc = NULL, *ybg = NULL, *ybc = NULL;
  if (ok) {
    ok = !gpu->prepare_matrix(gpu, &m) && !cpu->prepare_matrix(cpu, &m);
    if (!ok) snprintf(err, cap, "prepare: %s", wisp_last_error());
  }
  if (ok) {
    xg = gpu->buf_new(gpu, (size_t)xr * cols);
    xc = cpu->buf_new(cpu, (size_t)xr * cols);
    ybg = gpu->buf_new(gpu, (size_t)n * rows);
    ybc = cpu->buf_new(cpu, (size_t)n * rows);
    ok = xg && xc && ybg && ybc;
    if (!ok) snprintf(err, cap, "buffers");
  }
  if (ok) {
    gpu->buf_write(gpu, xg, 0, (size_t)xr * cols, x);
    cpu->buf_write(cpu, xc, 0, (size_t)xr * cols, x);
    gpu->buf_write(gpu, ybg, 0, (size_t)n * rows, y0);
    cpu->buf_write(cpu, ybc, 0, (size_t)n * rows, y0);
    gpu->matmul(gpu, &m, xg, c->x_row0, n, ybg, c->acc);
    cpu->matmul(cpu, &m, xc, c->x_row0, n, ybc, c->acc);
    gpu->buf_read(gpu, ybg, 0, (size_t)n * rows, yg);
    cpu->buf_read(cpu, ybc, 0, (size_t)n * rows, yc);
    ok = !gpu->sync(gpu) && !cpu->sync(cpu) && !wisp_wgpu_mm8_read_quantized(gpu, n, cols, xq, xd);
    if (!ok) snprintf(err, cap, "run: %s", wisp_last_error());
  }
  char what[160];
  snprintf(what, sizeof what, "%s %dx%d n %d acc %d x_row0 %d", wisp_wtype_name(c->type), rows, cols, n, c->acc,
           c->x_row0);
  /* The quantization. */
  long miss = 0;
  for (int t = 0; ok && t < n; t++)
    for (int b = 0; ok && b < nb; b++) {
      const float *xb = x + (size_t)(c->x_row0 + t) * cols + b * 32;
      float amax = 0;
      for (int k = 0; k < 32; k++) amax = fmaxf(amax, fabsf(xb[k]));
      float d = amax / 127.0f, inv = amax > 0 ? 127.0f / amax : 0.0f, dg = xd[(size_t)t * nb + b];
      if (!(fabsf(dg - d) <= 1e-6f * d)) {
        snprintf(err, cap, "%s: scale of token %d block %d: gpu %.9g, expected %.9g", what, t, b, dg, d);
        ok = 0;
      }
      for (int k = 0; ok && k < 32; k++) {
        float v = xb[k] * inv;
        float r = rintf(v);
        r = r > 127 ? 127 : r < -127 ? -127 : r;
        int qg = xq[(size_t)t * cols + b * 32 + k];
        if (qg == (int)r) continue;
        if (abs(qg - (int)r) == 1 && fabsf(fabsf(v - truncf(v)) - 0.5f) < 1e-3f) {
          miss++;
          continue;
        }
        snprintf(err, cap, "%s: int8 of token %d element %d: gpu %d, expected %d (x %.9g * %.9g)", what, t,
                 b * 32 + k, qg, (int)r, xb[k], inv);
        ok = 0;
      }
    }
  if (ok) w->qmiss = fmax(w->qmiss, (double)miss / ((double)n * cols));
  /* The int8 reference from the device's quantized activations. */
  double mx = 0, e = 0, mxc = 0, ec = 0;
  int wi = -1;
  for (int t = 0; ok && t < n; t++)
    for (int r = 0; r < rows; r++) {
      double acc = c->acc ? y0[(size_t)t * rows + r] : 0.0;
      for (int b = 0; b < nb; b++) {
        int zp = zero_point(&m, r, b);
        long dot = 0;
        for (int k = 0; k < 32; k++) dot += (long)(nib(q, cols, r, b * 32 + k) - zp) * xq[(size_t)t * cols + b * 32 + k];
        acc += (double)s[(size_t)r * nb + b] * xd[(size_t)t * nb + b] * (double)dot;
      }
      size_t i = (size_t)t * rows + r;
      mx = fmax(mx, fabs(acc));
      double ei = fabs(yg[i] - acc);
      if (!(ei <= e)) {
        e = isnan(ei) ? INFINITY : ei;
        wi = (int)i;
      }
      mxc = fmax(mxc, fabs(yc[i]));
      ec = fmax(ec, isnan(yg[i]) ? INFINITY : fabs((double)yg[i] - yc[i]));
    }
  if (ok) {
    double rel = mx > 0 ? e / mx : e, relc = mxc > 0 ? ec / mxc : ec;
    w->exact = fmax(w->exact, rel);
    w->f32 = fmax(w->f32, relc);
    if (!(rel <= TOL_I8_EXACT)) {
      snprintf(err, cap, "%s: vs int8 reference: [%d] gpu %.9g, error %.3g of max|ref| %.4g (tol %g)", what, wi,
               wi >= 0 ? yg[wi] : 0.0f, rel, mx, TOL_I8_EXACT);
      ok = 0;
    } else if (!(relc <= TOL_I8_F32)) {
      snprintf(err, cap, "%s: vs f32 product: error %.3g of max|ref| %.4g (tol %g)", what, relc, mxc, TOL_I8_F32);
      ok = 0;
    }
  }
  if (xg) gpu->buf_free(gpu, xg);
  if (ybg) gpu->buf_free(gpu, ybg);
  if (xc) cpu->buf_free(cpu, xc);
  if (ybc) cpu->buf_free(cpu, ybc);
  free(x);
  free(y0);
  free(yg);
  free(yc);
  free(xq);
  free(xd);
  return ok;
}

/* Runs the cases on a fresh pair of backends with the given settings. */
static int suite(wisp_wgpu_device *d, const wisp_wgpu_mm8_opts *o, uint64_t max_binding, const mm_case *cases,
                 int ncases, worst_t *w, char *err, size_t cap) {
  wisp_wgpu_backend_opts go = {.device = d, .subgroups = -1, .max_binding = max_binding};
  wisp_backend *gpu = NULL, *cpu = NULL;
  if (wisp_cpu_backend_new(1, &cpu) || wisp_wgpu_backend_new(&go, &gpu)) {
    snprintf(err, cap, "backends: %s", wisp_last_error());
    if (cpu) cpu->destroy(cpu);
    return 0;
  }
  int ok = 1;
  if (wisp_wgpu_mm8_configure(gpu, o)) {
    snprintf(err, cap, "configure: %s", wisp_last_error());
    ok = 0;
  }
  void **keep = calloc((size_t)ncases * 3, sizeof *keep);
  uint64_t seed = 1234;
  for (int i = 0; ok && keep && i < ncases; i++) ok = run_case(gpu, cpu, &cases[i], &seed, keep + 3 * i, w, err, cap);
  gpu->destroy(gpu);
  cpu->destroy(cpu);
  for (int i = 0; keep && i < ncases * 3; i++) free(keep[i]);
  free(keep);
  return ok;
}

TEST(webgpu_matmul_i8_against_references) {
  WEBGPU_OR_SKIP(d);
  static const mm_case cases[] = {
      {WISP_W_Q4, 1, 32, 3, 0, 0},      {WISP_W_Q4, 7, 96, 17, 1, 2},     {WISP_W_Q4, 33, 4096, 3, 0, 0},
      {WISP_W_Q4, 100, 1024, 100, 1, 0}, {WISP_W_Q4, 1000, 256, 17, 0, 1}, {WISP_W_Q4, 13, 160, 1, 0, 0},
      {WISP_W_Q4Z, 7, 96, 3, 0, 0},     {WISP_W_Q4Z, 65, 2560, 17, 1, 1}, {WISP_W_Q4Z, 300, 64, 100, 0, 3},
      {WISP_W_Q4Z, 5, 32, 1, 1, 0},
  };
  worst_t w = {0, 0, 0};
  char err[700] = "";
  wisp_wgpu_mm8_opts o = {.mode = 2, .min_n = 1};
  CHECKF(suite(d, &o, 0, cases, (int)(sizeof cases / sizeof cases[0]), &w, err, sizeof err), "default geometry: %s",
         err);
  printf("     int8 matmul: %.3g of max|ref| vs the int8 reference, %.3g vs the f32 product; %.2g of int8 values "
         "off by one at ties\n",
         w.exact, w.f32, w.qmiss);
}

/* Other geometries (KB not dividing the blocks, 8x2 and 1x8 register tiles;
 * small ones: lavapipe's first compile of a big unrolled tile takes seconds)
 * and weights split into row ranges (16 KiB bindings). */
TEST(webgpu_matmul_i8_geometries_and_split) {
  WEBGPU_OR_SKIP(d);
  static const mm_case cases[] = {
      {WISP_W_Q4, 70, 96, 17, 1, 1}, {WISP_W_Q4Z, 130, 160, 40, 0, 0}, {WISP_W_Q4, 9, 2560, 5, 0, 0}};
  static const wisp_wgpu_mm8_opts geos[] = {
      {.mode = 2, .min_n = 1, .tm = 32, .tn = 16, .rm = 8, .rn = 2, .kb = 3},
      {.mode = 2, .min_n = 1, .tm = 8, .tn = 32, .rm = 1, .rn = 8, .kb = 1},
  };
  worst_t w = {0, 0, 0};
  char err[700] = "";
  for (int g = 0; g < 2; g++)
    CHECKF(suite(d, &geos[g], 0, cases, 3, &w, err, sizeof err), "geometry %ux%ux%ux%ux%u: %s", geos[g].tm,
           geos[g].tn, geos[g].rm, geos[g].rn, geos[g].kb, err);
  /* 16 KiB bindings: Q4 1000x96 becomes 341-row parts, Q4Z 700x160 ones
   * of 204 rows (even blocks). */
  static const mm_case split[] = {{WISP_W_Q4, 1000, 96, 17, 1, 0}, {WISP_W_Q4Z, 700, 160, 9, 0, 2}};
  wisp_wgpu_mm8_opts o = {.mode = 2, .min_n = 1};
  CHECKF(suite(d, &o, 16384, split, 2, &w, err, sizeof err), "split: %s", err);
  printf("     int8 matmul geometries/split: %.3g vs the int8 reference, %.3g vs f32\n", w.exact, w.f32);
}

/* The default geometry's token tile (64) is halved for products of fewer
 * than two tiles of tokens (batched steps, short prompts), so that they
 * keep the workgroups a tile of 32 gives them; both against the
 * references. */
TEST(webgpu_matmul_i8_token_tile_by_tokens) {
  WEBGPU_OR_SKIP(d);
  static const mm_case cases[] = {{WISP_W_Q4, 70, 96, 64, 0, 0}, {WISP_W_Q4, 70, 96, 127, 1, 0},
                                  {WISP_W_Q4, 70, 96, 128, 0, 0}, {WISP_W_Q4Z, 33, 160, 200, 1, 3}};
  static const char *want[] = {"matmul_i8:64:32:", "matmul_i8:64:32:", "matmul_i8:64:64:", "matmul_i8:64:64:"};
  wisp_wgpu_backend_opts go = {.device = d, .subgroups = -1};
  wisp_backend *gpu = NULL, *cpu = NULL;
  CHECKF(!wisp_cpu_backend_new(1, &cpu) && !wisp_wgpu_backend_new(&go, &gpu), "backends: %s", wisp_last_error());
  wisp_wgpu_mm8_opts o = {.mode = 2, .min_n = 1};
  CHECKF(!wisp_wgpu_mm8_configure(gpu, &o), "configure: %s", wisp_last_error());
  void *keep[4][3] = {{0}};
  worst_t w = {0, 0, 0};
  char err[700] = "";
  uint64_t seed = 77;
  for (int i = 0; i < 4; i++) {
    int ok = run_case(gpu, cpu, &cases[i], &seed, keep[i], &w, err, sizeof err);
    const char *k = as_g(gpu)->last_kernel ? as_g(gpu)->last_kernel : "";
    CHECKF(ok, "%d tokens: %s", cases[i].n, err);
    CHECKF(!strncmp(k, want[i], strlen(want[i])), "%d tokens: kernel %s, want %s...", cases[i].n, k, want[i]);
  }
  gpu->destroy(gpu);
  cpu->destroy(cpu);
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 3; j++) free(keep[i][j]);
  printf("     token tiles 32 / 64 by tokens: %.3g vs the int8 reference, %.3g vs f32\n", w.exact, w.f32);
}

/* Bad geometry is refused; the plan decides by default (an empty choice
 * runs the f32 tiled kernel), and consecutive products of one input
 * quantize it once. */
TEST(webgpu_matmul_i8_selection_and_reuse) {
  WEBGPU_OR_SKIP(d);
  wisp_wgpu_backend_opts go = {.device = d, .subgroups = -1};
  wisp_backend *gpu = NULL;
  CHECKF(!wisp_wgpu_backend_new(&go, &gpu), "%s", wisp_last_error());
  wisp_wgpu_mm8_opts bad = {.tm = 60, .rm = 8};
  int refused = wisp_wgpu_mm8_configure(gpu, &bad) != WISP_OK;
  enum { R = 64, C = 64, N = 8 };
  static uint8_t q[R * C / 2];
  static float s[R * C / 32], x[N * C];
  uint64_t seed = 5;
  for (size_t i = 0; i < sizeof q; i++) q[i] = (uint8_t)test_rand_u32(&seed);
  for (int i = 0; i < R * C / 32; i++) s[i] = 0.01f;
  for (int i = 0; i < N * C; i++) x[i] = test_rand_float(&seed);
  wisp_matrix a = {.type = WISP_W_Q4, .rows = R, .cols = C, .q = q, .scales = s};
  wisp_matrix b = a;
  b.rows = R / 2; /* another matrix over the same host memory */
  int ok = !gpu->prepare_matrix(gpu, &a) && !gpu->prepare_matrix(gpu, &b);
  wisp_buf *xb = gpu->buf_new(gpu, N * C), *y1 = gpu->buf_new(gpu, N * R), *y2 = gpu->buf_new(gpu, N * R);
  ok = ok && xb && y1 && y2;
  uint64_t dd[4] = {0};
  wisp_wgpu_backend_stats st;
  if (ok) {
    gpu->buf_write(gpu, xb, 0, N * C, x);
    wisp_wgpu_backend_stats_get(gpu, &st);
    dd[0] = st.dispatches;
    gpu->matmul(gpu, &a, xb, 0, N, y1, 0); /* no plan choice: f32 tiled, 1 dispatch */
    snprintf(a.choice[WISP_PHASE_PREFILL].variant, sizeof a.choice[0].variant, "wgsl_tiled_q4_i8");
    snprintf(b.choice[WISP_PHASE_PREFILL].variant, sizeof b.choice[0].variant, "wgsl_tiled_q4_i8");
    wisp_wgpu_backend_stats_get(gpu, &st);
    dd[1] = st.dispatches;
    gpu->matmul(gpu, &a, xb, 0, N, y1, 0); /* quantize + product */
    gpu->matmul(gpu, &b, xb, 0, N, y2, 0); /* product only: same input */
    wisp_wgpu_backend_stats_get(gpu, &st);
    dd[2] = st.dispatches;
    gpu->matmul(gpu, &b, xb, 1, N - 1, y2, 1); /* other rows: quantize again */
    wisp_wgpu_backend_stats_get(gpu, &st);
    dd[3] = st.dispatches;
    ok = !gpu->sync(gpu);
  }
  if (xb) gpu->buf_free(gpu, xb);
  if (y1) gpu->buf_free(gpu, y1);
  if (y2) gpu->buf_free(gpu, y2);
  gpu->destroy(gpu);
  CHECK(refused);
  CHECKF(ok, "%s", wisp_last_error());
  CHECKF(dd[1] - dd[0] == 1 && dd[2] - dd[1] == 3 && dd[3] - dd[2] == 2, "dispatches %llu, %llu, %llu",
         (unsigned long long)(dd[1] - dd[0]), (unsigned long long)(dd[2] - dd[1]), (unsigned long long)(dd[3] - dd[2]));
}

static int argmax(const float *v, int n) {
  int b = 0;
  for (int i = 1; i < n; i++)
    if (v[i] > v[b]) b = i;
  return b;
}

/* A model prefilled through the int8 path (the default plan) against the
 * CPU backend: prompts, then greedy steps, same tokens; returns the worst
 * logit error relative to max|logit| in *worst. */
static int model_tokens(const char *dir, const int *prompts, int np, int steps, double *worst, int *i8_used,
                        char *err, size_t cap) {
  wisp_model *m = NULL;
  if (wisp_model_open(dir, &m)) {
    snprintf(err, cap, "open: %s", wisp_last_error());
    return 0;
  }
  const int V = wisp_model_vocab(m);
  wisp_session *sc = NULL, *sg = NULL;
  wisp_session_options oc = {.backend = "cpu", .threads = 2}, og = {.backend = "webgpu", .profile = "throughput"};
  int ok = !wisp_session_new(m, &oc, &sc) && !wisp_session_new(m, &og, &sg);
  if (!ok) snprintf(err, cap, "sessions: %s", wisp_last_error());
  float *lc = malloc(sizeof(float) * V), *lg = malloc(sizeof(float) * V);
  int32_t *ids = malloc(sizeof(int32_t) * 256);
  ok = ok && lc && lg && ids;
  uint64_t seed = 97;
  *i8_used = 0;
  for (int pi = 0; ok && pi < np; pi++) {
    for (int i = 0; i < prompts[pi]; i++) ids[i] = (int32_t)(test_rand_u32(&seed) % (uint32_t)V);
    wisp_session_reset(sc);
    wisp_session_reset(sg);
    ok = !wisp_session_eval(sc, ids, prompts[pi], lc) && !wisp_session_eval(sg, ids, prompts[pi], lg);
    if (!ok) snprintf(err, cap, "prompt %d: %s", prompts[pi], wisp_last_error());
    uint64_t prods = 0, quants = 0;
    if (ok) wisp_wgpu_mm8_counts(sg->backend, &prods, &quants);
    if (prods) *i8_used = 1;
    for (int step = 0; ok && step <= steps; step++) {
      double mx = 0, e = 0;
      for (int i = 0; i < V; i++) {
        mx = fmax(mx, fabs(lc[i]));
        e = fmax(e, fabs((double)lg[i] - lc[i]));
      }
      if (isnan(e) || isnan(mx)) e = INFINITY;
      *worst = fmax(*worst, e / mx);
      int tc = argmax(lc, V), tg = argmax(lg, V);
      if (tc != tg || !(e <= TOL_I8_LOGITS * mx)) {
        snprintf(err, cap, "prompt %d step %d: token cpu %d gpu %d, logit error %.3g of max %.3g", prompts[pi], step,
                 tc, tg, e, mx);
        ok = 0;
        break;
      }
      if (step == steps) break;
      int32_t t = tc;
      ok = !wisp_session_eval(sc, &t, 1, lc) && !wisp_session_eval(sg, &t, 1, lg);
      if (!ok) snprintf(err, cap, "decode: %s", wisp_last_error());
    }
  }
  free(lc);
  free(lg);
  free(ids);
  wisp_session_free(sc);
  wisp_session_free(sg);
  wisp_model_close(m);
  return ok;
}

TEST(webgpu_matmul_i8_small_model_tokens) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  const char *dir = fixture_small_model();
  CHECK(dir);
  static const int prompts[] = {17, 150};
  double worst = 0;
  int used = 0;
  char err[600] = "";
  CHECKF(model_tokens(dir, prompts, 2, 32, &worst, &used, err, sizeof err), "%s", err);
  CHECKF(used, "the int8 product did not run");
  printf("     small model, int8 prefill: same greedy tokens, max logit error %.3g of max|logit|\n", worst);
}

/* The seed-shaped synthetic model (assets/lfm2-hybrid-q4.manifest.json,
 * 161 MB of random weights; the fixture the other seed-shape tests read,
 * made once per worker): a 70-token prompt (a 64-token chunk and 6) and 3
 * greedy steps. */
TEST(webgpu_matmul_i8_seed_model_tokens) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  char out[4096];
  const char *dir = fixture_seed_shaped_model(out, sizeof out);
  CHECKF(dir, "%s", out);
  static const int prompts[] = {70};
  double worst = 0;
  int used = 0;
  char err[600] = "";
  int ok = model_tokens(dir, prompts, 1, 3, &worst, &used, err, sizeof err);
  CHECKF(ok, "%s", err);
  CHECKF(used, "the int8 product did not run");
  printf("     seed-shaped model, int8 prefill: same greedy tokens, max logit error %.3g of max|logit|\n", worst);
}

/* The int8 product is a throughput-profile choice: the default plan runs
 * the exact f32-activation product, profiles/throughput the int8 one, and a
 * profile extending throughput that sets the prefill matmuls to
 * matmul/wgsl_tiled_q4 runs no int8 product. */
TEST(webgpu_matmul_i8_profile_selects_f32) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  const char *prof = fixture_write(
      "f32-prefill.json",
      "{\"id\": \"tests/f32-prefill\", \"extends\": \"throughput\", \"runtime\": {\"inference\": {\"executionPatch\": "
      "{\"set\": [{\"section\": \"prefill\", \"op\": \"matmul\", \"kernelKey\": \"matmul/wgsl_tiled_q4\"}]}}}}");
  const char *dir = fixture_small_model();
  CHECK(prof && dir);
  wisp_model *m = NULL;
  CHECKF(wisp_model_open(dir, &m) == WISP_OK, "%s", wisp_last_error());
  uint64_t prods[3] = {0, 0, 0}, quants = 0;
  const char *profiles[3] = {NULL, "throughput", prof};
  int ok = 1;
  for (int i = 0; ok && i < 3; i++) {
    wisp_session_options o = {.backend = "webgpu", .profile = profiles[i]};
    wisp_session *s = NULL;
    int32_t ids[17];
    for (int k = 0; k < 17; k++) ids[k] = k + 3;
    ok = !wisp_session_new(m, &o, &s) && !wisp_session_eval(s, ids, 17, NULL);
    if (ok) wisp_wgpu_mm8_counts(s->backend, &prods[i], &quants);
    wisp_session_free(s);
  }
  wisp_model_close(m);
  CHECKF(ok, "%s", wisp_last_error());
  CHECKF(prods[0] == 0 && prods[1] > 0 && prods[2] == 0,
         "int8 products: %llu by default, %llu with throughput, %llu with throughput + the f32 set",
         (unsigned long long)prods[0], (unsigned long long)prods[1], (unsigned long long)prods[2]);
}

/* FUSEQ = 1: the product quantizes its own tiles with quant_x8's arithmetic;
 * its results must equal the two-dispatch path's (same int8 values, same
 * order of the f32 accumulation), with no quantize dispatch. */
TEST(webgpu_matmul_i8_fused_quantize) {
  WEBGPU_OR_SKIP(d);
  static const mm_case cases[] = {{WISP_W_Q4, 70, 96, 17, 1, 1}, {WISP_W_Q4Z, 33, 2560, 40, 0, 0},
                                  {WISP_W_Q4, 100, 1024, 64, 0, 2}, {WISP_W_Q4, 5, 32, 1, 0, 0}};
  wisp_wgpu_backend_opts go = {.device = d, .subgroups = -1};
  wisp_backend *gpu = NULL;
  CHECKF(!wisp_wgpu_backend_new(&go, &gpu), "%s", wisp_last_error());
  uint64_t seed = 4321;
  char err[600] = "";
  int ok = 1;
  double worst = 0;
  void *keep[64];
  int nkeep = 0;
  for (size_t ci = 0; ok && ci < sizeof cases / sizeof cases[0]; ci++) {
    const mm_case *c = &cases[ci];
    const int rows = c->rows, cols = c->cols, n = c->n, xr = c->x_row0 + n;
    size_t nq = wisp_q4_quant_bytes(rows, cols), nz = wisp_q4_zp_bytes(rows, cols), ns = (size_t)rows * (cols / 32);
    uint8_t *q = malloc(nq), *z = malloc(nz + 1);
    float *s = malloc(sizeof(float) * ns), *x = malloc(sizeof(float) * (size_t)xr * cols);
    float *y0 = malloc(sizeof(float) * (size_t)n * rows), *ya = malloc(sizeof(float) * (size_t)n * rows),
          *yb = malloc(sizeof(float) * (size_t)n * rows);
    keep[nkeep++] = q;
    keep[nkeep++] = z;
    keep[nkeep++] = s;
    for (size_t i = 0; i < nq; i++) q[i] = (uint8_t)test_rand_u32(&seed);
    for (size_t i = 0; i < nz; i++) z[i] = (uint8_t)test_rand_u32(&seed);
    for (size_t i = 0; i < ns; i++) s[i] = 0.002f + 0.02f * fabsf(test_rand_float(&seed));
    for (size_t i = 0; i < (size_t)xr * cols; i++) x[i] = (i / 32) % 5 == 2 ? 0.0f : test_rand_float(&seed);
    for (size_t i = 0; i < (size_t)n * rows; i++) y0[i] = test_rand_float(&seed);
    wisp_matrix m = {.type = c->type, .rows = rows, .cols = cols, .q = q, .scales = s,
                     .zp = c->type == WISP_W_Q4Z ? z : NULL};
    wisp_buf *xb = gpu->buf_new(gpu, (size_t)xr * cols), *y = gpu->buf_new(gpu, (size_t)n * rows);
    ok = xb && y && !gpu->prepare_matrix(gpu, &m);
    uint64_t p0 = 0, q0 = 0, p1 = 0, q1 = 0;
    for (int f = 0; ok && f < 2; f++) {
      wisp_wgpu_mm8_opts o = {.mode = 2, .min_n = 1, .fuseq = f ? 1 : -1};
      ok = !wisp_wgpu_mm8_configure(gpu, &o);
      gpu->buf_write(gpu, xb, 0, (size_t)xr * cols, x);
      gpu->buf_write(gpu, y, 0, (size_t)n * rows, y0);
      wisp_wgpu_mm8_counts(gpu, &p0, &q0);
      gpu->matmul(gpu, &m, xb, c->x_row0, n, y, c->acc);
      wisp_wgpu_mm8_counts(gpu, &p1, &q1);
      gpu->buf_read(gpu, y, 0, (size_t)n * rows, f ? yb : ya);
      ok = ok && !gpu->sync(gpu) && p1 - p0 == 1 && q1 - q0 == (uint64_t)(f ? 0 : 1);
    }
    if (!ok) snprintf(err, sizeof err, "case %zu: %s", ci, wisp_last_error());
    double mx = 0, e = 0;
    for (size_t i = 0; ok && i < (size_t)n * rows; i++) {
      mx = fmax(mx, fabs(ya[i]));
      e = fmax(e, isnan(yb[i]) ? INFINITY : fabs((double)yb[i] - ya[i]));
    }
    if (ok) worst = fmax(worst, mx > 0 ? e / mx : e);
    if (ok && !(e <= 1e-6 * mx)) {
      snprintf(err, sizeof err, "case %zu (%dx%d n %d): fused differs by %.3g of max %.4g", ci, rows, cols, n, e, mx);
      ok = 0;
    }
    if (xb) gpu->buf_free(gpu, xb);
    if (y) gpu->buf_free(gpu, y);
    free(x);
    free(y0);
    free(ya);
    free(yb);
  }
  gpu->destroy(gpu);
  for (int i = 0; i < nkeep; i++) free(keep[i]);
  CHECKF(ok, "%s", err);
  printf("     int8 matmul FUSEQ: %.3g of max|y| from the two-dispatch path\n", worst);
}

/* Tuning prefillChunk (tokens per prefill forward, read by wisp_session_new):
 * a 150-token prompt in chunks of 100 gives the logits of one chunk, the
 * default (every op is per token; the int8 quantization too). The GPU's
 * default chunk is 1,024 tokens for a session of one slot, 512 for one of
 * several (each slot's activations are made for a chunk). */
TEST(webgpu_matmul_i8_prefill_chunk_tuning) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  const char *dir = fixture_small_model();
  CHECK(dir);
  wisp_model *m = NULL;
  CHECKF(wisp_model_open(dir, &m) == WISP_OK, "%s", wisp_last_error());
  const int V = wisp_model_vocab(m);
  float *l[2] = {malloc(sizeof(float) * V), malloc(sizeof(float) * V)};
  int32_t ids[150];
  uint64_t seed = 11;
  for (int i = 0; i < 150; i++) ids[i] = (int32_t)(test_rand_u32(&seed) % (uint32_t)V);
  int ok = l[0] && l[1], chunk[2] = {0, 0};
  for (int k = 0; ok && k < 2; k++) {
    wisp_session_options o = {.backend = "webgpu", .profile = "throughput", .tuning = k ? "prefillChunk=100" : NULL};
    wisp_session *s = NULL;
    ok = !wisp_session_new(m, &o, &s);
    if (ok) {
      chunk[k] = s->chunk;
      ok = !wisp_session_eval(s, ids, 150, l[k]);
    }
    wisp_session_free(s);
  }
  double mx = 0, e = 0;
  for (int i = 0; ok && i < V; i++) {
    mx = fmax(mx, fabs(l[0][i]));
    e = fmax(e, fabs((double)l[1][i] - l[0][i]));
  }
  free(l[0]);
  free(l[1]);
  wisp_session_options o2 = {.backend = "webgpu", .profile = "throughput", .slots = 2};
  wisp_session *s2 = NULL;
  int chunk2 = 0;
  if (!wisp_session_new(m, &o2, &s2)) chunk2 = s2->chunk;
  wisp_session_free(s2);
  wisp_model_close(m);
  CHECKF(ok, "%s", wisp_last_error());
  CHECKF(chunk[0] == 1024 && chunk[1] == 100, "chunks %d (the GPU default, one slot) and %d", chunk[0], chunk[1]);
  CHECKF(chunk2 == 512, "a session of two slots: chunks of %d (512 expected)", chunk2);
  CHECKF(e <= 1e-5 * mx, "logits differ by %.3g of max %.3g", e, mx);
}
