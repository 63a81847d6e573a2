/* LFM2: Liquid's hybrid of gated short convolutions and grouped-query
 * attention, as Hugging Face's Lfm2ForCausalLM computes it.
 *
 *   x = embed(token)
 *   for each layer:
 *     h = rmsnorm(x, operator_norm)
 *     conv layer:      B, C, u = split(in_proj h); y = C * conv(B * u); x += out_proj y
 *     attention layer: q, k, v = split(qkv h); q, k = rope(rmsnorm_head(q), rmsnorm_head(k));
 *                      x += o_proj attend(q, k, v)
 *     x += down(silu(gate h') * up h'),  h' = rmsnorm(x, ffn_norm)
 *   logits = head(rmsnorm(x, final_norm))          (head tied to embed)
 *
 * Section names follow the seed manifest (docs/artifact.md): a matrix
 * NAME is NAME.quant + NAME.scales (Q4, + NAME.zero_points for Q4Z) or
 * NAME.weight (f32). This file binds them and describes the step as a graph
 * of generic ops (graph.h); it never does arithmetic itself. */
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
  wisp_matrix in_proj, out_proj; /* conv */
  wisp_vector taps;              /* conv: [hidden][L] */
  wisp_matrix qkv, o_proj;       /* attention */
  wisp_vector q_norm, k_norm;
  wisp_matrix gate_up, down;     /* gate rows first, then up rows */
} lfm2_layer;

typedef struct {
  wisp_shape shape;
  float eps;
  int qk_norm; /* 0: attention without q/k norm (wisp.qkNorm false) */
  lfm2_layer *layers;
  wisp_model_globals glob; /* embed, head, final norm, rope tables */
} lfm2_weights;

/* ---- binding ---- */



static void lfm2_free_weights(void *p) {
  lfm2_weights *w = p;
  if (!w) return;
  free(w->layers);
  wisp_model_globals_free(&w->glob);
  free(w);
}

static wisp_status lfm2_bind(const wisp_artifact *a, void **out) {
  *out = NULL;
  lfm2_weights *w = calloc(1, sizeof *w);
  if (!w) return wisp_fail(WISP_ENOMEM, "out of memory");
  w->shape = a->shape;
  w->eps = (float)a->norm_eps;
  /* wisp.qkNorm false (Llama imports): attention without per-head q/k RMSNorm. */
  const cJSON *qkn = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(a->manifest, "wisp"), "qkNorm");
  w->qk_norm = !cJSON_IsFalse(qkn);
  const wisp_shape *s = &a->shape;
  const int H = s->hidden, F = s->ffn, D = s->head_dim;
  wisp_status st = WISP_OK;
  w->layers = calloc((size_t)s->n_layers, sizeof(lfm2_layer));
  if (!w->layers) { st = wisp_fail(WISP_ENOMEM, "out of memory"); goto fail; }
  if (s->conv_cache < 1) { st = wisp_fail(WISP_EFORMAT, "convCache must be >= 1"); goto fail; }
  for (int i = 0; i < s->n_layers; i++) {
    lfm2_layer *L = &w->layers[i];
    char base[64], name[96];
    L->type = s->layer_types[i];
    if (L->type != WISP_LAYER_CONV && L->type != WISP_LAYER_ATTENTION) {
      st = wisp_fail(WISP_EFORMAT, "%s: layer %d is 'linear_attention', which architecture lfm2 does not have",
                     a->dir ? a->dir : "artifact", i);
      goto fail;
    }
    if (L->type == WISP_LAYER_CONV) {
      snprintf(base, sizeof base, "L%d.conv.in_proj", i);
      if ((st = wisp_matrix_bind(a, base, 3 * H, H, &L->in_proj))) goto fail;
      snprintf(name, sizeof name, "%s.norm", base);
      if ((st = wisp_model_bind_vector(a, name, H, &L->op_norm))) goto fail;
      snprintf(name, sizeof name, "L%d.conv.core.taps", i);
      if ((st = wisp_model_bind_vector(a, name, H * s->conv_cache, &L->taps))) goto fail;
      snprintf(base, sizeof base, "L%d.conv.out_proj", i);
      if ((st = wisp_matrix_bind(a, base, H, H, &L->out_proj))) goto fail;
    } else {
      snprintf(base, sizeof base, "L%d.attn.qkv", i);
      if ((st = wisp_matrix_bind(a, base, (s->heads + 2 * s->kv_heads) * D, H, &L->qkv))) goto fail;
      snprintf(name, sizeof name, "%s.norm", base);
      if ((st = wisp_model_bind_vector(a, name, H, &L->op_norm))) goto fail;
      if (w->qk_norm) {
        snprintf(name, sizeof name, "%s.q_norm", base);
        if ((st = wisp_model_bind_vector(a, name, D, &L->q_norm))) goto fail;
        snprintf(name, sizeof name, "%s.k_norm", base);
        if ((st = wisp_model_bind_vector(a, name, D, &L->k_norm))) goto fail;
      }
      snprintf(base, sizeof base, "L%d.attn.o_proj", i);
      if ((st = wisp_matrix_bind(a, base, H, s->heads * D, &L->o_proj))) goto fail;
    }
    snprintf(base, sizeof base, "L%d.mlp.gate_up", i);
    if ((st = wisp_matrix_bind(a, base, 2 * F, H, &L->gate_up))) goto fail;
    snprintf(name, sizeof name, "%s.norm", base);
    if ((st = wisp_model_bind_vector(a, name, H, &L->ffn_norm))) goto fail;
    snprintf(base, sizeof base, "L%d.mlp.down", i);
    if ((st = wisp_matrix_bind(a, base, H, F, &L->down))) goto fail;
    /* The seed's transposed copy of down (kquant/kscales) is for kernels
     * that walk the input dimension; when present its size must agree. */
    snprintf(name, sizeof name, "L%d.mlp.down.kquant", i);
    if (wisp_artifact_section(a, name)) {
      const uint8_t *p;
      if ((st = wisp_artifact_bytes(a, name, wisp_q4_quant_bytes(F, H), &p))) goto fail;
      snprintf(name, sizeof name, "L%d.mlp.down.kscales", i);
      if ((st = wisp_artifact_bytes(a, name, wisp_q4_scale_bytes(F, H), &p))) goto fail;
    }
  }
  if ((st = wisp_model_bind_globals(a, s->head_dim, 0, &w->glob))) goto fail;
  *out = w;
  return WISP_OK;
