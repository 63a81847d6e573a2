/* CPU kernels, the LFM2 forward pass's internal consistency, and sampling.
 * Agreement with Hugging Face transformers is tests/test_parity.c's job. */
#include <math.h>
#include <stdlib.h>

#include "backend/cpu/cpu_kernels.h"
#include "engine/engine.h"
#include "engine/sampler.h"
#include "fixtures.h"
#include "format/tensor.h"
#include "test.h"
#include "util/file.h"

static float frand(unsigned *s) {
  *s = *s * 1103515245u + 12345u;
  return ((*s >> 8) & 0xFFFF) / 32768.0f - 1.0f;
}

/* The largest and smallest value of block b (32 values) of row r. */
static void block_range(const float *w, int C, int r, int b, float *lo, float *hi) {
  *lo = *hi = w[r * C + b * 32];
  for (int j = 0; j < 32; j++) {
    *lo = fminf(*lo, w[r * C + b * 32 + j]);
    *hi = fmaxf(*hi, w[r * C + b * 32 + j]);
  }
}

/* The round-trip error is bounded by what 4-bit quantization of the block
 * allows, computed from the weights here rather than from the quantizer's
 * own scale: Q4 (symmetric, 15 levels -7..7 over max|w|) is off by at most
 * half a step, max|w| / 14; Q4Z (16 levels over max - min) by half of
 * (max - min) / 15. A quantizer that used fewer levels (a larger step)
 * fails, though its error would still be half its own step. */
TEST(q4_roundtrip_error_is_bounded) {
  enum { R = 7, C = 96 };
  float w[R * C], back[C];
  unsigned s = 1;
  for (int i = 0; i < R * C; i++) w[i] = frand(&s) * (1 + (i % 5));
  uint8_t q[R * C / 2], zp[(R * C / 32 + 1) / 2];
  float sc[R * C / 32];
  wisp_quantize_q4(w, R, C, q, sc);
  wisp_matrix m = {.type = WISP_W_Q4, .rows = R, .cols = C, .q = q, .scales = sc};
  for (int r = 0; r < R; r++) {
    wisp_matrix_row_f32(&m, r, back);
    for (int c = 0; c < C; c++) {
      float lo, hi;
      block_range(w, C, r, c / 32, &lo, &hi);
      float bound = fmaxf(fabsf(lo), fabsf(hi)) / 14.0f * 1.0001f;
      CHECKF(fabsf(back[c] - w[r * C + c]) <= bound, "q4 r%d c%d: %g vs %g (bound %g)", r, c, back[c], w[r * C + c],
             bound);
    }
  }
  wisp_quantize_q4z(w, R, C, q, sc, zp);
  m.type = WISP_W_Q4Z;
  m.zp = zp;
  for (int r = 0; r < R; r++) {
    wisp_matrix_row_f32(&m, r, back);
    for (int c = 0; c < C; c++) {
      float lo, hi;
      block_range(w, C, r, c / 32, &lo, &hi);
      float bound = (hi - lo) / 30.0f * 1.0001f;
      CHECKF(fabsf(back[c] - w[r * C + c]) <= bound, "q4z r%d c%d: %g vs %g (bound %g)", r, c, back[c], w[r * C + c],
             bound);
    }
  }
}

