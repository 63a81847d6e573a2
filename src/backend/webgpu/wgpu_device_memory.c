/* Buffers, readbacks and the debug guard; see wgpu_device_memory.h. */
#include "backend/webgpu/wgpu_device_memory.h"

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
