/* Pieces every architecture's forward pass shares: argument checks and the
 * output head (final norm + head product, read back or sampled on the
 * device). Backend calls only, like the model files themselves. */
#ifndef WISP_MODEL_COMMON_H
#define WISP_MODEL_COMMON_H

#include "backend/backend.h"
#include "format/artifact.h"
#include "model/graph.h"
#include "model/shape.h"

/* n tokens at pos0: 1 <= n <= chunk, inside the context, ids in the vocabulary. */
wisp_status wisp_model_check_forward(const int32_t *tokens, int n, int pos0, int chunk, int max_pos, int vocab);

typedef struct {
  const wisp_vector *norm; /* final RMSNorm */
  float eps;
  const wisp_matrix *head;
  int hidden, vocab;
  wisp_buf *xn, *logits; /* scratch: normed rows, one row of logits */
  unsigned fused;        /* the session graph's head fusions (graph.h wisp_graph.fused) */
} wisp_model_head;

/* Final norm over the n rows of x, then the head for the last row (or every
 * row with all) read back into logits (vocab floats per row). */
wisp_status wisp_model_head_logits(wisp_backend *be, const wisp_model_head *h, const wisp_buf *x, int n, float *logits,
                                   int all);
/* A decode-loop step's tail (one row, its input token in ids[slot - 1] at
 * position pos): norm, head, the repetition penalty when s asks for it
 * (the input token joins the window ring first), and the next token into
 * ids[slot]. Records only. */
void wisp_model_head_sample(wisp_backend *be, const wisp_model_head *h, const wisp_buf *x, const wisp_sampling *s,
                            uint32_t step, wisp_buf *ids, int slot, int pos);

/* The rows of a batched decode step (wisp_graph_step_rows): row r is the
 * token at position pos[r] of the sequence whose state is states[r]. */
#define WISP_MAX_ROWS 256 /* sequences one batched step may take */
typedef struct wisp_model_rows {
  int n;
  const int *pos;
  void *const *states;
} wisp_model_rows;

/* y = W x over n rows: with rows (a batched decode step) through
 * matmul_rows, every row as a one-row product computes it; without, the
 * backend's matmul from row 0. */
void wisp_model_matmul(wisp_backend *be, const wisp_matrix *W, const wisp_buf *x, int n, wisp_buf *y, int accumulate,
                       const wisp_model_rows *rows);
/* The checks of a batched decode step: 1 <= n <= chunk, each row inside
 * its sequence's context (max_pos[r]) and its token in the vocabulary. */
wisp_status wisp_model_check_rows(const int32_t *tokens, const wisp_model_rows *rows, int chunk, const int *max_pos,
                                  int vocab);
/* A batched step's tail: norm and head over the n rows of x into
 * rows_logits ([n][vocab]), then row r's next token into ids[r], drawn with
 * s[r] (each row its own sampling; n entries) at step pos[r] + 1
 * (sampling.h) from a copy in the one-row logits buffer. */
void wisp_model_head_sample_rows(wisp_backend *be, const wisp_model_head *h, const wisp_buf *x,
                                 const wisp_model_rows *rows, wisp_buf *rows_logits, const wisp_sampling *s,
                                 wisp_buf *ids);

/* What every architecture binds beside its layers: the embedding, the head
 * (the embedding when the artifact has none: tied), the final norm and the
 * rope tables (the artifact's, the longer rope.*_ext pair first, else
 * computed from rope.freq or ropeTheta for the first rows) and the inverse
 * frequencies they come from (rope.freq; from ropeTheta where no table is
 * stored; none for an artifact with tables and no rope.freq). */
typedef struct {
  wisp_matrix embed, head;
  wisp_vector final_norm, rope_cos, rope_sin, rope_freq;
  float *rope_owned;  /* computed tables and frequencies */
  int positions;      /* rows of the rope tables */
  int max_positions;  /* longest context: the manifest's (at most the tables' rows without rope.freq) */
  int rope_pairs;     /* wisp_rope_pairs: the order the artifact's q/k rows are in */
} wisp_model_globals;

/* A section of n f32 values (its size checked). */
wisp_status wisp_model_bind_vector(const wisp_artifact *a, const char *name, int n, wisp_vector *v);
/* rotary_dim: the dims of a head RoPE turns; f32_freq: inverse frequencies
 * computed in float (as Hugging Face's Qwen 3.5 does), else in double. */
wisp_status wisp_model_bind_globals(const wisp_artifact *a, int rotary_dim, int f32_freq, wisp_model_globals *g);
void wisp_model_globals_free(wisp_model_globals *g);
/* "embed" or "head"; NULL otherwise. */
wisp_matrix *wisp_model_globals_matrix(wisp_model_globals *g, const char *section);
/* The graph's embedding, head, final norm, rope tables and context. */
void wisp_model_globals_describe(wisp_model_globals *m, wisp_graph *g);

/* The plan's view of the sizes every architecture shares, under the
 * architecture's name, every layer an attention layer (an architecture
 * with other layers sets its types after). Refuses more layers than a
 * plan holds. */
wisp_status wisp_model_shape_common(const wisp_shape *s, const char *arch, wisp_model_shape *out);
/* The plan shape's weight view from the FFN matrices: quant_bits those of
 * the first layer's gate_up, q4k whether any layer's gate_up or down holds
 * Q4_K. Layer i's matrices lie at gate_up / down + i * stride bytes (stride:
 * the architecture's layer struct size), so every model file passes its own
 * layer array. */
void wisp_model_shape_ffn_quant(wisp_model_shape *out, int n_layers, const wisp_matrix *gate_up,
                                const wisp_matrix *down, size_t stride);

#endif
