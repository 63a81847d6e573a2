/* The GGUF architecture tables and transforms; see gguf_arch.h. The names
 * and transforms follow llama.cpp's converter (gguf-py/gguf/constants.py,
 * conversion/llama.py and conversion/qwen.py), described in docs/gguf.md;
 * the code and tables are wisp's own. */
#include "format/gguf_arch.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "format/artifact.h"
#include "format/tensor.h"
#include "util/err.h"

#define L "model.layers.%d."
/* A row of a matrix part, and of a vector (or conv taps) of `len` rows. */
#define M(gguf, hf, section, where, part, xform) {gguf, hf, section, where, part, xform, 0, NULL}
#define V(gguf, hf, section, where, part, xform, len) {gguf, hf, section, where, part, xform, len, NULL}

static const wisp_gguf_rule k_lfm2[] = {
    V("attn_norm.weight", L "operator_norm.weight", "L%d.conv.in_proj.norm", GA_CONV, GA_P_VEC, 0, GA_N_HIDDEN),
    M("shortconv.in_proj.weight", L "conv.in_proj.weight", "L%d.conv.in_proj", GA_CONV, GA_P_CONV_IN, 0),
    M("shortconv.out_proj.weight", L "conv.out_proj.weight", "L%d.conv.out_proj", GA_CONV, GA_P_CONV_OUT, 0),
    V("shortconv.conv.weight", L "conv.conv.weight", "L%d.conv.core.taps", GA_CONV, GA_P_TAPS, 0, GA_N_HIDDEN),
    V("attn_norm.weight", L "operator_norm.weight", "L%d.attn.qkv.norm", GA_ATTN, GA_P_VEC, 0, GA_N_HIDDEN),
    M("attn_q.weight", L "self_attn.q_proj.weight", "L%d.attn.qkv", GA_ATTN, GA_P_Q, 0),
    M("attn_k.weight", L "self_attn.k_proj.weight", "L%d.attn.qkv", GA_ATTN, GA_P_K, 0),
    M("attn_v.weight", L "self_attn.v_proj.weight", "L%d.attn.qkv", GA_ATTN, GA_P_V, 0),
    M("attn_output.weight", L "self_attn.out_proj.weight", "L%d.attn.o_proj", GA_ATTN, GA_P_O, 0),
    V("attn_q_norm.weight", L "self_attn.q_layernorm.weight", "L%d.attn.qkv.q_norm", GA_ATTN, GA_P_VEC, 0, GA_N_HEAD_DIM),
    V("attn_k_norm.weight", L "self_attn.k_layernorm.weight", "L%d.attn.qkv.k_norm", GA_ATTN, GA_P_VEC, 0, GA_N_HEAD_DIM),
    M("ffn_gate.weight", L "feed_forward.w1.weight", "L%d.mlp.gate_up", GA_EVERY, GA_P_GATE, 0),
    M("ffn_up.weight", L "feed_forward.w3.weight", "L%d.mlp.gate_up", GA_EVERY, GA_P_UP, 0),
    M("ffn_down.weight", L "feed_forward.w2.weight", "L%d.mlp.down", GA_EVERY, GA_P_DOWN, 0),
    V("ffn_norm.weight", L "ffn_norm.weight", "L%d.mlp.gate_up.norm", GA_EVERY, GA_P_VEC, 0, GA_N_HIDDEN),
    M("token_embd.weight", "model.embed_tokens.weight", "embed", GA_GLOBAL, GA_P_VOCAB, 0),
    M("output.weight", "lm_head.weight", "head", GA_GLOBAL, GA_P_VOCAB, 0),
    /* older Hugging Face LFM2 checkpoints name it model.norm */
    {"token_embd_norm.weight", "model.embedding_norm.weight", "head.norm", GA_GLOBAL, GA_P_VEC, 0, GA_N_HIDDEN,
     "model.norm.weight"},
    /* older LFM2 files name the final norm output_norm */
    V("output_norm.weight", "model.embedding_norm.weight", NULL, GA_GLOBAL, GA_P_VEC, 0, GA_N_HIDDEN),
};

