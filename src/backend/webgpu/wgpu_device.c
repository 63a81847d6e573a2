/* Instance, adapter and device setup; synchronous waits; error capture.
 * See wgpu_device.h. */
#include "backend/webgpu/wgpu_device.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend/webgpu/wgpu_loader.h"
#include "util/env.h"
#include "util/err.h"

static int profiling_requested(const wisp_wgpu_device_opts *o);
static uint32_t guard_bytes(uint32_t opt);

/* The limit of every synchronous wait: only against a device that never
 * answers. Work on a loaded CPU adapter (lavapipe compiling a large kernel
 * while other processes share two cores) can take minutes, so a wait this
 * long is still finished by work that is merely slow; device loss ends a
 * wait at once (wisp_wgpu_wait_flag). */
#define DEFAULT_TIMEOUT_MS 600000u
#define LVP_ICD "/usr/share/vulkan/icd.d/lvp_icd.json"

/* ---- names --------------------------------------------------------------- */

const char *wisp_wgpu_feature_name(uint32_t f) {
  switch (f) {
    case WGPUFeatureName_DepthClipControl: return "depth-clip-control";
    case WGPUFeatureName_Depth32FloatStencil8: return "depth32float-stencil8";
    case WGPUFeatureName_TimestampQuery: return "timestamp-query";
    case WGPUFeatureName_TextureCompressionBC: return "texture-compression-bc";
    case WGPUFeatureName_TextureCompressionBCSliced3D: return "texture-compression-bc-sliced-3d";
    case WGPUFeatureName_TextureCompressionETC2: return "texture-compression-etc2";
    case WGPUFeatureName_TextureCompressionASTC: return "texture-compression-astc";
    case WGPUFeatureName_TextureCompressionASTCSliced3D: return "texture-compression-astc-sliced-3d";
    case WGPUFeatureName_IndirectFirstInstance: return "indirect-first-instance";
    case WGPUFeatureName_ShaderF16: return "shader-f16";
    case WGPUFeatureName_RG11B10UfloatRenderable: return "rg11b10ufloat-renderable";
    case WGPUFeatureName_BGRA8UnormStorage: return "bgra8unorm-storage";
    case WGPUFeatureName_Float32Filterable: return "float32-filterable";
    case WGPUFeatureName_Float32Blendable: return "float32-blendable";
    case WGPUFeatureName_ClipDistances: return "clip-distances";
    case WGPUFeatureName_DualSourceBlending: return "dual-source-blending";
    case WGPUFeatureName_Subgroups: return "subgroups";
    case WGPUFeatureName_CoreFeaturesAndLimits: return "core-features-and-limits";
    default: return NULL;
  }
}

const char *wisp_wgpu_backend_name(WGPUBackendType b) {
  switch (b) {
    case WGPUBackendType_Null: return "null";
    case WGPUBackendType_WebGPU: return "webgpu";
    case WGPUBackendType_D3D11: return "d3d11";
    case WGPUBackendType_D3D12: return "d3d12";
    case WGPUBackendType_Metal: return "metal";
    case WGPUBackendType_Vulkan: return "vulkan";
    case WGPUBackendType_OpenGL: return "opengl";
    case WGPUBackendType_OpenGLES: return "opengles";
    default: return "unknown";
  }
}

const char *wisp_wgpu_adapter_type_name(WGPUAdapterType t) {
  switch (t) {
    case WGPUAdapterType_DiscreteGPU: return "discrete-gpu";
    case WGPUAdapterType_IntegratedGPU: return "integrated-gpu";
    case WGPUAdapterType_CPU: return "cpu";
    default: return "unknown";
  }
}

int wisp_wgpu_has_feature(const wisp_wgpu_info *info, WGPUFeatureName f) {
  for (int i = 0; i < info->n_features; i++)
    if (info->features[i] == (uint32_t)f) return 1;
  return 0;
}

int wisp_wgpu_default_vk_driver(void) {
  const char *cur = getenv("VK_DRIVER_FILES");
  if (cur && *cur) return 0;
  if (access(LVP_ICD, R_OK) != 0) return 0;
  setenv("VK_DRIVER_FILES", LVP_ICD, 0);
  return 1;
}

