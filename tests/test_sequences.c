/* Several sequences in one session (wisp.h slots, docs/sequences.md): S
 * sequences of different prompt lengths decoded together by
 * wisp_session_step get exactly the greedy tokens each gets alone, on both
 * backends, for LFM2 and Qwen 3.5. */
#include <math.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "engine/engine.h"
#include "engine/sampler.h"
#include "fixtures.h"
#include "st_fixture.h"
#include "test.h"
#include "backend/webgpu/wgpu_backend.h"
#include "backend/webgpu/wgpu_products_i8.h"
#include "webgpu_fixture.h"

enum { MAX_S = 8, GEN = 12 };

/* Prompt of sequence i: 22 + 3 i tokens (different lengths; every
 * sequence's decode passes position 32, where a decode attention starts to
 * split over key tiles), ids below 96 (the tiny Qwen's vocabulary). */
static int prompt_of(int i, int32_t *p) {
  int n = 22 + 3 * i;
  for (int k = 0; k < n; k++) p[k] = (int32_t)((7 + 13 * i + 29 * k) % 96);
  return n;
}

/* The tiny Qwen 3.5 checkpoint (tests/test_qwen3_5.c) converted at `quant`. */
static const char *tiny_qwen(const char *quant) {
  static char art[2][600];
  static int k;
  k ^= 1;
  char hf[512], cmd[2048], log[2048];
  snprintf(hf, sizeof hf, "%s/seq_qwen_hf", test_tmpdir());
  snprintf(art[k], sizeof art[k], "%s/seq_qwen_%s", test_tmpdir(), quant);
  struct stat sb;
  if (stat(art[k], &sb) == 0) return art[k];
  mkdir(hf, 0755);
  if (stat(hf, &sb) != 0 || fx_write_tiny_qwen35(hf)) return NULL;
  snprintf(cmd, sizeof cmd, "%s convert %s -o %s --quant %s --quiet", test_wisp_bin(), hf, art[k], quant);
  if (test_run(cmd, log, sizeof log) != 0) {
    fprintf(stderr, "     %s\n", log);
    return NULL;
  }
  return art[k];
}

/* Greedy tokens of one sequence alone in its own session: the prompt's
 * argmax, then the decode loop (one token a batch). With lg (GEN - 1 rows
 * of vocab floats), also the logits each later token was chosen from, by
 * feeding the same tokens one at a time (wisp_session_eval). */
static int alone(wisp_model *m, const char *backend, const char *tuning, const int32_t *prompt, int np, int32_t *out,
                 float *lg) {
  const size_t vocab = (size_t)wisp_model_vocab(m);
  wisp_session_options so = {.backend = backend, .tuning = tuning};
  wisp_session *s = NULL;
  if (wisp_session_new(m, &so, &s)) return 0;
  float *logits = malloc(sizeof(float) * vocab);
  int made = 0, ok = logits && wisp_session_eval(s, prompt, np, logits) == WISP_OK;
  if (ok) {
    out[0] = (int32_t)wisp_argmax(logits, (int)vocab);
    wisp_generate_options o = {.temperature = 0, .batch = 1};
    ok = wisp_session_generate(s, out[0], GEN - 1, &o, out + 1, &made) == WISP_OK && made == GEN - 1;
  }
  if (ok && lg) {
    wisp_session_reset(s);
    ok = wisp_session_eval(s, prompt, np, logits) == WISP_OK;
    for (int t = 1; ok && t < GEN; t++) ok = wisp_session_eval(s, &out[t - 1], 1, lg + (size_t)(t - 1) * vocab) == WISP_OK;
  }
  free(logits);
  wisp_session_free(s);
  return ok;
}

/* S sequences in one session of S slots: each prompt into its slot, then
 * GEN - 1 steps of all S together. */
