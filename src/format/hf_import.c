/* Importing a Hugging Face checkpoint (or a GGUF file) as a wisp artifact
 * (hf_import.h; `wisp convert` is the CLI over it): LFM2, Qwen3, Llama,
 * Qwen2 / Qwen 2.5 or Qwen 3.5 (text), from config.json + safetensors.
 *
 * Order of work: parse and check config.json, open the safetensors, plan
 * every section from the architecture's name table (format/gguf_arch.h,
 * shared with GGUF import and export) and check every tensor's shape
 * against the config (and that no tensor is left unused), then write
 * through the atomic writer. Every failure after the writer starts aborts
 * it, so DIR is either complete or untouched. docs/convert.md lists how HF
 * tensors map to sections. */
#include "format/hf_import.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cJSON.h>

#include "format/artifact.h"
#include "format/gguf.h"
#include "format/gguf_arch.h"
#include "format/gguf_import.h"
#include "format/layout.h"
#include "format/safetensors.h"
#include "format/tensor.h"
#include "format/writer.h"
#include "tokenizer/tokenizer.h"
#include "util/err.h"
#include "util/file.h"

/* maxPositions is the model's own context (max_position_embeddings): the
 * artifact stores rope.freq, and a session builds the rope tables and sizes
 * its KV caches for the context it is opened with (-c), not for this. */
#define CONVERT_PLAN_POSITIONS 1024

/* ARCH_QWEN3: dense Qwen3 (and Llama-shaped models with per-head q/k norm),
 * stored as an all-attention LFM2 graph: the same math (docs/convert.md). */
enum { ARCH_LFM2 = 0, ARCH_QWEN3_5 = 1, ARCH_QWEN3 = 2, ARCH_QWEN2 = 3, ARCH_GEMMA3 = 4 };
/* ARCH_GEMMA3: Gemma3ForCausalLM (the text model), architecture gemma3. */
/* ARCH_QWEN2: Qwen2ForCausalLM (Qwen 2 / 2.5: q/k/v biases, no q/k norm), architecture qwen2. */
/* ARCH_QWEN3 with llama = 1: LlamaForCausalLM (no q/k norm, optional llama3 rope scaling). */

typedef struct {
  int arch;
  int hidden, n_layers, heads, kv_heads, head_dim, ffn, vocab, conv_l, hf_max_pos, max_pos, tied;
  int *layer_types;
  double rope_theta, norm_eps;
  /* Qwen 3.5 */
  int lin_k_heads, lin_v_heads, lin_k_dim, lin_v_dim, rotary_dim;
  /* Llama: no q/k norm; llama3 rope scaling (factor, low/high freq factors, original context) */
  int llama, llama3, rs_orig;
  double rs_factor, rs_low, rs_high;
  /* GGUF llama: rope_freqs.weight (head_dim/2 divisors of the frequencies), or NULL */
  float *rope_factors;
  char source[64]; /* GGUF imports: "gguf ARCH" */
  /* Gemma 3: the sliding window, which layers are global (malloc'd, 1 each),
   * the sliding layers' rope base, the global layers' linear rope factor (1:
   * none) and query_pre_attn_scalar */
  int sliding_window;
  unsigned char *global;
  double rope_local_theta, rope_linear, attn_scalar;
} hf_config;

/* quantization modes */
enum { QUANT_F32 = 0, QUANT_Q4 = 1, QUANT_Q4K = 2, QUANT_F16 = 3, QUANT_Q8_0 = 4 };

/* ---- config.json ---- */

static wisp_status cfg_int(const cJSON *root, const char *path, const char *key, int required, int def, int min,
                           int *out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
  if (!v || cJSON_IsNull(v)) {
    if (required) return wisp_fail(WISP_EFORMAT, "%s: missing field '%s'", path, key);
    *out = def;
    return WISP_OK;
  }
  if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < min ||
      v->valuedouble > 1e9)
    return wisp_fail(WISP_EFORMAT, "%s: field '%s' must be an integer >= %d", path, key, min);
  *out = (int)v->valuedouble;
  return WISP_OK;
}

static wisp_status cfg_bool(const cJSON *root, const char *path, const char *key, int def, int *out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
  if (!v || cJSON_IsNull(v)) { *out = def; return WISP_OK; }
  if (!cJSON_IsBool(v)) return wisp_fail(WISP_EFORMAT, "%s: field '%s' must be true or false", path, key);
  *out = cJSON_IsTrue(v);
  return WISP_OK;
}

static int json_has_string(const cJSON *arr, const char *s) {
  const cJSON *e;
  cJSON_ArrayForEach(e, arr) if (cJSON_IsString(e) && !strcmp(e->valuestring, s)) return 1;
  return 0;
}

static wisp_status parse_rope_theta(const cJSON *root, const char *path, double *out) {
  *out = 1000000.0; /* Lfm2Config's default */
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "rope_theta");
  const char *where = "rope_theta";
  if (!v || cJSON_IsNull(v)) {
    v = cJSON_GetObjectItemCaseSensitive(root, "theta"); /* the original LFM2 key */
    where = "theta";
  }
  const char *nested[2] = {"rope_parameters", "rope_scaling"};
  for (int i = 0; i < 2 && (!v || cJSON_IsNull(v)); i++) {
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(root, nested[i]);
    if (!cJSON_IsObject(o)) continue;
    /* Newer transformers may key rope parameters by layer type. */
    const cJSON *per_type = cJSON_GetObjectItemCaseSensitive(o, "full_attention");
    if (cJSON_IsObject(per_type)) o = per_type;
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(o, "rope_type");
    if (!type) type = cJSON_GetObjectItemCaseSensitive(o, "type");
    if (cJSON_IsString(type) && strcmp(type->valuestring, "default"))
      return wisp_fail(WISP_EUNSUPPORTED, "%s: %s.rope_type '%s' is not supported (only 'default' rope)", path,
                       nested[i], type->valuestring);
    v = cJSON_GetObjectItemCaseSensitive(o, "rope_theta");
    where = i == 0 ? "rope_parameters.rope_theta" : "rope_scaling.rope_theta";
  }
  if (!v || cJSON_IsNull(v)) return WISP_OK;
  if (!cJSON_IsNumber(v) || !(v->valuedouble > 0))
    return wisp_fail(WISP_EFORMAT, "%s: field '%s' must be a positive number", path, where);
  *out = v->valuedouble;
  return WISP_OK;
}

/* Whether config.json names the architecture class `cls` or the model_type `type`. */
static int config_names(const cJSON *root, const char *cls, const char *type) {
  const cJSON *archs = cJSON_GetObjectItemCaseSensitive(root, "architectures");
  const cJSON *mt = cJSON_GetObjectItemCaseSensitive(root, "model_type");
  return (cJSON_IsArray(archs) && json_has_string(archs, cls)) || (cJSON_IsString(mt) && !strcmp(mt->valuestring, type));
}

static int is_qwen_config(const cJSON *root) {
  return config_names(root, "Qwen3_5ForCausalLM", "qwen3_5") ||
         config_names(root, "Qwen3_5ForConditionalGeneration", "qwen3_5_text");
}

