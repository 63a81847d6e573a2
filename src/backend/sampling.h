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
 * for the truncated distribution.
 *
 * This is wisp's one sampler: the host (src/engine/sampler.c), the CPU
 * backend and the WGSL kernel draw the same token from the same logits,
 * seed and step. The step is the position the drawn token will take in its
 * sequence, so a token is the same whether it was drawn on the host or on
 * the device, in a batch of 1 or of 64.
 *
 * Repetition penalty (before everything above, on the raw logits): each
 * distinct token among the last repeat_last_n of the sequence has its logit
 * multiplied by 1/penalty (an f32 reciprocal) when positive, else by the
 * penalty, once. */
#ifndef WISP_SAMPLING_H
#define WISP_SAMPLING_H

#include <stdint.h>

typedef struct {
  float temperature; /* <= 0: greedy */
  int top_k;         /* 0 = off */
  float top_p;       /* >= 1 = off */
  float min_p;       /* 0 = off */
  uint32_t seed;
  /* Repetition penalty on the device (the decode loop): <= 0 or 1 = off.
   * The window is a ring in the decode loop's ids buffer: the token at
   * position p is in ids[hist_off + p % hist_n]. */
  float repeat_penalty;
  int hist_n;
  uint32_t hist_off;
} wisp_sampling;

/* Whether p asks for a repetition penalty. */
static inline int wisp_sampling_penalized(const wisp_sampling *p) {
  return p->repeat_penalty > 0 && p->repeat_penalty != 1.0f && p->hist_n > 0;
}

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

/* The reference implementation (the CPU backend and the host sampler). */
int wisp_sample_reference(const float *logits, int vocab, const wisp_sampling *p, uint32_t step);
/* The id a backend's sample_id writes when the logits it was given are not
 * all finite (NaN or infinity): no token can be chosen from them, and the
 * decode loop stops with an error naming it (src/engine/decode_loop.c). */
#define WISP_ID_NONFINITE 0xFFFFFFFEu
/* The repetition penalty in place: hist holds n token ids (uint32 bit
 * patterns; ids outside [0, vocab) are empty entries). */
void wisp_penalize_reference(float *logits, int vocab, const uint32_t *hist, int n, float penalty);

#endif
