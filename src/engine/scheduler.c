/* The serving scheduler (include/wisp.h, "Serving"; docs/scheduler.md).
 *
 * One session of `parallel` slots and one thread that runs it. Each turn of
 * the thread's loop:
 *   1. takes what other threads asked for: new requests go from the queue
 *      to free slots (the slot whose history is the longest prefix of the
 *      prompt first, else the least recently used), cancelled ones end;
 *   2. prefills the next segment of every request still reading its
 *      prompt (oldest first, up to prefill_chunk tokens in all; never a
 *      prompt's last token) in one batched prefill: one pass over the
 *      weights for all their tokens, each slot's mixers on its own state;
 *      at a prompt's end it snapshots the conv/recurrent state (and where a
 *      request continued a slot's live state, that state first);
 *   3. runs one batched decode step (wisp_session_step_each) for every
 *      request past its prompt: a request's first step feeds its prompt's
 *      last token, later ones the token chosen before; each row is drawn
 *      with its request's own sampling on the device, and rows that need
 *      host work (penalties, logprobs) read their logits back;
 *   4. reports each new token, or the request's end, through its callback.
 * So a long prompt costs the running streams at most one prefill chunk a
 * step, and every running request advances once per pass over the weights.
 *
 * Locking: `mu` guards the queue, the slots' request pointers, the cancel
 * flags and the counters; the thread holds it only to take and hand over
 * work, never while it computes or calls a callback. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/internal.h"
#include "engine/sched_sample.h"
#include "engine/sched_slot.h"
#include "engine/session.h"
#include "engine/slots.h"
#include "model/common.h"
#include "util/err.h"
#include "util/options.h"

#define DEFAULT_PARALLEL 4
#define DEFAULT_PREFILL_CHUNK 512
#define DEFAULT_SNAPSHOTS 3
#define MAX_TOP_LOGPROBS 20

typedef struct sched_req {
  uint64_t id;
  wisp_sched_request r; /* prompt and stop point at the copies below */
  int32_t *prompt, *stop;
  int slot;      /* -1 while queued */
  int n_cached;  /* prompt tokens the slot already held */
  int started;   /* its slot was brought to the reusable prefix (start) */
  int decoding;  /* the prompt is in but its last token: cur is the next token to feed */
  int32_t cur;
  int n_gen;     /* tokens reported */
  int cancelled; /* wisp_sched_cancel (under mu) */
  int *counts;   /* generated-token counts for the penalties (NULL: none asked) */
  struct sched_req *next; /* queue link */
} sched_req;

struct wisp_sched {
  wisp_model *model;
  wisp_session *session;
  int parallel, max_queue, prefill_chunk, context, vocab;
  int run_ahead; /* decode-loop batch of a request decoding alone: 0 the plan's, -1 off */
  const int32_t *model_stop; /* the model's stop tokens (owned by the model) */
  int n_model_stop;
  sched_slot *slots;
  sched_req **running; /* per slot, NULL when free */
  float *logits;       /* parallel x vocab: rows read back for host work (made when first needed) */
  uint64_t clock;      /* counts slot uses and snapshots (LRU order) */

  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t wake;
  int stopping;
  sched_req *queue_head, *queue_tail;
  int in_flight; /* queued + running: submit refuses at parallel + max_queue */
  uint64_t next_id;
  wisp_sched_stats stats;
};

static void req_free(sched_req *q) {
  if (!q) return;
  free(q->prompt);
  free(q->stop);
  free(q->counts);
  free(q);
}

/* ---- events ---- */

static void emit(sched_req *q, wisp_sched_event *ev) {
  ev->id = q->id;
  ev->n_prompt = q->r.n_prompt;
  ev->n_cached = q->n_cached;
  ev->n_generated = q->n_gen;
  if (q->r.on_event) q->r.on_event(q->r.user, ev);
}

/* The request's last event; it leaves the scheduler (its slot, if any, is
 * free again and keeps its history for reuse). */
static void finish(wisp_sched *S, sched_req *q, wisp_finish why, const char *message) {
  pthread_mutex_lock(&S->mu);
  if (q->slot >= 0) {
    S->running[q->slot] = NULL;
    S->slots[q->slot].held = S->slots[q->slot].n_hist > 0;
    S->slots[q->slot].last_used = ++S->clock;
    S->stats.running--;
  }
  S->in_flight--;
  S->stats.requests_finished++;
  pthread_mutex_unlock(&S->mu);
  wisp_sched_event ev = {.finish = why, .message = message};
  emit(q, &ev);
  req_free(q);
}

