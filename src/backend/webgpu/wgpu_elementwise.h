/* Norms and elementwise ops of the WebGPU backend (wgpu_elementwise.c). */
#ifndef WISP_WGPU_ELEMENTWISE_H
#define WISP_WGPU_ELEMENTWISE_H

#include "backend/backend.h"

/* backend.h's embed, embed_id, rmsnorm, swiglu. */
void wisp_wgpu_elementwise_install(wisp_backend *vt);

#endif
