/* See registry.h. Every problem is reported as "FILE: JSON.PATH: what". */
#include "plan/registry.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/builtin.h"
#include "util/err.h"

typedef struct {
  wisp_registry *r;
  const char *file;
  const char *rules_dir;
  /* External rule files loaded for reference checks. */
  int n_ext;
  struct { char name[256]; cJSON *doc; int missing; } ext[64];
} loader;

#define FAIL(...) wisp_fail(WISP_EFORMAT, __VA_ARGS__)

static int in_list(const char *s, const char *const *list) {
  for (; *list; list++)
    if (!strcmp(s, *list)) return 1;
  return 0;
}

static wisp_status check_keys(loader *L, const cJSON *obj, const char *path, const char *const *allowed) {
  for (const cJSON *c = obj->child; c; c = c->next)
    if (!in_list(c->string, allowed)) return FAIL("%s: %s.%s: unknown field", L->file, path, c->string);
  return WISP_OK;
}

/* Optional string field: NULL when absent. */
static wisp_status opt_str(loader *L, const cJSON *obj, const char *key, const char *path, const char **out) {
  const cJSON *j = cJSON_GetObjectItemCaseSensitive(obj, key);
  *out = NULL;
  if (!j) return WISP_OK;
  if (!cJSON_IsString(j)) return FAIL("%s: %s.%s: expected a string, got %s", L->file, path, key, wisp_json_type(j));
  *out = j->valuestring;
  return WISP_OK;
}

static wisp_status req_str(loader *L, const cJSON *obj, const char *key, const char *path, const char **out) {
  wisp_status st = opt_str(L, obj, key, path, out);
  if (st) return st;
  if (!*out) return FAIL("%s: %s.%s: missing required field", L->file, path, key);
  if (!**out) return FAIL("%s: %s.%s: must not be empty", L->file, path, key);
  return WISP_OK;
}

static const char *const k_binding_types[] = {"uniform", "storage", "read-only-storage", NULL};

static wisp_status parse_bindings(loader *L, const cJSON *arr, const char *path, int *n_out, wisp_binding **out) {
  if (!cJSON_IsArray(arr)) return FAIL("%s: %s: expected an array, got %s", L->file, path, wisp_json_type(arr));
  int n = cJSON_GetArraySize(arr);
  wisp_binding *b = wisp_arena_alloc(&L->r->arena, sizeof *b * (size_t)(n ? n : 1));
  if (!b) return wisp_fail(WISP_ENOMEM, "out of memory");
  int i = 0;
  static const char *const keys[] = {"index", "name", "type", NULL};
  for (const cJSON *c = arr->child; c; c = c->next, i++) {
    char p[512];
    wisp_path(p, sizeof p, "%s[%d]", path, i);
    if (!cJSON_IsObject(c)) return FAIL("%s: %s: expected an object, got %s", L->file, p, wisp_json_type(c));
    wisp_status st = check_keys(L, c, p, keys);
    if (st) return st;
    const cJSON *idx = cJSON_GetObjectItemCaseSensitive(c, "index");
    if (!idx) return FAIL("%s: %s.index: missing required field", L->file, p);
    if (!wisp_json_is_int(idx) || idx->valuedouble < 0)
      return FAIL("%s: %s.index: expected a non-negative integer, got %s", L->file, p, wisp_json_type(idx));
    b[i].index = (int)idx->valuedouble;
    if ((st = opt_str(L, c, "name", p, &b[i].name))) return st;
    if ((st = req_str(L, c, "type", p, &b[i].type))) return st;
    if (!in_list(b[i].type, k_binding_types))
      return FAIL("%s: %s.type: unknown binding type '%s' (uniform, storage, read-only-storage)", L->file, p, b[i].type);
    for (int k = 0; k < i; k++)
      if (b[k].index == b[i].index) return FAIL("%s: %s.index: duplicate binding index %d", L->file, p, b[i].index);
  }
  *n_out = n;
  *out = b;
  return WISP_OK;
}

