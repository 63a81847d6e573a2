/* wisp perplexity: mean next-token negative log-likelihood of a text file.
 *
 *   wisp perplexity -m DIR -f FILE [--max-tokens N] [--window W] [--bos ID]
 *                   [--backend cpu|webgpu|auto] [-t THREADS]
 *
 * The evaluation tools/train-default/train.py (eval) does, window for window:
 * FILE is encoded as one text without special tokens; the ids (the first N
 * with --max-tokens) are cut into consecutive chunks of W-1 (default W 256;
 * the last chunk may be shorter); each window is BOS followed by one chunk,
 * evaluated from a reset session, and every chunk token is scored by the
 * logits of the position before it (BOS predicts the first). BOS is the id
 * the tokenizer's post-processor adds (--bos overrides); a tokenizer without
 * one (byte) uses windows of W plain ids, whose first id is not scored.
 * The mean NLL is in nats, accumulated in double; stdout gets one JSON line
 * {"tokens": scored ids, "windows": W, "nll": mean, "ppl": exp(mean)}. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "engine/engine.h"
#include "tokenizer/tokenizer.h"
#include "util/err.h"
#include "util/file.h"

static int parse_int(const char *opt, const char *v, long lo, long hi, long *out) {
  char *end;
  long d = strtol(v, &end, 10);
  if (!*v || *end || d < lo || d > hi) {
    fprintf(stderr, "wisp perplexity: %s needs an integer in [%ld, %ld], got '%s'\n", opt, lo, hi, v);
    return 0;
  }
  *out = d;
  return 1;
}

/* -log softmax(row)[target], in double. */
static double nll_of(const float *row, int vocab, int target) {
  double mx = row[0];
  for (int i = 1; i < vocab; i++)
    if (row[i] > mx) mx = row[i];
  double sum = 0;
  for (int i = 0; i < vocab; i++) sum += exp((double)row[i] - mx);
  return mx + log(sum) - (double)row[target];
}

int cmd_perplexity(int argc, char **argv) {
  const char *model_dir = NULL, *file = NULL, *backend = "cpu", *tuning = NULL;
  long max_tokens = 0, window = 256, bos_opt = -1, threads = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!v) { fprintf(stderr, "wisp perplexity: unknown option or missing value: '%s'\n", a); return 2; }
    i++;
    if (!strcmp(a, "-m") || !strcmp(a, "--model")) model_dir = v;
    else if (!strcmp(a, "-f") || !strcmp(a, "--file")) file = v;
    else if (!strcmp(a, "--backend")) backend = v;
    else if (!strcmp(a, "--tuning")) tuning = v;
    else if (!strcmp(a, "--max-tokens")) { if (!parse_int(a, v, 1, 2000000000L, &max_tokens)) return 2; }
    else if (!strcmp(a, "--window")) { if (!parse_int(a, v, 2, 1000000L, &window)) return 2; }
    else if (!strcmp(a, "--bos")) { if (!parse_int(a, v, 0, 2000000000L, &bos_opt)) return 2; }
    else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) { if (!parse_int(a, v, 0, 1024, &threads)) return 2; }
    else { fprintf(stderr, "wisp perplexity: unknown option '%s'\n", a); return 2; }
  }
  if (!file) {
    fprintf(stderr, "usage: wisp perplexity -m DIR -f FILE [--max-tokens N] [--window W] [--bos ID] [--backend B]\n");
    return 2;
  }
  if (!model_dir && !(model_dir = cli_default_model())) return cli_error("perplexity");

  wisp_model *m = NULL;
  wisp_session *s = NULL;
  wisp_tokenizer *tok = NULL;
  int32_t *ids = NULL, *win = NULL;
  float *logits = NULL;
  char *text = NULL;
  size_t len = 0;
  int rc = 1, n_ids = 0;
  if (wisp_model_open(model_dir, &m)) goto done;
  const int vocab = wisp_model_vocab(m);
  if (wisp_tokenizer_for_artifact(m->artifact->dir, m->artifact->tokenizer, m->artifact->manifest, vocab, &tok))
    goto done;
  wisp_session_options so = {.backend = backend, .threads = (int)threads, .tuning = tuning};
  if (wisp_session_new(m, &so, &s)) goto done;
  if (window > wisp_session_context(s)) {
    wisp_fail(WISP_EINVAL, "a window of %ld tokens exceeds the context of %d", window, wisp_session_context(s));
    goto done;
  }
  if (wisp_read_file(file, &text, &len)) goto done;
  if (wisp_tokenizer_encode_n(tok, text, len, 0, &ids, &n_ids)) goto done;
  if (max_tokens > 0 && n_ids > max_tokens) n_ids = (int)max_tokens;
  for (int i = 0; i < n_ids; i++)
    if (ids[i] < 0 || ids[i] >= vocab) {
      wisp_fail(WISP_EFORMAT, "the tokenizer gave id %d, outside the model's vocabulary of %d", ids[i], vocab);
      goto done;
    }
  int32_t bos = bos_opt >= 0 ? (int32_t)bos_opt : wisp_tokenizer_bos(tok);
  if (bos >= vocab) { wisp_fail(WISP_EINVAL, "BOS id %d is outside the vocabulary of %d", bos, vocab); goto done; }
  const int has_bos = bos >= 0, step = has_bos ? (int)window - 1 : (int)window;
  win = malloc(sizeof(int32_t) * (size_t)window);
  logits = malloc(sizeof(float) * (size_t)window * (size_t)vocab);
  if (!win || !logits) { wisp_fail(WISP_ENOMEM, "out of memory"); goto done; }
  double total = 0;
  long scored = 0, windows = 0;
  for (int at = 0; at < n_ids; at += step) {
    int k = n_ids - at < step ? n_ids - at : step, n = 0;
    if (has_bos) win[n++] = bos;
    memcpy(win + n, ids + at, sizeof(int32_t) * (size_t)k);
    n += k;
    if (n < 2) continue; /* nothing to score */
    wisp_session_reset(s);
    if (wisp_session_eval_all(s, win, n, logits)) goto done;
    for (int r = 0; r + 1 < n; r++) total += nll_of(logits + (size_t)r * vocab, vocab, win[r + 1]);
    scored += n - 1;
    windows++;
  }
  if (scored == 0) { wisp_fail(WISP_EINVAL, "%s: no tokens to score", file); goto done; }
  double mean = total / (double)scored;
  printf("{\"tokens\": %ld, \"windows\": %ld, \"window\": %ld, \"bos\": %d, \"nll\": %.9g, \"ppl\": %.9g}\n", scored,
         windows, window, (int)bos, mean, exp(mean));
  fprintf(stderr, "wisp perplexity: %s: %ld tokens in %ld windows: nll %.6f, perplexity %.4f\n", file, scored,
          windows, mean, exp(mean));
  rc = 0;
done:
  if (rc) cli_error("perplexity");
  free(text);
  free(ids);
  free(win);
  free(logits);
  wisp_tokenizer_free(tok);
  wisp_session_free(s);
  wisp_model_close(m);
  return rc;
}
