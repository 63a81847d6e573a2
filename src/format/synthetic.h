/* Seeded synthetic weights for an LFM2-shaped artifact: the built-in default
 * model until a trained one exists, and the fixture of most tests. */
#ifndef WISP_SYNTHETIC_H
#define WISP_SYNTHETIC_H

#include <cJSON.h>
#include <stdint.h>

#include "wisp.h"

/* Writes an artifact to out_dir whose runtime object (and so byte layout) is
 * exactly `manifest`'s; every section is filled by name from a generator
 * seeded with (seed, section name), so content does not depend on order.
 * `label` names the manifest in errors. */
wisp_status wisp_synthetic_write(const char *manifest_text, const char *label, const char *out_dir, uint64_t seed);
/* manifest_text made for a context of `context` positions: its stored rope
 * tables dropped (the model then computes them from ropeTheta for any
 * length) and maxPositions set, so a synthetic artifact of a real shape
 * takes the depths its real model would. Caller frees; NULL with the error
 * set on a manifest without a runtime object or a context below 1. */
char *wisp_synthetic_with_context(const char *manifest_text, const char *label, int context);
/* A small manifest text (hidden 64, 6 layers of the LFM2 pattern, vocab 512)
 * in the seed schema, for fast tests. Caller frees. */
char *wisp_synthetic_small_manifest(void);

#endif
