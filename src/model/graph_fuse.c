/* The fusion pass: which neighbouring nodes of a step graph may run as one
 * kernel. It looks only at the graph (ops, which buffer each reads and
 * writes), never at an architecture's name; the plan then says which of the
 * fusions found the backend applies (plan.c asks the backend's caps and the
 * profile's switches), a session's bound graph keeps only those
 * (plan_apply.c), the step graph calls the backend's fused op where they are
 * (graph_run.c) and `wisp plan` lists them all.
 *
 * A fusion needs the first node's output to be read by the second node only
 * (the intermediate never has to exist in memory): true of every pattern
 * below because each activation buffer is overwritten before it is read
 * again, which the pass checks by looking for the next reader. */
#include "format/quant.h"
#include "model/graph.h"

/* Does any node after i read `act` before a node writes it? (j: the one
 * reader allowed.) */
static int read_later(const wisp_graph *g, int i, int j, int act) {
  for (int k = i + 1; k < g->n_nodes; k++) {
    const wisp_gnode *n = &g->nodes[k];
    if (k != j && n->in == act) return 1;
    /* a residual product, add, bias or scale keeps what `act` holds */
    const int keeps = (n->op == WISP_GOP_MATMUL && n->accumulate) || n->op == WISP_GOP_ADD ||
                      n->op == WISP_GOP_ADD_BIAS || n->op == WISP_GOP_SCALE;
    if (n->out == act && !keeps) return 0;
  }
  return act == WISP_ACT_X; /* the residual stream is read by the head */
}

/* A product by a matrix in row parts of different types (format/tensor.h):
 * it runs as one product a part, each part's own kernel; the norm before
 * it may run inside its first part's product, no other op goes into it or
 * after it. */
static int parted(const wisp_gnode *n) { return n->op == WISP_GOP_MATMUL && n->W && wisp_matrix_mixed(n->W); }

void wisp_graph_fuse(wisp_graph *g) {
  for (int i = 0; i < g->n_nodes; i++) g->nodes[i].fused = 0;
  for (int i = 0; i < g->n_nodes; i++) {
    wisp_gnode *a = &g->nodes[i], *b = i + 1 < g->n_nodes ? &g->nodes[i + 1] : NULL;
    if (a->op == WISP_GOP_ATTENTION || a->op == WISP_GOP_ATTENTION_GATED)
      a->fused |= WISP_FUSE_QK_NORM_ROPE_KV; /* the attention op takes the raw qkv rows */
    if (!b) continue;
    if (a->op == WISP_GOP_RMSNORM && b->op == WISP_GOP_MATMUL && b->in == a->out && b->cols == a->cols &&
        !read_later(g, i, i + 1, a->out))
      a->fused |= WISP_FUSE_NORM_MATMUL;
    if (parted(a) || parted(b)) continue;
    if (a->op == WISP_GOP_MATMUL && a->accumulate && b->op == WISP_GOP_RMSNORM && b->in == a->out)
      a->fused |= WISP_FUSE_RESIDUAL_NORM;
    if (a->op == WISP_GOP_MATMUL && b->op == WISP_GOP_SWIGLU && b->in == a->out && a->rows == 2 * b->cols &&
        !read_later(g, i, i + 1, a->out))
      a->fused |= WISP_FUSE_GATE_UP_SWIGLU;
    if (a->op == WISP_GOP_SWIGLU && b->op == WISP_GOP_MATMUL && b->in == a->out && !read_later(g, i, i + 1, a->out))
      a->fused |= WISP_FUSE_SWIGLU_MATMUL;
    if (a->op == WISP_GOP_MATMUL && b->op == WISP_GOP_SHORTCONV && b->in == a->out && !read_later(g, i, i + 1, a->out))
      a->fused |= WISP_FUSE_CONV_MATMUL;
    if (a->op == WISP_GOP_MATMUL && b->op == WISP_GOP_DELTANET && b->in == a->out && a->rows == b->rows &&
        !read_later(g, i, i + 1, a->out))
      a->fused |= WISP_FUSE_MATMUL_DELTANET;
    /* a mixer's output read by the product after it alone: that product may
     * finish the mixer's work (merge its splits, gate, normalise) as it reads it */
    if ((a->op == WISP_GOP_ATTENTION || a->op == WISP_GOP_ATTENTION_GATED || a->op == WISP_GOP_DELTANET) &&
        b->op == WISP_GOP_MATMUL && b->in == a->out && b->cols == a->cols && !read_later(g, i, i + 1, a->out))
      a->fused |= WISP_FUSE_MIXER_MATMUL;
  }
  /* The last residual add feeds the final norm, the final norm only the
   * head product, and the head's greedy choice can be made inside that
   * product: the step always ends so. */
  g->fused = WISP_FUSE_NORM_MATMUL | WISP_FUSE_HEAD_ARGMAX;
  if (g->n_nodes && g->nodes[g->n_nodes - 1].op == WISP_GOP_MATMUL && g->nodes[g->n_nodes - 1].accumulate &&
      !parted(&g->nodes[g->n_nodes - 1]))
    g->nodes[g->n_nodes - 1].fused |= WISP_FUSE_RESIDUAL_NORM;
}

const char *wisp_fuse_name(unsigned bit) {
  switch (bit) {
    case WISP_FUSE_NORM_MATMUL: return "rmsnorm+matmul";
    case WISP_FUSE_RESIDUAL_NORM: return "residual+rmsnorm";
    case WISP_FUSE_GATE_UP_SWIGLU: return "gate_up+swiglu";
    case WISP_FUSE_SWIGLU_MATMUL: return "swiglu+matmul";
    case WISP_FUSE_QK_NORM_ROPE_KV: return "qk_norm+rope+kv_write";
    case WISP_FUSE_CONV_MATMUL: return "matmul+shortconv";
    case WISP_FUSE_HEAD_ARGMAX: return "head+argmax";
    case WISP_FUSE_MIXER_MATMUL: return "mixer+matmul";
    case WISP_FUSE_MATMUL_DELTANET: return "matmul+gated_deltanet";
    default: return "?";
  }
}
