/* A WebGPU device for wisp: instance + adapter + device + queue from the
 * dynamically loaded Dawn library, with synchronous (polled) waits that
 * last until the work is done (or the device is lost; a limit of minutes
 * only against a hung device) and errors turned into wisp_status + one-line messages.
 *
 *   wisp_wgpu_device *d;
 *   if (wisp_wgpu_device_open(NULL, &d)) { puts(wisp_last_error()); ... }
 *   printf("%s, subgroups %u..%u\n", d->info.name, d->info.subgroup_min_size, ...);
 *   wisp_wgpu_device_close(d);
 *
 * Callbacks run on the calling thread (AllowProcessEvents) except device-lost
 * and uncaptured errors, which may come from any thread and are recorded
 * under a lock. A device is used from one thread at a time. */
#ifndef WISP_WGPU_DEVICE_H
#define WISP_WGPU_DEVICE_H

#include <pthread.h>
#include <stdint.h>

#include "backend/webgpu/wgpu_api.h"
#include "wisp.h"

#define WISP_WGPU_MAX_FEATURES 64

/* What an adapter (or an opened device) offers. Strings are copied. */
typedef struct wisp_wgpu_info {
  char name[256];        /* AdapterInfo.device, e.g. "NVIDIA H200" */
  char vendor[128];
  char architecture[128];
  char description[256]; /* driver description */
  uint32_t vendor_id, device_id;
  WGPUBackendType backend;
  WGPUAdapterType adapter_type;
  uint32_t subgroup_min_size, subgroup_max_size;
  int n_features;
  uint32_t features[WISP_WGPU_MAX_FEATURES]; /* WGPUFeatureName values, as reported */
  /* key limits */
  uint64_t max_buffer_size;
  uint64_t max_storage_buffer_binding_size;
  uint64_t max_uniform_buffer_binding_size;
  uint32_t max_compute_invocations_per_workgroup;
  uint32_t max_compute_workgroup_storage_size;
  uint32_t max_storage_buffers_per_shader_stage;
  uint32_t max_compute_workgroup_size_x;
  uint32_t max_compute_workgroups_per_dimension;
  uint32_t min_storage_buffer_offset_alignment;
  uint32_t min_uniform_buffer_offset_alignment;
  uint32_t max_bind_groups;
  uint32_t max_bindings_per_bind_group;
} wisp_wgpu_info;

typedef struct wisp_wgpu_device_opts {
  WGPUPowerPreference power;   /* 0 = high performance */
  WGPUBackendType backend;     /* 0 = Dawn's choice */
  int force_fallback;          /* ask for Dawn's fallback (CPU) adapter, e.g. lavapipe */
  int no_subgroups;            /* do not request `subgroups` even when offered */
  int no_optional_features;    /* request neither shader-f16 nor timestamp-query */
  uint32_t timeout_ms;         /* limit of every synchronous wait; 0 = 600000 (10 minutes) */
  /* Debug: bytes of sentinel padding after every storage buffer (0: the
   * WISP_WEBGPU_GUARD environment variable decides (util/env.h); see wgpu_compute.h). */
  uint32_t guard_bytes;
  const char *toggles;         /* further Dawn toggles to enable, "a:b:..." (NULL: none) */
  int robust;                  /* 1: Dawn's robustness transform on (also WISP_WEBGPU_ROBUST=1) */
  int profile;                 /* N > 0: the per-kernel profiler, each dispatch N times (also WISP_WEBGPU_PROFILE=N) */
} wisp_wgpu_device_opts;

