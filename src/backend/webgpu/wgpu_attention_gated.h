/* Gated attention of the WebGPU backend (wgpu_attention_gated.c). */
#ifndef WISP_WGPU_ATTENTION_GATED_H
#define WISP_WGPU_ATTENTION_GATED_H

#include "backend/backend.h"

/* backend.h's attention_gated, attention_gated_rows. */
void wisp_wgpu_attention_gated_install(wisp_backend *vt);
/* Frees its scratch buffers (destroy). */
void wisp_wgpu_attention_gated_free(wisp_backend *be);

#endif
