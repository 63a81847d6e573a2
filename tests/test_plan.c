/* Plan resolution: default op lists, rule/manifest/profile provenance, every
 * patch verb, canonical JSON and a stable plan id, and bad input. */
#include <stdlib.h>

#include "plan/pjson.h"
#include "plan/plan.h"
#include "plan_test_util.h"
#include "test.h"
#include "util/err.h"

typedef struct {
  cJSON *manifest;
  wisp_model_shape shape;
  wisp_registry *reg;
  wisp_profile *prof;
  wisp_device_caps dev;
  wisp_plan_inputs in;
} fixture;

static void fx_free(fixture *f) {
  wisp_profile_free(f->prof);
  wisp_registry_free(f->reg);
  cJSON_Delete(f->manifest);
  memset(f, 0, sizeof *f);
}

/* backend "cpu" uses wisp's registry; "webgpu" the fixture registry. */
static wisp_status fx_init(fixture *f, const char *backend, const char *profile, const char *caps) {
  memset(f, 0, sizeof *f);
  wisp_status st = wisp_json_load(SEED_MANIFEST, &f->manifest);
  if (st) return st;
  const cJSON *rt = cJSON_GetObjectItemCaseSensitive(f->manifest, "runtime");
  if ((st = wisp_model_shape_from_json(cJSON_GetObjectItemCaseSensitive(rt, "shape"), "shape", &f->shape))) return st;
  wisp_device_caps_default(&f->dev, backend);
  if (!strcmp(backend, "cpu")) f->dev.has_avx2 = 1; /* deterministic across machines */
  if (caps && (st = wisp_device_caps_set(&f->dev, caps))) return st;
  wisp_registry_options ro = {0};
  ro.kernels_dir = !strcmp(backend, "cpu") ? NULL : FIX_KERNELS;
  if ((st = wisp_registry_load(!strcmp(backend, "cpu") ? WISP_DEFAULT_REGISTRY : FIX_REGISTRY_GPU, &ro, &f->reg))) return st;
  if (profile) {
    wisp_profile_options po = {0};
    po.profiles_dir = FIX_PROFILES;
    po.kernels_dir = FIX_KERNELS;
    char path[512];
    snprintf(path, sizeof path, FIX_PROFILES "/%s", profile);
    if ((st = wisp_profile_load(path, &po, &f->prof))) return st;
  }
  f->in.shape = &f->shape;
  f->in.candidate = cJSON_GetObjectItemCaseSensitive(f->manifest, "candidate");
  f->in.knee = cJSON_GetObjectItemCaseSensitive(rt, "knee");
  f->in.profile = f->prof;
  f->in.registry = f->reg;
  f->in.device = &f->dev;
  f->in.backend = backend;
  return WISP_OK;
}

static const wisp_plan_op *find_op(const wisp_plan *p, int phase, int layer, const char *sel) {
  int n = 0;
  const wisp_plan_op *ops;
  if (layer == -1) { ops = p->phases[phase].prologue; n = p->phases[phase].n_prologue; }
  else if (layer == -2) { ops = p->phases[phase].epilogue; n = p->phases[phase].n_epilogue; }
  else ops = wisp_plan_layer_ops(p, phase, layer, &n);
  for (int i = 0; i < n; i++)
    if (!strcmp(ops[i].op, sel) || !strcmp(ops[i].section, sel)) return &ops[i];
  return NULL;
}

TEST(plan_shape_from_manifest) {
  fixture f;
  CHECKF(fx_init(&f, "cpu", NULL, NULL) == WISP_OK, "%s", wisp_last_error());
  CHECK(f.shape.n_layers == 14 && f.shape.layer_types[2] == WISP_LAYER_ATTENTION && f.shape.layer_types[0] == WISP_LAYER_CONV);
  CHECK(f.shape.hidden == 1024 && f.shape.ffn == 2560 && f.shape.vocab == 65536 && f.shape.quant_bits == 4);
  fx_free(&f);
  cJSON *bad = cJSON_Parse("{\"layerTypes\":[\"conv\",\"mamba\"],\"hidden\":8}");
  wisp_model_shape s;
  CHECK(wisp_model_shape_from_json(bad, "m.json: runtime.shape", &s) == WISP_EFORMAT);
  CHECKF(strstr(wisp_last_error(), "m.json: runtime.shape.layerTypes[1]: unknown layer type 'mamba'"), "%s", wisp_last_error());
  cJSON_Delete(bad);
  bad = cJSON_Parse("{\"layerTypes\":[\"conv\"],\"hidden\":8,\"ffn\":8,\"vocab\":8,\"heads\":2,\"kvHeads\":2}");
  CHECK(wisp_model_shape_from_json(bad, "m", &s) == WISP_EFORMAT && strstr(wisp_last_error(), "m.headDim: missing"));
  cJSON_Delete(bad);
}

