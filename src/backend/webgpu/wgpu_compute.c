/* Buffers, kernels, bind groups and batches; see wgpu_compute.h. */
#include "backend/webgpu/wgpu_compute.h"
#include "backend/webgpu/wgpu_profile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/err.h"

static uint64_t round4(uint64_t n) { return (n + 3u) & ~(uint64_t)3u; }
static wisp_status map_wait(wisp_wgpu_device *d, WGPUBuffer staging, uint64_t size);

/* ---- buffers ------------------------------------------------------------ */

static wisp_status raw_buffer(wisp_wgpu_device *d, uint64_t size, WGPUBufferUsage usage, const char *label,
                              WGPUBuffer *out) {
  WGPUBufferDescriptor bd;
  memset(&bd, 0, sizeof bd);
  bd.label = wisp_wgpu_str(label);
  bd.usage = usage;
  bd.size = size;
  wisp_wgpu_scope_begin(d);
  WGPUBuffer b = d->api->DeviceCreateBuffer(d->device, &bd);
  wisp_status st = wisp_wgpu_scope_end(d, "WebGPU: creating buffer");
  if (st) {
    if (b) d->api->BufferRelease(b);
    wisp_error_prefix("%s (%llu bytes)", label ? label : "buffer", (unsigned long long)size);
    return st;
  }
  if (!b) return wisp_fail(WISP_EDEVICE, "WebGPU: could not create buffer %s of %llu bytes",
                           label ? label : "", (unsigned long long)size);
  *out = b;
  return WISP_OK;
}

/* ---- debug guard (wgpu_compute.h) ---------------------------------------- */

struct wisp_wgpu_guarded {
  WGPUBuffer b;
  uint64_t size; /* where the padding starts */
  char label[40];
};

/* Writes the sentinel over the padding of b after `size` bytes. */
static void guard_fill(wisp_wgpu_device *d, WGPUBuffer b, uint64_t size) {
  uint32_t words[1024];
  for (size_t i = 0; i < sizeof words / 4; i++) words[i] = WISP_WGPU_GUARD_WORD;
  for (uint64_t o = 0; o < d->guard_bytes; o += sizeof words) {
    uint64_t n = d->guard_bytes - o < sizeof words ? d->guard_bytes - o : sizeof words;
    d->api->QueueWriteBuffer(d->queue, b, size + o, words, (size_t)n);
  }
}

static wisp_status guard_add(wisp_wgpu_device *d, WGPUBuffer b, uint64_t size, const char *label) {
  if (d->n_guarded == d->cap_guarded) {
    int cap = d->cap_guarded ? 2 * d->cap_guarded : 256;
    struct wisp_wgpu_guarded *g = realloc(d->guarded, (size_t)cap * sizeof *g);
    if (!g) return wisp_fail(WISP_ENOMEM, "WebGPU: out of memory");
    d->guarded = g;
    d->cap_guarded = cap;
  }
  struct wisp_wgpu_guarded *e = &d->guarded[d->n_guarded++];
  e->b = b;
  e->size = size;
  snprintf(e->label, sizeof e->label, "%s", label ? label : "buffer");
  guard_fill(d, b, size);
  return WISP_OK;
}

static void guard_remove(wisp_wgpu_device *d, WGPUBuffer b) {
  for (int i = 0; i < d->n_guarded; i++)
    if (d->guarded[i].b == b) {
      d->guarded[i] = d->guarded[--d->n_guarded];
      return;
    }
}

uint64_t wisp_wgpu_buffer_data_size(const wisp_wgpu_device *d, WGPUBuffer b) {
  for (int i = 0; i < d->n_guarded; i++)
    if (d->guarded[i].b == b) return d->guarded[i].size;
  return d->api->BufferGetSize(b);
}

