/* See caps.h. */
#include "backend/caps.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/err.h"

void wisp_device_caps_default(wisp_device_caps *d, const char *backend) {
  memset(d, 0, sizeof *d);
  snprintf(d->backend, sizeof d->backend, "%s", backend ? backend : "cpu");
  if (!strcmp(d->backend, "webgpu")) {
    snprintf(d->vendor, sizeof d->vendor, "unknown");
    d->has_subgroups = 1;
    d->subgroup_size = 32;
    d->has_f16 = 1;
    d->max_workgroup_size = 1024;
    d->max_shared_bytes = 16384;
    d->fusions = (1u << WISP_FUSE_KINDS) - 1;
  } else {
    d->fusions = WISP_FUSE_NORM_MATMUL;
    snprintf(d->vendor, sizeof d->vendor, "cpu");
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    d->has_avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
  }
}

static int parse_boolish(const char *v, int *out) {
  if (!strcmp(v, "true") || !strcmp(v, "1") || !strcmp(v, "yes")) { *out = 1; return 1; }
  if (!strcmp(v, "false") || !strcmp(v, "0") || !strcmp(v, "no")) { *out = 0; return 1; }
  return 0;
}

static int parse_intv(const char *v, int *out) {
  char *end = NULL;
  long x = strtol(v, &end, 10);
  if (!*v || *end || x < 0 || x > 1 << 30) return 0;
  *out = (int)x;
  return 1;
}

wisp_status wisp_device_caps_set(wisp_device_caps *d, const char *assignment) {
  const char *eq = strchr(assignment, '=');
  if (!eq || eq == assignment) return wisp_fail(WISP_EINVAL, "device capability '%s': expected KEY=VALUE", assignment);
  char key[64];
  size_t kl = (size_t)(eq - assignment);
  if (kl >= sizeof key) kl = sizeof key - 1;
  memcpy(key, assignment, kl);
  key[kl] = 0;
  const char *v = eq + 1;
  int ok = 1;
  if (!strcmp(key, "vendor")) snprintf(d->vendor, sizeof d->vendor, "%s", v);
  else if (!strcmp(key, "hasSubgroups")) ok = parse_boolish(v, &d->has_subgroups);
  else if (!strcmp(key, "hasF16")) ok = parse_boolish(v, &d->has_f16);
  else if (!strcmp(key, "hasAvx2")) ok = parse_boolish(v, &d->has_avx2);
  else if (!strcmp(key, "subgroupSize")) ok = parse_intv(v, &d->subgroup_size);
  else if (!strcmp(key, "limits.maxComputeInvocationsPerWorkgroup")) ok = parse_intv(v, &d->max_workgroup_size);
  else if (!strcmp(key, "limits.maxComputeWorkgroupStorageSize")) ok = parse_intv(v, &d->max_shared_bytes);
  else return wisp_fail(WISP_EINVAL, "device capability '%s': unknown key (vendor, hasSubgroups, subgroupSize, hasF16, hasAvx2, limits.maxComputeInvocationsPerWorkgroup, limits.maxComputeWorkgroupStorageSize)", key);
  if (!ok) return wisp_fail(WISP_EINVAL, "device capability '%s': bad value '%s'", key, v);
  return WISP_OK;
}

int wisp_feature_known(const char *f) {
  return !strcmp(f, "subgroups") || !strcmp(f, "shader-f16") || !strcmp(f, "avx2");
}

int wisp_device_has(const wisp_device_caps *d, const char *f) {
  if (!strcmp(f, "subgroups")) return d->has_subgroups;
  if (!strcmp(f, "shader-f16")) return d->has_f16;
  if (!strcmp(f, "avx2")) return d->has_avx2;
  return -1;
}
