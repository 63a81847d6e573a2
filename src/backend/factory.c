/* See factory.h. */
#include "backend/factory.h"

#include <string.h>

#include "backend/tuning.h"
#include "backend/webgpu/wgpu_backend.h"
#include "util/err.h"

/* What the last "auto" chose and why, for `wisp plan` (wisp_backend_auto_why). */
static char g_auto_why[320];
static int g_auto_said;

const char *wisp_backend_auto_why(void) { return g_auto_why; }

/* The one stderr line of an "auto" choice: once a process (a server or a
 * bench makes several sessions; the choice is the same each time). */
static void say_auto(void) {
  if (g_auto_said) return;
  g_auto_said = 1;
  fprintf(stderr, "wisp: %s\n", g_auto_why);
}

/* "auto" takes WebGPU on a real GPU (an adapter of type CPU, such as
 * lavapipe, SwiftShader or llvmpipe, is slower than the CPU backend) and
 * falls back to the CPU backend; one line on stderr says which and why.
 * req (may be NULL) is what opening the device needs; no tuning key
 * reaches the backend here. */
wisp_status wisp_backend_create_for(const char *name, int threads, const wisp_device_request *req, wisp_backend **out) {
  wisp_wgpu_backend_opts o;
  memset(&o, 0, sizeof o);
  o.subgroups = -1;
  o.toggles = req ? req->dawn_toggles : NULL;
  if (!name || !strcmp(name, "cpu")) {
    return wisp_cpu_backend_new(threads, out);
  } else if (!strcmp(name, "webgpu")) {
    return wisp_wgpu_backend_new(&o, out);
  } else if (!strcmp(name, "auto")) {
    o.refuse_cpu_adapter = 1;
    if (wisp_wgpu_backend_new(&o, out) == WISP_OK) {
      wisp_device_caps caps;
      (*out)->caps(*out, &caps);
      snprintf(g_auto_why, sizeof g_auto_why, "using the webgpu backend (adapter '%s', a GPU)", caps.name);
      say_auto();
      return WISP_OK;
    }
    snprintf(g_auto_why, sizeof g_auto_why, "using the cpu backend (WebGPU: %s)", wisp_last_error());
    say_auto();
    return wisp_cpu_backend_new(threads, out);
  }
  return wisp_fail(WISP_EINVAL, "unknown backend '%s' (expected cpu, webgpu or auto)", name);
}

wisp_status wisp_backend_create(const char *name, int threads, wisp_backend **out) {
  return wisp_backend_create_for(name, threads, NULL, out);
}

int wisp_backend_stats_get(const wisp_backend *be, wisp_backend_stats *out) { return wisp_wgpu_backend_stats_get(be, out); }
