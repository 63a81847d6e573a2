/* Qwen 2 / Qwen 2.5: a dense grouped-query-attention transformer with
 * biases on the q, k and v products, as Hugging Face's Qwen2ForCausalLM
 * computes it (modeling_qwen2.py):
 *
 *   x = embed(token)
 *   for each layer:
 *     h = rmsnorm(x, input_layernorm)
 *     q, k, v = q_proj h + q_bias, k_proj h + k_bias, v_proj h + v_bias
 *     q, k = rope(q), rope(k)                  (NEOX rotate-half, rope_theta)
 *     x += o_proj attend(q, k, v)              (softmax(q k^T / sqrt(head_dim)), GQA, causal)
 *     x += down(silu(gate h') * up h'),  h' = rmsnorm(x, post_attention_layernorm)
 *   logits = lm_head(rmsnorm(x, norm))         (tied to embed in the small models)
 *
 * Sections: L%d.attn.qkv (q, k, v rows), its .norm, L%d.attn.q_bias /
 * k_bias / v_bias (f32), L%d.attn.o_proj, L%d.mlp.gate_up (+ .norm),
 * L%d.mlp.down, embed, head (absent: tied), head.norm, rope.*
 * (docs/artifact.md). The biases are one add_bias node after the qkv
 * product, over the three joined in q, k, v order. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/common.h"
#include "model/model.h"
#include "format/quant.h"
#include "util/err.h"

typedef struct {
  wisp_vector op_norm, ffn_norm, bias; /* bias: [q | k | v] rows of the qkv product */
  wisp_matrix qkv, o_proj, gate_up, down;
} qwen2_layer;

typedef struct {
  wisp_shape shape;
  float eps;
  qwen2_layer *layers;
  float *biases; /* the joined biases of every layer */
  wisp_model_globals glob;
} qwen2_weights;

static void qwen2_free_weights(void *p) {
  qwen2_weights *w = p;
  if (!w) return;
  free(w->layers);
  free(w->biases);
  wisp_model_globals_free(&w->glob);
  free(w);
}

static wisp_status qwen2_bind(const wisp_artifact *a, void **out) {
  *out = NULL;
  const wisp_shape *s = &a->shape;
  const int H = s->hidden, F = s->ffn, D = s->head_dim;
  const int QR = s->heads * D, KR = s->kv_heads * D, QKV = QR + 2 * KR;
  qwen2_weights *w = calloc(1, sizeof *w);
  if (!w) return wisp_fail(WISP_ENOMEM, "out of memory");
  w->shape = *s;
  w->shape.layer_types = NULL; /* the artifact owns them */
  w->eps = (float)a->norm_eps;
  wisp_status st = WISP_OK;
  w->layers = calloc((size_t)s->n_layers, sizeof(qwen2_layer));
  w->biases = malloc(sizeof(float) * (size_t)QKV * (size_t)s->n_layers + 1);
  if (!w->layers || !w->biases) { st = wisp_fail(WISP_ENOMEM, "out of memory"); goto fail; }
  for (int i = 0; i < s->n_layers; i++) {
    qwen2_layer *L = &w->layers[i];
    char base[64], name[96];
    if (s->layer_types[i] != WISP_LAYER_ATTENTION) {
      st = wisp_fail(WISP_EFORMAT, "%s: layer %d is not an attention layer, the only kind architecture qwen2 has",
                     a->dir ? a->dir : "artifact", i);
      goto fail;
    }
    snprintf(base, sizeof base, "L%d.attn.qkv", i);
    if ((st = wisp_matrix_bind(a, base, QKV, H, &L->qkv))) goto fail;
    snprintf(name, sizeof name, "%s.norm", base);
    if ((st = wisp_model_bind_vector(a, name, H, &L->op_norm))) goto fail;
    /* q, k and v biases joined in the qkv product's row order */
    float *joined = w->biases + (size_t)QKV * i;
    const char *parts[3] = {"q", "k", "v"};
    const int rows[3] = {QR, KR, KR};
    for (int k = 0, at = 0; k < 3; at += rows[k], k++) {
      wisp_vector v;
      snprintf(name, sizeof name, "L%d.attn.%s_bias", i, parts[k]);
      if ((st = wisp_model_bind_vector(a, name, rows[k], &v))) goto fail;
      memcpy(joined + at, v.data, sizeof(float) * (size_t)rows[k]);
    }
    L->bias = (wisp_vector){QKV, joined, NULL};
    snprintf(base, sizeof base, "L%d.attn.o_proj", i);
    if ((st = wisp_matrix_bind(a, base, H, QR, &L->o_proj))) goto fail;
    snprintf(base, sizeof base, "L%d.mlp.gate_up", i);
    if ((st = wisp_matrix_bind(a, base, 2 * F, H, &L->gate_up))) goto fail;
    snprintf(name, sizeof name, "%s.norm", base);
    if ((st = wisp_model_bind_vector(a, name, H, &L->ffn_norm))) goto fail;
    snprintf(base, sizeof base, "L%d.mlp.down", i);
    if ((st = wisp_matrix_bind(a, base, H, F, &L->down))) goto fail;
  }
  if ((st = wisp_model_bind_globals(a, D, 1, &w->glob))) goto fail;
  *out = w;
  return WISP_OK;
fail:
  qwen2_free_weights(w);
  return st;
}

