/* See plan.h. Resolution: build the default op lists (registry rule chains,
 * else the first usable variant), apply manifest geometry, then the profile's
 * patches in order; group identical layers; serialize canonically; hash. */
#include "plan/plan.h"

#include <stdlib.h>
#include <string.h>

#include "format/artifact.h"
#include "format/quant.h"
#include "format/tensor.h"
#include "model/graph.h"
#include "model/model.h"
#include "plan/pjson.h"
#include "plan/tuned.h"
#include "util/err.h"

#define FAIL(code, ...) wisp_fail(code, __VA_ARGS__)

/* ---- model shape ---- */

static wisp_status shape_int(const cJSON *o, const char *key, const char *where, int required, int *out) {
  const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
  if (!j) {
    if (required) return FAIL(WISP_EFORMAT, "%s.%s: missing required field", where, key);
    return WISP_OK;
  }
  if (!wisp_json_is_int(j) || j->valuedouble < 0)
    return FAIL(WISP_EFORMAT, "%s.%s: expected a non-negative integer, got %s", where, key, wisp_json_type(j));
  *out = (int)j->valuedouble;
  if (required && *out == 0) return FAIL(WISP_EFORMAT, "%s.%s: must be positive", where, key);
  return WISP_OK;
}

wisp_status wisp_model_shape_from_json(const cJSON *shape, const char *where, wisp_model_shape *out) {
  memset(out, 0, sizeof *out);
  /* runtime.shape does not name the architecture: the artifact's default
   * until the manifest's wisp.architecture says (wisp_plan_manifest_parts) */
  snprintf(out->architecture, sizeof out->architecture, "%s", WISP_DEFAULT_ARCHITECTURE);
  if (!cJSON_IsObject(shape)) return FAIL(WISP_EFORMAT, "%s: expected an object, got %s", where, wisp_json_type(shape));
  const cJSON *lt = cJSON_GetObjectItemCaseSensitive(shape, "layerTypes");
  if (!lt) return FAIL(WISP_EFORMAT, "%s.layerTypes: missing required field", where);
  if (!cJSON_IsArray(lt) || !cJSON_GetArraySize(lt))
    return FAIL(WISP_EFORMAT, "%s.layerTypes: expected a non-empty array, got %s", where, wisp_json_type(lt));
  if (cJSON_GetArraySize(lt) > WISP_MAX_LAYERS)
    return FAIL(WISP_EUNSUPPORTED, "%s.layerTypes: %d layers, at most %d supported", where, cJSON_GetArraySize(lt), WISP_MAX_LAYERS);
  int i = 0;
  for (const cJSON *c = lt->child; c; c = c->next, i++) {
    if (cJSON_IsString(c) && !strcmp(c->valuestring, "conv")) out->layer_types[i] = WISP_LAYER_CONV;
    else if (cJSON_IsString(c) && (!strcmp(c->valuestring, "attention") || !strcmp(c->valuestring, "full_attention")))
      out->layer_types[i] = WISP_LAYER_ATTENTION;
    else if (cJSON_IsString(c) && !strcmp(c->valuestring, "linear_attention")) out->layer_types[i] = WISP_LAYER_LINEAR;
    else
      return FAIL(WISP_EFORMAT, "%s.layerTypes[%d]: unknown layer type %s%s%s (conv, attention, linear_attention)", where, i,
                  cJSON_IsString(c) ? "'" : "", cJSON_IsString(c) ? c->valuestring : wisp_json_type(c),
                  cJSON_IsString(c) ? "'" : "");
  }
  out->n_layers = i;
  wisp_status st;
  if ((st = shape_int(shape, "hidden", where, 1, &out->hidden)) || (st = shape_int(shape, "ffn", where, 1, &out->ffn)) ||
      (st = shape_int(shape, "vocab", where, 1, &out->vocab)) || (st = shape_int(shape, "heads", where, 1, &out->heads)) ||
      (st = shape_int(shape, "kvHeads", where, 1, &out->kv_heads)) ||
      (st = shape_int(shape, "headDim", where, 1, &out->head_dim)) ||
      (st = shape_int(shape, "quantBits", where, 0, &out->quant_bits)) ||
      (st = shape_int(shape, "convCache", where, 0, &out->conv_cache)) ||
      (st = shape_int(shape, "linearKeyHeads", where, 0, &out->lin_k_heads)) ||
      (st = shape_int(shape, "linearValueHeads", where, 0, &out->lin_v_heads)) ||
      (st = shape_int(shape, "linearKeyDim", where, 0, &out->lin_k_dim)) ||
      (st = shape_int(shape, "linearValueDim", where, 0, &out->lin_v_dim)) ||
      (st = wisp_shape_rope_pairs(shape, where, &out->rope_pairs)))
    return st;
  if (out->heads % out->kv_heads) return FAIL(WISP_EFORMAT, "%s.kvHeads: %d does not divide heads %d", where, out->kv_heads, out->heads);
  if (out->quant_bits < 0 || out->quant_bits > 32 || (out->quant_bits > 8 && out->quant_bits % 16) ||
      out->quant_bits == 1 || out->quant_bits == 7)
    return FAIL(WISP_EUNSUPPORTED, "%s.quantBits: %d (wisp plans 2 to 6, 8, 16 or 32)", where, out->quant_bits);
  return WISP_OK;
}

wisp_status wisp_plan_manifest_parts(const cJSON *manifest, const char *name, wisp_model_shape *shape,
                                     const cJSON **candidate, const cJSON **knee) {
  if (!cJSON_IsObject(manifest)) return FAIL(WISP_EFORMAT, "%s: top level: expected an object", name);
  const cJSON *rt = cJSON_GetObjectItemCaseSensitive(manifest, "runtime");
  char where[1024];
  wisp_path(where, sizeof where, "%s: runtime.shape", name);
  wisp_status st = wisp_model_shape_from_json(cJSON_GetObjectItemCaseSensitive(rt, "shape"), where, shape);
  if (st) return st;
  const cJSON *wx = cJSON_GetObjectItemCaseSensitive(manifest, "wisp");
  const cJSON *arch = cJSON_GetObjectItemCaseSensitive(wx, "architecture");
  if (cJSON_IsString(arch)) snprintf(shape->architecture, sizeof shape->architecture, "%s", arch->valuestring);
  const cJSON *wt = cJSON_GetObjectItemCaseSensitive(wx, "weights");
  if (cJSON_IsString(wt) && !strcmp(wt->valuestring, "q4k")) shape->q4k = 1;
  const cJSON *k = cJSON_GetObjectItemCaseSensitive(rt, "knee");
  const cJSON *c = cJSON_GetObjectItemCaseSensitive(manifest, "candidate");
  if (k && !cJSON_IsArray(k)) return FAIL(WISP_EFORMAT, "%s: runtime.knee: expected an array, got %s", name, wisp_json_type(k));
  if (c && !cJSON_IsObject(c)) return FAIL(WISP_EFORMAT, "%s: candidate: expected an object, got %s", name, wisp_json_type(c));
  *candidate = c;
  *knee = k;
  return WISP_OK;
}

void wisp_device_caps_from_manifest(wisp_device_caps *d, const cJSON *manifest) {
  if (strcmp(d->backend, "webgpu")) return;
  const cJSON *rt = cJSON_GetObjectItemCaseSensitive(manifest, "runtime");
  const cJSON *feat = cJSON_GetObjectItemCaseSensitive(rt, "extraFeatures");
  const cJSON *sg = cJSON_GetObjectItemCaseSensitive(rt, "expectedSubgroupSize");
  if (cJSON_IsArray(feat)) {
    d->has_subgroups = d->has_f16 = 0;
    for (const cJSON *c = feat->child; c; c = c->next) {
      if (!cJSON_IsString(c)) continue;
      if (!strcmp(c->valuestring, "subgroups")) d->has_subgroups = 1;
      if (!strcmp(c->valuestring, "shader-f16")) d->has_f16 = 1;
    }
  }
  if (wisp_json_is_int(sg) && sg->valuedouble > 0) d->subgroup_size = (int)sg->valuedouble;
}

/* ---- op vectors ---- */

typedef struct { wisp_plan_op *v; int n, cap; } opvec;

static wisp_status ov_insert(opvec *o, int at, const wisp_plan_op *op) {
  if (o->n == o->cap) {
    int nc = o->cap ? o->cap * 2 : 16;
    wisp_plan_op *nv = realloc(o->v, sizeof *nv * (size_t)nc);
    if (!nv) return FAIL(WISP_ENOMEM, "out of memory");
    o->v = nv;
    o->cap = nc;
  }
  memmove(o->v + at + 1, o->v + at, sizeof *o->v * (size_t)(o->n - at));
  o->v[at] = *op;
  o->n++;
  return WISP_OK;
}

static void ov_remove(opvec *o, int at) {
  memmove(o->v + at, o->v + at + 1, sizeof *o->v * (size_t)(o->n - at - 1));
  o->n--;
}

/* ---- resolver ---- */

typedef struct {
  const wisp_plan_inputs *in;
  const char *wdtype;
  const wisp_fusions *fusions;
  int n_blocks;          /* n_layers + 2: prologue, layers, epilogue */
  opvec *blocks[2];
  int tokens[2];
  int conv_fuse; /* candidate.convFuse (default 1): rules see it as "convFuse" */
  const wisp_graph *graph; /* the model's step: in->graph, or described from the shape */
  const wisp_arch *arch;   /* the shape's architecture */
} resolver;

static const char *const k_phase_names[2] = {"prefill", "decode"};

static const char *layer_name(wisp_layer_kind k) {
  return k == WISP_LAYER_CONV ? "conv" : k == WISP_LAYER_LINEAR ? "linear_attention" : "attention";
}

/* The weight dtype a matmul/embed op sees: the quant table's weightDtype of
 * the matrix itself when the graph is bound to weights (a GGUF file mixes
 * types, e.g. Q4_K with Q6_K); else from the shape: f32 artifacts "f32";
 * Q4_K artifacts "q4k" for matrices whose cols are a multiple of 256 (the
 * others, embed and head stay block-32 Q4/Q4Z: "q4"); else "q4". */
static const char *op_wdtype(const resolver *R, const wisp_plan_op *op) {
  const wisp_model_shape *s = R->in->shape;
  /* the bound matrix, when the plan has the model's step: a GGUF run in
   * place keeps each tensor's own type */
  const wisp_matrix *w = R->in->graph ? wisp_graph_matrix(R->in->graph, op->layer, op->section) : NULL;
  if (w && wisp_matrix_mixed(w)) w = &w->parts[op->part_at]; /* parts of different types: the part being resolved */
  const wisp_quant_traits *q = w ? wisp_quant_traits_of(w->type) : NULL;
  if (q) return q->weight_dtype;
  if (strcmp(R->wdtype, "q4") || !s->q4k) return R->wdtype;
  if (!strcmp(op->op, "embed") || !strcmp(op->section, "head")) return "q4";
  return op->cols % 256 == 0 ? "q4k" : "q4";
}

