/* The WebGPU backend's chunked Gated DeltaNet (wgpu_deltanet_chunked.c,
 * dn_chunk_*.wgsl) against the CPU backend and against its own token-by-
 * token kernel (dn_recur.wgsl): prefills of 1, 63, 64, 65 and 200 tokens
 * (chunks of 64), a second prefill carrying the state on, several waves of
 * chunks, and decode steps after each prefill; the outputs, the recurrent
 * state and the conv ring compared after every call. Then the small Qwen
 * 3.5 model (tests/parity/qwen35-small) end to end.
 *
 * Tolerance, relative to max|reference| of the buffer (as
 * test_webgpu_qwen.c's TOL_DELTANET): f32 sums in another order over many
 * tokens. A decay off by 1 % moves the outputs by about 1e-2 of
 * max|ref|. */
#define TOL_CHUNK 2e-4

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/webgpu/wgpu_backend.h"
#include "engine/engine.h"
#include "test.h"
#include "util/err.h"
#include "wisp.h"
#include "webgpu_fixture.h"

/* The three backends of a case: the reference, the GPU's chunked form
 * (dnChunkMin=1) and its token-by-token kernel (the chunked form never). */
enum { REF, CHUNKED, BY_TOKEN, NBE };

typedef struct {
  wisp_backend *be[NBE];
  void *keep[64];
  int nkeep;
} trio;

static int trio_open(trio *t, wisp_wgpu_device *d, uint64_t max_binding, uint32_t chunk_cols) {
  memset(t, 0, sizeof *t);
  if (wisp_cpu_backend_new(1, &t->be[REF])) return 0;
  for (int i = CHUNKED; i <= BY_TOKEN; i++) {
    wisp_wgpu_backend_opts o = {.device = d, .subgroups = -1, .max_binding = max_binding};
    o.dn_chunk_min = i == CHUNKED ? 1 : 1u << 30;
    o.dn_chunk_cols = chunk_cols;
    if (wisp_wgpu_backend_new(&o, &t->be[i])) return 0;
  }
  return 1;
}

static void trio_close(trio *t) {
  for (int i = 0; i < NBE; i++)
    if (t->be[i]) t->be[i]->destroy(t->be[i]);
  for (int i = 0; i < t->nkeep; i++) free(t->keep[i]);
}

/* The same n floats on every backend: random in [-scale, scale) (0: zeros). */
static void tfill(trio *t, wisp_buf **b, size_t n, uint64_t *seed, float scale) {
  float *v = calloc(n ? n : 1, sizeof(float));
  for (size_t i = 0; v && i < n; i++) v[i] = scale * test_rand_float(seed);
  for (int i = 0; i < NBE; i++) {
    b[i] = t->be[i]->buf_new(t->be[i], n);
    if (b[i] && v) t->be[i]->buf_write(t->be[i], b[i], 0, n, v);
  }
  free(v);
}

static void tfree(trio *t, wisp_buf **b) {
  for (int i = 0; i < NBE; i++)
    if (b[i]) t->be[i]->buf_free(t->be[i], b[i]);
}

static wisp_vector tvec(trio *t, int n, uint64_t *seed, float base, float spread) {
  float *v = malloc(sizeof(float) * (size_t)n);
  for (int i = 0; v && i < n; i++) v[i] = base + spread * test_rand_float(seed);
  wisp_vector w = {n, v, NULL};
  if (v && t->nkeep < 64) t->keep[t->nkeep++] = v;
  for (int i = 0; v && i < NBE; i++) t->be[i]->prepare_vector(t->be[i], &w);
  return w;
}

/* Reads n floats of b on backend i into out (malloc'd), NULL on failure. */
static float *tread(trio *t, int i, const wisp_buf *b, size_t n, char *err, size_t cap) {
  float *x = malloc(sizeof(float) * (n ? n : 1));
  if (!x) return NULL;
  t->be[i]->buf_read(t->be[i], b, 0, n, x);
  if (t->be[i]->sync && t->be[i]->sync(t->be[i])) {
    snprintf(err, cap, "sync: %s", wisp_last_error());
    free(x);
    return NULL;
  }
  return x;
}

