/* The persistent decode of the WebGPU backend (wgpu_persist.c): a
 * decode step of a model's graph in one dispatch. */
#ifndef WISP_WGPU_PERSIST_H
#define WISP_WGPU_PERSIST_H

#include "backend/backend.h"

/* backend.h's decode_graph, and its release at destroy. */
wisp_status wisp_wgpu_decode_graph(wisp_backend *be, const wisp_decode_graph *g, wisp_buf *ids, int pos, int k,
                                   const wisp_sampling *sp);
wisp_status wisp_wgpu_decode_graph_reset(wisp_backend *be, int pos);
void wisp_wgpu_persist_free(wisp_backend *be);
/* Records the copy-back of state the persistent decode has not yet written
 * to the session's buffers (every op touching state calls it first). */
void wisp_wgpu_persist_flush(wisp_backend *be);
/* Drops the pending copy-back and the arena's claim to be current when b is
 * one of the state buffers of the last persistent run (b is being freed). */
void wisp_wgpu_persist_forget(wisp_backend *be, const wisp_buf *b);
/* 1 when a write into b may change state the arena holds a copy of (b
 * shares a device buffer with a state buffer of the last persistent run);
 * 0 for other buffers, e.g. the decode loop's stop-token snapshots. */
int wisp_wgpu_persist_mirrors(wisp_backend *be, const wisp_buf *b);

#endif
