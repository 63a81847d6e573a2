/* wisp's WGSL kernels with their host side: pipeline constructors that pick
 * the subgroup or plain variant and set the geometry through override
 * constants, and "ops" (a kernel + bind group + parameter block + grid) that
 * are recorded into a batch.
 *
 *   wisp_wgpu_kernel *k;
 *   wisp_wgpu_q4_matvec_kernel(d, 64, 4, -1, &k);            // auto: subgroups if present
 *   wisp_wgpu_op op;
 *   wisp_wgpu_q4_matvec_op(d, k, qbind, sbind, xbind, ybind, rows, cols, &op);
 *   wisp_wgpu_batch_begin(d, &b); wisp_wgpu_op_record(&b, &op); wisp_wgpu_batch_submit(&b);
 *   wisp_wgpu_op_free(d, &op); wisp_wgpu_kernel_free(d, k);
 *
 * Weight layout (symmetric Q4, block 32) is described in kernels/q4_matvec.wgsl.
 * Bindings may be sub-ranges of larger buffers (offset aligned to the
 * device's minStorageBufferOffsetAlignment): that is how a matrix larger than
 * maxStorageBufferBindingSize is split into row ranges. */
#ifndef WISP_WGPU_KERNELS_H
#define WISP_WGPU_KERNELS_H

#include "backend/webgpu/wgpu_compute.h"

typedef struct wisp_wgpu_op {
  const wisp_wgpu_kernel *k;
  WGPUBindGroup group;
  wisp_wgpu_buf params; /* uniform parameter block */
  uint32_t gx, gy;      /* grid */
} wisp_wgpu_op;

/* subgroups: 1 = subgroup variant (fails without the feature), 0 = plain,
 * -1 = subgroup variant when the device has the feature. */
wisp_status wisp_wgpu_q4_matvec_kernel(wisp_wgpu_device *d, uint32_t wg, uint32_t rows_per_wg, int subgroups,
                                       wisp_wgpu_kernel **out);
/* y[0..rows) = W x with W rows x cols (cols % 32 == 0). quant holds
 * rows*cols/2 bytes, scales rows*cols/32 floats, x cols floats. */
wisp_status wisp_wgpu_q4_matvec_op(wisp_wgpu_device *d, const wisp_wgpu_kernel *k, wisp_wgpu_binding quant,
                                   wisp_wgpu_binding scales, wisp_wgpu_binding x, wisp_wgpu_binding y,
                                   uint32_t rows, uint32_t cols, wisp_wgpu_op *out);

wisp_status wisp_wgpu_rmsnorm_kernel(wisp_wgpu_device *d, uint32_t wg, int subgroups, wisp_wgpu_kernel **out);
/* y[r][i] = x[r][i] * w[i] / sqrt(mean(x[r]^2) + eps) for `rows` rows of n. */
wisp_status wisp_wgpu_rmsnorm_op(wisp_wgpu_device *d, const wisp_wgpu_kernel *k, wisp_wgpu_binding x,
                                 wisp_wgpu_binding w, wisp_wgpu_binding y, uint32_t rows, uint32_t n, float eps,
                                 wisp_wgpu_op *out);

void wisp_wgpu_op_record(wisp_wgpu_batch *b, const wisp_wgpu_op *op);
void wisp_wgpu_op_free(wisp_wgpu_device *d, wisp_wgpu_op *op);

#endif
