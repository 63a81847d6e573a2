/* What a device offers, as a backend reports it (wisp_backend.caps) and the
 * plan's rules read it (plan/rules.h names these as context keys: backend,
 * vendor, hasSubgroups, subgroupSize, hasF16, hasAvx2,
 * limits.maxComputeInvocationsPerWorkgroup,
 * limits.maxComputeWorkgroupStorageSize). */
#ifndef WISP_BACKEND_CAPS_H
#define WISP_BACKEND_CAPS_H

#include "wisp.h"

typedef struct {
  char backend[16]; /* "cpu" | "webgpu" */
  char vendor[32];
  char name[96];    /* the adapter's description ("NVIDIA H200"); "" on the CPU */
  int has_subgroups;
  int subgroup_size;
  int has_f16;
  int has_avx2;
  int max_workgroup_size;  /* limits.maxComputeInvocationsPerWorkgroup */
  int max_shared_bytes;    /* limits.maxComputeWorkgroupStorageSize */
  /* Which device this is, for the manifest's tuned entries (plan/tuned.h):
   * the adapter's PCI-style ids and its driver's description; 0 and "" on
   * the CPU. Not rule context keys, and not in the plan JSON. */
  unsigned vendor_id, device_id;
  char driver[128];
} wisp_device_caps;

/* Defaults for a backend: cpu detects AVX2 on this machine; webgpu assumes
 * subgroups (32 lanes), f16, 1024 invocations, 16 KiB shared, vendor "unknown". */
void wisp_device_caps_default(wisp_device_caps *d, const char *backend);
/* Applies "key=value" (a context key name above) to d. */
wisp_status wisp_device_caps_set(wisp_device_caps *d, const char *assignment);
/* Whether the device offers a `requires` feature: "subgroups", "shader-f16",
 * "avx2". Returns -1 for a feature name wisp does not know. */
int wisp_device_has(const wisp_device_caps *d, const char *feature);
int wisp_feature_known(const char *feature);

#endif
