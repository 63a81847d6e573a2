/* The WebGPU backend (see wgpu_backend.h and docs/webgpu.md).
 *
 * Recording model: every op appends one or more dispatches to a compute pass
 * that stays open until `sync` (or until something must be read back); then
 * the uniform arena's changed range is written with one queue write and the
 * command buffer is submitted once. Every dispatch of a submit reads its
 * parameters from a slot of the arena of its own, so nothing recorded is
 * overwritten before it runs. Slots belong to cached bind groups (see
 * bind_group): recording a decode step again costs no bind group creation.
 *
 * Ops cannot return errors (backend.h); the first failure is kept and
 * returned by the next `sync`, and later ops are skipped until then. */
#include "backend/webgpu/wgpu_backend.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/webgpu/wgpu_compute.h"
#include "backend/webgpu/wgpu_internal.h"
#include "backend/webgpu/wgsl_kernels.h"
#include "util/env.h"
#include "format/quant.h"
#include "util/err.h"

#define ARENA_BYTES (8u << 20) /* 32k slots of 256 bytes: a 64-token decode batch of a 0.8B gated hybrid uses ~8k */
#define ARENA_MAX (64u << 20)
#define MAX_BINDINGS 10
#define BG_BUCKETS 4096
#define EMBED_TOKENS 64
#define ATTN_WG 64
#define ATTN_DEC_KT 32 /* keys per tile of attn_decode.wgsl */

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
} wmat;

typedef struct {
  const float *host;
  int n;
  wisp_wgpu_buf g;
} wvec;

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

#define KCONSTS 12 /* most override constants of one kernel variant */

typedef struct {
  const char *file;
  int nc;
  double v[KCONSTS];
  wisp_wgpu_kernel *k;
} kcache;

typedef struct {
  wisp_backend base;
  wisp_wgpu_device *d;
  int own_device;
  int sg; /* subgroup variants */
  uint32_t mv_wg, mv_rows, mv_rows_big, mm_tm, mm_tn;
  int env_geometry; /* tuning matvec: it overrides the plan's geometry (tuning) */
  int no_xstage;    /* tuning xstage=0: matvec inputs from global memory (tuning) */
  int no_rows_shared; /* tuning rowsShared=0: matmul_rows row by row (g_matmul_rows) */
  int rows_q4k;       /* tuning rowsQ4K=1: Q4_K through q4k_matvec_rows too (wgpu_gated.c) */
  uint32_t rows_nt;   /* tuning rowsNt: most rows a multi-row workgroup takes (rows_nt) */
  int rows_stage_always; /* tuning rowsStage=1: stage the multi-row inputs whenever they fit (rows_tile) */
  uint32_t head_chunks; /* row chunks per workgroup of tall matrices (RCH; tuning headChunks) */
  int attn_prefill;     /* attn_prefill.wgsl for several tokens (tuning attnPrefill=1; else attn_flash) */
  int prefetch;     /* tuning prefetch: -1 unset (each kernel's default), 0 or 1 for all (PF) */
  wisp_wgpu_q4k_tuning q4k_tune; /* tuning q4kMatvec / q4kFused ..., set once (wgpu_gated.c) */
  wisp_wgpu_dn_tuning dn_tune;   /* the options (dn_cols, dn_groups), set once (wgpu_gated.c) */
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
  wisp_wgpu_buf part;    /* flash-decoding partial results */
  uint32_t max_splits;
  wisp_wgpu_backend_stats stats;
  uint64_t batch_dispatches;
  /* A one-token rmsnorm or swiglu held back so that a matmul reading its
   * output can fuse it (matvec PRE); any other call records it first. */
  struct {
    int kind; /* 0 none, 1 rmsnorm, 2 swiglu, 3 matvec (kinds 1/2 possibly fused into it),
               * 4 attention split merge (attn_combine into out; fused as matvec PRE 3) */
    const wisp_buf *x;
    wvec *w;
    float eps;
    int dim; /* rmsnorm: dim; swiglu: ffn */
    wisp_buf *out;
    /* kind 3: a one-token product y = W x' held back for a following
     * shortconv reading y (matvec_conv); x' as in rec_matvec. */
    wmat *m;
    int pre;
    const wisp_buf *mx; /* the product's input buffer (the fused op's output when pre) */
    wisp_buf *my;
    /* kind 4: heads x head_dim outputs (out) merged from `splits` partials in g->part */
    int heads, head_dim, splits;
  } pend;
  int conv_fuse;       /* matvec_conv used: capable (10 storage bindings) and the plan asks */
  int conv_fuse_capable;
  int env_splits;      /* tuning attnSplits: it overrides the plan */
  int attn_fuse;       /* attn_decode usable (9 storage bindings) */
  uint32_t conv_rows;  /* ROWS of matvec_conv (a multiple of 3) */
  int fuse; /* 0 disables the fusion (tests, tuning fuse=0) */
  /* Debug guard (wgpu_compute.h): with WISP_WEBGPU_GUARD=each every
   * dispatch is submitted and checked alone, so a guard failure names the
   * kernel that wrote past a buffer; last_kernel is the last one recorded. */
  int guard_each;
  const char *last_kernel;
  void *gated; /* wgpu_gated.c's state */
  void *mm8;  /* wgpu_matmul_i8.c's state */
  void *persist;     /* wgpu_persist.c's state */
  int persist_on;    /* persistent decode allowed (opts.persist) */
  int persist_asked; /* ... and asked for explicitly (opts.persist 1) */
  uint32_t persist_wg; /* its grid asked for (opts.persist_grid; 0: probe from the default) */
  uint64_t state_epoch; /* bumped by every op that may write a state buffer (wgpu_persist.c) */
  int kv16; /* KV caches hold packed f16 pairs (kv_buf_new: half-size buffers) */
  int fuse_argmax;     /* greedy sample_id fused into the head product (tuning fuseArgmax=0: off) */
  wisp_wgpu_buf amax;  /* its per-workgroup (max, index) pairs */
  uint32_t amax_count;
  int env_no_argmax;   /* tuning fuseArgmax=0 */
  wisp_backend_settings set; /* the plan's settings (configure), all switches on until then */
  wisp_wgpu_backend_opts opts; /* as given (tuning read by wgpu_persist.c, wgpu_matmul_i8.c) */
} wgpu_backend;

static wgpu_backend *as_g(wisp_backend *be) { return (wgpu_backend *)be; }

/* Called first by every op that may write a state buffer (short conv,
 * attention, buf_zero, buf_copy_to): the persistent decode's newer state
 * goes back to the session's buffers before the op reads or overwrites
 * them, and the epoch tells the persistent decode its arena is stale. */
static void state_op(wisp_backend *be) {
  wisp_wgpu_persist_flush(be);
  as_g(be)->state_epoch++;
}
static void emit_pending(wgpu_backend *g);
static int open_batch(wgpu_backend *g);

/* ---- errors -------------------------------------------------------------- */

/* Keeps the first failure (the message of wisp_last_error()) for sync. */
static void keep_error(wgpu_backend *g, wisp_status st) {
  if (!st || g->error) return;
  g->error = st;
  snprintf(g->error_msg, sizeof g->error_msg, "%s", wisp_last_error());
}

