/* Kernel registry: the seed registry's schema, wisp's own registry, and bad
 * input (one-line errors naming the file and JSON path). */
#include <stdlib.h>

#include "plan/registry.h"
#include "plan_test_util.h"
#include "test.h"
#include "util/err.h"

TEST(registry_seed_validates_and_counts) {
  wisp_registry *r = NULL;
  wisp_registry_options opt = {0};
  opt.kernels_dir = FIX_KERNELS;
  CHECKF(wisp_registry_load(SEED_REGISTRY, &opt, &r) == WISP_OK, "%s", wisp_last_error());
  CHECK(r->n_ops == 93);
  CHECK(r->n_variants == 302);
  CHECK(!r->strict);
  /* Most of the seed's WGSL files are not in this build: listed as unavailable. */
  CHECKF(r->n_available < 20, "available %d", r->n_available);
  CHECK(!wisp_registry_variant(wisp_registry_op(r, "matmul"), "f16")->available);
  CHECK(r->n_external_refs > 0);
  const wisp_operation *mm = wisp_registry_op(r, "matmul");
  CHECK(mm && mm->n_bindings == 4 && mm->uniforms.size == 32);
  CHECK(mm->uniforms.n_fields == 4 && !strcmp(mm->uniforms.fields[2].name, "K") && mm->uniforms.fields[2].offset == 8);
  const wisp_variant *v = wisp_registry_variant(mm, "f16_vec4");
  CHECK(v && !strcmp(v->entry_point, "main_vec4") && v->workgroup[0] == 16 && v->workgroup[1] == 16);
  CHECK(v->n_requires == 1 && !strcmp(v->requires[0], "shader-f16"));
  CHECK(!strcmp(v->backend, "webgpu") && !strcmp(v->weight_dtype, "f16"));
  const wisp_meta *m = wisp_variant_meta(v, "colsPerThread");
  CHECK(m && m->type == WISP_META_NUM && m->num == 4);
  CHECK(v->n_rule_refs == 1 && !strcmp(v->rule_refs[0], "matmul.rules.json#matmulKernel"));
  /* The map form of uniforms and bindings without names. */
  const wisp_operation *rp = wisp_registry_op(r, "rep_penalty");
  CHECK(rp && rp->uniforms.size == -1 && rp->uniforms.n_fields == 8 && rp->bindings[0].name == NULL);
  const wisp_operation *sa = wisp_registry_op(r, "scatter_add");
  CHECK(sa && wisp_registry_variant(sa, "dynamic")->n_bindings_override == 4);
  const wisp_operation *dq = wisp_registry_op(r, "dequant");
  CHECK(dq && wisp_registry_variant(dq, "f32_rowwise")->has_uniforms_override);
  wisp_registry_free(r);
}

TEST(registry_seed_cli_lists_unavailable) {
  static char out[1 << 16];
  int rc = run_wisp(out, sizeof out, "registry check " SEED_REGISTRY);
  CHECKF(rc == 0, "rc=%d %s", rc, out);
  CHECK(strstr(out, "operations: 93"));
  CHECK(strstr(out, "variants: 302"));
  CHECK(strstr(out, "unavailable matmul.f16 (matmul_f16.wgsl)"));
}

TEST(registry_wisp_own_is_strict_and_complete) {
  wisp_registry *r = NULL;
  CHECKF(wisp_registry_load(WISP_DEFAULT_REGISTRY, NULL, &r) == WISP_OK, "%s", wisp_last_error());
  CHECK(r->strict);
  const char *ops[] = {"embed", "rmsnorm", "matmul", "shortconv", "attention", "swiglu", "residual_add", "sample"};
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) CHECKF(wisp_registry_op(r, ops[i]), "missing op %s", ops[i]);
  const wisp_operation *mm = wisp_registry_op(r, "matmul");
  const char *mv[] = {"q4_scalar", "q4_avx2", "f32"};
  for (int i = 0; i < 3; i++) {
    const wisp_variant *v = wisp_registry_variant(mm, mv[i]);
    CHECKF(v && !strcmp(v->backend, "cpu"), "matmul/%s", mv[i]);
  }
  CHECK(wisp_registry_variant(mm, "q4_avx2")->n_requires == 1);
  wisp_registry_free(r);
}

