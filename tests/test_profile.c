/* Runtime profiles: the seed profile, wisp's shipped profiles, patch verbs
 * as parsed, typed settings, not-implemented switches, and bad input. */
#include "plan/pjson.h"
#include "plan/profile.h"
#include "plan_test_util.h"
#include "test.h"
#include "util/err.h"

static wisp_profile_options fix_opts(void) {
  wisp_profile_options o = {0};
  o.profiles_dir = FIX_PROFILES;
  o.kernels_dir = FIX_KERNELS;
  return o;
}

TEST(profile_seed_fails_only_at_digest_step) {
  /* wisp ships both kernel files the seed names (its own code): the seed's
   * digests are of another runtime's files, so the digest step fails and
   * names both digests */
  wisp_profile *p = NULL;
  wisp_status st = wisp_profile_load(SEED_PROFILE, NULL, &p);
  CHECK(st == WISP_EHASH && p == NULL);
  const char *e = wisp_last_error();
  CHECKF(strstr(e, SEED_PROFILE ": runtime.inference.executionPatch.addKernels[0].kernel.digest"), "%s", e);
  CHECK(strstr(e, "attention_decode_online_head256_f16kv_output_gate.wgsl"));
  CHECK(strstr(e, "profile has sha256:275a1f7cfdd40ab95c467bb4744a1509dd6eadb39ec8fdd0d1e1ba80eb34f9c5"));
  CHECK(strstr(e, "file has sha256:"));
  char out[4096];
  CHECK(run_wisp(out, sizeof out, "profile check " SEED_PROFILE) == 1);
  CHECK(strstr(out, "digest mismatch") && strstr(out, "profile has sha256:275a1f7c") && strstr(out, "file has sha256:"));
}

TEST(profile_seed_structure_only) {
  wisp_profile_options o = {0};
  o.skip_digests = 1;
  wisp_profile *p = NULL;
  CHECKF(wisp_profile_load(SEED_PROFILE, &o, &p) == WISP_OK, "%s", wisp_last_error());
  /* extends "profiles/throughput" -> profiles/throughput.json -> profiles/default.json */
  CHECK(p->n_chain == 3 && !strcmp(p->chain[0], "profiles/default") && !strcmp(p->chain[1], "profiles/throughput"));
  CHECK(!strcmp(p->chain[2], "profiles/qwen-3-5-2b-metal-throughput") && !strcmp(p->id, p->chain[2]));
  CHECK(!strcmp(p->intent, "calibrate") && !p->digests_verified);
  CHECK(p->n_kernels == 2 && !strcmp(p->kernels[1].key, "q4_decode_metal_simd16") && p->kernels[1].constants);
  CHECK(p->n_patches == 8 && p->patches[0].verb == WISP_PATCH_SET && !strcmp(p->patches[0].section, "decode"));
  CHECK(!strcmp(p->patches[0].kernel_key, "attn_decode_head256"));
  CHECK(p->batching.present && p->batching.batch_size == 8 && p->batching.ring_staging == 1);
  CHECK(!strcmp(p->batching.stop_check_mode, "batch"));
  CHECK(p->decode_loop.present && p->decode_loop.max_batch_decode_tokens == 64 && !p->decode_loop.has_submit_latency);
  CHECK(p->fusions.residual_add == 1 && p->fusions.greedy_head_argmax == 1);
  /* every session switch of the seed is implemented (docs/webgpu.md), typed, with its source */
  CHECKF(p->n_not_implemented == 0, "%s", p->n_not_implemented ? p->not_implemented[0] : "");
  const wisp_fusions *fu = &p->fusions;
  CHECK(fu->ffn_q4k && fu->ffn_geometry.workgroup_size == 256 && fu->ffn_geometry.cols_per_wg == 16 &&
        fu->ffn_geometry.threads_per_col == 16 && fu->ffn_geometry.full_block == 1);
  CHECK(fu->head_geometry.cols_per_wg == 128 && fu->head_geometry.threads_per_col == 2 &&
        fu->head_geometry.full_block == 1 && fu->head_geometry.workgroup_size == 256);
  CHECK(fu->post_ffn_norm_pair && fu->attn_output_gate && fu->attn_direct_kv && fu->lin_qkvz && fu->lin_ab &&
        fu->lin_core && fu->fused_qkv_split_norm_rope && fu->decode_loop);
  CHECK(!strcmp(fu->from[WISP_SW_LIN_CORE],
                "profiles/qwen-3-5-2b-metal-throughput: runtime.inference.session.useLinearAttentionFusedDecodeCore"));
  CHECK(!strcmp(fu->from[WISP_SW_ATTN_OUTPUT_GATE], "profiles/qwen-3-5-2b-metal-throughput: "
                                                     "runtime.inference.session.attentionDecodeOnline.useOutputGateFusion"));
  CHECK(!strcmp(fu->from[WISP_SW_RESIDUAL_ADD], "profiles/default: runtime.inference.session.fuseResidualAdd"));
  CHECK(p->n_warnings == 0); /* q_proj ... down_proj: plan resolution maps them for qwen3_5 */
  wisp_profile_free(p);
  char out[8192];
  CHECK(run_wisp(out, sizeof out, "profile check " SEED_PROFILE " --no-digests") == 0);
  CHECK(strstr(out, "structure only") && strstr(out, "useLinearAttentionFusedDecodeCore=on") &&
        !strstr(out, "not implemented"));
}