/* Qwen3_5TextConfig (optionally nested as text_config of a Qwen3_5Config). */
static wisp_status parse_qwen_config(const cJSON *top, const char *path, hf_config *c) {
  const cJSON *root = top;
  const cJSON *tc = cJSON_GetObjectItemCaseSensitive(top, "text_config");
  if (cJSON_IsObject(tc)) root = tc;
  c->arch = ARCH_QWEN3_5;
  wisp_status st;
  int tie_top, tie;
  if ((st = cfg_int(root, path, "hidden_size", 1, 0, 1, &c->hidden)) ||
      (st = cfg_int(root, path, "num_hidden_layers", 1, 0, 1, &c->n_layers)) ||
      (st = cfg_int(root, path, "num_attention_heads", 1, 0, 1, &c->heads)) ||
      (st = cfg_int(root, path, "num_key_value_heads", 0, c->heads, 1, &c->kv_heads)) ||
      (st = cfg_int(root, path, "head_dim", 0, 256, 2, &c->head_dim)) ||
      (st = cfg_int(root, path, "vocab_size", 1, 0, 1, &c->vocab)) ||
      (st = cfg_int(root, path, "intermediate_size", 1, 0, 1, &c->ffn)) ||
      (st = cfg_int(root, path, "linear_conv_kernel_dim", 0, 4, 1, &c->conv_l)) ||
      (st = cfg_int(root, path, "linear_num_key_heads", 0, 16, 1, &c->lin_k_heads)) ||
      (st = cfg_int(root, path, "linear_num_value_heads", 0, 32, 1, &c->lin_v_heads)) ||
      (st = cfg_int(root, path, "linear_key_head_dim", 0, 128, 1, &c->lin_k_dim)) ||
      (st = cfg_int(root, path, "linear_value_head_dim", 0, 128, 1, &c->lin_v_dim)) ||
      (st = cfg_int(root, path, "max_position_embeddings", 0, 32768, 1, &c->hf_max_pos)) ||
      (st = cfg_bool(top, path, "tie_word_embeddings", 0, &tie_top)) ||
      (st = cfg_bool(root, path, "tie_word_embeddings", tie_top, &tie)))
    return st;
  c->tied = tie;
  c->norm_eps = 1e-6;
  const cJSON *eps = cJSON_GetObjectItemCaseSensitive(root, "rms_norm_eps");
  if (eps && !cJSON_IsNull(eps)) {
    if (!cJSON_IsNumber(eps) || !(eps->valuedouble > 0) || eps->valuedouble > 1)
      return wisp_fail(WISP_EFORMAT, "%s: field 'rms_norm_eps' must be a number in (0, 1]", path);
    c->norm_eps = eps->valuedouble;
  }
  const cJSON *act = cJSON_GetObjectItemCaseSensitive(root, "hidden_act");
  if (cJSON_IsString(act) && strcmp(act->valuestring, "silu"))
    return wisp_fail(WISP_EUNSUPPORTED, "%s: hidden_act '%s' is not supported (Qwen 3.5 uses silu)", path, act->valuestring);
  const cJSON *bias = cJSON_GetObjectItemCaseSensitive(root, "attention_bias");
  if (cJSON_IsTrue(bias)) return wisp_fail(WISP_EUNSUPPORTED, "%s: attention_bias is true; wisp supports Qwen 3.5 without biases", path);
  /* rope: rope_parameters.{rope_theta, partial_rotary_factor}, else top-level keys */
  if ((st = parse_rope_theta(root, path, &c->rope_theta))) return st;
  if (!cJSON_GetObjectItemCaseSensitive(root, "rope_theta") && !cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(root, "rope_parameters")) &&
      !cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(root, "rope_scaling")))
    c->rope_theta = 10000.0; /* PreTrainedConfig's default rope_theta */
  double prf = 0.25; /* Qwen3_5TextConfig's default */
  const cJSON *rp = cJSON_GetObjectItemCaseSensitive(root, "rope_parameters");
  const cJSON *f = cJSON_IsObject(rp) ? cJSON_GetObjectItemCaseSensitive(rp, "partial_rotary_factor") : NULL;
  if (!f) f = cJSON_GetObjectItemCaseSensitive(root, "partial_rotary_factor");
  if (f && !cJSON_IsNull(f)) {
    if (!cJSON_IsNumber(f) || !(f->valuedouble > 0) || f->valuedouble > 1)
      return wisp_fail(WISP_EFORMAT, "%s: field 'partial_rotary_factor' must be a number in (0, 1]", path);
    prf = f->valuedouble;
  }
  c->rotary_dim = (int)(c->head_dim * prf); /* int(head_dim * factor), as transformers */
  if (c->rotary_dim < 2 || c->rotary_dim % 2)
    return wisp_fail(WISP_EUNSUPPORTED, "%s: rotary dims %d (head_dim %d * partial_rotary_factor %g) must be even and >= 2",
                     path, c->rotary_dim, c->head_dim, prf);
  c->layer_types = calloc((size_t)c->n_layers, sizeof(int));
  if (!c->layer_types) return wisp_fail(WISP_ENOMEM, "out of memory");
  const cJSON *lt = cJSON_GetObjectItemCaseSensitive(root, "layer_types");
  if (cJSON_IsArray(lt)) {
    if (cJSON_GetArraySize(lt) != c->n_layers)
      return wisp_fail(WISP_EFORMAT, "%s: layer_types has %d entries, num_hidden_layers is %d", path,
                       cJSON_GetArraySize(lt), c->n_layers);
    int i = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, lt) {
      if (cJSON_IsString(e) && !strcmp(e->valuestring, "linear_attention")) c->layer_types[i] = WISP_LAYER_LINEAR;
      else if (cJSON_IsString(e) && !strcmp(e->valuestring, "full_attention")) c->layer_types[i] = WISP_LAYER_ATTENTION;
      else
        return wisp_fail(WISP_EUNSUPPORTED, "%s: layer_types[%d] is '%s' (expected 'linear_attention' or 'full_attention')",
                         path, i, cJSON_IsString(e) ? e->valuestring : "?");
      i++;
    }
  } else {
    int interval = 4;
    if ((st = cfg_int(root, path, "full_attention_interval", 0, 4, 1, &interval))) return st;
    for (int i = 0; i < c->n_layers; i++)
      c->layer_types[i] = (i + 1) % interval ? WISP_LAYER_LINEAR : WISP_LAYER_ATTENTION;
  }
  if (c->heads % c->kv_heads)
    return wisp_fail(WISP_EUNSUPPORTED, "%s: num_attention_heads %d is not a multiple of num_key_value_heads %d", path,
                     c->heads, c->kv_heads);
  if (c->lin_v_heads % c->lin_k_heads)
    return wisp_fail(WISP_EUNSUPPORTED, "%s: linear_num_value_heads %d is not a multiple of linear_num_key_heads %d",
                     path, c->lin_v_heads, c->lin_k_heads);
  if (c->hidden % WISP_Q4_BLOCK || c->ffn % WISP_Q4_BLOCK || (c->lin_v_heads * c->lin_v_dim) % WISP_Q4_BLOCK ||
      (c->heads * c->head_dim) % WISP_Q4_BLOCK)
    return wisp_fail(WISP_EUNSUPPORTED, "%s: hidden %d, intermediate %d, linear value width %d and attention width %d "
                     "must be multiples of %d", path, c->hidden, c->ffn, c->lin_v_heads * c->lin_v_dim,
                     c->heads * c->head_dim, WISP_Q4_BLOCK);
  c->max_pos = c->hf_max_pos;
  return WISP_OK;
}

static int is_llama_config(const cJSON *root) { return config_names(root, "LlamaForCausalLM", "llama"); }

static wisp_status num_field(const cJSON *o, const char *path, const char *key, double *out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  if (!cJSON_IsNumber(v) || !(v->valuedouble > 0))
    return wisp_fail(WISP_EFORMAT, "%s: rope scaling field '%s' must be a positive number", path, key);
  *out = v->valuedouble;
  return WISP_OK;
}

/* Llama rope: theta (top level or in rope_parameters / rope_scaling) and
 * rope_type default or llama3 (factor, low_freq_factor, high_freq_factor,
 * original_max_position_embeddings). */
static wisp_status parse_llama_rope(const cJSON *root, const char *path, hf_config *c) {
  c->rope_theta = 10000.0; /* LlamaConfig's default */
  const char *nested[2] = {"rope_parameters", "rope_scaling"};
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "rope_theta");
  for (int i = 0; i < 2; i++) {
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(root, nested[i]);
    if (!cJSON_IsObject(o)) continue;
    if (!cJSON_IsNumber(v)) v = cJSON_GetObjectItemCaseSensitive(o, "rope_theta");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(o, "rope_type");
    if (!type) type = cJSON_GetObjectItemCaseSensitive(o, "type");
    if (!cJSON_IsString(type) || !strcmp(type->valuestring, "default")) continue;
    if (strcmp(type->valuestring, "llama3"))
      return wisp_fail(WISP_EUNSUPPORTED, "%s: %s.rope_type '%s' is not supported (default and llama3)", path, nested[i],
                       type->valuestring);
    double orig = 0;
    wisp_status st;
    if ((st = num_field(o, path, "factor", &c->rs_factor)) || (st = num_field(o, path, "low_freq_factor", &c->rs_low)) ||
        (st = num_field(o, path, "high_freq_factor", &c->rs_high)) ||
        (st = num_field(o, path, "original_max_position_embeddings", &orig)))
      return st;
    if (c->rs_high <= c->rs_low)
      return wisp_fail(WISP_EFORMAT, "%s: high_freq_factor must be larger than low_freq_factor", path);
    c->rs_orig = (int)orig;
    c->llama3 = 1;
  }
  if (v && !cJSON_IsNull(v)) {
    if (!cJSON_IsNumber(v) || !(v->valuedouble > 0))
      return wisp_fail(WISP_EFORMAT, "%s: field 'rope_theta' must be a positive number", path);
    c->rope_theta = v->valuedouble;
  }
  return WISP_OK;
}

static int is_gemma3_config(const cJSON *root) { return config_names(root, "Gemma3ForCausalLM", "gemma3_text"); }

/* A positive number at key (or nested.key), or def when absent. */
static wisp_status cfg_pos(const cJSON *o, const char *path, const char *key, double def, double *out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  if (!v || cJSON_IsNull(v)) { *out = def; return WISP_OK; }
  if (!cJSON_IsNumber(v) || !(v->valuedouble > 0))
    return wisp_fail(WISP_EFORMAT, "%s: field '%s' must be a positive number", path, key);
  *out = v->valuedouble;
  return WISP_OK;
}

/* Gemma 3 rope: rope_theta (global layers, default 1e6) and
 * rope_local_base_freq (sliding layers, default 1e4) at the top level, or
 * newer transformers' rope_parameters.{full_attention, sliding_attention}.
 * rope_theta; the global layers' scaling 'linear' (factor) or none. */
static wisp_status parse_gemma3_rope(const cJSON *root, const char *path, hf_config *c) {
  wisp_status st;
  if ((st = cfg_pos(root, path, "rope_theta", 1000000.0, &c->rope_theta)) ||
      (st = cfg_pos(root, path, "rope_local_base_freq", 10000.0, &c->rope_local_theta)))
    return st;
  c->rope_linear = 1.0;
  const cJSON *rp = cJSON_GetObjectItemCaseSensitive(root, "rope_parameters");
  const cJSON *full = cJSON_GetObjectItemCaseSensitive(rp, "full_attention");
  const cJSON *slide = cJSON_GetObjectItemCaseSensitive(rp, "sliding_attention");
  if (cJSON_IsObject(full) && (st = cfg_pos(full, path, "rope_theta", c->rope_theta, &c->rope_theta))) return st;
  if (cJSON_IsObject(slide) && (st = cfg_pos(slide, path, "rope_theta", c->rope_local_theta, &c->rope_local_theta)))
    return st;
  const cJSON *scalings[3] = {cJSON_GetObjectItemCaseSensitive(root, "rope_scaling"), full, slide};
  for (int i = 0; i < 3; i++) {
    const cJSON *o = scalings[i];
    if (!cJSON_IsObject(o)) continue;
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(o, "rope_type");
    if (!type) type = cJSON_GetObjectItemCaseSensitive(o, "type");
    if (!cJSON_IsString(type) || !strcmp(type->valuestring, "default")) continue;
    if (strcmp(type->valuestring, "linear") || i == 2)
      return wisp_fail(WISP_EUNSUPPORTED, "%s: rope_type '%s'%s is not supported (Gemma 3: default, or linear on the "
                       "global layers)", path, type->valuestring, i == 2 ? " on the sliding layers" : "");
    if ((st = cfg_pos(o, path, "factor", 1.0, &c->rope_linear))) return st;
  }
  return WISP_OK;
}

