/* The serving scheduler (wisp.h wisp_sched_*, docs/scheduler.md): requests
 * decoded together give exactly what each gives alone (greedy and sampled);
 * prompt reuse (a prompt extending a slot's history, or diverging inside it
 * back to a state snapshot) gives what a fresh slot gives, on LFM2 (conv
 * state) and Qwen 3.5 (Gated DeltaNet); limits, stop tokens, a full queue,
 * cancellation and shutting down with requests in flight. Nothing here
 * waits on time: the tests wait for the requests' last events. */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "fixtures.h"
#include "st_fixture.h"
#include "test.h"
#include "webgpu_fixture.h"
#include "wisp.h"

enum { MAX_GEN = 64 };

/* What one request reported: its tokens, logprobs and last event. */
typedef struct collector {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int32_t tok[MAX_GEN];
  float lp[MAX_GEN];
  float top[MAX_GEN][5]; /* the top_logprobs (up to 5) */
  int n, events_after_end;
  int done;
  wisp_finish finish;
  int n_cached, n_generated;
  /* tests that act inside the callback */
  int cancel_after;  /* > 0: cancel itself after this many tokens */
  wisp_sched *sched;
  int block_first;   /* 1: the first token's callback waits until released */
  const struct collector *other; /* count this request's tokens before other's first */
  int before_other;
  const struct collector *others; /* count this request's tokens while any of n_others has none */
  int n_others, before_all;
  int in_callback, released;
} collector;

static void collector_init(collector *c) {
  memset(c, 0, sizeof *c);
  pthread_mutex_init(&c->mu, NULL);
  pthread_cond_init(&c->cv, NULL);
}

static void collector_destroy(collector *c) {
  pthread_mutex_destroy(&c->mu);
  pthread_cond_destroy(&c->cv);
}

static void on_event(void *user, const wisp_sched_event *ev) {
  collector *c = user;
  pthread_mutex_lock(&c->mu);
  if (c->done) {
    c->events_after_end++;
  } else if (ev->finish == WISP_FINISH_NONE) {
    if (c->n < MAX_GEN) {
      c->lp[c->n] = ev->logprob;
      for (int k = 0; k < ev->n_top && k < 5; k++) c->top[c->n][k] = ev->top_logprobs[k];
      c->tok[c->n++] = ev->token;
    }
    if (c->other && c->other->n == 0) c->before_other++; /* both callbacks run on the scheduler's thread */
    for (int k = 0; k < c->n_others; k++)
      if (c->others[k].n == 0) {
        c->before_all++;
        break;
      }
    if (c->block_first && c->n == 1) {
      c->in_callback = 1;
      pthread_cond_broadcast(&c->cv);
      while (!c->released) pthread_cond_wait(&c->cv, &c->mu);
    }
    if (c->cancel_after > 0 && c->n == c->cancel_after) wisp_sched_cancel(c->sched, ev->id);
  } else {
    c->done = 1;
    c->finish = ev->finish;
    c->n_cached = ev->n_cached;
    c->n_generated = ev->n_generated;
    pthread_cond_broadcast(&c->cv);
  }
  pthread_mutex_unlock(&c->mu);
}

static void wait_done(collector *c) {
  pthread_mutex_lock(&c->mu);
  while (!c->done) pthread_cond_wait(&c->cv, &c->mu);
  pthread_mutex_unlock(&c->mu);
}

/* The tiny Qwen 3.5 checkpoint (tests/test_qwen3_5.c) converted to f32. */
static const char *tiny_qwen(void) {
  static char art[600];
  char hf[512], cmd[2048], log[2048];
  snprintf(hf, sizeof hf, "%s/sched_qwen_hf", test_tmpdir());
  snprintf(art, sizeof art, "%s/sched_qwen_f32", test_tmpdir());
  struct stat sb;
  if (stat(art, &sb) == 0) return art;
  mkdir(hf, 0755);
  if (stat(hf, &sb) != 0 || fx_write_tiny_qwen35(hf)) return NULL;
  snprintf(cmd, sizeof cmd, "%s convert %s -o %s --quant f32 --quiet", test_wisp_bin(), hf, art);
  if (test_run(cmd, log, sizeof log) != 0) {
    fprintf(stderr, "     %s\n", log);
    return NULL;
  }
  return art;
}

/* Prompt i: 9 + 5 i tokens below 96 (the tiny Qwen's vocabulary). */
static int prompt_of(int i, int32_t *p) {
  int n = 9 + 5 * i;
  for (int k = 0; k < n; k++) p[k] = (int32_t)((5 + 11 * i + 31 * k) % 96);
  return n;
}

static wisp_sched *sched_new_chunk(wisp_model *m, const char *backend, int parallel, int max_queue, int context,
                                   int chunk) {
  wisp_sched_options o = {.backend = backend, .parallel = parallel, .max_queue = max_queue, .context = context,
                          .prefill_chunk = chunk, .threads = 1};
  wisp_sched *s = NULL;
  if (wisp_sched_new(m, &o, &s) != WISP_OK) {
    fprintf(stderr, "     wisp_sched_new: %s\n", wisp_last_error());
    return NULL;
  }
  return s;
}

static wisp_sched *sched_new(wisp_model *m, const char *backend, int parallel, int max_queue, int context) {
  return sched_new_chunk(m, backend, parallel, max_queue, context, 16);
}

static wisp_sched_request request(const int32_t *p, int n, int max_tokens, collector *c) {
  return (wisp_sched_request){.prompt = p, .n_prompt = n, .max_tokens = max_tokens, .ignore_eos = 1,
                              .on_event = on_event, .user = c};
}

