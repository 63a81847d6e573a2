/* Running a step graph (graph.h) on a backend: prefill, the op-by-op
 * decode step and the batched step of several sequences all walk the same
 * nodes; only where rows come from and whose state a mixer uses differ. */
#include <stdlib.h>

#include "format/quant.h"
#include "model/common.h"
#include "model/graph.h"
#include "util/err.h"

static wisp_status prepare_vec(wisp_backend *be, const wisp_vector *v) {
  /* g is a session's bound graph (graph_bind.c): v is the session's own
   * view, where the backend keeps its device copy (v->device). */
  return v && v->n ? be->prepare_vector(be, (wisp_vector *)v) : WISP_OK;
}

wisp_status wisp_graph_prepare(wisp_graph *g, wisp_backend *be) {
  wisp_status st;
  for (int i = 0; i < g->n_nodes; i++) {
    wisp_gnode *n = &g->nodes[i];
    /* attention_gated and gated_deltanet are the backend's optional ops */
    if ((n->op == WISP_GOP_ATTENTION_GATED && !be->attention_gated) || (n->op == WISP_GOP_DELTANET && !be->gated_deltanet) ||
        (n->op == WISP_GOP_GEGLU && !be->geglu) || (n->op == WISP_GOP_ADD_BIAS && !be->add_bias) ||
        (n->op == WISP_GOP_ADD && !be->add) || (n->op == WISP_GOP_SCALE && !be->scale))
      return wisp_fail(WISP_EUNSUPPORTED, "backend '%s' lacks op '%s', which this model's graph needs", be->name,
                       wisp_gop_name(n->op));
    if (n->op == WISP_GOP_MATMUL && (st = be->prepare_matrix(be, n->W))) return st;
    const wisp_vector *vs[] = {n->w, n->q_norm, n->k_norm, n->a_log, n->dt_bias, n->gnorm};
    for (size_t k = 0; k < sizeof vs / sizeof vs[0]; k++)
      if ((st = prepare_vec(be, vs[k]))) return st;
  }
  wisp_matrix *embed = g->embed, *head = g->head;
  if ((st = be->prepare_matrix(be, embed))) return st;
  if (wisp_matrix_host(head) != wisp_matrix_host(embed) || head->type != embed->type) { /* (in parts: its first part's bytes) */
    if ((st = be->prepare_matrix(be, head))) return st;
  } else if (embed->device) { /* a tied head shares the embedding's device copy */
    head->device = embed->device;
  } else if ((st = be->prepare_matrix(be, head))) {
    /* a backend that keeps no device copy (the CPU) still checks the head's
     * own kernel choice and makes what it reads (an integer product's copy,
     * cpu_backend.c) now, so that a lack of memory stops the session start */
    return st;
  }
  if ((st = prepare_vec(be, g->final_norm)) || (st = prepare_vec(be, g->rope_cos)) ||
      (st = prepare_vec(be, g->rope_sin)) || (st = prepare_vec(be, g->rope_cos_local)) ||
      (st = prepare_vec(be, g->rope_sin_local)))
    return st;
  return WISP_OK;
}

/* The arguments of one mixer node for n tokens of one sequence (state q)
 * at pos0: it reads the in-product's rows from `in` and writes its output
 * rows to `out`. */
typedef struct {
  wisp_attention_args attention;
  wisp_gated_attention_args gated;
  wisp_deltanet_args deltanet;
} mixer_args;

