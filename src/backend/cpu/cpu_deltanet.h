/* The Gated DeltaNet recurrence of one head over a chunk of tokens in
 * matrix form (the CPU backend's prefill; decode keeps the per-token
 * deltanet_step of cpu_kernels.h). See cpu_deltanet.c for the algebra.
 *
 * Column e of the state (and of the values, the u and the outputs) only
 * ever combines with column e, so a chunk runs in two steps: what every
 * column shares (the decays, [K;Q] K^T, the scaled keys), prepared once
 * per head and chunk, then any block of value columns on its own. Each
 * output element is the same sum in the same order whatever the blocks. */
#ifndef WISP_CPU_DELTANET_H
#define WISP_CPU_DELTANET_H

#include <stddef.h>

#include "backend/cpu/cpu_kernels.h"

/* The most tokens one chunk takes. */
#define WISP_DN_CHUNK 64

/* What the column blocks of one head's chunk of c tokens share. */
typedef struct {
  int c, dk;
  /* [2c][dk]: the caller writes the c keys then the c queries (normalised,
   * the queries scaled); wisp_dn_chunk_prepare scales key t by beta_t
   * gamma_t and query t by gamma_t (they then only meet the state S0) */
  float *kq;
  float *ks;   /* [dk][c]: K^T, column s scaled by gamma_last / gamma_s */
  float *gram; /* [2c][c]: the solve's -beta_t d_ts (k_t . k_s), s < t, then the outputs' d_ts (q_t . k_s), s <= t */
  float *beta; /* [c], written by the caller */
  float *gam;  /* [c]: gamma_t = exp(g_0 + ... + g_t) */
} wisp_dn_prep;

/* Floats of memory one wisp_dn_prep of heads with keys of dk takes. */
size_t wisp_dn_prep_floats(int dk);
/* Points p's arrays into mem (wisp_dn_prep_floats(dk) floats) for c tokens:
 * everything p holds lives there, so any task can point another view at
 * the same memory. */
void wisp_dn_prep_init(wisp_dn_prep *p, float *mem, int dk, int c);

/* Floats of scratch wisp_dn_chunk_prepare needs. */
size_t wisp_dn_prepare_scratch(int dk);
/* Fills p from its keys, queries and betas and the c log decays g (<= 0). */
void wisp_dn_chunk_prepare(const wisp_cpu_kernels *kern, wisp_dn_prep *p, const float *g, float *scratch);

/* Floats of scratch wisp_dn_chunk_columns needs for blocks of n columns. */
size_t wisp_dn_columns_scratch(int n);
/* Runs the chunk for n value columns: S [dk][n] of the state (leading
 * dimension ldS), before the chunk on entry and after it on return; v
 * [c][n] values (leading dimension ldv); o [c][n] outputs (leading
 * dimension ldo):
 *   S *= exp(g_t); u_t = beta_t (v_t - S^T k_t); S += k_t u_t^T; o_t = S^T q_t */
void wisp_dn_chunk_columns(const wisp_cpu_kernels *kern, const wisp_dn_prep *p, float *S, int ldS, int n,
                           const float *v, int ldv, float *o, int ldo, float *scratch);

/* Floats of scratch wisp_dn_chunk needs for heads of dk x dv. */
size_t wisp_dn_chunk_scratch(int dk, int dv);
/* One head's whole chunk (prepare, then all dv columns at once):
 * kq: [2c][dk], the c keys then the c queries; v: [c][dv]; g, beta: [c];
 * S: [dk][dv]; o: [c][dv]. */
void wisp_dn_chunk(const wisp_cpu_kernels *kern, float *S, int dk, int dv, int c, const float *kq, const float *v,
                   const float *g, const float *beta, float *o, float *scratch);

#endif
