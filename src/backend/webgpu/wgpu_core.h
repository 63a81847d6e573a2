/* The core of the WebGPU backend, shared by its op files: the backend's
 * state (device, recording, caches), buffers and weights
 * as the device holds them, and the calls every op records through.
 *
 * Recording model: every op appends one or more dispatches to a compute pass
 * that stays open until `sync` (or until something must be read back); then
 * the uniform arena's changed range is written with one queue write and the
 * command buffer is submitted once. Every dispatch of a submit reads its
 * parameters from a slot of the arena of its own, so nothing recorded is
 * overwritten before it runs. Slots belong to cached bind groups
 * (wgpu_core.c): recording a decode step again costs no bind group creation.
 *
 * Ops cannot return errors (backend.h); the first failure is kept and
 * returned by the next `sync`, and later ops are skipped until then.
 *
 * The op files (wgpu_products.c, wgpu_attention.c, ...) include this header
 * and their own family's; the core includes none of them. */
#ifndef WISP_WGPU_CORE_H
#define WISP_WGPU_CORE_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "backend/webgpu/wgpu_compute.h"
#include "backend/webgpu/wgpu_options.h"

#define MAX_BINDINGS 10
#define BG_BUCKETS 4096

struct wgpu_backend;

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

/* Geometry of the one-token Gated DeltaNet kernel (dn_decode.wgsl), from
 * the backend options (dn_cols, dn_groups; tuning dnSlice=COLS or
 * COLSxGROUPS), set once at backend creation:
 * value columns per workgroup (a power of two, default 16; >= v_dim: a
 * whole v-head per workgroup, gated norm inside) and row groups (a power of
 * two; 0: the host's rule). */
typedef struct {
  uint32_t cols, groups;
  uint32_t chunk_min, chunk_cols; /* the chunked form (options dn_chunk_min, dn_chunk_cols) */
  int no_prep_shared;             /* tuning dnPrepShared=0: dn_chunk_prep's F through prep, not workgroup memory */
  uint32_t unroll;                /* dn_chunk_state's steps a batch of loads (tuning dnChunkUnroll, 1..4) */
} wisp_wgpu_dn_tuning;


/* A buffer, or a slot's part of a buffer shared by a session's slots
 * (buf_new_slots): then g is the shared device buffer, off the part's
 * first byte (a multiple of the storage offset alignment, so that the part
 * binds on its own) and parent the hidden owner of g, freed with its last
 * part. n counts the part's own 32-bit words. */
struct wisp_buf {
  wisp_wgpu_buf g;
  size_t n;
  uint64_t off;
  wisp_buf *parent;
  int refs; /* a parent: its parts not yet freed */
  /* a parent: its parts by slot index (slot i at i * the stride; NULL once
   * freed or moved out), so that growing the KV caches moves them all
   * (wgpu_kv.c) */
  wisp_buf **kids;
  int n_kids;
};

typedef struct {
  int row0, rows;
  wisp_wgpu_buf w, s, z; /* weights (f32 bits or nibbles), scales, zero points */
} wmat_part;

typedef struct {
  const void *host; /* q or f32: identifies the matrix */
  wisp_wtype type;
  int rows, cols, nparts;
  uint32_t mv_wg, mv_rows; /* one-token geometry from the plan; 0 = backend default */
  wmat_part *parts;
  /* where its products write: y[t * y_stride + y0 + r] (a part of a matrix
   * in row parts: its place in its whole's outputs, format/tensor.h; else
   * y_stride = rows, y0 = 0) */
  int y0, y_stride;
} wmat;

typedef struct {
  const float *host;
  int n;
  wisp_wgpu_buf g;
} wvec;

/* The last step of a one-token mixer left for the product that reads its
 * output (a fused op of the graph, wgpu_fused.c: the product computes it
 * while it stages its input, or `emit` records it on its own first):
 * 1 = dn_norm (DeltaNet's gated RMSNorm over split heads), 2 =
 * attn_gated_combine (the gated merge of an attention's splits), 3 =
 * attn_combine (the plain merge; matvec PRE 3). `emit` is set by the
 * mixer's file, so that the products need not include it. */
