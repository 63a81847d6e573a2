/* Gemma 3 (text): a dense grouped-query-attention transformer with norms
 * before and after each block, GELU-tanh gating and layers of two kinds,
 * as Hugging Face's Gemma3ForCausalLM computes it (modeling_gemma3.py):
 *
 *   x = embed(token) * sqrt(hidden)
 *   for each layer:
 *     h = rmsnorm(x, input_layernorm)
 *     q, k, v = q_proj h, k_proj h, v_proj h
 *     q, k = rope(rmsnorm_head(q, q_norm)), rope(rmsnorm_head(k, k_norm))
 *         (NEOX rotate-half; sliding layers rope with rope_local_base_freq,
 *          global layers with rope_theta)
 *     a = attend(q, k, v)  (scores * query_pre_attn_scalar^-1/2, GQA, causal;
 *         sliding layers see the last sliding_window keys only)
 *     x += rmsnorm(o_proj a, post_attention_layernorm)
 *     h' = rmsnorm(x, pre_feedforward_layernorm)
 *     x += rmsnorm(down(gelu_tanh(gate h') * up h'), post_feedforward_layernorm)
 *   logits = head(rmsnorm(x, norm))           (head tied to embed)
 *
 * Every Gemma3RMSNorm multiplies by (1 + w); the artifact stores 1 + w (as
 * llama.cpp's GGUF does), so the generic rmsnorm op applies.
 *
 * Sections: L%d.attn.qkv (+ .norm, .q_norm, .k_norm), L%d.attn.o_proj (+
 * .post_norm), L%d.mlp.gate_up (+ .norm), L%d.mlp.down (+ .post_norm),
 * embed, head (absent: tied), head.norm, rope.freq (global layers),
 * rope.freq_local (sliding layers). The manifest's wisp.slidingWindow and
 * wisp.globalLayers say which layers slide (docs/artifact.md). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/common.h"
#include "model/model.h"
#include "format/quant.h"
#include "util/err.h"

typedef struct {
  wisp_vector op_norm, q_norm, k_norm, attn_post, ffn_norm, ffn_post;
  wisp_matrix qkv, o_proj, gate_up, down;
  int window; /* 0: a global layer */
} gemma3_layer;

typedef struct {
  wisp_shape shape;
  float eps, attn_scale;
  gemma3_layer *layers;
  wisp_model_globals glob;
  wisp_vector rope_freq_local, rope_cos_local, rope_sin_local;
  float *rope_local_owned;
} gemma3_weights;

static const char *dir_of(const wisp_artifact *a) { return a->dir ? a->dir : "artifact"; }

static void gemma3_free_weights(void *p) {
  gemma3_weights *w = p;
  if (!w) return;
  free(w->layers);
  free(w->rope_local_owned);
  wisp_model_globals_free(&w->glob);
  free(w);
}

/* wisp.slidingWindow (> 0) and wisp.globalLayers (layer indices): each
 * layer's window, 0 for the global ones. */
static wisp_status layer_windows(const wisp_artifact *a, gemma3_weights *w) {
  const cJSON *wx = cJSON_GetObjectItemCaseSensitive(a->manifest, "wisp");
  const cJSON *sw = cJSON_GetObjectItemCaseSensitive(wx, "slidingWindow");
  const cJSON *gl = cJSON_GetObjectItemCaseSensitive(wx, "globalLayers");
  if (!cJSON_IsNumber(sw) || sw->valuedouble < 1 || sw->valuedouble > 1e9 || !cJSON_IsArray(gl))
    return wisp_fail(WISP_EFORMAT, "%s: gemma3 needs wisp.slidingWindow (a positive number) and wisp.globalLayers "
                     "(layer indices)", dir_of(a));
  for (int i = 0; i < w->shape.n_layers; i++) w->layers[i].window = (int)sw->valuedouble;
  const cJSON *e;
  cJSON_ArrayForEach(e, gl) {
    if (!cJSON_IsNumber(e) || e->valuedouble < 0 || e->valuedouble >= w->shape.n_layers ||
        e->valuedouble != floor(e->valuedouble))
      return wisp_fail(WISP_EFORMAT, "%s: wisp.globalLayers holds %g, not a layer index below %d", dir_of(a),
                       cJSON_IsNumber(e) ? e->valuedouble : -1.0, w->shape.n_layers);
    w->layers[(int)e->valuedouble].window = 0;
  }
  /* wisp.attnScale: the scores' scale (query_pre_attn_scalar^-1/2); absent: 1/sqrt(head_dim) */
  const cJSON *sc = cJSON_GetObjectItemCaseSensitive(wx, "attnScale");
  if (sc && !(cJSON_IsNumber(sc) && sc->valuedouble > 0 && sc->valuedouble < 1e3))
    return wisp_fail(WISP_EFORMAT, "%s: wisp.attnScale must be a positive number", dir_of(a));
  w->attn_scale = sc ? (float)sc->valuedouble : 0.0f;
  return WISP_OK;
}