/* Fails when an entry of wisp's registry names a WGSL file that is not there. */
TEST(registry_wisp_entries_point_at_existing_files) {
  wisp_registry *r = NULL;
  wisp_registry_options opt = {0};
  opt.strict = 1;
  CHECKF(wisp_registry_load(WISP_DEFAULT_REGISTRY, &opt, &r) == WISP_OK, "%s", wisp_last_error());
  for (int i = 0; i < r->n_ops; i++)
    for (int k = 0; k < r->ops[i].n_variants; k++) {
      const wisp_variant *v = &r->ops[i].variants[k];
      CHECKF(!strcmp(v->backend, "cpu") || !strcmp(v->backend, "webgpu") || !strcmp(v->backend, "host"), "%s.%s backend",
             r->ops[i].name, v->key);
      CHECKF(!strcmp(v->backend, "webgpu") == (v->wgsl != NULL), "%s.%s: only webgpu variants have WGSL", r->ops[i].name, v->key);
      if (!v->wgsl) continue;
      char path[1024];
      snprintf(path, sizeof path, "%s/%s", WISP_DEFAULT_KERNELS_DIR, v->wgsl);
      CHECKF(wisp_file_exists(path), "registry entry %s.%s points at missing %s", r->ops[i].name, v->key, path);
    }
  wisp_registry_free(r);
}

TEST(registry_strict_fixture_and_unlisted_file) {
  wisp_registry *r = NULL;
  wisp_registry_options opt = {0};
  opt.kernels_dir = FIX_KERNELS;
  opt.strict = 1;
  CHECKF(wisp_registry_load(FIX_REGISTRY_GPU, &opt, &r) == WISP_OK, "%s", wisp_last_error());
  CHECK(r->n_available == r->n_variants);
  wisp_registry_free(r);
  /* A .wgsl in the kernels dir that no variant lists is an error in strict mode. */
  char cmd[8192], dir[512];
  snprintf(dir, sizeof dir, "%s/kernels-extra", test_tmpdir());
  snprintf(cmd, sizeof cmd, "mkdir -p %s && cp %s/*.wgsl %s/ && echo 'fn main() {}' > %s/stray.wgsl", dir, FIX_KERNELS, dir, dir);
  CHECK(system(cmd) == 0);
  opt.kernels_dir = dir;
  CHECK(wisp_registry_load(FIX_REGISTRY_GPU, &opt, &r) == WISP_EFORMAT);
  CHECKF(strstr(wisp_last_error(), "stray.wgsl is not listed"), "%s", wisp_last_error());
  CHECK(strstr(wisp_last_error(), FIX_REGISTRY_GPU));
  /* A listed file that is missing. */
  snprintf(cmd, sizeof cmd, "rm %s/stray.wgsl %s/rmsnorm.wgsl", dir, dir);
  CHECK(system(cmd) == 0);
  CHECK(wisp_registry_load(FIX_REGISTRY_GPU, &opt, &r) == WISP_EIO);
  CHECKF(strstr(wisp_last_error(), "operations.rmsnorm.variants.subgroup.wgsl: kernel file 'rmsnorm.wgsl' not found"), "%s",
         wisp_last_error());
  /* Without strict, the same registry loads and marks the variant unavailable. */
  opt.strict = 0;
  CHECKF(wisp_registry_load(FIX_REGISTRY_GPU, &opt, &r) == WISP_OK, "%s", wisp_last_error());
  CHECK(r->n_available == r->n_variants - 1);
  CHECK(!wisp_registry_variant(wisp_registry_op(r, "rmsnorm"), "subgroup")->available);
  wisp_registry_free(r);
}

typedef struct { const char *file; wisp_status st; const char *msg; } bad_case;