static int together(wisp_model *m, const char *backend, const char *tuning, int S, int32_t out[][GEN], float *lg,
                    char *err, size_t cap) {
  const size_t vocab = (size_t)wisp_model_vocab(m);
  wisp_session_options so = {.backend = backend, .slots = S, .tuning = tuning};
  wisp_session *s = NULL;
  if (wisp_session_new(m, &so, &s)) {
    snprintf(err, cap, "session: %s", wisp_last_error());
    return 0;
  }
  int ok = wisp_session_slots(s) == S;
  float *logits = malloc(sizeof(float) * vocab * S);
  int slots[MAX_S];
  int32_t cur[MAX_S], next[MAX_S], prompt[64];
  for (int i = 0; ok && i < S; i++) {
    int np = prompt_of(i, prompt);
    slots[i] = S - 1 - i; /* rows in another order than slots */
    ok = wisp_slot_eval(s, slots[i], prompt, np, logits) == WISP_OK;
    cur[i] = out[i][0] = (int32_t)wisp_argmax(logits, wisp_model_vocab(m));
    ok = ok && wisp_slot_position(s, slots[i]) == np;
  }
  for (int t = 1; ok && t < GEN; t++) {
    ok = wisp_session_step(s, slots, cur, S, NULL, next, logits) == WISP_OK;
    for (int i = 0; ok && i < S; i++) {
      out[i][t] = cur[i] = next[i];
      memcpy(lg + ((size_t)i * (GEN - 1) + (size_t)(t - 1)) * vocab, logits + (size_t)i * vocab, sizeof(float) * vocab);
    }
  }
  for (int i = 0; ok && i < S; i++) ok = wisp_slot_position(s, slots[i]) == prompt_of(i, prompt) + GEN - 1;
  if (!ok) snprintf(err, cap, "%s", wisp_last_error());
  free(logits);
  wisp_session_free(s);
  return ok;
}

/* exact: also the logits, bit for bit (the CPU backend: its one-token
 * forward and a batched step's rows run the same sums). On every backend a
 * sequence's logits in a step of S rows are bit for bit its logits in a
 * step of another S: a row's arithmetic (products and mixers) does not
 * depend on the rows beside it. */
static void sequences_match_alone_tuned(const char *dir, const char *backend, int exact, const char *tuning, int max_s) {
  CHECKF(dir, "no model");
  wisp_model *m = NULL;
  CHECKF(wisp_model_open(dir, &m) == WISP_OK, "%s", wisp_last_error());
  const size_t vocab = (size_t)wisp_model_vocab(m), rows = (size_t)MAX_S * (GEN - 1) * vocab;
  float *ref_lg = malloc(sizeof(float) * rows), *got_lg = malloc(sizeof(float) * rows);
  float *prev_lg = malloc(sizeof(float) * rows);
  int prev_s = 0;
  CHECK(ref_lg && got_lg && prev_lg);
  int32_t ref[MAX_S][GEN], got[MAX_S][GEN], prompt[64];
  for (int i = 0; i < max_s; i++) {
    int np = prompt_of(i, prompt);
    CHECKF(alone(m, backend, tuning, prompt, np, ref[i], exact ? ref_lg + (size_t)i * (GEN - 1) * vocab : NULL),
           "alone %d: %s", i, wisp_last_error());
  }
  const int sizes[] = {1, 3, 8};
  for (int k = 0; k < 3 && sizes[k] <= max_s && !test_failed_now(); k++) {
    char err[512] = "";
    CHECKF(together(m, backend, tuning, sizes[k], got, got_lg, err, sizeof err), "%s S=%d: %s", backend, sizes[k],
           err);
    for (int i = 0; i < sizes[k]; i++) {
      int at = 0;
      while (at < GEN && got[i][at] == ref[i][at]) at++;
      CHECKF(at == GEN, "%s S=%d: sequence %d differs from alone at token %d (%d vs %d)", backend, sizes[k], i, at,
             at < GEN ? got[i][at] : 0, at < GEN ? ref[i][at] : 0);
      const size_t n = (size_t)(GEN - 1) * vocab, o = (size_t)i * n;
      size_t j = 0;
      while (exact && j < n && memcmp(&got_lg[o + j], &ref_lg[o + j], sizeof(float)) == 0) j++;
      CHECKF(!exact || j == n, "%s S=%d: sequence %d: logit %zu of token %zu is %.9g, alone %.9g", backend, sizes[k], i,
             j % vocab, j / vocab + 1, j < n ? got_lg[o + j] : 0, j < n ? ref_lg[o + j] : 0);
      j = 0;
      while (i < prev_s && j < n && memcmp(&got_lg[o + j], &prev_lg[o + j], sizeof(float)) == 0) j++;
      CHECKF(i >= prev_s || j == n, "%s: sequence %d: logit %zu of token %zu is %.9g at S=%d, %.9g at S=%d", backend, i,
             j % vocab, j / vocab + 1, j < n ? got_lg[o + j] : 0, sizes[k], j < n ? prev_lg[o + j] : 0, prev_s);
    }
    memcpy(prev_lg, got_lg, sizeof(float) * (size_t)sizes[k] * (GEN - 1) * vocab);
    prev_s = sizes[k];
  }
  free(ref_lg);
  free(got_lg);
  free(prev_lg);
  /* the sequences are not all the same (else a mix-up of rows could pass) */
  int distinct = 0;
  for (int i = 1; i < max_s; i++) distinct += memcmp(ref[i], ref[0], sizeof ref[0]) != 0;
  CHECK(distinct > 0);
  wisp_model_close(m);
}

