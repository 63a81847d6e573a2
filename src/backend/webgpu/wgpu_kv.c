/* KV caches that grow (backend.h kv_buf_grow) on the WebGPU backend.
 *
 * The session makes its KV caches for a few hundred positions and asks for
 * more, doubling up to its context, between steps (graph_state.c,
 * wisp_graph_state_reserve). A device buffer cannot grow in place, so a
 * cache grows by reallocate-and-copy: a new buffer of the new size, the
 * old words copied into it in recorded order (copy_range.wgsl), the old
 * buffer released once what was recorded against it is submitted. The
 * handle (wisp_buf) stays, so the graph and the persistent decode keep
 * theirs; bind groups are cached by device buffer, and those of the old
 * one are dropped (wisp_wgpu_forget_buffer) so that none outlives it.
 *
 * A session's slots keep each layer's cache in one shared buffer, slot i at
 * i * stride (buf_new_slots), so that a batched step reaches every slot in
 * one dispatch. When one slot's cache outgrows the stride, the shared
 * buffer is remade with the stride of the new size and every slot's part
 * moves (each keeps its handle): the slots hold as much as the longest of
 * them, never the whole context each unless one needs it. Where the
 * shared buffer would exceed one binding, the growing slot moves out to a
 * buffer of its own instead (rows kernels group rows by buffer, so it is
 * then a dispatch of its own). */
#include "backend/webgpu/wgpu_core.h"

#include <stdlib.h>

#include "util/err.h"

uint64_t wisp_wgpu_slot_stride(const wgpu_backend *g, uint64_t words) {
  const uint64_t a = g->d->info.min_storage_buffer_offset_alignment;
  const uint64_t align = a > 256 ? a : 256;
  return (words * 4 + align - 1) / align * align;
}

/* Makes buffer *to of `bytes` (zero-filled, as WebGPU makes every buffer). */
static int new_buffer(wgpu_backend *g, uint64_t bytes, wisp_wgpu_buf *to) {
  wisp_status st = wisp_wgpu_buf_create(g->d, bytes, WISP_WGPU_STORAGE, "wisp KV cache", to);
  if (st) {
    wisp_fail(WISP_ENOMEM, "webgpu: out of memory for a KV cache of %llu bytes", (unsigned long long)bytes);
    return 0;
  }
  return 1;
}

/* Releases `old` once what is recorded (the copies out of it) is
 * submitted: at the next flush (wisp_wgpu_free_retired), so that caches
 * growing together before a request's first step share one submit (on
 * the H200 a submit each was ~12 of them for the seed shape), or at once
 * when no room is left on the list. */
static void retire(wgpu_backend *g, wisp_wgpu_buf *old) {
  wisp_wgpu_forget_buffer(g, old->b);
  if (g->spec_src == old->b) {
    g->spec_src = NULL;
    g->spec_ready = 0;
    g->spec_have = 0;
  }
  if (g->n_retired == g->cap_retired) {
    const int cap = g->cap_retired ? 2 * g->cap_retired : 16;
    wisp_wgpu_buf *r = realloc(g->retired, sizeof *r * (size_t)cap);
    if (!r) { /* no room to wait: submit the copies now, then free */
      wisp_wgpu_keep_error(g, wisp_wgpu_flush(g));
      wisp_wgpu_buf_free(g->d, old);
      return;
    }
    g->retired = r;
    g->cap_retired = cap;
  }
  g->retired[g->n_retired++] = *old;
  old->b = NULL;
  old->size = 0;
}

/* A cache of its own (no parent): reallocate and copy. */
static wisp_status grow_alone(wgpu_backend *g, wisp_buf *b, uint64_t words) {
  wisp_wgpu_buf to = {0};
  if (!new_buffer(g, words * 4, &to)) return WISP_ENOMEM;
  wisp_wgpu_copy_words(g, b->g.b, word0(b), to.b, 0, b->n);
  wisp_wgpu_buf old = b->g;
  const int was_part = b->parent != NULL;
  b->g = to;
  b->n = (size_t)words;
  b->off = 0;
  if (!was_part) retire(g, &old);
  return WISP_OK;
}

/* A slot's part of shared buffer P: P remade at the stride of `words`,
 * every part moved; or, past one binding, the part moved out alone. */
static wisp_status grow_part(wgpu_backend *g, wisp_buf *b, uint64_t words) {
  wisp_buf *P = b->parent;
  const uint64_t stride = wisp_wgpu_slot_stride(g, words);
  const uint64_t bytes = stride * (uint64_t)(P->n_kids - 1) + words * 4;
  if (bytes > g->max_binding) {
    wisp_status st = grow_alone(g, b, words);
    if (st) return st;
    for (int i = 0; i < P->n_kids; i++)
      if (P->kids[i] == b) P->kids[i] = NULL;
    b->parent = NULL;
    if (--P->refs == 0) {
      retire(g, &P->g);
      free(P->kids);
      free(P);
    }
    return WISP_OK;
  }
  wisp_wgpu_buf to = {0};
  if (!new_buffer(g, bytes, &to)) return WISP_ENOMEM;
  for (int i = 0; i < P->n_kids; i++) {
    wisp_buf *k = P->kids[i];
    if (!k) continue;
    wisp_wgpu_copy_words(g, P->g.b, word0(k), to.b, stride * (uint64_t)i / 4, k->n);
    k->g = to;
    k->off = stride * (uint64_t)i;
    k->n = (size_t)words;
  }
  wisp_wgpu_buf old = P->g;
  P->g = to;
  P->n = (size_t)(bytes / 4);
  retire(g, &old);
  return WISP_OK;
}

/* backend.h kv_buf_grow: b holds n_values (packed f16: n / 2 words) from
 * here on, its values kept. */
static wisp_status g_kv_buf_grow(wisp_backend *be, wisp_buf *b, size_t n_values) {
  wgpu_backend *g = as_g(be);
  const uint64_t words = g->kv16 ? ((uint64_t)n_values + 1) / 2 : (uint64_t)n_values;
  if (words <= b->n) return WISP_OK;
  if (words * 4 > g->max_binding)
    return wisp_fail(WISP_EUNSUPPORTED, "webgpu: a KV cache of %llu bytes exceeds one binding (%llu)",
                     (unsigned long long)(words * 4), (unsigned long long)g->max_binding);
  /* the persistent decode's newer rows go to the cache before it moves */
  g->state_flush(be);
  wisp_status st = b->parent ? grow_part(g, b, words) : grow_alone(g, b, words);
  if (!st) g->stats.kv_grows++;
  return st ? st : wisp_wgpu_take_error(g);
}

void wisp_wgpu_kv_install(wisp_backend *vt) { vt->kv_buf_grow = g_kv_buf_grow; }
