/* The WebGPU backend's Qwen 3.5 ops against the CPU backend: gated
 * attention (partial RoPE, GQA, output gate, prefill + decode, flash-decoding
 * splits), Gated DeltaNet (conv state and recurrent state carried over
 * several calls), Q4_K products (decode and prefill, split weights).
 *
 * Tolerances (docs/webgpu.md), relative to max|reference| of the buffer: */
#define TOL_GATED_ATTN 2e-5 /* as attention: norm + rope + online softmax */
#define TOL_DELTANET 2e-4   /* f32 state sums in another order, over many tokens */
#define TOL_Q4K 2e-5        /* f32 dot products in another order */
#define TOL_KV16 4e-3       /* packed-f16 KV cache: f16 rounding (2^-11 relative) of keys and values */

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/webgpu/wgpu_backend.h"
#include "backend/webgpu/wgpu_products_i8.h"
#include "fixtures.h"
#include "test.h"
#include "util/err.h"
#include "util/file.h"
#include "webgpu_fixture.h"

typedef struct {
  wisp_backend *cpu, *gpu;
  void *keep[256];
  int nkeep;
} qpair;

static void qkeep(qpair *p, void *x) {
  if (p->nkeep < 256) p->keep[p->nkeep++] = x;
  else abort();
}

static int g_qkv16; /* kv_f16 of the next qopen: packed-f16 KV caches on the GPU side */
static uint32_t g_qdn_cols, g_qdn_groups; /* dn_cols / dn_groups of the next qopen (0 = default) */
/* Tuning fields of the next qopen only (it clears them, so that a failed
 * check cannot leave them to later tests). */
static wisp_wgpu_backend_opts g_qtune;

static int qopen(qpair *p, wisp_wgpu_device *d, int subgroups, uint32_t splits, uint64_t max_binding) {
  memset(p, 0, sizeof *p);
  wisp_wgpu_backend_opts o = g_qtune;
  memset(&g_qtune, 0, sizeof g_qtune);
  o.device = d, o.subgroups = subgroups, o.attn_max_splits = splits, o.max_binding = max_binding;
  o.kv_f16 = g_qkv16, o.dn_cols = g_qdn_cols, o.dn_groups = g_qdn_groups;
  if (wisp_cpu_backend_new(1, &p->cpu)) return 0;
  if (wisp_wgpu_backend_new(&o, &p->gpu)) {
    p->cpu->destroy(p->cpu);
    return 0;
  }
  return 1;
}

static void qclose(qpair *p) {
  p->cpu->destroy(p->cpu);
  p->gpu->destroy(p->gpu);
  for (int i = 0; i < p->nkeep; i++) free(p->keep[i]);
}

typedef struct {
  wisp_buf *c, *g;
  size_t n;
} qbuf;

/* Both buffers get the same random values (buf_write). */
static qbuf qfill(qpair *p, size_t n, uint64_t *seed, float scale) {
  qbuf b = {p->cpu->buf_new(p->cpu, n), p->gpu->buf_new(p->gpu, n), n};
  float *v = malloc(sizeof(float) * (n ? n : 1));
  for (size_t i = 0; i < n; i++) v[i] = scale * test_rand_float(seed);
  if (b.c && b.g && v) {
    p->cpu->buf_write(p->cpu, b.c, 0, n, v);
    p->gpu->buf_write(p->gpu, b.g, 0, n, v);
  }
  free(v);
  return b;
}

static void qfree(qpair *p, qbuf *b) {
  if (b->c) p->cpu->buf_free(p->cpu, b->c);
  if (b->g) p->gpu->buf_free(p->gpu, b->g);
}

static double g_qworst;

static int qcompare(qpair *p, const qbuf *b, size_t n, double tol, const char *what, char *err, size_t cap) {
  float *x = malloc(sizeof(float) * n), *y = malloc(sizeof(float) * n);
  int ok = x && y;
  if (ok) {
    p->cpu->buf_read(p->cpu, b->c, 0, n, x);
    p->gpu->buf_read(p->gpu, b->g, 0, n, y);
    if (p->gpu->sync(p->gpu)) {
      snprintf(err, cap, "%s: %s", what, wisp_last_error());
      ok = 0;
    }
  }
  if (ok) {
    double mx = 0, worst = 0;
    size_t wi = 0;
    for (size_t i = 0; i < n; i++) mx = fmax(mx, fabs(x[i]));
    for (size_t i = 0; i < n; i++) {
      double e = fabs((double)y[i] - x[i]);
      if (isnan(e)) e = INFINITY;
      if (e > worst) worst = e, wi = i;
    }
    double rel = mx > 0 ? worst / mx : worst;
    if (rel > g_qworst) g_qworst = rel;
    if (!(rel <= tol)) {
      snprintf(err, cap, "%s: [%zu] gpu %.9g cpu %.9g, error %.3g of max|ref| %.4g (tol %g)", what, wi, y[wi], x[wi],
               rel, mx, tol);
      ok = 0;
    }
  }
  free(x);
  free(y);
  return ok;
}

/* Like qcompare, for a packed-f16 cache on the GPU side (tests/webgpu_fixture.h). */
static int qcompare_kv16(qpair *p, const qbuf *b, size_t n, double tol, const char *what, char *err, size_t cap) {
  return test_compare_kv16(p->cpu, b->c, p->gpu, b->g, n, tol, what, &g_qworst, err, cap);
}

static wisp_vector qvec(qpair *p, int n, uint64_t *seed, float base, float spread) {
  float *v = malloc(sizeof(float) * (size_t)n);
  for (int i = 0; v && i < n; i++) v[i] = base + spread * test_rand_float(seed);
  wisp_vector w = {n, v, NULL};
  qkeep(p, v);
  if (v) {
    p->cpu->prepare_vector(p->cpu, &w);
    p->gpu->prepare_vector(p->gpu, &w);
  }
  return w;
}

/* ---- gated attention ---- */

static const wisp_kernel_choice *g_attn_choice; /* the next gated_case's plan choice (NULL = default) */

/* With g_qproj set, gated_case and deltanet_case follow every call with
 * the output projection a model does next (a 37-row Q4_K matrix over the
 * op's output, last token, accumulated into a residual) where the output
 * width is whole super-blocks: a one-token decode step runs as the graph's
 * fused op (mixer+matmul), where the gated merge or split-head gated norm
 * may be computed by that product while it stages its input
 * (q4k_matvec.wgsl PRE); the residual is compared too. */
static int g_qproj;

typedef struct {
  wisp_matrix mc, mg; /* the cpu's and the gpu's copies */
  qbuf resid;
  int on;
} qproj;

static int qproj_open(qpair *p, qproj *pj, int cols, uint64_t *seed) {
  memset(pj, 0, sizeof *pj);
  if (!g_qproj || cols % 256) return 1;
  float *f = malloc(sizeof(float) * (size_t)37 * cols);
  uint8_t *q = malloc(wisp_q4k_bytes(37, cols));
  if (!f || !q) {
    free(f);
    free(q);
    return 0;
  }
  for (size_t i = 0; i < (size_t)37 * cols; i++) f[i] = 0.1f * test_rand_float(seed);
  wisp_quantize_q4k(f, 37, cols, q);
  free(f);
  qkeep(p, q);
  pj->mc = (wisp_matrix){.type = WISP_W_Q4K, .rows = 37, .cols = cols, .q = q};
  pj->mg = pj->mc;
  pj->resid = qfill(p, 37, seed, 1.0f);
  pj->on = 1;
  return !p->cpu->prepare_matrix(p->cpu, &pj->mc) && !p->gpu->prepare_matrix(p->gpu, &pj->mg);
}

/* The gpu's mixer op (*mixer, a's op) for n tokens, followed by the
 * projection (the graph's mixer+matmul fused op) for one token. */
static void qproj_mixer(qpair *p, qproj *pj, wisp_fused_pre mixer, const void *a, const qbuf *o, int n) {
  if (pj->on && n == 1) {
    const wisp_fused_matmul f = {.pre = mixer, .attention_gated = a, .deltanet_pre = a, .W = &pj->mg, .x = o->g,
                                 .y = pj->resid.g, .accumulate = 1};
    p->gpu->matmul_fused(p->gpu, &f);
  } else if (mixer == WISP_PRE_DELTANET) {
    p->gpu->gated_deltanet(p->gpu, a);
  } else {
    p->gpu->attention_gated(p->gpu, a);
  }
}

/* The projection of the last of n tokens of o into the residual (the gpu's
 * already made by qproj_mixer for one token), compared. */
static int qproj_step(qpair *p, qproj *pj, const qbuf *o, int n, double tol, const char *what, char *err,
                      size_t cap) {
  if (!pj->on) return 1;
  p->cpu->matmul(p->cpu, &pj->mc, o->c, n - 1, 1, pj->resid.c, 1);
  if (n > 1) p->gpu->matmul(p->gpu, &pj->mg, o->g, n - 1, 1, pj->resid.g, 1);
  char w2[200];
  snprintf(w2, sizeof w2, "%s: projected", what);
  return qcompare(p, &pj->resid, pj->resid.n, tol, w2, err, cap);
}

