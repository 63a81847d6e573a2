/* Dense Llama and Qwen3 models (all-attention layers, no short conv) on the
 * WebGPU backend against the CPU backend, for every weight type `wisp
 * convert` writes (f32, q4, q4k, f16, q8_0).
 *
 * The checkpoints are written here from C: a tiny LlamaForCausalLM (no q/k
 * norm, llama3 rope scaling whose original context, 64, puts the rope
 * frequencies in all three bands; head dim 32, untied head) and a tiny
 * Qwen3ForCausalLM (q/k norm, head dim 64, tied head), converted with the
 * CLI. A 40-token prompt, then 48 greedy steps through eval (op by op:
 * prefill attention, one-token attention split over key blocks past 64
 * positions) and 48 through the decode loop (which takes the persistent
 * decode, for every weight type). webgpu_dense_persistent_every_type runs
 * the persistent decode forced on against op by op and the CPU. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backend/webgpu/wgpu_backend.h"
#include "engine/engine.h"
#include "engine/session.h"
#include "st_fixture.h"
#include "test.h"
#include "util/err.h"
#include "webgpu_fixture.h"

#define TOL_DENSE_LOGITS 1e-3 /* per step, relative to max|logit| (as TOL_LOGITS, test_webgpu_backend.c) */

enum { DH = 128, DF = 256, DV = 256, DNH = 4, DKV = 2, DL = 2, PROMPT = 40, STEPS = 48 };

static int head_dim(int llama) { return llama ? 32 : 64; }

/* Under AddressSanitizer the Qwen3 parities run one weight type, q4k (Q4_K
 * where the columns allow, else Q4: both products), and the Llama every
 * type. What sets Qwen3 apart on the host (q/k norm, a tied head, head dim
 * 64) does not depend on the weight type, and each type's host code (its
 * products, its packing into the persistent decode's blob) runs for the
 * Llama; a further type is a convert, kernel compiles on lavapipe (Dawn's
 * and Mesa's code) and decodes that the optimised build checks. */
static int asan_skips(int llama, const char *quant) { return TEST_ASAN && !llama && strcmp(quant, "q4k") != 0; }

/* max_position_embeddings of the next checkpoint write_dense writes. */
static int g_dense_ctx = 256;

/* config.json + model.safetensors of the tiny model into dir (which exists). */
static int write_dense(const char *dir, int llama) {
  const int D = head_dim(llama);
  char path[800], cfg[1200];
  snprintf(path, sizeof path, "%s/config.json", dir);
  snprintf(cfg, sizeof cfg,
           "{\"architectures\": [\"%s\"], \"model_type\": \"%s\", \"hidden_size\": %d, \"intermediate_size\": %d, "
           "\"num_hidden_layers\": %d, \"num_attention_heads\": %d, \"num_key_value_heads\": %d, \"head_dim\": %d, "
           "\"vocab_size\": %d, \"rms_norm_eps\": 1e-05, \"rope_theta\": %s, \"max_position_embeddings\": %d, "
           "\"tie_word_embeddings\": %s, \"attention_bias\": false, \"hidden_act\": \"silu\"%s}",
           llama ? "LlamaForCausalLM" : "Qwen3ForCausalLM", llama ? "llama" : "qwen3", DH, DF, DL, DNH, DKV, D, DV,
           llama ? "500000.0" : "1000000.0", g_dense_ctx, llama ? "false" : "true",
           llama ? ", \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0, \"low_freq_factor\": 1.0, "
                   "\"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 64}"
                 : ", \"use_sliding_window\": false");
  if (fx_write_bytes(path, cfg, strlen(cfg))) return -1;
  static const struct {
    const char *fmt;
    int rows, cols; /* 0: DH, -1: D, -2: DNH * D, -3: DKV * D, -4: DF */
    int qwen_only;
  } per[] = {{"model.layers.%d.input_layernorm.weight", 1, 0, 0},
             {"model.layers.%d.post_attention_layernorm.weight", 1, 0, 0},
             {"model.layers.%d.self_attn.q_proj.weight", -2, 0, 0},
             {"model.layers.%d.self_attn.k_proj.weight", -3, 0, 0},
             {"model.layers.%d.self_attn.v_proj.weight", -3, 0, 0},
             {"model.layers.%d.self_attn.o_proj.weight", 0, -2, 0},
             {"model.layers.%d.self_attn.q_norm.weight", 1, -1, 1},
             {"model.layers.%d.self_attn.k_norm.weight", 1, -1, 1},
             {"model.layers.%d.mlp.gate_proj.weight", -4, 0, 0},
             {"model.layers.%d.mlp.up_proj.weight", -4, 0, 0},
             {"model.layers.%d.mlp.down_proj.weight", 0, -4, 0}};
  const int sizes[5] = {DH, D, DNH * D, DKV * D, DF};
  enum { MAXT = DL * 11 + 3 };
  static char names[MAXT][96];
  fx_tensor t[MAXT];
  float *data[MAXT] = {0};
  int n = 0, rc = 0;
  for (int l = 0; l < DL; l++)
    for (size_t k = 0; k < sizeof per / sizeof per[0]; k++) {
      if (llama && per[k].qwen_only) continue;
      snprintf(names[n], sizeof names[n], per[k].fmt, l);
      int r = per[k].rows == 1 ? 1 : sizes[-per[k].rows], c = sizes[-per[k].cols];
      t[n] = (fx_tensor){names[n], "F32", r == 1 ? 1 : 2, {r == 1 ? c : r, c}, NULL};
      n++;
    }
  t[n++] = (fx_tensor){"model.embed_tokens.weight", "F32", 2, {DV, DH}, NULL};
  if (llama) t[n++] = (fx_tensor){"lm_head.weight", "F32", 2, {DV, DH}, NULL};
  t[n++] = (fx_tensor){"model.norm.weight", "F32", 1, {DH}, NULL};
  for (int i = 0; i < n && !rc; i++) {
    int64_t ne = t[i].shape[0] * (t[i].ndim == 2 ? t[i].shape[1] : 1);
    if (!(data[i] = malloc(sizeof(float) * (size_t)ne))) rc = -1;
    for (int64_t j = 0; !rc && j < ne; j++) data[i][j] = fx_tiny_value(t[i].name, 11, j);
    t[i].data = data[i];
  }
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  if (!rc) rc = fx_write_safetensors(path, t, n);
  for (int i = 0; i < n; i++) free(data[i]);
  return rc;
}