TEST(profile_shipped_profiles) {
  wisp_profile *p = NULL;
  CHECKF(wisp_profile_load("throughput", NULL, &p) == WISP_OK, "%s", wisp_last_error());
  CHECK(!strcmp(p->path, "builtin:profiles/throughput.json") && p->n_chain == 2); /* built in, not read from disk */
  CHECK(p->batching.batch_size == 8 && p->decode_loop.max_batch_decode_tokens == 64 && p->n_not_implemented == 0);
  CHECK(p->n_compatible == 2);
  wisp_profile_free(p);
  CHECKF(wisp_profile_load("profiles/default", NULL, &p) == WISP_OK, "%s", wisp_last_error());
  CHECK(p->batching.batch_size == 1 && p->n_patches == 0 && !strcmp(p->intent, "default"));
  wisp_profile_free(p);
}

TEST(profile_add_kernels_and_inheritance) {
  wisp_profile_options o = fix_opts();
  wisp_profile *p = NULL;
  CHECKF(wisp_profile_load(FIX_PROFILES "/set.json", &o, &p) == WISP_OK, "%s", wisp_last_error());
  CHECK(p->digests_verified && p->n_kernels == 1);
  const wisp_profile_kernel *k = wisp_profile_kernel_find(p, "wide");
  CHECK(k && !strcmp(k->file, "matvec_q4_wide.wgsl") && !strcmp(k->entry, "main"));
  CHECK(!strcmp(k->source, "profiles/set: runtime.inference.executionPatch.addKernels[0]"));
  /* batching merged: child batchSize, parent readbackInterval. */
  CHECK(p->batching.batch_size == 8 && p->batching.readback_interval == 4);
  CHECK(p->n_patches == 1 && p->patches[0].verb == WISP_PATCH_SET && !strcmp(p->patches[0].op, "attn.qkv"));
  wisp_profile_free(p);
  /* The requested intent must be compatible. */
  o.intent = "calibrate";
  CHECK(wisp_profile_load(FIX_PROFILES "/set.json", &o, &p) == WISP_OK);
  wisp_profile_free(p);
  o.intent = "latency";
  CHECK(wisp_profile_load(FIX_PROFILES "/set.json", &o, &p) == WISP_EFORMAT);
  CHECKF(strstr(wisp_last_error(), "intent: requested intent 'latency' is not compatible"), "%s", wisp_last_error());
}