static const char *const k_uniform_types[] = {"u32", "i32", "f32", "f16", NULL};

static wisp_status parse_field(loader *L, const cJSON *c, const char *p, const char *name, wisp_uniform_field *f) {
  wisp_status st;
  f->name = name;
  if ((st = req_str(L, c, "type", p, &f->type))) return st;
  if (!in_list(f->type, k_uniform_types)) return FAIL("%s: %s.type: unknown uniform type '%s'", L->file, p, f->type);
  const cJSON *off = cJSON_GetObjectItemCaseSensitive(c, "offset");
  if (!off) return FAIL("%s: %s.offset: missing required field", L->file, p);
  if (!wisp_json_is_int(off) || off->valuedouble < 0)
    return FAIL("%s: %s.offset: expected a non-negative integer, got %s", L->file, p, wisp_json_type(off));
  f->offset = (int)off->valuedouble;
  return WISP_OK;
}

/* {size, fields: [{name, type, offset}]} or the map form {NAME: {type, offset}}. */
static wisp_status parse_uniforms(loader *L, const cJSON *obj, const char *path, wisp_uniforms *u) {
  if (!cJSON_IsObject(obj)) return FAIL("%s: %s: expected an object, got %s", L->file, path, wisp_json_type(obj));
  const cJSON *fields = cJSON_GetObjectItemCaseSensitive(obj, "fields");
  const cJSON *size = cJSON_GetObjectItemCaseSensitive(obj, "size");
  wisp_status st;
  char p[512];
  if (fields || size) {
    static const char *const keys[] = {"size", "fields", NULL};
    if ((st = check_keys(L, obj, path, keys))) return st;
    if (!size) return FAIL("%s: %s.size: missing required field", L->file, path);
    if (!wisp_json_is_int(size) || size->valuedouble < 0)
      return FAIL("%s: %s.size: expected a non-negative integer, got %s", L->file, path, wisp_json_type(size));
    u->size = (int)size->valuedouble;
    if (!fields) return FAIL("%s: %s.fields: missing required field", L->file, path);
    if (!cJSON_IsArray(fields)) return FAIL("%s: %s.fields: expected an array, got %s", L->file, path, wisp_json_type(fields));
    int n = cJSON_GetArraySize(fields);
    u->fields = wisp_arena_alloc(&L->r->arena, sizeof *u->fields * (size_t)(n ? n : 1));
    if (!u->fields) return wisp_fail(WISP_ENOMEM, "out of memory");
    int i = 0;
    static const char *const fkeys[] = {"name", "type", "offset", NULL};
    for (const cJSON *c = fields->child; c; c = c->next, i++) {
      wisp_path(p, sizeof p, "%s.fields[%d]", path, i);
      if (!cJSON_IsObject(c)) return FAIL("%s: %s: expected an object, got %s", L->file, p, wisp_json_type(c));
      if ((st = check_keys(L, c, p, fkeys))) return st;
      const char *name;
      if ((st = req_str(L, c, "name", p, &name))) return st;
      if ((st = parse_field(L, c, p, name, &u->fields[i]))) return st;
      for (int k = 0; k < i; k++)
        if (!strcmp(u->fields[k].name, name)) return FAIL("%s: %s.name: duplicate uniform field '%s'", L->file, p, name);
    }
    u->n_fields = n;
  } else {
    int n = cJSON_GetArraySize(obj);
    u->size = -1;
    u->fields = wisp_arena_alloc(&L->r->arena, sizeof *u->fields * (size_t)(n ? n : 1));
    if (!u->fields) return wisp_fail(WISP_ENOMEM, "out of memory");
    int i = 0;
    static const char *const fkeys[] = {"type", "offset", NULL};
    for (const cJSON *c = obj->child; c; c = c->next, i++) {
      wisp_path(p, sizeof p, "%s.%s", path, c->string);
      if (!cJSON_IsObject(c)) return FAIL("%s: %s: expected an object, got %s", L->file, p, wisp_json_type(c));
      if ((st = check_keys(L, c, p, fkeys))) return st;
      if ((st = parse_field(L, c, p, c->string, &u->fields[i]))) return st;
    }
    u->n_fields = n;
  }
  return WISP_OK;
}

