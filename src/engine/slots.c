/* Several sequences in one session (include/wisp.h, "slots"): the slots'
 * own states, evaluating a prompt into one of them, and wisp_session_step,
 * which advances several slots by one token in one batched decode step
 * (wisp_graph_step_rows: each weight read once for all of them, the mixers
 * on each slot's own state). docs/sequences.md. */
#include <stdlib.h>
#include <string.h>

#include "engine/internal.h"
#include "engine/sequence.h"
#include "engine/slots.h"
#include "model/common.h"
#include "util/err.h"
#include "util/options.h"

#define MAX_SLOTS WISP_MAX_ROWS

wisp_status wisp_slots_new(wisp_session *s, int n) {
  if (n < 1 || n > MAX_SLOTS) return wisp_fail(WISP_EINVAL, "slots: %d sequences (1 to %d)", n, MAX_SLOTS);
  wisp_graph_state **st = calloc((size_t)n, sizeof *st);
  s->slot_pos = calloc((size_t)n, sizeof(int));
  if (!st || !s->slot_pos) {
    free(st);
    return wisp_fail(WISP_ENOMEM, "out of memory for %d slots", n);
  }
  /* every slot's state together: the backend may keep a layer's states of
   * all slots in one buffer, which the batched step's mixers then address */
  wisp_status e = wisp_graph_states_new(&s->graph, s->backend, s->chunk, s->max_pos, n, st);
  if (e) {
    free(st);
    return e;
  }
  s->state = st[0];
  s->slot_state = st;
  s->n_slots = n;
  return WISP_OK;
}

void wisp_slots_free(wisp_session *s) {
  for (int i = 1; s->slot_state && i < s->n_slots; i++) wisp_graph_state_free(s->slot_state[i], s->backend);
  /* slot 0's state is s->state, which the session frees */
  if (s->rows_scratch) wisp_graph_state_free(s->rows_scratch, s->backend);
  if (s->prefill_scratch) wisp_graph_state_free(s->prefill_scratch, s->backend);
  s->prefill_scratch = NULL;
  s->prefill_scratch_tokens = 0;
  if (s->rows_ids) s->backend->buf_free(s->backend, s->rows_ids);
  if (s->rows_logits) s->backend->buf_free(s->backend, s->rows_logits);
  free(s->slot_state);
  free(s->slot_pos);
  s->slot_state = NULL;
  s->slot_pos = NULL;
  s->rows_scratch = NULL;
  s->rows_ids = NULL;
  s->rows_logits = NULL;
  s->n_slots = 0;
}

int wisp_session_slots(const wisp_session *s) {
  if (!s) {
    wisp_fail(WISP_EINVAL, "wisp_session_slots: no session");
    return -1;
  }
  return s->n_slots;
}

static int valid_slot(const wisp_session *s, int slot) { return s && slot >= 0 && slot < s->n_slots; }
static wisp_graph_state *state_of(const wisp_session *s, int slot) { return slot ? s->slot_state[slot] : s->state; }
static int *pos_of(wisp_session *s, int slot) { return slot ? &s->slot_pos[slot] : &s->pos; }

wisp_status wisp_slot_eval(wisp_session *s, int slot, const int32_t *tokens, int n, float *logits) {
  if (!s) return wisp_fail(WISP_EINVAL, "wisp_slot_eval: no session");
  if (!valid_slot(s, slot)) return wisp_fail(WISP_EINVAL, "slot %d: the session has %d", slot, s->n_slots);
  return wisp_session_feed(s, state_of(s, slot), pos_of(s, slot), tokens, n, logits, 0);
}

int wisp_slot_position(const wisp_session *s, int slot) {
  if (!valid_slot(s, slot)) {
    wisp_fail(WISP_EINVAL, "wisp_slot_position: slot %d: the session has %d", slot, s ? s->n_slots : 0);
    return -1;
  }
  return slot ? s->slot_pos[slot] : s->pos;
}

