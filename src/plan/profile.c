/* See profile.h. Messages name the profile file and the JSON path. */
#include "plan/profile.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/registry.h"
#include "plan/rules.h"
#include "util/err.h"

#define FAIL(...) wisp_fail(WISP_EFORMAT, __VA_ARGS__)
#define EP "runtime.inference.executionPatch"
#define MAX_DEPTH 32

typedef struct {
  char path[1024];
  const char *id, *intent;
  const cJSON *compatible; /* array or NULL */
} loaded_info;

typedef struct {
  wisp_profile *p;
  const wisp_profile_options *opt;
  const char *dir, *kernels_dir;
  int depth;
  loaded_info *stack[MAX_DEPTH];
  int n_loaded;
  loaded_info loaded[MAX_DEPTH * 2];
  const char *eff_intent;
  const cJSON *eff_compatible;
  const char *cur_id; /* id of the profile being parsed, for provenance */
} ploader;

/* Appends one element to an arena array (grows by copying). */
static void *push(wisp_arena **a, void *arr, int *n, size_t size) {
  char *na = wisp_arena_alloc(a, size * (size_t)(*n + 1));
  if (!na) return NULL;
  if (*n) memcpy(na, arr, size * (size_t)*n);
  (*n)++;
  return na;
}

static wisp_status add_str(wisp_profile *p, const char ***arr, int *n, const char *s) {
  for (int i = 0; i < *n; i++)
    if (!strcmp((*arr)[i], s)) return WISP_OK;
  char *d = wisp_arena_strdup(&p->arena, s);
  const char **na = push(&p->arena, (void *)*arr, n, sizeof(char *));
  if (!d || !na) return wisp_fail(WISP_ENOMEM, "out of memory");
  na[*n - 1] = d;
  *arr = na;
  return WISP_OK;
}

static wisp_status not_impl(wisp_profile *p, const char *what) {
  char buf[512];
  wisp_path(buf, sizeof buf, "not implemented: %s", what);
  return add_str(p, &p->not_implemented, &p->n_not_implemented, buf);
}

static int in_list(const char *s, const char *const *list) {
  for (; *list; list++)
    if (!strcmp(s, *list)) return 1;
  return 0;
}

static int str_in_array(const char *s, const cJSON *arr) {
  for (const cJSON *c = arr ? arr->child : NULL; c; c = c->next)
    if (cJSON_IsString(c) && !strcmp(c->valuestring, s)) return 1;
  return 0;
}

static void list_array(const cJSON *arr, char *out, size_t cap) {
  size_t n = 0;
  out[0] = 0;
  for (const cJSON *c = arr ? arr->child : NULL; c; c = c->next) {
    if (!cJSON_IsString(c)) continue;
    int k = snprintf(out + n, cap - n, "%s%s", n ? ", " : "", c->valuestring);
    if (k < 0 || (size_t)k >= cap - n) break;
    n += (size_t)k;
  }
}

/* A profile id (NAME, profiles/NAME or profiles/NAME.json) as a file of
 * the profiles dir (the built-in one unless --profiles-dir): never a file
 * of the working directory, so that what a reference means does not
 * depend on where wisp runs. */
static wisp_status resolve_ref(ploader *L, const char *ref, char *out, size_t cap) {
  size_t n = strlen(ref);
  const char *name = !strncmp(ref, "profiles/", 9) ? ref + 9 : ref;
  if (!*name || name[0] == '/' || strstr(name, "..")) return wisp_fail(WISP_EINVAL, "profile '%s': bad name", ref);
  if (n > 5 && !strcmp(ref + n - 5, ".json")) wisp_path(out, cap, "%s/%s", L->dir, name);
  else wisp_path(out, cap, "%s/%s.json", L->dir, name);
  return WISP_OK;
}

static const char *const k_sections[] = {"prefill", "decode", "all", NULL};
static const char *const k_wisp_ops[] = {"embed", "rmsnorm", "matmul", "shortconv", "attention", "swiglu",
                                         "residual_add", "sample", "conv.in_proj", "conv.out_proj",
                                         "attn.qkv", "attn.o_proj", "mlp.gate_up", "mlp.down", "head", "embed",
                                         "conv.in_proj.norm", "attn.qkv.norm", "mlp.gate_up.norm",
                                         "head.norm", "conv.core", "attn.core",
                                         /* Qwen 3.5 ops and sections, and the Hugging Face module names
                                            that plan resolution maps onto them for qwen3_5 (plan.c) */
                                         "attention_gated", "gated_deltanet", "lin.in_proj", "lin.out_proj",
                                         "lin.in_proj.norm", "lin.core", "q_proj", "k_proj", "v_proj", "o_proj",
                                         "gate_proj", "up_proj", "down_proj",
                                         /* the row ops of Qwen2 and Gemma 3 */
                                         "geglu", "add_bias", "add", "scale", NULL};

static wisp_status warn(wisp_profile *p, const char *fmt, const char *file, const char *path, const char *val) {
  char buf[768];
  wisp_path(buf, sizeof buf, fmt, file, path, val);
  return add_str(p, &p->warnings, &p->n_warnings, buf);
}

static wisp_status req_string(const cJSON *o, const char *key, const char *file, const char *path, const char **out) {
  const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
  if (!j) return FAIL("%s: %s.%s: missing required field", file, path, key);
  if (!cJSON_IsString(j) || !j->valuestring[0])
    return FAIL("%s: %s.%s: expected a non-empty string, got %s", file, path, key, wisp_json_type(j));
  *out = j->valuestring;
  return WISP_OK;
}

static wisp_status check_fields(const cJSON *o, const char *const *allowed, const char *file, const char *path) {
  for (const cJSON *c = o->child; c; c = c->next)
    if (!in_list(c->string, allowed)) return FAIL("%s: %s.%s: unknown field", file, path, c->string);
  return WISP_OK;
}