/* ---- 1. taking work ---- */

/* The free slot for prompt p: the one it can reuse most of, then the least
 * recently used (empty slots first). A slot that would lose more of its
 * history than the prompt reuses (another conversation that shares only a
 * system prompt) ranks as no reuse: its owner may come back for it. */
static int pick_slot(wisp_sched *S, const int32_t *p, int n, int *reuse) {
  int best = -1, best_rank = -1;
  *reuse = 0;
  for (int j = 0; j < S->parallel; j++) {
    if (S->running[j]) continue;
    const sched_slot *sl = &S->slots[j];
    const int r = sched_slot_reusable(sl, p, n), rank = sl->n_hist - r > r ? 0 : r;
    if (rank > best_rank || (rank == best_rank && sl->last_used < S->slots[best].last_used)) {
      best = j;
      best_rank = rank;
      *reuse = r;
    }
  }
  return best;
}

/* Under mu: the requests cancelled while queued leave the queue for *gone;
 * queued requests go to free slots, first come first served. */
static void take_work(wisp_sched *S, sched_req **gone) {
  *gone = NULL;
  for (sched_req **pq = &S->queue_head; *pq;) { /* cancelled while queued */
    sched_req *q = *pq;
    if (q->cancelled) {
      *pq = q->next;
      q->next = *gone;
      *gone = q;
      S->stats.queued--;
    } else {
      pq = &q->next;
    }
  }
  S->queue_tail = NULL;
  for (sched_req *q = S->queue_head; q; q = q->next) S->queue_tail = q;
  while (S->queue_head) {
    int reuse, j = pick_slot(S, S->queue_head->prompt, S->queue_head->r.n_prompt, &reuse);
    if (j < 0) break;
    sched_req *q = S->queue_head;
    S->queue_head = q->next;
    if (!S->queue_head) S->queue_tail = NULL;
    q->next = NULL;
    q->slot = j;
    q->n_cached = reuse;
    S->running[j] = q;
    S->stats.queued--;
    S->stats.running++;
    S->stats.prompt_tokens += (uint64_t)q->r.n_prompt;
    S->stats.prompt_tokens_cached += (uint64_t)reuse;
  }
}

static int any_running(const wisp_sched *S) {
  for (int j = 0; j < S->parallel; j++)
    if (S->running[j]) return 1;
  return 0;
}

/* A request that just got its slot: the slot resumes from the reusable
 * prefix. */
static wisp_status start(wisp_sched *S, sched_req *q) {
  sched_slot *sl = &S->slots[q->slot];
  const int live = q->n_cached > 0 && q->n_cached == sl->n_hist;
  wisp_status st = sched_slot_resume(sl, S->session, q->slot, q->n_cached);
  if (st) return st;
  /* Continuing the live state (the next turn of a conversation): keep it
   * as it is at this turn boundary too, for a later prompt that diverges
   * after it (an edited last message) */
  if (live) sched_slot_snapshot(sl, S->session->backend, ++S->clock);
  q->started = 1;
  if (q->n_cached == q->r.n_prompt - 1) {
    q->decoding = 1;
    q->cur = q->prompt[q->r.n_prompt - 1];
  }
  return WISP_OK;
}

/* ---- 2. prefill ---- */

/* q's next prompt segment (never its last token): from where its slot is
 * to the next multiple of prefill_chunk or the prompt's end. The segments
 * depend only on where the slot resumed and the prompt's length, never on
 * what else is running, so each slot's mixers see the same pieces as when
 * the request runs alone. */
static int next_segment(const wisp_sched *S, const sched_req *q) {
  const int at = S->slots[q->slot].n_hist, end = q->r.n_prompt - 1, C = S->prefill_chunk;
  const int seg_end = (at / C + 1) * C;
  return (seg_end < end ? seg_end : end) - at;
}

/* At the end of q's prompt (all but its last token fed): snapshots the
 * state there and q starts decoding. */
