/* `wisp tune`'s acceptance run (tune_accept.c): a tuned entry against the
 * default end to end, so that what the tuner writes is never slower than
 * what the plan runs without it. */
#ifndef WISP_ENGINE_TUNE_ACCEPT_H
#define WISP_ENGINE_TUNE_ACCEPT_H

#include <cJSON.h>

#include "wisp.h"

typedef struct {
  int rounds;
  double prefill_tps[2], decode_tps[2];       /* [default, tuned]: medians over the rounds */
  double prefill_spread[2], decode_spread[2]; /* half the range, relative to the median */
  int tuned_slower; /* prefill or decode below the default by more than the default's spread (at least 2 %) */
} wisp_tune_ab;

/* Sessions (fast profile, WebGPU) planned without and with `entry` (an
 * element of a manifest's "tuned"), a prefill of np tokens and a sampled
 * decode of nd (temperature 0.8, the same seed: the op-by-op path), `rounds` alternated rounds after a warm-up of each. The
 * model's in-memory manifest is as it was afterwards. */
wisp_status wisp_tune_accept(wisp_model *m, cJSON *entry, int np, int nd, int rounds, wisp_tune_ab *ab);

#endif