static wisp_status qwen2_plan_shape(const void *p, wisp_model_shape *out) {
  const qwen2_weights *w = p;
  const wisp_shape *s = &w->shape;
  wisp_status st = wisp_model_shape_common(s, wisp_arch_qwen2.name, out);
  if (st) return st;
  wisp_model_shape_ffn_quant(out, s->n_layers, &w->layers[0].gate_up, &w->layers[0].down, sizeof w->layers[0]);
  return WISP_OK;
}

static int qwen2_max_positions(const void *p) { return ((const qwen2_weights *)p)->glob.max_positions; }

/* The forward step as a graph (graph.h); w NULL: names and sizes only. */
static wisp_status qwen2_describe(const wisp_model_shape *s, void *p, wisp_graph *g) {
  qwen2_weights *w = p;
  const int H = s->hidden, D = s->head_dim, qkv = (s->heads + 2 * s->kv_heads) * D;
  *g = (wisp_graph){.hidden = H, .ffn = s->ffn, .vocab = s->vocab, .heads = s->heads, .kv_heads = s->kv_heads,
                    .head_dim = D, .rotary_dim = D, .conv_len = s->conv_cache};
  if (w) {
    g->eps = w->eps;
    wisp_model_globals_describe(&w->glob, g);
  }
  for (int i = 0; i < s->n_layers; i++) {
    qwen2_layer *L = w ? &w->layers[i] : NULL;
    wisp_gnode *b = NULL;
    if (!wisp_graph_rmsnorm(g, i, "attn.qkv.norm", L ? &L->op_norm : NULL, H, WISP_ACT_X, WISP_ACT_XN) ||
        !wisp_graph_matmul(g, i, "attn.qkv", L ? &L->qkv : NULL, qkv, H, WISP_ACT_XN, WISP_ACT_BIG, 0) ||
        !(b = wisp_graph_rowop(g, WISP_GOP_ADD_BIAS, i, "attn.qkv.bias", qkv, WISP_ACT_BIG, WISP_ACT_BIG)))
      goto oom;
    b->w = L ? &L->bias : NULL; /* before the next append moves the nodes (graph.h) */
    if (!wisp_graph_mixer(g, WISP_GOP_ATTENTION, i, "attn.core", qkv, s->heads * D) ||
        !wisp_graph_matmul(g, i, "attn.o_proj", L ? &L->o_proj : NULL, H, s->heads * D, WISP_ACT_MID, WISP_ACT_X, 1))
      goto oom;
    wisp_status st = wisp_graph_add_ffn(g, i, L ? &L->ffn_norm : NULL, L ? &L->gate_up : NULL, L ? &L->down : NULL);
    if (st) {
      wisp_graph_free(g);
      return st;
    }
  }
  return WISP_OK;
oom:
  wisp_graph_free(g);
  return wisp_fail(WISP_ENOMEM, "out of memory for the step graph");
}

/* Profiles written for other runtimes name Hugging Face modules. */
static const char *const k_profile_aliases[][2] = {
    {"q_proj", "attn.qkv"},    {"k_proj", "attn.qkv"},       {"v_proj", "attn.qkv"},    {"o_proj", "attn.o_proj"},
    {"gate_proj", "mlp.gate_up"}, {"up_proj", "mlp.gate_up"}, {"down_proj", "mlp.down"}};

const wisp_arch wisp_arch_qwen2 = {
    .name = "qwen2",
    .bind = qwen2_bind,
    .free_weights = qwen2_free_weights,
    .max_positions = qwen2_max_positions,
    .plan_shape = qwen2_plan_shape,
    .describe = qwen2_describe,
    .registry_key = "wgsl",
    .profile_aliases = k_profile_aliases,
    .n_profile_aliases = (int)(sizeof k_profile_aliases / sizeof k_profile_aliases[0]),
    .plan_id_names_arch = 1,
};
