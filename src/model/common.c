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
                            uint32_t step, wisp_buf *ids, int slot) {
  be->rmsnorm(be, x, h->norm, h->eps, 1, h->hidden, h->xn);
  be->matmul(be, h->head, h->xn, 0, 1, h->logits, 0);
  be->sample_id(be, h->logits, h->vocab, s, step, ids, slot);
}
