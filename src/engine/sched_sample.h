/* The host side of a scheduler request's token choice (scheduler.c): what
 * the device's per-row sampler does not do. OpenAI's presence and frequency
 * penalties over the tokens generated so far, and log-probabilities. */
#ifndef WISP_SCHED_SAMPLE_H
#define WISP_SCHED_SAMPLE_H

#include <stdint.h>

/* logits[t] -= frequency * counts[t] + presence * (counts[t] > 0), where
 * counts[t] is how often t was generated. */
void sched_penalize(float *logits, int vocab, const int *counts, float presence, float frequency);
/* The log-probability of token `chosen` under softmax(logits), and the k
 * (<= 20) most likely tokens with theirs, most likely first (ties: lower id). */
float sched_logprobs(const float *logits, int vocab, int chosen, int k, int32_t *top_ids, float *top_lp);

#endif