static void mixer_args_of(const wisp_graph *g, const wisp_gnode *n, const wisp_graph_state *q, const wisp_buf *in,
                          int tokens, int pos0, wisp_buf *out, mixer_args *m) {
  wisp_buf *m0 = wisp_graph_state_mix(q, n->layer, 0), *m1 = wisp_graph_state_mix(q, n->layer, 1);
  if (n->op == WISP_GOP_ATTENTION)
    m->attention = (wisp_attention_args){.qkv = in, .n = tokens, .pos0 = pos0, .heads = g->heads,
                                         .kv_heads = g->kv_heads, .head_dim = g->head_dim, .q_norm = n->q_norm,
                                         .k_norm = n->k_norm, .eps = g->eps,
                                         .rope_cos = n->rope_local ? g->rope_cos_local : g->rope_cos,
                                         .rope_sin = n->rope_local ? g->rope_sin_local : g->rope_sin,
                                         .k_cache = m0, .v_cache = m1, .out = out, .scale = g->attn_scale,
                                         .window = n->window, .rope_pairs = g->rope_pairs};
  else if (n->op == WISP_GOP_ATTENTION_GATED)
    m->gated = (wisp_gated_attention_args){.qkv = in, .n = tokens, .pos0 = pos0, .heads = g->heads,
                                           .kv_heads = g->kv_heads, .head_dim = g->head_dim,
                                           .rotary_dim = g->rotary_dim, .q_norm = n->q_norm, .k_norm = n->k_norm,
                                           .eps = g->eps, .rope_cos = g->rope_cos, .rope_sin = g->rope_sin,
                                           .k_cache = m0, .v_cache = m1, .out = out, .choice = n->choice,
                                           .rope_pairs = g->rope_pairs};
  else if (n->op == WISP_GOP_DELTANET)
    m->deltanet = (wisp_deltanet_args){.proj = in, .n = tokens, .pos0 = pos0, .k_heads = g->lin_k_heads,
                                       .v_heads = g->lin_v_heads, .k_dim = g->lin_k_dim, .v_dim = g->lin_v_dim,
                                       .conv_len = g->conv_len, .conv_taps = n->w, .a_log = n->a_log,
                                       .dt_bias = n->dt_bias, .norm = n->gnorm, .eps = g->eps, .conv_state = m0,
                                       .state = m1, .out = out};
}

/* One mixer node for n tokens of one sequence (state q) at pos0. */
static void run_mixer(const wisp_graph *g, const wisp_gnode *n, const wisp_graph_state *q, wisp_backend *be,
                      const wisp_buf *in, int tokens, int pos0, wisp_buf *out) {
  mixer_args m;
  mixer_args_of(g, n, q, in, tokens, pos0, out, &m);
  if (n->op == WISP_GOP_SHORTCONV)
    be->shortconv(be, in, n->w, g->conv_len, tokens, g->hidden, wisp_graph_state_mix(q, n->layer, 0), out);
  else if (n->op == WISP_GOP_ATTENTION)
    be->attention(be, &m.attention);
  else if (n->op == WISP_GOP_ATTENTION_GATED)
    be->attention_gated(be, &m.gated);
  else if (n->op == WISP_GOP_DELTANET)
    be->gated_deltanet(be, &m.deltanet);
}

/* The fused group the session's graph marks at node i, for one token of
 * one sequence (state s, position pos): an op fused into the product after
 * it (rmsnorm, SwiGLU, a mixer's last step), the product, and an op fused
 * into it after (SwiGLU, short conv, Gated DeltaNet), as one matmul_fused
 * call. Returns the last node it ran, or -1 when no group starts at i. */
static int run_fused(const wisp_graph *g, wisp_graph_state *s, wisp_backend *be, int i, int pos) {
  const wisp_gnode *a = &g->nodes[i];
  wisp_fused_matmul f = {0};
  mixer_args pre, post;
  int p = i; /* the product's node */
  if (a->op != WISP_GOP_MATMUL) {
    if (i + 1 >= g->n_nodes || g->nodes[i + 1].op != WISP_GOP_MATMUL) return -1;
    f.pre_in = wisp_graph_state_act(s, a->in);
    f.pre_dim = a->cols;
    if (a->op == WISP_GOP_RMSNORM && (a->fused & WISP_FUSE_NORM_MATMUL)) {
      f.pre = WISP_PRE_RMSNORM;
      f.norm = a->w;
      f.eps = g->eps;
    } else if (a->op == WISP_GOP_SWIGLU && (a->fused & WISP_FUSE_SWIGLU_MATMUL)) {
      f.pre = WISP_PRE_SWIGLU;
    } else if (a->fused & WISP_FUSE_MIXER_MATMUL) {
      mixer_args_of(g, a, s, f.pre_in, 1, pos, wisp_graph_state_act(s, a->out), &pre);
      f.pre = a->op == WISP_GOP_ATTENTION         ? WISP_PRE_ATTENTION
              : a->op == WISP_GOP_ATTENTION_GATED ? WISP_PRE_ATTENTION_GATED
                                                  : WISP_PRE_DELTANET;
      f.attention = &pre.attention;
      f.attention_gated = &pre.gated;
      f.deltanet_pre = &pre.deltanet;
    } else {
      return -1;
    }
    p = i + 1;
  }
  const wisp_gnode *m = &g->nodes[p], *b = p + 1 < g->n_nodes ? &g->nodes[p + 1] : NULL;
  f.W = m->W;
  f.x = wisp_graph_state_act(s, m->in);
  f.y = wisp_graph_state_act(s, m->out);
  f.accumulate = m->accumulate;
  if (b) {
    f.post_out = wisp_graph_state_act(s, b->out);
    if (b->op == WISP_GOP_SWIGLU && (m->fused & WISP_FUSE_GATE_UP_SWIGLU)) {
      f.post = WISP_POST_SWIGLU;
      f.post_dim = b->cols;
    } else if (b->op == WISP_GOP_SHORTCONV && (m->fused & WISP_FUSE_CONV_MATMUL)) {
      f.post = WISP_POST_SHORTCONV;
      f.post_dim = g->hidden;
      f.taps = b->w;
      f.conv_len = g->conv_len;
      f.conv_state = wisp_graph_state_mix(s, b->layer, 0);
    } else if (b->op == WISP_GOP_DELTANET && (m->fused & WISP_FUSE_MATMUL_DELTANET)) {
      f.post = WISP_POST_DELTANET;
      mixer_args_of(g, b, s, f.y, 1, pos, f.post_out, &post);
      f.deltanet_post = &post.deltanet;
    }
  }
  if (f.pre == WISP_PRE_NONE && f.post == WISP_POST_NONE) return -1;
  const int post_ran = be->matmul_fused(be, &f);
  return f.post != WISP_POST_NONE && post_ran ? p + 1 : p;
}