/* Gemma3TextConfig (Gemma3ForCausalLM: the 270M and 1B checkpoints). */
static wisp_status parse_gemma3_config(const cJSON *root, const char *path, hf_config *c) {
  c->arch = ARCH_GEMMA3;
  wisp_status st;
  int tie, pattern;
  double qpas;
  if ((st = cfg_int(root, path, "hidden_size", 1, 0, 1, &c->hidden)) ||
      (st = cfg_int(root, path, "num_hidden_layers", 1, 0, 1, &c->n_layers)) ||
      (st = cfg_int(root, path, "num_attention_heads", 0, 8, 1, &c->heads)) ||
      (st = cfg_int(root, path, "num_key_value_heads", 0, 4, 1, &c->kv_heads)) ||
      (st = cfg_int(root, path, "head_dim", 0, 256, 2, &c->head_dim)) ||
      (st = cfg_int(root, path, "vocab_size", 0, 262208, 1, &c->vocab)) ||
      (st = cfg_int(root, path, "intermediate_size", 1, 0, 1, &c->ffn)) ||
      (st = cfg_int(root, path, "max_position_embeddings", 0, 131072, 1, &c->hf_max_pos)) ||
      (st = cfg_int(root, path, "sliding_window", 0, 4096, 1, &c->sliding_window)) ||
      (st = cfg_int(root, path, "sliding_window_pattern", 0, 6, 1, &pattern)) ||
      (st = cfg_bool(root, path, "tie_word_embeddings", 1, &tie)) ||
      (st = cfg_pos(root, path, "query_pre_attn_scalar", 256.0, &qpas)) ||
      (st = parse_gemma3_rope(root, path, c)))
    return st;
  c->tied = tie;
  c->attn_scalar = qpas;
  c->conv_l = 3; /* unused: no conv layers */
  c->norm_eps = 1e-6;
  const cJSON *eps = cJSON_GetObjectItemCaseSensitive(root, "rms_norm_eps");
  if (eps && !cJSON_IsNull(eps)) {
    if (!cJSON_IsNumber(eps) || !(eps->valuedouble > 0) || eps->valuedouble > 1)
      return wisp_fail(WISP_EFORMAT, "%s: field 'rms_norm_eps' must be a number in (0, 1]", path);
    c->norm_eps = eps->valuedouble;
  }
  const char *act_keys[2] = {"hidden_activation", "hidden_act"};
  for (int i = 0; i < 2; i++) {
    const cJSON *act = cJSON_GetObjectItemCaseSensitive(root, act_keys[i]);
    if (cJSON_IsString(act) && strcmp(act->valuestring, "gelu_pytorch_tanh"))
      return wisp_fail(WISP_EUNSUPPORTED, "%s: %s '%s' is not supported (Gemma 3 uses gelu_pytorch_tanh)", path,
                       act_keys[i], act->valuestring);
  }
  const char *off[4] = {"final_logit_softcapping", "attn_logit_softcapping", "attention_bias",
                        "use_bidirectional_attention"};
  for (int i = 0; i < 4; i++) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, off[i]);
    if (v && !cJSON_IsNull(v) && !cJSON_IsFalse(v))
      return wisp_fail(WISP_EUNSUPPORTED, "%s: %s is set; wisp supports Gemma 3 without it", path, off[i]);
  }
  c->layer_types = calloc((size_t)c->n_layers, sizeof(int));
  c->global = calloc((size_t)c->n_layers, 1);
  if (!c->layer_types || !c->global) return wisp_fail(WISP_ENOMEM, "out of memory");
  const cJSON *lt = cJSON_GetObjectItemCaseSensitive(root, "layer_types");
  if (cJSON_IsArray(lt) && cJSON_GetArraySize(lt) != c->n_layers)
    return wisp_fail(WISP_EFORMAT, "%s: layer_types has %d entries, num_hidden_layers is %d", path,
                     cJSON_GetArraySize(lt), c->n_layers);
  for (int i = 0; i < c->n_layers; i++) {
    c->layer_types[i] = WISP_LAYER_ATTENTION;
    if (!cJSON_IsArray(lt)) { /* Gemma3TextConfig's rule without layer_types */
      c->global[i] = (i + 1) % pattern == 0;
      continue;
    }
    const cJSON *e = cJSON_GetArrayItem(lt, i);
    const char *k = cJSON_IsString(e) ? e->valuestring : "?";
    if (strcmp(k, "sliding_attention") && strcmp(k, "full_attention"))
      return wisp_fail(WISP_EUNSUPPORTED, "%s: layer_types[%d] is '%s' (expected 'sliding_attention' or "
                       "'full_attention')", path, i, k);
    c->global[i] = !strcmp(k, "full_attention");
  }
  if (c->heads % c->kv_heads || c->head_dim % 2)
    return wisp_fail(WISP_EUNSUPPORTED, "%s: heads %d / kv heads %d / head dim %d: wisp needs heads %% kv_heads == 0 "
                     "and an even head dim", path, c->heads, c->kv_heads, c->head_dim);
  if (c->hidden % WISP_Q4_BLOCK || c->ffn % WISP_Q4_BLOCK || (c->heads * c->head_dim) % WISP_Q4_BLOCK)
    return wisp_fail(WISP_EUNSUPPORTED, "%s: hidden %d, intermediate %d and attention width %d must be multiples of %d",
                     path, c->hidden, c->ffn, c->heads * c->head_dim, WISP_Q4_BLOCK);
  c->max_pos = c->hf_max_pos;
  return WISP_OK;
}

static int is_qwen2_config(const cJSON *root) { return config_names(root, "Qwen2ForCausalLM", "qwen2"); }

static int is_qwen3_dense_config(const cJSON *root) { return config_names(root, "Qwen3ForCausalLM", "qwen3"); }

/* Qwen3Config (dense): every layer full attention with q_norm/k_norm;
 * with llama = 1 LlamaConfig (no q/k norm, llama3 rope scaling allowed). */
static wisp_status parse_qwen3_config(const cJSON *root, const char *path, hf_config *c, int llama) {
  c->arch = ARCH_QWEN3;
  c->llama = llama;
  wisp_status st;
  int tie, sliding;
  if ((st = cfg_int(root, path, "hidden_size", 1, 0, 1, &c->hidden)) ||
      (st = cfg_int(root, path, "num_hidden_layers", 1, 0, 1, &c->n_layers)) ||
      (st = cfg_int(root, path, "num_attention_heads", 1, 0, 1, &c->heads)) ||
      (st = cfg_int(root, path, "num_key_value_heads", 0, c->heads, 1, &c->kv_heads)) ||
      (st = cfg_int(root, path, "vocab_size", 1, 0, 1, &c->vocab)) ||
      (st = cfg_int(root, path, "intermediate_size", 1, 0, 1, &c->ffn)) ||
      (st = cfg_int(root, path, "max_position_embeddings", 0, 32768, 1, &c->hf_max_pos)) ||
      (st = cfg_bool(root, path, "tie_word_embeddings", 0, &tie)) ||
      (st = cfg_bool(root, path, "use_sliding_window", 0, &sliding)))
    return st;
  if (c->heads == 0 || c->hidden % c->heads) c->head_dim = 0;
  else c->head_dim = c->hidden / c->heads;
  if ((st = cfg_int(root, path, "head_dim", 0, c->head_dim, 2, &c->head_dim))) return st;
  c->tied = tie;
  c->conv_l = 3; /* unused: no conv layers */
  if (sliding) return wisp_fail(WISP_EUNSUPPORTED, "%s: use_sliding_window is true; wisp supports full attention only", path);
  if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "attention_bias")) ||
      cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "mlp_bias")))
    return wisp_fail(WISP_EUNSUPPORTED, "%s: attention_bias/mlp_bias is true; wisp supports %s without biases", path,
                     llama ? "Llama" : "Qwen3");
  const cJSON *act = cJSON_GetObjectItemCaseSensitive(root, "hidden_act");
  if (cJSON_IsString(act) && strcmp(act->valuestring, "silu"))
    return wisp_fail(WISP_EUNSUPPORTED, "%s: hidden_act '%s' is not supported (silu only)", path, act->valuestring);
  c->norm_eps = 1e-6;
  const cJSON *eps = cJSON_GetObjectItemCaseSensitive(root, "rms_norm_eps");
  if (eps && !cJSON_IsNull(eps)) {
    if (!cJSON_IsNumber(eps) || !(eps->valuedouble > 0) || eps->valuedouble > 1)
      return wisp_fail(WISP_EFORMAT, "%s: field 'rms_norm_eps' must be a number in (0, 1]", path);
    c->norm_eps = eps->valuedouble;
  }
  if (llama) {
    if ((st = parse_llama_rope(root, path, c))) return st;
  } else {
    if ((st = parse_rope_theta(root, path, &c->rope_theta))) return st;
    if (!cJSON_GetObjectItemCaseSensitive(root, "rope_theta") && !cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(root, "rope_parameters")) &&
        !cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(root, "rope_scaling")))
      c->rope_theta = 10000.0; /* Qwen3Config's default */
  }
  c->layer_types = calloc((size_t)c->n_layers, sizeof(int));
  if (!c->layer_types) return wisp_fail(WISP_ENOMEM, "out of memory");
  for (int i = 0; i < c->n_layers; i++) c->layer_types[i] = WISP_LAYER_ATTENTION;
  if (c->heads % c->kv_heads || c->head_dim % 2)
    return wisp_fail(WISP_EUNSUPPORTED, "%s: heads %d / kv heads %d / head dim %d: wisp needs heads %% kv_heads == 0 "
                     "and an even head dim", path, c->heads, c->kv_heads, c->head_dim);
  if (c->hidden % WISP_Q4_BLOCK || c->ffn % WISP_Q4_BLOCK || (c->heads * c->head_dim) % WISP_Q4_BLOCK)
    return wisp_fail(WISP_EUNSUPPORTED, "%s: hidden %d, intermediate %d and attention width %d must be multiples of %d",
                     path, c->hidden, c->ffn, c->heads * c->head_dim, WISP_Q4_BLOCK);
  c->max_pos = c->hf_max_pos;
  return WISP_OK;
}

