/* The row ops of the CPU backend (backend.h geglu, add_bias, add, scale):
 * elementwise work over activation rows, plain loops in f32. They are
 * cheap beside the products, so they run on the calling thread; tanhf is
 * the C library's, which is what a reference of this op computes too. */
#include <math.h>

#include "backend/cpu/cpu_internal.h"

/* gelu with the tanh approximation, as PyTorch's gelu(approximate="tanh")
 * and ggml's gelu compute it. */
static float gelu_tanh(float g) {
  const float k = 0.7978845608028654f; /* sqrt(2 / pi) */
  return 0.5f * g * (1.0f + tanhf(k * (g + 0.044715f * g * g * g)));
}

static void cpu_geglu(wisp_backend *be, const wisp_buf *gu, int n, int ffn, wisp_buf *out) {
  cpu_backend *c = as_cpu(be);
  double t0 = op_start(c);
  for (int t = 0; t < n; t++) {
    const float *g = gu->data + (size_t)t * 2 * ffn, *u = g + ffn;
    float *o = out->data + (size_t)t * ffn;
    for (int i = 0; i < ffn; i++) o[i] = gelu_tanh(g[i]) * u[i];
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
