/* Fusion on WebGPU is decided by the graph pass (model/graph_fuse.c), the
 * plan (which fusions the backend's caps name and the profile allows) and
 * the session's step graph, which calls the backend's fused op
 * (backend.h matmul_fused) where its nodes say: the backend rediscovers
 * nothing. Here: each fusion the plan applies, taken out of a session's
 * graph, costs dispatches (so the graph really drives them) and leaves
 * the logits where the fused step has them; `wisp plan` lists them. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/webgpu/wgpu_backend.h"
#include "backend/webgpu/wgpu_products_i8.h"
#include "engine/engine.h"
#include "fixtures.h"
#include "plan/plan.h"
#include "test.h"
#include "util/err.h"
#include "webgpu_fixture.h"

#define TOL_FUSED 1e-4 /* fused vs unfused kernels, whole model, relative to max|logit| */

/* Takes fusion `bits` out of a session's step graph (what the plan would
 * do if it did not apply them). */
static void drop_fusions(wisp_session *s, unsigned bits) {
  for (int i = 0; i < s->graph.n_nodes; i++) s->graph.nodes[i].fused &= ~bits;
  s->graph.fused &= ~bits;
}

typedef struct {
  double dispatches; /* a decode token */
  float *logits;     /* after the last step */
} run_result;

/* A 40-token prompt (decode then attends over more than one 32-key tile:
 * the attention is split and its merge is a fusion) and 4 one-token evals
 * of fixed tokens, with `dropped` fusions taken out of the graph. */
static int run(wisp_model *m, unsigned dropped, run_result *r, char *err, size_t cap) {
  wisp_session_options o = {.backend = "webgpu"};
  wisp_session *s = NULL;
  const int V = wisp_model_vocab(m);
  r->logits = malloc(sizeof(float) * (size_t)V);
  wisp_status st = r->logits ? wisp_session_new(m, &o, &s) : WISP_ENOMEM;
  wisp_wgpu_mm8_opts mo = {.mode = 3}; /* the f32 prefill product (exact) */
  if (!st) st = wisp_wgpu_mm8_configure(s->backend, &mo);
  int32_t ids[40];
  uint64_t seed = 5;
  for (int i = 0; i < 40; i++) ids[i] = (int32_t)(test_rand_u32(&seed) % (uint32_t)V);
  if (!st) {
    drop_fusions(s, dropped);
    st = wisp_session_eval(s, ids, 40, r->logits);
  }
  wisp_wgpu_backend_stats s0, s1;
  if (!st) wisp_wgpu_backend_stats_get(s->backend, &s0);
  for (int k = 0; !st && k < 4; k++) st = wisp_session_eval(s, &ids[k], 1, r->logits);
  if (!st) {
    wisp_wgpu_backend_stats_get(s->backend, &s1);
    r->dispatches = (double)(s1.dispatches - s0.dispatches) / 4;
  }
  if (st) snprintf(err, cap, "fusions 0x%x dropped: %s", dropped, wisp_last_error());
  wisp_session_free(s);
  return !st;
}

/* The plan's entry of fusion `name`, applied, at least once. */
static int applied(const wisp_plan *p, const char *name) {
  for (int i = 0; i < p->n_graph_fusions; i++)
    if (!strcmp(p->graph_fusions[i].name, name) && p->graph_fusions[i].applied) return 1;
  return 0;
}