static double g_worst[NBE]; /* worst relative error seen against the reference, per backend */

/* Error of y against x relative to max|x| (inf for a NaN); *at the worst index. */
static double rel_error(const float *x, const float *y, size_t n, size_t *at) {
  double mx = 0, worst = 0;
  for (size_t i = 0; i < n; i++) mx = fmax(mx, fabs(x[i]));
  *at = 0;
  for (size_t i = 0; i < n; i++) {
    double e = fabs((double)y[i] - x[i]);
    if (isnan(e)) e = INFINITY;
    if (e > worst) worst = e, *at = i;
  }
  return mx > 0 ? worst / mx : worst;
}

/* Buffer b of the GPU backends against the reference (conv rings: the
 * CPU's [cdim][L-1] against the ring [cdim][L] with position q in slot
 * q % L, the next position pos), and the chunked form against the
 * token-by-token one directly. */
static int tcompare(trio *t, wisp_buf **b, size_t n, int ring_L, int ring_cdim, int pos, const char *what, char *err,
                    size_t cap) {
  float *v[NBE] = {0};
  int ok = 1;
  for (int i = 0; i < NBE && ok; i++) ok = (v[i] = tread(t, i, b[i], n, err, cap)) != NULL;
  if (ok && ring_L) { /* the rings as [cdim][L-1], oldest first */
    const int S = ring_L - 1;
    for (int i = CHUNKED; i <= BY_TOKEN; i++) {
      float *r = malloc(sizeof(float) * ((size_t)ring_cdim * S + 1));
      for (int ch = 0; r && ch < ring_cdim; ch++)
        for (int k = 0; k < S; k++) r[(size_t)ch * S + k] = v[i][(size_t)ch * ring_L + (size_t)(pos + 1 + k) % ring_L];
      free(v[i]);
      v[i] = r;
      ok = ok && r;
    }
    n = (size_t)ring_cdim * S;
  }
  for (int i = CHUNKED; ok && i <= BY_TOKEN + 1; i++) {
    /* the last round: chunked against token by token */
    const float *x = i <= BY_TOKEN ? v[REF] : v[BY_TOKEN], *y = i <= BY_TOKEN ? v[i] : v[CHUNKED];
    size_t at;
    double rel = rel_error(x, y, n, &at);
    if (i <= BY_TOKEN && rel > g_worst[i]) g_worst[i] = rel;
    if (!(rel <= TOL_CHUNK)) {
      static const char *names[] = {"", "chunked vs cpu", "by token vs cpu", "chunked vs by token"};
      snprintf(err, cap, "%s, %s: [%zu] %.9g against %.9g, error %.3g of max|ref| (tol %g)", what, names[i], at, y[at],
               x[at], rel, TOL_CHUNK);
      ok = 0;
    }
  }
  for (int i = 0; i < NBE; i++) free(v[i]);
  return ok;
}

/* Sets the one-token decode core (dn_decode.wgsl) on or off on the GPU
 * backends: off, a one-token call goes through the multi-token path. */
static void decode_core(trio *t, int on) {
  wisp_backend_settings s;
  wisp_backend_settings_default(&s);
  s.deltanet_core = on;
  for (int i = CHUNKED; i <= BY_TOKEN; i++) t->be[i]->configure(t->be[i], &s);
}

/* One head shape through calls of calls[] tokens in order at consecutive
 * positions from a zero state, the same random projections on every
 * backend; a call of one token after a longer one is a decode step (the
 * one-token core), a first call of one token a prefill of one (the core
 * off). Everything compared after every call. *chunked_calls: the calls the
 * chunked backend ran in chunks. */
