/* Test fixtures written from C: safetensors files and tiny Hugging Face LFM2
 * checkpoints (config.json + model.safetensors). Defined in test_safetensors.c,
 * used by test_convert.c and test_parity.c. */
#ifndef WISP_TEST_ST_FIXTURE_H
#define WISP_TEST_ST_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
  const char *name;
  const char *dtype; /* "F32", "F16", "BF16" (data converted), anything else: F32-sized garbage */
  int ndim;
  int64_t shape[4];
  const float *data;
} fx_tensor;

/* Writes a valid safetensors file; returns 0 on success. */
int fx_write_safetensors(const char *path, const fx_tensor *t, int n);
/* One per-layer tensor of a checkpoint: its name with %d for the layer,
 * rows (0: a vector) and columns. */
typedef struct {
  const char *fmt;
  int rows, cols;
} fx_layer_tensor;
/* Writes DIR/model.safetensors (F32): the n_per tensors of `per` for each of
 * n_layers layers, then model.embed_tokens.weight (vocab x hidden) and
 * model.norm.weight (hidden); element i of a tensor is value(its name, 0, i).
 * Returns 0 on success. */
int fx_write_layered_checkpoint(const char *dir, const fx_layer_tensor *per, int n_per, int n_layers, int vocab,
                                int hidden, double (*value)(const char *name, int layer, int64_t i));
/* Writes raw bytes to path; returns 0 on success. */
int fx_write_bytes(const char *path, const void *data, size_t len);

typedef struct {
  const char *dtype;     /* tensor dtype, default "F32" */
  int untied;            /* write lm_head.weight and tie_word_embeddings false */
  const char *bad_shape; /* name of a tensor to write with a wrong shape */
  const char *arch;      /* architectures[0], default "Lfm2ForCausalLM" */
  const char *model_type;/* default "lfm2" */
  unsigned seed;
} fx_lfm2_opts;

/* The tiny model: hidden 64, 3 layers (conv, attention, conv), 4 heads, 2 kv
 * heads, FFN 64 (intermediate_size 96 auto-adjusted, multiple_of 32), conv
 * kernel 3, vocab 96, max_position_embeddings 256. Writes HF_DIR/config.json
 * and HF_DIR/model.safetensors (HF_DIR must exist). Returns 0 on success. */
int fx_write_tiny_lfm2(const char *dir, const fx_lfm2_opts *o);
/* The deterministic value of element i of tensor `name` in the tiny model. */
float fx_tiny_value(const char *name, unsigned seed, int64_t i);

/* The tiny Qwen3ForCausalLM of test_qwen3.c (hidden 64, 2 layers, 4 heads of
 * 32, 2 kv heads, FFN 96, vocab 80, untied, values fx_tiny_value(name, 7, i));
 * with llama = 1 the same as LlamaForCausalLM without q/k norms and with
 * llama3 rope scaling (factor 8, low 1, high 4, original context 64). */
int fx_write_tiny_qwen3(const char *dir, int llama);
/* The tiny Qwen3_5ForCausalLM of test_qwen3_5.c (hidden 256, 3 layers linear,
 * full, linear; 4 heads of 16 with 2 kv heads, rotary 8; 2 key heads and 4
 * value heads of 16, conv kernel 4; FFN 256, vocab 96, tied) and the value
 * of element i of its tensor `name` ("model.layers.N...."). */
int fx_write_tiny_qwen35(const char *dir);
/* The same with `value_heads` linear-attention value heads (the default 4,
 * over 2 key heads; 2: as many as key heads, the released 0.8B's ratio). */
int fx_write_tiny_qwen35_value_heads(const char *dir, int value_heads);
/* The tiny Qwen2ForCausalLM of test_qwen2.c (hidden 128, 2 layers, 4 heads
 * of 32, 2 kv heads, FFN 96, vocab 80, q/k/v biases, tied) and the tiny
 * Gemma3ForCausalLM of test_gemma3.c (hidden 64, 3 layers sliding, sliding,
 * global; 2 heads of 32, 1 kv head, FFN 96, vocab 80, tied). */
int fx_write_tiny_qwen2(const char *dir);
int fx_write_tiny_gemma3(const char *dir);
float fx_qwen35_value(const char *name, int64_t i);

#endif