static void qproj_close(qpair *p, qproj *pj) {
  if (pj->on) qfree(p, &pj->resid);
}

static int gated_case(qpair *p, int H, int KVH, int D, int R, const int *calls, int ncalls, uint64_t *seed, char *err,
                      size_t cap) {
  const int max_pos = 200, half = R / 2;
  float *cs = malloc(sizeof(float) * (size_t)max_pos * half), *sn = malloc(sizeof(float) * (size_t)max_pos * half);
  for (int pos = 0; pos < max_pos; pos++)
    for (int i = 0; i < half; i++) {
      float ang = (float)pos * powf(10000.0f, -2.0f * i / R);
      cs[pos * half + i] = cosf(ang);
      sn[pos * half + i] = sinf(ang);
    }
  qkeep(p, cs);
  qkeep(p, sn);
  wisp_vector vc = {max_pos * half, cs, NULL}, vs = {max_pos * half, sn, NULL};
  p->cpu->prepare_vector(p->cpu, &vc), p->gpu->prepare_vector(p->gpu, &vc);
  p->cpu->prepare_vector(p->cpu, &vs), p->gpu->prepare_vector(p->gpu, &vs);
  wisp_vector qn = qvec(p, D, seed, 1.0f, 0.3f), kn = qvec(p, D, seed, 1.0f, 0.3f);
  size_t kvn = (size_t)max_pos * KVH * D;
  qbuf kc = qfill(p, kvn, seed, 0), vcache = qfill(p, kvn, seed, 0);
  int ok = 1;
  if (g_qkv16) { /* packed f16: the backend's own, half-size KV buffers (as qwen3_5.c allocates them) */
    p->gpu->buf_free(p->gpu, kc.g);
    p->gpu->buf_free(p->gpu, vcache.g);
    kc.g = p->gpu->kv_buf_new(p->gpu, kvn);
    vcache.g = p->gpu->kv_buf_new(p->gpu, kvn);
    ok = kc.g && vcache.g;
  }
  qproj pj;
  ok = ok && qproj_open(p, &pj, H * D, seed);
  int pos0 = 0;
  for (int c = 0; ok && c < ncalls; c++) {
    int n = calls[c];
    qbuf qkv = qfill(p, (size_t)n * (2 * H + 2 * KVH) * D, seed, 2.0f);
    qbuf o = qfill(p, (size_t)n * H * D, seed, 0);
    wisp_gated_attention_args a = {.n = n, .pos0 = pos0, .heads = H, .kv_heads = KVH, .head_dim = D,
                                   .rotary_dim = R, .q_norm = &qn, .k_norm = &kn, .eps = 1e-6f, .rope_cos = &vc,
                                   .rope_sin = &vs, .choice = g_attn_choice};
    a.qkv = qkv.c, a.k_cache = kc.c, a.v_cache = vcache.c, a.out = o.c;
    p->cpu->attention_gated(p->cpu, &a);
    a.qkv = qkv.g, a.k_cache = kc.g, a.v_cache = vcache.g, a.out = o.g;
    qproj_mixer(p, &pj, WISP_PRE_ATTENTION_GATED, &a, &o, n);
    char what[160];
    snprintf(what, sizeof what, "attention_gated H %d KVH %d D %d R %d call %d (pos0 %d, n %d)", H, KVH, D, R, c, pos0,
             n);
    size_t used = (size_t)(pos0 + n) * KVH * D;
    ok = qproj_step(p, &pj, &o, n, g_qkv16 ? TOL_KV16 : TOL_GATED_ATTN, what, err, cap);
    if (g_qkv16)
      ok = ok && qcompare(p, &o, o.n, TOL_KV16, what, err, cap) &&
           qcompare_kv16(p, &kc, used, TOL_KV16, "k cache", err, cap) &&
           qcompare_kv16(p, &vcache, used, TOL_KV16, "v cache", err, cap);
    else
      ok = ok && qcompare(p, &o, o.n, TOL_GATED_ATTN, what, err, cap) &&
           qcompare(p, &kc, used, TOL_GATED_ATTN, "k cache", err, cap) &&
           qcompare(p, &vcache, used, TOL_GATED_ATTN, "v cache", err, cap);
    qfree(p, &qkv);
    qfree(p, &o);
    pos0 += n;
  }
  qproj_close(p, &pj);
  qfree(p, &kc);
  qfree(p, &vcache);
  return ok;
}

/* The decode arrangements of the session switches useFusedQKVSplitQKNormRoPE (rope) and
 * attentionDecodeOnline.useOutputGateFusion (gate): [rope in the attention kernel, gate in it]. */
static const int k_attn_arr[4][2] = {{1, 1}, {0, 1}, {1, 0}, {0, 0}};

static void set_attn(wisp_backend *gpu, int arr, int direct_kv) {
  wisp_backend_settings s;
  wisp_backend_settings_default(&s);
  s.attn_fused_rope = k_attn_arr[arr][0];
  s.attn_output_gate = k_attn_arr[arr][1];
  s.attn_direct_kv = direct_kv; /* 0: the cache through row strides (useDirectContiguousKVLayout off) */
  gpu->configure(gpu, &s);
}

TEST(webgpu_qwen_attention_gated) {
  WEBGPU_OR_SKIP(d);
  g_qworst = 0;
  char err[600] = "";
  static const int short_calls[] = {17, 1, 3, 1};
  static const int long_calls[] = {70, 1, 1, 66, 1};
  static const uint32_t splits[] = {0, 2};
  for (int si = 0; si < 8; si++) {
    qpair p;
    CHECKF(qopen(&p, d, -1, splits[si % 2], 0), "%s", wisp_last_error());
    set_attn(p.gpu, si / 2, si % 3 != 1); /* strided cache addressing in 3 of the 8 */
    uint64_t seed = 91;
    int ok = gated_case(&p, 4, 2, 32, 8, short_calls, 4, &seed, err, sizeof err) &&
             gated_case(&p, 6, 2, 20, 6, short_calls, 4, &seed, err, sizeof err) &&
             gated_case(&p, 4, 1, 256, 64, long_calls, 5, &seed, err, sizeof err) &&
             gated_case(&p, 2, 2, 16, 16, long_calls, 3, &seed, err, sizeof err);
    qclose(&p);
    CHECKF(ok, "splits %u, rope fused %d, gate fused %d, direct kv %d: %s", splits[si % 2], k_attn_arr[si / 2][0],
           k_attn_arr[si / 2][1], si % 3 != 1, err);
  }
  printf("     attention_gated: max error %.3g of max|ref|\n", g_qworst);
}

/* Packed-f16 KV caches (kv_f16): every decode arrangement, split and not,
 * direct and strided cache addressing; output and caches within TOL_KV16
 * (the caches read back as halves). Head dims that are not a multiple of 8
 * are refused with a clear message. */
TEST(webgpu_qwen_attention_gated_kv16) {
  WEBGPU_OR_SKIP(d);
  g_qworst = 0;
  char err[600] = "";
  static const int short_calls[] = {17, 1, 3, 1};
  static const int long_calls[] = {70, 1, 1, 66, 1};
  static const uint32_t splits[] = {0, 2};
  for (int si = 0; si < 8; si++) {
    qpair p;
    g_qkv16 = 1; /* qopen opens with kv_f16; gated_case compares halves while set */
    if (!qopen(&p, d, -1, splits[si % 2], 0)) g_qkv16 = 0;
    CHECKF(g_qkv16, "%s", wisp_last_error());
    set_attn(p.gpu, si / 2, si % 3 != 1);
    uint64_t seed = 91;
    int ok = gated_case(&p, 4, 2, 32, 8, short_calls, 4, &seed, err, sizeof err) &&
             gated_case(&p, 4, 1, 256, 64, long_calls, 5, &seed, err, sizeof err) &&
             gated_case(&p, 2, 2, 16, 16, long_calls, 3, &seed, err, sizeof err);
    g_qkv16 = 0;
    qclose(&p);
    CHECKF(ok, "kv16, splits %u, rope fused %d, gate fused %d, direct kv %d: %s", splits[si % 2],
           k_attn_arr[si / 2][0], k_attn_arr[si / 2][1], si % 3 != 1, err);
  }
  printf("     attention_gated kv16: max error %.3g of max|ref|\n", g_qworst);
  /* head dim 20: two halves per word, but not whole vec4<u32> rows */
  qpair p;
  g_qkv16 = 1;
  if (!qopen(&p, d, -1, 0, 0)) g_qkv16 = 0;
  CHECKF(g_qkv16, "%s", wisp_last_error());
  uint64_t seed = 5;
  static const int one[] = {3};
  int ok = gated_case(&p, 6, 2, 20, 6, one, 1, &seed, err, sizeof err);
  g_qkv16 = 0;
  qclose(&p);
  CHECKF(!ok && strstr(err, "head dim 20 and f16 KV (needs a multiple of 8)"), "%s", err);
}

/* The seed profile's decode kernel (attention_decode_online_head256_f16kv_output_gate.wgsl), as the
 * plan hands it over: decode steps go through it (head_dim 256), prefill through the default path;
 * with head_dim 64 the choice is ignored. kv16: with packed-f16 KV caches (TOL_KV16). 0 and a
 * message in err on the first failure. */