/* The same with the 5 top logprobs: a state that is off shows in them even
 * where the tiny models' greedy tokens (and their logprobs, 0 when sure) do
 * not change. */
static wisp_sched_request request_lp(const int32_t *p, int n, int max_tokens) {
  wisp_sched_request r = request(p, n, max_tokens, NULL);
  r.top_logprobs = 5;
  return r;
}

/* Runs r alone on a fresh scheduler of one slot into c. */
static int run_alone(wisp_model *m, const char *backend, wisp_sched_request r, collector *c) {
  wisp_sched *s = sched_new(m, backend, 1, 0, 0);
  if (!s) return 0;
  r.on_event = on_event;
  r.user = c;
  uint64_t id;
  int ok = wisp_sched_submit(s, &r, &id) == WISP_OK;
  if (ok) wait_done(c);
  wisp_sched_free(s);
  return ok;
}

static int same_tokens(const collector *a, const collector *b) {
  return a->n == b->n && !memcmp(a->tok, b->tok, sizeof(int32_t) * (size_t)a->n);
}

/* The largest difference between two requests' top logprobs (same tokens). */
static double logprob_gap(const collector *a, const collector *b) {
  double g = 0;
  for (int t = 0; t < a->n && t < b->n; t++)
    for (int k = 0; k < 5; k++) g = fmax(g, fabs((double)a->top[t][k] - (double)b->top[t][k]));
  return g;
}

/* ---- 8 requests together = each alone ---- */

enum { N_REQ = 8 };

/* Request i's options: greedy (sampled 0), each its own sampling (1), or
 * greedy and sampled ones by turns (2). */
static wisp_sched_request variant(int i, const int32_t *p, int n, int sampled) {
  wisp_sched_request r = request(p, n, 10 + i % 3, NULL);
  if (sampled == 2 && i % 2 == 0) return r; /* mixed: greedy rows beside sampled ones */
  if (sampled) {
    r.temperature = 0.7f + 0.1f * (float)(i % 3);
    r.top_k = i % 2 ? 20 : 0;
    r.top_p = i % 3 ? 0.9f : 0;
    r.min_p = i == 5 ? 0.05f : 0;
    r.seed = 1000u + (uint64_t)i * 77u;
    if (i == 2) r.presence_penalty = 0.8f;
    if (i == 3) r.frequency_penalty = 0.5f;
    if (i >= 4) r.logprobs = 1;
    if (i == 6) r.top_logprobs = 5;
  }
  return r;
}

/* varied: the model is unsure enough that sampled replies differ from greedy
 * ones (the tiny Qwen is not: its logprobs round to 0). */
static void together_match_alone_n(const char *dir, const char *backend, int sampled, int n_req, int varied) {
  CHECK(dir);
  wisp_model *m = NULL;
  CHECK(wisp_model_open(dir, &m) == WISP_OK);
  int32_t prompts[N_REQ][64];
  int len[N_REQ];
  collector alone[N_REQ], both[N_REQ];
  for (int i = 0; i < n_req; i++) {
    len[i] = prompt_of(i, prompts[i]);
    collector_init(&alone[i]);
    collector_init(&both[i]);
  }
  int ok = 1;
  for (int i = 0; ok && i < n_req; i++) ok = run_alone(m, backend, variant(i, prompts[i], len[i], sampled), &alone[i]);
  wisp_sched *s = ok ? sched_new(m, backend, n_req, 0, 0) : NULL;
  for (int i = 0; s && i < n_req; i++) {
    wisp_sched_request r = variant(i, prompts[i], len[i], sampled);
    r.on_event = on_event;
    r.user = &both[i];
    uint64_t id;
    ok &= wisp_sched_submit(s, &r, &id) == WISP_OK;
  }
  for (int i = 0; s && ok && i < n_req; i++) wait_done(&both[i]);
  wisp_sched_stats st;
  wisp_sched_get_stats(s, &st);
  wisp_sched_free(s);
  wisp_model_close(m);
  CHECKF(ok && s, "a scheduler or request failed: %s", wisp_last_error());
  if (sampled == 1 && varied) { /* the draws are not all the greedy tokens (else per-row sampling went untested) */
    wisp_model *m2 = NULL;
    CHECK(wisp_model_open(dir, &m2) == WISP_OK);
    int differ = 0;
    for (int i = 0; i < n_req; i++) {
      collector g;
      collector_init(&g);
      CHECK(run_alone(m2, backend, variant(i, prompts[i], len[i], 0), &g));
      differ += !same_tokens(&g, &alone[i]);
      collector_destroy(&g);
    }
    wisp_model_close(m2);
    CHECKF(differ >= n_req / 2, "only %d of %d sampled replies differ from greedy", differ, n_req);
  }
  for (int i = 0; i < n_req; i++) {
    CHECKF(alone[i].finish == WISP_FINISH_LENGTH && alone[i].n == 10 + i % 3, "request %d alone: finish %d, %d tokens",
           i, alone[i].finish, alone[i].n);
    CHECKF(same_tokens(&alone[i], &both[i]), "request %d: %d tokens together, %d alone, or different ones", i,
           both[i].n, alone[i].n);
    if (sampled == 1 && i >= 4)
      for (int t = 0; t < alone[i].n; t++) {
        CHECKF(alone[i].lp[t] == both[i].lp[t], "request %d token %d: logprob %g alone, %g together", i, t,
               alone[i].lp[t], both[i].lp[t]);
        CHECK(alone[i].lp[t] <= 0);
      }
    CHECK(both[i].events_after_end == 0);
    collector_destroy(&alone[i]);
    collector_destroy(&both[i]);
  }
  CHECK(st.requests_submitted == (uint64_t)n_req && st.requests_finished == (uint64_t)n_req && st.running == 0 && st.queued == 0);
  CHECK(st.slots == n_req && st.steps > 0);
  uint64_t gen = 0, prompt = 0;
  for (int i = 0; i < n_req; i++) gen += (uint64_t)(10 + i % 3), prompt += (uint64_t)len[i];
  CHECK(st.generated_tokens == gen && st.prompt_tokens == prompt);
}

