/* The model-wide facts a plan needs (layer types, sizes, weight dtype):
 * what an architecture reports of its bound weights (wisp_arch.plan_shape)
 * or what the plan reads from a manifest without weights
 * (plan/plan.h, wisp_model_shape_from_json). */
#ifndef WISP_MODEL_SHAPE_H
#define WISP_MODEL_SHAPE_H

#define WISP_MAX_LAYERS 256

/* WISP_LAYER_CONV / WISP_LAYER_ATTENTION / WISP_LAYER_LINEAR, as the artifact defines them. */
typedef int wisp_layer_kind;

typedef struct {
  int n_layers;
  wisp_layer_kind layer_types[WISP_MAX_LAYERS];
  int hidden, ffn, vocab, heads, kv_heads, head_dim;
  int quant_bits; /* 4: Q4 weights ("q4"); 16: F16 ("f16"); 8: Q8_0 ("q8_0"); 0 or 32: f32 weights */
  int conv_cache;
  /* The architecture (model/model.h, wisp_arch.name) whose step the plan
   * lists: "lfm2", "qwen3_5". The plan reads what it needs of it (its
   * graph, registry key, profile aliases) from the architecture itself. */
  char architecture[32];
  /* The Gated DeltaNet ("linear_attention") layers' sizes; 0 without them. */
  int lin_k_heads, lin_v_heads, lin_k_dim, lin_v_dim;
  /* 1: a Q4_K artifact: matrices with cols % 256 == 0 are Q4_K ("q4k"),
   * the others Q4 ("q4"); embed and head stay Q4Z ("q4"). */
  int q4k;
  /* wisp_rope_pairs (format/tensor.h): which dims the attention's RoPE turns together */
  int rope_pairs;
} wisp_model_shape;

#endif