TEST(cpu_simd_kernels_match_scalar) {
  const wisp_cpu_kernels *fast = wisp_cpu_kernels_get(), *ref = wisp_cpu_kernels_scalar();
  enum { R = 5, C = 2560 };
  static float w[R * C], x[C], a[C], b[C];
  static uint8_t q[R * C / 2], zp[R * C / 64];
  static float sc[R * C / 32];
  unsigned s = 42;
  for (int i = 0; i < R * C; i++) w[i] = frand(&s);
  for (int i = 0; i < C; i++) x[i] = frand(&s);
  wisp_quantize_q4z(w, R, C, q, sc, zp);
  wisp_matrix mz = {.type = WISP_W_Q4Z, .rows = R, .cols = C, .q = q, .scales = sc, .zp = zp};
  wisp_matrix m4 = {.type = WISP_W_Q4, .rows = R, .cols = C, .q = q, .scales = sc};
  for (int r = 0; r < R; r++) {
    CHECK_NEAR(fast->dot_q4_row(&mz, r, x), ref->dot_q4_row(&mz, r, x), 1e-3);
    CHECK_NEAR(fast->dot_q4_row(&m4, r, x), ref->dot_q4_row(&m4, r, x), 1e-3);
    fast->row_f32(&mz, r, a);
    ref->row_f32(&mz, r, b);
    for (int c = 0; c < C; c++) CHECK(a[c] == b[c]);
  }
  for (int n = 0; n < 40; n++) CHECK_NEAR(fast->dot_f32(w, x, n), ref->dot_f32(w, x, n), 1e-4);
  /* wsum_f32: in both sets the bits of o[i] += weight * v[i] (a multiply, then an add) row after row on a
   * zeroed o, column tails included */
  const wisp_cpu_kernels *both[2] = {fast, ref};
  for (int si = 0; si < 2; si++)
    for (int D = 1; D <= 72; D += D < 40 ? 1 : 32)
      for (int n = 0; n < 20; n += 3) {
        float ws[20];
        for (int p = 0; p < n; p++) ws[p] = x[p] + 1.5f;
        memset(a, 0, sizeof a);
        for (int p = 0; p < n; p++)
          for (int i = 0; i < D; i++) {
            const float t = ws[p] * 0.3f * w[2 + (size_t)p * (D + 5) + i];
            a[i] += t;
          }
        memcpy(b, x, sizeof b);
        both[si]->wsum_f32(b, ws, 0.3f, n, w + 2, (size_t)D + 5, D);
        CHECKF(!memcmp(a, b, (size_t)D * sizeof(float)), "%s wsum_f32 D %d n %d differs from the row-by-row sum",
               both[si]->name, D, n);
      }
  /* dots: each the bits of dot_f32 times the scale, in both sets, head sizes with and without whole 16s */
  const wisp_cpu_kernels *sets[2] = {fast, ref};
  for (int si = 0; si < 2; si++)
    for (int D = 16; D <= 72; D += 8)
      for (int n = 1; n < 20; n++) {
        float got[20];
        sets[si]->dots_f32(x, w + 3, (size_t)D + 5, n, D, 0.125f, got);
        for (int p = 0; p < n; p++)
          CHECKF(got[p] == sets[si]->dot_f32(x, w + 3 + (size_t)p * (D + 5), D) * 0.125f,
                 "%s dots_f32 D %d n %d position %d differs from dot_f32", sets[si]->name, D, n, p);
      }
  /* argmax: ties (the first wins, -0 against 0 too), a maximum in a tail, non-finite values */
  for (int n = 1; n < 40; n++) {
    for (int i = 0; i < n; i++) a[i] = (float)((i * 7) % 5) - (i == 3 ? 0.5f : 0.0f);
    if (n > 20) a[n - 1] = 9.0f;
    if (n == 12) a[2] = -0.0f, a[5] = 0.0f, a[1] = -1.0f, a[6] = -1.0f;
    int f1, f2, i1 = fast->argmax_f32(a, n, &f1), i2 = ref->argmax_f32(a, n, &f2);
    CHECKF(i1 == i2 && f1 == f2 && f1, "argmax_f32 of %d: %d (finite %d), scalar %d (finite %d)", n, i1, f1, i2, f2);
    a[n / 2] = n % 3 ? NAN : INFINITY;
    fast->argmax_f32(a, n, &f1);
    ref->argmax_f32(a, n, &f2);
    CHECKF(!f1 && !f2, "argmax_f32 of %d missed a non-finite value", n);
  }
}

/* dot(q, k) of f16 keys in double, and the sum of |q k| (the bound of any
 * f32 summation order's error, times a few units of rounding). */
static double dot_f16_exact(const float *q, const uint16_t *k, int D, double *mag) {
  double s = 0;
  *mag = 0;
  for (int i = 0; i < D; i++) {
    double p = (double)q[i] * wisp_f16_to_f32(k[i]);
    s += p;
    *mag += fabs(p);
  }
  return s;
}

static int is_f16_nan(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 1023); }

/* The f16 KV cache's kernels (dots_f16, wsum_f16, f32_to_f16): the AVX2 set
 * gives the scalar reference's bits, head sizes with and without whole 8s
 * and 16s, tails included; the reference's sums are dot products (against
 * double). On a CPU without AVX2+FMA+F16C only the reference is checked
 * and the test says the AVX2 set was not run. */
