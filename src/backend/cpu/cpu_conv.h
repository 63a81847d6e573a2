/* The causal depthwise convolution + SiLU in front of a Gated DeltaNet
 * layer (cpu_backend.c's gated_deltanet), for n tokens of channels
 * [c0, c1): for each token t in order and each channel c,
 *     acc = 0;  acc += w[c][k] * st[c][k] for k < L-1;  acc += w[c][L-1] * x[t][c]
 *     out[t][c] = silu(acc) = acc / (1 + expf(-acc))
 * then the channel's state (its last L-1 inputs, st[c][0] the oldest)
 * shifts in x[t][c]. Every multiply and add is rounded on its own, in that
 * order, so both versions below give the same bits. */
#ifndef WISP_CPU_CONV_H
#define WISP_CPU_CONV_H

#include <stddef.h>

/* x: token t's inputs at x + t * x_stride; out: token t's at out + t *
 * out_stride; taps [channels][L]; state [channels][L-1]. */
void wisp_cpu_dn_conv(const float *x, size_t x_stride, const float *taps, float *state, int L, int n, int c0, int c1,
                      float *out, size_t out_stride);
/* The same, one channel of one token at a time: the reference the tests
 * compare wisp_cpu_dn_conv with, and its path for one token (decode) and
 * for more taps than it holds. */
void wisp_cpu_dn_conv_reference(const float *x, size_t x_stride, const float *taps, float *state, int L, int n,
                                int c0, int c1, float *out, size_t out_stride);

#endif
