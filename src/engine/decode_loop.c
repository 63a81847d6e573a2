/* The decode loop (wisp_session_generate): tokens chosen on the device
 * and fed to the next step without a host round trip, a batch per submit;
 * with backends that can, two batches in flight (the next one recorded
 * while the device runs the current one); and with stop tokens, snapshots
 * of the recurrent state so that a batch that ran past a stop is rewound.
 * docs/webgpu.md ("Sampling and the decode loop"). */
#include <stdlib.h>
#include <string.h>

#include "engine/decode_loop.h"
#include "engine/internal.h"
#include "util/clock.h"
#include "util/err.h"
#include "util/options.h"

static int is_stop(const wisp_generate_options *o, int32_t t) {
  for (int i = 0; i < o->n_stop; i++)
    if (o->stop[i] == t) return 1;
  return 0;
}

/* Takes the ids of a finished batch (slots[1..k]) into out; *made gets how
 * many (through a stop token); returns 1 when the loop must end (a stop
 * token, or on_tokens asked to stop), -1 (error set) for an id outside the
 * vocabulary. */
static int take_batch(const wisp_generate_options *o, int vocab, const float *slots, int k, int32_t *out, int *n_out,
                      int *made_out) {
  int made = 0, stop = 0;
  for (int i = 0; i < k; i++) {
    uint32_t id;
    memcpy(&id, &slots[1 + i], sizeof id);
    if (id == WISP_ID_NONFINITE) { /* the sampler met NaN or infinite logits (backend/sampling.h) */
      wisp_fail(WISP_EFORMAT, "non-finite logits at generated token %d: generation stopped (NaN or infinite "
                "values in the model's weights or activations)", *n_out + made + 1);
      *made_out = 0;
      return -1;
    }
    if (id >= (uint32_t)vocab) { /* a batch the device failed (a persistent decode's barrier gave up) */
      wisp_fail(WISP_EDEVICE, "the device returned token id %u, outside the vocabulary (%d): its decode batch failed", id,
                vocab);
      *made_out = 0;
      return -1;
    }
    out[*n_out + made++] = (int32_t)id;
    if (is_stop(o, (int32_t)id)) {
      stop = 1;
      break;
    }
  }
  int before = *n_out;
  *n_out += made;
  *made_out = made;
  if (o->on_tokens && o->on_tokens(o->user, out + before, made)) stop = 1;
  return stop;
}

/* ---- rewinding a batch that ran past a stop token ---- */

void wisp_decode_loop_free(wisp_session *s) {
  for (int i = 0; i < s->snap_n && i < WISP_MAX_SNAP; i++)
    for (int j = 0; j < 2; j++)
      if (s->snap[j][i]) {
        s->backend->buf_free(s->backend, s->snap[j][i]);
        s->snap[j][i] = NULL;
      }
  s->snap_n = 0;
}

/* Where a batch began: what a rewind needs. */
typedef struct {
  int k, pos0;
  int32_t in0; /* its first input token (-1: not known to the host yet) */
  int graph;   /* recorded through the backend's decode_graph */
} batch_mark;

/* Whether this loop can rewind: stop tokens, and an architecture and
 * backend that can snapshot (allocated on first use). s->snap_n: 0 not yet
 * tried, > 0 buffers ready, SNAP_NONE nothing to copy (no recurrent state),
 * SNAP_FAILED no memory for them (the loop then marks the session). */
#define SNAP_NONE (-2)
#define SNAP_FAILED (-1)
static int rewind_ready(wisp_session *s, const wisp_generate_options *o) {
  wisp_backend *be = s->backend;
  if (o->n_stop <= 0 || !be->buf_copy_to) return 0;
  if (s->snap_n != 0 && s->snap_owner != s->state) wisp_decode_loop_free(s); /* made for another slot's state */
  s->snap_owner = s->state;
  if (s->snap_n > 0 || s->snap_n == SNAP_NONE) return 1;
  if (s->snap_n == SNAP_FAILED) return 0;
  int n = wisp_graph_state_bufs(s->state, s->snap_src, s->snap_len, WISP_MAX_SNAP);
  for (int i = 0; i < n; i++)
    for (int j = 0; j < 2; j++)
      if (!(s->snap[j][i] = be->buf_new(be, s->snap_len[i]))) {
        s->snap_n = n; /* frees what was made */
        wisp_decode_loop_free(s);
        s->snap_n = SNAP_FAILED;
        return 0;
      }
  s->snap_n = n > 0 ? n : SNAP_NONE;
  return 1;
}

