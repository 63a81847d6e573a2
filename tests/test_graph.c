/* The step graph (src/model/graph.h): one description per architecture from
 * which the plan's op list, the persistent decode's table and the fusions
 * are derived. */
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "fixtures.h"
#include "model/graph.h"
#include "test.h"

/* A hand-built graph of one pre-norm attention layer (the shape every
 * architecture here has). */
static void one_layer(wisp_graph *g, wisp_gop mixer) {
  *g = (wisp_graph){.hidden = 8, .ffn = 16, .vocab = 10, .heads = 2, .kv_heads = 1, .head_dim = 4};
  CHECK(wisp_graph_rmsnorm(g, 0, "attn.qkv.norm", NULL, 8, WISP_ACT_X, WISP_ACT_XN));
  CHECK(wisp_graph_matmul(g, 0, "attn.qkv", NULL, 16, 8, WISP_ACT_XN, WISP_ACT_BIG, 0));
  CHECK(wisp_graph_mixer(g, mixer, 0, "attn.core", 16, 8));
  CHECK(wisp_graph_matmul(g, 0, "attn.o_proj", NULL, 8, 8, WISP_ACT_MID, WISP_ACT_X, 1));
  CHECK(wisp_graph_add_ffn(g, 0, NULL, NULL, NULL) == WISP_OK);
}

TEST(graph_fusion_pass_finds_the_pairs) {
  wisp_graph g;
  one_layer(&g, WISP_GOP_ATTENTION);
  wisp_graph_fuse(&g);
  CHECK(g.n_nodes == 8);
  CHECK(g.nodes[0].fused & WISP_FUSE_NORM_MATMUL);        /* norm -> qkv */
  CHECK(g.nodes[2].fused & WISP_FUSE_QK_NORM_ROPE_KV);    /* attention */
  CHECK(g.nodes[3].fused & WISP_FUSE_RESIDUAL_NORM);      /* o_proj += -> ffn norm */
  CHECK(g.nodes[4].fused & WISP_FUSE_NORM_MATMUL);        /* ffn norm -> gate_up */
  CHECK(g.nodes[5].fused & WISP_FUSE_GATE_UP_SWIGLU);
  CHECK(g.nodes[6].fused & WISP_FUSE_SWIGLU_MATMUL);
  CHECK(!(g.nodes[1].fused & (WISP_FUSE_NORM_MATMUL | WISP_FUSE_GATE_UP_SWIGLU)));
  CHECK(g.nodes[2].fused & WISP_FUSE_MIXER_MATMUL);       /* attention -> o_proj */
  CHECK(!(g.nodes[1].fused & WISP_FUSE_MATMUL_DELTANET)); /* an attention's in-product */
  CHECK((g.fused & WISP_FUSE_HEAD_ARGMAX) && (g.fused & WISP_FUSE_NORM_MATMUL)); /* final norm -> head -> argmax */
  /* The activation widths grew to fit the nodes. */
  CHECK(g.act[WISP_ACT_BIG] == 32 && g.act[WISP_ACT_MID] == 16 && g.act[WISP_ACT_X] == 8);
  /* the FFN's gating node keeps its width though the down product came after it */
  CHECK(g.nodes[6].op == WISP_GOP_SWIGLU && g.nodes[6].cols == 16);
  wisp_graph_free(&g);
}

/* A Gated DeltaNet layer: its in-product goes with it (row ranges), its
 * gated norm with the out-product. */
TEST(graph_fusion_pass_finds_the_deltanet_pairs) {
  wisp_graph g;
  one_layer(&g, WISP_GOP_DELTANET);
  wisp_graph_fuse(&g);
  CHECK(g.nodes[0].fused & WISP_FUSE_NORM_MATMUL);
  CHECK(g.nodes[1].fused & WISP_FUSE_MATMUL_DELTANET);
  CHECK(g.nodes[2].fused & WISP_FUSE_MIXER_MATMUL);
  CHECK(!(g.nodes[1].fused & WISP_FUSE_CONV_MATMUL));
  CHECK(!strcmp(wisp_fuse_name(WISP_FUSE_MATMUL_DELTANET), "matmul+gated_deltanet") &&
        !strcmp(wisp_fuse_name(WISP_FUSE_MIXER_MATMUL), "mixer+matmul"));
  wisp_graph_free(&g);
}