typedef struct wisp_wgpu_device {
  const wisp_wgpu_api *api;
  WGPUInstance instance;
  WGPUAdapter adapter;
  WGPUDevice device;
  WGPUQueue queue;
  wisp_wgpu_info info;     /* the device's features and limits (adapter name etc.) */
  int has_subgroups, has_shader_f16, has_timestamp_query; /* enabled on the device */
  uint64_t timeout_ns;
  /* Recorded by callbacks (under lock). */
  pthread_mutex_t lock;
  int error_count;          /* uncaptured errors so far */
  int errors_seen;          /* error_count at the last wisp_wgpu_device_check */
  char last_error[1024];   /* first uncaptured error since the last check */
  int lost;
  char lost_message[512];
  /* Per-kernel timestamps (WISP_WEBGPU_PROFILE=1; wgpu_profile.h), or NULL:
   * asked for at open (profile_repeat: dispatches per timed dispatch, 0:
   * not asked), made by the compute layer at the first batch. */
  struct wisp_wgpu_profile *profile;
  int profile_repeat;
  /* Set by the layers above the device (wgpu_compute.c) when they hang
   * something on it (the shared kernels, the profiler): called first by
   * wisp_wgpu_device_close to release it, so that the device layer needs
   * no call into them. */
  void (*release_above)(struct wisp_wgpu_device *d);
  /* Internal: tiny buffers used by wisp_wgpu_finish. */
  WGPUBuffer fence_src, fence_dst;
  /* Debug guard (wgpu_device_memory.h, wisp_wgpu_guard_check): sentinel bytes
   * after each storage buffer, 0 when off, and the guarded buffers. */
  uint32_t guard_bytes;
  struct wisp_wgpu_guarded *guarded;
  int n_guarded, cap_guarded;
  /* Pipelines made once per device and shared by every backend on it
   * (wisp_wgpu_kernel_shared, wgpu_compute.h); freed when it closes. */
  struct wisp_wgpu_shared_kernel *shared;
  int n_shared, cap_shared;
} wisp_wgpu_device;

/* Loads the library, picks an adapter, creates a device asking for
 * `subgroups` (and shader-f16 / timestamp-query when offered) with the
 * adapter's full limits. opts may be NULL. */
wisp_status wisp_wgpu_device_open(const wisp_wgpu_device_opts *opts, wisp_wgpu_device **out);
void wisp_wgpu_device_close(wisp_wgpu_device *d);

/* Adapters this machine offers: one per distinct adapter found by a high-
 * performance, a low-power and a fallback (CPU) request, Null adapters left
 * out (the webgpu.h C API has no enumeration). */
wisp_status wisp_wgpu_list_adapters(wisp_wgpu_info *out, int cap, int *n);

/* Returns WISP_EDEVICE with the message of an uncaptured error recorded since
 * the previous call, or of device loss; WISP_OK otherwise. */
wisp_status wisp_wgpu_device_check(wisp_wgpu_device *d);
/* For a backend taking a device another backend used before it: drops the
 * uncaptured errors that one left unchecked (a device of its own would not
 * have them); 0 when the device is lost (then it should not be taken). */
int wisp_wgpu_device_adopt(wisp_wgpu_device *d);

/* Polls the instance until *flag becomes non-zero. Fails (WISP_EDEVICE)
 * with the loss message as soon as the device is lost, or, naming `what`,
 * when d->timeout_ns passes without an answer (minutes by default: slow
 * work on a loaded machine finishes). Used with AllowProcessEvents callbacks. */
wisp_status wisp_wgpu_wait_flag(wisp_wgpu_device *d, volatile int *flag, const char *what);

/* Error scopes around object creation: begin pushes validation + OOM scopes;
 * end pops them and fails with the first error message ("what: message"). */
void wisp_wgpu_scope_begin(wisp_wgpu_device *d);
wisp_status wisp_wgpu_scope_end(wisp_wgpu_device *d, const char *what);

int wisp_wgpu_has_feature(const wisp_wgpu_info *info, WGPUFeatureName f);
/* Names of this build's values ("subgroups"), or NULL when unknown. */
const char *wisp_wgpu_feature_name(uint32_t feature);
const char *wisp_wgpu_backend_name(WGPUBackendType b);
const char *wisp_wgpu_adapter_type_name(WGPUAdapterType t);

/* Sets VK_DRIVER_FILES to Mesa's lavapipe ICD when unset and the file exists
 * (CPU machines). Returns 1 when it set it. */
int wisp_wgpu_default_vk_driver(void);

#endif