static void prompt_done(wisp_sched *S, sched_req *q) {
  sched_slot *sl = &S->slots[q->slot];
  if (q->decoding || sl->n_hist != q->r.n_prompt - 1) return;
  sched_slot_snapshot(sl, S->session->backend, ++S->clock);
  q->decoding = 1;
  q->cur = q->prompt[q->r.n_prompt - 1];
}

/* One batched prefill (wisp_session_prefill_each: one pass over the
 * weights for every slot's tokens) of the next segment of each request
 * still reading its prompt, oldest first, while the segments fit in
 * prefill_chunk tokens (the oldest's always). Requests that fail are
 * removed from live[] and end. */
static void prefill_step(wisp_sched *S, sched_req **live, int n) {
  int order[WISP_MAX_ROWS], k = 0;
  for (int i = 0; i < n; i++) /* prompts still reading, oldest first (ids grow with submission) */
    if (live[i] && !live[i]->decoding) {
      int j = k++;
      for (; j > 0 && live[order[j - 1]]->id > live[i]->id; j--) order[j] = order[j - 1];
      order[j] = i;
    }
  int slots[WISP_MAX_ROWS], lens[WISP_MAX_ROWS], which[WISP_MAX_ROWS], m = 0, used = 0;
  const int32_t *toks[WISP_MAX_ROWS];
  for (int j = 0; j < k; j++) {
    sched_req *q = live[order[j]];
    const int len = next_segment(S, q);
    if (len <= 0) continue;
    if (m > 0 && used + len > S->prefill_chunk) break;
    slots[m] = q->slot;
    lens[m] = len;
    toks[m] = q->prompt + S->slots[q->slot].n_hist;
    which[m++] = order[j];
    used += len;
  }
  if (m == 0) return;
  if (wisp_session_prefill_each(S->session, slots, toks, lens, m)) {
    /* which slots took their tokens is not known: each ends, its slot emptied */
    char msg[256];
    snprintf(msg, sizeof msg, "%s", wisp_last_error());
    for (int j = 0; j < m; j++) {
      sched_req *q = live[which[j]];
      live[which[j]] = NULL;
      sched_slot_clear(&S->slots[q->slot], S->session, q->slot);
      finish(S, q, WISP_FINISH_ERROR, msg);
    }
    return;
  }
  pthread_mutex_lock(&S->mu);
  S->stats.prefill_calls++;
  pthread_mutex_unlock(&S->mu);
  for (int j = 0; j < m; j++) {
    sched_req *q = live[which[j]];
    sched_slot *sl = &S->slots[q->slot];
    if (!sched_slot_append(sl, toks[j], lens[j])) {
      live[which[j]] = NULL;
      sched_slot_clear(sl, S->session, q->slot);
      finish(S, q, WISP_FINISH_ERROR, "out of memory");
      continue;
    }
    prompt_done(S, q);
  }
}

/* ---- 3. decode ---- */

static int is_stop(const wisp_sched *S, const sched_req *q, int32_t t) {
  for (int i = 0; i < q->r.n_stop; i++)
    if (q->stop[i] == t) return 1;
  if (!q->r.ignore_eos)
    for (int i = 0; i < S->n_model_stop; i++)
      if (S->model_stop[i] == t) return 1;
  return 0;
}

static wisp_sampling sampling_of(const wisp_sched_request *r) {
  return (wisp_sampling){.temperature = r->temperature, .top_k = r->top_k, .top_p = r->top_p, .min_p = r->min_p,
                         .seed = (uint32_t)(r->seed ^ (r->seed >> 32))};
}

static int needs_host(const sched_req *q) { return q->counts || q->r.logprobs || q->r.top_logprobs > 0; }

/* After row i of a step: the token (host-drawn when penalized), its event,
 * and whether the request goes on. */
