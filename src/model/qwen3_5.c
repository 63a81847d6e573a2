/* Qwen 3.5 (text): hybrid of Gated DeltaNet ("linear_attention") and gated
 * grouped-query attention ("full_attention") layers, as Hugging Face
 * transformers 5.x's Qwen3_5ForCausalLM computes it (checked against
 * transformers/models/qwen3_5/modeling_qwen3_5.py):
 *
 *   x = embed(token)
 *   for each layer:
 *     h = rmsnorm(x) * (1 + input_layernorm.w)           (Qwen3_5RMSNorm)
 *     linear_attention (Qwen3_5GatedDeltaNet):
 *       qkv = in_proj_qkv h; z = in_proj_z h; b = in_proj_b h; a = in_proj_a h
 *       c = silu(causal depthwise conv1d(qkv), kernel linear_conv_kernel_dim,
 *           no bias); q, k, v = split(c, [K, K, V])
 *       q, k = l2norm per head (x * rsqrt(sum x^2 + 1e-6)); q *= k_dim^-0.5
 *       beta = sigmoid(b); g = -exp(A_log) * softplus(a + dt_bias)
 *       q/k heads repeat_interleave'd to v heads (v-head h uses k-head
 *       h / (v_heads / k_heads))
 *       per v-head, S [k_dim][v_dim]: S *= exp(g); kv = S^T k;
 *         delta = (v - kv) * beta; S += k delta^T; o = S^T q
 *       o = rmsnorm(o) * norm.w * silu(z)  (Qwen3_5RMSNormGated: plain w)
 *       x += out_proj o
 *     full_attention (Qwen3_5Attention):
 *       (q|gate) per head = q_proj h viewed [heads][2*head_dim], q first;
 *       q = rmsnorm(q)*(1+q_norm.w), k = rmsnorm(k_proj h)*(1+k_norm.w) per head
 *       RoPE (NEOX rotate-half) on the first rotary_dim = partial_rotary_factor
 *       * head_dim dims of q and k; softmax(q k^T / sqrt(head_dim)) v, GQA
 *       x += o_proj (attn * sigmoid(gate))
 *     x += down(silu(gate_proj h') * up_proj h'),
 *       h' = rmsnorm(x) * (1 + post_attention_layernorm.w)
 *   logits = lm_head(rmsnorm(x) * (1 + norm.w))        (tied to embed when
 *                                                       tie_word_embeddings)
 *
 * The artifact stores every (1 + w) norm weight already added (docs/artifact.md,
 * "Qwen 3.5"), so the generic rmsnorm op applies; HF computes 1 + w in f32
 * too, so this is exact. The text model's mrope sections collapse to plain
 * RoPE because all three position ids are equal for text. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/common.h"
#include "model/model.h"
#include "format/quant.h"
#include "util/err.h"

typedef struct {
  int type;
  wisp_vector op_norm, ffn_norm;
  wisp_matrix in_proj, out_proj;             /* linear: [qkv | z | b | a] rows */
  wisp_vector taps, a_log, dt_bias, gnorm;   /* linear */
  wisp_matrix qkv, o_proj;                   /* full */
  wisp_vector q_norm, k_norm;
  wisp_matrix gate_up, down;
} q35_layer;

typedef struct {
  wisp_shape shape;
  float eps;
  q35_layer *layers;
  wisp_model_globals glob; /* embed, head, final norm, rope tables */
} q35_weights;

static const char *dir_of(const wisp_artifact *a) { return a->dir ? a->dir : "artifact"; }


static void q35_free_weights(void *p) {
  q35_weights *w = p;
  if (!w) return;
  free(w->layers);
  wisp_model_globals_free(&w->glob);
  free(w);
}

/* Rows of the fused linear in_proj: qkv (2K + V), z (V), b, a (v_heads each). */
static int in_proj_rows(const wisp_shape *s) {
  int K = s->lin_k_heads * s->lin_k_dim, V = s->lin_v_heads * s->lin_v_dim;
  return 2 * K + 2 * V + 2 * s->lin_v_heads;
}

static wisp_status check_shape(const wisp_artifact *a) {
  const wisp_shape *s = &a->shape;
  int has_linear = 0;
  for (int i = 0; i < s->n_layers; i++) {
    if (s->layer_types[i] == WISP_LAYER_CONV)
      return wisp_fail(WISP_EFORMAT, "%s: layer %d is 'conv', which architecture qwen3_5 does not have "
                       "(linear_attention, full_attention)", dir_of(a), i);
    has_linear |= s->layer_types[i] == WISP_LAYER_LINEAR;
  }
  if (s->rotary_dim <= 0 || s->rotary_dim > s->head_dim || s->rotary_dim % 2)
    return wisp_fail(WISP_EFORMAT, "%s: runtime.shape.rotaryDim (%d) must be even and in 2..headDim (%d)", dir_of(a),
                     s->rotary_dim, s->head_dim);
  if (has_linear) {
    if (s->lin_k_heads <= 0 || s->lin_v_heads <= 0 || s->lin_k_dim <= 0 || s->lin_v_dim <= 0)
      return wisp_fail(WISP_EFORMAT, "%s: runtime.shape needs linearKeyHeads, linearValueHeads, linearKeyDim and "
                       "linearValueDim for linear_attention layers", dir_of(a));
    if (s->lin_v_heads % s->lin_k_heads)
      return wisp_fail(WISP_EFORMAT, "%s: runtime.shape.linearValueHeads (%d) must be a multiple of linearKeyHeads (%d)",
                       dir_of(a), s->lin_v_heads, s->lin_k_heads);
    if (s->conv_cache < 1) return wisp_fail(WISP_EFORMAT, "%s: runtime.shape.convCache must be >= 1", dir_of(a));
  }
  return WISP_OK;
}

