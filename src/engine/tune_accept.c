/* The tuner's last step (tune_accept.h): the tuned entry against the
 * default, end to end. Per-kernel times add up to a token only roughly (the
 * persistent decode does not run the one-token products at all, one
 * flashBlocks serves every depth), so before the entry is written two
 * sessions on WebGPU (the fast profile; the exact one for the f32 tile),
 * one planned with the entry and one without, run the same prefill and
 * sampled decode in alternated rounds, and the parts of the entry that
 * lost where they act are taken out (wisp_tune_drop_losers). */
#include "engine/tune_accept.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/internal.h"
#include "engine/sampler.h"
#include "util/clock.h"
#include "util/err.h"

/* The entry laid into the in-memory manifest's "tuned" (on) or taken out
 * again (off): a session's plan reads it when the session is made. */
static wisp_status place(wisp_model *m, cJSON *entry, int on) {
  cJSON *man = m->artifact->manifest;
  cJSON *tuned = cJSON_GetObjectItemCaseSensitive(man, "tuned");
  if (!on) {
    if (tuned) cJSON_Delete(cJSON_DetachItemFromObjectCaseSensitive(man, "tuned"));
    return WISP_OK;
  }
  cJSON *t = cJSON_CreateArray(), *e = cJSON_Duplicate(entry, 1);
  if (!t || !e) {
    cJSON_Delete(t);
    cJSON_Delete(e);
    return wisp_fail(WISP_ENOMEM, "out of memory");
  }
  cJSON_AddItemToArray(t, e);
  if (tuned) cJSON_Delete(cJSON_DetachItemFromObjectCaseSensitive(man, "tuned"));
  cJSON_AddItemToObject(man, "tuned", t);
  return WISP_OK;
}

static int cmp(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void stats(const double *v, int n, double *median, double *spread) {
  double s[16];
  memcpy(s, v, sizeof(double) * (size_t)n);
  qsort(s, (size_t)n, sizeof *s, cmp);
  *median = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
  *spread = *median > 0 ? 0.5 * (s[n - 1] - s[0]) / *median : 0;
}

/* One round on session s: prefill, then greedy decode; tok/s of each. */
static wisp_status round_of(wisp_session *s, const int32_t *prompt, int np, int nd, float *logits, int vocab,
                            int32_t *out, double *pre, double *dec) {
  wisp_session_reset(s);
  double t0 = wisp_now_s();
  wisp_status st = wisp_session_eval(s, prompt, np, logits);
  if (st) return st;
  double t1 = wisp_now_s();
  /* sampled, not greedy: the greedy decode of a GPU runs the persistent
   * kernel, which takes none of the one-token products' geometry; sampling
   * runs them op by op, as a chat does (the same seed in both sessions) */
  wisp_generate_options o;
  wisp_generate_options_init(&o);
  o.temperature = 0.8f;
  o.seed = 1;
  int made = 0;
  if ((st = wisp_session_generate(s, (int32_t)wisp_argmax(logits, vocab), nd, &o, out, &made))) return st;
  double t2 = wisp_now_s();
  *pre = np / (t1 - t0);
  *dec = made / (t2 - t1);
  return WISP_OK;
}

wisp_status wisp_tune_accept(wisp_model *m, cJSON *entry, const char *profile, int np, int nd, int rounds, wisp_tune_ab *ab) {
  memset(ab, 0, sizeof *ab);
  if (rounds > 16) rounds = 16;
  cJSON *saved = cJSON_DetachItemFromObjectCaseSensitive(m->artifact->manifest, "tuned");
  wisp_session *s[2] = {NULL, NULL};
  const int vocab = wisp_model_vocab(m);
  float *logits = malloc(sizeof(float) * (size_t)vocab);
  int32_t *prompt = malloc(sizeof(int32_t) * (size_t)np), *out = malloc(sizeof(int32_t) * (size_t)(nd + 1));
  wisp_status st = logits && prompt && out ? WISP_OK : wisp_fail(WISP_ENOMEM, "out of memory");
  for (int i = 0; i < np; i++) prompt[i] = (int32_t)((i * 7919 + 13) % (vocab < 256 ? vocab : 256));
  wisp_session_options so;
  memset(&so, 0, sizeof so);
  so.size = sizeof so;
  so.backend = "webgpu";
  so.profile = profile;
  for (int v = 0; v < 2 && !st; v++) {
    if (!(st = place(m, entry, v))) st = wisp_session_new(m, &so, &s[v]);
  }
  place(m, entry, 0);
  if (saved) cJSON_AddItemToObject(m->artifact->manifest, "tuned", saved);
  double pre[2][16], dec[2][16];
  for (int v = 0; v < 2 && !st; v++) /* warm-up: kernels compiled, caches touched */
    st = round_of(s[v], prompt, np, nd, logits, vocab, out, &pre[v][0], &dec[v][0]);
  for (int r = 0; r < rounds && !st; r++)
    for (int v = 0; v < 2 && !st; v++) st = round_of(s[v], prompt, np, nd, logits, vocab, out, &pre[v][r], &dec[v][r]);
  if (!st) {
    ab->rounds = rounds;
    for (int v = 0; v < 2; v++) {
      stats(pre[v], rounds, &ab->prefill_tps[v], &ab->prefill_spread[v]);
      stats(dec[v], rounds, &ab->decode_tps[v], &ab->decode_spread[v]);
    }
    ab->prefill_tokens = np;
    ab->prefill_slower = ab->prefill_tps[1] < ab->prefill_tps[0];
    ab->decode_slower = ab->decode_tps[1] < ab->decode_tps[0];
  }
  for (int v = 0; v < 2; v++) wisp_session_free(s[v]);
  free(logits);
  free(prompt);
  free(out);
  return st;
}

int wisp_tune_drop_losers(cJSON *e, const wisp_tune_ab *ab, char *said, size_t cap) {
  cJSON *cand = cJSON_GetObjectItemCaseSensitive(e, "candidate");
  const int prefill = ab->prefill_slower && (cJSON_GetObjectItemCaseSensitive(cand, "prefillTile") ||
                                             cJSON_GetObjectItemCaseSensitive(cand, "prefillTileI8"));
  const int decode = ab->decode_slower && (cJSON_GetObjectItemCaseSensitive(cand, "matvec") ||
                                           cJSON_GetObjectItemCaseSensitive(cand, "flashBlocks"));
  if (prefill) {
    cJSON_DeleteItemFromObjectCaseSensitive(cand, "prefillTile");
    cJSON_DeleteItemFromObjectCaseSensitive(cand, "prefillTileI8");
  }
  if (decode) {
    cJSON_DeleteItemFromObjectCaseSensitive(cand, "matvec");
    cJSON_DeleteItemFromObjectCaseSensitive(cand, "flashBlocks");
    cJSON_DeleteItemFromObjectCaseSensitive(e, "knee");
  }
  if (cap) snprintf(said, cap, "%s%s%s", prefill ? "the prefill tile (the prefill was slower with it)" : "",
                    prefill && decode ? ", " : "",
                    decode ? "the one-token geometries and flashBlocks (the decode was slower with them)" : "");
  return prefill || decode;
}