void wisp_slot_reset(wisp_session *s, int slot) {
  if (!valid_slot(s, slot)) return;
  if (slot == 0) {
    wisp_session_reset(s);
    return;
  }
  wisp_graph_state_reset(s->slot_state[slot], s->backend);
  s->slot_pos[slot] = 0;
}

/* The batched step's scratch (a state of n_slots rows and one KV row: the
 * slots' caches are their own), its logits and token ids. */
static wisp_status ensure_rows(wisp_session *s) {
  if (s->rows_scratch) return WISP_OK;
  const wisp_model *m = s->model;
  wisp_backend *be = s->backend;
  if (!be->matmul_rows || !be->buf_copy_at || !be->sample_id)
    return wisp_fail(WISP_EUNSUPPORTED, "backend '%s' cannot step several sequences at once", be->name);
  const size_t n = (size_t)s->n_slots;
  if (!(s->rows_ids = be->buf_new(be, n)) || !(s->rows_logits = be->buf_new(be, n * wisp_model_vocab(m))))
    return wisp_fail(WISP_ENOMEM, "out of memory for %d slots' logits", s->n_slots);
  return wisp_graph_state_new(&s->graph, be, s->n_slots, 1, &s->rows_scratch);
}

wisp_status wisp_session_step_each(wisp_session *s, const int *slots, const int32_t *tokens, int n,
                                   const wisp_sampling *sampling, int32_t *next, float *logits,
                                   const unsigned char *want_logits) {
  if (n < 1 || n > s->n_slots)
    return wisp_fail(WISP_EINVAL, "step: %d sequences, the session has %d slots", n, s->n_slots);
  void *states[MAX_SLOTS];
  int pos[MAX_SLOTS];
  unsigned char seen[MAX_SLOTS] = {0};
  for (int i = 0; i < n; i++) {
    if (!valid_slot(s, slots[i])) return wisp_fail(WISP_EINVAL, "step: slot %d: the session has %d", slots[i], s->n_slots);
    if (seen[slots[i]]) return wisp_fail(WISP_EINVAL, "step: slot %d given twice", slots[i]);
    if (slots[i] == 0 && s->ran_past_stop)
      return wisp_fail(WISP_EINVAL, "the session ran past a stop token in a batched decode; reset it before reuse");
    if (tokens[i] < 0 || tokens[i] >= wisp_model_vocab(s->model))
      return wisp_fail(WISP_EINVAL, "step: token id %d is outside the vocabulary (0..%d)", tokens[i],
                       wisp_model_vocab(s->model) - 1);
    seen[slots[i]] = 1;
    states[i] = state_of(s, slots[i]);
    pos[i] = *pos_of(s, slots[i]);
  }
  wisp_status st = ensure_rows(s);
  if (st) return st;
  const wisp_model_rows rows = {n, pos, states};
  wisp_backend *be = s->backend;
  st = wisp_graph_step_rows(&s->graph, s->rows_scratch, be, tokens, &rows, sampling, s->rows_logits, s->rows_ids);
  if (st) return st;
  if ((st = be->sync(be))) return st;
  const size_t vocab = (size_t)wisp_model_vocab(s->model);
  if (logits && !want_logits) be->buf_read(be, s->rows_logits, 0, (size_t)n * vocab, logits);
  for (int i = 0; logits && want_logits && i < n; i++)
    if (want_logits[i]) be->buf_read(be, s->rows_logits, (size_t)i * vocab, vocab, logits + (size_t)i * vocab);
  float bits[MAX_SLOTS];
  be->buf_read(be, s->rows_ids, 0, (size_t)n, bits);
  for (int i = 0; i < n; i++) {
    uint32_t id;
    memcpy(&id, &bits[i], sizeof id);
    if (id >= (uint32_t)vocab)
      return wisp_fail(WISP_EDEVICE, "the device returned token id %u, outside the vocabulary (%zu)", id, vocab);
    next[i] = (int32_t)id;
    (*pos_of(s, slots[i]))++;
  }
  return WISP_OK;
}