/* ---- waiting ------------------------------------------------------------- */

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int device_lost(wisp_wgpu_device *d) {
  pthread_mutex_lock(&d->lock);
  const int lost = d->lost && d->lost != WGPUDeviceLostReason_Destroyed;
  pthread_mutex_unlock(&d->lock);
  return lost;
}

/* Polls ProcessEvents until *flag is set (1), timeout_ns passes (0) or, with
 * a device, the device is lost (-1): spins (yielding) for 3 ms (completions
 * on a GPU come within microseconds), then sleeps with a growing interval up
 * to 1 ms. */
static int poll_until(const wisp_wgpu_api *w, WGPUInstance inst, wisp_wgpu_device *d, volatile int *flag,
                      uint64_t timeout_ns) {
  uint64_t start = now_ns();
  long sleep_ns = 2000;
  for (unsigned iter = 0;; iter++) {
    w->InstanceProcessEvents(inst);
    if (*flag) return 1;
    if (d && device_lost(d)) return -1;
    uint64_t el = now_ns() - start;
    if (el > timeout_ns) return 0;
    /* Spin (yielding) for the first 3 ms: a decode step takes a fraction of
     * a millisecond on a GPU, and a sleep would add up to its own length to
     * every readback. */
    if (el < 3000000) {
      sched_yield();
    } else {
      struct timespec ts = {0, sleep_ns};
      nanosleep(&ts, NULL);
      if (sleep_ns < 1000000) sleep_ns += sleep_ns / 2;
    }
  }
}

wisp_status wisp_wgpu_wait_flag(wisp_wgpu_device *d, volatile int *flag, const char *what) {
  const int r = poll_until(d->api, d->instance, d, flag, d->timeout_ns);
  if (r > 0) return WISP_OK;
  if (r < 0) {
    /* Dawn completes what was pending on a lost device (a map with an
     * error status) at the next ProcessEvents: give that callback a moment
     * to run, so that it does not come later into the caller's request
     * after the caller has returned. */
    poll_until(d->api, d->instance, NULL, flag, 2000000000ull);
    wisp_status st = wisp_wgpu_device_check(d);
    return st ? st : wisp_fail(WISP_EDEVICE, "WebGPU: device lost waiting for %s", what);
  }
  return wisp_fail(WISP_EDEVICE, "WebGPU: timed out after %.1f s waiting for %s: the device does not answer",
                   (double)d->timeout_ns * 1e-9, what);
}

static void copy_sv(char *dst, size_t cap, WGPUStringView v) {
  size_t n = 0;
  if (v.data) n = v.length == WGPU_STRLEN ? strlen(v.data) : v.length;
  if (n >= cap) n = cap - 1;
  if (n) memcpy(dst, v.data, n);
  dst[n] = 0;
  /* One-line messages: fold newlines, tabs and runs of spaces into one space. */
  size_t o = 0;
  for (size_t i = 0; i < n; i++) {
    char c = dst[i];
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
    if (c == ' ' && (o == 0 || dst[o - 1] == ' ')) continue;
    dst[o++] = c;
  }
  while (o > 0 && dst[o - 1] == ' ') o--;
  dst[o] = 0;
}

/* ---- adapter ------------------------------------------------------------- */

typedef struct {
  volatile int done;
  WGPURequestAdapterStatus status;
  WGPUAdapter adapter;
  char message[512];
} adapter_req;

static void on_adapter(WGPURequestAdapterStatus status, WGPUAdapter adapter, WGPUStringView message,
                       void *u1, void *u2) {
  (void)u2;
  adapter_req *r = u1;
  r->status = status;
  r->adapter = adapter;
  copy_sv(r->message, sizeof r->message, message);
  r->done = 1;
}

