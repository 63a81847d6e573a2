/* What wisp.h's wisp_model and wisp_session are inside the engine: the
 * structs only. The functions over them are declared beside the file that
 * defines them (session.h, sequence.h, slots.h, decode_loop.h,
 * plan_apply.h); code outside src/engine includes engine/engine.h for all. */
#ifndef WISP_ENGINE_INTERNAL_H
#define WISP_ENGINE_INTERNAL_H

#include "backend/backend.h"
#include "format/artifact.h"
#include "model/model.h"
#include "plan/plan.h"
#include "wisp.h"

struct wisp_text_state; /* the model's tokenizer and chat template, loaded on first use (src/api/text.c) */

struct wisp_model {
  wisp_artifact *artifact;
  const wisp_arch *arch;
  void *weights;
  wisp_graph graph; /* the architecture's step (model/graph.h), with the pass's fusions; read-only:
                     * each session runs its own bound copy (wisp_session.graph) */
  /* The text API's state (src/api/text.c loads it on first use and says
   * how to free it: the engine below the API does not know its type). */
  struct wisp_text_state *text;
  void (*text_free)(struct wisp_text_state *t);
};

/* A session's context without max_context: the model's own, at most this
 * (the KV caches are made for the whole context when the session starts). */
#define WISP_DEFAULT_CONTEXT 4096

#define WISP_MAX_SNAP 256 /* recurrent-state buffers an architecture may list */

struct wisp_session {
  wisp_model *model;
  /* The session's copy of the model's graph (wisp_graph_bind): the plan's
   * kernel choices and the backend's device copies of the weights are
   * written here, never into the model, which other sessions share. */
  wisp_graph graph;
  wisp_backend *backend;
  wisp_plan *plan;
  wisp_graph_state *state;
  int pos, chunk, max_pos;
  /* Rope tables built for this session's context where it is longer than
   * the model's (from the graph's rope_freq), and their views. */
  float *rope_owned;
  wisp_vector rope_cos, rope_sin, rope_cos_local, rope_sin_local; /* local: the sliding layers' (Gemma 3) */
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
  /* The scratch of a batched prefill of several slots (its activations
   * hold every slot's tokens of one pass), made on first use, remade
   * larger when a pass needs more. */
  wisp_graph_state *prefill_scratch;
  int prefill_scratch_tokens;
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
  const wisp_graph_state *snap_owner; /* the state they copy (a slot's, in wisp_slot_generate) */
  wisp_buf *snap[2][WISP_MAX_SNAP];
  wisp_buf *snap_src[WISP_MAX_SNAP];
  size_t snap_len[WISP_MAX_SNAP];
};

#endif
