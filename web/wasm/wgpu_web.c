/* The browser build's stand-in for wgpu_loader.c: the webgpu.h functions wisp
 * calls (backend/webgpu/wgpu_api.h), implemented over navigator.gpu by the
 * page's glue (web/wgpu.js), which this file imports as module "wgpu".
 *
 * The imports take only numbers: this file reads wisp's descriptor structs
 * (so their wasm32 layout is the compiler's business, not the glue's) and
 * passes their fields. WebGPU objects are small integer handles into a table
 * in the glue, cast to the opaque pointer types; 0 is NULL.
 *
 * The four asynchronous calls (adapter, device, buffer map, pop error scope)
 * start a promise in the glue and return an operation id; the callback is
 * kept here and fired from wgpuInstanceProcessEvents once the operation is
 * settled. ProcessEvents first calls wgpu.wait, the one import the glue
 * wraps in WebAssembly.Suspending: the module sleeps until the pending
 * promises settle, so wisp's polling loops (wgpu_device.c) need no change. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/webgpu/wgpu_api.h"
#include "backend/webgpu/wgpu_loader.h"
#include "format/weight_source.h"
#include "util/err.h"

#define IMPORT(name) __attribute__((import_module("wgpu"), import_name(#name)))

IMPORT(wait) void js_wait(void);
IMPORT(op_state) int js_op_state(int op); /* 0 pending, else a status (see wgpu.js) */
IMPORT(op_value) uint32_t js_op_value(int op);
IMPORT(op_message) size_t js_op_message(int op, char *buf, size_t cap);
IMPORT(op_free) void js_op_free(int op);
IMPORT(device_event) int js_device_event(uint32_t dev, char *buf, size_t cap, size_t *len);
IMPORT(request_adapter) int js_request_adapter(int power, int fallback);
IMPORT(request_device) int js_request_device(uint32_t adapter, uint32_t feature_mask);
IMPORT(limit) double js_limit(uint32_t obj, const char *name, size_t len);
IMPORT(has_feature) int js_has_feature(uint32_t obj, const char *name, size_t len);
IMPORT(info_string) size_t js_info_string(uint32_t adapter, int which, char *buf, size_t cap);
IMPORT(info_number) uint32_t js_info_number(uint32_t adapter, int which);
IMPORT(device_queue) uint32_t js_device_queue(uint32_t dev);
IMPORT(create_buffer) uint32_t js_create_buffer(uint32_t dev, uint32_t usage, double size, int mapped);
IMPORT(create_shader) uint32_t js_create_shader(uint32_t dev, const char *code, size_t len);
IMPORT(pipeline_constant) void js_pipeline_constant(const char *key, size_t len, double value);
IMPORT(create_pipeline) uint32_t js_create_pipeline(uint32_t dev, uint32_t layout, uint32_t module,
                                                    const char *entry, size_t len);
IMPORT(bind_entry) void js_bind_entry(uint32_t binding, uint32_t buffer, double offset, double size);
IMPORT(create_bind_group) uint32_t js_create_bind_group(uint32_t dev, uint32_t layout);
IMPORT(create_encoder) uint32_t js_create_encoder(uint32_t dev);
IMPORT(create_query_set) uint32_t js_create_query_set(uint32_t dev, int type, uint32_t count);
IMPORT(push_error_scope) void js_push_error_scope(uint32_t dev, int filter);
IMPORT(pop_error_scope) int js_pop_error_scope(uint32_t dev);
IMPORT(destroy) void js_destroy(uint32_t obj);
IMPORT(release) void js_release(uint32_t obj);
IMPORT(queue_submit) void js_queue_submit(uint32_t queue, const uint32_t *cmds, size_t count);
IMPORT(queue_write) void js_queue_write(uint32_t queue, uint32_t buf, double offset, const void *data, size_t size);
IMPORT(map_async) int js_map_async(uint32_t buf, uint32_t mode, double offset, double size);
IMPORT(read_mapped) void js_read_mapped(uint32_t buf, double offset, double size, void *dst);
IMPORT(unmap) void js_unmap(uint32_t buf);
IMPORT(buffer_size) double js_buffer_size(uint32_t buf);
IMPORT(bind_group_layout) uint32_t js_bind_group_layout(uint32_t pipeline, uint32_t index);
IMPORT(begin_pass) uint32_t js_begin_pass(uint32_t enc, uint32_t query_set, uint32_t begin, uint32_t end);
IMPORT(copy_buffer) void js_copy_buffer(uint32_t enc, uint32_t src, double src_off, uint32_t dst, double dst_off,
                                        double size);
