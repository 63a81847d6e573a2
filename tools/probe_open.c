#include "probe_open.h"

#include <stdio.h>
#include <stdlib.h>

#include "util/err.h"
#include "util/file.h"

int probe_open(const char *tool, const char *wgsl_path, int timeout_ms, char **wgsl, wisp_wgpu_device **d) {
  *d = NULL;
  if (wgsl) *wgsl = NULL;
  if (wgsl_path && wisp_read_file(wgsl_path, wgsl, NULL) != WISP_OK) {
    fprintf(stderr, "%s: cannot read %s (run from the repository root)\n", tool, wgsl_path);
    return 0;
  }
  wisp_wgpu_default_vk_driver();
  wisp_wgpu_device_opts o = {0};
  o.timeout_ms = timeout_ms;
  if (wisp_wgpu_device_open(&o, d) != WISP_OK) {
    fprintf(stderr, "%s: %s\n", tool, wisp_last_error());
    if (wgsl) {
      free(*wgsl);
      *wgsl = NULL;
    }
    *d = NULL;
    return 0;
  }
  return 1;
}