/* One mixer node over the rows of a batched step (the backend's rows op:
 * each row on its own sequence's state at its own position, all rows at
 * once); 0 when the backend has no rows op for it or cannot take these
 * rows (nothing recorded). */
static int run_mixer_rows(const wisp_graph *g, const wisp_gnode *n, wisp_backend *be, const wisp_buf *in,
                          wisp_buf *out, const wisp_model_rows *rows) {
  wisp_buf *s0[WISP_MAX_ROWS], *s1[WISP_MAX_ROWS];
  for (int r = 0; r < rows->n; r++) {
    s0[r] = wisp_graph_state_mix(rows->states[r], n->layer, 0);
    s1[r] = wisp_graph_state_mix(rows->states[r], n->layer, 1);
  }
  const wisp_mixer_rows mr = {rows->n, rows->pos, s0, s1};
  if (n->op == WISP_GOP_SHORTCONV)
    return be->shortconv_rows && be->shortconv_rows(be, in, n->w, g->conv_len, g->hidden, &mr, out);
  if (n->op == WISP_GOP_ATTENTION) {
    wisp_attention_args a = {.qkv = in, .n = rows->n, .heads = g->heads, .kv_heads = g->kv_heads,
                             .head_dim = g->head_dim, .q_norm = n->q_norm, .k_norm = n->k_norm, .eps = g->eps,
                             .rope_cos = n->rope_local ? g->rope_cos_local : g->rope_cos,
                             .rope_sin = n->rope_local ? g->rope_sin_local : g->rope_sin, .out = out,
                             .scale = g->attn_scale, .window = n->window, .rope_pairs = g->rope_pairs};
    return be->attention_rows && be->attention_rows(be, &a, &mr);
  }
  if (n->op == WISP_GOP_ATTENTION_GATED) {
    wisp_gated_attention_args a = {.qkv = in, .n = rows->n, .heads = g->heads, .kv_heads = g->kv_heads,
                                   .head_dim = g->head_dim, .rotary_dim = g->rotary_dim, .q_norm = n->q_norm,
                                   .k_norm = n->k_norm, .eps = g->eps, .rope_cos = g->rope_cos,
                                   .rope_sin = g->rope_sin, .out = out, .choice = n->choice,
                                   .rope_pairs = g->rope_pairs};
    return be->attention_gated_rows && be->attention_gated_rows(be, &a, &mr);
  }
  if (n->op == WISP_GOP_DELTANET) {
    wisp_deltanet_args d = {.proj = in, .n = rows->n, .k_heads = g->lin_k_heads, .v_heads = g->lin_v_heads,
                            .k_dim = g->lin_k_dim, .v_dim = g->lin_v_dim, .conv_len = g->conv_len,
                            .conv_taps = n->w, .a_log = n->a_log, .dt_bias = n->dt_bias, .norm = n->gnorm,
                            .eps = g->eps, .out = out};
    return be->gated_deltanet_rows && be->gated_deltanet_rows(be, &d, &mr);
  }
  return 0;
}