IMPORT(resolve_query_set) void js_resolve_query_set(uint32_t enc, uint32_t qs, uint32_t first, uint32_t count,
                                                    uint32_t dst, double dst_off);
IMPORT(finish) uint32_t js_finish(uint32_t enc);
IMPORT(set_pipeline) void js_set_pipeline(uint32_t pass, uint32_t pipeline);
IMPORT(set_bind_group) void js_set_bind_group(uint32_t pass, uint32_t index, uint32_t group,
                                              const uint32_t *offsets, size_t count);
IMPORT(dispatch) void js_dispatch(uint32_t pass, uint32_t x, uint32_t y, uint32_t z);
IMPORT(end_pass) void js_end_pass(uint32_t pass);

#define H(p) ((uint32_t)(uintptr_t)(p)) /* object -> handle */
#define P(type, h) ((type)(uintptr_t)(h)) /* handle -> object */

static size_t sv_len(WGPUStringView v) {
  if (!v.data) return 0;
  return v.length == WGPU_STRLEN ? strlen(v.data) : v.length;
}
static double size_arg(uint64_t n) { return n == WGPU_WHOLE_SIZE ? -1.0 : (double)n; }

/* ---- pending asynchronous operations --------------------------------- */
typedef enum { OP_ADAPTER, OP_DEVICE, OP_MAP, OP_POP } op_kind;
typedef struct {
  int op;
  op_kind kind;
  void (*fn)(void);
  void *u1, *u2;
} pending_op;

#define MAX_PENDING 64
static pending_op g_pending[MAX_PENDING];
static int g_n_pending;

static void remember(int op, op_kind kind, void (*fn)(void), void *u1, void *u2) {
  if (g_n_pending < MAX_PENDING) g_pending[g_n_pending++] = (pending_op){op, kind, fn, u1, u2};
}

/* The device's uncaptured-error and lost callbacks (one device per run):
 * delivered from ProcessEvents until the device is released. */
static struct {
  uint32_t handle;
  WGPUDeviceLostCallbackInfo lost;
  WGPUUncapturedErrorCallbackInfo error;
} g_device;
static WGPUDeviceLostCallbackInfo g_next_lost; /* the requested device's, until it arrives */
static WGPUUncapturedErrorCallbackInfo g_next_error;

/* Fires the callback of a settled operation (the glue's states are the
 * webgpu.h status values of its kind). */
static void fire(const pending_op *p, int state) {
  char msg[512];
  size_t n = js_op_message(p->op, msg, sizeof msg);
  WGPUStringView sv = {msg, n};
  uint32_t v = js_op_value(p->op);
  switch (p->kind) {
  case OP_ADAPTER:
    ((WGPURequestAdapterCallback)p->fn)((WGPURequestAdapterStatus)state, P(WGPUAdapter, v), sv, p->u1, p->u2);
    break;
  case OP_DEVICE:
    if (state == WGPURequestDeviceStatus_Success) {
      g_device.handle = v;
      g_device.lost = g_next_lost;
      g_device.error = g_next_error;
    }
    ((WGPURequestDeviceCallback)p->fn)((WGPURequestDeviceStatus)state, P(WGPUDevice, v), sv, p->u1, p->u2);
    break;
  case OP_MAP: ((WGPUBufferMapCallback)p->fn)((WGPUMapAsyncStatus)state, sv, p->u1, p->u2); break;
  case OP_POP:
    ((WGPUPopErrorScopeCallback)p->fn)((WGPUPopErrorScopeStatus)state, (WGPUErrorType)v, sv, p->u1, p->u2);
    break;
  }
  js_op_free(p->op);
}

/* Hands wisp what the glue saw on the device since the last call: errors
 * outside an error scope (event 1..5: their webgpu.h type) and the device's
 * loss (event 16 + its webgpu.h reason). */