static wisp_status parse_meta(loader *L, const cJSON *obj, const char *path, int *n_out, wisp_meta **out) {
  if (!cJSON_IsObject(obj)) return FAIL("%s: %s: expected an object, got %s", L->file, path, wisp_json_type(obj));
  int n = cJSON_GetArraySize(obj);
  wisp_meta *m = wisp_arena_alloc(&L->r->arena, sizeof *m * (size_t)(n ? n : 1));
  if (!m) return wisp_fail(WISP_ENOMEM, "out of memory");
  int i = 0;
  for (const cJSON *c = obj->child; c; c = c->next, i++) {
    m[i].key = c->string;
    if (cJSON_IsNumber(c)) { m[i].type = WISP_META_NUM; m[i].num = c->valuedouble; }
    else if (cJSON_IsString(c)) { m[i].type = WISP_META_STR; m[i].str = c->valuestring; }
    else if (cJSON_IsBool(c)) { m[i].type = WISP_META_BOOL; m[i].b = cJSON_IsTrue(c); }
    else return FAIL("%s: %s.%s: expected a number, string or boolean, got %s", L->file, path, c->string, wisp_json_type(c));
  }
  *n_out = n;
  *out = m;
  return WISP_OK;
}

static wisp_status str_array(loader *L, const cJSON *arr, const char *path, int *n_out, const char ***out) {
  if (!cJSON_IsArray(arr)) return FAIL("%s: %s: expected an array, got %s", L->file, path, wisp_json_type(arr));
  int n = cJSON_GetArraySize(arr);
  const char **s = wisp_arena_alloc(&L->r->arena, sizeof *s * (size_t)(n ? n : 1));
  if (!s) return wisp_fail(WISP_ENOMEM, "out of memory");
  int i = 0;
  for (const cJSON *c = arr->child; c; c = c->next, i++) {
    if (!cJSON_IsString(c)) return FAIL("%s: %s[%d]: expected a string, got %s", L->file, path, i, wisp_json_type(c));
    s[i] = c->valuestring;
  }
  *n_out = n;
  *out = s;
  return WISP_OK;
}

static const char *const k_variant_keys[] = {
    "wgsl", "entryPoint", "workgroup", "requires", "outputDtype", "weightDtype", "inputDtype", "description",
    "variantMetadata", "reachability", "bindingsOverride", "uniformsOverride", "wgslOverrides", "backend", NULL};