/* The nodes of one forward call, recorded on the backend: n tokens at
 * positions pos0.. whose embeddings are in X. With rows (a batched decode
 * step), row r is another sequence's token: the products run over all n
 * rows at once (matmul_rows), and each mixer over all rows through the
 * backend's rows op, every row on its own sequence state (rows->states[r],
 * at rows->pos[r]). Where the backend has no rows op for a mixer, it runs
 * row by row: the row moved into that state's own activation buffers, the
 * one-token op there, its output moved back. */
static void run_nodes(const wisp_graph *g, wisp_graph_state *s, wisp_backend *be, int n, int pos0,
                      const wisp_model_rows *rows, const wisp_graph_segments *segs) {
  /* One token of one sequence: the fused groups the session's graph marks
   * (graph_fuse.c, kept by the plan) run as the backend's fused ops. */
  const int fused = !rows && !segs && n == 1 && be->matmul_fused;
  for (int i = 0; i < g->n_nodes; i++) {
    const wisp_gnode *nd = &g->nodes[i];
    wisp_buf *in = wisp_graph_state_act(s, nd->in), *out = wisp_graph_state_act(s, nd->out);
    const int last = fused ? run_fused(g, s, be, i, pos0) : -1;
    if (last >= 0) {
      i = last;
      continue;
    }
    switch (nd->op) {
      case WISP_GOP_RMSNORM:
        /* the pass marked this norm and the product reading it as one op
         * (graph_fuse.c); a backend with that op runs them together */
        if ((nd->fused & WISP_FUSE_NORM_MATMUL) && !rows && be->rmsnorm_matmul) {
          const wisp_gnode *mm = &g->nodes[++i];
          be->rmsnorm_matmul(be, in, nd->w, g->eps, n, out, mm->W, wisp_graph_state_act(s, mm->out), mm->accumulate);
          break;
        }
        be->rmsnorm(be, in, nd->w, g->eps, n, nd->cols, out);
        break;
      case WISP_GOP_MATMUL: wisp_model_matmul(be, nd->W, in, n, out, nd->accumulate, rows); break;
      case WISP_GOP_SWIGLU: be->swiglu(be, in, n, nd->cols, out); break;
      case WISP_GOP_GEGLU: be->geglu(be, in, n, nd->cols, out); break;
      case WISP_GOP_ADD_BIAS: be->add_bias(be, out, nd->w, n); break;
      case WISP_GOP_ADD: be->add(be, out, in, (size_t)n * nd->cols); break;
      case WISP_GOP_SCALE: be->scale(be, out, (size_t)n * nd->cols, nd->scale); break;
      default:
        if (segs) { /* each segment's rows through its own sequence's mixer */
          size_t off = 0;
          for (int k = 0; k < segs->n; k++) {
            const wisp_graph_state *q = segs->states[k];
            const size_t len = (size_t)segs->len[k];
            wisp_buf *qin = wisp_graph_state_act(q, nd->in), *qout = wisp_graph_state_act(q, nd->out);
            be->buf_copy_at(be, qin, 0, in, off * (size_t)nd->rows, len * (size_t)nd->rows);
            run_mixer(g, nd, q, be, qin, (int)len, segs->pos0[k], qout);
            be->buf_copy_at(be, out, off * (size_t)nd->cols, qout, 0, len * (size_t)nd->cols);
            off += len;
          }
          break;
        }
        if (!rows) {
          run_mixer(g, nd, s, be, in, n, pos0, out);
          break;
        }
        if (run_mixer_rows(g, nd, be, in, out, rows)) break;
        for (int r = 0; r < n; r++) {
          const wisp_graph_state *q = rows->states[r];
          wisp_buf *qin = wisp_graph_state_act(q, nd->in), *qout = wisp_graph_state_act(q, nd->out);
          be->buf_copy_at(be, qin, 0, in, (size_t)r * nd->rows, (size_t)nd->rows);
          run_mixer(g, nd, q, be, qin, 1, rows->pos[r], qout);
          be->buf_copy_at(be, out, (size_t)r * nd->cols, qout, 0, (size_t)nd->cols);
        }
        break;
    }
  }
}

static wisp_model_head head_of(const wisp_graph *g, const wisp_graph_state *s) {
  return (wisp_model_head){g->final_norm, g->eps, g->head, g->hidden, g->vocab, wisp_graph_state_act(s, WISP_ACT_XN),
                           wisp_graph_state_logits(s), g->fused};
}

