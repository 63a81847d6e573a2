/* Shared forward-pass pieces; see common.h. */
#include "model/common.h"

#include "util/err.h"

wisp_status wisp_model_check_forward(const int32_t *tokens, int n, int pos0, int chunk, int max_pos, int vocab) {
  if (n < 1 || n > chunk) return wisp_fail(WISP_EINVAL, "forward: %d tokens, chunk is %d", n, chunk);
  if (pos0 < 0 || pos0 + n > max_pos)
    return wisp_fail(WISP_EINVAL, "context full: %d + %d tokens exceed %d positions", pos0, n, max_pos);
  for (int t = 0; tokens && t < n; t++)
    if (tokens[t] < 0 || tokens[t] >= vocab)
      return wisp_fail(WISP_EINVAL, "token id %d is outside the vocabulary (%d)", tokens[t], vocab);
  return WISP_OK;
}

wisp_status wisp_model_head_logits(wisp_backend *be, const wisp_model_head *h, const wisp_buf *x, int n, float *logits,
                                   int all) {
  if (!logits) return be->sync(be);
  /* One row at a time through the one-row logits buffer: the last row, or
   * every row into logits[r * vocab]. */
  be->rmsnorm(be, x, h->norm, h->eps, n, h->hidden, h->xn);
  for (int r = all ? 0 : n - 1; r < n; r++) {
    be->matmul(be, h->head, h->xn, r, 1, h->logits, 0);
    wisp_status st = be->sync(be);
    if (st) return st;
    be->buf_read(be, h->logits, 0, (size_t)h->vocab, logits + (all ? (size_t)r * h->vocab : 0));
  }
  return WISP_OK;
}

void wisp_model_head_sample(wisp_backend *be, const wisp_model_head *h, const wisp_buf *x, const wisp_sampling *s,
                            uint32_t step, wisp_buf *ids, int slot, int pos) {
  be->rmsnorm(be, x, h->norm, h->eps, 1, h->hidden, h->xn);
  be->matmul(be, h->head, h->xn, 0, 1, h->logits, 0);
  if (wisp_sampling_penalized(s)) {
    be->buf_copy(be, ids, s->hist_off + (uint32_t)(pos % s->hist_n), (size_t)slot - 1, 1);
    be->penalize(be, h->logits, h->vocab, ids, s->hist_off, s->hist_n, s->repeat_penalty);
  }
  be->sample_id(be, h->logits, h->vocab, s, step, ids, slot);
}

void wisp_model_matmul(wisp_backend *be, const wisp_matrix *W, const wisp_buf *x, int n, wisp_buf *y, int accumulate,
                       const wisp_model_rows *rows) {
  if (rows) be->matmul_rows(be, W, x, n, y, accumulate);
  else be->matmul(be, W, x, 0, n, y, accumulate);
}

wisp_status wisp_model_check_rows(const int32_t *tokens, const wisp_model_rows *rows, int chunk, const int *max_pos,
                                  int vocab) {
  if (rows->n < 1 || rows->n > chunk) return wisp_fail(WISP_EINVAL, "step: %d sequences, at most %d", rows->n, chunk);
  for (int r = 0; r < rows->n; r++) {
    if (rows->pos[r] < 0 || rows->pos[r] >= max_pos[r])
      return wisp_fail(WISP_EINVAL, "context full: sequence %d is at %d of %d positions", r, rows->pos[r], max_pos[r]);
    if (tokens[r] < 0 || tokens[r] >= vocab)
      return wisp_fail(WISP_EINVAL, "token id %d is outside the vocabulary (%d)", tokens[r], vocab);
  }
  return WISP_OK;
}

void wisp_model_head_sample_rows(wisp_backend *be, const wisp_model_head *h, const wisp_buf *x,
                                 const wisp_model_rows *rows, wisp_buf *rows_logits, const wisp_sampling *s,
                                 wisp_buf *ids) {
  be->rmsnorm(be, x, h->norm, h->eps, rows->n, h->hidden, h->xn);
  be->matmul_rows(be, h->head, h->xn, rows->n, rows_logits, 0);
  for (int r = 0; r < rows->n; r++) {
    be->buf_copy_at(be, h->logits, 0, rows_logits, (size_t)r * h->vocab, (size_t)h->vocab);
    be->sample_id(be, h->logits, h->vocab, s, (uint32_t)rows->pos[r] + 1u, ids, r);
  }
}