static void build_ctx(const resolver *R, const wisp_plan_op *op, int phase, wisp_ctx *c) {
  const wisp_model_shape *s = R->in->shape;
  wisp_ctx_init(c);
  wisp_ctx_add_device(c, R->in->device);
  wisp_ctx_set_str(c, "backend", R->in->backend);
  wisp_ctx_set_str(c, "architecture", s->architecture);
  /* The profile's intent, so that rules can keep speed-for-precision trades
   * (int8 activations in prefill) to throughput profiles. */
  wisp_ctx_set_str(c, "intent", R->in->profile && R->in->profile->intent ? R->in->profile->intent : "");
  wisp_ctx_set_bool(c, "convFuse", R->conv_fuse);
  wisp_ctx_set_str(c, "op", op->op);
  wisp_ctx_set_str(c, "section", op->section);
  wisp_ctx_set_str(c, "phase", k_phase_names[phase]);
  wisp_ctx_set_num(c, "layer", op->layer);
  wisp_ctx_set_str(c, "layerType", op->layer >= 0 ? layer_name(s->layer_types[op->layer]) : "");
  wisp_ctx_set_num(c, "tokens", R->tokens[phase]);
  wisp_ctx_set_num(c, "rows", op->rows);
  wisp_ctx_set_num(c, "cols", op->cols);
  wisp_ctx_set_num(c, "hidden", s->hidden);
  wisp_ctx_set_num(c, "ffn", s->ffn);
  wisp_ctx_set_num(c, "vocab", s->vocab);
  wisp_ctx_set_num(c, "heads", s->heads);
  wisp_ctx_set_num(c, "kvHeads", s->kv_heads);
  wisp_ctx_set_num(c, "headDim", s->head_dim);
  wisp_ctx_set_num(c, "quantBits", s->quant_bits);
  if (!strcmp(op->op, "matmul") || !strcmp(op->op, "embed")) wisp_ctx_set_str(c, "weightDtype", op_wdtype(R, op));
}

/* NULL when usable, else why not. */
static const char *unusable(const resolver *R, const wisp_variant *v, const wisp_ctx *ctx, char *buf, size_t cap) {
  const char *missing = NULL;
  if (strcmp(v->backend, R->in->backend) && strcmp(v->backend, "host")) {
    wisp_path(buf, cap, "%s: %s kernel", v->key, v->backend);
    return buf;
  }
  if (!v->available) { wisp_path(buf, cap, "%s: WGSL file %s missing", v->key, v->wgsl); return buf; }
  if (!wisp_variant_supported(v, R->in->device, &missing)) {
    wisp_path(buf, cap, "%s: requires %s, which the device lacks", v->key, missing);
    return buf;
  }
  const wisp_value *wd = wisp_ctx_get(ctx, "weightDtype");
  if (wd && v->weight_dtype && strcmp(wd->str, v->weight_dtype)) {
    wisp_path(buf, cap, "%s: weightDtype %s, model has %s", v->key, v->weight_dtype, wd->str);
    return buf;
  }
  return NULL;
}

static void geometry_default(const resolver *R, wisp_plan_op *op, const wisp_variant *v) {
  memset(&op->geometry, 0, sizeof op->geometry);
  op->geometry_from.kind = WISP_PROV_DEFAULT;
  wisp_path(op->geometry_from.detail, sizeof op->geometry_from.detail, "registry workgroup");
  if (strcmp(R->in->backend, "webgpu")) return;
  op->geometry.workgroup_size = v->workgroup[0] * v->workgroup[1] * v->workgroup[2];
  for (int i = 0; i < v->n_requires; i++)
    if (!strcmp(v->requires[i], "subgroups")) op->geometry.subgroup_size = R->in->device->subgroup_size;
  const wisp_meta *m;
  if ((m = wisp_variant_meta(v, "rowsPerSubgroup")) && m->type == WISP_META_NUM) op->geometry.rows_per_subgroup = (int)m->num;
  if ((m = wisp_variant_meta(v, "subgroupsPerRow")) && m->type == WISP_META_NUM) op->geometry.subgroups_per_row = (int)m->num;
}

/* Applies a manifest geometry object when the device can run it. */
static int try_geometry(const resolver *R, wisp_plan_op *op, const cJSON *g, wisp_prov_kind kind, const char *detail) {
  if (!cJSON_IsObject(g)) return 0;
  wisp_geometry x = {0};
  const char *keys[4] = {"workgroupSize", "subgroupSize", "rowsPerSubgroup", "subgroupsPerRow"};
  int *dst[4] = {&x.workgroup_size, &x.subgroup_size, &x.rows_per_subgroup, &x.subgroups_per_row};
  for (int i = 0; i < 4; i++) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(g, keys[i]);
    if (j && wisp_json_is_int(j) && j->valuedouble > 0) *dst[i] = (int)j->valuedouble;
  }
  const wisp_device_caps *d = R->in->device;
  if (!x.workgroup_size) {
    wisp_path(op->note, sizeof op->note, "%s: no workgroupSize; kept registry geometry", detail);
    return 0;
  }
  if (d->max_workgroup_size && x.workgroup_size > d->max_workgroup_size) {
    wisp_path(op->note, sizeof op->note, "%s: workgroupSize %d exceeds the device limit %d; kept registry geometry", detail,
              x.workgroup_size, d->max_workgroup_size);
    return 0;
  }
  if (x.subgroup_size && (!d->has_subgroups || d->subgroup_size != x.subgroup_size)) {
    wisp_path(op->note, sizeof op->note, "%s: subgroupSize %d, device has %s%d; kept registry geometry", detail,
              x.subgroup_size, d->has_subgroups ? "" : "no subgroups, ", d->subgroup_size);
    return 0;
  }
  op->geometry = x;
  op->geometry_from.kind = kind;
  wisp_path(op->geometry_from.detail, sizeof op->geometry_from.detail, "%s", detail);
  op->workgroup[0] = x.workgroup_size;
  op->workgroup[1] = op->workgroup[2] = 1;
  return 1;
}

static int uses_subgroups(const wisp_variant *v) {
  for (int i = 0; i < v->n_requires; i++)
    if (!strcmp(v->requires[i], "subgroups")) return 1;
  return 0;
}

/* Manifest geometry describes subgroup matvec tiling: it applies to webgpu
 * matmul variants that use subgroups. */
static void geometry_manifest(const resolver *R, wisp_plan_op *op, int phase, const wisp_variant *v) {
  if (strcmp(R->in->backend, "webgpu") || strcmp(op->op, "matmul") || !op->section[0]) return;
  if (!uses_subgroups(v)) return;
  char shape[32];
  wisp_path(shape, sizeof shape, "%s", op->section);
  for (char *p = shape; *p; p++)
    if (*p == '.') *p = '_';
  char detail[192];
  if (phase == WISP_PHASE_DECODE && R->in->candidate) {
    const cJSON *mv = cJSON_GetObjectItemCaseSensitive(R->in->candidate, "matvec");
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(mv, shape);
    if (m) {
      const cJSON *key = cJSON_GetObjectItemCaseSensitive(R->in->candidate, "key");
      const cJSON *var = cJSON_GetObjectItemCaseSensitive(m, "variant");
      if (cJSON_IsString(var)) wisp_path(op->manifest_variant, sizeof op->manifest_variant, "%s", var->valuestring);
      wisp_path(detail, sizeof detail, "candidate %s: matvec.%s", cJSON_IsString(key) ? key->valuestring : "-", shape);
      if (try_geometry(R, op, cJSON_GetObjectItemCaseSensitive(m, "geometry"), WISP_PROV_CANDIDATE, detail)) return;
    }
  }
  int i = 0;
  for (const cJSON *k = R->in->knee ? R->in->knee->child : NULL; k; k = k->next, i++) {
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(k, "shape");
    if (!cJSON_IsString(s) || strcmp(s->valuestring, shape)) continue;
    wisp_path(detail, sizeof detail, "knee[%d]: %s", i, shape);
    try_geometry(R, op, cJSON_GetObjectItemCaseSensitive(k, "geometry"), WISP_PROV_KNEE, detail);
    return;
  }
}

static void use_variant(const resolver *R, wisp_plan_op *op, const wisp_operation *rop, const wisp_variant *v, int phase) {
  wisp_path(op->kernel, sizeof op->kernel, "%s/%s", rop->name, v->key);
  wisp_path(op->entry, sizeof op->entry, "%s", v->entry_point);
  wisp_path(op->wgsl, sizeof op->wgsl, "%s", v->wgsl ? v->wgsl : "");
  memcpy(op->workgroup, v->workgroup, sizeof op->workgroup);
  op->n_constants = 0;
  op->manifest_variant[0] = 0;
  op->note[0] = 0;
  geometry_default(R, op, v);
  geometry_manifest(R, op, phase, v);
}

typedef struct {
  const resolver *R;
  const wisp_operation *rop;
  const wisp_ctx *ctx;
  int bad;
  char badval[128];
} accept_ud;

static int accept_variant(const char *value, void *ud) {
  accept_ud *a = ud;
  const wisp_variant *v = wisp_registry_variant(a->rop, value);
  char why[256];
  if (!v) {
    if (!a->bad) wisp_path(a->badval, sizeof a->badval, "%s", value);
    a->bad = 1;
    return 0;
  }
  return unusable(a->R, v, a->ctx, why, sizeof why) == NULL;
}

static wisp_status select_kernel(const resolver *R, wisp_plan_op *op, int phase) {
  const wisp_registry *reg = R->in->registry;
  const wisp_operation *rop = wisp_registry_op(reg, op->op);
  if (!rop)
    return FAIL(WISP_EUNSUPPORTED, "%s: operations.%s: missing; the %s plan needs it", reg->path, op->op, R->in->backend);
  wisp_ctx ctx;
  build_ctx(R, op, phase, &ctx);
  const wisp_variant *chosen = NULL;
  if (rop->rule_chain) {
    const wisp_rule_chain *ch = wisp_registry_chain(reg, rop->rule_chain);
    accept_ud a = {R, rop, &ctx, 0, ""};
    int idx = -1;
    char val[128];
    wisp_status st = ch ? wisp_rules_select(ch->rules, &ctx, accept_variant, &a, &idx, val, sizeof val) : WISP_OK;
    if (st) { wisp_error_prefix("%s: ruleChains.%s", reg->path, rop->rule_chain); return st; }
    if (a.bad)
      return FAIL(WISP_EFORMAT, "%s: ruleChains.%s: value '%s' is not a variant of operation '%s'", reg->path,
                  rop->rule_chain, a.badval, rop->name);
    if (idx >= 0) {
      chosen = wisp_registry_variant(rop, val);
      op->kernel_from.kind = WISP_PROV_RULE;
      wisp_path(op->kernel_from.detail, sizeof op->kernel_from.detail, "%s#%d", rop->rule_chain, idx);
    }
  }
  if (!chosen) {
    char why[256];
    for (int i = 0; i < rop->n_variants && !chosen; i++)
      if (!unusable(R, &rop->variants[i], &ctx, why, sizeof why)) chosen = &rop->variants[i];
    if (chosen) {
      op->kernel_from.kind = WISP_PROV_DEFAULT;
      wisp_path(op->kernel_from.detail, sizeof op->kernel_from.detail, "first usable variant");
    }
  }
  if (!chosen) {
    char reasons[768];
    size_t n = 0;
    reasons[0] = 0;
    for (int i = 0; i < rop->n_variants; i++) {
      char why[256];
      const char *w = unusable(R, &rop->variants[i], &ctx, why, sizeof why);
      if (!w || (strcmp(rop->variants[i].backend, R->in->backend) && strcmp(rop->variants[i].backend, "host"))) continue;
      int k = snprintf(reasons + n, sizeof reasons - n, "%s%s", n ? "; " : "", w);
      if (k > 0 && (size_t)k < sizeof reasons - n) n += (size_t)k;
    }
    return FAIL(WISP_EDEVICE, "%s: operations.%s: no variant usable for backend %s on this device%s%s%s", reg->path,
                rop->name, R->in->backend, n ? " (" : "", reasons, n ? ")" : "");
  }
  use_variant(R, op, rop, chosen, phase);
  return WISP_OK;
}

