/* The chunked Gated DeltaNet of the WebGPU backend (wgpu_deltanet_chunked.c):
 * a prefill's recurrence in chunks of WISP_WGPU_DN_CHUNK tokens, the
 * chunkwise-parallel form of the CPU backend's cpu_deltanet.c. */
#ifndef WISP_WGPU_DELTANET_CHUNKED_H
#define WISP_WGPU_DELTANET_CHUNKED_H

#include "backend/backend.h"
#include "backend/webgpu/wgpu_core.h"

/* Tokens a chunk. */
#define WISP_WGPU_DN_CHUNK 64

/* Its scratch, kept across calls (owned by wgpu_deltanet.c's state). */
typedef struct {
  wisp_wgpu_buf prep; /* a wave's prep blocks (dn_chunk_prep.wgsl) */
  wisp_wgpu_buf raw;  /* the call's outputs before the gated norm */
} wisp_wgpu_dn_chunk_bufs;

/* Whether the call takes the chunked form: at least the tuning's
 * dn_chunk_min tokens and a shape its kernels hold. */
int wisp_wgpu_deltanet_chunked_fits(wisp_backend *be, const wisp_deltanet_args *a);

/* Records the recurrence and the gated norm of the call from its conv
 * outputs cv ([n][2K + V], dn_conv.wgsl), the state read from and left in
 * a->state as the token-by-token kernels keep it; al, dt, nw: A_log,
 * dt_bias and the norm weights on the device. Errors are kept (sync). */
void wisp_wgpu_deltanet_chunked(wisp_backend *be, const wisp_deltanet_args *a, WGPUBuffer cv, WGPUBuffer al,
                                WGPUBuffer dt, WGPUBuffer nw, wisp_wgpu_dn_chunk_bufs *bufs);

#endif