static wisp_status parse_config(const char *hf_dir, hf_config *c) {
  char path[4096];
  snprintf(path, sizeof path, "%s/config.json", hf_dir);
  char *text = NULL;
  wisp_status st = wisp_read_file(path, &text, NULL);
  if (st) return st;
  cJSON *root = cJSON_Parse(text);
  free(text);
  if (!cJSON_IsObject(root)) {
    cJSON_Delete(root);
    return wisp_fail(WISP_EFORMAT, "%s: malformed JSON", path);
  }
  const cJSON *archs = cJSON_GetObjectItemCaseSensitive(root, "architectures");
  const cJSON *mt = cJSON_GetObjectItemCaseSensitive(root, "model_type");
  if (is_qwen_config(root)) {
    st = parse_qwen_config(root, path, c);
    goto done;
  }
  if (is_gemma3_config(root)) {
    st = parse_gemma3_config(root, path, c);
    goto done;
  }
  if (is_qwen2_config(root)) { /* Qwen2Config: Qwen3Config's fields, biases instead of q/k norm */
    st = parse_qwen3_config(root, path, c, 0);
    c->arch = ARCH_QWEN2;
    goto done;
  }
  if (is_qwen3_dense_config(root) || is_llama_config(root)) {
    st = parse_qwen3_config(root, path, c, is_llama_config(root));
    goto done;
  }
  if (cJSON_IsArray(archs) && cJSON_GetArraySize(archs) > 0 && !json_has_string(archs, "Lfm2ForCausalLM")) {
    const cJSON *first = cJSON_GetArrayItem(archs, 0);
    st = wisp_fail(WISP_EUNSUPPORTED, "%s: architecture '%s' is not supported (convert handles Lfm2ForCausalLM, LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, Qwen3_5ForCausalLM and Gemma3ForCausalLM)",
                   path, cJSON_IsString(first) ? first->valuestring : "?");
    goto done;
  }
  if (cJSON_IsString(mt) ? strcmp(mt->valuestring, "lfm2") != 0 : !cJSON_IsArray(archs)) {
    st = wisp_fail(WISP_EUNSUPPORTED, "%s: model_type '%s' is not supported (convert handles model_type 'lfm2' only)",
                   path, cJSON_IsString(mt) ? mt->valuestring : "(missing)");
    goto done;
  }
  int intermediate, auto_adjust, multiple_of, conv_bias, tie_a, tie_b;
  if ((st = cfg_int(root, path, "hidden_size", 1, 0, 1, &c->hidden)) ||
      (st = cfg_int(root, path, "num_hidden_layers", 1, 0, 1, &c->n_layers)) ||
      (st = cfg_int(root, path, "num_attention_heads", 1, 0, 1, &c->heads)) ||
      (st = cfg_int(root, path, "num_key_value_heads", 0, c->heads, 1, &c->kv_heads)) ||
      (st = cfg_int(root, path, "vocab_size", 1, 0, 1, &c->vocab)) ||
      (st = cfg_int(root, path, "conv_L_cache", 0, 3, 1, &c->conv_l)) ||
      (st = cfg_int(root, path, "intermediate_size", 1, 0, 1, &intermediate)) ||
      (st = cfg_int(root, path, "block_multiple_of", 0, 256, 1, &multiple_of)) ||
      (st = cfg_int(root, path, "max_position_embeddings", 0, 128000, 1, &c->hf_max_pos)) ||
      (st = cfg_bool(root, path, "block_auto_adjust_ff_dim", 1, &auto_adjust)) ||
      (st = cfg_bool(root, path, "conv_bias", 0, &conv_bias)) ||
      (st = cfg_bool(root, path, "tie_embedding", 1, &tie_a)) ||
      (st = cfg_bool(root, path, "tie_word_embeddings", tie_a, &tie_b)) ||
      (st = parse_rope_theta(root, path, &c->rope_theta)))
    goto done;
  c->tied = tie_b;
  if (conv_bias) {
    st = wisp_fail(WISP_EUNSUPPORTED, "%s: conv_bias is true; wisp supports LFM2 without conv biases only", path);
    goto done;
  }
  c->norm_eps = 1e-5;
  const cJSON *eps = cJSON_GetObjectItemCaseSensitive(root, "norm_eps");
  if (eps && !cJSON_IsNull(eps)) {
    if (!cJSON_IsNumber(eps) || !(eps->valuedouble > 0) || eps->valuedouble > 1) {
      st = wisp_fail(WISP_EFORMAT, "%s: field 'norm_eps' must be a number in (0, 1]", path);
      goto done;
    }
    c->norm_eps = eps->valuedouble;
  }
  /* Effective FFN width, as Lfm2MLP computes it. */
  c->ffn = intermediate;
  if (auto_adjust) {
    int ff = (int)(2.0 * intermediate / 3.0);
    const cJSON *mul = cJSON_GetObjectItemCaseSensitive(root, "block_ffn_dim_multiplier");
    /* As transformers' Lfm2MLP: the round-up to block_multiple_of happens
     * only together with the multiplier. */
    if (cJSON_IsNumber(mul)) {
      ff = (int)(mul->valuedouble * ff);
      ff = multiple_of * ((ff + multiple_of - 1) / multiple_of);
    } else if (mul && !cJSON_IsNull(mul)) {
      st = wisp_fail(WISP_EFORMAT, "%s: field 'block_ffn_dim_multiplier' must be a number or null", path);
      goto done;
    }
    c->ffn = ff;
  }
  /* Layer kinds: layer_types (newer configs) or full_attn_idxs. */
  c->layer_types = calloc((size_t)c->n_layers, sizeof(int));
  if (!c->layer_types) { st = wisp_fail(WISP_ENOMEM, "out of memory"); goto done; }
  const cJSON *lt = cJSON_GetObjectItemCaseSensitive(root, "layer_types");
  const cJSON *idx = cJSON_GetObjectItemCaseSensitive(root, "full_attn_idxs");
  if (cJSON_IsArray(lt)) {
    if (cJSON_GetArraySize(lt) != c->n_layers) {
      st = wisp_fail(WISP_EFORMAT, "%s: layer_types has %d entries, num_hidden_layers is %d", path,
                     cJSON_GetArraySize(lt), c->n_layers);
      goto done;
    }
    int i = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, lt) {
      if (cJSON_IsString(e) && !strcmp(e->valuestring, "conv")) c->layer_types[i] = WISP_LAYER_CONV;
      else if (cJSON_IsString(e) && (!strcmp(e->valuestring, "full_attention") || !strcmp(e->valuestring, "attention")))
        c->layer_types[i] = WISP_LAYER_ATTENTION;
      else {
        st = wisp_fail(WISP_EUNSUPPORTED, "%s: layer_types[%d] is '%s' (expected 'conv' or 'full_attention')", path, i,
                       cJSON_IsString(e) ? e->valuestring : "?");
        goto done;
      }
      i++;
    }
  } else if (cJSON_IsArray(idx)) {
    const cJSON *e;
    cJSON_ArrayForEach(e, idx) {
      if (!cJSON_IsNumber(e) || e->valuedouble != floor(e->valuedouble) || e->valuedouble < 0 ||
          e->valuedouble >= c->n_layers) {
        st = wisp_fail(WISP_EFORMAT, "%s: full_attn_idxs entries must be layer indices below %d", path, c->n_layers);
        goto done;
      }
      c->layer_types[(int)e->valuedouble] = WISP_LAYER_ATTENTION;
    }
  } else {
    st = wisp_fail(WISP_EFORMAT, "%s: needs 'layer_types' or 'full_attn_idxs' to know which layers attend", path);
    goto done;
  }
  /* Lfm2Attention: config.head_dim when present, else hidden / heads. */
  if ((st = cfg_int(root, path, "head_dim", 0, 0, 1, &c->head_dim))) goto done;
  if (c->head_dim == 0) {
    if (c->hidden % c->heads) {
      st = wisp_fail(WISP_EFORMAT, "%s: hidden_size %d is not a multiple of num_attention_heads %d", path, c->hidden,
                     c->heads);
      goto done;
    }
    c->head_dim = c->hidden / c->heads;
  }
  if (c->heads % c->kv_heads || c->head_dim % 2) {
    st = wisp_fail(WISP_EUNSUPPORTED, "%s: heads %d / kv heads %d / head dim %d: wisp needs heads %% kv_heads == 0 "
                   "and an even head dim", path, c->heads, c->kv_heads, c->head_dim);
    goto done;
  }
  if (c->hidden % WISP_Q4_BLOCK || c->ffn % WISP_Q4_BLOCK) {
    st = wisp_fail(WISP_EUNSUPPORTED, "%s: hidden %d and FFN width %d must be multiples of %d", path, c->hidden, c->ffn,
                   WISP_Q4_BLOCK);
    goto done;
  }
  c->max_pos = c->hf_max_pos;
done:
  cJSON_Delete(root);
  return st;
}

/* ---- planning: which HF tensors feed which section ---- */

/* JOB_VECTOR_P1: an f32 vector stored as 1 + w (Qwen3_5RMSNorm's weight). */
enum { JOB_MATRIX, JOB_MATRIX_Z, JOB_VECTOR, JOB_VECTOR_P1 };