static int digest_ok(const char *d) {
  if (strncmp(d, "sha256:", 7) || strlen(d) != 71) return 0;
  for (const char *p = d + 7; *p; p++)
    if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'))) return 0;
  return 1;
}

wisp_status wisp_kernel_digest_check(const char *file, const char *digest, char actual[72]) {
  char hex[65];
  wisp_status st = wisp_sha256_file_hex(file, hex);
  if (st) return st;
  snprintf(actual, 72, "sha256:%s", hex);
  if (strcmp(actual, digest)) return wisp_fail(WISP_EHASH, "%s: digest mismatch: expected %s, file has %s", file, digest, actual);
  return WISP_OK;
}

static wisp_status parse_kernel(ploader *L, const cJSON *e, const char *file, const char *path) {
  wisp_profile *p = L->p;
  wisp_status st;
  static const char *const ek[] = {"key", "kernel", NULL};
  static const char *const kk[] = {"kernel", "entry", "digest", "precision", "constants", "requires", NULL};
  if (!cJSON_IsObject(e)) return FAIL("%s: %s: expected an object, got %s", file, path, wisp_json_type(e));
  if ((st = check_fields(e, ek, file, path))) return st;
  wisp_profile_kernel k = {0};
  if ((st = req_string(e, "key", file, path, &k.key))) return st;
  if (strchr(k.key, '/')) return FAIL("%s: %s.key: '%s' must not contain '/' (reserved for OP/VARIANT)", file, path, k.key);
  const cJSON *kj = cJSON_GetObjectItemCaseSensitive(e, "kernel");
  char kp[600];
  wisp_path(kp, sizeof kp, "%s.kernel", path);
  if (!kj) return FAIL("%s: %s: missing required field", file, kp);
  if (!cJSON_IsObject(kj)) return FAIL("%s: %s: expected an object, got %s", file, kp, wisp_json_type(kj));
  if ((st = check_fields(kj, kk, file, kp))) return st;
  if ((st = req_string(kj, "kernel", file, kp, &k.file))) return st;
  if (k.file[0] == '/' || strstr(k.file, "..")) return FAIL("%s: %s.kernel: '%s' must be relative to the kernels dir", file, kp, k.file);
  if ((st = req_string(kj, "entry", file, kp, &k.entry))) return st;
  if ((st = req_string(kj, "digest", file, kp, &k.digest))) return st;
  if (!digest_ok(k.digest)) return FAIL("%s: %s.digest: '%s' is not sha256:<64 lower-case hex digits>", file, kp, k.digest);
  const cJSON *x;
  if ((x = cJSON_GetObjectItemCaseSensitive(kj, "constants"))) {
    if (!cJSON_IsObject(x)) return FAIL("%s: %s.constants: expected an object, got %s", file, kp, wisp_json_type(x));
    for (const cJSON *c = x->child; c; c = c->next)
      if (!cJSON_IsNumber(c) && !cJSON_IsBool(c))
        return FAIL("%s: %s.constants.%s: expected a number or boolean, got %s", file, kp, c->string, wisp_json_type(c));
    k.constants = x;
  }
  if ((x = cJSON_GetObjectItemCaseSensitive(kj, "precision"))) {
    if (!cJSON_IsObject(x)) return FAIL("%s: %s.precision: expected an object, got %s", file, kp, wisp_json_type(x));
    k.precision = x;
    const cJSON *kv = cJSON_GetObjectItemCaseSensitive(x, "kvDtype");
    if (kv && !(cJSON_IsString(kv) && (!strcmp(kv->valuestring, "f16") || !strcmp(kv->valuestring, "f32")))) {
      char *txt = cJSON_PrintUnformatted(kv);
      wisp_status bad = FAIL("%s: %s.precision.kvDtype: %s is not a KV dtype wisp knows (\"f16\" or \"f32\")", file, kp,
                             txt ? txt : "?");
      cJSON_free(txt);
      return bad;
    }
    if (kv) k.kv_dtype = kv->valuestring;
  }
  if ((x = cJSON_GetObjectItemCaseSensitive(kj, "requires"))) {
    if (!cJSON_IsArray(x)) return FAIL("%s: %s.requires: expected an array, got %s", file, kp, wisp_json_type(x));
    int n = cJSON_GetArraySize(x), i = 0;
    k.requires = wisp_arena_alloc(&p->arena, sizeof(char *) * (size_t)(n ? n : 1));
    if (!k.requires) return wisp_fail(WISP_ENOMEM, "out of memory");
    for (const cJSON *c = x->child; c; c = c->next, i++) {
      if (!cJSON_IsString(c) || !wisp_feature_known(c->valuestring))
        return FAIL("%s: %s.requires[%d]: expected a feature name (subgroups, shader-f16, avx2)", file, kp, i);
      k.requires[i] = c->valuestring;
    }
    k.n_requires = n;
  }
  char src[700];
  wisp_path(src, sizeof src, "%s: %s", L->cur_id, path);
  k.source = wisp_arena_strdup(&p->arena, src);
  k.profile_file = wisp_arena_strdup(&p->arena, file);
  k.json_path = wisp_arena_strdup(&p->arena, path);
  if (!L->opt || !L->opt->skip_digests) {
    char fp[1024], actual[72];
    wisp_path(fp, sizeof fp, "%s/%s", L->kernels_dir, k.file);
    if (!wisp_file_exists(fp))
      return wisp_fail(WISP_EIO,
                       "%s: %s.kernel: '%s' is not one of this build's kernels (no %s); profile digest %s cannot be "
                       "matched (no local digest; --no-digests checks structure only)",
                       file, kp, k.file, fp, k.digest);
    st = wisp_kernel_digest_check(fp, k.digest, actual);
    if (st == WISP_EHASH)
      return wisp_fail(WISP_EHASH, "%s: %s.digest: digest mismatch for '%s': profile has %s, file has %s", file, kp,
                       k.file, k.digest, actual);
    if (st) return st;
    char *srcw = wisp_slurp(fp, NULL);
    if (!srcw) return WISP_EIO;
    int has = wisp_wgsl_has_entry(srcw, k.entry);
    free(srcw);
    if (!has) return FAIL("%s: %s.entry: '%s' is not a function in %s", file, kp, k.entry, fp);
  }
  /* A child's key replaces an inherited one; a key twice in one file is an error. */
  for (int i = 0; i < p->n_kernels; i++)
    if (!strcmp(p->kernels[i].key, k.key)) {
      if (!strncmp(p->kernels[i].source, L->cur_id, strlen(L->cur_id)) && p->kernels[i].source[strlen(L->cur_id)] == ':')
        return FAIL("%s: %s.key: duplicate kernel key '%s'", file, path, k.key);
      p->kernels[i] = k;
      return WISP_OK;
    }
  wisp_profile_kernel *na = push(&p->arena, p->kernels, &p->n_kernels, sizeof k);
  if (!na) return wisp_fail(WISP_ENOMEM, "out of memory");
  na[p->n_kernels - 1] = k;
  p->kernels = na;
  return WISP_OK;
}

