/* CPU backend ops against references written here, in double, from the
 * definitions (not from the backend's code), on inputs chosen so that the
 * details matter: RMSNorm on values small enough that eps changes the
 * result, and attention with scores far past the ~88 where expf overflows,
 * over a prefill and decode steps (RoPE at each token's position, the KV
 * cache appended at it, causal softmax). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "test.h"

static float urand(unsigned *s) {
  *s = *s * 1664525u + 1013904223u;
  return (float)((*s >> 8) & 0xFFFF) / 32768.0f - 1.0f;
}

/* out = x / sqrt(mean(x^2) + eps) * w, per row of dim values. */
static void rmsnorm_ref(const float *x, const float *w, double eps, int n, int dim, double *out) {
  for (int r = 0; r < n; r++) {
    double ss = 0;
    for (int i = 0; i < dim; i++) ss += (double)x[r * dim + i] * x[r * dim + i];
    double inv = 1.0 / sqrt(ss / dim + eps);
    for (int i = 0; i < dim; i++) out[r * dim + i] = x[r * dim + i] * inv * w[i];
  }
}

/* Rows scaled from 1e-3 (mean square 3e-7: eps 1e-5 dominates) to 1
 * (eps negligible); the tolerance is 1e-5 relative, where eps's sign moves
 * the small rows' outputs by several times that. */
TEST(cpu_rmsnorm_eps_matters) {
  enum { N = 4, DIM = 96 };
  const float scales[N] = {1e-3f, 3e-3f, 1e-2f, 1.0f};
  float x[N * DIM], w[DIM], out[N * DIM];
  double want[N * DIM];
  unsigned s = 5;
  for (int r = 0; r < N; r++)
    for (int i = 0; i < DIM; i++) x[r * DIM + i] = scales[r] * urand(&s);
  for (int i = 0; i < DIM; i++) w[i] = 1.0f + 0.5f * urand(&s);
  wisp_backend *be;
  CHECK(wisp_cpu_backend_new(1, &be) == WISP_OK);
  wisp_buf *bx = be->buf_new(be, N * DIM), *bo = be->buf_new(be, N * DIM);
  CHECK(bx && bo);
  be->buf_write(be, bx, 0, N * DIM, x);
  wisp_vector vw = {DIM, w, NULL};
  be->rmsnorm(be, bx, &vw, 1e-5f, N, DIM, bo);
  CHECK(be->sync(be) == WISP_OK);
  be->buf_read(be, bo, 0, N * DIM, out);
  be->buf_free(be, bx), be->buf_free(be, bo);
  be->destroy(be);
  rmsnorm_ref(x, w, 1e-5, N, DIM, want);
  for (int r = 0; r < N; r++) {
    double worst = 0, big = 0;
    for (int i = 0; i < DIM; i++) {
      worst = fmax(worst, fabs(out[r * DIM + i] - want[r * DIM + i]));
      big = fmax(big, fabs(want[r * DIM + i]));
    }
    CHECKF(worst <= 1e-5 * big, "row %d (scale %g): off by %g of %g", r, (double)scales[r], worst, big);
  }
}

/* NEOX RoPE of one head at position pos, from the angle itself. */
static void rope_ref(const float *v, int D, int pos, double *out) {
  const int half = D / 2;
  for (int i = 0; i < half; i++) {
    double ang = pos * pow(10000.0, -2.0 * i / D), c = cos(ang), s = sin(ang);
    out[i] = v[i] * c - v[i + half] * s;
    out[i + half] = v[i + half] * c + v[i] * s;
  }
}

/* Causal grouped-query attention of token rows qkv[0..total) (no q/k norm),
 * each token t at position t: out[t][h] = sum_p softmax_p(q.k_p / sqrt(D)) v_p. */
static void attention_ref(const float *qkv, int total, int H, int KVH, int D, double *out, double *max_score) {
  const int row = (H + 2 * KVH) * D;
  double *k = malloc(sizeof(double) * (size_t)total * KVH * D), *q = malloc(sizeof(double) * D);
  double *sc = malloc(sizeof(double) * (size_t)total);
  for (int t = 0; t < total; t++)
    for (int h = 0; h < KVH; h++) rope_ref(qkv + (size_t)t * row + (H + h) * D, D, t, k + ((size_t)t * KVH + h) * D);
  *max_score = -INFINITY;
  for (int t = 0; t < total; t++)
    for (int h = 0; h < H; h++) {
      const int kvh = h / (H / KVH);
      rope_ref(qkv + (size_t)t * row + h * D, D, t, q);
      double mx = -INFINITY, sum = 0;
      for (int p = 0; p <= t; p++) {
        double d = 0;
        for (int i = 0; i < D; i++) d += q[i] * k[((size_t)p * KVH + kvh) * D + i];
        sc[p] = d / sqrt((double)D);
        mx = fmax(mx, sc[p]);
      }
      *max_score = fmax(*max_score, mx);
      for (int p = 0; p <= t; p++) sum += sc[p] = exp(sc[p] - mx);
      double *o = out + ((size_t)t * H + h) * D;
      for (int i = 0; i < D; i++) o[i] = 0;
      for (int p = 0; p <= t; p++) {
        const float *v = qkv + (size_t)p * row + (H + KVH + kvh) * D;
        for (int i = 0; i < D; i++) o[i] += sc[p] / sum * v[i];
      }
    }
  free(k), free(q), free(sc);
}