wisp_status wisp_wgpu_guard_check(wisp_wgpu_device *d) {
  if (!d->guard_bytes || !d->n_guarded) return WISP_OK;
  const wisp_wgpu_api *w = d->api;
  const uint64_t gb = d->guard_bytes, total = gb * (uint64_t)d->n_guarded;
  WGPUBuffer staging;
  wisp_status st = raw_buffer(d, total, WGPUBufferUsage_MapRead | WGPUBufferUsage_CopyDst, "wisp guard readback",
                              &staging);
  if (st) return st;
  WGPUCommandEncoderDescriptor ed = {NULL, wisp_wgpu_str("wisp guard check")};
  WGPUCommandEncoder enc = w->DeviceCreateCommandEncoder(d->device, &ed);
  for (int i = 0; i < d->n_guarded; i++)
    w->CommandEncoderCopyBufferToBuffer(enc, d->guarded[i].b, d->guarded[i].size, staging, gb * (uint64_t)i, gb);
  WGPUCommandBufferDescriptor cd = {NULL, wisp_wgpu_str(NULL)};
  WGPUCommandBuffer cmd = w->CommandEncoderFinish(enc, &cd);
  w->QueueSubmit(d->queue, 1, &cmd);
  w->CommandBufferRelease(cmd);
  w->CommandEncoderRelease(enc);
  st = wisp_wgpu_device_check(d);
  if (!st) st = map_wait(d, staging, total);
  if (!st) {
    const uint32_t *p = d->api->BufferGetConstMappedRange(staging, 0, (size_t)total);
    for (int i = 0; p && !st && i < d->n_guarded; i++)
      for (uint64_t k = 0; k < gb / 4; k++) {
        uint32_t v = p[(uint64_t)i * (gb / 4) + k];
        if (v == WISP_WGPU_GUARD_WORD) continue;
        const struct wisp_wgpu_guarded *e = &d->guarded[i];
        st = wisp_fail(WISP_EDEVICE,
                       "WebGPU guard: %s (%llu bytes) was written past its end: word 0x%08x at byte %llu after it",
                       e->label, (unsigned long long)e->size, v, (unsigned long long)(k * 4));
        guard_fill(d, e->b, e->size); /* report each overwrite once */
        break;
      }
    d->api->BufferUnmap(staging);
  }
  w->BufferRelease(staging);
  return st;
}

wisp_status wisp_wgpu_buf_create(wisp_wgpu_device *d, uint64_t size, wisp_wgpu_buf_kind kind,
                                 const char *label, wisp_wgpu_buf *out) {
  memset(out, 0, sizeof *out);
  uint64_t sz = round4(size ? size : 4);
  /* Storage buffers get the debug guard's padding (not counted in size). */
  const uint64_t pad = kind == WISP_WGPU_STORAGE ? d->guard_bytes : 0;
  if (sz + pad > d->info.max_buffer_size)
    return wisp_fail(WISP_EINVAL, "WebGPU: buffer %s of %llu bytes exceeds maxBufferSize %llu",
                     label ? label : "", (unsigned long long)(sz + pad),
                     (unsigned long long)d->info.max_buffer_size);
  WGPUBufferUsage usage = kind == WISP_WGPU_UNIFORM
                              ? (WGPUBufferUsage_Uniform | WGPUBufferUsage_CopyDst)
                              : (WGPUBufferUsage_Storage | WGPUBufferUsage_CopySrc | WGPUBufferUsage_CopyDst);
  wisp_status st = raw_buffer(d, sz + pad, usage, label, &out->b);
  if (st) return st;
  if (pad && (st = guard_add(d, out->b, sz, label))) {
    d->api->BufferRelease(out->b);
    out->b = NULL;
    return st;
  }
  out->size = sz;
  return WISP_OK;
}

wisp_status wisp_wgpu_buf_from(wisp_wgpu_device *d, const void *data, uint64_t size, const char *label,
                               wisp_wgpu_buf *out) {
  wisp_status st = wisp_wgpu_buf_create(d, size, WISP_WGPU_STORAGE, label, out);
  if (st) return st;
  st = wisp_wgpu_buf_write(d, *out, 0, data, size);
  if (st) wisp_wgpu_buf_free(d, out);
  return st;
}

