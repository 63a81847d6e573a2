/* Per-sequence state of a step graph (graph.h): the activation buffers of
 * one forward call, and for every mixer node the state it keeps between
 * calls, sized from the node and the graph's shape:
 *   shortconv       its last conv_len - 1 inputs per channel ([hidden][L-1]);
 *   attention(s)    K and V caches [max_pos][kv_heads][head_dim] (kv_buf_new:
 *                   the backend's own KV storage, e.g. packed f16);
 *   gated_deltanet  the conv inputs as a ring [2K+V][L] (backend.h) and the
 *                   recurrent state [v_heads][k_dim][v_dim].
 * On a backend that can grow a KV cache (backend.h kv_buf_grow) the caches
 * start at KV_FIRST_POSITIONS and double, up to max_pos, before a step that
 * writes past them (wisp_graph_state_reserve): 64 slots do not each hold
 * the whole context from the start. Elsewhere they are made for max_pos.
 * The states of a session's slots are made together (wisp_graph_states_new):
 * each mixer state of all slots through one buf_new_slots call, so that a
 * backend can keep them in one device buffer a layer and kind, and a
 * batched step's mixer reaches every slot's state in one dispatch. */
#include <stdlib.h>

#include "model/graph.h"
#include "util/err.h"

/* Positions a growing KV cache starts with. */
#define KV_FIRST_POSITIONS 256

struct wisp_graph_state {
  int chunk, max_pos, n_layers;
  int kv_positions;  /* positions the KV caches hold now (max_pos where they do not grow) */
  size_t kv_row;     /* values a position of one cache: kv_heads * head_dim */
  wisp_buf *act[WISP_ACT_COUNT];
  wisp_buf *logits; /* one row of logits */
  /* Per layer: [0] conv state or K cache, [1] V cache or recurrent state. */
  wisp_buf *(*mix)[2];
  size_t (*mix_len)[2]; /* floats of the states tokens change for good (0: KV caches) */
};

void wisp_graph_state_free(wisp_graph_state *s, wisp_backend *be) {
  if (!s) return;
  for (int a = 0; a < WISP_ACT_COUNT; a++)
    if (s->act[a]) be->buf_free(be, s->act[a]);
  if (s->logits) be->buf_free(be, s->logits);
  for (int i = 0; s->mix && i < s->n_layers; i++)
    for (int k = 0; k < 2; k++)
      if (s->mix[i][k]) be->buf_free(be, s->mix[i][k]);
  free(s->mix);
  free(s->mix_len);
  free(s);
}

/* Slot i's buffer of a mixer state in out[i], for n slots: together
 * (buf_new_slots) where the backend can, else one by one. */
static wisp_status slots_new(wisp_backend *be, size_t len, int kv, int n, wisp_buf **out) {
  if (be->buf_new_slots) return be->buf_new_slots(be, len, kv, n, out);
  for (int i = 0; i < n; i++) {
    out[i] = kv && be->kv_buf_new ? be->kv_buf_new(be, len) : be->buf_new(be, len);
    if (!out[i]) {
      while (i-- > 0) be->buf_free(be, out[i]);
      return WISP_ENOMEM;
    }
  }
  return WISP_OK;
}

/* Activations and the arrays of one state, its mixer buffers not yet made. */
static wisp_graph_state *shell_new(const wisp_graph *g, wisp_backend *be, int chunk, int max_pos) {
  wisp_graph_state *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->chunk = chunk;
  s->max_pos = max_pos;
  s->n_layers = g->n_layers;
  s->mix = calloc((size_t)(g->n_layers > 0 ? g->n_layers : 1), sizeof *s->mix);
  s->mix_len = calloc((size_t)(g->n_layers > 0 ? g->n_layers : 1), sizeof *s->mix_len);
  int ok = s->mix && s->mix_len;
  for (int a = 0; ok && a < WISP_ACT_COUNT; a++) ok = (s->act[a] = be->buf_new(be, (size_t)chunk * (g->act[a] ? g->act[a] : 1))) != NULL;
  if (ok) ok = (s->logits = be->buf_new(be, (size_t)g->vocab)) != NULL;
  if (!ok) {
    wisp_graph_state_free(s, be);
    return NULL;
  }
  return s;
}

