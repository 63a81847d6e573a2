/* Reference implementation of the decode-loop sampler; see sampling.h. */
#include "backend/sampling.h"

#include <math.h>
#include <stdlib.h>

/* The tokens with z >= t, in index order: once a threshold above -64 is
 * known (min-p's, else top-k's), the later passes walk this list instead of
 * the vocabulary, since the thresholds only rise from there; a bisection
 * narrows it to its lower end every 4th step. Counts are
 * integers and the list keeps index order, so every sum adds the same terms
 * in the same order as a pass over the whole vocabulary: the same pick
 * (tests/test_sampling_lists.c holds it to that). With a sharp
 * distribution a draw with min-p reads the logits twice instead of about
 * fifty times. Without memory for the list every pass walks the
 * vocabulary. */
typedef struct {
  int *list;  /* room for the vocabulary's indices (NULL: none to be had) */
  int n;      /* entries to walk: the list's, or the vocabulary's size */
  int listed; /* whether the list is made (else entry j is token j) */
} kept;

static int kept_index(const kept *k, int j) { return k->listed ? k->list[j] : j; }

/* Keeps the entries with z >= t (in place: the list stays in index order). */
static void keep_from(kept *k, const float *logits, float m, float inv_t, float t) {
  if (!k->list) return;
  int n = 0;
  for (int j = 0; j < k->n; j++) {
    int i = kept_index(k, j);
    if ((logits[i] - m) * inv_t >= t) k->list[n++] = i;
  }
  k->n = n;
  k->listed = 1;
}

int wisp_sample_reference(const float *logits, int vocab, const wisp_sampling *p, uint32_t step) {
  int best = 0;
  float m = logits[0]; /* the best so far in a register: not reloaded through best each step */
  for (int i = 1; i < vocab; i++)
    if (logits[i] > m) m = logits[i], best = i;
  if (p->temperature <= 0) return best;
  const float inv_t = 1.0f / p->temperature;
  kept k = {malloc(sizeof(int) * (size_t)vocab), vocab, 0};
  float t = -64.0f;
  if (p->min_p > 0) t = fmaxf(t, logf(p->min_p));
  if (t > -64.0f) keep_from(&k, logits, m, inv_t, t);
  if (p->top_k > 0 && p->top_k < vocab) {
    float lo = t, hi = 0.0f;
    for (int it = 0; it < 24; it++) {
      if (it > 0 && it % 4 == 0 && lo > -64.0f) keep_from(&k, logits, m, inv_t, lo); /* the band narrows */
      float mid = 0.5f * (lo + hi);
      int cnt = 0;
      for (int j = 0; j < k.n; j++) cnt += (logits[kept_index(&k, j)] - m) * inv_t >= mid;
      if (cnt >= p->top_k) lo = mid;
      else hi = mid;
    }
    t = lo;
    if (t > -64.0f) keep_from(&k, logits, m, inv_t, t);
  }
  if (p->top_p > 0 && p->top_p < 1) {
    float total = 0;
    for (int j = 0; j < k.n; j++) {
      float z = (logits[kept_index(&k, j)] - m) * inv_t;
      if (z >= t) total += expf(z);
    }
    float lo = t, hi = 0.0f;
    for (int it = 0; it < 24; it++) {
      if (it > 0 && it % 4 == 0 && lo > -64.0f) keep_from(&k, logits, m, inv_t, lo);
      float mid = 0.5f * (lo + hi), mass = 0;
      for (int j = 0; j < k.n; j++) {
        float z = (logits[kept_index(&k, j)] - m) * inv_t;
        if (z >= mid) mass += expf(z);
      }
      if (mass >= p->top_p * total) lo = mid;
      else hi = mid;
    }
    t = lo;
  }
  int pick = best;
  float top = -INFINITY;
  for (int j = 0; j < k.n; j++) {
    int i = kept_index(&k, j);
    float z = (logits[i] - m) * inv_t;
    if (z < t) continue;
    float g = -logf(-logf(wisp_sample_uniform(p->seed, step, (uint32_t)i)));
    if (z + g > top) {
      top = z + g;
      pick = i;
    }
  }
  free(k.list);
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