static wisp_status request_adapter(const wisp_wgpu_api *w, WGPUInstance inst, WGPUPowerPreference power,
                                   WGPUBackendType backend, int fallback, uint64_t timeout_ns, WGPUAdapter *out) {
  WGPURequestAdapterOptions opt;
  memset(&opt, 0, sizeof opt);
  opt.featureLevel = WGPUFeatureLevel_Core;
  opt.powerPreference = power ? power : WGPUPowerPreference_HighPerformance;
  opt.forceFallbackAdapter = fallback ? 1u : 0u;
  opt.backendType = backend;
  adapter_req req;
  memset(&req, 0, sizeof req);
  WGPURequestAdapterCallbackInfo cb = {NULL, WGPUCallbackMode_AllowProcessEvents, on_adapter, &req, NULL};
  w->InstanceRequestAdapter(inst, &opt, cb);
  if (poll_until(w, inst, NULL, &req.done, timeout_ns) <= 0)
    return wisp_fail(WISP_EDEVICE, "WebGPU: timed out waiting for an adapter");
  if (req.status != WGPURequestAdapterStatus_Success || !req.adapter) {
    if (req.adapter) w->AdapterRelease(req.adapter);
    return wisp_fail(WISP_EDEVICE, "WebGPU: no adapter found (status %d%s%s)", (int)req.status,
                     req.message[0] ? ": " : "", req.message);
  }
  *out = req.adapter;
  return WISP_OK;
}

static void fill_limits(wisp_wgpu_info *info, const WGPULimits *l) {
  info->max_buffer_size = l->maxBufferSize;
  info->max_storage_buffer_binding_size = l->maxStorageBufferBindingSize;
  info->max_uniform_buffer_binding_size = l->maxUniformBufferBindingSize;
  info->max_compute_invocations_per_workgroup = l->maxComputeInvocationsPerWorkgroup;
  info->max_compute_workgroup_storage_size = l->maxComputeWorkgroupStorageSize;
  info->max_storage_buffers_per_shader_stage = l->maxStorageBuffersPerShaderStage;
  info->max_compute_workgroup_size_x = l->maxComputeWorkgroupSizeX;
  info->max_compute_workgroups_per_dimension = l->maxComputeWorkgroupsPerDimension;
  info->min_storage_buffer_offset_alignment = l->minStorageBufferOffsetAlignment;
  info->min_uniform_buffer_offset_alignment = l->minUniformBufferOffsetAlignment;
  info->max_bind_groups = l->maxBindGroups;
  info->max_bindings_per_bind_group = l->maxBindingsPerBindGroup;
}

static void fill_features(wisp_wgpu_info *info, const WGPUSupportedFeatures *sf) {
  info->n_features = 0;
  for (size_t i = 0; i < sf->featureCount && info->n_features < WISP_WGPU_MAX_FEATURES; i++)
    info->features[info->n_features++] = (uint32_t)sf->features[i];
}

/* AdapterInfo embedded in spare room, in case Dawn's struct is longer. */
typedef union {
  WGPUAdapterInfo i;
  unsigned char room[512];
} adapter_info_buf;

static wisp_status adapter_info(const wisp_wgpu_api *w, WGPUAdapter a, wisp_wgpu_info *info,
                                wisp_wgpu_limits_buf *limits_out) {
  memset(info, 0, sizeof *info);
  adapter_info_buf ai;
  memset(&ai, 0, sizeof ai);
  if (w->AdapterGetInfo(a, &ai.i) != WGPUStatus_Success)
    return wisp_fail(WISP_EDEVICE, "WebGPU: wgpuAdapterGetInfo failed");
  copy_sv(info->name, sizeof info->name, ai.i.device);
  copy_sv(info->vendor, sizeof info->vendor, ai.i.vendor);
  copy_sv(info->architecture, sizeof info->architecture, ai.i.architecture);
  copy_sv(info->description, sizeof info->description, ai.i.description);
  info->vendor_id = ai.i.vendorID;
  info->device_id = ai.i.deviceID;
  info->backend = ai.i.backendType;
  info->adapter_type = ai.i.adapterType;
  info->subgroup_min_size = ai.i.subgroupMinSize;
  info->subgroup_max_size = ai.i.subgroupMaxSize;
  w->AdapterInfoFreeMembers(ai.i);

  wisp_wgpu_limits_buf lb;
  memset(&lb, 0, sizeof lb);
  if (w->AdapterGetLimits(a, &lb.l) != WGPUStatus_Success)
    return wisp_fail(WISP_EDEVICE, "WebGPU: wgpuAdapterGetLimits failed");
  fill_limits(info, &lb.l);
  if (limits_out) *limits_out = lb;

  WGPUSupportedFeatures sf = {0, NULL};
  w->AdapterGetFeatures(a, &sf);
  fill_features(info, &sf);
  w->SupportedFeaturesFreeMembers(sf);
  return WISP_OK;
}

