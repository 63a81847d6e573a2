/* A session's own copy of a model's step graph (graph.h, wisp_graph_bind).
 *
 * The model is read-only once open: several sessions, each with its own
 * plan and backend, run over one model at once (a server). What a session
 * decides about a weight (the plan's kernel choice per phase, the backend's
 * device copy) therefore cannot live in the model's wisp_matrix. A session
 * binds the model's graph instead: the copy has the same nodes, but each
 * matrix and vector the nodes name is a copy of the model's view (the same
 * weight bytes) that belongs to the session, as does each mixer's kernel
 * choice. The plan writes its choices into the copies (engine/plan_apply.c),
 * the backend its device handles (prepare_*), and the model's own views are
 * never written. */
#include <stdlib.h>
#include <string.h>

#include "model/graph.h"
#include "util/err.h"

/* The distinct pointers of a kind in the graph, and their copies. */
typedef struct {
  const void **from;
  int n, cap;
} ptr_set;

static int set_add(ptr_set *s, const void *p) {
  if (!p) return 0;
  for (int i = 0; i < s->n; i++)
    if (s->from[i] == p) return 0;
  if (s->n == s->cap) {
    int cap = s->cap ? 2 * s->cap : 64;
    const void **f = realloc(s->from, (size_t)cap * sizeof *f);
    if (!f) return -1;
    s->from = f;
    s->cap = cap;
  }
  s->from[s->n++] = p;
  return 0;
}

static int set_index(const ptr_set *s, const void *p) {
  for (int i = 0; i < s->n; i++)
    if (s->from[i] == p) return i;
  return -1;
}

/* Every vector a node (or the graph) names, in one list for the loops below. */
#define NODE_VECS(n) {&(n)->w, &(n)->q_norm, &(n)->k_norm, &(n)->a_log, &(n)->dt_bias, &(n)->gnorm}

static const wisp_vector *vec_copy(const ptr_set *s, wisp_vector *copies, const wisp_vector *v) {
  return v ? &copies[set_index(s, v)] : NULL;
}

wisp_status wisp_graph_bind(const wisp_graph *src, wisp_graph *out) {
  wisp_graph_init(out);
  ptr_set mats = {0}, vecs = {0};
  int bad = 0;
  for (int i = 0; i < src->n_nodes; i++) {
    const wisp_gnode *n = &src->nodes[i];
    bad |= set_add(&mats, n->W);
    const wisp_vector *const *vs[] = NODE_VECS(n);
    for (size_t k = 0; k < sizeof vs / sizeof vs[0]; k++) bad |= set_add(&vecs, *vs[k]);
  }
  bad |= set_add(&mats, src->embed) | set_add(&mats, src->head);
  bad |= set_add(&vecs, src->final_norm) | set_add(&vecs, src->rope_cos) | set_add(&vecs, src->rope_sin);
  bad |= set_add(&vecs, src->rope_cos_local) | set_add(&vecs, src->rope_sin_local);
  wisp_gnode *nodes = src->n_nodes ? malloc((size_t)src->n_nodes * sizeof *nodes) : NULL;
  wisp_matrix *mc = mats.n ? malloc((size_t)mats.n * sizeof *mc) : NULL;
  wisp_vector *vc = vecs.n ? malloc((size_t)vecs.n * sizeof *vc) : NULL;
  wisp_kernel_choice *cc = src->n_nodes ? calloc((size_t)src->n_nodes * 2, sizeof *cc) : NULL;
  if (bad || (src->n_nodes && (!nodes || !cc)) || (mats.n && !mc) || (vecs.n && !vc)) {
    free(nodes), free(mc), free(vc), free(cc);
    free(mats.from), free(vecs.from);
    return wisp_fail(WISP_ENOMEM, "out of memory");
  }
  *out = *src;
  /* The copies start as the model's views with nothing chosen or uploaded;
   * a matrix in row parts gets copies of its parts too (each part has its
   * own kernel choice and device copy). */
  int n_parts = 0;
  for (int i = 0; i < mats.n; i++) n_parts += ((const wisp_matrix *)mats.from[i])->n_parts;
  wisp_matrix *pc = n_parts ? malloc((size_t)n_parts * sizeof *pc) : NULL;
  if (n_parts && !pc) {
    free(nodes), free(mc), free(vc), free(cc);
    free(mats.from), free(vecs.from);
    return wisp_fail(WISP_ENOMEM, "out of memory");
  }
  n_parts = 0;
  for (int i = 0; i < mats.n; i++) {
    mc[i] = *(const wisp_matrix *)mats.from[i];
    memset(mc[i].choice, 0, sizeof mc[i].choice);
    mc[i].device = NULL;
    for (int k = 0; k < mc[i].n_parts; k++) {
      pc[n_parts + k] = mc[i].parts[k];
      memset(pc[n_parts + k].choice, 0, sizeof pc[n_parts + k].choice);
      pc[n_parts + k].device = NULL;
    }
    if (mc[i].n_parts) mc[i].parts = &pc[n_parts];
    n_parts += mc[i].n_parts;
  }
  for (int i = 0; i < vecs.n; i++) {
    vc[i] = *(const wisp_vector *)vecs.from[i];
    vc[i].device = NULL;
  }
  for (int i = 0; i < src->n_nodes; i++) {
    wisp_gnode *n = &nodes[i];
    *n = src->nodes[i];
    n->W = n->W ? &mc[set_index(&mats, n->W)] : NULL;
    const wisp_vector **vs[] = NODE_VECS(n);
    for (size_t k = 0; k < sizeof vs / sizeof vs[0]; k++) *vs[k] = vec_copy(&vecs, vc, *vs[k]);
    n->choice = n->op == WISP_GOP_ATTENTION_GATED ? &cc[2 * i] : NULL;
  }
  out->nodes = nodes;
  out->cap_nodes = src->n_nodes;
  out->embed = src->embed ? &mc[set_index(&mats, src->embed)] : NULL;
  out->head = src->head ? &mc[set_index(&mats, src->head)] : NULL;
  out->final_norm = vec_copy(&vecs, vc, src->final_norm);
  out->rope_cos = vec_copy(&vecs, vc, src->rope_cos);
  out->rope_sin = vec_copy(&vecs, vc, src->rope_sin);
  out->rope_cos_local = vec_copy(&vecs, vc, src->rope_cos_local);
  out->rope_sin_local = vec_copy(&vecs, vc, src->rope_sin_local);
  out->own_mats = mc;
  out->own_parts = pc;
  out->own_vecs = vc;
  out->own_choices = cc;
  free(mats.from);
  free(vecs.from);
  return WISP_OK;
}