typedef struct wisp_wgpu_tail {
  int kind; /* 0: none */
  WGPUBuffer aux, src, nw; /* 1: raw o, proj (z), norm weights; 2: the splits, qkv (gates); 3: the splits */
  const wisp_buf *out;     /* what the mixer writes (the product's nominal input) */
  int heads, hd, zoff, splits;
  float eps;
  void (*emit)(wisp_backend *be, const struct wisp_wgpu_tail *t);
} wisp_wgpu_tail;

/* A dispatch site: a kernel with its storage buffers and the size of its
 * parameter block. */
typedef struct {
  const wisp_wgpu_kernel *k;
  int nb;
  wisp_wgpu_binding b[MAX_BINDINGS]; /* storage bindings; the arena slot is separate */
  uint64_t usize;
} bg_key;

/* A bind group and the arena slot its parameters live in. */
typedef struct {
  WGPUBindGroup g;
  uint64_t uoff;
} bg_slot;

/* The bind groups of one site: the n-th dispatch of the site within a
 * submit uses slot[n]. */
typedef struct bg_site {
  bg_key key;
  uint64_t epoch;   /* the batch (batch_epoch) that `used` counts in */
  int used;         /* dispatches of this site recorded in that submit */
  int n, cap;       /* bind groups made, room in slot */
  bg_slot *slot;
  struct bg_site *next;
} bg_site;

#define KCONSTS 20 /* most override constants of one kernel variant */

typedef struct {
  const char *file;
  int nc;
  double v[KCONSTS];
  wisp_wgpu_kernel *k;
} kcache;

