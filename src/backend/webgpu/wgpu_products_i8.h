/* The integer prefill product of the WebGPU backend (wgpu_products_i8.c):
 * Q4, Q4Z, Q4_K and Q8_0 weights x int8 activations. */
#ifndef WISP_WGPU_PRODUCTS_I8_H
#define WISP_WGPU_PRODUCTS_I8_H

#include <stdint.h>

#include "backend/backend.h"
#include "backend/webgpu/wgpu_core.h" /* wvec */

/* Whether the integer product takes an n-token product by W: a Q4/Q4Z
 * (variant wgsl_tiled_q4_i8), Q4_K (wgsl_tiled_q4k_i8) or Q8_0
 * (wgsl_tiled_q8_0_i8) matrix whose plan chose that prefill variant (the
 * throughput profiles' rule), or the path forced (tuning i8=1); n >= the
 * minimum (tuning i8MinN, default 2). */
/* 1 when the plan gives W's prefill product to the int8 kernel (its
 * prefill variant is the int8 one for W's type), whatever the mode. */
int wisp_wgpu_mm8_planned(const wisp_matrix *W);

int wisp_wgpu_mm8_takes(wisp_backend *be, const wisp_matrix *W, int n);
/* The integer prefill product (quant_x8.wgsl + matmul_i8.wgsl). Records
 * y[t] (+)= W x[x_row0 + t] and returns 1 when wisp_wgpu_mm8_takes, else 0
 * (nothing recorded). */
int wisp_wgpu_mm8_matmul(wisp_backend *be, const wisp_matrix *W, const wisp_buf *x, int x_row0, int n, wisp_buf *y,
                         int accumulate);
/* The batched step's integer product (quant_x8.wgsl +
 * matvec_i8_rows.wgsl): records y[t] (+)= W x[t] for t < n and returns 1
 * where the plan gives products to the int8 kernel (or the path is
 * forced: mode 2), W is Q4/Q4Z/Q4_K/Q8_0 and n is within the rows it takes
 * (tuning rowsI8=MINxMAX; default 1x16); else 0, nothing recorded. A row's
 * sums do not depend on n or on the other rows. */
int wisp_wgpu_mv8_rows(wisp_backend *be, const wisp_matrix *W, const wisp_buf *x, int n, wisp_buf *y, int accumulate);
/* Whether a step of n rows is in its range and the plan (or mode 2) gives
 * it: a matrix of parts of several types then goes part by part. */
int wisp_wgpu_mv8_wants(wisp_backend *be, int n);
/* The rows it takes (*lo..*hi; both 0: none), for `wisp plan`. */
void wisp_wgpu_mv8_range(wisp_backend *be, int *lo, int *hi);
/* Products recorded by wisp_wgpu_mv8_rows so far (tests). */
uint64_t wisp_wgpu_mv8_count(wisp_backend *be);
/* A batched step's RMSNorm (x's n rows of dim, weights w) and SwiGLU (gu's
 * n rows of 2 * ffn) where its products take int8 rows: recorded with their
 * output's int8 quantization in the same dispatch (rmsnorm_q8.wgsl,
 * swiglu_q8.wgsl; the next products reuse it) and 1 returned; else 0,
 * nothing recorded (tuning rowsI8Fuse=0: never). */
int wisp_wgpu_mv8_rmsnorm(wisp_backend *be, const wisp_buf *x, const wvec *w, float eps, int n, int dim,
                          wisp_buf *out);
int wisp_wgpu_mv8_swiglu(wisp_backend *be, const wisp_buf *gu, int n, int ffn, wisp_buf *out);
/* Inputs quantized that way so far (tests). */
uint64_t wisp_wgpu_mv8_fused_count(wisp_backend *be);
void wisp_wgpu_mm8_free(wisp_backend *be);
/* Settings of the product (tests, tuning); fields of 0 keep the current
 * value. Defaults, then the backend options (tuning matmulI8=TMxTNxRMxRNxKB,
 * i8=0|1 (mode), i8MinN=N, i8Fuseq=1), taken at first use. */
typedef struct {
  int mode;                       /* 0 keep, 1 the plan decides, 2 always (Q4/Q4Z/Q4_K/Q8_0), 3 never */
  uint32_t tm, tn, rm, rn, kb;    /* geometry */
  int min_n;                      /* fewest tokens that take this path */
  int fuseq;                      /* 1: the product quantizes its own tiles (no quantize dispatch), -1: not */
  int rows_min, rows_max;         /* wisp_wgpu_mv8_rows: steps of rows_min..rows_max rows (rows_max -1: never) */
  uint32_t rows_rpl;              /* its weight rows a lane group (1..8) */
  int rows_fuse;                  /* 1: its inputs quantized by the norm / SwiGLU writing them, -1: not */
} wisp_wgpu_mm8_opts;
wisp_status wisp_wgpu_mm8_configure(wisp_backend *be, const wisp_wgpu_mm8_opts *o);
/* Reads back the last quantized activations (n tokens of cols): q[n*cols]
 * int8, d[n*cols/32] scales (tests). */
wisp_status wisp_wgpu_mm8_read_quantized(wisp_backend *be, int n, int cols, int8_t *q, float *d);
/* Products and input quantizations recorded by this path so far. */
void wisp_wgpu_mm8_counts(wisp_backend *be, uint64_t *products, uint64_t *quantizations);

/* The integer product's geometry (TM, TN, RM, RN, KB; zeros when out of
 * memory) and the token tile of products of fewer than 2 * TN tokens
 * (*small_tn: TN, or its half where the kernel takes it). */
void wisp_wgpu_mm8_geometry(wisp_backend *be, uint32_t g[5], uint32_t *small_tn);


#endif