static wisp_status parse_patch(ploader *L, const cJSON *e, wisp_patch_verb verb, const char *file, const char *path) {
  wisp_profile *p = L->p;
  wisp_status st;
  static const char *const set_k[] = {"section", "op", "kernelKey", "layers", NULL};
  static const char *const add_k[] = {"section", "op", "kernelKey", "layers", "after", "before", NULL};
  static const char *const rm_k[] = {"section", "op", "layers", NULL};
  if (!cJSON_IsObject(e)) return FAIL("%s: %s: expected an object, got %s", file, path, wisp_json_type(e));
  if ((st = check_fields(e, verb == WISP_PATCH_SET ? set_k : verb == WISP_PATCH_ADD ? add_k : rm_k, file, path))) return st;
  wisp_patch w = {0};
  w.verb = verb;
  if ((st = req_string(e, "section", file, path, &w.section))) return st;
  if (!in_list(w.section, k_sections))
    return FAIL("%s: %s.section: unknown section '%s' (prefill, decode, all)", file, path, w.section);
  if ((st = req_string(e, "op", file, path, &w.op))) return st;
  if (verb != WISP_PATCH_REMOVE) {
    if ((st = req_string(e, "kernelKey", file, path, &w.kernel_key))) return st;
    if (!strchr(w.kernel_key, '/') && !wisp_profile_kernel_find(p, w.kernel_key))
      return FAIL("%s: %s.kernelKey: unknown kernel '%s' (not in addKernels; registry kernels are written OP/VARIANT)",
                  file, path, w.kernel_key);
  }
  if (verb == WISP_PATCH_ADD) {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(e, "after"), *b = cJSON_GetObjectItemCaseSensitive(e, "before");
    if (!!a == !!b) return FAIL("%s: %s: give exactly one of 'after' and 'before'", file, path);
    if ((st = req_string(e, a ? "after" : "before", file, path, a ? &w.after : &w.before))) return st;
    const char *anchor = a ? w.after : w.before;
    if (!in_list(anchor, k_wisp_ops) &&
        (st = warn(p, "%s: %s: anchor '%s' is not a wisp op or section; plan resolution will fail", file, path, anchor)))
      return st;
  } else if (!in_list(w.op, k_wisp_ops) &&
             (st = warn(p, "%s: %s.op: '%s' is not a wisp op or section; plan resolution will fail", file, path, w.op)))
    return st;
  const cJSON *ly = cJSON_GetObjectItemCaseSensitive(e, "layers");
  if (ly) {
    if (!cJSON_IsArray(ly) || !cJSON_GetArraySize(ly))
      return FAIL("%s: %s.layers: expected a non-empty array of layer indices", file, path);
    w.n_layers = cJSON_GetArraySize(ly);
    w.layers = wisp_arena_alloc(&p->arena, sizeof(int) * (size_t)w.n_layers);
    if (!w.layers) return wisp_fail(WISP_ENOMEM, "out of memory");
    int i = 0;
    for (const cJSON *c = ly->child; c; c = c->next, i++) {
      if (!wisp_json_is_int(c) || c->valuedouble < 0)
        return FAIL("%s: %s.layers[%d]: expected a non-negative integer, got %s", file, path, i, wisp_json_type(c));
      w.layers[i] = (int)c->valuedouble;
    }
  }
  char src[700];
  wisp_path(src, sizeof src, "%s: %s", L->cur_id, path);
  w.source = wisp_arena_strdup(&p->arena, src);
  w.profile_file = wisp_arena_strdup(&p->arena, file);
  w.json_path = wisp_arena_strdup(&p->arena, path);
  wisp_patch *na = push(&p->arena, p->patches, &p->n_patches, sizeof w);
  if (!na || !w.source) return wisp_fail(WISP_ENOMEM, "out of memory");
  na[p->n_patches - 1] = w;
  p->patches = na;
  return WISP_OK;
}

static wisp_status parse_exec_patch(ploader *L, const cJSON *ep, const char *file) {
  wisp_status st;
  static const char *const keys[] = {"addKernels", "set", "add", "remove", NULL};
  if (!cJSON_IsObject(ep)) return FAIL("%s: " EP ": expected an object, got %s", file, wisp_json_type(ep));
  if ((st = check_fields(ep, keys, file, EP))) return st;
  const char *verbs[] = {"addKernels", "set", "add", "remove"};
  for (int v = 0; v < 4; v++) {
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(ep, verbs[v]);
    if (!arr) continue;
    if (!cJSON_IsArray(arr)) return FAIL("%s: " EP ".%s: expected an array, got %s", file, verbs[v], wisp_json_type(arr));
    int i = 0;
    for (const cJSON *e = arr->child; e; e = e->next, i++) {
      char path[256];
      wisp_path(path, sizeof path, EP ".%s[%d]", verbs[v], i);
      st = v == 0 ? parse_kernel(L, e, file, path)
                  : parse_patch(L, e, v == 1 ? WISP_PATCH_SET : v == 2 ? WISP_PATCH_ADD : WISP_PATCH_REMOVE, file, path);
      if (st) return st;
    }
  }
  return WISP_OK;
}

