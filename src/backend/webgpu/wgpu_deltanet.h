/* Gated DeltaNet of the WebGPU backend (wgpu_deltanet.c). */
#ifndef WISP_WGPU_DELTANET_H
#define WISP_WGPU_DELTANET_H

#include "backend/webgpu/wgpu_core.h"

/* Records the Gated DeltaNet op; with tail non-NULL, the gated norm of split
 * heads it leaves to the product that reads a->out (kind 1); else that step
 * is recorded here (the backend.h op). */
void wisp_wgpu_deltanet_rec(wisp_backend *be, const wisp_deltanet_args *a, wisp_wgpu_tail *tail);

/* backend.h's gated_deltanet, gated_deltanet_rows. */
void wisp_wgpu_deltanet_install(wisp_backend *vt);
/* Frees its scratch buffers (destroy). */
void wisp_wgpu_deltanet_free(wisp_backend *be);

#endif
