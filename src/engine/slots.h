/* A session's slots (slots.c; the public calls are in include/wisp.h). */
#ifndef WISP_ENGINE_SLOTS_H
#define WISP_ENGINE_SLOTS_H

#include "engine/internal.h"

/* The session's slots (slot 0's state is s->state): made with the session,
 * freed with it (before its state and backend). */
wisp_status wisp_slots_new(wisp_session *s, int n);
void wisp_slots_free(wisp_session *s);
/* wisp_session_step with each row's own sampling (n entries: the
 * scheduler's requests differ), and the logits read back only for the rows
 * whose want_logits[i] is set (want_logits NULL: every row, when logits is
 * non-NULL); logits is n x vocabulary floats, row i at i x vocabulary. */
wisp_status wisp_session_step_each(wisp_session *s, const int *slots, const int32_t *tokens, int n,
                                   const wisp_sampling *sampling, int32_t *next, float *logits,
                                   const unsigned char *want_logits);
/* Feeds n[i] tokens (tokens[i]) to slot slots[i] for each of the count
 * slots, no logits: a batched prefill. The slots' tokens are stacked into
 * one pass over the weights (wisp_graph_forward_segments) in pieces of at
 * most the session's chunk a slot, split where wisp_slot_eval splits them,
 * so each slot's mixers see the same pieces as alone; one slot is
 * wisp_slot_eval. Slots must differ. */
wisp_status wisp_session_prefill_each(wisp_session *s, const int *slots, const int32_t *const *tokens, const int *n,
                                      int count);
/* wisp_session_generate on slot `slot`: the decode loop (several tokens a
 * submit, batches in flight, rewound at a stop token or an early stop by
 * on_tokens) run on that slot's state and position. A run that could not be
 * rewound leaves the slot's state unknown: WISP_EINVAL, reset the slot. */
wisp_status wisp_slot_generate(wisp_session *s, int slot, int32_t first, int n, const wisp_generate_options *o,
                               int32_t *out, int *n_out);
/* Moves slot `slot` back to position pos (<= its position): the KV rows
 * beyond are never read again. Conv and recurrent state do not move back:
 * the caller restores them (wisp_slot_state_bufs) to what they were at pos. */
wisp_status wisp_slot_rewind(wisp_session *s, int slot, int pos);
/* The buffers of slot `slot` a token changes for good beyond its KV rows
 * (conv and recurrent state; wisp_graph_state_bufs), for snapshots. */
int wisp_slot_state_bufs(wisp_session *s, int slot, wisp_buf **bufs, size_t *lens, int cap);

#endif