/* ---- batching / decodeLoop / session ---- */

typedef struct { const char *key; size_t off; } int_field;
static const int_field k_batch_ints[] = {
    {"batchSize", offsetof(wisp_batching, batch_size)},
    {"readbackInterval", offsetof(wisp_batching, readback_interval)},
    {"ringTokens", offsetof(wisp_batching, ring_tokens)},
    {"ringStop", offsetof(wisp_batching, ring_stop)},
    {"ringStaging", offsetof(wisp_batching, ring_staging)},
    {"maxBatchDecodeTokens", offsetof(wisp_batching, max_batch_decode_tokens)},
};

/* Parses a batching-like object. `p` non-NULL collects unknown keys. */
static wisp_status parse_batching(const cJSON *o, wisp_batching *b, const char *file, const char *path, wisp_profile *p) {
  if (!cJSON_IsObject(o)) return FAIL("%s: %s: expected an object, got %s", file, path, wisp_json_type(o));
  memset(b, 0, sizeof *b);
  b->present = 1;
  for (const cJSON *c = o->child; c; c = c->next) {
    size_t i;
    for (i = 0; i < sizeof k_batch_ints / sizeof k_batch_ints[0]; i++)
      if (!strcmp(c->string, k_batch_ints[i].key)) break;
    if (i < sizeof k_batch_ints / sizeof k_batch_ints[0]) {
      if (!wisp_json_is_int(c) || c->valuedouble < 0)
        return FAIL("%s: %s.%s: expected a non-negative integer, got %s", file, path, c->string, wisp_json_type(c));
      *(int *)((char *)b + k_batch_ints[i].off) = (int)c->valuedouble;
    } else if (!strcmp(c->string, "stopCheckMode") || !strcmp(c->string, "readbackMode")) {
      if (!cJSON_IsString(c)) return FAIL("%s: %s.%s: expected a string, got %s", file, path, c->string, wisp_json_type(c));
      if (!strcmp(c->string, "stopCheckMode")) b->stop_check_mode = c->valuestring;
      else b->readback_mode = c->valuestring;
    } else if (!strcmp(c->string, "submitLatencyThresholdMs")) {
      if (cJSON_IsNull(c)) b->has_submit_latency = 0;
      else if (cJSON_IsNumber(c)) { b->has_submit_latency = 1; b->submit_latency_threshold_ms = c->valuedouble; }
      else return FAIL("%s: %s.%s: expected a number or null, got %s", file, path, c->string, wisp_json_type(c));
    } else if (!strcmp(c->string, "disableCommandBatching")) {
      if (!cJSON_IsBool(c)) return FAIL("%s: %s.%s: expected a boolean, got %s", file, path, c->string, wisp_json_type(c));
      b->disable_command_batching = cJSON_IsTrue(c);
    } else if (p) {
      char w[300];
      wisp_path(w, sizeof w, "%s.%s", path, c->string);
      wisp_status st = not_impl(p, w);
      if (st) return st;
    }
  }
  return WISP_OK;
}

typedef struct { const char *key; size_t off; int sw; } bool_switch;
static const bool_switch k_session_bools[] = {
    {"fuseResidualAdd", offsetof(wisp_fusions, residual_add), WISP_SW_RESIDUAL_ADD},
    {"useGreedyLmHeadArgmaxFusion", offsetof(wisp_fusions, greedy_head_argmax), WISP_SW_HEAD_ARGMAX},
    {"usePostFfnNextInputRMSNormPairFusion", offsetof(wisp_fusions, post_ffn_norm_pair), WISP_SW_POST_FFN_NORM_PAIR},
    {"useFusedQKVSplitQKNormRoPE", offsetof(wisp_fusions, fused_qkv_split_norm_rope), WISP_SW_QKV_NORM_ROPE},
    {"useLinearAttentionQKVZProjectionFusion", offsetof(wisp_fusions, lin_qkvz), WISP_SW_LIN_QKVZ},
    {"useLinearAttentionABProjectionFusion", offsetof(wisp_fusions, lin_ab), WISP_SW_LIN_AB},
    {"useLinearAttentionFusedDecodeCore", offsetof(wisp_fusions, lin_core), WISP_SW_LIN_CORE},
};

static const char *const k_switch_names[WISP_SW_COUNT] = {
    "fuseResidualAdd", "usePostFfnNextInputRMSNormPairFusion", "fusedFfnQ4K.decode", "useGreedyLmHeadArgmaxFusion",
    "lmHeadArgmaxQ4K", "attentionDecodeOnline.useOutputGateFusion",
    "attentionDecodeOnline.useDirectContiguousKVLayout", "useLinearAttentionQKVZProjectionFusion",
    "useLinearAttentionABProjectionFusion", "useLinearAttentionFusedDecodeCore", "useFusedQKVSplitQKNormRoPE",
    "decodeLoop"};

const char *wisp_switch_name(int i) { return i >= 0 && i < WISP_SW_COUNT ? k_switch_names[i] : "?"; }

void wisp_fusions_default(wisp_fusions *f) {
  memset(f, 0, sizeof *f);
  f->residual_add = f->greedy_head_argmax = f->post_ffn_norm_pair = f->fused_qkv_split_norm_rope = 1;
  f->ffn_q4k = f->attn_output_gate = f->attn_direct_kv = f->lin_qkvz = f->lin_ab = f->lin_core = f->decode_loop = 1;
  f->ffn_geometry.full_block = f->head_geometry.full_block = -1;
  for (int i = 0; i < WISP_SW_COUNT; i++) f->from[i] = "default";
}

static int pow2(int v) { return v > 0 && !(v & (v - 1)); }