static void device_events(void) {
  if (!g_device.handle) return;
  char msg[900];
  size_t n = 0;
  int ev;
  while ((ev = js_device_event(g_device.handle, msg, sizeof msg, &n)) != 0) {
    WGPUDevice dev = P(WGPUDevice, g_device.handle);
    WGPUStringView sv = {msg, n};
    if (ev >= 16 && g_device.lost.callback)
      g_device.lost.callback(&dev, (WGPUDeviceLostReason)(ev - 16), sv, g_device.lost.userdata1,
                             g_device.lost.userdata2);
    else if (ev < 16 && g_device.error.callback)
      g_device.error.callback(&dev, (WGPUErrorType)ev, sv, g_device.error.userdata1, g_device.error.userdata2);
  }
}

static void process_events(WGPUInstance inst) {
  (void)inst;
  device_events();
  if (g_n_pending == 0) return;
  js_wait(); /* suspends the module until every pending promise settled */
  /* Callbacks may start new operations: fire from a copy. */
  pending_op now[MAX_PENDING];
  int n = g_n_pending, kept = 0;
  memcpy(now, g_pending, (size_t)n * sizeof *now);
  g_n_pending = 0;
  for (int i = 0; i < n; i++) {
    int state = js_op_state(now[i].op);
    if (state) fire(&now[i], state);
    else now[kept++] = now[i];
  }
  for (int i = 0; i < kept; i++) remember(now[i].op, now[i].kind, now[i].fn, now[i].u1, now[i].u2);
}

/* ---- instance, adapter, device -------------------------------------- */
static WGPUInstance create_instance(const WGPUInstanceDescriptor *d) {
  (void)d;
  return P(WGPUInstance, 1); /* the page has one GPU; the handle is only a non-NULL token */
}
static void instance_release(WGPUInstance i) { (void)i; }

static WGPUFuture request_adapter(WGPUInstance i, const WGPURequestAdapterOptions *o,
                                  WGPURequestAdapterCallbackInfo cb) {
  (void)i;
  int op = js_request_adapter(o ? (int)o->powerPreference : 0, o ? (int)o->forceFallbackAdapter : 0);
  remember(op, OP_ADAPTER, (void (*)(void))cb.callback, cb.userdata1, cb.userdata2);
  return (WGPUFuture){(uint64_t)op};
}

/* The features wisp looks at, by their WebGPU names. */
static const struct {
  WGPUFeatureName id;
  const char *name;
} k_features[] = {
  {WGPUFeatureName_TimestampQuery, "timestamp-query"},
  {WGPUFeatureName_ShaderF16, "shader-f16"},
  {WGPUFeatureName_Subgroups, "subgroups"},
  {WGPUFeatureName_IndirectFirstInstance, "indirect-first-instance"},
  {WGPUFeatureName_Float32Filterable, "float32-filterable"},
};
#define N_FEATURES (sizeof k_features / sizeof k_features[0])

static void get_features(uint32_t obj, WGPUSupportedFeatures *out) {
  WGPUFeatureName *f = malloc(N_FEATURES * sizeof *f);
  size_t n = 0;
  for (size_t i = 0; f && i < N_FEATURES; i++)
    if (js_has_feature(obj, k_features[i].name, strlen(k_features[i].name))) f[n++] = k_features[i].id;
  out->featureCount = n;
  out->features = f;
}
static void adapter_get_features(WGPUAdapter a, WGPUSupportedFeatures *out) { get_features(H(a), out); }
static void device_get_features(WGPUDevice d, WGPUSupportedFeatures *out) { get_features(H(d), out); }
static void features_free(WGPUSupportedFeatures f) { free((void *)f.features); }
static WGPUBool device_has_feature(WGPUDevice d, WGPUFeatureName id) {
  for (size_t i = 0; i < N_FEATURES; i++)
    if (k_features[i].id == id) return js_has_feature(H(d), k_features[i].name, strlen(k_features[i].name)) != 0;
  return 0;
}

