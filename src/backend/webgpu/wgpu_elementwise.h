/* Norms and elementwise ops of the WebGPU backend (wgpu_elementwise.c). */
#ifndef WISP_WGPU_ELEMENTWISE_H
#define WISP_WGPU_ELEMENTWISE_H

#include "backend/webgpu/wgpu_core.h"

/* Records rmsnorm.wgsl: out = rmsnorm(x) * w over n rows of dim. */
void wisp_wgpu_rec_rmsnorm(wgpu_backend *g, const wisp_buf *x, const wvec *w, float eps, int n, int dim,
                           wisp_buf *out);
/* Records swiglu.wgsl: out[t] = silu(gu[t] gate) * gu[t] up, ffn each. */
void wisp_wgpu_rec_swiglu(wgpu_backend *g, const wisp_buf *gu, int n, int ffn, wisp_buf *out);
/* backend.h's embed, embed_id, rmsnorm, swiglu. */
void wisp_wgpu_elementwise_install(wisp_backend *vt);

#endif