TEST(profile_patch_verbs_parse) {
  wisp_profile_options o = fix_opts();
  wisp_profile *p = NULL;
  CHECKF(wisp_profile_load(FIX_PROFILES "/set-layers.json", &o, &p) == WISP_OK, "%s", wisp_last_error());
  CHECK(p->n_patches == 1 && p->patches[0].n_layers == 2 && p->patches[0].layers[1] == 3);
  wisp_profile_free(p);
  CHECKF(wisp_profile_load(FIX_PROFILES "/add.json", &o, &p) == WISP_OK, "%s", wisp_last_error());
  CHECK(p->patches[0].verb == WISP_PATCH_ADD && !strcmp(p->patches[0].before, "attn.core") && !p->patches[0].after);
  CHECK(p->fusions.residual_add == 0);
  wisp_profile_free(p);
  CHECKF(wisp_profile_load(FIX_PROFILES "/remove.json", &o, &p) == WISP_OK, "%s", wisp_last_error());
  CHECK(p->patches[0].verb == WISP_PATCH_REMOVE && !strcmp(p->patches[0].op, "sample") && !p->patches[0].kernel_key);
  wisp_profile_free(p);
}

TEST(profile_not_implemented_switches_are_listed) {
  wisp_profile_options o = fix_opts();
  wisp_profile *p = NULL;
  CHECKF(wisp_profile_load(FIX_PROFILES "/unimpl.json", &o, &p) == WISP_OK, "%s", wisp_last_error());
  /* useGreedyLmHeadArgmaxFusion (true in the fixture) is implemented now: not listed */
  const char *want[] = {"not implemented: runtime.loading", "not implemented: runtime.inference.kvCache",
                        "not implemented: batching.prefetch", "not implemented: session.fancyNewFusion",
                        "not implemented: session.decodeLoop.speculate"};
  CHECK(p->n_not_implemented == 5);
  for (int i = 0; i < 5; i++) {
    int found = 0;
    for (int k = 0; k < p->n_not_implemented; k++) found |= !strcmp(p->not_implemented[k], want[i]);
    CHECKF(found, "missing '%s'", want[i]);
  }
  CHECK(p->decode_loop.batch_size == 2);
  wisp_profile_free(p);
}

typedef struct { const char *file; wisp_status st; const char *msg; } bad_case;

static const bad_case k_bad[] = {
    {"malformed.json", WISP_EFORMAT, "invalid JSON at line 1"},
    {"bad-dup.json", WISP_EFORMAT, "intent: duplicate key"},
    {"bad-digest.json", WISP_EHASH,
     "runtime.inference.executionPatch.addKernels[0].kernel.digest: digest mismatch for 'matvec_q4_wide.wgsl': profile has "
     "sha256:0000000000000000000000000000000000000000000000000000000000000000, file has "
     "sha256:8c8d99490fd86e3e9eaccba1bfe8f0d3230c0fd3b977103fec43214669ff3f84"},
    {"bad-kernel-missing.json", WISP_EIO, "addKernels[0].kernel.kernel: 'no_such_kernel.wgsl' is not one of this build's kernels"},
    {"bad-entry.json", WISP_EFORMAT, "addKernels[0].kernel.entry: 'mainx' is not a function"},
    {"bad-section.json", WISP_EFORMAT, "executionPatch.set[0].section: unknown section 'warmup'"},
    {"bad-kernelkey.json", WISP_EFORMAT, "executionPatch.set[0].kernelKey: unknown kernel 'not_added'"},
    {"bad-verb.json", WISP_EFORMAT, "runtime.inference.executionPatch.replace: unknown field"},
    {"bad-type.json", WISP_EFORMAT, "runtime.inference.batching.batchSize: expected a non-negative integer, got string"},
    {"bad-intent.json", WISP_EFORMAT, "intent: 'latency' is not compatible with parent 'profiles/base'"},
    {"bad-missing-parent.json", WISP_EIO, "extends: profile 'profiles/nowhere' not found"},
    {"bad-kvdtype.json", WISP_EFORMAT,
     "runtime.inference.executionPatch.addKernels[0].kernel.precision.kvDtype: \"bf16\" is not a KV dtype wisp knows "
     "(\"f16\" or \"f32\")"},
    {"cycle-a.json", WISP_EFORMAT, "extends[1]: cycle: profiles/cycle-a -> profiles/cycle-b -> profiles/cycle-c -> profiles/cycle-a"},
};