wisp_status wisp_wgpu_list_adapters(wisp_wgpu_info *out, int cap, int *n) {
  *n = 0;
  const wisp_wgpu_api *w;
  wisp_status st = wisp_wgpu_load(&w);
  if (st) return st;
  WGPUInstance inst = w->CreateInstance(NULL);
  if (!inst) return wisp_fail(WISP_EDEVICE, "WebGPU: wgpuCreateInstance failed");
  /* High performance, low power, and the fallback (CPU) adapter, which Dawn
   * returns only when asked for or when nothing else exists. */
  const WGPUPowerPreference prefs[3] = {WGPUPowerPreference_HighPerformance, WGPUPowerPreference_LowPower,
                                        WGPUPowerPreference_HighPerformance};
  st = WISP_OK;
  for (int p = 0; p < 3 && *n < cap; p++) {
    WGPUAdapter a = NULL;
    wisp_status s = request_adapter(w, inst, prefs[p], WGPUBackendType_Undefined, p == 2,
                                    DEFAULT_TIMEOUT_MS * 1000000ull, &a);
    if (s) {
      if (p == 0) st = s;
      continue;
    }
    wisp_wgpu_info info;
    s = adapter_info(w, a, &info, NULL);
    w->AdapterRelease(a);
    if (s) { st = s; continue; }
    if (info.backend == WGPUBackendType_Null) {
      st = wisp_fail(WISP_EDEVICE, "WebGPU: only Dawn's Null adapter was found (no usable GPU or Vulkan "
                                   "driver; on CPU machines install Mesa >= 25 lavapipe)");
      continue;
    }
    int dup = 0;
    for (int i = 0; i < *n; i++)
      if (out[i].vendor_id == info.vendor_id && out[i].device_id == info.device_id &&
          out[i].backend == info.backend && !strcmp(out[i].name, info.name))
        dup = 1;
    if (!dup) out[(*n)++] = info;
  }
  w->InstanceRelease(inst);
  return *n > 0 ? WISP_OK : st;
}

/* ---- device -------------------------------------------------------------- */

typedef struct {
  volatile int done;
  WGPURequestDeviceStatus status;
  WGPUDevice device;
  char message[512];
} device_req;

static void on_device(WGPURequestDeviceStatus status, WGPUDevice device, WGPUStringView message,
                      void *u1, void *u2) {
  (void)u2;
  device_req *r = u1;
  r->status = status;
  r->device = device;
  copy_sv(r->message, sizeof r->message, message);
  r->done = 1;
}

static void on_lost(const WGPUDevice *device, WGPUDeviceLostReason reason, WGPUStringView message,
                    void *u1, void *u2) {
  (void)device;
  (void)u2;
  wisp_wgpu_device *d = u1;
  pthread_mutex_lock(&d->lock);
  d->lost = (int)reason;
  char m[400];
  copy_sv(m, sizeof m, message);
  snprintf(d->lost_message, sizeof d->lost_message, "device lost (reason %d): %s", (int)reason, m);
  pthread_mutex_unlock(&d->lock);
}