static wisp_status make_op(const resolver *R, opvec *dst, int phase, int layer, const char *name, const char *section,
                           int rows, int cols, int residual) {
  wisp_plan_op op;
  memset(&op, 0, sizeof op);
  wisp_path(op.op, sizeof op.op, "%s", name);
  wisp_path(op.section, sizeof op.section, "%s", section);
  wisp_path(op.backend, sizeof op.backend, "%s", R->in->backend);
  op.layer = layer;
  op.rows = rows;
  op.cols = cols;
  op.residual = residual;
  wisp_status st = select_kernel(R, &op, phase);
  if (st) return st;
  /* a matrix in row parts of different types: a kernel for each part,
   * chosen for its type; parts of one type run as one matrix of it (the
   * note tells where its rows lie) */
  const wisp_matrix *w =
      R->in->graph && !strcmp(name, "matmul") ? wisp_graph_matrix(R->in->graph, layer, section) : NULL;
  if (w && w->n_parts && !wisp_matrix_mixed(w) && !op.note[0])
    wisp_path(op.note, sizeof op.note, "in %d row parts of one type (apart in the file): runs as one %s matrix",
              w->n_parts, wisp_wtype_name(w->type));
  for (int i = 0; w && wisp_matrix_mixed(w) && i < w->n_parts && !st; i++) {
    wisp_plan_op part = op;
    part.part_at = i;
    if ((st = select_kernel(R, &part, phase))) break;
    op.parts[i].rows = w->parts[i].rows;
    wisp_path(op.parts[i].weight_dtype, sizeof op.parts[i].weight_dtype, "%s",
              wisp_quant_traits_of(w->parts[i].type)->weight_dtype);
    wisp_path(op.parts[i].kernel, sizeof op.parts[i].kernel, "%s", part.kernel);
    wisp_path(op.parts[i].wgsl, sizeof op.parts[i].wgsl, "%s", part.wgsl);
    op.parts[i].geometry = part.geometry;
    op.parts[i].kernel_from = part.kernel_from;
    op.n_parts = i + 1;
  }
  if (st) return st;
  return ov_insert(dst, dst->n, &op);
}

/* A matmul that feeds the residual stream: fused, or followed by residual_add. */
static wisp_status residual_matmul(const resolver *R, opvec *dst, int phase, int layer, const char *section, int rows, int cols) {
  int fused = R->fusions->residual_add;
  wisp_status st = make_op(R, dst, phase, layer, "matmul", section, rows, cols, fused);
  if (!st && !fused) st = make_op(R, dst, phase, layer, "residual_add", "", 0, 0, 0);
  return st;
}

/* The default op list of a phase: the embedding, every node of the model's
 * graph in order (a residual matmul as residual_matmul makes it), the head. */
static wisp_status build_defaults(resolver *R, int phase) {
  const wisp_model_shape *s = R->in->shape;
  const wisp_graph *g = R->graph;
  opvec *b = R->blocks[phase];
  wisp_status st;
  if ((st = make_op(R, &b[0], phase, -1, "embed", "embed", s->vocab, s->hidden, 0))) return st;
  for (int i = 0; i < g->n_nodes; i++) {
    const wisp_gnode *n = &g->nodes[i];
    if (n->layer < 0 || n->layer >= s->n_layers)
      return FAIL(WISP_EINVAL, "plan: graph node %d is in layer %d of %d", i, n->layer, s->n_layers);
    opvec *o = &b[n->layer + 1];
    const char *op = wisp_gop_name(n->op);
    if (n->op == WISP_GOP_MATMUL && n->accumulate) st = residual_matmul(R, o, phase, n->layer, n->section, n->rows, n->cols);
    else if (n->op == WISP_GOP_MATMUL) st = make_op(R, o, phase, n->layer, op, n->section, n->rows, n->cols, 0);
    else st = make_op(R, o, phase, n->layer, op, n->section, 0, 0, 0);
    if (st) return st;
  }
  opvec *e = &b[s->n_layers + 1];
  if ((st = make_op(R, e, phase, -1, "rmsnorm", "head.norm", 0, 0, 0)) ||
      (st = make_op(R, e, phase, -1, "matmul", "head", s->vocab, s->hidden, 0)) ||
      (st = make_op(R, e, phase, -1, "sample", "", 0, 0, 0)))
    return st;
  return WISP_OK;
}

/* ---- the graph's fusions ---- */

int wisp_norm_fuse_switch(const char *section) {
  return !strcmp(section, "mlp.gate_up") ? WISP_SW_FFN_Q4K : WISP_SW_POST_FFN_NORM_PAIR;
}

/* Whether this plan applies fusion `bit` found between nodes a and b, and
 * why: the backend runs it as one op (its caps) and, on WebGPU, the
 * profile's switch allows it. */
static int fusion_applied(const wisp_plan *p, const wisp_model_shape *s, unsigned bit, const wisp_gnode *b,
                          char *why, size_t cap) {
  if (!(p->device.fusions & bit)) {
    wisp_path(why, cap, "the %s backend has no fused op for it", p->backend);
    return 0;
  }
  if (strcmp(p->backend, "webgpu")) { /* the cpu's rmsnorm+matmul: the same bits as the two ops, no switch */
    wisp_path(why, cap, "the %s backend's fused op", p->backend);
    return 1;
  }
  const wisp_fusions *f = &p->fusions;
  int on = 1, sw = -1;
  switch (bit) {
    case WISP_FUSE_NORM_MATMUL: sw = wisp_norm_fuse_switch(b ? b->section : "head"); break;
    case WISP_FUSE_RESIDUAL_NORM: sw = WISP_SW_RESIDUAL_ADD; break;
    case WISP_FUSE_GATE_UP_SWIGLU:
      if (!s->q4k) { /* the pair product (matvec PAIR); fusedFfnQ4K is Q4_K's kernel */
        wisp_path(why, cap, "decode");
        return 1;
      }
      sw = WISP_SW_FFN_Q4K;
      break;
    case WISP_FUSE_QK_NORM_ROPE_KV: sw = WISP_SW_QKV_NORM_ROPE; break;
    case WISP_FUSE_HEAD_ARGMAX: sw = WISP_SW_HEAD_ARGMAX; break;
    case WISP_FUSE_CONV_MATMUL:
      on = p->conv_fuse;
      wisp_path(why, cap, "decode; convFuse (%s)", p->conv_fuse_from);
      return on;
    case WISP_FUSE_MIXER_MATMUL:
      wisp_path(why, cap, "decode, where the product's kernel takes the mixer's last step");
      return 1;
    default:
      wisp_path(why, cap, "decode");
      return 1;
  }
  on = wisp_switch_on(f, sw);
  wisp_path(why, cap, "decode; %s %s", wisp_switch_name(sw), on ? "on" : "off");
  return on;
}

/* Appends layer l to a "0-3,5" list. */
static void add_layer(char *list, size_t cap, int l) {
  size_t n = strlen(list);
  int last = -1, run = 0;
  const char *tail = list + n;
  while (tail > list && tail[-1] >= '0' && tail[-1] <= '9') tail--;
  if (tail < list + n) last = atoi(tail);
  run = tail > list && tail[-1] == '-';
  if (last == l - 1 && n) {
    if (run) wisp_path(list + (tail - list), cap - (size_t)(tail - list), "%d", l);
    else wisp_path(list + n, cap - n, "-%d", l);
  } else {
    wisp_path(list + n, cap - n, "%s%d", n ? "," : "", l);
  }
}

/* The plan's entry for fusion `bit` of the pair first -> second (made on
 * first sight, with whether the plan applies it; b: the pair's second node,
 * NULL for the head); NULL when the list is full. */
static int fusion_entry(wisp_plan *p, const resolver *R, unsigned bit, const wisp_gnode *b, const char *first,
                        const char *second) {
  const char *name = wisp_fuse_name(bit);
  int k = 0;
  while (k < p->n_graph_fusions && (strcmp(p->graph_fusions[k].name, name) || strcmp(p->graph_fusions[k].first, first) ||
                                    strcmp(p->graph_fusions[k].second, second)))
    k++;
  if (k == p->n_graph_fusions) {
    if (k == WISP_PLAN_MAX_FUSIONS) return -1;
    p->n_graph_fusions++;
    memset(&p->graph_fusions[k], 0, sizeof p->graph_fusions[k]);
    wisp_path(p->graph_fusions[k].name, sizeof p->graph_fusions[k].name, "%s", name);
    wisp_path(p->graph_fusions[k].first, sizeof p->graph_fusions[k].first, "%s", first);
    wisp_path(p->graph_fusions[k].second, sizeof p->graph_fusions[k].second, "%s", second);
    p->graph_fusions[k].applied =
        fusion_applied(p, R->in->shape, bit, b, p->graph_fusions[k].why, sizeof p->graph_fusions[k].why);
  }
  return k;
}

/* The names of node i's fusion `bit` pair: first and second ("" for a
 * fusion inside one node); 0 when the pair has no second node. */
static int fusion_pair(const wisp_graph *g, int i, unsigned bit, char *first, char *second, size_t cap) {
  const wisp_gnode *a = &g->nodes[i], *b = i + 1 < g->n_nodes ? &g->nodes[i + 1] : NULL;
  wisp_path(first, cap, "%s%s%s", wisp_gop_name(a->op), a->section[0] ? " " : "", a->section);
  second[0] = 0;
  if (bit == WISP_FUSE_QK_NORM_ROPE_KV) /* inside one node: no second */
    return 1;
  if (b)
    wisp_path(second, cap, "%s%s%s", wisp_gop_name(b->op), b->section[0] ? " " : "", b->section);
  else if (bit == WISP_FUSE_RESIDUAL_NORM) /* the last residual add feeds the final norm */
    wisp_path(second, cap, "rmsnorm head.norm");
  else
    return 0;
  return 1;
}