/* WGPULimits' fields by their WebGPU names. */
#define LIMIT(field) {#field, offsetof(WGPULimits, field), sizeof(((WGPULimits *)0)->field)}
static const struct {
  const char *name;
  size_t offset, size;
} k_limits[] = {
  LIMIT(maxTextureDimension1D), LIMIT(maxTextureDimension2D), LIMIT(maxTextureDimension3D),
  LIMIT(maxTextureArrayLayers), LIMIT(maxBindGroups), LIMIT(maxBindGroupsPlusVertexBuffers),
  LIMIT(maxBindingsPerBindGroup), LIMIT(maxDynamicUniformBuffersPerPipelineLayout),
  LIMIT(maxDynamicStorageBuffersPerPipelineLayout), LIMIT(maxSampledTexturesPerShaderStage),
  LIMIT(maxSamplersPerShaderStage), LIMIT(maxStorageBuffersPerShaderStage), LIMIT(maxStorageTexturesPerShaderStage),
  LIMIT(maxUniformBuffersPerShaderStage), LIMIT(maxUniformBufferBindingSize), LIMIT(maxStorageBufferBindingSize),
  LIMIT(minUniformBufferOffsetAlignment), LIMIT(minStorageBufferOffsetAlignment), LIMIT(maxVertexBuffers),
  LIMIT(maxBufferSize), LIMIT(maxVertexAttributes), LIMIT(maxVertexBufferArrayStride),
  LIMIT(maxInterStageShaderVariables), LIMIT(maxColorAttachments), LIMIT(maxColorAttachmentBytesPerSample),
  LIMIT(maxComputeWorkgroupStorageSize), LIMIT(maxComputeInvocationsPerWorkgroup), LIMIT(maxComputeWorkgroupSizeX),
  LIMIT(maxComputeWorkgroupSizeY), LIMIT(maxComputeWorkgroupSizeZ), LIMIT(maxComputeWorkgroupsPerDimension),
};
#undef LIMIT

static WGPUStatus get_limits(uint32_t obj, WGPULimits *l) {
  for (size_t i = 0; i < sizeof k_limits / sizeof k_limits[0]; i++) {
    double v = js_limit(obj, k_limits[i].name, strlen(k_limits[i].name));
    unsigned char *at = (unsigned char *)l + k_limits[i].offset;
    if (k_limits[i].size == 8) { uint64_t x = (uint64_t)v; memcpy(at, &x, 8); }
    else { uint32_t x = (uint32_t)v; memcpy(at, &x, 4); }
  }
  return WGPUStatus_Success;
}
static WGPUStatus adapter_get_limits(WGPUAdapter a, WGPULimits *l) { return get_limits(H(a), l); }
static WGPUStatus device_get_limits(WGPUDevice d, WGPULimits *l) { return get_limits(H(d), l); }

static WGPUStringView info_string(uint32_t a, int which) {
  char buf[512];
  size_t n = js_info_string(a, which, buf, sizeof buf - 1);
  char *s = malloc(n + 1);
  if (!s) return (WGPUStringView){NULL, 0};
  memcpy(s, buf, n);
  s[n] = 0;
  return (WGPUStringView){s, n};
}
static WGPUStatus adapter_get_info(WGPUAdapter a, WGPUAdapterInfo *info) {
  memset(info, 0, sizeof *info);
  info->vendor = info_string(H(a), 0);
  info->architecture = info_string(H(a), 1);
  info->device = info_string(H(a), 2);
  info->description = info_string(H(a), 3);
  info->backendType = WGPUBackendType_WebGPU;
  info->adapterType = js_info_number(H(a), 0) ? WGPUAdapterType_CPU : WGPUAdapterType_Unknown;
  info->subgroupMinSize = js_info_number(H(a), 1);
  info->subgroupMaxSize = js_info_number(H(a), 2);
  return WGPUStatus_Success;
}
static void adapter_info_free(WGPUAdapterInfo info) {
  free((void *)info.vendor.data);
  free((void *)info.architecture.data);
  free((void *)info.device.data);
  free((void *)info.description.data);
}

/* The device gets the features wisp asks for and every limit of the adapter
 * (what wgpu_device.c asks for too); toggles are Dawn's and the page's
 * browser decides them. */
static WGPUFuture request_device(WGPUAdapter a, const WGPUDeviceDescriptor *d, WGPURequestDeviceCallbackInfo cb) {
  uint32_t mask = 0;
  for (size_t i = 0; d && i < d->requiredFeatureCount; i++)
    for (size_t k = 0; k < N_FEATURES; k++)
      if (k_features[k].id == d->requiredFeatures[i]) mask |= 1u << k;
  if (d) {
    g_next_lost = d->deviceLostCallbackInfo;
    g_next_error = d->uncapturedErrorCallbackInfo;
  }
  int op = js_request_device(H(a), mask);
  remember(op, OP_DEVICE, (void (*)(void))cb.callback, cb.userdata1, cb.userdata2);
  return (WGPUFuture){(uint64_t)op};
}