/* The model converted with --quant quant (made once per process). */
static const char *dense_artifact(int llama, const char *quant, char *log, size_t cap) {
  static char made[2][5][600];
  static const char *quants[5] = {"f32", "q4", "q4k", "f16", "q8_0"};
  int qi = 0;
  while (qi < 5 && strcmp(quants[qi], quant)) qi++;
  if (qi == 5) return NULL;
  if (made[llama][qi][0]) return made[llama][qi];
  char hf[600], dir[600], cmd[2048];
  snprintf(hf, sizeof hf, "%s/dense_%s_hf", test_tmpdir(), llama ? "llama" : "qwen3");
  struct stat sb;
  if (stat(hf, &sb) != 0 && (mkdir(hf, 0755) != 0 || write_dense(hf, llama) != 0)) {
    snprintf(log, cap, "cannot write %s", hf);
    return NULL;
  }
  snprintf(dir, sizeof dir, "%s/dense_%s_%s", test_tmpdir(), llama ? "llama" : "qwen3", quant);
  snprintf(cmd, sizeof cmd, "%s convert %s -o %s --quant %s --quiet", test_wisp_bin(), hf, dir, quant);
  if (test_run(cmd, log, cap)) return NULL;
  snprintf(made[llama][qi], sizeof made[llama][qi], "%s", dir);
  return made[llama][qi];
}

/* eval on the WebGPU session, then a sync: a readback that failed (and left
 * NaN logits) reports its error here. */
static wisp_status gpu_eval(wisp_session *s, const int32_t *ids, int n, float *logits) {
  wisp_status st = wisp_session_eval(s, ids, n, logits);
  return st ? st : s->backend->sync(s->backend);
}

static int argmax_of(const float *v, int n) {
  int b = 0;
  for (int i = 1; i < n; i++)
    if (v[i] > v[b]) b = i;
  return b;
}

/* The prompt, then STEPS greedy steps through eval on both backends (equal
 * tokens, logits within TOL_DENSE_LOGITS), then STEPS through the decode
 * loop from the prompt's state (equal tokens). *persistent gets the decode
 * steps the WebGPU persistent kernel ran, *worst the largest logit error. */