/* The head's pairs (graph-wide bits: not nodes). */
static const char *head_pair(unsigned bit, const char **second) {
  *second = bit == WISP_FUSE_NORM_MATMUL ? "matmul head" : "sample (greedy)";
  return bit == WISP_FUSE_NORM_MATMUL ? "rmsnorm head.norm" : "matmul head";
}

static void graph_fusions(wisp_plan *p, const resolver *R) {
  const wisp_graph *g = R->graph;
  for (int i = 0; i < g->n_nodes; i++) {
    const wisp_gnode *a = &g->nodes[i], *b = i + 1 < g->n_nodes ? &g->nodes[i + 1] : NULL;
    for (unsigned bit = 1; bit < (1u << WISP_FUSE_KINDS); bit <<= 1) {
      char first[48], second[48];
      if (!(a->fused & bit) || !fusion_pair(g, i, bit, first, second, sizeof first)) continue;
      int k = fusion_entry(p, R, bit, b, first, second);
      if (k >= 0) add_layer(p->graph_fusions[k].layers, sizeof p->graph_fusions[k].layers, a->layer);
    }
  }
  for (unsigned bit = WISP_FUSE_NORM_MATMUL; bit; bit = bit == WISP_FUSE_NORM_MATMUL ? WISP_FUSE_HEAD_ARGMAX : 0) {
    const char *second, *first = head_pair(bit, &second);
    if (g->fused & bit) fusion_entry(p, R, bit, NULL, first, second);
  }
}

/* 1 when the plan lists the pair and applies it. */
static int pair_applied(const wisp_plan *p, unsigned bit, const char *first, const char *second) {
  const char *name = wisp_fuse_name(bit);
  for (int k = 0; k < p->n_graph_fusions; k++)
    if (!strcmp(p->graph_fusions[k].name, name) && !strcmp(p->graph_fusions[k].first, first) &&
        !strcmp(p->graph_fusions[k].second, second))
      return p->graph_fusions[k].applied;
  return 0;
}

unsigned wisp_plan_fusions_at(const wisp_plan *p, const wisp_graph *g, int node) {
  unsigned on = 0;
  if (node < 0) {
    for (unsigned bit = WISP_FUSE_NORM_MATMUL; bit; bit = bit == WISP_FUSE_NORM_MATMUL ? WISP_FUSE_HEAD_ARGMAX : 0) {
      const char *second, *first = head_pair(bit, &second);
      if ((g->fused & bit) && pair_applied(p, bit, first, second)) on |= bit;
    }
    return on;
  }
  if (node >= g->n_nodes) return 0;
  for (unsigned bit = 1; bit < (1u << WISP_FUSE_KINDS); bit <<= 1) {
    char first[48], second[48];
    if ((g->nodes[node].fused & bit) && fusion_pair(g, node, bit, first, second, sizeof first) &&
        pair_applied(p, bit, first, second))
      on |= bit;
  }
  return on;
}


/* ---- profile patches ---- */

static int sel_matches(const wisp_plan_op *op, const char *sel) {
  return !strcmp(op->op, sel) || (op->section[0] && !strcmp(op->section, sel));
}

/* Profiles written for other runtimes name Hugging Face modules; the
 * architecture says which of its ops or sections each means
 * (wisp_arch.profile_aliases). NULL when `sel` is not such a name. The
 * plan op gets a note. */
static const char *profile_alias(const resolver *R, const char *sel) {
  for (int i = 0; i < R->arch->n_profile_aliases; i++)
    if (!strcmp(sel, R->arch->profile_aliases[i][0])) return R->arch->profile_aliases[i][1];
  return NULL;
}

static wisp_status apply_kernel_key(const resolver *R, const wisp_patch *w, wisp_plan_op *op, int phase) {
  const char *key = w->kernel_key;
  const wisp_device_caps *d = R->in->device;
  const char *missing = NULL;
  const char *slash = strchr(key, '/');
  if (slash) {
    char opname[64];
    size_t ol = (size_t)(slash - key);
    if (ol >= sizeof opname) ol = sizeof opname - 1;
    memcpy(opname, key, ol);
    opname[ol] = 0;
    const wisp_operation *rop = wisp_registry_op(R->in->registry, opname);
    if (!rop)
      return FAIL(WISP_EINVAL, "%s: %s.kernelKey: '%s': the registry has no operation '%s'", w->profile_file, w->json_path,
                  key, opname);
    const wisp_variant *v = wisp_registry_variant(rop, slash + 1);
    if (!v)
      return FAIL(WISP_EINVAL, "%s: %s.kernelKey: '%s': operation '%s' has no variant '%s'", w->profile_file, w->json_path,
                  key, opname, slash + 1);
    if (strcmp(rop->name, op->op))
      return FAIL(WISP_EINVAL, "%s: %s.kernelKey: '%s' is a %s kernel; op '%s'%s%s%s needs a %s kernel", w->profile_file,
                  w->json_path, key, rop->name, op->op, op->section[0] ? " (" : "", op->section,
                  op->section[0] ? ")" : "", op->op);
    if (strcmp(v->backend, R->in->backend) && strcmp(v->backend, "host"))
      return FAIL(WISP_EINVAL, "%s: %s.kernelKey: '%s' is a %s kernel; the plan's backend is %s", w->profile_file,
                  w->json_path, key, v->backend, R->in->backend);
    if (!v->available)
      return FAIL(WISP_EIO, "%s: %s.kernelKey: '%s': kernel file '%s' not found in %s", w->profile_file, w->json_path, key,
                  v->wgsl, R->in->registry->kernels_dir);
    if (!wisp_variant_supported(v, d, &missing))
      return FAIL(WISP_EDEVICE, "%s: %s.kernelKey: '%s' requires '%s', which the device lacks", w->profile_file,
                  w->json_path, key, missing);
    use_variant(R, op, rop, v, phase);
  } else {
    const wisp_profile_kernel *k = wisp_profile_kernel_find(R->in->profile, key);
    if (!k) return FAIL(WISP_EINVAL, "%s: %s.kernelKey: unknown kernel '%s'", w->profile_file, w->json_path, key);
    if (strcmp(R->in->backend, "webgpu"))
      return FAIL(WISP_EINVAL, "%s: %s.kernelKey: '%s' is a WGSL kernel (%s); the plan's backend is %s", w->profile_file,
                  w->json_path, key, k->source, R->in->backend);
    for (int i = 0; i < k->n_requires; i++)
      if (wisp_device_has(d, k->requires[i]) != 1)
        return FAIL(WISP_EDEVICE, "%s: %s.kernelKey: '%s' requires '%s', which the device lacks", w->profile_file,
                    w->json_path, key, k->requires[i]);
    wisp_path(op->kernel, sizeof op->kernel, "%s", key);
    wisp_path(op->entry, sizeof op->entry, "%s", k->entry);
    wisp_path(op->wgsl, sizeof op->wgsl, "%s", k->file);
    op->workgroup[0] = op->workgroup[1] = op->workgroup[2] = 1;
    memset(&op->geometry, 0, sizeof op->geometry);
    op->manifest_variant[0] = 0;
    op->note[0] = 0;
    op->n_constants = 0;
    for (const cJSON *c = k->constants ? k->constants->child : NULL; c && op->n_constants < WISP_PLAN_MAX_CONSTANTS; c = c->next) {
      int i = op->n_constants++;
      wisp_path(op->constants[i].key, sizeof op->constants[i].key, "%s", c->string);
      op->constants[i].is_bool = cJSON_IsBool(c);
      op->constants[i].value = cJSON_IsBool(c) ? (cJSON_IsTrue(c) ? 1 : 0) : c->valuedouble;
      int v = (int)op->constants[i].value;
      if (!strcmp(c->string, "WORKGROUP_SIZE")) { op->geometry.workgroup_size = v; op->workgroup[0] = v; }
      else if (!strcmp(c->string, "SUBGROUP_SIZE")) op->geometry.subgroup_size = v;
      else if (!strcmp(c->string, "ROWS_PER_SUBGROUP")) op->geometry.rows_per_subgroup = v;
      else if (!strcmp(c->string, "SUBGROUPS_PER_ROW")) op->geometry.subgroups_per_row = v;
    }
    op->geometry_from.kind = WISP_PROV_PROFILE;
    wisp_path(op->geometry_from.detail, sizeof op->geometry_from.detail, "%s", k->source);
  }
  op->kernel_from.kind = WISP_PROV_PROFILE;
  wisp_path(op->kernel_from.detail, sizeof op->kernel_from.detail, "%s", w->source);
  /* a kernel serves one weight type: the parts of a matrix in row parts keep their own */
  if (op->n_parts)
    wisp_path(op->note, sizeof op->note, "in row parts: each part runs its own type's kernel, not %s", key);
  return WISP_OK;
}

static int has_layer(const wisp_patch *w, int layer) {
  for (int i = 0; i < w->n_layers; i++)
    if (w->layers[i] == layer) return 1;
  return 0;
}

static wisp_status apply_patch(resolver *R, const wisp_patch *w) {
  int n_layers = R->in->shape->n_layers;
  for (int i = 0; i < w->n_layers; i++)
    if (w->layers[i] >= n_layers)
      return FAIL(WISP_EINVAL, "%s: %s.layers[%d]: layer %d out of range (the model has %d layers)", w->profile_file,
                  w->json_path, i, w->layers[i], n_layers);
  int count = 0;
  const char *sel = w->verb == WISP_PATCH_ADD ? (w->after ? w->after : w->before) : w->op;
  const char *alias = profile_alias(R, sel);
  if (alias) sel = alias;
  for (int ph = 0; ph < 2; ph++) {
    if (strcmp(w->section, "all") && strcmp(w->section, k_phase_names[ph])) continue;
    for (int b = 0; b < R->n_blocks; b++) {
      int layer = (b >= 1 && b <= n_layers) ? b - 1 : -1;
      if (w->n_layers && (layer < 0 || !has_layer(w, layer))) continue;
      opvec *o = &R->blocks[ph][b];
      wisp_status st;
      if (w->verb == WISP_PATCH_SET) {
        for (int i = 0; i < o->n; i++)
          if (sel_matches(&o->v[i], sel)) {
            if ((st = apply_kernel_key(R, w, &o->v[i], ph))) return st;
            if (alias)
              wisp_path(o->v[i].note, sizeof o->v[i].note, "profile op '%s' is %s in the %s plan", w->op, alias,
                         R->arch->name);
            count++;
          }
      } else if (w->verb == WISP_PATCH_REMOVE) {
        for (int i = o->n - 1; i >= 0; i--)
          if (sel_matches(&o->v[i], sel)) { ov_remove(o, i); count++; }
      } else {
        for (int i = 0; i < o->n; i++) {
          if (!sel_matches(&o->v[i], sel)) continue;
          wisp_plan_op op;
          memset(&op, 0, sizeof op);
          wisp_path(op.op, sizeof op.op, "%s", w->op);
          wisp_path(op.backend, sizeof op.backend, "%s", R->in->backend);
          op.layer = layer;
          if ((st = apply_kernel_key(R, w, &op, ph))) return st;
          int at = w->after ? i + 1 : i;
          if ((st = ov_insert(o, at, &op))) return st;
          i++; /* skip the anchor (before) or the new op (after) */
          count++;
        }
      }
    }
  }
  if (!count) {
    char layers[256] = "";
    size_t n = 0;
    for (int i = 0; i < w->n_layers; i++) {
      int k = snprintf(layers + n, sizeof layers - n, "%s%d", i ? "," : " layers ", w->layers[i]);
      if (k > 0 && (size_t)k < sizeof layers - n) n += (size_t)k;
    }
    return FAIL(WISP_EINVAL, "%s: %s.%s: '%s' matches no op in section %s%s of the %s plan", w->profile_file, w->json_path,
                w->verb == WISP_PATCH_ADD ? (w->after ? "after" : "before") : "op", sel, w->section, layers,
                R->in->backend);
  }
  return WISP_OK;
}

