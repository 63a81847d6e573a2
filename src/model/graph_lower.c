/* The persistent decode's layer table and phase list, derived from the
 * step graph.
 *
 * The persistent kernel (src/backend/webgpu/kernels/persist.wgsl) runs
 * every step of a decode batch in one dispatch by walking a list of
 * generic phases (backend.h, wisp_decode_phase: a staged input, then one
 * piece of work over the whole grid, then a grid barrier). This file checks
 * that each layer's nodes are a pre-norm layer (norm, in-product, a mixer,
 * out-product + residual, norm, gate/up product, SwiGLU, down product +
 * residual; any other graph runs op by op), writes the table of what each
 * layer reads (its weights, vectors and state buffers) and the phases of a
 * step: per layer those of its own mixer, so a graph may mix short conv,
 * attention, gated attention and Gated DeltaNet layers. Which phases and
 * shapes a backend runs is the backend's to check. */
#include <string.h>

#include "model/graph.h"

/* The nodes of layer l from node i as the persistent phases expect them
 * (an attention layer's in-product may be followed by its bias: *bias);
 * returns the mixer node, or NULL; *len: the layer's node count. */
static const wisp_gnode *match_layer(const wisp_graph *g, int i, int l, int *len, const wisp_gnode **bias) {
  *bias = NULL;
  *len = 8;
  if (i + 2 < g->n_nodes && g->nodes[i + 2].op == WISP_GOP_ADD_BIAS) {
    *bias = &g->nodes[i + 2];
    *len = 9;
  }
  if (i + *len > g->n_nodes) return NULL;
  const wisp_gnode *n = &g->nodes[i];
  for (int k = 0; k < *len; k++)
    if (n[k].layer != l) return NULL;
  const wisp_gnode *b = *bias;
  if (b && !(b->in == WISP_ACT_BIG && b->out == WISP_ACT_BIG && b->cols == n[1].rows)) return NULL;
  if (b) n++; /* the bias rides on the in-product: the rest as in a layer without one */
  const int H = g->hidden;
  const wisp_gnode *n0 = &g->nodes[i];
  int ok = n0[0].op == WISP_GOP_RMSNORM && n0[0].in == WISP_ACT_X && n0[0].out == WISP_ACT_XN && n0[0].cols == H &&
           n0[1].op == WISP_GOP_MATMUL && n0[1].in == WISP_ACT_XN && n0[1].out == WISP_ACT_BIG && !n0[1].accumulate &&
           (!b || n[2].op == WISP_GOP_ATTENTION) &&
           (n[2].op == WISP_GOP_SHORTCONV || n[2].op == WISP_GOP_ATTENTION ||
            n[2].op == WISP_GOP_ATTENTION_GATED || n[2].op == WISP_GOP_DELTANET) &&
           n[3].op == WISP_GOP_MATMUL && n[3].in == WISP_ACT_MID && n[3].out == WISP_ACT_X && n[3].accumulate &&
           n[4].op == WISP_GOP_RMSNORM && n[4].in == WISP_ACT_X && n[4].out == WISP_ACT_XN &&
           n[5].op == WISP_GOP_MATMUL && n[5].in == WISP_ACT_XN && n[5].out == WISP_ACT_BIG && !n[5].accumulate &&
           n[5].rows == 2 * g->ffn && n[6].op == WISP_GOP_SWIGLU && n[6].cols == g->ffn &&
           n[7].op == WISP_GOP_MATMUL && n[7].in == WISP_ACT_MID && n[7].out == WISP_ACT_X && n[7].accumulate;
  /* the persistent phases rope with the one table, scale by 1/sqrt(D) and see every key */
  ok = ok && !n[2].window && !n[2].rope_local && g->attn_scale == 0;
  return ok ? &n[2] : NULL;
}

static void add_phase(wisp_decode_graph *d, int stage, int work, int layer) {
  d->phases[d->n_phases++] = (wisp_decode_phase){(uint8_t)stage, (uint8_t)work, (uint16_t)layer};
}

/* The phases of layer l's mixer: stage + work pairs, the last one adding
 * the mixer's output product into x. */