/* The sliding layers' rope: rope.freq_local, tables of the global ones' rows. */
static wisp_status bind_local_rope(const wisp_artifact *a, gemma3_weights *w) {
  const int half = w->shape.head_dim / 2, rows = w->glob.positions;
  wisp_status st = wisp_model_bind_vector(a, "rope.freq_local", half, &w->rope_freq_local);
  if (st) return st;
  w->rope_local_owned = malloc(sizeof(float) * 2 * (size_t)rows * half);
  if (!w->rope_local_owned) return wisp_fail(WISP_ENOMEM, "out of memory for rope tables");
  float *cs = w->rope_local_owned, *sn = cs + (size_t)rows * half;
  wisp_rope_rows(w->rope_freq_local.data, half, rows, cs, sn);
  w->rope_cos_local = (wisp_vector){rows * half, cs, NULL};
  w->rope_sin_local = (wisp_vector){rows * half, sn, NULL};
  return WISP_OK;
}

static wisp_status gemma3_bind(const wisp_artifact *a, void **out) {
  *out = NULL;
  const wisp_shape *s = &a->shape;
  const int H = s->hidden, F = s->ffn, D = s->head_dim, QR = s->heads * D;
  gemma3_weights *w = calloc(1, sizeof *w);
  if (!w) return wisp_fail(WISP_ENOMEM, "out of memory");
  w->shape = *s;
  w->shape.layer_types = NULL; /* the artifact owns them */
  w->eps = (float)a->norm_eps;
  wisp_status st = WISP_OK;
  if (!(w->layers = calloc((size_t)s->n_layers, sizeof(gemma3_layer)))) {
    st = wisp_fail(WISP_ENOMEM, "out of memory");
    goto fail;
  }
  if ((st = layer_windows(a, w))) goto fail;
  for (int i = 0; i < s->n_layers; i++) {
    gemma3_layer *L = &w->layers[i];
    char name[96];
    if (s->layer_types[i] != WISP_LAYER_ATTENTION) {
      st = wisp_fail(WISP_EFORMAT, "%s: layer %d is not an attention layer, the only kind architecture gemma3 has",
                     dir_of(a), i);
      goto fail;
    }
    struct { const char *fmt; int n; wisp_vector *v; } vecs[] = {
        {"L%d.attn.qkv.norm", H, &L->op_norm},       {"L%d.attn.qkv.q_norm", D, &L->q_norm},
        {"L%d.attn.qkv.k_norm", D, &L->k_norm},      {"L%d.attn.o_proj.post_norm", H, &L->attn_post},
        {"L%d.mlp.gate_up.norm", H, &L->ffn_norm},   {"L%d.mlp.down.post_norm", H, &L->ffn_post}};
    for (size_t k = 0; k < sizeof vecs / sizeof vecs[0]; k++) {
      snprintf(name, sizeof name, vecs[k].fmt, i);
      if ((st = wisp_model_bind_vector(a, name, vecs[k].n, vecs[k].v))) goto fail;
    }
    struct { const char *fmt; int rows, cols; wisp_matrix *m; } mats[] = {
        {"L%d.attn.qkv", QR + 2 * s->kv_heads * D, H, &L->qkv}, {"L%d.attn.o_proj", H, QR, &L->o_proj},
        {"L%d.mlp.gate_up", 2 * F, H, &L->gate_up},          {"L%d.mlp.down", H, F, &L->down}};
    for (size_t k = 0; k < sizeof mats / sizeof mats[0]; k++) {
      snprintf(name, sizeof name, mats[k].fmt, i);
      if ((st = wisp_matrix_bind(a, name, mats[k].rows, mats[k].cols, mats[k].m))) goto fail;
    }
  }
  if ((st = wisp_model_bind_globals(a, D, 1, &w->glob)) || (st = bind_local_rope(a, w))) goto fail;
  *out = w;
  return WISP_OK;
fail:
  gemma3_free_weights(w);
  return st;
}

static wisp_status gemma3_plan_shape(const void *p, wisp_model_shape *out) {
  const gemma3_weights *w = p;
  const wisp_shape *s = &w->shape;
  wisp_status st = wisp_model_shape_common(s, wisp_arch_gemma3.name, out);
  if (st) return st;
  wisp_model_shape_ffn_quant(out, s->n_layers, &w->layers[0].gate_up, &w->layers[0].down, sizeof w->layers[0]);
  return WISP_OK;
}