/* qwen3 and llama share every name; llama has no q/k norm and permuted q/k
 * rows (conversion/llama.py's permute). */
#define DENSE_ATTN(QX, KX)                                                                                              \
  V("attn_norm.weight", L "input_layernorm.weight", "L%d.attn.qkv.norm", GA_ATTN, GA_P_VEC, 0, GA_N_HIDDEN),            \
  M("attn_q.weight", L "self_attn.q_proj.weight", "L%d.attn.qkv", GA_ATTN, GA_P_Q, QX),                                 \
  M("attn_k.weight", L "self_attn.k_proj.weight", "L%d.attn.qkv", GA_ATTN, GA_P_K, KX),                                 \
  M("attn_v.weight", L "self_attn.v_proj.weight", "L%d.attn.qkv", GA_ATTN, GA_P_V, 0),                                  \
  M("attn_output.weight", L "self_attn.o_proj.weight", "L%d.attn.o_proj", GA_ATTN, GA_P_O, 0)
#define DENSE_MLP(NORM, NX)                                                                                             \
  M("ffn_gate.weight", L "mlp.gate_proj.weight", "L%d.mlp.gate_up", GA_EVERY, GA_P_GATE, 0),                            \
  M("ffn_up.weight", L "mlp.up_proj.weight", "L%d.mlp.gate_up", GA_EVERY, GA_P_UP, 0),                                  \
  M("ffn_down.weight", L "mlp.down_proj.weight", "L%d.mlp.down", GA_EVERY, GA_P_DOWN, 0),                               \
  V(NORM, L "post_attention_layernorm.weight", "L%d.mlp.gate_up.norm", GA_EVERY, GA_P_VEC, NX, GA_N_HIDDEN)
#define DENSE_TAIL(NX)                                                                                                  \
  M("token_embd.weight", "model.embed_tokens.weight", "embed", GA_GLOBAL, GA_P_VOCAB, 0),                               \
  M("output.weight", "lm_head.weight", "head", GA_GLOBAL, GA_P_VOCAB, 0),                                               \
  V("output_norm.weight", "model.norm.weight", "head.norm", GA_GLOBAL, GA_P_VEC, NX, GA_N_HIDDEN)

static const wisp_gguf_rule k_qwen3[] = {
    DENSE_ATTN(0, 0),
    V("attn_q_norm.weight", L "self_attn.q_norm.weight", "L%d.attn.qkv.q_norm", GA_ATTN, GA_P_VEC, 0, GA_N_HEAD_DIM),
    V("attn_k_norm.weight", L "self_attn.k_norm.weight", "L%d.attn.qkv.k_norm", GA_ATTN, GA_P_VEC, 0, GA_N_HEAD_DIM),
    DENSE_MLP("ffn_norm.weight", 0),
    DENSE_TAIL(0),
};

static const wisp_gguf_rule k_llama[] = {
    DENSE_ATTN(GA_X_ROPE_Q, GA_X_ROPE_K),
    DENSE_MLP("ffn_norm.weight", 0),
    DENSE_TAIL(0),
};

/* Qwen2 / Qwen 2.5: llama's names without the q/k permutation (NEOX rope)
 * and with q/k/v biases. */
static const wisp_gguf_rule k_qwen2[] = {
    DENSE_ATTN(0, 0),
    V("attn_q.bias", L "self_attn.q_proj.bias", "L%d.attn.q_bias", GA_ATTN, GA_P_VEC, 0, GA_N_Q),
    V("attn_k.bias", L "self_attn.k_proj.bias", "L%d.attn.k_bias", GA_ATTN, GA_P_VEC, 0, GA_N_KV),
    V("attn_v.bias", L "self_attn.v_proj.bias", "L%d.attn.v_bias", GA_ATTN, GA_P_VEC, 0, GA_N_KV),
    DENSE_MLP("ffn_norm.weight", 0),
    DENSE_TAIL(0),
};