static int snap_count(const wisp_session *s) { return s->snap_n > 0 ? s->snap_n : 0; }

/* Records the copy of the recurrent state into snapshot set `set`. */
static void snapshot(wisp_session *s, int set) {
  for (int i = 0; i < snap_count(s); i++)
    s->backend->buf_copy_to(s->backend, s->snap[set][i], s->snap_src[i], s->snap_len[i]);
}

/* The repetition penalty's window ring (ids[sp->hist_off + p % hist_n]
 * holds the token at position p), written from the host for the positions
 * before pos: the tokens the sequence holds there (history, first, then
 * what this generate made), empty (an id outside any vocabulary) where the
 * sequence has none. Each decode step adds its own input token. */
typedef struct {
  const wisp_generate_options *o;
  int32_t first;
  int first_pos;         /* position of `first` */
  const int32_t *out;    /* tokens made so far: out[j] at first_pos + 1 + j */
} seq_tail;

static int32_t token_at(const seq_tail *t, int p) {
  if (p == t->first_pos) return t->first;
  if (p > t->first_pos) return t->out[p - t->first_pos - 1];
  int h = t->o->n_history - (t->first_pos - p);
  return t->o->history && h >= 0 ? t->o->history[h] : -1;
}

static void ring_write(wisp_session *s, const wisp_sampling *sp, const seq_tail *t, int pos, float *tmp) {
  const int n = sp->hist_n;
  for (int i = 0; i < n; i++) {
    int p = pos - n + i; /* positions pos - n .. pos - 1 (pos - n is outside the next step's window: empty) */
    uint32_t bits = p >= 0 && p > pos - n ? (uint32_t)token_at(t, p) : 0xFFFFFFFFu;
    memcpy(&tmp[((p % n) + n) % n], &bits, sizeof bits);
  }
  s->backend->buf_write(s->backend, s->ids, sp->hist_off, (size_t)n, tmp);
}

/* Puts the session back where batch m began (snapshot set `set`) and runs
 * its first `keep` steps again: decoding is deterministic, so the state
 * ends as if the loop had stopped right after the stop token. */
static wisp_status rewind_to(wisp_session *s, int set, const batch_mark *m, int keep, const wisp_sampling *sp,
                             float *slots, const seq_tail *tail, float *ring_tmp) {
  wisp_backend *be = s->backend;
  for (int i = 0; i < snap_count(s); i++) be->buf_copy_to(be, s->snap_src[i], s->snap[set][i], s->snap_len[i]);
  s->pos = m->pos0;
  if (wisp_sampling_penalized(sp)) ring_write(s, sp, tail, s->pos, ring_tmp); /* steps past the stop overwrote it */
  wisp_status st = WISP_OK;
  if (keep > 0) {
    uint32_t bits = (uint32_t)m->in0;
    memcpy(&slots[0], &bits, sizeof bits);
    be->buf_write(be, s->ids, 0, 1, slots);
    for (int i = 0; i < keep && !st; i++)
      st = wisp_graph_decode_step(&s->graph, s->state, be, s->ids, i, s->pos + i, sp, (uint32_t)(s->pos + i) + 1u);
  }
  wisp_status sy = be->sync(be);
  if (!st) st = sy;
  if (!st) {
    s->pos += keep;
  }
  return st;
}

/* Records k decode steps from ids[0] at s->pos: in one go where the
 * backend can run the model's decode graph (the WebGPU persistent decode;
 * *graph = 1), else decode_step k times. kick > 0 (step by step only):
 * after steps kick, 3 kick, 7 kick, ... (chunks of kick, 2 kick, 4 kick,
 * ...) what is recorded is sent to the device (backend.submit), so that it
 * works on the first steps while the host records the rest. */
