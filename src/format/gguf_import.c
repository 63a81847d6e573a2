/* GGUF import; see gguf_import.h. */
#include "format/gguf_import.h"

#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "format/artifact.h"
#include "format/gguf_arch.h"
#include "format/gguf_spm.h"
#include "format/gguf_text_index.h"
#include "format/json_text.h"
#include "util/err.h"
#include "util/file.h"
#include "util/memfile.h"

static int by_name(const void *a, const void *b) {
  return strcmp(((const wisp_st_tensor *)a)->name, ((const wisp_st_tensor *)b)->name);
}

void wisp_gguf_model_free(wisp_gguf_model *m) {
  free(m->layer_types);
  free(m->rope_factors);
  free(m->global);
  m->layer_types = NULL;
  m->rope_factors = NULL;
  m->global = NULL;
}

static wisp_status need_int(const wisp_gguf *g, const char *arch, const char *key, int min, int *out) {
  char k[128];
  snprintf(k, sizeof k, "%s.%s", arch, key);
  int64_t v;
  if (!wisp_gguf_get_int(g, k, &v)) return wisp_fail(WISP_EFORMAT, "%s: missing integer metadata '%s'", g->label, k);
  if (v < min || v > 1000000000)
    return wisp_fail(WISP_EFORMAT, "%s: metadata '%s' = %lld is out of range", g->label, k, (long long)v);
  *out = (int)v;
  return WISP_OK;
}

/* An optional integer ARCH.KEY in [1, 1e9]; *out keeps its default otherwise. */
static void opt_int(const wisp_gguf *g, const char *arch, const char *key, int *out) {
  char k[128];
  int64_t v;
  snprintf(k, sizeof k, "%s.%s", arch, key);
  if (wisp_gguf_get_int(g, k, &v) && v > 0 && v <= 1000000000) *out = (int)v;
}

static void opt_float(const wisp_gguf *g, const char *arch, const char *key, double lo, double hi, double *out) {
  char k[128];
  double d;
  snprintf(k, sizeof k, "%s.%s", arch, key);
  if (wisp_gguf_get_float(g, k, &d) && d > lo && d <= hi) *out = d;
}

/* Layer kinds from the tensors present (the architecture's probe tensor
 * marks conv / linear layers); kv heads from head_count_kv, a per-layer
 * array (0 on conv layers) or one number. */
static wisp_status layer_kinds(const wisp_gguf *g, const wisp_gguf_arch *ga, wisp_gguf_model *m) {
  char k[160];
  m->layer_types = calloc((size_t)m->n_layers, sizeof(int));
  if (!m->layer_types) return wisp_fail(WISP_ENOMEM, "out of memory");
  snprintf(k, sizeof k, "%s.attention.head_count_kv", m->arch);
  const wisp_gguf_kv *kvh = wisp_gguf_kv_find(g, k);
  int64_t v;
  m->kv_heads = 0;
  for (int i = 0; i < m->n_layers; i++) {
    m->layer_types[i] = WISP_LAYER_ATTENTION;
    if (ga->probe) {
      snprintf(k, sizeof k, "blk.%d.%s", i, ga->probe);
      if (wisp_gguf_tensor_find(g, k)) m->layer_types[i] = ga->probe_kind;
    }
    if (m->layer_types[i] == WISP_LAYER_ATTENTION && kvh && kvh->type == WISP_GGUF_ARRAY && kvh->arr &&
        (uint64_t)i < kvh->n && wisp_gguf_arr_int(kvh, (uint64_t)i) > 0)
      m->kv_heads = (int)wisp_gguf_arr_int(kvh, (uint64_t)i);
  }
  snprintf(k, sizeof k, "%s.attention.head_count_kv", m->arch);
  if (!m->kv_heads && wisp_gguf_get_int(g, k, &v) && v > 0 && v <= m->heads) m->kv_heads = (int)v;
  if (!m->kv_heads) m->kv_heads = m->heads;
  if (m->kv_heads > m->heads || m->heads % m->kv_heads)
    return wisp_fail(WISP_EFORMAT, "%s: head_count %d is not a multiple of head_count_kv %d", g->label, m->heads,
                     m->kv_heads);
  return WISP_OK;
}

/* llama: rope_freqs.weight holds llama3 scaling as one divisor per rope
 * frequency (conversion/llama.py); other rope scaling is refused. */
static wisp_status llama_rope(const wisp_gguf *g, wisp_gguf_model *m) {
  const wisp_gguf_kv *type = wisp_gguf_kv_find(g, "llama.rope.scaling.type");
  if (type && (type->type != WISP_GGUF_STRING || type->str.len != 4 || memcmp(type->str.s, "none", 4)))
    return wisp_fail(WISP_EUNSUPPORTED, "%s: llama.rope.scaling.type '%.*s' is not supported (wisp reads llama3 "
                     "scaling from rope_freqs.weight)", g->label,
                     type->type == WISP_GGUF_STRING ? (int)(type->str.len > 32 ? 32 : type->str.len) : 1,
                     type->type == WISP_GGUF_STRING ? type->str.s : "?");
  int rot = m->head_dim;
  opt_int(g, "llama", "rope.dimension_count", &rot);
  if (rot != m->head_dim)
    return wisp_fail(WISP_EUNSUPPORTED, "%s: llama.rope.dimension_count %d is not the head dim %d (partial rope)",
                     g->label, rot, m->head_dim);
  const wisp_gguf_tensor *f = wisp_gguf_tensor_find(g, "rope_freqs.weight");
  if (!f) return WISP_OK;
  if (f->n_dims != 1 || f->numel != (uint64_t)m->head_dim / 2)
    return wisp_fail(WISP_EFORMAT, "%s: rope_freqs.weight must hold %d values (head dim / 2)", g->label,
                     m->head_dim / 2);
  if (!(m->rope_factors = malloc(f->numel * sizeof(float)))) return wisp_fail(WISP_ENOMEM, "out of memory");
  wisp_status st = wisp_gguf_read_f32(g, f, m->rope_factors);
  for (uint64_t i = 0; !st && i < f->numel; i++)
    if (!(m->rope_factors[i] > 0) || !isfinite(m->rope_factors[i]))
      st = wisp_fail(WISP_EFORMAT, "%s: rope_freqs.weight[%llu] is not a positive number", g->label,
                     (unsigned long long)i);
  return st;
}