static void sequences_match_alone(const char *dir, const char *backend, int exact) {
  sequences_match_alone_tuned(dir, backend, exact, NULL, MAX_S);
}

TEST(sequences_lfm2_cpu_match_alone) { sequences_match_alone(fixture_small_model(), "cpu", 1); }
TEST(sequences_qwen3_5_cpu_match_alone) { sequences_match_alone(tiny_qwen("f32"), "cpu", 1); }
TEST(sequences_qwen3_5_q4k_cpu_match_alone) { sequences_match_alone(tiny_qwen("q4k"), "cpu", 1); }

/* The same with f16 KV caches (kv=f16): a batched step's attention rows
 * read their f16 caches with the one-token op's arithmetic, bit for bit. */
TEST(sequences_lfm2_cpu_kv16_match_alone) {
  sequences_match_alone_tuned(fixture_small_model(), "cpu", 1, "kv=f16", MAX_S);
}
TEST(sequences_qwen3_5_cpu_kv16_match_alone) {
  sequences_match_alone_tuned(tiny_qwen("f32"), "cpu", 1, "kv=f16", MAX_S);
}

TEST(sequences_lfm2_webgpu_match_alone) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  sequences_match_alone(fixture_small_model(), "webgpu", 0);
}

TEST(sequences_qwen3_5_webgpu_match_alone) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  sequences_match_alone(tiny_qwen("f32"), "webgpu", 0);
}

/* Gated DeltaNet heads split over workgroups (dnSlice=4: 4 value columns
 * a workgroup, the gated norm a dispatch of its own) and KV caches of
 * packed f16 (kv=f16), S = 1 and 3. */
TEST(sequences_qwen3_5_webgpu_split_heads_match_alone) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  sequences_match_alone_tuned(tiny_qwen("f32"), "webgpu", 0, "dnSlice=4,kv=f16", 3);
}

TEST(sequences_qwen3_5_q4k_webgpu_match_alone) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  sequences_match_alone(tiny_qwen("q4k"), "webgpu", 0);
}

/* The dispatches one batched step records (the backend's counter). */
static uint64_t step_dispatches(wisp_session *s, const int *slots, int32_t *cur, int n) {
  wisp_wgpu_backend_stats a, b;
  int32_t next[MAX_S];
  if (!wisp_wgpu_backend_stats_get(s->backend, &a) || wisp_session_step(s, slots, cur, n, NULL, next, NULL) ||
      !wisp_wgpu_backend_stats_get(s->backend, &b))
    return 0;
  memcpy(cur, next, sizeof(int32_t) * (size_t)n);
  return b.dispatches - a.dispatches;
}

/* A batched step's mixers run over all its rows at once (backend.h
 * shortconv_rows, attention_rows, attention_gated_rows,
 * gated_deltanet_rows), and so do its products (matmul_rows) and the head's
 * draws (sample_rows): one more sequence in a step adds no dispatch at all.
 * Run row by row, each mixer layer would add three or more a row (the row
 * copied in, the op, copied out). */