static void after_step(wisp_sched *S, sched_req *q, int32_t device_token, float *logits) {
  sched_slot *sl = &S->slots[q->slot];
  int32_t token = device_token;
  if (q->counts) { /* penalties: draw on the host from the penalized logits, at the same step */
    sched_penalize(logits, S->vocab, q->counts, q->r.presence_penalty, q->r.frequency_penalty);
    wisp_sampling sp = sampling_of(&q->r);
    token = (int32_t)wisp_sample_reference(logits, S->vocab, &sp, (uint32_t)sl->n_hist);
  }
  if (is_stop(S, q, token)) {
    finish(S, q, WISP_FINISH_STOP, NULL);
    return;
  }
  wisp_sched_event ev = {.token = token};
  int32_t top_ids[MAX_TOP_LOGPROBS];
  float top_lp[MAX_TOP_LOGPROBS];
  if (q->r.logprobs || q->r.top_logprobs > 0) {
    ev.logprob = sched_logprobs(logits, S->vocab, token, q->r.top_logprobs, top_ids, top_lp);
    ev.n_top = q->r.top_logprobs;
    ev.top_ids = top_ids;
    ev.top_logprobs = top_lp;
  }
  if (q->counts) q->counts[token]++;
  q->n_gen++;
  pthread_mutex_lock(&S->mu);
  S->stats.generated_tokens++;
  pthread_mutex_unlock(&S->mu);
  emit(q, &ev);
  if (q->r.max_tokens > 0 && q->n_gen >= q->r.max_tokens)
    finish(S, q, WISP_FINISH_LENGTH, NULL);
  else if (sl->n_hist >= S->context) /* no room to feed it */
    finish(S, q, WISP_FINISH_LENGTH, NULL);
  else
    q->cur = token;
}

/* One batched step over every decoding request. */
static void decode_step(wisp_sched *S, sched_req **rows, int n) {
  int slots[WISP_MAX_ROWS];
  int32_t tokens[WISP_MAX_ROWS], next[WISP_MAX_ROWS];
  wisp_sampling sp[WISP_MAX_ROWS];
  unsigned char want[WISP_MAX_ROWS];
  int any_host = 0;
  for (int i = 0; i < n; i++) {
    slots[i] = rows[i]->slot;
    tokens[i] = rows[i]->cur;
    sp[i] = sampling_of(&rows[i]->r);
    want[i] = (unsigned char)needs_host(rows[i]);
    any_host |= want[i];
  }
  wisp_status st = WISP_OK;
  if (any_host && !S->logits && !(S->logits = malloc((size_t)S->parallel * (size_t)S->vocab * sizeof(float))))
    st = wisp_fail(WISP_ENOMEM, "out of memory for %d rows of logits", S->parallel);
  if (!st) st = wisp_session_step_each(S->session, slots, tokens, n, sp, next, any_host ? S->logits : NULL, want);
  if (st) {
    char msg[256];
    snprintf(msg, sizeof msg, "%s", wisp_last_error());
    for (int i = 0; i < n; i++) {
      sched_slot_clear(&S->slots[rows[i]->slot], S->session, rows[i]->slot);
      finish(S, rows[i], WISP_FINISH_ERROR, msg);
    }
    return;
  }
  for (int i = 0; i < n; i++) {
    sched_req *q = rows[i];
    if (!sched_slot_append(&S->slots[q->slot], &tokens[i], 1)) { /* the state has it, the history cannot say so */
      sched_slot_clear(&S->slots[q->slot], S->session, q->slot);
      finish(S, q, WISP_FINISH_ERROR, "out of memory");
      continue;
    }
    after_step(S, q, next[i], want[i] ? S->logits + (size_t)i * S->vocab : NULL);
  }
}

/* ---- 3b. run-ahead: one request decoding alone ---- */

static void fail_request(wisp_sched *S, sched_req *q) {
  char msg[256];
  snprintf(msg, sizeof msg, "%s", wisp_last_error());
  sched_slot_clear(&S->slots[q->slot], S->session, q->slot);
  finish(S, q, WISP_FINISH_ERROR, msg);
}


/* Under mu: a queued request could start now (a slot is free for it). */
static int waiting_for_slot(const wisp_sched *S) { return S->queue_head && S->stats.running < S->parallel; }

/* Whether q, decoding alone, may run the decode loop: its tokens are drawn
 * on the device (no penalties, no logprobs needing each row's logits). */
static int can_run_ahead(const wisp_sched *S, const sched_req *q) { return S->run_ahead >= 0 && !needs_host(q); }

typedef struct {
  wisp_sched *S;
  sched_req *q;
  int stopped; /* a stop token came (not reported) */
} run_ahead_ctx;