/* A positive integer or a boolean member of a geometry object. */
static wisp_status geo_int(const cJSON *c, const char *file, const char *path, int *out) {
  if (!wisp_json_is_int(c) || c->valuedouble <= 0 || c->valuedouble > 4096)
    return FAIL("%s: %s.%s: expected a positive integer, got %s", file, path, c->string, wisp_json_type(c));
  *out = (int)c->valuedouble;
  return WISP_OK;
}

/* session.fusedFfnQ4K: false | true | {"decode": {"variant": "q4k_metal_simd16",
 * "pipelineConstants": {WORKGROUP_SIZE, COLS_PER_WG, THREADS_PER_COL, USE_FULL_BLOCK_FAST_PATH}}}. */
static wisp_status parse_ffn_q4k(const cJSON *o, const char *file, const char *path, int *on, wisp_q4k_geometry *g) {
  wisp_status st;
  if (cJSON_IsBool(o)) { *on = cJSON_IsTrue(o); return WISP_OK; }
  if (!cJSON_IsObject(o)) return FAIL("%s: %s: expected an object or a boolean, got %s", file, path, wisp_json_type(o));
  *on = 1;
  for (const cJSON *c = o->child; c; c = c->next)
    if (strcmp(c->string, "decode")) return FAIL("%s: %s.%s: unknown field (decode)", file, path, c->string);
  const cJSON *d = cJSON_GetObjectItemCaseSensitive(o, "decode");
  if (!d) return WISP_OK;
  char dp[300];
  wisp_path(dp, sizeof dp, "%s.decode", path);
  if (cJSON_IsBool(d)) { *on = cJSON_IsTrue(d); return WISP_OK; }
  if (!cJSON_IsObject(d)) return FAIL("%s: %s: expected an object or a boolean, got %s", file, dp, wisp_json_type(d));
  for (const cJSON *c = d->child; c; c = c->next) {
    if (!strcmp(c->string, "variant")) {
      if (!cJSON_IsString(c) || strcmp(c->valuestring, "q4k_metal_simd16"))
        return FAIL("%s: %s.variant: %s%s%s is not a fused FFN variant wisp has (q4k_metal_simd16)", file, dp,
                    cJSON_IsString(c) ? "'" : "", cJSON_IsString(c) ? c->valuestring : wisp_json_type(c),
                    cJSON_IsString(c) ? "'" : "");
    } else if (!strcmp(c->string, "pipelineConstants")) {
      if (!cJSON_IsObject(c)) return FAIL("%s: %s.pipelineConstants: expected an object, got %s", file, dp, wisp_json_type(c));
      char cp[340];
      wisp_path(cp, sizeof cp, "%s.pipelineConstants", dp);
      for (const cJSON *k = c->child; k; k = k->next) {
        if (!strcmp(k->string, "WORKGROUP_SIZE")) st = geo_int(k, file, cp, &g->workgroup_size);
        else if (!strcmp(k->string, "COLS_PER_WG")) st = geo_int(k, file, cp, &g->cols_per_wg);
        else if (!strcmp(k->string, "THREADS_PER_COL")) st = geo_int(k, file, cp, &g->threads_per_col);
        else if (!strcmp(k->string, "USE_FULL_BLOCK_FAST_PATH")) {
          if (!cJSON_IsBool(k)) return FAIL("%s: %s.%s: expected a boolean, got %s", file, cp, k->string, wisp_json_type(k));
          g->full_block = cJSON_IsTrue(k);
          st = WISP_OK;
        } else
          return FAIL("%s: %s.%s: unknown constant (WORKGROUP_SIZE, COLS_PER_WG, THREADS_PER_COL, "
                      "USE_FULL_BLOCK_FAST_PATH)", file, cp, k->string);
        if (st) return st;
      }
      int cols = g->cols_per_wg ? g->cols_per_wg : 16, tpc = g->threads_per_col ? g->threads_per_col : 16;
      int wg = g->workgroup_size ? g->workgroup_size : cols * tpc; /* unset: COLS_PER_WG x THREADS_PER_COL */
      if (!pow2(tpc) || wg != cols * tpc || wg > 256)
        return FAIL("%s: %s: WORKGROUP_SIZE %d must be COLS_PER_WG %d x THREADS_PER_COL %d (a power of two), at most 256",
                    file, cp, wg, cols, tpc);
    } else
      return FAIL("%s: %s.%s: unknown field (variant, pipelineConstants)", file, dp, c->string);
  }
  return WISP_OK;
}

/* session.lmHeadArgmaxQ4K: {colsPerWorkgroup, threadsPerCol, useFullBlockFastPath}. */
static wisp_status parse_head_q4k(const cJSON *o, const char *file, const char *path, wisp_q4k_geometry *g) {
  wisp_status st;
  if (!cJSON_IsObject(o)) return FAIL("%s: %s: expected an object, got %s", file, path, wisp_json_type(o));
  for (const cJSON *k = o->child; k; k = k->next) {
    if (!strcmp(k->string, "colsPerWorkgroup")) st = geo_int(k, file, path, &g->cols_per_wg);
    else if (!strcmp(k->string, "threadsPerCol")) st = geo_int(k, file, path, &g->threads_per_col);
    else if (!strcmp(k->string, "useFullBlockFastPath")) {
      if (!cJSON_IsBool(k)) return FAIL("%s: %s.%s: expected a boolean, got %s", file, path, k->string, wisp_json_type(k));
      g->full_block = cJSON_IsTrue(k);
      st = WISP_OK;
    } else
      return FAIL("%s: %s.%s: unknown field (colsPerWorkgroup, threadsPerCol, useFullBlockFastPath)", file, path,
                  k->string);
    if (st) return st;
  }
  int cols = g->cols_per_wg ? g->cols_per_wg : 128, tpc = g->threads_per_col ? g->threads_per_col : 2;
  if (!pow2(tpc) || cols * tpc > 256)
    return FAIL("%s: %s: colsPerWorkgroup %d x threadsPerCol %d (a power of two) must be at most 256 threads", file,
                path, cols, tpc);
  g->workgroup_size = cols * tpc;
  return WISP_OK;
}