TEST(plan_cpu_default_ops) {
  fixture f;
  CHECKF(fx_init(&f, "cpu", NULL, NULL) == WISP_OK, "%s", wisp_last_error());
  wisp_plan *p = NULL;
  CHECKF(wisp_plan_resolve(&f.in, &p) == WISP_OK, "%s", wisp_last_error());
  const char *conv[] = {"rmsnorm", "matmul", "shortconv", "matmul", "rmsnorm", "matmul", "swiglu", "matmul"};
  const char *conv_sec[] = {"conv.in_proj.norm", "conv.in_proj", "conv.core", "conv.out_proj", "mlp.gate_up.norm", "mlp.gate_up", "", "mlp.down"};
  const char *attn_sec[] = {"attn.qkv.norm", "attn.qkv", "attn.core", "attn.o_proj", "mlp.gate_up.norm", "mlp.gate_up", "", "mlp.down"};
  for (int ph = 0; ph < 2; ph++) {
    const wisp_plan_phase *P = &p->phases[ph];
    CHECK(P->n_groups == 2 && P->groups[0].type == WISP_LAYER_CONV && P->groups[0].n_layers == 8);
    CHECK(P->groups[1].type == WISP_LAYER_ATTENTION && P->groups[1].n_layers == 6 && P->groups[1].layers[0] == 2);
    CHECK(P->n_prologue == 1 && !strcmp(P->prologue[0].kernel, "embed/q4_asym_gather"));
    CHECK(P->n_epilogue == 3 && !strcmp(P->epilogue[0].section, "head.norm") && !strcmp(P->epilogue[1].section, "head"));
    CHECK(!strcmp(P->epilogue[2].op, "sample"));
    for (int g = 0; g < 2; g++) {
      CHECK(P->groups[g].n_ops == 8);
      for (int i = 0; i < 8; i++) {
        const wisp_plan_op *op = &P->groups[g].ops[i];
        CHECKF(!strcmp(op->op, g == 0 ? conv[i] : (i == 2 ? "attention" : conv[i])), "op %d %s", i, op->op);
        CHECKF(!strcmp(op->section, g == 0 ? conv_sec[i] : attn_sec[i]), "section %d %s", i, op->section);
        CHECK(op->residual == (i == 3 || i == 7));
        CHECK(!strcmp(op->backend, "cpu") && op->wgsl[0] == 0);
      }
    }
  }
  /* rules #0-#3 are the integer products of throughput profiles (docs/cpu.md) */
  const wisp_plan_op *mm = find_op(p, WISP_PHASE_DECODE, 2, "attn.qkv");
  CHECK(mm && !strcmp(mm->kernel, "matmul/q4_avx2") && mm->kernel_from.kind == WISP_PROV_RULE);
  CHECK(!strcmp(mm->kernel_from.detail, "matmul.variant#4") && mm->rows == (16 + 2 * 8) * 64 && mm->cols == 1024);
  const wisp_plan_op *emb = find_op(p, WISP_PHASE_DECODE, -1, "embed");
  CHECK(emb->kernel_from.kind == WISP_PROV_DEFAULT);
  CHECK(p->phases[WISP_PHASE_DECODE].tokens == 1 && p->phases[WISP_PHASE_PREFILL].tokens == 512);
  wisp_plan_free(p);
  /* Without AVX2 the rule chain falls to the scalar kernel. */
  f.dev.has_avx2 = 0;
  CHECKF(wisp_plan_resolve(&f.in, &p) == WISP_OK, "%s", wisp_last_error());
  mm = find_op(p, WISP_PHASE_DECODE, 0, "conv.in_proj");
  CHECK(!strcmp(mm->kernel, "matmul/q4_scalar") && !strcmp(mm->kernel_from.detail, "matmul.variant#5"));
  wisp_plan_free(p);
  fx_free(&f);
}