wisp_status wisp_graph_states_new(const wisp_graph *g, wisp_backend *be, int chunk, int max_pos, int n,
                                  wisp_graph_state **out) {
  for (int j = 0; j < n; j++) out[j] = NULL;
  if (n < 1) return wisp_fail(WISP_EINVAL, "%d sequence states", n);
  if (max_pos <= 0 || max_pos > g->max_positions) max_pos = g->max_positions;
  const int kv_positions = be->kv_buf_grow && max_pos > KV_FIRST_POSITIONS ? KV_FIRST_POSITIONS : max_pos;
  wisp_buf **made = calloc((size_t)n, sizeof *made);
  if (!made) goto oom;
  for (int j = 0; j < n; j++)
    if (!(out[j] = shell_new(g, be, chunk, max_pos))) goto oom;
  for (int j = 0; j < n; j++) {
    out[j]->kv_positions = kv_positions;
    out[j]->kv_row = (size_t)g->kv_heads * g->head_dim;
  }
  const int L = g->conv_len;
  for (int i = 0; i < g->n_nodes; i++) {
    const wisp_gnode *nd = &g->nodes[i];
    size_t len[2] = {0, 0}; /* values a slot of [0] and [1] */
    int kv = 0;
    if (nd->op == WISP_GOP_SHORTCONV) {
      len[0] = (size_t)g->hidden * (size_t)(L - 1 > 0 ? L - 1 : 1);
    } else if (nd->op == WISP_GOP_ATTENTION || nd->op == WISP_GOP_ATTENTION_GATED) {
      len[0] = len[1] = (size_t)kv_positions * g->kv_heads * g->head_dim;
      kv = 1;
    } else if (nd->op == WISP_GOP_DELTANET) {
      const int K = g->lin_k_heads * g->lin_k_dim, V = g->lin_v_heads * g->lin_v_dim;
      len[0] = (size_t)(2 * K + V) * (size_t)(L > 1 ? L : 1);
      len[1] = (size_t)g->lin_v_heads * g->lin_k_dim * g->lin_v_dim;
    }
    for (int k = 0; k < 2; k++) {
      if (!len[k]) continue;
      if (slots_new(be, len[k], kv, n, made)) goto oom;
      for (int j = 0; j < n; j++) {
        out[j]->mix[nd->layer][k] = made[j];
        out[j]->mix_len[nd->layer][k] = kv ? 0 : len[k]; /* KV caches are not snapshot */
      }
    }
  }
  free(made);
  return WISP_OK;
oom:
  free(made);
  for (int j = 0; j < n; j++) {
    wisp_graph_state_free(out[j], be);
    out[j] = NULL;
  }
  return wisp_fail(WISP_ENOMEM, "out of memory for %d sequence state%s (context %d)", n, n == 1 ? "" : "s", max_pos);
}

wisp_status wisp_graph_state_new(const wisp_graph *g, wisp_backend *be, int chunk, int max_pos,
                                 wisp_graph_state **out) {
  return wisp_graph_states_new(g, be, chunk, max_pos, 1, out);
}

void wisp_graph_state_reset(wisp_graph_state *s, wisp_backend *be) {
  for (int i = 0; i < s->n_layers; i++)
    for (int k = 0; k < 2; k++)
      if (s->mix_len[i][k]) be->buf_zero(be, s->mix[i][k]);
}

int wisp_graph_state_max_pos(const wisp_graph_state *s) { return s->max_pos; }

wisp_status wisp_graph_state_reserve(wisp_graph_state *s, wisp_backend *be, int positions) {
  if (positions <= s->kv_positions) return WISP_OK;
  if (!be->kv_buf_grow || positions > s->max_pos)
    return wisp_fail(WISP_EINVAL, "KV caches of %d positions cannot hold %d (context %d)", s->kv_positions, positions,
                     s->max_pos);
  int want = s->kv_positions > 0 ? s->kv_positions : 1;
  while (want < positions) want = want > s->max_pos / 2 ? s->max_pos : 2 * want;
  for (int i = 0; i < s->n_layers; i++)
    for (int k = 0; k < 2; k++) {
      if (!s->mix[i][k] || s->mix_len[i][k]) continue; /* not a KV cache */
      wisp_status st = be->kv_buf_grow(be, s->mix[i][k], (size_t)want * s->kv_row);
      if (st) return st;
    }
  s->kv_positions = want;
  return WISP_OK;
}

int wisp_graph_state_kv_positions(const wisp_graph_state *s) { return s->kv_positions; }

uint64_t wisp_graph_kv_bytes(const wisp_graph *g, int max_pos, int value_bytes) {
  uint64_t per_cache = (uint64_t)max_pos * (uint64_t)g->kv_heads * (uint64_t)g->head_dim * (uint64_t)value_bytes;
  uint64_t total = 0;
  for (int i = 0; i < g->n_nodes; i++)
    if (g->nodes[i].op == WISP_GOP_ATTENTION || g->nodes[i].op == WISP_GOP_ATTENTION_GATED) total += 2 * per_cache;
  return total;
}

int wisp_graph_state_bufs(wisp_graph_state *s, wisp_buf **bufs, size_t *lens, int cap) {
  int n = 0;
  for (int i = 0; i < s->n_layers; i++)
    for (int k = 0; k < 2; k++)
      if (s->mix_len[i][k] && n < cap) {
        bufs[n] = s->mix[i][k];
        lens[n++] = s->mix_len[i][k];
      }
  return n;
}

/* For graph_run.c and graph_lower.c. */
wisp_buf *wisp_graph_state_act(const wisp_graph_state *s, int act) { return s->act[act]; }
wisp_buf *wisp_graph_state_logits(const wisp_graph_state *s) { return s->logits; }
wisp_buf *wisp_graph_state_mix(const wisp_graph_state *s, int layer, int k) { return s->mix[layer][k]; }
int wisp_graph_state_chunk(const wisp_graph_state *s) { return s->chunk; }