static int dense_parity(const char *dir, char *err, size_t cap, uint64_t *persistent, double *worst) {
  wisp_model *m = NULL;
  if (wisp_model_open(dir, &m)) {
    snprintf(err, cap, "open %s: %s", dir, wisp_last_error());
    return 0;
  }
  const int V = wisp_model_vocab(m);
  wisp_session *sc = NULL, *sg = NULL;
  wisp_session_options oc = {.backend = "cpu", .threads = 1}, og = {.backend = "webgpu"};
  wisp_status st = wisp_session_new(m, &oc, &sc);
  if (!st) st = wisp_session_new(m, &og, &sg);
  float *lc = malloc(sizeof(float) * V), *lg = malloc(sizeof(float) * V);
  int ok = !st && lc && lg;
  if (!ok) snprintf(err, cap, "sessions: %s", st ? wisp_last_error() : "out of memory");
  int32_t prompt[PROMPT];
  for (int i = 0; i < PROMPT; i++) prompt[i] = (int32_t)((i * 37 + 11) % V);
  if (ok && (wisp_session_eval(sc, prompt, PROMPT, lc) || gpu_eval(sg, prompt, PROMPT, lg))) {
    snprintf(err, cap, "prompt: %s", wisp_last_error());
    ok = 0;
  }
  int32_t first = 0;
  *worst = 0;
  for (int step = 0; ok && step < STEPS; step++) {
    double mx = 0, e = 0;
    for (int i = 0; i < V; i++) {
      mx = fmax(mx, fabs(lc[i]));
      e = fmax(e, fabs((double)lg[i] - lc[i]));
    }
    if (isnan(e)) e = INFINITY;
    *worst = fmax(*worst, e / mx);
    int tc = argmax_of(lc, V), tg = argmax_of(lg, V);
    if (tc != tg || !(e <= TOL_DENSE_LOGITS * mx)) {
      snprintf(err, cap, "eval step %d: token cpu %d webgpu %d, logit error %.3g of max %.3g", step, tc, tg, e, mx);
      ok = 0;
      break;
    }
    if (step == 0) first = tc;
    int32_t t = tc;
    if (wisp_session_eval(sc, &t, 1, lc) || gpu_eval(sg, &t, 1, lg)) {
      snprintf(err, cap, "eval step %d: %s", step, wisp_last_error());
      ok = 0;
    }
  }
  wisp_wgpu_backend_stats s0 = {0}, s1 = {0};
  if (ok) {
    wisp_session_reset(sc);
    wisp_session_reset(sg);
    ok = !wisp_session_eval(sc, prompt, PROMPT, NULL) && !wisp_session_eval(sg, prompt, PROMPT, NULL);
    int32_t a[STEPS], b[STEPS];
    int na = 0, nb = 0;
    wisp_generate_options go = {.temperature = 0};
    wisp_wgpu_backend_stats_get(sg->backend, &s0);
    if (ok)
      ok = !wisp_session_generate(sc, first, STEPS, &go, a, &na) && !wisp_session_generate(sg, first, STEPS, &go, b, &nb);
    wisp_wgpu_backend_stats_get(sg->backend, &s1);
    if (!ok) snprintf(err, cap, "generate: %s", wisp_last_error());
    if (ok && (na != STEPS || nb != STEPS || memcmp(a, b, sizeof a))) {
      int k = 0;
      while (k < STEPS && a[k] == b[k]) k++;
      snprintf(err, cap, "generate: %d and %d tokens, first difference at %d", na, nb, k);
      ok = 0;
    }
  }
  *persistent = s1.persistent_steps - s0.persistent_steps;
  free(lc);
  free(lg);
  wisp_session_free(sc);
  wisp_session_free(sg);
  wisp_model_close(m);
  return ok;
}

static void dense_suite(int llama) {
  static const char *quants[] = {"f32", "q4", "q4k", "f16", "q8_0"};
  for (size_t i = 0; i < sizeof quants / sizeof quants[0]; i++) {
    if (asan_skips(llama, quants[i])) continue;
    char log[4096] = "", err[600] = "";
    const char *dir = dense_artifact(llama, quants[i], log, sizeof log);
    CHECKF(dir, "convert --quant %s: %s", quants[i], log);
    uint64_t persistent = 0;
    double worst = 0;
    int ok = dense_parity(dir, err, sizeof err, &persistent, &worst);
    CHECKF(ok, "%s %s: %s", llama ? "llama" : "qwen3", quants[i], err);
    /* The persistent decode runs every weight type (with or without q/k norm). */
    CHECKF(persistent > 0, "%s %s: %llu decode steps in the persistent kernel", llama ? "llama" : "qwen3", quants[i],
           (unsigned long long)persistent);
    printf("     %s %s: %d + %d greedy tokens equal, max logit error %.3g of max|logit|, %llu persistent steps\n",
           llama ? "llama" : "qwen3", quants[i], STEPS, STEPS, worst, (unsigned long long)persistent);
  }
}

/* ---- the persistent decode at every weight type ---- */

enum { PSTEPS = 40 };

/* The prompt, then PSTEPS greedy tokens through the decode loop from `first`
 * in batches of 16, then one eval of the last token (its logits in
 * `logits`); *persistent: the decode steps the WebGPU persistent kernel ran. */