static WGPUQueue device_get_queue(WGPUDevice d) { return P(WGPUQueue, js_device_queue(H(d))); }
static void release(void *obj) { js_release(H(obj)); }
static void adapter_release(WGPUAdapter a) { release(a); }
static void device_destroy(WGPUDevice d) { js_destroy(H(d)); }
static void device_release(WGPUDevice d) {
  if (H(d) == g_device.handle) g_device.handle = 0;
  release(d);
}
static void queue_release(WGPUQueue q) { release(q); }

static void push_error_scope(WGPUDevice d, WGPUErrorFilter f) { js_push_error_scope(H(d), (int)f); }
static WGPUFuture pop_error_scope(WGPUDevice d, WGPUPopErrorScopeCallbackInfo cb) {
  int op = js_pop_error_scope(H(d));
  remember(op, OP_POP, (void (*)(void))cb.callback, cb.userdata1, cb.userdata2);
  return (WGPUFuture){(uint64_t)op};
}

/* ---- buffers ---------------------------------------------------------- */
static WGPUBuffer create_buffer(WGPUDevice d, const WGPUBufferDescriptor *b) {
  return P(WGPUBuffer, js_create_buffer(H(d), (uint32_t)b->usage, (double)b->size, (int)b->mappedAtCreation));
}
/* A write from weights streamed from the model file (format/weight_source.h)
 * goes through a chunk of wasm memory: the file's bytes reach the GPU buffer
 * without the whole section ever being in wasm memory. */
#define STREAM_CHUNK (4u << 20)
static void queue_write(WGPUQueue q, WGPUBuffer b, uint64_t off, const void *data, size_t n) {
  if (wisp_weights_resident(data, n)) {
    js_queue_write(H(q), H(b), (double)off, data, n);
    return;
  }
  uint8_t *chunk = malloc(n < STREAM_CHUNK ? n : STREAM_CHUNK);
  wisp_status st = chunk ? WISP_OK : wisp_fail(WISP_ENOMEM, "out of memory for a weights upload");
  for (size_t o = 0; !st && o < n; o += STREAM_CHUNK) {
    const size_t k = n - o < STREAM_CHUNK ? n - o : STREAM_CHUNK;
    if (!(st = wisp_weights_read(chunk, (const uint8_t *)data + o, k)))
      js_queue_write(H(q), H(b), (double)(off + o), chunk, k);
  }
  free(chunk);
  if (st) { /* webgpu.h's write has no error to return: a buffer left short must not run */
    fprintf(stderr, "wisp: %s\n", wisp_last_error());
    exit(1);
  }
}

/* A mapped range lives in wasm memory: a copy of the GPU's, made when wisp
 * asks for it and freed at unmap (wisp only reads them). */
typedef struct mapped_range {
  uint32_t buffer;
  void *copy;
  struct mapped_range *next;
} mapped_range;
static mapped_range *g_mapped;

static WGPUFuture map_async(WGPUBuffer b, WGPUMapMode mode, size_t off, size_t n, WGPUBufferMapCallbackInfo cb) {
  int op = js_map_async(H(b), (uint32_t)mode, (double)off, n == WGPU_WHOLE_MAP_SIZE ? -1.0 : (double)n);
  remember(op, OP_MAP, (void (*)(void))cb.callback, cb.userdata1, cb.userdata2);
  return (WGPUFuture){(uint64_t)op};
}
static const void *get_mapped(WGPUBuffer b, size_t off, size_t n) {
  if (n == WGPU_WHOLE_MAP_SIZE) n = (size_t)js_buffer_size(H(b)) - off;
  mapped_range *m = malloc(sizeof *m);
  void *copy = malloc(n ? n : 1);
  if (!m || !copy) { free(m); free(copy); return NULL; }
  js_read_mapped(H(b), (double)off, (double)n, copy);
  *m = (mapped_range){H(b), copy, g_mapped};
  g_mapped = m;
  return copy;
}
static void unmap(WGPUBuffer b) {
  for (mapped_range **p = &g_mapped; *p;) {
    mapped_range *m = *p;
    if (m->buffer == H(b)) { *p = m->next; free(m->copy); free(m); }
    else p = &m->next;
  }
  js_unmap(H(b));
}
static uint64_t buffer_size(WGPUBuffer b) { return (uint64_t)js_buffer_size(H(b)); }
static void buffer_destroy(WGPUBuffer b) { js_destroy(H(b)); }
static void buffer_release(WGPUBuffer b) { release(b); }