wisp_status wisp_wgpu_buf_write(wisp_wgpu_device *d, wisp_wgpu_buf buf, uint64_t offset, const void *data,
                                size_t size) {
  if (offset % 4)
    return wisp_fail(WISP_EINVAL, "WebGPU: buffer write offset %llu is not a multiple of 4",
                     (unsigned long long)offset);
  if (offset > buf.size || round4(size) > buf.size - offset)
    return wisp_fail(WISP_EINVAL, "WebGPU: write of %zu bytes at %llu past the end of a %llu-byte buffer",
                     size, (unsigned long long)offset, (unsigned long long)buf.size);
  size_t head = size & ~(size_t)3;
  if (head) d->api->QueueWriteBuffer(d->queue, buf.b, offset, data, head);
  if (size > head) {
    unsigned char tail[4] = {0, 0, 0, 0};
    memcpy(tail, (const unsigned char *)data + head, size - head);
    d->api->QueueWriteBuffer(d->queue, buf.b, offset + head, tail, 4);
  }
  return wisp_wgpu_device_check(d);
}

typedef struct {
  volatile int done;
  WGPUMapAsyncStatus status;
  char message[512];
} map_req;

static void on_map(WGPUMapAsyncStatus status, WGPUStringView message, void *u1, void *u2) {
  (void)u2;
  map_req *r = u1;
  r->status = status;
  size_t n = message.data ? (message.length == WGPU_STRLEN ? strlen(message.data) : message.length) : 0;
  if (n >= sizeof r->message) n = sizeof r->message - 1;
  if (n) memcpy(r->message, message.data, n);
  r->message[n] = 0;
  r->done = 1;
}

/* Maps the first `size` bytes of a MapRead buffer and waits. */
static wisp_status map_wait(wisp_wgpu_device *d, WGPUBuffer staging, uint64_t size) {
  map_req r;
  memset(&r, 0, sizeof r);
  WGPUBufferMapCallbackInfo cb = {NULL, WGPUCallbackMode_AllowProcessEvents, on_map, &r, NULL};
  d->api->BufferMapAsync(staging, WGPUMapMode_Read, 0, (size_t)size, cb);
  wisp_status st = wisp_wgpu_wait_flag(d, &r.done, "a buffer readback");
  if (st) return st;
  if (r.status != WGPUMapAsyncStatus_Success)
    return wisp_fail(WISP_EDEVICE, "WebGPU: mapping a readback buffer failed (status %d): %s",
                     (int)r.status, r.message);
  return WISP_OK;
}

wisp_status wisp_wgpu_staging_read(wisp_wgpu_device *d, wisp_wgpu_buf staging, void *dst, size_t size) {
  if (round4(size) > staging.size)
    return wisp_fail(WISP_EINVAL, "WebGPU: read of %zu bytes from a %llu-byte staging buffer", size,
                     (unsigned long long)staging.size);
  if (size == 0) return WISP_OK;
  uint64_t sz = round4(size);
  wisp_status st = map_wait(d, staging.b, sz);
  if (st) return st;
  const void *p = d->api->BufferGetConstMappedRange(staging.b, 0, (size_t)sz);
  if (p) memcpy(dst, p, size);
  else st = wisp_fail(WISP_EDEVICE, "WebGPU: mapped readback range is NULL");
  d->api->BufferUnmap(staging.b);
  return st;
}

/* Copies `size` (multiple of 4) bytes from src@offset into `staging` (a
 * MapRead buffer), submits, maps it and waits. On success the caller reads
 * the mapped range and unmaps. */