TEST(profile_bad_inputs_api) {
  for (size_t i = 0; i < sizeof k_bad / sizeof k_bad[0]; i++) {
    char path[512];
    snprintf(path, sizeof path, FIX_PROFILES "/%s", k_bad[i].file);
    wisp_profile_options o = fix_opts();
    wisp_profile *p = NULL;
    wisp_status st = wisp_profile_load(path, &o, &p);
    CHECKF(st == k_bad[i].st, "%s: status %d, want %d (%s)", k_bad[i].file, st, k_bad[i].st, wisp_last_error());
    CHECK(p == NULL);
    CHECKF(strstr(wisp_last_error(), k_bad[i].msg), "%s: '%s' lacks '%s'", k_bad[i].file, wisp_last_error(), k_bad[i].msg);
    CHECKF(strstr(wisp_last_error(), FIX_PROFILES "/"), "%s: no file named in '%s'", k_bad[i].file, wisp_last_error());
    CHECKF(!strchr(wisp_last_error(), '\n'), "%s: not one line", k_bad[i].file);
  }
}

TEST(profile_bad_inputs_cli) {
  for (size_t i = 0; i < sizeof k_bad / sizeof k_bad[0]; i++) {
    char args[512], out[4096];
    snprintf(args, sizeof args, "profile check " FIX_PROFILES "/%s --profiles-dir " FIX_PROFILES " --kernels-dir " FIX_KERNELS,
             k_bad[i].file);
    int rc = run_wisp(out, sizeof out, args);
    CHECKF(rc == 1, "%s: rc=%d", k_bad[i].file, rc);
    CHECKF(strstr(out, k_bad[i].msg), "%s: output '%s'", k_bad[i].file, out);
  }
}

TEST(profile_no_digests_skips_only_digests) {
  wisp_profile_options o = fix_opts();
  o.skip_digests = 1;
  wisp_profile *p = NULL;
  CHECKF(wisp_profile_load(FIX_PROFILES "/bad-digest.json", &o, &p) == WISP_OK, "%s", wisp_last_error());
  wisp_profile_free(p);
  CHECK(wisp_profile_load(FIX_PROFILES "/bad-section.json", &o, &p) == WISP_EFORMAT);
}

TEST(kernels_digest_rule) {
  char hex[65], out[256], want[80];
  CHECK(wisp_sha256_file_hex(FIX_KERNELS "/matvec_q4_wide.wgsl", hex) == WISP_OK);
  snprintf(want, sizeof want, "sha256:%s\n", hex);
  CHECK(run_wisp(out, sizeof out, "kernels digest " FIX_KERNELS "/matvec_q4_wide.wgsl main") == 0);
  CHECKF(!strcmp(out, want), "'%s' vs '%s'", out, want);
  CHECK(!strcmp(hex, "8c8d99490fd86e3e9eaccba1bfe8f0d3230c0fd3b977103fec43214669ff3f84"));
  CHECK(run_wisp(out, sizeof out, "kernels digest " FIX_KERNELS "/matvec_q4_wide.wgsl nope") == 1);
  CHECK(strstr(out, "entry point 'nope' is not a function"));
  CHECK(run_wisp(out, sizeof out, "kernels digest " FIX_KERNELS "/absent.wgsl main") == 1);
  /* Entry detection is by `fn NAME(`, not by substring. */
  CHECK(wisp_wgsl_has_entry("fn mainly() {}\nfn  main (x: u32) {}", "main"));
  CHECK(!wisp_wgsl_has_entry("fn mainly() {} // main", "main"));
  CHECK(!wisp_wgsl_has_entry("let fnmain = 1;", "main"));
}