static int loop_run(wisp_model *m, const char *backend, const char *tuning, int32_t first, int32_t *out, float *logits,
                    uint64_t *persistent, char *err, size_t cap) {
  wisp_session_options so = {.backend = backend, .tuning = tuning, .threads = 1};
  wisp_session *s = NULL;
  const int V = wisp_model_vocab(m);
  int32_t prompt[PROMPT];
  for (int i = 0; i < PROMPT; i++) prompt[i] = (int32_t)((i * 37 + 11) % V);
  wisp_generate_options go = {.temperature = 0, .batch = 16};
  int n = 0;
  wisp_status st = wisp_session_new(m, &so, &s);
  if (!st) st = wisp_session_eval(s, prompt, PROMPT, NULL);
  if (!st) st = wisp_session_generate(s, first, PSTEPS, &go, out, &n);
  if (!st && n != PSTEPS) st = wisp_fail(WISP_EINVAL, "%d tokens of %d", n, PSTEPS);
  if (!st) st = wisp_session_eval(s, &out[PSTEPS - 1], 1, logits);
  if (!st) st = s->backend->sync(s->backend);
  wisp_wgpu_backend_stats stats = {0};
  *persistent = 0;
  if (!st && !strcmp(backend, "webgpu") && wisp_wgpu_backend_stats_get(s->backend, &stats))
    *persistent = stats.persistent_steps;
  if (st) snprintf(err, cap, "%s %s: %s", backend, tuning ? tuning : "", wisp_last_error());
  wisp_session_free(s);
  return !st;
}

/* Largest |a - b| over n values, and max |a| in *mx. */
static double max_err(const float *a, const float *b, int n, double *mx) {
  double e = 0;
  *mx = 0;
  for (int i = 0; i < n; i++) {
    *mx = fmax(*mx, fabs(a[i]));
    e = fmax(e, fabs((double)a[i] - b[i]));
  }
  return isnan(e) ? INFINITY : e;
}

/* The decode loop with the persistent decode forced on (tuning persist=1,
 * persistMinSteps=1, two workgroups: grid barriers really crossed) gives
 * the tokens of the op-by-op decode (persist=0) and of the CPU, every step
 * in the persistent kernel, for the dense Llama (no q/k norm, untied head)
 * and Qwen3 (q/k norm, tied head) at f32, f16, q8_0, q4 (Q4 matrices, Q4Z
 * embedding) and q4k (Q4_K where the columns allow, else Q4), and the tiny
 * LFM2 (webgpu_lfm2_persistent_every_type); the logits of
 * one step more agree within TOL_DENSE_LOGITS, so the state left by the
 * persistent steps (KV rows) is compared too, not only the argmaxes. */
/* The tiny LFM2 of st_fixture.h (conv, attention, conv layers; hidden 64,
 * so q4k would be q4) converted with --quant quant. */
static const char *lfm2_artifact(const char *quant, char *log, size_t cap) {
  static char dir[600];
  char hf[600], cmd[2048];
  struct stat sb;
  snprintf(hf, sizeof hf, "%s/persist_lfm2_hf", test_tmpdir());
  if (stat(hf, &sb) != 0 && (mkdir(hf, 0755) != 0 || fx_write_tiny_lfm2(hf, NULL) != 0)) {
    snprintf(log, cap, "cannot write %s", hf);
    return NULL;
  }
  snprintf(dir, sizeof dir, "%s/persist_lfm2_%s", test_tmpdir(), quant);
  snprintf(cmd, sizeof cmd, "%s convert %s -o %s --quant %s --quiet", test_wisp_bin(), hf, dir, quant);
  return test_run(cmd, log, cap) ? NULL : dir;
}