static wisp_status parse_variant(loader *L, const cJSON *j, const char *path, wisp_variant *v) {
  wisp_status st;
  if (!cJSON_IsObject(j)) return FAIL("%s: %s: expected an object, got %s", L->file, path, wisp_json_type(j));
  if ((st = check_keys(L, j, path, k_variant_keys))) return st;
  v->key = j->string;
  if ((st = opt_str(L, j, "backend", path, &v->backend))) return st;
  if (!v->backend) {
    if (L->r->strict) return FAIL("%s: %s.backend: missing required field (cpu, webgpu or host)", L->file, path);
    v->backend = "webgpu";
  } else if (strcmp(v->backend, "cpu") && strcmp(v->backend, "webgpu") && strcmp(v->backend, "host"))
    return FAIL("%s: %s.backend: unknown backend '%s' (cpu, webgpu or host)", L->file, path, v->backend);
  /* "host" kernels run on the host CPU whatever the plan's backend (the
   * sampler reading back logits); like cpu ones they have no WGSL. */
  int cpu = !strcmp(v->backend, "cpu") || !strcmp(v->backend, "host");
  if (cpu) {
    if (cJSON_GetObjectItemCaseSensitive(j, "wgsl")) return FAIL("%s: %s.wgsl: a cpu variant has no WGSL file", L->file, path);
  } else if ((st = req_str(L, j, "wgsl", path, &v->wgsl))) return st;
  if (v->wgsl && (v->wgsl[0] == '/' || strstr(v->wgsl, "..")))
    return FAIL("%s: %s.wgsl: '%s' must be a path relative to the kernels dir", L->file, path, v->wgsl);
  if ((st = req_str(L, j, "entryPoint", path, &v->entry_point))) return st;
  const cJSON *wg = cJSON_GetObjectItemCaseSensitive(j, "workgroup");
  v->workgroup[0] = v->workgroup[1] = v->workgroup[2] = 1;
  if (!wg && !cpu) return FAIL("%s: %s.workgroup: missing required field", L->file, path);
  if (wg) {
    if (!cJSON_IsArray(wg) || cJSON_GetArraySize(wg) != 3)
      return FAIL("%s: %s.workgroup: expected an array of 3 positive integers", L->file, path);
    int i = 0;
    for (const cJSON *c = wg->child; c; c = c->next, i++) {
      if (!wisp_json_is_int(c) || c->valuedouble < 1)
        return FAIL("%s: %s.workgroup[%d]: expected a positive integer, got %s", L->file, path, i, wisp_json_type(c));
      v->workgroup[i] = (int)c->valuedouble;
    }
  }
  const cJSON *req = cJSON_GetObjectItemCaseSensitive(j, "requires");
  char p[512];
  if (req) {
    wisp_path(p, sizeof p, "%s.requires", path);
    if ((st = str_array(L, req, p, &v->n_requires, &v->requires))) return st;
    for (int i = 0; i < v->n_requires; i++)
      if (!wisp_feature_known(v->requires[i]))
        return FAIL("%s: %s[%d]: unknown feature '%s' (subgroups, shader-f16, avx2)", L->file, p, i, v->requires[i]);
  }
  if ((st = opt_str(L, j, "outputDtype", path, &v->output_dtype))) return st;
  if ((st = opt_str(L, j, "weightDtype", path, &v->weight_dtype))) return st;
  if ((st = opt_str(L, j, "inputDtype", path, &v->input_dtype))) return st;
  if ((st = opt_str(L, j, "description", path, &v->description))) return st;
  const cJSON *x;
  if ((x = cJSON_GetObjectItemCaseSensitive(j, "variantMetadata"))) {
    wisp_path(p, sizeof p, "%s.variantMetadata", path);
    if ((st = parse_meta(L, x, p, &v->n_meta, &v->meta))) return st;
  }
  if ((x = cJSON_GetObjectItemCaseSensitive(j, "wgslOverrides"))) {
    wisp_path(p, sizeof p, "%s.wgslOverrides", path);
    if ((st = parse_meta(L, x, p, &v->n_wgsl_overrides, &v->wgsl_overrides))) return st;
  }
  if ((x = cJSON_GetObjectItemCaseSensitive(j, "bindingsOverride"))) {
    wisp_path(p, sizeof p, "%s.bindingsOverride", path);
    if ((st = parse_bindings(L, x, p, &v->n_bindings_override, &v->bindings_override))) return st;
  }
  if ((x = cJSON_GetObjectItemCaseSensitive(j, "uniformsOverride"))) {
    wisp_path(p, sizeof p, "%s.uniformsOverride", path);
    if ((st = parse_uniforms(L, x, p, &v->uniforms_override))) return st;
    v->has_uniforms_override = 1;
  }
  if ((x = cJSON_GetObjectItemCaseSensitive(j, "reachability"))) {
    wisp_path(p, sizeof p, "%s.reachability", path);
    if (!cJSON_IsObject(x)) return FAIL("%s: %s: expected an object, got %s", L->file, p, wisp_json_type(x));
    static const char *const rkeys[] = {"status", "inlineConfigs", "ruleChains", "wgslOnDisk", NULL};
    if ((st = check_keys(L, x, p, rkeys))) return st;
    if ((st = opt_str(L, x, "status", p, &v->reach_status))) return st;
    const cJSON *y;
    if ((y = cJSON_GetObjectItemCaseSensitive(x, "inlineConfigs"))) {
      char q[560];
      int n;
      const char **tmp;
      wisp_path(q, sizeof q, "%s.inlineConfigs", p);
      if ((st = str_array(L, y, q, &n, &tmp))) return st;
    }
    if ((y = cJSON_GetObjectItemCaseSensitive(x, "ruleChains"))) {
      char q[560];
      wisp_path(q, sizeof q, "%s.ruleChains", p);
      if ((st = str_array(L, y, q, &v->n_rule_refs, &v->rule_refs))) return st;
    }
    if ((y = cJSON_GetObjectItemCaseSensitive(x, "wgslOnDisk")) && !cJSON_IsBool(y))
      return FAIL("%s: %s.wgslOnDisk: expected a boolean, got %s", L->file, p, wisp_json_type(y));
  }
  /* Availability: the WGSL file must be in this build's kernels dir. */
  if (cpu) v->available = 1;
  else {
    char fp[1024];
    wisp_path(fp, sizeof fp, "%s/%s", L->r->kernels_dir, v->wgsl);
    v->available = wisp_file_exists(fp);
    if (!v->available && L->r->strict)
      return wisp_fail(WISP_EIO, "%s: %s.wgsl: kernel file '%s' not found in %s", L->file, path, v->wgsl, L->r->kernels_dir);
    if (v->available && L->r->strict) {
      char *src = wisp_slurp(fp, NULL);
      if (!src) return WISP_EIO;
      int ok = wisp_wgsl_has_entry(src, v->entry_point);
      free(src);
      if (!ok) return FAIL("%s: %s.entryPoint: '%s' is not a function in %s", L->file, path, v->entry_point, fp);
    }
  }
  return WISP_OK;
}

