/* Attention at longer contexts on the WebGPU backend: flash-decoding (a
 * decode token's keys split over workgroups and merged) at depths of a few
 * hundred to ~2,000 keys against the CPU backend and against the unsplit
 * kernel, for several split rules (wisp_wgpu_split_rule: the cap, the long
 * part that keeps a split's keys bounded, split counts that do not divide
 * the key tiles), for plain attention (LFM2 / dense) and the gated
 * attention of Qwen 3.5; and the KV caches of a session's slots that grow
 * together in their shared buffer (wgpu_kv.c). Small heads keep each case
 * to a few seconds on lavapipe. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/webgpu/wgpu_backend.h"
#include "backend/webgpu/wgpu_core.h"
#include "test.h"
#include "util/err.h"
#include "webgpu_fixture.h"

#define TOL_LONG 2e-4 /* worst |gpu - cpu| relative to max|cpu| (summation order differs) */
#define TOL_KV16 3e-3 /* with packed-f16 caches on the GPU (keys and values rounded) */

/* A split rule of the WebGPU backend: attnSplits and attnSplitsLong. */
typedef struct {
  uint32_t cap, tiles, most;
  const char *what;
  int prefill; /* tuning attnPrefill */
  int kv16;    /* packed-f16 KV caches on the GPU */
  uint32_t long_min, long_wgs; /* tuning attnLong: attn_decode_long.wgsl from long_min keys (0: never) */
} rule;

static const rule k_rules[] = {
    {1, 0, 0, "unsplit", 0, 0, 0, 0},
    {32, 0, 0, "cap 32 (the default at short contexts)", 0, 0, 0, 0},
    {3, 0, 0, "cap 3 (splits of uneven tiles)", 0, 0, 0, 0},
    {4, 5, 13, "cap 4, long part 5 tiles a split up to 13", 0, 0, 0, 0},
    {2, 3, 1000, "cap 2, long part 3 tiles a split (uncapped here)", 0, 0, 0, 0},
    /* attn_decode_long.wgsl (a workgroup per KV head and split): 2 splits
     * of uneven tiles at 1,204 keys; a tile a split; from the first key;
     * packed-f16 caches */
    {32, 0, 0, "long kernel from 300 keys, 4 workgroups", 0, 0, 300, 4},
    {32, 0, 0, "long kernel from 1 key, a tile a split", 0, 0, 1, 1000},
    {2, 0, 0, "long kernel from 1 key, unsplit", 0, 0, 1, 1},
    {32, 0, 0, "long kernel from 1 key, f16 caches", 0, 1, 1, 1000},
};
#define N_RULES (sizeof k_rules / sizeof k_rules[0])

typedef struct {
  wisp_backend *cpu, *gpu;
} duo;

static unsigned g_attn_rows; /* tuning attnRows of the next duo_open (0: the default) */

static int duo_open(duo *p, wisp_wgpu_device *d, const rule *r) {
  memset(p, 0, sizeof *p);
  wisp_wgpu_backend_opts o = {0};
  o.attn_prefill = r->prefill;
  o.attn_rows = g_attn_rows;
  o.kv_f16 = r->kv16;
  o.device = d, o.subgroups = -1, o.attn_max_splits = r->cap, o.attn_long_tiles = r->tiles, o.attn_long_most = r->most;
  o.attn_decode_long_min = r->long_min, o.attn_decode_long_wgs = r->long_wgs;
  if (!r->tiles) o.attn_long_tiles = o.attn_long_most = 1; /* no long part (0 would take the table's default) */
  if (wisp_cpu_backend_new(1, &p->cpu)) return 0;
  if (wisp_wgpu_backend_new(&o, &p->gpu)) {
    p->cpu->destroy(p->cpu);
    p->cpu = NULL;
    return 0;
  }
  return 1;
}

static void duo_close(duo *p) {
  if (p->cpu) p->cpu->destroy(p->cpu);
  if (p->gpu) p->gpu->destroy(p->gpu);
}

typedef struct {
  wisp_buf *c, *g;
  size_t n;
} two;

static two two_new(duo *p, size_t n) { return (two){p->cpu->buf_new(p->cpu, n), p->gpu->buf_new(p->gpu, n), n}; }

static void two_free(duo *p, two *b) {
  if (b->c) p->cpu->buf_free(p->cpu, b->c);
  if (b->g) p->gpu->buf_free(p->gpu, b->g);
}

/* Both buffers of b get the same random values in [-scale, scale). */
static int two_fill(duo *p, two *b, uint64_t *seed, float scale) {
  float *v = malloc(sizeof(float) * (b->n ? b->n : 1));
  if (!v || !b->c || !b->g) {
    free(v);
    return 0;
  }
  for (size_t i = 0; i < b->n; i++) v[i] = scale * test_rand_float(seed);
  p->cpu->buf_write(p->cpu, b->c, 0, b->n, v);
  p->gpu->buf_write(p->gpu, b->g, 0, b->n, v);
  free(v);
  return 1;
}

/* |gpu - cpu| over n values relative to max|cpu|; the GPU values in got
 * (n floats) when not NULL. -1 when a read failed. */
