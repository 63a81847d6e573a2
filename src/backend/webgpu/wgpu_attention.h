/* Attention of the WebGPU backend (wgpu_attention.c). */
#ifndef WISP_WGPU_ATTENTION_H
#define WISP_WGPU_ATTENTION_H

#include "backend/backend.h"

/* backend.h's attention, attention_rows. */
void wisp_wgpu_attention_install(wisp_backend *vt);

#endif