/* arch: "llama", "qwen3" or "lfm2". */
static void persist_types(const char *arch) {
  /* The tiny LFM2 takes the two types whose products are new in the
   * persistent kernel and differ most from Q4 (f16 halves, q8_0 bytes); the
   * dense models take every type. Each type is its own kernel compile,
   * minutes on lavapipe with an empty shader cache. */
  static const char *quants[] = {"f32", "f16", "q8_0", "q4", "q4k"}, *lfm2_quants[] = {"f16", "q8_0"};
  const int lfm2 = !strcmp(arch, "lfm2"), llama = !strcmp(arch, "llama");
  const size_t n_quants = lfm2 ? 2 : sizeof quants / sizeof quants[0];
  for (size_t i = 0; i < n_quants; i++) {
    char log[4096] = "", err[600] = "";
    const char *q = lfm2 ? lfm2_quants[i] : quants[i];
    if (!lfm2 && asan_skips(llama, q)) continue;
    const char *dir = lfm2 ? lfm2_artifact(q, log, sizeof log) : dense_artifact(llama, q, log, sizeof log);
    CHECKF(dir, "convert --quant %s: %s", q, log);
    if (!dir) continue;
    wisp_model *m = NULL;
    CHECKF(wisp_model_open(dir, &m) == WISP_OK, "open %s: %s", dir, wisp_last_error());
    if (!m) continue;
    const int V = wisp_model_vocab(m);
    float *lc = malloc(sizeof(float) * V), *lp = malloc(sizeof(float) * V), *lo = malloc(sizeof(float) * V);
    int32_t tc[PSTEPS], tp[PSTEPS], to[PSTEPS];
    uint64_t pc = 0, pp = 0, po = 0;
    const int32_t first = 5;
    int ok = lc && lp && lo && loop_run(m, "cpu", NULL, first, tc, lc, &pc, err, sizeof err) &&
             loop_run(m, "webgpu", "persist=1,persistMinSteps=1,persistGrid=1", first, tp, lp, &pp, err, sizeof err) &&
             loop_run(m, "webgpu", "persist=0", first, to, lo, &po, err, sizeof err);
    wisp_model_close(m);
    /* the comparisons first, then the checks (a failing check returns) */
    int at = 0, distinct = 0;
    while (ok && at < PSTEPS && tc[at] == tp[at] && tc[at] == to[at]) at++;
    for (int k = 0; ok && k < PSTEPS; k++) {
      int seen = 0;
      for (int j = 0; j < k && !seen; j++) seen = tc[j] == tc[k];
      distinct += !seen;
    }
    double mx = 0, ep = ok ? max_err(lc, lp, V, &mx) : 0, eo = ok ? max_err(lc, lo, V, &mx) : 0;
    free(lc);
    free(lp);
    free(lo);
    CHECKF(ok, "%s %s: %s", arch, q, err);
    CHECKF(at == PSTEPS, "%s %s: token %d: cpu %d, persistent %d, op by op %d", arch, q, at,
           at < PSTEPS ? tc[at] : 0, at < PSTEPS ? tp[at] : 0, at < PSTEPS ? to[at] : 0);
    /* every decode step of the loop in the persistent kernel, none with persist=0 */
    CHECKF(pp == PSTEPS && po == 0, "%s %s: %llu persistent steps (want %d), op by op %llu", arch, q,
           (unsigned long long)pp, PSTEPS, (unsigned long long)po);
    CHECKF(ep <= TOL_DENSE_LOGITS * mx && eo <= TOL_DENSE_LOGITS * mx,
           "%s %s: logits after the loop: persistent error %.3g, op by op %.3g of max %.3g", arch, q, ep, eo,
           mx);
    printf("     %s %s: %d greedy tokens (%d distinct) equal on cpu, persistent (%llu steps) and op by op; "
           "next logits within %.3g / %.3g of max\n",
           arch, q, PSTEPS, distinct, (unsigned long long)pp, ep / mx, eo / mx);
  }
}

TEST(webgpu_dense_persistent_every_type) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  persist_types("llama");
  persist_types("qwen3");
}

/* The same for the tiny LFM2 (short-conv layers: their in_proj rows, B, C
 * and X of a channel, read together by the kernel's conv phase) at f16 and
 * q8_0 (q4: the decode-loop tests of the seed-shaped model). */
TEST(webgpu_lfm2_persistent_every_type) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  persist_types("lfm2");
}

/* tuning persistMaxKeys: a generate whose batches pass the key limit
 * changes path mid-request (the first 16-step batch persistent, the rest
 * op by op, after the arena's state is flushed back) and still gives the
 * CPU's tokens and next logits: the KV rows and state the persistent steps
 * left are what the op-by-op steps read. */
TEST(webgpu_persist_max_keys_hands_over_to_op_by_op) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  char log[4096] = "", err[600] = "";
  const char *dir = dense_artifact(1, "f32", log, sizeof log);
  CHECKF(dir, "convert: %s", log);
  if (!dir) return;
  wisp_model *m = NULL;
  CHECKF(wisp_model_open(dir, &m) == WISP_OK, "open %s: %s", dir, wisp_last_error());
  if (!m) return;
  const int V = wisp_model_vocab(m);
  float *lc = malloc(sizeof(float) * V), *lp = malloc(sizeof(float) * V);
  int32_t tc[PSTEPS], tp[PSTEPS];
  uint64_t pc = 0, pp = 0;
  char tuning[128];
  /* the first batch (positions PROMPT .. PROMPT + 15) ends within the limit, the second would not */
  snprintf(tuning, sizeof tuning, "persist=1,persistMinSteps=1,persistGrid=1,persistMaxKeys=%d", PROMPT + 20);
  int ok = lc && lp && loop_run(m, "cpu", NULL, 5, tc, lc, &pc, err, sizeof err) &&
           loop_run(m, "webgpu", tuning, 5, tp, lp, &pp, err, sizeof err);
  wisp_model_close(m);
  int at = 0;
  while (ok && at < PSTEPS && tc[at] == tp[at]) at++;
  double mx = 0, e = ok ? max_err(lc, lp, V, &mx) : 0;
  free(lc);
  free(lp);
  CHECKF(ok, "%s", err);
  CHECKF(at == PSTEPS, "token %d: cpu %d, webgpu %d", at, at < PSTEPS ? tc[at] : 0, at < PSTEPS ? tp[at] : 0);
  CHECKF(pp == 16, "%llu persistent steps, want 16 (the first batch alone)", (unsigned long long)pp);
  CHECKF(e <= TOL_DENSE_LOGITS * mx, "next logits %.3g of max %.3g apart", e, mx);
}