static const bad_case k_bad[] = {
    {"malformed.json", WISP_EFORMAT, "invalid JSON at line 2"},
    {"missing-field.json", WISP_EFORMAT, "operations.rmsnorm.variants.f32.entryPoint: missing required field"},
    {"wrong-type.json", WISP_EFORMAT, "operations.rmsnorm.variants.f32.workgroup[1]: expected a positive integer, got string"},
    {"dup-key.json", WISP_EFORMAT, "operations.rmsnorm.variants.f32: duplicate key"},
    {"unknown-chain.json", WISP_EFORMAT, "operations.rmsnorm.ruleChain: unknown rule chain 'nope'"},
    {"rule-unknown-variant.json", WISP_EFORMAT, "ruleChains.rms[0].value: 'f16' is not a variant of operation 'rmsnorm'"},
    {"rule-unknown-key.json", WISP_EFORMAT, "ruleChains.rms[0].match.colour: unknown context key"},
    {"rule-bad-op.json", WISP_EFORMAT, "ruleChains.rms[0].match.rows.approx: unknown operator"},
    {"unknown-ref.json", WISP_EFORMAT, "reachability.ruleChains[0]: unknown rule chain 'missing'"},
    {"unknown-feature.json", WISP_EFORMAT, "operations.rmsnorm.variants.f32.requires[0]: unknown feature 'tensor-cores'"},
    {"missing-wgsl.json", WISP_EIO, "operations.rmsnorm.variants.f32.wgsl: kernel file 'absent.wgsl' not found"},
    {"external-ref.json", WISP_EFORMAT, "variants.f16.reachability.ruleChains[0]: rule file 'rmsnorm.rules.json' has no chain 'nochain'"},
};

TEST(registry_bad_inputs_api) {
  for (size_t i = 0; i < sizeof k_bad / sizeof k_bad[0]; i++) {
    char path[512];
    snprintf(path, sizeof path, PD "/registry/%s", k_bad[i].file);
    wisp_registry *r = NULL;
    wisp_registry_options opt = {0};
    opt.kernels_dir = FIX_KERNELS;
    wisp_status st = wisp_registry_load(path, &opt, &r);
    CHECKF(st == k_bad[i].st, "%s: status %d, want %d (%s)", k_bad[i].file, st, k_bad[i].st, wisp_last_error());
    CHECK(r == NULL);
    CHECKF(strstr(wisp_last_error(), k_bad[i].msg), "%s: message '%s' lacks '%s'", k_bad[i].file, wisp_last_error(), k_bad[i].msg);
    CHECKF(strstr(wisp_last_error(), path) == wisp_last_error(), "%s: message does not start with the file", k_bad[i].file);
    CHECKF(!strchr(wisp_last_error(), '\n'), "%s: not one line", k_bad[i].file);
  }
}

TEST(registry_bad_inputs_cli) {
  for (size_t i = 0; i < sizeof k_bad / sizeof k_bad[0]; i++) {
    char args[512], out[4096];
    snprintf(args, sizeof args, "registry check " PD "/registry/%s --kernels-dir " FIX_KERNELS, k_bad[i].file);
    int rc = run_wisp(out, sizeof out, args);
    CHECKF(rc == 1, "%s: rc=%d", k_bad[i].file, rc);
    CHECKF(strstr(out, k_bad[i].msg), "%s: output '%s'", k_bad[i].file, out);
    CHECKF(strstr(out, "wisp registry check: " PD "/registry/"), "%s: output '%s'", k_bad[i].file, out);
  }
}

TEST(registry_external_rule_file_is_checked) {
  /* "FILE#CHAIN" resolves in <registry dir>/rules: a good reference passes. */
  char path[] = PD "/registry/external-ref.json";
  wisp_registry *r = NULL;
  wisp_registry_options opt = {0};
  opt.kernels_dir = FIX_KERNELS;
  opt.rules_dir = PD "/no-such-dir";
  /* Rules dir without the file: counted as external, not an error. */
  CHECKF(wisp_registry_load(path, &opt, &r) == WISP_OK, "%s", wisp_last_error());
  CHECK(r->n_external_refs == 2);
  wisp_registry_free(r);
  /* The shipped rules dir next to the registry resolves the good reference
     and rejects the one naming a chain the file lacks. */
  opt.rules_dir = NULL;
  CHECK(wisp_registry_load(path, &opt, &r) == WISP_EFORMAT);
  CHECKF(strstr(wisp_last_error(), "has no chain 'nochain'"), "%s", wisp_last_error());
}