static void step_dispatches_flat(const char *dir, int mixers_min) {
  CHECKF(dir, "no model");
  wisp_model *m = NULL;
  CHECKF(wisp_model_open(dir, &m) == WISP_OK, "%s", wisp_last_error());
  wisp_session_options so = {.backend = "webgpu", .slots = MAX_S};
  wisp_session *s = NULL;
  CHECKF(wisp_session_new(m, &so, &s) == WISP_OK, "%s", wisp_last_error());
  int mixers = 0;
  for (int i = 0; i < m->graph.n_nodes; i++) {
    const wisp_gop op = m->graph.nodes[i].op;
    mixers += op != WISP_GOP_RMSNORM && op != WISP_GOP_MATMUL && op != WISP_GOP_SWIGLU;
  }
  CHECKF(mixers >= mixers_min, "%d mixer layers", mixers); /* else three a row would not show */
  int slots[MAX_S];
  int32_t cur[MAX_S], prompt[64];
  for (int i = 0; i < MAX_S; i++) { /* short prompts: no attention row is split over key tiles in either step */
    slots[i] = i;
    int np = 1 + i;
    for (int k = 0; k < np; k++) prompt[k] = (int32_t)((3 + 7 * i + 11 * k) % 96);
    CHECKF(wisp_slot_eval(s, i, prompt, np, NULL) == WISP_OK, "%s", wisp_last_error());
    cur[i] = prompt[np - 1];
  }
  const uint64_t d2 = step_dispatches(s, slots, cur, 2), d8 = step_dispatches(s, slots, cur, 8);
  CHECKF(d2 > 0 && d8 > 0, "%s", wisp_last_error());
  CHECKF(d8 <= d2, "a step of 8 rows recorded %llu dispatches, of 2 rows %llu: %.1f more a row (%d mixer layers)",
         (unsigned long long)d8, (unsigned long long)d2, (double)(d8 - d2) / 6, mixers);
  wisp_session_free(s);
  wisp_model_close(m);
}

TEST(sequences_webgpu_step_dispatches_flat_lfm2) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  step_dispatches_flat(fixture_small_model(), 2);
}

/* Gated DeltaNet and gated attention (f32; Q4_K products read each weight
 * once for all rows as well, q4k_matvec_rows). */
TEST(sequences_webgpu_step_dispatches_flat_qwen3_5) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  step_dispatches_flat(tiny_qwen("f32"), 2);
}

/* 64 rows in one step (the most one workgroup column of the multi-row
 * products takes; the head's draws in one dispatch) against the same 64
 * sequences stepped a row a call in a session of their own: the same
 * tokens and the logits bit for bit, greedy and sampled (temperature 30,
 * top-k 10: the tiny Qwen's top logits lie some 30 apart). */
static void rows64_match_single_steps(const char *dir) {
  enum { S = 64, STEPS = 2 };
  CHECKF(dir, "no model");
  wisp_model *m = NULL;
  CHECKF(wisp_model_open(dir, &m) == WISP_OK, "%s", wisp_last_error());
  const size_t vocab = (size_t)wisp_model_vocab(m);
  wisp_session_options so = {.backend = "webgpu", .slots = S};
  wisp_session *a = NULL, *b = NULL;
  CHECKF(wisp_session_new(m, &so, &a) == WISP_OK && wisp_session_new(m, &so, &b) == WISP_OK, "%s", wisp_last_error());
  float *la = malloc(sizeof(float) * vocab * S), *lb = malloc(sizeof(float) * vocab * S);
  CHECK(la && lb);
  int slots[S];
  int32_t ca[S], cb[S], na[S], nb[S], prompt[8];
  int ok = 1;
  for (int i = 0; ok && i < S; i++) {
    slots[i] = (i * 37) % S; /* rows in another order than slots */
    const int np = 1 + i % 5;
    for (int k = 0; k < np; k++) prompt[k] = (int32_t)((3 + 7 * i + 11 * k) % 96);
    ok = wisp_slot_eval(a, slots[i], prompt, np, la) == WISP_OK && wisp_slot_eval(b, slots[i], prompt, np, lb) == WISP_OK;
    ca[i] = cb[i] = (int32_t)wisp_argmax(la, (int)vocab);
  }
  CHECKF(ok, "prompts: %s", wisp_last_error());
  int sampled_differs = 0;
  for (int t = 0; t < STEPS && !test_failed_now(); t++) {
    wisp_step_options o;
    wisp_step_options_init(&o);
    if (t == STEPS - 1) o.temperature = 30.0f, o.top_k = 10, o.seed = 99;
    ok = wisp_session_step(a, slots, ca, S, &o, na, la) == WISP_OK;
    for (int i = 0; ok && i < S; i++) ok = wisp_session_step(b, &slots[i], &cb[i], 1, &o, &nb[i], lb + (size_t)i * vocab) == WISP_OK;
    CHECKF(ok, "step %d: %s", t, wisp_last_error());
    for (int i = 0; i < S; i++) {
      CHECKF(na[i] == nb[i], "step %d row %d: token %d in a step of 64, %d alone", t, i, na[i], nb[i]);
      const float *x = la + (size_t)i * vocab, *y = lb + (size_t)i * vocab;
      size_t j = 0;
      while (j < vocab && memcmp(&x[j], &y[j], sizeof(float)) == 0) j++;
      CHECKF(j == vocab, "step %d row %d: logit %zu is %.9g in a step of 64, %.9g alone", t, i, j, j < vocab ? x[j] : 0,
             j < vocab ? y[j] : 0);
      if (t == STEPS - 1) sampled_differs += na[i] != (int32_t)wisp_argmax(x, (int)vocab);
      ca[i] = na[i];
      cb[i] = nb[i];
    }
  }
  CHECKF(sampled_differs > 0, "no sampled row drew other than its argmax");
  free(la);
  free(lb);
  wisp_session_free(a);
  wisp_session_free(b);
  wisp_model_close(m);
}