wisp_status wisp_session_step(wisp_session *s, const int *slots, const int32_t *tokens, int n,
                              const wisp_step_options *o, int32_t *next, float *logits) {
  if (!s) return wisp_fail(WISP_EINVAL, "wisp_session_step: no session");
  if (!slots || !tokens || !next) return wisp_fail(WISP_EINVAL, "wisp_session_step: slots, tokens and next are required");
  if (n < 1 || n > s->n_slots)
    return wisp_fail(WISP_EINVAL, "step: %d sequences, the session has %d slots", n, s->n_slots);
  wisp_step_options g;
  wisp_status st = WISP_TAKE_OPTIONS(wisp_step_options, WISP_STEP_OPTIONS_FIRST_SIZE, o, &g);
  if (st) return st;
  if (g.top_k < 0 || g.min_p < 0 || g.top_p < 0)
    return wisp_fail(WISP_EINVAL, "step: top_k %d, top_p %g, min_p %g: none may be negative", g.top_k, (double)g.top_p,
                     (double)g.min_p);
  wisp_sampling sp[MAX_SLOTS]; /* every row the same draw */
  for (int i = 0; i < n; i++)
    sp[i] = (wisp_sampling){.temperature = g.temperature, .top_k = g.top_k, .top_p = g.top_p, .min_p = g.min_p,
                            .seed = (uint32_t)(g.seed ^ (g.seed >> 32))};
  return wisp_session_step_each(s, slots, tokens, n, sp, next, logits, NULL);
}

/* A prefill scratch for at least `tokens` stacked tokens (one KV row: the
 * slots' caches are their own). */
static wisp_status ensure_prefill_scratch(wisp_session *s, int tokens) {
  if (s->prefill_scratch && s->prefill_scratch_tokens >= tokens) return WISP_OK;
  if (s->prefill_scratch) wisp_graph_state_free(s->prefill_scratch, s->backend);
  s->prefill_scratch = NULL;
  s->prefill_scratch_tokens = 0;
  wisp_status st = wisp_graph_state_new(&s->graph, s->backend, tokens, 1, &s->prefill_scratch);
  if (!st) s->prefill_scratch_tokens = tokens;
  return st;
}

