/* f16 KV caches on the CPU backend (tuning kv=f16, or a plan whose kvDtype
 * is f16): the caches hold IEEE binary16, rounded once at the append, and
 * attention reads them through the f16 kernels (cpu_kernels.h dots_f16,
 * axpy_f16). Against f32 caches on real small models the logits move by
 * the rounding of K and V only; the greedy tokens stay where the margin
 * between the best two logits is larger than that. */
#include <stdlib.h>
#include <sys/stat.h>

#include "backend/backend.h"
#include "engine/engine.h"
#include "engine/sampler.h"
#include "fixtures.h"
#include "format/tensor.h"
#include "st_fixture.h"
#include "test.h"
#include "util/file.h"

static float frand16(unsigned *s) {
  *s = *s * 1103515245u + 12345u;
  return ((*s >> 8) & 0xFFFF) / 32768.0f - 1.0f;
}

/* ---- the backend op: what the cache holds ---- */

enum { T = 6, H = 4, KVH = 2, D = 24, POS = 16 };

/* One attention call of T tokens from position 0 on a fresh cpu backend,
 * caches f16 or not; out gets the output rows, kc/vc the caches' first T
 * positions as 32-bit words. The rotation is the identity (cos 1, sin 0)
 * and there are no norms, so the cache should hold the k and v inputs. */
static int attention_once(int kv16, const float *qkv, float *out, uint32_t *kc, uint32_t *vc, size_t words) {
  wisp_backend *be = NULL;
  if (wisp_cpu_backend_new(2, &be)) return 0;
  wisp_backend_settings st;
  wisp_backend_settings_default(&st);
  st.kv_f16 = kv16;
  be->configure(be, &st);
  const size_t row = (size_t)(H + 2 * KVH) * D;
  wisp_buf *in = be->buf_new(be, T * row), *o = be->buf_new(be, (size_t)T * H * D);
  wisp_buf *k = be->kv_buf_new(be, (size_t)POS * KVH * D), *v = be->kv_buf_new(be, (size_t)POS * KVH * D);
  static float ones[POS * D / 2], zeros[POS * D / 2];
  for (int i = 0; i < POS * D / 2; i++) ones[i] = 1.0f;
  wisp_vector cs = {.n = POS * D / 2, .data = ones}, sn = {.n = POS * D / 2, .data = zeros};
  be->prepare_vector(be, &cs);
  be->prepare_vector(be, &sn);
  be->buf_write(be, in, 0, T * row, qkv);
  wisp_attention_args a = {.qkv = in, .n = T, .pos0 = 0, .heads = H, .kv_heads = KVH, .head_dim = D, .rope_cos = &cs,
                           .rope_sin = &sn, .k_cache = k, .v_cache = v, .out = o};
  be->attention(be, &a);
  int ok = be->sync(be) == WISP_OK;
  be->buf_read(be, o, 0, (size_t)T * H * D, out);
  be->buf_read(be, k, 0, words, (float *)kc);
  be->buf_read(be, v, 0, words, (float *)vc);
  wisp_buf *all[] = {in, o, k, v};
  for (int i = 0; i < 4; i++) be->buf_free(be, all[i]);
  be->destroy(be);
  return ok;
}

/* The halves of a little-endian word array, value i of the cache. */
static uint16_t half_at(const uint32_t *w, size_t i) { return (uint16_t)(w[i / 2] >> (i % 2 ? 16 : 0)); }

/* With kv_f16 the caches hold each k and v value as wisp_f32_to_f16 rounds
 * it, two a 32-bit word (half the bytes of f32: the first T positions
 * fill T * KVH * D / 2 words); the output is attention over those rounded
 * values (a double reference from them agrees to f32 rounding), and it is
 * not the f32 cache's output (the f16 path ran). Without kv_f16 the
 * caches hold the f32 values. */