/* ---- shaders, pipelines, bind groups ---------------------------------- */
static WGPUShaderModule create_shader(WGPUDevice d, const WGPUShaderModuleDescriptor *desc) {
  for (const WGPUChainedStruct *c = desc->nextInChain; c; c = c->next)
    if (c->sType == WGPUSType_ShaderSourceWGSL) {
      const WGPUShaderSourceWGSL *w = (const WGPUShaderSourceWGSL *)c;
      return P(WGPUShaderModule, js_create_shader(H(d), w->code.data, sv_len(w->code)));
    }
  return NULL;
}
static WGPUComputePipeline create_pipeline(WGPUDevice d, const WGPUComputePipelineDescriptor *desc) {
  const WGPUComputeState *c = &desc->compute;
  for (size_t i = 0; i < c->constantCount; i++)
    js_pipeline_constant(c->constants[i].key.data, sv_len(c->constants[i].key), c->constants[i].value);
  return P(WGPUComputePipeline,
           js_create_pipeline(H(d), H(desc->layout), H(c->module), c->entryPoint.data, sv_len(c->entryPoint)));
}
static WGPUBindGroup create_bind_group(WGPUDevice d, const WGPUBindGroupDescriptor *desc) {
  for (size_t i = 0; i < desc->entryCount; i++) {
    const WGPUBindGroupEntry *e = &desc->entries[i];
    js_bind_entry(e->binding, H(e->buffer), (double)e->offset, size_arg(e->size));
  }
  return P(WGPUBindGroup, js_create_bind_group(H(d), H(desc->layout)));
}
static WGPUBindGroupLayout bind_group_layout(WGPUComputePipeline p, uint32_t i) {
  return P(WGPUBindGroupLayout, js_bind_group_layout(H(p), i));
}
static void shader_release(WGPUShaderModule m) { release(m); }
static void pipeline_release(WGPUComputePipeline p) { release(p); }
static void layout_release(WGPUBindGroupLayout l) { release(l); }
static void bind_group_release(WGPUBindGroup g) { release(g); }

/* ---- commands ----------------------------------------------------------- */
static WGPUCommandEncoder create_encoder(WGPUDevice d, const WGPUCommandEncoderDescriptor *desc) {
  (void)desc;
  return P(WGPUCommandEncoder, js_create_encoder(H(d)));
}
static WGPUQuerySet create_query_set(WGPUDevice d, const WGPUQuerySetDescriptor *desc) {
  return P(WGPUQuerySet, js_create_query_set(H(d), (int)desc->type, desc->count));
}
static WGPUComputePassEncoder begin_pass(WGPUCommandEncoder e, const WGPUComputePassDescriptor *desc) {
  const WGPUPassTimestampWrites *t = desc ? desc->timestampWrites : NULL;
  return P(WGPUComputePassEncoder, js_begin_pass(H(e), t ? H(t->querySet) : 0, t ? t->beginningOfPassWriteIndex : 0,
                                                 t ? t->endOfPassWriteIndex : 0));
}
static void copy_buffer(WGPUCommandEncoder e, WGPUBuffer s, uint64_t so, WGPUBuffer d, uint64_t dst_off, uint64_t n) {
  js_copy_buffer(H(e), H(s), (double)so, H(d), (double)dst_off, (double)n);
}
static void resolve_query_set(WGPUCommandEncoder e, WGPUQuerySet q, uint32_t first, uint32_t count, WGPUBuffer dst,
                              uint64_t off) {
  js_resolve_query_set(H(e), H(q), first, count, H(dst), (double)off);
}
static WGPUCommandBuffer finish(WGPUCommandEncoder e, const WGPUCommandBufferDescriptor *desc) {
  (void)desc;
  return P(WGPUCommandBuffer, js_finish(H(e)));
}
static void queue_submit(WGPUQueue q, size_t n, const WGPUCommandBuffer *cmds) {
  uint32_t h[64];
  for (size_t done = 0; done < n;) {
    size_t k = n - done < 64 ? n - done : 64;
    for (size_t i = 0; i < k; i++) h[i] = H(cmds[done + i]);
    js_queue_submit(H(q), h, k);
    done += k;
  }
}
static void set_pipeline(WGPUComputePassEncoder p, WGPUComputePipeline pipe) { js_set_pipeline(H(p), H(pipe)); }
static void set_bind_group(WGPUComputePassEncoder p, uint32_t i, WGPUBindGroup g, size_t n, const uint32_t *offs) {
  js_set_bind_group(H(p), i, H(g), offs, n);
}
static void dispatch(WGPUComputePassEncoder p, uint32_t x, uint32_t y, uint32_t z) { js_dispatch(H(p), x, y, z); }
static void end_pass(WGPUComputePassEncoder p) { js_end_pass(H(p)); }
static void encoder_release(WGPUCommandEncoder e) { release(e); }
static void command_buffer_release(WGPUCommandBuffer c) { release(c); }
static void pass_release(WGPUComputePassEncoder p) { release(p); }
static void query_set_destroy(WGPUQuerySet q) { js_destroy(H(q)); }
static void query_set_release(WGPUQuerySet q) { release(q); }