static void on_error(const WGPUDevice *device, WGPUErrorType type, WGPUStringView message, void *u1,
                     void *u2) {
  (void)device;
  (void)u2;
  wisp_wgpu_device *d = u1;
  pthread_mutex_lock(&d->lock);
  char m[900];
  copy_sv(m, sizeof m, message);
  static const char *const kinds[] = {"?", "no error", "validation", "out of memory", "internal", "unknown"};
  const char *kind = (unsigned)type <= 5 ? kinds[type] : "?";
  /* Keep the first error since the last check: later ones are usually its
   * consequences ("Invalid CommandBuffer"). */
  if (d->error_count == d->errors_seen)
    snprintf(d->last_error, sizeof d->last_error, "%s error: %s", kind, m);
  d->error_count++;
  if (wisp_env_verbose()) fprintf(stderr, "wisp webgpu: %s error: %s\n", kind, m);
  pthread_mutex_unlock(&d->lock);
}

wisp_status wisp_wgpu_device_check(wisp_wgpu_device *d) {
  pthread_mutex_lock(&d->lock);
  wisp_status st = WISP_OK;
  if (d->lost && d->lost != WGPUDeviceLostReason_Destroyed) {
    st = wisp_fail(WISP_EDEVICE, "WebGPU: %s", d->lost_message);
  } else if (d->error_count != d->errors_seen) {
    int extra = d->error_count - d->errors_seen - 1;
    d->errors_seen = d->error_count;
    st = extra > 0 ? wisp_fail(WISP_EDEVICE, "WebGPU: %s (and %d more)", d->last_error, extra)
                   : wisp_fail(WISP_EDEVICE, "WebGPU: %s", d->last_error);
  }
  pthread_mutex_unlock(&d->lock);
  return st;
}

int wisp_wgpu_device_adopt(wisp_wgpu_device *d) {
  pthread_mutex_lock(&d->lock);
  d->errors_seen = d->error_count;
  const int usable = !d->lost;
  pthread_mutex_unlock(&d->lock);
  return usable;
}

/* Error scopes. */
typedef struct {
  volatile int done;
  WGPUPopErrorScopeStatus status;
  WGPUErrorType type;
  char message[1024];
} scope_req;

static void on_pop(WGPUPopErrorScopeStatus status, WGPUErrorType type, WGPUStringView message,
                   void *u1, void *u2) {
  (void)u2;
  scope_req *r = u1;
  r->status = status;
  r->type = type;
  copy_sv(r->message, sizeof r->message, message);
  r->done = 1;
}

void wisp_wgpu_scope_begin(wisp_wgpu_device *d) {
  d->api->DevicePushErrorScope(d->device, WGPUErrorFilter_OutOfMemory);
  d->api->DevicePushErrorScope(d->device, WGPUErrorFilter_Validation);
}

wisp_status wisp_wgpu_scope_end(wisp_wgpu_device *d, const char *what) {
  wisp_status st = WISP_OK;
  for (int i = 0; i < 2; i++) {
    scope_req r;
    memset(&r, 0, sizeof r);
    WGPUPopErrorScopeCallbackInfo cb = {NULL, WGPUCallbackMode_AllowProcessEvents, on_pop, &r, NULL};
    d->api->DevicePopErrorScope(d->device, cb);
    wisp_status ws = wisp_wgpu_wait_flag(d, &r.done, "an error scope");
    if (ws) return ws;
    if (!st && r.status == WGPUPopErrorScopeStatus_Success && r.type != WGPUErrorType_NoError) {
      st = wisp_fail(WISP_EDEVICE, "%s: %s", what, r.message[0] ? r.message : "WebGPU error");
    }
  }
  return st;
}

