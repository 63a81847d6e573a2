/* `wisp logits --greedy`: when the greedy prompt is the last prompt, its
 * greedy tokens continue from the state that prompt left (no second
 * prefill); they must be the tokens a fresh prefill of it gives, which is
 * what the same prompt gets when it is not the last. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cJSON.h>

#include "fixtures.h"
#include "st_fixture.h"
#include "test.h"
#include "util/file.h"

static cJSON *run_json(const char *args, const char *out) {
  char cmd[4096], log[8192];
  snprintf(cmd, sizeof cmd, "%s logits --backend cpu --profile exact --threads 1 %s -o %s --force", test_wisp_bin(), args, out);
  if (test_run(cmd, log, sizeof log) != 0) {
    fprintf(stderr, "%s\n", log);
    return NULL;
  }
  return fixture_read_json(out);
}

static cJSON *logits_json(const char *art, const char *name, const char *spec) {
  char prompts[600], out[600], args[1400];
  snprintf(prompts, sizeof prompts, "%s/%s.json", test_tmpdir(), name);
  snprintf(out, sizeof out, "%s/%s.out.json", test_tmpdir(), name);
  if (fx_write_bytes(prompts, spec, strlen(spec))) return NULL;
  snprintf(args, sizeof args, "-m %s --prompts %s --greedy 12", art, prompts);
  return run_json(args, out);
}

/* The tiny LFM2 of st_fixture.h converted to an f32 artifact, TMP/TAG_art;
 * 0 with the CLI's output in log when that fails. */
static int tiny_artifact(const char *tag, char art[600], char *log, size_t cap) {
  char hf[512], cmd[2048];
  snprintf(hf, sizeof hf, "%s/%s_hf", test_tmpdir(), tag);
  snprintf(art, 600, "%s/%s_art", test_tmpdir(), tag);
  if (mkdir(hf, 0755) || fx_write_tiny_lfm2(hf, NULL)) return snprintf(log, cap, "%s: not written", hf), 0;
  snprintf(cmd, sizeof cmd, "%s convert %s -o %s --quant f32 --quiet", test_wisp_bin(), hf, art);
  return test_run(cmd, log, cap) == 0;
}

TEST(logits_greedy_from_the_last_prompt) {
  char art[600], log[8192];
  CHECKF(tiny_artifact("gl", art, log, sizeof log), "%s", log);
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

/* `wisp logits --follow IDS --top K`: before each fed id, the K largest
 * logits in order, the fed id's logit and max|logit|, as the same prefix
 * gives them evaluated as a prompt of its own. */
TEST(logits_follow_gives_each_steps_top_as_its_prefix_does) {
  char art[600], cmd[4096], log[8192], prompts[600], out_f[600], out_p[600], args[1400];
  CHECKF(tiny_artifact("lf", art, log, sizeof log), "%s", log);
  snprintf(prompts, sizeof prompts, "%s/lf_prompts.json", test_tmpdir());
  const char *spec = "{\"prompts\": [[3, 1, 4], [3, 1, 4, 1], [3, 1, 4, 1, 5]]}";
  CHECK(fx_write_bytes(prompts, spec, strlen(spec)) == 0);
  snprintf(out_f, sizeof out_f, "%s/lf_follow.json", test_tmpdir());
  snprintf(out_p, sizeof out_p, "%s/lf_prompts.out.json", test_tmpdir());
  snprintf(args, sizeof args, "-m %s --tokens 3,1,4 --follow 1,5,9 --top 4", art);
  cJSON *f = run_json(args, out_f);
  snprintf(args, sizeof args, "-m %s --prompts %s", art, prompts);
  cJSON *p = run_json(args, out_p);
  CHECK(f && p);
  const cJSON *steps = cJSON_GetObjectItemCaseSensitive(f, "follow"), *rows = cJSON_GetObjectItemCaseSensitive(p, "logits");
  CHECKF(cJSON_GetArraySize(steps) == 3 && cJSON_GetArraySize(rows) == 3, "%d steps, %d rows", cJSON_GetArraySize(steps),
         cJSON_GetArraySize(rows));
  const int fed[3] = {1, 5, 9};
  for (int t = 0; t < 3; t++) {
    const cJSON *st = cJSON_GetArrayItem(steps, t), *row = cJSON_GetArrayItem(rows, t);
    const cJSON *top = cJSON_GetObjectItemCaseSensitive(st, "top");
    int n = cJSON_GetArraySize(row);
    CHECK(cJSON_GetArraySize(top) == 4 && n > 4);
    /* the prefix's own four largest, by a plain sort-free scan */
    double max_abs = 0;
    for (int v = 0; v < n; v++) {
      double x = cJSON_GetArrayItem(row, v)->valuedouble;
      if (x > max_abs || -x > max_abs) max_abs = x < 0 ? -x : x;
    }
    double tol = 1e-4 * max_abs;
    int used[4] = {-1, -1, -1, -1};
    for (int k = 0; k < 4; k++) {
      int best = -1;
      for (int v = 0; v < n; v++) {
        int taken = 0;
        for (int j = 0; j < k; j++) taken |= used[j] == v;
        if (!taken && (best < 0 || cJSON_GetArrayItem(row, v)->valuedouble > cJSON_GetArrayItem(row, best)->valuedouble))
          best = v;
      }
      used[k] = best;
      const cJSON *e = cJSON_GetArrayItem(top, k);
      int id = cJSON_GetArrayItem(e, 0)->valueint;
      double lg = cJSON_GetArrayItem(e, 1)->valuedouble;
      CHECKF(id == best && fabs(lg - cJSON_GetArrayItem(row, best)->valuedouble) <= tol,
             "step %d, top %d: id %d logit %g, the prefix's %d %g", t, k, id, lg, best,
             cJSON_GetArrayItem(row, best)->valuedouble);
    }
    double fl = cJSON_GetObjectItemCaseSensitive(st, "fed_logit")->valuedouble;
    double ma = cJSON_GetObjectItemCaseSensitive(st, "max_abs")->valuedouble;
    CHECKF(fabs(fl - cJSON_GetArrayItem(row, fed[t])->valuedouble) <= tol && fabs(ma - max_abs) <= tol,
           "step %d: fed logit %g vs %g, max|logit| %g vs %g", t, fl, cJSON_GetArrayItem(row, fed[t])->valuedouble, ma,
           max_abs);
  }
  cJSON_Delete(f);
  cJSON_Delete(p);
  /* one continuation at a time; ids must be ids */
  snprintf(cmd, sizeof cmd, "%s logits --backend cpu -m %s --tokens 3,1 --follow 4 --greedy 2", test_wisp_bin(), art);
  CHECK(test_run(cmd, log, sizeof log) == 2 && strstr(log, "--follow and --greedy"));
  snprintf(cmd, sizeof cmd, "%s logits --backend cpu -m %s --tokens 3,1 --follow 4,x", test_wisp_bin(), art);
  CHECKF(test_run(cmd, log, sizeof log) != 0 && strstr(log, "--follow: expected comma-separated"), "%s", log);
  snprintf(cmd, sizeof cmd, "%s logits --backend cpu -m %s --tokens 3,1 --follow 4,99999999", test_wisp_bin(), art);
  CHECKF(test_run(cmd, log, sizeof log) != 0 && strstr(log, "outside the vocabulary"), "%s", log);
}