static const char *const k_op_keys[] = {"description", "baseBindings", "baseUniforms", "variants", "ruleChain", NULL};

static wisp_status parse_op(loader *L, const cJSON *j, wisp_operation *op) {
  wisp_status st;
  char path[256], p[512];
  wisp_path(path, sizeof path, "operations.%s", j->string);
  if (!cJSON_IsObject(j)) return FAIL("%s: %s: expected an object, got %s", L->file, path, wisp_json_type(j));
  if ((st = check_keys(L, j, path, k_op_keys))) return st;
  op->name = j->string;
  if ((st = opt_str(L, j, "description", path, &op->description))) return st;
  if ((st = opt_str(L, j, "ruleChain", path, &op->rule_chain))) return st;
  const cJSON *x = cJSON_GetObjectItemCaseSensitive(j, "baseBindings");
  wisp_path(p, sizeof p, "%s.baseBindings", path);
  if (!x) return FAIL("%s: %s: missing required field", L->file, p);
  if ((st = parse_bindings(L, x, p, &op->n_bindings, &op->bindings))) return st;
  x = cJSON_GetObjectItemCaseSensitive(j, "baseUniforms");
  wisp_path(p, sizeof p, "%s.baseUniforms", path);
  if (!x) return FAIL("%s: %s: missing required field", L->file, p);
  if ((st = parse_uniforms(L, x, p, &op->uniforms))) return st;
  x = cJSON_GetObjectItemCaseSensitive(j, "variants");
  wisp_path(p, sizeof p, "%s.variants", path);
  if (!x) return FAIL("%s: %s: missing required field", L->file, p);
  if (!cJSON_IsObject(x)) return FAIL("%s: %s: expected an object, got %s", L->file, p, wisp_json_type(x));
  int n = cJSON_GetArraySize(x);
  if (n == 0) return FAIL("%s: %s: must list at least one variant", L->file, p);
  op->variants = wisp_arena_alloc(&L->r->arena, sizeof *op->variants * (size_t)n);
  if (!op->variants) return wisp_fail(WISP_ENOMEM, "out of memory");
  int i = 0;
  for (const cJSON *c = x->child; c; c = c->next, i++) {
    char vp[600];
    wisp_path(vp, sizeof vp, "%s.%s", p, c->string);
    if ((st = parse_variant(L, c, vp, &op->variants[i]))) return st;
    L->r->n_variants++;
    if (op->variants[i].available) L->r->n_available++;
  }
  op->n_variants = n;
  return WISP_OK;
}

