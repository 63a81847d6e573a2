/* One configuration channel: settings beside the plan come from a
 * session's tuning string (src/backend/tuning.c), not the environment; the
 * few environment variables left are read in src/util/env.c only; and the
 * plan's kernel choices are checked against what the backend runs. */
#include <stdlib.h>
#include <string.h>

#include "backend/webgpu/wgpu_backend.h"
#include "engine/engine.h"
#include "engine/session.h"
#include "backend/tuning.h"
#include "backend/tuning_fields.h"
#include "fixtures.h"
#include "test.h"
#include "util/err.h"
#include "webgpu_fixture.h"

/* Keys set the fields they name; an empty string sets nothing. */
TEST(tuning_keys_set_their_fields) {
  wisp_tuning t;
  CHECK(wisp_tuning_parse(NULL, &t) == WISP_OK && t.prefill_chunk == 0 && t.webgpu.persist == 0);
  CHECK(wisp_tuning_parse("", &t) == WISP_OK);
  CHECKF(wisp_tuning_parse("prefillChunk=100,decodeKick=4,cpuScalar=1,persist=0,kv=f16,matvec=64x2,"
                           "dnSlice=32x4,q4kSbCols=0,persistOpt=0,matmulI8=32x32x4x4x2,dawnToggles=a:b",
                           &t) == WISP_OK,
         "%s", wisp_last_error());
  CHECK(t.prefill_chunk == 100 && t.decode_kick == 4 && t.cpu_scalar == 1);
  const wisp_wgpu_backend_opts *o = &t.webgpu;
  CHECK(o->persist == -1 && o->kv_f16 == 1 && o->matvec_wg == 64 && o->matvec_rows == 2);
  CHECK(o->dn_cols == 32 && o->dn_groups == 4 && o->q4k_sb_cols == -1);
  CHECK(o->persist_opt == 0 && o->given);
  CHECK(o->i8_geometry[0] == 32 && o->i8_geometry[2] == 4 && o->i8_geometry[4] == 2);
  CHECK(o->toggles && !strcmp(o->toggles, "a:b"));
  CHECK(wisp_tuning_parse("persist=1,fuse=0,fuseArgmax=0,persistGrid=2,persistFail=3", &t) == WISP_OK);
  CHECK(t.webgpu.persist == 1 && t.webgpu.no_fuse && t.webgpu.no_fuse_argmax && t.webgpu.persist_grid == 2 &&
        t.webgpu.persist_fail == 3);
  /* attnLong: KEYSxWORKGROUPS, KEYS alone (the default workgroups), 0 (never, kept through the defaults) */
  CHECK(wisp_tuning_parse("attnLong=2048x64", &t) == WISP_OK && t.webgpu.attn_decode_long_min == 2048 &&
        t.webgpu.attn_decode_long_wgs == 64);
  CHECK(wisp_tuning_parse("attnLong=3000", &t) == WISP_OK && t.webgpu.attn_decode_long_min == 3000 &&
        t.webgpu.attn_decode_long_wgs == 1024);
  CHECK(wisp_tuning_parse("attnLong=0", &t) == WISP_OK);
  wisp_wgpu_backend_opts off = t.webgpu;
  wisp_tuning_fill_defaults(&off);
  CHECK(off.attn_decode_long_min == 0);
  wisp_wgpu_backend_opts dflt;
  memset(&dflt, 0, sizeof dflt);
  wisp_tuning_fill_defaults(&dflt);
  CHECK(dflt.attn_decode_long_min == 4096 && dflt.attn_decode_long_wgs == 1024);
  /* rowsI8: MINxMAX, MAX alone (the default MIN), 0 (never, kept through the defaults); MIN above MAX refused */
  CHECK(wisp_tuning_parse("rowsI8=2x8,rowsI8Rpl=4,rowsI8Fuse=0", &t) == WISP_OK && t.webgpu.rows_i8_min == 2 &&
        t.webgpu.rows_i8_max == 8 && t.webgpu.rows_i8_rpl == 4 && t.webgpu.no_rows_i8_fuse == 1);
  CHECK(wisp_tuning_parse("rowsI8=12", &t) == WISP_OK && t.webgpu.rows_i8_min == 1 && t.webgpu.rows_i8_max == 12);
  CHECK(wisp_tuning_parse("rowsI8=0", &t) == WISP_OK);
  off = t.webgpu;
  wisp_tuning_fill_defaults(&off);
  CHECK(off.rows_i8_max == 0);
  CHECK(dflt.rows_i8_min == 1 && dflt.rows_i8_max == 16 && dflt.rows_i8_rpl == 2 && !dflt.no_rows_i8_fuse);
  CHECK(wisp_tuning_parse("rowsI8=9x3", &t) != WISP_OK && wisp_tuning_parse("rowsI8=65", &t) != WISP_OK &&
        wisp_tuning_parse("rowsI8Rpl=9", &t) != WISP_OK);
}