static int head256_runs(wisp_wgpu_device *d, int kv16, char *err, size_t cap) {
  static wisp_kernel_choice ch[2];
  snprintf(ch[1].variant, sizeof ch[1].variant, "profile:attention_decode_online_head256_f16kv_output_gate");
  /* with the q/k split + norm + RoPE fused into attn_gated_rope (as the seed profile runs it) and
   * unfused (two stages); with the output gate unfused the kernel is not used */
  for (int run = 0; run < 6; run++) { /* runs 4, 5: arrangements 0, 1 with strided cache addressing */
    const int arr = run % 4;
    qpair p;
    g_qkv16 = kv16;
    if (!qopen(&p, d, -1, 0, 0)) {
      g_qkv16 = 0;
      snprintf(err, cap, "open: %s", wisp_last_error());
      return 0;
    }
    set_attn(p.gpu, arr, run < 4);
    uint64_t seed = 97;
    static const int calls[] = {5, 1, 1, 66, 1, 1};
    g_attn_choice = ch;
    int ok = gated_case(&p, 4, 2, 256, 64, calls, 6, &seed, err, cap) &&
             gated_case(&p, 3, 1, 256, 256, calls, 3, &seed, err, cap) &&
             gated_case(&p, 4, 2, 64, 16, calls, 3, &seed, err, cap);
    g_attn_choice = NULL;
    g_qkv16 = 0;
    qclose(&p);
    if (!ok) {
      /* the arrangement goes after the case's own message */
      size_t len = strlen(err);
      snprintf(err + len, cap - len, " (kv16 %d, rope fused %d, gate fused %d, direct kv %d)", kv16,
               k_attn_arr[arr][0], k_attn_arr[arr][1], run < 4);
      return 0;
    }
  }
  return 1;
}

TEST(webgpu_qwen_attention_head256_profile_kernel) {
  WEBGPU_OR_SKIP(d);
  g_qworst = 0;
  char err[600] = "";
  CHECKF(head256_runs(d, 0, err, sizeof err), "%s", err);
  printf("     head256 decode kernel: max error %.3g of max|ref|\n", g_qworst);
}

/* The same with packed-f16 KV caches (the seed profile's precision.kvDtype "f16"). */
TEST(webgpu_qwen_attention_head256_kv16) {
  WEBGPU_OR_SKIP(d);
  g_qworst = 0;
  char err[600] = "";
  CHECKF(head256_runs(d, 1, err, sizeof err), "%s", err);
  printf("     head256 decode kernel kv16: max error %.3g of max|ref|\n", g_qworst);
}

/* ---- Gated DeltaNet ---- */

/* The conv states after a call whose next token is at position `pos`: the
 * CPU's [cdim][L-1] (oldest first) against the WebGPU ring [cdim][L]
 * (position p's input in slot p % L), entry by entry, within tol of
 * max|ref|. */
static int qcompare_conv_ring(qpair *p, const qbuf *b, int cdim, int L, int pos, double tol, char *err, size_t cap) {
  const int S = L - 1;
  float *x = malloc(sizeof(float) * b->n), *y = malloc(sizeof(float) * b->n);
  int ok = x && y;
  if (ok) {
    p->cpu->buf_read(p->cpu, b->c, 0, b->n, x);
    p->gpu->buf_read(p->gpu, b->g, 0, b->n, y);
    if (p->gpu->sync(p->gpu)) {
      snprintf(err, cap, "conv state: %s", wisp_last_error());
      ok = 0;
    }
  }
  double mx = 0, worst = 0;
  int wch = 0, wk = 0;
  for (int ch = 0; ok && ch < cdim; ch++)
    for (int k = 0; k < S; k++) mx = fmax(mx, fabs(x[(size_t)ch * S + k]));
  for (int ch = 0; ok && ch < cdim; ch++)
    for (int k = 0; k < S; k++) { /* input of position pos - S + k */
      double e = fabs((double)y[(size_t)ch * L + (size_t)(pos + 1 + k) % L] - x[(size_t)ch * S + k]);
      if (isnan(e)) e = INFINITY;
      if (e > worst) worst = e, wch = ch, wk = k;
    }
  double rel = mx > 0 ? worst / mx : worst;
  if (ok && rel > g_qworst) g_qworst = rel;
  if (ok && !(rel <= tol)) {
    snprintf(err, cap, "conv state (next position %d): channel %d input %d: gpu %.9g cpu %.9g, error %.3g of max|ref| "
             "%.4g", pos, wch, wk, y[(size_t)wch * L + (size_t)(pos + 1 + wk) % L], x[(size_t)wch * S + wk], rel, mx);
    ok = 0;
  }
  free(x);
  free(y);
  return ok;
}

/* Calls of n tokens (calls[]) in order at consecutive positions, the same
 * random projections on both backends: output, recurrent state and conv
 * state compared after each call. */
static int deltanet_case(qpair *p, int KH, int VH, int DK, int DV, int L, const int *calls, int ncalls, uint64_t *seed,
                         char *err, size_t cap) {
  const int K = KH * DK, V = VH * DV, cdim = 2 * K + V, row = 2 * K + 2 * V + 2 * VH;
  wisp_vector taps = qvec(p, cdim * L, seed, 0.0f, 0.5f), alog = qvec(p, VH, seed, 0.0f, 1.0f);
  wisp_vector dt = qvec(p, VH, seed, 0.0f, 1.0f), nw = qvec(p, DV, seed, 1.0f, 0.3f);
  qbuf cst = qfill(p, (size_t)cdim * L, seed, 0); /* as qwen3_5.c allocates it: L floats a channel */
  qbuf st = qfill(p, (size_t)VH * DK * DV, seed, 0);
  qproj pj;
  int ok = qproj_open(p, &pj, V, seed), pos = 0;
  for (int c = 0; ok && c < ncalls; c++) {
    int n = calls[c];
    qbuf pr = qfill(p, (size_t)n * row, seed, 1.5f);
    qbuf o = qfill(p, (size_t)n * V, seed, 0);
    wisp_deltanet_args a = {.n = n, .pos0 = pos, .k_heads = KH, .v_heads = VH, .k_dim = DK, .v_dim = DV,
                            .conv_len = L, .conv_taps = &taps, .a_log = &alog, .dt_bias = &dt, .norm = &nw,
                            .eps = 1e-6f};
    a.proj = pr.c, a.conv_state = cst.c, a.state = st.c, a.out = o.c;
    p->cpu->gated_deltanet(p->cpu, &a);
    a.proj = pr.g, a.conv_state = cst.g, a.state = st.g, a.out = o.g;
    qproj_mixer(p, &pj, WISP_PRE_DELTANET, &a, &o, n);
    pos += n;
    char what[160];
    snprintf(what, sizeof what, "gated_deltanet KH %d VH %d DK %d DV %d L %d call %d (n %d)", KH, VH, DK, DV, L, c, n);
    ok = qproj_step(p, &pj, &o, n, TOL_DELTANET, "output", err, cap) &&
         qcompare(p, &o, o.n, TOL_DELTANET, "output", err, cap) &&
         qcompare(p, &st, st.n, TOL_DELTANET, "recurrent state", err, cap) &&
         qcompare_conv_ring(p, &cst, cdim, L, pos, 1e-6, err, cap);
    if (!ok) { /* which call */
      size_t len = strlen(err);
      if (len < cap) snprintf(err + len, cap - len, " (%s)", what);
    }
    qfree(p, &pr);
    qfree(p, &o);
  }
  qproj_close(p, &pj);
  qfree(p, &cst);
  qfree(p, &st);
  return ok;
}

TEST(webgpu_qwen_gated_deltanet) {
  WEBGPU_OR_SKIP(d);
  g_qworst = 0;
  char err[600] = "";
  /* decode steps through dn_decode (useLinearAttentionFusedDecodeCore) with a whole v-head a workgroup
   * (dn_cols 1024), with the default split (16 columns a workgroup + dn_norm), and through dn_conv +
   * dn_recur */
  for (int run = 0; run < 3; run++) {
    const int core = run < 2;
    qpair p;
    g_qdn_cols = run == 0 ? 1024 : 0;
    int opened = qopen(&p, d, -1, 0, 0);
    g_qdn_cols = 0;
    CHECKF(opened, "%s", wisp_last_error());
    wisp_backend_settings s;
    wisp_backend_settings_default(&s);
    s.deltanet_core = core;
    p.gpu->configure(p.gpu, &s);
    uint64_t seed = 93;
    static const int calls[] = {13, 1, 1, 5, 1};
    wisp_wgpu_backend_stats s0, s1;
    wisp_wgpu_backend_stats_get(p.gpu, &s0);
    int ok = deltanet_case(&p, 2, 4, 24, 20, 4, calls, 5, &seed, err, sizeof err) &&
             deltanet_case(&p, 3, 3, 17, 33, 3, calls, 5, &seed, err, sizeof err) &&
             deltanet_case(&p, 1, 2, 128, 128, 4, calls, 3, &seed, err, sizeof err) &&
             deltanet_case(&p, 1, 1, 8, 8, 1, calls, 3, &seed, err, sizeof err);
    wisp_wgpu_backend_stats_get(p.gpu, &s1);
    qclose(&p);
    CHECKF(ok, "run %d (fused decode core %d): %s", run, core, err);
    /* 16 calls, 10 of one token (3, 3, 2, 2 of the cases): 2 dispatches each (conv, recurrence),
     * 1 for a fused decode step, 2 for a split one (all but v_dim 8, which fits 16 columns) */
    static const uint64_t want[3] = {10 + 2 * 6, 2 * 8 + 2 + 2 * 6, 32};
    CHECKF(s1.dispatches - s0.dispatches == want[run], "run %d: %llu dispatches", run,
           (unsigned long long)(s1.dispatches - s0.dispatches));
    CHECKF(s1.deltanet_split - s0.deltanet_split == (run == 1 ? 8u : 0u), "run %d: %llu split steps", run,
           (unsigned long long)(s1.deltanet_split - s0.deltanet_split));
  }
  printf("     gated_deltanet: max error %.3g of max|ref|\n", g_qworst);
}

