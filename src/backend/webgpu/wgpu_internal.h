/* Internal hooks of the WebGPU backend (wgpu_backend.c) for the ops that
 * live in their own files (wgpu_qwen.c: Qwen 3.5 gated attention, Gated
 * DeltaNet, Q4_K products). Not a public interface: these reach into the
 * recording state of one backend (see the recording model in
 * wgpu_backend.c). Errors are kept for the next sync, as for any op. */
#ifndef WISP_WGPU_INTERNAL_H
#define WISP_WGPU_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "backend/webgpu/wgpu_compute.h"

/* The pipeline of embedded kernel `file` (entry main) with override constants (cached). */
wisp_wgpu_kernel *wisp_wgpu_int_kernel(wisp_backend *be, const char *file, const wisp_wgpu_const *c, int nc);
/* Records one dispatch: storage bindings b[0..nb), parameters at binding nb. */
void wisp_wgpu_int_record(wisp_backend *be, const wisp_wgpu_kernel *k, const wisp_wgpu_binding *b, int nb,
                          const void *params, size_t psize, uint32_t gx, uint32_t gy, uint32_t gz);
/* Records a held-back (fusable) op, if any; every op entry point calls it first. */
void wisp_wgpu_int_emit_pending(wisp_backend *be);
/* The device buffer of an activation buffer. */
WGPUBuffer wisp_wgpu_int_buf(const wisp_buf *b);
/* The device buffer of a prepared vector (NULL, error kept, if not prepared). */
WGPUBuffer wisp_wgpu_int_vec(wisp_backend *be, const wisp_vector *v);
/* Grows a backend-owned scratch buffer (see scratch() in wgpu_backend.c); 0 on failure. */
int wisp_wgpu_int_scratch(wisp_backend *be, wisp_wgpu_buf *buf, uint64_t need, uint64_t want, const char *label);
/* Frees a scratch buffer (bind groups using it are dropped). */
void wisp_wgpu_int_scratch_free(wisp_backend *be, wisp_wgpu_buf *buf);
/* A 16-byte buffer to bind where a kernel declares a buffer it does not use. */
WGPUBuffer wisp_wgpu_int_dummy(wisp_backend *be, int read_write);
void wisp_wgpu_int_fail(wisp_backend *be, wisp_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int wisp_wgpu_int_has_error(wisp_backend *be);
int wisp_wgpu_int_subgroups(wisp_backend *be);
uint32_t wisp_wgpu_int_max_splits(wisp_backend *be);
wisp_wgpu_device *wisp_wgpu_int_device(wisp_backend *be);
/* Part i of a prepared matrix: rows [row0, row0 + rows) in buffer *w
 * (raw super-blocks for Q4_K); 0 past the last part or if not prepared. */
int wisp_wgpu_int_mat_part(wisp_backend *be, const wisp_matrix *m, int i, int *row0, int *rows, WGPUBuffer *w);
/* The plan's settings (session switches) as configure gave them. */
const wisp_backend_settings *wisp_wgpu_int_settings(wisp_backend *be);
int wisp_wgpu_int_fuse(wisp_backend *be);        /* 0: WISP_WEBGPU_FUSE=0 / no_fuse */
int wisp_wgpu_int_fuse_argmax(wisp_backend *be); /* greedy head argmax fusion allowed */
/* The argmax partials buffer, grown to `count` pairs (the next sample reads that many); NULL on failure. */
WGPUBuffer wisp_wgpu_int_amax(wisp_backend *be, uint32_t count);
/* The per-backend state of wgpu_qwen.c (NULL until first use). */
void **wisp_wgpu_int_qwen_slot(wisp_backend *be);

/* wgpu_qwen.c */
void wisp_wgpu_attention_gated(wisp_backend *be, const wisp_gated_attention_args *a);
void wisp_wgpu_gated_deltanet(wisp_backend *be, const wisp_deltanet_args *a);
/* y[t] (+)= W x[x_row0 + t] for a Q4_K matrix W. */
void wisp_wgpu_q4k_matmul(wisp_backend *be, const wisp_matrix *W, const wisp_buf *x, int x_row0, int n, wisp_buf *y,
                          int accumulate);
/* As wisp_wgpu_q4k_matmul; with nx non-NULL the product reads rmsnorm(nx) * nw (eps) and
 * also writes it to nxo (== x): a held-back rmsnorm fused in. One-token products may be
 * held back for a consumer (swiglu, gated_deltanet, a greedy sample_id). */
void wisp_wgpu_q4k_matmul_ex(wisp_backend *be, const wisp_matrix *W, const wisp_buf *nx, WGPUBuffer nw, float eps,
                             const wisp_buf *nxo, const wisp_buf *x, int x_row0, int n, wisp_buf *y, int accumulate);
/* Records the held-back Q4_K product, if any (called by every op first). */
void wisp_wgpu_qwen_emit(wisp_backend *be);
/* Consumers of a held-back Q4_K product: 1 when they recorded the fused form. */
int wisp_wgpu_qwen_swiglu(wisp_backend *be, const wisp_buf *gu, int n, int ffn, wisp_buf *out);
int wisp_wgpu_qwen_head_argmax(wisp_backend *be, const wisp_buf *logits, int vocab, int greedy, const wisp_buf *ids);
void wisp_wgpu_qwen_free(wisp_backend *be);
/* Checks the plan's kernel choices for a Q4_K matrix (prepare_matrix). */
wisp_status wisp_wgpu_q4k_check_choice(const wisp_matrix *m);

#endif