static double rel_err(duo *p, const two *b, size_t n, float *got) {
  float *c = malloc(sizeof(float) * n), *g = got ? got : malloc(sizeof(float) * n);
  double e = -1;
  if (c && g) {
    p->cpu->buf_read(p->cpu, b->c, 0, n, c);
    p->gpu->buf_read(p->gpu, b->g, 0, n, g);
    if (!p->gpu->sync(p->gpu)) {
      double mx = 0, d = 0;
      for (size_t i = 0; i < n; i++) {
        mx = fmax(mx, fabs(c[i]));
        d = fmax(d, fabs((double)g[i] - c[i]));
      }
      e = isnan(d) ? INFINITY : d / (mx > 0 ? mx : 1);
    }
  }
  free(c);
  if (!got) free(g);
  return e;
}

/* Rope tables of `rows` positions for rotary dims `rot` (NEOX halves). */
static int rope_tables(int rows, int rot, wisp_vector *cs, wisp_vector *sn) {
  const int half = rot / 2;
  float *c = malloc(sizeof(float) * (size_t)rows * half), *s = malloc(sizeof(float) * (size_t)rows * half);
  for (int pos = 0; c && s && pos < rows; pos++)
    for (int i = 0; i < half; i++) {
      double ang = pos * pow(10000.0, -2.0 * i / rot);
      c[pos * half + i] = (float)cos(ang);
      s[pos * half + i] = (float)sin(ang);
    }
  *cs = (wisp_vector){rows * half, c, NULL};
  *sn = (wisp_vector){rows * half, s, NULL};
  return c && s;
}

static wisp_vector norm_weights(int n, uint64_t *seed) {
  float *w = malloc(sizeof(float) * (size_t)n);
  for (int i = 0; w && i < n; i++) w[i] = 1.0f + 0.3f * test_rand_float(seed);
  return (wisp_vector){n, w, NULL};
}

enum { MAXPOS = 1280 };

/* The calls of a case: a decode token at depth 0, a prefill, decode tokens
 * (n = 1), another prefill, more decode tokens: depths 0..1,204. */
static const int k_calls[] = {1, 300, 1, 1, 900, 1, 1};
#define N_CALLS (int)(sizeof k_calls / sizeof k_calls[0])

/* One attention case (gated: Qwen 3.5's; else LFM2's plain attention with
 * q/k norms) on backend pair p: every call's output against the CPU within
 * TOL_LONG, the decode tokens' outputs (all heads) into dec[] for the
 * comparison between rules. *worst: the largest error. */
typedef struct {
  int H, KVH, D;
  const int *calls;
  int ncalls;
} shape;

static const shape k_small = {4, 2, 32, k_calls, N_CALLS};

static int long_case(duo *p, int gated, const shape *sh, float *dec, double *worst, char *err, size_t cap) {
  const int H = sh->H, KVH = sh->KVH, D = sh->D, rot = gated ? D / 2 : D;
  uint64_t seed = gated ? 77 : 71;
  wisp_vector cs, sn, qn = norm_weights(D, &seed), kn = norm_weights(D, &seed);
  int ok = rope_tables(MAXPOS, rot, &cs, &sn) && qn.data && kn.data;
  wisp_vector *vecs[4] = {&cs, &sn, &qn, &kn};
  for (int i = 0; ok && i < 4; i++)
    ok = !p->cpu->prepare_vector(p->cpu, vecs[i]) && !p->gpu->prepare_vector(p->gpu, vecs[i]);
  const size_t kvn = (size_t)MAXPOS * KVH * D;
  two kc = two_new(p, kvn), vc = two_new(p, kvn);
  const int kv16 = as_g(p->gpu)->kv16;
  if (kv16) { /* the backend's own half-size caches */
    p->gpu->buf_free(p->gpu, kc.g);
    p->gpu->buf_free(p->gpu, vc.g);
    kc.g = p->gpu->kv_buf_new(p->gpu, kvn);
    vc.g = p->gpu->kv_buf_new(p->gpu, kvn);
  }
  const double tol = kv16 ? TOL_KV16 : TOL_LONG;
  ok = ok && kc.c && kc.g && vc.c && vc.g;
  const int row = gated ? (2 * H + 2 * KVH) * D : (H + 2 * KVH) * D;
  int pos0 = 0, nd = 0;
  *worst = 0;
  for (int c = 0; ok && c < sh->ncalls; c++) {
    const int n = sh->calls[c];
    two qkv = two_new(p, (size_t)n * row), out = two_new(p, (size_t)n * H * D);
    ok = two_fill(p, &qkv, &seed, 2.0f) && out.c && out.g;
    if (ok && gated) {
      wisp_gated_attention_args a = {.n = n, .pos0 = pos0, .heads = H, .kv_heads = KVH, .head_dim = D,
                                     .rotary_dim = rot, .q_norm = &qn, .k_norm = &kn, .eps = 1e-6f,
                                     .rope_cos = &cs, .rope_sin = &sn};
      a.qkv = qkv.c, a.k_cache = kc.c, a.v_cache = vc.c, a.out = out.c;
      p->cpu->attention_gated(p->cpu, &a);
      a.qkv = qkv.g, a.k_cache = kc.g, a.v_cache = vc.g, a.out = out.g;
      p->gpu->attention_gated(p->gpu, &a);
    } else if (ok) {
      wisp_attention_args a = {.n = n, .pos0 = pos0, .heads = H, .kv_heads = KVH, .head_dim = D, .q_norm = &qn,
                               .k_norm = &kn, .eps = 1e-5f, .rope_cos = &cs, .rope_sin = &sn};
      a.qkv = qkv.c, a.k_cache = kc.c, a.v_cache = vc.c, a.out = out.c;
      p->cpu->attention(p->cpu, &a);
      a.qkv = qkv.g, a.k_cache = kc.g, a.v_cache = vc.g, a.out = out.g;
      p->gpu->attention(p->gpu, &a);
    }
    double e = ok ? rel_err(p, &out, out.n, n == 1 ? dec + (size_t)nd * H * D : NULL) : -1;
    nd += n == 1;
    if (e < 0 || e > tol) {
      snprintf(err, cap, "%s H %d KVH %d D %d call %d (pos0 %d, n %d): error %.3g (%s)", gated ? "gated" : "plain", H,
               KVH, D, c, pos0, n, e,
               e < 0 ? wisp_last_error() : "over the tolerance");
      ok = 0;
    }
    if (e > *worst) *worst = e;
    two_free(p, &qkv);
    two_free(p, &out);
    pos0 += n;
  }
  two_free(p, &kc);
  two_free(p, &vc);
  for (int i = 0; i < 4; i++) free((void *)vecs[i]->data);
  return ok;
}