wisp_status wisp_graph_forward(const wisp_graph *g, wisp_graph_state *s, wisp_backend *be, const int32_t *tokens,
                               int n, int pos0, float *logits, int all) {
  wisp_status st = wisp_model_check_forward(tokens, n, pos0, wisp_graph_state_chunk(s), wisp_graph_state_max_pos(s),
                                            g->vocab);
  if (st || (st = wisp_graph_state_reserve(s, be, pos0 + n))) return st;
  wisp_buf *x = wisp_graph_state_act(s, WISP_ACT_X);
  be->embed(be, g->embed, tokens, n, x);
  run_nodes(g, s, be, n, pos0, NULL, NULL);
  wisp_model_head h = head_of(g, s);
  return wisp_model_head_logits(be, &h, x, n, logits, all);
}

wisp_status wisp_graph_decode_step(const wisp_graph *g, wisp_graph_state *s, wisp_backend *be, wisp_buf *ids,
                                   int slot, int pos, const wisp_sampling *sampling, uint32_t step) {
  wisp_status st = wisp_model_check_forward(NULL, 1, pos, wisp_graph_state_chunk(s), wisp_graph_state_max_pos(s),
                                            g->vocab);
  if (st || (st = wisp_graph_state_reserve(s, be, pos + 1))) return st;
  wisp_buf *x = wisp_graph_state_act(s, WISP_ACT_X);
  be->embed_id(be, g->embed, ids, slot, x);
  run_nodes(g, s, be, 1, pos, NULL, NULL);
  wisp_model_head h = head_of(g, s);
  wisp_model_head_sample(be, &h, x, sampling, step, ids, slot + 1, pos);
  return WISP_OK;
}

wisp_status wisp_graph_step_rows(const wisp_graph *g, wisp_graph_state *scratch, wisp_backend *be,
                                 const int32_t *tokens, const wisp_model_rows *rows, const wisp_sampling *sampling,
                                 wisp_buf *logits, wisp_buf *ids) {
  int max_pos[WISP_MAX_ROWS];
  if (rows->n > WISP_MAX_ROWS) return wisp_fail(WISP_EINVAL, "step: %d sequences, at most %d", rows->n, WISP_MAX_ROWS);
  for (int r = 0; r < rows->n; r++) max_pos[r] = wisp_graph_state_max_pos(rows->states[r]);
  wisp_status st = wisp_model_check_rows(tokens, rows, wisp_graph_state_chunk(scratch), max_pos, g->vocab);
  for (int r = 0; !st && r < rows->n; r++) st = wisp_graph_state_reserve(rows->states[r], be, rows->pos[r] + 1);
  if (st) return st;
  wisp_buf *x = wisp_graph_state_act(scratch, WISP_ACT_X);
  be->embed(be, g->embed, tokens, rows->n, x);
  run_nodes(g, scratch, be, rows->n, 0, rows, NULL);
  wisp_model_head h = head_of(g, scratch);
  wisp_model_head_sample_rows(be, &h, x, rows, logits, sampling, ids);
  return WISP_OK;
}

wisp_status wisp_graph_forward_segments(const wisp_graph *g, wisp_graph_state *scratch, wisp_backend *be,
                                        const int32_t *tokens, const wisp_graph_segments *segs) {
  if (!be->buf_copy_at) return wisp_fail(WISP_EUNSUPPORTED, "backend '%s' cannot prefill several sequences at once", be->name);
  int total = 0;
  wisp_status st = WISP_OK;
  for (int k = 0; !st && k < segs->n; k++) {
    wisp_graph_state *q = segs->states[k];
    st = wisp_model_check_forward(tokens + total, segs->len[k], segs->pos0[k], wisp_graph_state_chunk(q),
                                  wisp_graph_state_max_pos(q), g->vocab);
    if (!st) st = wisp_graph_state_reserve(q, be, segs->pos0[k] + segs->len[k]);
    total += segs->len[k];
  }
  if (st) return st;
  if (total < 1 || total > wisp_graph_state_chunk(scratch))
    return wisp_fail(WISP_EINVAL, "prefill: %d tokens in all, the scratch holds %d", total, wisp_graph_state_chunk(scratch));
  wisp_buf *x = wisp_graph_state_act(scratch, WISP_ACT_X);
  be->embed(be, g->embed, tokens, total, x);
  run_nodes(g, scratch, be, total, 0, NULL, segs);
  return WISP_OK;
}
