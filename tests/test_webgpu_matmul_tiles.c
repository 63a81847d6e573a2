/* The f32-activation prefill product (matmul.wgsl, wgpu_products_tiled.c)
 * on lavapipe: every weight type it serves, on odd shapes (rows not a
 * multiple of the tile, K of 3 or 24 blocks, 2 to 64 tokens, with and
 * without accumulation, from a later input row), against the CPU backend's
 * f32 product (TOL_TILE of max|ref|, the exact profile's product tolerance:
 * tests/test_webgpu_backend.c's TOL_MATMUL), and bit for bit the same under
 * every tile geometry: 4x4 and 8x8 register tiles, double-buffered or one
 * buffer, the tile picked by size (64x32 4x4, and 64x64 4x4 for 256 tokens
 * of at least 128 rows) or forced (tuning matmul, matmulTile).
 * Each output is summed in column order whatever the tile, so the exact
 * profile's results do not depend on the geometry. */
#define TOL_TILE 2e-5

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/webgpu/wgpu_backend.h"
#include "format/quant.h"
#include "format/tensor.h"
#include "random_matrix.h"
#include "test.h"
#include "util/err.h"
#include "webgpu_fixture.h"

/* Geometries: by size (0s), forced tiles (the 64x64 one that prefills of
 * 256+ tokens get, the 8x8 register tile), one buffer. */
typedef struct {
  uint32_t tm, tn, rm, rn;
  int one_buffer;
} geo;
static const geo k_geos[] = {{0, 0, 0, 0, 0}, {0, 0, 0, 0, 1}, {32, 16, 8, 4, 0}, {64, 64, 4, 4, 0}, {128, 64, 8, 8, 0}};
#define NGEO ((int)(sizeof k_geos / sizeof k_geos[0]))

static wisp_backend *open_gpu(wisp_wgpu_device *d, const geo *g) {
  wisp_wgpu_backend_opts o;
  memset(&o, 0, sizeof o);
  o.device = d;
  o.subgroups = -1;
  o.matmul_tm = g->tm, o.matmul_tn = g->tn, o.matmul_rm = g->rm, o.matmul_rn = g->rn;
  o.matmul_one_buffer = g->one_buffer;
  wisp_backend *be = NULL;
  return wisp_wgpu_backend_new(&o, &be) ? NULL : be;
}

typedef struct {
  wisp_wtype type;
  int rows, cols;
} shape;
static const shape k_shapes[] = {{WISP_W_F32, 37, 96},   {WISP_W_Q4, 130, 96},   {WISP_W_Q4Z, 9, 160},
                                 {WISP_W_Q4K, 130, 768}, {WISP_W_Q8_0, 31, 96}, {WISP_W_F16, 65, 96}};
#define NSHAPE ((int)(sizeof k_shapes / sizeof k_shapes[0]))
static const int k_ns[] = {2, 7, 8, 9, 33, 64};
#define NNS ((int)(sizeof k_ns / sizeof k_ns[0]))

/* y = W x (n tokens from input row x_row0, accumulating into y0 when acc)
 * on backend be; 0 with err filled on failure. */
static int product(wisp_backend *be, const wisp_matrix *W, const float *x, int xr, int x_row0, const float *y0, int n,
                   int acc, float *y, char *err, size_t cap) {
  const size_t R = (size_t)W->rows, C = (size_t)W->cols;
  wisp_buf *xb = be->buf_new(be, (size_t)xr * C), *yb = be->buf_new(be, (size_t)n * R);
  int ok = xb && yb;
  if (ok) {
    be->buf_write(be, xb, 0, (size_t)xr * C, x);
    be->buf_write(be, yb, 0, (size_t)n * R, y0);
    be->matmul(be, W, xb, x_row0, n, yb, acc);
    be->buf_read(be, yb, 0, (size_t)n * R, y);
    ok = !be->sync(be);
  }
  if (!ok) snprintf(err, cap, "%s %dx%d n %d: %s", wisp_wtype_name(W->type), W->rows, W->cols, n, wisp_last_error());
  if (xb) be->buf_free(be, xb);
  if (yb) be->buf_free(be, yb);
  return ok;
}