/* Gemma 3 (conversion/gemma.py, Gemma3Model): every Gemma3RMSNorm weight
 * as 1 + w (wisp stores the same), no q/k permutation (NEOX rope), norms
 * after the attention and the feed-forward block. */
static const wisp_gguf_rule k_gemma3[] = {
    V("attn_norm.weight", L "input_layernorm.weight", "L%d.attn.qkv.norm", GA_ATTN, GA_P_VEC, GA_X_PLUS1, GA_N_HIDDEN),
    M("attn_q.weight", L "self_attn.q_proj.weight", "L%d.attn.qkv", GA_ATTN, GA_P_Q, 0),
    M("attn_k.weight", L "self_attn.k_proj.weight", "L%d.attn.qkv", GA_ATTN, GA_P_K, 0),
    M("attn_v.weight", L "self_attn.v_proj.weight", "L%d.attn.qkv", GA_ATTN, GA_P_V, 0),
    V("attn_q_norm.weight", L "self_attn.q_norm.weight", "L%d.attn.qkv.q_norm", GA_ATTN, GA_P_VEC, GA_X_PLUS1, GA_N_HEAD_DIM),
    V("attn_k_norm.weight", L "self_attn.k_norm.weight", "L%d.attn.qkv.k_norm", GA_ATTN, GA_P_VEC, GA_X_PLUS1, GA_N_HEAD_DIM),
    M("attn_output.weight", L "self_attn.o_proj.weight", "L%d.attn.o_proj", GA_ATTN, GA_P_O, 0),
    V("post_attention_norm.weight", L "post_attention_layernorm.weight", "L%d.attn.o_proj.post_norm", GA_ATTN, GA_P_VEC,
      GA_X_PLUS1, GA_N_HIDDEN),
    V("ffn_norm.weight", L "pre_feedforward_layernorm.weight", "L%d.mlp.gate_up.norm", GA_EVERY, GA_P_VEC, GA_X_PLUS1, GA_N_HIDDEN),
    M("ffn_gate.weight", L "mlp.gate_proj.weight", "L%d.mlp.gate_up", GA_EVERY, GA_P_GATE, 0),
    M("ffn_up.weight", L "mlp.up_proj.weight", "L%d.mlp.gate_up", GA_EVERY, GA_P_UP, 0),
    M("ffn_down.weight", L "mlp.down_proj.weight", "L%d.mlp.down", GA_EVERY, GA_P_DOWN, 0),
    V("post_ffw_norm.weight", L "post_feedforward_layernorm.weight", "L%d.mlp.down.post_norm", GA_EVERY, GA_P_VEC,
      GA_X_PLUS1, GA_N_HIDDEN),
    DENSE_TAIL(GA_X_PLUS1),
};

/* Qwen 3.5 (conversion/qwen.py: Qwen3NextModel + the v-head reorder):
 * every Qwen3_5RMSNorm weight as 1 + w, the gated norm plain; attn_q keeps
 * Hugging Face's per-head [q | gate] rows. */
