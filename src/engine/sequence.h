/* One sequence of a session (sequence.c): feeding it tokens, resetting it. */
#ifndef WISP_ENGINE_SEQUENCE_H
#define WISP_ENGINE_SEQUENCE_H

#include "engine/internal.h"

/* Feeds tokens to one sequence (state, at *pos) chunk by chunk; logits:
 * the last token's (all = 0) or every token's (all = 1, n x vocab). */
wisp_status wisp_session_feed(wisp_session *s, wisp_graph_state *state, int *pos, const int32_t *tokens, int n, float *logits,
                              int all);

#endif
