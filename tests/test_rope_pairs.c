/* The rope pair layouts of the attention ops (format/tensor.h
 * wisp_rope_pairs): q and k heads whose dims are permuted so that halves
 * pair (i, i + R/2) sits at (2i, 2i + 1) give, with ADJACENT pairs, the
 * attention output HALVES gives on the unpermuted rows (v as it is), on
 * the CPU and on WebGPU, plain (whole-head rope, prefill then a decode
 * step) and gated (partial rotary R < D). Each case also checks that the
 * permuted rows with HALVES pairs give another output, so the layout is
 * what makes them agree. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/webgpu/wgpu_backend.h"
#include "format/tensor.h"
#include "test.h"
#include "util/err.h"
#include "webgpu_fixture.h"

enum { H = 4, KVH = 2, D = 16, MAXP = 8 };

/* Stored dim of halves dim e (< r): llama.cpp's converter's order. */
static int adjacent_dim(int e, int r) { return e >= r ? e : e < r / 2 ? 2 * e : 2 * (e - r / 2) + 1; }

/* Rows of n tokens, width per token, q/k head slots permuted: `heads`
 * heads of D dims from `at` each `stride` apart. */
static void permute_heads(float *row, int at, int heads, int stride, int r) {
  float tmp[D];
  for (int h = 0; h < heads; h++) {
    float *x = row + at + h * stride;
    for (int e = 0; e < D; e++) tmp[adjacent_dim(e, r)] = x[e];
    memcpy(x, tmp, sizeof tmp);
  }
}

/* The op's output for qkv rows (n tokens from pos0; KV caches kept in kc/vc
 * across calls) on backend be. gated: q rows are (q | gate) per head. */
typedef struct {
  wisp_backend *be;
  int gated, r, pairs;
  wisp_vector cs, sn, qn, kn;
  wisp_buf *kc, *vc;
} rope_run;

static int run_op(rope_run *x, const float *qkv, int n, int pos0, float *out) {
  wisp_backend *be = x->be;
  const int width = x->gated ? (2 * H + 2 * KVH) * D : (H + 2 * KVH) * D;
  wisp_buf *in = be->buf_new(be, (size_t)n * width), *o = be->buf_new(be, (size_t)n * H * D);
  if (!in || !o) return 0;
  be->buf_write(be, in, 0, (size_t)n * width, qkv);
  if (x->gated) {
    wisp_gated_attention_args a = {.qkv = in, .n = n, .pos0 = pos0, .heads = H, .kv_heads = KVH, .head_dim = D,
                                   .rotary_dim = x->r, .q_norm = &x->qn, .k_norm = &x->kn, .eps = 1e-6f,
                                   .rope_cos = &x->cs, .rope_sin = &x->sn, .k_cache = x->kc, .v_cache = x->vc,
                                   .out = o, .rope_pairs = x->pairs};
    be->attention_gated(be, &a);
  } else {
    wisp_attention_args a = {.qkv = in, .n = n, .pos0 = pos0, .heads = H, .kv_heads = KVH, .head_dim = D,
                             .q_norm = &x->qn, .k_norm = &x->kn, .eps = 1e-6f, .rope_cos = &x->cs,
                             .rope_sin = &x->sn, .k_cache = x->kc, .v_cache = x->vc, .out = o,
                             .rope_pairs = x->pairs};
    be->attention(be, &a);
  }
  be->buf_read(be, o, 0, (size_t)n * H * D, out);
  be->buf_free(be, in);
  be->buf_free(be, o);
  return 1;
}

/* Host copies of the vectors a backend was given, freed after it is
 * destroyed (a backend may key its uploads by the host pointer). */
static float *g_keep[64];
static int g_nkeep;
static float *kept(size_t n) {
  float *p = calloc(n, sizeof(float));
  if (p && g_nkeep < 64) g_keep[g_nkeep++] = p;
  else free(p), p = NULL;
  return p;
}
static void free_kept(void) {
  while (g_nkeep) free(g_keep[--g_nkeep]);
}

/* worst |a - b| over max |b| */
static double rel(const float *a, const float *b, size_t n) {
  double d = 0, m = 1e-30;
  for (size_t i = 0; i < n; i++) d = fmax(d, fabs((double)a[i] - b[i])), m = fmax(m, fabs((double)b[i]));
  return d / m;
}

/* One layout on backend `be`: a prefill of 5 tokens, then one decode step;
 * returns both outputs (6 tokens) in out. */