static cJSON *ext_rules(loader *L, const char *file) {
  for (int i = 0; i < L->n_ext; i++)
    if (!strcmp(L->ext[i].name, file)) return L->ext[i].doc;
  if (L->n_ext >= (int)(sizeof L->ext / sizeof L->ext[0])) return NULL;
  int k = L->n_ext++;
  wisp_path(L->ext[k].name, sizeof L->ext[k].name, "%s", file);
  char fp[1024];
  wisp_path(fp, sizeof fp, "%s/%s", L->rules_dir, file);
  L->ext[k].doc = NULL;
  if (wisp_file_exists(fp) && wisp_json_load(fp, &L->ext[k].doc)) {
    L->ext[k].doc = NULL;
    L->ext[k].missing = 2; /* present but unreadable: the message is set */
  }
  return L->ext[k].doc;
}

/* A reference is "FILE#CHAIN" (a rule file in the rules dir), "#CHAIN" or
 * "CHAIN" (this registry's ruleChains). */
static wisp_status check_rule_ref(loader *L, const char *ref, const char *p) {
  const char *hash = strchr(ref, '#');
  if (!hash || hash == ref) {
    const char *name = hash ? hash + 1 : ref;
    if (!wisp_registry_chain(L->r, name)) return FAIL("%s: %s: unknown rule chain '%s'", L->file, p, name);
    return WISP_OK;
  }
  char file[256];
  size_t fl = (size_t)(hash - ref);
  if (fl >= sizeof file) fl = sizeof file - 1;
  memcpy(file, ref, fl);
  file[fl] = 0;
  if (strchr(file, '/') || strstr(file, "..")) return FAIL("%s: %s: rule file '%s' must be a plain file name", L->file, p, file);
  cJSON *doc = ext_rules(L, file);
  for (int i = 0; i < L->n_ext; i++)
    if (!strcmp(L->ext[i].name, file) && L->ext[i].missing == 2) {
      wisp_error_prefix("%s: %s", L->file, p);
      return WISP_EFORMAT;
    }
  if (!doc) {
    if (L->r->strict) return wisp_fail(WISP_EIO, "%s: %s: rule file '%s' not found in %s", L->file, p, file, L->rules_dir);
    L->r->n_external_refs++;
    return WISP_OK;
  }
  const cJSON *chain = cJSON_GetObjectItemCaseSensitive(doc, hash + 1);
  if (!chain) return FAIL("%s: %s: rule file '%s' has no chain '%s'", L->file, p, file, hash + 1);
  char where[700];
  wisp_path(where, sizeof where, "%s/%s: %s", L->rules_dir, file, hash + 1);
  return wisp_rules_validate(chain, where, 0);
}

/* Every .wgsl file of the kernels dir must be some variant's. */
static wisp_status check_wgsl_listed(loader *L, const char *name) {
  size_t n = strlen(name);
  if (n < 6 || strcmp(name + n - 5, ".wgsl")) return WISP_OK;
  for (int i = 0; i < L->r->n_ops; i++)
    for (int k = 0; k < L->r->ops[i].n_variants; k++) {
      const char *w = L->r->ops[i].variants[k].wgsl;
      if (w && !strcmp(w, name)) return WISP_OK;
    }
  return FAIL("%s: operations: %s/%s is not listed by any variant", L->file, L->r->kernels_dir, name);
}