/* The one-token kernel split over value-column slices (several workgroups a
 * v-head, dn_norm for the gated norm): prefill (dn_conv) and decode
 * (dn_decode) interleaved, so that a conv-state layout that the two did not
 * share, or a slot written before another workgroup read it, would show in
 * the output and the states. Slices of 1 to 16 columns, v_dim not a
 * multiple of the slice, several v-heads a k-head (q/k conv channels read by
 * G * slices workgroups), conv lengths 1 to 8, row groups given and not. */
TEST(webgpu_qwen_gated_deltanet_split) {
  WEBGPU_OR_SKIP(d);
  g_qworst = 0;
  char err[600] = "";
  static const struct {
    uint32_t cols, groups;
  } geo[] = {{8, 0}, {4, 8}, {16, 0}, {1, 32}, {2, 4}};
  static const int calls[] = {7, 1, 1, 1, 4, 1, 1, 9, 1, 1, 1};
  const int ncalls = (int)(sizeof calls / sizeof calls[0]);
  for (size_t gi = 0; gi < sizeof geo / sizeof geo[0]; gi++) {
    qpair p;
    g_qdn_cols = geo[gi].cols, g_qdn_groups = geo[gi].groups;
    int opened = qopen(&p, d, -1, 0, 0);
    g_qdn_cols = g_qdn_groups = 0;
    CHECKF(opened, "%s", wisp_last_error());
    uint64_t seed = 211 + gi;
    wisp_wgpu_backend_stats s0, s1;
    wisp_wgpu_backend_stats_get(p.gpu, &s0);
    /* (KH, VH, DK, DV, L): every case's v_dim is split for these slices */
    int ok = deltanet_case(&p, 2, 4, 24, 20, 4, calls, ncalls, &seed, err, sizeof err) &&
             deltanet_case(&p, 1, 3, 17, 33, 3, calls, ncalls, &seed, err, sizeof err) &&
             deltanet_case(&p, 2, 2, 40, 36, 8, calls, ncalls, &seed, err, sizeof err) &&
             deltanet_case(&p, 1, 2, 9, 19, 2, calls, ncalls, &seed, err, sizeof err) &&
             deltanet_case(&p, 2, 2, 16, 24, 1, calls, ncalls, &seed, err, sizeof err);
    wisp_wgpu_backend_stats_get(p.gpu, &s1);
    qclose(&p);
    CHECKF(ok, "%u columns x %u row groups: %s", geo[gi].cols, geo[gi].groups, err);
    /* 8 one-token calls of each of the 5 cases, all split */
    CHECKF(s1.deltanet_split - s0.deltanet_split == 40, "%u columns: %llu split steps", geo[gi].cols,
           (unsigned long long)(s1.deltanet_split - s0.deltanet_split));
  }
  printf("     gated_deltanet split: max error %.3g of max|ref|\n", g_qworst);
}

/* The one-token ops a Q4_K projection computes while staging its input
 * (q4k_matvec.wgsl PRE): DeltaNet's split-head gated norm (PRE 1) and
 * decode attention's gated merge of its splits (PRE 2), each followed by a
 * 37-row Q4_K projection of its output into a residual as in a model; the
 * projection and the op's own output (written by the product's workgroup
 * 0) against the CPU, and the fusions counted. */
TEST(webgpu_qwen_input_ops_fused) {
  WEBGPU_OR_SKIP(d);
  g_qworst = 0;
  char err[600] = "";
  static const int calls[] = {7, 1, 1, 40, 1, 1};
  qpair p;
  CHECKF(qopen(&p, d, -1, 0, 0), "%s", wisp_last_error());
  uint64_t seed = 301;
  wisp_wgpu_backend_stats s0, s1;
  wisp_wgpu_backend_stats_get(p.gpu, &s0);
  g_qproj = 1;
  /* (KH, VH, DK, DV, L): 256 and 512 value columns, split over 16-column workgroups */
  int ok = deltanet_case(&p, 2, 4, 24, 64, 4, calls, 6, &seed, err, sizeof err) &&
           deltanet_case(&p, 1, 2, 32, 256, 4, calls, 6, &seed, err, sizeof err);
  uint64_t dn = 0;
  if (ok) {
    wisp_wgpu_backend_stats_get(p.gpu, &s1);
    dn = s1.input_fused - s0.input_fused;
    s0 = s1;
  }
  /* (H, KVH, D, R): 4 x 64 and 2 x 256 outputs; decode past one 32-key tile has splits */
  ok = ok && gated_case(&p, 4, 2, 64, 16, calls, 6, &seed, err, sizeof err) &&
       gated_case(&p, 2, 1, 256, 64, calls, 6, &seed, err, sizeof err);
  g_qproj = 0;
  wisp_wgpu_backend_stats_get(p.gpu, &s1);
  qclose(&p);
  CHECKF(ok, "%s", err);
  /* every one-token DeltaNet step is split (4 a case); the attention steps at positions 7, 8 fit one
   * tile, those at 48 and 49 have two splits (2 a case) */
  CHECKF(dn == 8, "%llu DeltaNet norms fused (8 expected)", (unsigned long long)dn);
  CHECKF(s1.input_fused - s0.input_fused == 4, "%llu attention merges fused (4 expected)",
         (unsigned long long)(s1.input_fused - s0.input_fused));
  printf("     input ops fused into q4k_matvec: max error %.3g of max|ref|\n", g_qworst);
}

/* ---- Q4_K products ---- */

static const char *g_q4k_variant; /* the decode choice of the next suite's matrices (NULL = default) */

static int q4k_suite(qpair *p, const char *label, char *err, size_t cap) {
  static const int rows_[] = {1, 7, 37, 300};
  static const int cols_[] = {256, 768, 4352}; /* 17 super-blocks: the simd16 full-block path */
  static const int ns[] = {1, 3, 9};
  uint64_t seed = 95;
  int ok = 1;
  for (int ri = 0; ok && ri < 4; ri++)
    for (int ci = 0; ok && ci < 3; ci++) {
      int rows = rows_[ri], cols = cols_[ci];
      float *f = malloc(sizeof(float) * (size_t)rows * cols);
      uint8_t *q = malloc(wisp_q4k_bytes(rows, cols));
      for (size_t i = 0; i < (size_t)rows * cols; i++) f[i] = 0.1f * test_rand_float(&seed);
      wisp_quantize_q4k(f, rows, cols, q);
      free(f);
      qkeep(p, q);
      wisp_matrix m = {.type = WISP_W_Q4K, .rows = rows, .cols = cols, .q = q}, mg = m; /* mg: the gpu's, with the plan's choice */
      if (g_q4k_variant) {
        snprintf(mg.choice[1].variant, sizeof mg.choice[1].variant, "%s", g_q4k_variant);
        mg.choice[1].workgroup_size = 256, mg.choice[1].rows_per_subgroup = 16, mg.choice[1].subgroups_per_row = 16;
      }
      ok = !p->cpu->prepare_matrix(p->cpu, &m) && !p->gpu->prepare_matrix(p->gpu, &mg);
      if (!ok) snprintf(err, cap, "prepare %dx%d: %s", rows, cols, wisp_last_error());
      for (int ni = 0; ok && ni < 3; ni++) {
        int n = ns[ni], acc = (ri + ni) % 2, x_row0 = ni == 1 ? 2 : 0;
        qbuf x = qfill(p, (size_t)(n + x_row0) * cols, &seed, 1.0f), y = qfill(p, (size_t)n * rows, &seed, 1.0f);
        p->cpu->matmul(p->cpu, &m, x.c, x_row0, n, y.c, acc);
        p->gpu->matmul(p->gpu, &mg, x.g, x_row0, n, y.g, acc);
        char what[128];
        snprintf(what, sizeof what, "q4k matmul %s %dx%d n %d acc %d x_row0 %d", label, rows, cols, n, acc, x_row0);
        ok = qcompare(p, &y, y.n, TOL_Q4K, what, err, cap);
        qfree(p, &x);
        qfree(p, &y);
      }
    }
  return ok;
}