static wisp_status q35_bind(const wisp_artifact *a, void **out) {
  *out = NULL;
  wisp_status st = check_shape(a);
  if (st) return st;
  q35_weights *w = calloc(1, sizeof *w);
  if (!w) return wisp_fail(WISP_ENOMEM, "out of memory");
  w->shape = a->shape;
  w->shape.layer_types = NULL; /* the artifact owns it; use a->shape for types */
  w->eps = (float)a->norm_eps;
  const wisp_shape *s = &a->shape;
  const int H = s->hidden, F = s->ffn, D = s->head_dim;
  const int K = s->lin_k_heads * s->lin_k_dim, V = s->lin_v_heads * s->lin_v_dim;
  w->layers = calloc((size_t)s->n_layers, sizeof(q35_layer));
  if (!w->layers) { st = wisp_fail(WISP_ENOMEM, "out of memory"); goto fail; }
  for (int i = 0; i < s->n_layers; i++) {
    q35_layer *L = &w->layers[i];
    char base[64], name[96];
    L->type = s->layer_types[i];
    if (L->type == WISP_LAYER_LINEAR) {
      snprintf(base, sizeof base, "L%d.lin.in_proj", i);
      if ((st = wisp_matrix_bind(a, base, in_proj_rows(s), H, &L->in_proj))) goto fail;
      snprintf(name, sizeof name, "%s.norm", base);
      if ((st = wisp_model_bind_vector(a, name, H, &L->op_norm))) goto fail;
      snprintf(name, sizeof name, "L%d.lin.conv.taps", i);
      if ((st = wisp_model_bind_vector(a, name, (2 * K + V) * s->conv_cache, &L->taps))) goto fail;
      snprintf(name, sizeof name, "L%d.lin.A_log", i);
      if ((st = wisp_model_bind_vector(a, name, s->lin_v_heads, &L->a_log))) goto fail;
      snprintf(name, sizeof name, "L%d.lin.dt_bias", i);
      if ((st = wisp_model_bind_vector(a, name, s->lin_v_heads, &L->dt_bias))) goto fail;
      snprintf(name, sizeof name, "L%d.lin.norm", i);
      if ((st = wisp_model_bind_vector(a, name, s->lin_v_dim, &L->gnorm))) goto fail;
      snprintf(base, sizeof base, "L%d.lin.out_proj", i);
      if ((st = wisp_matrix_bind(a, base, H, V, &L->out_proj))) goto fail;
    } else {
      snprintf(base, sizeof base, "L%d.attn.qkv", i);
      if ((st = wisp_matrix_bind(a, base, (2 * s->heads + 2 * s->kv_heads) * D, H, &L->qkv))) goto fail;
      snprintf(name, sizeof name, "%s.norm", base);
      if ((st = wisp_model_bind_vector(a, name, H, &L->op_norm))) goto fail;
      snprintf(name, sizeof name, "%s.q_norm", base);
      if ((st = wisp_model_bind_vector(a, name, D, &L->q_norm))) goto fail;
      snprintf(name, sizeof name, "%s.k_norm", base);
      if ((st = wisp_model_bind_vector(a, name, D, &L->k_norm))) goto fail;
      snprintf(base, sizeof base, "L%d.attn.o_proj", i);
      if ((st = wisp_matrix_bind(a, base, H, s->heads * D, &L->o_proj))) goto fail;
    }
    snprintf(base, sizeof base, "L%d.mlp.gate_up", i);
    if ((st = wisp_matrix_bind(a, base, 2 * F, H, &L->gate_up))) goto fail;
    snprintf(name, sizeof name, "%s.norm", base);
    if ((st = wisp_model_bind_vector(a, name, H, &L->ffn_norm))) goto fail;
    snprintf(base, sizeof base, "L%d.mlp.down", i);
    if ((st = wisp_matrix_bind(a, base, H, F, &L->down))) goto fail;
  }
  if ((st = wisp_model_bind_globals(a, s->rotary_dim, 1, &w->glob))) goto fail;
  *out = w;
  return WISP_OK;
fail:
  q35_free_weights(w);
  return st;
}

