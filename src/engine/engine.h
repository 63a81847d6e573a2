/* Internal view of models and sessions (the public API is include/wisp.h). */
#ifndef WISP_ENGINE_H
#define WISP_ENGINE_H

#include "backend/backend.h"
#include "engine/tuning.h"
#include "format/artifact.h"
#include "model/model.h"
#include "plan/plan.h"
#include "wisp.h"

struct wisp_text_state; /* the model's tokenizer and chat template, loaded on first use (src/api/text.c) */

struct wisp_model {
  wisp_artifact *artifact;
  const wisp_arch *arch;
  void *weights;
  wisp_graph graph; /* the architecture's step (model/graph.h), with the pass's fusions */
  struct wisp_text_state *text;
};

void wisp_text_state_free(struct wisp_text_state *t);

#define WISP_MAX_SNAP 256 /* recurrent-state buffers an architecture may list */

struct wisp_session {
  wisp_model *model;
  wisp_backend *backend;
  wisp_plan *plan;
  wisp_graph_state *state;
  int pos, chunk, max_pos;
  /* Slots (wisp_session_options.slots): slot 0 is state/pos above; slot i
   * > 0 is slot_state[i] / slot_pos[i] (slot_state[0] is state, slot_pos[0]
   * unused). The states are made together (wisp_graph_states_new). The
   * scratch of a batched step (a state of n_slots rows), its logits and
   * token ids are made on the first wisp_session_step. */
  int n_slots;
  wisp_graph_state **slot_state;
  int *slot_pos;
  wisp_graph_state *rows_scratch;
  wisp_buf *rows_logits, *rows_ids;
  wisp_buf *ids;     /* decode-loop token ids on the device (batch + 1 slots) */
  int ids_slots;
  int ran_past_stop; /* a batch ran past where the caller stopped and could not be rewound: reset before reuse */
  int decode_kick;   /* tuning decodeKick (decode_loop.c, first_batch_kick) */
  int kv_f16;        /* the KV caches are binary16 (the plan's kvDtype f16 or tuning kv=f16) */
  /* Decode-loop wall time, split: recording and submitting the batches
   * (host work) and waiting for their token ids (device work not hidden by
   * it). Seconds since the session began; `wisp bench` reports both. */
  double loop_record_s, loop_wait_s;
  /* Snapshots of the architecture's recurrent state (state_bufs), one set
   * per batch in flight, taken on the device before each batch of a decode
   * loop with stop tokens, so that a batch that ran past a stop token is
   * rewound instead of leaving the session unusable. */
  int snap_n;
  wisp_buf *snap[2][WISP_MAX_SNAP];
  wisp_buf *snap_src[WISP_MAX_SNAP];
  size_t snap_len[WISP_MAX_SNAP];
};

/* "cpu", "webgpu" or "auto" (NULL = cpu). */
wisp_status wisp_backend_create(const char *name, int threads, wisp_backend **out);
/* The same with a session's tuning keys (NULL = none). */
wisp_status wisp_backend_create_tuned(const char *name, int threads, const wisp_tuning *t, wisp_backend **out);
int wisp_session_context(const wisp_session *s);
/* Frees the decode loop's state snapshots (decode_loop.c). */
void wisp_decode_loop_free(wisp_session *s);
const wisp_plan *wisp_session_plan(const wisp_session *s);
/* The KV caches' element type as the backend keeps them: "f16" (the plan's
 * kvDtype f16, or tuning kv=f16) or "f32". */
const char *wisp_session_kv_dtype(const wisp_session *s);

/* Resolves the plan for a model on a device (plan_apply.c); profile NULL or
 * "" = the built-in profiles/default, registry NULL = the built-in
 * kernels/registry.json (else a file). */
wisp_status wisp_engine_resolve_plan(const wisp_model *m, const wisp_device_caps *caps, const char *profile,
                                     const char *registry, wisp_plan **out);
/* Weight bytes one decode token reads: every matrix the decode plan multiplies
 * (the embedding contributes one row and is left out). */
uint64_t wisp_engine_decode_weight_bytes(const wisp_model *m, const wisp_plan *p);
/* Every op of the plan that runs on `be` names a kernel the backend runs,
 * with the WGSL file the backend loads for it (backend.h, check_kernel);
 * else a one-line error naming the op. */
wisp_status wisp_engine_check_kernels(const wisp_plan *p, wisp_backend *be);
/* Hands the plan's kernel choices to the model's matrices. */
wisp_status wisp_engine_apply_plan(wisp_model *m, const wisp_plan *p);
/* The kernel choice a plan op hands to the backend (what wisp_engine_apply_plan
 * puts in a matrix's choice[phase]): the variant (or "profile:" + the WGSL
 * file's stem) and its geometry. */
wisp_status wisp_engine_kernel_choice(wisp_kernel_choice *c, const wisp_plan_op *op);
/* The plan's settings for wisp_backend.configure (fills and returns *s). */
const wisp_backend_settings *wisp_engine_backend_settings(const wisp_plan *p, wisp_backend_settings *s);
const char *wisp_session_backend_name(const wisp_session *s);
/* Feeds tokens to one sequence (state, at *pos) chunk by chunk; logits:
 * the last token's (all = 0) or every token's (all = 1, n x vocab). */
wisp_status wisp_session_feed(wisp_session *s, wisp_graph_state *state, int *pos, const int32_t *tokens, int n, float *logits,
                              int all);
/* The session's slots beyond slot 0 (slots.c): made with the session, freed
 * with it (before its state and backend). */
wisp_status wisp_slots_new(wisp_session *s, int n);
void wisp_slots_free(wisp_session *s);
/* wisp_session_step with each row's own sampling (n entries: the
 * scheduler's requests differ), and the logits read back only for the rows
 * whose want_logits[i] is set (want_logits NULL: every row, when logits is
 * non-NULL); logits is n x vocabulary floats, row i at i x vocabulary. */
wisp_status wisp_session_step_each(wisp_session *s, const int *slots, const int32_t *tokens, int n,
                                   const wisp_sampling *sampling, int32_t *next, float *logits,
                                   const unsigned char *want_logits);
/* Moves slot `slot` back to position pos (<= its position): the KV rows
 * beyond are never read again. Conv and recurrent state do not move back:
 * the caller restores them (wisp_slot_state_bufs) to what they were at pos. */
wisp_status wisp_slot_rewind(wisp_session *s, int slot, int pos);
/* The buffers of slot `slot` a token changes for good beyond its KV rows
 * (conv and recurrent state; wisp_graph_state_bufs), for snapshots. */
int wisp_slot_state_bufs(wisp_session *s, int slot, wisp_buf **bufs, size_t *lens, int cap);

#endif