static wisp_status copy_and_map(wisp_wgpu_device *d, WGPUBuffer src, uint64_t offset, WGPUBuffer staging,
                                uint64_t size) {
  const wisp_wgpu_api *w = d->api;
  WGPUCommandEncoderDescriptor ed = {NULL, wisp_wgpu_str("wisp readback")};
  WGPUCommandEncoder enc = w->DeviceCreateCommandEncoder(d->device, &ed);
  w->CommandEncoderCopyBufferToBuffer(enc, src, offset, staging, 0, size);
  WGPUCommandBufferDescriptor cd = {NULL, wisp_wgpu_str(NULL)};
  WGPUCommandBuffer cmd = w->CommandEncoderFinish(enc, &cd);
  w->QueueSubmit(d->queue, 1, &cmd);
  w->CommandBufferRelease(cmd);
  w->CommandEncoderRelease(enc);
  wisp_status st = wisp_wgpu_device_check(d);
  if (st) return st;
  return map_wait(d, staging, size);
}

wisp_status wisp_wgpu_buf_read(wisp_wgpu_device *d, wisp_wgpu_buf buf, uint64_t offset, void *dst,
                               size_t size) {
  if (offset % 4)
    return wisp_fail(WISP_EINVAL, "WebGPU: buffer read offset %llu is not a multiple of 4",
                     (unsigned long long)offset);
  if (offset > buf.size || round4(size) > buf.size - offset)
    return wisp_fail(WISP_EINVAL, "WebGPU: read of %zu bytes at %llu past the end of a %llu-byte buffer",
                     size, (unsigned long long)offset, (unsigned long long)buf.size);
  if (size == 0) return WISP_OK;
  uint64_t sz = round4(size);
  WGPUBuffer staging;
  wisp_status st =
      raw_buffer(d, sz, WGPUBufferUsage_MapRead | WGPUBufferUsage_CopyDst, "wisp staging", &staging);
  if (st) return st;
  st = copy_and_map(d, buf.b, offset, staging, sz);
  if (!st) {
    const void *p = d->api->BufferGetConstMappedRange(staging, 0, (size_t)sz);
    if (p) memcpy(dst, p, size);
    else st = wisp_fail(WISP_EDEVICE, "WebGPU: mapped readback range is NULL");
    d->api->BufferUnmap(staging);
  }
  d->api->BufferRelease(staging);
  return st;
}

wisp_status wisp_wgpu_staging_reserve(wisp_wgpu_device *d, wisp_wgpu_buf *staging, uint64_t size) {
  uint64_t sz = round4(size);
  if (staging->b && staging->size >= sz) return WISP_OK;
  if (staging->b) {
    d->api->BufferRelease(staging->b);
    staging->b = NULL;
    staging->size = 0;
  }
  uint64_t want = (sz + 65535u) & ~(uint64_t)65535u;
  wisp_status st = raw_buffer(d, want, WGPUBufferUsage_MapRead | WGPUBufferUsage_CopyDst, "wisp staging", &staging->b);
  if (st) return st;
  staging->size = want;
  return WISP_OK;
}

wisp_status wisp_wgpu_buf_read_via(wisp_wgpu_device *d, wisp_wgpu_buf buf, uint64_t offset, void *dst, size_t size,
                                   wisp_wgpu_buf *staging) {
  if (offset % 4)
    return wisp_fail(WISP_EINVAL, "WebGPU: buffer read offset %llu is not a multiple of 4",
                     (unsigned long long)offset);
  if (offset > buf.size || round4(size) > buf.size - offset)
    return wisp_fail(WISP_EINVAL, "WebGPU: read of %zu bytes at %llu past the end of a %llu-byte buffer",
                     size, (unsigned long long)offset, (unsigned long long)buf.size);
  if (size == 0) return WISP_OK;
  uint64_t sz = round4(size);
  wisp_status st = wisp_wgpu_staging_reserve(d, staging, sz);
  if (st) return st;
  st = copy_and_map(d, buf.b, offset, staging->b, sz);
  if (!st) {
    const void *p = d->api->BufferGetConstMappedRange(staging->b, 0, (size_t)sz);
    if (p) memcpy(dst, p, size);
    else st = wisp_fail(WISP_EDEVICE, "WebGPU: mapped readback range is NULL");
    d->api->BufferUnmap(staging->b);
  }
  return st;
}