static void mixer_phases(wisp_decode_graph *d, int mixer, int l) {
  switch (mixer) {
    case WISP_MIX_SHORTCONV:
      add_phase(d, WISP_STAGE_NORM_OP, WISP_WORK_CONV_IN, l);
      add_phase(d, WISP_STAGE_MID, WISP_WORK_OUT, l);
      break;
    case WISP_MIX_ATTENTION:
      add_phase(d, WISP_STAGE_NORM_OP, WISP_WORK_QKV, l);
      add_phase(d, WISP_STAGE_NONE, WISP_WORK_ATTN, l);
      add_phase(d, WISP_STAGE_ATTN_MERGE, WISP_WORK_OUT, l);
      break;
    case WISP_MIX_ATTENTION_GATED:
      add_phase(d, WISP_STAGE_NORM_OP, WISP_WORK_IN, l);
      add_phase(d, WISP_STAGE_NONE, WISP_WORK_ATTN_GATED, l);
      add_phase(d, WISP_STAGE_ATTN_MERGE_GATE, WISP_WORK_OUT, l);
      break;
    default: /* WISP_MIX_DELTANET */
      add_phase(d, WISP_STAGE_NORM_OP, WISP_WORK_IN, l);
      add_phase(d, WISP_STAGE_NONE, WISP_WORK_DELTANET, l);
      add_phase(d, WISP_STAGE_GATED_NORM, WISP_WORK_OUT, l);
      break;
  }
}

static int mix_kind(wisp_gop op) {
  switch (op) {
    case WISP_GOP_SHORTCONV: return WISP_MIX_SHORTCONV;
    case WISP_GOP_ATTENTION: return WISP_MIX_ATTENTION;
    case WISP_GOP_ATTENTION_GATED: return WISP_MIX_ATTENTION_GATED;
    default: return WISP_MIX_DELTANET;
  }
}

wisp_status wisp_graph_lower_decode(const wisp_graph *g, const wisp_graph_state *s, wisp_decode_graph *out) {
  if (g->n_layers <= 0 || g->n_layers > WISP_GRAPH_MAX_LAYERS) return WISP_EUNSUPPORTED;
  wisp_decode_graph *d = out;
  memset(d, 0, sizeof *d);
  d->n_layers = g->n_layers, d->hidden = g->hidden, d->ffn = g->ffn, d->vocab = g->vocab;
  d->heads = g->heads, d->kv_heads = g->kv_heads, d->head_dim = g->head_dim, d->conv_len = g->conv_len;
  d->max_pos = wisp_graph_state_max_pos(s), d->rope_rows = g->rope_rows, d->rotary_dim = g->rotary_dim;
  d->lin_k_heads = g->lin_k_heads, d->lin_v_heads = g->lin_v_heads;
  d->lin_k_dim = g->lin_k_dim, d->lin_v_dim = g->lin_v_dim, d->eps = g->eps;
  d->embed = g->embed, d->head = g->head, d->final_norm = g->final_norm;
  d->rope_cos = g->rope_cos, d->rope_sin = g->rope_sin;
  int at = 0;
  for (int l = 0; l < g->n_layers; l++) {
    int len;
    const wisp_gnode *bias;
    const wisp_gnode *m = match_layer(g, at, l, &len, &bias);
    if (!m) return WISP_EUNSUPPORTED;
    const wisp_gnode *n = m - 2;
    wisp_graph_layer *G = &d->layers[l];
    G->mixer = mix_kind(m->op);
    G->attention = G->mixer == WISP_MIX_ATTENTION || G->mixer == WISP_MIX_ATTENTION_GATED;
    G->op_norm = g->nodes[at].w;
    G->in = g->nodes[at + 1].W;
    G->in_bias = bias ? bias->w : NULL;
    at += len;
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
    mixer_phases(d, G->mixer, l);
    add_phase(d, WISP_STAGE_NORM_FFN, WISP_WORK_FFN, l);
    add_phase(d, WISP_STAGE_H, WISP_WORK_DOWN, l);
  }
  if (at != g->n_nodes) return WISP_EUNSUPPORTED;
  add_phase(d, WISP_STAGE_NORM_FINAL, WISP_WORK_HEAD, g->n_layers - 1);
  d->phases[0].stage = WISP_STAGE_EMBED; /* the first layer's norm reads the embedding row */
  return WISP_OK;
}
