/* Per-kernel GPU time from timestamp queries: the tool that says which
 * kernels a token's time goes to (wisp_wgpu_batch cannot: it only knows
 * when a whole submit finished).
 *
 * Enabled by WISP_WEBGPU_PROFILE=1 (or wisp_wgpu_device_opts.profile) on a device with `timestamp-query`. Each
 * dispatch then runs in a compute pass of its own whose beginning and end
 * write timestamps; after every submit the timestamps are read back (the
 * submit becomes synchronous) and added up per kernel label. The report
 * (stderr, when the device closes) lists each kernel's dispatches, total and
 * mean GPU time, sorted by total. Separate passes and the readbacks make the
 * run slower than a normal one: use it to rank kernels, not to time tokens.
 *
 * WISP_WEBGPU_PROFILE=R (2..64) records each dispatch R times inside
 * its timed pass and reports the pass time divided by R: the marginal cost
 * of one dispatch in a stream of dispatches (barriers included), without
 * most of the pass's own overhead (about 4 us a pass on the H200). The
 * repeats change the numbers (accumulating products add R times, states
 * advance R steps), so such a run's tokens are meaningless: timing only. */
#ifndef WISP_WGPU_PROFILE_H
#define WISP_WGPU_PROFILE_H

#include <stdint.h>
#include <stdio.h>

#include "backend/webgpu/wgpu_device.h"

typedef struct wisp_wgpu_profile wisp_wgpu_profile;

/* NULL (and no error) when the device lacks timestamp-query. repeat: R
 * above (1 = each dispatch once). */
wisp_wgpu_profile *wisp_wgpu_profile_new(wisp_wgpu_device *d, int repeat);
/* The timestamp writes for the next dispatch of kernel `label`, or NULL when
 * this submit's query set is full (that dispatch then goes untimed). */
const WGPUPassTimestampWrites *wisp_wgpu_profile_next(wisp_wgpu_profile *p, const char *label);
/* Records the resolve of this submit's queries into `enc` (before Finish). */
void wisp_wgpu_profile_resolve(wisp_wgpu_profile *p, WGPUCommandEncoder enc);
/* After the submit: waits, reads the timestamps and adds them up. */
wisp_status wisp_wgpu_profile_collect(wisp_wgpu_profile *p);
/* Forgets the queries of a batch that was aborted. */
void wisp_wgpu_profile_discard(wisp_wgpu_profile *p);
/* Timed dispatches of kernel `label` so far, and their GPU time (ns). */
uint64_t wisp_wgpu_profile_dispatches(const wisp_wgpu_profile *p, const char *label, uint64_t *ns);
/* Timed dispatches of every kernel so far, and their GPU time (ns). */
uint64_t wisp_wgpu_profile_total(const wisp_wgpu_profile *p, uint64_t *ns);
/* Dispatches recorded per timed dispatch (WISP_WEBGPU_PROFILE=R, else 1). */
int wisp_wgpu_profile_repeat(const wisp_wgpu_profile *p);
void wisp_wgpu_profile_report(const wisp_wgpu_profile *p, FILE *f);
void wisp_wgpu_profile_free(wisp_wgpu_profile *p);

#endif