static wisp_status q35_plan_shape(const void *p, wisp_model_shape *out) {
  const q35_weights *w = p;
  const wisp_shape *s = &w->shape;
  wisp_status st = wisp_model_shape_common(s, wisp_arch_qwen3_5.name, out);
  if (st) return st;
  for (int i = 0; i < s->n_layers; i++) out->layer_types[i] = w->layers[i].type;
  out->lin_k_heads = s->lin_k_heads;
  out->lin_v_heads = s->lin_v_heads;
  out->lin_k_dim = s->lin_k_dim;
  out->lin_v_dim = s->lin_v_dim;
  wisp_model_shape_ffn_quant(out, s->n_layers, &w->layers[0].gate_up, &w->layers[0].down, sizeof w->layers[0]);
  return WISP_OK;
}

static int q35_max_positions(const void *p) { return ((const q35_weights *)p)->glob.max_positions; }

/* ---- the step ---- */

/* The forward step as a graph (graph.h); w NULL: names and sizes only. */
static wisp_status q35_describe(const wisp_model_shape *s, void *p, wisp_graph *g) {
  q35_weights *w = p;
  const int H = s->hidden, D = s->head_dim;
  const int K = s->lin_k_heads * s->lin_k_dim, V = s->lin_v_heads * s->lin_v_dim;
  const int in_rows = 2 * K + 2 * V + 2 * s->lin_v_heads, qkv = (2 * s->heads + 2 * s->kv_heads) * D;
  *g = (wisp_graph){.hidden = H, .ffn = s->ffn, .vocab = s->vocab, .heads = s->heads, .kv_heads = s->kv_heads,
                    .head_dim = D, .conv_len = s->conv_cache, .lin_k_heads = s->lin_k_heads,
                    .lin_v_heads = s->lin_v_heads, .lin_k_dim = s->lin_k_dim, .lin_v_dim = s->lin_v_dim};
  if (w) {
    g->rotary_dim = w->shape.rotary_dim;
    g->eps = w->eps;
    wisp_model_globals_describe(&w->glob, g);
  }
  for (int i = 0; i < s->n_layers; i++) {
    q35_layer *L = w ? &w->layers[i] : NULL;
    wisp_gnode *m = NULL;
    if (s->layer_types[i] == WISP_LAYER_LINEAR) {
      /* Gated DeltaNet: one product for [qkv | z | b | a]. */
      if (wisp_graph_rmsnorm(g, i, "lin.in_proj.norm", L ? &L->op_norm : NULL, H, WISP_ACT_X, WISP_ACT_XN) &&
          wisp_graph_matmul(g, i, "lin.in_proj", L ? &L->in_proj : NULL, in_rows, H, WISP_ACT_XN, WISP_ACT_BIG, 0) &&
          (m = wisp_graph_mixer(g, WISP_GOP_DELTANET, i, "lin.core", in_rows, V)) && L) {
        m->w = &L->taps;
        m->a_log = &L->a_log;
        m->dt_bias = &L->dt_bias;
        m->gnorm = &L->gnorm;
      }
      if (!m || !wisp_graph_matmul(g, i, "lin.out_proj", L ? &L->out_proj : NULL, H, V, WISP_ACT_MID, WISP_ACT_X, 1))
        goto oom;
    } else {
      /* Gated attention: q_proj rows carry (q | gate) per head. */
      if (wisp_graph_rmsnorm(g, i, "attn.qkv.norm", L ? &L->op_norm : NULL, H, WISP_ACT_X, WISP_ACT_XN) &&
          wisp_graph_matmul(g, i, "attn.qkv", L ? &L->qkv : NULL, qkv, H, WISP_ACT_XN, WISP_ACT_BIG, 0) &&
          (m = wisp_graph_mixer(g, WISP_GOP_ATTENTION_GATED, i, "attn.core", qkv, s->heads * D)) && L) {
        m->q_norm = &L->q_norm;
        m->k_norm = &L->k_norm;
      }
      if (!m || !wisp_graph_matmul(g, i, "attn.o_proj", L ? &L->o_proj : NULL, H, s->heads * D, WISP_ACT_MID,
                                   WISP_ACT_X, 1))
        goto oom;
    }
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

/* Profiles written for other runtimes name Hugging Face modules: q/k/v
 * share attn.qkv here, gate/up share mlp.gate_up, and "attention" is the
 * gated attention op. */
static const char *const k_profile_aliases[][2] = {
    {"q_proj", "attn.qkv"},       {"k_proj", "attn.qkv"},       {"v_proj", "attn.qkv"},
    {"o_proj", "attn.o_proj"},    {"gate_proj", "mlp.gate_up"}, {"up_proj", "mlp.gate_up"},
    {"down_proj", "mlp.down"},    {"attention", "attention_gated"}};

const wisp_arch wisp_arch_qwen3_5 = {
    .name = "qwen3_5",
    .bind = q35_bind,
    .free_weights = q35_free_weights,
    .max_positions = q35_max_positions,
    .plan_shape = q35_plan_shape,
    .describe = q35_describe,
    .registry_key = "wgsl_qwen3_5",
    .profile_aliases = k_profile_aliases,
    .n_profile_aliases = (int)(sizeof k_profile_aliases / sizeof k_profile_aliases[0]),
    .plan_id_names_arch = 1,
};
