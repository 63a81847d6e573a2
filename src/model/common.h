/* Pieces every architecture's forward pass shares: argument checks and the
 * output head (final norm + head product, read back or sampled on the
 * device). Backend calls only, like the model files themselves. */
#ifndef WISP_MODEL_COMMON_H
#define WISP_MODEL_COMMON_H

#include "backend/backend.h"

/* n tokens at pos0: 1 <= n <= chunk, inside the context, ids in the vocabulary. */
wisp_status wisp_model_check_forward(const int32_t *tokens, int n, int pos0, int chunk, int max_pos, int vocab);

typedef struct {
  const wisp_vector *norm; /* final RMSNorm */
  float eps;
  const wisp_matrix *head;
  int hidden, vocab;
  wisp_buf *xn, *logits; /* scratch: normed rows, one row of logits */
} wisp_model_head;

/* Final norm over the n rows of x, then the head for the last row (or every
 * row with all) read back into logits (vocab floats per row). */
wisp_status wisp_model_head_logits(wisp_backend *be, const wisp_model_head *h, const wisp_buf *x, int n, float *logits,
                                   int all);
/* A decode-loop step's tail (one row): norm, head, and the next token into
 * ids[slot]. Records only. */
void wisp_model_head_sample(wisp_backend *be, const wisp_model_head *h, const wisp_buf *x, const wisp_sampling *s,
                            uint32_t step, wisp_buf *ids, int slot);

#endif