static const wisp_gguf_rule k_qwen35[] = {
    V("attn_norm.weight", L "input_layernorm.weight", "L%d.lin.in_proj.norm", GA_LINEAR, GA_P_VEC, GA_X_PLUS1, GA_N_HIDDEN),
    M("attn_qkv.weight", L "linear_attn.in_proj_qkv.weight", "L%d.lin.in_proj", GA_LINEAR, GA_P_LQKV, GA_X_VH_QKV),
    M("attn_gate.weight", L "linear_attn.in_proj_z.weight", "L%d.lin.in_proj", GA_LINEAR, GA_P_LZ, GA_X_VH_ROWS),
    M("ssm_beta.weight", L "linear_attn.in_proj_b.weight", "L%d.lin.in_proj", GA_LINEAR, GA_P_LB, GA_X_VH_ROWS1),
    M("ssm_alpha.weight", L "linear_attn.in_proj_a.weight", "L%d.lin.in_proj", GA_LINEAR, GA_P_LA, GA_X_VH_ROWS1),
    V("ssm_conv1d.weight", L "linear_attn.conv1d.weight", "L%d.lin.conv.taps", GA_LINEAR, GA_P_TAPS, GA_X_VH_QKV, GA_N_LIN_QKV),
    V("ssm_a", L "linear_attn.A_log", "L%d.lin.A_log", GA_LINEAR, GA_P_VEC, GA_X_NEGEXP | GA_X_VH_ROWS1, GA_N_LIN_V_HEADS),
    V("ssm_dt.bias", L "linear_attn.dt_bias", "L%d.lin.dt_bias", GA_LINEAR, GA_P_VEC, GA_X_VH_ROWS1, GA_N_LIN_V_HEADS),
    V("ssm_norm.weight", L "linear_attn.norm.weight", "L%d.lin.norm", GA_LINEAR, GA_P_VEC, 0, GA_N_LIN_V_DIM),
    M("ssm_out.weight", L "linear_attn.out_proj.weight", "L%d.lin.out_proj", GA_LINEAR, GA_P_LOUT, GA_X_VH_COLS),
    V("attn_norm.weight", L "input_layernorm.weight", "L%d.attn.qkv.norm", GA_ATTN, GA_P_VEC, GA_X_PLUS1, GA_N_HIDDEN),
    M("attn_q.weight", L "self_attn.q_proj.weight", "L%d.attn.qkv", GA_ATTN, GA_P_Q, 0),
    M("attn_k.weight", L "self_attn.k_proj.weight", "L%d.attn.qkv", GA_ATTN, GA_P_K, 0),
    M("attn_v.weight", L "self_attn.v_proj.weight", "L%d.attn.qkv", GA_ATTN, GA_P_V, 0),
    M("attn_output.weight", L "self_attn.o_proj.weight", "L%d.attn.o_proj", GA_ATTN, GA_P_O, 0),
    V("attn_q_norm.weight", L "self_attn.q_norm.weight", "L%d.attn.qkv.q_norm", GA_ATTN, GA_P_VEC, GA_X_PLUS1, GA_N_HEAD_DIM),
    V("attn_k_norm.weight", L "self_attn.k_norm.weight", "L%d.attn.qkv.k_norm", GA_ATTN, GA_P_VEC, GA_X_PLUS1, GA_N_HEAD_DIM),
    DENSE_MLP("post_attention_norm.weight", GA_X_PLUS1),
    DENSE_TAIL(GA_X_PLUS1),
};

#undef L
#undef M
#undef V
#define N(t) (sizeof t / sizeof *t)

/* Released Qwen 3.5 checkpoints are multimodal: the text model under
 * model.language_model., beside a vision tower and an MTP head. */
static const char *const k_qwen35_ignore[] = {"model.visual.", "mtp.", NULL};

static const wisp_gguf_arch k_arches[] = {
    {"lfm2", "LFM2", k_lfm2, N(k_lfm2), "shortconv.in_proj.weight", WISP_LAYER_CONV, 0, NULL, NULL},
    {"qwen3", "Qwen3", k_qwen3, N(k_qwen3), NULL, 0, 0, NULL, NULL},
    {"llama", "Llama", k_llama, N(k_llama), NULL, 0, 0, NULL, NULL},
    {"qwen35", "Qwen 3.5", k_qwen35, N(k_qwen35), "ssm_a", WISP_LAYER_LINEAR, 1, "model.language_model.",
     k_qwen35_ignore},
    {"qwen2", "Qwen2", k_qwen2, N(k_qwen2), NULL, 0, 0, NULL, NULL},
    {"gemma3", "Gemma 3", k_gemma3, N(k_gemma3), NULL, 0, 0, NULL, NULL},
};