/* qwen35: the Gated DeltaNet widths (ssm.*) and the rotated dims. */
static wisp_status qwen35_dims(const wisp_gguf *g, wisp_gguf_model *m) {
  int inner = 0;
  wisp_status st;
  if ((st = need_int(g, "qwen35", "ssm.conv_kernel", 1, &m->conv_l)) ||
      (st = need_int(g, "qwen35", "ssm.state_size", 1, &m->lin_k_dim)) ||
      (st = need_int(g, "qwen35", "ssm.group_count", 1, &m->lin_k_heads)) ||
      (st = need_int(g, "qwen35", "ssm.time_step_rank", 1, &m->lin_v_heads)) ||
      (st = need_int(g, "qwen35", "ssm.inner_size", 1, &inner)))
    return st;
  if (m->conv_l > 64 || inner % m->lin_v_heads || m->lin_v_heads % m->lin_k_heads)
    return wisp_fail(WISP_EFORMAT, "%s: qwen35.ssm.* do not fit: conv kernel %d, inner size %d, %d value heads, "
                     "%d key heads", g->label, m->conv_l, inner, m->lin_v_heads, m->lin_k_heads);
  m->lin_v_dim = inner / m->lin_v_heads;
  m->rotary_dim = m->head_dim / 4; /* Qwen3_5TextConfig's partial_rotary_factor 0.25 */
  opt_int(g, "qwen35", "rope.dimension_count", &m->rotary_dim);
  if (m->rotary_dim % 2 || m->rotary_dim > m->head_dim)
    return wisp_fail(WISP_EUNSUPPORTED, "%s: qwen35.rope.dimension_count %d must be even and at most the head dim %d",
                     g->label, m->rotary_dim, m->head_dim);
  if ((m->lin_v_heads * m->lin_v_dim) % 32)
    return wisp_fail(WISP_EUNSUPPORTED, "%s: value width %d must be a multiple of 32", g->label,
                     m->lin_v_heads * m->lin_v_dim);
  return WISP_OK;
}

/* gemma3: which layers slide (llama.cpp's rule: with attention.sliding_window
 * > 0, layer i is global when i % pattern == pattern - 1, pattern from
 * attention.sliding_window_pattern, default 6; without it every layer is),
 * their rope base (rope.freq_base_swa, default 10000), the global layers'
 * linear rope scaling, and no final logit softcapping. */
static wisp_status gemma3_dims(const wisp_gguf *g, wisp_gguf_model *m) {
  int pattern = 6;
  m->sliding_window = 0;
  opt_int(g, "gemma3", "attention.sliding_window", &m->sliding_window);
  opt_int(g, "gemma3", "attention.sliding_window_pattern", &pattern);
  if (!(m->global = calloc((size_t)m->n_layers, 1))) return wisp_fail(WISP_ENOMEM, "out of memory");
  for (int i = 0; i < m->n_layers; i++) m->global[i] = m->sliding_window <= 0 || i % pattern == pattern - 1;
  m->rope_local_theta = 10000.0;
  opt_float(g, "gemma3", "rope.freq_base_swa", 0, 1e30, &m->rope_local_theta);
  m->rope_linear = 1.0;
  const wisp_gguf_kv *type = wisp_gguf_kv_find(g, "gemma3.rope.scaling.type");
  if (type && type->type == WISP_GGUF_STRING && !(type->str.len == 4 && !memcmp(type->str.s, "none", 4))) {
    if (!(type->str.len == 6 && !memcmp(type->str.s, "linear", 6)))
      return wisp_fail(WISP_EUNSUPPORTED, "%s: gemma3.rope.scaling.type '%.*s' is not supported (none or linear)",
                       g->label, (int)(type->str.len > 32 ? 32 : type->str.len), type->str.s);
    opt_float(g, "gemma3", "rope.scaling.factor", 0, 1e6, &m->rope_linear);
  }
  double cap = 0;
  opt_float(g, "gemma3", "final_logit_softcapping", 0, 1e30, &cap);
  if (cap > 0)
    return wisp_fail(WISP_EUNSUPPORTED, "%s: gemma3.final_logit_softcapping is %g; wisp supports Gemma 3 without it",
                     g->label, cap);
  /* llama.cpp scales the scores by 1/sqrt(key_length) (n_embd/n_head for the 62-layer 27B) */
  m->attn_scalar = m->n_layers == 62 ? (double)m->hidden / m->heads : m->head_dim;
  return WISP_OK;
}

