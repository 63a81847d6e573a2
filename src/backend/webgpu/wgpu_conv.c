/* Short convolutions of the WebGPU backend (backend.h shortconv,
 * shortconv_rows): shortconv.wgsl, or with the in_proj product the graph
 * fused with it matvec_conv.wgsl (wgpu_fused.c); a batched step's rows by
 * shortconv_rows.wgsl. */
#include "backend/webgpu/wgpu_conv.h"

#include <string.h>

#include "backend/webgpu/wgpu_core.h"
#include "backend/webgpu/wgpu_products.h"
#include "util/err.h"

/* shortconv.wgsl: tokens per thread (its grid's y is ceil(n / this)). */
#define SHORTCONV_TT 16

void wisp_wgpu_rec_matvec_conv(wgpu_backend *g, const wmat *w, int pre, const wisp_buf *xin, const wvec *nw, float eps,
                               const wisp_buf *xo, wisp_buf *bcx, const wvec *tv, int L, int dim, wisp_buf *state,
                               wisp_buf *out) {
  /* matvec_conv.wgsl's own workgroup arrays: res, partial, inv_s */
  const uint32_t cl = wisp_wgpu_matvec_lanes(g, g->mv_wg);
  const uint64_t conv_own = ((uint64_t)g->conv_rows * (1 + cl / 4) + g->mv_wg / 4 + 1) * 4;
  wisp_wgpu_const c[6] = {{"WG", g->mv_wg}, {"ROWS", g->conv_rows}, {"QT", qt_of(w->type)},
                          {"LG", cl},       {"XN", wisp_wgpu_staged_vec4s(g, w->cols, conv_own)},
                          {"PF", g->prefetch == 1}};
  wisp_wgpu_kernel *k = wisp_wgpu_pipeline(g, g->sg ? "matvec_conv" : "matvec_conv_nosg", c, g->sg ? 6 : 3);
  struct {
    uint32_t rows, cols, y_off, x_off, acc;
    float eps;
    uint32_t dim, L, pre, pad[3];
  } p = {(uint32_t)w->rows, (uint32_t)w->cols, 0, 0, 0, eps, (uint32_t)dim, (uint32_t)L, (uint32_t)pre, {0, 0, 0}};
  wisp_wgpu_binding b[10];
  part_bindings(g, &w->parts[0], b);
  b[3] = whole(xin->g.b);
  b[4] = whole(bcx->g.b);
  b[5] = whole(pre == 1 ? nw->g.b : g->dummy.b);
  b[6] = whole(pre ? xo->g.b : g->dummy_rw.b);
  b[7] = whole(tv->g.b);
  b[8] = bind_of(state);
  b[9] = whole(out->g.b);
  uint32_t gx, gy;
  wisp_wgpu_grid(g->d, cdiv((uint64_t)dim, g->conv_rows / 3), &gx, &gy);
  wisp_wgpu_record(g, k, b, 10, &p, sizeof p, gx, gy);
}

static void g_shortconv(wisp_backend *be, const wisp_buf *bcx, const wisp_vector *taps, int L, int n, int dim,
                        wisp_buf *state, wisp_buf *out) {
  wgpu_backend *g = as_g(be);
  wisp_wgpu_state_op(be);
  wvec *tv = wisp_wgpu_need_vec(g, taps);
  if (!tv) return;
  if (L < 1) {
    wisp_wgpu_op_fail(g, WISP_EINVAL, "shortconv with %d taps", L);
    return;
  }
  if (L < 1 || L > 9) { /* shortconv.wgsl: MAXS 8 state taps */
    wisp_wgpu_op_fail(g, WISP_EUNSUPPORTED, "shortconv with %d taps (1 to 9 are supported)", L);
    return;
  }
  wisp_wgpu_const c[2] = {{"WG", 64}, {"TT", SHORTCONV_TT}};
  wisp_wgpu_kernel *k = wisp_wgpu_pipeline(g, "shortconv", c, 2);
  struct {
    uint32_t n, dim, L, pad;
  } p = {(uint32_t)n, (uint32_t)dim, (uint32_t)L, 0};
  wisp_wgpu_binding b[4] = {whole(bcx->g.b), whole(tv->g.b), bind_of(state), whole(out->g.b)};
  wisp_wgpu_record(g, k, b, 4, &p, sizeof p, cdiv((uint64_t)dim, 64), cdiv((uint64_t)n, SHORTCONV_TT));
}

/* shortconv_rows.wgsl: every row's conv (shortconv.wgsl's arithmetic for
 * one token) on its own slot's state, a dispatch per device buffer the
 * slots' states lie in (one for a session's slots). */
static int g_shortconv_rows(wisp_backend *be, const wisp_buf *bcx, const wisp_vector *taps, int L, int dim,
                            const wisp_mixer_rows *rows, wisp_buf *out) {
  wgpu_backend *g = as_g(be);
  if (L < 1 || L > 9 || rows->n < 1 || rows->n > WISP_WGPU_MIX_ROWS) return 0; /* the one-token op says why */
  wisp_wgpu_state_op(be);
  wvec *tv = wisp_wgpu_need_vec(g, taps);
  if (!tv) return 1; /* error kept */
  wisp_wgpu_const c[1] = {{"WG", 64}};
  wisp_wgpu_kernel *k = wisp_wgpu_pipeline(g, "shortconv_rows", c, 1);
  struct {
    uint32_t dim, L, count, pad;
    uint32_t rows[WISP_WGPU_MIX_ROWS][4];
  } p;
  unsigned char done[WISP_WGPU_MIX_ROWS] = {0};
  WGPUBuffer sb, none;
  memset(&p, 0, sizeof p);
  while ((p.count = wisp_wgpu_rows_group(rows, done, p.rows, &sb, &none)) > 0) {
    p.dim = (uint32_t)dim;
    p.L = (uint32_t)L;
    wisp_wgpu_binding b[4] = {whole(bcx->g.b), whole(tv->g.b), whole(sb), whole(out->g.b)};
    wisp_wgpu_record(g, k, b, 4, &p, sizeof p, cdiv((uint64_t)dim, 64), p.count);
  }
  return 1;
}

void wisp_wgpu_conv_install(wisp_backend *vt) {
  vt->shortconv = g_shortconv;
  vt->shortconv_rows = g_shortconv_rows;
}
