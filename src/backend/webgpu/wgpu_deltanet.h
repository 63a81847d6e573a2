/* Gated DeltaNet of the WebGPU backend (wgpu_deltanet.c). */
#ifndef WISP_WGPU_DELTANET_H
#define WISP_WGPU_DELTANET_H

#include "backend/backend.h"

/* backend.h's gated_deltanet, gated_deltanet_rows. */
void wisp_wgpu_deltanet_install(wisp_backend *vt);
/* Frees its scratch buffers (destroy). */
void wisp_wgpu_deltanet_free(wisp_backend *be);

#endif