TEST(plan_id_is_stable_and_canonical) {
  fixture f;
  CHECKF(fx_init(&f, "webgpu", "set.json", NULL) == WISP_OK, "%s", wisp_last_error());
  wisp_plan *a = NULL, *b = NULL;
  CHECKF(wisp_plan_resolve(&f.in, &a) == WISP_OK, "%s", wisp_last_error());
  CHECKF(wisp_plan_resolve(&f.in, &b) == WISP_OK, "%s", wisp_last_error());
  CHECK(strlen(a->id) == 64 && !strcmp(a->id, b->id) && !strcmp(a->json, b->json));
  /* The id is sha256 of the canonical JSON without planId. */
  cJSON *j = cJSON_Parse(a->json);
  CHECK(j);
  const cJSON *pid = cJSON_GetObjectItemCaseSensitive(j, "planId");
  CHECK(cJSON_IsString(pid) && !strcmp(pid->valuestring, a->id));
  char *again = wisp_json_canonical(j);
  CHECK(again && !strcmp(again, a->json)); /* already canonical */
  free(again);
  cJSON_DeleteItemFromObjectCaseSensitive(j, "planId");
  char *canon = wisp_json_canonical(j);
  char hex[65];
  wisp_sha256_hex(canon, strlen(canon), hex);
  CHECK(!strcmp(hex, a->id));
  CHECK(!strchr(a->json, '\n') && !strstr(a->json, "\": ") && !strstr(a->json, ", \""));
  free(canon);
  cJSON_Delete(j);
  wisp_plan_free(b);
  /* A different device gives a different plan id. */
  f.dev.subgroup_size = 64;
  f.dev.has_subgroups = 0;
  CHECKF(wisp_plan_resolve(&f.in, &b) == WISP_OK, "%s", wisp_last_error());
  CHECK(strcmp(a->id, b->id) != 0);
  wisp_plan_free(a);
  wisp_plan_free(b);
  fx_free(&f);
}

TEST(plan_canonical_json_form) {
  cJSON *j = cJSON_Parse("{\"b\":[1,2.5,{\"z\":true,\"a\":null}],\"a\":\"x\\\"y\\n\",\"c\":-3}");
  char *s = wisp_json_canonical(j);
  CHECKF(s && !strcmp(s, "{\"a\":\"x\\\"y\\n\",\"b\":[1,2.5,{\"a\":null,\"z\":true}],\"c\":-3}"), "%s", s ? s : "null");
  free(s);
  cJSON_Delete(j);
}

