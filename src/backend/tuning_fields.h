/* The fields of a session's tuning (backend/tuning.h), where each key of
 * tuning.c's table lands: for tuning.c, and for tests and tools that read
 * or set them. Above the backends a wisp_tuning is opaque, so that no
 * backend's options reach the engine. Include backend/tuning.h too. */
#ifndef WISP_BACKEND_TUNING_FIELDS_H
#define WISP_BACKEND_TUNING_FIELDS_H

#include <stdint.h>

#include "backend/webgpu/wgpu_options.h"

struct wisp_tuning {
  int prefill_chunk;  /* prefillChunk=N: tokens per prefill forward call (0: 64 on cpu, 512 on a GPU) */
  int decode_kick;    /* decodeKick=N: a generate's first batch goes out in growing chunks from N steps */
  int cpu_scalar;     /* cpuScalar=1: the cpu backend's scalar reference kernels for everything */
  int kv_fixed;       /* kvGrow=0: KV caches made for the whole context up front, where they could grow */
  wisp_wgpu_backend_opts webgpu; /* the webgpu keys (the rest of the table) */
  char toggles[256];  /* dawnToggles' text (webgpu.toggles points here) */
};

#endif