TEST(cpu_kv16_cache_holds_binary16) {
  const size_t row = (size_t)(H + 2 * KVH) * D, vals = (size_t)T * KVH * D;
  static float qkv[T * (H + 2 * KVH) * D], o16[T * H * D], o32[T * H * D];
  static uint32_t k16[T * KVH * D], v16[T * KVH * D], k32[T * KVH * D], v32[T * KVH * D];
  unsigned s = 11;
  for (size_t i = 0; i < T * row; i++) qkv[i] = frand16(&s) * 1.7f;
  CHECK(attention_once(1, qkv, o16, k16, v16, vals / 2));
  CHECK(attention_once(0, qkv, o32, k32, v32, vals));
  for (int t = 0; t < T; t++)
    for (size_t i = 0; i < (size_t)KVH * D; i++) {
      const float kx = qkv[t * row + (size_t)H * D + i], vx = qkv[t * row + (size_t)(H + KVH) * D + i];
      const size_t at = (size_t)t * KVH * D + i;
      CHECKF(half_at(k16, at) == wisp_f32_to_f16(kx) && half_at(v16, at) == wisp_f32_to_f16(vx),
             "token %d value %zu: cache holds %04x %04x, want %04x %04x", t, i, half_at(k16, at), half_at(v16, at),
             wisp_f32_to_f16(kx), wisp_f32_to_f16(vx));
      float k32v, v32v;
      memcpy(&k32v, &k32[at], 4);
      memcpy(&v32v, &v32[at], 4);
      CHECK(k32v == kx && v32v == vx);
    }
  /* a double reference over the rounded caches */
  double worst = 0, moved = 0;
  for (int t = 0; t < T; t++)
    for (int h = 0; h < H; h++) {
      const int kvh = h / (H / KVH);
      const float *q = qkv + t * row + (size_t)h * D;
      double sc[T], mx = -1e300, sum = 0;
      for (int p = 0; p <= t; p++) {
        sc[p] = 0;
        for (int i = 0; i < D; i++)
          sc[p] += (double)q[i] * wisp_f16_to_f32(half_at(k16, ((size_t)p * KVH + kvh) * D + i));
        sc[p] /= sqrt((double)D);
        mx = fmax(mx, sc[p]);
      }
      for (int p = 0; p <= t; p++) sum += sc[p] = exp(sc[p] - mx);
      for (int i = 0; i < D; i++) {
        double want = 0;
        for (int p = 0; p <= t; p++) want += sc[p] / sum * wisp_f16_to_f32(half_at(v16, ((size_t)p * KVH + kvh) * D + i));
        const size_t at = ((size_t)t * H + h) * D + i;
        worst = fmax(worst, fabs(o16[at] - want));
        moved = fmax(moved, fabs(o16[at] - o32[at]));
      }
    }
  CHECKF(worst <= 1e-5, "f16-cache attention is %g from the double reference over the rounded caches", worst);
  CHECKF(moved > 0 && moved < 5e-3, "f16 and f32 caches' outputs differ by %g (want a little, not nothing)", moved);
}

/* ---- real small models: kv=f16 against f32 caches ---- */

/* The tiny Qwen 3.5 checkpoint (gated attention) converted to f32 weights. */
static const char *tiny_qwen_f32(void) {
  static char art[600];
  char hf[512], cmd[2048], log[2048];
  snprintf(hf, sizeof hf, "%s/kv16_qwen_hf", test_tmpdir());
  snprintf(art, sizeof art, "%s/kv16_qwen_f32", test_tmpdir());
  struct stat sb;
  if (stat(art, &sb) == 0) return art;
  mkdir(hf, 0755);
  if (fx_write_tiny_qwen35(hf)) return NULL;
  snprintf(cmd, sizeof cmd, "%s convert %s -o %s --quant f32 --quiet", test_wisp_bin(), hf, art);
  if (test_run(cmd, log, sizeof log) != 0) {
    fprintf(stderr, "     %s\n", log);
    return NULL;
  }
  return art;
}

enum { PROMPT = 150, STEPS = 24, MAXV = 1024 };

/* Logits of a prompt of PROMPT tokens (prefill: chunks of the session's
 * size, the cache carried between them), then of STEPS tokens fed one at
 * a time (decode), each the f32 caches' greedy choice (`forced`, when
 * given; else this run's own): rows [0] prompt, [1..STEPS] decode. The
 * session's KV dtype goes to *kv. */
