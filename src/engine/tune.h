/* The tuner behind `wisp tune` (docs/tuning.md): for every kernel shape
 * class of a model's plan on this device it sweeps the geometries the
 * registry's variant allows, times each on the device (GPU timestamps where
 * the device has timestamp-query, else wall time around a device sync),
 * repeated until the noise is below the differences, and writes what won
 * into the artifact's manifest.json as this device's tuned entry
 * (plan/tuned.h): candidate (one-token product geometry per shape,
 * flashBlocks), knee (the smallest workgroup within the noise of the best)
 * and flashOptima (attention splits by context length); prefill tiles go
 * into the entry's "prefill" list and the receipt.
 *
 * Shape classes:
 *   - matvec:SHAPE   one-token product of each matrix section (attn_qkv,
 *                    attn_o_proj, conv_in_proj, mlp_gate_up, mlp_down, head;
 *                    Qwen 3.5's lin_in_proj, ...) whose variant takes WG and
 *                    ROWS (registry variantMetadata.overrides): WG x ROWS;
 *   - prefill:SHAPE  the tiled product of PREFILL tokens (overrides TM,TN):
 *                    TM x TN tiles;
 *   - attn:POSITIONS one decode token's attention at that depth: how many
 *                    blocks the keys are split over (flash-decoding).
 * The geometry the plan runs without tuning is always among the candidates,
 * so the tuned choice is never slower than the default as measured. */
#ifndef WISP_ENGINE_TUNE_H
#define WISP_ENGINE_TUNE_H

#include <stdio.h>

#include <cJSON.h>

#include "wisp.h"

typedef struct {
  const char *model_dir;
  double budget_s;      /* stop sweeping after this many seconds (0: no limit); the best so far is kept */
  int quick;            /* a small sweep (CI on lavapipe): few geometries, one short context, few rounds */
  int dry_run;          /* list what would be swept; measure nothing, write nothing */
  int no_write;         /* measure, but leave manifest.json alone (tests) */
  FILE *progress;       /* a progress bar here (stderr), or NULL */
  FILE *listing;        /* the dry run's list (stdout) */
} wisp_tune_options;

/* Runs the tuner; *receipt (may be NULL) gets the JSON receipt of every
 * measurement (owned by the caller). A dry run fills it with the sweep
 * list (no times). */
wisp_status wisp_tune_run(const wisp_tune_options *o, cJSON **receipt);

/* Whether a geometry timed at best_ns (its rounds' spread: half their
 * range over the median) beats the default timed at default_ns beyond the
 * noise: faster by more than both spreads together, and by at least 2 %.
 * Where it does not, the tuner keeps the default (tuned is never slower). */
int wisp_tune_beats_default(double best_ns, double best_spread, double default_ns, double default_spread);

/* Writes one SVG plot per shape class of `receipt` into dir
 * (tune-CLASS.svg, ':' as '-'): each candidate's median time with its
 * spread, the default and the chosen marked. Returns the number written,
 * or -1 with the error set. */
int wisp_tune_write_plots(const cJSON *receipt, const char *dir);

#endif
