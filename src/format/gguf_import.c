/* GGUF import; see gguf_import.h. */
#include "format/gguf_import.h"

#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "format/artifact.h"
#include "util/err.h"
#include "util/file.h"

typedef struct {
  const char *gguf; /* suffix after blk.N. or global name */
  const char *hf;   /* printf format with %d for the layer */
} name_map;

static const name_map k_lfm2_layer[] = {
    {"attn_norm.weight", "model.layers.%d.operator_norm.weight"},
    {"ffn_norm.weight", "model.layers.%d.ffn_norm.weight"},
    {"ffn_gate.weight", "model.layers.%d.feed_forward.w1.weight"},
    {"ffn_up.weight", "model.layers.%d.feed_forward.w3.weight"},
    {"ffn_down.weight", "model.layers.%d.feed_forward.w2.weight"},
    {"attn_q.weight", "model.layers.%d.self_attn.q_proj.weight"},
    {"attn_k.weight", "model.layers.%d.self_attn.k_proj.weight"},
    {"attn_v.weight", "model.layers.%d.self_attn.v_proj.weight"},
    {"attn_output.weight", "model.layers.%d.self_attn.out_proj.weight"},
    {"attn_q_norm.weight", "model.layers.%d.self_attn.q_layernorm.weight"},
    {"attn_k_norm.weight", "model.layers.%d.self_attn.k_layernorm.weight"},
    {"shortconv.in_proj.weight", "model.layers.%d.conv.in_proj.weight"},
    {"shortconv.out_proj.weight", "model.layers.%d.conv.out_proj.weight"},
    {"shortconv.conv.weight", "model.layers.%d.conv.conv.weight"},
};

static const name_map k_lfm2_global[] = {
    {"token_embd.weight", "model.embed_tokens.weight"},
    {"token_embd_norm.weight", "model.embedding_norm.weight"},
    {"output_norm.weight", "model.embedding_norm.weight"},
    {"output.weight", "lm_head.weight"},
};

static const name_map k_qwen3_layer[] = {
    {"attn_norm.weight", "model.layers.%d.input_layernorm.weight"},
    {"ffn_norm.weight", "model.layers.%d.post_attention_layernorm.weight"},
    {"ffn_gate.weight", "model.layers.%d.mlp.gate_proj.weight"},
    {"ffn_up.weight", "model.layers.%d.mlp.up_proj.weight"},
    {"ffn_down.weight", "model.layers.%d.mlp.down_proj.weight"},
    {"attn_q.weight", "model.layers.%d.self_attn.q_proj.weight"},
    {"attn_k.weight", "model.layers.%d.self_attn.k_proj.weight"},
    {"attn_v.weight", "model.layers.%d.self_attn.v_proj.weight"},
    {"attn_output.weight", "model.layers.%d.self_attn.o_proj.weight"},
    {"attn_q_norm.weight", "model.layers.%d.self_attn.q_norm.weight"},
    {"attn_k_norm.weight", "model.layers.%d.self_attn.k_norm.weight"},
};

static const name_map k_qwen3_global[] = {
    {"token_embd.weight", "model.embed_tokens.weight"},
    {"output_norm.weight", "model.norm.weight"},
    {"output.weight", "lm_head.weight"},
};

static int by_name(const void *a, const void *b) {
  return strcmp(((const wisp_st_tensor *)a)->name, ((const wisp_st_tensor *)b)->name);
}