TEST(webgpu_qwen_q4k_matmul) {
  WEBGPU_OR_SKIP(d);
  g_qworst = 0;
  char err[600] = "";
  /* default (subgroups when the device has them), plain, split into
   * 8640-byte parts (20 rows of 768 columns, 60 of 256), and row groups of
   * 64 lanes with 2 rows each (q4k_lg 64: several subgroups a
   * row; q4k_mv 128x2 everywhere: the default takes 1 row
   * for matrices of fewer than 2048 rows, which these are), and the
   * default's rule moved to 37 rows (q4k_rows2_rows: 1 row
   * a lane group for the 1- and 7-row matrices, 2 for 37 and 300), and the
   * plain one-token products by q4k_sb.wgsl (q4k_sb_cols 256: a
   * thread per super-block), whole and split */
  static const int sg[] = {-1, 0, -1, -1, -1, -1, -1};
  static const uint64_t mb[] = {0, 0, 8640, 0, 0, 0, 8640};
  static const char *label[] = {"subgroups", "plain", "split", "64 lanes, 2 rows", "2 rows from 37 rows",
                                "super-block threads", "super-block threads, split"};
  for (int i = 0; i < 7; i++) {
    if (sg[i] == -1 && i != 2 && i != 6 && !d->has_subgroups) continue;
    if (i == 3) g_qtune.q4k_lg = 64, g_qtune.q4k_mv_wg = 128, g_qtune.q4k_mv_rows = 2;
    if (i == 4) g_qtune.q4k_rows2_rows = 37;
    if (i >= 5) g_qtune.q4k_sb_cols = 256;
    qpair p;
    CHECKF(qopen(&p, d, sg[i], 0, mb[i]), "%s", wisp_last_error());
    int ok = q4k_suite(&p, label[i], err, sizeof err);
    qclose(&p);
    CHECKF(ok, "%s", err);
  }
  /* the seed profile's kernel (fused_matmul_q4_metal_simd16.wgsl) for the one-token products */
  g_q4k_variant = "profile:fused_matmul_q4_metal_simd16";
  qpair p;
  CHECKF(qopen(&p, d, -1, 0, 0), "%s", wisp_last_error());
  int ok = q4k_suite(&p, "simd16", err, sizeof err);
  qclose(&p);
  g_q4k_variant = NULL;
  CHECKF(ok, "%s", err);
  printf("     q4k matmul: max error %.3g of max|ref|\n", g_qworst);
}

/* ---- whole model: tests/parity/qwen35-small on both backends ---- */

#define TOL_QWEN_LOGITS 1e-3 /* per step, relative to max|logit| */
#include "engine/engine.h"

/* Converts the small Qwen 3.5 checkpoint once per run; NULL on failure. */
static const char *qwen_small(const char *quant, char *log, size_t cap) {
  static char dirs[2][600];
  int i = !strcmp(quant, "f32");
  if (dirs[i][0]) return dirs[i];
  char dir[600], cmd[2048];
  snprintf(dir, sizeof dir, "%s/qwen35_small_%s", test_tmpdir(), quant);
  snprintf(cmd, sizeof cmd, "%s convert tests/parity/qwen35-small -o %s --quant %s --quiet", test_wisp_bin(), dir,
           quant);
  if (test_run(cmd, log, cap)) return NULL;
  snprintf(dirs[i], sizeof dirs[i], "%s", dir);
  return dirs[i];
}

static int argmax_f(const float *v, int n) {
  int b = 0;
  for (int i = 1; i < n; i++)
    if (v[i] > v[b]) b = i;
  return b;
}

static int g_parity_kv16; /* whether the last qwen_model_parity's webgpu session had packed-f16 KV */
/* input ops (DeltaNet gated norms, gated attention merges) the last
 * qwen_model_parity's webgpu session fused into Q4_K products */
static uint64_t g_parity_input_fused;

/* 32 greedy steps through eval on both backends (tokens equal, logits within
 * TOL_QWEN_LOGITS), then the decode loop (wisp_session_generate) on both:
 * the same 32 tokens. `profile` (NULL = default) applies to the webgpu
 * session; *gen_out receives the webgpu decode-loop tokens. */
static int qwen_model_parity(const char *dir, const char *profile, const char *tuning, int32_t *gen_out, char *err,
                             size_t cap, double *worst_out) {
  wisp_model *m = NULL;
  if (wisp_model_open(dir, &m)) {
    snprintf(err, cap, "open %s: %s", dir, wisp_last_error());
    return 0;
  }
  const int V = wisp_model_vocab(m);
  wisp_session *sc = NULL, *sg = NULL;
  wisp_session_options oc = {.backend = "cpu", .threads = 1}, og = {.backend = "webgpu", .profile = profile,
                                                                     .tuning = tuning};
  wisp_status st = wisp_session_new(m, &oc, &sc);
  if (!st) st = wisp_session_new(m, &og, &sg);
  /* The f32 prefill product (TOL_QWEN_LOGITS); the Q4 x int8 one is tested
   * in test_webgpu_matmul_i8.c. */
  wisp_wgpu_mm8_opts f32_prefill = {.mode = 3};
  if (!st) st = wisp_wgpu_mm8_configure(sg->backend, &f32_prefill);
  if (!st) g_parity_kv16 = wisp_wgpu_backend_kv16(sg->backend);
  if (st) {
    snprintf(err, cap, "sessions: %s", wisp_last_error());
    wisp_session_free(sc);
    wisp_model_close(m);
    return 0;
  }
  float *lc = malloc(sizeof(float) * V), *lg = malloc(sizeof(float) * V);
  int32_t prompt[11];
  for (int i = 0; i < 11; i++) prompt[i] = (int32_t)((i * 37 + 5) % V);
  wisp_wgpu_backend_stats s0 = {0}, s1 = {0};
  wisp_wgpu_backend_stats_get(sg->backend, &s0);
  int ok = lc && lg && !wisp_session_eval(sc, prompt, 11, lc) && !wisp_session_eval(sg, prompt, 11, lg);
  if (!ok) snprintf(err, cap, "prefill: %s", wisp_last_error());
  double worst = 0;
  int32_t first = 0;
  for (int step = 0; ok && step < 32; step++) {
    double mx = 0, e = 0;
    for (int i = 0; i < V; i++) {
      mx = fmax(mx, fabs(lc[i]));
      e = fmax(e, fabs((double)lg[i] - lc[i]));
    }
    if (isnan(e)) e = INFINITY;
    worst = fmax(worst, e / mx);
    int tc = argmax_f(lc, V), tg = argmax_f(lg, V);
    if (tc != tg || !(e <= TOL_QWEN_LOGITS * mx)) {
      snprintf(err, cap, "step %d: token cpu %d gpu %d, logit error %.3g of max %.3g", step, tc, tg, e, mx);
      ok = 0;
      break;
    }
    if (step == 0) first = tc;
    int32_t t = tc;
    ok = !wisp_session_eval(sc, &t, 1, lc) && !wisp_session_eval(sg, &t, 1, lg);
    if (!ok) snprintf(err, cap, "decode: %s", wisp_last_error());
  }
  if (ok) { /* the decode loop, from the state after the prompt */
    wisp_session_reset(sc);
    wisp_session_reset(sg);
    ok = !wisp_session_eval(sc, prompt, 11, NULL) && !wisp_session_eval(sg, prompt, 11, NULL);
    int32_t a[32], b[32];
    int na = 0, nb = 0;
    wisp_generate_options go = {.temperature = 0};
    if (ok) ok = !wisp_session_generate(sc, first, 32, &go, a, &na) && !wisp_session_generate(sg, first, 32, &go, b, &nb);
    if (!ok) snprintf(err, cap, "generate: %s", wisp_last_error());
    if (ok && (na != 32 || nb != 32 || memcmp(a, b, sizeof a))) {
      int k = 0;
      while (k < 32 && a[k] == b[k]) k++;
      snprintf(err, cap, "generate: %d and %d tokens, first difference at %d", na, nb, k);
      ok = 0;
    }
    if (ok && gen_out) memcpy(gen_out, b, sizeof b);
  }
  wisp_wgpu_backend_stats_get(sg->backend, &s1);
  g_parity_input_fused = s1.input_fused - s0.input_fused;
  free(lc);
  free(lg);
  wisp_session_free(sc);
  wisp_session_free(sg);
  wisp_model_close(m);
  if (worst_out) *worst_out = worst;
  return ok;
}

TEST(webgpu_qwen_small_model_parity) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  static const char *quants[] = {"q4k", "f32"};
  for (int i = 0; i < 2; i++) {
    char log[4096] = "", err[600] = "";
    const char *dir = qwen_small(quants[i], log, sizeof log);
    CHECKF(dir, "convert --quant %s: %s", quants[i], log);
    double worst = 0;
    int ok = qwen_model_parity(dir, NULL, NULL, NULL, err, sizeof err, &worst);
    CHECKF(ok, "%s: %s", quants[i], err);
    /* (this model's 128-column projections are Q4, not Q4_K: the input-op fusions of
     * q4k_matvec are tested in webgpu_qwen_input_ops_fused and webgpu_qswitch) */
    printf("     qwen35-small %s: 32 greedy tokens equal, max logit error %.3g of max|logit|, %llu input ops fused\n",
           quants[i], worst, (unsigned long long)g_parity_input_fused);
  }
}

