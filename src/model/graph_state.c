/* Per-sequence state of a step graph (graph.h): the activation buffers of
 * one forward call, and for every mixer node the state it keeps between
 * calls, sized from the node and the graph's shape:
 *   shortconv       its last conv_len - 1 inputs per channel ([hidden][L-1]);
 *   attention(s)    K and V caches [max_pos][kv_heads][head_dim] (kv_buf_new:
 *                   the backend's own KV storage, e.g. packed f16);
 *   gated_deltanet  the conv inputs as a ring [2K+V][L] (backend.h) and the
 *                   recurrent state [v_heads][k_dim][v_dim]. */
#include <stdlib.h>

#include "model/graph.h"
#include "util/err.h"

struct wisp_graph_state {
  int chunk, max_pos, n_layers;
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

static wisp_buf *kv_new(wisp_backend *be, size_t n) { return be->kv_buf_new ? be->kv_buf_new(be, n) : be->buf_new(be, n); }

wisp_status wisp_graph_state_new(const wisp_graph *g, wisp_backend *be, int chunk, int max_pos,
                                 wisp_graph_state **out) {
  *out = NULL;
  if (max_pos <= 0 || max_pos > g->max_positions) max_pos = g->max_positions;
  wisp_graph_state *s = calloc(1, sizeof *s);
  if (!s) return wisp_fail(WISP_ENOMEM, "out of memory");
  s->chunk = chunk;
  s->max_pos = max_pos;
  s->n_layers = g->n_layers;
  s->mix = calloc((size_t)(g->n_layers > 0 ? g->n_layers : 1), sizeof *s->mix);
  s->mix_len = calloc((size_t)(g->n_layers > 0 ? g->n_layers : 1), sizeof *s->mix_len);
  if (!s->mix || !s->mix_len) goto oom;
  for (int a = 0; a < WISP_ACT_COUNT; a++)
    if (!(s->act[a] = be->buf_new(be, (size_t)chunk * (g->act[a] ? g->act[a] : 1)))) goto oom;
  if (!(s->logits = be->buf_new(be, (size_t)g->vocab))) goto oom;
  const int L = g->conv_len;
  for (int i = 0; i < g->n_nodes; i++) {
    const wisp_gnode *n = &g->nodes[i];
    wisp_buf **m = s->mix[n->layer];
    size_t *len = s->mix_len[n->layer];
    if (n->op == WISP_GOP_SHORTCONV) {
      len[0] = (size_t)g->hidden * (size_t)(L - 1 > 0 ? L - 1 : 1);
      if (!(m[0] = be->buf_new(be, len[0]))) goto oom;
    } else if (n->op == WISP_GOP_ATTENTION || n->op == WISP_GOP_ATTENTION_GATED) {
      size_t kv = (size_t)max_pos * g->kv_heads * g->head_dim;
      if (!(m[0] = kv_new(be, kv)) || !(m[1] = kv_new(be, kv))) goto oom;
    } else if (n->op == WISP_GOP_DELTANET) {
      const int K = g->lin_k_heads * g->lin_k_dim, V = g->lin_v_heads * g->lin_v_dim;
      len[0] = (size_t)(2 * K + V) * (size_t)(L > 1 ? L : 1);
      len[1] = (size_t)g->lin_v_heads * g->lin_k_dim * g->lin_v_dim;
      if (!(m[0] = be->buf_new(be, len[0])) || !(m[1] = be->buf_new(be, len[1]))) goto oom;
    }
  }
  *out = s;
  return WISP_OK;
oom:
  wisp_graph_state_free(s, be);
  return wisp_fail(WISP_ENOMEM, "out of memory for the session state (context %d)", max_pos);
}

void wisp_graph_state_reset(wisp_graph_state *s, wisp_backend *be) {
  for (int i = 0; i < s->n_layers; i++)
    for (int k = 0; k < 2; k++)
      if (s->mix_len[i][k]) be->buf_zero(be, s->mix[i][k]);
}

int wisp_graph_state_max_pos(const wisp_graph_state *s) { return s->max_pos; }

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