static int gemma3_max_positions(const void *p) { return ((const gemma3_weights *)p)->glob.max_positions; }

/* The forward step as a graph (graph.h); w NULL: names and sizes only (a
 * plan without weights sees every layer global). Activations: X the
 * residual stream; XN the normed input, then a block's product output; MID
 * the mixer / GeGLU output, then that output normed; BIG the q|k|v or
 * gate|up rows. */
static wisp_status gemma3_describe(const wisp_model_shape *s, void *p, wisp_graph *g) {
  gemma3_weights *w = p;
  const int H = s->hidden, F = s->ffn, D = s->head_dim, QKV = (s->heads + 2 * s->kv_heads) * D;
  *g = (wisp_graph){.hidden = H, .ffn = F, .vocab = s->vocab, .heads = s->heads, .kv_heads = s->kv_heads,
                    .head_dim = D, .rotary_dim = D, .conv_len = s->conv_cache};
  if (w) {
    g->eps = w->eps;
    g->attn_scale = w->attn_scale;
    wisp_model_globals_describe(&w->glob, g);
    g->rope_cos_local = &w->rope_cos_local;
    g->rope_sin_local = &w->rope_sin_local;
    g->rope_freq_local = w->rope_freq_local.data;
  }
  for (int i = 0; i < s->n_layers; i++) {
    gemma3_layer *L = w ? &w->layers[i] : NULL;
    wisp_gnode *sc = NULL, *m = NULL;
    /* the embedding scale, at the head of the first layer */
    if (i == 0 && !(sc = wisp_graph_rowop(g, WISP_GOP_SCALE, 0, "embed.scale", H, WISP_ACT_X, WISP_ACT_X))) goto oom;
    if (sc) sc->scale = sqrtf((float)H);
    if (!wisp_graph_rmsnorm(g, i, "attn.qkv.norm", L ? &L->op_norm : NULL, H, WISP_ACT_X, WISP_ACT_XN) ||
        !wisp_graph_matmul(g, i, "attn.qkv", L ? &L->qkv : NULL, QKV, H, WISP_ACT_XN, WISP_ACT_BIG, 0) ||
        !(m = wisp_graph_mixer(g, WISP_GOP_ATTENTION, i, "attn.core", QKV, s->heads * D)))
      goto oom;
    if (L) { /* now: the next append may move the nodes (graph.h) */
      m->q_norm = &L->q_norm;
      m->k_norm = &L->k_norm;
      m->window = L->window;
      m->rope_local = L->window > 0;
    }
    if (!wisp_graph_matmul(g, i, "attn.o_proj", L ? &L->o_proj : NULL, H, s->heads * D, WISP_ACT_MID, WISP_ACT_XN, 0) ||
        !wisp_graph_rmsnorm(g, i, "attn.o_proj.post_norm", L ? &L->attn_post : NULL, H, WISP_ACT_XN, WISP_ACT_MID) ||
        !wisp_graph_rowop(g, WISP_GOP_ADD, i, "attn.residual", H, WISP_ACT_MID, WISP_ACT_X) ||
        !wisp_graph_rmsnorm(g, i, "mlp.gate_up.norm", L ? &L->ffn_norm : NULL, H, WISP_ACT_X, WISP_ACT_XN) ||
        !wisp_graph_matmul(g, i, "mlp.gate_up", L ? &L->gate_up : NULL, 2 * F, H, WISP_ACT_XN, WISP_ACT_BIG, 0) ||
        !wisp_graph_rowop(g, WISP_GOP_GEGLU, i, "", F, WISP_ACT_BIG, WISP_ACT_MID) ||
        !wisp_graph_matmul(g, i, "mlp.down", L ? &L->down : NULL, H, F, WISP_ACT_MID, WISP_ACT_XN, 0) ||
        !wisp_graph_rmsnorm(g, i, "mlp.down.post_norm", L ? &L->ffn_post : NULL, H, WISP_ACT_XN, WISP_ACT_MID) ||
        !wisp_graph_rowop(g, WISP_GOP_ADD, i, "mlp.residual", H, WISP_ACT_MID, WISP_ACT_X))
      goto oom;
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

const wisp_arch wisp_arch_gemma3 = {
    .name = "gemma3",
    .bind = gemma3_bind,
    .free_weights = gemma3_free_weights,
    .max_positions = gemma3_max_positions,
    .plan_shape = gemma3_plan_shape,
    .describe = gemma3_describe,
    .registry_key = "wgsl",
    .profile_aliases = k_profile_aliases,
    .n_profile_aliases = (int)(sizeof k_profile_aliases / sizeof k_profile_aliases[0]),
    .plan_id_names_arch = 1,
};
