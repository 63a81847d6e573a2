/* Small compute layer over wisp_wgpu_device: WGSL kernels with
 * override constants, bind groups, and batches (many dispatches recorded in
 * one command encoder / compute pass, submitted once); the buffers are
 * wgpu_device_memory.h's.
 *
 *   wisp_wgpu_const c[] = {{"WG", 64}, {"ROWS", 4}};
 *   wisp_wgpu_kernel *k;
 *   wisp_wgpu_kernel_create(d, wgsl_text, "main", c, 2, "q4_matvec", &k);
 *   wisp_wgpu_buf w = ..., x = ..., y = ...;
 *   WGPUBindGroup g;
 *   wisp_wgpu_bind(d, k, (wisp_wgpu_binding[]){{w.b}, {x.b}, {y.b}}, 3, &g);
 *   wisp_wgpu_batch b;
 *   wisp_wgpu_batch_begin(d, &b);
 *   wisp_wgpu_batch_dispatch(&b, k, g, nwg, 1, 1);   // as many as needed
 *   wisp_wgpu_batch_submit(&b);
 *   wisp_wgpu_buf_read(d, y, 0, host, bytes);        // waits for the GPU
 *
 * Binding i of a bind group is @binding(i) of @group(0). Pipelines use the
 * layout derived from the shader ("auto"), so every declared binding must be
 * used by the entry point. All calls return WISP_OK or WISP_EDEVICE/EINVAL
 * with a one-line message (wisp_last_error()). */
#ifndef WISP_WGPU_COMPUTE_H
#define WISP_WGPU_COMPUTE_H

#include <stddef.h>
#include <stdint.h>

#include "backend/webgpu/wgpu_device.h"

#include "backend/webgpu/wgpu_device_memory.h"

/* ---- kernels ------------------------------------------------------------- */
typedef struct wisp_wgpu_const {
  const char *name; /* a WGSL `override` identifier (or @id number as text) */
  double value;
} wisp_wgpu_const;

typedef struct wisp_wgpu_kernel {
  WGPUComputePipeline pipeline;
  WGPUBindGroupLayout layout; /* group 0 */
  char label[64];
  /* Geometry chosen through override constants, kept for the host side
   * (set by the kernel-specific constructors in wgpu_kernels.c). */
  uint32_t wg;          /* threads per workgroup */
  uint32_t rows_per_wg; /* rows per workgroup (1 when not applicable) */
} wisp_wgpu_kernel;

/* Compiles WGSL; a compilation error fails with Dawn's message, which names
 * the line and column (":12:5 error: ..."), folded onto one line. */
wisp_status wisp_wgpu_shader_create(wisp_wgpu_device *d, const char *wgsl, const char *label,
                                    WGPUShaderModule *out);
/* A compute pipeline for `entry` of `module` with override constants. */
wisp_status wisp_wgpu_kernel_from_module(wisp_wgpu_device *d, WGPUShaderModule module, const char *entry,
                                         const wisp_wgpu_const *consts, int n_consts, const char *label,
                                         wisp_wgpu_kernel **out);
/* Both steps at once. */
wisp_status wisp_wgpu_kernel_create(wisp_wgpu_device *d, const char *wgsl, const char *entry,
                                    const wisp_wgpu_const *consts, int n_consts, const char *label,
                                    wisp_wgpu_kernel **out);
void wisp_wgpu_kernel_free(wisp_wgpu_device *d, wisp_wgpu_kernel *k);
/* The same pipeline, made once per device: a later call with the same
 * source text (the same pointer: the embedded kernels), entry and override
 * constants gets the kernel made first, so that backends opened one after
 * another on one device (the test suite's shared device) compile each
 * kernel once. The device owns it (wisp_wgpu_device_close frees it): never
 * pass it to wisp_wgpu_kernel_free. */
wisp_status wisp_wgpu_kernel_shared(wisp_wgpu_device *d, const char *wgsl, const char *entry,
                                    const wisp_wgpu_const *consts, int n_consts, const char *label,
                                    wisp_wgpu_kernel **out);
/* Frees the device's shared kernels (wisp_wgpu_device_close). */
void wisp_wgpu_shared_kernels_free(wisp_wgpu_device *d);

/* ---- bind groups --------------------------------------------------------- */
typedef struct wisp_wgpu_binding {
  WGPUBuffer buffer;
  uint64_t offset; /* multiple of minStorageBufferOffsetAlignment */
  uint64_t size;   /* 0 = to the end of the buffer */
} wisp_wgpu_binding;

/* bindings[i] becomes @group(0) @binding(i). */
wisp_status wisp_wgpu_bind(wisp_wgpu_device *d, const wisp_wgpu_kernel *k, const wisp_wgpu_binding *bindings,
                           int n, WGPUBindGroup *out);
void wisp_wgpu_bind_free(wisp_wgpu_device *d, WGPUBindGroup g);

/* ---- batches ------------------------------------------------------------- */
typedef struct wisp_wgpu_batch {
  wisp_wgpu_device *d;
  WGPUCommandEncoder enc;
  WGPUComputePassEncoder pass;
  WGPUComputePipeline current;
  int n_dispatches;
} wisp_wgpu_batch;

/* Opens a command encoder and a compute pass. */
wisp_status wisp_wgpu_batch_begin(wisp_wgpu_device *d, wisp_wgpu_batch *b);
/* Records one dispatch (x*y*z workgroups). Dispatches run in order; storage
 * writes of one are visible to the next. */
void wisp_wgpu_batch_dispatch(wisp_wgpu_batch *b, const wisp_wgpu_kernel *k, WGPUBindGroup g, uint32_t x,
                              uint32_t y, uint32_t z);
/* Ends the pass, submits once, releases the encoder; reports validation
 * errors recorded while encoding. Does not wait for the GPU. */
wisp_status wisp_wgpu_batch_submit(wisp_wgpu_batch *b);
/* The same, with a buffer copy recorded after the compute pass (e.g. into a
 * staging buffer, so that a readback needs no submit of its own). */
wisp_status wisp_wgpu_batch_submit_copy(wisp_wgpu_batch *b, WGPUBuffer src, uint64_t src_off, WGPUBuffer dst,
                                        uint64_t dst_off, uint64_t size);
/* Drops a batch without submitting it. */
void wisp_wgpu_batch_abort(wisp_wgpu_batch *b);


/* Splits n workgroups into a grid x*y with x <= the per-dimension limit
 * (kernels rebuild the linear id as wid.x + wid.y * nwg.x and skip ids >= n). */
void wisp_wgpu_grid(const wisp_wgpu_device *d, uint32_t n, uint32_t *x, uint32_t *y);

#endif
