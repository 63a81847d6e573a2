/* Elementwise row ops of the WebGPU backend (backend.h geglu, add_bias,
 * add, scale): one dispatch of rowops.wgsl each, one thread per value. */
#include "backend/webgpu/wgpu_rowops.h"

#include "backend/webgpu/wgpu_core.h"

enum { OP_GEGLU = 0, OP_ADD_BIAS = 1, OP_ADD = 2, OP_SCALE = 3 };

static void rec(wgpu_backend *g, int op, wisp_wgpu_binding x, wisp_wgpu_binding y, size_t count, int cols, float s) {
  if (count == 0) return;
  wisp_wgpu_const c[2] = {{"WG", 256}, {"OP", op}};
  wisp_wgpu_kernel *k = wisp_wgpu_pipeline(g, "rowops", c, 2);
  struct {
    uint32_t count, cols;
    float s;
    uint32_t pad;
  } p = {(uint32_t)count, (uint32_t)cols, s, 0};
  wisp_wgpu_binding b[2] = {x, y};
  uint32_t gx, gy;
  wisp_wgpu_grid(g->d, cdiv((uint64_t)count, 256), &gx, &gy);
  wisp_wgpu_record(g, k, b, 2, &p, sizeof p, gx, gy);
}

static void g_geglu(wisp_backend *be, const wisp_buf *gu, int n, int ffn, wisp_buf *out) {
  wgpu_backend *g = as_g(be);
  rec(g, OP_GEGLU, bind_of(out), bind_of(gu), (size_t)n * ffn, ffn, 0);
}

static void g_add_bias(wisp_backend *be, wisp_buf *x, const wisp_vector *bv, int n) {
  wgpu_backend *g = as_g(be);
  wvec *w = wisp_wgpu_need_vec(g, bv);
  if (!w) return;
  rec(g, OP_ADD_BIAS, bind_of(x), whole(w->g.b), (size_t)n * bv->n, bv->n, 0);
}

static void g_add(wisp_backend *be, wisp_buf *x, const wisp_buf *y, size_t count) {
  wgpu_backend *g = as_g(be);
  rec(g, OP_ADD, bind_of(x), bind_of(y), count, 1, 0);
}

static void g_scale(wisp_backend *be, wisp_buf *x, size_t count, float s) {
  wgpu_backend *g = as_g(be);
  rec(g, OP_SCALE, bind_of(x), whole(g->dummy.b), count, 1, s);
}

void wisp_wgpu_rowops_install(wisp_backend *vt) {
  vt->geglu = g_geglu;
  vt->add_bias = g_add_bias;
  vt->add = g_add;
  vt->scale = g_scale;
}
