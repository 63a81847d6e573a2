/* The row ops of the CPU backend (backend.h geglu, add_bias, add, scale):
 * elementwise work over activation rows, plain loops in f32 (GeGLU's tanh
 * through the kernel set). They are cheap beside the products, so they run
 * on the calling thread. */

#include "backend/cpu/cpu_internal.h"

/* GeGLU: the kernel set's geglu_f32 (cpu_kernels.h) a token at a time */
static void cpu_geglu(wisp_backend *be, const wisp_buf *gu, int n, int ffn, wisp_buf *out) {
  cpu_backend *c = as_cpu(be);
  double t0 = op_start(c);
  for (int t = 0; t < n; t++) {
    const float *g = gu->data + (size_t)t * 2 * ffn, *u = g + ffn;
    c->k->geglu_f32(out->data + (size_t)t * ffn, g, u, ffn);
  }
  op_stop(c, OP_SWIGLU, t0);
}

static void cpu_add_bias(wisp_backend *be, wisp_buf *x, const wisp_vector *b, int n) {
  cpu_backend *c = as_cpu(be);
  double t0 = op_start(c);
  for (int t = 0; t < n; t++) {
    float *r = x->data + (size_t)t * b->n;
    for (int i = 0; i < b->n; i++) r[i] += b->data[i];
  }
  op_stop(c, OP_OTHER, t0);
}

static void cpu_add(wisp_backend *be, wisp_buf *x, const wisp_buf *y, size_t count) {
  cpu_backend *c = as_cpu(be);
  double t0 = op_start(c);
  for (size_t i = 0; i < count; i++) x->data[i] += y->data[i];
  op_stop(c, OP_OTHER, t0);
}

static void cpu_scale(wisp_backend *be, wisp_buf *x, size_t count, float s) {
  cpu_backend *c = as_cpu(be);
  double t0 = op_start(c);
  for (size_t i = 0; i < count; i++) x->data[i] *= s;
  op_stop(c, OP_OTHER, t0);
}

void wisp_cpu_rowops_install(wisp_backend *be) {
  be->geglu = cpu_geglu;
  be->add_bias = cpu_add_bias;
  be->add = cpu_add;
  be->scale = cpu_scale;
}