/* The defaults are the table's: a backend's zero fields get them, a given
 * value (even 0) or a field set by the caller keeps its own. */
TEST(tuning_defaults_come_from_the_table) {
  wisp_tuning t;
  CHECK(wisp_tuning_parse("persistOpt=0,persistMaxKeys=0,matvec=64x2", &t) == WISP_OK);
  wisp_wgpu_backend_opts o = t.webgpu;
  o.rows_nt = 3; /* set by the caller, not by the string */
  wisp_tuning_fill_defaults(&o);
  CHECK(o.persist_opt == 0 && o.persist_max_keys == 0 && o.matvec_wg == 64 && o.matvec_rows == 2 && o.rows_nt == 3);
  /* matmul / matmulTile have no default: the product picks its tile by size */
  CHECK(o.matmul_tm == 0 && o.matmul_rm == 0 && o.attn_max_splits == 32 && o.matvec_big_rows == 8);
  CHECK(o.dn_cols == 16 && o.dn_groups == 0 && o.q4k_mv_wg == 128 && o.q4k_mv_rows == 0 && o.i8_min_n == 2);
  CHECK(o.i8_geometry[0] == 64 && o.i8_geometry[4] == 2 && o.persist_grid == 0 && !o.no_fuse);
  wisp_wgpu_backend_opts none;
  memset(&none, 0, sizeof none);
  wisp_tuning_fill_defaults(&none);
  CHECK(none.persist_opt == 969 && none.persist_max_keys == 0 && none.matvec_wg == 128 && none.matvec_rows == 4 && none.rows_nt == 64);
  uint32_t d[5];
  wisp_tuning_default_of("matmulI8", d);
  CHECK(d[0] == 64 && d[1] == 64 && d[2] == 4 && d[3] == 4 && d[4] == 2);
}

/* One rule between the plan and the string: a key given that names a plan
 * setting replaces the plan's value; keys not given leave the plan's. */
TEST(tuning_given_keys_replace_the_plan_settings) {
  wisp_backend_settings s;
  wisp_backend_settings_default(&s);
  s.flash_blocks = 7;
  wisp_tuning t;
  CHECK(wisp_tuning_parse("matmul=32x32", &t) == WISP_OK);
  wisp_tuning_over_plan(&t, &s);
  CHECK(s.flash_blocks == 7 && s.matvec_wg == 0 && s.matvec_rows == 0 && s.kv_f16 == 0);
  CHECK(wisp_tuning_parse("attnSplits=3,matvec=64x2,kv=f16", &t) == WISP_OK);
  wisp_tuning_over_plan(&t, &s);
  CHECK(s.flash_blocks == 3 && s.matvec_wg == 64 && s.matvec_rows == 2 && s.kv_f16 == 1);
  CHECK(wisp_tuning_parse("kv=f32", &t) == WISP_OK); /* f32 does not undo a plan's f16 */
  wisp_tuning_over_plan(&t, &s);
  CHECK(s.kv_f16 == 1);
}

/* The test-only keys are marked in the table and left out of the listing
 * (the unknown-key error lists the keys). */
TEST(tuning_test_keys_are_hidden) {
  CHECK(wisp_tuning_key_is_test("persistFail") == 1 && wisp_tuning_key_is_test("persistSplit") == 1);
  CHECK(wisp_tuning_key_is_test("persist") == 0 && wisp_tuning_key_is_test("bogus") == -1);
  char keys[1024];
  wisp_tuning_list(keys, sizeof keys);
  CHECKF(strstr(keys, "persistGrid") && strstr(keys, "matvec") && !strstr(keys, "persistFail") &&
             !strstr(keys, " persistSplit,") && strstr(keys, "persistSplits"),
         "%s", keys);
  wisp_tuning t;
  CHECK(wisp_tuning_parse("bogus=1", &t) == WISP_EINVAL);
  const char *e = wisp_last_error();
  CHECKF(strstr(e, "persistOpt") && !strstr(e, "persistFail") && !strchr(e, '\n'), "%s", e);
}