TEST(sequences_webgpu_64_rows_match_single_steps_lfm2) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  rows64_match_single_steps(fixture_small_model());
}

TEST(sequences_webgpu_64_rows_match_single_steps_qwen3_5_q4k) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  rows64_match_single_steps(tiny_qwen("q4k"));
}

/* tuning rowsPrefill=N: a step of at least N rows runs its products as a
 * prefill of that many tokens does (the plan's prefill kernel: matmul_i8
 * under the throughput profile where the weights are Q4 / Q4_K / Q8_0, the
 * tiled matmul.wgsl otherwise and under exact), where a step of fewer rows
 * (and rowsPrefill=0) keeps the multi-row kernels and records neither;
 * without the key every product does so from 8 rows where the plan gives
 * the int8 prefill kernel (throughput), none under exact. Its rows' logits are no longer the one-row product's bits; they
 * must stay within tol of max|logit| of the same sequences stepped alone.
 * *worst_out: the largest difference seen. */
static void rows_prefill_check(const char *model, int small, const char *profile, const char *tuning, double tol,
                               int want_int8, int want_prefill, double *worst_out) {
  enum { S = 16 };
  wisp_model *m = NULL;
  CHECKF(model && wisp_model_open(model, &m) == WISP_OK, "%s", wisp_last_error());
  const size_t vocab = (size_t)wisp_model_vocab(m);
  wisp_session_options so = {.backend = "webgpu", .slots = S, .profile = profile, .tuning = tuning};
  const char *how = tuning ? tuning : "no rowsPrefill";
  wisp_session *a = NULL, *b = NULL;
  CHECKF(wisp_session_new(m, &so, &a) == WISP_OK && wisp_session_new(m, &so, &b) == WISP_OK, "%s", wisp_last_error());
  float *la = malloc(sizeof(float) * vocab * S), *lb = malloc(sizeof(float) * vocab * S);
  CHECK(la && lb);
  int slots[S];
  int32_t cur[S], na[S], nb[S], prompt[8];
  int ok = 1;
  for (int i = 0; ok && i < S; i++) {
    slots[i] = i;
    const int np = 1 + i % 5;
    for (int k = 0; k < np; k++) prompt[k] = (int32_t)((5 + 13 * i + 7 * k) % 96);
    ok = wisp_slot_eval(a, i, prompt, np, la) == WISP_OK && wisp_slot_eval(b, i, prompt, np, lb) == WISP_OK;
    cur[i] = (int32_t)wisp_argmax(la, (int)vocab);
  }
  CHECKF(ok, "prompts: %s", wisp_last_error());
  uint64_t i0 = 0, i1 = 0, i2 = 0, q = 0;
  wisp_wgpu_backend_stats s0, s1, s2;
  wisp_wgpu_mm8_counts(a->backend, &i0, &q);
  wisp_wgpu_backend_stats_get(a->backend, &s0);
  /* both sessions step the first `small` rows once: their states stay the same */
  CHECKF(wisp_session_step(a, slots, cur, small, NULL, na, la) == WISP_OK &&
             wisp_session_step(b, slots, cur, small, NULL, nb, lb) == WISP_OK,
         "%s", wisp_last_error());
  wisp_wgpu_mm8_counts(a->backend, &i1, &q);
  wisp_wgpu_backend_stats_get(a->backend, &s1);
  CHECKF(i1 == i0 && s1.tiled_products == s0.tiled_products,
         "%s: a step of %d rows (%s) recorded %llu int8 and %llu tiled products", profile, small, how,
         (unsigned long long)(i1 - i0), (unsigned long long)(s1.tiled_products - s0.tiled_products));
  /* the same step in both sessions chose the same tokens (their states stay alike) */
  for (int i = 0; i < small; i++)
    CHECKF(na[i] == nb[i], "%s (%s): row %d of a step of %d rows chose %d, the same step in b %d", profile, how, i, small,
           na[i], nb[i]);
  CHECKF(wisp_session_step(a, slots, cur, S, NULL, na, la) == WISP_OK, "%s", wisp_last_error());
  wisp_wgpu_mm8_counts(a->backend, &i2, &q);
  wisp_wgpu_backend_stats_get(a->backend, &s2);
  CHECKF(want_int8 ? i2 > i1 : i2 == i1, "%s (%s): a step of %d rows recorded %llu int8 products", profile, how, S,
         (unsigned long long)(i2 - i1));
  if (want_prefill)
    CHECKF(s2.tiled_products > s1.tiled_products || i2 > i1, "%s (%s): a step of %d rows recorded no prefill product",
           profile, how, S);
  else
    CHECKF(s2.tiled_products == s1.tiled_products && i2 == i1, "%s (%s): a step of %d rows recorded a prefill product",
           profile, how, S);
  /* where the step's products are int8 the head's is too (the registry's
   * head rule for several tokens under throughput): no f32 tile product */
  if (want_int8)
    CHECKF(s2.tiled_products == s1.tiled_products, "%s (%s): a step of %d rows recorded %llu f32 tiled products", profile,
           how, S, (unsigned long long)(s2.tiled_products - s1.tiled_products));
  double worst = 0;
  for (int i = 0; ok && i < S; i++) {
    int32_t c = cur[i];
    ok = wisp_session_step(b, &slots[i], &c, 1, NULL, &nb[i], lb + (size_t)i * vocab) == WISP_OK;
    const float *x = la + (size_t)i * vocab, *y = lb + (size_t)i * vocab;
    double mx = 0, e = 0;
    for (size_t j = 0; j < vocab; j++) {
      if (fabs(y[j]) > mx) mx = fabs(y[j]);
      if (fabs(x[j] - y[j]) > e) e = fabs(x[j] - y[j]);
    }
    if (mx > 0 && e / mx > worst) worst = e / mx;
  }
  CHECKF(ok, "single steps: %s", wisp_last_error());
  if (want_prefill)
    CHECKF(worst > 0, "%s (%s): a step of %d rows gave every row the one-row bits: the prefill product did not run",
           profile, how, S);
  else
    CHECKF(worst == 0, "%s (%s): a step of %d rows is %.3g of max|logit| from its rows alone, not their bits", profile,
           how, S, worst);
  CHECKF(!want_prefill || worst < tol, "%s: a row of the step of %d is %.3g of max|logit| from the same sequence stepped alone", profile,
         S, worst);
  printf("     %s (%s): %d rows, %llu int8, %llu tiled products; logits within %.3g of max|logit| of each "
         "sequence alone\n",
         profile, how, S, (unsigned long long)(i2 - i1), (unsigned long long)(s2.tiled_products - s1.tiled_products), worst);
  *worst_out = worst;
  free(la);
  free(lb);
  wisp_session_free(a);
  wisp_session_free(b);
  wisp_model_close(m);
}