/* ---- the table wisp uses (wgpu_loader.h) -------------------------------- */
static const wisp_wgpu_api k_api = {
  .CreateInstance = create_instance,
  .InstanceRequestAdapter = request_adapter,
  .InstanceProcessEvents = process_events,
  .InstanceRelease = instance_release,
  .AdapterGetInfo = adapter_get_info,
  .AdapterInfoFreeMembers = adapter_info_free,
  .AdapterGetLimits = adapter_get_limits,
  .AdapterGetFeatures = adapter_get_features,
  .AdapterRequestDevice = request_device,
  .AdapterRelease = adapter_release,
  .SupportedFeaturesFreeMembers = features_free,
  .DeviceGetLimits = device_get_limits,
  .DeviceGetFeatures = device_get_features,
  .DeviceHasFeature = device_has_feature,
  .DeviceGetQueue = device_get_queue,
  .DeviceCreateBuffer = create_buffer,
  .DeviceCreateShaderModule = create_shader,
  .DeviceCreateComputePipeline = create_pipeline,
  .DeviceCreateBindGroup = create_bind_group,
  .DeviceCreateCommandEncoder = create_encoder,
  .DeviceCreateQuerySet = create_query_set,
  .DevicePushErrorScope = push_error_scope,
  .DevicePopErrorScope = pop_error_scope,
  .DeviceDestroy = device_destroy,
  .DeviceRelease = device_release,
  .QueueSubmit = queue_submit,
  .QueueWriteBuffer = queue_write,
  .QueueRelease = queue_release,
  .BufferMapAsync = map_async,
  .BufferGetConstMappedRange = get_mapped,
  .BufferUnmap = unmap,
  .BufferGetSize = buffer_size,
  .BufferDestroy = buffer_destroy,
  .BufferRelease = buffer_release,
  .ShaderModuleRelease = shader_release,
  .ComputePipelineGetBindGroupLayout = bind_group_layout,
  .ComputePipelineRelease = pipeline_release,
  .BindGroupLayoutRelease = layout_release,
  .BindGroupRelease = bind_group_release,
  .CommandEncoderBeginComputePass = begin_pass,
  .CommandEncoderCopyBufferToBuffer = copy_buffer,
  .CommandEncoderResolveQuerySet = resolve_query_set,
  .CommandEncoderFinish = finish,
  .CommandEncoderRelease = encoder_release,
  .CommandBufferRelease = command_buffer_release,
  .ComputePassEncoderSetPipeline = set_pipeline,
  .ComputePassEncoderSetBindGroup = set_bind_group,
  .ComputePassEncoderDispatchWorkgroups = dispatch,
  .ComputePassEncoderEnd = end_pass,
  .ComputePassEncoderRelease = pass_release,
  .QuerySetDestroy = query_set_destroy,
  .QuerySetRelease = query_set_release,
};

wisp_status wisp_wgpu_load(const wisp_wgpu_api **out) {
  if (out) *out = &k_api;
  return WISP_OK;
}
const wisp_wgpu_api *wisp_wgpu(void) { return &k_api; }
wisp_status wisp_wgpu_find_in(const char *root, char *path, size_t cap) {
  (void)root;
  if (cap) path[0] = 0;
  return wisp_fail(WISP_EDEVICE, "the browser build has no WebGPU library to find: the page's navigator.gpu is used");
}
const char *wisp_wgpu_lib_path(void) { return "navigator.gpu (the browser's WebGPU)"; }