struct wgpu_backend {
  wisp_backend base;
  wisp_wgpu_device *d;
  int own_device;
  int sg; /* subgroup variants */
  uint32_t mv_wg, mv_rows, mv_rows_big, mm_tm, mm_tn, mm_rm, mm_rn; /* mm_*: tuning matmul, matmulTile (0: by size) */
  int mm_one_buffer; /* matmul.wgsl DB 0 (tests) */
  int no_xstage;    /* tuning xstage=0: matvec inputs from global memory (tuning) */
  int int8_planned;   /* some matrix's prefill product is the int8 one (the throughput profile): g_matmul_rows
                       * runs a step of enough rows as a prefill, every product of it */
  int int8_planned_q4k; /* and some such matrix is Q4_K (its multi-row kernel wins a step of fewer rows) */
  int no_rows_shared; /* tuning rowsShared=0: matmul_rows row by row (g_matmul_rows) */
  int no_rows_q4k;    /* tuning rowsQ4K=0: Q4_K row by row, not through q4k_matvec_rows (wgpu_products_q4k.c) */
  uint32_t rows_nt;   /* tuning rowsNt: most rows a multi-row workgroup takes (rows_nt) */
  int rows_prefill;   /* tuning rowsPrefill=N: a step of N rows or more as a prefill (0: never); -1 not given:
                       * ROWS_PREFILL_INT8 (_Q4K) where int8_planned (g_matmul_rows) */
  int rows_stage_always; /* tuning rowsStage=1: stage the multi-row inputs whenever they fit (rows_tile) */
  uint32_t head_chunks; /* row chunks per workgroup of tall matrices (RCH; tuning headChunks) */
  int attn_prefill;     /* several tokens: attn_prefill.wgsl (tuning attnPrefill=1), attn_flash_tiled.wgsl (2), else attn_flash */
  uint32_t attn_rows;   /* attn_flash_tiled.wgsl's query rows a lane group (tuning attnRows: 1 or 2; 0 by head dim) */
  int prefetch;     /* tuning prefetch: -1 unset (each kernel's default), 0 or 1 for all (PF) */
  wisp_wgpu_q4k_tuning q4k_tune; /* tuning q4kMatvec / q4kFused ..., set once (wgpu_products_q4k.c) */
  wisp_wgpu_dn_tuning dn_tune;   /* the options (dn_cols, dn_groups), set once (wgpu_deltanet.c) */
  uint64_t max_binding;
  /* recording */
  wisp_wgpu_batch batch;
  int open;
  uint64_t batch_epoch; /* counts batches opened: which one is recording */
  wisp_status error;
  char error_msg[1024];
  /* uniform arena */
  wisp_wgpu_buf arena;
  uint8_t *arena_host;
  size_t arena_next;             /* first byte no slot owns */
  size_t dirty_lo, dirty_hi;     /* slots written since the last submit (lo >= hi: none) */
  size_t arena_bytes, arena_max; /* size, and what it may double up to */
  uint32_t ualign;
  /* caches */
  bg_site *buckets[BG_BUCKETS];
  kcache kernels[96];
  int n_kernels;
  wmat **mats;
  int n_mats, cap_mats;
  wvec **vecs;
  int n_vecs, cap_vecs;
  wisp_wgpu_buf dummy, dummy_rw, dummy_rw2; /* bound where a kernel declares a buffer it does not need
                                               (two writable ones must not alias: dummy_rw2) */
  wisp_wgpu_buf qbuf;  /* rotated queries of the current attention op */
  wisp_wgpu_buf staging; /* readbacks (map-read), kept across calls */
  /* Speculative readback: the buffer range read after the last sync is
   * copied into `staging` at the end of every sync's command buffer, so the
   * same read after the next sync only maps (no submit of its own). */
  WGPUBuffer spec_src;
  uint64_t spec_off, spec_bytes;
  int spec_ready; /* staging holds spec_src's range as of the last submit, unchanged since */
  /* staging holds spec_src's range as it was after submit number spec_at
   * (stats.submits); any later submit or queue write makes that stale */
  int spec_have;
  uint64_t spec_at;
  wisp_wgpu_buf rstage[2]; /* read_start / read_finish slots (pipelined decode loop) */
  /* KV buffers a grown cache left (wgpu_kv.c): destroyed after the next
   * submit, which carries the recorded copies out of them, so that the
   * caches of a request growing together cost one submit, not one each. */
  wisp_wgpu_buf *retired;
  int n_retired, cap_retired;
  wisp_wgpu_buf part;    /* flash-decoding partial results */
  uint32_t max_splits;
  wisp_wgpu_backend_stats stats;
  uint64_t batch_dispatches;
  int conv_fuse_capable; /* matvec_conv usable (10 storage bindings): caps name matmul+shortconv */
  int attn_fuse;       /* attn_decode usable (9 storage bindings) */
  uint32_t conv_rows;  /* ROWS of matvec_conv (a multiple of 3) */
  int fuse; /* tuning fuse=0: caps name no fusion, and the fused decode kernels of the mixers are off */
  /* Debug guard (wgpu_compute.h): with WISP_WEBGPU_GUARD=each every
   * dispatch is submitted and checked alone, so a guard failure names the
   * kernel that wrote past a buffer; last_kernel is the last one recorded. */
  int guard_each;
  const char *last_kernel;
  void *q4k;        /* wgpu_products_q4k.c's state */
  void *attn_gated; /* wgpu_attention_gated.c's state */
  void *deltanet;   /* wgpu_deltanet.c's state */
  /* Hooks into the op files the core must not include (no include circle):
   * the persistent decode's state copy-back (wisp_wgpu_state_op), whether a
   * buffer is state its arena mirrors (wisp_wgpu_state_copy_op), and its
   * release of a freed state buffer. Set by wisp_wgpu_backend_new. */
  void (*state_flush)(wisp_backend *be);
  void (*state_forget)(wisp_backend *be, const wisp_buf *b);
  int (*state_mirrors)(wisp_backend *be, const wisp_buf *b);
  void *mm8;  /* wgpu_products_i8.c's state */
  void *persist;     /* wgpu_persist.c's state */
  int persist_on;    /* persistent decode allowed (opts.persist) */
  int persist_asked; /* ... and asked for explicitly (opts.persist 1) */
  uint32_t persist_wg; /* its grid asked for (opts.persist_grid; 0: probe from the default) */
  uint64_t state_epoch; /* bumped by every op that may write a state buffer the arena mirrors (wgpu_persist.c) */
  int kv16; /* KV caches hold packed f16 pairs (kv_buf_new: half-size buffers) */
  wisp_wgpu_buf amax;  /* the head product's per-workgroup (max, index) pairs (head+argmax) */
  uint32_t amax_count;
  int no_argmax;       /* tuning fuseArgmax=0: caps do not name head+argmax */
  wisp_backend_settings set; /* the plan's settings (configure), all switches on until then */
  wisp_wgpu_backend_opts opts; /* as given (tuning read by wgpu_persist.c, wgpu_products_i8.c) */
};
typedef struct wgpu_backend wgpu_backend;

