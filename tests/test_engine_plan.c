/* The engine executes the plan `wisp plan` prints: same id, and the plan's
 * kernel choices reach the backend. */
#include <math.h>
#include <stdlib.h>

#include "engine/engine.h"
#include "fixtures.h"
#include "test.h"
#include "util/file.h"

static int plan_id_of(const char *args, char id[65]) {
  char cmd[1024], out[4096];
  snprintf(cmd, sizeof cmd, "%s plan --backend cpu --profile exact %s", test_wisp_bin(), args);
  if (test_run(cmd, out, sizeof out) != 0) return 0;
  return sscanf(out, "plan %64s", id) == 1;
}

TEST(engine_bench_receipt_carries_the_printed_plan_id) {
  char args[700], id1[65], id2[65];
  snprintf(args, sizeof args, "-m %s", fixture_small_model());
  CHECK(plan_id_of(args, id1));
  CHECK(plan_id_of(args, id2));
  CHECK(!strcmp(id1, id2));
  char cmd[1400], out[8192], path[700];
  snprintf(path, sizeof path, "%s/plan-receipt.json", test_tmpdir());
  snprintf(cmd, sizeof cmd, "%s bench --backend cpu --profile exact -m %s --prompt 8 --decode 4 -o %s", test_wisp_bin(), fixture_small_model(), path);
  CHECKF(test_run(cmd, out, sizeof out) == 0, "%s", out);
  char *text = NULL;
  CHECK(wisp_read_file(path, &text, NULL) == WISP_OK);
  cJSON *r = cJSON_Parse(text);
  free(text);
  const cJSON *pid = cJSON_GetObjectItem(r, "plan_id");
  int same = cJSON_IsString(pid) && !strcmp(pid->valuestring, id1);
  cJSON_Delete(r);
  CHECK(same);
}

TEST(engine_profile_kernel_choice_reaches_the_backend) {
  wisp_model *m = NULL;
  wisp_session *a = NULL, *b = NULL;
  CHECK(wisp_model_open(fixture_small_model(), &m) == WISP_OK);
  wisp_session_options oa = {.backend = "cpu"};
  CHECK(wisp_session_new(m, &oa, &a) == WISP_OK);
  const wisp_matrix *w = wisp_graph_matrix(&a->graph, 3, "mlp.down"); /* the session's own choice */
  CHECK(w && !strcmp(w->choice[WISP_PHASE_DECODE].variant, "q4_avx2") == !strcmp(wisp_session_plan(a)->device.has_avx2 ? "y" : "n", "y"));
  char id_a[65];
  snprintf(id_a, sizeof id_a, "%s", wisp_session_plan_id(a));
  /* greedy tokens under the default plan */
  int32_t ids[6] = {87, 105, 115, 112, 32, 105};
  float la[512], lb[512];
  CHECK(wisp_session_eval(a, ids, 6, la) == WISP_OK);
  wisp_session_free(a);
  wisp_session_options ob = {.backend = "cpu", .profile = "tests/data/engine/scalar-decode.json"};
  CHECKF(wisp_session_new(m, &ob, &b) == WISP_OK, "%s", wisp_last_error());
  CHECK(strcmp(id_a, wisp_session_plan_id(b)) != 0);
  w = wisp_graph_matrix(&b->graph, 3, "mlp.down");
  CHECK(!strcmp(w->choice[WISP_PHASE_DECODE].variant, "q4_scalar"));
  CHECK(!strcmp(wisp_graph_matrix(&b->graph, -1, "head")->choice[WISP_PHASE_DECODE].variant, "q4_scalar"));
  /* the model's own views are never written: no choice reached them */
  CHECK(wisp_graph_matrix(&m->graph, 3, "mlp.down")->choice[WISP_PHASE_DECODE].variant[0] == 0);
  /* decode one token at a time: the scalar kernels give the same logits to rounding */
  for (int i = 0; i < 6; i++) CHECK(wisp_session_eval(b, ids + i, 1, lb) == WISP_OK);
  wisp_session_free(b);
  float worst = 0, scale = 0;
  for (int i = 0; i < 512; i++) {
    worst = fmaxf(worst, fabsf(la[i] - lb[i]));
    scale = fmaxf(scale, fabsf(la[i]));
  }
  wisp_model_close(m);
  CHECKF(worst <= 1e-4f * scale, "worst %g scale %g", worst, scale);
}

TEST(engine_plan_choosing_a_kernel_the_backend_lacks_is_an_error) {
  /* A profile adds a WGSL kernel (digest checked) and sets the head matmul to
   * it: `wisp run` on the cpu backend refuses, naming the profile field. */
  char cmd[2048], out[4096], digest[128] = {0};
  snprintf(cmd, sizeof cmd, "%s kernels digest src/backend/webgpu/kernels/q4_matvec_nosg.wgsl main", test_wisp_bin());
  CHECK(test_run(cmd, out, sizeof out) == 0);
  CHECK(sscanf(out, "%127s", digest) == 1);
  char profile[1024];
  snprintf(profile, sizeof profile,
           "{\"id\": \"tests/wgsl-on-cpu\", \"extends\": \"default\", \"runtime\": {\"inference\": {\"executionPatch\": {"
           "\"addKernels\": [{\"key\": \"gpu_only\", \"kernel\": {\"kernel\": \"q4_matvec_nosg.wgsl\", \"entry\": \"main\", \"digest\": \"%s\"}}],"
           "\"set\": [{\"section\": \"all\", \"op\": \"head\", \"kernelKey\": \"gpu_only\"}]}}}}",
           digest);
  const char *path = fixture_write("wgsl-on-cpu.json", profile);
  snprintf(cmd, sizeof cmd, "%s run --backend cpu -m %s -n 1 --profile %s", test_wisp_bin(), fixture_small_model(), path);
  int rc = test_run(cmd, out, sizeof out);
  CHECKF(rc == 1 && strstr(out, "executionPatch.set[0].kernelKey: 'gpu_only' is a WGSL kernel") &&
             strstr(out, "the plan's backend is cpu"),
         "rc %d: %s", rc, out);
}