typedef struct {
  char section[64]; /* matrix base name or vector section name */
  int kind, rows, cols;
  int transposed_copy; /* the layout has NAME.kquant/kscales (q4 down) */
  const wisp_st_tensor *src[4];
  int nsrc;
} job;

typedef struct {
  const wisp_safetensors *st;
  const char *hf_dir;
  char *used; /* per tensor in st */
  job *jobs;
  int n_jobs;
  const wisp_gguf_geom *geo;
  int tied;           /* no head of its own */
  const char *nested; /* the prefix standing for "model.", or NULL */
} planner;

/* Finds `name` and checks its shape; marks it used. */
static wisp_status want(planner *p, const char *name, int ndim, const int64_t *dims, const wisp_st_tensor **out) {
  const wisp_st_tensor *t = wisp_safetensors_find(p->st, name);
  char a[128], b[128];
  if (!t) return wisp_fail(WISP_EFORMAT, "%s: missing tensor '%s' (config expects shape %s)", p->hf_dir, name,
                           wisp_st_shape_str(dims, ndim, a, sizeof a));
  int ok = t->ndim == ndim;
  for (int i = 0; ok && i < ndim; i++) ok = t->shape[i] == dims[i];
  if (!ok)
    return wisp_fail(WISP_EFORMAT, "%s: tensor '%s' has shape %s, the config expects %s", wisp_safetensors_file_of(p->st, t),
                     name, wisp_st_shape_str(t->shape, t->ndim, a, sizeof a), wisp_st_shape_str(dims, ndim, b, sizeof b));
  if (t->dtype != WISP_ST_F32 && t->dtype != WISP_ST_F16 && t->dtype != WISP_ST_BF16)
    return wisp_fail(WISP_EUNSUPPORTED, "%s: tensor '%s' has dtype %s; only F32, F16 and BF16 are supported",
                     wisp_safetensors_file_of(p->st, t), name, wisp_st_dtype_name(t->dtype));
  p->used[t - p->st->tensors] = 1;
  *out = t;
  return WISP_OK;
}

static job *new_job(planner *p, const char *section, int kind, int rows, int cols) {
  job *j = &p->jobs[p->n_jobs++];
  memset(j, 0, sizeof *j);
  snprintf(j->section, sizeof j->section, "%s", section);
  j->kind = kind;
  j->rows = rows;
  j->cols = cols;
  return j;
}

/* The Hugging Face name of table name `fmt` (%d = layer), with the
 * checkpoint's prefix standing for "model." when it nests the text model. */
static void hf_name(const planner *p, const char *fmt, int layer, char *out, size_t cap) {
  char name[160];
  snprintf(name, sizeof name, fmt, layer);
  if (p->nested && !strncmp(name, "model.", 6)) snprintf(out, cap, "%s%s", p->nested, name + 6);
  else snprintf(out, cap, "%s", name);
}

/* The tensor of `rule` for layer `layer`, checked against `dims` (its older
 * name when only that one is in the checkpoint). */
static wisp_status want_rule(planner *p, const wisp_gguf_rule *rule, int layer, int ndim, const int64_t *dims,
                             const wisp_st_tensor **out) {
  char name[160];
  hf_name(p, rule->hf, layer, name, sizeof name);
  if (rule->hf_alt && !wisp_safetensors_find(p->st, name)) {
    char alt[160];
    hf_name(p, rule->hf_alt, layer, alt, sizeof alt);
    if (wisp_safetensors_find(p->st, alt)) snprintf(name, sizeof name, "%s", alt);
  }
  return want(p, name, ndim, dims, out);
}

/* One section from its run of table rows (layer -1: a global): a vector
 * (f32, 1 + w for GA_X_PLUS1), or a matrix whose parts are concatenated in
 * row order (the embedding and head with zero points under q4). */
static wisp_status plan_section(planner *p, const wisp_gguf_rule *const *run, int n, int layer) {
  const wisp_gguf_rule *r = run[0];
  char sec[64];
  snprintf(sec, sizeof sec, r->section, layer);
  if (r->part == GA_P_VEC || r->part == GA_P_TAPS) {
    if (n > 1) return wisp_fail(WISP_EINVAL, "section '%s': the name table gives a vector %d parts", sec, n);
    int rows, cols;
    wisp_gguf_vec_dims(p->geo, r, &rows, &cols);
    const int64_t dims[3] = {rows, 1, cols}; /* taps: HF's [channels, 1, L] */
    job *j = new_job(p, sec, r->xform & GA_X_PLUS1 ? JOB_VECTOR_P1 : JOB_VECTOR, 1, rows * cols);
    j->nsrc = 1;
    return want_rule(p, r, layer, r->part == GA_P_TAPS ? 3 : 1, dims, &j->src[0]);
  }
  int total, r0, rows, cols, at = 0;
  wisp_gguf_part_dims(p->geo, r->part, &total, &r0, &rows, &cols);
  job *j = new_job(p, sec, r->part == GA_P_VOCAB ? JOB_MATRIX_Z : JOB_MATRIX, total, cols);
  for (int i = 0; i < n; i++) {
    wisp_gguf_part_dims(p->geo, run[i]->part, &total, &r0, &rows, &cols);
    if (r0 != at) return wisp_fail(WISP_EINVAL, "section '%s': the name table's parts are out of row order", sec);
    const int64_t dims[2] = {rows, cols};
    wisp_status st = want_rule(p, run[i], layer, 2, dims, &j->src[i]);
    if (st) return st;
    at += rows;
  }
  if (at != total) return wisp_fail(WISP_EINVAL, "section '%s': the name table's parts cover %d of %d rows", sec, at, total);
  j->nsrc = n;
  return WISP_OK;
}

/* The sections of layer `layer` of kind `kind` (-1: the globals), in the
 * table's order; consecutive rows of one section make one section. A tied
 * model has no head of its own: a stored copy is ignored, as HF does. */
static wisp_status plan_rules(planner *p, const wisp_gguf_arch *ga, int layer, int kind) {
  const wisp_gguf_rule *run[4];
  int n = 0;
  for (size_t k = 0; k <= ga->n_rules; k++) {
    const wisp_gguf_rule *r = k < ga->n_rules ? &ga->rules[k] : NULL;
    int takes = r && r->section && (layer < 0 ? r->where == GA_GLOBAL : wisp_gguf_rule_applies(r, kind));
    if (takes && layer < 0 && p->tied && !strcmp(r->section, "head")) {
      char name[160];
      hf_name(p, r->hf, layer, name, sizeof name);
      const wisp_st_tensor *lm = wisp_safetensors_find(p->st, name);
      if (lm) p->used[lm - p->st->tensors] = 1;
      takes = 0;
    }
    if (takes && n > 0 && !strcmp(r->section, run[0]->section)) {
      if (n == 4) return wisp_fail(WISP_EINVAL, "section '%s': the name table gives it more than 4 parts", r->section);
      run[n++] = r;
      continue;
    }
    if (n > 0) {
      wisp_status st = plan_section(p, run, n, layer);
      if (st) return st;
      n = 0;
    }
    if (takes) run[n++] = r;
  }
  return WISP_OK;
}

/* Every section of the model from the architecture's name table
 * (format/gguf_arch.h), layer by layer, then the globals, and a check
 * that every tensor of the checkpoint found a place (or lies outside the
 * text graph: ga->hf_ignore). */
static wisp_status plan_model(planner *p, const hf_config *c, const wisp_gguf_arch *ga) {
  wisp_status st;
  for (size_t k = 0; ga->hf_nested && k < ga->n_rules; k++)
    if (ga->rules[k].where == GA_GLOBAL && ga->rules[k].section && !strcmp(ga->rules[k].section, "embed")) {
      p->nested = ga->hf_nested;
      char name[160];
      hf_name(p, ga->rules[k].hf, -1, name, sizeof name);
      if (!wisp_safetensors_find(p->st, name)) p->nested = NULL;
    }
  for (int i = 0; i < c->n_layers; i++)
    if ((st = plan_rules(p, ga, i, c->layer_types[i]))) return st;
  if ((st = plan_rules(p, ga, -1, 0))) return st;
  for (int i = 0; i < p->st->n_tensors; i++) {
    const char *nm = p->st->tensors[i].name;
    for (int k = 0; ga->hf_ignore && ga->hf_ignore[k]; k++)
      if (!strncmp(nm, ga->hf_ignore[k], strlen(ga->hf_ignore[k]))) p->used[i] = 1;
    char shape[128];
    if (!p->used[i])
      return wisp_fail(WISP_EUNSUPPORTED, "%s: tensor '%s' %s is not part of the %s graph wisp implements",
                       wisp_safetensors_file_of(p->st, &p->st->tensors[i]), nm,
                       wisp_st_shape_str(p->st->tensors[i].shape, p->st->tensors[i].ndim, shape, sizeof shape),
                       ga->graph);
  }
  return WISP_OK;
}

/* ---- writing ---- */

static wisp_status put(wisp_writer *w, const cJSON *manifest, const char *base, const char *suffix, const void *data,
                       size_t bytes) {
  char name[128];
  if (suffix) snprintf(name, sizeof name, "%s.%s", base, suffix);
  else snprintf(name, sizeof name, "%s", base);
  return wisp_writer_put_section(w, manifest, name, data, bytes);
}

/* Whether the layout (format/layout.h) has section NAME: it decides, e.g.,
 * which matrices carry a transposed copy. */
static int in_layout(const cJSON *manifest, const char *name) {
  const cJSON *e, *secs = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(manifest, "runtime"), "sections");
  cJSON_ArrayForEach(e, secs) {
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(e, "name");
    if (cJSON_IsString(n) && !strcmp(n->valuestring, name)) return 1;
  }
  return 0;
}