TEST(webgpu_fusion_graph_decides_the_dispatches) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  wisp_model *m = NULL;
  CHECKF(wisp_model_open(fixture_small_model(), &m) == WISP_OK, "%s", wisp_last_error());
  const int V = wisp_model_vocab(m);
  /* the plan applies the fusions this model's graph has on this backend */
  wisp_session_options o = {.backend = "webgpu"};
  wisp_session *s = NULL;
  CHECKF(wisp_session_new(m, &o, &s) == WISP_OK, "%s", wisp_last_error());
  const wisp_plan *p = wisp_session_plan(s);
  CHECK(applied(p, "rmsnorm+matmul") && applied(p, "gate_up+swiglu") && applied(p, "matmul+shortconv") &&
        applied(p, "mixer+matmul") && applied(p, "head+argmax"));
  wisp_session_free(s);
  /* more: 1 where dropping the fusions costs dispatches; 0 for gate_up+swiglu
   * alone, whose SwiGLU then goes into the down product (swiglu+matmul) */
  static const struct {
    const char *name;
    unsigned bits;
    int more;
  } kinds[] = {{"rmsnorm+matmul", WISP_FUSE_NORM_MATMUL, 1},
               {"gate_up+swiglu", WISP_FUSE_GATE_UP_SWIGLU, 0},
               {"both swiglu", WISP_FUSE_GATE_UP_SWIGLU | WISP_FUSE_SWIGLU_MATMUL, 1},
               {"matmul+shortconv", WISP_FUSE_CONV_MATMUL, 1},
               {"mixer+matmul", WISP_FUSE_MIXER_MATMUL, 1},
               {"every fusion", ~0u, 1}};
  char err[600] = "";
  run_result all, less;
  CHECKF(run(m, 0, &all, err, sizeof err), "%s", err);
  double worst = 0;
  for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
    CHECKF(run(m, kinds[k].bits, &less, err, sizeof err), "%s", err);
    double mx = 0, e = 0;
    for (int i = 0; i < V; i++) {
      mx = fmax(mx, fabs(all.logits[i]));
      e = fmax(e, fabs((double)less.logits[i] - all.logits[i]));
    }
    free(less.logits);
    worst = fmax(worst, e / mx);
    CHECKF(e <= TOL_FUSED * mx, "%s dropped: logit difference %.3g of max %.3g", kinds[k].name, e, mx);
    CHECKF(kinds[k].more ? less.dispatches > all.dispatches : less.dispatches == all.dispatches,
           "%s dropped: %.2f dispatches a token (fused: %.2f)", kinds[k].name, less.dispatches, all.dispatches);
    printf("     %-18s dropped: %.0f dispatches a token (fused %.0f), logits within %.2g\n", kinds[k].name,
           less.dispatches, all.dispatches, e / mx);
  }
  free(all.logits);
  wisp_model_close(m);
}

/* tuning fuse=0: the backend's caps name no fusion, the plan applies none
 * and says why, and the step runs every op on its own. */
TEST(webgpu_fusion_caps_without_fusions) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  wisp_model *m = NULL;
  CHECKF(wisp_model_open(fixture_small_model(), &m) == WISP_OK, "%s", wisp_last_error());
  wisp_session_options o = {.backend = "webgpu", .tuning = "fuse=0"};
  wisp_session *s = NULL;
  CHECKF(wisp_session_new(m, &o, &s) == WISP_OK, "%s", wisp_last_error());
  const wisp_plan *p = wisp_session_plan(s);
  CHECK(p->n_graph_fusions >= 8);
  for (int i = 0; i < p->n_graph_fusions; i++)
    CHECKF(!p->graph_fusions[i].applied && strstr(p->graph_fusions[i].why, "has no fused op"), "%s: %s",
           p->graph_fusions[i].name, p->graph_fusions[i].why);
  unsigned left = s->graph.fused;
  for (int i = 0; i < s->graph.n_nodes; i++) left |= s->graph.nodes[i].fused;
  CHECKF(left == 0, "fusions 0x%x left in the session's graph", left);
  wisp_session_free(s);
  wisp_model_close(m);
}

/* `wisp plan` lists the fusions per backend: the pairs, the layers, applied
 * or not and why. */
TEST(webgpu_fusion_plan_lists_the_fusions) {
  char cmd[1024], out[32768];
  snprintf(cmd, sizeof cmd, "%s plan -m %s --backend webgpu", test_wisp_bin(), fixture_small_model());
  int rc = test_run(cmd, out, sizeof out);
  if (strstr(out, "no WebGPU") || strstr(out, "WebGPU library") || strstr(out, "Null adapter")) {
    if (test_webgpu_required()) {
      test_fail_at(__FILE__, __LINE__, "WISP_REQUIRE_WEBGPU=1 but `wisp plan --backend webgpu` has no WebGPU: %s", out);
      return;
    }
    SKIP("no WebGPU: %s", out);
    return;
  }
  CHECKF(rc == 0 && strstr(out, "fusions on the webgpu backend") &&
             strstr(out, "+ mixer+matmul           attention attn.core -> matmul attn.o_proj") &&
             strstr(out, "+ matmul+shortconv") && strstr(out, "+ gate_up+swiglu") &&
             strstr(out, "+ rmsnorm+matmul         rmsnorm head.norm -> matmul head") &&
             strstr(out, "+ head+argmax            matmul head -> sample (greedy)"),
         "%s", out);
  snprintf(cmd, sizeof cmd, "%s plan -m %s --backend cpu", test_wisp_bin(), fixture_small_model());
  CHECKF(test_run(cmd, out, sizeof out) == 0 && strstr(out, "fusions on the cpu backend") &&
             strstr(out, "- matmul+shortconv") && strstr(out, "the cpu backend has no fused op for it") &&
             strstr(out, "+ rmsnorm+matmul"),
         "%s", out);
}