/* session.attentionDecodeOnline: {useDirectContiguousKVLayout, useOutputGateFusion}. */
static wisp_status parse_attn_online(const cJSON *o, const char *file, const char *path, wisp_fusions *f,
                                     const char **from, wisp_profile *prof, const char *id) {
  if (!cJSON_IsObject(o)) return FAIL("%s: %s: expected an object, got %s", file, path, wisp_json_type(o));
  for (const cJSON *k = o->child; k; k = k->next) {
    int sw = !strcmp(k->string, "useOutputGateFusion")           ? WISP_SW_ATTN_OUTPUT_GATE
             : !strcmp(k->string, "useDirectContiguousKVLayout") ? WISP_SW_ATTN_DIRECT_KV
                                                                  : -1;
    if (sw < 0)
      return FAIL("%s: %s.%s: unknown field (useDirectContiguousKVLayout, useOutputGateFusion)", file, path, k->string);
    if (!cJSON_IsBool(k)) return FAIL("%s: %s.%s: expected a boolean, got %s", file, path, k->string, wisp_json_type(k));
    if (f) *(sw == WISP_SW_ATTN_OUTPUT_GATE ? &f->attn_output_gate : &f->attn_direct_kv) = cJSON_IsTrue(k);
    if (from) {
      char src[400];
      wisp_path(src, sizeof src, "%s: runtime.inference.session.attentionDecodeOnline.%s", id, k->string);
      from[sw] = wisp_arena_strdup(&prof->arena, src);
    }
  }
  return WISP_OK;
}

/* collect = 0: one file's session object (validated; provenance recorded for
 * profile `id`); collect = 1: the merged object, into prof->fusions. */
static wisp_status parse_session(const cJSON *o, wisp_profile *prof, const char *file, int collect, const char *id) {
  const char *path = "runtime.inference.session";
  if (!cJSON_IsObject(o)) return FAIL("%s: %s: expected an object, got %s", file, path, wisp_json_type(o));
  wisp_status st;
  wisp_fusions scratch;
  wisp_fusions_default(&scratch);
  wisp_fusions *f = collect ? &prof->fusions : &scratch;
  const char **from = collect ? NULL : prof->fusions.from;
  for (const cJSON *c = o->child; c; c = c->next) {
    size_t i;
    char w[300], sp[300], src[400];
    wisp_path(w, sizeof w, "session.%s", c->string);
    wisp_path(sp, sizeof sp, "%s.%s", path, c->string);
    wisp_path(src, sizeof src, "%s: %s", id ? id : "", sp);
    int sw = -1;
    for (i = 0; i < sizeof k_session_bools / sizeof k_session_bools[0]; i++)
      if (!strcmp(c->string, k_session_bools[i].key)) break;
    if (i < sizeof k_session_bools / sizeof k_session_bools[0]) {
      if (!cJSON_IsBool(c)) return FAIL("%s: %s.%s: expected a boolean, got %s", file, path, c->string, wisp_json_type(c));
      *(int *)((char *)f + k_session_bools[i].off) = cJSON_IsTrue(c);
      sw = k_session_bools[i].sw;
    } else if (!strcmp(c->string, "fusedFfnQ4K")) {
      if ((st = parse_ffn_q4k(c, file, sp, &f->ffn_q4k, &f->ffn_geometry))) return st;
      sw = WISP_SW_FFN_Q4K;
    } else if (!strcmp(c->string, "lmHeadArgmaxQ4K")) {
      if ((st = parse_head_q4k(c, file, sp, &f->head_geometry))) return st;
      sw = WISP_SW_HEAD_ARGMAX_Q4K;
    } else if (!strcmp(c->string, "attentionDecodeOnline")) {
      if ((st = parse_attn_online(c, file, sp, f, from, prof, id))) return st;
    } else if (!strcmp(c->string, "decodeLoop")) {
      wisp_batching tmp;
      char dp[300];
      wisp_path(dp, sizeof dp, "%s.decodeLoop", path);
      if ((st = parse_batching(c, collect ? &prof->decode_loop : &tmp, file, collect ? "session.decodeLoop" : dp,
                               collect ? prof : NULL)))
        return st;
      if (collect) f->decode_loop = !prof->decode_loop.disable_command_batching;
      sw = WISP_SW_DECODE_LOOP;
    } else if (collect && (st = not_impl(prof, w))) return st;
    if (sw >= 0 && from) {
      from[sw] = wisp_arena_strdup(&prof->arena, src);
      if (!from[sw]) return wisp_fail(WISP_ENOMEM, "out of memory");
    }
  }
  return WISP_OK;
}

static void merge_into(cJSON *dst, const cJSON *src) {
  for (const cJSON *c = src->child; c; c = c->next) {
    cJSON *existing = cJSON_GetObjectItemCaseSensitive(dst, c->string);
    if (cJSON_IsObject(c) && cJSON_IsObject(existing)) { merge_into(existing, c); continue; }
    cJSON *dup = cJSON_Duplicate(c, 1);
    if (!dup) continue;
    if (existing) cJSON_ReplaceItemInObjectCaseSensitive(dst, c->string, dup);
    else cJSON_AddItemToObject(dst, c->string, dup);
  }
}

static const char *const k_top[] = {"$schema", "id", "name", "description", "intent", "compatibleIntents", "stability",
                                    "owner", "createdAtUtc", "extends", "model", "runtime", NULL};

static wisp_status load_one(ploader *L, const char *file, const char *child_file);