static int dn_case(trio *t, int KH, int VH, int DK, int DV, int L, const int *calls, int ncalls, uint64_t *seed,
                   uint64_t *chunked_calls, char *err, size_t cap) {
  const int K = KH * DK, V = VH * DV, cdim = 2 * K + V, row = 2 * K + 2 * V + 2 * VH;
  wisp_vector taps = tvec(t, cdim * L, seed, 0.0f, 0.5f), alog = tvec(t, VH, seed, 0.0f, 1.0f);
  wisp_vector dt = tvec(t, VH, seed, 0.0f, 1.0f), nw = tvec(t, DV, seed, 1.0f, 0.3f);
  wisp_buf *cst[NBE], *st[NBE];
  tfill(t, cst, (size_t)cdim * L, seed, 0); /* L floats a channel, as qwen3_5.c allocates it */
  tfill(t, st, (size_t)VH * DK * DV, seed, 0);
  wisp_backend_stats s0, s1;
  wisp_wgpu_backend_stats_get(t->be[CHUNKED], &s0);
  int ok = 1, pos = 0;
  for (int c = 0; ok && c < ncalls; c++) {
    const int n = calls[c];
    wisp_buf *pr[NBE], *o[NBE];
    tfill(t, pr, (size_t)n * row, seed, 1.5f);
    tfill(t, o, (size_t)n * V, seed, 0);
    decode_core(t, !(n == 1 && c == 0));
    for (int i = 0; i < NBE; i++) {
      wisp_deltanet_args a = {.n = n, .pos0 = pos, .k_heads = KH, .v_heads = VH, .k_dim = DK, .v_dim = DV,
                              .conv_len = L, .conv_taps = &taps, .a_log = &alog, .dt_bias = &dt, .norm = &nw,
                              .eps = 1e-6f, .proj = pr[i], .conv_state = cst[i], .state = st[i], .out = o[i]};
      t->be[i]->gated_deltanet(t->be[i], &a);
    }
    pos += n;
    char what[160];
    snprintf(what, sizeof what, "KH %d VH %d DK %d DV %d L %d, call %d (%d tokens)", KH, VH, DK, DV, L, c, n);
    char e2[400] = "";
    ok = tcompare(t, o, (size_t)n * V, 0, 0, 0, "output", e2, sizeof e2) &&
         tcompare(t, st, (size_t)VH * DK * DV, 0, 0, 0, "recurrent state", e2, sizeof e2) &&
         tcompare(t, cst, (size_t)cdim * L, L, cdim, pos, "conv state", e2, sizeof e2);
    if (!ok) snprintf(err, cap, "%s: %s", what, e2);
    tfree(t, pr);
    tfree(t, o);
  }
  decode_core(t, 1);
  wisp_wgpu_backend_stats_get(t->be[CHUNKED], &s1);
  *chunked_calls += s1.deltanet_chunked - s0.deltanet_chunked;
  tfree(t, cst);
  tfree(t, st);
  return ok;
}

/* Prefills around the chunk size, then decode steps; a second prefill
 * carrying the state on; one v-head a k-head and several; k_dim and v_dim
 * of Qwen 3.5 (128) and odd ones (17 x 33: partial column blocks, gram
 * tiles past the key's end). */
