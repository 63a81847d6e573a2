/* The persistent decode's layer table and phase list, derived from the
 * step graph.
 *
 * The persistent kernel (src/backend/webgpu/kernels/persist.wgsl) runs
 * every step of a decode batch in one dispatch by walking a list of
 * generic phases (backend.h, wisp_decode_phase: a staged input, then one
 * piece of work over the whole grid, then a grid barrier). This file checks
 * that each layer's nodes are a layer of two blocks the phases run (a
 * norm, the in-product (+ its bias), a mixer, the out-product; a norm, the
 * gate/up product, SwiGLU or GeGLU, the down product; each block's output
 * added to x as it is, or normed first: a post norm), with an optional
 * scale of the embedding row ahead of the first layer (any other graph
 * runs op by op); writes the table of what each layer reads (its weights,
 * vectors and state buffers) and the phases of a step: per layer those of
 * its own mixer, so a graph may mix short conv, attention, gated attention
 * and Gated DeltaNet layers. Which phases and shapes a backend runs is the
 * backend's to check. */
#include <stdlib.h>
#include <string.h>

#include "model/graph.h"

/* A walk over layer l's nodes. */
typedef struct {
  const wisp_graph *g;
  int at, layer;
} cursor;

/* The next node when it is op from activation `in` to `out` in the layer
 * (taken), else NULL. */
static const wisp_gnode *take(cursor *c, wisp_gop op, int in, int out) {
  if (c->at >= c->g->n_nodes) return NULL;
  const wisp_gnode *n = &c->g->nodes[c->at];
  if (n->layer != c->layer || n->op != op || n->in != in || n->out != out) return NULL;
  c->at++;
  return n;
}

/* A block's output product from MID and how it reaches x: added by the
 * product (*post NULL), or stored to XN, normed into MID and added (*post:
 * the norm's weight). Returns the product's node, or NULL. */
static const wisp_gnode *take_output(cursor *c, const wisp_vector **post) {
  const int H = c->g->hidden;
  *post = NULL;
  const wisp_gnode *m = take(c, WISP_GOP_MATMUL, WISP_ACT_MID, WISP_ACT_X);
  if (m) return m->accumulate ? m : NULL;
  if (!(m = take(c, WISP_GOP_MATMUL, WISP_ACT_MID, WISP_ACT_XN)) || m->accumulate) return NULL;
  const wisp_gnode *nm = take(c, WISP_GOP_RMSNORM, WISP_ACT_XN, WISP_ACT_MID);
  const wisp_gnode *add = nm ? take(c, WISP_GOP_ADD, WISP_ACT_MID, WISP_ACT_X) : NULL;
  if (!add || nm->cols != H || add->cols != H || m->rows != H || !nm->w) return NULL;
  *post = nm->w;
  return m;
}

/* Layer l's nodes from node *at into G (its weights and mixer); 0 when
 * they are not a layer the phases run. *gelu: the FFN gates with GELU. */
static int match_layer(const wisp_graph *g, int *at, int l, wisp_graph_layer *G, const wisp_gnode **mixer, int *gelu) {
  const int H = g->hidden;
  cursor c = {g, *at, l};
  const wisp_gnode *norm = take(&c, WISP_GOP_RMSNORM, WISP_ACT_X, WISP_ACT_XN);
  const wisp_gnode *in = norm ? take(&c, WISP_GOP_MATMUL, WISP_ACT_XN, WISP_ACT_BIG) : NULL;
  if (!in || norm->cols != H || in->accumulate) return 0;
  const wisp_gnode *bias = take(&c, WISP_GOP_ADD_BIAS, WISP_ACT_BIG, WISP_ACT_BIG);
  if (bias && bias->cols != in->rows) return 0;
  if (c.at >= g->n_nodes || g->nodes[c.at].layer != l) return 0;
  const wisp_gnode *m = &g->nodes[c.at++];
  if (m->op != WISP_GOP_SHORTCONV && m->op != WISP_GOP_ATTENTION && m->op != WISP_GOP_ATTENTION_GATED &&
      m->op != WISP_GOP_DELTANET)
    return 0;
  /* the bias rides on plain attention's q/k/v phase; a window and a second
   * rope are plain attention's only (what the op-by-op decode reads) */
  if ((bias && m->op != WISP_GOP_ATTENTION) || ((m->window || m->rope_local) && m->op != WISP_GOP_ATTENTION) ||
      (m->rope_local && !g->rope_cos_local) || m->window < 0)
    return 0;
  const wisp_gnode *out = take_output(&c, &G->mixer_post);
  const wisp_gnode *fnorm = out ? take(&c, WISP_GOP_RMSNORM, WISP_ACT_X, WISP_ACT_XN) : NULL;
  const wisp_gnode *gu = fnorm ? take(&c, WISP_GOP_MATMUL, WISP_ACT_XN, WISP_ACT_BIG) : NULL;
  if (!gu || gu->accumulate || gu->rows != 2 * g->ffn) return 0;
  const wisp_gnode *act = take(&c, WISP_GOP_SWIGLU, WISP_ACT_BIG, WISP_ACT_MID);
  *gelu = !act;
  if (!act && !(act = take(&c, WISP_GOP_GEGLU, WISP_ACT_BIG, WISP_ACT_MID))) return 0;
  const wisp_gnode *down = act->cols == g->ffn ? take_output(&c, &G->ffn_post) : NULL;
  if (!down) return 0;
  G->op_norm = norm->w;
  G->in = in->W;
  G->in_bias = bias ? bias->w : NULL;
  G->out = out->W;
  G->ffn_norm = fnorm->w;
  G->gate_up = gu->W;
  G->down = down->W;
  *mixer = m;
  *at = c.at;
  return 1;
}