/* The decode loop's batch callback: reports each token as after_step does
 * (a stop token ends it unreported); asks the loop to stop when a request
 * waits, q is cancelled or the scheduler is shutting down, so they wait at
 * most one batch (a shutdown's grace is over by then: wisp_sched_free). */
static int run_ahead_tokens(void *user, const int32_t *t, int n) {
  run_ahead_ctx *c = user;
  sched_req *q = c->q;
  for (int i = 0; i < n; i++) {
    if (is_stop(c->S, q, t[i])) {
      c->stopped = 1;
      return 1;
    }
    q->n_gen++;
    pthread_mutex_lock(&c->S->mu);
    c->S->stats.generated_tokens++;
    c->S->stats.run_ahead_tokens++;
    pthread_mutex_unlock(&c->S->mu);
    wisp_sched_event ev = {.token = t[i]};
    emit(q, &ev);
  }
  pthread_mutex_lock(&c->S->mu);
  const int other = waiting_for_slot(c->S) || q->cancelled || c->S->stopping;
  pthread_mutex_unlock(&c->S->mu);
  return other;
}

/* Runs q's decode with the decode loop on its slot, up to its max_tokens
 * or the context, streaming as batches come back; the state ends holding
 * exactly the tokens fed (the loop rewinds what ran past a stop), so the
 * slot's history and the next step go on as after one step a token. */
static void run_ahead(wisp_sched *S, sched_req *q) {
  sched_slot *sl = &S->slots[q->slot];
  int n = S->context - sl->n_hist;
  if (q->r.max_tokens > 0 && q->r.max_tokens - q->n_gen < n) n = q->r.max_tokens - q->n_gen;
  int32_t *out = malloc((size_t)n * sizeof *out), *stops = malloc((size_t)(q->r.n_stop + S->n_model_stop + 1) * sizeof *stops);
  int n_stop = 0, n_out = 0;
  wisp_status st = out && stops ? WISP_OK : wisp_fail(WISP_ENOMEM, "out of memory");
  if (!st) {
    for (int i = 0; i < q->r.n_stop; i++) stops[n_stop++] = q->stop[i];
    for (int i = 0; !q->r.ignore_eos && i < S->n_model_stop; i++) stops[n_stop++] = S->model_stop[i];
    /* no stop token at all: an id no token has, so that the loop still
     * snapshots before each batch and can rewind an early stop */
    if (n_stop == 0) stops[n_stop++] = -1;
    run_ahead_ctx c = {S, q, 0};
    const wisp_sampling sp = sampling_of(&q->r);
    wisp_generate_options o = {.size = sizeof o, .temperature = sp.temperature, .top_k = sp.top_k, .top_p = sp.top_p,
                               .min_p = sp.min_p, .seed = q->r.seed, .stop = stops, .n_stop = n_stop,
                               .batch = S->run_ahead, .on_tokens = run_ahead_tokens, .user = &c};
    st = wisp_slot_generate(S->session, q->slot, q->cur, n, &o, out, &n_out);
    /* fed: the token q held, then every one made but the last */
    if (!st && n_out > 0 && (!sched_slot_append(sl, &q->cur, 1) || !sched_slot_append(sl, out, n_out - 1)))
      st = wisp_fail(WISP_ENOMEM, "out of memory");
    if (!st) {
      if (c.stopped)
        finish(S, q, WISP_FINISH_STOP, NULL);
      else if ((q->r.max_tokens > 0 && q->n_gen >= q->r.max_tokens) || sl->n_hist >= S->context)
        finish(S, q, WISP_FINISH_LENGTH, NULL);
      else if (n_out > 0)
        q->cur = out[n_out - 1];
    }
  }
  free(out);
  free(stops);
  if (st) fail_request(S, q);
}

/* ---- the thread ---- */

