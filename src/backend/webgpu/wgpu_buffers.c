/* Buffers of the WebGPU backend: activations, KV caches and a session's
 * slot states (backend.h buf_*), prepared vectors, writes, copies and
 * reads. */
#include "backend/webgpu/wgpu_core.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "format/quant.h"
#include "util/err.h"

/* ---- activations and states ---- */

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

/* backend.h buf_new_slots: slot i's part at i * stride of a shared buffer,
 * the stride rounded up to the storage offset alignment (256 bytes at
 * most); as many slots a device buffer as one binding may span, so that a
 * rows kernel binds it whole. */
static wisp_status g_buf_new_slots(wisp_backend *be, size_t n, int kv, int slots, wisp_buf **out) {
  wgpu_backend *g = as_g(be);
  const uint64_t words = kv && g->kv16 ? (n + 1) / 2 : (n ? n : 1);
  const uint64_t stride = wisp_wgpu_slot_stride(g, words);
  uint64_t per = g->max_binding / stride;
  if (per < 1) per = 1;
  for (int i = 0; i < slots; i++) out[i] = NULL;
  for (int i0 = 0; i0 < slots; i0 += (int)per) {
    const int cnt = slots - i0 < (int)per ? slots - i0 : (int)per;
    wisp_buf *P = calloc(1, sizeof *P);
    if (P && !(P->kids = calloc((size_t)cnt, sizeof *P->kids))) {
      free(P);
      P = NULL;
    }
    if (!P || wisp_wgpu_buf_create(g->d, stride * (uint64_t)(cnt - 1) + words * 4, WISP_WGPU_STORAGE,
                                   "wisp slot states", &P->g)) {
      if (P) free(P->kids);
      free(P);
      goto fail;
    }
    P->n = (size_t)(P->g.size / 4);
    P->n_kids = cnt;
    for (int i = 0; i < cnt; i++) {
      wisp_buf *v = calloc(1, sizeof *v);
      if (!v) {
        if (!P->refs) {
          wisp_wgpu_buf_free(g->d, &P->g);
          free(P->kids);
          free(P);
        }
        goto fail;
      }
      *v = (wisp_buf){P->g, (size_t)words, stride * (uint64_t)i, P, 0, NULL, 0};
      P->refs++;
      P->kids[i] = v;
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
  g->state_forget(be, b); /* no copy-back into a freed state buffer */
  wisp_wgpu_keep_error(g, wisp_wgpu_flush(g)); /* recorded work may still use it */
  if (b->parent) { /* a slot's part: the device buffer goes with the last part */
    wisp_buf *P = b->parent;
    for (int i = 0; i < P->n_kids; i++)
      if (P->kids[i] == b) P->kids[i] = NULL;
    free(b);
    if (--P->refs > 0) return;
    b = P;
  }
  wisp_wgpu_forget_buffer(g, b->g.b);
  if (g->spec_src == b->g.b) {
    g->spec_src = NULL;
    g->spec_ready = 0;
    g->spec_have = 0;
  }
  wisp_wgpu_buf_free(g->d, &b->g);
  free(b->kids);
  free(b);
}

static void g_buf_read(wisp_backend *be, const wisp_buf *b, size_t off, size_t n, float *dst) {
  wgpu_backend *g = as_g(be);
  g->state_flush(be); /* a state buffer read back must hold the persistent decode's latest */
  wisp_status st;
  off += (size_t)word0(b); /* a slot's part: words of its device buffer */
  if (g->spec_ready && !g->open && g->spec_src == b->g.b && g->spec_off == (uint64_t)off * 4 &&
      g->spec_bytes == (uint64_t)n * 4) {
    g->stats.spec_reads++;
    st = wisp_wgpu_staging_read(g->d, g->staging, dst, n * 4);
  } else {
    wisp_wgpu_keep_error(g, wisp_wgpu_flush(g));
    st = wisp_wgpu_buf_read_via(g->d, b->g, (uint64_t)off * 4, dst, n * 4, &g->staging);
    g->spec_src = n ? b->g.b : NULL;
    g->spec_off = (uint64_t)off * 4;
    g->spec_bytes = (uint64_t)n * 4;
    g->spec_have = !st; /* staging now holds exactly that range */
    g->spec_at = g->stats.submits;
  }
  g->spec_ready = 0; /* the staging buffer has been read (and may be reused) */
  if (st) {
    wisp_wgpu_keep_error(g, st);
    for (size_t i = 0; i < n; i++) dst[i] = NAN;
  }
}

static void g_buf_zero(wisp_backend *be, wisp_buf *b) {
  wgpu_backend *g = as_g(be);
  wisp_wgpu_state_op(be);
  /* Queue writes land before the next submit: submit what is recorded first. */
  wisp_wgpu_keep_error(g, wisp_wgpu_flush(g));
  g->spec_ready = 0;
  g->spec_have = 0;
  static const float zeros[4096];
  uint64_t bytes = b->parent ? (uint64_t)b->n * 4 : b->g.size;
  for (uint64_t o = 0; o < bytes; o += sizeof zeros) {
    size_t k = bytes - o < sizeof zeros ? (size_t)(bytes - o) : sizeof zeros;
    wisp_status st = wisp_wgpu_buf_write(g->d, b->g, b->off + o, zeros, k);
    if (st) {
      wisp_wgpu_keep_error(g, st);
      return;
    }
  }
}

wvec *wisp_wgpu_find_vec(wgpu_backend *g, const wisp_vector *v) {
  for (int i = 0; i < g->n_vecs; i++)
    if ((void *)g->vecs[i] == v->device && g->vecs[i]->host == v->data) return g->vecs[i];
  for (int i = 0; i < g->n_vecs; i++)
    if (g->vecs[i]->host == v->data && g->vecs[i]->n == v->n) return g->vecs[i];
  return NULL;
}

static wisp_status g_prepare_vector(wisp_backend *be, wisp_vector *v) {
  wgpu_backend *g = as_g(be);
  wvec *have = wisp_wgpu_find_vec(g, v);
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

wvec *wisp_wgpu_need_vec(wgpu_backend *g, const wisp_vector *v) {
  wvec *w = wisp_wgpu_find_vec(g, v);
  if (!w) wisp_wgpu_op_fail(g, WISP_EINVAL, "a vector of %d values was not prepared for this backend", v->n);
  return w;
}

static void g_buf_write(wisp_backend *be, wisp_buf *b, size_t off, size_t n, const float *src) {
  wgpu_backend *g = as_g(be);
  /* A queue write lands before the next submit as a whole: submit what was
   * recorded before it first, so ordering is what the caller wrote. */
  if (g->open) wisp_wgpu_keep_error(g, wisp_wgpu_flush(g));
  wisp_wgpu_keep_error(g, wisp_wgpu_buf_write(g->d, b->g, b->off + (uint64_t)off * 4, src, n * 4));
  g->spec_ready = 0;
  g->spec_have = 0;
}

/* ---- writes and copies ---- */

static void g_buf_copy(wisp_backend *be, wisp_buf *b, size_t dst_off, size_t src_off, size_t n) {
  wgpu_backend *g = as_g(be);
  wisp_wgpu_const c[1] = {{"WG", 64}};
  wisp_wgpu_kernel *k = wisp_wgpu_pipeline(g, "copy", c, 1);
  struct {
    uint32_t dst, src, n, pad;
  } p = {(uint32_t)dst_off, (uint32_t)src_off, (uint32_t)n, 0};
  wisp_wgpu_binding bb[1] = {bind_of(b)};
  wisp_wgpu_record(g, k, bb, 1, &p, sizeof p, cdiv((uint64_t)n, 64), 1);
}

static void g_buf_copy_to(wisp_backend *be, wisp_buf *dst, const wisp_buf *src, size_t n) {
  wgpu_backend *g = as_g(be);
  wisp_wgpu_state_copy_op(be, dst);
  wisp_wgpu_copy_words(g, src->g.b, word0(src), dst->g.b, word0(dst), n);
}

static void g_buf_copy_at(wisp_backend *be, wisp_buf *dst, size_t dst_off, const wisp_buf *src, size_t src_off,
                          size_t n) {
  wgpu_backend *g = as_g(be);
  wisp_wgpu_state_copy_op(be, dst);
  wisp_wgpu_copy_words(g, src->g.b, word0(src) + src_off, dst->g.b, word0(dst) + dst_off, n);
}

/* ---- weights (prepared by wgpu_products.c's prepare_matrix) ---- */

wmat *wisp_wgpu_find_mat(wgpu_backend *g, const wisp_matrix *m) {
  const void *host = wisp_matrix_host(m);
  for (int i = 0; i < g->n_mats; i++)
    if ((void *)g->mats[i] == m->device && g->mats[i]->host == host) return g->mats[i];
  for (int i = 0; i < g->n_mats; i++)
    if (g->mats[i]->host == host && g->mats[i]->rows == m->rows && g->mats[i]->cols == m->cols) return g->mats[i];
  return NULL;
}

void wisp_wgpu_mat_free(wgpu_backend *g, wmat *w) {
  if (!w) return;
  for (int p = 0; p < w->nparts; p++) {
    wisp_wgpu_buf_free(g->d, &w->parts[p].w);
    wisp_wgpu_buf_free(g->d, &w->parts[p].s);
    wisp_wgpu_buf_free(g->d, &w->parts[p].z);
  }
  free(w->parts);
  free(w);
}

wmat *wisp_wgpu_need_mat(wgpu_backend *g, const wisp_matrix *m) {
  wmat *w = wisp_wgpu_find_mat(g, m);
  if (!w) wisp_wgpu_op_fail(g, WISP_EINVAL, "a %dx%d matrix was not prepared for this backend", m->rows, m->cols);
  return w;
}

int wisp_wgpu_mat_part(wgpu_backend *g, const wisp_matrix *m, int i, int *row0, int *rows, WGPUBuffer *w) {
  wmat *M = wisp_wgpu_need_mat(g, m);
  if (!M || i < 0 || i >= M->nparts) return 0;
  *row0 = M->parts[i].row0;
  *rows = M->parts[i].rows;
  *w = M->parts[i].w.b;
  return 1;
}

int wisp_wgpu_mat_bufs(wgpu_backend *g, const wisp_matrix *m, int i, int *row0, int *rows, wisp_wgpu_binding b[3]) {
  wmat *M = wisp_wgpu_need_mat(g, m);
  if (!M || i < 0 || i >= M->nparts) return 0;
  *row0 = M->parts[i].row0;
  *rows = M->parts[i].rows;
  part_bindings(g, &M->parts[i], b);
  return 1;
}

WGPUBuffer wisp_wgpu_vec_buffer(wgpu_backend *g, const wisp_vector *v) {
  wvec *w = wisp_wgpu_need_vec(g, v);
  return w ? w->g.b : NULL;
}

void wisp_wgpu_buffers_install(wisp_backend *vt) {
  vt->buf_new = g_buf_new;
  vt->kv_buf_new = g_kv_buf_new;
  vt->buf_new_slots = g_buf_new_slots;
  vt->buf_free = g_buf_free;
  vt->buf_read = g_buf_read;
  vt->buf_zero = g_buf_zero;
  vt->buf_write = g_buf_write;
  vt->buf_copy = g_buf_copy;
  vt->buf_copy_to = g_buf_copy_to;
  vt->buf_copy_at = g_buf_copy_at;
  vt->prepare_vector = g_prepare_vector;
}
