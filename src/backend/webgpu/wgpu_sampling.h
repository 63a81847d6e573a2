/* Sampling on the device (wgpu_sampling.c). */
#ifndef WISP_WGPU_SAMPLING_H
#define WISP_WGPU_SAMPLING_H

#include "backend/webgpu/wgpu_core.h"

/* Records sample.wgsl: ids[slot] = the token drawn from logits[0..vocab)
 * with sp at step, or with parts from the g->amax_count argmax pairs a
 * head product wrote to g->amax (greedy only). */
void wisp_wgpu_rec_sample(wgpu_backend *g, const wisp_buf *logits, int vocab, int parts, const wisp_sampling *sp,
                          uint32_t step, wisp_buf *ids, int slot);

/* backend.h's sample_id, penalize. */
void wisp_wgpu_sampling_install(wisp_backend *vt);

#endif