static void together_match_alone(const char *dir, const char *backend, int sampled) {
  together_match_alone_n(dir, backend, sampled, N_REQ, 1);
}

TEST(sched_lfm2_together_greedy_match_alone) { together_match_alone(fixture_small_model(), "cpu", 0); }
TEST(sched_lfm2_together_sampled_match_alone) { together_match_alone(fixture_small_model(), "cpu", 1); }
TEST(sched_qwen3_5_together_sampled_match_alone) { together_match_alone_n(tiny_qwen(), "cpu", 1, N_REQ, 0); }
TEST(sched_lfm2_webgpu_together_mixed_match_alone) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  together_match_alone_n(fixture_small_model(), "webgpu", 2, 4, 1); /* each alone run makes a device: keep it short */
}

/* ---- prompt reuse ---- */

/* Runs r on s (whose slots may hold histories) into c; 1 when it ended. */
static int run_on(wisp_sched *s, wisp_sched_request r, collector *c) {
  r.on_event = on_event;
  r.user = c;
  uint64_t id;
  if (wisp_sched_submit(s, &r, &id) != WISP_OK) return 0;
  wait_done(c);
  return 1;
}

/* Turn 1: prompt p, a 10-token reply. Then on the same slot, each equal to
 * a fresh slot's reply and reporting what it reused:
 *   (a) p + the reply + 6 new tokens (the next turn of a chat): resumes the
 *       live state (and snapshots it there, at p + 9 of the reply);
 *   (e) (a) with the 6 new tokens changed (an edited last message): back to
 *       that snapshot;
 *   (b) p + 4 of the reply + other tokens (diverging inside the reply):
 *       back to the snapshot at the end of p's prefill;
 *   (c) (b) again, whole (a regenerated reply): back to the snapshot at the
 *       end of (b)'s prefill. */
static void reuse_matches_scratch(const char *dir, const char *backend) {
  CHECK(dir);
  wisp_model *m = NULL;
  CHECK(wisp_model_open(dir, &m) == WISP_OK);
  wisp_sched *s = sched_new(m, backend, 1, 0, 0);
  CHECK(s);
  int32_t p[64], a[96], b[96], e[96];
  const int np = prompt_of(4, p); /* 29 tokens */
  collector t1, ra, rb, rc, re, fa, fb, fe;
  collector *all[] = {&t1, &ra, &rb, &rc, &re, &fa, &fb, &fe};
  for (int i = 0; i < 8; i++) collector_init(all[i]);
  int ok = run_on(s, request(p, np, 10, NULL), &t1) && t1.n == 10;
  int na = 0, nb = 0;
  if (ok) {
    memcpy(a, p, sizeof(int32_t) * (size_t)np);
    memcpy(a + np, t1.tok, sizeof(int32_t) * 10);
    na = np + 10;
    for (int k = 0; k < 6; k++) a[na++] = (int32_t)((17 + 7 * k) % 96);
    memcpy(e, a, sizeof(int32_t) * (size_t)na);
    for (int k = 0; k < 6; k++) e[np + 10 + k] = (int32_t)((61 + 5 * k) % 96);
    memcpy(b, a, sizeof(int32_t) * (size_t)(np + 4));
    nb = np + 4;
    for (int k = 0; k < 8; k++) b[nb++] = (int32_t)((3 + 13 * k) % 96);
    ok = run_on(s, request_lp(a, na, 8), &ra) && run_on(s, request_lp(e, na, 8), &re) &&
         run_on(s, request_lp(b, nb, 8), &rb) && run_on(s, request_lp(b, nb, 8), &rc);
  }
  ok = ok && run_alone(m, backend, request_lp(a, na, 8), &fa) && run_alone(m, backend, request_lp(b, nb, 8), &fb) &&
       run_alone(m, backend, request_lp(e, na, 8), &fe);
  wisp_sched_stats st;
  wisp_sched_get_stats(s, &st);
  wisp_sched_free(s);
  wisp_model_close(m);
  CHECKF(ok, "a request failed: %s", wisp_last_error());
  CHECKF(ra.n_cached == np + 9, "turn 2 reused %d tokens, expected the %d its slot holds", ra.n_cached, np + 9);
  CHECKF(re.n_cached == np + 9, "edited turn 2 reused %d tokens, expected the snapshot at %d", re.n_cached, np + 9);
  CHECKF(rb.n_cached == np - 1, "diverging prompt reused %d tokens, expected the snapshot at %d", rb.n_cached, np - 1);
  CHECKF(rc.n_cached == nb - 1, "repeated prompt reused %d tokens, expected %d", rc.n_cached, nb - 1);
  CHECK(fa.n_cached == 0 && fb.n_cached == 0 && fe.n_cached == 0);
  CHECKF(same_tokens(&ra, &fa), "turn 2 with reuse differs from a fresh slot");
  CHECKF(same_tokens(&re, &fe), "edited turn 2 from a snapshot differs from a fresh slot");
  CHECKF(same_tokens(&rb, &fb), "diverging prompt from a snapshot differs from a fresh slot");
  CHECKF(same_tokens(&rc, &fb), "repeated prompt from a snapshot differs from a fresh slot");
  /* the prefill's chunks start elsewhere, so not bit for bit, but close */
  CHECKF(logprob_gap(&ra, &fa) < 1e-3, "turn 2: logprobs differ by %g from a fresh slot's", logprob_gap(&ra, &fa));
  CHECKF(logprob_gap(&re, &fe) < 1e-3, "edited: logprobs differ by %g", logprob_gap(&re, &fe));
  CHECKF(logprob_gap(&rb, &fb) < 1e-3, "diverging: logprobs differ by %g", logprob_gap(&rb, &fb));
  CHECKF(logprob_gap(&rc, &fb) < 1e-3, "repeated: logprobs differ by %g", logprob_gap(&rc, &fb));
  CHECK(st.prompt_tokens_cached == (uint64_t)(ra.n_cached + re.n_cached + rb.n_cached + rc.n_cached));
  CHECK(st.slots_used == 1);
  for (int i = 0; i < 8; i++) collector_destroy(all[i]);
}

