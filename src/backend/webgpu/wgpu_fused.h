/* The graph's fused ops on the WebGPU backend (wgpu_fused.c). */
#ifndef WISP_WGPU_FUSED_H
#define WISP_WGPU_FUSED_H

#include "backend/backend.h"

/* backend.h's matmul_fused. */
void wisp_wgpu_fused_install(wisp_backend *vt);

#endif