/* The decode tokens' depths in k_calls. */
static const int k_depths[] = {0, 301, 302, 1203, 1204};

/* The splits attn_decode_long.wgsl takes over `keys` keys: 128-key tiles,
 * as many splits as give about wgs workgroups over kvh KV heads, a whole
 * number of tiles a split (wgpu_attention_long.c's rule, restated). */
static uint64_t long_splits(int keys, int kvh, uint32_t wgs) {
  const uint32_t ntile = (uint32_t)(keys - 1) / 128 + 1;
  uint32_t want = (wgs + kvh - 1) / kvh;
  if (want > ntile) want = ntile;
  if (!want) want = 1;
  const uint32_t tps = (ntile + want - 1) / want;
  return (ntile + tps - 1) / tps;
}

/* Split decode against the CPU and against the unsplit kernel, at depths
 * 0, 301, 302, 1203 and 1204, for every rule of k_rules (the gated
 * attention: the unsplit kernel, uneven tiles and the long part). */
static void split_suite(int gated) {
  WEBGPU_OR_SKIP(d);
  enum { NDEC = 5, HD = 4 * 32 };
  static float dec[N_RULES][NDEC * HD];
  uint64_t splits[N_RULES] = {0};
  for (size_t r = 0; r < N_RULES; r++) {
    if (gated && (r == 1 || r == 4)) continue;
    duo p;
    CHECKF(duo_open(&p, d, &k_rules[r]), "open: %s", wisp_last_error());
    char err[300] = "";
    double worst = 0;
    wisp_wgpu_backend_stats s0 = {0}, s1 = {0};
    wisp_wgpu_backend_stats_get(p.gpu, &s0);
    int ok = long_case(&p, gated, &k_small, dec[r], &worst, err, sizeof err);
    wisp_wgpu_backend_stats_get(p.gpu, &s1);
    splits[r] = s1.attn_splits - s0.attn_splits;
    duo_close(&p);
    CHECKF(ok, "%s: %s", k_rules[r].what, err);
    double vs = 0; /* against the unsplit kernel (rule 0) */
    for (int i = 0; i < NDEC * HD; i++) vs = fmax(vs, fabs((double)dec[r][i] - dec[0][i]));
    CHECKF(vs <= (k_rules[r].kv16 ? TOL_KV16 : TOL_LONG * 10), "%s: %.3g from the unsplit kernel", k_rules[r].what, vs);
    /* the long kernel ran for every decode token of long_min keys or more, and only those */
    uint64_t want_long = 0;
    for (int i = 0; i < NDEC; i++) want_long += k_rules[r].long_min && k_depths[i] + 1 >= (int)k_rules[r].long_min;
    CHECKF(s1.attn_long - s0.attn_long == want_long, "%s: %llu long-kernel attentions, %llu expected",
           k_rules[r].what, (unsigned long long)(s1.attn_long - s0.attn_long), (unsigned long long)want_long);
    printf("     %s, %s: max error %.3g of max|cpu|, %.3g from unsplit\n", gated ? "gated" : "plain",
           k_rules[r].what, worst, vs);
  }
  /* The rules split as wisp_wgpu_key_splits says (the gated counter counts
   * only the plain kernel's splits: its own checks are the outputs) */
  if (!gated) {
    uint64_t want[N_RULES] = {0};
    for (size_t r = 0; r < N_RULES; r++) {
      wisp_wgpu_backend_opts o = {0};
      o.attn_long_tiles = k_rules[r].tiles, o.attn_long_most = k_rules[r].most;
      wgpu_backend g = {0};
      g.max_splits = k_rules[r].cap;
      g.opts = o;
      for (int i = 0; i < NDEC; i++) {
        uint32_t tps;
        if (k_rules[r].long_min && k_depths[i] + 1 >= (int)k_rules[r].long_min)
          want[r] += long_splits(k_depths[i] + 1, k_small.KVH, k_rules[r].long_wgs);
        else
          want[r] += wisp_wgpu_key_splits((uint32_t)k_depths[i] / 32 + 1, wisp_wgpu_split_rule(&g), &tps);
      }
      CHECKF(splits[r] == want[r], "%s: %llu splits, %llu expected", k_rules[r].what, (unsigned long long)splits[r],
             (unsigned long long)want[r]);
    }
    /* the long part splits more than the cap alone at ~1,200 keys */
    CHECK(want[3] > 4 + 3 * 3 && want[4] > 4 + 3 * 2);
  }
}

TEST(webgpu_attn_long_split_decode_plain) { split_suite(0); }