TEST(plan_webgpu_rules_and_manifest_geometry) {
  fixture f;
  CHECKF(fx_init(&f, "webgpu", NULL, NULL) == WISP_OK, "%s", wisp_last_error());
  wisp_plan *p = NULL;
  CHECKF(wisp_plan_resolve(&f.in, &p) == WISP_OK, "%s", wisp_last_error());
  /* decode conv.in_proj: subgroup kernel via the template rule, geometry from the candidate */
  const wisp_plan_op *op = find_op(p, WISP_PHASE_DECODE, 0, "conv.in_proj");
  CHECK(!strcmp(op->kernel, "matmul/q4_sg32") && !strcmp(op->kernel_from.detail, "matmul.variant#1"));
  CHECK(!strcmp(op->wgsl, "matvec_q4.wgsl") && !strcmp(op->entry, "main"));
  CHECK(op->geometry_from.kind == WISP_PROV_CANDIDATE && !strcmp(op->geometry_from.detail, "candidate MIX_M40: matvec.conv_in_proj"));
  CHECK(op->geometry.workgroup_size == 512 && op->geometry.rows_per_subgroup == 6 && op->workgroup[0] == 512);
  CHECK(!strcmp(op->manifest_variant, "carried"));
  /* decode mlp.down: the candidate has no entry, the knee has */
  op = find_op(p, WISP_PHASE_DECODE, 0, "mlp.down");
  CHECK(op->geometry_from.kind == WISP_PROV_KNEE && !strcmp(op->geometry_from.detail, "knee[1]: mlp_down"));
  CHECK(op->geometry.workgroup_size == 128);
  /* prefill with 512 tokens: the tiled kernel (rule 0), registry geometry */
  op = find_op(p, WISP_PHASE_PREFILL, 0, "conv.in_proj");
  CHECK(!strcmp(op->kernel, "matmul/q4_tiled") && !strcmp(op->kernel_from.detail, "matmul.variant#0"));
  CHECK(op->geometry_from.kind == WISP_PROV_DEFAULT && op->geometry.workgroup_size == 64);
  op = find_op(p, WISP_PHASE_DECODE, 0, "rmsnorm");
  CHECK(!strcmp(op->kernel, "rmsnorm/subgroup") && op->geometry.subgroup_size == 32);
  wisp_plan_free(p);
  /* A device whose limit is below the candidate's workgroup falls back to the knee and says why. */
  f.dev.max_workgroup_size = 256;
  CHECKF(wisp_plan_resolve(&f.in, &p) == WISP_OK, "%s", wisp_last_error());
  op = find_op(p, WISP_PHASE_DECODE, 0, "conv.in_proj");
  CHECK(op->geometry_from.kind == WISP_PROV_KNEE && op->geometry.workgroup_size == 128 && op->geometry.rows_per_subgroup == 4);
  CHECKF(strstr(op->note, "exceeds the device limit 256"), "%s", op->note);
  wisp_plan_free(p);
  /* No subgroups: a variant that requires them is never chosen. */
  f.dev.has_subgroups = 0;
  CHECKF(wisp_plan_resolve(&f.in, &p) == WISP_OK, "%s", wisp_last_error());
  op = find_op(p, WISP_PHASE_DECODE, 0, "conv.in_proj");
  CHECK(!strcmp(op->kernel, "matmul/q4_portable") && !strcmp(op->kernel_from.detail, "matmul.variant#3"));
  op = find_op(p, WISP_PHASE_DECODE, -2, "head");
  CHECK(!strcmp(op->kernel, "matmul/q4_portable") && !strcmp(op->kernel_from.detail, "matmul.variant#2"));
  CHECK(!strcmp(find_op(p, WISP_PHASE_DECODE, 0, "rmsnorm")->kernel, "rmsnorm/portable"));
  wisp_plan_free(p);
  /* More prefill tokens than the rule's threshold or fewer. */
  f.dev.has_subgroups = 1;
  f.in.prefill_tokens = 16;
  CHECKF(wisp_plan_resolve(&f.in, &p) == WISP_OK, "%s", wisp_last_error());
  CHECK(!strcmp(find_op(p, WISP_PHASE_PREFILL, 0, "conv.in_proj")->kernel, "matmul/q4_sg32"));
  CHECK(find_op(p, WISP_PHASE_PREFILL, 0, "conv.in_proj")->geometry_from.kind == WISP_PROV_KNEE);
  wisp_plan_free(p);
  fx_free(&f);
}