void wisp_wgpu_buf_free(wisp_wgpu_device *d, wisp_wgpu_buf *buf) {
  if (!buf || !buf->b) return;
  if (d->guard_bytes) guard_remove(d, buf->b);
  d->api->BufferDestroy(buf->b);
  d->api->BufferRelease(buf->b);
  buf->b = NULL;
  buf->size = 0;
}

wisp_status wisp_wgpu_finish(wisp_wgpu_device *d) {
  /* Queue work completes in submission order, so once a copy submitted now
   * can be mapped, everything submitted before it has finished. */
  wisp_status st;
  if (!d->fence_src) {
    st = raw_buffer(d, 4, WGPUBufferUsage_Storage | WGPUBufferUsage_CopySrc, "wisp fence", &d->fence_src);
    if (st) return st;
  }
  if (!d->fence_dst) {
    st = raw_buffer(d, 4, WGPUBufferUsage_MapRead | WGPUBufferUsage_CopyDst, "wisp fence readback",
                    &d->fence_dst);
    if (st) return st;
  }
  st = copy_and_map(d, d->fence_src, 0, d->fence_dst, 4);
  if (!st) d->api->BufferUnmap(d->fence_dst);
  return st ? st : wisp_wgpu_device_check(d);
}

/* ---- kernels ------------------------------------------------------------- */

wisp_status wisp_wgpu_shader_create(wisp_wgpu_device *d, const char *wgsl, const char *label,
                                    WGPUShaderModule *out) {
  *out = NULL;
  WGPUShaderSourceWGSL src;
  memset(&src, 0, sizeof src);
  src.chain.sType = WGPUSType_ShaderSourceWGSL;
  src.code = wisp_wgpu_str(wgsl);
  WGPUShaderModuleDescriptor md;
  memset(&md, 0, sizeof md);
  md.nextInChain = &src.chain;
  md.label = wisp_wgpu_str(label);
  char what[128];
  snprintf(what, sizeof what, "WebGPU: compiling WGSL %s", label ? label : "shader");
  wisp_wgpu_scope_begin(d);
  WGPUShaderModule m = d->api->DeviceCreateShaderModule(d->device, &md);
  wisp_status st = wisp_wgpu_scope_end(d, what);
  if (st) {
    if (m) d->api->ShaderModuleRelease(m);
    return st;
  }
  if (!m) return wisp_fail(WISP_EDEVICE, "%s: no module returned", what);
  *out = m;
  return WISP_OK;
}

wisp_status wisp_wgpu_kernel_from_module(wisp_wgpu_device *d, WGPUShaderModule module, const char *entry,
                                         const wisp_wgpu_const *consts, int n_consts, const char *label,
                                         wisp_wgpu_kernel **out) {
  *out = NULL;
  if (n_consts < 0 || n_consts > 64) return wisp_fail(WISP_EINVAL, "WebGPU: %d override constants", n_consts);
  WGPUConstantEntry ce[64];
  for (int i = 0; i < n_consts; i++) {
    memset(&ce[i], 0, sizeof ce[i]);
    ce[i].key = wisp_wgpu_str(consts[i].name);
    ce[i].value = consts[i].value;
  }
  WGPUComputePipelineDescriptor pd;
  memset(&pd, 0, sizeof pd);
  pd.label = wisp_wgpu_str(label);
  pd.layout = NULL;
  pd.compute.module = module;
  pd.compute.entryPoint = wisp_wgpu_str(entry);
  pd.compute.constantCount = (size_t)n_consts;
  pd.compute.constants = n_consts ? ce : NULL;
  char what[128];
  snprintf(what, sizeof what, "WebGPU: creating pipeline %s", label ? label : entry ? entry : "");
  wisp_wgpu_scope_begin(d);
  WGPUComputePipeline p = d->api->DeviceCreateComputePipeline(d->device, &pd);
  wisp_status st = wisp_wgpu_scope_end(d, what);
  if (st) {
    if (p) d->api->ComputePipelineRelease(p);
    return st;
  }
  if (!p) return wisp_fail(WISP_EDEVICE, "%s: no pipeline returned", what);
  wisp_wgpu_kernel *k = calloc(1, sizeof *k);
  if (!k) {
    d->api->ComputePipelineRelease(p);
    return wisp_fail(WISP_ENOMEM, "WebGPU: out of memory");
  }
  k->pipeline = p;
  k->layout = d->api->ComputePipelineGetBindGroupLayout(p, 0);
  snprintf(k->label, sizeof k->label, "%s", label ? label : entry ? entry : "kernel");
  *out = k;
  return WISP_OK;
}

