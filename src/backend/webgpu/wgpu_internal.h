/* Internal hooks of the WebGPU backend (wgpu_backend.c) for the ops that
 * live in their own files (wgpu_gated.c: gated attention, Gated
 * DeltaNet, Q4_K products). Not a public interface: these reach into the
 * recording state of one backend (see the recording model in
 * wgpu_backend.c). Errors are kept for the next sync, as for any op. */
#ifndef WISP_WGPU_INTERNAL_H
#define WISP_WGPU_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "backend/webgpu/wgpu_compute.h"

/* How a one-token decode attention over ntile key tiles splits them over
 * workgroups, at most max_splits: the split count, and *tps the tiles a
 * split (0xFFFFFFFF: one split). attn_split.wgsli is the same rule for the
 * rows kernels, which see each row's position only on the device. */
uint32_t wisp_wgpu_int_key_splits(uint32_t ntile, uint32_t max_splits, uint32_t *tps);
/* The pipeline of embedded kernel `file` (entry main) with override constants (cached). */
wisp_wgpu_kernel *wisp_wgpu_int_kernel(wisp_backend *be, const char *file, const wisp_wgpu_const *c, int nc);
/* Records one dispatch: storage bindings b[0..nb), parameters at binding nb. */
void wisp_wgpu_int_record(wisp_backend *be, const wisp_wgpu_kernel *k, const wisp_wgpu_binding *b, int nb,
                          const void *params, size_t psize, uint32_t gx, uint32_t gy, uint32_t gz);
/* Records dst[dst_off..+n) = src[src_off..+n), offsets and n in 32-bit words (copy_range.wgsl); nothing for n 0. */
void wisp_wgpu_int_copy_words(wisp_backend *be, WGPUBuffer src, uint64_t src_off, WGPUBuffer dst, uint64_t dst_off,
                              uint64_t n);
/* Records a held-back (fusable) op, if any; every op entry point calls it first. */
void wisp_wgpu_int_emit_pending(wisp_backend *be);
/* The device buffer of a buffer (for a slot's part of a shared buffer,
 * buf_new_slots, the shared one: bind it with wisp_wgpu_int_bind, address
 * it from wisp_wgpu_int_word0). */