/* ---- JSON ---- */

const char *wisp_prov_kind_name(wisp_prov_kind k) {
  switch (k) {
    case WISP_PROV_DEFAULT: return "default";
    case WISP_PROV_RULE: return "rule";
    case WISP_PROV_PROFILE: return "profile";
    case WISP_PROV_CANDIDATE: return "manifest-candidate";
    case WISP_PROV_KNEE: return "manifest-knee";
  }
  return "?";
}

static cJSON *prov_json(const wisp_provenance *p) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "kind", wisp_prov_kind_name(p->kind));
  cJSON_AddStringToObject(o, "detail", p->detail);
  return o;
}

static cJSON *op_json(const wisp_plan_op *op) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "op", op->op);
  if (op->section[0]) cJSON_AddStringToObject(o, "section", op->section);
  cJSON_AddStringToObject(o, "kernel", op->kernel);
  cJSON_AddStringToObject(o, "entry", op->entry);
  if (op->wgsl[0]) cJSON_AddStringToObject(o, "wgsl", op->wgsl);
  cJSON_AddItemToObject(o, "workgroup", cJSON_CreateIntArray(op->workgroup, 3));
  if (op->rows) cJSON_AddNumberToObject(o, "rows", op->rows);
  if (op->cols) cJSON_AddNumberToObject(o, "cols", op->cols);
  if (op->residual) cJSON_AddBoolToObject(o, "residual", 1);
  if (!strcmp(op->backend, "webgpu")) {
    cJSON *g = cJSON_AddObjectToObject(o, "geometry");
    if (op->geometry.workgroup_size) cJSON_AddNumberToObject(g, "workgroupSize", op->geometry.workgroup_size);
    if (op->geometry.subgroup_size) cJSON_AddNumberToObject(g, "subgroupSize", op->geometry.subgroup_size);
    if (op->geometry.rows_per_subgroup) cJSON_AddNumberToObject(g, "rowsPerSubgroup", op->geometry.rows_per_subgroup);
    if (op->geometry.subgroups_per_row) cJSON_AddNumberToObject(g, "subgroupsPerRow", op->geometry.subgroups_per_row);
  }
  if (op->manifest_variant[0]) cJSON_AddStringToObject(o, "manifestVariant", op->manifest_variant);
  if (op->n_constants) {
    cJSON *c = cJSON_AddObjectToObject(o, "constants");
    for (int i = 0; i < op->n_constants; i++) {
      if (op->constants[i].is_bool) cJSON_AddBoolToObject(c, op->constants[i].key, op->constants[i].value != 0);
      else cJSON_AddNumberToObject(c, op->constants[i].key, op->constants[i].value);
    }
  }
  cJSON *p = cJSON_AddObjectToObject(o, "provenance");
  cJSON_AddItemToObject(p, "kernel", prov_json(&op->kernel_from));
  cJSON_AddItemToObject(p, "geometry", prov_json(&op->geometry_from));
  if (op->note[0]) cJSON_AddStringToObject(o, "note", op->note);
  if (op->n_parts) {
    cJSON *parts = cJSON_AddArrayToObject(o, "parts");
    for (int i = 0; i < op->n_parts; i++) {
      cJSON *q = cJSON_CreateObject();
      cJSON_AddNumberToObject(q, "rows", op->parts[i].rows);
      cJSON_AddStringToObject(q, "weightDtype", op->parts[i].weight_dtype);
      cJSON_AddStringToObject(q, "kernel", op->parts[i].kernel);
      if (op->parts[i].wgsl[0]) cJSON_AddStringToObject(q, "wgsl", op->parts[i].wgsl);
      cJSON_AddItemToObject(q, "provenance", prov_json(&op->parts[i].kernel_from));
      cJSON_AddItemToArray(parts, q);
    }
  }
  return o;
}

static cJSON *ops_json(const wisp_plan_op *ops, int n) {
  cJSON *a = cJSON_CreateArray();
  for (int i = 0; i < n; i++) cJSON_AddItemToArray(a, op_json(&ops[i]));
  return a;
}

static cJSON *batching_json(const wisp_batching *b) {
  if (!b->present) return cJSON_CreateNull();
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "batchSize", b->batch_size);
  cJSON_AddNumberToObject(o, "readbackInterval", b->readback_interval);
  cJSON_AddStringToObject(o, "stopCheckMode", b->stop_check_mode ? b->stop_check_mode : "");
  cJSON_AddStringToObject(o, "readbackMode", b->readback_mode ? b->readback_mode : "");
  cJSON_AddNumberToObject(o, "ringTokens", b->ring_tokens);
  cJSON_AddNumberToObject(o, "ringStop", b->ring_stop);
  cJSON_AddNumberToObject(o, "ringStaging", b->ring_staging);
  cJSON_AddNumberToObject(o, "maxBatchDecodeTokens", b->max_batch_decode_tokens);
  if (b->has_submit_latency) cJSON_AddNumberToObject(o, "submitLatencyThresholdMs", b->submit_latency_threshold_ms);
  else cJSON_AddNullToObject(o, "submitLatencyThresholdMs");
  cJSON_AddBoolToObject(o, "disableCommandBatching", b->disable_command_batching);
  return o;
}

int wisp_switch_on(const wisp_fusions *f, int i) {
  switch (i) {
    case WISP_SW_RESIDUAL_ADD: return f->residual_add;
    case WISP_SW_POST_FFN_NORM_PAIR: return f->post_ffn_norm_pair;
    case WISP_SW_FFN_Q4K: return f->ffn_q4k;
    case WISP_SW_HEAD_ARGMAX: return f->greedy_head_argmax;
    case WISP_SW_HEAD_ARGMAX_Q4K: return f->greedy_head_argmax;
    case WISP_SW_ATTN_OUTPUT_GATE: return f->attn_output_gate;
    case WISP_SW_ATTN_DIRECT_KV: return f->attn_direct_kv;
    case WISP_SW_LIN_QKVZ: return f->lin_qkvz;
    case WISP_SW_LIN_AB: return f->lin_ab;
    case WISP_SW_LIN_CORE: return f->lin_core;
    case WISP_SW_QKV_NORM_ROPE: return f->fused_qkv_split_norm_rope;
    case WISP_SW_DECODE_LOOP: return f->decode_loop;
  }
  return 0;
}

static cJSON *geometry_json(const wisp_q4k_geometry *g) {
  cJSON *o = cJSON_CreateObject();
  if (g->workgroup_size) cJSON_AddNumberToObject(o, "workgroupSize", g->workgroup_size);
  if (g->cols_per_wg) cJSON_AddNumberToObject(o, "colsPerWorkgroup", g->cols_per_wg);
  if (g->threads_per_col) cJSON_AddNumberToObject(o, "threadsPerCol", g->threads_per_col);
  if (g->full_block >= 0) cJSON_AddBoolToObject(o, "useFullBlockFastPath", g->full_block);
  return o;
}

/* settings.session: {"appliesTo": ..., "switches": {NAME: {"on", "from"[, "geometry"]}}} */
cJSON *wisp_plan_switches_json(const wisp_plan *p) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "appliesTo", strcmp(p->backend, "cpu") ? p->backend
                                            : "none: the cpu backend runs the unfused reference ops (same numbers)");
  cJSON *sw = cJSON_AddObjectToObject(o, "switches");
  for (int i = 0; i < WISP_SW_COUNT; i++) {
    cJSON *e = cJSON_AddObjectToObject(sw, wisp_switch_name(i));
    if (i != WISP_SW_HEAD_ARGMAX_Q4K) cJSON_AddBoolToObject(e, "on", wisp_switch_on(&p->fusions, i));
    cJSON_AddStringToObject(e, "from", p->fusions.from[i] ? p->fusions.from[i] : "default");
    if (i == WISP_SW_FFN_Q4K) cJSON_AddItemToObject(e, "geometry", geometry_json(&p->fusions.ffn_geometry));
    if (i == WISP_SW_HEAD_ARGMAX_Q4K) cJSON_AddItemToObject(e, "geometry", geometry_json(&p->fusions.head_geometry));
  }
  return o;
}

