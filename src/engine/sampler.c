/* The host sampler; see sampler.h. It draws with wisp's one sampling
 * algorithm (src/backend/sampling.h), the one the decode loop runs on the
 * device, so a token is the same whichever side drew it. */
#include "engine/sampler.h"

#include <stdlib.h>
#include <string.h>

#include "backend/sampling.h"

struct wisp_sampler {
  wisp_sampler_params p;
  int vocab;
  uint32_t accepted;  /* tokens of the sequence so far: the position of the next one, its draw's step */
  uint32_t *recent;   /* ring of the last repeat_last_n tokens */
  int n_recent, recent_at;
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
  if (s->p.repeat_last_n < 0) s->p.repeat_last_n = 0;
  s->recent = calloc((size_t)s->p.repeat_last_n + 1, sizeof(uint32_t));
  if (!s->recent) {
    wisp_sampler_free(s);
    return NULL;
  }
  return s;
}

void wisp_sampler_free(wisp_sampler *s) {
  if (!s) return;
  free(s->recent);
  free(s);
}

void wisp_sampler_accept(wisp_sampler *s, int token) {
  s->accepted++;
  if (s->p.repeat_last_n <= 0) return;
  s->recent[s->recent_at] = (uint32_t)token;
  s->recent_at = (s->recent_at + 1) % s->p.repeat_last_n;
  if (s->n_recent < s->p.repeat_last_n) s->n_recent++;
}

int wisp_argmax(const float *v, int n) {
  int best = 0;
  for (int i = 1; i < n; i++)
    if (v[i] > v[best]) best = i;
  return best;
}

wisp_sampling wisp_sampler_device_params(const wisp_sampler_params *p) {
  return (wisp_sampling){.temperature = p->temperature, .top_k = p->top_k, .top_p = p->top_p, .min_p = p->min_p,
                         .seed = (uint32_t)(p->seed ^ (p->seed >> 32))};
}

int wisp_sampler_sample(wisp_sampler *s, float *logits) {
  const wisp_sampler_params *p = &s->p;
  if (p->repeat_penalty > 0 && p->repeat_penalty != 1.0f)
    wisp_penalize_reference(logits, s->vocab, s->recent, s->n_recent, p->repeat_penalty);
  wisp_sampling sp = wisp_sampler_device_params(p);
  return wisp_sample_reference(logits, s->vocab, &sp, s->accepted);
}