/* Throughput: the Q4 products through matmul_i8, within the int8 prefill's
 * bound (0.1 of max|logit|, test_webgpu_matmul_i8.c TOL_I8_LOGITS). Exact:
 * the tiled f32 product, another summation order only (within 1e-4). */
TEST(sequences_webgpu_rows_prefill_from_n_rows) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  double w_int8 = 0, w_f32 = 0, w_def = 0, w_exact = 1;
  const char *q4 = fixture_small_model();
  /* (rowsI8=0: the int8 multi-row product, which takes steps of 1..16 rows
   * first under throughput, off; test_webgpu_rows_i8.c covers it) */
  rows_prefill_check(q4, 4, "throughput", "rowsPrefill=8,rowsI8=0", 0.1, 1, 1, &w_int8);
  rows_prefill_check(q4, 4, "exact", "rowsPrefill=8", 1e-4, 0, 1, &w_f32);
  CHECKF(w_f32 < w_int8, "the f32 products' rows (%.3g) are no closer than the int8 ones' (%.3g)", w_f32, w_int8);
  /* without rowsPrefill: the throughput profile's int8 products from 8 rows,
   * the exact profile's rows keep their one-row bits */
  rows_prefill_check(q4, 4, "throughput", "rowsI8=0", 0.1, 1, 1, &w_def);
  rows_prefill_check(q4, 4, "exact", NULL, 0, 0, 0, &w_exact);
  /* rowsPrefill=0 turns the default off: the one-row bits under throughput too */
  rows_prefill_check(q4, 4, "throughput", "rowsPrefill=0,rowsI8=0", 0, 0, 0, &w_exact);
}