static wisp_status write_job(wisp_writer *w, const cJSON *manifest, const wisp_safetensors *st, const job *j, int quant) {
  const int q4 = quant != QUANT_F32;
  size_t n = (size_t)j->rows * (size_t)j->cols;
  float *buf = malloc(n * sizeof(float));
  uint8_t *q = NULL, *zp = NULL;
  float *scales = NULL, *tr = NULL;
  wisp_status rc = WISP_OK;
  if (!buf) return wisp_fail(WISP_ENOMEM, "out of memory for section '%s' (%zu floats)", j->section, n);
  size_t at = 0;
  for (int i = 0; i < j->nsrc && !rc; i++) {
    rc = wisp_safetensors_read_f32(st, j->src[i], buf + at);
    at += (size_t)j->src[i]->numel;
  }
  if (rc) goto done;
  for (size_t i = 0; i < n; i++)
    if (!isfinite(buf[i])) {
      rc = wisp_fail(WISP_EFORMAT, "section '%s': element %zu is not finite (%g)", j->section, i, (double)buf[i]);
      goto done;
    }
  if (j->kind == JOB_VECTOR || j->kind == JOB_VECTOR_P1) {
    if (j->kind == JOB_VECTOR_P1)
      for (size_t i = 0; i < n; i++) buf[i] = 1.0f + buf[i]; /* f32, as Qwen3_5RMSNorm's (1.0 + weight.float()) */
    rc = put(w, manifest, j->section, NULL, buf, n * sizeof(float));
    goto done;
  }
  if (!q4) {
    rc = put(w, manifest, j->section, "weight", buf, n * sizeof(float));
    goto done;
  }
  if (quant == QUANT_F16 || quant == QUANT_Q8_0) { /* every matrix, embed/head included */
    size_t kb = quant == QUANT_F16 ? wisp_f16_bytes(j->rows, j->cols) : wisp_q8_0_bytes(j->rows, j->cols);
    q = malloc(kb);
    if (!q) { rc = wisp_fail(WISP_ENOMEM, "out of memory quantizing '%s'", j->section); goto done; }
    if (quant == QUANT_F16) wisp_quantize_f16(buf, j->rows, j->cols, q);
    else wisp_quantize_q8_0_rows(buf, j->rows, j->cols, q);
    rc = put(w, manifest, j->section, quant == QUANT_F16 ? "f16" : "q8_0", q, kb);
    goto done;
  }
  if (quant == QUANT_Q4K && j->kind == JOB_MATRIX && j->cols % WISP_Q4K_BLOCK == 0) {
    size_t kb = wisp_q4k_bytes(j->rows, j->cols);
    q = malloc(kb);
    if (!q) { rc = wisp_fail(WISP_ENOMEM, "out of memory quantizing '%s'", j->section); goto done; }
    wisp_quantize_q4k(buf, j->rows, j->cols, q);
    rc = put(w, manifest, j->section, "q4k", q, kb);
    goto done;
  }
  size_t qb = wisp_q4_quant_bytes(j->rows, j->cols), sb = wisp_q4_scale_bytes(j->rows, j->cols);
  q = malloc(qb);
  scales = malloc(sb);
  zp = malloc(wisp_q4_zp_bytes(j->rows, j->cols) + 1);
  if (!q || !scales || !zp) { rc = wisp_fail(WISP_ENOMEM, "out of memory quantizing '%s'", j->section); goto done; }
  if (j->kind == JOB_MATRIX_Z) {
    wisp_quantize_q4z(buf, j->rows, j->cols, q, scales, zp);
    if ((rc = put(w, manifest, j->section, "zero_points", zp, wisp_q4_zp_bytes(j->rows, j->cols)))) goto done;
  } else {
    wisp_quantize_q4(buf, j->rows, j->cols, q, scales);
  }
  if ((rc = put(w, manifest, j->section, "quant", q, qb)) || (rc = put(w, manifest, j->section, "scales", scales, sb)))
    goto done;
  if (j->transposed_copy) {
    /* down is [hidden][ffn]; the copy is its transpose [ffn][hidden], quantized along hidden. */
    tr = malloc(n * sizeof(float));
    if (!tr) { rc = wisp_fail(WISP_ENOMEM, "out of memory transposing '%s'", j->section); goto done; }
    for (int r = 0; r < j->rows; r++)
      for (int c = 0; c < j->cols; c++) tr[(size_t)c * j->rows + r] = buf[(size_t)r * j->cols + c];
    wisp_quantize_q4(tr, j->cols, j->rows, q, scales);
    if ((rc = put(w, manifest, j->section, "kquant", q, qb)) || (rc = put(w, manifest, j->section, "kscales", scales, sb)))
      goto done;
  }
done:
  free(buf);
  free(q);
  free(scales);
  free(zp);
  free(tr);
  return rc;
}

/* inv_freq[i] = 1 / theta^(2i/D) in f32 the way transformers' default rope
 * computes it, with a GGUF's frequency factors or Llama 3's scaling applied. */
static void rope_inv_freq(int head_dim, double theta, const hf_config *scale, float *inv_out) {
  const int half = head_dim / 2;
  for (int i = 0; i < half; i++) {
    float e = (float)(2 * i) / (float)head_dim;
    float inv = 1.0f / powf((float)theta, e);
    if (scale && scale->rope_linear > 0 && scale->rope_linear != 1.0) {
      inv = inv / (float)scale->rope_linear; /* transformers' linear scaling (Gemma 3's global layers) */
    } else if (scale && scale->rope_factors) {
      inv = inv / scale->rope_factors[i]; /* llama.cpp: theta_i / freq_factor_i */
    } else if (scale && scale->llama3) {
      /* transformers' _compute_llama3_parameters, in f32 */
      const float pi = 3.14159265358979323846f, factor = (float)scale->rs_factor;
      const float low = (float)scale->rs_low, high = (float)scale->rs_high, old = (float)scale->rs_orig;
      const float low_wl = old / low, high_wl = old / high, wl = 2.0f * pi / inv;
      float scaled = wl > low_wl ? inv / factor : inv;
      if (!(wl < high_wl) && !(wl > low_wl)) {
        float smooth = (old / wl - low) / (high - low);
        scaled = (1.0f - smooth) * scaled / factor + smooth * scaled;
      }
      inv = scaled;
    }
    inv_out[i] = inv;
  }
}

/* rope.freq (the inverse frequencies, from which a session builds the tables
 * for its own context) and rope.cos/rope.sin for the plan's rows. */
static wisp_status write_rope(wisp_writer *w, const cJSON *manifest, int rows, int head_dim, double theta,
                              const hf_config *scale) {
  const int half = head_dim / 2;
  float *inv = malloc(sizeof(float) * (size_t)half);
  float *cs = malloc(sizeof(float) * (size_t)rows * half), *sn = malloc(sizeof(float) * (size_t)rows * half);
  wisp_status rc = WISP_OK;
  if (!inv || !cs || !sn) { rc = wisp_fail(WISP_ENOMEM, "out of memory for rope tables"); goto done; }
  rope_inv_freq(head_dim, theta, scale, inv);
  wisp_rope_rows(inv, half, rows, cs, sn);
  size_t bytes = sizeof(float) * (size_t)rows * half;
  if (!(rc = wisp_writer_put_section(w, manifest, "rope.freq", inv, sizeof(float) * (size_t)half)) &&
      !(rc = wisp_writer_put_section(w, manifest, "rope.cos", cs, bytes)))
    rc = wisp_writer_put_section(w, manifest, "rope.sin", sn, bytes);
done:
  free(inv);
  free(cs);
  free(sn);
  return rc;
}

/* Gemma 3's sliding layers: rope.freq_local from rope_local_base_freq (no scaling). */
static wisp_status write_local_freq(wisp_writer *w, const cJSON *manifest, const hf_config *c) {
  const int half = c->head_dim / 2;
  float *inv = malloc(sizeof(float) * (size_t)half);
  if (!inv) return wisp_fail(WISP_ENOMEM, "out of memory for rope frequencies");
  rope_inv_freq(c->head_dim, c->rope_local_theta, NULL, inv);
  wisp_status rc = wisp_writer_put_section(w, manifest, "rope.freq_local", inv, sizeof(float) * (size_t)half);
  free(inv);
  return rc;
}

static const char *k_quant_names[5] = {"f32", "q4", "q4k", "f16", "q8_0"};