TEST(webgpu_dn_chunked_matches_cpu_and_recurrence) {
  WEBGPU_OR_SKIP(d);
  memset(g_worst, 0, sizeof g_worst);
  trio t;
  int opened = trio_open(&t, d, 0, 0);
  CHECKF(opened, "%s", wisp_last_error());
  if (!opened) {
    trio_close(&t);
    return;
  }
  uint64_t seed = 4242, chunked = 0, by_token = 0;
  char err[600] = "";
  static const int one[] = {1, 1, 1}, c63[] = {63, 1, 1}, c64[] = {64, 1}, c65[] = {65, 1, 1};
  static const int several[] = {200, 1, 130, 1}; /* 4 chunks (8 tokens in the last), then 3 from position 201 */
  wisp_backend_stats b0, b1;
  wisp_wgpu_backend_stats_get(t.be[BY_TOKEN], &b0);
  int ok = dn_case(&t, 2, 4, 32, 24, 4, one, 3, &seed, &chunked, err, sizeof err) &&
           dn_case(&t, 2, 4, 32, 24, 4, c63, 3, &seed, &chunked, err, sizeof err) &&
           dn_case(&t, 2, 4, 32, 24, 4, c64, 2, &seed, &chunked, err, sizeof err) &&
           dn_case(&t, 2, 4, 32, 24, 4, c65, 3, &seed, &chunked, err, sizeof err) &&
           dn_case(&t, 1, 3, 17, 33, 3, several, 4, &seed, &chunked, err, sizeof err) &&
           dn_case(&t, 1, 2, 128, 128, 4, c65, 3, &seed, &chunked, err, sizeof err);
  wisp_wgpu_backend_stats_get(t.be[BY_TOKEN], &b1);
  by_token = b1.deltanet_chunked - b0.deltanet_chunked;
  trio_close(&t);
  CHECKF(ok, "%s", err);
  /* the first calls of every case (one of one token, the core off) and the second prefill */
  CHECKF(chunked == 7, "%llu calls ran in chunks (7 expected)", (unsigned long long)chunked);
  CHECKF(by_token == 0, "the token-by-token backend ran %llu calls in chunks", (unsigned long long)by_token);
  printf("     chunked: max error %.3g of max|ref| (token by token %.3g)\n", g_worst[CHUNKED], g_worst[BY_TOKEN]);
}

/* A wave budget of two chunks (a small max_binding): the prep blocks are
 * rewritten wave after wave, the state carried between waves through the
 * state buffer; 300 tokens are 5 chunks, 3 waves. */
TEST(webgpu_dn_chunked_waves) {
  WEBGPU_OR_SKIP(d);
  memset(g_worst, 0, sizeof g_worst);
  /* a prep block of 2 v-heads of 16 x 16: 64 x (48 + 16 + 128) + 4 floats, 49 KB */
  trio t;
  int opened = trio_open(&t, d, 2 * 2 * 49168 + 1024, 0);
  CHECKF(opened, "%s", wisp_last_error());
  if (!opened) {
    trio_close(&t);
    return;
  }
  uint64_t seed = 77, chunked = 0;
  char err[600] = "";
  static const int calls[] = {300, 1, 1};
  int ok = dn_case(&t, 1, 2, 16, 16, 4, calls, 3, &seed, &chunked, err, sizeof err);
  trio_close(&t);
  CHECKF(ok, "%s", err);
  CHECKF(chunked == 1, "%llu calls ran in chunks", (unsigned long long)chunked);
  printf("     chunked in waves: max error %.3g of max|ref|\n", g_worst[CHUNKED]);
}

/* ---- the small Qwen 3.5 model ---- */

#define TOL_LOGITS 1e-3 /* relative to max|logit| (test_webgpu_qwen.c's TOL_QWEN_LOGITS) */

/* The worst error of every row of y against x ([rows][V]) relative to
 * that row's max|x|; 0 rows: 0. */
static double logits_error(const float *x, const float *y, int rows, int V) {
  double worst = 0;
  for (int r = 0; r < rows; r++) {
    size_t at;
    double e = rel_error(x + (size_t)r * V, y + (size_t)r * V, (size_t)V, &at);
    if (e > worst) worst = e;
  }
  return worst;
}

static int argmax_row(const float *v, int n) {
  int b = 0;
  for (int i = 1; i < n; i++)
    if (v[i] > v[b]) b = i;
  return b;
}

/* tests/parity/qwen35-small converted to f32 into the scratch directory
 * (name), opened; NULL with err filled on failure. */
static wisp_model *small_qwen_open(const char *name, char *err, size_t cap) {
  char dir[600], cmd[2048], log[4096] = "";
  snprintf(dir, sizeof dir, "%s/%s", test_tmpdir(), name);
  snprintf(cmd, sizeof cmd, "%s convert tests/parity/qwen35-small -o %s --quant f32 --quiet --force", test_wisp_bin(),
           dir);
  wisp_model *m = NULL;
  if (test_run(cmd, log, sizeof log)) snprintf(err, cap, "convert: %s", log);
  else if (wisp_model_open(dir, &m)) snprintf(err, cap, "open %s: %s", dir, wisp_last_error());
  return m;
}