/* Unknown keys and bad values are one-line errors naming them. */
TEST(tuning_bad_input_is_a_one_line_error) {
  static const char *const bad[][2] = {
      {"bogus=1", "unknown key 'bogus'"},   {"persist=2", "persist=2"},     {"persist", "not key=value"},
      {"=1", "not key=value"},              {"matvec=64", "matvec=64"},     {"dnSlice=3", "dnSlice=3"},
      {"prefillChunk=0", "prefillChunk=0"}, {"kv=f8", "kv=f8"},             {"persistRp=3", "persistRp=3"},
      {"headChunks=-1", "headChunks=-1"},   {"matvec=64x2x1", "matvec=64x2x1"}, {"persistGrid=1x", "persistGrid=1x"},
      {"attnLong=1x2x3", "attnLong=1x2x3"}, {"attnLong=x", "attnLong=x"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    wisp_tuning t;
    CHECKF(wisp_tuning_parse(bad[i][0], &t) == WISP_EINVAL, "'%s' accepted", bad[i][0]);
    const char *e = wisp_last_error();
    CHECKF(strstr(e, bad[i][1]) && !strchr(e, '\n'), "'%s': %s", bad[i][0], e);
  }
}

/* The tuning string reaches the session: an unknown key fails
 * wisp_session_new, prefillChunk sets the prefill chunk, cpuScalar makes the
 * plan choose the scalar kernels (the device reports no AVX2). */
TEST(tuning_reaches_the_session) {
  wisp_model *m = NULL;
  CHECK(wisp_model_open(fixture_small_model(), &m) == WISP_OK);
  wisp_session *s = NULL;
  wisp_session_options o = {.backend = "cpu", .threads = 1, .tuning = "prefilChunk=7"};
  wisp_status st = wisp_session_new(m, &o, &s);
  char msg[512];
  snprintf(msg, sizeof msg, "%s", wisp_last_error());
  o.tuning = "prefillChunk=7,cpuScalar=1";
  wisp_status st2 = wisp_session_new(m, &o, &s);
  int chunk = s ? s->chunk : 0;
  const wisp_matrix *w = s ? wisp_graph_matrix(&s->graph, 3, "mlp.down") : NULL;
  const int scalar = s && w && !strcmp(w->choice[WISP_PHASE_DECODE].variant, "q4_scalar") &&
                     !wisp_session_plan(s)->device.has_avx2;
  wisp_session_free(s);
  wisp_model_close(m);
  CHECK(st == WISP_EINVAL);
  CHECKF(strstr(msg, "unknown key 'prefilChunk'") && !strchr(msg, '\n'), "%s", msg);
  CHECKF(st2 == WISP_OK, "%s", wisp_last_error());
  CHECK(chunk == 7);
  CHECK(scalar);
}

/* The prefill chunk a session takes before tuning prefillChunk
 * (wisp_session_prefill_chunk): 128 on the CPU; on a GPU 512 for several
 * slots (each has its own activations), 1,024 for one where the widest
 * activation buffer of 1,024 tokens fits a binding, else 512. */
TEST(tuning_prefill_chunk_by_device_and_slots) {
  wisp_graph g;
  memset(&g, 0, sizeof g);
  g.act[0] = 100;
  g.act[1] = 8192; /* the widest: 1,024 tokens of it are 32 MiB */
  wisp_device_caps cpu, gpu;
  wisp_device_caps_default(&cpu, "cpu");
  wisp_device_caps_default(&gpu, "webgpu");
  CHECK(wisp_session_prefill_chunk(&g, &cpu, 1) == 128);
  CHECK(wisp_session_prefill_chunk(&g, &gpu, 4) == 512);
  gpu.max_binding_bytes = 0; /* no limit */
  CHECK(wisp_session_prefill_chunk(&g, &gpu, 1) == 1024);
  gpu.max_binding_bytes = 1024ull * 8192 * 4;
  CHECK(wisp_session_prefill_chunk(&g, &gpu, 1) == 1024);
  gpu.max_binding_bytes -= 1;
  CHECK(wisp_session_prefill_chunk(&g, &gpu, 1) == 512);
}

/* The library reads its environment variables in src/util/env.c and
 * nowhere else (besides Vulkan's own VK_DRIVER_FILES, which wgpu_device.c
 * sets for lavapipe). */
TEST(tuning_environment_is_read_in_one_file) {
  char out[4096];
  int rc = test_run("grep -rn 'getenv(' src include | grep -v '^src/util/env.c:' | grep -v VK_DRIVER_FILES", out,
                    sizeof out);
  CHECKF(rc == 1 && !out[0], "getenv outside src/util/env.c:\n%s", out);
  rc = test_run("grep -c 'getenv(' src/util/env.c", out, sizeof out);
  CHECK(rc == 0 && atoi(out) >= 1);
}

/* The webgpu backend knows the registry's variants with the WGSL files it
 * loads for them; an unknown variant or another file is an error. */
TEST(webgpu_backend_checks_the_plan_kernels) {
  WEBGPU_OR_SKIP(d);
  wisp_wgpu_backend_opts o = {.device = d, .subgroups = -1};
  wisp_backend *be = NULL;
  CHECKF(wisp_wgpu_backend_new(&o, &be) == WISP_OK, "%s", wisp_last_error());
  int ok_known = be->check_kernel && be->check_kernel(be, "matmul", "wgsl_matvec_subgroup_q4", "matvec.wgsl") == WISP_OK;
  wisp_status unknown = be->check_kernel ? be->check_kernel(be, "matmul", "wgsl_bogus", "matvec.wgsl") : WISP_OK;
  char m1[512];
  snprintf(m1, sizeof m1, "%s", wisp_last_error());
  wisp_status other = be->check_kernel ? be->check_kernel(be, "rmsnorm", "wgsl_subgroup", "rmsnorm_nosg.wgsl") : WISP_OK;
  char m2[512];
  snprintf(m2, sizeof m2, "%s", wisp_last_error());
  be->destroy(be);
  CHECK(ok_known);
  CHECK(unknown == WISP_EUNSUPPORTED);
  CHECKF(strstr(m1, "matmul/wgsl_bogus") && !strchr(m1, '\n'), "%s", m1);
  CHECK(other == WISP_EUNSUPPORTED);
  CHECKF(strstr(m2, "rmsnorm_nosg.wgsl") && strstr(m2, "rmsnorm.wgsl"), "%s", m2);
}

/* At session creation: the small model's webgpu plan passes the check; the
 * same plan with one decode product's variant renamed (a registry variant
 * the backend lacks) fails with one line naming the op and the variant. */
TEST(webgpu_session_refuses_an_unknown_variant) {
  WEBGPU_OR_SKIP(d);
  wisp_model *m = NULL;
  CHECK(wisp_model_open(fixture_small_model(), &m) == WISP_OK);
  wisp_wgpu_backend_opts o = {.device = d, .subgroups = -1};
  wisp_backend *be = NULL;
  wisp_plan *plan = NULL;
  wisp_device_caps caps;
  int ok = wisp_wgpu_backend_new(&o, &be) == WISP_OK;
  if (ok) be->caps(be, &caps);
  ok = ok && wisp_engine_resolve_plan(m, &caps, NULL, NULL, &plan) == WISP_OK;
  wisp_status good = ok ? wisp_engine_check_kernels(plan, be) : WISP_EINVAL;
  char why[512];
  snprintf(why, sizeof why, "%s", wisp_last_error());
  wisp_status bad = WISP_OK;
  char msg[512] = "";
  wisp_plan_phase *dec = ok ? &plan->phases[WISP_PHASE_DECODE] : NULL;
  for (int g = 0; dec && g < dec->n_groups && bad == WISP_OK; g++)
    for (int i = 0; i < dec->groups[g].n_ops; i++) {
      wisp_plan_op *op = &dec->groups[g].ops[i];
      if (strcmp(op->op, "matmul")) continue;
      snprintf(op->kernel, sizeof op->kernel, "matmul/wgsl_renamed");
      bad = wisp_engine_check_kernels(plan, be);
      snprintf(msg, sizeof msg, "%s", wisp_last_error());
      break;
    }
  wisp_plan_free(plan);
  if (be) be->destroy(be);
  wisp_model_close(m);
  CHECKF(ok && good == WISP_OK, "%s", why);
  CHECK(bad == WISP_EUNSUPPORTED);
  CHECKF(strstr(msg, "decode matmul") && strstr(msg, "matmul/wgsl_renamed") && !strchr(msg, '\n'), "%s", msg);
}
