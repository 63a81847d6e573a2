/* sched_probe: the serving scheduler (docs/scheduler.md) without HTTP.
 *
 * Load: C requests submitted together, each a P-token prompt (different
 * for each) and D generated tokens (ignore_eos), greedy; after one warm-up
 * request (kernel compiles). Prints one JSON line: aggregate generated
 * tok/s over the wall time of the load, TTFT (submit to first token) and
 * ITL (gaps between a request's tokens) at p50/p90/p99, in ms.
 *
 * --turns K: instead, one conversation of K turns, each prompt the
 * previous prompt + its reply + P new tokens (as a chat client resends the
 * history); one JSON line per turn with its prompt length, n_cached and
 * TTFT: with prompt reuse the TTFT stays flat as the history grows.
 *
 *   sched_probe -m DIR [--backend cpu|webgpu] [-C 8] [-P 128] [-D 128]
 *               [--parallel N] [--prefill-chunk N] [--turns K] [-t THREADS]
 *               [--tuning KEY=VALUE,...] [-c CONTEXT] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/clock.h"
#include "wisp.h"

typedef struct {
  pthread_mutex_t *mu;
  pthread_cond_t *cv;
  int *left;
  double sent, first, last;
  double *gaps; /* D - 1 gaps */
  int n, cap, n_cached, finish;
  int32_t *tokens;
} client;

