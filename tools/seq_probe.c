/* seq_probe: what stepping several sequences together buys. For S = 1 and
 * the given S, n greedy steps of S slots through wisp_session_step (one
 * batched decode step each: every weight read once for all S rows on the
 * CPU, once per 8 rows on WebGPU, docs/sequences.md), and the aggregate
 * tokens per second (timed from the second step on); then whether each of
 * the S sequences got the tokens it gets alone (S = 1). One JSON line per S
 * on stdout.
 *   seq_probe -m DIR [--backend cpu|webgpu] [-S 8] [-n 64] [-t THREADS] [--tuning KEY=VALUE,...] [-a K]
 *             [--profile P]
 * (--profile: the runtime profile, default throughput: the one `wisp serve`
 * and `wisp run` take without flags; exact is the reference path.)
 * (-a K: only the first K sequences are run alone, each a session of its
 * own: "alone_seconds" covers those K, the speedup scales it to S.)
 * (--tuning rowsShared=0: the WebGPU products row by row, for an A/B of the
 * multi-row kernels, docs/sequences.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "engine/engine.h"
#include "engine/sampler.h"
#include "util/clock.h"

enum { MAX_S = 64, PROMPT = 16 };

/* n greedy steps of S slots after each slot's prompt; tokens[i * n + t]. */
static const char *g_tuning;                /* --tuning */
static const char *g_profile = CLI_FAST_PROFILE; /* --profile (the CLI's default) */

static int run(wisp_model *m, const char *backend, int threads, int S, int first_seq, int n, int32_t *tokens,
               double *secs) {
  wisp_session_options so = {
      .backend = backend, .threads = threads, .slots = S, .tuning = g_tuning, .profile = g_profile};
  wisp_session *s = NULL;
  if (wisp_session_new(m, &so, &s)) return 0;
  const int vocab = wisp_model_vocab(m);
  float *logits = malloc(sizeof(float) * (size_t)vocab);
  int slots[MAX_S], ok = logits != NULL;
  int32_t cur[MAX_S], next[MAX_S], prompt[PROMPT];
  for (int i = 0; ok && i < S; i++) {
    int seq = first_seq + i, np = 4 + seq % (PROMPT - 4); /* prompts of different lengths */
    for (int k = 0; k < np; k++) prompt[k] = (int32_t)((11 + 37 * seq + 101 * k) % vocab);
    slots[i] = i;
    ok = wisp_slot_eval(s, i, prompt, np, logits) == WISP_OK;
    cur[i] = (int32_t)wisp_argmax(logits, vocab);
  }
  /* timed from the second step on: the first compiles the step's kernels */
  double t0 = wisp_now_s();
  for (int t = 0; ok && t < n; t++) {
    if (t == 1) t0 = wisp_now_s();
    ok = wisp_session_step(s, slots, cur, S, NULL, next, NULL) == WISP_OK;
    for (int i = 0; ok && i < S; i++) tokens[(size_t)i * n + t] = cur[i] = next[i];
  }
  *secs = wisp_now_s() - t0;
  free(logits);
  wisp_session_free(s);
  return ok;
}

int main(int argc, char **argv) {
  const char *dir = NULL, *backend = "cpu";
  int S = 8, n = 64, threads = 0, n_alone = -1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "-m")) dir = argv[i + 1];
    else if (!strcmp(argv[i], "--backend")) backend = argv[i + 1];
    else if (!strcmp(argv[i], "-S")) S = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "-n")) n = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "-t")) threads = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--tuning")) g_tuning = argv[i + 1];
    else if (!strcmp(argv[i], "--profile")) g_profile = argv[i + 1];
    else if (!strcmp(argv[i], "-a")) n_alone = atoi(argv[i + 1]);
    else { fprintf(stderr, "seq_probe: unknown option %s\n", argv[i]); return 2; }
  }
  if (n_alone < 0 || n_alone > S) n_alone = S;
  if (!dir || S < 1 || S > MAX_S || n < 2 || n_alone < 1) {
    fprintf(stderr, "usage: seq_probe -m DIR [--backend cpu|webgpu] [-S 1..%d] [-n N >= 2] [-t THREADS] [--tuning T] "
            "[-a K >= 1] [--profile P]\n", MAX_S);
    return 2;
  }
  wisp_model *m = NULL;
  if (wisp_model_open(dir, &m)) { fprintf(stderr, "seq_probe: %s\n", wisp_last_error()); return 1; }
  int32_t *together = malloc(sizeof(int32_t) * (size_t)S * n), *alone = malloc(sizeof(int32_t) * (size_t)n);
  double t_s = 0, t_1 = 0, t_alone = 0;
  int ok = together && alone && run(m, backend, threads, S, 0, n, together, &t_s);
  int same = 0;
  for (int i = 0; ok && i < n_alone; i++) {
    double t;
    ok = run(m, backend, threads, 1, i, n, alone, &t);
    if (i == 0) t_1 = t;
    t_alone += t;
    same += ok && memcmp(alone, together + (size_t)i * n, sizeof(int32_t) * (size_t)n) == 0;
  }
  if (!ok) {
    fprintf(stderr, "seq_probe: %s\n", wisp_last_error());
  } else {
    const char *tu = g_tuning ? g_tuning : "";
    printf("{\"backend\": \"%s\", \"profile\": \"%s\", \"tuning\": \"%s\", \"S\": 1, \"steps\": %d, "
           "\"seconds\": %.4f, \"tokens_per_s\": %.1f}\n", backend, g_profile, tu, n, t_1, (n - 1) / t_1);
    printf("{\"backend\": \"%s\", \"profile\": \"%s\", \"tuning\": \"%s\", \"S\": %d, \"steps\": %d, \"seconds\": %.4f, "
           "\"tokens_per_s\": %.1f, \"alone_seconds\": %.4f, \"speedup_vs_one_at_a_time\": %.2f, "
           "\"sequences_run_alone\": %d, \"sequences_matching_alone\": %d}\n",
           backend, g_profile, tu, S, n, t_s, (double)S * (n - 1) / t_s, t_alone, t_alone / n_alone * S / t_s, n_alone, same);
  }
  free(together);
  free(alone);
  wisp_model_close(m);
  return ok && same == n_alone ? 0 : 1;
}