TEST(webgpu_attn_long_split_decode_gated) { split_suite(1); }

/* attn_decode_long.wgsl on the query-group shapes of real models (G query
 * heads a KV head: 8, 4 with head dim 256, 7, 1), plain and gated, f32 and
 * f16 caches, against the CPU; a shape it cannot take (head dim 48: not a
 * multiple of 16) runs the other kernels, correctly. */
TEST(webgpu_attn_long_decode_kernel_shapes) {
  WEBGPU_OR_SKIP(d);
  static const int calls[] = {1, 200, 1, 1};
  static const struct {
    int H, KVH, D, gated, kv16, takes;
  } cases[] = {{8, 1, 64, 0, 0, 1},  {8, 2, 256, 1, 0, 1}, {8, 2, 256, 1, 1, 1}, {14, 2, 64, 0, 1, 1},
               {2, 2, 128, 0, 0, 1}, {4, 2, 48, 0, 0, 0},  {4, 2, 48, 1, 0, 0}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const rule r = {32, 0, 0, "long kernel", 0, cases[i].kv16, 1, 3};
    const shape sh = {cases[i].H, cases[i].KVH, cases[i].D, calls, (int)(sizeof calls / sizeof calls[0])};
    duo p;
    CHECKF(duo_open(&p, d, &r), "open: %s", wisp_last_error());
    static float dec[3 * 14 * 256];
    char err[300] = "";
    double worst = 0;
    wisp_wgpu_backend_stats s0 = {0}, s1 = {0};
    wisp_wgpu_backend_stats_get(p.gpu, &s0);
    int ok = long_case(&p, cases[i].gated, &sh, dec, &worst, err, sizeof err);
    wisp_wgpu_backend_stats_get(p.gpu, &s1);
    duo_close(&p);
    CHECKF(ok, "%s", err);
    const uint64_t ran = s1.attn_long - s0.attn_long;
    CHECKF(ran == (cases[i].takes ? 3u : 0u), "H %d KVH %d D %d: %llu long-kernel attentions", cases[i].H,
           cases[i].KVH, cases[i].D, (unsigned long long)ran);
    printf("     %s H %d KVH %d D %d%s: max error %.3g of max|cpu|\n", cases[i].gated ? "gated" : "plain", cases[i].H,
           cases[i].KVH, cases[i].D, cases[i].kv16 ? " f16 KV" : "", worst);
  }
}

/* One decode token over 8,001 keys (caches filled directly, no prefill):
 * attn_decode_long.wgsl in 63 splits, merged by the wide merge
 * (attn_merge_wide.wgsli), whose four-at-a-time sums run only past 4 x
 * (WG / D) splits, against the CPU; plain, gated, and plain with a sliding
 * window. */
TEST(webgpu_attn_long_many_splits) {
  WEBGPU_OR_SKIP(d);
  enum { H = 2, KVH = 1, D = 16, POS = 8000, ROWS = 8001, WINDOW = 3000 };
  /* case 2: plain attention with a sliding window of 3,000 keys (Gemma 3's
   * sliding layers): 24 splits over the window's keys only */
  for (int gated = 0; gated < 3; gated++) {
    const int window = gated == 2 ? WINDOW : 0, want_splits = window ? 24 : 63;
    const rule r = {32, 0, 0, "long kernel, 63 splits", 0, 0, 1, 4096};
    duo p;
    CHECKF(duo_open(&p, d, &r), "open: %s", wisp_last_error());
    uint64_t seed = 91 + (uint64_t)gated;
    const char *what = gated == 1 ? "gated" : window ? "plain, window 3000" : "plain";
    const int rot = gated == 1 ? D / 2 : D;
    wisp_vector cs, sn, qn = norm_weights(D, &seed), kn = norm_weights(D, &seed);
    int ok = rope_tables(ROWS, rot, &cs, &sn) && qn.data && kn.data;
    wisp_vector *vecs[4] = {&cs, &sn, &qn, &kn};
    for (int i = 0; ok && i < 4; i++)
      ok = !p.cpu->prepare_vector(p.cpu, vecs[i]) && !p.gpu->prepare_vector(p.gpu, vecs[i]);
    two kc = two_new(&p, (size_t)ROWS * KVH * D), vc = two_new(&p, (size_t)ROWS * KVH * D);
    const int row = gated == 1 ? (2 * H + 2 * KVH) * D : (H + 2 * KVH) * D;
    two qkv = two_new(&p, (size_t)row), out = two_new(&p, (size_t)H * D);
    ok = ok && two_fill(&p, &kc, &seed, 1.0f) && two_fill(&p, &vc, &seed, 1.0f) && two_fill(&p, &qkv, &seed, 2.0f) &&
         out.c && out.g;
    wisp_wgpu_backend_stats s0 = {0}, s1 = {0};
    wisp_wgpu_backend_stats_get(p.gpu, &s0);
    if (ok && gated == 1) {
      wisp_gated_attention_args a = {.n = 1, .pos0 = POS, .heads = H, .kv_heads = KVH, .head_dim = D, .rotary_dim = rot,
                                     .q_norm = &qn, .k_norm = &kn, .eps = 1e-6f, .rope_cos = &cs, .rope_sin = &sn};
      a.qkv = qkv.c, a.k_cache = kc.c, a.v_cache = vc.c, a.out = out.c;
      p.cpu->attention_gated(p.cpu, &a);
      a.qkv = qkv.g, a.k_cache = kc.g, a.v_cache = vc.g, a.out = out.g;
      p.gpu->attention_gated(p.gpu, &a);
    } else if (ok) {
      wisp_attention_args a = {.n = 1, .pos0 = POS, .heads = H, .kv_heads = KVH, .head_dim = D, .q_norm = &qn,
                               .k_norm = &kn, .eps = 1e-5f, .rope_cos = &cs, .rope_sin = &sn, .window = window};
      a.qkv = qkv.c, a.k_cache = kc.c, a.v_cache = vc.c, a.out = out.c;
      p.cpu->attention(p.cpu, &a);
      a.qkv = qkv.g, a.k_cache = kc.g, a.v_cache = vc.g, a.out = out.g;
      p.gpu->attention(p.gpu, &a);
    }
    const double e = ok ? rel_err(&p, &out, out.n, NULL) : -1;
    wisp_wgpu_backend_stats_get(p.gpu, &s1);
    two_free(&p, &kc);
    two_free(&p, &vc);
    two_free(&p, &qkv);
    two_free(&p, &out);
    for (int i = 0; i < 4; i++) free((void *)vecs[i]->data);
    duo_close(&p);
    CHECKF(ok && e >= 0, "%s: %s", what, wisp_last_error());
    CHECKF(s1.attn_long - s0.attn_long == 1 && s1.attn_splits - s0.attn_splits == (uint64_t)want_splits,
           "%s: %llu long-kernel attentions in %llu splits, 1 in %d expected", what,
           (unsigned long long)(s1.attn_long - s0.attn_long), (unsigned long long)(s1.attn_splits - s0.attn_splits),
           want_splits);
    CHECKF(e <= TOL_LONG, "%s: error %.3g of max|cpu| over %d keys", what, e, window ? window : ROWS);
    printf("     %s, %d keys in %d splits: max error %.3g of max|cpu|\n", what, window ? window : ROWS, want_splits, e);
  }
}