static wisp_status record_steps(wisp_session *s, int k, const wisp_sampling *sp, int *graph, int kick) {
  wisp_backend *be = s->backend;
  const wisp_graph *g = &s->graph;
  *graph = 0;
  if (be->decode_graph && !wisp_sampling_penalized(sp)) {
    wisp_decode_graph *gp = malloc(sizeof *gp); /* ~10 KB: not on the stack */
    if (gp && wisp_graph_lower_decode(g, s->state, gp) == WISP_OK) {
      wisp_status st = be->decode_graph(be, gp, s->ids, s->pos, k, sp);
      free(gp);
      *graph = st != WISP_EUNSUPPORTED;
      if (st != WISP_EUNSUPPORTED) return st;
    } else {
      free(gp);
    }
  }
  wisp_status st = WISP_OK;
  int next = kick > 0 && be->submit ? kick : 0, chunk = kick;
  for (int i = 0; i < k && !st; i++) {
    st = wisp_graph_decode_step(g, s->state, be, s->ids, i, s->pos + i, sp, (uint32_t)(s->pos + i) + 1u);
    if (next && i + 1 == next && i + 1 < k) {
      be->submit(be);
      chunk *= 2;
      next += chunk;
    }
  }
  return st;
}

/* The first batch of a generate is recorded while the device has nothing
 * to do (later ones while it runs the previous batch): with two batches in
 * flight, tuning decodeKick=N sends its steps out in growing chunks from N
 * on (the ids are still read back once a batch): on the H200 a 64-step
 * Qwen 3.5 0.8B first batch took 95 ms against 75 for the next ones. Off
 * (0) by default, its gain not yet measured (docs/webgpu.md, "Sampling and
 * the decode loop"). */
static int first_batch_kick(const wisp_session *s) { return s->decode_kick; }

/* Submits the recorded batch of k steps and starts reading its ids into
 * readback slot `slot`; backends without read_start just submit. */
static wisp_status batch_submit(wisp_backend *be, wisp_buf *ids, int k, int slot) {
  return be->read_start ? be->read_start(be, ids, 1, (size_t)k, slot) : be->sync(be);
}

/* Waits for that batch and copies its k ids to dst. */
static wisp_status batch_collect(wisp_backend *be, wisp_buf *ids, int k, int slot, float *dst) {
  if (be->read_finish) return be->read_finish(be, slot, dst, (size_t)k);
  be->buf_read(be, ids, 1, (size_t)k, dst);
  return be->sync(be);
}

/* The decode loop, `depth` batches in flight (1 or 2). With 2, batch j+1 is
 * recorded and submitted (its first step reading batch j's last id, moved
 * to slot 0 on the device) before batch j's ids are read back, so the
 * device does not wait while the host records; with 1, the host writes each
 * batch's first id. Readback slot and snapshot set j % 2 belong to batch j.
 * With stop tokens each batch is preceded by a snapshot of the recurrent
 * state, and a stop rewinds to it (rewind_to). A decode_graph batch that
 * comes back failed is recorded again op by op once (redo): what is in
 * flight is drained and dropped, the backend puts the state back
 * (decode_graph_reset), and the loop goes on from that batch. */