static cJSON *plan_json(const wisp_plan *p, const wisp_plan_inputs *in) {
  const wisp_model_shape *s = in->shape;
  cJSON *root = cJSON_CreateObject();
  cJSON_AddNumberToObject(root, "version", 1);
  cJSON_AddStringToObject(root, "backend", p->backend);
  cJSON *d = cJSON_AddObjectToObject(root, "device");
  const wisp_device_caps *c = &p->device;
  cJSON_AddStringToObject(d, "vendor", c->vendor);
  cJSON_AddBoolToObject(d, "hasSubgroups", c->has_subgroups);
  cJSON_AddNumberToObject(d, "subgroupSize", c->subgroup_size);
  cJSON_AddBoolToObject(d, "hasF16", c->has_f16);
  cJSON_AddBoolToObject(d, "hasAvx2", c->has_avx2);
  cJSON *lim = cJSON_AddObjectToObject(d, "limits");
  cJSON_AddNumberToObject(lim, "maxComputeInvocationsPerWorkgroup", c->max_workgroup_size);
  cJSON_AddNumberToObject(lim, "maxComputeWorkgroupStorageSize", c->max_shared_bytes);
  cJSON *m = cJSON_AddObjectToObject(root, "model");
  cJSON *lt = cJSON_AddArrayToObject(m, "layerTypes");
  for (int i = 0; i < s->n_layers; i++) cJSON_AddItemToArray(lt, cJSON_CreateString(layer_name(s->layer_types[i])));
  cJSON_AddNumberToObject(m, "hidden", s->hidden);
  cJSON_AddNumberToObject(m, "ffn", s->ffn);
  cJSON_AddNumberToObject(m, "vocab", s->vocab);
  cJSON_AddNumberToObject(m, "heads", s->heads);
  cJSON_AddNumberToObject(m, "kvHeads", s->kv_heads);
  cJSON_AddNumberToObject(m, "headDim", s->head_dim);
  cJSON_AddNumberToObject(m, "quantBits", s->quant_bits);
  cJSON_AddNumberToObject(m, "convCache", s->conv_cache);
  const wisp_arch *arch = wisp_arch_find(s->architecture);
  if (arch && arch->plan_id_names_arch) {
    cJSON_AddStringToObject(m, "architecture", arch->name);
    cJSON_AddNumberToObject(m, "linearKeyHeads", s->lin_k_heads);
    cJSON_AddNumberToObject(m, "linearValueHeads", s->lin_v_heads);
    cJSON_AddNumberToObject(m, "linearKeyDim", s->lin_k_dim);
    cJSON_AddNumberToObject(m, "linearValueDim", s->lin_v_dim);
  }
  if (s->q4k) cJSON_AddBoolToObject(m, "q4k", 1);
  cJSON_AddStringToObject(root, "registryVersion", in->registry->version);
  const cJSON *ck = in->candidate ? cJSON_GetObjectItemCaseSensitive(in->candidate, "key") : NULL;
  if (cJSON_IsString(ck)) cJSON_AddStringToObject(root, "candidate", ck->valuestring);
  else cJSON_AddNullToObject(root, "candidate");
  if (in->profile) {
    cJSON *pr = cJSON_AddObjectToObject(root, "profile");
    cJSON_AddStringToObject(pr, "id", in->profile->id);
    if (in->profile->intent) cJSON_AddStringToObject(pr, "intent", in->profile->intent);
    cJSON *ch = cJSON_AddArrayToObject(pr, "chain");
    for (int i = 0; i < in->profile->n_chain; i++) cJSON_AddItemToArray(ch, cJSON_CreateString(in->profile->chain[i]));
    cJSON_AddBoolToObject(pr, "digestsVerified", in->profile->digests_verified);
  } else cJSON_AddNullToObject(root, "profile");
  cJSON *phases = cJSON_AddObjectToObject(root, "phases");
  for (int ph = 0; ph < 2; ph++) {
    const wisp_plan_phase *P = &p->phases[ph];
    cJSON *po = cJSON_AddObjectToObject(phases, P->name);
    cJSON_AddNumberToObject(po, "tokens", P->tokens);
    cJSON_AddItemToObject(po, "prologue", ops_json(P->prologue, P->n_prologue));
    cJSON *groups = cJSON_AddArrayToObject(po, "layers");
    for (int g = 0; g < P->n_groups; g++) {
      cJSON *go = cJSON_CreateObject();
      cJSON_AddStringToObject(go, "type", layer_name(P->groups[g].type));
      cJSON_AddItemToObject(go, "layers", cJSON_CreateIntArray(P->groups[g].layers, P->groups[g].n_layers));
      cJSON_AddItemToObject(go, "ops", ops_json(P->groups[g].ops, P->groups[g].n_ops));
      cJSON_AddItemToArray(groups, go);
    }
    cJSON_AddItemToObject(po, "epilogue", ops_json(P->epilogue, P->n_epilogue));
  }
  cJSON *st = cJSON_AddObjectToObject(root, "settings");
  cJSON_AddItemToObject(st, "batching", batching_json(&p->batching));
  cJSON_AddItemToObject(st, "decodeLoop", batching_json(&p->decode_loop));
  cJSON *fu = cJSON_AddObjectToObject(st, "fusions");
  cJSON_AddBoolToObject(fu, "fuseResidualAdd", p->fusions.residual_add);
  cJSON *gf = cJSON_AddArrayToObject(st, "graphFusions");
  for (int i = 0; i < p->n_graph_fusions; i++) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "fusion", p->graph_fusions[i].name);
    cJSON_AddStringToObject(o, "first", p->graph_fusions[i].first);
    cJSON_AddStringToObject(o, "second", p->graph_fusions[i].second);
    cJSON_AddStringToObject(o, "layers", p->graph_fusions[i].layers);
    cJSON_AddBoolToObject(o, "applied", p->graph_fusions[i].applied);
    cJSON_AddStringToObject(o, "why", p->graph_fusions[i].why);
    cJSON_AddItemToArray(gf, o);
  }
  cJSON_AddItemToObject(st, "session", wisp_plan_switches_json(p));
  cJSON *ex = cJSON_AddObjectToObject(st, "execution");
  cJSON_AddBoolToObject(ex, "convFuse", p->conv_fuse);
  cJSON_AddStringToObject(ex, "convFuseFrom", p->conv_fuse_from);
  cJSON_AddNumberToObject(ex, "flashBlocks", p->flash_blocks);
  cJSON_AddStringToObject(ex, "flashBlocksFrom", p->flash_blocks_from);
  if (p->prefill_tile[0]) { /* only a tuned entry sets them: other plans keep their ids */
    char t[64];
    snprintf(t, sizeof t, "%dx%d", p->prefill_tile[0], p->prefill_tile[1]);
    cJSON_AddStringToObject(ex, "prefillTile", t);
  }
  if (p->prefill_tile_i8[0]) {
    char t[80];
    const int *g = p->prefill_tile_i8;
    snprintf(t, sizeof t, "%dx%dx%dx%dx%d", g[0], g[1], g[2], g[3], g[4]);
    cJSON_AddStringToObject(ex, "prefillTileI8", t);
  }
  cJSON_AddStringToObject(ex, "kvDtype", p->kv_dtype);
  if (p->rope_pairs == WISP_ROPE_ADJACENT) cJSON_AddStringToObject(ex, "ropePairs", "adjacent");
  cJSON_AddStringToObject(ex, "kvDtypeFrom", p->kv_dtype_from);
  if (p->persist_kernel[0]) {
    cJSON_AddStringToObject(ex, "persistentDecode", p->persist_kernel);
    cJSON_AddNumberToObject(ex, "persistentDecodeMinSteps", p->persist_min_steps);
  } else {
    cJSON_AddNullToObject(ex, "persistentDecode");
    cJSON_AddStringToObject(ex, "persistentDecodeOff", p->persist_off);
  }
  cJSON *ni = cJSON_AddArrayToObject(root, "notImplemented");
  for (int i = 0; i < p->n_not_implemented; i++) cJSON_AddItemToArray(ni, cJSON_CreateString(p->not_implemented[i]));
  if (p->tuned_present) { /* only for manifests with tuned entries: other plans keep their ids */
    cJSON *tu = cJSON_AddObjectToObject(root, "tuned");
    if (p->tuned_used[0]) cJSON_AddStringToObject(tu, "used", p->tuned_used);
    else cJSON_AddNullToObject(tu, "used");
    cJSON *ig = cJSON_AddArrayToObject(tu, "ignored");
    for (int i = 0; i < p->n_tuned_ignored; i++) cJSON_AddItemToArray(ig, cJSON_CreateString(p->tuned_ignored[i]));
  }
  return root;
}

/* ---- grouping ---- */

/* "AxBx..." of n positive numbers, at most 1024 each, into out. */
static int read_dims(const cJSON *j, int n, int *out) {
  if (!cJSON_IsString(j)) return 0;
  const char *s = j->valuestring;
  for (int i = 0; i < n; i++) {
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || v < 1 || v > 1024 || (i + 1 < n ? *end != 'x' : *end != 0)) return 0;
    out[i] = (int)v;
    s = end + 1;
  }
  return 1;
}

/* The candidate's prefill tiles (a tuned entry's), when well formed. */
static void read_tiles(const cJSON *cand, wisp_plan *p) {
  int t[5];
  if (cand && read_dims(cJSON_GetObjectItemCaseSensitive(cand, "prefillTile"), 2, t)) memcpy(p->prefill_tile, t, 2 * sizeof *t);
  if (cand && read_dims(cJSON_GetObjectItemCaseSensitive(cand, "prefillTileI8"), 5, t))
    memcpy(p->prefill_tile_i8, t, 5 * sizeof *t);
}

static char *ops_signature(const opvec *o) {
  cJSON *a = ops_json(o->v, o->n);
  char *s = a ? wisp_json_canonical(a) : NULL;
  cJSON_Delete(a);
  return s;
}

static wisp_plan_op *arena_ops(wisp_plan *p, const opvec *o) {
  wisp_plan_op *d = wisp_arena_alloc(&p->arena, sizeof *d * (size_t)(o->n ? o->n : 1));
  if (d && o->n) memcpy(d, o->v, sizeof *d * (size_t)o->n);
  return d;
}

static wisp_status group_phase(wisp_plan *p, const resolver *R, int ph) {
  const wisp_model_shape *s = R->in->shape;
  wisp_plan_phase *P = &p->phases[ph];
  opvec *b = R->blocks[ph];
  P->name = k_phase_names[ph];
  P->tokens = R->tokens[ph];
  P->n_prologue = b[0].n;
  P->prologue = arena_ops(p, &b[0]);
  P->n_epilogue = b[s->n_layers + 1].n;
  P->epilogue = arena_ops(p, &b[s->n_layers + 1]);
  P->n_layers = s->n_layers;
  P->layer_group = wisp_arena_alloc(&p->arena, sizeof(int) * (size_t)s->n_layers);
  P->groups = wisp_arena_alloc(&p->arena, sizeof *P->groups * (size_t)s->n_layers);
  char **sig = calloc((size_t)s->n_layers, sizeof *sig);
  int *counts = calloc((size_t)s->n_layers, sizeof *counts);
  if (!P->prologue || !P->epilogue || !P->layer_group || !P->groups || !sig || !counts) {
    free(sig);
    free(counts);
    return FAIL(WISP_ENOMEM, "out of memory");
  }
  wisp_status st = WISP_OK;
  int *first = calloc((size_t)s->n_layers, sizeof *first); /* group -> first layer */
  if (!first) st = FAIL(WISP_ENOMEM, "out of memory");
  for (int l = 0; l < s->n_layers && !st; l++) {
    sig[l] = ops_signature(&b[l + 1]);
    if (!sig[l]) { st = FAIL(WISP_ENOMEM, "out of memory"); break; }
    int g;
    for (g = 0; g < P->n_groups; g++)
      if (P->groups[g].type == s->layer_types[l] && !strcmp(sig[first[g]], sig[l])) break;
    if (g == P->n_groups) {
      first[g] = l;
      P->groups[g].type = s->layer_types[l];
      P->groups[g].n_ops = b[l + 1].n;
      P->groups[g].ops = arena_ops(p, &b[l + 1]);
      if (!P->groups[g].ops) { st = FAIL(WISP_ENOMEM, "out of memory"); break; }
      P->n_groups++;
    }
    counts[g]++;
    P->layer_group[l] = g;
  }
  for (int g = 0; g < P->n_groups && !st; g++) {
    P->groups[g].layers = wisp_arena_alloc(&p->arena, sizeof(int) * (size_t)counts[g]);
    if (!P->groups[g].layers) st = FAIL(WISP_ENOMEM, "out of memory");
  }
  for (int l = 0; l < s->n_layers && !st; l++) {
    wisp_plan_group *G = &P->groups[P->layer_group[l]];
    G->layers[G->n_layers++] = l;
  }
  /* Group ops carry the layer of their first member; per-layer values are in layers[]. */
  for (int l = 0; l < s->n_layers; l++) free(sig[l]);
  free(sig);
  free(counts);
  free(first);
  return st;
}

