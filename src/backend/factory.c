/* See factory.h. */
#include "backend/factory.h"

#include <string.h>

#include "backend/tuning.h"
#include "backend/webgpu/wgpu_backend.h"
#include "util/err.h"

/* "auto" tries WebGPU on a real GPU (an adapter that runs on the CPU, such
 * as lavapipe, is slower than the CPU backend) and falls back to the CPU
 * backend with one line on stderr saying why. t (may be NULL) carries the
 * session's tuning keys for the backend. */
wisp_status wisp_backend_create_tuned(const char *name, int threads, const wisp_tuning *t, wisp_backend **out) {
  wisp_tuning none;
  if (!t) {
    memset(&none, 0, sizeof none);
    t = &none;
  }
  wisp_wgpu_backend_opts o = t->webgpu;
  o.subgroups = -1;
  wisp_status st;
  if (!name || !strcmp(name, "cpu")) {
    st = wisp_cpu_backend_new(threads, out);
  } else if (!strcmp(name, "webgpu")) {
    return wisp_wgpu_backend_new(&o, out);
  } else if (!strcmp(name, "auto")) {
    o.refuse_cpu_adapter = 1;
    if (wisp_wgpu_backend_new(&o, out) == WISP_OK) return WISP_OK;
    fprintf(stderr, "wisp: using the cpu backend (WebGPU: %s)\n", wisp_last_error());
    st = wisp_cpu_backend_new(threads, out);
  } else {
    return wisp_fail(WISP_EINVAL, "unknown backend '%s' (expected cpu, webgpu or auto)", name);
  }
  if (!st && t->cpu_scalar) wisp_cpu_backend_use_scalar(*out);
  return st;
}

wisp_status wisp_backend_create(const char *name, int threads, wisp_backend **out) {
  return wisp_backend_create_tuned(name, threads, NULL, out);
}

int wisp_backend_stats_get(const wisp_backend *be, wisp_backend_stats *out) { return wisp_wgpu_backend_stats_get(be, out); }