/* The split rule: a split a tile up to the cap, then (long part) a split
 * per TILES tiles up to MOST; tiles a split cover the keys exactly once. */
TEST(webgpu_attn_long_split_rule) {
  wgpu_backend g = {0};
  g.max_splits = 32;
  g.opts.attn_long_tiles = 4;
  g.opts.attn_long_most = 256;
  const uint32_t rule = wisp_wgpu_split_rule(&g);
  CHECK(wisp_wgpu_split_most(rule) == 256);
  static const struct {
    uint32_t ntile, splits, tps;
  } want[] = {{1, 1, 0xFFFFFFFFu}, {2, 2, 1}, {32, 32, 1}, {64, 32, 2}, {128, 32, 4},
              {256, 64, 4},        {257, 65, 4}, {1024, 256, 4}, {2048, 256, 8}, {2049, 228, 9}};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    uint32_t tps = 0;
    const uint32_t s = wisp_wgpu_key_splits(want[i].ntile, rule, &tps);
    CHECKF(s == want[i].splits && tps == want[i].tps, "%u tiles: %u splits of %u, want %u of %u", want[i].ntile, s, tps,
           want[i].splits, want[i].tps);
    if (s > 1) CHECKF((s - 1) * tps < want[i].ntile && s * tps >= want[i].ntile, "%u tiles uncovered", want[i].ntile);
  }
  /* a cap of 1 is no split at any context */
  g.max_splits = 1;
  CHECK(wisp_wgpu_split_most(wisp_wgpu_split_rule(&g)) == 1);
  g.max_splits = 32;
  /* without the long part, the cap alone (the rule of a plain max_splits) */
  g.opts.attn_long_tiles = 0;
  uint32_t tps = 0;
  const uint32_t plain = wisp_wgpu_split_rule(&g);
  CHECK(wisp_wgpu_split_most(plain) == 32 && wisp_wgpu_key_splits(1024, plain, &tps) == 32 && tps == 32);
  CHECK(wisp_wgpu_key_splits(1024, 32, &tps) == 32 && tps == 32);
}

/* Three slots' KV caches in one shared buffer: growing slot 1 re-strides
 * the buffer, every slot keeps its values (zeros past them) and they stay
 * in one device buffer; with a binding too small for that, the growing
 * slot moves to a buffer of its own and the others stay. */
TEST(webgpu_kv_slots_grow_together) {
  WEBGPU_OR_SKIP(d);
  for (int small = 0; small < 2; small++) {
    wisp_wgpu_backend_opts o = {0};
    o.device = d;
    o.max_binding = small ? 3 * 1024 * 4 : 0; /* 3 slots of 1,024 values fit, not of 2,048 */
    wisp_backend *be = NULL;
    CHECKF(wisp_wgpu_backend_new(&o, &be) == WISP_OK, "%s", wisp_last_error());
    enum { N0 = 1000, N1 = 2000 };
    wisp_buf *s[3] = {NULL, NULL, NULL};
    CHECKF(be->buf_new_slots(be, N0, 1, 3, s) == WISP_OK, "%s", wisp_last_error());
    static float v[3][N1], got[N1];
    for (int k = 0; k < 3; k++) {
      for (int i = 0; i < N0; i++) v[k][i] = (float)(k * 10000 + i);
      be->buf_write(be, s[k], 0, N0, v[k]);
    }
    CHECKF(be->kv_buf_grow(be, s[1], N1) == WISP_OK, "%s", wisp_last_error());
    int same = 1;
    for (int k = 0; k < 3; k++) {
      be->buf_read(be, s[k], 0, k == 1 ? N1 : N0, got);
      for (int i = 0; i < (k == 1 ? N1 : N0); i++) same &= got[i] == v[k][i];
    }
    const int shared = s[0]->g.b == s[1]->g.b && s[2]->g.b == s[1]->g.b;
    const int moved = s[1]->parent == NULL && s[0]->g.b == s[2]->g.b && s[0]->g.b != s[1]->g.b;
    wisp_wgpu_backend_stats st = {0};
    wisp_wgpu_backend_stats_get(be, &st);
    for (int k = 0; k < 3; k++) be->buf_free(be, s[k]);
    wisp_status e = be->sync(be);
    be->destroy(be);
    CHECKF(e == WISP_OK, "%s", wisp_last_error());
    CHECKF(same, "binding %s: a slot's values changed", small ? "small" : "whole");
    CHECKF(small ? moved : shared, "binding %s: slots %s", small ? "small" : "whole",
           small ? "not moved out" : "not in one buffer");
    CHECK(st.kv_grows == 1);
  }
}