wisp_status wisp_wgpu_kernel_create(wisp_wgpu_device *d, const char *wgsl, const char *entry,
                                    const wisp_wgpu_const *consts, int n_consts, const char *label,
                                    wisp_wgpu_kernel **out) {
  WGPUShaderModule m;
  wisp_status st = wisp_wgpu_shader_create(d, wgsl, label, &m);
  if (st) return st;
  st = wisp_wgpu_kernel_from_module(d, m, entry, consts, n_consts, label, out);
  d->api->ShaderModuleRelease(m);
  return st;
}

void wisp_wgpu_kernel_free(wisp_wgpu_device *d, wisp_wgpu_kernel *k) {
  if (!k) return;
  if (k->layout) d->api->BindGroupLayoutRelease(k->layout);
  if (k->pipeline) d->api->ComputePipelineRelease(k->pipeline);
  free(k);
}

#define SHARED_CONSTS 16

typedef struct wisp_wgpu_shared_kernel {
  const char *wgsl; /* compared by address: the embedded kernels' text */
  char entry[32];
  int nc;
  char names[SHARED_CONSTS][32];
  double values[SHARED_CONSTS];
  wisp_wgpu_kernel *k;
} wisp_wgpu_shared_kernel;

static int same_kernel(const wisp_wgpu_shared_kernel *e, const char *wgsl, const char *entry,
                       const wisp_wgpu_const *c, int nc) {
  if (e->wgsl != wgsl || e->nc != nc || strcmp(e->entry, entry)) return 0;
  for (int i = 0; i < nc; i++)
    if (e->values[i] != c[i].value || strcmp(e->names[i], c[i].name)) return 0;
  return 1;
}

wisp_status wisp_wgpu_kernel_shared(wisp_wgpu_device *d, const char *wgsl, const char *entry,
                                    const wisp_wgpu_const *consts, int n_consts, const char *label,
                                    wisp_wgpu_kernel **out) {
  *out = NULL;
  int fits = n_consts <= SHARED_CONSTS && strlen(entry) < sizeof d->shared[0].entry;
  for (int i = 0; fits && i < n_consts; i++) fits = strlen(consts[i].name) < sizeof d->shared[0].names[0];
  if (!fits) return wisp_fail(WISP_EINVAL, "WebGPU: kernel %s: too many or too long constants to share", label);
  for (int i = 0; i < d->n_shared; i++)
    if (same_kernel(&d->shared[i], wgsl, entry, consts, n_consts)) {
      *out = d->shared[i].k;
      return WISP_OK;
    }
  wisp_status st = wisp_wgpu_kernel_create(d, wgsl, entry, consts, n_consts, label, out);
  if (st) return st;
  if (d->n_shared == d->cap_shared) {
    int cap = d->cap_shared ? 2 * d->cap_shared : 64;
    wisp_wgpu_shared_kernel *grown = realloc(d->shared, sizeof *grown * (size_t)cap);
    if (!grown) {
      wisp_wgpu_kernel_free(d, *out);
      *out = NULL;
      return wisp_fail(WISP_ENOMEM, "out of memory");
    }
    d->shared = grown;
    d->cap_shared = cap;
  }
  wisp_wgpu_shared_kernel *e = &d->shared[d->n_shared++];
  memset(e, 0, sizeof *e);
  e->wgsl = wgsl;
  snprintf(e->entry, sizeof e->entry, "%s", entry);
  e->nc = n_consts;
  for (int i = 0; i < n_consts; i++) {
    snprintf(e->names[i], sizeof e->names[i], "%s", consts[i].name);
    e->values[i] = consts[i].value;
  }
  e->k = *out;
  return WISP_OK;
}