wisp_status wisp_wgpu_device_open(const wisp_wgpu_device_opts *opts, wisp_wgpu_device **out) {
  *out = NULL;
  wisp_wgpu_device_opts o;
  memset(&o, 0, sizeof o);
  if (opts) o = *opts;
  const wisp_wgpu_api *w;
  wisp_status st = wisp_wgpu_load(&w);
  if (st) return st;

  wisp_wgpu_device *d = calloc(1, sizeof *d);
  if (!d) return wisp_fail(WISP_ENOMEM, "WebGPU: out of memory");
  d->api = w;
  d->timeout_ns = (uint64_t)(o.timeout_ms ? o.timeout_ms : DEFAULT_TIMEOUT_MS) * 1000000ull;
  d->guard_bytes = guard_bytes(o.guard_bytes);
  pthread_mutex_init(&d->lock, NULL);

  d->instance = w->CreateInstance(NULL);
  if (!d->instance) {
    st = wisp_fail(WISP_EDEVICE, "WebGPU: wgpuCreateInstance failed");
    goto fail;
  }
  st = request_adapter(w, d->instance, o.power, o.backend, o.force_fallback, d->timeout_ns, &d->adapter);
  if (st) goto fail;

  wisp_wgpu_info ainfo;
  wisp_wgpu_limits_buf limits;
  st = adapter_info(w, d->adapter, &ainfo, &limits);
  if (st) goto fail;
  if (ainfo.backend == WGPUBackendType_Null) {
    st = wisp_fail(WISP_EDEVICE, "WebGPU: only Dawn's Null adapter was found (no usable GPU or "
                                 "Vulkan driver; on CPU machines install Mesa >= 25 lavapipe)");
    goto fail;
  }

  WGPUFeatureName req[4];
  size_t nreq = 0;
  if (!o.no_subgroups && wisp_wgpu_has_feature(&ainfo, WGPUFeatureName_Subgroups))
    req[nreq++] = WGPUFeatureName_Subgroups;
  if (!o.no_optional_features && wisp_wgpu_has_feature(&ainfo, WGPUFeatureName_ShaderF16))
    req[nreq++] = WGPUFeatureName_ShaderF16;
  if (!o.no_optional_features && wisp_wgpu_has_feature(&ainfo, WGPUFeatureName_TimestampQuery))
    req[nreq++] = WGPUFeatureName_TimestampQuery;

  WGPUDeviceDescriptor dd;
  memset(&dd, 0, sizeof dd);
  /* Dawn rounds timestamps (timing-attack mitigation for browsers); the
   * profiler wants them exact. */
  static const char *const unquantized[] = {"timestamp_quantization"};
  WGPUDawnTogglesDescriptor toggles;
  memset(&toggles, 0, sizeof toggles);
  toggles.chain.sType = WGPUSType_DawnTogglesDescriptor;
  if (profiling_requested(&o)) {
    toggles.disabledToggleCount = 1;
    toggles.disabledToggles = unquantized;
  }
  /* Dawn's robustness transform clamps every array index in every kernel
   * (and asks Vulkan for robustBufferAccess); measured on the H200 it costs
   * 10-15 % of decode and prefill. It is off by default: wisp's kernels keep
   * their accesses in bounds themselves (the out-of-bounds ones found are
   * fixed: the staged matvec input's last partial run of slots, argmax
   * partials of surplus workgroups), and the debug guard (WISP_WEBGPU_GUARD,
   * wgpu_compute.h) with the re-runs of test_webgpu_guard.c keeps it so.
   * WISP_WEBGPU_ROBUST=1 turns it back on (e.g. for kernels under
   * development; with the guard it also turns reads far past a buffer into
   * reads of the sentinel). opts.toggles ("a:b:...", the tuning key
   * dawnToggles) enables further Dawn toggles (e.g. disable_workgroup_init,
   * skip_validation); unknown names are Dawn's to reject. */
  char toggle_text[256] = "";
  const char *enabled[8];
  if (!o.robust && !wisp_env_webgpu_robust()) enabled[toggles.enabledToggleCount++] = "disable_robustness";
  if (o.toggles && *o.toggles) {
    snprintf(toggle_text, sizeof toggle_text, "%s", o.toggles);
    for (char *save = NULL, *t = strtok_r(toggle_text, ":", &save); t && toggles.enabledToggleCount < 8;
         t = strtok_r(NULL, ":", &save))
      enabled[toggles.enabledToggleCount++] = t;
  }
  toggles.enabledToggles = enabled;
  if (toggles.enabledToggleCount || toggles.disabledToggleCount) dd.nextInChain = &toggles.chain;
  dd.label = wisp_wgpu_str("wisp");
  dd.requiredFeatureCount = nreq;
  dd.requiredFeatures = req;
  dd.requiredLimits = &limits.l; /* everything the adapter offers */
  dd.defaultQueue.label = wisp_wgpu_str("wisp queue");
  dd.deviceLostCallbackInfo.mode = WGPUCallbackMode_AllowSpontaneous;
  dd.deviceLostCallbackInfo.callback = on_lost;
  dd.deviceLostCallbackInfo.userdata1 = d;
  dd.uncapturedErrorCallbackInfo.callback = on_error;
  dd.uncapturedErrorCallbackInfo.userdata1 = d;

  device_req dr;
  memset(&dr, 0, sizeof dr);
  WGPURequestDeviceCallbackInfo dcb = {NULL, WGPUCallbackMode_AllowProcessEvents, on_device, &dr, NULL};
  w->AdapterRequestDevice(d->adapter, &dd, dcb);
  if (poll_until(w, d->instance, NULL, &dr.done, d->timeout_ns) <= 0) {
    st = wisp_fail(WISP_EDEVICE, "WebGPU: timed out waiting for a device from %s", ainfo.name);
    goto fail;
  }
  if (dr.status != WGPURequestDeviceStatus_Success || !dr.device) {
    st = wisp_fail(WISP_EDEVICE, "WebGPU: device request on %s failed: %s", ainfo.name,
                   dr.message[0] ? dr.message : "no message");
    goto fail;
  }
  d->device = dr.device;
  d->queue = w->DeviceGetQueue(d->device);

  /* The device's own view: features actually enabled and limits granted. */
  d->info = ainfo;
  memset(&limits, 0, sizeof limits);
  if (w->DeviceGetLimits(d->device, &limits.l) == WGPUStatus_Success) fill_limits(&d->info, &limits.l);
  WGPUSupportedFeatures sf = {0, NULL};
  w->DeviceGetFeatures(d->device, &sf);
  fill_features(&d->info, &sf);
  w->SupportedFeaturesFreeMembers(sf);
  d->has_subgroups = w->DeviceHasFeature(d->device, WGPUFeatureName_Subgroups) != 0;
  d->has_shader_f16 = w->DeviceHasFeature(d->device, WGPUFeatureName_ShaderF16) != 0;
  d->has_timestamp_query = w->DeviceHasFeature(d->device, WGPUFeatureName_TimestampQuery) != 0;
  if (profiling_requested(&o)) d->profile_repeat = o.profile > 0 ? o.profile : wisp_env_webgpu_profile();
  *out = d;
  return WISP_OK;

fail:
  wisp_wgpu_device_close(d);
  return st;
}