TEST(cpu_f16kv_kernels_match_scalar) {
  const wisp_cpu_kernels *fast = wisp_cpu_kernels_get(), *ref = wisp_cpu_kernels_scalar();
  enum { N = 24, DMAX = 264 };
  static float q[DMAX], y1[DMAX], y2[DMAX], src[4096];
  static uint16_t k[N * (DMAX + 3)], h1[4096], h2[4096];
  unsigned s = 7;
  for (int i = 0; i < DMAX; i++) q[i] = frand(&s) * 2;
  for (int i = 0; i < N * (DMAX + 3); i++) k[i] = wisp_f32_to_f16(frand(&s) * (1 + i % 3));
  /* conversion: random values over many binades, exact ties, subnormals, the overflow edge, zeros, inf, NaN */
  for (int i = 0; i < 4096; i++) src[i] = frand(&s) * ldexpf(1.0f, (int)(i % 40) - 26);
  for (int i = 0; i < 64; i++) src[i] = (1024 + i + 0.5f) * ldexpf(1.0f, i % 7 - 10); /* halfway: ties to even */
  const float edge[] = {65504.0f, 65519.0f, 65520.0f, -65536.0f, 6.0e-8f, 2.98e-8f, 2.9802322e-8f, -3.0e-5f,
                        6.1035156e-5f, 6.1e-5f, 0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1e-30f};
  memcpy(src + 100, edge, sizeof edge);
  ref->f32_to_f16(h1, src, 4096);
  for (int i = 0; i < 4096; i++) {
    uint16_t want = wisp_f32_to_f16(src[i]);
    CHECKF(h1[i] == want || (is_f16_nan(h1[i]) && is_f16_nan(want)), "scalar f32_to_f16(%.9g) %04x, want %04x", src[i],
           h1[i], want);
  }
  for (int D = 1; D <= DMAX; D += D < 40 ? 1 : 56) /* 1..40, 96, 152, 208, 264 */
    for (int n = 1; n <= N; n += 1 + (D > 40) * 7) {
      float got[N];
      const size_t stride = (size_t)D + 3;
      ref->dots_f16(q, k, stride, n, D, 0.125f, got);
      for (int p = 0; p < n; p++) {
        double mag, want = dot_f16_exact(q, k + p * stride, D, &mag) * 0.125;
        CHECKF(fabs(got[p] - want) <= 1e-6 * mag + 1e-30, "scalar dots_f16 D %d position %d: %.9g vs %.9g", D, p,
               got[p], want);
      }
    }
  if (!strcmp(fast->name, "scalar"))
    SKIP("this CPU lacks AVX2+FMA+F16C: the avx2 set was not run");
  fast->f32_to_f16(h2, src, 4096);
  for (int i = 0; i < 4096; i++)
    CHECKF(h2[i] == h1[i] || (is_f16_nan(h1[i]) && is_f16_nan(h2[i])), "%s f32_to_f16(%.9g) %04x, scalar %04x",
           fast->name, src[i], h2[i], h1[i]);
  for (int D = 1; D <= DMAX; D += D < 40 ? 1 : 56)
    for (int n = 1; n <= N; n++) {
      float a[N], b[N];
      fast->dots_f16(q, k + 1, (size_t)D + 3, n, D, 0.125f, a);
      ref->dots_f16(q, k + 1, (size_t)D + 3, n, D, 0.125f, b);
      for (int p = 0; p < n; p++)
        CHECKF(!memcmp(&a[p], &b[p], sizeof(float)), "%s dots_f16 D %d n %d position %d: %.9g, scalar %.9g",
               fast->name, D, n, p, a[p], b[p]);
    }
  for (int D = 1; D <= DMAX; D += D < 40 ? 1 : 56) /* wsum: the same bits, column tails included */
    for (int n = 0; n <= N; n += 1 + (D > 40) * 5) {
      memcpy(y1, q, sizeof y1);
      memcpy(y2, q, sizeof y2);
      fast->wsum_f16(y1, q + 3, 0.37f, n, k + 1, (size_t)D + 3, D);
      ref->wsum_f16(y2, q + 3, 0.37f, n, k + 1, (size_t)D + 3, D);
      CHECKF(!memcmp(y1, y2, sizeof y1), "%s wsum_f16 of D %d n %d differs from the scalar reference", fast->name, D, n);
    }
}

