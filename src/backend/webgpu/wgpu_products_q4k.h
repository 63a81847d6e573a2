/* Q4_K products of the WebGPU backend (wgpu_products_q4k.c), and the
 * fused forms the graph's fused ops (wgpu_fused.c) record. */
#ifndef WISP_WGPU_PRODUCTS_Q4K_H
#define WISP_WGPU_PRODUCTS_Q4K_H

#include "backend/webgpu/wgpu_core.h"

/* y[t] (+)= W x[x_row0 + t] for a Q4_K matrix W. */
/* A batched step's Q4_K product (backend.h matmul_rows): each of the n
 * rows with the sums of the decode kernel's one-token product; several
 * rows through q4k_matvec_rows.wgsl, the weight read once per up to 8
 * rows. */
void wisp_wgpu_q4k_matmul_rows(wisp_backend *be, const wisp_matrix *W, const wisp_buf *x, int n, wisp_buf *y,
                               int accumulate);
void wisp_wgpu_q4k_matmul(wisp_backend *be, const wisp_matrix *W, const wisp_buf *x, int x_row0, int n, wisp_buf *y,
                          int accumulate);
/* A one-token Q4_K product y (+)= W x' for the graph's fused ops
 * (wgpu_fused.c): x' = x, or with nx non-NULL rmsnorm(nx) * nw (eps), also
 * written to nxo (== x). */
typedef struct {
  const wisp_matrix *W;
  const wisp_buf *nx, *nxo, *x;
  WGPUBuffer nw;
  float eps;
  wisp_buf *y;
} wisp_wgpu_q4k_one;
/* The product on its own (q4k_fused.wgsl with the norm, else the matrix's kernel). */
void wisp_wgpu_q4k_norm_matmul(wisp_backend *be, const wisp_wgpu_q4k_one *pd, int accumulate);
/* The [gate; up] product (rows 2 * ffn, one part) and its SwiGLU into out
 * in one q4k_fused dispatch (fusedFfnQ4K); 0 (nothing recorded) when it
 * does not fit. */
int wisp_wgpu_q4k_swiglu(wisp_backend *be, const wisp_wgpu_q4k_one *pd, int ffn, wisp_buf *out);
/* The head product with per-workgroup argmax pairs into g->amax (lmHeadArgmaxQ4K
 * geometry); 0 (nothing recorded) when it cannot. */
int wisp_wgpu_q4k_head_argmax(wisp_backend *be, const wisp_wgpu_q4k_one *pd, const wisp_buf *ids);
/* The in_proj product of the one-token gated_deltanet a (whose proj is
 * pd->y): one product, or its [qkv | z | b | a] row ranges as separate
 * products (the plan's QKVZ / AB projection fusion off). */
void wisp_wgpu_q4k_in_proj(wisp_backend *be, const wisp_wgpu_q4k_one *pd, const wisp_deltanet_args *a);
/* Whether a mixer's tail t (wisp_wgpu_tail kind 1 or 2, writing x) can be
 * computed by the one-token product by W of x into y while it stages its
 * input; wisp_wgpu_q4k_matvec_tail records that product. */
int wisp_wgpu_q4k_tail_fits(wisp_backend *be, const wisp_wgpu_tail *t, const wisp_matrix *W, const wisp_buf *x,
                            const wisp_buf *y);
void wisp_wgpu_q4k_matvec_tail(wisp_backend *be, const wisp_matrix *W, const wisp_buf *x, wisp_buf *y, int accumulate,
                               const wisp_wgpu_tail *t);
/* Frees its state (destroy). */
void wisp_wgpu_q4k_free(wisp_backend *be);
/* Checks the plan's kernel choices for a Q4_K matrix (prepare_matrix). */
wisp_status wisp_wgpu_q4k_check_choice(const wisp_matrix *m);

#endif
