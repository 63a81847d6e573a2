/* The WebGPU backend: every op of backend.h as a WGSL kernel, recorded into
 * one command encoder / compute pass and submitted once at `sync`.
 *
 *   wisp_backend *be;
 *   if (wisp_wgpu_backend_new(NULL, &be)) die(wisp_last_error());
 *   ... be->prepare_matrix(be, &W); be->matmul(be, &W, x, 0, 1, y, 0); be->sync(be);
 *
 * See docs/webgpu.md for the kernels, the recording/submit model and the
 * uniform arena. */
#ifndef WISP_WGPU_BACKEND_H
#define WISP_WGPU_BACKEND_H

#include <stdint.h>

#include "backend/backend.h"
#include "backend/webgpu/wgpu_device.h"
#include "backend/webgpu/wgpu_options.h"


/* Where hook is set (NULL: not), a backend that would open a device of its
 * own with the default device options (no `subgroups=0`, no Dawn toggles)
 * takes hook()'s device instead, not owned, unless hook() returns NULL or
 * a lost device; errors the device holds from earlier backends are dropped
 * first, as a device of its own would not have them.
 * The test suite shares one device per worker process this way
 * (tests/webgpu_fixture.c): every session of a worker then compiles each
 * kernel once, where a device of its own compiled them all again (Dawn's
 * WGSL translation and the driver's, 60-70 % of a session test's time on
 * lavapipe under ASan). A program that keeps several sessions alive could
 * do the same, from one thread: Dawn's device is not made thread-safe here. */
void wisp_wgpu_set_device_hook(wisp_wgpu_device *(*hook)(void));

/* Returns 1 and fills *out when `be` is a WebGPU backend, else 0. */
int wisp_wgpu_backend_stats_get(const wisp_backend *be, wisp_wgpu_backend_stats *out);
/* 1 when be is a WebGPU backend whose KV caches hold packed f16 pairs
 * (tuning kv=f16, or the plan's kv f16 after configure). */
int wisp_wgpu_backend_kv16(const wisp_backend *be);

#endif