const wisp_gguf_arch *wisp_gguf_arch_find(const char *name) {
  for (size_t i = 0; i < N(k_arches); i++)
    if (!strcmp(k_arches[i].name, name)) return &k_arches[i];
  return NULL;
}

const char *wisp_gguf_arch_list(void) { return "lfm2, qwen3, llama, qwen35, qwen2 and gemma3"; }

const wisp_gguf_rule *wisp_gguf_rule_find(const wisp_gguf_arch *a, const char *name, int layer_tensor) {
  for (size_t i = 0; i < a->n_rules; i++)
    if ((a->rules[i].where != GA_GLOBAL) == (layer_tensor != 0) && !strcmp(a->rules[i].gguf, name))
      return &a->rules[i];
  return NULL;
}

int wisp_gguf_rule_applies(const wisp_gguf_rule *r, int kind) {
  switch (r->where) {
  case GA_EVERY: return 1;
  case GA_CONV: return kind == WISP_LAYER_CONV;
  case GA_ATTN: return kind == WISP_LAYER_ATTENTION;
  case GA_LINEAR: return kind == WISP_LAYER_LINEAR;
  default: return 0;
  }
}

void wisp_gguf_part_dims(const wisp_gguf_geom *g, int part, int *total, int *r0, int *rows, int *cols) {
  const int H = g->hidden, F = g->ffn, kv = g->kv_heads * g->head_dim;
  const int K = g->lin_k_heads * g->lin_k_dim, LV = g->lin_v_heads * g->lin_v_dim, NV = g->lin_v_heads;
  const int qkv = g->q_rows + 2 * kv, lin = 2 * K + 2 * LV + 2 * NV;
  /* {total rows, first row, rows, cols} per part */
  const int d[][4] = {
      [GA_P_VOCAB] = {g->vocab, 0, g->vocab, H},
      [GA_P_CONV_IN] = {3 * H, 0, 3 * H, H},
      [GA_P_CONV_OUT] = {H, 0, H, H},
      [GA_P_Q] = {qkv, 0, g->q_rows, H},
      [GA_P_K] = {qkv, g->q_rows, kv, H},
      [GA_P_V] = {qkv, g->q_rows + kv, kv, H},
      [GA_P_O] = {H, 0, H, g->heads * g->head_dim},
      [GA_P_GATE] = {2 * F, 0, F, H},
      [GA_P_UP] = {2 * F, F, F, H},
      [GA_P_DOWN] = {H, 0, H, F},
      [GA_P_LQKV] = {lin, 0, 2 * K + LV, H},
      [GA_P_LZ] = {lin, 2 * K + LV, LV, H},
      [GA_P_LB] = {lin, 2 * K + 2 * LV, NV, H},
      [GA_P_LA] = {lin, 2 * K + 2 * LV + NV, NV, H},
      [GA_P_LOUT] = {H, 0, H, LV},
  };
  *total = d[part][0];
  *r0 = d[part][1];
  *rows = d[part][2];
  *cols = d[part][3];
}

void wisp_gguf_vec_dims(const wisp_gguf_geom *g, const wisp_gguf_rule *r, int *rows, int *cols) {
  const int n[] = {
      [GA_N_HIDDEN] = g->hidden,
      [GA_N_HEAD_DIM] = g->head_dim,
      [GA_N_LIN_V_HEADS] = g->lin_v_heads,
      [GA_N_LIN_V_DIM] = g->lin_v_dim,
      [GA_N_LIN_QKV] = 2 * g->lin_k_heads * g->lin_k_dim + g->lin_v_heads * g->lin_v_dim,
      [GA_N_Q] = g->heads * g->head_dim,
      [GA_N_KV] = g->kv_heads * g->head_dim,
  };
  *rows = n[r->len];
  *cols = r->part == GA_P_TAPS ? g->conv_l : 1;
}