static void *run(void *arg) {
  wisp_sched *S = arg;
  sched_req *live[WISP_MAX_ROWS];
  int cancelled[WISP_MAX_ROWS];
  for (;;) {
    pthread_mutex_lock(&S->mu);
    while (!S->stopping && !S->queue_head && !any_running(S)) pthread_cond_wait(&S->wake, &S->mu);
    if (S->stopping) {
      pthread_mutex_unlock(&S->mu);
      break;
    }
    sched_req *gone;
    take_work(S, &gone);
    int n_live = 0;
    for (int j = 0; j < S->parallel; j++)
      if (S->running[j]) {
        cancelled[n_live] = S->running[j]->cancelled;
        live[n_live++] = S->running[j];
      }
    pthread_mutex_unlock(&S->mu);

    while (gone) { /* cancelled while queued */
      sched_req *q = gone;
      gone = q->next;
      finish(S, q, WISP_FINISH_CANCELLED, NULL);
    }
    /* cancelled running requests end; newly placed ones resume their slot */
    int n = 0;
    for (int i = 0; i < n_live; i++) {
      sched_req *q = live[i];
      if (cancelled[i]) {
        finish(S, q, WISP_FINISH_CANCELLED, NULL);
      } else if (!q->started && start(S, q)) {
        fail_request(S, q);
      } else {
        live[n++] = q;
      }
    }
    /* one batched prefill of the waiting prompts, within the budget */
    prefill_step(S, live, n);
    int m = 0;
    for (int i = 0; i < n; i++)
      if (live[i] && live[i]->decoding) live[m++] = live[i];
    /* one request decoding alone, nothing else to do: several tokens a submit */
    pthread_mutex_lock(&S->mu);
    const int alone = m == 1 && n == 1 && !waiting_for_slot(S) && !live[0]->cancelled;
    pthread_mutex_unlock(&S->mu);
    if (alone && can_run_ahead(S, live[0]))
      run_ahead(S, live[0]);
    else if (m > 0)
      decode_step(S, live, m);
    pthread_mutex_lock(&S->mu);
    S->stats.steps++;
    pthread_mutex_unlock(&S->mu);
  }
  /* shutting down: every request gets its last event */
  for (int j = 0; j < S->parallel; j++)
    if (S->running[j]) finish(S, S->running[j], WISP_FINISH_CANCELLED, NULL);
  for (;;) {
    pthread_mutex_lock(&S->mu);
    sched_req *q = S->queue_head;
    if (q) {
      S->queue_head = q->next;
      S->stats.queued--;
    }
    pthread_mutex_unlock(&S->mu);
    if (!q) break;
    finish(S, q, WISP_FINISH_CANCELLED, NULL);
  }
  return NULL;
}

/* ---- the API ---- */