/* Where the int8 products include Q4_K ones the default starts at 16 rows:
 * a step of 8 records no int8 or tiled product (the multi-row kernels), a
 * step of 16 runs its products as an int8 prefill; rowsPrefill=8 still
 * takes 8. */
TEST(sequences_webgpu_rows_prefill_q4k_from_16_rows) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  double w = 0;
  const char *q4k = tiny_qwen("q4k");
  rows_prefill_check(q4k, 8, "throughput", "rowsI8=0", 0.1, 1, 1, &w);
  rows_prefill_check(q4k, 4, "throughput", "rowsPrefill=8,rowsI8=0", 0.1, 1, 1, &w);
  /* and `wisp plan` says so, by the same rule, after the int8 multi-row
   * product's 1..16 rows */
  static char cmd[1024], out[1 << 16];
  snprintf(cmd, sizeof cmd, "%s plan -m %s --backend webgpu", test_wisp_bin(), q4k);
  CHECKF(test_run(cmd, out, sizeof out) == 0, "%s:\n%s", cmd, out);
  /* (without subgroups the int8 multi-row product does not run: the prefill rule alone) */
  if (!d->has_subgroups)
    CHECKF(strstr(out, "batched steps: from 16 rows the products run as a prefill of that many tokens (the "
                       "default where some int8 products are Q4_K;"),
           "%s", out);
  else
    CHECKF(strstr(out, "batched steps: 1..16 rows: matvec_i8_rows.wgsl, every "
                       "Q4/Q4Z/Q4_K/Q8_0 product with int8 rows, a row's sums independent of the others (tuning "
                       "rowsI8); from 17 rows: the products run as a prefill of that many tokens (the default where "
                       "some int8 products are Q4_K;"),
           "%s", out);
}

/* Bad calls get an error and change nothing. */
TEST(sequences_step_rejects_bad_slots) {
  wisp_model *m = NULL;
  CHECK(wisp_model_open(fixture_small_model(), &m) == WISP_OK);
  wisp_session_options so = {.slots = 2};
  wisp_session *s = NULL;
  CHECK(wisp_session_new(m, &so, &s) == WISP_OK);
  int32_t tok[2] = {5, 6}, next[2];
  int twice[2] = {1, 1}, outside[1] = {2};
  CHECK(wisp_session_step(s, twice, tok, 2, NULL, next, NULL) == WISP_EINVAL);
  CHECK(strstr(wisp_last_error(), "given twice"));
  CHECK(wisp_session_step(s, outside, tok, 1, NULL, next, NULL) == WISP_EINVAL);
  CHECK(wisp_slot_eval(s, 2, tok, 1, NULL) == WISP_EINVAL);
  int32_t bad[1] = {-1};
  int one[1] = {1};
  CHECK(wisp_session_step(s, one, bad, 1, NULL, next, NULL) == WISP_EINVAL);
  CHECK(wisp_slot_position(s, 1) == 0 && wisp_slot_position(s, 2) == -1);
  CHECK(wisp_session_step(s, one, tok, 1, NULL, next, NULL) == WISP_OK && wisp_slot_position(s, 1) == 1);
  wisp_slot_reset(s, 1);
  CHECK(wisp_slot_position(s, 1) == 0 && wisp_session_position(s) == 0);
  wisp_session_options bad_opt = {.slots = 100000};
  wisp_session *s2 = NULL;
  CHECK(wisp_session_new(m, &bad_opt, &s2) == WISP_EINVAL && !s2);
  wisp_session_free(s);
  wisp_model_close(m);
}
