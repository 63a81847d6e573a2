/* The manifest's tuned entries: what `wisp tune` measured on one device,
 * kept in the artifact's manifest.json beside the seed's own `candidate` and
 * `runtime.knee`, keyed by the device it was measured on, so that several
 * devices coexist in one artifact (docs/tuning.md):
 *
 *   "tuned": [{
 *     "device": {"vendor": "nvidia", "vendorId": 4318, "deviceId": 8963,
 *                "driver": "NVIDIA 550.54.15", "name": "NVIDIA H200", "wisp": "0.1.0"},
 *     "timing": "gpu-timestamps",            // or "wall" (around a device sync)
 *     "candidate": {"key": "tuned", "matvec": {"attn_qkv": {"geometry": {...}, "variant": "..."}},
 *                   "flashBlocks": 16},
 *     "knee": [{"shape": "attn_qkv", "geometry": {...}}],
 *     "flashOptima": [{"positions": 1024, "blocks": 16}]
 *   }]
 *
 * A plan uses the entry whose device (vendorId, deviceId, driver) is the
 * one it runs on and whose `wisp` is this version; it names every other
 * entry with the reason it is ignored (another device, another wisp
 * version, a kernel this registry does not have). An entry that is not of
 * this form is a one-line error naming its JSON path. */
#ifndef WISP_PLAN_TUNED_H
#define WISP_PLAN_TUNED_H

#include <cJSON.h>

#include "backend/caps.h"
#include "plan/registry.h"
#include "wisp.h"

#define WISP_TUNED_MAX_NOTES 8

typedef struct wisp_tuned_choice_s {
  int present;      /* the manifest has a "tuned" array (possibly empty) */
  int used;         /* index of this device's entry, or -1 */
  const cJSON *entry; /* that entry (borrowed from the manifest), or NULL */
  char used_note[256];
  int n_ignored;    /* entries ignored (notes beyond WISP_TUNED_MAX_NOTES are counted, not kept) */
  char ignored[WISP_TUNED_MAX_NOTES][224];
} wisp_tuned_choice;

/* Checks every entry of manifest["tuned"] (errors name `where`, e.g. the
 * manifest's path) and picks this device's: dev from the backend's caps,
 * version = WISP_VERSION, reg the registry the plan uses (its matmul
 * variants are the kernels an entry may name). */
wisp_status wisp_tuned_select(const cJSON *manifest, const char *where, const wisp_device_caps *dev,
                              const char *version, const wisp_registry *reg, wisp_tuned_choice *out);

/* Whether entry `e` (an element of "tuned") was measured on device `dev`
 * (vendorId, deviceId and driver equal). */
int wisp_tuned_same_device(const cJSON *e, const wisp_device_caps *dev);

/* The candidate and knee a plan reads, with this device's entry laid over
 * the manifest's own: a new candidate object (the manifest's candidate,
 * its matvec shapes and flashBlocks replaced by the entry's) and the
 * entry's knee when it has one, else the manifest's. *candidate and *knee
 * are owned by the caller (cJSON_Delete; NULL when there is none). */
wisp_status wisp_tuned_overlay(const cJSON *manifest_candidate, const cJSON *manifest_knee, const wisp_tuned_choice *c,
                               cJSON **candidate, cJSON **knee);

#endif