/* Rope pairs: GGUF row h*D + 2i + s is row h*D + s*D/2 + i. */
static wisp_status rope_map(int heads, int n, const char *what, int *src) {
  if (heads <= 0 || n % heads || (n / heads) % 2)
    return wisp_fail(WISP_EFORMAT, "%s: %d rows do not split into %d heads of even width", what, n, heads);
  const int D = n / heads, half = D / 2;
  for (int r = 0; r < n; r++) {
    int h = r / D, w = r % D;
    src[r] = h * D + (w % 2) * half + w / 2;
  }
  return WISP_OK;
}

/* Value heads, tiled <- grouped: `unit` rows per head, starting at `base`. */
static wisp_status vhead_map(const wisp_gguf_geom *g, int base, int unit, int n, const char *what, int *src) {
  const int NK = g->lin_k_heads, NV = g->lin_v_heads;
  if (NK <= 0 || NV % NK || n != base + NV * unit)
    return wisp_fail(WISP_EFORMAT, "%s: %d rows/columns are not %d + %d value heads of %d (%d key heads)", what, n,
                     base, NV, unit, NK);
  for (int r = 0; r < n; r++) src[r] = r;
  for (int r = base; r < n; r++) {
    int head = (r - base) / unit, within = (r - base) % unit;
    int j = head / NK, grp = head % NK;
    src[r] = base + (grp * (NV / NK) + j) * unit + within;
  }
  return WISP_OK;
}

unsigned wisp_gguf_xform_for(unsigned xform, int pairs) {
  return pairs == WISP_ROPE_ADJACENT ? xform & ~(unsigned)(GA_X_ROPE_Q | GA_X_ROPE_K) : xform;
}

int wisp_gguf_arch_rope_permuted(const wisp_gguf_arch *ga) {
  for (size_t i = 0; ga && i < ga->n_rules; i++)
    if (ga->rules[i].xform & (GA_X_ROPE_Q | GA_X_ROPE_K)) return 1;
  return 0;
}

wisp_status wisp_gguf_row_map(const wisp_gguf_geom *g, unsigned xform, int rows, const char *what, int *src) {
  if (xform & GA_X_ROPE_Q) return rope_map(g->heads, rows, what, src);
  if (xform & GA_X_ROPE_K) return rope_map(g->kv_heads, rows, what, src);
  if (xform & GA_X_VH_ROWS) return vhead_map(g, 0, g->lin_v_dim, rows, what, src);
  if (xform & GA_X_VH_ROWS1) return vhead_map(g, 0, 1, rows, what, src);
  if (xform & GA_X_VH_QKV) return vhead_map(g, 2 * g->lin_k_heads * g->lin_k_dim, g->lin_v_dim, rows, what, src);
  for (int r = 0; r < rows; r++) src[r] = r;
  return WISP_OK;
}

wisp_status wisp_gguf_col_map(const wisp_gguf_geom *g, unsigned xform, int cols, const char *what, int *src) {
  if (xform & GA_X_VH_COLS) return vhead_map(g, 0, g->lin_v_dim, cols, what, src);
  for (int c = 0; c < cols; c++) src[c] = c;
  return WISP_OK;
}

void wisp_gguf_values_export(unsigned xform, float *v, size_t n) {
  /* PLUS1: wisp already stores 1 + w, as GGUF does */
  if (xform & GA_X_NEGEXP)
    for (size_t i = 0; i < n; i++) v[i] = (float)-exp((double)v[i]);
}

void wisp_gguf_values_import(unsigned xform, float *v, size_t n) {
  /* exact for weights in [0.5, 2]: x - 1 is then representable */
  if (xform & GA_X_PLUS1)
    for (size_t i = 0; i < n; i++) v[i] -= 1.0f;
  /* a non-negative value becomes NaN, which convert reports as not finite */
  if (xform & GA_X_NEGEXP)
    for (size_t i = 0; i < n; i++) v[i] = (float)log(-(double)v[i]);
}
