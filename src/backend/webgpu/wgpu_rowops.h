/* Elementwise row ops of the WebGPU backend (wgpu_rowops.c). */
#ifndef WISP_WGPU_ROWOPS_H
#define WISP_WGPU_ROWOPS_H

#include "backend/backend.h"

/* backend.h's geglu, add_bias, add, scale. */
void wisp_wgpu_rowops_install(wisp_backend *vt);

#endif
