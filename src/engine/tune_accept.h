/* `wisp tune`'s acceptance run (tune_accept.c): a tuned entry against the
 * default end to end, so that what the tuner writes is never slower than
 * what the plan runs without it. */
#ifndef WISP_ENGINE_TUNE_ACCEPT_H
#define WISP_ENGINE_TUNE_ACCEPT_H

#include <cJSON.h>
#include <stddef.h>

#include "wisp.h"

typedef struct {
  int rounds;
  double prefill_tps[2], decode_tps[2];       /* [default, tuned]: medians over the rounds */
  double prefill_spread[2], decode_spread[2]; /* half the range, relative to the median */
  int prefill_tokens;
  /* the tuned median below the default's: a tuned choice must pay for
   * itself, so no margin is given it (a tie keeps the default) */
  int prefill_slower, decode_slower;
} wisp_tune_ab;

/* Sessions (WebGPU, of `profile`) planned without and with `entry` (an
 * element of a manifest's "tuned"), a prefill of np tokens and a sampled
 * decode of nd (temperature 0.8, the same seed: the op-by-op path), `rounds` alternated rounds after a warm-up of each. The
 * model's in-memory manifest is as it was afterwards. */
wisp_status wisp_tune_accept(wisp_model *m, cJSON *entry, const char *profile, int np, int nd, int rounds,
                             wisp_tune_ab *ab);

/* Takes out of `entry` the parts that lost where they act: its prefill
 * tiles (prefillTile, prefillTileI8) where ab's prefill was slower with the
 * entry, its one-token geometries (matvec, knee) and flashBlocks where the
 * decode was. Returns 1 if it took anything out, and says what in `said`
 * (cap bytes; cap 0: nothing said). */
int wisp_tune_drop_losers(cJSON *entry, const wisp_tune_ab *ab, char *said, size_t cap);

#endif
