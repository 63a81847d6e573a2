/* A session's tuning string: "key=value,key=value" of settings that are not
 * the plan's, for measurements (tuning sweeps on a GPU) and tests (paths
 * forced on or off, faults injected). Normal runs give none. The keys and
 * their meaning: the table in tuning.c and docs/configuration.md. An unknown key or
 * a bad value is a one-line error at session creation.
 *
 *   wisp_tuning t;
 *   if (wisp_tuning_parse("persist=0,kv=f16", &t)) die(wisp_last_error());
 */
#ifndef WISP_BACKEND_TUNING_H
#define WISP_BACKEND_TUNING_H

#include "backend/webgpu/wgpu_backend.h"
#include "wisp.h"

typedef struct wisp_tuning {
  int prefill_chunk;  /* prefillChunk=N: tokens per prefill forward call (0: 64 on cpu, 512 on a GPU) */
  int decode_kick;    /* decodeKick=N: a generate's first batch goes out in growing chunks from N steps */
  int cpu_scalar;     /* cpuScalar=1: the cpu backend's scalar reference kernels for everything */
  int kv_fixed;       /* kvGrow=0: KV caches made for the whole context up front, where they could grow */
  wisp_wgpu_backend_opts webgpu; /* the webgpu keys (the rest of the table) */
  char toggles[256];  /* dawnToggles' text (webgpu.toggles points here) */
} wisp_tuning;

/* Parses text (NULL or "" = nothing) into *out, zeroed first (defaults). */
wisp_status wisp_tuning_parse(const char *text, wisp_tuning *out);

#endif