static inline wgpu_backend *as_g(wisp_backend *be) { return (wgpu_backend *)be; }
static inline uint32_t cdiv(uint64_t a, uint64_t b) { return (uint32_t)((a + b - 1) / b); }
static inline wisp_wgpu_binding whole(WGPUBuffer b) { return (wisp_wgpu_binding){b, 0, 0}; }
/* The binding of a buffer: the whole device buffer, or a slot's part. */
static inline wisp_wgpu_binding bind_of(const wisp_buf *b) {
  return b->parent ? (wisp_wgpu_binding){b->g.b, b->off, (uint64_t)b->n * 4} : whole(b->g.b);
}
/* The first 32-bit word of a buffer (a slot's part) in its device buffer. */
static inline uint64_t word0(const wisp_buf *b) { return b->off / 4; }

/* Weight bindings of a part: w, scales, zero points (dummy where unused). */
static inline void part_bindings(wgpu_backend *g, const wmat_part *P, wisp_wgpu_binding *b) {
  b[0] = whole(P->w.b);
  b[1] = whole(P->s.b ? P->s.b : g->dummy.b);
  b[2] = whole(P->z.b ? P->z.b : g->dummy.b);
}

/* ---- wgpu_core.c: errors, pipelines, recording ---- */

/* Keeps the first failure (the message of wisp_last_error()) for sync. */
void wisp_wgpu_keep_error(wgpu_backend *g, wisp_status st);
/* Keeps a failure of an op: "webgpu: " and the message. */
void wisp_wgpu_op_fail(wgpu_backend *g, wisp_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Returns the kept error (with its message as wisp_last_error) and clears
 * it, or the device's own error state. */
wisp_status wisp_wgpu_take_error(wgpu_backend *g);
/* After a failed op the recorded batch is not submitted: drops it. */
void wisp_wgpu_drop_failed_batch(wgpu_backend *g);
/* The pipeline of embedded kernel `file` (entry main) with override
 * constants; cached by the file and the constants' values. */
wisp_wgpu_kernel *wisp_wgpu_pipeline(wgpu_backend *g, const char *file, const wisp_wgpu_const *c, int nc);
/* Records one dispatch of k with storage bindings b[0..nb) and the
 * parameter block as binding nb. */
void wisp_wgpu_record_xyz(wgpu_backend *g, const wisp_wgpu_kernel *k, const wisp_wgpu_binding *b, int nb,
                          const void *params, size_t psize, uint32_t gx, uint32_t gy, uint32_t gz);
void wisp_wgpu_record(wgpu_backend *g, const wisp_wgpu_kernel *k, const wisp_wgpu_binding *b, int nb,
                      const void *params, size_t psize, uint32_t gx, uint32_t gy);
/* Opens a command batch unless one is open; 0 (error kept) on failure. */
int wisp_wgpu_open_batch(wgpu_backend *g);
/* Writes the arena and submits the recorded work (if any), with a copy of
 * src[src_off .. +bytes) into the staging buffer `dst` recorded after it
 * when src is given (so that a readback needs no submit of its own). */
wisp_status wisp_wgpu_flush_copy(wgpu_backend *g, WGPUBuffer src, uint64_t src_off, wisp_wgpu_buf *dst,
                                 uint64_t bytes);
/* The same; with `spec`, the speculative readback copy (spec_src) goes at
 * the end of the command buffer. */
wisp_status wisp_wgpu_flush_ex(wgpu_backend *g, int spec);
wisp_status wisp_wgpu_flush(wgpu_backend *g);
/* Destroys the KV buffers grown caches left (g->retired). */
void wisp_wgpu_free_retired(wgpu_backend *g);
/* Drops every cached bind group and frees every arena slot. Call with
 * nothing recorded that uses them. */
void wisp_wgpu_drop_bind_groups(wgpu_backend *g);
/* Drops cached bind groups that use buffer b (about to be released). */
void wisp_wgpu_forget_buffer(wgpu_backend *g, WGPUBuffer b);
/* Makes *buf at least `need` bytes (creating `want` >= need when it grows);
 * 0 on failure (kept for sync). */
int wisp_wgpu_scratch(wgpu_backend *g, wisp_wgpu_buf *buf, uint64_t need, uint64_t want, const char *label);
/* Called first by every op that may write a state buffer (short conv,
 * attention, buf_zero): the persistent decode's newer state goes back to
 * the session's buffers before the op reads or overwrites them, and the
 * epoch tells the persistent decode its arena is stale. */
void wisp_wgpu_state_op(wisp_backend *be);
/* The same for a copy into dst (buf_copy_to, buf_copy_at): the flush
 * always (it may read state), the epoch only when dst shares a device
 * buffer with state the arena mirrors. The decode loop's stop-token
 * snapshot before each batch then leaves the next batch to go on from the
 * arena, instead of copying every KV row in again (wgpu_persist.c). */
void wisp_wgpu_state_copy_op(wisp_backend *be, const wisp_buf *dst);
/* Records dst[dst_off..+n) = src[src_off..+n), offsets and n in 32-bit
 * words (copy_range.wgsl); nothing for n 0. */
void wisp_wgpu_copy_words(wgpu_backend *g, WGPUBuffer src, uint64_t src_off, WGPUBuffer dst, uint64_t dst_off,
                          uint64_t n);
/* Lanes per row group of the one-token products: a subgroup (32 on
 * NVIDIA) or a whole number of them, never more than the workgroup. */
uint32_t wisp_wgpu_matvec_lanes(const wgpu_backend *g, uint32_t wg);
/* XN of the one-token products (matvec, matvec_conv, q4k_matvec,
 * q4k_fused): cols / 4 when the input fits the workgroup memory beside the
 * kernel's own arrays (own_bytes), else 1 (read from global memory). */
uint32_t wisp_wgpu_staged_vec4s(const wgpu_backend *g, int cols, uint64_t own_bytes);
/* The mixers over the rows of a batched step (backend.h shortconv_rows
 * ...): most entries of a rows kernel's table (its MAXR; WISP_MAX_ROWS). */
#define WISP_WGPU_MIX_ROWS 256
/* Rows whose states lie in the same device buffers (s0, and s1 when
 * given) make one dispatch: the next such group from the rows not yet
 * `done`, as table entries (row, first word of s0, of s1, pos) with the
 * device buffers in *b0, *b1; returns their number (0: none left). */
uint32_t wisp_wgpu_rows_group(const wisp_mixer_rows *rows, unsigned char *done, uint32_t (*tab)[4], WGPUBuffer *b0,
                              WGPUBuffer *b1);

/* Sums one lane of matvec_rows / q4k_matvec_rows keeps (their MAXA): rows a
 * lane group x tokens a workgroup. */
#define WISP_WGPU_ROWS_MAXA 64u
/* Tokens a matvec_rows / q4k_matvec_rows workgroup takes (their NT) for a
 * batched step of n rows: the power of two from 2 to 64 that covers n (one
 * workgroup column reads each weight once for all of them), at most tuning
 * rowsNt. */
uint32_t wisp_wgpu_rows_nt(const wgpu_backend *g, int n);
/* Rows a lane group of those kernels takes (their ROWS) given the one-row
 * kernel's `rows` and NT: at most 4, halved until ROWS * NT <= MAXA (the
 * lane's sums stay in registers). Changes no sum. */
uint32_t wisp_wgpu_rows_per_group(uint32_t rows, uint32_t nt);
/* TU of matvec_rows.wgsl / q4k_matvec_rows.wgsl: the units a staged tile
 * holds (0: inputs from global memory). */
uint32_t wisp_wgpu_rows_tile(const wgpu_backend *g, uint32_t units, uint32_t uv, uint32_t wg, uint32_t lg,
                             uint32_t rows, uint32_t nt);
/* How a one-token decode attention over ntile key tiles splits them over
 * workgroups, at most max_splits: the split count, and *tps the tiles a
 * split (0xFFFFFFFF: one split). attn_split.wgsli is the same rule for the
 * rows kernels, which see each row's position only on the device. */
uint32_t wisp_wgpu_key_splits(uint32_t ntile, uint32_t max_splits, uint32_t *tps);
/* The split rule of this backend as one word, for wisp_wgpu_key_splits and
 * the rows kernels (attn_split.wgsli): bits 0-11 the split cap at short
 * contexts (max_splits, the plan's flashBlocks), bits 12-23 the most splits
 * at long ones, bits 24-31 the key tiles a split takes there (0: none). A
 * plain max_splits below 4096 is the rule without the long part. */
uint32_t wisp_wgpu_split_rule(const wgpu_backend *g);
/* The most splits rule `rule` ever makes (the partials' stride). */
uint32_t wisp_wgpu_split_most(uint32_t rule);
/* The argmax partials buffer (g->amax), grown to `count` pairs (the next
 * sample reads that many); NULL on failure. */
WGPUBuffer wisp_wgpu_amax(wgpu_backend *g, uint32_t count);
/* Frees a scratch buffer (bind groups using it are dropped). */
void wisp_wgpu_scratch_free(wgpu_backend *g, wisp_wgpu_buf *buf);
/* backend.h's sync, submit, read_start, read_finish. */
void wisp_wgpu_core_install(wisp_backend *vt);

/* ---- wgpu_buffers.c: activations, states, vectors ---- */

wvec *wisp_wgpu_find_vec(wgpu_backend *g, const wisp_vector *v);
/* The prepared vector (NULL, error kept, if not prepared). */
wvec *wisp_wgpu_need_vec(wgpu_backend *g, const wisp_vector *v);
/* The device buffer of a prepared vector (NULL, error kept, if not prepared). */
WGPUBuffer wisp_wgpu_vec_buffer(wgpu_backend *g, const wisp_vector *v);
wmat *wisp_wgpu_find_mat(wgpu_backend *g, const wisp_matrix *m);
/* The prepared matrix (NULL, error kept, if not prepared). */
wmat *wisp_wgpu_need_mat(wgpu_backend *g, const wisp_matrix *m);
void wisp_wgpu_mat_free(wgpu_backend *g, wmat *w);
/* Part i of a prepared matrix: rows [row0, row0 + rows) in buffer *w
 * (raw super-blocks for Q4_K); 0 past the last part or if not prepared. */
int wisp_wgpu_mat_part(wgpu_backend *g, const wisp_matrix *m, int i, int *row0, int *rows, WGPUBuffer *w);
/* Part i of a prepared Q4/Q4Z/f32 matrix: its row range and the bindings
 * weights, scales, zero points (a dummy where the type has none). */
int wisp_wgpu_mat_bufs(wgpu_backend *g, const wisp_matrix *m, int i, int *row0, int *rows, wisp_wgpu_binding b[3]);
/* backend.h's buffer calls and prepare_vector. */
void wisp_wgpu_buffers_install(wisp_backend *vt);

/* ---- wgpu_kv.c: KV caches that grow ---- */

/* backend.h's kv_buf_grow. */
void wisp_wgpu_kv_install(wisp_backend *vt);
/* The stride of n words of a slot's part in a shared buffer (bytes). */
uint64_t wisp_wgpu_slot_stride(const wgpu_backend *g, uint64_t words);

#endif