/* Hyperparameters from ARCH.* metadata and the tensors' shapes. */
static wisp_status hyperparams(const wisp_gguf *g, const wisp_gguf_arch *ga, wisp_gguf_model *m) {
  const char *arch = m->arch;
  const int lfm2 = !strcmp(arch, "lfm2"), qwen35 = !strcmp(arch, "qwen35");
  wisp_status st;
  if ((st = need_int(g, arch, "block_count", 1, &m->n_layers)) ||
      (st = need_int(g, arch, "embedding_length", 1, &m->hidden)) ||
      (st = need_int(g, arch, "attention.head_count", 1, &m->heads)))
    return st;
  int nextn = 0; /* qwen35 files may append MTP blocks past the decoder's layers */
  opt_int(g, arch, "nextn_predict_layers", &nextn);
  if (nextn >= m->n_layers) return wisp_fail(WISP_EFORMAT, "%s: nextn_predict_layers %d leaves no layers", g->label, nextn);
  m->n_layers -= nextn;
  if (m->n_layers > 4096) return wisp_fail(WISP_EFORMAT, "%s: block_count %d is too large", g->label, m->n_layers);
  m->context = 4096;
  opt_int(g, arch, "context_length", &m->context);
  m->rope_theta = lfm2 || !strcmp(arch, "gemma3") ? 1000000.0 : 10000.0;
  m->norm_eps = lfm2 ? 1e-5 : 1e-6;
  opt_float(g, arch, "rope.freq_base", 0, 1e30, &m->rope_theta);
  opt_float(g, arch, "attention.layer_norm_rms_epsilon", 0, 1, &m->norm_eps);
  if ((st = layer_kinds(g, ga, m))) return st;
  m->head_dim = m->hidden / m->heads;
  opt_int(g, arch, "attention.key_length", &m->head_dim);
  if (m->head_dim >= 65536 || m->head_dim % 2)
    return wisp_fail(WISP_EUNSUPPORTED, "%s: head dim %d must be even", g->label, m->head_dim);
  const wisp_gguf_tensor *emb = wisp_gguf_tensor_find(g, "token_embd.weight");
  if (!emb || emb->n_dims != 2 || emb->ne[1] > 100000000)
    return wisp_fail(WISP_EFORMAT, "%s: missing 2-d tensor 'token_embd.weight'", g->label);
  m->vocab = (int)emb->ne[1];
  const wisp_gguf_tensor *gate = wisp_gguf_tensor_find(g, "blk.0.ffn_gate.weight");
  if (!gate || gate->n_dims != 2 || gate->ne[1] > 100000000)
    return wisp_fail(WISP_EFORMAT, "%s: missing 2-d tensor 'blk.0.ffn_gate.weight'", g->label);
  m->ffn = (int)gate->ne[1];
  m->conv_l = 3;
  char k[128];
  for (int i = 0; lfm2 && i < m->n_layers; i++) {
    snprintf(k, sizeof k, "blk.%d.shortconv.conv.weight", i);
    const wisp_gguf_tensor *c = wisp_gguf_tensor_find(g, k);
    if (c && c->ne[0] < 64) { m->conv_l = (int)c->ne[0]; break; }
  }
  m->tied = !wisp_gguf_tensor_find(g, "output.weight");
  /* heads and head_dim are each up to 1e9 here: their product in 64 bits */
  const int64_t width = (int64_t)m->heads * m->head_dim;
  if (width > 1000000000)
    return wisp_fail(WISP_EFORMAT, "%s: %d heads of %d dims is out of range", g->label, m->heads, m->head_dim);
  if (m->hidden % 32 || m->ffn % 32 || width % 32)
    return wisp_fail(WISP_EUNSUPPORTED, "%s: hidden %d, ffn %d and attention width %lld must be multiples of 32",
                     g->label, m->hidden, m->ffn, (long long)width);
  if (!strcmp(arch, "llama") && (st = llama_rope(g, m))) return st;
  if (qwen35 && (st = qwen35_dims(g, m))) return st;
  if (!strcmp(arch, "gemma3") && (st = gemma3_dims(g, m))) return st;
  return WISP_OK;
}

static wisp_gguf_geom geom_of(const wisp_gguf_model *m) {
  const wisp_gguf_arch *ga = wisp_gguf_arch_find(m->arch);
  const int gated = ga && ga->q_gated; /* q rows carry [q | gate] per head */
  wisp_gguf_geom g = {.hidden = m->hidden, .ffn = m->ffn, .vocab = m->vocab, .conv_l = m->conv_l, .heads = m->heads,
                      .kv_heads = m->kv_heads, .head_dim = m->head_dim,
                      .q_rows = (gated ? 2 : 1) * m->heads * m->head_dim, .lin_k_heads = m->lin_k_heads,
                      .lin_v_heads = m->lin_v_heads, .lin_k_dim = m->lin_k_dim, .lin_v_dim = m->lin_v_dim};
  return g;
}

/* GGUF layout -> Hugging Face layout, in place: HF row src[r] (column
 * csrc[c]) is GGUF row r (column c); then the value transform. */
static wisp_status to_hf_layout(const wisp_gguf_geom *geo, unsigned xform, const char *what, float *v, int rows,
                                int cols) {
  wisp_status st = WISP_OK;
  if (xform & ~(unsigned)(GA_X_PLUS1 | GA_X_NEGEXP)) {
    int *rs = malloc(sizeof(int) * (size_t)rows), *cs = malloc(sizeof(int) * (size_t)cols);
    float *tmp = malloc(sizeof(float) * (size_t)rows * (size_t)cols);
    if (!rs || !cs || !tmp) st = wisp_fail(WISP_ENOMEM, "out of memory");
    if (!st && !(st = wisp_gguf_row_map(geo, xform, rows, what, rs)) && !(st = wisp_gguf_col_map(geo, xform, cols, what, cs))) {
      for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++) tmp[(size_t)rs[r] * cols + cs[c]] = v[(size_t)r * cols + c];
      memcpy(v, tmp, sizeof(float) * (size_t)rows * (size_t)cols);
    }
    free(rs);
    free(cs);
    free(tmp);
  }
  if (!st) wisp_gguf_values_import(xform, v, (size_t)rows * (size_t)cols);
  return st;
}

/* The rule of GGUF tensor t, its Hugging Face name in out; *skip for a
 * tensor that is consumed elsewhere (rope_freqs) or belongs to an MTP block. */