/* Several KV caches grown together (a request's, before its first step)
 * share one submit: the buffers they leave wait for the next one, which
 * carries the copies out of them, and go then; every value is kept. */
TEST(webgpu_kv_caches_grow_in_one_submit) {
  WEBGPU_OR_SKIP(d);
  wisp_wgpu_backend_opts o = {0};
  o.device = d;
  wisp_backend *be = NULL;
  CHECKF(wisp_wgpu_backend_new(&o, &be) == WISP_OK, "%s", wisp_last_error());
  enum { N = 4, N0 = 700, N1 = 1400 };
  wisp_buf *c[N] = {NULL};
  static float v[N][N1], got[N1];
  int made = 1;
  for (int k = 0; k < N; k++) {
    made &= (c[k] = be->kv_buf_new(be, N0)) != NULL;
    for (int i = 0; made && i < N0; i++) v[k][i] = (float)(k * 1000 + i);
    if (made) be->buf_write(be, c[k], 0, N0, v[k]);
  }
  wisp_status e = made ? be->sync(be) : WISP_ENOMEM;
  wisp_wgpu_backend_stats s0 = {0}, s1 = {0};
  wisp_wgpu_backend_stats_get(be, &s0);
  for (int k = 0; !e && k < N; k++) e = be->kv_buf_grow(be, c[k], N1);
  wisp_wgpu_backend_stats_get(be, &s1);
  const int waiting = as_g(be)->n_retired;
  int same = 1;
  for (int k = 0; !e && k < N; k++) {
    be->buf_read(be, c[k], 0, N1, got);
    for (int i = 0; i < N1; i++) same &= got[i] == (i < N0 ? v[k][i] : 0.0f);
  }
  if (!e) e = be->sync(be);
  const int left = as_g(be)->n_retired;
  for (int k = 0; k < N; k++)
    if (c[k]) be->buf_free(be, c[k]);
  be->destroy(be);
  CHECKF(!e, "%s", wisp_last_error());
  CHECKF(s1.kv_grows - s0.kv_grows == N && s1.submits == s0.submits, "%llu grows took %llu submits",
         (unsigned long long)(s1.kv_grows - s0.kv_grows), (unsigned long long)(s1.submits - s0.submits));
  CHECKF(waiting == N && left == 0, "old buffers waiting %d, left after the read %d", waiting, left);
  CHECK(same);
}

/* The tiled flash-attention prefill (attn_flash_tiled.wgsl, tuning
 * attnPrefill=2) against the CPU: prompts that cross its query and key
 * tiles, a second prompt chunk after cached keys, grouped heads (G = 2,
 * 4), head dims 32, 128 and 256 (Qwen 3.5's gated), f32 and packed-f16
 * caches, a query row a lane group and two (tuning attnRows; with two,
 * a group of twice the lanes, every K and V read serving both rows; unset,
 * two for head dim 256 only); and the dispatches it took. Decode tokens between
 * the chunks run the split decode, so the caches it wrote are read back by
 * another kernel. */
TEST(webgpu_attn_long_tiled_prefill) {
  WEBGPU_OR_SKIP(d);
  if (!d->has_subgroups) SKIP("the tiled prefill needs subgroups");
  static const int calls[] = {77, 1, 300, 1, 5};
  static const shape plain[] = {{4, 2, 32, calls, 5}, {8, 2, 128, calls, 5}};
  static const shape gated[] = {{2, 1, 256, calls, 5}};
  static float dec[2 * 8 * 128];
  for (unsigned rows = 0; rows <= 2; rows++) /* 0: unset, two rows for head dim 256 */
  for (int kv16 = 0; kv16 < 2; kv16++)
  for (int gi = 0; gi < 2; gi++) {
    const rule tiled = {32, 0, 0, "tiled prefill", 2, kv16, 0, 0};
    const shape *set = gi ? gated : plain;
    const int ns = gi ? 1 : 2;
    for (int i = 0; i < ns; i++) {
      duo p;
      g_attn_rows = rows;
      CHECKF(duo_open(&p, d, &tiled), "open: %s", wisp_last_error());
      g_attn_rows = 0;
      char err[300] = "";
      double worst = 0;
      int ok = long_case(&p, gi, &set[i], dec, &worst, err, sizeof err);
      wisp_wgpu_backend_stats st = {0};
      wisp_wgpu_backend_stats_get(p.gpu, &st);
      duo_close(&p);
      CHECKF(ok, "%u rows a lane group: %s", rows, err);
      /* every prompt of more than one token; a row takes 4 lanes at least (two rows 8, where a
       * subgroup of fewer lanes falls back to one row a group) */
      const int want = d->info.subgroup_min_size && d->info.subgroup_min_size < 4 ? 0 : 3;
      CHECKF((int)st.prefill_tiled == want, "%s D %d: %llu tiled prefills, %d expected", gi ? "gated" : "plain",
             set[i].D, (unsigned long long)st.prefill_tiled, want);
      /* two rows where asked and a subgroup holds twice a row's 4 lanes */
      const int asked = rows == 2 || (rows == 0 && set[i].D >= 256);
      const int two = asked && (!d->info.subgroup_min_size || d->info.subgroup_min_size >= 8) ? want : 0;
      CHECKF((int)st.prefill_tiled_two_rows == two, "%s D %d: %llu tiled prefills of two rows a lane group, %d expected",
             gi ? "gated" : "plain", set[i].D, (unsigned long long)st.prefill_tiled_two_rows, two);
      printf("     tiled prefill %s H %d KVH %d D %d%s, %u rows a lane group: max error %.3g of max|cpu|, %llu tiled "
             "(subgroups %u..%u)\n",
             gi ? "gated" : "plain", set[i].H, set[i].KVH, set[i].D, kv16 ? " f16 KV" : "", rows, worst,
             (unsigned long long)st.prefill_tiled, d->info.subgroup_min_size, d->info.subgroup_max_size);
    }
  }
}

