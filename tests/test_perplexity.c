/* `wisp perplexity` against an independent computation: the same windows fed
 * one token at a time through wisp_session_eval (the decode path) with the
 * log-softmax done here. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixtures.h"
#include "test.h"
#include "tokenizer/tokenizer.h"
#include "util/file.h"
#include "wisp.h"

static const char k_text[] =
    "In the beginning God created the heaven and the earth.\n"
    "And the earth was without form, and void; and darkness was upon the face of the deep.\n"
    "And the Spirit of God moved upon the face of the waters.\n"
    "And God said, Let there be light: and there was light.\n"
    "And God saw the light, that it was good: and God divided the light from the darkness.\n"
    "And God called the light Day, and the darkness he called Night.\n"
    "And the evening and the morning were the first day.\n";

/* Mean NLL over windows of `window` ids (BOS first when bos >= 0), token by token. */
static double direct_nll(const char *dir, const char *text, int window, int bos, long *scored_out) {
  wisp_model *m = NULL;
  wisp_session *s = NULL;
  wisp_tokenizer *tok = NULL;
  int32_t *ids = NULL;
  int n_ids = 0;
  double total = 0;
  long scored = 0;
  if (wisp_model_open(dir, &m) || wisp_session_new(m, NULL, &s)) return NAN;
  const int vocab = wisp_model_vocab(m);
  if (wisp_tokenizer_new("byte", vocab, &tok) || wisp_tokenizer_encode_n(tok, text, strlen(text), 0, &ids, &n_ids))
    return NAN;
  float *logits = malloc(sizeof(float) * (size_t)vocab);
  const int step = bos >= 0 ? window - 1 : window;
  for (int at = 0; at < n_ids; at += step) {
    int k = n_ids - at < step ? n_ids - at : step;
    int32_t prev = bos >= 0 ? bos : ids[at];
    int first = bos >= 0 ? 0 : 1;
    if (first >= k + (bos >= 0)) continue;
    wisp_session_reset(s);
    if (wisp_session_eval(s, &prev, 1, logits)) { total = NAN; break; }
    for (int j = first; j < k; j++) {
      int32_t t = ids[at + j];
      double mx = -INFINITY, sum = 0;
      for (int v = 0; v < vocab; v++) mx = logits[v] > mx ? logits[v] : mx;
      for (int v = 0; v < vocab; v++) sum += exp((double)logits[v] - mx);
      total += mx + log(sum) - (double)logits[t];
      scored++;
      if (j + 1 < k && wisp_session_eval(s, &t, 1, logits)) { total = NAN; break; }
    }
  }
  free(logits);
  free(ids);
  wisp_tokenizer_free(tok);
  wisp_session_free(s);
  wisp_model_close(m);
  *scored_out = scored;
  return total / (double)scored;
}

static double json_num(const char *out, const char *key) {
  char k[64];
  snprintf(k, sizeof k, "\"%s\": ", key);
  const char *p = strstr(out, k);
  return p ? strtod(p + strlen(k), NULL) : NAN;
}

static void check_cli(const char *extra, int window, int bos) {
  const char *dir = fixture_small_model();
  CHECK(dir);
  const char *file = fixture_write("ppl.txt", k_text);
  char cmd[2048], out[8192];
  snprintf(cmd, sizeof cmd, "%s perplexity --backend cpu -m %s -f %s --window %d %s", test_wisp_bin(), dir, file, window, extra);
  int rc = test_run(cmd, out, sizeof out);
  CHECKF(rc == 0, "%s -> %d: %s", cmd, rc, out);
  double cli = json_num(out, "nll");
  long tokens = (long)json_num(out, "tokens");
  long scored = 0;
  double ref = direct_nll(dir, k_text, window, bos, &scored);
  CHECKF(isfinite(cli) && isfinite(ref), "cli %g, direct %g: %s", cli, ref, out);
  CHECKF(tokens == scored, "cli scored %ld tokens, the direct count is %ld", tokens, scored);
  CHECKF(fabs(cli - ref) <= 1e-5 * fabs(ref), "cli nll %.9g vs token-by-token %.9g", cli, ref);
  CHECK_NEAR(json_num(out, "ppl"), exp(ref), 1e-5 * exp(ref));
}

/* Windows longer than the session's prefill chunk (48 here): eval_all spans chunks. */
TEST(perplexity_matches_token_by_token_with_bos) { check_cli("--bos 1 --tuning prefillChunk=48", 100, 1); }
TEST(perplexity_matches_token_by_token_without_bos) { check_cli("", 40, -1); }

/* llama-perplexity's scoring (--llama-chunks), token by token: the text less one
 * trailing newline, BOS first when bos >= 0, whole chunks of `window` ids whose
 * first id is BOS, the predictions of positions window/2 .. window-2 scored. */