/* Packed-f16 KV caches (tuning kv=f16, read at backend creation) on the whole small model:
 * the CPU's greedy tokens (its caches are f32), logits within TOL_QWEN_LOGITS, through eval and
 * the decode loop. */
TEST(webgpu_qwen_small_model_kv16) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  char log[4096] = "", err[600] = "";
  const char *dir = qwen_small("q4k", log, sizeof log);
  CHECKF(dir, "convert: %s", log);
  double worst = 0;
  int ok = qwen_model_parity(dir, NULL, "kv=f16", NULL, err, sizeof err, &worst);
  CHECKF(ok, "kv16: %s", err);
  CHECK(g_parity_kv16);
  printf("     qwen35-small q4k kv16: 32 greedy tokens equal, max logit error %.3g of max|logit|\n", worst);
}

/* Recording decode batches again makes no bind group. The gated attention
 * adds a dispatch (the merge of its key splits) once the context passes a
 * tile, so decoding after a prompt of another length moves that dispatch
 * to other places in the batches; a bind-group cache keyed by parameter
 * offset (the first version's) then missed for every dispatch after it.
 * The tokens are the CPU's. */
TEST(webgpu_qwen_decode_reuses_bind_groups) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  char log[4096] = "", err[600] = "";
  const char *dir = qwen_small("q4k", log, sizeof log);
  CHECKF(dir, "convert: %s", log);
  static const int32_t prompt[9] = {72, 101, 108, 108, 111, 44, 32, 119, 111};
  int32_t want[100], got[100];
  wisp_model *m = NULL;
  wisp_session *s = NULL;
  wisp_session_options cpu = {.backend = "cpu"}, gpu = {.backend = "webgpu"};
  wisp_generate_options greedy = {.temperature = 0, .batch = 8};
  uint64_t first = 0, again = 0;
  CHECK(wisp_model_open(dir, &m) == WISP_OK);
  CHECK(wisp_session_new(m, &cpu, &s) == WISP_OK);
  CHECKF(test_decode(s, prompt, 5, 100, &greedy, want, NULL, NULL, err, sizeof err), "cpu: %s", err);
  wisp_session_free(s);
  CHECKF(wisp_session_new(m, &gpu, &s) == WISP_OK, "%s", wisp_last_error());
  CHECKF(test_decode(s, prompt, 9, 100, &greedy, got, &first, NULL, err, sizeof err), "webgpu: %s", err);
  wisp_session_reset(s);
  CHECKF(test_decode(s, prompt, 5, 100, &greedy, got, &again, NULL, err, sizeof err), "webgpu: %s", err);
  wisp_session_free(s);
  wisp_model_close(m);
  CHECK(memcmp(want, got, sizeof want) == 0);
  CHECKF(first > 0 && again == 0, "bind groups made: %llu decoding first, %llu decoding again",
         (unsigned long long)first, (unsigned long long)again);
}

/* ---- the seed profile ---- */

#define SEED fixture_seed_profile()

/* `wisp profile check` on the seed fails with the digest mismatch naming both digests; a copy
 * with wisp's digests (wisp kernels digest) checks, resolves a plan for the small Qwen 3.5
 * artifact that uses both profile kernels, and runs on webgpu with the default plan's tokens. */
TEST(webgpu_qwen_seed_profile) {
  char cmd[2048], out[32768];
  snprintf(cmd, sizeof cmd, "%s profile check %s", test_wisp_bin(), SEED);
  int rc = test_run(cmd, out, sizeof out);
  CHECKF(rc != 0 && strstr(out, "digest mismatch") &&
             strstr(out, "sha256:275a1f7cfdd40ab95c467bb4744a1509dd6eadb39ec8fdd0d1e1ba80eb34f9c5") &&
             strstr(out, "file has sha256:"),
         "rc %d: %s", rc, out);
  /* the copy with wisp's digests */
  char *seed = NULL;
  CHECK(wisp_read_file(SEED, &seed, NULL) == WISP_OK);
  static const char *const files[][2] = {
      {"attention_decode_online_head256_f16kv_output_gate.wgsl",
       "sha256:275a1f7cfdd40ab95c467bb4744a1509dd6eadb39ec8fdd0d1e1ba80eb34f9c5"},
      {"fused_matmul_q4_metal_simd16.wgsl", "sha256:f3570460a332b211885baeabe7ccaf142f7234fff8f55973344157096206f4c4"}};
  for (int i = 0; i < 2; i++) {
    snprintf(cmd, sizeof cmd, "%s kernels digest src/backend/webgpu/kernels/%s main", test_wisp_bin(), files[i][0]);
    CHECKF(test_run(cmd, out, sizeof out) == 0, "%s", out);
    char *dg = strstr(out, "sha256:");
    CHECKF(dg && strlen(dg) >= 71, "%s", out);
    dg[71] = 0;
    char *at = strstr(seed, files[i][1]);
    CHECK(at);
    memcpy(at, dg, 71);
  }
  char prof[700];
  snprintf(prof, sizeof prof, "%s/seed-wisp-digests.json", test_tmpdir());
  FILE *f = fopen(prof, "w");
  CHECK(f);
  fputs(seed, f);
  fclose(f);
  free(seed);
  snprintf(cmd, sizeof cmd, "%s profile check %s", test_wisp_bin(), prof);
  CHECKF(test_run(cmd, out, sizeof out) == 0 && strstr(out, "digests verified"), "%s", out);
  char log[4096] = "", err[600] = "";
  const char *dir = qwen_small("q4k", log, sizeof log);
  CHECKF(dir, "convert: %s", log);
  /* the plan uses both kernels, with the HF op names mapped */
  snprintf(cmd, sizeof cmd, "%s plan -m %s --profile %s --backend webgpu", test_wisp_bin(), dir, prof);
  rc = test_run(cmd, out, sizeof out);
  /* no Dawn, no adapter, or only Dawn's Null adapter (which runs nothing): no WebGPU to test */
  if (strstr(out, "no WebGPU") || strstr(out, "WebGPU library") || strstr(out, "Null adapter")) {
    if (test_webgpu_required()) { /* WISP_REQUIRE_WEBGPU=1: a missing adapter fails, never skips */
      test_fail_at(__FILE__, __LINE__, "WISP_REQUIRE_WEBGPU=1 but `wisp plan --backend webgpu` has no WebGPU: %s", out);
      return;
    }
    SKIP("no WebGPU: %s", out);
    return;
  }
  CHECKF(rc == 0 && strstr(out, "attention_gated attn.core    attn_decode_head256") &&
             strstr(out, "matmul mlp.down              q4_decode_metal_simd16") &&
             strstr(out, "profile op 'q_proj' is attn.qkv") == NULL /* the last alias wins the note */ &&
             strstr(out, "profile op 'v_proj' is attn.qkv in the qwen3_5 plan"),
         "%s", out);
  /* every session switch of the seed is on, from the seed, and none is reported as not implemented */
  CHECKF(!strstr(out, "not implemented") &&
             strstr(out, "[profiles/qwen-3-5-2b-metal-throughput: runtime.inference.session.fusedFfnQ4K]") &&
             strstr(out, "wg=256 cols/wg=16 threads/col=16 fullBlock=true") &&
             strstr(out, "wg=256 cols/wg=128 threads/col=2 fullBlock=true") &&
             strstr(out, "[profiles/qwen-3-5-2b-metal-throughput: runtime.inference.session.decodeLoop]"),
         "%s", out);
  /* the head256 kernel's precision.kvDtype "f16" makes the session's KV caches packed f16 */
  CHECKF(strstr(out, "settings kvDtype=f16 (profiles/qwen-3-5-2b-metal-throughput: "
                     "runtime.inference.executionPatch.addKernels[0].kernel.precision.kvDtype "
                     "(decode attention_gated attn.core))"),
         "%s", out);
  /* a profile that binds its own decode kernels gets them run: no persistent decode (it would
   * replace them) */
  CHECKF(strstr(out, "settings persistentDecode=none (the profile binds decode kernel "), "%s", out);
  /* the default plan keeps f32, and has the persistent decode for batches of 32+ */
  snprintf(cmd, sizeof cmd, "%s plan --profile exact -m %s --backend webgpu", test_wisp_bin(), dir);
  CHECKF(test_run(cmd, out, sizeof out) == 0 && strstr(out, "settings kvDtype=f32 (default)\n") &&
             strstr(out, "settings persistentDecode=persistent_decode/wgsl_qwen3_5 minSteps=32"),
         "%s", out);
  WEBGPU_OR_SKIP(d);
  (void)d;
  int32_t a[32], b[32];
  CHECKF(qwen_model_parity(dir, NULL, NULL, a, err, sizeof err, NULL), "default plan: %s", err);
  CHECK(!g_parity_kv16);
  CHECKF(qwen_model_parity(dir, prof, NULL, b, err, sizeof err, NULL), "seed profile: %s", err);
  CHECK(g_parity_kv16); /* the plan's kvDtype f16 reached the backend before the caches were made */
  CHECK(!memcmp(a, b, sizeof a));
}

