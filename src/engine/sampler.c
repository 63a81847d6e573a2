/* Sampler; see sampler.h. */
#include "engine/sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct wisp_sampler {
  wisp_sampler_params p;
  int vocab;
  uint64_t rng;
  int *recent; /* ring of the last repeat_last_n tokens */
  int n_recent, recent_at;
  int *idx;    /* candidate ids, sorted by logit */
  float *prob;
};

wisp_sampler_params wisp_sampler_defaults(void) {
  wisp_sampler_params p = {.temperature = 0.8f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f,
                           .repeat_penalty = 1.0f, .repeat_last_n = 64, .seed = 0};
  return p;
}

wisp_sampler *wisp_sampler_new(const wisp_sampler_params *p, int vocab) {
  wisp_sampler *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->p = *p;
  s->vocab = vocab;
  s->rng = p->seed ^ 0x2545F4914F6CDD1Dull;
  if (s->p.repeat_last_n < 0) s->p.repeat_last_n = 0;
  s->recent = calloc((size_t)s->p.repeat_last_n + 1, sizeof(int));
  s->idx = malloc(sizeof(int) * (size_t)vocab);
  s->prob = malloc(sizeof(float) * (size_t)vocab);
  if (!s->recent || !s->idx || !s->prob) {
    wisp_sampler_free(s);
    return NULL;
  }
  return s;
}

void wisp_sampler_free(wisp_sampler *s) {
  if (!s) return;
  free(s->recent);
  free(s->idx);
  free(s->prob);
  free(s);
}

void wisp_sampler_accept(wisp_sampler *s, int token) {
  if (s->p.repeat_last_n <= 0) return;
  s->recent[s->recent_at] = token;
  s->recent_at = (s->recent_at + 1) % s->p.repeat_last_n;
  if (s->n_recent < s->p.repeat_last_n) s->n_recent++;
}

int wisp_argmax(const float *v, int n) {
  int best = 0;
  for (int i = 1; i < n; i++)
    if (v[i] > v[best]) best = i;
  return best;
}

static double next_unit(wisp_sampler *s) { /* xorshift64*, 53-bit uniform in [0,1) */
  s->rng ^= s->rng >> 12;
  s->rng ^= s->rng << 25;
  s->rng ^= s->rng >> 27;
  return (double)((s->rng * 0x2545F4914F6CDD1Dull) >> 11) * (1.0 / 9007199254740992.0);
}

static _Thread_local const float *g_sort_logits; /* qsort has no context argument in C11 */
static int by_logit_desc(const void *a, const void *b) {
  float x = g_sort_logits[*(const int *)a], y = g_sort_logits[*(const int *)b];
  if (x != y) return x > y ? -1 : 1;
  return *(const int *)a - *(const int *)b;
}

int wisp_sampler_sample(wisp_sampler *s, float *logits) {
  const wisp_sampler_params *p = &s->p;
  if (p->repeat_penalty != 1.0f) {
    /* Each distinct recent token is penalised once. */
    for (int i = 0; i < s->n_recent; i++) {
      int t = s->recent[i];
      if (t < 0 || t >= s->vocab) continue;
      int seen = 0;
      for (int j = 0; j < i; j++) seen |= s->recent[j] == t;
      if (seen) continue;
      logits[t] = logits[t] > 0 ? logits[t] / p->repeat_penalty : logits[t] * p->repeat_penalty;
    }
  }
  if (p->temperature <= 0) return wisp_argmax(logits, s->vocab);

  /* Candidates: top-k by logit (all when k is off), sorted descending.
   * A partial selection would be faster for large vocabularies; sorting the
   * full vocabulary once per token costs ~1 ms at 65k and keeps this obvious. */
  int n = s->vocab;
  for (int i = 0; i < n; i++) s->idx[i] = i;
  g_sort_logits = logits;
  qsort(s->idx, (size_t)n, sizeof(int), by_logit_desc);
  if (p->top_k > 0 && p->top_k < n) n = p->top_k;

  float maxl = logits[s->idx[0]];
  double sum = 0;
  for (int i = 0; i < n; i++) {
    s->prob[i] = expf((logits[s->idx[i]] - maxl) / p->temperature);
    sum += s->prob[i];
  }
  for (int i = 0; i < n; i++) s->prob[i] = (float)(s->prob[i] / sum);
  if (p->top_p > 0 && p->top_p < 1) {
    double c = 0;
    for (int i = 0; i < n; i++) {
      c += s->prob[i];
      if (c >= p->top_p) { n = i + 1; break; }
    }
  }
  if (p->min_p > 0) {
    float floor_p = p->min_p * s->prob[0];
    int keep = 1;
    while (keep < n && s->prob[keep] >= floor_p) keep++;
    n = keep;
  }
  double total = 0;
  for (int i = 0; i < n; i++) total += s->prob[i];
  double r = next_unit(s) * total, c = 0;
  for (int i = 0; i < n; i++) {
    c += s->prob[i];
    if (r < c) return s->idx[i];
  }
  return s->idx[n - 1];
}
