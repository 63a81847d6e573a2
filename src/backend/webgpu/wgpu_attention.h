/* Attention of the WebGPU backend (wgpu_attention.c). */
#ifndef WISP_WGPU_ATTENTION_H
#define WISP_WGPU_ATTENTION_H

#include "backend/webgpu/wgpu_core.h"

/* Records the attention op; with tail non-NULL, a split merge it leaves to
 * the product that reads a->out (kind 3); else that step is recorded here
 * (the backend.h op). */
void wisp_wgpu_attention_rec(wisp_backend *be, const wisp_attention_args *a, wisp_wgpu_tail *tail);

/* backend.h's attention, attention_rows. */
void wisp_wgpu_attention_install(wisp_backend *vt);

#endif