TEST(sched_lfm2_reuse_matches_scratch) { reuse_matches_scratch(fixture_small_model(), "cpu"); }
TEST(sched_qwen3_5_reuse_matches_scratch) { reuse_matches_scratch(tiny_qwen(), "cpu"); }
/* the snapshots as device copies of the slots' parts of the shared state buffers */
TEST(sched_qwen3_5_webgpu_reuse_matches_scratch) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  reuse_matches_scratch(tiny_qwen(), "webgpu");
}

/* Free slots go to the prompt they hold most of: two conversations on two
 * slots each continue on their own slot. */
TEST(sched_reuse_picks_the_matching_slot) {
  wisp_model *m = NULL;
  CHECK(wisp_model_open(fixture_small_model(), &m) == WISP_OK);
  wisp_sched *s = sched_new(m, "cpu", 2, 0, 0);
  CHECK(s);
  int32_t p0[64], p1[64];
  const int n0 = prompt_of(1, p0), n1 = prompt_of(2, p1);
  collector c[4];
  for (int i = 0; i < 4; i++) collector_init(&c[i]);
  int ok = run_on(s, request(p0, n0, 4, NULL), &c[0]) && run_on(s, request(p1, n1, 4, NULL), &c[1]);
  /* the next turns, second conversation first */
  int32_t q0[80], q1[80];
  memcpy(q0, p0, sizeof(int32_t) * (size_t)n0);
  memcpy(q0 + n0, c[0].tok, sizeof(int32_t) * 4);
  memcpy(q1, p1, sizeof(int32_t) * (size_t)n1);
  memcpy(q1 + n1, c[1].tok, sizeof(int32_t) * 4);
  q0[n0 + 4] = q1[n1 + 4] = 42;
  ok = ok && run_on(s, request(q1, n1 + 5, 2, NULL), &c[3]) && run_on(s, request(q0, n0 + 5, 2, NULL), &c[2]);
  wisp_sched_free(s);
  wisp_model_close(m);
  CHECK(ok);
  CHECKF(c[2].n_cached == n0 + 3 && c[3].n_cached == n1 + 3, "reused %d and %d", c[2].n_cached, c[3].n_cached);
  for (int i = 0; i < 4; i++) collector_destroy(&c[i]);
}

/* A prompt that shares only a short start with a slot's long history (two
 * conversations with one system prompt) goes to an empty slot instead of
 * cutting that history; the first conversation then still continues whole. */
TEST(sched_reuse_spares_a_longer_history) {
  wisp_model *m = NULL;
  CHECK(wisp_model_open(fixture_small_model(), &m) == WISP_OK);
  wisp_sched *s = sched_new(m, "cpu", 2, 0, 0);
  CHECK(s);
  int32_t p[64], q[64], next[64];
  const int np = prompt_of(0, p); /* 9 tokens: a snapshot at 8 */
  memcpy(q, p, sizeof(int32_t) * (size_t)np);
  for (int k = 0; k < 6; k++) q[np + k] = (int32_t)((40 + 3 * k) % 96); /* shares p, then its own */
  collector x, y, x2;
  collector_init(&x);
  collector_init(&y);
  collector_init(&x2);
  int ok = run_on(s, request(p, np, 13, NULL), &x) && x.n == 13; /* history 9 + 12 */
  ok = ok && run_on(s, request(q, np + 6, 3, NULL), &y);
  if (ok) {
    memcpy(next, p, sizeof(int32_t) * (size_t)np);
    memcpy(next + np, x.tok, sizeof(int32_t) * 13);
    next[np + 13] = 5;
    ok = run_on(s, request(next, np + 14, 3, NULL), &x2);
  }
  wisp_sched_free(s);
  wisp_model_close(m);
  CHECK(ok);
  CHECKF(y.n_cached == 0, "the other conversation reused %d tokens of the first one's slot", y.n_cached);
  CHECKF(x2.n_cached == np + 12, "the first conversation's next turn reused %d tokens, expected %d", x2.n_cached, np + 12);
  collector_destroy(&x);
  collector_destroy(&y);
  collector_destroy(&x2);
}

/* ---- limits ---- */