static wisp_status load_parent(ploader *L, const char *ref, const char *file, int idx, loaded_info *self) {
  char pp[1024];
  char where[64];
  if (idx >= 0) wisp_path(where, sizeof where, "extends[%d]", idx);
  else wisp_path(where, sizeof where, "extends");
  wisp_status st = resolve_ref(L, ref, pp, sizeof pp);
  if (st) { wisp_error_prefix("%s: %s", file, where); return st; }
  if (!wisp_file_exists(pp)) return wisp_fail(WISP_EIO, "%s: %s: profile '%s' not found (%s)", file, where, ref, pp);
  for (int i = 0; i < L->depth; i++)
    if (!strcmp(L->stack[i]->path, pp)) {
      char chain[2048];
      size_t n = 0;
      chain[0] = 0;
      for (int k = i; k < L->depth; k++) {
        int w = snprintf(chain + n, sizeof chain - n, "%s -> ", L->stack[k]->id);
        if (w > 0 && (size_t)w < sizeof chain - n) n += (size_t)w;
      }
      return FAIL("%s: %s: cycle: %s%s", file, where, chain, L->stack[i]->id);
    }
  if ((st = load_one(L, pp, file))) return st;
  /* The parent's info is now in loaded[]. */
  const loaded_info *par = NULL;
  for (int i = 0; i < L->n_loaded; i++)
    if (!strcmp(L->loaded[i].path, pp)) par = &L->loaded[i];
  if (par && par->compatible && self->intent && !str_in_array(self->intent, par->compatible)) {
    char list[512];
    list_array(par->compatible, list, sizeof list);
    return FAIL("%s: intent: '%s' is not compatible with parent '%s' (compatibleIntents: %s)", file, self->intent,
                par->id, list);
  }
  return WISP_OK;
}

static wisp_status load_one(ploader *L, const char *file, const char *child_file) {
  wisp_profile *p = L->p;
  wisp_status st;
  for (int i = 0; i < L->n_loaded; i++)
    if (!strcmp(L->loaded[i].path, file)) return WISP_OK; /* diamond: already applied */
  if (L->depth >= MAX_DEPTH || L->n_loaded >= (int)(sizeof L->loaded / sizeof L->loaded[0]))
    return FAIL("%s: extends: chain deeper than %d", child_file ? child_file : file, MAX_DEPTH);
  cJSON *doc = NULL;
  if ((st = wisp_json_load(file, &doc))) return st;
  cJSON **nd = push(&p->arena, p->docs, &p->n_docs, sizeof(cJSON *));
  if (!nd) { cJSON_Delete(doc); return wisp_fail(WISP_ENOMEM, "out of memory"); }
  nd[p->n_docs - 1] = doc;
  p->docs = nd;
  if (!cJSON_IsObject(doc)) return FAIL("%s: top level: expected an object, got %s", file, wisp_json_type(doc));
  for (const cJSON *c = doc->child; c; c = c->next)
    if (!in_list(c->string, k_top)) return FAIL("%s: %s: unknown field", file, c->string);
  loaded_info self = {0};
  wisp_path(self.path, sizeof self.path, "%s", file);
  for (const char *const *k = (const char *const[]){"id", "name", "intent", "model", "description", "stability", "owner",
                                                   "createdAtUtc", "$schema", NULL};
       *k; k++) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(doc, *k);
    if (j && !cJSON_IsString(j)) return FAIL("%s: %s: expected a string, got %s", file, *k, wisp_json_type(j));
  }
  const cJSON *idj = cJSON_GetObjectItemCaseSensitive(doc, "id");
  self.id = idj ? idj->valuestring : wisp_arena_strdup(&p->arena, file);
  const cJSON *in = cJSON_GetObjectItemCaseSensitive(doc, "intent");
  self.intent = in ? in->valuestring : NULL;
  const cJSON *ci = cJSON_GetObjectItemCaseSensitive(doc, "compatibleIntents");
  if (ci) {
    if (!cJSON_IsArray(ci)) return FAIL("%s: compatibleIntents: expected an array, got %s", file, wisp_json_type(ci));
    int i = 0;
    for (const cJSON *c = ci->child; c; c = c->next, i++)
      if (!cJSON_IsString(c)) return FAIL("%s: compatibleIntents[%d]: expected a string, got %s", file, i, wisp_json_type(c));
    self.compatible = ci;
    if (self.intent && !str_in_array(self.intent, ci)) {
      char list[512];
      list_array(ci, list, sizeof list);
      return FAIL("%s: intent: '%s' is not in its own compatibleIntents (%s)", file, self.intent, list);
    }
  }
  L->stack[L->depth++] = &self;
  const cJSON *ex = cJSON_GetObjectItemCaseSensitive(doc, "extends");
  if (ex) {
    if (cJSON_IsString(ex)) st = load_parent(L, ex->valuestring, file, -1, &self);
    else if (cJSON_IsArray(ex)) {
      int i = 0;
      st = WISP_OK;
      for (const cJSON *c = ex->child; c && !st; c = c->next, i++) {
        if (!cJSON_IsString(c)) st = FAIL("%s: extends[%d]: expected a string, got %s", file, i, wisp_json_type(c));
        else st = load_parent(L, c->valuestring, file, i, &self);
      }
    } else st = FAIL("%s: extends: expected a profile name or a list of names, got %s", file, wisp_json_type(ex));
    if (st) { L->depth--; return st; }
  }
  L->depth--;
  /* This profile's own content, after its parents'. */
  L->cur_id = self.id;
  const cJSON *rt = cJSON_GetObjectItemCaseSensitive(doc, "runtime");
  if (rt) {
    if (!cJSON_IsObject(rt)) return FAIL("%s: runtime: expected an object, got %s", file, wisp_json_type(rt));
    for (const cJSON *c = rt->child; c; c = c->next) {
      if (!strcmp(c->string, "inference")) continue;
      char w[300];
      wisp_path(w, sizeof w, "runtime.%s", c->string);
      if ((st = not_impl(p, w))) return st;
    }
    const cJSON *inf = cJSON_GetObjectItemCaseSensitive(rt, "inference");
    if (inf) {
      if (!cJSON_IsObject(inf)) return FAIL("%s: runtime.inference: expected an object, got %s", file, wisp_json_type(inf));
      for (const cJSON *c = inf->child; c; c = c->next) {
        if (!strcmp(c->string, "executionPatch")) {
          if ((st = parse_exec_patch(L, c, file))) return st;
        } else if (!strcmp(c->string, "batching")) {
          wisp_batching tmp;
          if ((st = parse_batching(c, &tmp, file, "runtime.inference.batching", NULL))) return st;
          cJSON *dst = cJSON_GetObjectItemCaseSensitive(p->settings, "batching");
          merge_into(dst, c);
        } else if (!strcmp(c->string, "session")) {
          if ((st = parse_session(c, p, file, 0, L->cur_id))) return st;
          cJSON *dst = cJSON_GetObjectItemCaseSensitive(p->settings, "session");
          merge_into(dst, c);
        } else {
          char w[300];
          wisp_path(w, sizeof w, "runtime.inference.%s", c->string);
          if ((st = not_impl(p, w))) return st;
        }
      }
    }
  }
  if (self.intent) L->eff_intent = self.intent;
  if (self.compatible) L->eff_compatible = self.compatible;
  if ((st = add_str(p, &p->chain, &p->n_chain, self.id))) return st;
  L->loaded[L->n_loaded++] = self;
  return WISP_OK;
}