/* A batched step's attention (attention_rows, attention_gated_rows: the
 * rows kernels and their merges, which compute each row's split on the
 * device, attn_split.wgsli) gives every row bit for bit what the one-token
 * attention gives it alone, at positions where the long part of the split
 * rule decides the split count (cap 2, a split per 3 tiles up to 50), each
 * row on its own slot's caches. */
static int rows_case(wisp_backend *be, int gated, char *err, size_t cap) {
  enum { R = 3, MAXP = 800, H = 4, KVH = 2, D = 32 };
  static const int pos[R] = {40, 333, 777};
  uint64_t seed = gated ? 91 : 93;
  const int rot = gated ? D / 2 : D, row = gated ? (2 * H + 2 * KVH) * D : (H + 2 * KVH) * D;
  wisp_vector cs, sn, qn = norm_weights(D, &seed), kn = norm_weights(D, &seed);
  int ok = rope_tables(MAXP, rot, &cs, &sn) && qn.data && kn.data;
  wisp_vector *vecs[4] = {&cs, &sn, &qn, &kn};
  for (int i = 0; ok && i < 4; i++) ok = !be->prepare_vector(be, vecs[i]);
  const size_t kvn = (size_t)MAXP * KVH * D;
  wisp_buf *kc[2][R] = {{0}}, *vc[2][R] = {{0}}; /* [0]: rows, [1]: one by one */
  for (int s = 0; ok && s < 2; s++)
    ok = !be->buf_new_slots(be, kvn, 1, R, kc[s]) && !be->buf_new_slots(be, kvn, 1, R, vc[s]);
  float *v = malloc(sizeof(float) * kvn), *got[2] = {malloc(sizeof(float) * R * H * D), malloc(sizeof(float) * R * H * D)};
  ok = ok && v && got[0] && got[1];
  for (int r = 0; ok && r < R; r++) /* the same history in both sets of caches */
    for (int kvi = 0; kvi < 2; kvi++) {
      for (size_t i = 0; i < kvn; i++) v[i] = test_rand_float(&seed);
      for (int s = 0; s < 2; s++) be->buf_write(be, kvi ? vc[s][r] : kc[s][r], 0, kvn, v);
    }
  wisp_buf *qkv = be->buf_new(be, (size_t)R * row), *one = be->buf_new(be, (size_t)row);
  wisp_buf *out = be->buf_new(be, (size_t)R * H * D), *out1 = be->buf_new(be, (size_t)H * D);
  float *q = malloc(sizeof(float) * R * row);
  ok = ok && qkv && one && out && out1 && q;
  for (int i = 0; ok && i < R * row; i++) q[i] = 2.0f * test_rand_float(&seed);
  if (ok) be->buf_write(be, qkv, 0, (size_t)R * row, q);
  wisp_attention_args a = {.n = R, .heads = H, .kv_heads = KVH, .head_dim = D, .q_norm = &qn, .k_norm = &kn,
                           .eps = 1e-5f, .rope_cos = &cs, .rope_sin = &sn, .qkv = qkv, .out = out};
  wisp_gated_attention_args ga = {.n = R, .heads = H, .kv_heads = KVH, .head_dim = D, .rotary_dim = rot,
                                  .q_norm = &qn, .k_norm = &kn, .eps = 1e-6f, .rope_cos = &cs, .rope_sin = &sn,
                                  .qkv = qkv, .out = out};
  wisp_mixer_rows rows = {R, pos, kc[0], vc[0]};
  if (ok) ok = gated ? be->attention_gated_rows(be, &ga, &rows) : be->attention_rows(be, &a, &rows);
  if (ok) be->buf_read(be, out, 0, (size_t)R * H * D, got[0]);
  for (int r = 0; ok && r < R; r++) { /* each row alone, on its own copy of the caches */
    be->buf_write(be, one, 0, (size_t)row, q + (size_t)r * row);
    if (gated) {
      wisp_gated_attention_args g1 = ga;
      g1.n = 1, g1.pos0 = pos[r], g1.qkv = one, g1.out = out1, g1.k_cache = kc[1][r], g1.v_cache = vc[1][r];
      be->attention_gated(be, &g1);
    } else {
      wisp_attention_args a1 = a;
      a1.n = 1, a1.pos0 = pos[r], a1.qkv = one, a1.out = out1, a1.k_cache = kc[1][r], a1.v_cache = vc[1][r];
      be->attention(be, &a1);
    }
    be->buf_read(be, out1, 0, (size_t)H * D, got[1] + (size_t)r * H * D);
  }
  if (ok && be->sync(be)) {
    snprintf(err, cap, "%s", wisp_last_error());
    ok = 0;
  }
  for (int i = 0; ok && i < R * H * D; i++)
    if (memcmp(&got[0][i], &got[1][i], sizeof(float))) {
      snprintf(err, cap, "%s row %d (position %d) value %d: rows %.9g, alone %.9g", gated ? "gated" : "plain",
               i / (H * D), pos[i / (H * D)], i % (H * D), got[0][i], got[1][i]);
      ok = 0;
    }
  for (int s = 0; s < 2; s++)
    for (int r = 0; r < R; r++) {
      if (kc[s][r]) be->buf_free(be, kc[s][r]);
      if (vc[s][r]) be->buf_free(be, vc[s][r]);
    }
  wisp_buf *bufs[4] = {qkv, one, out, out1};
  for (int i = 0; i < 4; i++)
    if (bufs[i]) be->buf_free(be, bufs[i]);
  free(v);
  free(q);
  free(got[0]);
  free(got[1]);
  for (int i = 0; i < 4; i++) free((void *)vecs[i]->data);
  return ok;
}

