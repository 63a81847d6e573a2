/* Gated attention of the WebGPU backend (wgpu_attention_gated.c). */
#ifndef WISP_WGPU_ATTENTION_GATED_H
#define WISP_WGPU_ATTENTION_GATED_H

#include "backend/webgpu/wgpu_core.h"

/* Records the gated attention op; with tail non-NULL, the gated merge of its
 * splits it leaves to the product that reads a->out (kind 2); else that step
 * is recorded here (the backend.h op). */
void wisp_wgpu_attention_gated_rec(wisp_backend *be, const wisp_gated_attention_args *a, wisp_wgpu_tail *tail);

/* backend.h's attention_gated, attention_gated_rows. */
void wisp_wgpu_attention_gated_install(wisp_backend *vt);
/* Frees its scratch buffers (destroy). */
void wisp_wgpu_attention_gated_free(wisp_backend *be);

#endif