/* ---- q4k_fused.wgsl: the session-switch fusions of Q4_K decode products ---- */

/* A random Q4_K matrix prepared on both backends (gpu copy in *mg with the decode choice `geo`:
 * COLS_PER_WG / THREADS_PER_COL / WORKGROUP_SIZE of the simd16 profile kernel, NULL = default). */
static uint8_t *q4k_random(qpair *p, int rows, int cols, uint64_t *seed, const int *geo, wisp_matrix *m,
                           wisp_matrix *mg) {
  float *f = malloc(sizeof(float) * (size_t)rows * cols);
  uint8_t *q = malloc(wisp_q4k_bytes(rows, cols));
  if (!f || !q) abort();
  for (size_t i = 0; i < (size_t)rows * cols; i++) f[i] = 0.1f * test_rand_float(seed);
  wisp_quantize_q4k(f, rows, cols, q);
  free(f);
  qkeep(p, q);
  *m = (wisp_matrix){.type = WISP_W_Q4K, .rows = rows, .cols = cols, .q = q};
  *mg = *m;
  if (geo) {
    snprintf(mg->choice[1].variant, sizeof mg->choice[1].variant, "profile:fused_matmul_q4_metal_simd16");
    mg->choice[1].rows_per_subgroup = geo[0], mg->choice[1].subgroups_per_row = geo[1];
    mg->choice[1].workgroup_size = geo[0] * geo[1];
  }
  return q;
}

static uint64_t dispatches(wisp_backend *gpu) {
  wisp_wgpu_backend_stats st;
  wisp_wgpu_backend_stats_get(gpu, &st);
  return st.dispatches;
}

/* rmsnorm + product (usePostFfnNextInputRMSNormPairFusion) and rmsnorm + gate/up + SwiGLU
 * (fusedFfnQ4K) in one dispatch each, against the CPU's three ops; odd row counts, several
 * geometries (full-block path on and off). */
TEST(webgpu_qwen_q4k_fused_norm_and_ffn) {
  WEBGPU_OR_SKIP(d);
  g_qworst = 0;
  char err[600] = "";
  /* cols, tpc, wg, full; the last pass is the first with the input read
   * from global memory instead of staged (no_xstage) and the
   * weight loads issued ahead (prefetch 1; by default only q4k_matvec) */
  static const int geos[4][4] = {{0, 0, 0, -1}, {4, 16, 64, 0}, {32, 2, 64, 1}, {0, 0, 0, -1}};
  static const int rows_[] = {7, 37, 300};
  static const int cols_[] = {256, 768, 4352};
  for (int gi = 0; gi < 4; gi++) {
    if (gi == 3) g_qtune.no_xstage = 1, g_qtune.prefetch = 1;
    qpair p;
    CHECKF(qopen(&p, d, -1, 0, 0), "%s", wisp_last_error());
    wisp_backend_settings s;
    wisp_backend_settings_default(&s);
    s.ffn_cols = geos[gi][0], s.ffn_tpc = geos[gi][1], s.ffn_wg = geos[gi][2], s.ffn_full_block = geos[gi][3];
    p.gpu->configure(p.gpu, &s);
    uint64_t seed = 101 + (uint64_t)gi;
    int ok = 1;
    for (int ri = 0; ok && ri < 3; ri++)
      for (int ci = 0; ok && ci < 3; ci++) {
        const int R = rows_[ri], C = cols_[ci];
        wisp_vector nw = qvec(&p, C, &seed, 1.0f, 0.3f);
        wisp_matrix m, mg, f, fg;
        q4k_random(&p, R, C, &seed, gi && gi < 3 ? geos[gi] : NULL, &m, &mg);
        q4k_random(&p, 2 * R, C, &seed, NULL, &f, &fg); /* gate/up: R outputs */
        ok = !p.cpu->prepare_matrix(p.cpu, &m) && !p.gpu->prepare_matrix(p.gpu, &mg) &&
             !p.cpu->prepare_matrix(p.cpu, &f) && !p.gpu->prepare_matrix(p.gpu, &fg);
        if (!ok) {
          snprintf(err, sizeof err, "prepare: %s", wisp_last_error());
          break;
        }
        qbuf x = qfill(&p, (size_t)C, &seed, 1.0f), xn = qfill(&p, (size_t)C, &seed, 0);
        qbuf y = qfill(&p, (size_t)R, &seed, 1.0f), gu = qfill(&p, (size_t)2 * R, &seed, 0);
        qbuf mid = qfill(&p, (size_t)R, &seed, 0);
        char what[160];
        /* norm + product */
        p.cpu->rmsnorm(p.cpu, x.c, &nw, 1e-6f, 1, C, xn.c);
        p.cpu->matmul(p.cpu, &m, xn.c, 0, 1, y.c, 0);
        uint64_t d0 = dispatches(p.gpu);
        const wisp_fused_matmul nm = {.pre = WISP_PRE_RMSNORM, .pre_in = x.g, .pre_dim = C, .norm = &nw, .eps = 1e-6f,
                                      .W = &mg, .x = xn.g, .y = y.g};
        p.gpu->matmul_fused(p.gpu, &nm);
        p.gpu->sync(p.gpu);
        uint64_t nd = dispatches(p.gpu) - d0;
        snprintf(what, sizeof what, "norm+q4k %dx%d geometry %d", R, C, gi);
        ok = qcompare(&p, &y, y.n, TOL_Q4K, what, err, sizeof err) &&
             qcompare(&p, &xn, xn.n, 1e-5, "norm output", err, sizeof err);
        if (ok && nd != 1) snprintf(err, sizeof err, "%s: %llu dispatches", what, (unsigned long long)nd), ok = 0;
        /* norm + gate/up + SwiGLU */
        if (ok) {
          p.cpu->rmsnorm(p.cpu, x.c, &nw, 1e-6f, 1, C, xn.c);
          p.cpu->matmul(p.cpu, &f, xn.c, 0, 1, gu.c, 0);
          p.cpu->swiglu(p.cpu, gu.c, 1, R, mid.c);
          d0 = dispatches(p.gpu);
          const wisp_fused_matmul ffn = {.pre = WISP_PRE_RMSNORM, .pre_in = x.g, .pre_dim = C, .norm = &nw,
                                         .eps = 1e-6f, .W = &fg, .x = xn.g, .y = gu.g, .post = WISP_POST_SWIGLU,
                                         .post_out = mid.g, .post_dim = R};
          if (!p.gpu->matmul_fused(p.gpu, &ffn)) p.gpu->swiglu(p.gpu, gu.g, 1, R, mid.g);
          p.gpu->sync(p.gpu);
          nd = dispatches(p.gpu) - d0;
          snprintf(what, sizeof what, "norm+gate/up+swiglu F %d cols %d geometry %d", R, C, gi);
          ok = qcompare(&p, &mid, mid.n, TOL_Q4K, what, err, sizeof err) &&
               qcompare(&p, &gu, gu.n, TOL_Q4K, "gate/up output", err, sizeof err) &&
               qcompare(&p, &xn, xn.n, 1e-5, "norm output", err, sizeof err);
          if (ok && nd != 1) snprintf(err, sizeof err, "%s: %llu dispatches", what, (unsigned long long)nd), ok = 0;
        }
        qfree(&p, &x), qfree(&p, &xn), qfree(&p, &y), qfree(&p, &gu), qfree(&p, &mid);
      }
    qclose(&p);
    CHECKF(ok, "%s", err);
  }
  printf("     q4k_fused norm / SwiGLU pair: max error %.3g of max|ref|\n", g_qworst);
}

/* The greedy head argmax fused into a Q4_K head (lmHeadArgmaxQ4K geometries): tied rows at the
 * maximum, within and across workgroups, go to the lowest index as on the CPU; also split into
 * parts (row ranges) and with the fusion not applied. */