TEST(plan_patch_set_profile_kernel) {
  fixture f;
  CHECKF(fx_init(&f, "webgpu", "set.json", NULL) == WISP_OK, "%s", wisp_last_error());
  wisp_plan *p = NULL;
  CHECKF(wisp_plan_resolve(&f.in, &p) == WISP_OK, "%s", wisp_last_error());
  const wisp_plan_op *op = find_op(p, WISP_PHASE_DECODE, 4, "attn.qkv");
  CHECK(!strcmp(op->kernel, "wide") && !strcmp(op->wgsl, "matvec_q4_wide.wgsl"));
  CHECK(op->kernel_from.kind == WISP_PROV_PROFILE);
  CHECKF(!strcmp(op->kernel_from.detail, "profiles/set: runtime.inference.executionPatch.set[0]"), "%s", op->kernel_from.detail);
  CHECK(op->geometry_from.kind == WISP_PROV_PROFILE && op->geometry.workgroup_size == 128 && op->geometry.rows_per_subgroup == 2);
  CHECK(op->n_constants == 3 && op->constants[2].is_bool);
  /* prefill untouched */
  CHECK(!strcmp(find_op(p, WISP_PHASE_PREFILL, 4, "attn.qkv")->kernel, "matmul/q4_tiled"));
  CHECK(p->batching.batch_size == 8 && !strcmp(p->profile_id, "profiles/set"));
  CHECK(strstr(p->json, "\"kernel\":\"wide\""));
  wisp_plan_free(p);
  fx_free(&f);
  /* The same profile on the cpu backend: a WGSL kernel cannot be set. */
  CHECKF(fx_init(&f, "cpu", "set.json", NULL) == WISP_OK, "%s", wisp_last_error());
  CHECK(wisp_plan_resolve(&f.in, &p) == WISP_EINVAL);
  CHECKF(strstr(wisp_last_error(), FIX_PROFILES "/set.json: runtime.inference.executionPatch.set[0].kernelKey: 'wide' is a WGSL kernel"),
         "%s", wisp_last_error());
  fx_free(&f);
}

TEST(plan_patch_set_registry_kernel_cpu) {
  fixture f;
  CHECKF(fx_init(&f, "cpu", "cpu-set.json", NULL) == WISP_OK, "%s", wisp_last_error());
  wisp_plan *p = NULL;
  CHECKF(wisp_plan_resolve(&f.in, &p) == WISP_OK, "%s", wisp_last_error());
  for (int ph = 0; ph < 2; ph++) {
    const wisp_plan_op *op = find_op(p, ph, -2, "head");
    CHECK(!strcmp(op->kernel, "matmul/q4_scalar") && op->kernel_from.kind == WISP_PROV_PROFILE);
    CHECK(!strcmp(find_op(p, ph, 0, "mlp.down")->kernel, "matmul/q4_avx2"));
  }
  wisp_plan_free(p);
  fx_free(&f);
}

TEST(plan_patch_set_with_layers) {
  fixture f;
  CHECKF(fx_init(&f, "webgpu", "set-layers.json", NULL) == WISP_OK, "%s", wisp_last_error());
  wisp_plan *p = NULL;
  CHECKF(wisp_plan_resolve(&f.in, &p) == WISP_OK, "%s", wisp_last_error());
  CHECK(!strcmp(find_op(p, WISP_PHASE_DECODE, 2, "mlp.down")->kernel, "matmul/q4_portable"));
  CHECK(!strcmp(find_op(p, WISP_PHASE_DECODE, 3, "mlp.down")->kernel, "matmul/q4_portable"));
  CHECK(!strcmp(find_op(p, WISP_PHASE_DECODE, 1, "mlp.down")->kernel, "matmul/q4_sg32"));
  CHECK(!strcmp(find_op(p, WISP_PHASE_DECODE, 4, "mlp.down")->kernel, "matmul/q4_sg32"));
  CHECK(!strcmp(find_op(p, WISP_PHASE_PREFILL, 2, "mlp.down")->kernel, "matmul/q4_tiled"));
  /* Layers 2 and 3 now form groups of their own. */
  const wisp_plan_phase *D = &p->phases[WISP_PHASE_DECODE];
  CHECK(D->n_groups == 4);
  CHECK(D->groups[D->layer_group[3]].n_layers == 1 && D->groups[D->layer_group[2]].n_layers == 1);
  CHECK(D->groups[D->layer_group[0]].n_layers == 7 && D->groups[D->layer_group[4]].n_layers == 5);
  CHECK(p->phases[WISP_PHASE_PREFILL].n_groups == 2);
  wisp_plan_free(p);
  fx_free(&f);
}