TEST(webgpu_dense_llama_matches_cpu) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  dense_suite(1);
}

TEST(webgpu_dense_qwen3_matches_cpu) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  dense_suite(0);
}

/* `wisp logits --greedy N --decode-loop` (what tests/parity/run_device.sh
 * runs as backend "webgpu+loop"): on WebGPU its greedy tokens after the
 * first come from the decode loop, the persistent decode for the q4 Llama,
 * and equal the CPU's one eval a token. */
TEST(webgpu_dense_logits_decode_loop_cli) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  char log[4096] = "", cmd[2048];
  const char *dir = dense_artifact(1, "q4", log, sizeof log);
  CHECKF(dir, "convert: %s", log);
  static char cpu[1 << 16], gpu[1 << 16];
  snprintf(cmd, sizeof cmd, "%s logits -m %s --tokens 3,1,4,1,5,9,2,6 --greedy 40 --backend cpu 2>&1", test_wisp_bin(),
           dir);
  CHECKF(test_run(cmd, cpu, sizeof cpu) == 0, "%s", cpu);
  snprintf(cmd, sizeof cmd, "%s logits -m %s --tokens 3,1,4,1,5,9,2,6 --greedy 40 --backend webgpu --decode-loop 2>&1",
           test_wisp_bin(), dir);
  CHECKF(test_run(cmd, gpu, sizeof gpu) == 0, "%s", gpu);
  const char *gc = strstr(cpu, "\"greedy\""), *gg = strstr(gpu, "\"greedy\"");
  CHECKF(gc && gg, "no greedy list:\n%.300s\n%.300s", cpu, gpu);
  const char *ec = strchr(gc, ']'), *eg = strchr(gg, ']');
  CHECKF(ec && eg, "greedy lists not closed:\n%.400s\n%.400s", gc, gg);
  CHECKF(ec - gc > 100 && ec - gc == eg - gg && !memcmp(gc, gg, (size_t)(ec - gc)), "greedy tokens differ:\n%.400s\n%.400s",
         gc, gg);
  /* the loop's 39 steps, every one the persistent decode's (the CPU's output names none) */
  const char *ps = strstr(eg, "\"persistent_steps\": ");
  CHECKF(ps && atoi(ps + strlen("\"persistent_steps\": ")) == 39, "persistent steps: %.60s", ps ? ps : "(none)");
  CHECKF(!strstr(ec, "persistent_steps"), "the CPU run names persistent steps: %.60s", ec);
}

/* ---- KV caches that grow (wgpu_kv.c) ---- */

enum { GROW_CTX = 16384, GROW_PROMPT = 240, GROW_FIRST = 100, GROW_STEPS = 300 };

/* The f32 Llama with a 16,384-position context, converted once. */
static const char *long_llama(char *log, size_t cap) {
  static char dir[600];
  if (dir[0]) return dir;
  char hf[600], cmd[2048];
  snprintf(hf, sizeof hf, "%s/dense_long_llama_hf", test_tmpdir());
  g_dense_ctx = GROW_CTX;
  int rc = mkdir(hf, 0755) != 0 || write_dense(hf, 1) != 0;
  g_dense_ctx = 256;
  if (rc) {
    snprintf(log, cap, "cannot write %s", hf);
    return NULL;
  }
  snprintf(dir, sizeof dir, "%s/dense_long_llama", test_tmpdir());
  snprintf(cmd, sizeof cmd, "%s convert %s -o %s --quant f32 --quiet", test_wisp_bin(), hf, dir);
  if (test_run(cmd, log, cap)) dir[0] = 0;
  return dir[0] ? dir : NULL;
}

/* That Llama opened; NULL with the reason in why (the convert's log, or the
 * open's error). */
static wisp_model *open_long_llama(char *why, size_t cap) {
  char log[4096] = "";
  const char *dir = long_llama(log, sizeof log);
  wisp_model *m = NULL;
  if (!dir) snprintf(why, cap, "convert: %s", log);
  else if (wisp_model_open(dir, &m) != WISP_OK) snprintf(why, cap, "%s", wisp_last_error());
  return m;
}

