/* The host sampler: greedy, temperature, top-k, top-p, min-p and a
 * repetition penalty, seeded so that a run can be reproduced.
 *
 * It is wisp's one sampler (src/backend/sampling.h): the penalty on the raw
 * logits, then the truncations and a Gumbel-max draw from counter-based
 * noise keyed by (seed, step), where the step is the position the token
 * will take, i.e. the number of tokens accepted so far. Accept every token
 * of the sequence (prompt and generated), and a token drawn here equals the
 * one the decode loop draws on the device from the same logits
 * (wisp_generate_options with the same seed and penalty). Temperature <= 0
 * means greedy (argmax, lowest id on ties). */
#ifndef WISP_SAMPLER_H
#define WISP_SAMPLER_H

#include <stdint.h>

#include "backend/sampling.h"

typedef struct {
  float temperature;    /* 0 = greedy */
  int top_k;            /* 0 = off */
  float top_p;          /* 1 = off */
  float min_p;          /* 0 = off */
  float repeat_penalty; /* 1 = off */
  int repeat_last_n;    /* how many recent tokens the penalty looks at */
  uint64_t seed;
} wisp_sampler_params;

typedef struct wisp_sampler wisp_sampler;

wisp_sampler_params wisp_sampler_defaults(void);
wisp_sampler *wisp_sampler_new(const wisp_sampler_params *p, int vocab);
void wisp_sampler_free(wisp_sampler *s);
/* Chooses the next token; `logits` (vocab entries) is modified in place. */
int wisp_sampler_sample(wisp_sampler *s, float *logits);
/* Records a token (prompt or generated) for the repetition penalty. */
void wisp_sampler_accept(wisp_sampler *s, int token);
/* The device sampler's parameters for these (without the penalty's window). */
wisp_sampling wisp_sampler_device_params(const wisp_sampler_params *p);
/* Index of the largest value, lowest index on ties. */
int wisp_argmax(const float *v, int n);

#endif
