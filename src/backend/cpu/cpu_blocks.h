/* Products of the ggml block types kept in their GGUF bytes (Q6_K, Q5_K,
 * Q3_K, Q2_K, Q4_0, Q4_1, Q5_0, Q5_1: format/qblocks.h) and of BF16, for
 * the kernel sets of cpu_kernels.c. The scalar reference decodes a block at
 * a time with the format's own decoder (format/quant.h's block_f32) and sums
 * w_i * x_i in element order in one float. The AVX2 set decodes Q6_K and
 * BF16 in vector registers and the others with the same block decoder into
 * a buffer of up to 256 floats, then sums with FMA over eight lanes. */
#ifndef WISP_CPU_BLOCKS_H
#define WISP_CPU_BLOCKS_H

#include "format/tensor.h"

/* 1 for the types these functions serve. */
int wisp_cpu_is_block_type(wisp_wtype t);

float wisp_cpu_dot_blocks_scalar(const wisp_matrix *m, int row, const float *x);
float wisp_cpu_dot_blocks_avx2(const wisp_matrix *m, int row, const float *x);
/* One row into out[cols] (the AVX2 set's row_f32 for these types). */
void wisp_cpu_row_blocks_avx2(const wisp_matrix *m, int row, float *out);

#endif
