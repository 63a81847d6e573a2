/* The f32-activation prefill product of the WebGPU backend
 * (wgpu_products_tiled.c): matmul.wgsl for every weight type. */
#ifndef WISP_WGPU_PRODUCTS_TILED_H
#define WISP_WGPU_PRODUCTS_TILED_H

#include "backend/webgpu/wgpu_core.h"

/* The tile of an n-token product by a matrix of `rows` rows: TM x TN
 * outputs a workgroup, RM x RN a thread, DB 1 with double-buffered
 * workgroup memory. By size: 64x64 with 4x4 register tiles for products
 * of at least 256 tokens and 128 rows, 64x32 with 4x4 for smaller ones;
 * tuning matmul=TMxTN sets the tile (4x4 a thread), matmulTile=RMxRN the
 * register tile; DB where the workgroup memory allows. The geometry never
 * changes a result's bits. */
typedef struct {
  uint32_t tm, tn, rm, rn, db;
} wisp_wgpu_tile;
wisp_wgpu_tile wisp_wgpu_matmul_tile(const wgpu_backend *g, int rows, int n);
/* Whether a tile fits the kernel (RM, RN <= 8 dividing TM, TN; at most 8
 * vec4 loads of each operand a thread and stage) and the device. */
int wisp_wgpu_matmul_tile_ok(const wgpu_backend *g, const wisp_wgpu_tile *t);
/* y[t] (+)= W x[x_row0 + t] for t < n (cols % 32 == 0) through matmul.wgsl
 * with the weight's QT, a binding part at a time. */
void wisp_wgpu_rec_matmul_tiled(wgpu_backend *g, const wisp_matrix *W, uint32_t qt, const wisp_buf *x, int x_row0,
                                int n, wisp_buf *y, int accumulate);

#endif
