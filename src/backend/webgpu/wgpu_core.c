/* The core of the WebGPU backend (wgpu_core.h): errors, the pipeline
 * cache, bind groups and the uniform arena, recording and submitting,
 * scratch buffers, readbacks. */
#include "backend/webgpu/wgpu_core.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/webgpu/wgsl_kernels.h"
#include "util/env.h"
#include "util/err.h"

/* ---- errors -------------------------------------------------------------- */

/* Keeps the first failure (the message of wisp_last_error()) for sync. */
void wisp_wgpu_keep_error(wgpu_backend *g, wisp_status st) {
  if (!st || g->error) return;
  g->error = st;
  snprintf(g->error_msg, sizeof g->error_msg, "%s", wisp_last_error());
}

void wisp_wgpu_op_fail(wgpu_backend *g, wisp_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void wisp_wgpu_op_fail(wgpu_backend *g, wisp_status st, const char *fmt, ...) {
  if (g->error) return;
  char msg[900];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  wisp_wgpu_keep_error(g, wisp_fail(st, "webgpu: %s", msg));
}

/* ---- kernels ------------------------------------------------------------- */

/* The pipeline for kernel file `file` with override constants; cached by a
 * key naming the file and the constants. */
wisp_wgpu_kernel *wisp_wgpu_pipeline(wgpu_backend *g, const char *file, const wisp_wgpu_const *c, int nc) {
  /* Called for every op: the lookup compares values, no formatting. */
  for (int i = 0; i < g->n_kernels; i++) {
    const kcache *e = &g->kernels[i];
    if (e->nc != nc || (e->file != file && strcmp(e->file, file))) continue;
    int same = 1;
    for (int j = 0; j < nc && same; j++) same = e->v[j] == c[j].value;
    if (same) return e->k;
  }
  if (nc > KCONSTS) {
    wisp_wgpu_op_fail(g, WISP_EINVAL, "kernel %s: %d override constants (at most %d)", file, nc, KCONSTS);
    return NULL;
  }
  char key[96];
  int len = snprintf(key, sizeof key, "%s", file);
  for (int i = 0; i < nc && len < (int)sizeof key; i++)
    len += snprintf(key + len, sizeof key - (size_t)len, ":%g", c[i].value);
  if (g->n_kernels == (int)(sizeof g->kernels / sizeof g->kernels[0])) {
    wisp_wgpu_op_fail(g, WISP_EINVAL, "too many kernel variants");
    return NULL;
  }
  const char *src = wisp_wgsl_kernel(file);
  if (!src) {
    wisp_wgpu_op_fail(g, WISP_EUNSUPPORTED, "no embedded kernel %s", file);
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
    wisp_wgpu_keep_error(g, st);
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
void wisp_wgpu_drop_bind_groups(wgpu_backend *g) {
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
void wisp_wgpu_forget_buffer(wgpu_backend *g, WGPUBuffer b) {
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
    wisp_wgpu_op_fail(g, WISP_ENOMEM, "out of memory");
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

wisp_status wisp_wgpu_flush(wgpu_backend *g);

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
      wisp_wgpu_keep_error(g, wisp_wgpu_flush(g));
      if (g->error) return NULL;
      wisp_wgpu_drop_bind_groups(g);
      arena_grow(g);
      if (!wisp_wgpu_open_batch(g) || !(e = site_of(g, &key))) return NULL;
      e->epoch = g->batch_epoch;
      off = slot_alloc(g, usize);
      if (off == UINT64_MAX) {
        wisp_wgpu_op_fail(g, WISP_EINVAL, "webgpu: a %llu-byte parameter block does not fit the uniform arena",
                (unsigned long long)usize);
        return NULL;
      }
    }
    if (e->n == e->cap) {
      int cap = e->cap ? 2 * e->cap : 4;
      bg_slot *ns = realloc(e->slot, (size_t)cap * sizeof *ns);
      if (!ns) {
        wisp_wgpu_op_fail(g, WISP_ENOMEM, "out of memory");
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
      wisp_wgpu_keep_error(g, st);
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
void wisp_wgpu_free_retired(wgpu_backend *g) {
  for (int i = 0; i < g->n_retired; i++) wisp_wgpu_buf_free(g->d, &g->retired[i]);
  g->n_retired = 0;
}

wisp_status wisp_wgpu_flush_copy(wgpu_backend *g, WGPUBuffer src, uint64_t src_off, wisp_wgpu_buf *dst, uint64_t bytes) {
  if (!g->open) {
    wisp_wgpu_free_retired(g); /* nothing recorded reads them */
    return WISP_OK;
  }
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
    wisp_wgpu_free_retired(g);
    return st;
  }
  if (src) st = wisp_wgpu_batch_submit_copy(&g->batch, src, src_off, dst->b, 0, bytes);
  else st = wisp_wgpu_batch_submit(&g->batch);
  /* submitted work keeps what it uses until it is done (WebGPU's destroy) */
  wisp_wgpu_free_retired(g);
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
wisp_status wisp_wgpu_flush_ex(wgpu_backend *g, int spec) {
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
    if (g->error || !wisp_wgpu_open_batch(g)) return WISP_OK; /* the error is kept for sync */
  }
  wisp_status st = wisp_wgpu_flush_copy(g, with ? g->spec_src : NULL, g->spec_off, &g->staging, g->spec_bytes);
  if (with && !st) {
    g->spec_ready = 1;
    g->spec_have = 1;
    g->spec_at = g->stats.submits;
  }
  return st;
}

wisp_status wisp_wgpu_flush(wgpu_backend *g) { return wisp_wgpu_flush_ex(g, 0); }


/* Records one dispatch of k with storage bindings b[0..nb) and the
 * parameter block as binding nb. */
/* Opens a command batch unless one is open; 0 (error kept) on failure. */
int wisp_wgpu_open_batch(wgpu_backend *g) {
  if (g->open) return 1;
  wisp_status st = wisp_wgpu_batch_begin(g->d, &g->batch);
  if (st) {
    wisp_wgpu_keep_error(g, st);
    return 0;
  }
  g->open = 1;
  g->batch_epoch++;
  return 1;
}

void wisp_wgpu_record_xyz(wgpu_backend *g, const wisp_wgpu_kernel *k, const wisp_wgpu_binding *b, int nb,
                       const void *params, size_t psize, uint32_t gx, uint32_t gy, uint32_t gz) {
  if (g->error || !k) return;
  if (!wisp_wgpu_open_batch(g)) return;
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
  if (g->guard_each) wisp_wgpu_keep_error(g, wisp_wgpu_flush(g)); /* the guard check names this kernel */
}

void wisp_wgpu_record(wgpu_backend *g, const wisp_wgpu_kernel *k, const wisp_wgpu_binding *b, int nb,
                   const void *params, size_t psize, uint32_t gx, uint32_t gy) {
  wisp_wgpu_record_xyz(g, k, b, nb, params, psize, gx, gy, 1);
}

/* Makes *buf at least `need` bytes (creating `want` >= need when it grows);
 * 0 on failure (kept for sync). */
int wisp_wgpu_scratch(wgpu_backend *g, wisp_wgpu_buf *buf, uint64_t need, uint64_t want, const char *label) {
  /* With the debug guard the buffer is exactly `need` bytes, so that its
   * padding starts where this use's data ends. */
  if (g->d->guard_bytes) {
    if (buf->b && buf->size == ((need ? need : 4) + 3) / 4 * 4) return 1;
    want = need;
  } else if (need <= buf->size) {
    return 1;
  }
  wisp_wgpu_keep_error(g, wisp_wgpu_flush(g)); /* recorded work may use the old one */
  if (buf->b) {
    wisp_wgpu_forget_buffer(g, buf->b);
    wisp_wgpu_buf_free(g->d, buf);
  }
  wisp_status st = wisp_wgpu_buf_create(g->d, want > need ? want : need, WISP_WGPU_STORAGE, label, buf);
  if (st) {
    wisp_wgpu_keep_error(g, st);
    return 0;
  }
  return 1;
}

/* Lanes per row group of matvec.wgsl: a subgroup (32 on NVIDIA) or a whole
 * number of them, never more than the workgroup. */
uint32_t wisp_wgpu_matvec_lanes(const wgpu_backend *g, uint32_t wg) {
  uint32_t lg = g->d->info.subgroup_max_size > 32 ? g->d->info.subgroup_max_size : 32;
  return lg < wg ? lg : wg;
}

/* XN of the one-token products (matvec, matvec_conv, q4k_matvec,
 * q4k_fused): the input's vec4s when they fit the workgroup memory beside
 * the kernel's own arrays (own_bytes) so that each workgroup stages x' once
 * (matvec_common.wgsli), else 1 (read from global memory).
 * Tuning xstage=0 turns staging off. */
uint32_t wisp_wgpu_staged_vec4s(const wgpu_backend *g, int cols, uint64_t own_bytes) {
  /* the staged array holds whole runs of 8 vec4s (matvec_common.wgsli's xsw) */
  const uint64_t bytes = ((uint64_t)cols / 4 + 7) / 8 * 8 * 16 + own_bytes + 64;
  if (g->no_xstage || cols % 4 || cols < 8 || bytes > g->d->info.max_compute_workgroup_storage_size) return 1;
  return (uint32_t)cols / 4;
}

/* After a failed op the recorded batch is not submitted: drop it. */
void wisp_wgpu_drop_failed_batch(wgpu_backend *g) {
  if (!g->error || !g->open) return;
  wisp_wgpu_batch_abort(&g->batch);
  g->open = 0;
  g->dirty_lo = SIZE_MAX;
  g->dirty_hi = 0;
}

/* Returns the kept error (with its message as wisp_last_error) and clears
 * it, or the device's own error state. */
wisp_status wisp_wgpu_take_error(wgpu_backend *g) {
  if (!g->error) wisp_wgpu_keep_error(g, wisp_wgpu_device_check(g->d));
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
  wisp_wgpu_drop_failed_batch(g);
  wisp_wgpu_keep_error(g, wisp_wgpu_flush_ex(g, 1));
  return wisp_wgpu_take_error(g);
}

/* copy_range.wgsl: dst[dst_off..+n) = src[src_off..+n) in 32-bit words
 * (buf_copy_to, and the persistent decode's state copies); nothing for n 0. */
void wisp_wgpu_copy_words(wgpu_backend *g, WGPUBuffer src, uint64_t src_off, WGPUBuffer dst, uint64_t dst_off,
                           uint64_t n) {
  if (!n) return;
  wisp_wgpu_const c[1] = {{"WG", 256}};
  wisp_wgpu_kernel *k = wisp_wgpu_pipeline(g, "copy_range", c, 1);
  struct {
    uint32_t src_off, dst_off, n, pad;
  } p = {(uint32_t)src_off, (uint32_t)dst_off, (uint32_t)n, 0};
  wisp_wgpu_binding bb[2] = {whole(src), whole(dst)};
  uint32_t gx, gy;
  wisp_wgpu_grid(g->d, (uint32_t)cdiv(n, 256), &gx, &gy);
  wisp_wgpu_record(g, k, bb, 2, &p, sizeof p, gx, gy);
}

static wisp_status g_read_start(wisp_backend *be, const wisp_buf *b, size_t off, size_t n, int slot) {
  wgpu_backend *g = as_g(be);
  if (slot < 0 || slot > 1) wisp_wgpu_op_fail(g, WISP_EINVAL, "read_start: slot %d", slot);
  wisp_wgpu_drop_failed_batch(g);
  if (!g->error && wisp_wgpu_open_batch(g))
    wisp_wgpu_keep_error(g, wisp_wgpu_flush_copy(g, b->g.b, b->off + (uint64_t)off * 4, &g->rstage[slot], (uint64_t)n * 4));
  return wisp_wgpu_take_error(g);
}

static void g_submit(wisp_backend *be) {
  wgpu_backend *g = as_g(be);
  wisp_wgpu_drop_failed_batch(g);
  if (!g->error) wisp_wgpu_keep_error(g, wisp_wgpu_flush(g));
}

static wisp_status g_read_finish(wisp_backend *be, int slot, float *dst, size_t n) {
  wgpu_backend *g = as_g(be);
  if (slot < 0 || slot > 1 || !g->rstage[slot].b || g->rstage[slot].size < n * 4)
    return wisp_fail(WISP_EINVAL, "webgpu: read_finish of slot %d without a read_start of %zu values", slot, n);
  wisp_status st = wisp_wgpu_staging_read(g->d, g->rstage[slot], dst, n * 4);
  if (!st) st = wisp_wgpu_device_check(g->d);
  return st;
}

/* ---- the mixers over the rows of a batched step (backend.h shortconv_rows, attention_rows) ---- */

uint32_t wisp_wgpu_rows_group(const wisp_mixer_rows *rows, unsigned char *done, uint32_t (*tab)[4], WGPUBuffer *b0,
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

void wisp_wgpu_state_op(wisp_backend *be) {
  wgpu_backend *g = as_g(be);
  g->state_flush(be);
  g->state_epoch++;
}

void wisp_wgpu_state_copy_op(wisp_backend *be, const wisp_buf *dst) {
  wgpu_backend *g = as_g(be);
  g->state_flush(be);
  if (g->state_mirrors(be, dst)) g->state_epoch++;
}

void wisp_wgpu_core_install(wisp_backend *vt) {
  vt->sync = g_sync;
  vt->submit = g_submit;
  vt->read_start = g_read_start;
  vt->read_finish = g_read_finish;
}

uint32_t wisp_wgpu_rows_nt(const wgpu_backend *g, int n) {
  uint32_t nt = 2;
  while (nt < WISP_WGPU_ROWS_MAXA && nt < (uint32_t)n) nt *= 2;
  const uint32_t cap = g->rows_nt ? g->rows_nt : WISP_WGPU_ROWS_MAXA;
  return nt < cap ? nt : cap;
}

uint32_t wisp_wgpu_rows_per_group(uint32_t rows, uint32_t nt) {
  if (rows > 4) rows = 4;
  while (rows > 1 && rows * nt > WISP_WGPU_ROWS_MAXA) rows /= 2;
  return rows;
}

uint32_t wisp_wgpu_rows_tile(const wgpu_backend *g, uint32_t units, uint32_t uv, uint32_t wg, uint32_t lg, uint32_t rows,
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

/* Splits of ntile key tiles: one per tile up to the cap; past cap splits, as
 * many as give each split `tiles` tiles (the long part of the rule), up to
 * the most. Keep in step with attn_split.wgsli's decode_split. */
uint32_t wisp_wgpu_key_splits(uint32_t ntile, uint32_t rule, uint32_t *tps) {
  const uint32_t cap = rule & 0xFFFu, most = (rule >> 12) & 0xFFFu, tiles = rule >> 24;
  uint32_t want = ntile < cap ? ntile : cap;
  if (tiles) {
    const uint32_t lw = cdiv(ntile, tiles) < most ? cdiv(ntile, tiles) : most;
    if (lw > want) want = lw;
  }
  *tps = 0xFFFFFFFFu;
  if (ntile <= 1 || want <= 1) return 1;
  *tps = cdiv(ntile, want);
  return cdiv(ntile, *tps);
}

uint32_t wisp_wgpu_split_rule(const wgpu_backend *g) {
  const uint32_t cap = g->max_splits < 0xFFFu ? g->max_splits : 0xFFFu;
  uint32_t most = g->opts.attn_long_most < 0xFFFu ? g->opts.attn_long_most : 0xFFFu;
  const uint32_t tiles = g->opts.attn_long_tiles < 0xFFu ? g->opts.attn_long_tiles : 0xFFu;
  /* no long part without tiles, below the cap, or when splitting is off (a cap of 1) */
  if (!tiles || most < cap || cap <= 1) most = cap;
  return cap | most << 12 | (most > cap ? tiles : 0) << 24;
}

uint32_t wisp_wgpu_split_most(uint32_t rule) {
  const uint32_t cap = rule & 0xFFFu, most = (rule >> 12) & 0xFFFu;
  return most > cap ? most : cap > 0 ? cap : 1;
}

WGPUBuffer wisp_wgpu_amax(wgpu_backend *g, uint32_t count) {
  if (!wisp_wgpu_scratch(g, &g->amax, (uint64_t)count * 8, (uint64_t)count * 8, "wisp argmax partials")) return NULL;
  g->amax_count = count;
  return g->amax.b;
}

void wisp_wgpu_scratch_free(wgpu_backend *g, wisp_wgpu_buf *buf) {
  if (buf->b) wisp_wgpu_forget_buffer(g, buf->b);
  wisp_wgpu_buf_free(g->d, buf);
}
