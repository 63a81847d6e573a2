/* Choosing the next token where the logits are (the decode loop): greedy,
 * or temperature with top-k / top-p / min-p truncation, drawn with the
 * Gumbel-max trick from counter-based noise so that no state lives between
 * steps. The algorithm, which the WGSL kernel (kernels/sample.wgsl) follows
 * step for step:
 *
 *   m = max logit; greedy (temperature <= 0): the first index holding m.
 *   z_i = (logit_i - m) / temperature            (z <= 0, the best is 0)
 *   t = max(-64, log(min_p))                     (min-p: p_i >= min_p * p_max)
 *   top-k: bisect 24 times for the largest t with #{z_i >= t} >= k
 *   top-p: S = sum_{z_i >= t} e^z_i; bisect 24 times for the largest t'
 *          with sum_{z_i >= t'} e^z_i >= top_p * S
 *   draw:  argmax over z_i >= t of z_i + g_i, g_i = -log(-log(u_i)),
 *          u_i in (0,1) from a hash of (seed, step, i).
 *
 * Ties at a threshold may keep a few more than k tokens; the draw is exact
 * for the truncated distribution. Repetition penalties need the history and
 * stay on the host sampler (src/engine/sampler.c). */
#ifndef WISP_SAMPLING_H
#define WISP_SAMPLING_H

#include <stdint.h>

typedef struct {
  float temperature; /* <= 0: greedy */
  int top_k;         /* 0 = off */
  float top_p;       /* >= 1 = off */
  float min_p;       /* 0 = off */
  uint32_t seed;
} wisp_sampling;

/* The hash both implementations use (a PCG output permutation). */
static inline uint32_t wisp_sample_hash(uint32_t v) {
  uint32_t state = v * 747796405u + 2891336453u;
  uint32_t word = ((state >> ((state >> 28u) + 4u)) ^ state) * 277803737u;
  return (word >> 22u) ^ word;
}

/* u in (0,1) for token i at decode step `step`. */
static inline float wisp_sample_uniform(uint32_t seed, uint32_t step, uint32_t i) {
  uint32_t h = wisp_sample_hash(wisp_sample_hash(seed + step * 0x9E3779B9u) ^ i);
  return ((float)(h >> 8) + 0.5f) * (1.0f / 16777216.0f);
}

/* The reference implementation (used by the CPU backend). */
int wisp_sample_reference(const float *logits, int vocab, const wisp_sampling *p, uint32_t step);

#endif
