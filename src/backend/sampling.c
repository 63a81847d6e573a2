/* Reference implementation of the decode-loop sampler; see sampling.h. */
#include "backend/sampling.h"

#include <math.h>
#include <stdlib.h>

int wisp_sample_reference(const float *logits, int vocab, const wisp_sampling *p, uint32_t step) {
  int best = 0;
  for (int i = 1; i < vocab; i++)
    if (logits[i] > logits[best]) best = i;
  if (p->temperature <= 0) return best;
  const float m = logits[best], inv_t = 1.0f / p->temperature;
  float t = -64.0f;
  if (p->min_p > 0) t = fmaxf(t, logf(p->min_p));
  if (p->top_k > 0 && p->top_k < vocab) {
    float lo = t, hi = 0.0f;
    for (int it = 0; it < 24; it++) {
      float mid = 0.5f * (lo + hi);
      int cnt = 0;
      for (int i = 0; i < vocab; i++) cnt += (logits[i] - m) * inv_t >= mid;
      if (cnt >= p->top_k) lo = mid;
      else hi = mid;
    }
    t = lo;
  }
  if (p->top_p > 0 && p->top_p < 1) {
    /* The bisection only raises t, so only tokens with z >= t ever count:
     * they are listed once (in index order, so every sum adds the same
     * terms in the same order as a pass over the whole vocabulary). */
    int *cand = malloc(sizeof(int) * (size_t)vocab), nc = 0;
    float total = 0;
    for (int i = 0; i < vocab; i++) {
      float z = (logits[i] - m) * inv_t;
      if (z >= t) {
        total += expf(z);
        if (cand) cand[nc++] = i;
      }
    }
    float lo = t, hi = 0.0f;
    for (int it = 0; it < 24; it++) {
      float mid = 0.5f * (lo + hi), mass = 0;
      for (int j = 0; j < (cand ? nc : vocab); j++) {
        float z = (logits[cand ? cand[j] : j] - m) * inv_t;
        if (z >= mid) mass += expf(z);
      }
      if (mass >= p->top_p * total) lo = mid;
      else hi = mid;
    }
    free(cand);
    t = lo;
  }
  int pick = best;
  float top = -INFINITY;
  for (int i = 0; i < vocab; i++) {
    float z = (logits[i] - m) * inv_t;
    if (z < t) continue;
    float g = -logf(-logf(wisp_sample_uniform(p->seed, step, (uint32_t)i)));
    if (z + g > top) {
      top = z + g;
      pick = i;
    }
  }
  return pick;
}

void wisp_penalize_reference(float *logits, int vocab, const uint32_t *hist, int n, float penalty) {
  const float inv = 1.0f / penalty;
  for (int i = 0; i < n; i++) {
    uint32_t t = hist[i];
    if (t >= (uint32_t)vocab) continue;
    int seen = 0; /* each distinct token once: only at its first entry */
    for (int j = 0; j < i && !seen; j++) seen = hist[j] == t;
    if (seen) continue;
    /* a product by the reciprocal, not a division: WGSL's division is not
     * correctly rounded, its product is, so penalty.wgsl matches this bit for bit */
    logits[t] = logits[t] > 0 ? logits[t] * inv : logits[t] * penalty;
  }
}
