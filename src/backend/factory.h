/* The backends this build has, made by name: the one place above the
 * backends that knows each of them (the engine and the CLI come through
 * here and include no backend's own header). */
#ifndef WISP_BACKEND_FACTORY_H
#define WISP_BACKEND_FACTORY_H

#include <stdio.h>

#include "backend/backend.h"
#include "backend/stats.h"

struct wisp_tuning; /* backend/tuning.h */

/* "cpu", "webgpu" or "auto" (NULL = cpu); threads: the cpu backend's (0 =
 * one per online core). */
wisp_status wisp_backend_create(const char *name, int threads, wisp_backend **out);
/* The same with a session's tuning keys (NULL = none). */
wisp_status wisp_backend_create_tuned(const char *name, int threads, const struct wisp_tuning *t, wisp_backend **out);
/* What the last "auto" creation chose and why, in the words of its stderr
 * line ("using the cpu backend (WebGPU: the WebGPU adapter 'llvmpipe ...'
 * runs on the CPU)"); "" before any. */
const char *wisp_backend_auto_why(void);
/* Returns 1 and fills *out when `be` keeps device counters (webgpu), else 0. */
int wisp_backend_stats_get(const wisp_backend *be, wisp_backend_stats *out);
/* Prints the devices the backends can see (`wisp devices`): the WebGPU
 * library and each adapter with its features and limits. */
wisp_status wisp_backend_print_devices(FILE *out);

#endif