/* tests/parity/qwen35-small (three Gated DeltaNet layers of 4 heads of 32 x
 * 32, one attention layer) in f32: a prompt of 150 tokens (chunks of 64,
 * 64 and 22) through eval_all on the CPU, on WebGPU in chunks and on WebGPU
 * token by token, the logits of every position compared; then 8 greedy
 * steps on each, the same tokens and logits within the tolerance. */
TEST(webgpu_dn_chunked_small_qwen) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  char err[4200] = "";
  wisp_model *m = small_qwen_open("dn_chunk_qwen35_small", err, sizeof err);
  CHECKF(m, "%s", err);
  const int V = wisp_model_vocab(m), np = 150, steps = 8;
  static const char *tunings[NBE] = {NULL, "dnChunkMin=1", "dnChunkMin=1000000"};
  wisp_session *s[NBE] = {0};
  float *lg[NBE] = {0};
  int ok = 1;
  for (int i = 0; i < NBE && ok; i++) {
    wisp_session_options o = {.backend = i == REF ? "cpu" : "webgpu", .threads = 1, .tuning = tunings[i]};
    ok = !wisp_session_new(m, &o, &s[i]) && (lg[i] = malloc(sizeof(float) * (size_t)np * V)) != NULL;
  }
  CHECKF(ok, "sessions: %s", wisp_last_error());
  int32_t prompt[150];
  for (int i = 0; i < np; i++) prompt[i] = (int32_t)((i * 131 + 7) % V);
  wisp_backend_stats c0 = {0}, c1 = {0};
  if (ok) wisp_wgpu_backend_stats_get(s[CHUNKED]->backend, &c0);
  for (int i = 0; i < NBE && ok; i++) ok = !wisp_session_eval_all(s[i], prompt, np, lg[i]);
  CHECKF(ok, "prefill: %s", wisp_last_error());
  if (ok) wisp_wgpu_backend_stats_get(s[CHUNKED]->backend, &c1);
  double worst[NBE] = {0};
  for (int i = CHUNKED; ok && i <= BY_TOKEN; i++) {
    worst[i] = logits_error(lg[REF], lg[i], np, V);
    CHECKF(worst[i] <= TOL_LOGITS, "prefill logits of %s: error %.3g of max|logit|", tunings[i], worst[i]);
  }
  double vs = ok ? logits_error(lg[BY_TOKEN], lg[CHUNKED], np, V) : 0;
  CHECKF(vs <= TOL_LOGITS, "prefill logits, chunked vs token by token: error %.3g", vs);
  /* three DeltaNet layers, the prompt in one forward call */
  CHECKF(c1.deltanet_chunked - c0.deltanet_chunked == 3, "%llu DeltaNet calls in chunks (3 expected)",
         (unsigned long long)(c1.deltanet_chunked - c0.deltanet_chunked));
  int32_t tok = ok ? argmax_row(lg[REF] + (size_t)(np - 1) * V, V) : 0;
  for (int step = 0; ok && step < steps; step++) {
    for (int i = 0; i < NBE && ok; i++) ok = !wisp_session_eval(s[i], &tok, 1, lg[i]);
    CHECKF(ok, "decode: %s", wisp_last_error());
    for (int i = CHUNKED; ok && i <= BY_TOKEN; i++) {
      double e = logits_error(lg[REF], lg[i], 1, V);
      worst[i] = fmax(worst[i], e);
      int a = argmax_row(lg[REF], V), b = argmax_row(lg[i], V);
      CHECKF(a == b && e <= TOL_LOGITS, "decode step %d, %s: token %d against %d, logit error %.3g", step,
             tunings[i], b, a, e);
      ok = a == b && e <= TOL_LOGITS;
    }
    tok = argmax_row(lg[REF], V);
  }
  for (int i = 0; i < NBE; i++) {
    wisp_session_free(s[i]);
    free(lg[i]);
  }
  wisp_model_close(m);
  printf("     qwen35-small f32, prompt %d + %d steps: logit error chunked %.3g, token by token %.3g of max|logit|\n",
         np, steps, worst[CHUNKED], worst[BY_TOKEN]);
}