static cJSON *build_manifest(const hf_config *c, cJSON *sections, uint64_t total, int quant, int plan_rows) {
  const int qwen = c->arch == ARCH_QWEN3_5;
  cJSON *m = cJSON_CreateObject();
  cJSON *rt = cJSON_AddObjectToObject(m, "runtime");
  cJSON *shape = cJSON_AddObjectToObject(rt, "shape");
  cJSON *lt = cJSON_AddArrayToObject(shape, "layerTypes");
  for (int i = 0; i < c->n_layers; i++)
    cJSON_AddItemToArray(lt, cJSON_CreateString(c->layer_types[i] == WISP_LAYER_CONV     ? "conv"
                                                : c->layer_types[i] == WISP_LAYER_LINEAR ? "linear_attention"
                                                : qwen                                   ? "full_attention"
                                                                                         : "attention"));
  cJSON_AddNumberToObject(shape, "hidden", c->hidden);
  cJSON_AddNumberToObject(shape, "ffn", c->ffn);
  cJSON_AddNumberToObject(shape, "vocab", c->vocab);
  cJSON_AddNumberToObject(shape, "heads", c->heads);
  cJSON_AddNumberToObject(shape, "kvHeads", c->kv_heads);
  cJSON_AddNumberToObject(shape, "headDim", c->head_dim);
  cJSON_AddNumberToObject(shape, "convCache", c->conv_l);
  cJSON_AddNumberToObject(shape, "quantBits", 4);
  cJSON_AddNumberToObject(shape, "quantBlock", 32);
  if (qwen) { /* wisp fields (docs/artifact.md, "Qwen 3.5") */
    cJSON_AddNumberToObject(shape, "linearKeyHeads", c->lin_k_heads);
    cJSON_AddNumberToObject(shape, "linearValueHeads", c->lin_v_heads);
    cJSON_AddNumberToObject(shape, "linearKeyDim", c->lin_k_dim);
    cJSON_AddNumberToObject(shape, "linearValueDim", c->lin_v_dim);
    cJSON_AddNumberToObject(shape, "rotaryDim", c->rotary_dim);
  }
  cJSON_AddStringToObject(rt, "weightsUrl", "/weights.bin");
  cJSON_AddNumberToObject(rt, "weightBytes", (double)total);
  cJSON_AddItemToObject(rt, "sections", sections);
  cJSON_AddNumberToObject(rt, "maxQueries", 1);
  cJSON_AddNumberToObject(rt, "maxPositions", c->max_pos);
  cJSON_AddNumberToObject(rt, "planPosition", plan_rows);
  cJSON_AddNumberToObject(rt, "maxTotalPositions", c->max_pos);
  cJSON *wx = cJSON_AddObjectToObject(m, "wisp");
  cJSON_AddStringToObject(wx, "architecture", qwen                      ? "qwen3_5"
                                              : c->arch == ARCH_QWEN2  ? "qwen2"
                                              : c->arch == ARCH_GEMMA3 ? "gemma3"
                                                                       : "lfm2");
  if (c->arch == ARCH_GEMMA3) { /* docs/artifact.md, "Gemma 3" */
    /* a GGUF without a window has every layer global: any window does */
    cJSON_AddNumberToObject(wx, "slidingWindow", c->sliding_window > 0 ? c->sliding_window : c->max_pos);
    cJSON *gl = cJSON_AddArrayToObject(wx, "globalLayers");
    for (int i = 0; i < c->n_layers; i++)
      if (c->global[i]) cJSON_AddItemToArray(gl, cJSON_CreateNumber(i));
    cJSON_AddNumberToObject(wx, "attnScale", (double)(float)(1.0 / sqrt(c->attn_scalar)));
    cJSON_AddNumberToObject(wx, "queryPreAttnScalar", c->attn_scalar);
    cJSON_AddNumberToObject(wx, "ropeLocalTheta", c->rope_local_theta);
    if (c->rope_linear != 1.0) {
      cJSON *rs = cJSON_AddObjectToObject(wx, "ropeScaling"); /* informational: rope.freq carries it */
      cJSON_AddStringToObject(rs, "type", "linear");
      cJSON_AddNumberToObject(rs, "factor", c->rope_linear);
    }
  }
  cJSON_AddNumberToObject(wx, "ropeTheta", c->rope_theta);
  cJSON_AddNumberToObject(wx, "normEps", c->norm_eps);
  cJSON_AddStringToObject(wx, "tokenizer", "byte");
  cJSON_AddStringToObject(wx, "weights", k_quant_names[quant]);
  if (c->llama) {
    cJSON_AddBoolToObject(wx, "qkNorm", 0);
    if (c->rope_factors) { /* a GGUF's rope_freqs: kept so export-gguf writes them back */
      cJSON *rs = cJSON_AddObjectToObject(wx, "ropeScaling");
      cJSON_AddStringToObject(rs, "type", "freqFactors");
      cJSON *f = cJSON_AddArrayToObject(rs, "factors");
      for (int i = 0; i < c->head_dim / 2; i++) cJSON_AddItemToArray(f, cJSON_CreateNumber(c->rope_factors[i]));
    } else if (c->llama3) {
      cJSON *rs = cJSON_AddObjectToObject(wx, "ropeScaling"); /* informational: the tables carry it */
      cJSON_AddStringToObject(rs, "type", "llama3");
      cJSON_AddNumberToObject(rs, "factor", c->rs_factor);
      cJSON_AddNumberToObject(rs, "lowFreqFactor", c->rs_low);
      cJSON_AddNumberToObject(rs, "highFreqFactor", c->rs_high);
      cJSON_AddNumberToObject(rs, "originalMaxPositions", c->rs_orig);
    }
  }
  cJSON_AddStringToObject(wx, "source", qwen ? "huggingface Qwen3_5ForCausalLM"
                                       : c->arch == ARCH_QWEN2 ? "huggingface Qwen2ForCausalLM"
                                       : c->arch == ARCH_GEMMA3 ? "huggingface Gemma3ForCausalLM"
                                       : c->arch == ARCH_QWEN3 && c->llama ? "huggingface LlamaForCausalLM (as an all-attention lfm2 graph without q/k norm)"
                                       : c->arch == ARCH_QWEN3 ? "huggingface Qwen3ForCausalLM (as an all-attention lfm2 graph)"
                                                               : "huggingface Lfm2ForCausalLM");
  return m;
}

/* ---- tokenizer files: copied as they are, recorded in wisp.tokenizerFiles ---- */

static const char *const TOKENIZER_FILES[3][2] = {
    {"tokenizer", "tokenizer.json"}, {"config", "tokenizer_config.json"}, {"generation", "generation_config.json"}};

/* When HF_DIR has a tokenizer.json, checks that wisp can load it and fits the
 * vocabulary, and marks the manifest "bpe"; present[i] says which files to copy. */
static wisp_status plan_tokenizer(const char *hf_dir, const hf_config *c, cJSON *manifest, int present[3]) {
  char path[4200];
  for (int i = 0; i < 3; i++) {
    snprintf(path, sizeof path, "%s/%s", hf_dir, TOKENIZER_FILES[i][1]);
    present[i] = wisp_path_exists(path);
  }
  if (!present[0]) {
    present[1] = present[2] = 0; /* without tokenizer.json the artifact stays byte-level */
    return WISP_OK;
  }
  snprintf(path, sizeof path, "%s/tokenizer.json", hf_dir);
  wisp_tokenizer *t = NULL;
  wisp_status st = wisp_tokenizer_from_file(path, &t);
  if (st) return st;
  int n = wisp_tokenizer_vocab_size(t);
  wisp_tokenizer_free(t);
  if (n > c->vocab)
    return wisp_fail(WISP_EFORMAT, "%s: the tokenizer has ids up to %d, the model's vocab_size is %d", path, n - 1,
                     c->vocab);
  cJSON *wx = cJSON_GetObjectItemCaseSensitive(manifest, "wisp");
  cJSON_ReplaceItemInObjectCaseSensitive(wx, "tokenizer", cJSON_CreateString("bpe"));
  cJSON *files = cJSON_AddObjectToObject(wx, "tokenizerFiles");
  for (int i = 0; i < 3; i++)
    if (present[i]) cJSON_AddStringToObject(files, TOKENIZER_FILES[i][0], TOKENIZER_FILES[i][1]);
  return WISP_OK;
}

static wisp_status copy_tokenizer(wisp_writer *w, const char *hf_dir, const int present[3]) {
  char path[4200];
  for (int i = 0; i < 3; i++) {
    if (!present[i]) continue;
    snprintf(path, sizeof path, "%s/%s", hf_dir, TOKENIZER_FILES[i][1]);
    wisp_status st = wisp_writer_add_file(w, TOKENIZER_FILES[i][1], path);
    if (st) return st;
  }
  return WISP_OK;
}

/* Fails early (before any heavy work) when DIR cannot be created. */
static wisp_status check_output(const char *dir) {
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s", dir);
  const char *parent = dirname(tmp);
  struct stat sb;
  if (stat(parent, &sb) != 0 || !S_ISDIR(sb.st_mode))
    return wisp_fail(WISP_EIO, "%s: the output's parent directory '%s' does not exist", dir, parent);
  return WISP_OK; /* what DIR itself may be: the caller's (the CLI's cli_claim_target) */
}

/* A GGUF file as the source: hyperparameters from its metadata, tensors
 * under Hugging Face names (dequantized to f32), and the tokenizer files
 * written into tok_dir (docs/gguf.md). */
static wisp_status gguf_source(const char *path, const char *tok_dir, hf_config *c, wisp_safetensors **st,
                               int *has_tok) {
  wisp_gguf *g = NULL;
  wisp_gguf_model m;
  *has_tok = 0;
  wisp_status rc = wisp_gguf_open(path, &g);
  if (rc) return rc;
  rc = wisp_gguf_import(g, &m, st);
  if (!rc) {
    c->arch = !strcmp(m.arch, "lfm2")     ? ARCH_LFM2
              : !strcmp(m.arch, "qwen35") ? ARCH_QWEN3_5
              : !strcmp(m.arch, "qwen2")  ? ARCH_QWEN2
              : !strcmp(m.arch, "gemma3") ? ARCH_GEMMA3
                                          : ARCH_QWEN3;
    c->sliding_window = m.sliding_window;
    c->global = m.global;
    m.global = NULL;
    c->rope_local_theta = m.rope_local_theta;
    c->rope_linear = m.rope_linear;
    c->attn_scalar = m.attn_scalar;
    c->llama = !strcmp(m.arch, "llama");
    c->rope_factors = m.rope_factors;
    m.rope_factors = NULL;
    c->lin_k_heads = m.lin_k_heads;
    c->lin_v_heads = m.lin_v_heads;
    c->lin_k_dim = m.lin_k_dim;
    c->lin_v_dim = m.lin_v_dim;
    c->rotary_dim = m.rotary_dim;
    snprintf(c->source, sizeof c->source, "gguf %s", m.arch);
    c->hidden = m.hidden;
    c->n_layers = m.n_layers;
    c->heads = m.heads;
    c->kv_heads = m.kv_heads;
    c->head_dim = m.head_dim;
    c->ffn = m.ffn;
    c->vocab = m.vocab;
    c->conv_l = m.conv_l;
    c->hf_max_pos = m.context;
    c->max_pos = m.context;
    c->tied = m.tied;
    c->layer_types = m.layer_types;
    m.layer_types = NULL;
    c->rope_theta = m.rope_theta;
    c->norm_eps = m.norm_eps;
    if (mkdir(tok_dir, 0755) != 0) /* a fresh directory: never one planted under this name */
      rc = wisp_fail(WISP_EIO, "%s: cannot create directory: %s", tok_dir, strerror(errno));
    else
      rc = wisp_gguf_write_tokenizer(g, tok_dir, has_tok);
  }
  wisp_gguf_model_free(&m);
  wisp_gguf_close(g);
  return rc;
}