static float *logits_for(const char *dir, const int32_t *ids, int n, int one_by_one, int threads) {
  wisp_model *m = NULL;
  wisp_session *s = NULL;
  if (wisp_model_open(dir, &m)) return NULL;
  wisp_session_options o = {.backend = "cpu", .threads = threads};
  float *out = NULL;
  if (wisp_session_new(m, &o, &s) == WISP_OK) {
    out = malloc(sizeof(float) * (size_t)wisp_model_vocab(m));
    int ok = 1;
    if (one_by_one) {
      for (int i = 0; i < n && ok; i++) ok = wisp_session_eval(s, ids + i, 1, i == n - 1 ? out : NULL) == WISP_OK;
    } else {
      ok = wisp_session_eval(s, ids, n, out) == WISP_OK;
    }
    if (!ok) { free(out); out = NULL; }
  }
  wisp_session_free(s);
  wisp_model_close(m);
  return out;
}

static float max_abs(const float *v, int n) {
  float m = 0;
  for (int i = 0; i < n; i++) m = fmaxf(m, fabsf(v[i]));
  return m;
}

TEST(lfm2_prefill_equals_incremental_decode) {
  /* 150 tokens: crosses the 128-token prefill chunk, so the KV cache and
   * the conv state are carried between chunks and between single steps. */
  const char *d = fixture_small_model();
  CHECK(d);
  int32_t ids[150];
  for (int i = 0; i < 150; i++) ids[i] = (i * 37 + 11) % 512;
  float *a = logits_for(d, ids, 150, 0, 2), *b = logits_for(d, ids, 150, 1, 2);
  CHECK(a && b);
  float scale = max_abs(a, 512), worst = 0;
  for (int i = 0; i < 512; i++) worst = fmaxf(worst, fabsf(a[i] - b[i]));
  free(a);
  free(b);
  CHECKF(worst <= 1e-4f * scale, "max diff %g (scale %g)", worst, scale);
  CHECK(scale > 0 && isfinite(scale));
}

TEST(lfm2_threads_do_not_change_results) {
  const char *d = fixture_small_model();
  int32_t ids[70];
  for (int i = 0; i < 70; i++) ids[i] = (i * 13 + 5) % 512;
  float *a = logits_for(d, ids, 70, 0, 1), *b = logits_for(d, ids, 70, 0, 3);
  CHECK(a && b);
  int same = memcmp(a, b, 512 * sizeof(float)) == 0;
  free(a);
  free(b);
  CHECK(same);
}