/* The debug guard's size: the option, else WISP_WEBGPU_GUARD (util/env.h),
 * rounded up to whole 16-byte vectors. */
static uint32_t guard_bytes(uint32_t opt) {
  unsigned long v = opt;
  if (!v) v = wisp_env_webgpu_guard(NULL);
  if (v == 1) v = 4096;
  if (v > (1ul << 24)) v = 1ul << 24;
  return (uint32_t)((v + 15) & ~15ul);
}

static int profiling_requested(const wisp_wgpu_device_opts *o) {
  return o->profile > 0 || wisp_env_webgpu_profile() > 0;
}

void wisp_wgpu_device_close(wisp_wgpu_device *d) {
  if (!d) return;
  const wisp_wgpu_api *w = d->api;
  if (d->release_above) d->release_above(d);
  if (d->fence_src) w->BufferRelease(d->fence_src);
  if (d->fence_dst) w->BufferRelease(d->fence_dst);
  if (d->queue) w->QueueRelease(d->queue);
  if (d->device) {
    w->DeviceDestroy(d->device);
    w->DeviceRelease(d->device);
  }
  if (d->adapter) w->AdapterRelease(d->adapter);
  if (d->instance) {
    w->InstanceProcessEvents(d->instance); /* flush callbacks that still point at d */
    w->InstanceRelease(d->instance);
  }
  pthread_mutex_destroy(&d->lock);
  free(d->guarded);
  free(d);
}