/* The state pass's other column blocks (tuning dnChunkCols; the default
 * 16 is the test above's): 4, 8 and 32 columns a workgroup, k_dim 40 (not
 * a multiple of the row groups) and v_dim 36 (a partial block). */
TEST(webgpu_dn_chunked_column_blocks) {
  WEBGPU_OR_SKIP(d);
  memset(g_worst, 0, sizeof g_worst);
  static const uint32_t cols[] = {4, 8, 32};
  for (int ci = 0; ci < 3; ci++) {
    trio t;
    int opened = trio_open(&t, d, 0, cols[ci]);
    CHECKF(opened, "%s", wisp_last_error());
    if (!opened) {
      trio_close(&t);
      return;
    }
    uint64_t seed = 500 + (uint64_t)ci, chunked = 0;
    char err[600] = "";
    static const int calls[] = {70, 1, 20};
    int ok = dn_case(&t, 1, 2, 40, 36, 4, calls, 3, &seed, &chunked, err, sizeof err);
    trio_close(&t);
    CHECKF(ok, "%u columns: %s", cols[ci], err);
    CHECKF(chunked == 2, "%u columns: %llu calls ran in chunks", cols[ci], (unsigned long long)chunked);
  }
  printf("     chunked, 4 / 8 / 32 columns a workgroup: max error %.3g of max|ref|\n", g_worst[CHUNKED]);
}

/* dn_chunk_prep's solve reads F from workgroup memory where the device
 * allows C x C floats there (lavapipe: 32 KiB), else back from prep
 * (tuning dnPrepShared=0 forces that); dn_chunk_state issues up to 4 steps'
 * loads a batch, or one (dnChunkUnroll=1): the same sums in the same order
 * every way, so the small Qwen's prefill logits are bit for bit the same. */
TEST(webgpu_dn_chunked_prep_f_placement_same_bits) {
  WEBGPU_OR_SKIP(d);
  CHECKF(d->info.max_compute_workgroup_storage_size >= 20 * 1024,
         "the device allows %u bytes of workgroup memory: the shared placement would not run",
         (unsigned)d->info.max_compute_workgroup_storage_size);
  char err[4200] = "";
  wisp_model *m = small_qwen_open("dn_chunk_qwen35_small_f", err, sizeof err);
  CHECKF(m, "%s", err);
  enum { RUNS = 3 };
  const int V = wisp_model_vocab(m), np = 150;
  static const char *tunings[RUNS] = {"dnChunkMin=1", "dnChunkMin=1,dnPrepShared=0", "dnChunkMin=1,dnChunkUnroll=1"};
  float *lg[RUNS];
  int ok = 1;
  for (int i = 0; i < RUNS; i++) ok &= (lg[i] = malloc(sizeof(float) * (size_t)np * V)) != NULL;
  int32_t prompt[150];
  for (int i = 0; i < np; i++) prompt[i] = (int32_t)((i * 131 + 7) % V);
  for (int i = 0; i < RUNS && ok; i++) {
    wisp_session *s = NULL;
    wisp_session_options o = {.backend = "webgpu", .tuning = tunings[i]};
    ok = !wisp_session_new(m, &o, &s) && !wisp_session_eval_all(s, prompt, np, lg[i]);
    wisp_session_free(s);
  }
  CHECKF(ok, "%s", wisp_last_error());
  for (int i = 1; ok && i < RUNS; i++) {
    size_t at = 0;
    while (at < (size_t)np * V && !memcmp(&lg[0][at], &lg[i][at], sizeof(float))) at++;
    CHECKF(at == (size_t)np * V, "logit %zu: %.9g under %s, %.9g under %s", at, lg[0][at], tunings[0], lg[i][at],
           tunings[i]);
  }
  for (int i = 0; i < RUNS; i++) free(lg[i]);
  wisp_model_close(m);
}
