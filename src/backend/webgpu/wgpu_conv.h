/* Short convolutions of the WebGPU backend (wgpu_conv.c). */
#ifndef WISP_WGPU_CONV_H
#define WISP_WGPU_CONV_H

#include "backend/webgpu/wgpu_core.h"

/* Records matvec_conv.wgsl: bcx = W x' (one part, rows 3 * dim; x' as
 * wisp_wgpu_rec_matvec's pre 0 or 1) and the short conv over it into out,
 * its state updated: the in_proj product and the conv in one dispatch.
 * The caller checks the shapes (wgpu_fused.c). */
void wisp_wgpu_rec_matvec_conv(wgpu_backend *g, const wmat *w, int pre, const wisp_buf *xin, const wvec *nw, float eps,
                               const wisp_buf *xo, wisp_buf *bcx, const wvec *tv, int L, int dim, wisp_buf *state,
                               wisp_buf *out);

/* backend.h's shortconv, shortconv_rows. */
void wisp_wgpu_conv_install(wisp_backend *vt);

#endif