wisp_status wisp_sched_new(wisp_model *m, const wisp_sched_options *o, wisp_sched **out) {
  if (!out) return wisp_fail(WISP_EINVAL, "wisp_sched_new: no out-pointer");
  *out = NULL;
  if (!m) return wisp_fail(WISP_EINVAL, "wisp_sched_new: no model");
  wisp_sched_options opt;
  wisp_status st = WISP_TAKE_OPTIONS(wisp_sched_options, WISP_SCHED_OPTIONS_FIRST_SIZE, o, &opt);
  if (st) return st;
  if (opt.parallel < 0 || opt.parallel > WISP_MAX_ROWS)
    return wisp_fail(WISP_EINVAL, "parallel %d: 1 to %d sequences (0 = %d)", opt.parallel, WISP_MAX_ROWS, DEFAULT_PARALLEL);
  if (opt.max_queue < 0) return wisp_fail(WISP_EINVAL, "max_queue %d: must be >= 0", opt.max_queue);
  if (opt.prefill_chunk < 0) return wisp_fail(WISP_EINVAL, "prefill_chunk %d: must be >= 0", opt.prefill_chunk);
  if (opt.context < 0) return wisp_fail(WISP_EINVAL, "context %d: must be >= 0", opt.context);
  if (opt.run_ahead < -1) return wisp_fail(WISP_EINVAL, "run_ahead %d: tokens a batch, 0 = the plan's, -1 = off", opt.run_ahead);
  if (opt.snapshots < -1 || opt.snapshots > SCHED_MAX_SNAPS)
    return wisp_fail(WISP_EINVAL, "snapshots %d: -1 (none) to %d a slot", opt.snapshots, SCHED_MAX_SNAPS);
  wisp_sched *S = calloc(1, sizeof *S);
  if (!S) return wisp_fail(WISP_ENOMEM, "out of memory");
  S->model = m;
  S->parallel = opt.parallel ? opt.parallel : DEFAULT_PARALLEL;
  S->max_queue = opt.max_queue ? opt.max_queue : 4 * S->parallel;
  S->prefill_chunk = opt.prefill_chunk ? opt.prefill_chunk : DEFAULT_PREFILL_CHUNK;
  S->run_ahead = opt.run_ahead;
  const int n_snaps = opt.snapshots < 0 ? 0 : opt.snapshots ? opt.snapshots : DEFAULT_SNAPSHOTS;
  S->vocab = wisp_model_vocab(m);
  wisp_session_options so = {.backend = opt.backend, .threads = opt.threads, .max_context = opt.context,
                             .profile = opt.profile, .tuning = opt.tuning, .slots = S->parallel};
  st = wisp_session_new(m, &so, &S->session);
  if (st) {
    free(S);
    return st;
  }
  S->context = wisp_session_context(S->session);
  if (wisp_stop_tokens(m, &S->model_stop, &S->n_model_stop) != WISP_OK) { /* a model without a tokenizer */
    S->model_stop = NULL;
    S->n_model_stop = 0;
  }
  S->slots = calloc((size_t)S->parallel, sizeof *S->slots);
  S->running = calloc((size_t)S->parallel, sizeof *S->running);
  if (!S->slots || !S->running) {
    st = wisp_fail(WISP_ENOMEM, "out of memory for %d slots", S->parallel);
    goto fail;
  }
  for (int j = 0; j < S->parallel; j++) sched_slot_init(&S->slots[j], S->session, j, n_snaps);
  S->stats.slots = S->parallel;
  pthread_mutex_init(&S->mu, NULL);
  pthread_cond_init(&S->wake, NULL);
  if (pthread_create(&S->thread, NULL, run, S) != 0) {
    pthread_cond_destroy(&S->wake);
    pthread_mutex_destroy(&S->mu);
    st = wisp_fail(WISP_ENOMEM, "cannot start the scheduler thread");
    goto fail;
  }
  *out = S;
  return WISP_OK;
fail:
  for (int j = 0; S->slots && j < S->parallel; j++) sched_slot_free(&S->slots[j], S->session->backend);
  free(S->slots);
  free(S->running);
  free(S->logits);
  wisp_session_free(S->session);
  free(S);
  return st;
}

static wisp_status check_request(const wisp_sched *S, const wisp_sched_request *r) {
  if (!r->prompt || r->n_prompt < 1) return wisp_fail(WISP_EINVAL, "the prompt is empty");
  if (r->n_prompt > S->context)
    return wisp_fail(WISP_EINVAL, "the prompt (%d tokens) is longer than the context (%d)", r->n_prompt, S->context);
  for (int i = 0; i < r->n_prompt; i++)
    if (r->prompt[i] < 0 || r->prompt[i] >= S->vocab)
      return wisp_fail(WISP_EINVAL, "prompt token %d: id %d outside the vocabulary (%d)", i, r->prompt[i], S->vocab);
  if (r->max_tokens < 0) return wisp_fail(WISP_EINVAL, "max_tokens %d: must be >= 0", r->max_tokens);
  if (r->n_stop < 0 || (r->n_stop > 0 && !r->stop)) return wisp_fail(WISP_EINVAL, "bad stop token list");
  if (r->top_logprobs < 0 || r->top_logprobs > MAX_TOP_LOGPROBS)
    return wisp_fail(WISP_EINVAL, "top_logprobs %d: 0 to %d", r->top_logprobs, MAX_TOP_LOGPROBS);
  if (r->top_k < 0) return wisp_fail(WISP_EINVAL, "top_k %d: must be >= 0", r->top_k);
  if (!(r->top_p >= 0) || !(r->min_p >= 0) || !(r->min_p <= 1) || r->temperature != r->temperature)
    return wisp_fail(WISP_EINVAL, "top_p, min_p or temperature out of range");
  if (r->presence_penalty != r->presence_penalty || r->frequency_penalty != r->frequency_penalty)
    return wisp_fail(WISP_EINVAL, "a penalty is not a number");
  return WISP_OK;
}

