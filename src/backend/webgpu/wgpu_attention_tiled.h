/* The tiled flash-attention prefill of the WebGPU backend
 * (wgpu_attention_tiled.c, kernels/attn_flash_tiled.wgsl), shared by the
 * plain and the gated attention. */
#ifndef WISP_WGPU_ATTENTION_TILED_H
#define WISP_WGPU_ATTENTION_TILED_H

#include "backend/webgpu/wgpu_core.h"

/* The query rows a lane group of attn_flash_tiled.wgsl takes at head dim D
 * (1 or 2; its lanes through *lanes), or 0 when the kernel is not asked
 * for (tuning attnPrefill=2) or the device cannot take that head dim. */
uint32_t wisp_wgpu_attn_tiled_rows(const wgpu_backend *g, int D, uint32_t *lanes);

/* Records attn_flash_tiled.wgsl for n > 1 query tokens at positions
 * pos0.. over the caches kc / vc: q [n][H][D] (unscaled), out [n][H * D].
 * 1 when recorded; 0, with nothing recorded, when it is not asked for
 * (tuning attnPrefill=2) or the device or shape cannot take it: the caller
 * then records attn_flash.wgsl. */
int wisp_wgpu_attn_tiled(wgpu_backend *g, WGPUBuffer q, wisp_wgpu_binding kc, wisp_wgpu_binding vc, WGPUBuffer out,
                         int n, int pos0, int H, int KVH, int D);

#endif
