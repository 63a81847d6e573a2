/* The graph's fused ops on the WebGPU backend (backend.h matmul_fused): a
 * one-token product with the ops the session's step graph fused into it.
 * The graph pass decides which neighbours go together (model/graph_fuse.c,
 * kept by the plan where this backend's caps name the fusion); this file
 * only picks, for the weight type and shapes at hand, the kernel that
 * computes them together:
 *   before the product: an rmsnorm or a SwiGLU (matvec.wgsl PRE 1 / 2; for
 *     Q4_K the norm inside q4k_fused.wgsl), a mixer's last step (the
 *     attention split merge, matvec.wgsl PRE 3; the gated merge or
 *     DeltaNet's gated norm over split heads, q4k_matvec.wgsl PRE);
 *   after it: a SwiGLU (matvec.wgsl PAIR, q4k_fused.wgsl pairs), the short
 *     conv (matvec_conv.wgsl), the greedy choice (argmax partials from the
 *     product, sample.wgsl over them), a DeltaNet in_proj by row ranges.
 * Where a kernel cannot take a pair here (a binding or memory limit, a
 * weight type, buffers that alias), the ops are recorded one after the
 * other: the same results, more dispatches. */
#include "backend/webgpu/wgpu_fused.h"

#include "backend/webgpu/wgpu_attention.h"
#include "backend/webgpu/wgpu_attention_gated.h"
#include "backend/webgpu/wgpu_conv.h"
#include "backend/webgpu/wgpu_core.h"
#include "backend/webgpu/wgpu_deltanet.h"
#include "backend/webgpu/wgpu_elementwise.h"
#include "backend/webgpu/wgpu_products.h"
#include "backend/webgpu/wgpu_products_i8.h"
#include "backend/webgpu/wgpu_products_q4k.h"
#include "backend/webgpu/wgpu_sampling.h"
#include "format/quant.h"

/* Whether the rmsnorm / SwiGLU before the product can be computed by it:
 * whole vec4s, the op's input not its output, its width the product's
 * columns, neither buffer the product's output. */
static int pre_fits(const wisp_fused_matmul *f) {
  return f->pre_dim % 4 == 0 && f->pre_in != f->x && f->W->cols == f->pre_dim && f->pre_in != f->y && f->x != f->y;
}

/* The greedy choice over the product's argmax partials (parts: the
 * product wrote them without an error), into ids[slot]. */
static void sample_parts(wgpu_backend *g, const wisp_fused_matmul *f) {
  const int parts = !g->error;
  g->stats.argmax_fused += (uint64_t)parts;
  wisp_wgpu_rec_sample(g, f->y, f->W->rows, parts, f->sampling, f->step, f->ids, f->slot);
}

/* f32, F16, Q4, Q4Z, Q8_0, ... products: matvec.wgsl (matvec_conv.wgsl with the short conv). */
static int matvec_group(wisp_backend *be, const wisp_fused_matmul *f, wisp_wgpu_tail *tail) {
  wgpu_backend *g = as_g(be);
  const wisp_matrix *W = f->W;
  const wisp_buf *x = f->x, *xin = x;
  wisp_buf *y = f->y;
  int pre = 0, merge_hd = 0, merge_splits = 0;
  wvec *nw = NULL;
  float eps = 0;
  if (f->pre == WISP_PRE_RMSNORM || f->pre == WISP_PRE_SWIGLU) {
    if (f->pre == WISP_PRE_RMSNORM && !(nw = wisp_wgpu_need_vec(g, f->norm))) return 0;
    if (pre_fits(f)) {
      pre = f->pre == WISP_PRE_RMSNORM ? 1 : 2;
      xin = f->pre_in;
      eps = f->eps;
    } else if (nw) {
      wisp_wgpu_rec_rmsnorm(g, f->pre_in, nw, f->eps, 1, f->pre_dim, (wisp_buf *)x);
      nw = NULL;
    } else {
      wisp_wgpu_rec_swiglu(g, f->pre_in, 1, f->pre_dim, (wisp_buf *)x);
    }
  }
  if (tail->kind == 3 && tail->out == x && x != y && W->cols == tail->heads * tail->hd) {
    pre = 3; /* the attention's split merge inside the product */
    merge_hd = tail->hd;
    merge_splits = tail->splits;
  } else if (tail->kind) {
    tail->emit(be, tail);
  }
  wmat *w = wisp_wgpu_need_mat(g, W);
  if (!w) return 0;
  if (pre == 3 && !wisp_wgpu_merge_fits(g, w, W->cols / merge_hd, merge_splits)) { /* not staged: merge first */
    tail->emit(be, tail);
    pre = 0;
  }
  if (!pre && wisp_wgpu_mm8_matmul(be, W, x, 0, 1, y, f->accumulate)) return 0; /* Q4 x int8 (wgpu_products_i8.c) */
  if (w->cols % 4) { /* x is read as vec4 rows */
    wisp_wgpu_op_fail(g, WISP_EUNSUPPORTED, "matmul with an f32 matrix of %d columns (a multiple of 4 is needed)", w->cols);
    return 0;
  }
  /* an op after the product: only behind a product that overwrites y from x alone */
  const int own = !f->accumulate && x != y && !g->error && pre != 3;
  if (own && f->post == WISP_POST_SHORTCONV) {
    wisp_buf *out = f->post_out, *state = f->conv_state;
    wvec *tv = wisp_wgpu_find_vec(g, f->taps);
    if (w->nparts == 1 && conv_fusable(w) && tv && f->conv_len >= 1 && w->rows == 3 * f->post_dim && out != y &&
        state != y && out != state && out != x && state != x) {
      wisp_wgpu_state_op(be);
      wisp_wgpu_rec_matvec_conv(g, w, pre, xin, nw, eps, x, y, tv, f->conv_len, f->post_dim, state, out);
      return 1;
    }
  }
  if (own && f->post == WISP_POST_SWIGLU && g->sg && w->rows == 2 * f->post_dim && w->nparts == 1 &&
      f->post_out != y && f->post_out != x && f->post_out != xin) {
    wisp_wgpu_rec_matvec(g, w, pre, xin, nw, eps, x, 0, 1, y, 0, 0, 0, 0, f->post_out);
    return 1;
  }
  if (own && f->post == WISP_POST_ARGMAX && f->sampling->temperature <= 0 && y != f->ids && x != f->ids &&
      xin != f->ids) {
    wisp_wgpu_rec_matvec(g, w, pre, xin, nw, eps, x, 0, 1, y, 0, 1, 0, 0, NULL);
    sample_parts(g, f);
    return 1;
  }
  wisp_wgpu_rec_matvec(g, w, pre, xin, nw, eps, x, 0, 1, y, f->accumulate, 0, merge_hd, merge_splits, NULL);
  return 0;
}