TEST(sched_max_tokens_stop_tokens_and_context) {
  wisp_model *m = NULL;
  CHECK(wisp_model_open(fixture_small_model(), &m) == WISP_OK);
  int32_t p[64];
  const int np = prompt_of(3, p); /* 24 tokens */
  collector full, cut, stopped, ctx;
  collector_init(&full);
  collector_init(&cut);
  collector_init(&stopped);
  collector_init(&ctx);
  int ok = run_alone(m, "cpu", request(p, np, 12, NULL), &full) && full.n == 12;
  /* a stop token: the first token that did not occur before it in the reply */
  int k = 3;
  while (ok && k < 12) {
    int seen = 0;
    for (int j = 0; j < k; j++) seen |= full.tok[j] == full.tok[k];
    if (!seen) break;
    k++;
  }
  CHECKF(ok && k < 12, "no usable stop token in the reply");
  wisp_sched_request r = request(p, np, 12, NULL);
  r.stop = &full.tok[k];
  r.n_stop = 1;
  ok = run_alone(m, "cpu", r, &stopped) && run_alone(m, "cpu", request(p, np, 5, NULL), &cut);
  /* a context of np + 4 tokens: the prompt's last token and 4 more are fed, 5 are reported */
  wisp_sched *s = sched_new(m, "cpu", 1, 0, np + 4);
  ok = ok && s && wisp_sched_context(s) == np + 4 && run_on(s, request(p, np, 0, NULL), &ctx);
  /* a prompt longer than the context is refused at once */
  uint64_t id = 7;
  wisp_sched_request longer = request(p, np + 5, 1, &ctx);
  int32_t big[64] = {0};
  longer.prompt = big;
  int refused = s && wisp_sched_submit(s, &longer, &id) == WISP_EINVAL && id == 0;
  wisp_sched_request bad = request(p, np, 1, &ctx);
  bad.top_logprobs = 21;
  refused &= s && wisp_sched_submit(s, &bad, &id) == WISP_EINVAL;
  wisp_sched_free(s);
  wisp_model_close(m);
  CHECKF(ok, "%s", wisp_last_error());
  CHECK(refused);
  CHECK(stopped.finish == WISP_FINISH_STOP && stopped.n == k && !memcmp(stopped.tok, full.tok, sizeof(int32_t) * (size_t)k));
  CHECK(stopped.n_generated == k);
  CHECK(cut.finish == WISP_FINISH_LENGTH && cut.n == 5 && !memcmp(cut.tok, full.tok, sizeof(int32_t) * 5));
  CHECKF(ctx.finish == WISP_FINISH_LENGTH && ctx.n == 5, "context limit: finish %d after %d tokens", ctx.finish, ctx.n);
  CHECK(!memcmp(ctx.tok, full.tok, sizeof(int32_t) * 5));
  collector_destroy(&full);
  collector_destroy(&cut);
  collector_destroy(&stopped);
  collector_destroy(&ctx);
}

/* One slot and a queue of one: the first request is held inside its first
 * token's callback (so it cannot finish), the second waits, the third is
 * refused. */
TEST(sched_full_queue_is_busy) {
  wisp_model *m = NULL;
  CHECK(wisp_model_open(fixture_small_model(), &m) == WISP_OK);
  wisp_sched *s = sched_new(m, "cpu", 1, 1, 0);
  CHECK(s);
  int32_t p[64];
  const int np = prompt_of(0, p);
  collector a, b, c;
  collector_init(&a);
  collector_init(&b);
  collector_init(&c);
  a.block_first = 1;
  wisp_sched_request ra = request(p, np, 3, &a), rb = request(p, np, 3, &b), rc = request(p, np, 3, &c);
  uint64_t ia, ib, ic = 99;
  int ok = wisp_sched_submit(s, &ra, &ia) == WISP_OK;
  pthread_mutex_lock(&a.mu);
  while (ok && !a.in_callback) pthread_cond_wait(&a.cv, &a.mu);
  pthread_mutex_unlock(&a.mu);
  ok = ok && wisp_sched_submit(s, &rb, &ib) == WISP_OK;
  wisp_status busy = wisp_sched_submit(s, &rc, &ic);
  wisp_sched_stats st;
  wisp_sched_get_stats(s, &st);
  pthread_mutex_lock(&a.mu);
  a.released = 1;
  pthread_cond_broadcast(&a.cv);
  pthread_mutex_unlock(&a.mu);
  if (ok) {
    wait_done(&a);
    wait_done(&b);
  }
  /* once they are done, there is room again */
  ok = ok && run_on(s, rc, &c);
  wisp_sched_free(s);
  wisp_model_close(m);
  CHECK(ok);
  CHECK(busy == WISP_EBUSY && ic == 0);
  CHECK(ia != ib);
  CHECK(st.requests_rejected == 1 && st.running == 1 && st.queued == 1);
  CHECK(a.n == 3 && b.n == 3 && c.n == 3);
  collector_destroy(&a);
  collector_destroy(&b);
  collector_destroy(&c);
}

/* A request cancelled from its third token's callback ends there and frees
 * its slot for the next one; a queued request cancelled before it starts
 * reports nothing but its end. */
