/* One-token attention over many keys (kernels/attn_decode_long.wgsl): a
 * workgroup per KV head and split, every query head of the group at once,
 * shared by the plain and the gated attention. */
#ifndef WISP_WGPU_ATTENTION_LONG_H
#define WISP_WGPU_ATTENTION_LONG_H

#include "backend/webgpu/wgpu_core.h"

/* Whether the one-token attention of the token at position pos (win the
 * sliding window, 0: none) takes attn_decode_long.wgsl: asked for (tuning
 * attnLong, the keys it attends at or over its KEYS), the device has
 * subgroups, and the shape fits it (G = H / KVH <= 8, G * D <= 1024,
 * D % 16 == 0). */
int wisp_wgpu_attn_long_wanted(const wgpu_backend *g, int pos, int win, int H, int KVH, int D);

/* Records it for the token at position pos (its k and v already in the
 * caches kc / vc, q [H][D] rotated and normed, unscaled) into the split
 * partials in *part (made large enough here: part[(h * splits + z) *
 * (D + 2)], attn_combine's layout), win the sliding window (0: none). The
 * number of splits, which the caller merges (attn_combine or
 * attn_gated_combine); 0 when it failed (the op's error is set). */
uint32_t wisp_wgpu_attn_long(wgpu_backend *g, WGPUBuffer q, wisp_wgpu_binding kc, wisp_wgpu_binding vc,
                             wisp_wgpu_buf *part, int pos, int win, int H, int KVH, int D, float scale);

#endif