TEST(graph_fusion_pass_keeps_an_output_that_is_read_again) {
  /* A second product reading the norm's output: the norm cannot live
   * inside the first product alone. */
  wisp_graph g;
  one_layer(&g, WISP_GOP_ATTENTION);
  CHECK(wisp_graph_matmul(&g, 0, "extra", NULL, 8, 8, WISP_ACT_XN, WISP_ACT_MID, 0));
  wisp_gnode last = g.nodes[g.n_nodes - 1];
  memmove(&g.nodes[2], &g.nodes[1], sizeof last * (size_t)(g.n_nodes - 2));
  g.nodes[2] = last; /* norm, qkv, extra (reads XN too), attention, ... */
  wisp_graph_fuse(&g);
  CHECK(!(g.nodes[0].fused & WISP_FUSE_NORM_MATMUL));
  CHECK(g.nodes[5].fused & WISP_FUSE_NORM_MATMUL); /* the FFN's own pair still fuses */
  wisp_graph_free(&g);
}

/* The phases graph_lower.c writes for layer l's mixer (backend.h). */
static int mixer_phases_are(const wisp_decode_graph *d, int *at, int l, int stage, int work) {
  const wisp_decode_phase *f = &d->phases[*at];
  (*at)++;
  return f->layer == l && f->stage == stage && f->work == work;
}

static int phases_are_the_layers(const wisp_decode_graph *d) {
  int at = 0;
  for (int l = 0; l < d->n_layers; l++) {
    const int first = l == 0 ? WISP_STAGE_EMBED : WISP_STAGE_NORM_OP;
    int ok;
    switch (d->layers[l].mixer) {
      case WISP_MIX_SHORTCONV:
        ok = mixer_phases_are(d, &at, l, first, WISP_WORK_CONV_IN) &&
             mixer_phases_are(d, &at, l, WISP_STAGE_MID, WISP_WORK_OUT);
        break;
      case WISP_MIX_ATTENTION:
        ok = mixer_phases_are(d, &at, l, first, WISP_WORK_QKV) &&
             mixer_phases_are(d, &at, l, WISP_STAGE_NONE, WISP_WORK_ATTN) &&
             mixer_phases_are(d, &at, l, WISP_STAGE_ATTN_MERGE, WISP_WORK_OUT);
        break;
      case WISP_MIX_DELTANET:
        ok = mixer_phases_are(d, &at, l, first, WISP_WORK_IN) &&
             mixer_phases_are(d, &at, l, WISP_STAGE_NONE, WISP_WORK_DELTANET) &&
             mixer_phases_are(d, &at, l, WISP_STAGE_GATED_NORM, WISP_WORK_OUT);
        break;
      default:
        ok = mixer_phases_are(d, &at, l, first, WISP_WORK_IN) &&
             mixer_phases_are(d, &at, l, WISP_STAGE_NONE, WISP_WORK_ATTN_GATED) &&
             mixer_phases_are(d, &at, l, WISP_STAGE_ATTN_MERGE_GATE, WISP_WORK_OUT);
        break;
    }
    if (!ok || !mixer_phases_are(d, &at, l, WISP_STAGE_NORM_FFN, WISP_WORK_FFN) ||
        !mixer_phases_are(d, &at, l, WISP_STAGE_H, WISP_WORK_DOWN))
      return 0;
  }
  return mixer_phases_are(d, &at, d->n_layers - 1, WISP_STAGE_NORM_FINAL, WISP_WORK_HEAD) && at == d->n_phases;
}