/* Keys and queries share a large common direction (every component about
 * +-6 with a per-head sign pattern), so scores reach the hundreds; values are
 * small and random. A prefill of 7 tokens, then three decode steps. */
TEST(cpu_attention_matches_reference) {
  enum { H = 4, KVH = 2, D = 32, TOTAL = 10, MAX_POS = 16 };
  const int row = (H + 2 * KVH) * D, half = D / 2;
  static const int calls[] = {7, 1, 1, 1};
  float *qkv = malloc(sizeof(float) * TOTAL * row);
  CHECK(qkv);
  unsigned s = 11;
  for (int t = 0; t < TOTAL; t++)
    for (int c = 0; c < row; c++) {
      const int i = c % D, part = c / D; /* head `part`: q heads, k heads, v heads */
      const float sign = (i * 7 + part) % 3 ? 1.0f : -1.0f;
      qkv[t * row + c] = part < H + KVH ? sign * 6.0f + 1.5f * urand(&s) : urand(&s);
    }
  float *cs = malloc(sizeof(float) * MAX_POS * half), *sn = malloc(sizeof(float) * MAX_POS * half);
  CHECK(cs && sn);
  for (int p = 0; p < MAX_POS; p++)
    for (int i = 0; i < half; i++) {
      double ang = p * pow(10000.0, -2.0 * i / D);
      cs[p * half + i] = (float)cos(ang);
      sn[p * half + i] = (float)sin(ang);
    }
  double *want = malloc(sizeof(double) * TOTAL * H * D), max_score;
  CHECK(want);
  attention_ref(qkv, TOTAL, H, KVH, D, want, &max_score);
  CHECKF(max_score > 150, "the inputs should drive scores far past expf's range; the largest is %g", max_score);

  wisp_backend *be;
  CHECK(wisp_cpu_backend_new(2, &be) == WISP_OK);
  wisp_vector vc = {MAX_POS * half, cs, NULL}, vs = {MAX_POS * half, sn, NULL};
  wisp_buf *kc = be->buf_new(be, (size_t)MAX_POS * KVH * D), *vcache = be->buf_new(be, (size_t)MAX_POS * KVH * D);
  float *got = malloc(sizeof(float) * TOTAL * H * D);
  CHECK(kc && vcache && got);
  int pos0 = 0;
  for (size_t c = 0; c < sizeof calls / sizeof calls[0]; c++) {
    const int n = calls[c];
    wisp_buf *in = be->buf_new(be, (size_t)n * row), *o = be->buf_new(be, (size_t)n * H * D);
    be->buf_write(be, in, 0, (size_t)n * row, qkv + (size_t)pos0 * row);
    wisp_attention_args a = {.qkv = in, .n = n, .pos0 = pos0, .heads = H, .kv_heads = KVH, .head_dim = D,
                             .eps = 1e-6f, .rope_cos = &vc, .rope_sin = &vs, .k_cache = kc, .v_cache = vcache, .out = o};
    be->attention(be, &a);
    CHECK(be->sync(be) == WISP_OK);
    be->buf_read(be, o, 0, (size_t)n * H * D, got + (size_t)pos0 * H * D);
    be->buf_free(be, in), be->buf_free(be, o);
    pos0 += n;
  }
  be->buf_free(be, kc), be->buf_free(be, vcache);
  be->destroy(be);
  for (int t = 0; t < TOTAL; t++)
    for (int j = 0; j < H * D; j++) {
      const double w = want[(size_t)t * H * D + j], g = got[(size_t)t * H * D + j];
      CHECKF(fabs(g - w) <= 1e-3, "token %d, value %d (head %d): %g, the reference %g", t, j, j / D, g, w);
    }
  free(qkv), free(cs), free(sn), free(want), free(got);
}
