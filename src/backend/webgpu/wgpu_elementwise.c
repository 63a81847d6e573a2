/* Norms and elementwise ops of the WebGPU backend (backend.h embed,
 * embed_id, rmsnorm, swiglu). Where the graph fuses a norm or a SwiGLU
 * into a product, the product computes it (wgpu_fused.c). */
#include "backend/webgpu/wgpu_elementwise.h"
#include "backend/webgpu/wgpu_products_i8.h"

#include <string.h>

#include "backend/webgpu/wgpu_core.h"
#include "backend/webgpu/wgpu_products.h"

#define EMBED_TOKENS 64 /* tokens of one embed dispatch (embed.wgsl's parameter block) */

static void g_embed(wisp_backend *be, const wisp_matrix *E, const int32_t *tokens, int n, wisp_buf *out) {
  wgpu_backend *g = as_g(be);
  wmat *w = wisp_wgpu_need_mat(g, E);
  if (!w) return;
  wisp_wgpu_const c[3] = {{"WG", 64}, {"QT", qt_of(w->type)}, {"FROM_IDS", 0}};
  wisp_wgpu_kernel *k = wisp_wgpu_pipeline(g, "embed", c, 3);
  struct {
    uint32_t n, cols, row0, rows, out_off, pad[3];
    uint32_t tok[EMBED_TOKENS];
  } p;
  for (int t0 = 0; t0 < n; t0 += EMBED_TOKENS) {
    int cnt = n - t0 < EMBED_TOKENS ? n - t0 : EMBED_TOKENS;
    memset(&p, 0, sizeof p);
    p.n = (uint32_t)cnt;
    p.cols = (uint32_t)w->cols;
    p.out_off = (uint32_t)((size_t)t0 * w->cols);
    for (int i = 0; i < cnt; i++) p.tok[i] = (uint32_t)tokens[t0 + i];
    for (int q = 0; q < w->nparts; q++) {
      const wmat_part *P = &w->parts[q];
      p.row0 = (uint32_t)P->row0;
      p.rows = (uint32_t)P->rows;
      wisp_wgpu_binding b[5];
      part_bindings(g, P, b);
      b[3] = whole(out->g.b);
      b[4] = whole(g->dummy.b);
      wisp_wgpu_record(g, k, b, 5, &p, sizeof p, cdiv((uint64_t)w->cols, 64), (uint32_t)cnt);
    }
  }
}

void wisp_wgpu_rec_rmsnorm(wgpu_backend *g, const wisp_buf *x, const wvec *w, float eps, int n, int dim, wisp_buf *out) {
  wisp_wgpu_const c[1] = {{"WG", 256}};
  wisp_wgpu_kernel *k = wisp_wgpu_pipeline(g, g->sg ? "rmsnorm" : "rmsnorm_nosg", c, 1);
  struct {
    uint32_t rows, n;
    float eps;
    uint32_t pad;
  } p = {(uint32_t)n, (uint32_t)dim, eps, 0};
  wisp_wgpu_binding b[3] = {whole(x->g.b), whole(w->g.b), whole(out->g.b)};
  uint32_t gx, gy;
  wisp_wgpu_grid(g->d, (uint32_t)n, &gx, &gy);
  wisp_wgpu_record(g, k, b, 3, &p, sizeof p, gx, gy);
}

void wisp_wgpu_rec_swiglu(wgpu_backend *g, const wisp_buf *gu, int n, int ffn, wisp_buf *out) {
  wisp_wgpu_const c[1] = {{"WG", 256}};
  wisp_wgpu_kernel *k = wisp_wgpu_pipeline(g, "swiglu", c, 1);
  struct {
    uint32_t n, ffn, pad[2];
  } p = {(uint32_t)n, (uint32_t)ffn, {0, 0}};
  wisp_wgpu_binding b[2] = {whole(gu->g.b), whole(out->g.b)};
  uint32_t gx, gy;
  wisp_wgpu_grid(g->d, cdiv((uint64_t)n * ffn, 256), &gx, &gy);
  wisp_wgpu_record(g, k, b, 2, &p, sizeof p, gx, gy);
}

static void g_rmsnorm(wisp_backend *be, const wisp_buf *x, const wisp_vector *wv, float eps, int n, int dim,
                      wisp_buf *out) {
  wgpu_backend *g = as_g(be);
  wvec *w = wisp_wgpu_need_vec(g, wv);
  if (!w) return;
  /* a batched step's norm before int8 products: its output quantized too */
  if (!wisp_wgpu_mv8_rmsnorm(be, x, w, eps, n, dim, out)) wisp_wgpu_rec_rmsnorm(g, x, w, eps, n, dim, out);
}

static void g_swiglu(wisp_backend *be, const wisp_buf *gu, int n, int ffn, wisp_buf *out) {
  if (!wisp_wgpu_mv8_swiglu(be, gu, n, ffn, out)) wisp_wgpu_rec_swiglu(as_g(be), gu, n, ffn, out);
}

static void g_embed_id(wisp_backend *be, const wisp_matrix *E, const wisp_buf *ids, int slot, wisp_buf *out) {
  wgpu_backend *g = as_g(be);
  wmat *w = wisp_wgpu_need_mat(g, E);
  if (!w) return;
  wisp_wgpu_const c[3] = {{"WG", 64}, {"QT", qt_of(w->type)}, {"FROM_IDS", 1}};
  wisp_wgpu_kernel *k = wisp_wgpu_pipeline(g, "embed", c, 3);
  struct {
    uint32_t n, cols, row0, rows, out_off, slot, pad[2];
    uint32_t tok[EMBED_TOKENS];
  } p;
  memset(&p, 0, sizeof p);
  p.n = 1;
  p.cols = (uint32_t)w->cols;
  p.slot = (uint32_t)slot;
  for (int q = 0; q < w->nparts; q++) { /* each part writes the row only if it holds the token */
    const wmat_part *P = &w->parts[q];
    p.row0 = (uint32_t)P->row0;
    p.rows = (uint32_t)P->rows;
    wisp_wgpu_binding b[5];
    part_bindings(g, P, b);
    b[3] = whole(out->g.b);
    b[4] = whole(ids->g.b);
    wisp_wgpu_record(g, k, b, 5, &p, sizeof p, cdiv((uint64_t)w->cols, 64), 1);
  }
}

void wisp_wgpu_elementwise_install(wisp_backend *vt) {
  vt->embed = g_embed;
  vt->embed_id = g_embed_id;
  vt->rmsnorm = g_rmsnorm;
  vt->swiglu = g_swiglu;
}