static wisp_status generate_batches(wisp_session *s, int32_t first, int n, const wisp_generate_options *o,
                                    int32_t *out, int *n_out, int batch, int depth, const wisp_sampling *sp,
                                    float *slots, float *ring_tmp) {
  const seq_tail tail = {o, first, s->pos, out};
  if (wisp_sampling_penalized(sp)) ring_write(s, sp, &tail, s->pos, ring_tmp);
  wisp_backend *be = s->backend;
  batch_mark mark[2];
  int head = 0, in_flight = 0, submitted = 0, prev_k = 0, full = 0, stop = 0;
  int rew = batch > 1 && rewind_ready(s, o), rew_set = -1, rew_keep = 0;
  batch_mark rew_mark = {0, 0, -1, 0};
  int32_t last = first; /* the last token the host has taken */
  int redo = 0;         /* 1: a failed graph batch is being drained; 2: redone (no second time) */
  batch_mark redo_mark = {0, 0, -1, 0};
  wisp_status st = WISP_OK;
  const int kick = first_batch_kick(s);
  for (;;) {
    if (redo == 1 && !in_flight) { /* drained: put the state back and go on op by op from there */
      redo = 2;
      st = be->decode_graph_reset(be, redo_mark.pos0);
      if (st) {
        s->ran_past_stop = 1; /* the state is not known: the session must be reset */
        st = wisp_fail(WISP_EDEVICE, "the device failed a decode batch at position %d and its state could not be "
                       "put back", redo_mark.pos0);
        break;
      }
      s->pos = redo_mark.pos0;
      submitted = *n_out; /* every batch from the failed one on is recorded again */
      prev_k = 0;         /* its first input comes from the host (last) */
      full = 0;           /* whatever a dropped batch found is found again */
    }
    while (!st && !stop && redo != 1 && in_flight < depth && submitted < n) {
      int k = n - submitted < batch ? n - submitted : batch;
      if (s->pos + k > s->max_pos) k = s->max_pos - s->pos;
      if (k <= 0) {
        full = 1;
        break;
      }
      if (prev_k && depth > 1) {
        be->buf_copy(be, s->ids, 0, (size_t)prev_k, 1);
      } else {
        uint32_t bits = (uint32_t)last;
        memcpy(&slots[0], &bits, sizeof bits);
        be->buf_write(be, s->ids, 0, 1, slots);
      }
      double t = wisp_now_s();
      int slot = (head + in_flight) % 2;
      mark[slot] = (batch_mark){k, s->pos, -1, 0};
      if (rew) snapshot(s, slot);
      st = record_steps(s, k, sp, &mark[slot].graph, depth > 1 && submitted == 0 ? kick : 0);
      wisp_status rs = batch_submit(be, s->ids, k, slot);
      if (!st) st = rs;
      s->loop_record_s += wisp_now_s() - t;
      if (st) break;
      in_flight++;
      submitted += k;
      prev_k = k;
      s->pos += k;
    }
    if (!in_flight) break;
    double t = wisp_now_s();
    int slot = head;
    wisp_status rf = batch_collect(be, s->ids, mark[slot].k, slot, slots + 1);
    s->loop_wait_s += wisp_now_s() - t;
    in_flight--;
    head ^= 1;
    if (rf || st) {
      if (!st) st = rf;
      if (in_flight) s->ran_past_stop = 1;
      continue; /* drain what is in flight */
    }
    if (stop || redo == 1) continue; /* a batch past the stop or after a failed one: drained, its ids dropped */
    int made = 0, k = mark[slot].k;
    mark[slot].in0 = last;
    stop = take_batch(o, wisp_model_vocab(s->model), slots, k, out, n_out, &made);
    if (stop < 0 && mark[slot].graph && !redo && be->decode_graph_reset) {
      redo = 1;
      redo_mark = mark[slot];
      stop = 0;
      continue;
    }
    if (stop < 0) {
      st = WISP_EDEVICE;
      s->ran_past_stop = 1; /* the state is not known: the session must be reset */
      continue;
    }
    if (made) last = out[*n_out - 1];
    if (!stop) continue;
    /* The state has run past what was taken: this batch's steps after the
     * stop token, and any batch still in flight. */
    if (made < k) {
      rew_set = slot;
      rew_mark = mark[slot];
      rew_keep = made;
    } else if (in_flight) {
      rew_set = head;
      rew_mark = mark[head];
      rew_keep = 0;
    }
  }
  if (!st && rew_set >= 0) {
    if (rew) st = rewind_to(s, rew_set, &rew_mark, rew_keep, sp, slots, &tail, ring_tmp);
    else s->ran_past_stop = 1;
  }
  if (!st && full && *n_out < n && !stop) st = wisp_fail(WISP_EINVAL, "context full: %d positions", s->max_pos);
  return st;
}

