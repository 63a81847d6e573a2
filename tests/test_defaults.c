/* The defaults a user gets without flags (docs/cli.md, "Defaults"): the
 * backend "auto" (a GPU adapter, else the CPU, one stderr line saying which)
 * and the fast profile (throughput: the CPU's integer products where the
 * device has AVX2); `--profile exact` is the reference path. `wisp plan`
 * says which backend and profile run and why. */
#include <string.h>

#include "test.h"

#define DEFAULT_MODEL "models/default"

static int count(const char *s, const char *what) {
  int n = 0;
  for (const char *p = s; (p = strstr(p, what)); p += strlen(what)) n++;
  return n;
}

/* Without a WebGPU library "auto" must fall back to the CPU and say why; the
 * profile is the fast one, and the products it picks are the integer ones
 * where the device can run them. */
TEST(defaults_plan_auto_backend_fast_profile) {
  static char cmd[1024], out[1 << 16];
  snprintf(cmd, sizeof cmd, "WISP_WEBGPU_LIB=/nonexistent/libwebgpu.so %s plan -m %s", test_wisp_bin(), DEFAULT_MODEL);
  CHECKF(test_run(cmd, out, sizeof out) == 0, "%s:\n%s", cmd, out);
  CHECKF(strstr(out, "backend cpu: --backend auto (the default), using the cpu backend (WebGPU: "), "%s", out);
  CHECKF(strstr(out, "/nonexistent/libwebgpu.so"), "auto does not say why it took the cpu:\n%s", out);
  /* one stderr line says it, once */
  CHECKF(count(out, "wisp: using the cpu backend (WebGPU: ") == 1, "%s", out);
  CHECKF(strstr(out, "profile profiles/throughput: the default: the fast profile"), "%s", out);
  CHECKF(strstr(out, "products, prefill: ") && strstr(out, "products, decode: "), "%s", out);
  const int avx2 = strstr(out, "avx2=yes") != NULL;
  char line[1024] = "";
  const char *pre = strstr(out, "products, prefill: ");
  if (pre) snprintf(line, sizeof line, "%.*s", (int)strcspn(pre, "\n"), pre);
  CHECKF(line[0] && (!avx2 || strstr(line, "_i8 (rule")),
         "the default profile on an AVX2 cpu does not run the integer products:\n%s", out);
}

/* --profile exact: the reference profile, the f32 products, and the plan
 * says it was named. */
TEST(defaults_profile_exact_is_the_reference_path) {
  static char cmd[1024], out[1 << 16];
  snprintf(cmd, sizeof cmd, "%s plan -m %s --backend cpu --profile exact", test_wisp_bin(), DEFAULT_MODEL);
  CHECKF(test_run(cmd, out, sizeof out) == 0, "%s:\n%s", cmd, out);
  CHECKF(strstr(out, "backend cpu: named by --backend cpu"), "%s", out);
  CHECKF(strstr(out, "profile profiles/default: named by --profile exact (the reference path"), "%s", out);
  CHECKF(!strstr(out, "_i8 ("), "the exact profile runs an integer product:\n%s", out);
  CHECKF(!strstr(out, "wisp: using the"), "a named backend must not print auto's line:\n%s", out);
}

/* With a WebGPU library present, auto takes a GPU adapter or the cpu, and
 * says which either way (lavapipe: the cpu, the adapter "runs on the CPU"). */
TEST(defaults_auto_says_which_backend) {
  static char cmd[1024], out[1 << 16];
  snprintf(cmd, sizeof cmd, "%s run -m %s -p hi -n 2 --temp 0", test_wisp_bin(), DEFAULT_MODEL);
  CHECKF(test_run(cmd, out, sizeof out) == 0, "%s:\n%s", cmd, out);
  const int cpu = count(out, "wisp: using the cpu backend (WebGPU: "), gpu = count(out, "wisp: using the webgpu backend (");
  CHECKF(cpu + gpu == 1, "auto must say once which backend it took:\n%s", out);
  CHECKF(strstr(out, cpu ? "| backend cpu |" : "| backend webgpu |"), "%s", out);
}