TEST(sched_cancel_frees_the_slot) {
  wisp_model *m = NULL;
  CHECK(wisp_model_open(fixture_small_model(), &m) == WISP_OK);
  wisp_sched *s = sched_new(m, "cpu", 1, 0, 0);
  CHECK(s);
  int32_t p[64];
  const int np = prompt_of(2, p);
  collector a, b, c;
  collector_init(&a);
  collector_init(&b);
  collector_init(&c);
  a.cancel_after = 3;
  a.sched = s;
  a.block_first = 1;
  wisp_sched_request ra = request(p, np, 0, &a), rb = request(p, np, 4, &b), rc = request(p, np, 4, &c);
  uint64_t ia, ib, ic;
  int ok = wisp_sched_submit(s, &ra, &ia) == WISP_OK;
  pthread_mutex_lock(&a.mu); /* a holds the slot (inside its first token's callback): b waits in the queue */
  while (ok && !a.in_callback) pthread_cond_wait(&a.cv, &a.mu);
  pthread_mutex_unlock(&a.mu);
  ok = ok && wisp_sched_submit(s, &rb, &ib) == WISP_OK;
  wisp_sched_cancel(s, ib);
  pthread_mutex_lock(&a.mu);
  a.released = 1;
  pthread_cond_broadcast(&a.cv);
  pthread_mutex_unlock(&a.mu);
  if (ok) {
    wait_done(&a);
    wait_done(&b);
  }
  ok = ok && wisp_sched_submit(s, &rc, &ic) == WISP_OK;
  if (ok) wait_done(&c);
  wisp_sched_cancel(s, ia); /* long gone: nothing happens */
  wisp_sched_free(s);
  wisp_model_close(m);
  CHECK(ok);
  CHECKF(a.finish == WISP_FINISH_CANCELLED && a.n == 3, "finish %d after %d tokens", a.finish, a.n);
  CHECK(b.finish == WISP_FINISH_CANCELLED && b.n == 0);
  CHECK(c.finish == WISP_FINISH_LENGTH && c.n == 4);
  CHECK(a.events_after_end == 0 && b.events_after_end == 0 && c.events_after_end == 0);
  collector_destroy(&a);
  collector_destroy(&b);
  collector_destroy(&c);
}

/* wisp_sched_free with requests running and queued: each gets exactly one
 * last event, CANCELLED unless it had already ended. */
TEST(sched_free_with_requests_in_flight) {
  wisp_model *m = NULL;
  CHECK(wisp_model_open(fixture_small_model(), &m) == WISP_OK);
  wisp_sched *s = sched_new(m, "cpu", 2, 0, 0);
  CHECK(s);
  int32_t p[64];
  const int np = prompt_of(1, p);
  collector c[5];
  int ok = 1;
  for (int i = 0; i < 5; i++) {
    collector_init(&c[i]);
    wisp_sched_request r = request(p, np, 0, &c[i]);
    uint64_t id;
    ok &= wisp_sched_submit(s, &r, &id) == WISP_OK;
  }
  wisp_sched_free(s);
  wisp_model_close(m);
  CHECK(ok);
  for (int i = 0; i < 5; i++) {
    CHECK(c[i].done && c[i].events_after_end == 0);
    CHECK(c[i].finish == WISP_FINISH_CANCELLED || c[i].finish == WISP_FINISH_LENGTH);
    collector_destroy(&c[i]);
  }
}

/* Runs wisp_sched_free on the scheduler passed (a thread of its own: it
 * waits for the scheduler's thread). */
static void *free_sched(void *s) {
  wisp_sched_free(s);
  return NULL;
}

/* wisp_sched_free stops a request that runs ahead (alone, a decode-loop
 * batch a submit) at the end of its batch, as it stops one stepping: a
 * server's shutdown grace ends there. The request asks for 400 tokens and
 * is held inside its first token's callback until the scheduler refuses
 * new requests (it is stopping); released, it runs ahead one batch of 4
 * and ends CANCELLED, where it used to run all 400. Events, not time. */
TEST(sched_free_stops_a_request_running_ahead) {
  wisp_model *m = NULL;
  CHECK(wisp_model_open(fixture_small_model(), &m) == WISP_OK);
  wisp_sched_options o = {.backend = "cpu", .parallel = 1, .max_queue = 2, .threads = 1, .run_ahead = 4};
  wisp_sched *s = NULL;
  CHECKF(wisp_sched_new(m, &o, &s) == WISP_OK, "%s", wisp_last_error());
  int32_t p[64];
  const int np = prompt_of(1, p);
  collector a, q[2];
  collector_init(&a);
  a.block_first = 1;
  for (int i = 0; i < 2; i++) collector_init(&q[i]);
  wisp_sched_request r = request(p, np, 400, &a);
  uint64_t id;
  int ok = wisp_sched_submit(s, &r, &id) == WISP_OK;
  pthread_mutex_lock(&a.mu);
  while (ok && !a.in_callback) pthread_cond_wait(&a.cv, &a.mu);
  pthread_mutex_unlock(&a.mu);
  pthread_t t;
  const int freeing = ok && pthread_create(&t, NULL, free_sched, s) == 0;
  ok = ok && freeing;
  /* until a submit is refused as the scheduler stops (the queue, held up
   * behind a's callback, fills first: those get CANCELLED at the end) */
  int queued = 0, refused = 0;
  while (ok && !refused) {
    wisp_sched_request r2 = request(p, np, 4, &q[queued < 2 ? queued : 1]);
    const wisp_status st = wisp_sched_submit(s, &r2, &id);
    if (st == WISP_OK) queued++;
    else if (st == WISP_EBUSY) sched_yield();
    else refused = 1;
    ok = queued <= 2;
  }
  pthread_mutex_lock(&a.mu);
  a.released = 1;
  pthread_cond_broadcast(&a.cv);
  pthread_mutex_unlock(&a.mu);
  if (freeing) pthread_join(t, NULL);
  else wisp_sched_free(s);
  wisp_model_close(m);
  CHECKF(ok && refused, "queued %d, refused %d", queued, refused);
  CHECKF(a.done && a.finish == WISP_FINISH_CANCELLED && a.n_generated >= 1 && a.n_generated <= 5,
         "finish %d after %d tokens of 400", a.finish, a.n_generated);
  for (int i = 0; i < queued; i++) CHECK(q[i].done && q[i].finish == WISP_FINISH_CANCELLED && q[i].n == 0);
  collector_destroy(&a);
  for (int i = 0; i < 2; i++) collector_destroy(&q[i]);
}