static void op_fail(wgpu_backend *g, wisp_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void op_fail(wgpu_backend *g, wisp_status st, const char *fmt, ...) {
  if (g->error) return;
  char msg[900];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  keep_error(g, wisp_fail(st, "webgpu: %s", msg));
}

/* ---- kernels ------------------------------------------------------------- */

/* The pipeline for kernel file `file` with override constants; cached by a
 * key naming the file and the constants. */
static wisp_wgpu_kernel *kernel(wgpu_backend *g, const char *file, const wisp_wgpu_const *c, int nc) {
  /* Called for every op: the lookup compares values, no formatting. */
  for (int i = 0; i < g->n_kernels; i++) {
    const kcache *e = &g->kernels[i];
    if (e->nc != nc || (e->file != file && strcmp(e->file, file))) continue;
    int same = 1;
    for (int j = 0; j < nc && same; j++) same = e->v[j] == c[j].value;
    if (same) return e->k;
  }
  if (nc > KCONSTS) {
    op_fail(g, WISP_EINVAL, "kernel %s: %d override constants (at most %d)", file, nc, KCONSTS);
    return NULL;
  }
  char key[96];
  int len = snprintf(key, sizeof key, "%s", file);
  for (int i = 0; i < nc && len < (int)sizeof key; i++)
    len += snprintf(key + len, sizeof key - (size_t)len, ":%g", c[i].value);
  if (g->n_kernels == (int)(sizeof g->kernels / sizeof g->kernels[0])) {
    op_fail(g, WISP_EINVAL, "too many kernel variants");
    return NULL;
  }
  const char *src = wisp_wgsl_kernel(file);
  if (!src) {
    op_fail(g, WISP_EUNSUPPORTED, "no embedded kernel %s", file);
    return NULL;
  }
  wisp_wgpu_kernel *k;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  /* made once per device (shared with other backends on it, which the
   * test suite opens by the dozen); the device frees it */
  wisp_status st = wisp_wgpu_kernel_shared(g->d, src, "main", c, nc, key, &k);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  const double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
  /* Counted so that run and bench can say how long compiling took and keep
   * it out of their tok/s (a cold first run on a CPU Vulkan driver spends
   * tens of seconds here). */
  g->stats.pipelines++;
  g->stats.compile_seconds += ms / 1e3;
  if (wisp_env_verbose()) fprintf(stderr, "pipeline %s: %.0f ms\n", key, ms);
  if (st) {
    keep_error(g, st);
    return NULL;
  }
  kcache *e = &g->kernels[g->n_kernels++];
  e->file = file;
  e->nc = nc;
  for (int j = 0; j < nc; j++) e->v[j] = c[j].value;
  e->k = k;
  return k;
}

/* ---- bind groups --------------------------------------------------------- */

/* Why sites and slots: a bind group names its uniform range, so a cache
 * keyed by arena offset (as the first version was) misses whenever an
 * earlier dispatch of the submit comes or goes -- one more attention split
 * as the context grows shifts every later offset -- and a decode batch of
 * 64 tokens then made thousands of bind groups while recording (~10 us
 * each on the H200), more than the GPU took to run them. Here the n-th
 * dispatch of a site in a submit always gets the site's n-th bind group and
 * its slot, so a step recorded again finds everything made; only the
 * parameters are copied. (WebGPU's dynamic uniform offsets would do the same
 * with one bind group a site, but need explicit bind group layouts in the
 * declared webgpu.h subset; this needs none.) */

static uint64_t hash_key(const bg_key *k) {
  /* Word-wise over the used bindings (the key is zeroed before filling). */
  uint64_t h = (uint64_t)(uintptr_t)k->k * 0x9E3779B97F4A7C15ull ^ (k->usize << 40);
  for (int i = 0; i < k->nb; i++) {
    h = (h ^ (uint64_t)(uintptr_t)k->b[i].buffer) * 0xBF58476D1CE4E5B9ull;
    h = (h ^ k->b[i].offset ^ (k->b[i].size << 20)) * 0x94D049BB133111EBull;
  }
  return h ^ (h >> 31);
}

static void site_free(wgpu_backend *g, bg_site *e) {
  for (int i = 0; i < e->n; i++) wisp_wgpu_bind_free(g->d, e->slot[i].g);
  free(e->slot);
  free(e);
}

/* Drops every cached bind group and frees every arena slot. Call with
 * nothing recorded that uses them. */
static void drop_bind_groups(wgpu_backend *g) {
  for (int h = 0; h < BG_BUCKETS; h++) {
    while (g->buckets[h]) {
      bg_site *nx = g->buckets[h]->next;
      site_free(g, g->buckets[h]);
      g->buckets[h] = nx;
    }
  }
  g->arena_next = 0;
}

/* Drops cached bind groups that use buffer b (about to be released). Their
 * slots stay taken until the arena is next emptied. */
static void forget_buffer(wgpu_backend *g, WGPUBuffer b) {
  for (int h = 0; h < BG_BUCKETS; h++) {
    bg_site **pp = &g->buckets[h];
    while (*pp) {
      bg_site *e = *pp;
      int uses = 0;
      for (int i = 0; i < e->key.nb; i++) uses |= e->key.b[i].buffer == b;
      if (uses) {
        *pp = e->next;
        site_free(g, e);
      } else {
        pp = &e->next;
      }
    }
  }
}

/* The site of key, made if new; NULL (error kept) without memory. */
static bg_site *site_of(wgpu_backend *g, const bg_key *key) {
  uint64_t h = hash_key(key) % BG_BUCKETS;
  for (bg_site *e = g->buckets[h]; e; e = e->next)
    if (!memcmp(&e->key, key, sizeof *key)) return e;
  bg_site *e = calloc(1, sizeof *e);
  if (!e) {
    op_fail(g, WISP_ENOMEM, "out of memory");
    return NULL;
  }
  e->key = *key;
  e->epoch = UINT64_MAX;
  e->next = g->buckets[h];
  g->buckets[h] = e;
  return e;
}

/* A new slot of `size` bytes, or UINT64_MAX when the arena is full. */
static uint64_t slot_alloc(wgpu_backend *g, uint64_t size) {
  uint64_t off = (g->arena_next + g->ualign - 1) / g->ualign * g->ualign;
  if (off + size > g->arena_bytes) return UINT64_MAX;
  g->arena_next = (size_t)(off + size);
  return off;
}

static wisp_status flush(wgpu_backend *g);

/* Doubles the arena (up to arena_max) once it has been flushed and its
 * bind groups dropped: a submit that needs more slots than the arena has
 * would otherwise drop and remake its bind groups every time it fills up.
 * On failure the old arena stays. */
static void arena_grow(wgpu_backend *g) {
  if (g->arena_bytes * 2 > g->arena_max) return;
  size_t nb = g->arena_bytes * 2;
  uint8_t *h = realloc(g->arena_host, nb);
  if (!h) return;
  g->arena_host = h;
  wisp_wgpu_buf nbuf;
  if (wisp_wgpu_buf_create(g->d, nb, WISP_WGPU_UNIFORM, "wisp uniform arena", &nbuf)) return;
  wisp_wgpu_buf_free(g->d, &g->arena); /* the flushed work keeps it until it is done */
  g->arena = nbuf;
  g->arena_bytes = nb;
}

/* The bind group of the next dispatch of k with storage bindings b[0..nb)
 * and a parameter block of usize bytes in this submit; *uoff gets its slot.
 * A full arena is flushed and emptied first (which may submit). NULL (error
 * kept) on failure. */
static WGPUBindGroup bind_group(wgpu_backend *g, const wisp_wgpu_kernel *k, const wisp_wgpu_binding *b, int nb,
                                uint64_t usize, uint64_t *uoff) {
  bg_key key;
  memset(&key, 0, sizeof key);
  key.k = k;
  key.nb = nb;
  for (int i = 0; i < nb; i++) key.b[i] = b[i];
  key.usize = usize;
  bg_site *e = site_of(g, &key);
  if (!e) return NULL;
  if (e->epoch != g->batch_epoch) {
    e->epoch = g->batch_epoch;
    e->used = 0;
  }
  if (e->used == e->n) { /* one more than any submit needed so far */
    uint64_t off = slot_alloc(g, usize);
    if (off == UINT64_MAX) {
      keep_error(g, flush(g));
      if (g->error) return NULL;
      drop_bind_groups(g);
      arena_grow(g);
      if (!open_batch(g) || !(e = site_of(g, &key))) return NULL;
      e->epoch = g->batch_epoch;
      off = slot_alloc(g, usize);
      if (off == UINT64_MAX) {
        op_fail(g, WISP_EINVAL, "webgpu: a %llu-byte parameter block does not fit the uniform arena",
                (unsigned long long)usize);
        return NULL;
      }
    }
    if (e->n == e->cap) {
      int cap = e->cap ? 2 * e->cap : 4;
      bg_slot *ns = realloc(e->slot, (size_t)cap * sizeof *ns);
      if (!ns) {
        op_fail(g, WISP_ENOMEM, "out of memory");
        return NULL;
      }
      e->slot = ns;
      e->cap = cap;
    }
    wisp_wgpu_binding all[MAX_BINDINGS + 1];
    for (int i = 0; i < nb; i++) all[i] = b[i];
    all[nb] = (wisp_wgpu_binding){g->arena.b, off, usize};
    WGPUBindGroup bg;
    wisp_status st = wisp_wgpu_bind(g->d, k, all, nb + 1, &bg);
    if (st) {
      keep_error(g, st);
      return NULL;
    }
    e->slot[e->n++] = (bg_slot){bg, off};
    g->stats.bind_groups++;
  }
  *uoff = e->slot[e->used].uoff;
  return e->slot[e->used++].g;
}

/* ---- recording ------------------------------------------------------------ */

/* Writes the arena and submits the recorded work (if any), with a copy of
 * src[src_off .. +bytes) into the staging buffer `dst` recorded after it
 * when src is given (so that a readback needs no submit of its own). */
static wisp_status flush_copy(wgpu_backend *g, WGPUBuffer src, uint64_t src_off, wisp_wgpu_buf *dst, uint64_t bytes) {
  if (!g->open) return WISP_OK;
  g->open = 0;
  g->spec_ready = 0;
  wisp_status st = WISP_OK;
  if (g->dirty_lo < g->dirty_hi)
    st = wisp_wgpu_buf_write(g->d, g->arena, g->dirty_lo, g->arena_host + g->dirty_lo, g->dirty_hi - g->dirty_lo);
  g->dirty_lo = SIZE_MAX;
  g->dirty_hi = 0;
  if (!st && src) st = wisp_wgpu_staging_reserve(g->d, dst, bytes);
  if (st) {
    wisp_wgpu_batch_abort(&g->batch);
    return st;
  }
  if (src) st = wisp_wgpu_batch_submit_copy(&g->batch, src, src_off, dst->b, 0, bytes);
  else st = wisp_wgpu_batch_submit(&g->batch);
  if (!st && g->d->guard_bytes && (st = wisp_wgpu_guard_check(g->d)))
    wisp_error_prefix("a batch of %llu dispatches, the last %s", (unsigned long long)g->batch_dispatches,
                      g->last_kernel ? g->last_kernel : "?");
  g->stats.submits++;
  g->stats.last_dispatches = g->batch_dispatches;
  g->batch_dispatches = 0;
  return st;
}

/* The same; with `spec`, the speculative readback copy (spec_src) goes at
 * the end of the command buffer. */
static wisp_status flush_ex(wgpu_backend *g, int spec) {
  int with = spec && g->spec_src;
  if (with && !g->open) {
    /* Nothing recorded since the last submit. staging is current only if
     * it was filled after that submit; otherwise (work went out through a
     * plain flush: a full arena, a growing scratch buffer, a buffer write)
     * the copy goes out on its own rather than a stale range being served
     * as fresh. */
    if (g->spec_have && g->spec_at == g->stats.submits) {
      g->spec_ready = 1;
      return WISP_OK;
    }
    if (g->error || !open_batch(g)) return WISP_OK; /* the error is kept for sync */
  }
  wisp_status st = flush_copy(g, with ? g->spec_src : NULL, g->spec_off, &g->staging, g->spec_bytes);
  if (with && !st) {
    g->spec_ready = 1;
    g->spec_have = 1;
    g->spec_at = g->stats.submits;
  }
  return st;
}

static wisp_status flush(wgpu_backend *g) { return flush_ex(g, 0); }


/* Records one dispatch of k with storage bindings b[0..nb) and the
 * parameter block as binding nb. */
/* Opens a command batch unless one is open; 0 (error kept) on failure. */
static int open_batch(wgpu_backend *g) {
  if (g->open) return 1;
  wisp_status st = wisp_wgpu_batch_begin(g->d, &g->batch);
  if (st) {
    keep_error(g, st);
    return 0;
  }
  g->open = 1;
  g->batch_epoch++;
  return 1;
}

static void record_xyz(wgpu_backend *g, const wisp_wgpu_kernel *k, const wisp_wgpu_binding *b, int nb,
                       const void *params, size_t psize, uint32_t gx, uint32_t gy, uint32_t gz) {
  if (g->error || !k) return;
  if (!open_batch(g)) return;
  uint64_t off;
  WGPUBindGroup bg = bind_group(g, k, b, nb, psize, &off); /* (reopens the batch if it flushed a full arena) */
  if (!bg) return;
  memcpy(g->arena_host + off, params, psize);
  if (off < g->dirty_lo) g->dirty_lo = (size_t)off;
  if (off + psize > g->dirty_hi) g->dirty_hi = (size_t)(off + psize);
  g->spec_ready = 0;
  wisp_wgpu_batch_dispatch(&g->batch, k, bg, gx, gy, gz);
  g->stats.dispatches++;
  g->batch_dispatches++;
  g->last_kernel = k->label;
  if (g->guard_each) keep_error(g, flush(g)); /* the guard check names this kernel */
}

static void record(wgpu_backend *g, const wisp_wgpu_kernel *k, const wisp_wgpu_binding *b, int nb,
                   const void *params, size_t psize, uint32_t gx, uint32_t gy) {
  record_xyz(g, k, b, nb, params, psize, gx, gy, 1);
}

static wisp_wgpu_binding whole(WGPUBuffer b) { return (wisp_wgpu_binding){b, 0, 0}; }

/* Makes *buf at least `need` bytes (creating `want` >= need when it grows);
 * 0 on failure (kept for sync). */
static int scratch(wgpu_backend *g, wisp_wgpu_buf *buf, uint64_t need, uint64_t want, const char *label) {
  /* With the debug guard the buffer is exactly `need` bytes, so that its
   * padding starts where this use's data ends. */
  if (g->d->guard_bytes) {
    if (buf->b && buf->size == ((need ? need : 4) + 3) / 4 * 4) return 1;
    want = need;
  } else if (need <= buf->size) {
    return 1;
  }
  keep_error(g, flush(g)); /* recorded work may use the old one */
  if (buf->b) {
    forget_buffer(g, buf->b);
    wisp_wgpu_buf_free(g->d, buf);
  }
  wisp_status st = wisp_wgpu_buf_create(g->d, want > need ? want : need, WISP_WGPU_STORAGE, label, buf);
  if (st) {
    keep_error(g, st);
    return 0;
  }
  return 1;
}

/* ---- memory -------------------------------------------------------------- */

static wisp_buf *g_buf_new(wisp_backend *be, size_t n) {
  wgpu_backend *g = as_g(be);
  wisp_buf *b = calloc(1, sizeof *b);
  if (!b) return NULL;
  if (wisp_wgpu_buf_create(g->d, (uint64_t)(n ? n : 1) * 4, WISP_WGPU_STORAGE, "wisp activation", &b->g)) {
    free(b);
    return NULL;
  }
  b->n = n;
  return b;
}

/* A KV cache: with the packed-f16 cache, n halves in n/2 words. */
static wisp_buf *g_kv_buf_new(wisp_backend *be, size_t n) {
  return g_buf_new(be, as_g(be)->kv16 ? (n + 1) / 2 : n);
}

/* The binding of a buffer: the whole device buffer, or a slot's part. */
static wisp_wgpu_binding bind_of(const wisp_buf *b) {
  return b->parent ? (wisp_wgpu_binding){b->g.b, b->off, (uint64_t)b->n * 4} : whole(b->g.b);
}

/* The first 32-bit word of a buffer (a slot's part) in its device buffer. */
static uint64_t word0(const wisp_buf *b) { return b->off / 4; }

/* backend.h buf_new_slots: slot i's part at i * stride of a shared buffer,
 * the stride rounded up to the storage offset alignment (256 bytes at
 * most); as many slots a device buffer as one binding may span, so that a
 * rows kernel binds it whole. */
static wisp_status g_buf_new_slots(wisp_backend *be, size_t n, int kv, int slots, wisp_buf **out) {
  wgpu_backend *g = as_g(be);
  const uint64_t words = kv && g->kv16 ? (n + 1) / 2 : (n ? n : 1);
  const uint64_t align = g->d->info.min_storage_buffer_offset_alignment > 256
                             ? g->d->info.min_storage_buffer_offset_alignment
                             : 256;
  const uint64_t stride = (words * 4 + align - 1) / align * align;
  uint64_t per = g->max_binding / stride;
  if (per < 1) per = 1;
  for (int i = 0; i < slots; i++) out[i] = NULL;
  for (int i0 = 0; i0 < slots; i0 += (int)per) {
    const int cnt = slots - i0 < (int)per ? slots - i0 : (int)per;
    wisp_buf *P = calloc(1, sizeof *P);
    if (!P || wisp_wgpu_buf_create(g->d, stride * (uint64_t)(cnt - 1) + words * 4, WISP_WGPU_STORAGE,
                                   "wisp slot states", &P->g)) {
      free(P);
      goto fail;
    }
    P->n = (size_t)(P->g.size / 4);
    for (int i = 0; i < cnt; i++) {
      wisp_buf *v = calloc(1, sizeof *v);
      if (!v) {
        if (!P->refs) {
          wisp_wgpu_buf_free(g->d, &P->g);
          free(P);
        }
        goto fail;
      }
      *v = (wisp_buf){P->g, (size_t)words, stride * (uint64_t)i, P, 0};
      P->refs++;
      out[i0 + i] = v;
    }
  }
  return WISP_OK;
fail:
  for (int i = 0; i < slots; i++)
    if (out[i]) {
      be->buf_free(be, out[i]);
      out[i] = NULL;
    }
  return wisp_fail(WISP_ENOMEM, "webgpu: out of memory for %d slots of %zu values", slots, n);
}

static void g_buf_free(wisp_backend *be, wisp_buf *b) {
  wgpu_backend *g = as_g(be);
  if (!b) return;
  wisp_wgpu_persist_forget(be, b); /* no copy-back into a freed state buffer */
  emit_pending(g);
  keep_error(g, flush(g)); /* recorded work may still use it */
  if (b->parent) { /* a slot's part: the device buffer goes with the last part */
    wisp_buf *P = b->parent;
    free(b);
    if (--P->refs > 0) return;
    b = P;
  }
  forget_buffer(g, b->g.b);
  if (g->spec_src == b->g.b) {
    g->spec_src = NULL;
    g->spec_ready = 0;
    g->spec_have = 0;
  }
  wisp_wgpu_buf_free(g->d, &b->g);
  free(b);
}

static void g_buf_read(wisp_backend *be, const wisp_buf *b, size_t off, size_t n, float *dst) {
  wgpu_backend *g = as_g(be);
  wisp_wgpu_persist_flush(be); /* a state buffer read back must hold the persistent decode's latest */
  emit_pending(g);
  wisp_status st;
  off += (size_t)word0(b); /* a slot's part: words of its device buffer */
  if (g->spec_ready && !g->open && g->spec_src == b->g.b && g->spec_off == (uint64_t)off * 4 &&
      g->spec_bytes == (uint64_t)n * 4) {
    g->stats.spec_reads++;
    st = wisp_wgpu_staging_read(g->d, g->staging, dst, n * 4);
  } else {
    keep_error(g, flush(g));
    st = wisp_wgpu_buf_read_via(g->d, b->g, (uint64_t)off * 4, dst, n * 4, &g->staging);
    g->spec_src = n ? b->g.b : NULL;
    g->spec_off = (uint64_t)off * 4;
    g->spec_bytes = (uint64_t)n * 4;
    g->spec_have = !st; /* staging now holds exactly that range */
    g->spec_at = g->stats.submits;
  }
  g->spec_ready = 0; /* the staging buffer has been read (and may be reused) */
  if (st) {
    keep_error(g, st);
    for (size_t i = 0; i < n; i++) dst[i] = NAN;
  }
}

static void g_buf_zero(wisp_backend *be, wisp_buf *b) {
  wgpu_backend *g = as_g(be);
  state_op(be);
  emit_pending(g);
  /* Queue writes land before the next submit: submit what is recorded first. */
  keep_error(g, flush(g));
  g->spec_ready = 0;
  g->spec_have = 0;
  static const float zeros[4096];
  uint64_t bytes = b->parent ? (uint64_t)b->n * 4 : b->g.size;
  for (uint64_t o = 0; o < bytes; o += sizeof zeros) {
    size_t k = bytes - o < sizeof zeros ? (size_t)(bytes - o) : sizeof zeros;
    wisp_status st = wisp_wgpu_buf_write(g->d, b->g, b->off + o, zeros, k);
    if (st) {
      keep_error(g, st);
      return;
    }
  }
}

/* ---- weights ------------------------------------------------------------- */

static wmat *find_mat(wgpu_backend *g, const wisp_matrix *m) {
  const void *host = m->type == WISP_W_F32 ? (const void *)m->f32 : (const void *)m->q;
  for (int i = 0; i < g->n_mats; i++)
    if ((void *)g->mats[i] == m->device && g->mats[i]->host == host) return g->mats[i];
  for (int i = 0; i < g->n_mats; i++)
    if (g->mats[i]->host == host && g->mats[i]->rows == m->rows && g->mats[i]->cols == m->cols) return g->mats[i];
  return NULL;
}

static void wmat_free(wgpu_backend *g, wmat *w) {
  if (!w) return;
  for (int p = 0; p < w->nparts; p++) {
    wisp_wgpu_buf_free(g->d, &w->parts[p].w);
    wisp_wgpu_buf_free(g->d, &w->parts[p].s);
    wisp_wgpu_buf_free(g->d, &w->parts[p].z);
  }
  free(w->parts);
  free(w);
}

/* Lanes per row group of matvec.wgsl: a subgroup (32 on NVIDIA) or a whole
 * number of them, never more than the workgroup. */
static uint32_t matvec_lanes(const wgpu_backend *g, uint32_t wg) {
  uint32_t lg = g->d->info.subgroup_max_size > 32 ? g->d->info.subgroup_max_size : 32;
  return lg < wg ? lg : wg;
}

/* XN of the one-token products (matvec, matvec_conv, q4k_matvec,
 * q4k_fused): the input's vec4s when they fit the workgroup memory beside
 * the kernel's own arrays (own_bytes) so that each workgroup stages x' once
 * (matvec_common.wgsli), else 1 (read from global memory).
 * Tuning xstage=0 turns staging off. */
static uint32_t staged_vec4s(const wgpu_backend *g, int cols, uint64_t own_bytes) {
  /* the staged array holds whole runs of 8 vec4s (matvec_common.wgsli's xsw) */
  const uint64_t bytes = ((uint64_t)cols / 4 + 7) / 8 * 8 * 16 + own_bytes + 64;
  if (g->no_xstage || cols % 4 || cols < 8 || bytes > g->d->info.max_compute_workgroup_storage_size) return 1;
  return (uint32_t)cols / 4;
}

/* matvec.wgsl's own workgroup arrays (partial, inv_s, am_v / am_i, cmb). */
static uint64_t matvec_own_bytes(uint32_t wg, uint32_t lg, uint32_t rows, uint32_t cmb) {
  return ((uint64_t)(wg / lg) * rows * (lg / 4) + wg / 4 + 1) * 4 + (uint64_t)(wg / lg) * rows * 8 + (uint64_t)cmb * 4;
}

/* attn_prefill.wgsl: query tokens per workgroup, keys per shared tile, most head dimensions */
#define ATTN_PREFILL_QB 64
#define ATTN_PREFILL_KT 32
#define ATTN_PREFILL_MAXD 64

/* shortconv.wgsl: tokens per thread (its grid's y is ceil(n / this)). */
#define SHORTCONV_TT 16

/* The most heads x splits a merge fused into a product (matvec PRE 3) takes. */
#define MERGE_MAX 1024

/* The plan's kernel choice for a matrix: a wgsl_* matmul variant of
 * kernels/registry.json, and for one-token products the geometry (WG
 * threads, ROWS rows per workgroup) the plan resolved. */
static wisp_status apply_choice(wgpu_backend *g, const wisp_matrix *m, wmat *w) {
  if (m->type == WISP_W_Q4K) return wisp_wgpu_q4k_check_choice(m); /* wgpu_gated.c */
  for (int ph = 0; ph < 2; ph++) {
    const char *v = m->choice[ph].variant;
    /* The seed profile's Q4_K kernel set on a section that this artifact
     * stores as Q4 (columns not a multiple of 256): the default kernel runs. */
    if (v[0] && strncmp(v, "wgsl_", 5) != 0 && strcmp(v, "profile:fused_matmul_q4_metal_simd16"))
      return wisp_fail(WISP_EUNSUPPORTED, "the plan chose matmul kernel '%s', which the webgpu backend does not have", v);
  }
  const wisp_kernel_choice *c = &m->choice[WISP_PHASE_DECODE];
  if (!strncmp(c->variant, "profile:", 8)) return WISP_OK; /* its geometry is the profile kernel's */
  if (g->env_geometry || (!c->workgroup_size && !c->rows_per_subgroup)) return WISP_OK;
  uint32_t wg = c->workgroup_size ? (uint32_t)c->workgroup_size : g->mv_wg;
  uint32_t rows = c->rows_per_subgroup ? (uint32_t)c->rows_per_subgroup : g->mv_rows;
  if (rows > 16 || rows > wg || wg > g->d->info.max_compute_invocations_per_workgroup ||
      (!g->sg && (wg & (wg - 1))) || (g->sg && wg % matvec_lanes(g, wg)))
    return wisp_fail(WISP_EUNSUPPORTED, "webgpu: the plan's matvec geometry WG=%u ROWS=%u for a %dx%d matrix is outside "
                     "what matvec%s.wgsl supports (ROWS <= 16 and <= WG%s)", wg, rows, m->rows, m->cols,
                     g->sg ? "" : "_nosg", g->sg ? ", WG a multiple of the subgroup size" : ", WG a power of two");
  w->mv_wg = wg;
  w->mv_rows = rows;
  return WISP_OK;
}

/* Uploads rows [P->row0, +P->rows) of a Q8_0 matrix: ggml's 34-byte blocks
 * (f16 scale, 32 int8) become the int8 values, four to a word (P->w), and
 * one f32 scale a block (P->s), the layout of QT 5 (unpack_weights.wgsli). */
static wisp_status q8_0_part(wgpu_backend *g, const wisp_matrix *m, wmat_part *P) {
  const size_t nb = (size_t)m->cols / WISP_Q8_0_BLOCK, nblk = (size_t)P->rows * nb;
  int8_t *q = malloc(nblk * WISP_Q8_0_BLOCK);
  float *sc = malloc(nblk * sizeof(float));
  wisp_status st = q && sc ? WISP_OK : wisp_fail(WISP_ENOMEM, "out of memory");
  const uint8_t *blk = m->q + (size_t)P->row0 * nb * WISP_Q8_0_BYTES;
  for (size_t b = 0; !st && b < nblk; b++, blk += WISP_Q8_0_BYTES) {
    sc[b] = wisp_f16_to_f32((uint16_t)(blk[0] | blk[1] << 8));
    memcpy(q + b * WISP_Q8_0_BLOCK, blk + 2, WISP_Q8_0_BLOCK);
  }
  if (!st) st = wisp_wgpu_buf_from(g->d, q, nblk * WISP_Q8_0_BLOCK, "wisp q8_0 values", &P->w);
  if (!st) st = wisp_wgpu_buf_from(g->d, sc, nblk * sizeof(float), "wisp q8_0 scales", &P->s);
  free(q);
  free(sc);
  return st;
}

static wisp_status g_prepare_matrix(wisp_backend *be, wisp_matrix *m) {
  wgpu_backend *g = as_g(be);
  wmat *have = find_mat(g, m);
  if (have) {
    m->device = have;
    return apply_choice(g, m, have);
  }
  const int rows = m->rows, cols = m->cols;
  if (rows <= 0 || cols <= 0) return wisp_fail(WISP_EINVAL, "webgpu: matrix %dx%d", rows, cols);
  if (m->type == WISP_W_Q4K && cols % WISP_Q4K_BLOCK)
    return wisp_fail(WISP_EFORMAT, "Q4_K matrix with %d columns is not a whole number of 256-blocks", cols);
  if (m->type == WISP_W_F16 && cols % 8) /* a product's unit is 8 halves (one vec4 of words) */
    return wisp_fail(WISP_EUNSUPPORTED, "webgpu: an f16 matrix of %d columns (a multiple of 8 is needed)", cols);
  if (m->type != WISP_W_F32 && m->type != WISP_W_F16 && cols % WISP_Q4_BLOCK)
    return wisp_fail(WISP_EFORMAT, "matrix with %d columns is not a whole number of 32-blocks", cols);
  const int nb = cols / WISP_Q4_BLOCK;
  /* Bytes a row on the device: Q8_0 is repacked (q8_0_part) into its int8
   * values and an f32 scale a block, so that rows and values are word-aligned. */
  uint64_t wrow = m->type == WISP_W_F32    ? (uint64_t)cols * 4
                  : m->type == WISP_W_Q4K  ? (uint64_t)cols / WISP_Q4K_BLOCK * WISP_Q4K_BYTES
                  : m->type == WISP_W_F16  ? (uint64_t)cols * 2
                  : m->type == WISP_W_Q8_0 ? (uint64_t)cols
                                           : (uint64_t)cols / 2;
  uint64_t srow = m->type == WISP_W_Q4K || m->type == WISP_W_F16 ? 0 : (uint64_t)nb * 4;
  uint64_t per_row = wrow > srow ? wrow : srow;
  uint64_t limit = g->max_binding;
  /* A Q4Z part must start at an even block (zero points are two a byte). */
  uint64_t gran = m->type == WISP_W_Q4Z && nb % 2 ? 2 : 1;
  uint64_t rpp = limit / per_row / gran * gran;
  if (rpp == 0) return wisp_fail(WISP_EUNSUPPORTED, "webgpu: a row of %d columns exceeds the binding limit %llu",
                                 cols, (unsigned long long)limit);
  if (rpp > (uint64_t)rows) rpp = (uint64_t)rows;
  wmat *w = calloc(1, sizeof *w);
  if (!w) return wisp_fail(WISP_ENOMEM, "out of memory");
  w->host = m->type == WISP_W_F32 ? (const void *)m->f32 : (const void *)m->q;
  w->type = m->type;
  w->rows = rows;
  w->cols = cols;
  w->nparts = (int)(((uint64_t)rows + rpp - 1) / rpp);
  w->parts = calloc((size_t)w->nparts, sizeof *w->parts);
  wisp_status st = WISP_OK;
  if (!w->parts) st = wisp_fail(WISP_ENOMEM, "out of memory");
  for (int p = 0; !st && p < w->nparts; p++) {
    wmat_part *P = &w->parts[p];
    P->row0 = (int)(p * rpp);
    P->rows = (int)((uint64_t)rows - (uint64_t)P->row0 < rpp ? (uint64_t)rows - (uint64_t)P->row0 : rpp);
    if (m->type == WISP_W_F32) {
      st = wisp_wgpu_buf_from(g->d, m->f32 + (size_t)P->row0 * cols, (uint64_t)P->rows * wrow, "wisp weights", &P->w);
      continue;
    }
    if (m->type == WISP_W_Q8_0) {
      st = q8_0_part(g, m, P);
      continue;
    }
    st = wisp_wgpu_buf_from(g->d, m->q + (size_t)P->row0 * (size_t)wrow, (uint64_t)P->rows * wrow, "wisp quant",
                            &P->w);
    if (!st && m->type != WISP_W_Q4K && m->type != WISP_W_F16)
      st = wisp_wgpu_buf_from(g->d, m->scales + (size_t)P->row0 * nb, (uint64_t)P->rows * srow, "wisp scales", &P->s);
    if (!st && m->type == WISP_W_Q4Z) {
      size_t b0 = (size_t)P->row0 * nb; /* even, see gran */
      size_t nblk = (size_t)P->rows * nb;
      st = wisp_wgpu_buf_from(g->d, m->zp + b0 / 2, (nblk + 1) / 2, "wisp zero points", &P->z);
    }
  }
  if (!st && g->n_mats == g->cap_mats) {
    int cap = g->cap_mats ? 2 * g->cap_mats : 64;
    wmat **p = realloc(g->mats, (size_t)cap * sizeof *p);
    if (!p) st = wisp_fail(WISP_ENOMEM, "out of memory");
    else {
      g->mats = p;
      g->cap_mats = cap;
    }
  }
  if (st) {
    wisp_error_prefix("webgpu: uploading a %dx%d %s matrix", rows, cols, wisp_wtype_name(m->type));
    wmat_free(g, w);
    return st;
  }
  g->mats[g->n_mats++] = w;
  g->stats.weight_parts += (uint64_t)w->nparts;
  m->device = w;
  return apply_choice(g, m, w);
}

static wvec *find_vec(wgpu_backend *g, const wisp_vector *v) {
  for (int i = 0; i < g->n_vecs; i++)
    if ((void *)g->vecs[i] == v->device && g->vecs[i]->host == v->data) return g->vecs[i];
  for (int i = 0; i < g->n_vecs; i++)
    if (g->vecs[i]->host == v->data && g->vecs[i]->n == v->n) return g->vecs[i];
  return NULL;
}

static wisp_status g_prepare_vector(wisp_backend *be, wisp_vector *v) {
  wgpu_backend *g = as_g(be);
  wvec *have = find_vec(g, v);
  if (have) {
    v->device = have;
    return WISP_OK;
  }
  if (v->n <= 0) return wisp_fail(WISP_EINVAL, "webgpu: vector of %d values", v->n);
  if (g->n_vecs == g->cap_vecs) {
    int cap = g->cap_vecs ? 2 * g->cap_vecs : 64;
    wvec **p = realloc(g->vecs, (size_t)cap * sizeof *p);
    if (!p) return wisp_fail(WISP_ENOMEM, "out of memory");
    g->vecs = p;
    g->cap_vecs = cap;
  }
  wvec *w = calloc(1, sizeof *w);
  if (!w) return wisp_fail(WISP_ENOMEM, "out of memory");
  w->host = v->data;
  w->n = v->n;
  wisp_status st = wisp_wgpu_buf_from(g->d, v->data, (uint64_t)v->n * 4, "wisp vector", &w->g);
  if (st) {
    free(w);
    return st;
  }
  g->vecs[g->n_vecs++] = w;
  v->device = w;
  return WISP_OK;
}

static wmat *need_mat(wgpu_backend *g, const wisp_matrix *m) {
  wmat *w = find_mat(g, m);
  if (!w) op_fail(g, WISP_EINVAL, "a %dx%d matrix was not prepared for this backend", m->rows, m->cols);
  return w;
}

static wvec *need_vec(wgpu_backend *g, const wisp_vector *v) {
  wvec *w = find_vec(g, v);
  if (!w) op_fail(g, WISP_EINVAL, "a vector of %d values was not prepared for this backend", v->n);
  return w;
}

/* The QT override constant of the weight kernels (embed, matvec, matmul):
 * 0 f32, 1 Q4, 2 Q4Z, 3 Q4_K (matmul only), 4 F16, 5 Q8_0. */
static uint32_t qt_of(wisp_wtype t) {
  switch (t) {
    case WISP_W_F32: return 0;
    case WISP_W_Q4: return 1;
    case WISP_W_Q4Z: return 2;
    case WISP_W_Q4K: return 3;
    case WISP_W_F16: return 4;
    case WISP_W_Q8_0: return 5;
  }
  return 0;
}

/* Types the fused in_proj + short conv (matvec_conv*.wgsl) reads. */
static int conv_fusable(const wmat *w) { return w->type == WISP_W_F32 || w->type == WISP_W_Q4 || w->type == WISP_W_Q4Z; }

/* Weight bindings of a part: w, scales, zero points (dummy where unused). */
static void part_bindings(wgpu_backend *g, const wmat_part *P, wisp_wgpu_binding *b) {
  b[0] = whole(P->w.b);
  b[1] = whole(P->s.b ? P->s.b : g->dummy.b);
  b[2] = whole(P->z.b ? P->z.b : g->dummy.b);
}

/* ---- ops ----------------------------------------------------------------- */

static uint32_t cdiv(uint64_t a, uint64_t b) { return (uint32_t)((a + b - 1) / b); }

static void g_embed(wisp_backend *be, const wisp_matrix *E, const int32_t *tokens, int n, wisp_buf *out) {
  wgpu_backend *g = as_g(be);
  emit_pending(g);
  wmat *w = need_mat(g, E);
  if (!w) return;
  wisp_wgpu_const c[3] = {{"WG", 64}, {"QT", qt_of(w->type)}, {"FROM_IDS", 0}};
  wisp_wgpu_kernel *k = kernel(g, "embed", c, 3);
  struct {
    uint32_t n, cols, row0, rows, out_off, pad[3];
    uint32_t tok[EMBED_TOKENS];
  } p;
  for (int t0 = 0; t0 < n; t0 += EMBED_TOKENS) {
    int cnt = n - t0 < EMBED_TOKENS ? n - t0 : EMBED_TOKENS;
    memset(&p, 0, sizeof p);
    p.n = (uint32_t)cnt;
    p.cols = (uint32_t)w->cols;
    p.out_off = (uint32_t)((size_t)t0 * w->cols);
    for (int i = 0; i < cnt; i++) p.tok[i] = (uint32_t)tokens[t0 + i];
    for (int q = 0; q < w->nparts; q++) {
      const wmat_part *P = &w->parts[q];
      p.row0 = (uint32_t)P->row0;
      p.rows = (uint32_t)P->rows;
      wisp_wgpu_binding b[5];
      part_bindings(g, P, b);
      b[3] = whole(out->g.b);
      b[4] = whole(g->dummy.b);
      record(g, k, b, 5, &p, sizeof p, cdiv((uint64_t)w->cols, 64), (uint32_t)cnt);
    }
  }
}

static void rec_rmsnorm(wgpu_backend *g, const wisp_buf *x, wvec *w, float eps, int n, int dim, wisp_buf *out) {
  wisp_wgpu_const c[1] = {{"WG", 256}};
  wisp_wgpu_kernel *k = kernel(g, g->sg ? "rmsnorm" : "rmsnorm_nosg", c, 1);
  struct {
    uint32_t rows, n;
    float eps;
    uint32_t pad;
  } p = {(uint32_t)n, (uint32_t)dim, eps, 0};
  wisp_wgpu_binding b[3] = {whole(x->g.b), whole(w->g.b), whole(out->g.b)};
  uint32_t gx, gy;
  wisp_wgpu_grid(g->d, (uint32_t)n, &gx, &gy);
  record(g, k, b, 3, &p, sizeof p, gx, gy);
}

static void rec_swiglu(wgpu_backend *g, const wisp_buf *gu, int n, int ffn, wisp_buf *out) {
  wisp_wgpu_const c[1] = {{"WG", 256}};
  wisp_wgpu_kernel *k = kernel(g, "swiglu", c, 1);
  struct {
    uint32_t n, ffn, pad[2];
  } p = {(uint32_t)n, (uint32_t)ffn, {0, 0}};
  wisp_wgpu_binding b[2] = {whole(gu->g.b), whole(out->g.b)};
  uint32_t gx, gy;
  wisp_wgpu_grid(g->d, cdiv((uint64_t)n * ffn, 256), &gx, &gy);
  record(g, k, b, 2, &p, sizeof p, gx, gy);
}

static void rec_matvec(wgpu_backend *g, const wmat *w, int pre, const wisp_buf *xin, const wvec *nw, float eps,
                       const wisp_buf *xo, int x_row0, int n, wisp_buf *y, int accumulate, int argmax, int hd,
                       int splits, const wisp_buf *pair_out);
static void rec_attn_merge(wgpu_backend *g, int heads, int head_dim, int splits, const wisp_buf *out);

/* Records the held-back op, if any. Every entry point calls this first. */
static void emit_pending(wgpu_backend *g) {
  int kind = g->pend.kind;
  g->pend.kind = 0;
  if (kind == 1) rec_rmsnorm(g, g->pend.x, g->pend.w, g->pend.eps, 1, g->pend.dim, g->pend.out);
  else if (kind == 2) rec_swiglu(g, g->pend.x, 1, g->pend.dim, g->pend.out);
  else if (kind == 3)
    rec_matvec(g, g->pend.m, g->pend.pre, g->pend.x, g->pend.w, g->pend.eps, g->pend.mx, 0, 1, g->pend.my, 0, 0, 0, 0, NULL);
  else if (kind == 4)
    rec_attn_merge(g, g->pend.heads, g->pend.head_dim, g->pend.splits, g->pend.out);
  if (g->gated) wisp_wgpu_gated_emit(&g->base); /* a held-back Q4_K product (wgpu_gated.c) */
}

static void g_rmsnorm(wisp_backend *be, const wisp_buf *x, const wisp_vector *wv, float eps, int n, int dim,
                      wisp_buf *out) {
  wgpu_backend *g = as_g(be);
  emit_pending(g);
  wvec *w = need_vec(g, wv);
  if (!w) return;
  if (n == 1 && g->fuse && dim % 4 == 0 && x != out) {
    g->pend.kind = 1;
    g->pend.x = x;
    g->pend.w = w;
    g->pend.eps = eps;
    g->pend.dim = dim;
    g->pend.out = out;
    return;
  }
  rec_rmsnorm(g, x, w, eps, n, dim, out);
}

static void g_swiglu(wisp_backend *be, const wisp_buf *gu, int n, int ffn, wisp_buf *out) {
  wgpu_backend *g = as_g(be);
  if (g->gated && wisp_wgpu_gated_swiglu(be, gu, n, ffn, out)) return; /* fused FFN (Q4_K gate/up) */
  if (g->pend.kind == 3 && g->pend.my == gu && n == 1 && g->sg && g->pend.m->rows == 2 * ffn &&
      g->pend.m->nparts == 1 && out != gu && out != g->pend.mx && out != g->pend.x) {
    /* The held-back [gate; up] product and this SwiGLU in one dispatch (matvec PAIR). */
    g->pend.kind = 0;
    rec_matvec(g, g->pend.m, g->pend.pre, g->pend.x, g->pend.w, g->pend.eps, g->pend.mx, 0, 1, g->pend.my, 0, 0, 0, 0,
               out);
    return;
  }
  emit_pending(g);
  if (n == 1 && g->fuse && ffn % 4 == 0 && gu != out) {
    g->pend.kind = 2;
    g->pend.x = gu;
    g->pend.w = NULL;
    g->pend.dim = ffn;
    g->pend.out = out;
    return;
  }
  rec_swiglu(g, gu, n, ffn, out);
}

/* matvec.wgsl: lane groups of LG threads, ROWS rows each, WG/LG groups a
 * workgroup; matvec_nosg.wgsl: ROWS rows a workgroup. Tall matrices (the
 * head) take more rows per lane group: fewer workgroups re-reading x (and
 * re-reducing its norm with PRE 1). Subgroup variant only: the plain one
 * with many rows was found very slow on lavapipe (tree reductions of
 * ROWS*WG values). */
static void matvec_geometry(const wgpu_backend *g, const wmat *w, uint32_t *wg, uint32_t *rows, uint32_t *lg) {
  *rows = w->rows >= 16384 && g->sg ? g->mv_rows_big : g->mv_rows;
  *wg = g->mv_wg;
  if (w->mv_wg) { /* the plan's geometry */
    *wg = w->mv_wg;
    *rows = w->mv_rows;
  }
  *lg = matvec_lanes(g, *wg);
}

/* Whether a split merge over heads of w->cols / heads dimensions can fuse
 * into the product by w (matvec.wgsl PRE 3): subgroup variant, the input
 * staged beside MERGE_MAX merge weights. */
static int merge_fits(const wgpu_backend *g, const wmat *w, int heads, int splits) {
  uint32_t wg, rows, lg;
  matvec_geometry(g, w, &wg, &rows, &lg);
  return g->sg && w->cols % 4 == 0 && (uint64_t)heads * (uint64_t)splits <= MERGE_MAX &&
         staged_vec4s(g, w->cols, matvec_own_bytes(wg, lg, rows, MERGE_MAX)) > 1;
}

/* One-token product(s) y[t] (+)= W x'[t] for t < n (x' = x, or with pre the
 * held-back op fused in: xin is that op's input, nw its weights, xo its
 * output buffer, which is also the product's nominal input). */
static void rec_matvec(wgpu_backend *g, const wmat *w, int pre, const wisp_buf *xin, const wvec *nw, float eps,
                       const wisp_buf *xo, int x_row0, int n, wisp_buf *y, int accumulate, int argmax, int hd,
                       int splits, const wisp_buf *pair_out) {
  uint32_t wg, rows, lg;
  matvec_geometry(g, w, &wg, &rows, &lg);
  const int pair = pair_out != NULL; /* PAIR: gate/up rows in pairs, SwiGLU into pair_out */
  if (pair && rows % 2) rows = rows == 1 ? 2 : rows + 1;
  /* tall matrices: RCH chunks of rows per workgroup (matvec.wgsl); by
   * default 4 for heads of 131072 rows or more (a 248k vocabulary:
   * 1-2 % faster in three H200 runs, sixth to eighth sessions), else 1 */
  uint32_t rch = 1;
  if (g->sg && w->rows >= 16384) rch = g->head_chunks ? g->head_chunks : w->rows >= 131072 ? 4 : 1;
  uint32_t rows_wg = g->sg ? (wg / lg) * rows * rch : rows;
  /* argmax (n = 1): per-workgroup (max, index) pairs to g->amax, in row
   * order across the parts; g->amax_count is their number. */
  const uint32_t cmb = pre == 3 ? MERGE_MAX : 1; /* PRE 3's merge weights */
  const uint64_t mv_own = matvec_own_bytes(wg, lg, rows, cmb);
  wisp_wgpu_const c[10] = {{"WG", wg},         {"ROWS", rows}, {"QT", qt_of(w->type)},
                          {"ARGMAX", argmax}, {"LG", lg},     {"XN", staged_vec4s(g, w->cols, mv_own)},
                          {"PF", g->prefetch == 1}, {"CMB", cmb}, {"RCH", rch}, {"PAIR", pair}};
  uint32_t part_off = 0;
  if (argmax) {
    uint64_t total = 0;
    for (int q = 0; q < w->nparts; q++) total += cdiv((uint64_t)w->parts[q].rows, rows_wg);
    if (!scratch(g, &g->amax, total * 8, total * 8, "wisp argmax partials")) return;
    g->amax_count = (uint32_t)total;
  }
  wisp_wgpu_kernel *k = kernel(g, g->sg ? "matvec" : "matvec_nosg", c, g->sg ? 10 : 4);
  for (int t = 0; t < n; t++) {
    for (int q = 0; q < w->nparts; q++) {
      const wmat_part *P = &w->parts[q];
      struct {
        uint32_t rows, cols, y_off, x_off, acc;
        float eps;
        uint32_t pre, part_off, hd, splits, pair, pad1;
      } p = {(uint32_t)P->rows, (uint32_t)w->cols, (uint32_t)((size_t)t * w->rows + P->row0),
             (uint32_t)((size_t)(x_row0 + t) * w->cols / 4), accumulate ? 1u : 0u, eps, (uint32_t)pre, part_off,
             (uint32_t)hd, (uint32_t)splits, pair ? (uint32_t)w->rows / 2 : 0u, 0};
      wisp_wgpu_binding b[8];
      part_bindings(g, P, b);
      b[3] = whole(pre == 3 ? g->dummy.b : xin->g.b);
      b[4] = whole(y->g.b);
      b[5] = whole(pre == 1 ? nw->g.b : g->dummy.b);
      b[6] = whole(pre ? xo->g.b : g->dummy_rw.b);
      b[7] = whole(argmax ? g->amax.b : pre == 3 ? g->part.b : pair ? pair_out->g.b : g->dummy_rw2.b);
      uint32_t gx, gy;
      wisp_wgpu_grid(g->d, cdiv((uint64_t)P->rows, rows_wg), &gx, &gy);
      record(g, k, b, 8, &p, sizeof p, gx, gy);
      part_off += (uint32_t)cdiv((uint64_t)P->rows, rows_wg);
    }
  }
}

static void g_matmul(wisp_backend *be, const wisp_matrix *W, const wisp_buf *x, int x_row0, int n, wisp_buf *y,
                     int accumulate) {
  wgpu_backend *g = as_g(be);
  const int no_norm_fuse = W->choice[n == 1 ? WISP_PHASE_DECODE : WISP_PHASE_PREFILL].no_norm_fuse;
  if (W->type == WISP_W_Q4K) { /* wgpu_gated.c; a held-back rmsnorm of x may fuse into it */
    if (g->gated && g->fuse && wisp_wgpu_gated_take_input(be, W, x, x_row0, n, y)) {
      emit_pending(g); /* everything else held back comes first */
      wisp_wgpu_q4k_matmul_ex(be, W, NULL, NULL, 0, NULL, x, x_row0, n, y, accumulate);
      return;
    }
    const wisp_buf *nx = NULL, *nxo = NULL;
    WGPUBuffer nwb = NULL;
    float neps = 0;
    if (g->pend.kind == 1 && g->pend.out == x && n == 1 && x_row0 == 0 && W->cols == g->pend.dim && !no_norm_fuse &&
        g->pend.x != y && g->pend.out != y) {
      nx = g->pend.x;
      nxo = g->pend.out;
      nwb = g->pend.w->g.b;
      neps = g->pend.eps;
      g->pend.kind = 0;
    }
    emit_pending(g);
    wisp_wgpu_q4k_matmul_ex(be, W, nx, nwb, neps, nxo, x, x_row0, n, y, accumulate);
    return;
  }
  /* Fuse a held-back rmsnorm/swiglu whose output is this product's input. */
  int pre = 0;
  const wisp_buf *pre_x = NULL;
  wvec *pre_w = NULL;
  float pre_eps = 0;
  if ((g->pend.kind == 1 || g->pend.kind == 2) && g->pend.out == x && n == 1 && x_row0 == 0 &&
      W->cols == g->pend.dim && g->pend.x != y && g->pend.out != y && !(g->pend.kind == 1 && no_norm_fuse)) {
    pre = g->pend.kind;
    pre_x = g->pend.x;
    pre_w = g->pend.w;
    pre_eps = g->pend.eps;
    g->pend.kind = 0;
  }
  /* ... or a held-back attention split merge (PRE 3, matvec.wgsl) */
  int merge_hd = 0, merge_splits = 0;
  const wisp_buf *merge_out = NULL;
  if (g->pend.kind == 4 && g->pend.out == x && n == 1 && x_row0 == 0 && g->pend.out != y &&
      W->cols == g->pend.heads * g->pend.head_dim && W->type != WISP_W_Q4K) {
    pre = 3;
    merge_hd = g->pend.head_dim;
    merge_splits = g->pend.splits;
    merge_out = g->pend.out;
    g->pend.kind = 0;
  }
  emit_pending(g);
  wmat *w = need_mat(g, W);
  if (!w || n <= 0) return;
  if (pre == 3 && !merge_fits(g, w, W->cols / merge_hd, merge_splits)) { /* not staged: merge first, then a plain product */
    rec_attn_merge(g, W->cols / merge_hd, merge_hd, merge_splits, merge_out);
    pre = 0;
  }
  if (!pre && wisp_wgpu_mm8_matmul(be, W, x, x_row0, n, y, accumulate)) return; /* Q4 x int8 (wgpu_matmul_i8.c) */
  if (w->cols % 4) { /* x is read as vec4 rows */
    op_fail(g, WISP_EUNSUPPORTED, "matmul with an f32 matrix of %d columns (a multiple of 4 is needed)", w->cols);
    return;
  }
  const int tiled = n > 1 && w->cols % 32 == 0;
  if (tiled) {
    wisp_wgpu_const c[3] = {{"TM", g->mm_tm}, {"TN", g->mm_tn}, {"QT", qt_of(w->type)}};
    wisp_wgpu_kernel *k = kernel(g, "matmul", c, 3);
    for (int q = 0; q < w->nparts; q++) {
      const wmat_part *P = &w->parts[q];
      struct {
        uint32_t rows, cols, y_off, x_off, acc, n, y_stride, pad;
      } p = {(uint32_t)P->rows, (uint32_t)w->cols, (uint32_t)P->row0, (uint32_t)((size_t)x_row0 * w->cols / 4),
             accumulate ? 1u : 0u, (uint32_t)n, (uint32_t)w->rows, 0};
      wisp_wgpu_binding b[5];
      part_bindings(g, P, b);
      b[3] = whole(x->g.b);
      b[4] = whole(y->g.b);
      record(g, k, b, 5, &p, sizeof p, cdiv((uint64_t)P->rows, g->mm_tm), cdiv((uint64_t)n, g->mm_tn));
    }
    return;
  }
  /* A one-token product that a shortconv (in_proj) or a greedy sample_id
   * (the head) may consume: hold it back. */
  if (n == 1 && x_row0 == 0 && !accumulate && x != y && !g->error && pre != 3 &&
      ((g->conv_fuse && w->nparts == 1 && w->rows % 3 == 0 && conv_fusable(w)) || g->fuse_argmax)) {
    g->pend.kind = 3;
    g->pend.m = w;
    g->pend.pre = pre;
    g->pend.x = pre ? pre_x : x;
    g->pend.w = pre_w;
    g->pend.eps = pre_eps;
    g->pend.mx = x;
    g->pend.my = y;
    return;
  }
  rec_matvec(g, w, pre, pre ? pre_x : x, pre_w, pre_eps, x, x_row0, n, y, accumulate, 0, merge_hd, merge_splits, NULL);
}

static void g_shortconv(wisp_backend *be, const wisp_buf *bcx, const wisp_vector *taps, int L, int n, int dim,
                        wisp_buf *state, wisp_buf *out) {
  wgpu_backend *g = as_g(be);
  state_op(be);
  wvec *tv = find_vec(g, taps);
  if (g->pend.kind == 3 && g->conv_fuse && g->pend.m->nparts == 1 && conv_fusable(g->pend.m) && tv && L >= 1 &&
      n == 1 && g->pend.my == bcx &&
      g->pend.m->rows == 3 * dim &&
      out != bcx && state != bcx && out != state && out != g->pend.mx && state != g->pend.mx) {
    /* The held-back in_proj product and this convolution in one dispatch. */
    const wmat *w = g->pend.m;
    const int pre = g->pend.pre;
    g->pend.kind = 0;
    /* matvec_conv.wgsl's own workgroup arrays: res, partial, inv_s */
    const uint32_t cl = matvec_lanes(g, g->mv_wg);
    const uint64_t conv_own = ((uint64_t)g->conv_rows * (1 + cl / 4) + g->mv_wg / 4 + 1) * 4;
    wisp_wgpu_const c[6] = {{"WG", g->mv_wg}, {"ROWS", g->conv_rows}, {"QT", qt_of(w->type)},
                            {"LG", cl},       {"XN", staged_vec4s(g, w->cols, conv_own)},
                            {"PF", g->prefetch == 1}};
    wisp_wgpu_kernel *k = kernel(g, g->sg ? "matvec_conv" : "matvec_conv_nosg", c, g->sg ? 6 : 3);
    struct {
      uint32_t rows, cols, y_off, x_off, acc;
      float eps;
      uint32_t dim, L, pre, pad[3];
    } p = {(uint32_t)w->rows, (uint32_t)w->cols, 0, 0, 0, g->pend.eps, (uint32_t)dim, (uint32_t)L, (uint32_t)pre,
           {0, 0, 0}};
    wisp_wgpu_binding b[10];
    part_bindings(g, &w->parts[0], b);
    b[3] = whole(g->pend.x->g.b);
    b[4] = whole(bcx->g.b);
    b[5] = whole(pre == 1 ? g->pend.w->g.b : g->dummy.b);
    b[6] = whole(pre ? g->pend.mx->g.b : g->dummy_rw.b);
    b[7] = whole(tv->g.b);
    b[8] = bind_of(state);
    b[9] = whole(out->g.b);
    uint32_t gx, gy;
    wisp_wgpu_grid(g->d, cdiv((uint64_t)dim, g->conv_rows / 3), &gx, &gy);
    record(g, k, b, 10, &p, sizeof p, gx, gy);
    return;
  }
  emit_pending(g);
  tv = need_vec(g, taps);
  if (!tv) return;
  if (L < 1) {
    op_fail(g, WISP_EINVAL, "shortconv with %d taps", L);
    return;
  }
  if (L < 1 || L > 9) { /* shortconv.wgsl: MAXS 8 state taps */
    op_fail(g, WISP_EUNSUPPORTED, "shortconv with %d taps (1 to 9 are supported)", L);
    return;
  }
  wisp_wgpu_const c[2] = {{"WG", 64}, {"TT", SHORTCONV_TT}};
  wisp_wgpu_kernel *k = kernel(g, "shortconv", c, 2);
  struct {
    uint32_t n, dim, L, pad;
  } p = {(uint32_t)n, (uint32_t)dim, (uint32_t)L, 0};
  wisp_wgpu_binding b[4] = {whole(bcx->g.b), whole(tv->g.b), bind_of(state), whole(out->g.b)};
  record(g, k, b, 4, &p, sizeof p, cdiv((uint64_t)dim, 64), cdiv((uint64_t)n, SHORTCONV_TT));
}

static void g_attention(wisp_backend *be, const wisp_attention_args *a) {
  wgpu_backend *g = as_g(be);
  state_op(be);
  emit_pending(g);
  const int D = a->head_dim, H = a->heads, KVH = a->kv_heads;
  if (D <= 0 || D % (g->kv16 ? 8 : 4) || D > 4 * ATTN_WG || D > 256 || KVH <= 0 || H % KVH) {
    op_fail(g, WISP_EUNSUPPORTED, "attention with %d heads, %d kv heads, head dim %d", H, KVH, D);
    return;
  }
  /* q/k norms are optional (NULL: that norm is left out, QNORM / KNORM 0,
   * a placeholder bound in its place) */
  wvec *qn = a->q_norm ? need_vec(g, a->q_norm) : NULL, *kn = a->k_norm ? need_vec(g, a->k_norm) : NULL;
  if ((a->q_norm && !qn) || (a->k_norm && !kn)) return;
  wvec *cs = need_vec(g, a->rope_cos), *sn = cs ? need_vec(g, a->rope_sin) : NULL;
  if (!sn) return;
  const WGPUBuffer qnb = qn ? qn->g.b : g->dummy.b, knb = kn ? kn->g.b : g->dummy.b;
  const double qnorm = qn ? 1 : 0, knorm = kn ? 1 : 0;
  if (!scratch(g, &g->qbuf, (uint64_t)a->n * H * D * 4, (uint64_t)64 * H * D * 4, "wisp queries")) return;
  /* Flash-decoding: one token over more than one 64-key tile is split over
   * up to max_splits workgroups per head, merged by attn_combine. */
  const int dec = a->n == 1 && g->attn_fuse; /* attn_decode.wgsl: KT-key tiles */
  const uint32_t ntile = (uint32_t)(a->pos0 + a->n - 1) / (dec ? ATTN_DEC_KT : ATTN_WG) + 1;
  uint32_t tps = 0xFFFFFFFFu;
  const uint32_t splits = a->n == 1 ? wisp_wgpu_int_key_splits(ntile, g->max_splits, &tps) : 1;
  if (a->n == 1) g->stats.attn_splits += splits;
  if (splits > 1 &&
      !scratch(g, &g->part, (uint64_t)H * splits * (D + 2) * 4, (uint64_t)H * g->max_splits * (D + 2) * 4,
               "wisp attention splits"))
    return;
  /* KV16: the caches hold f16 pairs packed in u32 words (kv_buf_new
   * allocates half-size buffers; an f32-sized one uses its first half). */
  wisp_wgpu_const c[4] = {{"WG", ATTN_WG}, {"KV16", g->kv16 ? 1 : 0}, {"QNORM", qnorm}, {"KNORM", knorm}};
  if (dec) {
    /* Decode: norm + rope + cache append + attention in one dispatch; 256
     * threads: WG / D key groups of a thread per head dimension. */
    uint32_t wg = 256; /* >= D (checked above), a multiple of the subgroup size */
    wisp_wgpu_const cd[4] = {{"WG", wg}, {"KV16", g->kv16 ? 1 : 0}, {"QNORM", qnorm}, {"KNORM", knorm}};
    wisp_wgpu_kernel *kd = kernel(g, "attn_decode", cd, 4);
    struct {
      uint32_t pos, H, KVH, D;
      float eps, scale;
      uint32_t splits, tps;
    } pd = {(uint32_t)a->pos0, (uint32_t)H, (uint32_t)KVH, (uint32_t)D, a->eps, 1.0f / sqrtf((float)D), splits, tps};
    wisp_wgpu_binding bd[9] = {whole(a->qkv->g.b),     whole(qnb),             whole(knb),
                               whole(cs->g.b),         whole(sn->g.b),         bind_of(a->k_cache),
                               bind_of(a->v_cache),    whole(a->out->g.b),     whole(splits > 1 ? g->part.b : g->dummy_rw.b)};
    record_xyz(g, kd, bd, 9, &pd, sizeof pd, (uint32_t)H, 1, splits);
  } else {
    wisp_wgpu_kernel *kr = kernel(g, "attn_rope", c, 4);
    wisp_wgpu_kernel *kf = kernel(g, "attn_flash", c, 2);
    struct {
      uint32_t n, pos0, H, KVH, D;
      float f;
      uint32_t pad[2];
    } p = {(uint32_t)a->n, (uint32_t)a->pos0, (uint32_t)H, (uint32_t)KVH, (uint32_t)D, a->eps, {0, 0}};
    wisp_wgpu_binding br[8] = {whole(a->qkv->g.b), whole(qnb),           whole(knb),             whole(cs->g.b),
                               whole(sn->g.b),     whole(g->qbuf.b),      bind_of(a->k_cache),    bind_of(a->v_cache)};
    record(g, kr, br, 8, &p, sizeof p, (uint32_t)(H + 2 * KVH), (uint32_t)a->n);
    struct {
      uint32_t n, pos0, H, KVH, D;
      float scale;
      uint32_t splits, tps;
    } pf = {(uint32_t)a->n, (uint32_t)a->pos0, (uint32_t)H, (uint32_t)KVH, (uint32_t)D, 1.0f / sqrtf((float)D),
            splits, tps};
    wisp_wgpu_binding bf[5] = {whole(g->qbuf.b), bind_of(a->k_cache), bind_of(a->v_cache), whole(a->out->g.b),
                               whole(splits > 1 ? g->part.b : g->dummy_rw.b)};
    if (splits == 1 && a->n > 1 && D <= ATTN_PREFILL_MAXD && g->attn_prefill &&
        (uint64_t)ATTN_PREFILL_KT * ATTN_PREFILL_MAXD * 8 <= g->d->info.max_compute_workgroup_storage_size) {
      /* attn_prefill.wgsl: a workgroup per 64 query tokens of a head sharing key/value tiles */
      wisp_wgpu_const cp[3] = {{"QB", ATTN_PREFILL_QB}, {"KT", ATTN_PREFILL_KT}, {"KV16", g->kv16 ? 1 : 0}};
      wisp_wgpu_kernel *kp = kernel(g, "attn_prefill", cp, 3);
      record_xyz(g, kp, bf, 4, &pf, sizeof pf, (uint32_t)H, cdiv((uint64_t)a->n, ATTN_PREFILL_QB), 1);
    } else {
      record_xyz(g, kf, bf, 5, &pf, sizeof pf, (uint32_t)H, (uint32_t)a->n, splits);
    }
  }
  if (splits > 1) {
    if (g->fuse && g->sg && D % 4 == 0) { /* the product reading out may merge the splits itself (PRE 3) */
      g->pend.kind = 4;
      g->pend.heads = H;
      g->pend.head_dim = D;
      g->pend.splits = (int)splits;
      g->pend.out = a->out;
      return;
    }
    rec_attn_merge(g, H, D, (int)splits, a->out);
  }
}

/* attn_combine.wgsl: one token's heads merged from their splits in g->part into out. */
static void rec_attn_merge(wgpu_backend *g, int heads, int head_dim, int splits, const wisp_buf *out) {
  wisp_wgpu_const c[1] = {{"WG", ATTN_WG}};
  wisp_wgpu_kernel *kc = kernel(g, "attn_combine", c, 1);
  struct {
    uint32_t n, H, D, splits;
  } pc = {1, (uint32_t)heads, (uint32_t)head_dim, (uint32_t)splits};
  wisp_wgpu_binding bc[2] = {whole(g->part.b), whole(out->g.b)};
  record(g, kc, bc, 2, &pc, sizeof pc, (uint32_t)heads, 1);
}

/* ---- the decode loop: token ids on the device ---- */

static void g_buf_write(wisp_backend *be, wisp_buf *b, size_t off, size_t n, const float *src) {
  wgpu_backend *g = as_g(be);
  emit_pending(g);
  /* A queue write lands before the next submit as a whole: submit what was
   * recorded before it first, so ordering is what the caller wrote. */
  if (g->open) keep_error(g, flush(g));
  keep_error(g, wisp_wgpu_buf_write(g->d, b->g, b->off + (uint64_t)off * 4, src, n * 4));
  g->spec_ready = 0;
  g->spec_have = 0;
}

static void g_embed_id(wisp_backend *be, const wisp_matrix *E, const wisp_buf *ids, int slot, wisp_buf *out) {
  wgpu_backend *g = as_g(be);
  emit_pending(g);
  wmat *w = need_mat(g, E);
  if (!w) return;
  wisp_wgpu_const c[3] = {{"WG", 64}, {"QT", qt_of(w->type)}, {"FROM_IDS", 1}};
  wisp_wgpu_kernel *k = kernel(g, "embed", c, 3);
  struct {
    uint32_t n, cols, row0, rows, out_off, slot, pad[2];
    uint32_t tok[EMBED_TOKENS];
  } p;
  memset(&p, 0, sizeof p);
  p.n = 1;
  p.cols = (uint32_t)w->cols;
  p.slot = (uint32_t)slot;
  for (int q = 0; q < w->nparts; q++) { /* each part writes the row only if it holds the token */
    const wmat_part *P = &w->parts[q];
    p.row0 = (uint32_t)P->row0;
    p.rows = (uint32_t)P->rows;
    wisp_wgpu_binding b[5];
    part_bindings(g, P, b);
    b[3] = whole(out->g.b);
    b[4] = whole(ids->g.b);
    record(g, k, b, 5, &p, sizeof p, cdiv((uint64_t)w->cols, 64), 1);
  }
}

static void g_sample_id(wisp_backend *be, const wisp_buf *logits, int vocab, const wisp_sampling *sp, uint32_t step,
                        wisp_buf *ids, int slot) {
  wgpu_backend *g = as_g(be);
  /* Greedy right after the head product (held back): the product writes
   * per-workgroup argmax pairs and this pass reduces only those. */
  int parts = 0;
  if (g->gated && wisp_wgpu_gated_head_argmax(be, logits, vocab, sp->temperature <= 0, ids)) {
    parts = !g->error;
    g->stats.argmax_fused += (uint64_t)parts;
  }
  if (!parts && g->fuse_argmax && g->pend.kind == 3 && g->pend.my == logits && sp->temperature <= 0 && g->pend.m->rows == vocab &&
      logits != ids && g->pend.mx != ids && g->pend.x != ids) {
    g->pend.kind = 0;
    rec_matvec(g, g->pend.m, g->pend.pre, g->pend.x, g->pend.w, g->pend.eps, g->pend.mx, 0, 1, g->pend.my, 0, 1, 0, 0, NULL);
    parts = !g->error;
    g->stats.argmax_fused += (uint64_t)parts;
  }
  emit_pending(g);
  wisp_wgpu_const c[2] = {{"WG", 256}, {"PARTS", parts}};
  wisp_wgpu_kernel *k = kernel(g, "sample", c, 2);
  struct {
    uint32_t vocab, top_k, seed, step, slot, pad[3];
    float temperature, top_p, min_p, pad2;
  } p = {parts ? g->amax_count : (uint32_t)vocab, (uint32_t)(sp->top_k > 0 ? sp->top_k : 0), sp->seed, step,
         (uint32_t)slot, {0, 0, 0}, sp->temperature, sp->top_p, sp->min_p, 0};
  wisp_wgpu_binding b[2] = {whole(parts ? g->amax.b : logits->g.b), whole(ids->g.b)};
  record(g, k, b, 2, &p, sizeof p, 1, 1);
}

/* After a failed op the recorded batch is not submitted: drop it. */
static void drop_failed_batch(wgpu_backend *g) {
  if (!g->error || !g->open) return;
  wisp_wgpu_batch_abort(&g->batch);
  g->open = 0;
  g->dirty_lo = SIZE_MAX;
  g->dirty_hi = 0;
}

/* Returns the kept error (with its message as wisp_last_error) and clears
 * it, or the device's own error state. */
static wisp_status take_error(wgpu_backend *g) {
  if (!g->error) keep_error(g, wisp_wgpu_device_check(g->d));
  wisp_status st = g->error;
  if (st) {
    wisp_fail(st, "%s", g->error_msg);
    g->error = WISP_OK;
    g->error_msg[0] = 0;
  }
  return st;
}

static wisp_status g_sync(wisp_backend *be) {
  wgpu_backend *g = as_g(be);
  emit_pending(g);
  drop_failed_batch(g);
  keep_error(g, flush_ex(g, 1));
  return take_error(g);
}

/* ---- the pipelined decode loop (backend.h buf_copy/read_start/read_finish) ---- */

static void g_buf_copy(wisp_backend *be, wisp_buf *b, size_t dst_off, size_t src_off, size_t n) {
  wgpu_backend *g = as_g(be);
  emit_pending(g);
  wisp_wgpu_const c[1] = {{"WG", 64}};
  wisp_wgpu_kernel *k = kernel(g, "copy", c, 1);
  struct {
    uint32_t dst, src, n, pad;
  } p = {(uint32_t)dst_off, (uint32_t)src_off, (uint32_t)n, 0};
  wisp_wgpu_binding bb[1] = {bind_of(b)};
  record(g, k, bb, 1, &p, sizeof p, cdiv((uint64_t)n, 64), 1);
}

/* copy_range.wgsl: dst[dst_off..+n) = src[src_off..+n) in 32-bit words
 * (buf_copy_to, and the persistent decode's state copies); nothing for n 0. */
static void rec_copy_words(wgpu_backend *g, WGPUBuffer src, uint64_t src_off, WGPUBuffer dst, uint64_t dst_off,
                           uint64_t n) {
  if (!n) return;
  wisp_wgpu_const c[1] = {{"WG", 256}};
  wisp_wgpu_kernel *k = kernel(g, "copy_range", c, 1);
  struct {
    uint32_t src_off, dst_off, n, pad;
  } p = {(uint32_t)src_off, (uint32_t)dst_off, (uint32_t)n, 0};
  wisp_wgpu_binding bb[2] = {whole(src), whole(dst)};
  uint32_t gx, gy;
  wisp_wgpu_grid(g->d, (uint32_t)cdiv(n, 256), &gx, &gy);
  record(g, k, bb, 2, &p, sizeof p, gx, gy);
}

static void g_buf_copy_to(wisp_backend *be, wisp_buf *dst, const wisp_buf *src, size_t n) {
  wgpu_backend *g = as_g(be);
  state_op(be);
  emit_pending(g);
  rec_copy_words(g, src->g.b, word0(src), dst->g.b, word0(dst), n);
}

/* ---- several sequences in one step (backend.h matmul_rows, buf_copy_at) ---- */

static void g_buf_copy_at(wisp_backend *be, wisp_buf *dst, size_t dst_off, const wisp_buf *src, size_t src_off,
                          size_t n) {
  wgpu_backend *g = as_g(be);
  state_op(be);
  emit_pending(g);
  rec_copy_words(g, src->g.b, word0(src) + src_off, dst->g.b, word0(dst) + dst_off, n);
}

/* ---- the mixers over the rows of a batched step (backend.h shortconv_rows, attention_rows) ---- */

/* wgpu_internal.h's wisp_wgpu_int_rows_group. */
uint32_t wisp_wgpu_int_rows_group(const wisp_mixer_rows *rows, unsigned char *done, uint32_t (*tab)[4], WGPUBuffer *b0,
                                  WGPUBuffer *b1) {
  int r0 = 0;
  while (r0 < rows->n && done[r0]) r0++;
  if (r0 == rows->n) return 0;
  *b0 = rows->s0[r0]->g.b;
  *b1 = rows->s1 && rows->s1[r0] ? rows->s1[r0]->g.b : NULL;
  uint32_t k = 0;
  for (int r = r0; r < rows->n; r++) {
    if (done[r] || rows->s0[r]->g.b != *b0 || (*b1 && rows->s1[r]->g.b != *b1)) continue;
    done[r] = 1;
    tab[k][0] = (uint32_t)r;
    tab[k][1] = (uint32_t)word0(rows->s0[r]);
    tab[k][2] = *b1 ? (uint32_t)word0(rows->s1[r]) : 0u;
    tab[k][3] = (uint32_t)rows->pos[r];
    k++;
  }
  return k;
}

/* shortconv_rows.wgsl: every row's conv (shortconv.wgsl's arithmetic for
 * one token) on its own slot's state, a dispatch per device buffer the
 * slots' states lie in (one for a session's slots). */
static int g_shortconv_rows(wisp_backend *be, const wisp_buf *bcx, const wisp_vector *taps, int L, int dim,
                            const wisp_mixer_rows *rows, wisp_buf *out) {
  wgpu_backend *g = as_g(be);
  if (L < 1 || L > 9 || rows->n < 1 || rows->n > WISP_WGPU_MIX_ROWS) return 0; /* the one-token op says why */
  state_op(be);
  emit_pending(g);
  wvec *tv = need_vec(g, taps);
  if (!tv) return 1; /* error kept */
  wisp_wgpu_const c[1] = {{"WG", 64}};
  wisp_wgpu_kernel *k = kernel(g, "shortconv_rows", c, 1);
  struct {
    uint32_t dim, L, count, pad;
    uint32_t rows[WISP_WGPU_MIX_ROWS][4];
  } p;
  unsigned char done[WISP_WGPU_MIX_ROWS] = {0};
  WGPUBuffer sb, none;
  memset(&p, 0, sizeof p);
  while ((p.count = wisp_wgpu_int_rows_group(rows, done, p.rows, &sb, &none)) > 0) {
    p.dim = (uint32_t)dim;
    p.L = (uint32_t)L;
    wisp_wgpu_binding b[4] = {whole(bcx->g.b), whole(tv->g.b), whole(sb), whole(out->g.b)};
    record(g, k, b, 4, &p, sizeof p, cdiv((uint64_t)dim, 64), p.count);
  }
  return 1;
}

/* The split of a one-token decode attention at position pos (g_attention). */
static uint32_t attn_splits_at(const wgpu_backend *g, int pos, uint32_t *tps) {
  return wisp_wgpu_int_key_splits((uint32_t)pos / ATTN_DEC_KT + 1, g->max_splits, tps);
}

/* attn_decode_rows.wgsl (+ attn_combine_rows.wgsl where a row's position
 * is split): every row's attention as the one-token decode attention
 * (attn_decode.wgsl) computes it, on its own slot's caches. Needs what
 * attn_decode needs (subgroups, 9 storage bindings); else 0. */
static int g_attention_rows(wisp_backend *be, const wisp_attention_args *a, const wisp_mixer_rows *rows) {
  wgpu_backend *g = as_g(be);
  const int D = a->head_dim, H = a->heads, KVH = a->kv_heads;
  if (!g->attn_fuse || rows->n < 1 || rows->n > WISP_WGPU_MIX_ROWS || D <= 0 || D % (g->kv16 ? 8 : 4) || D > 256 ||
      KVH <= 0 || H % KVH)
    return 0;
  state_op(be);
  emit_pending(g);
  wvec *qn = a->q_norm ? need_vec(g, a->q_norm) : NULL, *kn = a->k_norm ? need_vec(g, a->k_norm) : NULL;
  wvec *cs = need_vec(g, a->rope_cos), *sn = cs ? need_vec(g, a->rope_sin) : NULL;
  if ((a->q_norm && !qn) || (a->k_norm && !kn) || !sn) return 1; /* error kept */
  uint32_t most = 1, tps;
  for (int r = 0; r < rows->n; r++) {
    const uint32_t sp = attn_splits_at(g, rows->pos[r], &tps);
    g->stats.attn_splits += sp;
    if (sp > most) most = sp;
  }
  const uint64_t block = (uint64_t)H * g->max_splits * (D + 2) * 4; /* a row's partials */
  if (most > 1 && !scratch(g, &g->part, block * (uint64_t)rows->n, block * (uint64_t)rows->n, "wisp attention splits"))
    return 1;
  const double qnorm = qn ? 1 : 0, knorm = kn ? 1 : 0;
  wisp_wgpu_const cd[4] = {{"WG", 256}, {"KV16", g->kv16 ? 1 : 0}, {"QNORM", qnorm}, {"KNORM", knorm}};
  wisp_wgpu_kernel *kd = kernel(g, "attn_decode_rows", cd, 4);
  wisp_wgpu_const cc[1] = {{"WG", ATTN_WG}};
  wisp_wgpu_kernel *kc = most > 1 ? kernel(g, "attn_combine_rows", cc, 1) : NULL;
  struct {
    uint32_t H, KVH, D, count;
    float eps, scale;
    uint32_t max_splits, pad;
    uint32_t rows[WISP_WGPU_MIX_ROWS][4];
  } p;
  struct {
    uint32_t H, D, count, max_splits;
    uint32_t rows[WISP_WGPU_MIX_ROWS][4];
  } pc;
  memset(&p, 0, sizeof p);
  memset(&pc, 0, sizeof pc);
  unsigned char done[WISP_WGPU_MIX_ROWS] = {0};
  WGPUBuffer kb, vb;
  while ((p.count = wisp_wgpu_int_rows_group(rows, done, p.rows, &kb, &vb)) > 0) {
    p.H = (uint32_t)H;
    p.KVH = (uint32_t)KVH;
    p.D = (uint32_t)D;
    p.eps = a->eps;
    p.scale = 1.0f / sqrtf((float)D);
    p.max_splits = g->max_splits;
    uint32_t z = 1;
    for (uint32_t i = 0; i < p.count; i++) {
      const uint32_t sp = attn_splits_at(g, (int)p.rows[i][3], &tps);
      if (sp > z) z = sp;
    }
    wisp_wgpu_binding bd[9] = {whole(a->qkv->g.b),
                               whole(qn ? qn->g.b : g->dummy.b),
                               whole(kn ? kn->g.b : g->dummy.b),
                               whole(cs->g.b),
                               whole(sn->g.b),
                               whole(kb),
                               whole(vb),
                               whole(a->out->g.b),
                               whole(most > 1 ? g->part.b : g->dummy_rw.b)};
    record_xyz(g, kd, bd, 9, &p, sizeof p, (uint32_t)H, p.count, z);
    if (z > 1) {
      pc.H = (uint32_t)H;
      pc.D = (uint32_t)D;
      pc.count = p.count;
      pc.max_splits = g->max_splits;
      memcpy(pc.rows, p.rows, sizeof pc.rows);
      wisp_wgpu_binding bc[2] = {whole(g->part.b), whole(a->out->g.b)};
      record(g, kc, bc, 2, &pc, sizeof pc, (uint32_t)H, p.count);
    }
  }
  return 1;
}

/* wgpu_internal.h's wisp_wgpu_int_key_splits. */
uint32_t wisp_wgpu_int_key_splits(uint32_t ntile, uint32_t max_splits, uint32_t *tps) {
  *tps = 0xFFFFFFFFu;
  if (ntile <= 1 || max_splits <= 1) return 1;
  *tps = cdiv(ntile, ntile < max_splits ? ntile : max_splits);
  return cdiv(ntile, *tps);
}

/* wgpu_internal.h's wisp_wgpu_int_rows_nt. */
static uint32_t rows_nt(const wgpu_backend *g, int n) {
  const uint32_t nt = n <= 2 ? 2 : n <= 4 ? 4 : 8;
  return nt < g->rows_nt ? nt : g->rows_nt;
}

/* wgpu_internal.h's wisp_wgpu_int_rows_tile. */
static uint32_t rows_tile(const wgpu_backend *g, uint32_t units, uint32_t uv, uint32_t wg, uint32_t lg, uint32_t rows,
                          uint32_t nt) {
  uint32_t step = lg;
  while (step % 8) step += lg; /* a multiple of LG and of 8 */
  const uint64_t part = (uint64_t)(wg / lg) * rows * nt * (lg / 4) * 4 + 64;
  const uint64_t limit = g->d->info.max_compute_workgroup_storage_size;
  if (g->no_xstage || part >= limit || units == 0) return 0;
  /* Staging pays only where a workgroup reads at least as many weight bytes
   * as it stages input bytes: a unit of weights is 16-20 bytes and its
   * inputs uv vec4s (16 bytes each) for each of nt tokens. Staged regardless,
   * a 16-row Q4 workgroup moved 32 KB of inputs per 10 KB of weights: on the
   * H200 a 248,320 x 1,024 Q4Z product of 8 rows took 1.48 ms, against
   * 0.09 ms for one row (bench/results/h200-one-kernel-rows). The inputs
   * then come from global memory, which changes no sum. */
  if (!g->rows_stage_always && (uint64_t)(wg / lg) * rows < (uint64_t)nt * uv) return 0;
  uint64_t fit = (limit - part) / ((uint64_t)nt * uv * 16) / step * step;
  uint64_t whole = ((uint64_t)units + step - 1) / step * step;
  uint64_t tu = fit < whole ? fit : whole;
  return (uint32_t)tu;
}

/* matvec_rows.wgsl: y[t] (+)= W x[t] for t < n, rows_nt(n) tokens a
 * workgroup (grid z), each weight unit loaded once for them. Its sums are those of
 * matvec.wgsl (PRE 0) for each token alone, given the same lanes per group:
 * the geometry is matvec_geometry's (rows per lane group at most 4, which
 * changes no sum). */
static void rec_matvec_rows(wgpu_backend *g, const wmat *w, const wisp_buf *x, int n, wisp_buf *y, int accumulate) {
  uint32_t wg, rows, lg;
  matvec_geometry(g, w, &wg, &rows, &lg);
  if (rows > 4) rows = 4;
  const uint32_t nt = rows_nt(g, n), qt = qt_of(w->type);
  const uint32_t uv = qt == 0 ? 1 : qt == 4 ? 2 : qt == 5 ? 4 : 8; /* vec4s a unit (matvec_unit.wgsli) */
  const uint32_t tu = rows_tile(g, (uint32_t)w->cols / (4 * uv), uv, wg, lg, rows, nt);
  wisp_wgpu_const c[7] = {{"WG", wg}, {"ROWS", rows}, {"LG", lg},           {"QT", qt},
                          {"NT", nt}, {"XS", tu > 0},  {"TU", tu ? tu : 1}};
  wisp_wgpu_kernel *k = kernel(g, "matvec_rows", c, 7);
  const uint32_t rows_wg = (wg / lg) * rows;
  for (int q = 0; q < w->nparts; q++) {
    const wmat_part *P = &w->parts[q];
    struct {
      uint32_t rows, cols, y_off, x_off, acc, n, y_stride, pad0;
    } p = {(uint32_t)P->rows, (uint32_t)w->cols, (uint32_t)P->row0, 0, accumulate ? 1u : 0u, (uint32_t)n,
           (uint32_t)w->rows, 0};
    wisp_wgpu_binding b[5];
    part_bindings(g, P, b);
    b[3] = whole(x->g.b);
    b[4] = whole(y->g.b);
    uint32_t gx, gy;
    wisp_wgpu_grid(g->d, cdiv((uint64_t)P->rows, rows_wg), &gx, &gy);
    record_xyz(g, k, b, 5, &p, sizeof p, gx, gy, cdiv((uint64_t)n, nt));
  }
  g->stats.rows_shared++;
}

/* Every row computed as the one-row product computes it (g_matmul for
 * n = 1 without a fusion: matvec.wgsl PRE 0, or q4k_matvec.wgsl), so that a
 * row's sums do not depend on n; the tiled prefill kernel (matmul.wgsl)
 * sums in another order and is not used here. One row: that very
 * dispatch. Several: matvec_rows.wgsl (q4k_matvec_rows.wgsl for Q4_K),
 * which reads the weight once per up to 8 rows and gives every row the
 * one-row product's bits. Without subgroups (matvec_nosg's tree reduction)
 * each row is its own matvec dispatch. */
static void g_matmul_rows(wisp_backend *be, const wisp_matrix *W, const wisp_buf *x, int n, wisp_buf *y,
                          int accumulate) {
  wgpu_backend *g = as_g(be);
  emit_pending(g);
  if (n <= 0) return;
  if (W->type == WISP_W_Q4K) {
    wisp_wgpu_q4k_matmul_rows(be, W, x, n, y, accumulate);
    return;
  }
  wmat *w = need_mat(g, W);
  if (!w) return;
  if (w->cols % 4) {
    op_fail(g, WISP_EUNSUPPORTED, "matmul with an f32 matrix of %d columns (a multiple of 4 is needed)", w->cols);
    return;
  }
  if (n > 1 && g->sg && !g->no_rows_shared)
    rec_matvec_rows(g, w, x, n, y, accumulate);
  else
    rec_matvec(g, w, 0, x, NULL, 0, x, 0, n, y, accumulate, 0, 0, 0, NULL);
}

/* penalty.wgsl; see backend.h. */
static void g_penalize(wisp_backend *be, wisp_buf *logits, int vocab, const wisp_buf *hist, size_t hist_off, int n,
                       float penalty) {
  wgpu_backend *g = as_g(be);
  emit_pending(g);
  if (n <= 0) return;
  wisp_wgpu_const c[1] = {{"WG", 64}};
  wisp_wgpu_kernel *k = kernel(g, "penalty", c, 1);
  struct {
    uint32_t vocab, off, n, pad0;
    float penalty, inv_penalty, pad1, pad2;
  } p = {(uint32_t)vocab, (uint32_t)hist_off, (uint32_t)n, 0, penalty, 1.0f / penalty, 0, 0};
  wisp_wgpu_binding b[2] = {whole(logits->g.b), whole(hist->g.b)};
  record(g, k, b, 2, &p, sizeof p, cdiv((uint64_t)n, 64), 1);
}

static wisp_status g_read_start(wisp_backend *be, const wisp_buf *b, size_t off, size_t n, int slot) {
  wgpu_backend *g = as_g(be);
  emit_pending(g);
  if (slot < 0 || slot > 1) op_fail(g, WISP_EINVAL, "read_start: slot %d", slot);
  drop_failed_batch(g);
  if (!g->error && open_batch(g))
    keep_error(g, flush_copy(g, b->g.b, b->off + (uint64_t)off * 4, &g->rstage[slot], (uint64_t)n * 4));
  return take_error(g);
}

static void g_submit(wisp_backend *be) {
  wgpu_backend *g = as_g(be);
  emit_pending(g);
  drop_failed_batch(g);
  if (!g->error) keep_error(g, flush(g));
}

static wisp_status g_read_finish(wisp_backend *be, int slot, float *dst, size_t n) {
  wgpu_backend *g = as_g(be);
  if (slot < 0 || slot > 1 || !g->rstage[slot].b || g->rstage[slot].size < n * 4)
    return wisp_fail(WISP_EINVAL, "webgpu: read_finish of slot %d without a read_start of %zu values", slot, n);
  wisp_status st = wisp_wgpu_staging_read(g->d, g->rstage[slot], dst, n * 4);
  if (!st) st = wisp_wgpu_device_check(g->d);
  return st;
}

static void g_destroy(wisp_backend *be) {
  wgpu_backend *g = as_g(be);
  if (!g) return;
  if (g->d) {
    if (g->open) wisp_wgpu_batch_abort(&g->batch);
    if (wisp_env_verbose())
      fprintf(stderr, "webgpu: %llu dispatches, %llu submits, %llu in the last submit, %llu bind groups\n",
              (unsigned long long)g->stats.dispatches, (unsigned long long)g->stats.submits,
              (unsigned long long)g->stats.last_dispatches, (unsigned long long)g->stats.bind_groups);
    wisp_wgpu_gated_free(be); /* before the bind groups go */
    wisp_wgpu_persist_free(be);
    wisp_wgpu_mm8_free(be);
    drop_bind_groups(g);
    /* the kernels are the device's (wisp_wgpu_kernel_shared) */
    for (int i = 0; i < g->n_mats; i++) wmat_free(g, g->mats[i]);
    for (int i = 0; i < g->n_vecs; i++) {
      wisp_wgpu_buf_free(g->d, &g->vecs[i]->g);
      free(g->vecs[i]);
    }
    wisp_wgpu_buf_free(g->d, &g->arena);
    wisp_wgpu_buf_free(g->d, &g->dummy);
    wisp_wgpu_buf_free(g->d, &g->dummy_rw);
    wisp_wgpu_buf_free(g->d, &g->dummy_rw2);
    wisp_wgpu_buf_free(g->d, &g->qbuf);
    wisp_wgpu_buf_free(g->d, &g->staging);
    wisp_wgpu_buf_free(g->d, &g->rstage[0]);
    wisp_wgpu_buf_free(g->d, &g->rstage[1]);
    wisp_wgpu_buf_free(g->d, &g->part);
    wisp_wgpu_buf_free(g->d, &g->amax);
    if (g->own_device) wisp_wgpu_device_close(g->d);
  }
  free(g->mats);
  free(g->vecs);
  free(g->arena_host);
  free(g);
}

int wisp_wgpu_backend_stats_get(const wisp_backend *be, wisp_wgpu_backend_stats *out) {
  if (!be || !be->name || strcmp(be->name, "webgpu")) return 0;
  *out = ((const wgpu_backend *)be)->stats;
  return 1;
}

/* The plan's execution settings: candidate.convFuse and flashBlocks. */
static void g_configure(wisp_backend *be, const wisp_backend_settings *s) {
  wgpu_backend *g = as_g(be);
  g->conv_fuse = g->conv_fuse_capable && s->conv_fuse;
  if (!g->env_splits && s->flash_blocks >= 1) g->max_splits = (uint32_t)s->flash_blocks;
  g->set = *s;
  g->fuse_argmax = g->fuse && !g->env_no_argmax && s->head_argmax;
  /* The plan's kvDtype f16 turns packed-f16 KV on (kv_f16 / tuning kv=f16
   * may have already); the session makes its caches after configure. */
  if (s->kv_f16) g->kv16 = 1;
}

static void g_caps(wisp_backend *be, wisp_device_caps *out) {
  wgpu_backend *g = as_g(be);
  const wisp_wgpu_info *i = &g->d->info;
  wisp_device_caps_default(out, "webgpu");
  const char *vendor = i->vendor[0] ? i->vendor : "unknown";
  size_t n = strnlen(vendor, sizeof out->vendor - 1);
  memcpy(out->vendor, vendor, n);
  out->vendor[n] = 0;
  n = strnlen(i->name, sizeof out->name - 1);
  memcpy(out->name, i->name, n);
  out->name[n] = 0;
  out->has_subgroups = g->sg;
  out->subgroup_size = g->sg ? (int)i->subgroup_max_size : 0;
  out->has_f16 = g->d->has_shader_f16;
  out->max_workgroup_size = (int)i->max_compute_invocations_per_workgroup;
  out->max_shared_bytes = (int)i->max_compute_workgroup_storage_size;
}

static int pow2(unsigned x) { return x && !(x & (x - 1)); }

wisp_status wisp_wgpu_backend_new(const wisp_wgpu_backend_opts *opts, wisp_backend **out) {
  *out = NULL;
  wisp_wgpu_backend_opts o;
  memset(&o, 0, sizeof o);
  o.subgroups = -1;
  if (opts) o = *opts;
  wgpu_backend *g = calloc(1, sizeof *g);
  if (!g) return wisp_fail(WISP_ENOMEM, "out of memory");
  wisp_status st = WISP_OK;
  if (o.device) {
    g->d = o.device;
  } else {
    wisp_wgpu_device_opts dopts;
    memset(&dopts, 0, sizeof dopts);
    dopts.no_subgroups = o.subgroups == 0;
    dopts.toggles = o.toggles;
    if ((st = wisp_wgpu_device_open(&dopts, &g->d))) {
      wisp_error_prefix("backend 'webgpu'");
      free(g);
      return st;
    }
    g->own_device = 1;
  }
  if (o.refuse_cpu_adapter && g->d->info.adapter_type == WGPUAdapterType_CPU) {
    st = wisp_fail(WISP_EUNSUPPORTED, "the WebGPU adapter '%s' runs on the CPU", g->d->info.name);
    goto fail;
  }
  if (o.subgroups == 1 && !g->d->has_subgroups) {
    st = wisp_fail(WISP_EDEVICE, "webgpu: the device lacks the subgroups feature");
    goto fail;
  }
  g->sg = o.subgroups < 0 ? g->d->has_subgroups : o.subgroups;
  int guard_each = 0;
  wisp_env_webgpu_guard(&guard_each);
  g->guard_each = g->d->guard_bytes && guard_each;
  g->fuse = !o.no_fuse;
  g->conv_rows = 12;
  g->conv_fuse = g->fuse && g->d->info.max_storage_buffers_per_shader_stage >= 10 &&
                 g->conv_rows <= g->d->info.max_compute_invocations_per_workgroup;
  g->conv_fuse_capable = g->conv_fuse;
  g->attn_fuse = g->fuse && g->sg && g->d->info.max_storage_buffers_per_shader_stage >= 9;
  g->kv16 = o.kv_f16;
  g->env_no_argmax = o.no_fuse_argmax;
  g->fuse_argmax = g->fuse && !g->env_no_argmax;
  /* Persistent decode (wgpu_persist.c): on unless turned off. Measured
   * faster than the op-by-op path on the H200 at every batch size (seed
   * shape, sixth session: 1,999 vs 1,752 tok/s at one step a batch, 2,248
   * vs 1,197-1,522 at 64; the 350M shape 1,565 vs 1,154) and on lavapipe; the
   * op-by-op path stays for sampling, other models and tuning persist=0.
   * docs/webgpu.md, "Persistent decode". */
  g->persist_on = o.persist >= 0;
  g->persist_asked = o.persist > 0;
  g->persist_wg = o.persist_grid;
  g->opts = o;
  g->opts.toggles = NULL; /* used at creation only; the text is the caller's */
  wisp_backend_settings_default(&g->set);
  g->mv_wg = o.matvec_wg ? o.matvec_wg : 128;
  g->mv_rows = o.matvec_rows ? o.matvec_rows : 4;
  g->mm_tm = o.matmul_tm ? o.matmul_tm : 64;
  g->mm_tn = o.matmul_tn ? o.matmul_tn : 32;
  g->max_splits = o.attn_max_splits ? o.attn_max_splits : 32;
  g->env_splits = o.splits_over_plan && o.attn_max_splits;
  g->mv_rows_big = o.matvec_big_rows ? o.matvec_big_rows : 8; /* the head: 34 vs 43 us at 16 rows on the H200 (seed shape) */
  g->env_geometry = o.geometry_over_plan;
  g->no_xstage = o.no_xstage;
  g->no_rows_shared = o.no_rows_shared;
  g->rows_q4k = o.rows_q4k;
  g->rows_nt = o.rows_nt >= 1 && o.rows_nt <= 8 ? o.rows_nt : 8;
  g->rows_stage_always = o.rows_stage_always;
  /* Loads issued ahead (PF) measured on the H200 (bench/results/README.md):
   * faster for q4k_matvec (8.2 vs 9.4 us for the 0.8B hybrid's down product), slower
   * where a lane holds many rows or the staging is long (the 16-row head
   * 49 vs 43 us, q4k_fused 10.5 vs 9.8, the merge-fused projection): on for
   * q4k_matvec only unless tuning prefetch says 0 or 1 for all. */
  g->prefetch = o.prefetch > 0 ? 1 : o.prefetch < 0 ? 0 : -1;
  /* Off unless asked for: on the H200 it took 893 us a dispatch for a
   * 1,024-token seed prefill (a thread per query walking every key: too
   * little parallelism), half the prefill's GPU time; attn_flash gives
   * 72,800 tok/s against 51,800 with it (tools/device-prefill.sh). */
  g->attn_prefill = o.attn_prefill;
  g->head_chunks = o.head_chunks; /* 0: by the matrix (rec_matvec) */
  /* Rows a lane group by the matrix (ROWS 0): the 0.8B hybrid (products of
   * 1024 rows) ran 791-814 tok/s with one row against 772 with two, the 2B
   * (2048 rows) 517 with two against 484 with one (H200, eighth session;
   * the same shape of result in the seventh; 4 and 8 rows slower still,
   * third): about 256 workgroups either way. */
  /* q4k_sb (a thread per super-block) where the plan chose it for a matrix
   * (the registry's decode rule for Q4_K); tuning q4kSbCols=N instead
   * takes it for every matrix of N columns or more, 0 for none. */
  g->q4k_tune = (wisp_wgpu_q4k_tuning){128, 0, 0, 0, 0, 2048, g->prefetch != 0, g->prefetch == 1, -1};
  if (o.q4k_sb_cols) g->q4k_tune.superblock_cols = o.q4k_sb_cols > 0 ? o.q4k_sb_cols : 0;
  if (o.q4k_rows2_rows) g->q4k_tune.rows2_rows = o.q4k_rows2_rows;
  if (o.q4k_lg) g->q4k_tune.mv_lg = o.q4k_lg;
  if (o.q4k_mv_wg && o.q4k_mv_rows) g->q4k_tune.mv_wg = o.q4k_mv_wg, g->q4k_tune.mv_rows = o.q4k_mv_rows;
  if (o.q4k_fused_cols && o.q4k_fused_tpc)
    g->q4k_tune.fused_cols = o.q4k_fused_cols, g->q4k_tune.fused_tpc = o.q4k_fused_tpc;
  g->dn_tune = (wisp_wgpu_dn_tuning){o.dn_cols ? o.dn_cols : 16, o.dn_groups};
  /* The kernels size their per-thread and workgroup arrays for these
   * bounds (ROWS <= 16 rows of accumulators; whole lane groups of LG). */
  const uint32_t q4k_lg = g->d->info.subgroup_max_size > 32 ? g->d->info.subgroup_max_size : 32;
  if (g->mv_rows > g->mv_wg || g->mv_rows > 16 || g->mv_rows_big > 16 || g->mv_rows_big > g->mv_wg ||
      g->conv_rows > 16 || g->conv_rows > g->mv_wg || g->conv_rows % 3 || (!g->sg && (g->mv_wg & (g->mv_wg - 1))) ||
      (g->sg && g->mv_wg % matvec_lanes(g, g->mv_wg)) || g->mm_tm % 4 || g->mm_tn % 4 ||
      (g->mm_tm / 4) * (g->mm_tn / 4) > g->d->info.max_compute_invocations_per_workgroup ||
      g->q4k_tune.mv_rows > 16 || (g->sg && g->q4k_tune.mv_wg % q4k_lg) ||
      (g->q4k_tune.mv_lg && (g->q4k_tune.mv_lg % q4k_lg || g->q4k_tune.mv_wg % g->q4k_tune.mv_lg)) ||
      !pow2(g->dn_tune.cols) || g->dn_tune.cols > 1024 || (g->dn_tune.groups && !pow2(g->dn_tune.groups)) ||
      g->dn_tune.groups > 1024) {
    st = wisp_fail(WISP_EINVAL,
                   "webgpu: bad geometry: matvec %ux%u (big %u, conv %u), matmul %ux%u, Q4_K matvec %ux%u (lanes %u), "
                   "deltanet %ux%u",
                   g->mv_wg, g->mv_rows, g->mv_rows_big, g->conv_rows, g->mm_tm, g->mm_tn, g->q4k_tune.mv_wg,
                   g->q4k_tune.mv_rows, g->q4k_tune.mv_lg, g->dn_tune.cols, g->dn_tune.groups);
    goto fail;
  }
  g->max_binding = g->d->info.max_storage_buffer_binding_size;
  if (g->d->info.max_buffer_size < g->max_binding) g->max_binding = g->d->info.max_buffer_size;
  if (o.max_binding && o.max_binding < g->max_binding) g->max_binding = o.max_binding;
  g->ualign = g->d->info.min_uniform_buffer_offset_alignment ? g->d->info.min_uniform_buffer_offset_alignment : 256;
  g->arena_bytes = o.arena_bytes >= 1024 ? o.arena_bytes : ARENA_BYTES;
  g->arena_max = o.arena_max_bytes ? o.arena_max_bytes : o.arena_bytes ? g->arena_bytes : ARENA_MAX;
  g->arena_host = calloc(1, g->arena_bytes);
  g->dirty_lo = SIZE_MAX;
  if (!g->arena_host) {
    st = wisp_fail(WISP_ENOMEM, "out of memory");
    goto fail;
  }
  if ((st = wisp_wgpu_buf_create(g->d, g->arena_bytes, WISP_WGPU_UNIFORM, "wisp uniform arena", &g->arena)) ||
      (st = wisp_wgpu_buf_create(g->d, 16, WISP_WGPU_STORAGE, "wisp dummy", &g->dummy)) ||
      (st = wisp_wgpu_buf_create(g->d, 16, WISP_WGPU_STORAGE, "wisp dummy rw", &g->dummy_rw)) ||
      (st = wisp_wgpu_buf_create(g->d, 16, WISP_WGPU_STORAGE, "wisp dummy rw 2", &g->dummy_rw2)) ||
      /* argmax partials: 16384 pairs (a 262144-token head at 16 rows a
       * workgroup) without a mid-recording reallocation; grows if needed */
      (st = wisp_wgpu_buf_create(g->d, 16384 * 8, WISP_WGPU_STORAGE, "wisp argmax partials", &g->amax)))
    goto fail;
  g->base = (wisp_backend){
      .name = "webgpu",
      .configure = g_configure,
      .check_kernel = wisp_wgpu_check_kernel,
      .caps = g_caps,
      .buf_new = g_buf_new,
      .buf_free = g_buf_free,
      .buf_read = g_buf_read,
      .buf_zero = g_buf_zero,
      .prepare_matrix = g_prepare_matrix,
      .prepare_vector = g_prepare_vector,
      .embed = g_embed,
      .rmsnorm = g_rmsnorm,
      .matmul = g_matmul,
      .shortconv = g_shortconv,
      .attention = g_attention,
      .attention_gated = wisp_wgpu_attention_gated,
      .gated_deltanet = wisp_wgpu_gated_deltanet,
      .swiglu = g_swiglu,
      .buf_write = g_buf_write,
      .buf_copy = g_buf_copy,
      .buf_copy_to = g_buf_copy_to,
      .buf_copy_at = g_buf_copy_at,
      .matmul_rows = g_matmul_rows,
      .shortconv_rows = g_shortconv_rows,
      .attention_rows = g_attention_rows,
      .attention_gated_rows = wisp_wgpu_attention_gated_rows,
      .gated_deltanet_rows = wisp_wgpu_gated_deltanet_rows,
      .penalize = g_penalize,
      .read_start = g_read_start,
      .read_finish = g_read_finish,
      .submit = g_submit,
      .embed_id = g_embed_id,
      .sample_id = g_sample_id,
      .kv_buf_new = g_kv_buf_new,
      .buf_new_slots = g_buf_new_slots,
      .decode_graph = g->persist_on ? wisp_wgpu_decode_graph : NULL, /* the persistent decode, unless turned off */
      .decode_graph_reset = g->persist_on ? wisp_wgpu_decode_graph_reset : NULL,
      .sync = g_sync,
      .destroy = g_destroy,
  };
  *out = &g->base;
  return WISP_OK;
fail:
  g_destroy(&g->base);
  return st;
}

/* ---- internal hooks (wgpu_internal.h) ---- */

wisp_wgpu_kernel *wisp_wgpu_int_kernel(wisp_backend *be, const char *file, const wisp_wgpu_const *c, int nc) {
  return kernel(as_g(be), file, c, nc);
}
void wisp_wgpu_int_record(wisp_backend *be, const wisp_wgpu_kernel *k, const wisp_wgpu_binding *b, int nb,
                          const void *params, size_t psize, uint32_t gx, uint32_t gy, uint32_t gz) {
  record_xyz(as_g(be), k, b, nb, params, psize, gx, gy, gz);
}
void wisp_wgpu_int_emit_pending(wisp_backend *be) { emit_pending(as_g(be)); }
void wisp_wgpu_int_copy_words(wisp_backend *be, WGPUBuffer src, uint64_t src_off, WGPUBuffer dst, uint64_t dst_off,
                              uint64_t n) {
  rec_copy_words(as_g(be), src, src_off, dst, dst_off, n);
}
WGPUBuffer wisp_wgpu_int_buf(const wisp_buf *b) { return b->g.b; }
wisp_wgpu_binding wisp_wgpu_int_bind(const wisp_buf *b) { return bind_of(b); }
uint64_t wisp_wgpu_int_word0(const wisp_buf *b) { return word0(b); }
WGPUBuffer wisp_wgpu_int_vec(wisp_backend *be, const wisp_vector *v) {
  wvec *w = need_vec(as_g(be), v);
  return w ? w->g.b : NULL;
}
int wisp_wgpu_int_scratch(wisp_backend *be, wisp_wgpu_buf *buf, uint64_t need, uint64_t want, const char *label) {
  return scratch(as_g(be), buf, need, want, label);
}
void wisp_wgpu_int_scratch_free(wisp_backend *be, wisp_wgpu_buf *buf) {
  wgpu_backend *g = as_g(be);
  if (buf->b) forget_buffer(g, buf->b);
  wisp_wgpu_buf_free(g->d, buf);
}
uint32_t wisp_wgpu_int_max_invocations(wisp_backend *be) {
  return as_g(be)->d->info.max_compute_invocations_per_workgroup;
}
int wisp_wgpu_int_rows_shared(wisp_backend *be) { return !as_g(be)->no_rows_shared; }
int wisp_wgpu_int_rows_q4k(wisp_backend *be) { return as_g(be)->rows_q4k; }
uint32_t wisp_wgpu_int_rows_nt(wisp_backend *be, int n) { return rows_nt(as_g(be), n); }
uint32_t wisp_wgpu_int_rows_tile(wisp_backend *be, uint32_t units, uint32_t uv, uint32_t wg, uint32_t lg,
                                 uint32_t rows, uint32_t nt) {
  return rows_tile(as_g(be), units, uv, wg, lg, rows, nt);
}
uint32_t wisp_wgpu_int_subgroup_max(wisp_backend *be) { return as_g(be)->d->info.subgroup_max_size; }
WGPUBuffer wisp_wgpu_int_dummy(wisp_backend *be, int read_write) {
  return read_write ? as_g(be)->dummy_rw.b : as_g(be)->dummy.b;
}
void wisp_wgpu_int_fail(wisp_backend *be, wisp_status st, const char *fmt, ...) {
  wgpu_backend *g = as_g(be);
  if (g->error) return;
  char msg[900];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  keep_error(g, wisp_fail(st, "webgpu: %s", msg));
}
int wisp_wgpu_int_has_error(wisp_backend *be) { return as_g(be)->error != WISP_OK; }
int wisp_wgpu_int_subgroups(wisp_backend *be) { return as_g(be)->sg; }
uint32_t wisp_wgpu_int_max_splits(wisp_backend *be) { return as_g(be)->max_splits; }
wisp_wgpu_device *wisp_wgpu_int_device(wisp_backend *be) { return as_g(be)->d; }
int wisp_wgpu_int_mat_part(wisp_backend *be, const wisp_matrix *m, int i, int *row0, int *rows, WGPUBuffer *w) {
  wmat *M = need_mat(as_g(be), m);
  if (!M || i < 0 || i >= M->nparts) return 0;
  *row0 = M->parts[i].row0;
  *rows = M->parts[i].rows;
  *w = M->parts[i].w.b;
  return 1;
}
void **wisp_wgpu_int_gated_slot(wisp_backend *be) { return &as_g(be)->gated; }
void **wisp_wgpu_int_mm8_slot(wisp_backend *be) { return &as_g(be)->mm8; }
void **wisp_wgpu_int_persist_slot(wisp_backend *be) { return &as_g(be)->persist; }
uint32_t wisp_wgpu_int_persist_grid(wisp_backend *be) { return as_g(be)->persist_wg; }
int wisp_wgpu_int_persist_asked(wisp_backend *be) { return as_g(be)->persist_asked; }
uint64_t wisp_wgpu_int_state_epoch(wisp_backend *be) { return as_g(be)->state_epoch; }
void wisp_wgpu_int_state_op(wisp_backend *be) { state_op(be); }
int wisp_wgpu_int_mat_bufs(wisp_backend *be, const wisp_matrix *m, int i, int *row0, int *rows, wisp_wgpu_binding b[3]) {
  wmat *M = need_mat(as_g(be), m);
  if (!M || i < 0 || i >= M->nparts) return 0;
  *row0 = M->parts[i].row0;
  *rows = M->parts[i].rows;
  part_bindings(as_g(be), &M->parts[i], b);
  return 1;
}
const wisp_backend_settings *wisp_wgpu_int_settings(wisp_backend *be) { return &as_g(be)->set; }
const wisp_wgpu_backend_opts *wisp_wgpu_int_opts(wisp_backend *be) { return &as_g(be)->opts; }
int wisp_wgpu_int_fuse(wisp_backend *be) { return as_g(be)->fuse; }
int wisp_wgpu_int_fuse_argmax(wisp_backend *be) { return as_g(be)->fuse_argmax; }
int wisp_wgpu_int_kv16(wisp_backend *be) { return as_g(be)->kv16; }
const wisp_wgpu_q4k_tuning *wisp_wgpu_int_q4k_tuning(wisp_backend *be) { return &as_g(be)->q4k_tune; }
const wisp_wgpu_dn_tuning *wisp_wgpu_int_dn_tuning(wisp_backend *be) { return &as_g(be)->dn_tune; }
wisp_wgpu_backend_stats *wisp_wgpu_int_stats(wisp_backend *be) { return &as_g(be)->stats; }
uint32_t wisp_wgpu_int_staged_vec4s(wisp_backend *be, int cols, uint64_t own_bytes) {
  return staged_vec4s(as_g(be), cols, own_bytes);
}
WGPUBuffer wisp_wgpu_int_amax(wisp_backend *be, uint32_t count) {
  wgpu_backend *g = as_g(be);
  if (!scratch(g, &g->amax, (uint64_t)count * 8, (uint64_t)count * 8, "wisp argmax partials")) return NULL;
  g->amax_count = count;
  return g->amax.b;
}