TEST(plan_patch_add_and_unfused_residual) {
  fixture f;
  CHECKF(fx_init(&f, "webgpu", "add.json", NULL) == WISP_OK, "%s", wisp_last_error());
  wisp_plan *p = NULL;
  CHECKF(wisp_plan_resolve(&f.in, &p) == WISP_OK, "%s", wisp_last_error());
  for (int ph = 0; ph < 2; ph++) {
    int n = 0;
    const wisp_plan_op *ops = wisp_plan_layer_ops(p, ph, 2, &n);
    /* rmsnorm, qkv, +rmsnorm(added), attention, o_proj, residual_add, rmsnorm, gate_up, swiglu, down, residual_add */
    CHECKF(n == 11, "n=%d", n);
    CHECK(!strcmp(ops[2].op, "rmsnorm") && ops[2].section[0] == 0 && !strcmp(ops[2].kernel, "rmsnorm/portable"));
    CHECK(ops[2].kernel_from.kind == WISP_PROV_PROFILE && !strcmp(ops[3].op, "attention"));
    CHECK(!strcmp(ops[5].op, "residual_add") && !ops[4].residual && !strcmp(ops[10].op, "residual_add"));
    ops = wisp_plan_layer_ops(p, ph, 4, &n);
    CHECK(n == 10);
    ops = wisp_plan_layer_ops(p, ph, 0, &n);
    CHECK(n == 10 && !strcmp(ops[4].op, "residual_add"));
  }
  CHECK(!p->fusions.residual_add);
  wisp_plan_free(p);
  fx_free(&f);
}

TEST(plan_patch_remove) {
  fixture f;
  CHECKF(fx_init(&f, "webgpu", "remove.json", NULL) == WISP_OK, "%s", wisp_last_error());
  wisp_plan *p = NULL;
  CHECKF(wisp_plan_resolve(&f.in, &p) == WISP_OK, "%s", wisp_last_error());
  CHECK(p->phases[WISP_PHASE_DECODE].n_epilogue == 2 && !find_op(p, WISP_PHASE_DECODE, -2, "sample"));
  CHECK(p->phases[WISP_PHASE_PREFILL].n_epilogue == 3 && find_op(p, WISP_PHASE_PREFILL, -2, "sample"));
  wisp_plan_free(p);
  fx_free(&f);
}

TEST(plan_not_implemented_reported) {
  fixture f;
  CHECKF(fx_init(&f, "cpu", "unimpl.json", NULL) == WISP_OK, "%s", wisp_last_error());
  wisp_plan *p = NULL;
  CHECKF(wisp_plan_resolve(&f.in, &p) == WISP_OK, "%s", wisp_last_error());
  fx_free(&f); /* the plan owns its memory */
  CHECK(p->n_not_implemented == 5 && !strcmp(p->not_implemented[0], "not implemented: runtime.loading"));
  CHECK(!strcmp(p->profile_id, "profiles/unimpl") && !strcmp(p->batching.stop_check_mode, "batch"));
  FILE *null = fopen("/dev/null", "w");
  CHECK(null);
  wisp_plan_print(p, null);
  fclose(null);
  CHECK(strstr(p->json, "\"notImplemented\":[\"not implemented: runtime.loading\""));
  wisp_plan_free(p);
  fx_free(&f);
}

typedef struct { const char *backend, *profile, *caps; wisp_status st; const char *msg; } bad_plan;

static const bad_plan k_bad[] = {
    {"webgpu", "bad-unknown-op.json", NULL, WISP_EINVAL,
     FIX_PROFILES "/bad-unknown-op.json: runtime.inference.executionPatch.set[0].op: 'q_proj' matches no op in section decode"},
    {"webgpu", "bad-wrong-op-kernel.json", NULL, WISP_EINVAL,
     "executionPatch.set[0].kernelKey: 'rmsnorm/portable' is a rmsnorm kernel; op 'matmul' (attn.qkv) needs a matmul kernel"},
    {"webgpu", "bad-layers.json", NULL, WISP_EINVAL, "executionPatch.set[0].layers[0]: layer 99 out of range (the model has 14 layers)"},
    {"webgpu", "bad-requires.json", "hasSubgroups=false", WISP_EDEVICE,
     "executionPatch.set[0].kernelKey: 'wide_sg' requires 'subgroups', which the device lacks"},
    {"cpu", "cpu-set.json", "hasAvx2=false", WISP_OK, NULL},
};