TEST(lfm2_context_overflow_is_an_error) {
  const char *d = fixture_small_model();
  wisp_model *m = NULL;
  wisp_session *s = NULL;
  CHECK(wisp_model_open(d, &m) == WISP_OK);
  wisp_session_options o = {.backend = "cpu", .max_context = 8};
  CHECK(wisp_session_new(m, &o, &s) == WISP_OK);
  int32_t ids[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  wisp_status st = wisp_session_eval(s, ids, 9, NULL);
  int32_t bad = 100000;
  wisp_status st2 = wisp_session_eval(s, &bad, 1, NULL);
  wisp_session_free(s);
  wisp_model_close(m);
  CHECK(st == WISP_EINVAL && st2 == WISP_EINVAL);
}

TEST(lfm2_reset_reproduces_first_run) {
  const char *d = fixture_small_model();
  wisp_model *m = NULL;
  wisp_session *s = NULL;
  CHECK(wisp_model_open(d, &m) == WISP_OK);
  CHECK(wisp_session_new(m, NULL, &s) == WISP_OK);
  int32_t ids[5] = {72, 101, 108, 108, 111};
  float a[512], b[512];
  CHECK(wisp_session_eval(s, ids, 5, a) == WISP_OK);
  wisp_session_reset(s);
  CHECK(wisp_session_eval(s, ids, 5, b) == WISP_OK);
  wisp_session_free(s);
  wisp_model_close(m);
  CHECK(memcmp(a, b, sizeof a) == 0);
}

TEST(sampler_greedy_and_reproducible) {
  float base[100];
  unsigned s = 3;
  for (int i = 0; i < 100; i++) base[i] = frand(&s) * 3;
  base[37] = 10;
  float l[100];
  wisp_sampler_params p = wisp_sampler_defaults();
  p.temperature = 0;
  wisp_sampler *g = wisp_sampler_new(&p, 100);
  memcpy(l, base, sizeof l);
  CHECK(wisp_sampler_sample(g, l) == 37);
  wisp_sampler_free(g);
  /* top-k 1 is greedy whatever the temperature */
  p = wisp_sampler_defaults();
  p.top_k = 1;
  p.temperature = 5;
  g = wisp_sampler_new(&p, 100);
  memcpy(l, base, sizeof l);
  CHECK(wisp_sampler_sample(g, l) == 37);
  wisp_sampler_free(g);
  /* same seed, same draws; another seed, another sequence */
  int seq[3][50];
  uint64_t seeds[3] = {11, 11, 12};
  for (int k = 0; k < 3; k++) {
    p = wisp_sampler_defaults();
    p.temperature = 2;
    p.top_k = 0;
    p.top_p = 1;
    p.min_p = 0;
    p.seed = seeds[k];
    g = wisp_sampler_new(&p, 100);
    for (int i = 0; i < 50; i++) {
      memcpy(l, base, sizeof l);
      l[37] = 0.5f;
      seq[k][i] = wisp_sampler_sample(g, l);
      wisp_sampler_accept(g, seq[k][i]); /* the next draw is at the next position (its own noise) */
    }
    wisp_sampler_free(g);
  }
  CHECK(memcmp(seq[0], seq[1], sizeof seq[0]) == 0);
  CHECK(memcmp(seq[0], seq[2], sizeof seq[0]) != 0);
}

TEST(sampler_temperature_follows_softmax) {
  /* Two tokens with logits 0 and log(3): p = 1/4, 3/4 at temperature 1. */
  float l[2];
  wisp_sampler_params p = {.temperature = 1, .top_k = 0, .top_p = 1, .min_p = 0, .repeat_penalty = 1, .seed = 5};
  wisp_sampler *g = wisp_sampler_new(&p, 2);
  int ones = 0, N = 20000;
  for (int i = 0; i < N; i++) {
    l[0] = 0;
    l[1] = logf(3);
    int t = wisp_sampler_sample(g, l);
    wisp_sampler_accept(g, t); /* each draw at its own position: independent noise */
    ones += t;
  }
  wisp_sampler_free(g);
  CHECK_NEAR((double)ones / N, 0.75, 0.02);
}

/* The distribution a truncated sampler should draw from, computed here
 * independently of src/backend/sampling.c (in double, by sorting): softmax
 * at temperature T, then min-p (keep p_i >= min_p * p_max), top-k (the k
 * most likely) and top-p (the fewest most likely tokens whose mass reaches
 * top_p of what is left), renormalised. */
static void truncated_distribution(const float *logits, int n, double T, int top_k, double top_p, double min_p,
                                   double *want) {
  int order[16];
  double p[16], mx = logits[0], sum = 0;
  for (int i = 1; i < n; i++) mx = fmax(mx, logits[i]);
  for (int i = 0; i < n; i++) sum += p[i] = exp((logits[i] - mx) / T);
  for (int i = 0; i < n; i++) p[i] /= sum, order[i] = i;
  for (int i = 0; i < n; i++) /* most likely first */
    for (int j = i + 1; j < n; j++)
      if (p[order[j]] > p[order[i]]) { int t = order[i]; order[i] = order[j]; order[j] = t; }
  int keep = n;
  while (keep > 1 && p[order[keep - 1]] < min_p * p[order[0]]) keep--;
  if (top_k > 0 && top_k < keep) keep = top_k;
  if (top_p > 0 && top_p < 1) {
    double left = 0, mass = 0;
    for (int i = 0; i < keep; i++) left += p[order[i]];
    int k = 0;
    while (k < keep && mass < top_p * left) mass += p[order[k++]];
    keep = k;
  }
  double kept = 0;
  for (int i = 0; i < keep; i++) kept += p[order[i]];
  for (int i = 0; i < n; i++) want[i] = 0;
  for (int i = 0; i < keep; i++) want[order[i]] = p[order[i]] / kept;
}

/* Many draws, each at its own step (accept moves the step on), against
 * truncated_distribution: every token outside the kept set is never drawn
 * and each kept token's frequency is within 0.03 of its probability (about
 * 3.5 standard deviations at 3000 draws; the draws are a fixed function of
 * the seed, so this either always passes or never does). The top-p values
 * are not 0.5, where p and 1 - p would keep the same tokens. */
TEST(sampler_truncation_matches_distribution) {
  enum { V = 6, N = 3000 };
  const double probs[V] = {0.40, 0.25, 0.15, 0.10, 0.06, 0.04};
  float base[V];
  for (int i = 0; i < V; i++) base[V - 1 - i] = logf((float)probs[i]); /* most likely last: order is not index */
  static const struct {
    float temperature, top_p, min_p;
    int top_k, kept; /* how many tokens the case keeps */
  } cases[] = {
      {1.0f, 0.70f, 0, 0, 3},  /* 0.40 + 0.25 < 0.70 <= 0.40 + 0.25 + 0.15 */
      {1.0f, 0.30f, 0, 0, 1},  /* 0.30 <= 0.40: only the first */
      {1.0f, 0.85f, 0, 0, 4},  /* 0.80 < 0.85 <= 0.90 */
      {1.0f, 1.00f, 0.30f, 0, 3}, /* p >= 0.12: 0.15 stays, 0.10 goes */
      {1.0f, 1.00f, 0, 2, 2},
      {1.0f, 0.60f, 0, 4, 2},  /* top-k 4 leaves 0.90; 0.60 of it is 0.54 <= 0.65 */
      {0.5f, 0.70f, 0, 0, 2},  /* squared: 0.615, 0.240, 0.086, ...: 0.615 < 0.70 <= 0.855 */
      {2.0f, 1.00f, 0, 0, 6},  /* flattened, nothing cut */
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    wisp_sampler_params p = {.temperature = cases[c].temperature, .top_k = cases[c].top_k, .top_p = cases[c].top_p,
                             .min_p = cases[c].min_p, .repeat_penalty = 1, .seed = 100 + c};
    double want[V];
    truncated_distribution(base, V, p.temperature, p.top_k, p.top_p, p.min_p, want);
    int kept = 0;
    for (int i = 0; i < V; i++) kept += want[i] > 0;
    CHECKF(kept == cases[c].kept, "case %zu: the reference keeps %d tokens, expected %d", c, kept, cases[c].kept);
    wisp_sampler *g = wisp_sampler_new(&p, V);
    int count[V] = {0};
    for (int i = 0; i < N; i++) {
      float l[V];
      memcpy(l, base, sizeof l);
      int t = wisp_sampler_sample(g, l);
      wisp_sampler_accept(g, t);
      count[t]++;
    }
    wisp_sampler_free(g);
    for (int i = 0; i < V; i++) {
      double got = (double)count[i] / N;
      CHECKF(want[i] > 0 ? fabs(got - want[i]) <= 0.03 : count[i] == 0,
             "case %zu (T %g top-k %d top-p %g min-p %g): token %d drawn %.3f of the time, its probability is %.3f", c,
             (double)p.temperature, p.top_k, (double)p.top_p, (double)p.min_p, i, got, want[i]);
    }
  }
}

TEST(sampler_top_p_min_p_and_penalty) {
  float l[4];
  /* probabilities ~ 0.64, 0.24, 0.09, 0.03: top-p 0.6 keeps only the first,
   * at every step (each draw is at the next position, its own noise) */
  wisp_sampler_params p = {.temperature = 1, .top_k = 0, .top_p = 0.6f, .min_p = 0, .repeat_penalty = 1, .seed = 9};
  wisp_sampler *g = wisp_sampler_new(&p, 4);
  for (int i = 0; i < 200; i++) {
    l[0] = 3; l[1] = 2; l[2] = 1; l[3] = 0;
    int t = wisp_sampler_sample(g, l);
    wisp_sampler_accept(g, t);
    CHECKF(t == 0, "draw %d: %d", i, t);
  }
  wisp_sampler_free(g);
  /* min-p 0.3: keeps tokens with p >= 0.3 * p_max -> tokens 0 and 1 */
  p.top_p = 1;
  p.min_p = 0.3f;
  g = wisp_sampler_new(&p, 4);
  int seen[4] = {0};
  for (int i = 0; i < 2000; i++) {
    l[0] = 3; l[1] = 2; l[2] = 1; l[3] = 0;
    int t = wisp_sampler_sample(g, l);
    wisp_sampler_accept(g, t);
    seen[t]++;
  }
  wisp_sampler_free(g);
  CHECK(seen[0] > 0 && seen[1] > 0 && seen[2] == 0 && seen[3] == 0);
  /* a strong repetition penalty moves greedy away from a repeated token:
   * a positive logit is divided by it (3 -> 0.3 < 2) */
  wisp_sampler_params r = {.temperature = 0, .repeat_penalty = 10, .repeat_last_n = 8};
  g = wisp_sampler_new(&r, 4);
  wisp_sampler_accept(g, 0);
  l[0] = 3; l[1] = 2; l[2] = 1; l[3] = 0;
  CHECK(wisp_sampler_sample(g, l) == 1);
  CHECK_NEAR(l[0], 0.3, 1e-6);
  wisp_sampler_free(g);
  /* and a negative one multiplied by it (-1 -> -2 < -1.5), never divided */
  r.repeat_penalty = 2;
  g = wisp_sampler_new(&r, 4);
  wisp_sampler_accept(g, 0);
  l[0] = -1; l[1] = -1.5f; l[2] = -3; l[3] = -4;
  CHECK(wisp_sampler_sample(g, l) == 1);
  CHECK_NEAR(l[0], -2.0, 1e-6);
  wisp_sampler_free(g);
}

TEST(cli_run_streams_and_reports_speed) {
  char cmd[1024], out[8192];
  snprintf(cmd, sizeof cmd, "%s run --backend cpu --profile exact -m %s -p abc -n 8 --temp 0", test_wisp_bin(), fixture_small_model());
  CHECKF(test_run(cmd, out, sizeof out) == 0, "%s", out);
  CHECK(strstr(out, "prompt: 3 tokens") != NULL);
  CHECK(strstr(out, "decode: 7 tokens") != NULL);
  /* greedy is deterministic */
  char out2[8192];
  CHECK(test_run(cmd, out2, sizeof out2) == 0);
  CHECK(strncmp(out, out2, (size_t)(strstr(out, "prompt:") - out)) == 0);
}

TEST(cli_bad_options_are_one_line_errors) {
  const char *cases[][2] = {
      {"run -m MODEL -n -4", "-n/--n-predict needs an integer"},
      {"run -m MODEL --temp hot", "--temp needs a number"},
      {"run -m MODEL --backend tpu", "unknown backend 'tpu'"},
      {"run -m MODEL -n 100000", "exceed the context"},
      {"run -m MODEL --bogus 1", "unknown option '--bogus'"},
      {"frobnicate", "unknown command 'frobnicate'"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char args[512], cmd[1024], out[4096];
    snprintf(args, sizeof args, "%s", cases[i][0]);
    char *at = strstr(args, "MODEL");
    if (at) {
      char rest[512];
      snprintf(rest, sizeof rest, "%s", at + 5);
      snprintf(at, sizeof args - (size_t)(at - args), "%s%s", fixture_small_model(), rest);
    }
    snprintf(cmd, sizeof cmd, "%s %s", test_wisp_bin(), args);
    int rc = test_run(cmd, out, sizeof out);
    char *last = out;
    for (char *p = out; *p; p++)
      if (*p == '\n' && p[1]) last = p + 1;
    CHECKF(rc > 0 && strstr(last, cases[i][1]), "'%s' -> rc %d: %s", cases[i][0], rc, out);
  }
}

/* --op-times: each phase of the receipt lists the op kinds that ran, with
 * their calls (a product at least for every norm),
 * and the per-op seconds add up to no more than the phase's. */
TEST(cli_bench_op_times_in_the_receipt) {
  char cmd[1024], out[8192], path[700];
  snprintf(path, sizeof path, "%s/receipt-ops.json", test_tmpdir());
  snprintf(cmd, sizeof cmd, "%s bench --backend cpu --profile exact -m %s --prompt 16 --decode 8 -t 2 --op-times -o %s", test_wisp_bin(),
           fixture_small_model(), path);
  CHECKF(test_run(cmd, out, sizeof out) == 0, "%s", out);
  CHECKF(strstr(out, "decode op times") && strstr(out, "(outside ops)"), "%s", out);
  cJSON *r = fixture_read_json(path);
  CHECKF(r, "cannot read the receipt %s", path);
  const char *phases[] = {"prefill", "decode"};
  for (int ph = 0; ph < 2; ph++) {
    cJSON *p = cJSON_GetObjectItem(r, phases[ph]);
    cJSON *ops = p ? cJSON_GetObjectItem(p, "op_times") : NULL, *e;
    double sum = 0, matmul_calls = 0, rms_calls = 0;
    cJSON_ArrayForEach(e, ops) {
      const char *op = cJSON_GetStringValue(cJSON_GetObjectItem(e, "op"));
      double calls = cJSON_GetNumberValue(cJSON_GetObjectItem(e, "calls"));
      sum += cJSON_GetNumberValue(cJSON_GetObjectItem(e, "seconds"));
      if (op && !strncmp(op, "matmul.", 7) && strcmp(op, "matmul.i8.quantize")) matmul_calls += calls;
      if (op && !strcmp(op, "rmsnorm")) rms_calls += calls;
    }
    double secs = p ? cJSON_GetNumberValue(cJSON_GetObjectItem(p, "seconds")) : 0;
    CHECKF(cJSON_GetArraySize(ops) >= 3 && sum > 0 && sum <= secs * 1.001 + 1e-6, "%s: %d ops, %.3g of %.3g s",
           phases[ph], cJSON_GetArraySize(ops), sum, secs);
    CHECKF(rms_calls > 0 && matmul_calls >= rms_calls, "%s: %g products, %g norms", phases[ph],
           matmul_calls, rms_calls);
  }
  cJSON_Delete(r);
  /* another backend has no op timer: refused, one line */
  snprintf(cmd, sizeof cmd, "%s bench --profile exact -m %s --prompt 4 --decode 2 --backend webgpu --op-times -o %s --force 2>&1",
           test_wisp_bin(), fixture_small_model(), path);
  int rc = test_run(cmd, out, sizeof out);
  CHECKF(rc == 2 && strstr(out, "--op-times times the cpu backend's ops"), "rc %d: %s", rc, out);
}

TEST(cli_bench_writes_receipt) {
  char cmd[1024], out[8192], path[700];
  snprintf(path, sizeof path, "%s/receipt.json", test_tmpdir());
  snprintf(cmd, sizeof cmd, "%s bench --backend cpu --profile exact -m %s --prompt 16 --decode 8 -o %s", test_wisp_bin(), fixture_small_model(), path);
  CHECKF(test_run(cmd, out, sizeof out) == 0, "%s", out);
  cJSON *r = fixture_read_json(path);
  CHECKF(r, "cannot read the receipt %s", path);
  const char *keys[] = {"model", "plan_id", "device", "prompt_tokens", "decode_tokens", "prefill", "decode", "output_fingerprint"};
  int ok = 1;
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) ok &= cJSON_GetObjectItem(r, keys[i]) != NULL;
  cJSON *dec = cJSON_GetObjectItem(r, "decode");
  ok &= dec && cJSON_GetObjectItem(dec, "tok_per_s")->valuedouble > 0;
  ok &= cJSON_GetObjectItem(dec, "ms_per_token_p95")->valuedouble >= cJSON_GetObjectItem(dec, "ms_per_token_p50")->valuedouble;
  ok &= cJSON_GetObjectItem(r, "decode_tokens")->valueint == 8;
  /* the batches as they arrived: their tokens add up to the decode's */
  cJSON *b = dec ? cJSON_GetObjectItem(dec, "batches") : NULL;
  int tokens = 0;
  double ms = 0;
  cJSON *e;
  cJSON_ArrayForEach(e, b) {
    tokens += cJSON_GetArrayItem(e, 0)->valueint;
    ms += cJSON_GetArrayItem(e, 1)->valuedouble;
  }
  double secs = dec ? cJSON_GetObjectItem(dec, "seconds")->valuedouble : 0;
  CHECKF(cJSON_IsArray(b) && cJSON_GetArraySize(b) >= 1 && tokens == 8, "batches: %d, %d tokens",
         cJSON_GetArraySize(b), tokens);
  /* the batches lie inside the decode's time; how much of it they fill
   * depends on the machine's load, so no lower bound but > 0 */
  CHECKF(ms > 0 && ms <= 1e3 * secs * 1.001 + 1e-3, "batches %.3f ms of %.3f s", ms, secs);
  /* prefill's bytes: the weights once per chunk of the prompt (16 tokens, one
   * chunk), over the prefill's seconds */
  cJSON *pf = cJSON_GetObjectItem(r, "prefill");
  const double wdec = dec ? cJSON_GetNumberValue(cJSON_GetObjectItem(dec, "weight_bytes_per_token")) : 0;
  const double wpf = pf ? cJSON_GetNumberValue(cJSON_GetObjectItem(pf, "weight_bytes_per_token")) : 0;
  const double pfs = pf ? cJSON_GetNumberValue(cJSON_GetObjectItem(pf, "seconds")) : 0;
  const double gbs = pf ? cJSON_GetNumberValue(cJSON_GetObjectItem(pf, "achieved_GB_per_s")) : 0;
  CHECKF(wdec > 0 && fabs(wpf - wdec / 16) < 1e-6 * wdec && pfs > 0 && fabs(gbs - wdec / pfs / 1e9) < 1e-6 * gbs,
         "prefill %.1f bytes a token (decode %.1f), %.3g GB/s in %.3g s", wpf, wdec, gbs, pfs);
  cJSON_Delete(r);
  CHECK(ok);
}
