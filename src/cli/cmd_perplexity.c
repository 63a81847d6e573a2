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
 * {"tokens": scored ids, "windows": W, "nll": mean, "ppl": exp(mean)}; a
 * mean that is not finite (non-finite logits: broken weights) is an error,
 * not a JSON line, so what stdout gets is always valid JSON. -f - reads
 * standard input.
 *
 * --llama-chunks scores what llama.cpp's llama-perplexity -c W scores, so the
 * two can be compared on one GGUF file: the text as it reads it (one trailing
 * newline dropped), encoded with BOS first when the tokenizer adds one, cut
 * into whole chunks of W ids (a shorter tail is dropped), each chunk's first
 * id replaced by BOS (when there is one) and only the second half of each
 * chunk scored: the logits of positions W/2 .. W-2 against the ids after them. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "engine/engine.h"
#include "tokenizer/tokenizer.h"
#include "util/err.h"
#include "util/file.h"
#include "cli/opts.h"

/* -log softmax(row)[target], in double. */
static double nll_of(const float *row, int vocab, int target) {
  double mx = row[0];
  for (int i = 1; i < vocab; i++)
    if (row[i] > mx) mx = row[i];
  double sum = 0;
  for (int i = 0; i < vocab; i++) sum += exp((double)row[i] - mx);
  return mx + log(sum) - (double)row[target];
}

/* Scores one window from a fresh session: the NLL of win[r + 1] under row r
 * of its logits for r from `from` to n - 2, added to *total and counted in
 * *scored. */
static wisp_status score_window(wisp_session *s, const int32_t *win, int n, int from, float *logits, int vocab,
                                double *total, long *scored) {
  wisp_session_reset(s);
  wisp_status st = wisp_session_eval_all(s, win, n, logits);
  if (st) return st;
  for (int r = from; r + 1 < n; r++) *total += nll_of(logits + (size_t)r * vocab, vocab, win[r + 1]);
  *scored += n - 1 - from;
  return WISP_OK;
}

int cmd_perplexity(int argc, char **argv) {
  const char *model_dir = NULL, *file = NULL, *backend = CLI_DEFAULT_BACKEND, *tuning = NULL;
  int64_t max_tokens = 0, window = 256, bos_opt = -1, threads = 0;
  int llama_chunks = 0;
  const cli_opt opts[] = {
      {"-m|--model", CLI_STR, &model_dir, 0, 0, "DIR", "the model artifact (default: models/default)"},
      {"-f|--file", CLI_STR, &file, 0, 0, "FILE", "the text to score (\"-\": standard input)"},
      {"--max-tokens", CLI_I64, &max_tokens, 1, 2e9, "N", "score only the first N tokens"},
      {"--window", CLI_I64, &window, 2, 1e6, "W", "tokens per window, BOS included (default 256)"},
      {"--bos", CLI_I64, &bos_opt, 0, 2e9, "ID", "the id that starts every window (default: the tokenizer's BOS)"},
      {"--backend", CLI_STR, &backend, 0, 0, "B", "auto (default: a GPU adapter, else the CPU), cpu or webgpu"},
      {"-t|--threads", CLI_I64, &threads, 0, 1024, "N", "CPU threads (default 0: one per physical core available)"},
      {"--tuning", CLI_STR, &tuning, 0, 0, "K=V,...", "backend tuning keys (docs/configuration.md)"},
      {"--llama-chunks", CLI_FLAG, &llama_chunks, 0, 0, NULL,
       "score as llama-perplexity -c W does: whole W-id chunks from BOS, the second half of each scored"},
  };
  const cli_spec spec = {"perplexity", "[-m DIR] -f FILE [options]",
                         "Mean next-token negative log-likelihood (nats) and perplexity of a text, as one JSON line.",
                         opts, (int)(sizeof opts / sizeof opts[0]), NULL, 0, NULL};
  int pr = cli_parse(&spec, argc, argv);
  if (pr != CLI_CONTINUE) return pr;
  cli_warn_threads("perplexity", (long)threads);
  if (!file) {
    fprintf(stderr, "wisp perplexity: -f FILE is required (see wisp perplexity --help)\n");
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
  wisp_session_options so = {.backend = backend, .threads = (int)threads, .tuning = tuning,
                             .max_context = window > WISP_DEFAULT_CONTEXT ? (int)window : 0};
  if (wisp_session_new(m, &so, &s)) goto done;
  if (window > wisp_session_context(s)) {
    wisp_fail(WISP_EINVAL, "--window %lld exceeds the context of %d tokens", (long long)window,
              wisp_session_context(s));
    goto done;
  }
  if (cli_read_text(file, WISP_FILE_MAX, &text, &len)) goto done;
  if (llama_chunks && len > 0 && text[len - 1] == '\n') len--; /* llama.cpp's -f drops it */
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
  if (llama_chunks) {
    /* ids with BOS first (when added) cut into whole chunks of W; a chunk's
     * id 0 becomes BOS; rows W/2 .. W-2 scored. Index j of that list is
     * text id j - has_bos, and chunk c's id 0 is replaced, so its other ids
     * are text ids c*W + 1 - has_bos ... */
    const int w = (int)window, first = w / 2;
    const long n_list = (long)n_ids + has_bos;
    for (long c = 0; (c + 1) * w <= n_list; c++) {
      if (has_bos) win[0] = bos;
      else win[0] = ids[c * w];
      memcpy(win + 1, ids + c * w + 1 - has_bos, sizeof(int32_t) * (size_t)(w - 1));
      if (score_window(s, win, w, first, logits, vocab, &total, &scored)) goto done;
      windows++;
    }
  } else {
    for (int at = 0; at < n_ids; at += step) {
      int k = n_ids - at < step ? n_ids - at : step, n = 0;
      if (has_bos) win[n++] = bos;
      memcpy(win + n, ids + at, sizeof(int32_t) * (size_t)k);
      n += k;
      if (n < 2) continue; /* nothing to score */
      if (score_window(s, win, n, 0, logits, vocab, &total, &scored)) goto done;
      windows++;
    }
  }
  if (scored == 0) {
    if (llama_chunks)
      wisp_fail(WISP_EINVAL, "%s: %d ids make no whole chunk of --window %lld (--llama-chunks)", file, n_ids + has_bos,
                (long long)window);
    else
      wisp_fail(WISP_EINVAL, "%s: no tokens to score", file);
    goto done;
  }
  double mean = total / (double)scored;
  if (!isfinite(mean)) {
    wisp_fail(WISP_EFORMAT, "%s: the log-likelihood is not finite (the model gives non-finite logits: are its "
              "weights finite?)", file);
    goto done;
  }
  /* exp overflows past a mean NLL of ~709: JSON has no inf, so null */
  char ppl_text[64] = "null";
  if (isfinite(exp(mean))) snprintf(ppl_text, sizeof ppl_text, "%.9g", exp(mean));
  printf("{\"tokens\": %ld, \"windows\": %ld, \"window\": %lld, \"bos\": %d, \"nll\": %.9g, \"ppl\": %s}\n", scored,
         windows, (long long)window, (int)bos, mean, ppl_text);
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
