/* Buffers on a wisp_wgpu_device: creation, queue writes, readbacks through
 * mappable staging buffers, and the debug guard. The layer under the
 * compute layer (wgpu_compute.h) and the profiler (wgpu_profile.h). All
 * calls return WISP_OK or WISP_EDEVICE/EINVAL with a one-line message
 * (wisp_last_error()). */
#ifndef WISP_WGPU_DEVICE_MEMORY_H
#define WISP_WGPU_DEVICE_MEMORY_H

#include <stddef.h>
#include <stdint.h>

#include "backend/webgpu/wgpu_device.h"

typedef enum {
  WISP_WGPU_STORAGE = 0, /* storage | copy-src | copy-dst (the default) */
  WISP_WGPU_UNIFORM = 1  /* uniform | copy-dst (small parameter blocks) */
} wisp_wgpu_buf_kind;

typedef struct wisp_wgpu_buf {
  WGPUBuffer b;
  uint64_t size; /* bytes, a multiple of 4 */
} wisp_wgpu_buf;

/* Creates a zero-filled buffer of `size` bytes (rounded up to 4). */
wisp_status wisp_wgpu_buf_create(wisp_wgpu_device *d, uint64_t size, wisp_wgpu_buf_kind kind,
                                 const char *label, wisp_wgpu_buf *out);
/* Creates a storage buffer holding `size` bytes of `data`. */
wisp_status wisp_wgpu_buf_from(wisp_wgpu_device *d, const void *data, uint64_t size, const char *label,
                               wisp_wgpu_buf *out);
/* Queues a write (wgpuQueueWriteBuffer: ordered before later submits; `data`
 * may be reused on return). offset must be a multiple of 4; a size that is
 * not is padded with zero bytes within the buffer. */
wisp_status wisp_wgpu_buf_write(wisp_wgpu_device *d, wisp_wgpu_buf buf, uint64_t offset,
                                const void *data, size_t size);
/* Copies bytes back to the host through a mappable staging buffer; waits for
 * all work submitted before. offset must be a multiple of 4. */
wisp_status wisp_wgpu_buf_read(wisp_wgpu_device *d, wisp_wgpu_buf buf, uint64_t offset, void *dst,
                               size_t size);
/* The same through a staging buffer the caller keeps (zero-initialised
 * wisp_wgpu_buf; created or grown here, released with wisp_wgpu_buf_free),
 * so that repeated reads create no buffer. */
wisp_status wisp_wgpu_buf_read_via(wisp_wgpu_device *d, wisp_wgpu_buf buf, uint64_t offset, void *dst, size_t size,
                                   wisp_wgpu_buf *staging);
/* Makes a staging (map-read) buffer at least `size` bytes. */
wisp_status wisp_wgpu_staging_reserve(wisp_wgpu_device *d, wisp_wgpu_buf *staging, uint64_t size);
/* Maps the first `size` bytes of a staging buffer filled by earlier
 * submitted work (wisp_wgpu_batch_submit_copy), waits, copies them out and
 * unmaps. */
wisp_status wisp_wgpu_staging_read(wisp_wgpu_device *d, wisp_wgpu_buf staging, void *dst, size_t size);
void wisp_wgpu_buf_free(wisp_wgpu_device *d, wisp_wgpu_buf *buf);

/* Debug guard against out-of-bounds accesses. With d->guard_bytes > 0
 * (wisp_wgpu_device_opts.guard_bytes, or WISP_WEBGPU_GUARD=1 for 4 KiB or
 * =BYTES), every storage buffer is created that many bytes longer than its
 * `size`, the extra bytes filled with WISP_WGPU_GUARD_WORD: a NaN as f32
 * and as both f16 halves, and no valid index as u32. Whole-buffer bindings
 * include the padding, so a kernel that reads past a buffer's data gets NaN
 * (deterministically, with Dawn's robustness transform on or off, instead
 * of a clamped in-bounds element or whatever lies beyond), and one that
 * writes past it changes the padding, which wisp_wgpu_guard_check finds:
 * it waits for submitted work and fails with WISP_EDEVICE naming the first
 * buffer whose padding changed (and refills it). WISP_OK when off. */
#define WISP_WGPU_GUARD_WORD 0xFFC07E00u
wisp_status wisp_wgpu_guard_check(wisp_wgpu_device *d);
/* Bytes of a buffer before the guard's padding (its whole size when off). */
uint64_t wisp_wgpu_buffer_data_size(const wisp_wgpu_device *d, WGPUBuffer b);
/* Waits until all submitted work has finished. */
wisp_status wisp_wgpu_finish(wisp_wgpu_device *d);

#endif