WGPUBuffer wisp_wgpu_int_buf(const wisp_buf *b);
/* The binding of a buffer: the whole device buffer, or a slot's part. */
wisp_wgpu_binding wisp_wgpu_int_bind(const wisp_buf *b);
/* The first 32-bit word of a buffer in its device buffer (0 unless a slot's part). */
uint64_t wisp_wgpu_int_word0(const wisp_buf *b);
/* The device buffer of a prepared vector (NULL, error kept, if not prepared). */
WGPUBuffer wisp_wgpu_int_vec(wisp_backend *be, const wisp_vector *v);
/* Grows a backend-owned scratch buffer (see scratch() in wgpu_backend.c); 0 on failure. */
int wisp_wgpu_int_scratch(wisp_backend *be, wisp_wgpu_buf *buf, uint64_t need, uint64_t want, const char *label);
/* Frees a scratch buffer (bind groups using it are dropped). */
void wisp_wgpu_int_scratch_free(wisp_backend *be, wisp_wgpu_buf *buf);
/* A 16-byte buffer to bind where a kernel declares a buffer it does not use. */
WGPUBuffer wisp_wgpu_int_dummy(wisp_backend *be, int read_write);
/* The device's maxComputeInvocationsPerWorkgroup. */
uint32_t wisp_wgpu_int_max_invocations(wisp_backend *be);
/* The adapter's largest subgroup size. */
uint32_t wisp_wgpu_int_subgroup_max(wisp_backend *be);
void wisp_wgpu_int_fail(wisp_backend *be, wisp_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int wisp_wgpu_int_has_error(wisp_backend *be);
int wisp_wgpu_int_subgroups(wisp_backend *be);
uint32_t wisp_wgpu_int_max_splits(wisp_backend *be);
wisp_wgpu_device *wisp_wgpu_int_device(wisp_backend *be);
/* Part i of a prepared matrix: rows [row0, row0 + rows) in buffer *w
 * (raw super-blocks for Q4_K); 0 past the last part or if not prepared. */
int wisp_wgpu_int_mat_part(wisp_backend *be, const wisp_matrix *m, int i, int *row0, int *rows, WGPUBuffer *w);
/* Part i of a prepared Q4/Q4Z/f32 matrix: its row range and the bindings
 * weights, scales, zero points (a dummy where the type has none). */
int wisp_wgpu_int_mat_bufs(wisp_backend *be, const wisp_matrix *m, int i, int *row0, int *rows, wisp_wgpu_binding b[3]);
/* wgpu_variants.c: WISP_OK when the backend runs registry (or profile)
 * kernel op/variant and loads `wgsl` (may be NULL) for it; else a one-line
 * error naming it. The backend's check_kernel. */
wisp_status wisp_wgpu_check_kernel(wisp_backend *be, const char *op, const char *variant, const char *wgsl);
/* The backend's options as created (tuning keys among them). */
const struct wisp_wgpu_backend_opts *wisp_wgpu_int_opts(wisp_backend *be);
/* The plan's settings (session switches) as configure gave them. */
const wisp_backend_settings *wisp_wgpu_int_settings(wisp_backend *be);
int wisp_wgpu_int_fuse(wisp_backend *be);        /* 0: no_fuse (tuning fuse=0) */
int wisp_wgpu_int_fuse_argmax(wisp_backend *be); /* greedy head argmax fusion allowed */
/* Tuning overrides of the Q4_K decode geometries, from the backend options
 * (tuning keys) at backend creation: q4kMatvec=WGxROWS (default
 * 128 threads, ROWS 0 = by the matrix: 2 rows a lane group for matrices of
 * rows2_rows rows or more, else 1), q4kRows2Rows=R
 * (rows2_rows, default 2048), q4kFused=COLSxTPC (0 = unset), q4kLg=N
 * (lanes of a q4k_matvec row group; 0 = the largest subgroup size, at least
 * 32), q4kSbCols=N (one-token products of N columns or more,
 * plain or with q4k_fused's norm / SwiGLU fusions, by q4k_sb.wgsl, a thread
 * per super-block, whatever the plan chose; 0 = none; unset: where the plan
 * chose wgsl_matvec_q4k_superblock). */
typedef struct {
  uint32_t mv_wg, mv_rows, fused_cols, fused_tpc, mv_lg, rows2_rows;
  int mv_prefetch, fused_prefetch; /* PF of q4k_matvec / q4k_fused: weight loads issued ahead */
  int superblock_cols; /* -1: q4k_sb where the plan chose it; else from this many columns (0: never) */
} wisp_wgpu_q4k_tuning;
const wisp_wgpu_q4k_tuning *wisp_wgpu_int_q4k_tuning(wisp_backend *be);
/* Geometry of the one-token Gated DeltaNet kernel (dn_decode.wgsl), from
 * the backend options (dn_cols, dn_groups; tuning dnSlice=COLS or
 * COLSxGROUPS), set once at backend creation:
 * value columns per workgroup (a power of two, default 16; >= v_dim: a
 * whole v-head per workgroup, gated norm inside) and row groups (a power of
 * two; 0: the host's rule). */
typedef struct {
  uint32_t cols, groups;
} wisp_wgpu_dn_tuning;
const wisp_wgpu_dn_tuning *wisp_wgpu_int_dn_tuning(wisp_backend *be);
/* The backend's counters (wgpu_backend.h), for the ops' own (deltanet_split). */
struct wisp_backend_stats *wisp_wgpu_int_stats(wisp_backend *be);
/* XN of a one-token product kernel that stages its input (cols columns,
 * own_bytes of its own workgroup arrays): cols / 4, or 1 when it does not fit
 * or staging is off. */
uint32_t wisp_wgpu_int_staged_vec4s(wisp_backend *be, int cols, uint64_t own_bytes);
/* Tokens a matvec_rows / q4k_matvec_rows workgroup takes (their NT) for a
 * batched step of n rows: 2, 4 or 8 (their MAXT), so that a step of any
 * size uses one of three pipelines per weight type and a small step does
 * not reserve workgroup memory for 8 staged inputs; at most tuning rowsNt.
 * The weight is read once per that many rows. */
uint32_t wisp_wgpu_int_rows_nt(wisp_backend *be, int n);
/* TU of matvec_rows.wgsl / q4k_matvec_rows.wgsl (rows of `units` units
 * of uv vec4s; WG threads, lane groups of LG, ROWS rows each, NT tokens):
 * the units a staged tile holds, a multiple of LG and of 8, the whole row
 * where it fits the workgroup memory beside the kernel's `part` array, else
 * as many as fit; 0 when not even one run of LG units fits or staging is
 * off (tuning xstage=0): the inputs are then read from global memory. */
uint32_t wisp_wgpu_int_rows_tile(wisp_backend *be, uint32_t units, uint32_t uv, uint32_t wg, uint32_t lg,
                                 uint32_t rows, uint32_t nt);
/* 0 with tuning rowsShared=0: a batched step's products row by row. */
int wisp_wgpu_int_rows_shared(wisp_backend *be);
int wisp_wgpu_int_rows_q4k(wisp_backend *be);
/* 1: KV caches hold packed f16 pairs (kv_buf_new; kv_f16 (tuning kv=f16), the plan's kv f16). */
int wisp_wgpu_int_kv16(wisp_backend *be);
/* The argmax partials buffer, grown to `count` pairs (the next sample reads that many); NULL on failure. */
WGPUBuffer wisp_wgpu_int_amax(wisp_backend *be, uint32_t count);
/* The per-backend state of wgpu_gated.c (NULL until first use). */
void **wisp_wgpu_int_gated_slot(wisp_backend *be);
/* The per-backend state of wgpu_matmul_i8.c (NULL until first use). */
void **wisp_wgpu_int_mm8_slot(wisp_backend *be);
/* The per-backend state of wgpu_persist.c (NULL until first use). */
void **wisp_wgpu_int_persist_slot(wisp_backend *be);
/* Its grid as asked for (opts.persist_grid); 0: the default probe. */
uint32_t wisp_wgpu_int_persist_grid(wisp_backend *be);
/* 1 when the persistent decode was asked for explicitly (opts.persist 1). */
int wisp_wgpu_int_persist_asked(wisp_backend *be);
/* A counter bumped by every op that may write a state buffer (short conv,
 * attention, buf_zero, buf_copy_to): unchanged means untouched. */
uint64_t wisp_wgpu_int_state_epoch(wisp_backend *be);
/* What an op that may write a state buffer calls first: the persistent
 * decode's newer state back into the session's buffers, and the epoch
 * bumped. */
void wisp_wgpu_int_state_op(wisp_backend *be);

/* The mixers over the rows of a batched step (backend.h shortconv_rows
 * ...): most entries of a rows kernel's table (its MAXR; WISP_MAX_ROWS). */
#define WISP_WGPU_MIX_ROWS 256
/* Rows whose states lie in the same device buffers (s0, and s1 when
 * given) make one dispatch: the next such group from the rows not yet
 * `done`, as table entries (row, first word of s0, of s1, pos) with the
 * device buffers in *b0, *b1; returns their number (0: none left). */
uint32_t wisp_wgpu_int_rows_group(const wisp_mixer_rows *rows, unsigned char *done, uint32_t (*tab)[4], WGPUBuffer *b0,
                                  WGPUBuffer *b1);

/* wgpu_persist.c: backend.h's decode_graph, and its release at destroy. */
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

/* wgpu_gated.c */
void wisp_wgpu_attention_gated(wisp_backend *be, const wisp_gated_attention_args *a);
void wisp_wgpu_gated_deltanet(wisp_backend *be, const wisp_deltanet_args *a);
/* backend.h attention_gated_rows, gated_deltanet_rows. */
int wisp_wgpu_attention_gated_rows(wisp_backend *be, const wisp_gated_attention_args *a, const wisp_mixer_rows *rows);
int wisp_wgpu_gated_deltanet_rows(wisp_backend *be, const wisp_deltanet_args *a, const wisp_mixer_rows *rows);
/* y[t] (+)= W x[x_row0 + t] for a Q4_K matrix W. */
/* A batched step's Q4_K product (backend.h matmul_rows): each of the n
 * rows with the sums of the decode kernel's one-token product; several
 * rows through q4k_matvec_rows.wgsl, the weight read once per up to 8
 * rows. */
void wisp_wgpu_q4k_matmul_rows(wisp_backend *be, const wisp_matrix *W, const wisp_buf *x, int n, wisp_buf *y,
                               int accumulate);
void wisp_wgpu_q4k_matmul(wisp_backend *be, const wisp_matrix *W, const wisp_buf *x, int x_row0, int n, wisp_buf *y,
                          int accumulate);
/* As wisp_wgpu_q4k_matmul; with nx non-NULL the product reads rmsnorm(nx) * nw (eps) and
 * also writes it to nxo (== x): a held-back rmsnorm fused in. One-token products may be
 * held back for a consumer (swiglu, gated_deltanet, a greedy sample_id). */
void wisp_wgpu_q4k_matmul_ex(wisp_backend *be, const wisp_matrix *W, const wisp_buf *nx, WGPUBuffer nw, float eps,
                             const wisp_buf *nxo, const wisp_buf *x, int x_row0, int n, wisp_buf *y, int accumulate);
/* Records the held-back Q4_K product, if any (called by every op first). */
void wisp_wgpu_gated_emit(wisp_backend *be);
/* Consumers of a held-back Q4_K product: 1 when they recorded the fused form. */
int wisp_wgpu_gated_swiglu(wisp_backend *be, const wisp_buf *gu, int n, int ffn, wisp_buf *out);
/* 1 when a held-back gated op whose output is x (DeltaNet's split-head gated
 * norm, the gated attention merge) will be computed by the next Q4_K
 * product (by W of x into y) while it stages its input; that product must
 * follow (wisp_wgpu_q4k_matmul_ex). Call before emitting other pending ops. */
int wisp_wgpu_gated_take_input(wisp_backend *be, const wisp_matrix *W, const wisp_buf *x, int x_row0, int n,
                              const wisp_buf *y);
int wisp_wgpu_gated_head_argmax(wisp_backend *be, const wisp_buf *logits, int vocab, int greedy, const wisp_buf *ids);
void wisp_wgpu_gated_free(wisp_backend *be);
/* Checks the plan's kernel choices for a Q4_K matrix (prepare_matrix). */
wisp_status wisp_wgpu_q4k_check_choice(const wisp_matrix *m);

/* wgpu_matmul_i8.c: the Q4 x int8 prefill product (quant_x8.wgsl +
 * matmul_i8.wgsl). Records y[t] (+)= W x[x_row0 + t] and returns 1 when it
 * applies (Q4/Q4Z matrix; the plan's prefill variant is wgsl_tiled_q4_i8,
 * or forced; n >= the minimum), else 0 (nothing recorded). */
int wisp_wgpu_mm8_matmul(wisp_backend *be, const wisp_matrix *W, const wisp_buf *x, int x_row0, int n, wisp_buf *y,
                         int accumulate);
void wisp_wgpu_mm8_free(wisp_backend *be);
/* Settings of the product (tests, tuning); fields of 0 keep the current
 * value. Defaults, then the backend options (tuning matmulI8=TMxTNxRMxRNxKB,
 * i8=0|1 (mode), i8MinN=N, i8Fuseq=1), taken at first use. */
typedef struct {
  int mode;                       /* 0 keep, 1 the plan decides, 2 always (Q4/Q4Z), 3 never */
  uint32_t tm, tn, rm, rn, kb;    /* geometry */
  int min_n;                      /* fewest tokens that take this path */
  int fuseq;                      /* 1: the product quantizes its own tiles (no quantize dispatch), -1: not */
} wisp_wgpu_mm8_opts;
wisp_status wisp_wgpu_mm8_configure(wisp_backend *be, const wisp_wgpu_mm8_opts *o);
/* Reads back the last quantized activations (n tokens of cols): q[n*cols]
 * int8, d[n*cols/32] scales (tests). */
wisp_status wisp_wgpu_mm8_read_quantized(wisp_backend *be, int n, int cols, int8_t *q, float *d);
/* Products and input quantizations recorded by this path so far. */
void wisp_wgpu_mm8_counts(wisp_backend *be, uint64_t *products, uint64_t *quantizations);

#endif
