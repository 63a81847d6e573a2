/* Penalties and log-probabilities for the scheduler (sched_sample.h). */
#include "engine/sched_sample.h"

#include <math.h>

void sched_penalize(float *logits, int vocab, const int *counts, float presence, float frequency) {
  for (int t = 0; t < vocab; t++)
    if (counts[t] > 0) logits[t] -= frequency * (float)counts[t] + presence;
}

float sched_logprobs(const float *logits, int vocab, int chosen, int k, int32_t *top_ids, float *top_lp) {
  float m = -INFINITY;
  for (int t = 0; t < vocab; t++)
    if (logits[t] > m) m = logits[t];
  double sum = 0;
  for (int t = 0; t < vocab; t++) sum += exp((double)(logits[t] - m));
  const float lse = m + (float)log(sum);
  /* the k largest by insertion into a sorted list of at most k */
  int n = 0;
  for (int t = 0; t < vocab && k > 0; t++) {
    const float v = logits[t];
    if (n == k && v <= logits[top_ids[n - 1]]) continue;
    int at = n < k ? n++ : k - 1;
    while (at > 0 && logits[top_ids[at - 1]] < v) {
      top_ids[at] = top_ids[at - 1];
      at--;
    }
    top_ids[at] = t;
  }
  for (int i = 0; i < n; i++) top_lp[i] = logits[top_ids[i]] - lse;
  return logits[chosen] - lse;
}
