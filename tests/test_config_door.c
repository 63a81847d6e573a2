/* One configuration door: a backend is made with no tuning key (only what
 * opening its device needs), and a value reaches it the same way whether the
 * plan says it or the session's tuning string gives it: in the settings
 * object, at configure (src/backend/tuning.c, docs/configuration.md). */
#include <ctype.h>
#include <string.h>

#include "backend/tuning.h"
#include "backend/tuning_fields.h"
#include "backend/webgpu/wgpu_backend.h"
#include "engine/engine.h"
#include "fixtures.h"
#include "test.h"
#include "util/err.h"
#include "webgpu_fixture.h"

/* The settings object without the tuning pointer (which differs by path). */
static int same_settings(wisp_backend_settings a, wisp_backend_settings b) {
  a.tuning = b.tuning = NULL;
  return !memcmp(&a, &b, sizeof a);
}

/* kv f16 and 5 attention splits, once as the plan's values (kvDtype,
 * flashBlocks) and once as tuning keys over a plan that says f32 and 32:
 * the same settings object, and two backends made without keys and
 * configured with the one or the other keep the same KV type. A third,
 * configured with the plan's own values, keeps f32 (the check can fail). */
TEST(config_plan_value_and_tuning_key_take_one_path) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  wisp_model *m = NULL;
  CHECK(wisp_model_open(fixture_small_model(), &m) == WISP_OK);
  wisp_backend *be[3] = {NULL, NULL, NULL};
  wisp_plan *plan = NULL;
  wisp_device_caps caps;
  int ok = 1;
  for (int i = 0; i < 3 && ok; i++) ok = wisp_backend_create("webgpu", 1, &be[i]) == WISP_OK;
  CHECKF(ok, "%s", wisp_last_error());
  if (ok) be[0]->caps(be[0], &caps);
  ok = ok && wisp_engine_resolve_plan(m, &caps, "exact", NULL, &plan) == WISP_OK;
  CHECKF(ok, "%s", wisp_last_error());
  wisp_tuning none, keys;
  CHECK(wisp_tuning_parse(NULL, &none) == WISP_OK);
  CHECK(wisp_tuning_parse("kv=f16,attnSplits=5", &keys) == WISP_OK);
  wisp_backend_settings by_plan, by_key, plain;
  int st[3] = {-1, -1, -1};
  if (ok) {
    CHECK(strcmp(plan->kv_dtype, "f16") && plan->flash_blocks != 5);
    wisp_engine_backend_settings(plan, &plain);
    wisp_tuning_over_plan(&none, &plain);
    plain.tuning = &none;
    wisp_engine_backend_settings(plan, &by_key);
    wisp_tuning_over_plan(&keys, &by_key);
    by_key.tuning = &keys;
    plan->flash_blocks = 5; /* the plan says so */
    memcpy(plan->kv_dtype, "f16", 4);
    wisp_engine_backend_settings(plan, &by_plan);
    wisp_tuning_over_plan(&none, &by_plan);
    by_plan.tuning = &none;
    CHECK(same_settings(by_plan, by_key));
    CHECK(!same_settings(by_plan, plain));
    st[0] = be[0]->configure(be[0], &by_plan);
    st[1] = be[1]->configure(be[1], &by_key);
    st[2] = be[2]->configure(be[2], &plain);
  }
  CHECK(st[0] == WISP_OK && st[1] == WISP_OK && st[2] == WISP_OK);
  CHECK(wisp_wgpu_backend_kv16(be[0]) && wisp_wgpu_backend_kv16(be[1]) && !wisp_wgpu_backend_kv16(be[2]));
  for (int i = 0; i < 3; i++)
    if (be[i]) be[i]->destroy(be[i]);
  wisp_plan_free(plan);
  wisp_model_close(m);
}

/* The keys that change what the plan may choose reach it through the caps
 * (wisp_tuning_over_caps): with fuse=0 the plan names no fusion, with
 * fuseArgmax=0 no head+argmax; without them it names some. A geometry the
 * parser takes but the backend refuses (dnChunkCols=5: not a power of two)
 * fails the session at configure with one line. */
TEST(config_caps_keys_reach_the_plan_and_bad_geometry_fails_at_configure) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  wisp_model *m = NULL;
  CHECK(wisp_model_open(fixture_small_model(), &m) == WISP_OK);
  const char *tuning[3] = {"persist=0", "persist=0,fuse=0", "persist=0,fuseArgmax=0"};
  unsigned fusions[3] = {0, 0, 0};
  int applied[3] = {0, 0, 0};
  for (int i = 0; i < 3; i++) {
    wisp_session *s = NULL;
    wisp_session_options o = {.backend = "webgpu", .threads = 1, .tuning = tuning[i]};
    wisp_status st = wisp_session_new(m, &o, &s);
    CHECKF(st == WISP_OK, "%s: %s", tuning[i], wisp_last_error());
    if (st) continue;
    const wisp_plan *p = wisp_session_plan(s);
    fusions[i] = p->device.fusions;
    for (int k = 0; k < p->n_graph_fusions; k++) applied[i] += p->graph_fusions[k].applied;
    wisp_session_free(s);
  }
  CHECK(fusions[0] & WISP_FUSE_HEAD_ARGMAX && applied[0] > 0);
  CHECK(fusions[1] == 0 && applied[1] == 0);
  CHECK(fusions[2] == (fusions[0] & ~(unsigned)WISP_FUSE_HEAD_ARGMAX));
  wisp_session *s = NULL;
  wisp_session_options o = {.backend = "webgpu", .threads = 1, .tuning = "dnChunkCols=5"};
  wisp_status st = wisp_session_new(m, &o, &s);
  const char *e = wisp_last_error();
  CHECK(st == WISP_EINVAL && !s);
  CHECKF(strstr(e, "bad geometry") && !strchr(e, '\n'), "%s", e);
  wisp_session_free(s);
  wisp_model_close(m);
}

/* key as a whole word of text (persistSplit is not in persistSplits). */
static int has_word(const char *text, const char *key) {
  const size_t n = strlen(key);
  for (const char *p = strstr(text, key); p; p = strstr(p + 1, key))
    if ((p == text || !isalnum((unsigned char)p[-1])) && !isalnum((unsigned char)p[n])) return 1;
  return 0;
}

/* Every command that takes --tuning lists the keys for users in its help,
 * and none of the test-only keys. */
TEST(config_help_lists_no_test_key) {
  static const char *const cmds[] = {"run", "bench", "logits", "perplexity", "serve"};
  static const char *const test_keys[] = {"persistFail", "persistSplit", "persistSkip"};
  for (size_t k = 0; k < sizeof test_keys / sizeof *test_keys; k++) CHECK(wisp_tuning_key_is_test(test_keys[k]) == 1);
  for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++) {
    char cmd[1024], out[16384];
    snprintf(cmd, sizeof cmd, "%s %s --help", test_wisp_bin(), cmds[i]);
    CHECKF(test_run(cmd, out, sizeof out) == 0, "%s: %s", cmds[i], out);
    CHECKF(has_word(out, "persistGrid") && has_word(out, "persistSplits") && has_word(out, "matvec"),
           "wisp %s --help lists no tuning keys:\n%s", cmds[i], out);
    for (size_t k = 0; k < sizeof test_keys / sizeof *test_keys; k++)
      CHECKF(!has_word(out, test_keys[k]), "wisp %s --help lists the test key %s", cmds[i], test_keys[k]);
  }
}