wisp_status wisp_sched_submit(wisp_sched *S, const wisp_sched_request *r, uint64_t *id) {
  if (id) *id = 0;
  if (!S || !r) return wisp_fail(WISP_EINVAL, "wisp_sched_submit: no scheduler or request");
  wisp_sched_request req;
  wisp_status st = WISP_TAKE_OPTIONS(wisp_sched_request, WISP_SCHED_REQUEST_FIRST_SIZE, r, &req);
  if (st) return st;
  r = &req;
  if ((st = check_request(S, r))) return st;
  sched_req *q = calloc(1, sizeof *q);
  if (!q) return wisp_fail(WISP_ENOMEM, "out of memory");
  q->r = *r;
  q->slot = -1;
  q->prompt = malloc((size_t)r->n_prompt * sizeof *q->prompt);
  q->stop = malloc((size_t)(r->n_stop > 0 ? r->n_stop : 1) * sizeof *q->stop);
  const int penalized = r->presence_penalty != 0 || r->frequency_penalty != 0;
  if (penalized) q->counts = calloc((size_t)S->vocab, sizeof *q->counts);
  if (!q->prompt || !q->stop || (penalized && !q->counts)) {
    req_free(q);
    return wisp_fail(WISP_ENOMEM, "out of memory");
  }
  memcpy(q->prompt, r->prompt, (size_t)r->n_prompt * sizeof *q->prompt);
  if (r->n_stop > 0) memcpy(q->stop, r->stop, (size_t)r->n_stop * sizeof *q->stop);
  q->r.prompt = q->prompt;
  q->r.stop = q->stop;
  pthread_mutex_lock(&S->mu);
  if (S->stopping) {
    pthread_mutex_unlock(&S->mu);
    req_free(q);
    return wisp_fail(WISP_EINVAL, "the scheduler is shutting down");
  }
  if (S->in_flight >= S->parallel + S->max_queue) {
    S->stats.requests_rejected++;
    const int cap = S->parallel + S->max_queue;
    pthread_mutex_unlock(&S->mu);
    req_free(q);
    return wisp_fail(WISP_EBUSY, "the server is busy: %d requests running or queued", cap);
  }
  q->id = ++S->next_id;
  if (S->queue_tail)
    S->queue_tail->next = q;
  else
    S->queue_head = q;
  S->queue_tail = q;
  S->in_flight++;
  S->stats.queued++;
  S->stats.requests_submitted++;
  if (id) *id = q->id;
  pthread_cond_signal(&S->wake);
  pthread_mutex_unlock(&S->mu);
  return WISP_OK;
}

void wisp_sched_cancel(wisp_sched *S, uint64_t id) {
  if (!S) return;
  pthread_mutex_lock(&S->mu);
  for (sched_req *q = S->queue_head; q; q = q->next)
    if (q->id == id) q->cancelled = 1;
  for (int j = 0; j < S->parallel; j++)
    if (S->running[j] && S->running[j]->id == id) S->running[j]->cancelled = 1;
  pthread_cond_signal(&S->wake);
  pthread_mutex_unlock(&S->mu);
}

void wisp_sched_get_stats(wisp_sched *S, wisp_sched_stats *out) {
  if (!out) return;
  memset(out, 0, sizeof *out);
  if (!S) return;
  pthread_mutex_lock(&S->mu);
  *out = S->stats;
  int used = 0;
  for (int j = 0; j < S->parallel; j++) used += S->running[j] || S->slots[j].held;
  out->slots_used = used;
  pthread_mutex_unlock(&S->mu);
}

uint64_t wisp_sched_kv_bytes_held(const wisp_sched *S, uint64_t *full) {
  if (full) *full = wisp_session_kv_bytes(S->session);
  return wisp_session_kv_bytes_held(S->session);
}

int wisp_sched_context(const wisp_sched *S) {
  if (!S) {
    wisp_fail(WISP_EINVAL, "wisp_sched_context: no scheduler");
    return -1;
  }
  return S->context;
}

void wisp_sched_free(wisp_sched *S) {
  if (!S) return;
  pthread_mutex_lock(&S->mu);
  S->stopping = 1;
  pthread_cond_signal(&S->wake);
  pthread_mutex_unlock(&S->mu);
  pthread_join(S->thread, NULL);
  pthread_cond_destroy(&S->wake);
  pthread_mutex_destroy(&S->mu);
  for (int j = 0; j < S->parallel; j++) sched_slot_free(&S->slots[j], S->session->backend);
  free(S->slots);
  free(S->running);
  free(S->logits);
  wisp_session_free(S->session);
  free(S);
}
