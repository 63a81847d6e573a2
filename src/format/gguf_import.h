/* GGUF -> the inputs `wisp convert` works from: the model's hyperparameters
 * and its tensors under Hugging Face names (dequantized to f32, in memory),
 * plus a tokenizer.json / tokenizer_config.json / generation_config.json
 * written from tokenizer.ggml.* (docs/gguf.md has the name mapping). */
#ifndef WISP_GGUF_IMPORT_H
#define WISP_GGUF_IMPORT_H

#include "format/gguf.h"
#include "format/gguf_arch.h"
#include "format/safetensors.h"

typedef struct {
  char arch[32]; /* general.architecture: lfm2, qwen3, llama or qwen35 (format/gguf_arch.h) */
  int hidden, n_layers, heads, kv_heads, head_dim, ffn, vocab, conv_l, context, tied;
  int *layer_types; /* WISP_LAYER_* per layer (malloc'd) */
  double rope_theta, norm_eps;
  /* llama: rope_freqs.weight, head_dim/2 divisors of the rope frequencies
   * (llama3 scaling); NULL without it */
  float *rope_factors;
  /* qwen35: Gated DeltaNet heads and widths, rotated dims */
  int lin_k_heads, lin_v_heads, lin_k_dim, lin_v_dim, rotary_dim;
  /* gemma3: attention.sliding_window, which layers are global (malloc'd, 1
   * each; sliding_window_pattern, default 6), rope.freq_base_swa (default
   * 10000), the global layers' linear rope factor (rope.scaling.factor; 1:
   * none) and the query scalar (key_length: llama.cpp's rule) */
  int sliding_window;
  unsigned char *global;
  double rope_local_theta, rope_linear, attn_scalar;
} wisp_gguf_model;

/* The architecture's table and the hyperparameters, with the check that
 * every tensor the graph needs is present: the first step of both import
 * and running a GGUF directly (format/gguf_artifact.h). On failure *m is
 * freed. */
wisp_status wisp_gguf_read_model(const wisp_gguf *g, wisp_gguf_model *m, const wisp_gguf_arch **arch);
/* The dimensions the layout transforms need. */
wisp_gguf_geom wisp_gguf_model_geom(const wisp_gguf_model *m);
/* Reads hyperparameters and builds *st (close with wisp_safetensors_close),
 * with every tensor under its Hugging Face name and layout (llama.cpp's
 * permutations undone). Free *m with wisp_gguf_model_free, also on failure. */
wisp_status wisp_gguf_import(const wisp_gguf *g, wisp_gguf_model *m, wisp_safetensors **st);
void wisp_gguf_model_free(wisp_gguf_model *m);
/* Writes DIR/tokenizer.json (+ tokenizer_config.json, generation_config.json)
 * from tokenizer.ggml.* and tokenizer.chat_template: the vocabulary and
 * merges, BOS/EOS added as add_bos_token / add_eos_token say (else as
 * llama.cpp defaults for the pre-tokenizer), the special ids, the stop ids
 * and the chat template (docs/gguf.md, "Tokenizer"); *written = 0 when the
 * file has no tokenizer. */
wisp_status wisp_gguf_write_tokenizer(const wisp_gguf *g, const char *dir, int *written);

/* The same three files held in memory (util/memfile.h) under LABEL/NAME,
 * for a model opened from the GGUF itself; dropped with
 * wisp_gguf_memory_tokenizer_drop(LABEL). */
wisp_status wisp_gguf_memory_tokenizer(const wisp_gguf *g, const char *label, int *written);
void wisp_gguf_memory_tokenizer_drop(const char *label);

#endif