static double direct_llama_nll(const char *dir, const char *text, int window, int bos, long *scored_out) {
  wisp_model *m = NULL;
  wisp_session *s = NULL;
  wisp_tokenizer *tok = NULL;
  int32_t *ids = NULL, *list = NULL;
  int n_ids = 0;
  double total = 0;
  long scored = 0;
  size_t len = strlen(text);
  if (len && text[len - 1] == '\n') len--;
  if (wisp_model_open(dir, &m) || wisp_session_new(m, NULL, &s)) return NAN;
  const int vocab = wisp_model_vocab(m);
  if (wisp_tokenizer_new("byte", vocab, &tok) || wisp_tokenizer_encode_n(tok, text, len, 0, &ids, &n_ids)) return NAN;
  int n = 0;
  list = malloc(sizeof(int32_t) * (size_t)(n_ids + 1));
  float *logits = malloc(sizeof(float) * (size_t)vocab);
  if (bos >= 0) list[n++] = bos;
  for (int i = 0; i < n_ids; i++) list[n++] = ids[i];
  for (int c = 0; (c + 1) * window <= n; c++) {
    wisp_session_reset(s);
    for (int r = 0; r + 1 < window; r++) {
      int32_t t = r == 0 && bos >= 0 ? bos : list[c * window + r];
      if (wisp_session_eval(s, &t, 1, logits)) { total = NAN; break; }
      if (r < window / 2) continue;
      const int32_t next = list[c * window + r + 1];
      double mx = -INFINITY, sum = 0;
      for (int v = 0; v < vocab; v++) mx = logits[v] > mx ? logits[v] : mx;
      for (int v = 0; v < vocab; v++) sum += exp((double)logits[v] - mx);
      total += mx + log(sum) - (double)logits[next];
      scored++;
    }
  }
  free(logits);
  free(list);
  free(ids);
  wisp_tokenizer_free(tok);
  wisp_session_free(s);
  wisp_model_close(m);
  *scored_out = scored;
  return total / (double)scored;
}

static void check_llama_chunks(const char *extra, int window, int bos) {
  const char *dir = fixture_small_model();
  CHECK(dir);
  const char *file = fixture_write("ppl-llama.txt", k_text);
  char cmd[2048], out[8192];
  snprintf(cmd, sizeof cmd, "%s perplexity --backend cpu -m %s -f %s --window %d --llama-chunks %s", test_wisp_bin(), dir,
           file, window, extra);
  int rc = test_run(cmd, out, sizeof out);
  CHECKF(rc == 0, "%s -> %d: %s", cmd, rc, out);
  long scored = 0;
  double cli = json_num(out, "nll"), ref = direct_llama_nll(dir, k_text, window, bos, &scored);
  CHECKF(isfinite(cli) && isfinite(ref), "cli %g, direct %g: %s", cli, ref, out);
  const long chunks = ((long)strlen(k_text) - 1 + (bos >= 0)) / window;
  CHECKF((long)json_num(out, "windows") == chunks, "%s: want %ld chunks", out, chunks);
  CHECKF((long)json_num(out, "tokens") == scored && scored == chunks * (window - 1 - window / 2), "%s: direct %ld", out,
         scored);
  CHECKF(fabs(cli - ref) <= 1e-5 * fabs(ref), "cli nll %.9g vs token-by-token %.9g", cli, ref);
}

TEST(perplexity_llama_chunks_with_bos) { check_llama_chunks("--bos 1 --tuning prefillChunk=48", 100, 1); }
TEST(perplexity_llama_chunks_without_bos) { check_llama_chunks("", 61, -1); }

TEST(perplexity_llama_chunks_too_short) {
  const char *dir = fixture_small_model();
  CHECK(dir);
  const char *file = fixture_write("ppl-short.txt", "short text\n");
  char cmd[2048], out[8192];
  snprintf(cmd, sizeof cmd, "%s perplexity --backend cpu -m %s -f %s --window 64 --llama-chunks", test_wisp_bin(), dir,
           file);
  CHECK(test_run(cmd, out, sizeof out) != 0 && strstr(out, "no whole chunk"));
}

TEST(perplexity_max_tokens_and_errors) {
  const char *dir = fixture_small_model();
  CHECK(dir);
  const char *file = fixture_write("ppl2.txt", k_text);
  char cmd[2048], out[8192];
  snprintf(cmd, sizeof cmd, "%s perplexity --backend cpu -m %s -f %s --window 32 --bos 1 --max-tokens 50", test_wisp_bin(), dir,
           file);
  CHECKF(test_run(cmd, out, sizeof out) == 0, "%s", out);
  CHECK((long)json_num(out, "tokens") == 50);
  CHECK((long)json_num(out, "windows") == 2);
  snprintf(cmd, sizeof cmd, "%s perplexity --backend cpu -m %s -f %s --window 100000", test_wisp_bin(), dir, file);
  CHECK(test_run(cmd, out, sizeof out) != 0 && strstr(out, "exceeds the context"));
  snprintf(cmd, sizeof cmd, "%s perplexity --backend cpu -m %s -f %s/missing.txt", test_wisp_bin(), dir, test_tmpdir());
  CHECK(test_run(cmd, out, sizeof out) != 0);
}

/* wisp_session_eval_all gives, row for row, what feeding one token at a time gives. */
TEST(session_eval_all_rows) {
  const char *dir = fixture_small_model();
  CHECK(dir);
  wisp_model *m = NULL;
  wisp_session *s = NULL;
  CHECK(wisp_model_open(dir, &m) == WISP_OK);
  CHECK(wisp_session_new(m, NULL, &s) == WISP_OK);
  const int vocab = wisp_model_vocab(m), n = 70;
  int32_t ids[70];
  for (int i = 0; i < n; i++) ids[i] = (int32_t)((i * 37 + 11) % vocab);
  float *all = malloc(sizeof(float) * (size_t)n * vocab), *one = malloc(sizeof(float) * (size_t)vocab);
  CHECK(all && one);
  CHECK(wisp_session_eval_all(s, ids, n, all) == WISP_OK);
  CHECK(wisp_session_position(s) == n);
  wisp_session_reset(s);
  double worst = 0;
  for (int i = 0; i < n; i++) {
    CHECK(wisp_session_eval(s, &ids[i], 1, one) == WISP_OK);
    for (int v = 0; v < vocab; v++) {
      double d = fabs((double)one[v] - all[(size_t)i * vocab + v]);
      worst = d > worst ? d : worst;
    }
  }
  CHECKF(worst < 1e-3, "largest difference %g", worst);
  CHECK(wisp_session_eval_all(s, ids, 1, NULL) != WISP_OK);
  free(all);
  free(one);
  wisp_session_free(s);
  wisp_model_close(m);
}
