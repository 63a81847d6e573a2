/* A device for measurements (`wisp tune`, factory.h's wisp_bench_*): one
 * WebGPU device, opened with the per-dispatch timestamps of wgpu_profile.h
 * where the adapter has timestamp-query, that several backends share, so
 * that a sweep over geometries compiles only the kernels it changes and
 * reads the GPU time of exactly the dispatches it recorded. */
#include <stdlib.h>
#include <string.h>

#include "backend/factory.h"
#include "backend/webgpu/wgpu_backend.h"
#include "backend/webgpu/wgpu_device.h"
#include "backend/webgpu/wgpu_profile.h"
#include "util/err.h"

struct wisp_bench_device {
  wisp_wgpu_device *d;
};

wisp_status wisp_bench_device_open(wisp_bench_device **out) {
  *out = NULL;
  wisp_bench_device *b = calloc(1, sizeof *b);
  if (!b) return wisp_fail(WISP_ENOMEM, "out of memory");
  wisp_wgpu_device_opts o;
  memset(&o, 0, sizeof o);
  /* the profiler's device: Dawn's timestamps unrounded (its timing-attack
   * mitigation clears their low 14 bits, so a product of 150 us read as
   * 131,072 or 147,456 ns and a sweep chose among ties) */
  o.profile = 1;
  wisp_status st = wisp_wgpu_device_open(&o, &b->d);
  if (st) {
    wisp_error_prefix("backend 'webgpu'");
    free(b);
    return st;
  }
  /* timestamps around every dispatch (the profiler, attached at the first
   * batch) where the adapter has them; else the caller times wall clocks */
  b->d->profile_repeat = b->d->has_timestamp_query ? 1 : 0;
  *out = b;
  return WISP_OK;
}

int wisp_bench_device_timestamps(const wisp_bench_device *b) { return b->d->has_timestamp_query; }

wisp_status wisp_bench_backend_new(wisp_bench_device *b, wisp_backend **out) {
  wisp_wgpu_backend_opts o;
  memset(&o, 0, sizeof o);
  o.subgroups = -1;
  o.device = b->d;
  o.persist = -1; /* single products and attentions: no persistent decode */
  return wisp_wgpu_backend_new(&o, out);
}

uint64_t wisp_bench_device_gpu_ns(const wisp_bench_device *b) {
  uint64_t ns = 0;
  if (b->d->profile) wisp_wgpu_profile_total(b->d->profile, &ns);
  return ns;
}

void wisp_bench_device_close(wisp_bench_device *b) {
  if (!b) return;
  if (b->d && b->d->profile) { /* the totals were read: no report on stderr */
    wisp_wgpu_profile_free(b->d->profile);
    b->d->profile = NULL;
  }
  wisp_wgpu_device_close(b->d);
  free(b);
}