static void add_phase(wisp_decode_graph *d, int stage, int work, int layer, int flags) {
  d->phases[d->n_phases++] = (wisp_decode_phase){(uint8_t)stage, (uint8_t)work, (uint16_t)layer, (uint8_t)flags};
}

/* The phases of layer l's mixer: stage + work pairs, the last one adding
 * the mixer's output product into x (with out_flags). */
static void mixer_phases(wisp_decode_graph *d, int mixer, int l, int out_flags) {
  switch (mixer) {
    case WISP_MIX_SHORTCONV:
      add_phase(d, WISP_STAGE_NORM_OP, WISP_WORK_CONV_IN, l, 0);
      add_phase(d, WISP_STAGE_MID, WISP_WORK_OUT, l, out_flags);
      break;
    case WISP_MIX_ATTENTION:
      add_phase(d, WISP_STAGE_NORM_OP, WISP_WORK_QKV, l, 0);
      add_phase(d, WISP_STAGE_NONE, WISP_WORK_ATTN, l, 0);
      add_phase(d, WISP_STAGE_ATTN_MERGE, WISP_WORK_OUT, l, out_flags);
      break;
    case WISP_MIX_ATTENTION_GATED:
      add_phase(d, WISP_STAGE_NORM_OP, WISP_WORK_IN, l, 0);
      add_phase(d, WISP_STAGE_NONE, WISP_WORK_ATTN_GATED, l, 0);
      add_phase(d, WISP_STAGE_ATTN_MERGE_GATE, WISP_WORK_OUT, l, out_flags);
      break;
    default: /* WISP_MIX_DELTANET */
      add_phase(d, WISP_STAGE_NORM_OP, WISP_WORK_IN, l, 0);
      add_phase(d, WISP_STAGE_NONE, WISP_WORK_DELTANET, l, 0);
      add_phase(d, WISP_STAGE_GATED_NORM, WISP_WORK_OUT, l, out_flags);
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
  if (g->n_layers <= 0 || g->n_layers > WISP_GRAPH_MAX_LAYERS || g->n_nodes < 1) return WISP_EUNSUPPORTED;
  wisp_decode_graph *d = out;
  memset(d, 0, sizeof *d);
  d->n_layers = g->n_layers, d->hidden = g->hidden, d->ffn = g->ffn, d->vocab = g->vocab;
  d->heads = g->heads, d->kv_heads = g->kv_heads, d->head_dim = g->head_dim, d->conv_len = g->conv_len;
  d->max_pos = s ? wisp_graph_state_max_pos(s) : 0, d->rope_rows = g->rope_rows, d->rotary_dim = g->rotary_dim;
  d->rope_pairs = g->rope_pairs;
  d->lin_k_heads = g->lin_k_heads, d->lin_v_heads = g->lin_v_heads;
  d->lin_k_dim = g->lin_k_dim, d->lin_v_dim = g->lin_v_dim, d->eps = g->eps;
  d->embed = g->embed, d->head = g->head, d->final_norm = g->final_norm;
  d->rope_cos = g->rope_cos, d->rope_sin = g->rope_sin;
  d->rope_cos_local = g->rope_cos_local, d->rope_sin_local = g->rope_sin_local;
  d->attn_scale = g->attn_scale;
  int at = 0;
  /* x scaled ahead of the first layer's norm: the embedding row's scale */
  const wisp_gnode *n0 = &g->nodes[0];
  if (n0->op == WISP_GOP_SCALE && n0->in == WISP_ACT_X && n0->out == WISP_ACT_X && n0->cols == g->hidden) {
    d->embed_scale = n0->scale;
    at = 1;
  }
  for (int l = 0; l < g->n_layers; l++) {
    wisp_graph_layer *G = &d->layers[l];
    const wisp_gnode *m;
    int gelu;
    if (!match_layer(g, &at, l, G, &m, &gelu)) return WISP_EUNSUPPORTED;
    G->mixer = mix_kind(m->op);
    G->attention = G->mixer == WISP_MIX_ATTENTION || G->mixer == WISP_MIX_ATTENTION_GATED;
    G->state = s ? wisp_graph_state_mix(s, l, 0) : NULL;
    if (G->attention) {
      G->q_norm = m->q_norm;
      G->k_norm = m->k_norm;
      G->window = m->window;
      G->rope_local = m->rope_local;
      G->v_cache = s ? wisp_graph_state_mix(s, l, 1) : NULL;
    } else {
      G->taps = m->w;
      G->a_log = m->a_log;
      G->dt_bias = m->dt_bias;
      G->gnorm = m->gnorm;
      G->rec_state = s ? wisp_graph_state_mix(s, l, 1) : NULL;
    }
    mixer_phases(d, G->mixer, l, G->mixer_post ? WISP_PHASE_FLAG_POST_NORM : 0);
    add_phase(d, WISP_STAGE_NORM_FFN, WISP_WORK_FFN, l, gelu ? WISP_PHASE_FLAG_GELU : 0);
    add_phase(d, WISP_STAGE_H, WISP_WORK_DOWN, l, G->ffn_post ? WISP_PHASE_FLAG_POST_NORM : 0);
  }
  if (at != g->n_nodes) return WISP_EUNSUPPORTED;
  add_phase(d, WISP_STAGE_NORM_FINAL, WISP_WORK_HEAD, g->n_layers - 1, 0);
  d->phases[0].stage = WISP_STAGE_EMBED; /* the first layer's norm reads the embedding row */
  return WISP_OK;
}

int wisp_graph_lowers_to_phases(const wisp_graph *g) {
  wisp_decode_graph *d = malloc(sizeof *d); /* ~20 KB: not on the stack */
  const int ok = d && wisp_graph_lower_decode(g, NULL, d) == WISP_OK;
  free(d);
  return ok;
}