/* One session at context 16,384 on WebGPU: a 240-token prompt, then
 * GROW_STEPS greedy tokens through the decode loop (batches of 64) in two
 * requests, the first crossing position 256, the second 512. held0 / held1: the KV bytes held
 * before and after, grows: the caches grown (stats). */
static int grow_run(wisp_model *m, const char *tuning, int32_t *out, uint64_t *held0, uint64_t *held1,
                    uint64_t *grows, uint64_t *persistent, char *err, size_t cap) {
  wisp_session_options so = {.backend = "webgpu", .tuning = tuning, .max_context = GROW_CTX};
  wisp_session *s = NULL;
  const int V = wisp_model_vocab(m);
  int32_t prompt[GROW_PROMPT];
  for (int i = 0; i < GROW_PROMPT; i++) prompt[i] = (int32_t)((i * 37 + 11) % V);
  wisp_generate_options go = {.temperature = 0, .batch = 64};
  int n = 0;
  wisp_status st = wisp_session_new(m, &so, &s);
  if (!st) *held0 = wisp_session_kv_bytes_held(s);
  if (!st) st = wisp_session_eval(s, prompt, GROW_PROMPT, NULL);
  /* two requests: each grows the caches for itself before its first step
   * (past 256, then past 512), the second with the persistent arena of the
   * first already made */
  int n2 = 0;
  if (!st) st = wisp_session_generate(s, 7, GROW_FIRST, &go, out, &n);
  if (!st && n == GROW_FIRST) st = wisp_session_generate(s, out[GROW_FIRST - 1], GROW_STEPS - GROW_FIRST, &go, out + n, &n2);
  n += n2;
  if (!st && n != GROW_STEPS) st = wisp_fail(WISP_EINVAL, "%d tokens of %d", n, GROW_STEPS);
  wisp_wgpu_backend_stats stats = {0};
  if (!st) {
    *held1 = wisp_session_kv_bytes_held(s);
    wisp_wgpu_backend_stats_get(s->backend, &stats);
  }
  *grows = stats.kv_grows;
  *persistent = stats.persistent_steps;
  if (st) snprintf(err, cap, "tuning %s: %s", tuning ? tuning : "-", wisp_last_error());
  wisp_session_free(s);
  return !st;
}

/* KV caches that grow on WebGPU: a session at context 16,384 starts with
 * 256 positions a cache, grows (256 -> 512 -> 1,024) as its requests
 * need, and its greedy tokens equal those of a session whose caches
 * are made for the whole context (kvGrow=0), op by op and through the
 * persistent decode (whose arena grows with the caches at a request's
 * first batch, never between two of its batches; persistOpt bit 16:
 * its attention in chunks of 256 keys, here up to 540 keys in one split,
 * with bit 128, which a CPU adapter runs only when asked: the chunk's
 * loads kept in flight together; and the default, bit 256: the split's
 * keys streamed from the KV binding in 16-byte words, attn_stream). */
TEST(webgpu_kv_grows_while_generating) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  char opened[4200] = "", err[600] = "";
  wisp_model *m = open_long_llama(opened, sizeof opened);
  CHECKF(m, "%s", opened);
  static int32_t tok[4][GROW_STEPS];
  uint64_t h0[4] = {0}, h1[4] = {0}, grows[4] = {0}, pers[4] = {0};
  static const char *tunings[4] = {"persist=0", "kvGrow=0,persist=0", "persist=1,persistMinSteps=1,persistGrid=1,persistOpt=153",
                                   "persist=1,persistMinSteps=1,persistGrid=1"};
  int ok = 1;
  for (int i = 0; ok && i < 4; i++) ok = grow_run(m, tunings[i], tok[i], &h0[i], &h1[i], &grows[i], &pers[i], err, sizeof err);
  wisp_model_close(m);
  CHECKF(ok, "%s", err);
  /* 2 layers, K and V, 2 KV heads of 32, f32 */
  const uint64_t per_pos = 2ull * 2 * DKV * 32 * 4;
  CHECKF(h0[0] == 256 * per_pos && h0[2] == 256 * per_pos, "held at start: %llu, %llu", (unsigned long long)h0[0],
         (unsigned long long)h0[2]);
  CHECKF(h0[1] == (uint64_t)GROW_CTX * per_pos, "kvGrow=0 holds %llu", (unsigned long long)h0[1]);
  CHECKF(h1[0] == 1024 * per_pos && h1[2] == 1024 * per_pos, "held after: %llu, %llu", (unsigned long long)h1[0],
         (unsigned long long)h1[2]);
  /* 2 doublings of 4 caches */
  CHECKF(grows[0] == 8 && grows[2] == 8 && grows[1] == 0, "grows %llu %llu %llu", (unsigned long long)grows[0],
         (unsigned long long)grows[1], (unsigned long long)grows[2]);
  CHECKF(pers[2] > 0 && pers[3] > 0 && pers[0] == 0, "persistent steps %llu, %llu / %llu", (unsigned long long)pers[2],
         (unsigned long long)pers[3], (unsigned long long)pers[0]);
  int at = 0;
  while (at < GROW_STEPS && tok[0][at] == tok[1][at] && tok[2][at] == tok[1][at] && tok[3][at] == tok[1][at]) at++;
  CHECKF(at == GROW_STEPS, "token %d: grown %d, whole context %d, persistent %d, streamed %d", at, tok[0][at], tok[1][at],
         tok[2][at], tok[3][at]);
}