static int run_logits(const char *dir, const char *tuning, int threads, const int32_t *forced, int32_t *chosen,
                      float *lg, char *kv) {
  wisp_model *m = NULL;
  wisp_session *s = NULL;
  if (wisp_model_open(dir, &m)) return 0;
  const int V = wisp_model_vocab(m);
  wisp_session_options o = {.backend = "cpu", .threads = threads, .tuning = tuning};
  int ok = V <= MAXV && wisp_session_new(m, &o, &s) == WISP_OK;
  int32_t ids[PROMPT];
  for (int i = 0; i < PROMPT; i++) ids[i] = (int32_t)((i * 37 + 11) % V);
  ok = ok && wisp_session_eval(s, ids, PROMPT, lg) == WISP_OK;
  for (int t = 0; ok && t < STEPS; t++) {
    chosen[t] = (int32_t)wisp_argmax(lg + (size_t)t * V, V);
    ok = wisp_session_eval(s, forced ? &forced[t] : &chosen[t], 1, lg + (size_t)(t + 1) * V) == WISP_OK;
  }
  if (ok) snprintf(kv, 4, "%s", wisp_session_kv_dtype(s));
  wisp_session_free(s);
  wisp_model_close(m);
  return ok;
}

/* The best two logits' gap of a row. */
static float margin(const float *l, int V) {
  int b = 0;
  for (int i = 1; i < V; i++) b = l[i] > l[b] ? i : b;
  float second = -INFINITY;
  for (int i = 0; i < V; i++)
    if (i != b && l[i] > second) second = l[i];
  return l[b] - second;
}

/* Tolerance: each K and V value is rounded to 11 significant bits
 * (relative error <= 2^-11 ~ 4.9e-4); attention's output is a convex mix
 * of value rows and its scores move by at most |q| |k| 2^-11 / sqrt(D),
 * so every layer's attention output moves by a few 1e-4 of its size, and
 * what reaches the logits through the following products and norms stays
 * around 1e-3 of max|logit|: the bound is 2e-3 of max|logit| per row.
 * The logits must move (nonzero: the f16 caches were used). Where the f32
 * run's best logit leads by more than twice the worst row's difference,
 * the greedy choice is the same; at least half the rows must be such. */
static void kv16_near_f32(const char *dir) {
  CHECKF(dir, "no model");
  static float a[(STEPS + 1) * MAXV], b[(STEPS + 1) * MAXV];
  int32_t ref[STEPS], got[STEPS];
  char kva[4] = "", kvb[4] = "";
  CHECKF(run_logits(dir, NULL, 2, NULL, ref, a, kva), "f32 caches: %s", wisp_last_error());
  CHECKF(run_logits(dir, "kv=f16", 2, ref, got, b, kvb), "f16 caches: %s", wisp_last_error());
  CHECKF(!strcmp(kva, "f32") && !strcmp(kvb, "f16"), "session KV dtypes %s and %s", kva, kvb);
  wisp_model *m = NULL;
  CHECK(wisp_model_open(dir, &m) == WISP_OK);
  const int V = wisp_model_vocab(m);
  wisp_model_close(m);
  double worst_rel = 0, any = 0, worst_abs = 0;
  for (int r = 0; r <= STEPS; r++) {
    double md = 0, mx = 0;
    for (int i = 0; i < V; i++) {
      md = fmax(md, fabs((double)a[(size_t)r * V + i] - b[(size_t)r * V + i]));
      mx = fmax(mx, fabs((double)a[(size_t)r * V + i]));
    }
    CHECKF(mx > 0 && isfinite(mx), "row %d: max|logit| %g", r, mx);
    worst_rel = fmax(worst_rel, md / mx);
    worst_abs = fmax(worst_abs, md);
    any += md;
  }
  if (getenv("WISP_TEST_VERBOSE")) fprintf(stderr, "  kv=f16 vs f32: max|diff|/max|logit| %.3g\n", worst_rel);
  CHECKF(worst_rel <= 2e-3, "kv=f16 logits are %.3g of max|logit| from f32 caches' (bound 2e-3)", worst_rel);
  CHECKF(any > 0, "kv=f16 gave the f32 caches' logits bit for bit: the f16 caches were not used");
  int decided = 0;
  for (int t = 0; t < STEPS; t++) {
    if (margin(a + (size_t)t * V, V) <= 2 * worst_abs) continue;
    decided++;
    CHECKF(got[t] == ref[t], "step %d: kv=f16 chose %d, f32 caches %d (margin %g, worst diff %g)", t, got[t], ref[t],
           margin(a + (size_t)t * V, V), worst_abs);
  }
  if (getenv("WISP_TEST_VERBOSE")) fprintf(stderr, "  %d of %d greedy steps decided by the margin\n", decided, STEPS);
  CHECKF(2 * decided >= STEPS, "only %d of %d greedy steps had a margin above the difference", decided, STEPS);
}

