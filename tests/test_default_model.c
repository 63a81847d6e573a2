/* The built-in default model (models/default, docs/default-model.md): wisp
 * must reproduce what PyTorch computed with the same weights on the GPU
 * machine (tools/train-default/run_device.sh -> models/default/expected.json):
 *   - the 128 greedy ids from the recorded prompt, exactly, on the CPU backend;
 *   - the perplexity of models/default/heldout-sample.txt, within 1%.
 * Without the committed model this test fails and says how to make it. */
#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "util/file.h"

#define DEFAULT_DIR "models/default"

static int parse_ids(const char *out, const char *label, int *ids, int cap) {
  const char *p = strstr(out, label);
  if (!p) return -1;
  p += strlen(label);
  int n = 0;
  while (*p && *p != '\n' && n < cap) {
    char *end;
    long v = strtol(p, &end, 10);
    if (end == p) break;
    ids[n++] = (int)v;
    p = end;
  }
  return n;
}

TEST(default_model_reproduces_torch) {
  char *text = NULL;
  int have = wisp_read_file(DEFAULT_DIR "/manifest.json", &text, NULL) == 0;
  free(text);
  text = NULL;
  if (!have || wisp_read_file(DEFAULT_DIR "/expected.json", &text, NULL) != 0) {
    test_fail_at(__FILE__, __LINE__,
                 "%s/manifest.json or expected.json is missing: run tools/train-default/run_device.sh on the GPU "
                 "machine and commit its default-q4.tar.gz (art_q4/*) and expected.json + heldout-sample.txt as "
                 "%s/ (docs/default-model.md, 'Retraining')",
                 DEFAULT_DIR, DEFAULT_DIR);
    free(text);
    return;
  }
  cJSON *ej = cJSON_Parse(text);
  free(text);
  CHECKF(ej, "%s/expected.json is not JSON", DEFAULT_DIR);
  const cJSON *prompt = cJSON_GetObjectItem(ej, "prompt"), *greedy = cJSON_GetObjectItem(ej, "greedy"),
              *pids = cJSON_GetObjectItem(ej, "prompt_ids"), *nll = cJSON_GetObjectItem(ej, "heldout_sample_nll"),
              *ntok = cJSON_GetObjectItem(ej, "heldout_sample_tokens");
  if (!cJSON_IsString(prompt) || !cJSON_IsArray(greedy) || !cJSON_IsArray(pids) || !cJSON_IsNumber(nll)) {
    cJSON_Delete(ej);
    CHECKF(0, "%s/expected.json needs prompt, prompt_ids, greedy and heldout_sample_nll", DEFAULT_DIR);
  }
  const int n = cJSON_GetArraySize(greedy);
  static char cmd[4096], out[65536];
  snprintf(cmd, sizeof cmd, "%s run --profile exact -m %s -p '%s' -n %d --temp 0 --repeat-penalty 1 --ignore-eos --ids --backend cpu",
           test_wisp_bin(), DEFAULT_DIR, prompt->valuestring, n);
  int rc = test_run(cmd, out, sizeof out);
  int got[1024], want[1024], gp[1024];
  int ng = rc == 0 ? parse_ids(out, "generated ids:", got, 1024) : -1;
  int np = rc == 0 ? parse_ids(out, "prompt ids:", gp, 1024) : -1;
  int ok_prompt = np == cJSON_GetArraySize(pids), first_diff = -1;
  for (int i = 0; ok_prompt && i < np; i++) ok_prompt = gp[i] == cJSON_GetArrayItem(pids, i)->valueint;
  for (int i = 0; i < n && i < 1024; i++) want[i] = cJSON_GetArrayItem(greedy, i)->valueint;
  for (int i = 0; i < n && first_diff < 0; i++)
    if (i >= ng || got[i] != want[i]) first_diff = i;
  double want_nll = nll->valuedouble;
  long want_tokens = cJSON_IsNumber(ntok) ? (long)ntok->valuedouble : -1;
  cJSON_Delete(ej);
  CHECKF(rc == 0, "%s -> %d:\n%s", cmd, rc, out);
  CHECKF(ok_prompt, "the prompt's ids differ from PyTorch's (tokenizer):\n%s", out);
  CHECKF(ng == n && first_diff < 0, "greedy ids differ from PyTorch's (dequantized q4) at step %d of %d:\n%s",
         first_diff, n, out);

  snprintf(cmd, sizeof cmd, "%s perplexity -m %s -f %s/heldout-sample.txt --backend cpu", test_wisp_bin(),
           DEFAULT_DIR, DEFAULT_DIR);
  rc = test_run(cmd, out, sizeof out);
  CHECKF(rc == 0, "%s -> %d:\n%s", cmd, rc, out);
  const char *p = strstr(out, "\"nll\": "), *t = strstr(out, "\"tokens\": ");
  CHECKF(p && t, "no nll in: %s", out);
  double got_nll = strtod(p + 7, NULL);
  long got_tokens = strtol(t + 10, NULL, 10);
  CHECKF(want_tokens < 0 || got_tokens == want_tokens, "wisp scored %ld tokens, PyTorch %ld (tokenizer or windows)",
         got_tokens, want_tokens);
  double ppl_w = exp(got_nll), ppl_t = exp(want_nll);
  CHECKF(fabs(ppl_w - ppl_t) <= 0.01 * ppl_t, "held-out sample perplexity: wisp %.4f, PyTorch %.4f (more than 1%% apart)",
         ppl_w, ppl_t);
}