void wisp_wgpu_shared_kernels_free(wisp_wgpu_device *d) {
  for (int i = 0; i < d->n_shared; i++) wisp_wgpu_kernel_free(d, d->shared[i].k);
  free(d->shared);
  d->shared = NULL;
  d->n_shared = d->cap_shared = 0;
}

/* ---- bind groups --------------------------------------------------------- */

wisp_status wisp_wgpu_bind(wisp_wgpu_device *d, const wisp_wgpu_kernel *k, const wisp_wgpu_binding *bindings,
                           int n, WGPUBindGroup *out) {
  *out = NULL;
  if (n < 0 || n > 32) return wisp_fail(WISP_EINVAL, "WebGPU: %d bindings (at most 32)", n);
  WGPUBindGroupEntry e[32];
  for (int i = 0; i < n; i++) {
    memset(&e[i], 0, sizeof e[i]);
    e[i].binding = (uint32_t)i;
    e[i].buffer = bindings[i].buffer;
    e[i].offset = bindings[i].offset;
    e[i].size = bindings[i].size ? bindings[i].size : WGPU_WHOLE_SIZE;
  }
  WGPUBindGroupDescriptor bd;
  memset(&bd, 0, sizeof bd);
  bd.label = wisp_wgpu_str(k->label);
  bd.layout = k->layout;
  bd.entryCount = (size_t)n;
  bd.entries = e;
  char what[128];
  snprintf(what, sizeof what, "WebGPU: binding buffers for %s", k->label);
  wisp_wgpu_scope_begin(d);
  WGPUBindGroup g = d->api->DeviceCreateBindGroup(d->device, &bd);
  wisp_status st = wisp_wgpu_scope_end(d, what);
  if (st) {
    if (g) d->api->BindGroupRelease(g);
    return st;
  }
  *out = g;
  return WISP_OK;
}

void wisp_wgpu_bind_free(wisp_wgpu_device *d, WGPUBindGroup g) {
  if (g) d->api->BindGroupRelease(g);
}

/* ---- batches ------------------------------------------------------------- */

wisp_status wisp_wgpu_batch_begin(wisp_wgpu_device *d, wisp_wgpu_batch *b) {
  memset(b, 0, sizeof *b);
  b->d = d;
  WGPUCommandEncoderDescriptor ed = {NULL, wisp_wgpu_str("wisp batch")};
  b->enc = d->api->DeviceCreateCommandEncoder(d->device, &ed);
  if (!b->enc) return wisp_fail(WISP_EDEVICE, "WebGPU: could not create a command encoder");
  if (d->profile) return WISP_OK; /* one pass per dispatch, opened by wisp_wgpu_batch_dispatch */
  WGPUComputePassDescriptor pd;
  memset(&pd, 0, sizeof pd);
  b->pass = d->api->CommandEncoderBeginComputePass(b->enc, &pd);
  if (!b->pass) {
    d->api->CommandEncoderRelease(b->enc);
    b->enc = NULL;
    return wisp_fail(WISP_EDEVICE, "WebGPU: could not begin a compute pass");
  }
  return WISP_OK;
}