wisp_status wisp_session_prefill_each(wisp_session *s, const int *slots, const int32_t *const *tokens, const int *n,
                                      int count) {
  if (!s) return wisp_fail(WISP_EINVAL, "wisp_session_prefill_each: no session");
  if (count < 1 || count > s->n_slots)
    return wisp_fail(WISP_EINVAL, "prefill: %d sequences, the session has %d slots", count, s->n_slots);
  unsigned char seen[MAX_SLOTS] = {0};
  const int vocab = wisp_model_vocab(s->model);
  for (int i = 0; i < count; i++) {
    if (!valid_slot(s, slots[i])) return wisp_fail(WISP_EINVAL, "prefill: slot %d: the session has %d", slots[i], s->n_slots);
    if (seen[slots[i]]) return wisp_fail(WISP_EINVAL, "prefill: slot %d given twice", slots[i]);
    seen[slots[i]] = 1;
    if (n[i] < 1 || !tokens[i]) return wisp_fail(WISP_EINVAL, "prefill: slot %d has no tokens", slots[i]);
    if (*pos_of(s, slots[i]) + n[i] > s->max_pos)
      return wisp_fail(WISP_EINVAL, "context full: %d tokens so far + %d new exceed the context of %d",
                       *pos_of(s, slots[i]), n[i], s->max_pos);
    for (int t = 0; t < n[i]; t++) /* before any is fed, so a bad id leaves every state as it was */
      if (tokens[i][t] < 0 || tokens[i][t] >= vocab)
        return wisp_fail(WISP_EINVAL, "token %d: id %d is outside the vocabulary (0..%d)", t, tokens[i][t], vocab - 1);
    if (slots[i] == 0 && s->ran_past_stop)
      return wisp_fail(WISP_EINVAL, "the session ran past a stop token in a batched decode; reset it before reuse");
  }
  if (count == 1) return wisp_slot_eval(s, slots[0], tokens[0], n[0], NULL);
  if (!s->backend->buf_copy_at) { /* no stacking: one slot after another */
    for (int i = 0; i < count; i++) {
      wisp_status st = wisp_slot_eval(s, slots[i], tokens[i], n[i], NULL);
      if (st) return st;
    }
    return WISP_OK;
  }
  int done[MAX_SLOTS] = {0}, total = 0;
  for (int i = 0; i < count; i++) total += n[i] < s->chunk ? n[i] : s->chunk;
  wisp_status st = ensure_prefill_scratch(s, total);
  int32_t *stack = st ? NULL : malloc((size_t)total * sizeof *stack);
  if (!st && !stack) st = wisp_fail(WISP_ENOMEM, "out of memory");
  /* pass after pass, each taking every unfinished slot's next piece */
  while (!st) {
    int len[MAX_SLOTS], pos0[MAX_SLOTS], which[MAX_SLOTS], k = 0, used = 0;
    wisp_graph_state *states[MAX_SLOTS];
    for (int i = 0; i < count; i++) {
      if (done[i] == n[i]) continue;
      const int piece = n[i] - done[i] < s->chunk ? n[i] - done[i] : s->chunk;
      memcpy(stack + used, tokens[i] + done[i], (size_t)piece * sizeof *stack);
      len[k] = piece;
      pos0[k] = *pos_of(s, slots[i]);
      states[k] = state_of(s, slots[i]);
      which[k++] = i;
      used += piece;
    }
    if (k == 0) break;
    const wisp_graph_segments segs = {k, len, pos0, states};
    st = k == 1 ? wisp_graph_forward(&s->graph, states[0], s->backend, stack, len[0], pos0[0], NULL, 0)
                : wisp_graph_forward_segments(&s->graph, s->prefill_scratch, s->backend, stack, &segs);
    for (int j = 0; !st && j < k; j++) {
      *pos_of(s, slots[which[j]]) += len[j];
      done[which[j]] += len[j];
    }
  }
  free(stack);
  return st;
}

wisp_status wisp_slot_generate(wisp_session *s, int slot, int32_t first, int n, const wisp_generate_options *o,
                               int32_t *out, int *n_out) {
  if (n_out) *n_out = 0;
  if (!valid_slot(s, slot)) return wisp_fail(WISP_EINVAL, "slot %d: the session has %d", slot, s ? s->n_slots : 0);
  if (slot == 0 && s->ran_past_stop)
    return wisp_fail(WISP_EINVAL, "the session ran past a stop token in a batched decode; reset it before reuse");
  /* the decode loop runs on s->state / s->pos: lend them the slot's */
  wisp_graph_state *state0 = s->state;
  const int pos0 = s->pos;
  s->state = state_of(s, slot);
  s->pos = *pos_of(s, slot);
  s->ran_past_stop = 0;
  wisp_status st = wisp_session_generate(s, first, n, o, out, n_out);
  const int ran = s->ran_past_stop, pos = s->pos;
  s->state = state0;
  s->pos = pos0;
  *pos_of(s, slot) = pos;
  s->ran_past_stop = slot == 0 && ran;
  if (!st && ran) st = wisp_fail(WISP_EINVAL, "slot %d ran past where its decode loop stopped: reset it", slot);
  return st;
}

wisp_status wisp_slot_rewind(wisp_session *s, int slot, int pos) {
  if (!valid_slot(s, slot)) return wisp_fail(WISP_EINVAL, "slot %d: the session has %d", slot, s->n_slots);
  int *p = pos_of(s, slot);
  if (pos < 0 || pos > *p) return wisp_fail(WISP_EINVAL, "slot %d: cannot rewind from %d to %d", slot, *p, pos);
  *p = pos;
  return WISP_OK;
}

int wisp_slot_state_bufs(wisp_session *s, int slot, wisp_buf **bufs, size_t *lens, int cap) {
  if (!valid_slot(s, slot)) return 0;
  return wisp_graph_state_bufs(state_of(s, slot), bufs, lens, cap);
}