/* Q4_K products: q4k_fused.wgsl with the norm, the SwiGLU pairs, the
 * argmax or the row ranges; q4k_matvec.wgsl with a mixer's tail. */
static int q4k_group(wisp_backend *be, const wisp_fused_matmul *f, wisp_wgpu_tail *tail) {
  wgpu_backend *g = as_g(be);
  const wisp_matrix *W = f->W;
  if (tail->kind) {
    if (wisp_wgpu_q4k_tail_fits(be, tail, W, f->x, f->y)) {
      wisp_wgpu_q4k_matvec_tail(be, W, f->x, f->y, f->accumulate, tail);
      return 0;
    }
    tail->emit(be, tail); /* the plain merge (kind 3) too: Q4_K products take no PRE 3 */
  }
  wisp_wgpu_q4k_one pd = {W, NULL, NULL, f->x, NULL, 0, f->y};
  if (f->pre == WISP_PRE_RMSNORM) {
    wvec *nw = wisp_wgpu_need_vec(g, f->norm);
    if (!nw) return 0;
    if (pre_fits(f)) pd = (wisp_wgpu_q4k_one){W, f->pre_in, f->x, f->x, nw->g.b, f->eps, f->y};
    else wisp_wgpu_rec_rmsnorm(g, f->pre_in, nw, f->eps, 1, f->pre_dim, (wisp_buf *)f->x);
  } else if (f->pre == WISP_PRE_SWIGLU) { /* no Q4_K kernel takes a SwiGLU input */
    wisp_wgpu_rec_swiglu(g, f->pre_in, 1, f->pre_dim, (wisp_buf *)f->x);
  }
  const int own = !f->accumulate && !g->error;
  if (own && f->post == WISP_POST_SWIGLU && wisp_wgpu_q4k_swiglu(be, &pd, f->post_dim, f->post_out)) return 1;
  if (own && f->post == WISP_POST_ARGMAX && f->sampling->temperature <= 0 && wisp_wgpu_q4k_head_argmax(be, &pd, f->ids)) {
    sample_parts(g, f);
    return 1;
  }
  if (own && f->post == WISP_POST_DELTANET) {
    wisp_wgpu_q4k_in_proj(be, &pd, f->deltanet_post);
    return 0; /* the DeltaNet itself is the caller's next op */
  }
  wisp_wgpu_q4k_norm_matmul(be, &pd, f->accumulate);
  return 0;
}

/* A product by a matrix in row parts of different types (format/tensor.h) with the rmsnorm
 * before it, the one op the graph pass fuses into one (model/graph_fuse.c):
 * the norm inside the first part's product, which writes x as the norm op
 * would; the other parts read it. */
static int parted_group(wisp_backend *be, const wisp_fused_matmul *f) {
  if (f->pre != WISP_PRE_RMSNORM || f->post != WISP_POST_NONE) {
    wisp_wgpu_op_fail(as_g(be), WISP_EINVAL, "a fused op with a %dx%d matrix in row parts", f->W->rows, f->W->cols);
    return 0;
  }
  wisp_fused_matmul first = *f;
  first.W = &f->W->parts[0];
  if (first.W->type == WISP_W_Q4K) q4k_group(be, &first, &(wisp_wgpu_tail){0});
  else matvec_group(be, &first, &(wisp_wgpu_tail){0});
  for (int i = 1; i < f->W->n_parts; i++) be->matmul(be, &f->W->parts[i], f->x, 0, 1, f->y, f->accumulate);
  return 0;
}

static int g_matmul_fused(wisp_backend *be, const wisp_fused_matmul *f) {
  if (wisp_matrix_mixed(f->W)) return parted_group(be, f);
  /* a mixer before the product runs first; its last step may be left to the product */
  wisp_wgpu_tail tail = {0};
  if (f->pre == WISP_PRE_ATTENTION) wisp_wgpu_attention_rec(be, f->attention, &tail);
  else if (f->pre == WISP_PRE_ATTENTION_GATED) wisp_wgpu_attention_gated_rec(be, f->attention_gated, &tail);
  else if (f->pre == WISP_PRE_DELTANET) wisp_wgpu_deltanet_rec(be, f->deltanet_pre, &tail);
  return f->W->type == WISP_W_Q4K ? q4k_group(be, f, &tail) : matvec_group(be, f, &tail);
}

void wisp_wgpu_fused_install(wisp_backend *vt) { vt->matmul_fused = g_matmul_fused; }
