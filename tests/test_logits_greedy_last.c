/* `wisp logits --greedy`: when the greedy prompt is the last prompt, its
 * greedy tokens continue from the state that prompt left (no second
 * prefill); they must be the tokens a fresh prefill of it gives, which is
 * what the same prompt gets when it is not the last. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cJSON.h>

#include "st_fixture.h"
#include "test.h"
#include "util/file.h"

static cJSON *logits_json(const char *art, const char *name, const char *spec) {
  char prompts[600], out[600], cmd[4096], log[8192];
  snprintf(prompts, sizeof prompts, "%s/%s.json", test_tmpdir(), name);
  snprintf(out, sizeof out, "%s/%s.out.json", test_tmpdir(), name);
  if (fx_write_bytes(prompts, spec, strlen(spec))) return NULL;
  snprintf(cmd, sizeof cmd, "%s logits --backend cpu --profile exact -m %s --prompts %s -o %s --greedy 12 --threads 1",
           test_wisp_bin(), art, prompts, out);
  if (test_run(cmd, log, sizeof log) != 0) {
    fprintf(stderr, "%s\n", log);
    return NULL;
  }
  char *text = NULL;
  if (wisp_read_file(out, &text, NULL) != WISP_OK) return NULL;
  cJSON *j = cJSON_Parse(text);
  free(text);
  return j;
}

TEST(logits_greedy_from_the_last_prompt) {
  char hf[512], art[600], cmd[4096], log[8192];
  snprintf(hf, sizeof hf, "%s/gl_hf", test_tmpdir());
  mkdir(hf, 0755);
  CHECK(fx_write_tiny_lfm2(hf, NULL) == 0);
  snprintf(art, sizeof art, "%s/gl_art", test_tmpdir());
  snprintf(cmd, sizeof cmd, "%s convert %s -o %s --quant f32 --quiet", test_wisp_bin(), hf, art);
  CHECKF(test_run(cmd, log, sizeof log) == 0, "%s", log);
  /* the greedy prompt first (then re-evaluated), and last (continued) */
  cJSON *first = logits_json(art, "gl_first", "{\"prompts\": [[3, 1, 4, 1, 5, 9, 2, 6], [7, 7]], \"greedy_prompt\": 0}");
  cJSON *last = logits_json(art, "gl_last", "{\"prompts\": [[7, 7], [3, 1, 4, 1, 5, 9, 2, 6]], \"greedy_prompt\": 1}");
  CHECK(first && last);
  const cJSON *a = cJSON_GetObjectItemCaseSensitive(first, "greedy"), *b = cJSON_GetObjectItemCaseSensitive(last, "greedy");
  CHECK(cJSON_GetArraySize(a) == 12 && cJSON_GetArraySize(b) == 12);
  for (int i = 0; i < 12; i++)
    CHECKF(cJSON_GetArrayItem(a, i)->valuedouble == cJSON_GetArrayItem(b, i)->valuedouble, "greedy token %d: %g vs %g", i,
           cJSON_GetArrayItem(a, i)->valuedouble, cJSON_GetArrayItem(b, i)->valuedouble);
  /* and the prompt's logits are the same rows in both files */
  const cJSON *la = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(first, "logits"), 0);
  const cJSON *lb = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(last, "logits"), 1);
  CHECK(cJSON_GetArraySize(la) > 0 && cJSON_GetArraySize(la) == cJSON_GetArraySize(lb));
  for (int i = 0; i < cJSON_GetArraySize(la); i++)
    CHECK(cJSON_GetArrayItem(la, i)->valuedouble == cJSON_GetArrayItem(lb, i)->valuedouble);
  cJSON_Delete(first);
  cJSON_Delete(last);
}
