/* One sequence of a session: feeding it tokens chunk by chunk through the
 * session's graph, and starting it afresh. The session (session.c), its
 * slots (slots.c) and the text API all feed sequences through here. */
#include "engine/sequence.h"

#include "util/err.h"

wisp_status wisp_session_feed(wisp_session *s, wisp_graph_state *state, int *pos, const int32_t *tokens, int n, float *logits,
                              int all) {
  if (n <= 0) return wisp_fail(WISP_EINVAL, "no tokens to evaluate (n = %d)", n);
  if (!tokens) return wisp_fail(WISP_EINVAL, "%d tokens to evaluate but no token array (tokens is NULL)", n);
  const int vocab_ids = s->model->artifact->shape.vocab;
  for (int i = 0; i < n; i++) /* before any is fed, so a bad id leaves the state as it was */
    if (tokens[i] < 0 || tokens[i] >= vocab_ids)
      return wisp_fail(WISP_EINVAL, "token %d: id %d is outside the vocabulary (0..%d)", i, tokens[i], vocab_ids - 1);
  if (state == s->state && s->ran_past_stop)
    return wisp_fail(WISP_EINVAL, "the session ran past a stop token in a batched decode; reset it before reuse");
  if (*pos + n > s->max_pos)
    return wisp_fail(WISP_EINVAL, "context full: %d tokens so far + %d new exceed the context of %d", *pos, n,
                     s->max_pos);
  const size_t vocab = (size_t)s->model->artifact->shape.vocab;
  for (int done = 0; done < n;) {
    int k = n - done < s->chunk ? n - done : s->chunk;
    int last = done + k == n;
    float *out = all ? logits + (size_t)done * vocab : last ? logits : NULL;
    wisp_status st = wisp_graph_forward(&s->graph, state, s->backend, tokens + done, k, *pos, out, all);
    if (st) return st;
    *pos += k;
    done += k;
  }
  return WISP_OK;
}

void wisp_session_reset(wisp_session *s) {
  if (!s) return;
  wisp_graph_state_reset(s->state, s->backend);
  s->pos = 0;
  s->ran_past_stop = 0;
}

wisp_status wisp_session_reserve(wisp_session *s, int positions) {
  if (!s) return wisp_fail(WISP_EINVAL, "wisp_session_reserve: no session");
  if (positions < 0 || positions > s->max_pos)
    return wisp_fail(WISP_EINVAL, "cannot reserve %d positions: the context is %d", positions, s->max_pos);
  wisp_status st = wisp_graph_state_reserve(s->state, s->backend, positions);
  /* the growth's copies are recorded: submit them now, so that the caller's
   * next timed step does not carry them */
  if (!st && s->backend->sync) st = s->backend->sync(s->backend);
  return st;
}