static wisp_status check_wgsl_dir(loader *L) {
  wisp_status st = WISP_OK;
  if (wisp_is_builtin(L->r->kernels_dir)) {
    const char *name;
    for (int i = 0; !st && (name = wisp_builtin_list(L->r->kernels_dir, i)); i++) st = check_wgsl_listed(L, name);
    return st;
  }
  DIR *d = opendir(L->r->kernels_dir);
  if (!d) return WISP_OK; /* no WGSL shipped yet */
  struct dirent *e;
  while (!st && (e = readdir(d))) st = check_wgsl_listed(L, e->d_name);
  closedir(d);
  return st;
}

static wisp_status load(loader *L, const char *path, const wisp_registry_options *opt) {
  wisp_registry *r = L->r;
  wisp_status st;
  if ((st = wisp_json_load(path, &r->doc))) return st;
  const cJSON *root = r->doc;
  if (!cJSON_IsObject(root)) return FAIL("%s: top level: expected an object, got %s", path, wisp_json_type(root));
  static const char *const top[] = {"$schema", "version", "description", "operations", "ruleChains", NULL};
  for (const cJSON *c = root->child; c; c = c->next)
    if (!in_list(c->string, top)) return FAIL("%s: %s: unknown field", path, c->string);
  const cJSON *sc = cJSON_GetObjectItemCaseSensitive(root, "$schema");
  if (sc && !cJSON_IsString(sc)) return FAIL("%s: $schema: expected a string, got %s", path, wisp_json_type(sc));
  r->schema = sc ? sc->valuestring : NULL;
  if ((st = req_str(L, root, "version", "(top)", &r->version))) {
    return FAIL("%s: version: missing required field (or not a non-empty string)", path);
  }
  r->strict = (opt && opt->strict) || (r->schema && !strcmp(r->schema, WISP_REGISTRY_SCHEMA));
  const cJSON *chains = cJSON_GetObjectItemCaseSensitive(root, "ruleChains");
  if (chains) {
    if (!cJSON_IsObject(chains)) return FAIL("%s: ruleChains: expected an object, got %s", path, wisp_json_type(chains));
    r->n_chains = cJSON_GetArraySize(chains);
    r->chains = wisp_arena_alloc(&r->arena, sizeof *r->chains * (size_t)(r->n_chains ? r->n_chains : 1));
    if (!r->chains) return wisp_fail(WISP_ENOMEM, "out of memory");
    int i = 0;
    for (const cJSON *c = chains->child; c; c = c->next, i++) {
      char where[600];
      wisp_path(where, sizeof where, "%s: ruleChains.%s", path, c->string);
      if ((st = wisp_rules_validate(c, where, 1))) return st;
      r->chains[i].name = c->string;
      r->chains[i].rules = c;
    }
  }
  const cJSON *ops = cJSON_GetObjectItemCaseSensitive(root, "operations");
  if (!ops) return FAIL("%s: operations: missing required field", path);
  if (!cJSON_IsObject(ops)) return FAIL("%s: operations: expected an object, got %s", path, wisp_json_type(ops));
  r->n_ops = cJSON_GetArraySize(ops);
  r->ops = wisp_arena_alloc(&r->arena, sizeof *r->ops * (size_t)(r->n_ops ? r->n_ops : 1));
  if (!r->ops) return wisp_fail(WISP_ENOMEM, "out of memory");
  int i = 0;
  for (const cJSON *c = ops->child; c; c = c->next, i++)
    if ((st = parse_op(L, c, &r->ops[i]))) return st;
  /* Cross references: op.ruleChain, chain values, variants' reachability. */
  for (i = 0; i < r->n_ops; i++) {
    const wisp_operation *op = &r->ops[i];
    if (op->rule_chain) {
      const wisp_rule_chain *ch = wisp_registry_chain(r, op->rule_chain);
      if (!ch) return FAIL("%s: operations.%s.ruleChain: unknown rule chain '%s'", path, op->name, op->rule_chain);
      int k = 0;
      for (const cJSON *rule = ch->rules->child; rule; rule = rule->next, k++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(rule, "value");
        if (cJSON_IsString(v) && !wisp_registry_variant(op, v->valuestring))
          return FAIL("%s: ruleChains.%s[%d].value: '%s' is not a variant of operation '%s'", path, ch->name, k,
                      v->valuestring, op->name);
      }
    }
    for (int k = 0; k < op->n_variants; k++)
      for (int q = 0; q < op->variants[k].n_rule_refs; q++) {
        char p[600];
        wisp_path(p, sizeof p, "operations.%s.variants.%s.reachability.ruleChains[%d]", op->name, op->variants[k].key, q);
        if ((st = check_rule_ref(L, op->variants[k].rule_refs[q], p))) return st;
      }
  }
  if (r->strict && (st = check_wgsl_dir(L))) return st;
  return WISP_OK;
}