TEST(cpu_kv16_lfm2_logits_near_f32) { kv16_near_f32(fixture_small_model()); }
TEST(cpu_kv16_qwen3_5_logits_near_f32) { kv16_near_f32(tiny_qwen_f32()); }

/* With f16 caches too the logits do not depend on the thread count
 * (tests/test_cpu_threads.c): 4 and 5 threads, where a decode token's
 * pre-pass (and its f16 append) is split by heads, give 1 thread's bits. */
static void kv16_thread_invariant(const char *dir) {
  CHECKF(dir, "no model");
  static float one[(STEPS + 1) * MAXV], got[(STEPS + 1) * MAXV];
  int32_t c1[STEPS], c2[STEPS];
  char kv[4] = "";
  CHECKF(run_logits(dir, "kv=f16", 1, NULL, c1, one, kv), "1 thread: %s", wisp_last_error());
  const int counts[2] = {4, 5};
  for (int i = 0; i < 2; i++) {
    CHECKF(run_logits(dir, "kv=f16", counts[i], c1, c2, got, kv), "%d threads: %s", counts[i], wisp_last_error());
    size_t j = 0;
    while (j < sizeof one / sizeof one[0] && !memcmp(&one[j], &got[j], sizeof(float))) j++;
    CHECKF(j == sizeof one / sizeof one[0], "kv=f16 at %d threads: logit %zu is %.9g, at 1 thread %.9g", counts[i], j,
           got[j], one[j]);
  }
}

TEST(cpu_kv16_lfm2_threads_do_not_change_results) { kv16_thread_invariant(fixture_small_model()); }
TEST(cpu_kv16_qwen3_5_threads_do_not_change_results) { kv16_thread_invariant(tiny_qwen_f32()); }

/* What runs is what is reported: `wisp bench`'s receipt names the KV dtype
 * the backend keeps (kv_dtype, and the line bench starts with), f16 with
 * tuning kv=f16 and f32 without; `wisp plan` on the cpu says the plan's
 * f32 without a note that the cpu ignores the setting. */
TEST(cpu_kv16_bench_and_plan_name_the_kv_dtype) {
  const char *dir = fixture_small_model();
  CHECK(dir);
  static char cmd[2048], out[16384];
  const char *kv[2] = {"f16", "f32"};
  for (int i = 0; i < 2; i++) {
    char receipt[700], want[64];
    snprintf(receipt, sizeof receipt, "%s/kv16_bench_%s.json", test_tmpdir(), kv[i]);
    snprintf(cmd, sizeof cmd, "%s bench --profile exact -m %s --backend cpu -p 4 -n 3 --no-warmup --tuning kv=%s -o %s", test_wisp_bin(),
             dir, kv[i], receipt);
    CHECKF(test_run(cmd, out, sizeof out) == 0, "%s", out);
    snprintf(want, sizeof want, "backend cpu, %s KV caches", kv[i]);
    CHECKF(strstr(out, want), "no '%s' in: %s", want, out);
    char *r = NULL;
    CHECK(wisp_read_file(receipt, &r, NULL) == WISP_OK);
    snprintf(want, sizeof want, "\"kv_dtype\":\t\"%s\"", kv[i]);
    int named = strstr(r, want) != NULL;
    free(r);
    CHECKF(named, "the receipt has no %s", want);
  }
  snprintf(cmd, sizeof cmd, "%s plan --profile exact -m %s --backend cpu", test_wisp_bin(), dir);
  CHECKF(test_run(cmd, out, sizeof out) == 0 && strstr(out, "settings kvDtype=f32 (default)\n"), "%s", out);
}