TEST(plan_bad_patches) {
  for (size_t i = 0; i < sizeof k_bad / sizeof k_bad[0]; i++) {
    fixture f;
    CHECKF(fx_init(&f, k_bad[i].backend, k_bad[i].profile, k_bad[i].caps) == WISP_OK, "%s: %s", k_bad[i].profile, wisp_last_error());
    wisp_plan *p = NULL;
    wisp_status st = wisp_plan_resolve(&f.in, &p);
    fx_free(&f);
    wisp_plan_free(p);
    CHECKF(st == k_bad[i].st, "%s: status %d want %d (%s)", k_bad[i].profile, st, k_bad[i].st, wisp_last_error());
    if (k_bad[i].msg) CHECKF(strstr(wisp_last_error(), k_bad[i].msg), "%s: '%s'", k_bad[i].profile, wisp_last_error());
  }
}

TEST(plan_bad_patches_cli) {
  for (size_t i = 0; i < sizeof k_bad / sizeof k_bad[0]; i++) {
    if (!k_bad[i].msg) continue;
    char args[1024], out[4096];
    snprintf(args, sizeof args,
             "plan-file --shape " SEED_MANIFEST " --backend %s --registry %s --kernels-dir " FIX_KERNELS
             " --profiles-dir " FIX_PROFILES " --profile " FIX_PROFILES "/%s%s%s",
             k_bad[i].backend, !strcmp(k_bad[i].backend, "cpu") ? WISP_DEFAULT_REGISTRY : FIX_REGISTRY_GPU, k_bad[i].profile,
             k_bad[i].caps ? " --cap " : "", k_bad[i].caps ? k_bad[i].caps : "");
    int rc = run_wisp(out, sizeof out, args);
    CHECKF(rc == 1, "%s: rc=%d %s", k_bad[i].profile, rc, out);
    CHECKF(strstr(out, k_bad[i].msg), "%s: %s", k_bad[i].profile, out);
  }
}

TEST(plan_required_feature_missing) {
  fixture f;
  CHECKF(fx_init(&f, "webgpu", NULL, "hasSubgroups=false") == WISP_OK, "%s", wisp_last_error());
  wisp_registry_free(f.reg);
  wisp_registry_options ro = {0};
  ro.kernels_dir = FIX_KERNELS;
  CHECK(wisp_registry_load(PD "/registry-subgroups-only.json", &ro, &f.reg) == WISP_OK);
  f.in.registry = f.reg;
  wisp_plan *p = NULL;
  CHECK(wisp_plan_resolve(&f.in, &p) == WISP_EDEVICE && !p);
  CHECKF(strstr(wisp_last_error(), PD "/registry-subgroups-only.json: operations.rmsnorm: no variant usable for backend webgpu on this device (subgroup: requires subgroups, which the device lacks)"),
         "%s", wisp_last_error());
  fx_free(&f);
  /* f32 weights pick the f32 variants (embed gather, matmul). */
  CHECKF(fx_init(&f, "cpu", NULL, NULL) == WISP_OK, "%s", wisp_last_error());
  f.shape.quant_bits = 32;
  CHECKF(wisp_plan_resolve(&f.in, &p) == WISP_OK, "%s", wisp_last_error());
  CHECK(!strcmp(p->phases[WISP_PHASE_DECODE].prologue[0].kernel, "embed/f32_gather"));
  wisp_plan_free(p);
  p = NULL;
  fx_free(&f);
  /* A rule producing a name that is no variant. */
  CHECKF(fx_init(&f, "webgpu", NULL, "subgroupSize=16") == WISP_OK, "%s", wisp_last_error());
  CHECK(wisp_plan_resolve(&f.in, &p) == WISP_EFORMAT);
  CHECKF(strstr(wisp_last_error(), "ruleChains.matmul.variant: value 'q4_sg16' is not a variant of operation 'matmul'"), "%s",
         wisp_last_error());
  fx_free(&f);
}