TEST(webgpu_attn_long_rows_split_as_alone) {
  WEBGPU_OR_SKIP(d);
  if (!d->has_subgroups) SKIP("the rows kernels need subgroups");
  for (int gated = 0; gated < 2; gated++) {
    wisp_wgpu_backend_opts o = {0};
    o.device = d, o.subgroups = -1, o.attn_max_splits = 2, o.attn_long_tiles = 3, o.attn_long_most = 50;
    wisp_backend *be = NULL;
    CHECKF(wisp_wgpu_backend_new(&o, &be) == WISP_OK, "%s", wisp_last_error());
    char err[300] = "";
    wisp_wgpu_backend_stats s0 = {0}, s1 = {0};
    wisp_wgpu_backend_stats_get(be, &s0);
    int ok = rows_case(be, gated, err, sizeof err);
    wisp_wgpu_backend_stats_get(be, &s1);
    be->destroy(be);
    CHECKF(ok, "%s", err);
    /* plain: the rows' splits and the rows alone's, counted alike: 2 + 4 + 9 tiles-rule splits, twice */
    if (!gated) CHECKF(s1.attn_splits - s0.attn_splits == 2 * (2 + 4 + 9), "%llu splits",
                       (unsigned long long)(s1.attn_splits - s0.attn_splits));
  }
}

/* `wisp plan` on WebGPU names the kernels its options pick past the plan's
 * variants: the tiled prefill attention with its rows a lane group at the
 * model's head dim (64: one row), or the fallback where the device has no
 * subgroups, and the integer product's geometry. */
TEST(webgpu_plan_names_the_prefill_paths) {
  WEBGPU_OR_SKIP(d);
  static char cmd[1024], out[1 << 16];
  snprintf(cmd, sizeof cmd, "%s plan -m models/default --backend webgpu", test_wisp_bin());
  CHECKF(test_run(cmd, out, sizeof out) == 0, "%s:\n%s", cmd, out);
  if (d->has_subgroups)
    CHECKF(strstr(out, "prefill attention: attn_flash_tiled.wgsl (tuning attnPrefill=2, the default with subgroups), "
                       "1 query row a lane group of 4 lanes at head dim 64"),
           "%s", out);
  else
    CHECKF(strstr(out, "prefill attention: attn_rope + attn_flash.wgsl (tuning attnPrefill=2: attn_flash_tiled.wgsl "
                       "needs subgroups"),
           "%s", out);
  CHECKF(strstr(out, "integer products (the plan's *_i8 variants): matmul_i8.wgsl 64x64x4x4x2 (tuning matmulI8), "
                     "the token tile halved below 128 tokens"),
         "%s", out);
  /* the batched step: the default model's Q4 products are int8 ones under the fast profile, none under exact */
  /* (without subgroups the int8 multi-row product does not run: the prefill rule alone) */
  if (!d->has_subgroups)
    CHECKF(strstr(out, "batched steps: from 8 rows the products run as a prefill of that many tokens (the "
                       "default with int8 products;"),
           "%s", out);
  else
    CHECKF(strstr(out, "batched steps: 1..16 rows: matvec_i8_rows.wgsl, every "
                       "Q4/Q4Z/Q4_K/Q8_0 product with int8 rows, a row's sums independent of the others (tuning "
                       "rowsI8); from 17 rows: the products run as a prefill of that many tokens (the default with "
                       "int8 products;"),
           "%s", out);
  snprintf(cmd, sizeof cmd, "%s plan -m models/default --backend webgpu --profile exact", test_wisp_bin());
  CHECKF(test_run(cmd, out, sizeof out) == 0, "%s:\n%s", cmd, out);
  CHECKF(strstr(out, "batched steps: the multi-row kernels at every row count, every row the one-row product's bits "
                     "(no product of the plan is an int8 one;"),
         "%s", out);
}