/* A long prompt arriving beside a running request is prefilled a chunk a
 * step while that request keeps getting a token every step. B (199 tokens
 * to prefill, chunk 16: 13 steps) is submitted while A is held inside its
 * first token's callback; A then reports a token in each of those steps
 * before B's first. Counted in events, not time. */
TEST(sched_long_prompt_does_not_stall_running_streams) {
  wisp_model *m = NULL;
  CHECK(wisp_model_open(fixture_small_model(), &m) == WISP_OK);
  wisp_sched *s = sched_new(m, "cpu", 2, 0, 0);
  CHECK(s);
  int32_t pa[64], pb[200];
  const int na = prompt_of(0, pa);
  for (int k = 0; k < 200; k++) pb[k] = (int32_t)((3 + 7 * k + (k * k) % 11) % 96);
  collector a, b;
  collector_init(&a);
  collector_init(&b);
  a.block_first = 1;
  a.other = &b;
  wisp_sched_request ra = request(pa, na, 30, &a), rb = request(pb, 200, 2, &b);
  uint64_t ia, ib;
  int ok = wisp_sched_submit(s, &ra, &ia) == WISP_OK;
  pthread_mutex_lock(&a.mu);
  while (ok && !a.in_callback) pthread_cond_wait(&a.cv, &a.mu);
  pthread_mutex_unlock(&a.mu);
  ok = ok && wisp_sched_submit(s, &rb, &ib) == WISP_OK;
  pthread_mutex_lock(&a.mu);
  a.released = 1;
  pthread_cond_broadcast(&a.cv);
  pthread_mutex_unlock(&a.mu);
  if (ok) {
    wait_done(&a);
    wait_done(&b);
  }
  wisp_sched_free(s);
  wisp_model_close(m);
  CHECK(ok);
  CHECK(a.n == 30 && b.n == 2);
  /* A's first token came before B was submitted; 13 more (one a prefill step of B, the last in
   * the step that also gives B its first token: A's row comes first) */
  CHECKF(a.before_other >= 14, "A reported %d tokens before B's first", a.before_other);
  collector_destroy(&a);
  collector_destroy(&b);
}

/* ---- several prompts prefilled together ---- */

enum { BATCH_CHUNK = 64 };

/* n_req prompts arrive together (submitted while A, a running request, is
 * held inside its first token's callback): their segments go through one
 * batched prefill a step, so all are prefilled in fewer steps than one
 * prompt a step, A gets a token in every one of those steps, and each
 * request gives the tokens and top-5 logprobs (1e-3) it gives alone.
 * Counted in events and steps, not time. */
static void prompts_prefilled_together(const char *dir, const char *backend, int n_req) {
  CHECK(dir);
  wisp_model *m = NULL;
  CHECK(wisp_model_open(dir, &m) == WISP_OK);
  int32_t prompts[N_REQ][64], pa[64];
  int len[N_REQ], fed = 0;
  const int na = prompt_of(N_REQ, pa);
  collector a, alone[N_REQ], both[N_REQ];
  collector_init(&a);
  for (int i = 0; i < n_req; i++) {
    len[i] = prompt_of(i, prompts[i]);
    fed += len[i] - 1; /* each prompt's last token is fed by its first decode step */
    collector_init(&alone[i]);
    collector_init(&both[i]);
  }
  int ok = 1;
  for (int i = 0; ok && i < n_req; i++) {
    wisp_sched *s1 = sched_new_chunk(m, backend, 1, 0, 0, BATCH_CHUNK);
    wisp_sched_request r = request_lp(prompts[i], len[i], 6);
    r.on_event = on_event;
    r.user = &alone[i];
    uint64_t id;
    ok = s1 && wisp_sched_submit(s1, &r, &id) == WISP_OK;
    if (ok) wait_done(&alone[i]);
    wisp_sched_free(s1);
  }
  wisp_sched *s = ok ? sched_new_chunk(m, backend, n_req + 1, 0, 0, BATCH_CHUNK) : NULL;
  a.block_first = 1;
  a.others = both;
  a.n_others = n_req;
  wisp_sched_request ra = request(pa, na, 40, &a);
  uint64_t id;
  ok = s && wisp_sched_submit(s, &ra, &id) == WISP_OK;
  pthread_mutex_lock(&a.mu);
  while (ok && !a.in_callback) pthread_cond_wait(&a.cv, &a.mu);
  pthread_mutex_unlock(&a.mu);
  wisp_sched_stats before = {0}, after = {0};
  if (ok) wisp_sched_get_stats(s, &before);
  for (int i = 0; ok && i < n_req; i++) {
    wisp_sched_request r = request_lp(prompts[i], len[i], 6);
    r.on_event = on_event;
    r.user = &both[i];
    ok = wisp_sched_submit(s, &r, &id) == WISP_OK;
  }
  pthread_mutex_lock(&a.mu);
  a.released = 1;
  pthread_cond_broadcast(&a.cv);
  pthread_mutex_unlock(&a.mu);
  if (s) {
    wait_done(&a);
    for (int i = 0; ok && i < n_req; i++) wait_done(&both[i]);
    wisp_sched_get_stats(s, &after);
  }
  wisp_sched_free(s);
  wisp_model_close(m);
  CHECKF(ok, "a scheduler or request failed: %s", wisp_last_error());
  /* at least ceil(fed / chunk) prefills are needed; one prompt at a time would take n_req */
  const int calls = (int)(after.prefill_calls - before.prefill_calls), least = (fed + BATCH_CHUNK - 1) / BATCH_CHUNK;
  CHECKF(calls >= least && calls <= least + 1 && calls < n_req, "%d prompts (%d tokens) took %d prefills", n_req, fed,
         calls);
  /* A: its first token before the prompts came, one in each prefill step, one in the step that starts the last */
  CHECKF(a.before_all >= 1 + calls && a.before_all <= 2 + calls, "A reported %d tokens before every prompt's first, "
         "%d prefills", a.before_all, calls);
  CHECK(a.n == 40 && a.finish == WISP_FINISH_LENGTH);
  for (int i = 0; i < n_req; i++) {
    CHECKF(alone[i].n == 6 && same_tokens(&alone[i], &both[i]), "request %d: %d tokens together, %d alone, or "
           "different ones", i, both[i].n, alone[i].n);
    const double gap = logprob_gap(&alone[i], &both[i]);
    CHECKF(gap <= 1e-3, "request %d: top logprobs differ by %g", i, gap);
    collector_destroy(&alone[i]);
    collector_destroy(&both[i]);
  }
  collector_destroy(&a);
}