TEST(webgpu_matmul_tiles_same_bits_and_cpu_parity) {
  WEBGPU_OR_SKIP(d);
  wisp_backend *cpu = NULL, *gpu[NGEO] = {NULL};
  CHECKF(!wisp_cpu_backend_new(1, &cpu), "%s", wisp_last_error());
  int ok = 1;
  for (int g = 0; ok && g < NGEO; g++) ok = (gpu[g] = open_gpu(d, &k_geos[g])) != NULL;
  char err[600] = "";
  if (!ok) snprintf(err, sizeof err, "backend: %s", wisp_last_error());
  test_host_mat hs[NSHAPE];
  memset(hs, 0, sizeof hs);
  uint64_t seed = 31, tiled0 = 0, tiled1 = 0;
  wisp_wgpu_backend_stats st;
  if (ok && wisp_wgpu_backend_stats_get(gpu[0], &st)) tiled0 = st.tiled_products;
  double worst = 0;
  for (int si = 0; ok && si < NSHAPE; si++) {
    const shape *c = &k_shapes[si];
    ok = test_mat_make(&hs[si], c->type, c->rows, c->cols, &seed, 0) && !cpu->prepare_matrix(cpu, &hs[si].m);
    for (int g = 0; ok && g < NGEO; g++) ok = !gpu[g]->prepare_matrix(gpu[g], &hs[si].m); /* (unused ones too: cheap) */
    if (!ok) snprintf(err, sizeof err, "%s setup: %s", wisp_wtype_name(c->type), wisp_last_error());
    for (int ni = 0; ok && ni < NNS; ni++) {
      const int n = k_ns[ni], acc = ni % 2, x_row0 = ni % 3, xr = x_row0 + n;
      const size_t ny = (size_t)n * c->rows;
      float *x = malloc(sizeof(float) * (size_t)xr * c->cols), *y0 = malloc(sizeof(float) * ny);
      float *yc = malloc(sizeof(float) * ny), *yg = malloc(sizeof(float) * ny), *y1 = malloc(sizeof(float) * ny);
      ok = x && y0 && yc && yg && y1;
      for (size_t i = 0; ok && i < (size_t)xr * c->cols; i++) x[i] = test_rand_float(&seed);
      for (size_t i = 0; ok && i < ny; i++) y0[i] = test_rand_float(&seed);
      ok = ok && product(cpu, &hs[si].m, x, xr, x_row0, y0, n, acc, yc, err, sizeof err);
      /* the tile logic is the same for every type (wvec is the only part
       * that depends on it): the other geometries on Q4 only (lavapipe
       * compiles each pipeline for seconds) */
      const int ngeo = c->type == WISP_W_Q4 ? NGEO : 1;
      for (int g = 0; ok && g < ngeo; g++) {
        ok = product(gpu[g], &hs[si].m, x, xr, x_row0, y0, n, acc, g ? y1 : yg, err, sizeof err);
        for (size_t i = 0; ok && g && i < ny; i++)
          if (memcmp(&y1[i], &yg[i], sizeof(float))) {
            snprintf(err, sizeof err, "%s %dx%d n %d: output %zu is %.9g with tile %ux%u/%ux%u%s, %.9g by size",
                     wisp_wtype_name(c->type), c->rows, c->cols, n, i, y1[i], k_geos[g].tm, k_geos[g].tn, k_geos[g].rm,
                     k_geos[g].rn, k_geos[g].one_buffer ? " one buffer" : "", yg[i]);
            ok = 0;
          }
      }
      double mx = 0, e = 0;
      for (size_t i = 0; ok && i < ny; i++) {
        mx = fmax(mx, fabs(yc[i]));
        e = fmax(e, isnan(yg[i]) ? INFINITY : fabs((double)yg[i] - yc[i]));
      }
      if (ok && !(e <= TOL_TILE * mx)) {
        snprintf(err, sizeof err, "%s %dx%d n %d: %.3g of max|ref| from the CPU product (tol %g)",
                 wisp_wtype_name(c->type), c->rows, c->cols, n, e / mx, TOL_TILE);
        ok = 0;
      }
      if (ok) worst = fmax(worst, e / mx);
      free(x), free(y0), free(yc), free(yg), free(y1);
    }
  }
  if (ok && wisp_wgpu_backend_stats_get(gpu[0], &st)) tiled1 = st.tiled_products;
  for (int g = 0; g < NGEO; g++)
    if (gpu[g]) gpu[g]->destroy(gpu[g]);
  cpu->destroy(cpu);
  for (int si = 0; si < NSHAPE; si++) free(hs[si].a), free(hs[si].b), free(hs[si].c);
  CHECKF(ok, "%s", err);
  CHECKF(tiled1 - tiled0 == (uint64_t)NSHAPE * NNS, "%llu tiled products of %d", (unsigned long long)(tiled1 - tiled0),
         NSHAPE * NNS);
  printf("     tiled f32 products: %.3g of max|ref| from the CPU, the same bits under %d geometries\n", worst, NGEO);
}

/* A tile the kernel cannot take is refused when the backend is made. */
TEST(webgpu_matmul_tiles_bad_geometry_refused) {
  WEBGPU_OR_SKIP(d);
  const geo bad[] = {{64, 32, 3, 4, 0}, {256, 256, 1, 1, 0}};
  for (int i = 0; i < 2; i++) {
    wisp_backend *be = open_gpu(d, &bad[i]);
    CHECKF(!be, "tile %ux%u / %ux%u was accepted", bad[i].tm, bad[i].tn, bad[i].rm, bad[i].rn);
    CHECKF(strstr(wisp_last_error(), "geometry"), "%s", wisp_last_error());
  }
}