TEST(webgpu_qwen_q4k_fused_head_argmax) {
  WEBGPU_OR_SKIP(d);
  static const int geos[4][4] = {{0, 0, 0, -1}, {32, 4, 1, 0}, {7, 2, 1, 1}, {0, 0, 0, -1}}; /* cols, tpc, on, full */
  for (int gi = 0; gi < 5; gi++) {
    qpair p;
    CHECKF(qopen(&p, d, -1, 0, gi == 4 ? 20 * 144 : 0), "%s", wisp_last_error()); /* gi 4: 20-row parts */
    wisp_backend_settings s;
    wisp_backend_settings_default(&s);
    if (gi < 4) s.head_cols = geos[gi][0], s.head_tpc = geos[gi][1], s.head_full_block = geos[gi][3];
    p.gpu->configure(p.gpu, &s);
    const int V = 1001, C = 256;
    uint64_t seed = 107;
    float *f = malloc(sizeof(float) * (size_t)V * C);
    uint8_t *q = malloc(wisp_q4k_bytes(V, C));
    CHECK(f && q);
    for (int i = 0; i < V * C; i++) f[i] = 0.1f * test_rand_float(&seed);
    for (int c = 0; c < C; c++) f[500 * C + c] = 0.05f + 0.04f * test_rand_float(&seed); /* the largest logit */
    wisp_quantize_q4k(f, V, C, q);
    const size_t rb = wisp_q4k_bytes(1, C);
    memcpy(q + 999 * rb, q + 500 * rb, rb), memcpy(q + 123 * rb, q + 500 * rb, rb), memcpy(q + 124 * rb, q + 500 * rb, rb);
    free(f);
    qkeep(&p, q);
    wisp_matrix m = {.type = WISP_W_Q4K, .rows = V, .cols = C, .q = q}, mg = m;
    CHECK(!p.cpu->prepare_matrix(p.cpu, &m) && !p.gpu->prepare_matrix(p.gpu, &mg));
    wisp_vector nw = qvec(&p, C, &seed, 1.0f, 0.0f);
    float *xv = malloc(sizeof(float) * C);
    for (int c = 0; c < C; c++) xv[c] = 0.5f + 0.5f * fabsf(test_rand_float(&seed));
    qbuf x = qfill(&p, C, &seed, 0), xn = qfill(&p, C, &seed, 0), lg = qfill(&p, V, &seed, 0), ids = qfill(&p, 2, &seed, 0);
    p.cpu->buf_write(p.cpu, x.c, 0, C, xv), p.gpu->buf_write(p.gpu, x.g, 0, C, xv);
    free(xv);
    wisp_sampling greedy = {.top_p = 1, .seed = 1};
    wisp_wgpu_backend_stats s0, s1;
    wisp_wgpu_backend_stats_get(p.gpu, &s0);
    wisp_backend *be[2] = {p.cpu, p.gpu};
    for (int b = 0; b < 2; b++) {
      const wisp_buf *xb = b ? x.g : x.c;
      wisp_buf *xnb = b ? xn.g : xn.c, *lb = b ? lg.g : lg.c, *ib = b ? ids.g : ids.c;
      if (b) { /* the graph's norm + head + argmax (geometry 3: the argmax fusion not applied) */
        const wisp_fused_matmul fm = {.pre = WISP_PRE_RMSNORM, .pre_in = xb, .pre_dim = C, .norm = &nw, .eps = 1e-6f,
                                      .W = &mg, .x = xnb, .y = lb, .post = gi == 3 ? WISP_POST_NONE : WISP_POST_ARGMAX,
                                      .sampling = &greedy, .ids = ib, .slot = 1};
        if (!be[b]->matmul_fused(be[b], &fm)) be[b]->sample_id(be[b], lb, V, &greedy, 0, ib, 1);
      } else {
        be[b]->rmsnorm(be[b], xb, &nw, 1e-6f, 1, C, xnb);
        be[b]->matmul(be[b], &m, xnb, 0, 1, lb, 0);
        be[b]->sample_id(be[b], lb, V, &greedy, 0, ib, 1);
      }
      CHECK(!be[b]->sync(be[b]));
    }
    wisp_wgpu_backend_stats_get(p.gpu, &s1);
    float id[2][2];
    p.cpu->buf_read(p.cpu, ids.c, 0, 2, id[0]);
    p.gpu->buf_read(p.gpu, ids.g, 0, 2, id[1]);
    uint32_t ic, ig;
    memcpy(&ic, &id[0][1], 4), memcpy(&ig, &id[1][1], 4);
    char err[600] = "";
    int ok = qcompare(&p, &lg, lg.n, TOL_Q4K, "head logits", err, sizeof err);
    qfree(&p, &x), qfree(&p, &xn), qfree(&p, &lg), qfree(&p, &ids);
    qclose(&p);
    CHECKF(ok, "geometry %d: %s", gi, err);
    CHECKF(ic == 123 && ig == 123, "geometry %d: token cpu %u gpu %u (ties at 123, 124, 500, 999)", gi, ic, ig);
    CHECKF(s1.argmax_fused - s0.argmax_fused == (gi == 3 ? 0u : 1u), "geometry %d: %llu fused token choices", gi,
           (unsigned long long)(s1.argmax_fused - s0.argmax_fused));
  }
}

/* The in_proj [qkv | z | b | a] of a one-token gated_deltanet as one product or as row ranges
 * (useLinearAttentionQKVZProjectionFusion / ABProjectionFusion off), its input norm fused in:
 * same output as the CPU, one more dispatch per range. */
TEST(webgpu_qwen_q4k_fused_in_proj_ranges) {
  WEBGPU_OR_SKIP(d);
  g_qworst = 0;
  static const int combos[4][2] = {{1, 1}, {0, 1}, {1, 0}, {0, 0}};
  for (int ci = 0; ci < 4; ci++) {
    qpair p;
    CHECKF(qopen(&p, d, -1, 0, ci == 3 ? 100 * 144 : 0), "%s", wisp_last_error()); /* last: 100-row parts */
    wisp_backend_settings s;
    wisp_backend_settings_default(&s);
    s.deltanet_proj_qkvz = combos[ci][0], s.deltanet_proj_ab = combos[ci][1];
    p.gpu->configure(p.gpu, &s);
    const int KH = 2, VH = 4, DK = 24, DV = 20, L = 4, C = 256;
    const int K = KH * DK, V = VH * DV, cdim = 2 * K + V, rows = 2 * K + 2 * V + 2 * VH;
    uint64_t seed = 109;
    wisp_matrix m, mg;
    q4k_random(&p, rows, C, &seed, NULL, &m, &mg);
    CHECK(!p.cpu->prepare_matrix(p.cpu, &m) && !p.gpu->prepare_matrix(p.gpu, &mg));
    wisp_vector nw = qvec(&p, C, &seed, 1.0f, 0.3f), taps = qvec(&p, cdim * L, &seed, 0.0f, 0.5f);
    wisp_vector alog = qvec(&p, VH, &seed, 0.0f, 1.0f), dt = qvec(&p, VH, &seed, 0.0f, 1.0f);
    wisp_vector gn = qvec(&p, DV, &seed, 1.0f, 0.3f);
    qbuf cst = qfill(&p, (size_t)cdim * L, &seed, 0), st = qfill(&p, (size_t)VH * DK * DV, &seed, 0);
    char err[600] = "";
    int ok = 1;
    uint64_t nd = 0;
    for (int t = 0; ok && t < 3; t++) {
      qbuf x = qfill(&p, C, &seed, 1.0f), xn = qfill(&p, C, &seed, 0), pr = qfill(&p, (size_t)rows, &seed, 0);
      qbuf o = qfill(&p, (size_t)V, &seed, 0);
      wisp_deltanet_args a = {.n = 1, .pos0 = t, .k_heads = KH, .v_heads = VH, .k_dim = DK, .v_dim = DV, .conv_len = L,
                              .conv_taps = &taps, .a_log = &alog, .dt_bias = &dt, .norm = &gn, .eps = 1e-6f};
      p.cpu->rmsnorm(p.cpu, x.c, &nw, 1e-6f, 1, C, xn.c);
      p.cpu->matmul(p.cpu, &m, xn.c, 0, 1, pr.c, 0);
      a.proj = pr.c, a.conv_state = cst.c, a.state = st.c, a.out = o.c;
      p.cpu->gated_deltanet(p.cpu, &a);
      uint64_t d0 = dispatches(p.gpu);
      a.proj = pr.g, a.conv_state = cst.g, a.state = st.g, a.out = o.g;
      const wisp_fused_matmul in = {.pre = WISP_PRE_RMSNORM, .pre_in = x.g, .pre_dim = C, .norm = &nw, .eps = 1e-6f,
                                    .W = &mg, .x = xn.g, .y = pr.g, .post = WISP_POST_DELTANET, .deltanet_post = &a};
      if (!p.gpu->matmul_fused(p.gpu, &in)) p.gpu->gated_deltanet(p.gpu, &a);
      p.gpu->sync(p.gpu);
      nd = dispatches(p.gpu) - d0;
      ok = qcompare(&p, &pr, pr.n, TOL_Q4K, "in_proj", err, sizeof err) &&
           qcompare(&p, &o, o.n, TOL_DELTANET, "deltanet output", err, sizeof err) &&
           qcompare(&p, &xn, xn.n, 1e-5, "norm output", err, sizeof err);
      qfree(&p, &x), qfree(&p, &xn), qfree(&p, &pr), qfree(&p, &o);
    }
    qfree(&p, &cst), qfree(&p, &st);
    qclose(&p);
    CHECKF(ok, "qkvz %d ab %d: %s", combos[ci][0], combos[ci][1], err);
    /* the ranges (1, 3, 3; the last case 4 ranges over 3 parts of 100 rows: 6) + the fused decode core
     * (dn_decode + dn_norm: v_dim 20 is split over the default 16-column slices) */
    static const uint64_t want[4] = {3, 5, 5, 8};
    CHECKF(nd == want[ci], "qkvz %d ab %d: %llu dispatches", combos[ci][0], combos[ci][1], (unsigned long long)nd);
  }
  printf("     in_proj ranges: max error %.3g of max|ref|\n", g_qworst);
}