TEST(graph_lowering_accepts_the_persistent_shape_and_refuses_others) {
  wisp_model *m = NULL;
  CHECK(wisp_model_open(fixture_small_model(), &m) == WISP_OK);
  wisp_backend *be = NULL;
  CHECK(wisp_cpu_backend_new(1, &be) == WISP_OK);
  wisp_graph_state *st = NULL;
  CHECK(wisp_graph_state_new(&m->graph, be, 1, 16, &st) == WISP_OK);
  wisp_decode_graph *d = malloc(sizeof *d);
  CHECK(d);
  CHECK(wisp_graph_lower_decode(&m->graph, st, d) == WISP_OK);
  CHECK(d->n_layers == m->graph.n_layers && d->max_pos == 16);
  int conv = 0, attn = 0;
  for (int l = 0; l < d->n_layers; l++) {
    const wisp_gnode *n = &m->graph.nodes[8 * l];
    CHECK(d->layers[l].in == n[1].W && d->layers[l].down == n[7].W);
    CHECK(d->layers[l].attention == (n[2].op == WISP_GOP_ATTENTION));
    CHECK(d->layers[l].mixer == (n[2].op == WISP_GOP_ATTENTION ? WISP_MIX_ATTENTION : WISP_MIX_SHORTCONV));
    CHECK(d->layers[l].state == wisp_graph_state_mix(st, l, 0));
    conv += n[2].op == WISP_GOP_SHORTCONV;
    attn += n[2].op == WISP_GOP_ATTENTION;
  }
  CHECK(conv > 0 && attn > 0); /* the fixture has both */
  /* The phase list: 4 phases a short-conv layer, 5 an attention layer, the head. */
  CHECK(d->n_phases == 4 * conv + 5 * attn + 1);
  CHECK(phases_are_the_layers(d));
  /* A layer whose FFN product does not add into the residual is not the
   * persistent kernel's layer shape: it runs op by op. */
  m->graph.nodes[7].accumulate = 0;
  CHECK(wisp_graph_lower_decode(&m->graph, st, d) == WISP_EUNSUPPORTED);
  m->graph.nodes[7].accumulate = 1;
  CHECK(wisp_graph_lower_decode(&m->graph, st, d) == WISP_OK);
  /* Mixers of different families in one graph (short conv and attention
   * beside a Gated DeltaNet layer and a gated attention layer) are lowered:
   * each layer gets its own mixer's phases. (The nodes only need to be the
   * layer shape here; the backend checks the weights and vectors.) */
  const wisp_gop keep0 = m->graph.nodes[2].op, keep1 = m->graph.nodes[8 + 2].op;
  m->graph.nodes[2].op = WISP_GOP_DELTANET;
  m->graph.nodes[8 + 2].op = WISP_GOP_ATTENTION_GATED;
  CHECK(wisp_graph_lower_decode(&m->graph, st, d) == WISP_OK);
  CHECK(d->layers[0].mixer == WISP_MIX_DELTANET && d->layers[1].mixer == WISP_MIX_ATTENTION_GATED);
  CHECK(phases_are_the_layers(d));
  m->graph.nodes[2].op = keep0;
  m->graph.nodes[8 + 2].op = keep1;
  free(d);
  wisp_graph_state_free(st, be);
  be->destroy(be);
  wisp_model_close(m);
}

TEST(graph_is_what_the_plan_lists) {
  /* Every layer op of the plan is a node of the graph, in order (with
   * fuseResidualAdd on, no op is added between them). */
  wisp_model *m = NULL;
  wisp_session *s = NULL;
  CHECK(wisp_model_open(fixture_small_model(), &m) == WISP_OK);
  CHECK(wisp_session_new(m, NULL, &s) == WISP_OK);
  const wisp_plan *p = wisp_session_plan(s);
  int at = 0;
  for (int l = 0; l < m->graph.n_layers; l++) {
    int n_ops = 0;
    const wisp_plan_op *ops = wisp_plan_layer_ops(p, WISP_PHASE_DECODE, l, &n_ops);
    for (int i = 0; i < n_ops; i++, at++) {
      CHECK(at < m->graph.n_nodes);
      const wisp_gnode *n = &m->graph.nodes[at];
      CHECKF(n->layer == l && !strcmp(ops[i].op, wisp_gop_name(n->op)) && !strcmp(ops[i].section, n->section),
             "layer %d op %d: plan %s %s, graph %s %s", l, i, ops[i].op, ops[i].section, wisp_gop_name(n->op),
             n->section);
    }
  }
  CHECK(at == m->graph.n_nodes);
  /* The plan lists the pass's fusions: cpu applies rmsnorm+matmul only (its caps). */
  CHECK(p->n_graph_fusions >= 6);
  for (int i = 0; i < p->n_graph_fusions; i++)
    CHECKF(p->graph_fusions[i].applied == !strcmp(p->graph_fusions[i].name, "rmsnorm+matmul"), "%s %s -> %s: %d",
           p->graph_fusions[i].name, p->graph_fusions[i].first, p->graph_fusions[i].second,
           p->graph_fusions[i].applied);
  wisp_session_free(s);
  wisp_model_close(m);
}

TEST(graph_fusions_in_wisp_plan) {
  char cmd[1024], out[16384];
  snprintf(cmd, sizeof cmd, "%s plan --backend cpu --profile exact -m %s --json", test_wisp_bin(), fixture_small_model());
  CHECKF(test_run(cmd, out, sizeof out) == 0, "%s", out);
  CHECKF(strstr(out, "\"graphFusions\"") && strstr(out, "\"rmsnorm+matmul\"") && strstr(out, "\"swiglu+matmul\""),
         "%s", out);
  snprintf(cmd, sizeof cmd, "%s plan --backend cpu --profile exact -m %s", test_wisp_bin(), fixture_small_model());
  CHECKF(test_run(cmd, out, sizeof out) == 0, "%s", out);
  CHECKF(strstr(out, "fusions on the cpu backend (a pass over the model's graph") &&
         strstr(out, "rmsnorm mlp.gate_up.norm -> matmul mlp.gate_up"), "%s", out);
}
