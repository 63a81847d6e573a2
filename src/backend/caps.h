/* What a device offers, as a backend reports it (wisp_backend.caps) and the
 * plan's rules read it (plan/rules.h names these as context keys: backend,
 * vendor, hasSubgroups, subgroupSize, hasF16, hasAvx2,
 * limits.maxComputeInvocationsPerWorkgroup,
 * limits.maxComputeWorkgroupStorageSize). */
#ifndef WISP_BACKEND_CAPS_H
#define WISP_BACKEND_CAPS_H

#include "wisp.h"

/* Fusions: neighbouring ops of a step graph that may run as one kernel.
 * The pass over the graph (model/graph_fuse.c) marks where each occurs; a
 * backend's caps say which it runs as one op (wisp_device_caps.fusions);
 * the plan says which of those it applies (plan.c, `wisp plan` lists them)
 * and the step graph then calls the backend's fused op (backend.h
 * matmul_fused, rmsnorm_matmul). One bit each. */
enum {
  WISP_FUSE_NORM_MATMUL = 1 << 0,     /* rmsnorm computed inside the product that reads it */
  WISP_FUSE_RESIDUAL_NORM = 1 << 1,   /* a product's residual add feeds the next rmsnorm directly */
  WISP_FUSE_GATE_UP_SWIGLU = 1 << 2,  /* gate/up product and SwiGLU in one kernel */
  WISP_FUSE_SWIGLU_MATMUL = 1 << 3,   /* SwiGLU computed inside the down product that reads it */
  WISP_FUSE_QK_NORM_ROPE_KV = 1 << 4, /* q/k split + norm + RoPE + KV append inside the attention kernel */
  WISP_FUSE_CONV_MATMUL = 1 << 5,     /* a short conv computed inside its in_proj product */
  WISP_FUSE_HEAD_ARGMAX = 1 << 6,     /* the greedy choice inside the head product */
  WISP_FUSE_MIXER_MATMUL = 1 << 7,    /* a mixer's last step (attention split merge and gate, DeltaNet's
                                       * gated norm) computed by the product that reads its output */
  WISP_FUSE_MATMUL_DELTANET = 1 << 8, /* the in-product of a Gated DeltaNet by its row ranges ([qkv|z|b|a]:
                                       * one product, or the ranges the projection switches ask for) */
  WISP_FUSE_KINDS = 9
};

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
  uint64_t max_binding_bytes; /* the most bytes one buffer binding may hold (0: no limit, the CPU) */
  unsigned fusions;        /* WISP_FUSE_* the backend runs as one op (not a rule context key) */
  /* Which device this is, for the manifest's tuned entries (plan/tuned.h):
   * the adapter's PCI-style ids and its driver's description; 0 and "" on
   * the CPU. Not rule context keys, and not in the plan JSON. */
  unsigned vendor_id, device_id;
  char driver[128];
} wisp_device_caps;

/* Defaults for a backend: cpu detects AVX2 on this machine and fuses
 * rmsnorm+matmul; webgpu assumes subgroups (32 lanes), f16, 1024
 * invocations, 16 KiB shared, vendor "unknown" and every fusion. */
void wisp_device_caps_default(wisp_device_caps *d, const char *backend);
/* Applies "key=value" (a context key name above) to d. */
wisp_status wisp_device_caps_set(wisp_device_caps *d, const char *assignment);
/* Whether the device offers a `requires` feature: "subgroups", "shader-f16",
 * "avx2". Returns -1 for a feature name wisp does not know. */
int wisp_device_has(const wisp_device_caps *d, const char *feature);
int wisp_feature_known(const char *feature);

#endif