fail:
  lfm2_free_weights(w);
  return st;
}

static wisp_status lfm2_plan_shape(const void *p, wisp_model_shape *out) {
  const lfm2_weights *w = p;
  const wisp_shape *s = &w->shape;
  wisp_status st = wisp_model_shape_common(s, wisp_arch_lfm2.name, out);
  if (st) return st;
  for (int i = 0; i < s->n_layers; i++) out->layer_types[i] = s->layer_types[i];
  /* The weight dtype the kernels see: f32 artifacts plan f32 matmuls. */
  wisp_model_shape_ffn_quant(out, s->n_layers, &w->layers[0].gate_up, &w->layers[0].down, sizeof w->layers[0]);
  return WISP_OK;
}

static int lfm2_max_positions(const void *p) { return ((const lfm2_weights *)p)->glob.max_positions; }

/* ---- the step ---- */

/* The forward step as a graph (graph.h); w NULL: names and sizes only. */
static wisp_status lfm2_describe(const wisp_model_shape *s, void *p, wisp_graph *g) {
  lfm2_weights *w = p;
  const int H = s->hidden, D = s->head_dim, qkv = (s->heads + 2 * s->kv_heads) * D;
  *g = (wisp_graph){.hidden = H, .ffn = s->ffn, .vocab = s->vocab, .heads = s->heads, .kv_heads = s->kv_heads,
                    .head_dim = D, .rotary_dim = D, .conv_len = s->conv_cache};
  if (w) {
    g->eps = w->eps;
    wisp_model_globals_describe(&w->glob, g);
  }
  for (int i = 0; i < s->n_layers; i++) {
    lfm2_layer *L = w ? &w->layers[i] : NULL;
    wisp_gnode *m = NULL;
    if (s->layer_types[i] == WISP_LAYER_CONV) {
      if (wisp_graph_rmsnorm(g, i, "conv.in_proj.norm", L ? &L->op_norm : NULL, H, WISP_ACT_X, WISP_ACT_XN) &&
          wisp_graph_matmul(g, i, "conv.in_proj", L ? &L->in_proj : NULL, 3 * H, H, WISP_ACT_XN, WISP_ACT_BIG, 0) &&
          (m = wisp_graph_mixer(g, WISP_GOP_SHORTCONV, i, "conv.core", 3 * H, H)))
        m->w = L ? &L->taps : NULL;
      if (!m || !wisp_graph_matmul(g, i, "conv.out_proj", L ? &L->out_proj : NULL, H, H, WISP_ACT_MID, WISP_ACT_X, 1))
        goto oom;
    } else if (s->layer_types[i] == WISP_LAYER_ATTENTION) {
      if (wisp_graph_rmsnorm(g, i, "attn.qkv.norm", L ? &L->op_norm : NULL, H, WISP_ACT_X, WISP_ACT_XN) &&
          wisp_graph_matmul(g, i, "attn.qkv", L ? &L->qkv : NULL, qkv, H, WISP_ACT_XN, WISP_ACT_BIG, 0) &&
          (m = wisp_graph_mixer(g, WISP_GOP_ATTENTION, i, "attn.core", qkv, s->heads * D)) && L && w->qk_norm) {
        m->q_norm = &L->q_norm; /* Llama imports have none (wisp.qkNorm false) */
        m->k_norm = &L->k_norm;
      }
      if (!m || !wisp_graph_matmul(g, i, "attn.o_proj", L ? &L->o_proj : NULL, H, s->heads * D, WISP_ACT_MID,
                                   WISP_ACT_X, 1))
        goto oom;
    } else {
      wisp_graph_free(g);
      return wisp_fail(WISP_EUNSUPPORTED, "plan: layer %d is linear_attention, which architecture lfm2 does not have", i);
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

const wisp_arch wisp_arch_lfm2 = {
    .name = "lfm2",
    .bind = lfm2_bind,
    .free_weights = lfm2_free_weights,
    .max_positions = lfm2_max_positions,
    .plan_shape = lfm2_plan_shape,
    .describe = lfm2_describe,
    .registry_key = "wgsl",
};