TEST(sched_lfm2_prompts_prefilled_together) { prompts_prefilled_together(fixture_small_model(), "cpu", N_REQ); }
TEST(sched_qwen3_5_prompts_prefilled_together) { prompts_prefilled_together(tiny_qwen(), "cpu", N_REQ); }
TEST(sched_qwen3_5_webgpu_prompts_prefilled_together) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  prompts_prefilled_together(tiny_qwen(), "webgpu", 4); /* each alone run makes a device: keep it short */
}

/* ---- run-ahead: a request decoding alone runs the decode loop ---- */

/* One request at a time on a scheduler with run-ahead (4 tokens a batch)
 * and one without: the same tokens, greedy and seeded, with max_tokens not
 * a multiple of the batch, with a stop token inside a batch (it lands where
 * it does one step a token, unreported), and a next turn that continues
 * the slot's state left by the run (as stepping leaves it). */
static void run_ahead_matches_steps(const char *dir, const char *backend) {
  CHECK(dir);
  wisp_model *m = NULL;
  CHECK(wisp_model_open(dir, &m) == WISP_OK);
  int32_t p[64], turn2[160];
  const int n = prompt_of(3, p);
  collector got[2][4];
  wisp_sched_stats st[2];
  for (int ra = 0; ra < 2; ra++) {
    wisp_sched_options o = {.backend = backend, .parallel = 2, .prefill_chunk = 16, .threads = 1,
                            .run_ahead = ra ? 4 : -1};
    wisp_sched *s = NULL;
    CHECKF(wisp_sched_new(m, &o, &s) == WISP_OK, "%s", wisp_last_error());
    static const int order[4] = {0, 3, 1, 2}; /* the next turn right after its first */
    for (int o_i = 0; o_i < 4; o_i++) {
      const int k = order[o_i];
      collector *c = &got[ra][k];
      collector_init(c);
      wisp_sched_request r = request(p, n, 13, c);
      int32_t stop;
      if (k == 1) { /* seeded */
        r.temperature = 0.9f;
        r.top_k = 20;
        r.seed = 4242;
      }
      if (k == 2) { /* the greedy reply's 7th token as a stop token */
        stop = got[0][0].tok[6];
        r.stop = &stop;
        r.n_stop = 1;
      }
      int nt = n;
      if (k == 3) { /* the next turn: the greedy reply and 3 more tokens */
        memcpy(turn2, p, sizeof(int32_t) * (size_t)n);
        for (int t = 0; t < got[ra][0].n; t++) turn2[nt++] = got[ra][0].tok[t];
        for (int t = 0; t < 3; t++) turn2[nt++] = (int32_t)(7 + 13 * t);
        r = request(turn2, nt, 13, c);
      }
      uint64_t id;
      CHECK(wisp_sched_submit(s, &r, &id) == WISP_OK);
      wait_done(c);
    }
    wisp_sched_get_stats(s, &st[ra]);
    wisp_sched_free(s);
  }
  wisp_model_close(m);
  CHECKF(st[0].run_ahead_tokens == 0 && st[1].run_ahead_tokens > 0, "run-ahead made %llu and %llu tokens",
         (unsigned long long)st[0].run_ahead_tokens, (unsigned long long)st[1].run_ahead_tokens);
  CHECK(got[0][0].n == 13 && got[0][0].finish == WISP_FINISH_LENGTH);
  int first = 0;
  while (got[0][0].tok[first] != got[0][0].tok[6]) first++;
  CHECKF(got[0][2].finish == WISP_FINISH_STOP && got[0][2].n == first, "stop: finish %d after %d tokens",
         got[0][2].finish, got[0][2].n);
  CHECKF(got[0][3].n_cached > n, "the next turn reused %d tokens", got[0][3].n_cached);
  for (int k = 0; k < 4; k++) {
    CHECKF(same_tokens(&got[0][k], &got[1][k]) && got[0][k].finish == got[1][k].finish &&
               got[0][k].n_cached == got[1][k].n_cached && got[1][k].events_after_end == 0,
           "request %d: %d tokens (finish %d) stepping, %d (finish %d) running ahead", k, got[0][k].n,
           got[0][k].finish, got[1][k].n, got[1][k].finish);
    collector_destroy(&got[0][k]);
    collector_destroy(&got[1][k]);
  }
}

TEST(sched_lfm2_run_ahead_matches_steps) { run_ahead_matches_steps(fixture_small_model(), "cpu"); }
TEST(sched_qwen3_5_run_ahead_matches_steps) { run_ahead_matches_steps(tiny_qwen(), "cpu"); }
TEST(sched_qwen3_5_webgpu_run_ahead_matches_steps) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  run_ahead_matches_steps(tiny_qwen(), "webgpu");
}