/* Removes the temporary tokenizer directory: only a real directory (a
 * symbolic link planted under its name is not followed). */
static void remove_tok_dir(const char *dir) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return;
  for (int i = 0; i < 3; i++) unlinkat(fd, TOKENIZER_FILES[i][1], 0);
  close(fd);
  rmdir(dir);
}

wisp_status wisp_hf_import(const wisp_hf_import_options *o) {
  const char *hf_dir = o->source, *out_dir = o->out_dir, *quant = o->quant ? o->quant : "q4";
  const int quiet = o->quiet;
  if (!hf_dir || !out_dir) return wisp_fail(WISP_EINVAL, "convert: a source and an output directory are required");
  if (strcmp(quant, "f32") && strcmp(quant, "q4") && strcmp(quant, "q4k") && strcmp(quant, "f16") &&
      strcmp(quant, "q8_0"))
    return wisp_fail(WISP_EINVAL, "--quant must be f32, q4, q4k, f16 or q8_0, not '%s'", quant);
  const int qmode = !strcmp(quant, "q4")     ? QUANT_Q4
                    : !strcmp(quant, "q4k")  ? QUANT_Q4K
                    : !strcmp(quant, "f16")  ? QUANT_F16
                    : !strcmp(quant, "q8_0") ? QUANT_Q8_0
                                             : QUANT_F32;
  const int q4 = qmode != QUANT_F32;
  hf_config cfg = {0};
  wisp_safetensors *st = NULL;
  planner pl = {0};
  cJSON *manifest = NULL, *sections = NULL;
  wisp_writer *w = NULL;
  wisp_status rc;
  struct stat src_sb;
  const int from_gguf = stat(hf_dir, &src_sb) == 0 && S_ISREG(src_sb.st_mode);
  const char *tok_dir = from_gguf ? o->gguf_tokenizer_dir : "";
  const char *src_dir = hf_dir; /* where the tokenizer files come from */
  if (from_gguf) {
    int has_tok = 0;
    if (!tok_dir || !*tok_dir) {
      rc = wisp_fail(WISP_EINVAL, "%s: a GGUF import needs a directory for its tokenizer files", hf_dir);
      goto fail;
    }
    if ((rc = check_output(out_dir)) || (rc = gguf_source(hf_dir, tok_dir, &cfg, &st, &has_tok))) goto fail;
    src_dir = tok_dir;
  } else if ((rc = check_output(out_dir)) || (rc = parse_config(hf_dir, &cfg)) ||
             (rc = wisp_safetensors_open_dir(hf_dir, &st))) {
    goto fail;
  }
  pl.st = st;
  pl.hf_dir = hf_dir;
  pl.used = calloc((size_t)st->n_tensors + 1, 1);
  pl.jobs = calloc((size_t)cfg.n_layers * 12 + 8, sizeof(job));
  if (!pl.used || !pl.jobs) { rc = wisp_fail(WISP_ENOMEM, "out of memory"); goto fail; }
  /* the architecture's name table: GGUF's names double as the HF architectures' */
  const wisp_gguf_arch *ga = wisp_gguf_arch_find(cfg.arch == ARCH_QWEN3_5 ? "qwen35"
                                                 : cfg.arch == ARCH_LFM2  ? "lfm2"
                                                 : cfg.arch == ARCH_QWEN2 ? "qwen2"
                                                 : cfg.arch == ARCH_GEMMA3 ? "gemma3"
                                                 : cfg.llama              ? "llama"
                                                                          : "qwen3");
  const wisp_gguf_geom geo = {.hidden = cfg.hidden, .ffn = cfg.ffn, .vocab = cfg.vocab, .conv_l = cfg.conv_l,
                              .heads = cfg.heads, .kv_heads = cfg.kv_heads, .head_dim = cfg.head_dim,
                              .q_rows = (ga->q_gated ? 2 : 1) * cfg.heads * cfg.head_dim,
                              .lin_k_heads = cfg.lin_k_heads, .lin_v_heads = cfg.lin_v_heads,
                              .lin_k_dim = cfg.lin_k_dim, .lin_v_dim = cfg.lin_v_dim};
  pl.geo = &geo;
  pl.tied = cfg.tied;
  if ((rc = plan_model(&pl, &cfg, ga))) goto fail;

  wisp_shape shape = {.n_layers = cfg.n_layers, .layer_types = cfg.layer_types, .hidden = cfg.hidden, .ffn = cfg.ffn,
                      .vocab = cfg.vocab, .heads = cfg.heads, .kv_heads = cfg.kv_heads, .head_dim = cfg.head_dim,
                      .conv_cache = cfg.conv_l, .quant_bits = 4, .quant_block = 32, .lin_k_heads = cfg.lin_k_heads,
                      .lin_v_heads = cfg.lin_v_heads, .lin_k_dim = cfg.lin_k_dim, .lin_v_dim = cfg.lin_v_dim,
                      .rotary_dim = cfg.rotary_dim};
  int plan_rows = cfg.max_pos < CONVERT_PLAN_POSITIONS ? cfg.max_pos : CONVERT_PLAN_POSITIONS;
  const int tied = cfg.tied; /* an untied model without its head failed planning */
  wisp_layout_options lo = {.f32 = !q4, .q4k = qmode == QUANT_Q4K, .f16 = qmode == QUANT_F16,
                            .q8_0 = qmode == QUANT_Q8_0, .tied = tied, .down_transposed = qmode == QUANT_Q4,
                            .rope_rows = plan_rows, .rope_freq = 1, .no_qk_norm = cfg.llama || cfg.arch == ARCH_QWEN2,
                            .qkv_bias = cfg.arch == ARCH_QWEN2};
  uint64_t total = 0;
  if ((rc = cfg.arch == ARCH_QWEN3_5  ? wisp_layout_qwen3_5(&shape, &lo, &sections, &total)
             : cfg.arch == ARCH_GEMMA3 ? wisp_layout_gemma3(&shape, &lo, &sections, &total)
                                       : wisp_layout_lfm2(&shape, &lo, &sections, &total)))
    goto fail;
  manifest = build_manifest(&cfg, sections, total, qmode, plan_rows);
  sections = NULL; /* owned by manifest now */
  if (!manifest) { rc = wisp_fail(WISP_ENOMEM, "out of memory"); goto fail; }
  int tok_files[3];
  if ((rc = plan_tokenizer(src_dir, &cfg, manifest, tok_files))) goto fail;
  if (from_gguf) /* "gguf ARCH": export-gguf writes the same architecture back */
    cJSON_ReplaceItemInObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(manifest, "wisp"), "source", cJSON_CreateString(cfg.source));
  if (!quiet)
    fprintf(stderr, "wisp convert: %s -> %s (%s, %d layers, hidden %d, ffn %d, vocab %d, %s head, %d positions, %.1f MB)\n",
            hf_dir, out_dir, quant, cfg.n_layers, cfg.hidden, cfg.ffn, cfg.vocab, tied ? "tied" : "separate",
            cfg.max_pos, (double)total / 1e6);
  if ((rc = wisp_writer_begin(out_dir, total, &w))) goto fail;
  if ((rc = copy_tokenizer(w, src_dir, tok_files))) goto fail;
  for (int i = 0; i < pl.n_jobs; i++) {
    job *j = &pl.jobs[i];
    char kq[80];
    snprintf(kq, sizeof kq, "%s.kquant", j->section);
    j->transposed_copy = in_layout(manifest, kq);
    if (!quiet)
      fprintf(stderr, "  [%3d/%d] %-24s %6d x %-6d %s\n", i + 1, pl.n_jobs, j->section, j->rows, j->cols,
              j->kind >= JOB_VECTOR ? "f32" : !q4 ? "f32" : qmode >= QUANT_F16 ? quant
              : j->kind == JOB_MATRIX_Z ? "q4z"
              : qmode == QUANT_Q4K && j->cols % WISP_Q4K_BLOCK == 0 ? "q4k" : "q4");
    if ((rc = write_job(w, manifest, st, j, qmode))) goto fail;
  }
  const int rope_dim = cfg.arch == ARCH_QWEN3_5 ? cfg.rotary_dim : cfg.head_dim; /* Qwen: partial rotary */
  if ((rc = write_rope(w, manifest, plan_rows, rope_dim, cfg.rope_theta, &cfg))) goto fail;
  if (cfg.arch == ARCH_GEMMA3 && (rc = write_local_freq(w, manifest, &cfg))) goto fail;
  rc = wisp_writer_commit(w, manifest);
  w = NULL; /* commit frees the writer, also on failure */
  if (rc) goto fail;
  if (!quiet) fprintf(stderr, "wisp convert: wrote %s\n", out_dir);
  goto done;
fail:
  if (w) wisp_writer_abort(w);
done:
  if (tok_dir && tok_dir[0]) remove_tok_dir(tok_dir);
  cJSON_Delete(sections);
  cJSON_Delete(manifest);
  free(pl.used);
  free(pl.jobs);
  wisp_safetensors_close(st);
  free(cfg.layer_types);
  free(cfg.rope_factors);
  free(cfg.global);
  return rc;
}