wisp_status wisp_registry_load(const char *path, const wisp_registry_options *opt, wisp_registry **out) {
  *out = NULL;
  wisp_registry *r = calloc(1, sizeof *r);
  loader *L = calloc(1, sizeof *L);
  if (!r || !L) { free(r); free(L); return wisp_fail(WISP_ENOMEM, "out of memory"); }
  L->r = r;
  L->file = path;
  r->path = wisp_arena_strdup(&r->arena, path);
  r->kernels_dir = wisp_arena_strdup(&r->arena, opt && opt->kernels_dir ? opt->kernels_dir : WISP_DEFAULT_KERNELS_DIR);
  char rules_dir[1024];
  if (opt && opt->rules_dir) wisp_path(rules_dir, sizeof rules_dir, "%s", opt->rules_dir);
  else {
    const char *slash = strrchr(path, '/');
    if (slash) wisp_path(rules_dir, sizeof rules_dir, "%.*s/rules", (int)(slash - path), path);
    else wisp_path(rules_dir, sizeof rules_dir, "rules");
  }
  L->rules_dir = rules_dir;
  wisp_status st = (r->path && r->kernels_dir) ? load(L, path, opt) : wisp_fail(WISP_ENOMEM, "out of memory");
  for (int i = 0; i < L->n_ext; i++) cJSON_Delete(L->ext[i].doc);
  free(L);
  if (st) { wisp_registry_free(r); return st; }
  *out = r;
  return WISP_OK;
}

void wisp_registry_free(wisp_registry *r) {
  if (!r) return;
  cJSON_Delete(r->doc);
  wisp_arena_free(r->arena);
  free(r);
}

const wisp_operation *wisp_registry_op(const wisp_registry *r, const char *name) {
  for (int i = 0; i < r->n_ops; i++)
    if (!strcmp(r->ops[i].name, name)) return &r->ops[i];
  return NULL;
}

const wisp_variant *wisp_registry_variant(const wisp_operation *op, const char *key) {
  for (int i = 0; i < op->n_variants; i++)
    if (!strcmp(op->variants[i].key, key)) return &op->variants[i];
  return NULL;
}

const wisp_rule_chain *wisp_registry_chain(const wisp_registry *r, const char *name) {
  for (int i = 0; i < r->n_chains; i++)
    if (!strcmp(r->chains[i].name, name)) return &r->chains[i];
  return NULL;
}

int wisp_variant_supported(const wisp_variant *v, const wisp_device_caps *d, const char **missing) {
  for (int i = 0; i < v->n_requires; i++)
    if (wisp_device_has(d, v->requires[i]) != 1) {
      if (missing) *missing = v->requires[i];
      return 0;
    }
  return 1;
}

const wisp_meta *wisp_variant_meta(const wisp_variant *v, const char *key) {
  for (int i = 0; i < v->n_meta; i++)
    if (!strcmp(v->meta[i].key, key)) return &v->meta[i];
  return NULL;
}
