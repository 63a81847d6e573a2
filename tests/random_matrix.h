/* Random weight matrices of one type, as the converter stores them, for the
 * product tests (test_webgpu_rows.c, _matmul_tiles.c, _matmul_i8k.c). The
 * host memory stays until the caller frees a, b and c: a backend knows a
 * weight by its host address, so keep them until its backends are gone. */
#ifndef WISP_TEST_RANDOM_MATRIX_H
#define WISP_TEST_RANDOM_MATRIX_H

#include <stdint.h>

#include "format/tensor.h"

typedef struct {
  wisp_matrix m;
  void *a, *b, *c; /* what was allocated (any may be NULL) */
} test_host_mat;

/* Q4 / Q4Z: random nibbles, scales and zero points. F32, F16, Q8_0, Q4_K:
 * values 0.1 x uniform(-1, 1), or with varied_rows rows of different
 * magnitudes and signs of mean (Q4_K's mins matter), then quantized.
 * Returns 0 when out of memory (free what was made all the same). */
int test_mat_make(test_host_mat *h, wisp_wtype type, int rows, int cols, uint64_t *seed, int varied_rows);

/* An int8 product's errors (test_webgpu_matmul_i8k.c, _rows_i8.c): y (n
 * rows of `rows` outputs, y0 added where acc) against the int8 reference
 * computed in double from the decoded weights wd (rows x cols) and the
 * device's quantized activations xq (n x cols) with their per-32-block
 * scales xd, as max |y - ref| over the largest sum of |terms| (*exact; Q4_K
 * subtracts its offsets, so max|ref| alone would understate the rounding),
 * and against the CPU's f32 product yc as max |y - yc| over max|yc| (*f32).
 * NaN counts as infinitely wrong. xq NULL: the CPU comparison alone
 * (*exact 0). */
void test_i8_errors(const float *wd, int rows, int cols, const int8_t *xq, const float *xd, int n, const float *y0,
                    int acc, const float *y, const float *yc, double *exact, double *f32);

#endif