/* ---- entry ---- */

/* The KV caches' dtype: what precision.kvDtype says on the profile kernels
 * the decode attention ops are bound to (one session has one KV layout, so
 * two different answers are an error), else f32. */
static wisp_status resolve_kv_dtype(wisp_plan *p, const wisp_profile *prof) {
  wisp_path(p->kv_dtype, sizeof p->kv_dtype, "f32");
  p->kv_dtype_from = "default";
  const wisp_plan_phase *P = &p->phases[WISP_PHASE_DECODE];
  for (int g = 0; prof && g < P->n_groups; g++)
    for (int i = 0; i < P->groups[g].n_ops; i++) {
      const wisp_plan_op *op = &P->groups[g].ops[i];
      if (strncmp(op->op, "attention", 9) || strchr(op->kernel, '/')) continue;
      const wisp_profile_kernel *k = wisp_profile_kernel_find(prof, op->kernel);
      if (!k || !k->kv_dtype) continue;
      char from[400];
      wisp_path(from, sizeof from, "%s.kernel.precision.kvDtype (decode %s %s)", k->source, op->op, op->section);
      if (strcmp(p->kv_dtype_from, "default") && strcmp(p->kv_dtype, k->kv_dtype))
        return FAIL(WISP_EINVAL, "plan: KV dtype %s from %s conflicts with %s from %s", k->kv_dtype, from, p->kv_dtype,
                    p->kv_dtype_from);
      wisp_path(p->kv_dtype, sizeof p->kv_dtype, "%s", k->kv_dtype);
      p->kv_dtype_from = wisp_arena_strdup(&p->arena, from);
      if (!p->kv_dtype_from) return FAIL(WISP_ENOMEM, "out of memory");
    }
  return WISP_OK;
}

/* The decode op whose kernel a profile patch chose, or NULL. */
static const wisp_plan_op *decode_profile_kernel(const wisp_plan *p) {
  const wisp_plan_phase *P = &p->phases[WISP_PHASE_DECODE];
  for (int i = 0; i < P->n_prologue; i++)
    if (P->prologue[i].kernel_from.kind == WISP_PROV_PROFILE) return &P->prologue[i];
  for (int g = 0; g < P->n_groups; g++)
    for (int i = 0; i < P->groups[g].n_ops; i++)
      if (P->groups[g].ops[i].kernel_from.kind == WISP_PROV_PROFILE) return &P->groups[g].ops[i];
  for (int i = 0; i < P->n_epilogue; i++)
    if (P->epilogue[i].kernel_from.kind == WISP_PROV_PROFILE) return &P->epilogue[i];
  return NULL;
}

/* wisp_plan.persist_kernel / persist_min_steps / persist_off (plan.h). */
static void resolve_persist(wisp_plan *p, const wisp_plan_inputs *in) {
  p->persist_kernel[0] = '\0';
  p->persist_min_steps = 0;
  wisp_path(p->persist_off, sizeof p->persist_off, "%s", "the cpu backend");
  if (strcmp(in->backend, "webgpu")) return;
  wisp_path(p->persist_off, sizeof p->persist_off, "%s", "no subgroups");
  if (!in->device->has_subgroups) return;
  const wisp_arch *arch = wisp_arch_find(in->shape->architecture);
  const char *key = arch ? arch->registry_key : "";
  const wisp_operation *op = wisp_registry_op(in->registry, "persistent_decode");
  const wisp_variant *v = op ? wisp_registry_variant(op, key) : NULL;
  wisp_path(p->persist_off, sizeof p->persist_off, "no available persistent_decode/%s in the registry", key);
  if (!v || !v->available) return;
  wisp_path(p->persist_off, sizeof p->persist_off, "%s",
            "a layer of the step graph is not one the persistent phases run (graph_lower.c)");
  if (in->graph && !wisp_graph_lowers_to_phases(in->graph)) return;
  /* A profile that chose a decode kernel gets it run: the persistent
   * decode would replace every decode op with its own code. */
  const wisp_plan_op *po = decode_profile_kernel(p);
  if (po) {
    wisp_path(p->persist_off, sizeof p->persist_off, "the profile binds decode kernel %s [%s]", po->kernel,
              po->kernel_from.detail);
    return;
  }
  /* Its weight blob holds one type a matrix: a matrix in row parts of
   * different types (a GGUF fused section) decodes op by op. */
  const wisp_plan_phase *D = &p->phases[WISP_PHASE_DECODE];
  for (int g = 0; g < D->n_groups; g++)
    for (int i = 0; i < D->groups[g].n_ops; i++)
      if (D->groups[g].ops[i].n_parts) {
        const wisp_plan_group *G = &D->groups[g];
        wisp_path(p->persist_off, sizeof p->persist_off, "matmul %s is in row parts of different types (layer %d)",
                  G->ops[i].section, G->layers ? G->layers[0] : G->ops[i].layer);
        return;
      }
  p->persist_off[0] = '\0';
  wisp_path(p->persist_kernel, sizeof p->persist_kernel, "persistent_decode/%s", key);
  p->persist_min_steps = 1;
  for (int i = 0; i < v->n_meta; i++)
    if (!strcmp(v->meta[i].key, "minSteps") && v->meta[i].type == WISP_META_NUM && v->meta[i].num >= 1 &&
        v->meta[i].num <= 1e6)
      p->persist_min_steps = (int)v->meta[i].num;
}

wisp_status wisp_plan_resolve(const wisp_plan_inputs *in, wisp_plan **out) {
  *out = NULL;
  if (!in || !in->shape || !in->registry || !in->device || !in->backend)
    return FAIL(WISP_EINVAL, "plan: shape, registry, device and backend are required");
  if (strcmp(in->backend, "cpu") && strcmp(in->backend, "webgpu"))
    return FAIL(WISP_EINVAL, "plan: unknown backend '%s' (cpu, webgpu)", in->backend);
  const wisp_model_shape *s = in->shape;
  if (s->n_layers <= 0 || s->n_layers > WISP_MAX_LAYERS || s->hidden <= 0 || s->ffn <= 0 || s->vocab <= 0 ||
      s->heads <= 0 || s->kv_heads <= 0 || s->head_dim <= 0)
    return FAIL(WISP_EINVAL, "plan: model shape is incomplete (layers, hidden, ffn, vocab, heads, kvHeads, headDim)");
  if (in->knee && !cJSON_IsArray(in->knee)) return FAIL(WISP_EFORMAT, "plan: manifest knee: expected an array");
  if (in->candidate && !cJSON_IsObject(in->candidate)) return FAIL(WISP_EFORMAT, "plan: manifest candidate: expected an object");
  const wisp_arch *arch = wisp_arch_find(s->architecture);
  if (!arch) return FAIL(WISP_EUNSUPPORTED, "plan: unknown architecture '%s'", s->architecture);
  wisp_fusions default_fusions;
  wisp_fusions_default(&default_fusions);
  resolver R;
  memset(&R, 0, sizeof R);
  R.in = in;
  R.arch = arch;
  R.wdtype = s->quant_bits == 4 ? "q4" : s->quant_bits == 16 ? "f16" : s->quant_bits == 8 ? "q8_0" : "f32";
  R.fusions = in->profile ? &in->profile->fusions : &default_fusions;
  R.n_blocks = s->n_layers + 2;
  R.tokens[WISP_PHASE_PREFILL] = in->prefill_tokens > 0 ? in->prefill_tokens : 512;
  R.tokens[WISP_PHASE_DECODE] = 1;
  wisp_plan *p = calloc(1, sizeof *p);
  wisp_status st = WISP_OK;
  if (!p) return FAIL(WISP_ENOMEM, "out of memory");
  p->rope_pairs = s->rope_pairs;
  for (int ph = 0; ph < 2; ph++) {
    R.blocks[ph] = calloc((size_t)R.n_blocks, sizeof(opvec));
    if (!R.blocks[ph]) st = FAIL(WISP_ENOMEM, "out of memory");
  }
  const cJSON *cand_fuse = in->candidate ? cJSON_GetObjectItemCaseSensitive(in->candidate, "convFuse") : NULL;
  R.conv_fuse = cJSON_IsBool(cand_fuse) ? cJSON_IsTrue(cand_fuse) : 1;
  /* A plan of a manifest alone (no weights): the architecture describes
   * its step from the shape, names and sizes only. */
  wisp_graph own;
  memset(&own, 0, sizeof own);
  R.graph = in->graph;
  if (!st && !R.graph) {
    if (!(st = arch->describe(s, NULL, &own))) {
      wisp_graph_fuse(&own);
      R.graph = &own;
    }
  }
  for (int ph = 0; ph < 2 && !st; ph++) st = build_defaults(&R, ph);
  for (int i = 0; in->profile && i < in->profile->n_patches && !st; i++) st = apply_patch(&R, &in->profile->patches[i]);
  if (!st) {
    wisp_path(p->backend, sizeof p->backend, "%s", in->backend);
    p->device = *in->device;
    wisp_path(p->device.backend, sizeof p->device.backend, "%s", in->backend);
    p->fusions = *R.fusions;
    for (int i = 0; i < WISP_SW_COUNT; i++)
      p->fusions.from[i] = wisp_arena_strdup(&p->arena, R.fusions->from[i] ? R.fusions->from[i] : "default");
    if (in->profile) { /* decodeLoop off: disableCommandBatching (decodeLoop's, else batching's) */
      const wisp_batching *b = in->profile->decode_loop.present ? &in->profile->decode_loop : &in->profile->batching;
      p->fusions.decode_loop = !(b->present && b->disable_command_batching);
    }
    p->conv_fuse = R.conv_fuse;
    p->flash_blocks = 32;
    p->conv_fuse_from = cJSON_IsBool(cand_fuse) ? "manifest candidate" : "default";
    p->flash_blocks_from = "default";
    read_tiles(in->candidate, p);
    const cJSON *fb = in->candidate ? cJSON_GetObjectItemCaseSensitive(in->candidate, "flashBlocks") : NULL;
    if (cJSON_IsNumber(fb) && fb->valuedouble >= 1 && fb->valuedouble <= 256) {
      p->flash_blocks = (int)fb->valuedouble;
      p->flash_blocks_from = "manifest candidate";
    }
    if (in->tuned && in->tuned->present) {
      const wisp_tuned_choice *tc = in->tuned;
      p->tuned_present = 1;
      p->tuned_used = wisp_arena_strdup(&p->arena, tc->used_note);
      p->n_tuned_ignored = tc->n_ignored < WISP_TUNED_MAX_NOTES ? tc->n_ignored : WISP_TUNED_MAX_NOTES;
      p->tuned_ignored = wisp_arena_alloc(&p->arena, sizeof(char *) * (size_t)(p->n_tuned_ignored + 1));
      for (int i = 0; p->tuned_ignored && i < p->n_tuned_ignored; i++)
        p->tuned_ignored[i] = wisp_arena_strdup(&p->arena, tc->ignored[i]);
      if (!p->tuned_used || !p->tuned_ignored) p->tuned_present = 0, p->n_tuned_ignored = 0;
    }
    if (in->profile) {
      p->batching = in->profile->batching;
      p->decode_loop = in->profile->decode_loop;
      p->profile_id = wisp_arena_strdup(&p->arena, in->profile->id);
      p->n_not_implemented = in->profile->n_not_implemented;
      p->not_implemented = wisp_arena_alloc(&p->arena, sizeof(char *) * (size_t)(p->n_not_implemented + 1));
      for (int i = 0; p->not_implemented && i < p->n_not_implemented; i++)
        p->not_implemented[i] = wisp_arena_strdup(&p->arena, in->profile->not_implemented[i]);
      /* The strings point into the profile; keep plan self-contained. */
      p->batching.stop_check_mode = wisp_arena_strdup(&p->arena, p->batching.stop_check_mode);
      p->batching.readback_mode = wisp_arena_strdup(&p->arena, p->batching.readback_mode);
      p->decode_loop.stop_check_mode = wisp_arena_strdup(&p->arena, p->decode_loop.stop_check_mode);
      p->decode_loop.readback_mode = wisp_arena_strdup(&p->arena, p->decode_loop.readback_mode);
    }
    for (int ph = 0; ph < 2 && !st; ph++) st = group_phase(p, &R, ph);
    if (!st) st = resolve_kv_dtype(p, in->profile);
    resolve_persist(p, in);
    if (!st) graph_fusions(p, &R);
  }
  wisp_graph_free(&own);
  if (!st) {
    cJSON *j = plan_json(p, in);
    char *canon = j ? wisp_json_canonical(j) : NULL;
    if (!canon) st = FAIL(WISP_ENOMEM, "out of memory");
    else {
      wisp_sha256_hex(canon, strlen(canon), p->id);
      cJSON_AddStringToObject(j, "planId", p->id);
      p->json = wisp_json_canonical(j);
      if (!p->json) st = FAIL(WISP_ENOMEM, "out of memory");
    }
    free(canon);
    cJSON_Delete(j);
  }
  for (int ph = 0; ph < 2; ph++) {
    for (int b = 0; R.blocks[ph] && b < R.n_blocks; b++) free(R.blocks[ph][b].v);
    free(R.blocks[ph]);
  }
  if (st) { wisp_plan_free(p); return st; }
  *out = p;
  return WISP_OK;
}