static void on_event(void *user, const wisp_sched_event *ev) {
  client *c = user;
  const double now = wisp_now_s();
  if (ev->finish == WISP_FINISH_NONE) {
    if (c->n == 0) c->first = now;
    else if (c->n - 1 < c->cap) c->gaps[c->n - 1] = now - c->last;
    if (c->n < c->cap) c->tokens[c->n] = ev->token;
    c->last = now;
    c->n++;
    return;
  }
  c->n_cached = ev->n_cached;
  c->finish = ev->finish;
  pthread_mutex_lock(c->mu);
  (*c->left)--;
  pthread_cond_broadcast(c->cv);
  pthread_mutex_unlock(c->mu);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double pct(double *v, int n, double p) {
  if (n == 0) return 0;
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  int i = (int)(p * (n - 1) + 0.5);
  return v[i] * 1e3;
}

static void fill_prompt(int32_t *p, int n, int seed, int vocab) {
  for (int k = 0; k < n; k++) p[k] = (int32_t)((7 + 131 * seed + 101 * k + (k * k) % 17) % vocab);
}

/* Submits n_req requests at once and waits for all. */
static int run_load(wisp_sched *s, client *cl, int32_t **prompts, const int *lens, int n_req, int D) {
  pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
  int left = n_req;
  for (int i = 0; i < n_req; i++) {
    cl[i].mu = &mu;
    cl[i].cv = &cv;
    cl[i].left = &left;
    cl[i].n = 0;
    wisp_sched_request r = {.prompt = prompts[i], .n_prompt = lens[i], .max_tokens = D, .ignore_eos = 1,
                            .on_event = on_event, .user = &cl[i]};
    uint64_t id;
    cl[i].sent = wisp_now_s();
    if (wisp_sched_submit(s, &r, &id) != WISP_OK) {
      fprintf(stderr, "sched_probe: submit: %s\n", wisp_last_error());
      pthread_mutex_lock(&mu);
      left -= n_req - i;
      pthread_mutex_unlock(&mu);
      break;
    }
  }
  pthread_mutex_lock(&mu);
  while (left > 0) pthread_cond_wait(&cv, &mu);
  pthread_mutex_unlock(&mu);
  return 1;
}

int main(int argc, char **argv) {
  const char *dir = NULL, *backend = "cpu", *tuning = NULL;
  int C = 8, P = 128, D = 128, parallel = 0, chunk = 0, turns = 0, threads = 0, context = 0, run_ahead = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!v) {
      fprintf(stderr, "sched_probe: %s needs a value\n", a);
      return 2;
    }
    if (!strcmp(a, "-m")) dir = v;
    else if (!strcmp(a, "--backend")) backend = v;
    else if (!strcmp(a, "--tuning")) tuning = v;
    else if (!strcmp(a, "-C")) C = atoi(v);
    else if (!strcmp(a, "-P")) P = atoi(v);
    else if (!strcmp(a, "-D")) D = atoi(v);
    else if (!strcmp(a, "--parallel")) parallel = atoi(v);
    else if (!strcmp(a, "--prefill-chunk")) chunk = atoi(v);
    else if (!strcmp(a, "--run-ahead")) run_ahead = atoi(v);
    else if (!strcmp(a, "--turns")) turns = atoi(v);
    else if (!strcmp(a, "-t")) threads = atoi(v);
    else if (!strcmp(a, "-c")) context = atoi(v);
    else {
      fprintf(stderr, "sched_probe: unknown option %s\n", a);
      return 2;
    }
    i++;
  }
  if (!dir || C < 1 || P < 1 || D < 1) {
    fprintf(stderr, "usage: sched_probe -m DIR [--backend B] [-C N] [-P N] [-D N] [--parallel N] [--prefill-chunk N] "
                    "[--run-ahead N] [--turns K] [-t N] [-c CTX] [--tuning ...]\n");
    return 2;
  }
  if (!parallel) parallel = turns ? 1 : C;
  if (!context) context = turns ? (P + D) * (turns + 1) + 16 : P + D + 16;
  wisp_model *m = NULL;
  if (wisp_model_open(dir, &m)) {
    fprintf(stderr, "sched_probe: %s\n", wisp_last_error());
    return 1;
  }
  wisp_sched_options o = {.parallel = parallel, .context = context, .prefill_chunk = chunk, .backend = backend,
                          .tuning = tuning, .threads = threads, .max_queue = C,
                          .run_ahead = run_ahead};
  wisp_sched *s = NULL;
  if (wisp_sched_new(m, &o, &s)) {
    fprintf(stderr, "sched_probe: %s\n", wisp_last_error());
    wisp_model_close(m);
    return 1;
  }
  const int vocab = wisp_model_vocab(m), n_req = turns ? 1 : C;
  client *cl = calloc((size_t)n_req, sizeof *cl);
  int32_t **prompts = calloc((size_t)n_req, sizeof *prompts);
  int *lens = calloc((size_t)n_req, sizeof *lens);
  const int cap_prompt = turns ? (P + D) * (turns + 1) : P;
  for (int i = 0; i < n_req; i++) {
    cl[i].cap = D;
    cl[i].gaps = calloc((size_t)D, sizeof(double));
    cl[i].tokens = calloc((size_t)D, sizeof(int32_t));
    prompts[i] = calloc((size_t)cap_prompt, sizeof(int32_t));
    lens[i] = P;
    fill_prompt(prompts[i], P, i, vocab);
  }
  /* warm-up: compiles the kernels of prefill and of a step; another prompt */
  {
    int32_t *wp = calloc((size_t)P, sizeof *wp);
    fill_prompt(wp, P, 9999, vocab);
    int wl = P;
    client w = {.cap = D, .gaps = calloc((size_t)D, sizeof(double)), .tokens = calloc((size_t)D, sizeof(int32_t))};
    int32_t *wps[1] = {wp};
    run_load(s, &w, wps, &wl, 1, 4);
    free(w.gaps);
    free(w.tokens);
    free(wp);
  }
  if (turns) {
    for (int t = 0; t < turns; t++) {
      run_load(s, cl, prompts, lens, 1, D);
      printf("{\"turn\": %d, \"prompt\": %d, \"cached\": %d, \"ttft_ms\": %.2f, \"tokens\": %d, \"tok_s\": %.1f}\n", t + 1,
             lens[0], cl[0].n_cached, (cl[0].first - cl[0].sent) * 1e3, cl[0].n,
             cl[0].n > 1 ? (cl[0].n - 1) / (cl[0].last - cl[0].first) : 0.0);
      /* the next turn: this prompt + the reply + P new tokens */
      int n = lens[0];
      for (int k = 0; k < cl[0].n && k < D; k++) prompts[0][n++] = cl[0].tokens[k];
      fill_prompt(prompts[0] + n, P, 100 + t, vocab);
      lens[0] = n + P;
    }
  } else {
    const double t0 = wisp_now_s();
    run_load(s, cl, prompts, lens, C, D);
    const double wall = wisp_now_s() - t0;
    long total = 0;
    int n_gaps = 0;
    double *ttft = calloc((size_t)C, sizeof(double)), *itl = calloc((size_t)C * D, sizeof(double));
    for (int i = 0; i < C; i++) {
      total += cl[i].n;
      ttft[i] = cl[i].first - cl[i].sent;
      for (int k = 0; k + 1 < cl[i].n && k < D; k++) itl[n_gaps++] = cl[i].gaps[k];
    }
    wisp_sched_stats st;
    wisp_sched_get_stats(s, &st);
    printf("{\"backend\": \"%s\", \"C\": %d, \"P\": %d, \"D\": %d, \"parallel\": %d, \"tok_s\": %.1f, \"wall_s\": %.3f, "
           "\"ttft_ms\": {\"p50\": %.2f, \"p90\": %.2f, \"p99\": %.2f}, \"itl_ms\": {\"p50\": %.2f, \"p90\": %.2f, "
           "\"p99\": %.2f}, \"steps\": %llu, \"prefill_calls\": %llu, \"run_ahead_tokens\": %llu}\n",
           backend, C, P, D, parallel, (double)total / wall, wall, pct(ttft, C, 0.5), pct(ttft, C, 0.9),
           pct(ttft, C, 0.99), pct(itl, n_gaps, 0.5), pct(itl, n_gaps, 0.9), pct(itl, n_gaps, 0.99),
           (unsigned long long)st.steps, (unsigned long long)st.prefill_calls,
           (unsigned long long)st.run_ahead_tokens);
    free(ttft);
    free(itl);
  }
  wisp_sched_free(s);
  for (int i = 0; i < n_req; i++) {
    free(cl[i].gaps);
    free(cl[i].tokens);
    free(prompts[i]);
  }
  free(cl);
  free(prompts);
  free(lens);
  wisp_model_close(m);
  return 0;
}
