/* Building a step graph (graph.h): nodes appended in execution order, the
 * activation buffers widened to fit every node that writes or reads them. */
#include <stdlib.h>
#include <string.h>

#include "model/graph.h"
#include "util/err.h"

void wisp_graph_init(wisp_graph *g) { memset(g, 0, sizeof *g); }

void wisp_graph_free(wisp_graph *g) {
  free(g->nodes);
  free(g->own_mats);
  free(g->own_parts);
  free(g->own_vecs);
  free(g->own_choices);
  wisp_graph_init(g);
}

const char *wisp_gop_name(wisp_gop op) {
  static const char *const names[WISP_GOP_COUNT] = {"rmsnorm", "matmul", "shortconv", "attention",
                                                    "attention_gated", "gated_deltanet", "swiglu", "geglu",
                                                    "add_bias", "add", "scale"};
  return op >= 0 && op < WISP_GOP_COUNT ? names[op] : "?";
}

static void widen(wisp_graph *g, int act, size_t floats) {
  if (act >= 0 && act < WISP_ACT_COUNT && g->act[act] < floats) g->act[act] = floats;
}

wisp_gnode *wisp_graph_add(wisp_graph *g, wisp_gop op, int layer, const char *section, int in, int out) {
  if (g->n_nodes == g->cap_nodes) {
    /* A small first size on purpose: every model's graph is reallocated
     * several times while it is described, so a node pointer kept past the
     * next append (graph.h) is a use after free that the sanitized suite
     * reports on any model, however small, rather than a wrong weight that
     * shows only where the allocator happened to move a large graph. */
    int cap = g->cap_nodes ? 2 * g->cap_nodes : 4;
    wisp_gnode *p = realloc(g->nodes, (size_t)cap * sizeof *p);
    if (!p) return NULL;
    g->nodes = p;
    g->cap_nodes = cap;
  }
  wisp_gnode *n = &g->nodes[g->n_nodes++];
  memset(n, 0, sizeof *n);
  n->op = op;
  n->layer = layer;
  n->in = in;
  n->out = out;
  size_t len = strlen(section);
  if (len >= sizeof n->section) len = sizeof n->section - 1;
  memcpy(n->section, section, len);
  n->section[len] = 0;
  if (layer + 1 > g->n_layers) g->n_layers = layer + 1;
  return n;
}

wisp_gnode *wisp_graph_matmul(wisp_graph *g, int layer, const char *section, wisp_matrix *W, int rows,
                              int cols, int in, int out, int accumulate) {
  wisp_gnode *n = wisp_graph_add(g, WISP_GOP_MATMUL, layer, section, in, out);
  if (!n) return NULL;
  n->W = W;
  n->rows = rows;
  n->cols = cols;
  n->accumulate = accumulate;
  widen(g, in, (size_t)cols);
  widen(g, out, (size_t)rows);
  return n;
}

wisp_gnode *wisp_graph_rmsnorm(wisp_graph *g, int layer, const char *section, const wisp_vector *w, int dim, int in,
                               int out) {
  wisp_gnode *n = wisp_graph_add(g, WISP_GOP_RMSNORM, layer, section, in, out);
  if (!n) return NULL;
  n->w = w;
  n->cols = dim;
  widen(g, in, (size_t)dim);
  widen(g, out, (size_t)dim);
  return n;
}

wisp_status wisp_graph_add_ffn(wisp_graph *g, int layer, const wisp_vector *norm, wisp_matrix *gate_up,
                               wisp_matrix *down) {
  const int H = g->hidden, F = g->ffn;
  wisp_gnode *sw;
  if (!wisp_graph_rmsnorm(g, layer, "mlp.gate_up.norm", norm, H, WISP_ACT_X, WISP_ACT_XN) ||
      !wisp_graph_matmul(g, layer, "mlp.gate_up", gate_up, 2 * F, H, WISP_ACT_XN, WISP_ACT_BIG, 0) ||
      !(sw = wisp_graph_add(g, WISP_GOP_SWIGLU, layer, "", WISP_ACT_BIG, WISP_ACT_MID)))
    return wisp_fail(WISP_ENOMEM, "out of memory for the step graph");
  sw->cols = F; /* before the next append moves the nodes */
  widen(g, WISP_ACT_MID, (size_t)F);
  if (!wisp_graph_matmul(g, layer, "mlp.down", down, H, F, WISP_ACT_MID, WISP_ACT_X, 1))
    return wisp_fail(WISP_ENOMEM, "out of memory for the step graph");
  return WISP_OK;
}

wisp_gnode *wisp_graph_mixer(wisp_graph *g, wisp_gop op, int layer, const char *section, int in_width,
                             int out_width) {
  wisp_gnode *n = wisp_graph_add(g, op, layer, section, WISP_ACT_BIG, WISP_ACT_MID);
  if (!n) return NULL;
  n->rows = in_width;
  n->cols = out_width;
  widen(g, WISP_ACT_BIG, (size_t)in_width);
  widen(g, WISP_ACT_MID, (size_t)out_width);
  return n;
}

wisp_gnode *wisp_graph_rowop(wisp_graph *g, wisp_gop op, int layer, const char *section, int cols, int in, int out) {
  wisp_gnode *n = wisp_graph_add(g, op, layer, section, in, out);
  if (!n) return NULL;
  n->cols = cols;
  widen(g, in, (size_t)cols);
  widen(g, out, (size_t)cols);
  return n;
}

const wisp_gnode *wisp_graph_find(const wisp_graph *g, int layer, const char *section, int *index) {
  for (int i = 0; i < g->n_nodes; i++)
    if (g->nodes[i].layer == layer && !strcmp(g->nodes[i].section, section)) {
      if (index) *index = i;
      return &g->nodes[i];
    }
  return NULL;
}

wisp_matrix *wisp_graph_matrix(const wisp_graph *g, int layer, const char *section) {
  if (layer < 0) return !strcmp(section, "head") ? g->head : !strcmp(section, "embed") ? g->embed : NULL;
  const wisp_gnode *n = wisp_graph_find(g, layer, section, NULL);
  return n && n->op == WISP_GOP_MATMUL ? n->W : NULL;
}