static int run_layout(wisp_backend *be, int gated, int r, int pairs, const float *qkv, const float *norms,
                      float *out) {
  const int half = r / 2;
  float *cs = kept(MAXP * D), *sn = kept(MAXP * D), *qn = kept(D), *kn = kept(D);
  if (!cs || !sn || !qn || !kn) return 0;
  for (int p = 0; p < MAXP; p++)
    for (int i = 0; i < half; i++) {
      const float ang = (float)p * powf(10000.0f, -2.0f * (float)i / (float)r);
      cs[p * half + i] = cosf(ang), sn[p * half + i] = sinf(ang);
    }
  /* the norms' weights follow q/k through the permutation */
  for (int e = 0; e < D; e++) {
    const int s = pairs == WISP_ROPE_ADJACENT ? adjacent_dim(e, r) : e;
    qn[s] = norms[e], kn[s] = norms[D + e];
  }
  rope_run x = {.be = be, .gated = gated, .r = r, .pairs = pairs, .cs = {MAXP * half, cs, NULL},
                .sn = {MAXP * half, sn, NULL}, .qn = {D, qn, NULL}, .kn = {D, kn, NULL}};
  int ok = !be->prepare_vector(be, &x.cs) && !be->prepare_vector(be, &x.sn) && !be->prepare_vector(be, &x.qn) &&
           !be->prepare_vector(be, &x.kn);
  x.kc = be->buf_new(be, (size_t)MAXP * KVH * D);
  x.vc = be->buf_new(be, (size_t)MAXP * KVH * D);
  const int width = gated ? (2 * H + 2 * KVH) * D : (H + 2 * KVH) * D;
  ok = ok && x.kc && x.vc && run_op(&x, qkv, 5, 0, out) && run_op(&x, qkv + 5 * width, 1, 5, out + 5 * H * D);
  if (ok && be->sync) ok = !be->sync(be);
  if (x.kc) be->buf_free(be, x.kc);
  if (x.vc) be->buf_free(be, x.vc);
  return ok;
}

static void check_backend(wisp_backend *be, const char *name) {
  for (int gated = 0; gated < 2; gated++) {
    const int r = gated ? D / 2 : D, width = gated ? (2 * H + 2 * KVH) * D : (H + 2 * KVH) * D;
    uint64_t seed = 7 + (uint64_t)gated;
    float qkv[6 * (2 * H + 2 * KVH) * D], perm[sizeof qkv / sizeof qkv[0]], norms[2 * D];
    for (int i = 0; i < 6 * width; i++) qkv[i] = 2.0f * test_rand_float(&seed);
    for (int i = 0; i < 2 * D; i++) norms[i] = 1.0f + 0.3f * test_rand_float(&seed);
    memcpy(perm, qkv, sizeof qkv);
    for (int t = 0; t < 6; t++) {
      float *row = perm + t * width;
      if (gated) { /* q is the first D of each head's (q | gate) */
        permute_heads(row, 0, H, 2 * D, r);
        permute_heads(row, 2 * H * D, KVH, D, r);
      } else {
        permute_heads(row, 0, H + KVH, D, r); /* q heads then k heads, back to back */
      }
    }
    float want[6 * H * D], got[6 * H * D], wrong[6 * H * D];
    CHECKF(run_layout(be, gated, r, WISP_ROPE_HALVES, qkv, norms, want), "%s: %s", name, wisp_last_error());
    CHECKF(run_layout(be, gated, r, WISP_ROPE_ADJACENT, perm, norms, got), "%s: %s", name, wisp_last_error());
    CHECKF(run_layout(be, gated, r, WISP_ROPE_HALVES, perm, norms, wrong), "%s: %s", name, wisp_last_error());
    const double e = rel(got, want, sizeof want / sizeof want[0]), w = rel(wrong, want, sizeof want / sizeof want[0]);
    CHECKF(e < 1e-5, "%s %s attention: adjacent pairs on permuted rows differ from halves by %.3g", name,
           gated ? "gated" : "plain", e);
    CHECKF(w > 1e-2, "%s %s attention: permuted rows with halves pairs agree (%.3g): the test sees no layout", name,
           gated ? "gated" : "plain", w);
    printf("     %s %s (R %d of %d): adjacent vs halves %.2g, halves on permuted rows %.2g\n", name,
              gated ? "gated" : "plain", r, D, e, w);
  }
}

TEST(rope_pairs_adjacent_on_permuted_rows_equals_halves_cpu) {
  wisp_backend *be = NULL;
  CHECKF(wisp_cpu_backend_new(1, &be) == WISP_OK, "%s", wisp_last_error());
  check_backend(be, "cpu");
  be->destroy(be);
  free_kept();
}

TEST(rope_pairs_adjacent_on_permuted_rows_equals_halves_webgpu) {
  WEBGPU_OR_SKIP(d);
  wisp_wgpu_backend_opts o = {.device = d, .subgroups = 1};
  wisp_backend *be = NULL;
  CHECKF(wisp_wgpu_backend_new(&o, &be) == WISP_OK, "%s", wisp_last_error());
  check_backend(be, "webgpu");
  be->destroy(be);
  free_kept();
}
