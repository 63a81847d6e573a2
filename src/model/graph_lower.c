/* The persistent decode's layer table, derived from the step graph.
 *
 * The persistent kernels (src/backend/webgpu/kernels/persist_*.wgsl) run
 * every step of a decode batch in one dispatch as a fixed sequence of
 * phases per layer: norm, in-product, mixer, out-product + residual, norm,
 * gate/up product, SwiGLU, down product + residual; then the final norm,
 * the head and the greedy choice. This file checks that each layer's nodes
 * are exactly that sequence (any other graph runs op by op) and writes the
 * table (backend.h, wisp_decode_graph) those phases read. */
#include <string.h>

#include "model/graph.h"

/* Node i .. i+7 of layer l as the persistent phases expect them; returns
 * the mixer node, or NULL. */
static const wisp_gnode *match_layer(const wisp_graph *g, int i, int l) {
  if (i + 8 > g->n_nodes) return NULL;
  const wisp_gnode *n = &g->nodes[i];
  for (int k = 0; k < 8; k++)
    if (n[k].layer != l) return NULL;
  const int H = g->hidden;
  int ok = n[0].op == WISP_GOP_RMSNORM && n[0].in == WISP_ACT_X && n[0].out == WISP_ACT_XN && n[0].cols == H &&
           n[1].op == WISP_GOP_MATMUL && n[1].in == WISP_ACT_XN && n[1].out == WISP_ACT_BIG && !n[1].accumulate &&
           (n[2].op == WISP_GOP_SHORTCONV || n[2].op == WISP_GOP_ATTENTION ||
            n[2].op == WISP_GOP_ATTENTION_GATED || n[2].op == WISP_GOP_DELTANET) &&
           n[3].op == WISP_GOP_MATMUL && n[3].in == WISP_ACT_MID && n[3].out == WISP_ACT_X && n[3].accumulate &&
           n[4].op == WISP_GOP_RMSNORM && n[4].in == WISP_ACT_X && n[4].out == WISP_ACT_XN &&
           n[5].op == WISP_GOP_MATMUL && n[5].in == WISP_ACT_XN && n[5].out == WISP_ACT_BIG && !n[5].accumulate &&
           n[5].rows == 2 * g->ffn && n[6].op == WISP_GOP_SWIGLU && n[6].cols == g->ffn &&
           n[7].op == WISP_GOP_MATMUL && n[7].in == WISP_ACT_MID && n[7].out == WISP_ACT_X && n[7].accumulate;
  return ok ? &n[2] : NULL;
}

wisp_status wisp_graph_lower_decode(const wisp_graph *g, const wisp_graph_state *s, wisp_decode_graph *out) {
  if (g->n_layers > WISP_GRAPH_MAX_LAYERS || g->n_nodes != 8 * g->n_layers) return WISP_EUNSUPPORTED;
  wisp_decode_graph d = {.n_layers = g->n_layers, .hidden = g->hidden, .ffn = g->ffn, .vocab = g->vocab,
                         .heads = g->heads, .kv_heads = g->kv_heads, .head_dim = g->head_dim,
                         .conv_len = g->conv_len, .max_pos = wisp_graph_state_max_pos(s), .rope_rows = g->rope_rows,
                         .rotary_dim = g->rotary_dim, .lin_k_heads = g->lin_k_heads, .lin_v_heads = g->lin_v_heads,
                         .lin_k_dim = g->lin_k_dim, .lin_v_dim = g->lin_v_dim, .eps = g->eps, .embed = g->embed,
                         .head = g->head, .final_norm = g->final_norm, .rope_cos = g->rope_cos,
                         .rope_sin = g->rope_sin};
  /* The two kernels: short conv + attention (ungated), or Gated DeltaNet +
   * gated attention. A graph mixing the families has no kernel. */
  int plain = 0, gated = 0;
  for (int l = 0; l < g->n_layers; l++) {
    const wisp_gnode *m = match_layer(g, 8 * l, l);
    if (!m) return WISP_EUNSUPPORTED;
    const wisp_gnode *n = m - 2;
    wisp_graph_layer *G = &d.layers[l];
    memset(G, 0, sizeof *G);
    G->attention = m->op == WISP_GOP_ATTENTION || m->op == WISP_GOP_ATTENTION_GATED;
    plain |= m->op == WISP_GOP_SHORTCONV || m->op == WISP_GOP_ATTENTION;
    gated |= m->op == WISP_GOP_DELTANET || m->op == WISP_GOP_ATTENTION_GATED;
    G->op_norm = n[0].w;
    G->in = n[1].W;
    G->out = n[3].W;
    G->ffn_norm = n[4].w;
    G->gate_up = n[5].W;
    G->down = n[7].W;
    G->state = wisp_graph_state_mix(s, l, 0);
    if (G->attention) {
      G->q_norm = m->q_norm;
      G->k_norm = m->k_norm;
      G->v_cache = wisp_graph_state_mix(s, l, 1);
    } else {
      G->taps = m->w;
      G->a_log = m->a_log;
      G->dt_bias = m->dt_bias;
      G->gnorm = m->gnorm;
      G->rec_state = wisp_graph_state_mix(s, l, 1);
    }
  }
  if (plain && gated) return WISP_EUNSUPPORTED;
  d.gated_layers = gated;
  *out = d;
  return WISP_OK;
}
