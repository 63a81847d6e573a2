/* Token sampling: greedy, temperature, top-k, top-p, min-p and a
 * repetition penalty, with a seeded generator so a run can be reproduced.
 *
 * Order of the steps (as llama.cpp users expect): repetition penalty on the
 * raw logits, then top-k, temperature, softmax, top-p, min-p, draw.
 * Temperature <= 0 means greedy (argmax, lowest id on ties). */
#ifndef WISP_SAMPLER_H
#define WISP_SAMPLER_H

#include <stdint.h>

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
/* Index of the largest value, lowest index on ties. */
int wisp_argmax(const float *v, int n);

#endif