static wisp_status rule_of(const wisp_gguf *g, const wisp_gguf_arch *ga, const wisp_gguf_model *m,
                           const wisp_gguf_tensor *t, const wisp_gguf_rule **rule, char *out, size_t cap, int *skip) {
  int layer, used = 0;
  *skip = 0;
  *rule = NULL;
  if (sscanf(t->name, "blk.%d.%n", &layer, &used) == 1 && used > 0) {
    char k[64];
    snprintf(k, sizeof k, "%s.nextn_predict_layers", m->arch);
    int64_t nextn = 0;
    if (layer >= m->n_layers && wisp_gguf_get_int(g, k, &nextn) && nextn > 0 && layer < m->n_layers + nextn) {
      *skip = 1; /* multi-token-prediction block: not part of the decoder */
      return WISP_OK;
    }
    if (layer < 0 || layer >= m->n_layers)
      return wisp_fail(WISP_EFORMAT, "%s: tensor '%s' names layer %d, the model has %d", g->label, t->name, layer,
                       m->n_layers);
    *rule = wisp_gguf_rule_find(ga, t->name + used, 1);
    if (*rule) snprintf(out, cap, (*rule)->hf, layer);
  } else {
    if (!strcmp(t->name, "rope_freqs.weight") && m->rope_factors) { *skip = 1; return WISP_OK; }
    *rule = wisp_gguf_rule_find(ga, t->name, 0);
    if (*rule) snprintf(out, cap, "%s", (*rule)->hf);
  }
  if (!*rule)
    return wisp_fail(WISP_EUNSUPPORTED, "%s: tensor '%s' is not part of the %s graph wisp implements", g->label,
                     t->name, ga->graph);
  return WISP_OK;
}

/* Every tensor the table expects for each layer's kind and the globals
 * (the head is optional: absent = tied; an alias satisfies its rule), so
 * that a missing one is named as the file names it. */
static wisp_status check_complete(const wisp_gguf *g, const wisp_gguf_arch *ga, const wisp_gguf_model *m) {
  char k[160];
  for (int i = 0; i < m->n_layers; i++)
    for (size_t r = 0; r < ga->n_rules; r++) {
      const wisp_gguf_rule *rule = &ga->rules[r];
      if (!rule->section || !wisp_gguf_rule_applies(rule, m->layer_types[i])) continue;
      snprintf(k, sizeof k, "blk.%d.%s", i, rule->gguf);
      if (!wisp_gguf_tensor_find(g, k))
        return wisp_fail(WISP_EFORMAT, "%s: missing tensor '%s' (layer %d of this %s model)", g->label, k, i, ga->graph);
    }
  for (size_t r = 0; r < ga->n_rules; r++) {
    const wisp_gguf_rule *rule = &ga->rules[r];
    if (rule->where != GA_GLOBAL || !rule->section || !strcmp(rule->section, "head")) continue;
    int found = 0;
    for (size_t a = 0; a < ga->n_rules; a++)
      found |= ga->rules[a].where == GA_GLOBAL && !strcmp(ga->rules[a].hf, rule->hf) &&
               wisp_gguf_tensor_find(g, ga->rules[a].gguf) != NULL;
    if (!found) return wisp_fail(WISP_EFORMAT, "%s: missing tensor '%s'", g->label, rule->gguf);
  }
  return WISP_OK;
}

/* One GGUF tensor as an f32 tensor under its Hugging Face name at `at`. */
static wisp_status import_tensor(const wisp_gguf *g, const wisp_gguf_tensor *t, const wisp_gguf_rule *rule,
                                 const wisp_gguf_geom *geo, const char *name, wisp_st_tensor *o, uint8_t *at) {
  if (!(o->name = strdup(name))) return wisp_fail(WISP_ENOMEM, "out of memory");
  o->dtype = WISP_ST_F32;
  o->ndim = t->n_dims;
  for (int d = 0; d < t->n_dims; d++) o->shape[d] = (int64_t)t->ne[t->n_dims - 1 - d];
  if (rule->part == GA_P_TAPS && t->n_dims == 2) { /* HF's [channels, 1, L] */
    o->ndim = 3;
    o->shape[0] = (int64_t)t->ne[1];
    o->shape[1] = 1;
    o->shape[2] = (int64_t)t->ne[0];
  }
  o->numel = t->numel;
  o->bytes = t->numel * 4;
  o->data = at;
  o->file = 0;
  wisp_status st = wisp_gguf_read_f32(g, t, (float *)at);
  if (st || !rule->xform) return st;
  const int cols = t->n_dims == 1 ? 1 : (int)t->ne[0];
  return to_hf_layout(geo, rule->xform, t->name, (float *)at, (int)(t->numel / (uint64_t)cols), cols);
}

