/* The backends this build has, made by name: the one place above the
 * backends that knows each of them (the engine and the CLI come through
 * here and include no backend's own header). */
#ifndef WISP_BACKEND_FACTORY_H
#define WISP_BACKEND_FACTORY_H

#include <stdio.h>

#include "backend/backend.h"
#include "backend/stats.h"

struct wisp_device_request; /* backend/tuning.h */

/* "cpu", "webgpu" or "auto" (NULL = cpu); threads: the cpu backend's (0 =
 * one per online core). */
wisp_status wisp_backend_create(const char *name, int threads, wisp_backend **out);
/* The same with what opening the device needs (NULL = nothing): a
 * session's tuning keys reach the backend later, at configure, in the
 * settings object (backend.h wisp_backend_settings.tuning). */
wisp_status wisp_backend_create_for(const char *name, int threads, const struct wisp_device_request *req,
                                    wisp_backend **out);
/* What the last "auto" creation chose and why, in the words of its stderr
 * line ("using the cpu backend (WebGPU: the WebGPU adapter 'llvmpipe ...'
 * runs on the CPU)"); "" before any. */
const char *wisp_backend_auto_why(void);
/* Returns 1 and fills *out when `be` keeps device counters (webgpu), else 0. */
int wisp_backend_stats_get(const wisp_backend *be, wisp_backend_stats *out);
/* Prints the devices the backends can see (`wisp devices`): the WebGPU
 * library and each adapter with its features and limits. */
wisp_status wisp_backend_print_devices(FILE *out);

/* A device for measurements (wisp tune; webgpu/wgpu_bench.c): the first
 * WebGPU adapter, CPU adapters included (lavapipe runs the tuner's quick
 * sweep in CI), opened with a GPU timestamp around every dispatch where it
 * has timestamp-query. Backends made on it share it (and its compiled
 * kernels); close it after destroying them. */
typedef struct wisp_bench_device wisp_bench_device;
wisp_status wisp_bench_device_open(wisp_bench_device **out);
/* 1: the GPU time below is measured by timestamp queries; 0: it is not. */
int wisp_bench_device_timestamps(const wisp_bench_device *d);
/* A webgpu backend on d (no persistent decode); a candidate's geometry
 * reaches it as a session's does, through configure's settings object. */
wisp_status wisp_bench_backend_new(wisp_bench_device *d, wisp_backend **out);
/* GPU nanoseconds of every dispatch timed so far (0 without timestamps). */
uint64_t wisp_bench_device_gpu_ns(const wisp_bench_device *d);
void wisp_bench_device_close(wisp_bench_device *d);

#endif