wisp_status wisp_session_generate(wisp_session *s, int32_t first, int n, const wisp_generate_options *o, int32_t *out,
                                  int *n_out) {
  if (!n_out) return wisp_fail(WISP_EINVAL, "wisp_session_generate: no place for the count (n_out is NULL)");
  *n_out = 0;
  if (!s) return wisp_fail(WISP_EINVAL, "wisp_session_generate: no session");
  if (n < 0) return wisp_fail(WISP_EINVAL, "wisp_session_generate: %d tokens is negative", n);
  if (n == 0) return WISP_OK;
  if (!out) return wisp_fail(WISP_EINVAL, "wisp_session_generate: no place for the tokens (out is NULL)");
  wisp_generate_options taken;
  wisp_status st = WISP_TAKE_OPTIONS(wisp_generate_options, WISP_GENERATE_OPTIONS_FIRST_SIZE, o, &taken);
  if (st) return st;
  o = &taken;
  if (o->batch < 0 || o->top_k < 0 || o->top_p < 0 || o->min_p < 0)
    return wisp_fail(WISP_EINVAL, "generate: batch %d, top_k %d, top_p %g, min_p %g: none may be negative", o->batch,
                     o->top_k, (double)o->top_p, (double)o->min_p);
  if (o->n_stop < 0 || (o->n_stop > 0 && !o->stop))
    return wisp_fail(WISP_EINVAL, "generate: %d stop tokens without their ids", o->n_stop);
  if (s->ran_past_stop)
    return wisp_fail(WISP_EINVAL, "the session ran past a stop token in a batched decode; reset it before reuse");
  if (!s->backend->embed_id || !s->backend->sample_id || !s->backend->buf_write)
    return wisp_fail(WISP_EUNSUPPORTED, "backend '%s' has no decode loop", s->backend->name);
  int vocab = wisp_model_vocab(s->model);
  if (first < 0 || first >= vocab) return wisp_fail(WISP_EINVAL, "token id %d is outside the vocabulary (%d)", first, vocab);
  int batch = o->batch > 0 ? o->batch : wisp_session_plan_batch(s);
  wisp_sampling sp = {.temperature = o->temperature, .top_k = o->top_k, .top_p = o->top_p, .min_p = o->min_p,
                      .seed = (uint32_t)(o->seed ^ (o->seed >> 32)), .repeat_penalty = o->repeat_penalty,
                      .hist_n = o->repeat_last_n, .hist_off = (uint32_t)batch + 1u};
  if (o->n_history < 0 || (o->n_history > 0 && !o->history))
    return wisp_fail(WISP_EINVAL, "generate: a history of %d tokens without its ids", o->n_history);
  if (o->repeat_penalty < 0 || o->repeat_last_n < 0 || o->repeat_last_n > 1 << 20)
    return wisp_fail(WISP_EINVAL, "generate: repeat penalty %g over %d tokens", (double)o->repeat_penalty,
                     o->repeat_last_n);
  const int penalized = wisp_sampling_penalized(&sp);
  if (!penalized) sp.hist_n = 0;
  if (penalized && (!s->backend->penalize || !s->backend->buf_copy))
    return wisp_fail(WISP_EUNSUPPORTED, "backend '%s' has no repetition penalty in its decode loop", s->backend->name);
  /* ids: the batch's slots, then the penalty's window ring */
  const int need = batch + 1 + sp.hist_n;
  if (!s->ids || s->ids_slots < need) {
    if (s->ids) s->backend->buf_free(s->backend, s->ids);
    s->ids = s->backend->buf_new(s->backend, (size_t)need);
    s->ids_slots = s->ids ? need : 0;
    if (!s->ids) return wisp_fail(WISP_ENOMEM, "out of memory for the decode loop");
  }
  /* KV caches that grow do so now, for the whole request, before its
   * first step: one that grew mid-decode would stop the persistent decode
   * to remake its arena, and the recorded steps bind them. */
  const int fill = s->pos + n < s->max_pos ? s->pos + n : s->max_pos;
  if ((st = wisp_graph_state_reserve(s->state, s->backend, fill))) return st;
  float *slots = malloc(sizeof(float) * ((size_t)batch + 1 + (size_t)sp.hist_n));
  if (!slots) return wisp_fail(WISP_ENOMEM, "out of memory");
  /* Two batches in flight where the backend can read back asynchronously;
   * one-token batches with stop tokens (chat) stay one at a time, since a
   * run-ahead batch would need a snapshot per token to be rewound. */
  const wisp_backend *be = s->backend;
  const int async = be->buf_copy && be->read_start && be->read_finish;
  const int depth = !o->sequential && async && (batch > 1 || o->n_stop == 0) ? 2 : 1;
  st = generate_batches(s, first, n, o, out, n_out, batch, depth, &sp, slots, slots + batch + 1);
  free(slots);
  return st;
}

int wisp_session_plan_batch(const wisp_session *s) {
  if (!s) {
    wisp_fail(WISP_EINVAL, "wisp_session_plan_batch: no session");
    return -1;
  }
  const wisp_batching *b = s->plan->decode_loop.present ? &s->plan->decode_loop : &s->plan->batching;
  if (!b->present || !s->plan->fusions.decode_loop) return 1; /* decodeLoop off: one token per submit */
  int n = (b->batch_size > 0 ? b->batch_size : 1) * (b->readback_interval > 0 ? b->readback_interval : 1);
  if (b->max_batch_decode_tokens > 0 && n > b->max_batch_decode_tokens) n = b->max_batch_decode_tokens;
  return n > 0 ? n : 1;
}
