/* The Gated DeltaNet recurrence of one head over a chunk of tokens in
 * matrix form (the CPU backend's prefill; decode keeps the per-token
 * deltanet_step of cpu_kernels.h). See cpu_deltanet.c for the algebra. */
#ifndef WISP_CPU_DELTANET_H
#define WISP_CPU_DELTANET_H

#include <stddef.h>

#include "backend/cpu/cpu_kernels.h"

/* The most tokens one chunk takes. */
#define WISP_DN_CHUNK 64

/* Floats of scratch wisp_dn_chunk needs for heads of dk x dv. */
size_t wisp_dn_chunk_scratch(int dk, int dv);

/* Runs c (1..WISP_DN_CHUNK) tokens of one head through the recurrence
 *   S *= exp(g_t); u_t = beta_t (v_t - S^T k_t); S += k_t u_t^T; o_t = S^T q_t
 * kq: [2c][dk], the c keys then the c queries (both normalised, the
 * queries scaled); v: [c][dv] values, overwritten; g: [c] log decays
 * (<= 0); beta: [c]; S: [dk][dv], the state before the chunk on entry and
 * after it on return; o: [c][dv]. */
void wisp_dn_chunk(const wisp_cpu_kernels *kern, float *S, int dk, int dv, int c, const float *kq, float *v,
                   const float *g, const float *beta, float *o, float *scratch);

#endif
