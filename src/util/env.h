/* The environment variables wisp reads, all of them here (the list and what
 * each does: docs/configuration.md). They are the few things a plan cannot
 * say: where the Dawn library and the bench receipts are, and debugging aids
 * that must reach every device a process opens (the guarded re-runs of the
 * test suite). Whatever else changes behaviour is the plan's (registry,
 * profile, manifest, device) or a session's tuning string (src/backend/tuning.c). */
#ifndef WISP_UTIL_ENV_H
#define WISP_UTIL_ENV_H

#include <stdint.h>

/* Every one reads as unset in a setuid or setgid program (secure_getenv). */

/* WISP_WEBGPU_LIB: the Dawn library to load (NULL when unset or empty). */
const char *wisp_env_webgpu_lib(void);
/* WISP_HOME: where bench keeps its receipts, HOME/bench/results (NULL when unset). */
const char *wisp_env_home(void);
/* A variable the user names on the command line (`wisp serve --api-key-env
 * NAME`: a secret kept out of the process list); NULL when unset or empty. */
const char *wisp_env_named(const char *name);
/* WISP_VERBOSE=1: diagnostics on stderr (each uncaptured WebGPU error as it
 * comes, pipeline compile times, the persistent decode's choices, the
 * backend's counters at the end). */
int wisp_env_verbose(void);
/* WISP_WEBGPU_PROFILE=N: per-kernel GPU time table, each dispatch recorded
 * N times (1: once); 0 when unset, "0" or not a number from 1 to 64. */
int wisp_env_webgpu_profile(void);
/* WISP_WEBGPU_GUARD: sentinel bytes after every storage buffer ("1": 4096,
 * a number: that many, "each": 4096 and every dispatch checked alone);
 * 0 when unset or "0". *each (may be NULL) says "each". */
uint32_t wisp_env_webgpu_guard(int *each);
/* WISP_WEBGPU_ROBUST=1: Dawn's robustness transform on (off by default). */
int wisp_env_webgpu_robust(void);

#endif
