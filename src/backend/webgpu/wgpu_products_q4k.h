/* Q4_K products of the WebGPU backend (wgpu_products_q4k.c), and the
 * consumers that fuse its held-back one-token product. */
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
/* As wisp_wgpu_q4k_matmul; with nx non-NULL the product reads rmsnorm(nx) * nw (eps) and
 * also writes it to nxo (== x): a held-back rmsnorm fused in. One-token products may be
 * held back for a consumer (swiglu, gated_deltanet, a greedy sample_id). */
void wisp_wgpu_q4k_matmul_ex(wisp_backend *be, const wisp_matrix *W, const wisp_buf *nx, WGPUBuffer nw, float eps,
                             const wisp_buf *nxo, const wisp_buf *x, int x_row0, int n, wisp_buf *y, int accumulate);
/* Records the held-back Q4_K product, if any (called by every op first). */
void wisp_wgpu_q4k_emit(wisp_backend *be);
/* Consumers of a held-back Q4_K product: 1 when they recorded the fused form. */
int wisp_wgpu_q4k_swiglu(wisp_backend *be, const wisp_buf *gu, int n, int ffn, wisp_buf *out);
/* 1 when a held-back gated op whose output is x (DeltaNet's split-head gated
 * norm, the gated attention merge) will be computed by the next Q4_K
 * product (by W of x into y) while it stages its input; that product must
 * follow (wisp_wgpu_q4k_matmul_ex). Call before emitting other pending ops. */
int wisp_wgpu_q4k_take_input(wisp_backend *be, const wisp_matrix *W, const wisp_buf *x, int x_row0, int n,
                              const wisp_buf *y);
int wisp_wgpu_q4k_head_argmax(wisp_backend *be, const wisp_buf *logits, int vocab, int greedy, const wisp_buf *ids);
/* Frees its state (destroy). */
void wisp_wgpu_q4k_free(wisp_backend *be);
/* A held-back Q4_K in_proj product of the one-token gated_deltanet a: one
 * product, or its [qkv | z | b | a] row ranges as separate products (the
 * plan's QKVZ / AB projection fusion off); nothing if none is held back. */
void wisp_wgpu_q4k_in_proj(wisp_backend *be, const wisp_deltanet_args *a);
/* Checks the plan's kernel choices for a Q4_K matrix (prepare_matrix). */
wisp_status wisp_wgpu_q4k_check_choice(const wisp_matrix *m);

#endif
