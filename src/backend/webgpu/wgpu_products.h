/* Products of the WebGPU backend (wgpu_products.c): prepared matrices and
 * the one-token product the fused ops (wgpu_fused.c) build on (norm,
 * SwiGLU, merge inside it; SwiGLU pairs, argmax partials). */
#ifndef WISP_WGPU_PRODUCTS_H
#define WISP_WGPU_PRODUCTS_H

#include "backend/webgpu/wgpu_core.h"

/* The QT override constant of the weight kernels (embed, matvec, matmul):
 * 0 f32 (also BF16, widened at upload), 1 Q4, 2 Q4Z, 3 Q4_K (matmul only),
 * 4 F16, 5 Q8_0, 6 the other ggml block types (int8 values and a scale and
 * offset per 16 elements, split at upload: unpack_weights.wgsli), 7 Q6_K and
 * Q3_K (16 six-bit values and their scale in one vec4, packed at upload). */
static inline uint32_t qt_of(wisp_wtype t) {
  switch (t) {
    case WISP_W_F32: return 0;
    case WISP_W_Q4: return 1;
    case WISP_W_Q4Z: return 2;
    case WISP_W_Q4K: return 3;
    case WISP_W_F16: return 4;
    case WISP_W_Q8_0: return 5;
    case WISP_W_BF16: return 0;
    case WISP_W_Q6K:
    case WISP_W_Q3K: return 7;
    default: return 6;
  }
}

/* Types the fused in_proj + short conv (matvec_conv*.wgsl) reads. */
static inline int conv_fusable(const wmat *w) {
  return w->type == WISP_W_F32 || w->type == WISP_W_Q4 || w->type == WISP_W_Q4Z;
}


/* One-token product(s) y[t] (+)= W x'[t] for t < n (matvec.wgsl): x' = x,
 * or with pre an op fused in (1 rmsnorm, 2 swiglu: xin is that
 * op's input, nw its weights, xo its output, also the product's nominal
 * input; 3 the attention split merge over heads of hd dimensions from
 * `splits` partials). argmax: per-workgroup (max, index) pairs into
 * g->amax. pair_out: gate/up rows in pairs, SwiGLU into pair_out. */
void wisp_wgpu_rec_matvec(wgpu_backend *g, const wmat *w, int pre, const wisp_buf *xin, const wvec *nw, float eps,
                          const wisp_buf *xo, int x_row0, int n, wisp_buf *y, int accumulate, int argmax, int hd,
                          int splits, const wisp_buf *pair_out);
/* Whether a split merge over `heads` heads of `splits` partials fits the
 * product by w (matvec.wgsl PRE 3): subgroups, the input staged beside the
 * merge weights. */
int wisp_wgpu_merge_fits(const wgpu_backend *g, const wmat *w, int heads, int splits);
/* What a matrix with its plan choice tells the batched step's rule: *int8
 * set where its prefill product is the int8 one, *int8_q4k where that
 * matrix is also Q4_K (a matrix in row parts: each part). */
void wisp_wgpu_rows_note(const wisp_matrix *m, int *int8, int *int8_q4k);
/* The rows from which a batched step runs its products as a prefill (0:
 * never), by tuning rowsPrefill or else by what the model's matrices noted
 * (wisp_wgpu_rows_note); *why (if why) says which. */
int wisp_wgpu_rows_prefill_from(const wgpu_backend *g, int int8, int int8_q4k, const char **why);
/* backend.h's prepare_matrix, matmul, matmul_rows. */
void wisp_wgpu_products_install(wisp_backend *vt);

#endif