void wisp_wgpu_batch_dispatch(wisp_wgpu_batch *b, const wisp_wgpu_kernel *k, WGPUBindGroup g, uint32_t x,
                              uint32_t y, uint32_t z) {
  const wisp_wgpu_api *w = b->d->api;
  if (b->d->profile) { /* a timed pass of its own */
    if (b->pass) {
      w->ComputePassEncoderEnd(b->pass);
      w->ComputePassEncoderRelease(b->pass);
    }
    WGPUComputePassDescriptor pd;
    memset(&pd, 0, sizeof pd);
    pd.timestampWrites = wisp_wgpu_profile_next(b->d->profile, k->label);
    b->pass = w->CommandEncoderBeginComputePass(b->enc, &pd);
    b->current = NULL;
  }
  if (b->current != k->pipeline) {
    w->ComputePassEncoderSetPipeline(b->pass, k->pipeline);
    b->current = k->pipeline;
  }
  w->ComputePassEncoderSetBindGroup(b->pass, 0, g, 0, NULL);
  const int reps = b->d->profile ? wisp_wgpu_profile_repeat(b->d->profile) : 1;
  for (int r = 0; r < reps; r++) w->ComputePassEncoderDispatchWorkgroups(b->pass, x, y ? y : 1, z ? z : 1);
  b->n_dispatches++;
}

wisp_status wisp_wgpu_batch_submit(wisp_wgpu_batch *b) { return wisp_wgpu_batch_submit_copy(b, NULL, 0, NULL, 0, 0); }

wisp_status wisp_wgpu_batch_submit_copy(wisp_wgpu_batch *b, WGPUBuffer src, uint64_t src_off, WGPUBuffer dst,
                                        uint64_t dst_off, uint64_t size) {
  wisp_wgpu_device *d = b->d;
  const wisp_wgpu_api *w = d->api;
  if (!b->enc) return wisp_fail(WISP_EINVAL, "WebGPU: batch was not begun");
  if (b->pass) {
    w->ComputePassEncoderEnd(b->pass);
    w->ComputePassEncoderRelease(b->pass);
  }
  if (d->profile) wisp_wgpu_profile_resolve(d->profile, b->enc);
  if (src && dst && size) w->CommandEncoderCopyBufferToBuffer(b->enc, src, src_off, dst, dst_off, size);
  WGPUCommandBufferDescriptor cd = {NULL, wisp_wgpu_str(NULL)};
  WGPUCommandBuffer cmd = w->CommandEncoderFinish(b->enc, &cd);
  w->CommandEncoderRelease(b->enc);
  b->enc = NULL;
  b->pass = NULL;
  if (cmd) {
    w->QueueSubmit(d->queue, 1, &cmd);
    w->CommandBufferRelease(cmd);
  }
  wisp_status st = wisp_wgpu_device_check(d);
  if (!st && d->profile) st = wisp_wgpu_profile_collect(d->profile);
  if (st) wisp_error_prefix("batch of %d dispatches", b->n_dispatches);
  return st;
}

void wisp_wgpu_batch_abort(wisp_wgpu_batch *b) {
  if (!b->enc) return;
  const wisp_wgpu_api *w = b->d->api;
  if (b->pass) {
    w->ComputePassEncoderEnd(b->pass);
    w->ComputePassEncoderRelease(b->pass);
  }
  if (b->d->profile) wisp_wgpu_profile_discard(b->d->profile);
  w->CommandEncoderRelease(b->enc);
  b->enc = NULL;
  b->pass = NULL;
}

void wisp_wgpu_grid(const wisp_wgpu_device *d, uint32_t n, uint32_t *x, uint32_t *y) {
  uint32_t maxd = d->info.max_compute_workgroups_per_dimension ? d->info.max_compute_workgroups_per_dimension
                                                               : 65535u;
  if (n <= maxd) {
    *x = n ? n : 1;
    *y = 1;
    return;
  }
  *y = (n + maxd - 1) / maxd;
  *x = (n + *y - 1) / *y;
}