/* A WebGPU scheduler of 64 slots at context 16,384 holds 256 positions a
 * slot up front (its KV caches share one buffer a layer and grow together
 * on demand), not 64 x 16,384. */
TEST(webgpu_kv_growth_64_slots_reserve_little) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  char opened[4200] = "";
  wisp_model *m = open_long_llama(opened, sizeof opened);
  CHECKF(m, "%s", opened);
  wisp_sched_options o = {.backend = "webgpu", .parallel = 64, .context = GROW_CTX};
  wisp_sched *S = NULL;
  wisp_status st = wisp_sched_new(m, &o, &S);
  uint64_t full = 0, held = st == WISP_OK ? wisp_sched_kv_bytes_held(S, &full) : 0;
  wisp_sched_free(S);
  wisp_model_close(m);
  CHECKF(st == WISP_OK, "%s", wisp_last_error());
  const uint64_t per_pos = 2ull * 2 * DKV * 32 * 4; /* 2 layers, K and V, 2 KV heads of 32, f32 */
  CHECKF(full == 64ull * GROW_CTX * per_pos && held == 64ull * 256 * per_pos, "held %llu of %llu",
         (unsigned long long)held, (unsigned long long)full);
}

/* Stops a generate after its first batch. */
static int stop_after_first_batch(void *user, const int32_t *tokens, int n) {
  (void)user, (void)tokens, (void)n;
  return 1;
}

/* The persistent decode's arena follows the KV caches at the first batch
 * after they grew, not at the step that passes its old capacity: a request
 * that asks for 400 tokens grows the caches from 512 to 1,024 positions
 * before its first step, and its first batch (positions 260-275, well
 * under 512) remakes the arena, so no later batch of it stalls on that. */
TEST(webgpu_persist_arena_follows_the_caches_at_a_request_start) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  char opened[4200] = "";
  wisp_model *m = open_long_llama(opened, sizeof opened);
  CHECKF(m, "%s", opened);
  /* the tuning of webgpu_kv_grows_while_generating's persistent run: the same kernel */
  wisp_session_options so = {.backend = "webgpu", .max_context = GROW_CTX,
                             .tuning = "persist=1,persistMinSteps=1,persistGrid=1,persistOpt=153"};
  wisp_session *s = NULL;
  wisp_status st = wisp_session_new(m, &so, &s);
  const int V = wisp_model_vocab(m);
  int32_t prompt[GROW_PROMPT], out[400];
  for (int i = 0; i < GROW_PROMPT; i++) prompt[i] = (int32_t)((i * 37 + 11) % V);
  wisp_generate_options go = {.temperature = 0, .batch = 16, .sequential = 1};
  int n = 0;
  wisp_wgpu_backend_stats s0 = {0}, s1 = {0};
  if (!st) st = wisp_session_eval(s, prompt, GROW_PROMPT, NULL);
  if (!st) st = wisp_session_generate(s, 7, 20, &go, out, &n); /* caches and arena: 512 positions */
  if (!st) wisp_wgpu_backend_stats_get(s->backend, &s0);
  wisp_generate_options one = go;
  one.on_tokens = stop_after_first_batch;
  if (!st) st = wisp_session_generate(s, out[19], 400, &one, out, &n);
  if (!st) wisp_wgpu_backend_stats_get(s->backend, &s1);
  const char *why = st ? wisp_last_error() : "";
  wisp_session_free(s);
  wisp_model_close(m);
  CHECKF(!st, "%s", why);
  CHECKF(n == 16 && s1.persistent_steps - s0.persistent_steps == 16, "%d tokens, %llu persistent steps", n,
         (unsigned long long)(s1.persistent_steps - s0.persistent_steps));
  CHECKF(s0.persist_arena_grows == 0 && s1.kv_grows > s0.kv_grows && s1.persist_arena_grows == 1,
         "arena grows %llu then %llu, KV grows %llu then %llu", (unsigned long long)s0.persist_arena_grows,
         (unsigned long long)s1.persist_arena_grows, (unsigned long long)s0.kv_grows, (unsigned long long)s1.kv_grows);
}