/* A safetensors-shaped view over one anonymous mapping of `total` bytes. */
static wisp_status new_store(const wisp_gguf *g, uint64_t total, wisp_safetensors **out) {
  wisp_safetensors *s = calloc(1, sizeof *s);
  *out = s;
  if (!s) return wisp_fail(WISP_ENOMEM, "out of memory");
  s->files = calloc(1, sizeof *s->files);
  s->tensors = calloc((size_t)g->n_tensors + 1, sizeof *s->tensors);
  if (!s->files || !s->tensors || !(s->files[0].path = strdup(g->label))) return wisp_fail(WISP_ENOMEM, "out of memory");
  s->n_files = 1;
  if (!total) return WISP_OK;
  void *blob = mmap(NULL, (size_t)total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (blob == MAP_FAILED)
    return wisp_fail(WISP_ENOMEM, "out of memory for %llu bytes of f32 tensors", (unsigned long long)total);
  s->files[0].map = blob;
  s->files[0].len = (size_t)total;
  return WISP_OK;
}

wisp_status wisp_gguf_read_model(const wisp_gguf *g, wisp_gguf_model *m, const wisp_gguf_arch **arch) {
  memset(m, 0, sizeof *m);
  const wisp_gguf_kv *a = wisp_gguf_kv_find(g, "general.architecture");
  if (!a || a->type != WISP_GGUF_STRING)
    return wisp_fail(WISP_EFORMAT, "%s: missing string metadata 'general.architecture'", g->label);
  snprintf(m->arch, sizeof m->arch, "%.*s", (int)(a->str.len < 31 ? a->str.len : 31), a->str.s);
  const wisp_gguf_arch *ga = wisp_gguf_arch_find(m->arch);
  if (!ga)
    return wisp_fail(WISP_EUNSUPPORTED, "%s: GGUF architecture '%s' is not supported (wisp runs %s; no conversion "
                     "makes another one run)", g->label, m->arch, wisp_gguf_arch_list());
  wisp_status st = hyperparams(g, ga, m);
  if (!st) st = check_complete(g, ga, m);
  if (st) {
    wisp_gguf_model_free(m);
    return st;
  }
  if (arch) *arch = ga;
  return WISP_OK;
}

wisp_gguf_geom wisp_gguf_model_geom(const wisp_gguf_model *m) { return geom_of(m); }

wisp_status wisp_gguf_import(const wisp_gguf *g, wisp_gguf_model *m, wisp_safetensors **out) {
  *out = NULL;
  const wisp_gguf_arch *ga = NULL;
  wisp_status st = wisp_gguf_read_model(g, m, &ga);
  if (st) return st;
  const wisp_gguf_geom geo = geom_of(m);
  /* The tensors, dequantized into one anonymous mapping (freed by close). */
  uint64_t total = 0;
  for (uint64_t i = 0; i < g->n_tensors; i++) total += g->tensors[i].numel * 4;
  wisp_safetensors *s = NULL;
  st = new_store(g, total, &s);
  uint8_t *at = s && s->files ? (uint8_t *)s->files[0].map : NULL;
  char name[160];
  for (uint64_t i = 0; !st && i < g->n_tensors; i++) {
    const wisp_gguf_tensor *t = &g->tensors[i];
    const wisp_gguf_rule *rule;
    int skip;
    if ((st = rule_of(g, ga, m, t, &rule, name, sizeof name, &skip)) || skip) continue;
    /* token_embd_norm and output_norm both name LFM2's final norm: keep one */
    for (int j = 0; !st && j < s->n_tensors; j++)
      if (!strcmp(s->tensors[j].name, name))
        st = wisp_fail(WISP_EFORMAT, "%s: tensor '%s' maps to '%s' twice", g->label, t->name, name);
    if (!st && !(st = import_tensor(g, t, rule, &geo, name, &s->tensors[s->n_tensors], at))) at += t->numel * 4;
    if (s->tensors[s->n_tensors].name) s->n_tensors++;
  }
  if (st) {
    wisp_safetensors_close(s);
    wisp_gguf_model_free(m);
    return st;
  }
  qsort(s->tensors, (size_t)s->n_tensors, sizeof *s->tensors, by_name);
  *out = s;
  return WISP_OK;
}

/* What llama.cpp does for each pre-tokenizer name wisp knows: the split
 * regex, whether a pre-token found whole in the vocabulary skips the merges
 * (ignore_merges), and whether a BOS is added when the file has no
 * tokenizer.ggml.add_bos_token (src/llama-vocab.cpp's defaults). */
typedef struct {
  const char *regex; /* NULL: ByteLevel's GPT-2 regex */
  int ignore_merges, add_bos;
} pre_info;

#define RX_LLAMA3                                                                                        \
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|" \
  "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RX_QWEN2                                                                                      \
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|" \
  "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
/* Qwen 3.5's tokenizer.json: Qwen2's with combining marks (\p{M}) in words */
#define RX_QWEN35                                                                                            \
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+" \
  "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

static int pre_lookup(const char *pre, pre_info *out) {
  static const struct {
    const char *name;
    pre_info info;
  } known[] = {
      {"llama-bpe", {RX_LLAMA3, 1, 1}}, {"llama3", {RX_LLAMA3, 1, 1}}, {"lfm2", {RX_LLAMA3, 1, 1}},
      {"smollm", {RX_LLAMA3, 0, 0}},    {"qwen2", {RX_QWEN2, 0, 0}},   {"qwen3", {RX_QWEN2, 0, 0}},
      {"qwen35", {RX_QWEN35, 0, 0}},    {"default", {NULL, 0, 0}},     {"gpt2", {NULL, 0, 0}},
      {"gpt-2", {NULL, 0, 0}},
  };
  for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
    if (!strcmp(pre, known[i].name)) {
      *out = known[i].info;
      return 1;
    }
  return 0;
}

static cJSON *str_json(wisp_gguf_str s) {
  char *d = malloc((size_t)s.len + 1);
  if (!d) return NULL;
  memcpy(d, s.s, (size_t)s.len);
  d[s.len] = 0;
  cJSON *j = cJSON_CreateString(d);
  free(d);
  return j;
}

/* Where the tokenizer files go: files in DIR, or in-memory files
 * (util/memfile.h) under DIR/NAME for a GGUF run directly. */
typedef struct {
  const char *dir;
  int memory;
} tok_sink;

static wisp_status write_json(const tok_sink *to, const char *name, cJSON *j) {
  char path[4200];
  snprintf(path, sizeof path, "%s/%s", to->dir, name);
  char *text = cJSON_PrintUnformatted(j);
  if (!text) return wisp_fail(WISP_ENOMEM, "out of memory");
  wisp_status st = to->memory ? wisp_memfile_put(path, text, strlen(text)) : wisp_write_file_atomic(path, text, strlen(text));
  free(text);
  return st;
}

/* The special ids of tokenizer.ggml.* (-1: absent or not a token) and
 * whether encoding adds BOS / EOS. */
typedef struct {
  int64_t bos, eos, eot, eom, pad;
  int add_bos, add_eos;
} special_ids;

static int64_t token_key(const wisp_gguf *g, const char *key, const wisp_gguf_kv *tok) {
  int64_t v = -1;
  if (!wisp_gguf_get_int(g, key, &v) || v < 0 || (uint64_t)v >= tok->n) return -1;
  return v;
}

/* add_bos_token / add_eos_token as llama.cpp reads them: the keys when
 * present, else its default for the pre-tokenizer (BOS only for the
 * llama-bpe family). A flag whose token is missing is an error. */
static wisp_status read_special_ids(const wisp_gguf *g, const wisp_gguf_kv *tok, const pre_info *pi,
                                    special_ids *sp) {
  sp->bos = token_key(g, "tokenizer.ggml.bos_token_id", tok);
  sp->eos = token_key(g, "tokenizer.ggml.eos_token_id", tok);
  sp->eot = token_key(g, "tokenizer.ggml.eot_token_id", tok);
  sp->eom = token_key(g, "tokenizer.ggml.eom_token_id", tok);
  sp->pad = token_key(g, "tokenizer.ggml.padding_token_id", tok);
  int64_t v;
  sp->add_bos = pi->add_bos && sp->bos >= 0;
  sp->add_eos = 0;
  if (wisp_gguf_get_int(g, "tokenizer.ggml.add_bos_token", &v)) {
    sp->add_bos = v != 0;
    if (sp->add_bos && sp->bos < 0)
      return wisp_fail(WISP_EFORMAT, "%s: tokenizer.ggml.add_bos_token is set but bos_token_id is missing or not a token",
                       g->label);
  }
  if (wisp_gguf_get_int(g, "tokenizer.ggml.add_eos_token", &v)) {
    sp->add_eos = v != 0;
    if (sp->add_eos && sp->eos < 0)
      return wisp_fail(WISP_EFORMAT, "%s: tokenizer.ggml.add_eos_token is set but eos_token_id is missing or not a token",
                       g->label);
  }
  return WISP_OK;
}

/* One special token of a TemplateProcessing template: its place in
 * `single` and its definition in `special_tokens`. */
static wisp_status add_template_token(cJSON *single, cJSON *specials, const wisp_gguf_kv *tok, int64_t id) {
  cJSON *content = str_json(tok->strs[id]);
  if (!content) return wisp_fail(WISP_ENOMEM, "out of memory");
  const char *c = content->valuestring;
  cJSON *item = cJSON_CreateObject();
  cJSON_AddItemToArray(single, item);
  cJSON *inner = cJSON_AddObjectToObject(item, "SpecialToken");
  cJSON_AddStringToObject(inner, "id", c);
  cJSON_AddNumberToObject(inner, "type_id", 0);
  if (!cJSON_GetObjectItemCaseSensitive(specials, c)) {
    cJSON *def = cJSON_AddObjectToObject(specials, c);
    cJSON_AddStringToObject(def, "id", c);
    cJSON_AddItemToObject(def, "ids", cJSON_CreateIntArray((const int[]){(int)id}, 1));
    cJSON_AddItemToObject(def, "tokens", cJSON_CreateStringArray((const char *const[]){c}, 1));
  }
  cJSON_Delete(content);
  return WISP_OK;
}

/* tokenizer.json's post-processor: [BOS] $A [EOS], the TemplateProcessing
 * Hugging Face writes for a tokenizer that adds them. */
static wisp_status add_post_processor(cJSON *root, const wisp_gguf_kv *tok, const special_ids *ids) {
  cJSON *pp = cJSON_AddObjectToObject(root, "post_processor");
  cJSON_AddStringToObject(pp, "type", "TemplateProcessing");
  cJSON *single = cJSON_AddArrayToObject(pp, "single"), *specials = cJSON_AddObjectToObject(pp, "special_tokens");
  wisp_status st = WISP_OK;
  if (ids->add_bos) st = add_template_token(single, specials, tok, ids->bos);
  cJSON *seq = cJSON_CreateObject();
  cJSON_AddItemToArray(single, seq);
  cJSON *inner = cJSON_AddObjectToObject(seq, "Sequence");
  cJSON_AddStringToObject(inner, "id", "A");
  cJSON_AddNumberToObject(inner, "type_id", 0);
  if (!st && ids->add_eos) st = add_template_token(single, specials, tok, ids->eos);
  return st;
}

/* tokenizer_config.json names the special tokens and carries the chat
 * template; generation_config.json has the ids (eos: every stop id). */
static wisp_status write_configs(const wisp_gguf *g, const tok_sink *dir, const wisp_gguf_kv *tok, const special_ids *sp) {
  cJSON *tc = cJSON_CreateObject(), *gc = cJSON_CreateObject();
  if (!tc || !gc) {
    cJSON_Delete(tc);
    cJSON_Delete(gc);
    return wisp_fail(WISP_ENOMEM, "out of memory");
  }
  const struct { const char *name; int64_t id; } named[] = {{"bos", sp->bos}, {"eos", sp->eos}, {"pad", sp->pad}};
  char key[32];
  for (int i = 0; i < 3; i++) {
    if (named[i].id < 0) continue;
    snprintf(key, sizeof key, "%s_token", named[i].name);
    cJSON_AddItemToObject(tc, key, str_json(tok->strs[named[i].id]));
  }
  cJSON_AddBoolToObject(tc, "add_bos_token", sp->add_bos);
  cJSON_AddBoolToObject(tc, "add_eos_token", sp->add_eos);
  const wisp_gguf_kv *tmpl = wisp_gguf_kv_find(g, "tokenizer.chat_template");
  if (tmpl && tmpl->type == WISP_GGUF_STRING) cJSON_AddItemToObject(tc, "chat_template", str_json(tmpl->str));
  if (sp->bos >= 0) cJSON_AddNumberToObject(gc, "bos_token_id", (double)sp->bos);
  int stops[3], n = 0;
  const int64_t cand[3] = {sp->eos, sp->eot, sp->eom};
  for (int i = 0; i < 3; i++) {
    int dup = cand[i] < 0;
    for (int j = 0; j < n && !dup; j++) dup = stops[j] == cand[i];
    if (!dup) stops[n++] = (int)cand[i];
  }
  if (n == 1) cJSON_AddNumberToObject(gc, "eos_token_id", stops[0]);
  else if (n > 1) cJSON_AddItemToObject(gc, "eos_token_id", cJSON_CreateIntArray(stops, n));
  if (sp->pad >= 0) cJSON_AddNumberToObject(gc, "pad_token_id", (double)sp->pad);
  wisp_status st = write_json(dir, "tokenizer_config.json", tc);
  if (!st) st = write_json(dir, "generation_config.json", gc);
  cJSON_Delete(tc);
  cJSON_Delete(gc);
  return st;
}

static wisp_status bpe_json(const wisp_gguf *g, const wisp_gguf_kv *tok, const wisp_gguf_kv *mer,
                            const wisp_gguf_kv *typ, pre_info *out_pi, cJSON **out);

/* llama.cpp's ids for a SentencePiece vocabulary without the keys: BOS 1,
 * EOS 2 (BOS added unless add_bos_token says no). */
static void spm_default_ids(const wisp_gguf *g, const wisp_gguf_kv *tok, special_ids *ids) {
  int64_t v;
  if (!wisp_gguf_kv_find(g, "tokenizer.ggml.bos_token_id") && tok->n > 1) {
    ids->bos = 1;
    if (!wisp_gguf_get_int(g, "tokenizer.ggml.add_bos_token", &v)) ids->add_bos = 1;
  }
  if (!wisp_gguf_kv_find(g, "tokenizer.ggml.eos_token_id") && tok->n > 2) ids->eos = 2;
}

/* Rows of the embedding (the model's vocabulary), -1 without one. */
static int64_t vocab_rows(const wisp_gguf *g) {
  const wisp_gguf_tensor *e = wisp_gguf_tensor_find(g, "token_embd.weight");
  return e && e->n_dims == 2 ? (int64_t)e->ne[1] : -1;
}

static wisp_status tokenizer_files(const wisp_gguf *g, const tok_sink *dir, int *written) {
  *written = 0;
  const wisp_gguf_kv *model = wisp_gguf_kv_find(g, "tokenizer.ggml.model");
  if (!model) return WISP_OK;
  const int spm = model->type == WISP_GGUF_STRING && model->str.len == 5 && !memcmp(model->str.s, "llama", 5);
  if (!spm && (model->type != WISP_GGUF_STRING || model->str.len != 4 || memcmp(model->str.s, "gpt2", 4)))
    return wisp_fail(WISP_EUNSUPPORTED, "%s: tokenizer.ggml.model '%.*s' is not supported (wisp reads 'gpt2' byte-level "
                     "BPE and 'llama' SentencePiece)",
                     g->label, model->type == WISP_GGUF_STRING ? (int)(model->str.len > 40 ? 40 : model->str.len) : 1,
                     model->type == WISP_GGUF_STRING ? model->str.s : "?");
  const wisp_gguf_kv *tok = wisp_gguf_kv_find(g, "tokenizer.ggml.tokens");
  const wisp_gguf_kv *mer = wisp_gguf_kv_find(g, "tokenizer.ggml.merges");
  const wisp_gguf_kv *typ = wisp_gguf_kv_find(g, "tokenizer.ggml.token_type");
  if (!tok || tok->type != WISP_GGUF_ARRAY || tok->arr_type != WISP_GGUF_STRING)
    return wisp_fail(WISP_EFORMAT, "%s: tokenizer.ggml.tokens must be an array of strings", g->label);
  if (typ && (typ->type != WISP_GGUF_ARRAY || !typ->arr || typ->n != tok->n))
    return wisp_fail(WISP_EFORMAT, "%s: tokenizer.ggml.token_type must be an integer array as long as the tokens", g->label);
  cJSON *root = NULL;
  pre_info pi = {NULL, 0, 1}; /* SentencePiece: llama.cpp adds BOS unless told otherwise */
  if (spm) {
    wisp_status st = wisp_gguf_spm_json(g, tok, typ, &root);
    if (st) return st;
  } else {
    wisp_status st = bpe_json(g, tok, mer, typ, &pi, &root);
    if (st) return st;
  }
  special_ids ids;
  wisp_status st = read_special_ids(g, tok, &pi, &ids);
  if (!st && spm) spm_default_ids(g, tok, &ids);
  if (!st && (ids.add_bos || ids.add_eos)) st = add_post_processor(root, tok, &ids);
  if (!st && tok->n > (uint64_t)vocab_rows(g))
    st = wisp_fail(WISP_EFORMAT, "%s: the tokenizer has %llu tokens but token_embd.weight has %lld rows (the vocab "
                   "does not belong to these weights; take the GGUF as it was exported)", g->label,
                   (unsigned long long)tok->n, (long long)vocab_rows(g));
  if (!st) st = write_json(dir, "tokenizer.json", root);
  cJSON_Delete(root);
  if (!st) st = write_configs(g, dir, tok, &ids);
  if (!st) *written = 1;
  return st;
}

/* A byte-level BPE vocab holds the ids that are not added tokens: token
 * types 3 (control), 4 (user-defined) and 5 (unused) are left out. */
static int bpe_in_vocab(const void *types, uint64_t id) {
  int64_t t = types ? wisp_gguf_arr_int(types, id) : 1;
  return t != 3 && t != 4 && t != 5;
}

/* tokenizer.ggml.model = gpt2 (byte-level BPE) -> tokenizer.json; *pi says
 * what the pre-tokenizer name means. */
static wisp_status bpe_json(const wisp_gguf *g, const wisp_gguf_kv *tok, const wisp_gguf_kv *mer,
                            const wisp_gguf_kv *typ, pre_info *out_pi, cJSON **out) {
  if (!mer || mer->type != WISP_GGUF_ARRAY || mer->arr_type != WISP_GGUF_STRING)
    return wisp_fail(WISP_EFORMAT, "%s: tokenizer.ggml.merges must be an array of strings", g->label);
  char pre[64] = "default";
  const wisp_gguf_kv *p = wisp_gguf_kv_find(g, "tokenizer.ggml.pre");
  if (p && p->type == WISP_GGUF_STRING) snprintf(pre, sizeof pre, "%.*s", (int)(p->str.len < 63 ? p->str.len : 63), p->str.s);
  pre_info pi;
  if (!pre_lookup(pre, &pi))
    return wisp_fail(WISP_EUNSUPPORTED, "%s: tokenizer.ggml.pre '%s' is not supported (llama-bpe, lfm2, qwen2, default)",
                     g->label, pre);
  /* the vocab: every id but control, user-defined and unused ones (added
   * tokens), a repeated text at its first id */
  wisp_text_index in_vocab = {0};
  if (!wisp_text_index_build(&in_vocab, tok, bpe_in_vocab, typ)) return wisp_fail(WISP_ENOMEM, "out of memory");
  cJSON *root = cJSON_CreateObject(), *m = cJSON_AddObjectToObject(root, "model");
  cJSON_AddStringToObject(m, "type", "BPE");
  if (pi.ignore_merges) cJSON_AddBoolToObject(m, "ignore_merges", 1);
  /* vocab and merges written as JSON text (format/json_text.h) */
  wisp_json_text vocab = {0}, merges = {0};
  cJSON *added = cJSON_AddArrayToObject(root, "added_tokens");
  wisp_json_text_raw(&vocab, "{", 1);
  for (uint64_t i = 0; i < tok->n; i++) {
    int64_t t = typ ? wisp_gguf_arr_int(typ, i) : 1;
    if (t == 3 || t == 4) { /* control / user-defined: added tokens */
      cJSON *a = cJSON_CreateObject(), *s = str_json(tok->strs[i]);
      if (!a || !s) {
        cJSON_Delete(a), cJSON_Delete(s);
        continue;
      }
      cJSON_AddNumberToObject(a, "id", (double)i);
      cJSON_AddItemToObject(a, "content", s);
      cJSON_AddBoolToObject(a, "special", t == 3);
      cJSON_AddItemToArray(added, a);
    }
    if (wisp_text_index_get(&in_vocab, tok->strs[i].s, (size_t)tok->strs[i].len) == (int32_t)i)
      wisp_json_text_member_int(&vocab, tok->strs[i].s, (size_t)tok->strs[i].len, (int64_t)i);
  }
  wisp_text_index_free(&in_vocab);
  wisp_json_text_raw(&vocab, "}", 1);
  wisp_json_text_raw(&merges, "[", 1);
  for (uint64_t i = 0; i < mer->n; i++) {
    wisp_json_text_comma(&merges);
    wisp_json_text_str(&merges, mer->strs[i].s, (size_t)mer->strs[i].len);
  }
  wisp_json_text_raw(&merges, "]", 1);
  const int put = wisp_json_text_put(&vocab, m, "vocab") & wisp_json_text_put(&merges, m, "merges");
  if (!put) {
    cJSON_Delete(root);
    return wisp_fail(WISP_ENOMEM, "out of memory for the tokenizer of %s", g->label);
  }
  cJSON *pt = cJSON_AddObjectToObject(root, "pre_tokenizer");
  if (pi.regex) {
    cJSON_AddStringToObject(pt, "type", "Sequence");
    cJSON *list = cJSON_AddArrayToObject(pt, "pretokenizers");
    cJSON *sp = cJSON_CreateObject();
    cJSON_AddStringToObject(sp, "type", "Split");
    cJSON_AddStringToObject(cJSON_AddObjectToObject(sp, "pattern"), "Regex", pi.regex);
    cJSON_AddStringToObject(sp, "behavior", "Isolated");
    cJSON_AddBoolToObject(sp, "invert", 0);
    cJSON_AddItemToArray(list, sp);
    cJSON *bl = cJSON_CreateObject();
    cJSON_AddStringToObject(bl, "type", "ByteLevel");
    cJSON_AddBoolToObject(bl, "add_prefix_space", 0);
    cJSON_AddBoolToObject(bl, "trim_offsets", 1);
    cJSON_AddBoolToObject(bl, "use_regex", 0);
    cJSON_AddItemToArray(list, bl);
  } else {
    cJSON_AddStringToObject(pt, "type", "ByteLevel");
    cJSON_AddBoolToObject(pt, "add_prefix_space", 0);
    cJSON_AddBoolToObject(pt, "use_regex", 1);
  }
  cJSON *dec = cJSON_AddObjectToObject(root, "decoder");
  cJSON_AddStringToObject(dec, "type", "ByteLevel");
  *out_pi = pi;
  *out = root;
  return WISP_OK;
}

wisp_status wisp_gguf_write_tokenizer(const wisp_gguf *g, const char *dir, int *written) {
  const tok_sink to = {dir, 0};
  return tokenizer_files(g, &to, written);
}

wisp_status wisp_gguf_memory_tokenizer(const wisp_gguf *g, const char *label, int *written) {
  const tok_sink to = {label, 1};
  wisp_status st = tokenizer_files(g, &to, written);
  if (st) wisp_gguf_memory_tokenizer_drop(label);
  return st;
}

void wisp_gguf_memory_tokenizer_drop(const char *label) {
  static const char *const names[3] = {"tokenizer.json", "tokenizer_config.json", "generation_config.json"};
  char path[4200];
  for (int i = 0; i < 3; i++) {
    snprintf(path, sizeof path, "%s/%s", label, names[i]);
    wisp_memfile_drop(path);
  }
}