static wisp_status hf_name(const wisp_gguf *g, const wisp_gguf_tensor *t, int n_layers, int qwen3, char *out,
                           size_t cap) {
  const name_map *lay = qwen3 ? k_qwen3_layer : k_lfm2_layer, *glob = qwen3 ? k_qwen3_global : k_lfm2_global;
  size_t n_lay = qwen3 ? sizeof k_qwen3_layer / sizeof *k_qwen3_layer : sizeof k_lfm2_layer / sizeof *k_lfm2_layer;
  size_t n_glob = qwen3 ? sizeof k_qwen3_global / sizeof *k_qwen3_global : sizeof k_lfm2_global / sizeof *k_lfm2_global;
  int layer, used = 0;
  if (sscanf(t->name, "blk.%d.%n", &layer, &used) == 1 && used > 0) {
    if (layer < 0 || layer >= n_layers)
      return wisp_fail(WISP_EFORMAT, "%s: tensor '%s' names layer %d, the model has %d", g->label, t->name, layer,
                       n_layers);
    for (size_t i = 0; i < n_lay; i++)
      if (!strcmp(t->name + used, lay[i].gguf)) {
        snprintf(out, cap, lay[i].hf, layer);
        return WISP_OK;
      }
  } else {
    for (size_t i = 0; i < n_glob; i++)
      if (!strcmp(t->name, glob[i].gguf)) {
        snprintf(out, cap, "%s", glob[i].hf);
        return WISP_OK;
      }
  }
  return wisp_fail(WISP_EUNSUPPORTED, "%s: tensor '%s' is not part of the %s graph wisp implements", g->label,
                   t->name, qwen3 ? "Qwen3" : "LFM2");
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

wisp_status wisp_gguf_import(const wisp_gguf *g, wisp_gguf_model *m, wisp_safetensors **out) {
  *out = NULL;
  memset(m, 0, sizeof *m);
  const wisp_gguf_kv *a = wisp_gguf_kv_find(g, "general.architecture");
  if (!a || a->type != WISP_GGUF_STRING)
    return wisp_fail(WISP_EFORMAT, "%s: missing string metadata 'general.architecture'", g->label);
  snprintf(m->arch, sizeof m->arch, "%.*s", (int)(a->str.len < 31 ? a->str.len : 31), a->str.s);
  const int qwen3 = !strcmp(m->arch, "qwen3");
  if (strcmp(m->arch, "lfm2") && !qwen3)
    return wisp_fail(WISP_EUNSUPPORTED, "%s: GGUF architecture '%s' is not supported (wisp imports lfm2 and qwen3)",
                     g->label, m->arch);
  wisp_status st;
  if ((st = need_int(g, m->arch, "block_count", 1, &m->n_layers)) ||
      (st = need_int(g, m->arch, "embedding_length", 1, &m->hidden)) ||
      (st = need_int(g, m->arch, "attention.head_count", 1, &m->heads)))
    return st;
  if (m->n_layers > 4096) return wisp_fail(WISP_EFORMAT, "%s: block_count %d is too large", g->label, m->n_layers);
  m->context = 4096;
  int64_t v;
  char k[128];
  snprintf(k, sizeof k, "%s.context_length", m->arch);
  if (wisp_gguf_get_int(g, k, &v) && v > 0 && v < 100000000) m->context = (int)v;
  m->rope_theta = qwen3 ? 10000.0 : 1000000.0;
  m->norm_eps = qwen3 ? 1e-6 : 1e-5;
  snprintf(k, sizeof k, "%s.rope.freq_base", m->arch);
  double d;
  if (wisp_gguf_get_float(g, k, &d) && d > 0) m->rope_theta = d;
  snprintf(k, sizeof k, "%s.attention.layer_norm_rms_epsilon", m->arch);
  if (wisp_gguf_get_float(g, k, &d) && d > 0 && d <= 1) m->norm_eps = d;
  m->layer_types = calloc((size_t)m->n_layers, sizeof(int));
  if (!m->layer_types) return wisp_fail(WISP_ENOMEM, "out of memory");
  /* Layer kinds from the tensors present; kv heads from head_count_kv
   * (a per-layer array where 0 marks a conv layer, or one number). */
  m->kv_heads = 0;
  snprintf(k, sizeof k, "%s.attention.head_count_kv", m->arch);
  const wisp_gguf_kv *kvh = wisp_gguf_kv_find(g, k);
  for (int i = 0; i < m->n_layers; i++) {
    snprintf(k, sizeof k, "blk.%d.shortconv.in_proj.weight", i);
    m->layer_types[i] = wisp_gguf_tensor_find(g, k) ? WISP_LAYER_CONV : WISP_LAYER_ATTENTION;
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
  m->head_dim = m->hidden / m->heads;
  snprintf(k, sizeof k, "%s.attention.key_length", m->arch);
  if (wisp_gguf_get_int(g, k, &v) && v > 0 && v < 65536) m->head_dim = (int)v;
  /* Widths from the tensors themselves (the planner checks every shape). */
  const wisp_gguf_tensor *emb = wisp_gguf_tensor_find(g, "token_embd.weight");
  if (!emb || emb->n_dims != 2 || emb->ne[1] > 100000000)
    return wisp_fail(WISP_EFORMAT, "%s: missing 2-d tensor 'token_embd.weight'", g->label);
  m->vocab = (int)emb->ne[1];
  const wisp_gguf_tensor *gate = wisp_gguf_tensor_find(g, "blk.0.ffn_gate.weight");
  if (!gate || gate->n_dims != 2 || gate->ne[1] > 100000000)
    return wisp_fail(WISP_EFORMAT, "%s: missing 2-d tensor 'blk.0.ffn_gate.weight'", g->label);
  m->ffn = (int)gate->ne[1];
  m->conv_l = 3;
  for (int i = 0; i < m->n_layers; i++) {
    snprintf(k, sizeof k, "blk.%d.shortconv.conv.weight", i);
    const wisp_gguf_tensor *c = wisp_gguf_tensor_find(g, k);
    if (c && c->ne[0] < 64) { m->conv_l = (int)c->ne[0]; break; }
  }
  m->tied = !wisp_gguf_tensor_find(g, "output.weight");
  if (m->hidden % 32 || m->ffn % 32 || m->head_dim % 2)
    return wisp_fail(WISP_EUNSUPPORTED, "%s: hidden %d and ffn %d must be multiples of 32, head dim %d even", g->label,
                     m->hidden, m->ffn, m->head_dim);

  /* The tensors, dequantized into one anonymous mapping (freed by close). */
  uint64_t total = 0;
  for (uint64_t i = 0; i < g->n_tensors; i++) total += g->tensors[i].numel * 4;
  wisp_safetensors *s = calloc(1, sizeof *s);
  if (!s) return wisp_fail(WISP_ENOMEM, "out of memory");
  s->files = calloc(1, sizeof *s->files);
  s->tensors = calloc((size_t)g->n_tensors + 1, sizeof *s->tensors);
  if (!s->files || !s->tensors || !(s->files[0].path = strdup(g->label))) {
    wisp_safetensors_close(s);
    return wisp_fail(WISP_ENOMEM, "out of memory");
  }
  s->n_files = 1;
  if (total) {
    void *blob = mmap(NULL, (size_t)total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (blob == MAP_FAILED) {
      wisp_safetensors_close(s);
      return wisp_fail(WISP_ENOMEM, "out of memory for %llu bytes of f32 tensors", (unsigned long long)total);
    }
    s->files[0].map = blob;
    s->files[0].len = (size_t)total;
  }
  uint8_t *at = (uint8_t *)s->files[0].map;
  char name[160];
  for (uint64_t i = 0; i < g->n_tensors; i++) {
    const wisp_gguf_tensor *t = &g->tensors[i];
    wisp_st_tensor *o = &s->tensors[s->n_tensors];
    if ((st = hf_name(g, t, m->n_layers, qwen3, name, sizeof name))) break;
    /* token_embd_norm and output_norm both name the final norm: keep one */
    int dup = 0;
    for (int j = 0; j < s->n_tensors; j++) dup |= !strcmp(s->tensors[j].name, name);
    if (dup) { st = wisp_fail(WISP_EFORMAT, "%s: tensor '%s' maps to '%s' twice", g->label, t->name, name); break; }
    if (!(o->name = strdup(name))) { st = wisp_fail(WISP_ENOMEM, "out of memory"); break; }
    s->n_tensors++;
    o->dtype = WISP_ST_F32;
    o->ndim = t->n_dims;
    for (int dd = 0; dd < t->n_dims; dd++) o->shape[dd] = (int64_t)t->ne[t->n_dims - 1 - dd];
    if (strstr(name, ".conv.conv.weight") && t->n_dims == 2) { /* HF's [H, 1, L] */
      o->ndim = 3;
      o->shape[0] = (int64_t)t->ne[1];
      o->shape[1] = 1;
      o->shape[2] = (int64_t)t->ne[0];
    }
    o->numel = t->numel;
    o->bytes = t->numel * 4;
    o->data = at;
    o->file = 0;
    if ((st = wisp_gguf_read_f32(g, t, (float *)at))) break;
    at += o->bytes;
  }
  if (st) { wisp_safetensors_close(s); return st; }
  qsort(s->tensors, (size_t)s->n_tensors, sizeof *s->tensors, by_name);
  *out = s;
  return WISP_OK;
}

/* Split regexes of the pre-tokenizers wisp knows by llama.cpp's names. */
static const char *pre_regex(const char *pre) {
  static const char *llama3 =
      "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
  static const char *qwen2 =
      "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
  if (!strcmp(pre, "llama-bpe") || !strcmp(pre, "llama3") || !strcmp(pre, "lfm2") || !strcmp(pre, "smollm"))
    return llama3;
  if (!strcmp(pre, "qwen2") || !strcmp(pre, "qwen35") || !strcmp(pre, "qwen3")) return qwen2;
  return NULL;
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

static wisp_status write_json(const char *dir, const char *name, cJSON *j) {
  char path[4200];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  char *text = cJSON_PrintUnformatted(j);
  if (!text) return wisp_fail(WISP_ENOMEM, "out of memory");
  wisp_status st = wisp_write_file_atomic(path, text, strlen(text));
  free(text);
  return st;
}

wisp_status wisp_gguf_write_tokenizer(const wisp_gguf *g, const char *dir, int *written) {
  *written = 0;
  const wisp_gguf_kv *model = wisp_gguf_kv_find(g, "tokenizer.ggml.model");
  if (!model) return WISP_OK;
  if (model->type != WISP_GGUF_STRING || model->str.len != 4 || memcmp(model->str.s, "gpt2", 4))
    return wisp_fail(WISP_EUNSUPPORTED, "%s: tokenizer.ggml.model '%.*s' is not supported (wisp reads 'gpt2' byte-level BPE)",
                     g->label, model->type == WISP_GGUF_STRING ? (int)(model->str.len > 40 ? 40 : model->str.len) : 1,
                     model->type == WISP_GGUF_STRING ? model->str.s : "?");
  const wisp_gguf_kv *tok = wisp_gguf_kv_find(g, "tokenizer.ggml.tokens");
  const wisp_gguf_kv *mer = wisp_gguf_kv_find(g, "tokenizer.ggml.merges");
  const wisp_gguf_kv *typ = wisp_gguf_kv_find(g, "tokenizer.ggml.token_type");
  if (!tok || tok->type != WISP_GGUF_ARRAY || tok->arr_type != WISP_GGUF_STRING)
    return wisp_fail(WISP_EFORMAT, "%s: tokenizer.ggml.tokens must be an array of strings", g->label);
  if (!mer || mer->type != WISP_GGUF_ARRAY || mer->arr_type != WISP_GGUF_STRING)
    return wisp_fail(WISP_EFORMAT, "%s: tokenizer.ggml.merges must be an array of strings", g->label);
  if (typ && (typ->type != WISP_GGUF_ARRAY || !typ->arr || typ->n != tok->n))
    return wisp_fail(WISP_EFORMAT, "%s: tokenizer.ggml.token_type must be an integer array as long as the tokens", g->label);
  char pre[64] = "default";
  const wisp_gguf_kv *p = wisp_gguf_kv_find(g, "tokenizer.ggml.pre");
  if (p && p->type == WISP_GGUF_STRING) snprintf(pre, sizeof pre, "%.*s", (int)(p->str.len < 63 ? p->str.len : 63), p->str.s);
  const char *rx = pre_regex(pre);
  if (!rx && strcmp(pre, "default") && strcmp(pre, "gpt2") && strcmp(pre, "gpt-2"))
    return wisp_fail(WISP_EUNSUPPORTED, "%s: tokenizer.ggml.pre '%s' is not supported (llama-bpe, lfm2, qwen2, default)",
                     g->label, pre);
  cJSON *root = cJSON_CreateObject(), *m = cJSON_AddObjectToObject(root, "model");
  cJSON_AddStringToObject(m, "type", "BPE");
  cJSON *vocab = cJSON_AddObjectToObject(m, "vocab"), *merges = cJSON_AddArrayToObject(m, "merges");
  cJSON *added = cJSON_AddArrayToObject(root, "added_tokens");
  for (uint64_t i = 0; i < tok->n; i++) {
    int64_t t = typ ? wisp_gguf_arr_int(typ, i) : 1;
    cJSON *s = str_json(tok->strs[i]);
    if (!s) continue;
    if (t == 3 || t == 4) { /* control / user-defined: added tokens */
      cJSON *a = cJSON_CreateObject();
      cJSON_AddNumberToObject(a, "id", (double)i);
      cJSON_AddItemToObject(a, "content", s);
      cJSON_AddBoolToObject(a, "special", t == 3);
      cJSON_AddItemToArray(added, a);
    }
    if (t != 3 && t != 4 && t != 5 && !cJSON_GetObjectItemCaseSensitive(vocab, s->valuestring))
      cJSON_AddNumberToObject(vocab, s->valuestring, (double)i);
    if (t != 3 && t != 4) cJSON_Delete(s);
  }
  for (uint64_t i = 0; i < mer->n; i++) cJSON_AddItemToArray(merges, str_json(mer->strs[i]));
  cJSON *pt = cJSON_AddObjectToObject(root, "pre_tokenizer");
  if (rx) {
    cJSON_AddStringToObject(pt, "type", "Sequence");
    cJSON *list = cJSON_AddArrayToObject(pt, "pretokenizers");
    cJSON *sp = cJSON_CreateObject();
    cJSON_AddStringToObject(sp, "type", "Split");
    cJSON_AddStringToObject(cJSON_AddObjectToObject(sp, "pattern"), "Regex", rx);
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
  wisp_status st = write_json(dir, "tokenizer.json", root);
  cJSON_Delete(root);
  if (st) return st;
  /* bos/eos: tokenizer_config.json names them, generation_config.json stops on eos. */
  int64_t bos = -1, eos = -1;
  wisp_gguf_get_int(g, "tokenizer.ggml.bos_token_id", &bos);
  wisp_gguf_get_int(g, "tokenizer.ggml.eos_token_id", &eos);
  cJSON *tc = cJSON_CreateObject(), *gc = cJSON_CreateObject();
  if (bos >= 0 && (uint64_t)bos < tok->n) cJSON_AddItemToObject(tc, "bos_token", str_json(tok->strs[bos]));
  if (eos >= 0 && (uint64_t)eos < tok->n) {
    cJSON_AddItemToObject(tc, "eos_token", str_json(tok->strs[eos]));
    cJSON_AddNumberToObject(gc, "eos_token_id", (double)eos);
  }
  st = write_json(dir, "tokenizer_config.json", tc);
  if (!st) st = write_json(dir, "generation_config.json", gc);
  cJSON_Delete(tc);
  cJSON_Delete(gc);
  if (!st) *written = 1;
  return st;
}