TEST(plan_file_cli) {
  static char out[1 << 17];
  int rc = run_wisp(out, sizeof out, "plan-file --shape " SEED_MANIFEST " --cap hasAvx2=true --json");
  CHECKF(rc == 0, "rc=%d %s", rc, out);
  cJSON *j = cJSON_Parse(out);
  CHECK(j && cJSON_IsString(cJSON_GetObjectItemCaseSensitive(j, "planId")));
  char id[65];
  snprintf(id, sizeof id, "%s", cJSON_GetObjectItemCaseSensitive(j, "planId")->valuestring);
  cJSON_Delete(j);
  rc = run_wisp(out, sizeof out, "plan-file --shape " SEED_MANIFEST " --cap hasAvx2=true --json");
  CHECK(rc == 0 && strstr(out, id)); /* same inputs, same id, across processes */
  rc = run_wisp(out, sizeof out, "plan-file --shape " SEED_MANIFEST " --cap hasAvx2=true");
  CHECK(rc == 0 && strstr(out, id) && strstr(out, "matmul conv.in_proj") && strstr(out, "rule matmul.variant#4"));
  rc = run_wisp(out, sizeof out,
                "plan-file --shape " SEED_MANIFEST " --backend webgpu --registry " FIX_REGISTRY_GPU " --kernels-dir " FIX_KERNELS
                " --profiles-dir " FIX_PROFILES " --profile set");
  CHECKF(rc == 0 && strstr(out, "manifest-candidate candidate MIX_M40: matvec.conv_in_proj") && strstr(out, "profile profiles/set"),
         "%s", out);
  rc = run_wisp(out, sizeof out,
                "plan-file --shape " SEED_MANIFEST " --backend webgpu --registry " FIX_REGISTRY_GPU " --kernels-dir " FIX_KERNELS
                " --profile " FIX_PROFILES "/bad-unknown-op.json");
  CHECK(rc == 1 && strstr(out, "wisp plan-file: " FIX_PROFILES "/bad-unknown-op.json: runtime.inference.executionPatch.set[0].op"));
  /* The seed profile: the digest step names both sides; structure-only then fails on its ops. */
  rc = run_wisp(out, sizeof out, "plan-file --shape " SEED_MANIFEST " --profile " SEED_PROFILE);
  CHECK(rc == 1 && strstr(out, "sha256:275a1f7c"));
  rc = run_wisp(out, sizeof out, "plan-file --shape " SEED_MANIFEST " --backend webgpu --registry " FIX_REGISTRY_GPU
                " --kernels-dir " FIX_KERNELS " --profile " SEED_PROFILE " --no-digests");
  CHECKF(rc == 1 && strstr(out, "set[1].op: 'q_proj' matches no op in section decode"), "%s", out);
  rc = run_wisp(out, sizeof out, "plan-file --shape " SEED_MANIFEST " --backend metal");
  CHECK(rc == 2 && strstr(out, "unknown backend 'metal'"));
}

TEST(plan_manifest_helpers) {
  cJSON *m = NULL;
  CHECK(wisp_json_load(SEED_MANIFEST, &m) == WISP_OK);
  wisp_model_shape s;
  const cJSON *cand = NULL, *knee = NULL;
  CHECKF(wisp_plan_manifest_parts(m, SEED_MANIFEST, &s, &cand, &knee) == WISP_OK, "%s", wisp_last_error());
  CHECK(s.n_layers == 14 && cJSON_IsObject(cand) && cJSON_GetArraySize(knee) == 6);
  wisp_device_caps d;
  wisp_device_caps_default(&d, "webgpu");
  d.has_subgroups = 0;
  d.subgroup_size = 64;
  wisp_device_caps_from_manifest(&d, m);
  CHECK(d.has_subgroups && d.has_f16 && d.subgroup_size == 32);
  wisp_device_caps_default(&d, "cpu");
  wisp_device_caps_from_manifest(&d, m);
  CHECK(!d.has_subgroups && d.subgroup_size == 0);
  cJSON_Delete(m);
  m = cJSON_Parse("{\"runtime\":{\"shape\":{}}}");
  CHECK(wisp_plan_manifest_parts(m, "x.json", &s, &cand, &knee) == WISP_EFORMAT);
  CHECKF(strstr(wisp_last_error(), "x.json: runtime.shape.layerTypes: missing required field"), "%s", wisp_last_error());
  cJSON_Delete(m);
}