void wisp_plan_free(wisp_plan *p) {
  if (!p) return;
  free(p->json);
  wisp_arena_free(p->arena);
  free(p);
}

const wisp_plan_op *wisp_plan_layer_ops(const wisp_plan *p, int phase, int layer, int *n_ops) {
  if (n_ops) *n_ops = 0;
  if (!p || phase < 0 || phase > 1 || layer < 0 || layer >= p->phases[phase].n_layers) return NULL;
  const wisp_plan_group *g = &p->phases[phase].groups[p->phases[phase].layer_group[layer]];
  if (n_ops) *n_ops = g->n_ops;
  return g->ops;
}

/* ---- text ---- */

static void print_op(FILE *f, const wisp_plan_op *op) {
  char name[80];
  if (op->section[0]) wisp_path(name, sizeof name, "%s %s", op->op, op->section);
  else wisp_path(name, sizeof name, "%s", op->op);
  fprintf(f, "    %-28s %-28s", name, op->kernel);
  if (op->residual) fprintf(f, " +residual");
  fprintf(f, "  [%s %s]", wisp_prov_kind_name(op->kernel_from.kind), op->kernel_from.detail);
  if (!strcmp(op->backend, "webgpu")) {
    fprintf(f, "\n    %-28s wg=%d", "", op->geometry.workgroup_size);
    if (op->geometry.subgroup_size) fprintf(f, " sg=%d", op->geometry.subgroup_size);
    if (op->geometry.rows_per_subgroup) fprintf(f, " rows/sg=%d", op->geometry.rows_per_subgroup);
    if (op->geometry.subgroups_per_row) fprintf(f, " sg/row=%d", op->geometry.subgroups_per_row);
    fprintf(f, "  [%s %s]", wisp_prov_kind_name(op->geometry_from.kind), op->geometry_from.detail);
  }
  if (op->note[0]) fprintf(f, "\n    %-28s note: %s", "", op->note);
  for (int i = 0, r = 0; i < op->n_parts; r += op->parts[i++].rows)
    fprintf(f, "\n    %-28s part rows %d-%d %s: %s  [%s %s]", "", r, r + op->parts[i].rows - 1, op->parts[i].weight_dtype,
            op->parts[i].kernel, wisp_prov_kind_name(op->parts[i].kernel_from.kind), op->parts[i].kernel_from.detail);
  fprintf(f, "\n");
}

void wisp_plan_print(const wisp_plan *p, FILE *f) {
  fprintf(f, "plan %s\n", p->id);
  fprintf(f, "backend %s, profile %s\n", p->backend, p->profile_id ? p->profile_id : "(none)");
  const wisp_device_caps *d = &p->device;
  fprintf(f, "device vendor=%s subgroups=%s/%d f16=%s avx2=%s maxWorkgroup=%d\n", d->vendor, d->has_subgroups ? "yes" : "no",
          d->subgroup_size, d->has_f16 ? "yes" : "no", d->has_avx2 ? "yes" : "no", d->max_workgroup_size);
  for (int ph = 0; ph < 2; ph++) {
    const wisp_plan_phase *P = &p->phases[ph];
    fprintf(f, "\n%s (tokens %d)\n  prologue\n", P->name, P->tokens);
    for (int i = 0; i < P->n_prologue; i++) print_op(f, &P->prologue[i]);
    for (int g = 0; g < P->n_groups; g++) {
      fprintf(f, "  %s layers", layer_name(P->groups[g].type));
      for (int i = 0; i < P->groups[g].n_layers; i++) fprintf(f, "%s%d", i ? "," : " ", P->groups[g].layers[i]);
      if (P->groups[g].type == WISP_LAYER_ATTENTION) /* the q/k rows' order decides the rope's pairs */
        fprintf(f, " (rope pairs %s)", p->rope_pairs == WISP_ROPE_ADJACENT ? "adjacent (2i, 2i+1)" : "halves (i, i+R/2)");
      fprintf(f, "\n");
      for (int i = 0; i < P->groups[g].n_ops; i++) print_op(f, &P->groups[g].ops[i]);
    }
    fprintf(f, "  epilogue\n");
    for (int i = 0; i < P->n_epilogue; i++) print_op(f, &P->epilogue[i]);
  }
  fprintf(f, "\nsettings fuseResidualAdd=%s convFuse=%s (%s) flashBlocks=%d (%s)",
          p->fusions.residual_add ? "true" : "false", p->conv_fuse ? "true" : "false", p->conv_fuse_from,
          p->flash_blocks, p->flash_blocks_from);
  if (p->batching.present) fprintf(f, " batchSize=%d readbackInterval=%d", p->batching.batch_size, p->batching.readback_interval);
  if (p->decode_loop.present)
    fprintf(f, " decodeLoop.batchSize=%d decodeLoop.maxBatchDecodeTokens=%d", p->decode_loop.batch_size,
            p->decode_loop.max_batch_decode_tokens);
  int cpu = !strcmp(p->backend, "cpu");
  if (p->prefill_tile[0]) fprintf(f, " prefillTile=%dx%d (manifest candidate)", p->prefill_tile[0], p->prefill_tile[1]);
  if (p->prefill_tile_i8[0])
    fprintf(f, " prefillTileI8=%dx%dx%dx%dx%d (manifest candidate)", p->prefill_tile_i8[0], p->prefill_tile_i8[1],
            p->prefill_tile_i8[2], p->prefill_tile_i8[3], p->prefill_tile_i8[4]);
  fprintf(f, "\nsettings kvDtype=%s (%s)\n", p->kv_dtype, p->kv_dtype_from);
  if (p->persist_kernel[0])
    fprintf(f, "settings persistentDecode=%s minSteps=%d (greedy decode batches of that many steps or more run as one "
               "dispatch when the weights and the device's grid allow, past tuning persistMaxKeys keys (if set) "
               "op by op; registry)\n",
            p->persist_kernel, p->persist_min_steps);
  else
    fprintf(f, "settings persistentDecode=none (%s)\n", p->persist_off);
  fprintf(f, "session switches%s\n",
          cpu ? " (do not apply on the cpu backend: it runs the unfused reference ops, same numbers)" : "");
  for (int i = 0; i < WISP_SW_COUNT; i++) {
    char extra[160] = "";
    const wisp_q4k_geometry *g = i == WISP_SW_FFN_Q4K ? &p->fusions.ffn_geometry
                                 : i == WISP_SW_HEAD_ARGMAX_Q4K ? &p->fusions.head_geometry : NULL;
    if (g) {
      char a[3][16];
      const int v[3] = {g->workgroup_size, g->cols_per_wg, g->threads_per_col};
      for (int k = 0; k < 3; k++)
        if (v[k]) wisp_path(a[k], sizeof a[k], "%d", v[k]);
        else wisp_path(a[k], sizeof a[k], "default");
      wisp_path(extra, sizeof extra, " wg=%s cols/wg=%s threads/col=%s fullBlock=%s", a[0], a[1], a[2],
                g->full_block < 0 ? "default" : g->full_block ? "true" : "false");
    }
    fprintf(f, "  %-50s %-3s%s  [%s]\n", wisp_switch_name(i), i == WISP_SW_HEAD_ARGMAX_Q4K ? "" : wisp_switch_on(&p->fusions, i) ? "on" : "off",
            extra, p->fusions.from[i] ? p->fusions.from[i] : "default");
  }
  fprintf(f, "fusions on the %s backend (a pass over the model's graph; + applied by this plan, - found but not applied)\n",
          p->backend);
  for (int i = 0; i < p->n_graph_fusions; i++) {
    char pair[112];
    wisp_path(pair, sizeof pair, "%s%s%s", p->graph_fusions[i].first, p->graph_fusions[i].second[0] ? " -> " : "",
              p->graph_fusions[i].second);
    fprintf(f, "  %c %-22s %-46s layers %-10s [%s]\n", p->graph_fusions[i].applied ? '+' : '-',
            p->graph_fusions[i].name, pair, p->graph_fusions[i].layers[0] ? p->graph_fusions[i].layers : "-",
            p->graph_fusions[i].why);
  }
  for (int i = 0; i < p->n_not_implemented; i++) fprintf(f, "%s\n", p->not_implemented[i]);
  if (p->tuned_present) {
    fprintf(f, "tuning (the manifest's tuned entries, docs/tuning.md)\n");
    if (p->tuned_used[0]) fprintf(f, "  uses %s\n", p->tuned_used);
    else fprintf(f, "  no entry for this device: the manifest's own candidate and knee\n");
    for (int i = 0; i < p->n_tuned_ignored; i++) fprintf(f, "  ignores %s\n", p->tuned_ignored[i]);
  }
}