wisp_status wisp_profile_load(const char *ref, const wisp_profile_options *opt, wisp_profile **out) {
  *out = NULL;
  wisp_profile *p = calloc(1, sizeof *p);
  ploader *L = calloc(1, sizeof *L);
  if (!p || !L) { free(p); free(L); return wisp_fail(WISP_ENOMEM, "out of memory"); }
  L->p = p;
  L->opt = opt;
  L->dir = opt && opt->profiles_dir ? opt->profiles_dir : WISP_DEFAULT_PROFILES_DIR;
  L->kernels_dir = opt && opt->kernels_dir ? opt->kernels_dir : WISP_DEFAULT_KERNELS_DIR;
  wisp_fusions_default(&p->fusions);
  p->settings = cJSON_CreateObject();
  wisp_status st = WISP_OK;
  if (!p->settings || !cJSON_AddObjectToObject(p->settings, "batching") || !cJSON_AddObjectToObject(p->settings, "session"))
    st = wisp_fail(WISP_ENOMEM, "out of memory");
  char file[1024];
  /* Whatever the working directory holds: a name ending in .json is a file
   * (relative to the working directory, as every path wisp is given); any
   * other name (NAME or profiles/NAME) is a profile of the profiles dir,
   * the built-in ones by default. So `--profile profiles/x.json` is always
   * that file, and `--profile x` always the built-in x. */
  /* "exact" names the reference profile, profiles/default (the library's
   * default; the CLI's default is the fast one, throughput): the same
   * profile and the same plan id under either name. */
  if (!strcmp(ref, "exact") || !strcmp(ref, "profiles/exact")) ref = "default";
  size_t rn = strlen(ref);
  const int is_file = rn > 5 && !strcmp(ref + rn - 5, ".json") && strncmp(ref, "builtin:", 8);
  if (!st && is_file) {
    if (wisp_file_exists(ref)) wisp_path(file, sizeof file, "%s", ref);
    else st = wisp_fail(WISP_EIO, "profile file %s: no such file (a name ending in .json is a path; a built-in profile "
                        "is named without .json, e.g. --profile default)", ref);
  } else if (!st && !(st = resolve_ref(L, !strncmp(ref, "builtin:", 8) ? ref + 8 : ref, file, sizeof file)) &&
             !wisp_file_exists(file)) {
    st = wisp_fail(WISP_EIO, "profile '%s' not found (%s)", ref, file);
  }
  if (!st) st = load_one(L, file, NULL);
  if (!st) {
    p->path = wisp_arena_strdup(&p->arena, file);
    const loaded_info *leaf = &L->loaded[L->n_loaded - 1];
    p->id = leaf->id;
    p->intent = L->eff_intent;
    const cJSON *leafdoc = p->docs[0];
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(leafdoc, "name");
    const cJSON *md = cJSON_GetObjectItemCaseSensitive(leafdoc, "model");
    p->name = nm ? nm->valuestring : NULL;
    p->model = md ? md->valuestring : NULL;
    for (const cJSON *c = L->eff_compatible ? L->eff_compatible->child : NULL; c && !st; c = c->next)
      st = add_str(p, &p->compatible_intents, &p->n_compatible, c->valuestring);
    if (!st && opt && opt->intent) {
      int ok = (p->intent && !strcmp(p->intent, opt->intent)) || str_in_array(opt->intent, L->eff_compatible);
      if (!ok) {
        char list[512];
        list_array(L->eff_compatible, list, sizeof list);
        st = FAIL("%s: intent: requested intent '%s' is not compatible with this profile (intent %s, compatibleIntents: %s)",
                  file, opt->intent, p->intent ? p->intent : "none", list);
      }
    }
    /* Typed settings from the merged objects; unknown keys are listed. */
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(p->settings, "batching");
    if (!st && b->child) st = parse_batching(b, &p->batching, file, "batching", p);
    if (!st) st = parse_session(cJSON_GetObjectItemCaseSensitive(p->settings, "session"), p, file, 1, NULL);
    p->digests_verified = !(opt && opt->skip_digests);
  }
  free(L);
  if (st) { wisp_profile_free(p); return st; }
  *out = p;
  return WISP_OK;
}

void wisp_profile_free(wisp_profile *p) {
  if (!p) return;
  for (int i = 0; i < p->n_docs; i++) cJSON_Delete(p->docs[i]);
  cJSON_Delete(p->settings);
  wisp_arena_free(p->arena);
  free(p);
}

const wisp_profile_kernel *wisp_profile_kernel_find(const wisp_profile *p, const char *key) {
  for (int i = 0; i < p->n_kernels; i++)
    if (!strcmp(p->kernels[i].key, key)) return &p->kernels[i];
  return NULL;
}
