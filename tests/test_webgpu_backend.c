/* The WebGPU backend against the CPU backend: every op of backend.h over odd
 * sizes and tails (table-driven), weight splitting, error reporting, and the
 * whole small synthetic model (greedy tokens and logits).
 *
 * Inputs reach both backends through the interface only: an f32 "embedding"
 * matrix whose rows are the data, gathered with tokens 0..n-1, fills an
 * activation buffer (embed itself is compared first).
 *
 * Tolerances (documented in docs/webgpu.md) are relative to max|reference|
 * over the compared buffer: */
#define TOL_EMBED 1e-6     /* a copy / one multiply per element */
#define TOL_RMSNORM 1e-5   /* f32 sum of squares vs the CPU's double */
#define TOL_MATMUL 2e-5    /* f32 dot products in another order */
#define TOL_SHORTCONV 1e-6 /* same f32 operations in the same order */
#define TOL_ATTENTION 2e-5 /* norm + rope + online softmax vs two-pass softmax */
#define TOL_SWIGLU 1e-6    /* exp may differ in the last bits */
#define TOL_LOGITS 1e-3    /* whole model, per step, relative to max|logit| */
#define TOL_KV16 4e-3      /* packed-f16 KV cache: f16 rounding (2^-11 relative) of keys and values */

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/webgpu/wgpu_backend.h"
#include "backend/webgpu/wgpu_core.h"
#include "backend/webgpu/wgpu_products_i8.h"
#include "engine/engine.h"
#include "fixtures.h"
#include "plan/pjson.h"
#include "plan/plan.h"
#include "plan/profile.h"
#include "plan/registry.h"
#include "test.h"
#include "util/err.h"
#include "webgpu_fixture.h"

/* Largest error seen per op (printed once at the end of each test). */
static double g_worst;

/* ---- helpers --------------------------------------------------------------- */

/* The two backends, and host memory that weights were prepared from: it
 * stays allocated until both backends are gone (the CPU backend reads it,
 * and the WebGPU backend recognizes prepared weights by host address, so a
 * freed and reused address must not meet a backend that saw the old one). */
typedef struct {
  wisp_backend *cpu, *gpu;
  void **keep;
  int nkeep, capkeep;
} pair;

static void keep(pair *p, const void *ptr) {
  if (p->nkeep == p->capkeep) {
    int cap = p->capkeep ? 2 * p->capkeep : 64;
    void **k = realloc(p->keep, sizeof(void *) * (size_t)cap);
    if (!k) abort();
    p->keep = k;
    p->capkeep = cap;
  }
  p->keep[p->nkeep++] = (void *)ptr;
}

static uint32_t g_attn_splits; /* attn_max_splits of the next pair (0 = default) */
static int g_no_fuse;          /* no_fuse of the next pair */
static int g_kv16;             /* kv_f16 of the next pair */
static uint32_t g_mm_tm, g_mm_tn, g_mv_wg, g_mv_rows; /* geometry of the next pair (0 = default) */
/* Tuning fields of the next pair only (pair_open clears them, so that a
 * failed check cannot leave them to later tests). */
static wisp_wgpu_backend_opts g_tune;

static int pair_open(pair *p, wisp_wgpu_device *d, int subgroups, uint64_t max_binding) {
  memset(p, 0, sizeof *p);
  wisp_wgpu_backend_opts o = g_tune;
  memset(&g_tune, 0, sizeof g_tune);
  o.device = d, o.subgroups = subgroups, o.max_binding = max_binding, o.attn_max_splits = g_attn_splits;
  o.no_fuse = g_no_fuse, o.kv_f16 = g_kv16, o.matmul_tm = g_mm_tm, o.matmul_tn = g_mm_tn;
  o.matvec_wg = g_mv_wg, o.matvec_rows = g_mv_rows;
  if (wisp_cpu_backend_new(1, &p->cpu)) return 0;
  if (wisp_wgpu_backend_new(&o, &p->gpu)) {
    p->cpu->destroy(p->cpu);
    p->cpu = NULL;
    return 0;
  }
  return 1;
}

static void pair_close(pair *p) {
  if (p->cpu) p->cpu->destroy(p->cpu);
  if (p->gpu) p->gpu->destroy(p->gpu);
  for (int i = 0; i < p->nkeep; i++) free(p->keep[i]);
  free(p->keep);
}

/* An f32 matrix holding `rows` rows of `cols` values (the source of buffer
 * contents). The caller frees m->f32. */
static wisp_matrix f32_matrix(int rows, int cols, uint64_t *seed, float scale) {
  float *v = malloc(sizeof(float) * (size_t)rows * cols);
  for (size_t i = 0; v && i < (size_t)rows * cols; i++) v[i] = scale * test_rand_float(seed);
  return (wisp_matrix){.type = WISP_W_F32, .rows = rows, .cols = cols, .f32 = v};
}

static int32_t *iota(int n) {
  int32_t *t = malloc(sizeof(int32_t) * (size_t)(n ? n : 1));
  for (int i = 0; t && i < n; i++) t[i] = i;
  return t;
}

/* Two buffers (one per backend) of rows x cols floats filled with the same
 * random values through embed. */
typedef struct {
  wisp_buf *c, *g;
  size_t n;
} bpair;

static int fill(pair *p, bpair *b, int rows, int cols, uint64_t *seed, float scale) {
  wisp_matrix m = f32_matrix(rows, cols, seed, scale);
  int32_t *t = iota(rows);
  b->n = (size_t)rows * cols;
  b->c = p->cpu->buf_new(p->cpu, b->n);
  b->g = p->gpu->buf_new(p->gpu, b->n);
  int ok = m.f32 && t && b->c && b->g;
  if (ok) ok = !p->cpu->prepare_matrix(p->cpu, &m) && !p->gpu->prepare_matrix(p->gpu, &m);
  if (ok) {
    p->cpu->embed(p->cpu, &m, t, rows, b->c);
    p->gpu->embed(p->gpu, &m, t, rows, b->g);
    ok = !p->gpu->sync(p->gpu);
  }
  keep(p, m.f32);
  free(t);
  return ok;
}

static bpair zeros(pair *p, size_t n) {
  bpair b = {p->cpu->buf_new(p->cpu, n), p->gpu->buf_new(p->gpu, n), n};
  return b;
}

static void bfree(pair *p, bpair *b) {
  if (b->c) p->cpu->buf_free(p->cpu, b->c);
  if (b->g) p->gpu->buf_free(p->gpu, b->g);
  b->c = b->g = NULL;
}

/* Compares the first n values of both buffers: max |gpu - cpu| <= tol *
 * max|cpu|. Returns 0 and describes the worst element in err otherwise. */
static int compare(pair *p, const bpair *b, size_t n, double tol, const char *what, char *err, size_t cap) {
  float *x = malloc(sizeof(float) * n), *y = malloc(sizeof(float) * n);
  int ok = x && y;
  if (ok) {
    p->cpu->buf_read(p->cpu, b->c, 0, n, x);
    wisp_status st = p->gpu->sync(p->gpu);
    if (st) {
      snprintf(err, cap, "%s: sync: %s", what, wisp_last_error());
      ok = 0;
    } else {
      p->gpu->buf_read(p->gpu, b->g, 0, n, y);
      if ((st = p->gpu->sync(p->gpu))) { /* a failed readback is reported here */
        snprintf(err, cap, "%s: read: %s", what, wisp_last_error());
        free(x);
        free(y);
        return 0;
      }
      double mx = 0, worst = 0;
      size_t wi = 0;
      for (size_t i = 0; i < n; i++) mx = fmax(mx, fabs(x[i]));
      for (size_t i = 0; i < n; i++) {
        double e = fabs((double)y[i] - x[i]);
        if (worst < INFINITY && !(e <= worst)) { /* catches NaN (first one) */
          worst = isnan(e) ? INFINITY : e;
          wi = i;
        }
      }
      double rel = mx > 0 ? worst / mx : worst;
      if (rel > g_worst) g_worst = rel;
      if (!(rel <= tol)) {
        snprintf(err, cap, "%s: [%zu] gpu %.9g cpu %.9g, error %.3g of max|ref| %.4g (tol %g)", what, wi, y[wi],
                 x[wi], rel, mx, tol);
        ok = 0;
      }
    }
  }
  free(x);
  free(y);
  return ok;
}

/* Random Q4/Q4Z/F32/F16/Q8_0 weights. */
typedef struct {
  wisp_matrix m;
  void *a, *b, *c;
} wmat_host;

static void wmat_make(wmat_host *h, wisp_wtype type, int rows, int cols, uint64_t *seed) {
  memset(h, 0, sizeof *h);
  h->m.type = type;
  h->m.rows = rows;
  h->m.cols = cols;
  if (type == WISP_W_F32) {
    float *f = malloc(sizeof(float) * (size_t)rows * cols);
    for (size_t i = 0; f && i < (size_t)rows * cols; i++) f[i] = 0.1f * test_rand_float(seed);
    h->m.f32 = f;
    h->a = f;
    return;
  }
  if (type == WISP_W_F16 || type == WISP_W_Q8_0) { /* random values, rounded / quantized as the converter does */
    float *f = malloc(sizeof(float) * (size_t)rows * cols);
    size_t nb = type == WISP_W_F16 ? wisp_f16_bytes(rows, cols) : wisp_q8_0_bytes(rows, cols);
    uint8_t *q = malloc(nb);
    for (size_t i = 0; f && i < (size_t)rows * cols; i++) f[i] = 0.1f * test_rand_float(seed);
    if (f && q && type == WISP_W_F16) wisp_quantize_f16(f, rows, cols, q);
    if (f && q && type == WISP_W_Q8_0) wisp_quantize_q8_0_rows(f, rows, cols, q);
    free(f);
    h->m.q = q;
    h->a = q;
    return;
  }
  size_t nq = wisp_q4_quant_bytes(rows, cols), ns = (size_t)rows * (cols / 32), nz = wisp_q4_zp_bytes(rows, cols);
  uint8_t *q = malloc(nq), *z = malloc(nz ? nz : 1);
  float *s = malloc(sizeof(float) * ns);
  for (size_t i = 0; q && i < nq; i++) q[i] = (uint8_t)test_rand_u32(seed);
  for (size_t i = 0; s && i < ns; i++) s[i] = 0.002f + 0.02f * fabsf(test_rand_float(seed));
  for (size_t i = 0; z && i < nz; i++) z[i] = (uint8_t)test_rand_u32(seed);
  h->m.q = q;
  h->m.scales = s;
  if (type == WISP_W_Q4Z) h->m.zp = z;
  h->a = q;
  h->b = s;
  h->c = z;
}

static void wmat_keep(pair *p, wmat_host *h) {
  keep(p, h->a);
  keep(p, h->b);
  keep(p, h->c);
}

static wisp_vector vec_make(int n, uint64_t *seed, float base, float spread) {
  float *v = malloc(sizeof(float) * (size_t)n);
  for (int i = 0; v && i < n; i++) v[i] = base + spread * test_rand_float(seed);
  return (wisp_vector){n, v, NULL};
}

static int prep_vec(pair *p, wisp_vector *v) {
  return v->data && !p->cpu->prepare_vector(p->cpu, v) && !p->gpu->prepare_vector(p->gpu, v);
}

#define PAIR_OR_FAIL(p, d, sg, mb)                                                     \
  pair p;                                                                              \
  CHECKF(pair_open(&p, d, sg, mb), "cannot create the backends: %s", wisp_last_error())

static void report(const char *op) { printf("     %s: max error %.3g of max|ref|\n", op, g_worst); }

/* ---- per-op tests ------------------------------------------------------------ */

/* Also with 16 KiB weight bindings (columns 32 and 96 only): f32 1000x96
 * becomes 24 parts, Q4Z 1000x96 (3 blocks a row, so rows share zero-point
 * bytes) 340-row parts. */
static const wisp_wtype k_base_types[] = {WISP_W_F32, WISP_W_Q4, WISP_W_Q4Z};
static const wisp_wtype k_f16_q8_types[] = {WISP_W_F16, WISP_W_Q8_0};
static int embed_suite(wisp_wgpu_device *d, uint64_t max_binding, const wisp_wtype *types, int ntypes, int ncols,
                       char *err, size_t cap);

TEST(webgpu_backend_embed) {
  WEBGPU_OR_SKIP(d);
  g_worst = 0;
  char err[600] = "";
  CHECKF(embed_suite(d, 0, k_base_types, 3, 3, err, sizeof err), "%s", err);
  CHECKF(embed_suite(d, 16384, k_base_types, 3, 2, err, sizeof err), "split: %s", err);
  report("embed");
}

static int embed_suite(wisp_wgpu_device *d, uint64_t max_binding, const wisp_wtype *types, int ntypes, int ncols,
                       char *err, size_t cap) {
  pair p;
  if (!pair_open(&p, d, -1, max_binding)) {
    snprintf(err, cap, "cannot create the backends: %s", wisp_last_error());
    return 0;
  }
  uint64_t seed = 11;
  int ok = 1;
  static const int cols_[] = {32, 96, 2560};
  static const int ntok[] = {1, 3, 17, 70};
  for (int ti = 0; ok && ti < ntypes; ti++)
    for (int ci = 0; ok && ci < ncols; ci++) {
      wmat_host h;
      wmat_make(&h, types[ti], 1000, cols_[ci], &seed);
      ok = !p.cpu->prepare_matrix(p.cpu, &h.m) && !p.gpu->prepare_matrix(p.gpu, &h.m);
      if (!ok) snprintf(err, cap, "prepare: %s", wisp_last_error());
      for (int ni = 0; ok && ni < 4; ni++) {
        int n = ntok[ni];
        int32_t tok[70];
        for (int i = 0; i < n; i++) tok[i] = (int32_t)(test_rand_u32(&seed) % 1000);
        tok[0] = 999;
        bpair o = zeros(&p, (size_t)n * cols_[ci]);
        p.cpu->embed(p.cpu, &h.m, tok, n, o.c);
        p.gpu->embed(p.gpu, &h.m, tok, n, o.g);
        char what[96];
        snprintf(what, sizeof what, "embed %s cols %d n %d", wisp_wtype_name(types[ti]), cols_[ci], n);
        ok = compare(&p, &o, o.n, TOL_EMBED, what, err, cap);
        bfree(&p, &o);
      }
      wmat_keep(&p, &h);
    }
  pair_close(&p);
  return ok;
}

TEST(webgpu_backend_rmsnorm) {
  WEBGPU_OR_SKIP(d);
  static const int sgs[] = {-1, 0};
  g_worst = 0;
  for (int v = 0; v < 2; v++) {
    PAIR_OR_FAIL(p, d, sgs[v], 0);
    uint64_t seed = 21;
    char err[600] = "";
    int ok = 1;
    static const int dims[] = {64, 96, 1000, 2560};
    static const int ns[] = {1, 3, 17};
    for (int di = 0; ok && di < 4; di++)
      for (int ni = 0; ok && ni < 3; ni++) {
        int dim = dims[di], n = ns[ni];
        bpair x;
        /* n 3: values so small (mean square ~3e-7) that eps (1e-5) dominates, so
         * eps's sign or absence is far past the tolerance; else plain scale */
        ok = fill(&p, &x, n, dim, &seed, ni == 1 ? 1e-3f : 3.0f);
        wisp_vector w = vec_make(dim, &seed, 1.0f, 0.5f);
        ok = ok && prep_vec(&p, &w);
        bpair o = zeros(&p, x.n);
        if (ok) {
          p.cpu->rmsnorm(p.cpu, x.c, &w, 1e-5f, n, dim, o.c);
          p.gpu->rmsnorm(p.gpu, x.g, &w, 1e-5f, n, dim, o.g);
          char what[96];
          snprintf(what, sizeof what, "rmsnorm %s dim %d n %d", sgs[v] ? "subgroups" : "plain", dim, n);
          ok = compare(&p, &o, o.n, TOL_RMSNORM, what, err, sizeof err);
        } else {
          snprintf(err, sizeof err, "setup: %s", wisp_last_error());
        }
        bfree(&p, &o);
        bfree(&p, &x);
        keep(&p, w.data);
      }
    pair_close(&p);
    CHECKF(ok, "%s", err);
  }
  report("rmsnorm");
}

/* Types [t0, t1) of F32, Q4, Q4Z, F16, Q8_0 x rows x cols x tokens, with
 * and without accumulation and with an input row offset; `label` names the
 * backend variant. (Every kernel variant costs lavapipe seconds of LLVM time
 * the first time it runs, so the secondary suites use fewer types.) */
static int matmul_suite(pair *p, const char *label, int t0, int t1, const int *rows_, int nr, const int *cols_, int nc,
                        char *err, size_t cap) {
  static const wisp_wtype types[] = {WISP_W_F32, WISP_W_Q4, WISP_W_Q4Z, WISP_W_F16, WISP_W_Q8_0};
  static const int ns[] = {1, 3, 17};
  uint64_t seed = 31;
  int ok = 1;
  for (int ti = t0; ok && ti < t1; ti++)
    for (int ri = 0; ok && ri < nr; ri++)
      for (int ci = 0; ok && ci < nc; ci++) {
        int rows = rows_[ri], cols = cols_[ci];
        wmat_host h;
        wmat_make(&h, types[ti], rows, cols, &seed);
        ok = !p->cpu->prepare_matrix(p->cpu, &h.m) && !p->gpu->prepare_matrix(p->gpu, &h.m);
        if (!ok) snprintf(err, cap, "prepare %dx%d: %s", rows, cols, wisp_last_error());
        for (int ni = 0; ok && ni < 3; ni++) {
          int n = ns[ni], acc = (ri + ni) % 2, x_row0 = ni == 1 ? 2 : 0;
          bpair x, y;
          ok = fill(p, &x, n + x_row0, cols, &seed, 1.0f) && fill(p, &y, n, rows, &seed, 1.0f);
          if (!ok) {
            snprintf(err, cap, "setup: %s", wisp_last_error());
            break;
          }
          p->cpu->matmul(p->cpu, &h.m, x.c, x_row0, n, y.c, acc);
          p->gpu->matmul(p->gpu, &h.m, x.g, x_row0, n, y.g, acc);
          char what[128];
          snprintf(what, sizeof what, "matmul %s %s %dx%d n %d acc %d x_row0 %d", label, wisp_wtype_name(types[ti]),
                   rows, cols, n, acc, x_row0);
          ok = compare(p, &y, y.n, TOL_MATMUL, what, err, cap);
          bfree(p, &x);
          bfree(p, &y);
        }
        wmat_keep(p, &h);
      }
  return ok;
}

TEST(webgpu_backend_matmul) {
  WEBGPU_OR_SKIP(d);
  PAIR_OR_FAIL(p, d, -1, 0);
  g_worst = 0;
  static const int rows_[] = {1, 7, 33, 1000};
  static const int cols_[] = {32, 96, 2560};
  char err[600] = "";
  int ok = matmul_suite(&p, d->has_subgroups ? "subgroups" : "plain", 0, 3, rows_, 4, cols_, 3, err, sizeof err);
  pair_close(&p);
  CHECKF(ok, "%s", err);
  report("matmul");
}

TEST(webgpu_backend_matmul_plain_and_split) {
  WEBGPU_OR_SKIP(d);
  g_worst = 0;
  static const int rows_[] = {7, 1000};
  static const int cols_[] = {96, 2560};
  char err[600] = "";
  {
    PAIR_OR_FAIL(p, d, 0, 0); /* (2560 columns in plain: webgpu_backend_fused_matvec) */
    int ok = matmul_suite(&p, "plain", 2, 3, rows_, 2, cols_, 1, err, sizeof err);
    pair_close(&p);
    CHECKF(ok, "%s", err);
  }
  {
    /* 64 KiB bindings: a 1000x2560 f32 matrix becomes 6-row parts, Q4 ones
     * 51-row parts; embed and matmul must stitch them together. */
    PAIR_OR_FAIL(p, d, -1, 65536);
    int ok = matmul_suite(&p, "split", 0, 3, rows_ + 1, 1, cols_, 2, err, sizeof err);
    wisp_wgpu_backend_stats st;
    CHECK(wisp_wgpu_backend_stats_get(p.gpu, &st));
    pair_close(&p);
    CHECKF(ok, "%s", err);
    CHECKF(st.weight_parts > 100, "only %llu weight parts: nothing was split", (unsigned long long)st.weight_parts);
  }
  report("matmul plain/split");
}

/* F16 and Q8_0 weights (QT 4 and 5: IEEE halves two to a word; int8 four to
 * a word with an f32 scale a block, repacked from ggml's Q8_0 blocks at
 * upload): embed, one-token products (subgroup and plain kernels) and
 * several-token tiles, whole and split into row ranges, against the CPU
 * backend's f16 / q8_0 kernels. */
TEST(webgpu_backend_f16_q8_0_weights) {
  WEBGPU_OR_SKIP(d);
  g_worst = 0;
  char err[600] = "";
  CHECKF(embed_suite(d, 0, k_f16_q8_types, 2, 3, err, sizeof err), "%s", err);
  CHECKF(embed_suite(d, 16384, k_f16_q8_types, 2, 2, err, sizeof err), "split: %s", err);
  static const int rows_[] = {1, 7, 33, 1000};
  static const int cols_[] = {32, 96, 2560};
  {
    PAIR_OR_FAIL(p, d, -1, 0);
    int ok = matmul_suite(&p, d->has_subgroups ? "subgroups" : "plain", 3, 5, rows_, 4, cols_, 3, err, sizeof err);
    pair_close(&p);
    CHECKF(ok, "%s", err);
  }
  {
    PAIR_OR_FAIL(p, d, 0, 0);
    int ok = matmul_suite(&p, "plain", 3, 5, rows_ + 1, 3, cols_ + 1, 1, err, sizeof err);
    pair_close(&p);
    CHECKF(ok, "%s", err);
  }
  {
    /* 64 KiB bindings: 1000x2560 F16 in 12-row parts, Q8_0 in 25-row parts */
    PAIR_OR_FAIL(p, d, -1, 65536);
    int ok = matmul_suite(&p, "split", 3, 5, rows_ + 3, 1, cols_ + 1, 2, err, sizeof err);
    wisp_wgpu_backend_stats st;
    CHECK(wisp_wgpu_backend_stats_get(p.gpu, &st));
    pair_close(&p);
    CHECKF(ok, "%s", err);
    CHECKF(st.weight_parts > 100, "only %llu weight parts: nothing was split", (unsigned long long)st.weight_parts);
  }
  report("f16/q8_0 embed + matmul");
}

/* A one-token MLP as the models run it: rmsnorm, [gate; up] product, SwiGLU,
 * down product accumulated into the residual. On the GPU the gate/up
 * product and the SwiGLU are one dispatch (matvec PAIR: rows in gate/up
 * pairs, h written by the product) and the norm fuses into it: two
 * dispatches for the four ops. Every output against the CPU (gate/up, h,
 * the norm's, the residual), Q4 and Q4Z, odd F, staged and not. */
TEST(webgpu_backend_mlp_pair_fused) {
  WEBGPU_OR_SKIP(d);
  static const wisp_wtype types[] = {WISP_W_Q4, WISP_W_Q4Z};
  static const int dims[][2] = {{64, 36}, {1024, 2560}, {96, 1001}}; /* (hidden, F) */
  g_worst = 0;
  char err[600] = "";
  for (int v = 0; v < 2; v++) {
    g_tune.no_xstage = v == 1;
    PAIR_OR_FAIL(p, d, -1, 0);
    uint64_t seed = 87;
    int ok = 1;
    for (int ti = 0; ok && ti < 2; ti++)
      for (int di = 0; ok && di < 3; di++) {
        const int H = dims[di][0], F = dims[di][1];
        if (v == 1 && di != 1) continue;
        wmat_host gu_w, dn_w;
        wmat_make(&gu_w, types[ti], 2 * F, H, &seed);
        wmat_make(&dn_w, types[ti], H, (F + 31) / 32 * 32, &seed);
        wisp_vector nw = vec_make(H, &seed, 1.0f, 0.5f);
        bpair x = {0}, xn, gu, h, hp = {0};
        ok = !p.cpu->prepare_matrix(p.cpu, &gu_w.m) && !p.gpu->prepare_matrix(p.gpu, &gu_w.m) &&
             prep_vec(&p, &nw) && fill(&p, &x, 1, H, &seed, 2.0f);
        xn = zeros(&p, (size_t)H);
        gu = zeros(&p, (size_t)2 * F);
        h = zeros(&p, (size_t)F);
        if (!ok) snprintf(err, sizeof err, "setup: %s", wisp_last_error());
        wisp_wgpu_backend_stats s0, s1;
        wisp_wgpu_backend_stats_get(p.gpu, &s0);
        wisp_backend *bs[2] = {p.cpu, p.gpu};
        for (int k = 0; ok && k < 2; k++) {
          wisp_backend *b = bs[k];
          if (k) { /* the graph's fused op: norm + gate/up + SwiGLU */
            const wisp_fused_matmul f = {.pre = WISP_PRE_RMSNORM, .pre_in = x.g, .pre_dim = H, .norm = &nw,
                                         .eps = 1e-5f, .W = &gu_w.m, .x = xn.g, .y = gu.g, .post = WISP_POST_SWIGLU,
                                         .post_out = h.g, .post_dim = F};
            if (!b->matmul_fused(b, &f)) b->swiglu(b, gu.g, 1, F, h.g);
            continue;
          }
          b->rmsnorm(b, x.c, &nw, 1e-5f, 1, H, xn.c);
          b->matmul(b, &gu_w.m, xn.c, 0, 1, gu.c, 0);
          b->swiglu(b, gu.c, 1, F, h.c);
        }
        if (ok) { /* the down product over h (padded to whole blocks), into the residual */
          ok = !p.cpu->prepare_matrix(p.cpu, &dn_w.m) && !p.gpu->prepare_matrix(p.gpu, &dn_w.m);
          hp = zeros(&p, (size_t)dn_w.m.cols);
          p.cpu->buf_copy_to(p.cpu, hp.c, h.c, (size_t)F);
          p.gpu->buf_copy_to(p.gpu, hp.g, h.g, (size_t)F);
          p.cpu->matmul(p.cpu, &dn_w.m, hp.c, 0, 1, x.c, 1);
          p.gpu->matmul(p.gpu, &dn_w.m, hp.g, 0, 1, x.g, 1);
        }
        wisp_wgpu_backend_stats_get(p.gpu, &s1);
        char what[96];
        snprintf(what, sizeof what, "%s %s H %d F %d", v ? "unstaged" : "staged", wisp_wtype_name(types[ti]), H, F);
        char w2[160];
        snprintf(w2, sizeof w2, "mlp %s: gate/up", what);
        ok = ok && compare(&p, &gu, gu.n, TOL_MATMUL, w2, err, sizeof err);
        snprintf(w2, sizeof w2, "mlp %s: h", what);
        ok = ok && compare(&p, &h, h.n, TOL_MATMUL, w2, err, sizeof err);
        snprintf(w2, sizeof w2, "mlp %s: norm output", what);
        ok = ok && compare(&p, &xn, xn.n, TOL_RMSNORM, w2, err, sizeof err);
        snprintf(w2, sizeof w2, "mlp %s: residual", what);
        ok = ok && compare(&p, &x, x.n, TOL_MATMUL, w2, err, sizeof err);
        /* norm + gate/up + SwiGLU: one dispatch; the copy and the down product: one each */
        if (ok && s1.dispatches - s0.dispatches != 3) {
          snprintf(err, sizeof err, "mlp %s: %llu dispatches (3 expected)", what,
                   (unsigned long long)(s1.dispatches - s0.dispatches));
          ok = 0;
        }
        bfree(&p, &x), bfree(&p, &xn), bfree(&p, &gu), bfree(&p, &h), bfree(&p, &hp);
        wmat_keep(&p, &gu_w);
        wmat_keep(&p, &dn_w);
        keep(&p, nw.data);
      }
    pair_close(&p);
    CHECKF(ok, "%s", err);
  }
  report("mlp pair fused");
}

/* Decode-time fusion: a one-token rmsnorm or swiglu followed by a matmul
 * reading its output runs as one matvec (PRE); both the product and the
 * fused op's own output must match. */
TEST(webgpu_backend_fused_matvec) {
  WEBGPU_OR_SKIP(d);
  /* pass 2: subgroups with the input read from global memory instead of
   * staged in workgroup memory (no_xstage, matvec_common.wgsli)
   * with every product's weight loads issued ahead (prefetch 1) */
  static const int sgs[] = {-1, 0, -1};
  static const wisp_wtype types[] = {WISP_W_F32, WISP_W_Q4, WISP_W_Q4Z};
  static const int rows_[] = {7, 1000, 16400}; /* 16400: the tall-matrix geometry, like a head */
  static const int cols_[] = {64, 96, 2560};
  g_worst = 0;
  char err[600] = "";
  for (int v = 0; v < 3; v++) {
    if (v == 2) g_tune.no_xstage = 1, g_tune.prefetch = 1;
    PAIR_OR_FAIL(p, d, sgs[v], 0);
    uint64_t seed = 81;
    int ok = 1;
    for (int ti = 0; ok && ti < 3; ti++)
      for (int ri = 0; ok && ri < 3; ri++)
        for (int ci = 0; ok && ci < 3; ci++) {
          int rows = rows_[ri], cols = cols_[ci], acc = (ti + ci) % 2;
          if ((long)rows * cols > 4000000) continue;
          /* Fewer kernel variants (lavapipe compile time): the plain variant
           * with Q4 only, the tall geometry with Q4Z only. */
          if (v > 0 && types[ti] != WISP_W_Q4) continue;
          if (rows > 16384 && types[ti] != WISP_W_Q4Z) continue;
          wmat_host h;
          wmat_make(&h, types[ti], rows, cols, &seed);
          wisp_vector nw = vec_make(cols, &seed, 1.0f, 0.5f);
          bpair x, gu, y, xn, act;
          ok = !p.cpu->prepare_matrix(p.cpu, &h.m) && !p.gpu->prepare_matrix(p.gpu, &h.m) && prep_vec(&p, &nw) &&
               fill(&p, &x, 1, cols, &seed, 2.0f) && fill(&p, &gu, 1, 2 * cols, &seed, 3.0f) &&
               fill(&p, &y, 1, rows, &seed, 1.0f);
          xn = zeros(&p, (size_t)cols);
          act = zeros(&p, (size_t)cols);
          if (!ok) snprintf(err, sizeof err, "setup: %s", wisp_last_error());
          char what[64];
          snprintf(what, sizeof what, "%s %s %dx%d", v == 2 ? "unstaged" : sgs[v] ? "subgroups" : "plain",
                   wisp_wtype_name(types[ti]), rows, cols);
          if (ok) {
            wisp_backend *bs[2] = {p.cpu, p.gpu};
            for (int k = 0; k < 2; k++) {
              wisp_backend *b = bs[k];
              if (k) { /* the graph's fused ops: rmsnorm+matmul, swiglu+matmul */
                const wisp_fused_matmul nm = {.pre = WISP_PRE_RMSNORM, .pre_in = x.g, .pre_dim = cols, .norm = &nw,
                                              .eps = 1e-5f, .W = &h.m, .x = xn.g, .y = y.g, .accumulate = acc};
                const wisp_fused_matmul sm = {.pre = WISP_PRE_SWIGLU, .pre_in = gu.g, .pre_dim = cols, .W = &h.m,
                                              .x = act.g, .y = y.g, .accumulate = 1};
                b->matmul_fused(b, &nm);
                b->matmul_fused(b, &sm);
                continue;
              }
              b->rmsnorm(b, x.c, &nw, 1e-5f, 1, cols, xn.c);
              b->matmul(b, &h.m, xn.c, 0, 1, y.c, acc);
              b->swiglu(b, gu.c, 1, cols, act.c);
              b->matmul(b, &h.m, act.c, 0, 1, y.c, 1);
            }
            char w2[200];
            snprintf(w2, sizeof w2, "fused rmsnorm+matvec then swiglu+matvec %s: y", what);
            ok = compare(&p, &y, y.n, TOL_MATMUL, w2, err, sizeof err);
            snprintf(w2, sizeof w2, "fused %s: rmsnorm output", what);
            ok = ok && compare(&p, &xn, xn.n, TOL_RMSNORM, w2, err, sizeof err);
            snprintf(w2, sizeof w2, "fused %s: swiglu output", what);
            ok = ok && compare(&p, &act, act.n, TOL_SWIGLU, w2, err, sizeof err);
          }
          bfree(&p, &x);
          bfree(&p, &gu);
          bfree(&p, &y);
          bfree(&p, &xn);
          bfree(&p, &act);
          wmat_keep(&p, &h);
          keep(&p, nw.data);
        }
    pair_close(&p);
    CHECKF(ok, "%s", err);
  }
  report("fused matvec");
}

/* One-token f32 products whose rows are not a whole number of 32-column
 * blocks: the input staged in workgroup memory (matvec_common.wgsli's
 * xsw rotates vec4 slots within runs of 8) must not spill out of its array
 * at a partial last run (cols / 4 % 8 != 0), with and without the fused
 * rmsnorm (PRE 1) and swiglu (PRE 2), and the fused conv block
 * (matvec_conv) likewise. */
TEST(webgpu_backend_matvec_partial_vec4_runs) {
  WEBGPU_OR_SKIP(d);
  static const int cols_[] = {36, 44, 100, 104, 116, 1052};
  g_worst = 0;
  char err[600] = "";
  uint64_t seed = 123;
  PAIR_OR_FAIL(p, d, -1, 0);
  int ok = 1;
  for (int ci = 0; ok && ci < (int)(sizeof cols_ / sizeof cols_[0]); ci++) {
    const int cols = cols_[ci], rows = 3 * 40;
    wmat_host h;
    wmat_make(&h, WISP_W_F32, rows, cols, &seed);
    wisp_vector nw = vec_make(cols, &seed, 1.0f, 0.5f);
    wisp_vector taps = vec_make(40 * 3, &seed, 0.0f, 0.5f);
    bpair x, gu, y, y2, xn, act, st, co;
    ok = !p.cpu->prepare_matrix(p.cpu, &h.m) && !p.gpu->prepare_matrix(p.gpu, &h.m) && prep_vec(&p, &nw) &&
         prep_vec(&p, &taps) && fill(&p, &x, 1, cols, &seed, 2.0f) && fill(&p, &gu, 1, 2 * cols, &seed, 3.0f) &&
         fill(&p, &y, 1, rows, &seed, 1.0f);
    y2 = zeros(&p, (size_t)rows);
    xn = zeros(&p, (size_t)cols);
    act = zeros(&p, (size_t)cols);
    st = zeros(&p, (size_t)40 * 2);
    co = zeros(&p, 40);
    if (!ok) snprintf(err, sizeof err, "setup: %s", wisp_last_error());
    if (ok) {
      wisp_backend *bs[2] = {p.cpu, p.gpu};
      for (int k = 0; k < 2; k++) {
        wisp_backend *b = bs[k];
        b->matmul(b, &h.m, k ? x.g : x.c, 0, 1, k ? y.g : y.c, 1);
        if (k) { /* the graph's fused ops: rmsnorm+matmul, swiglu+matmul, rmsnorm+matmul+shortconv */
          const wisp_fused_matmul nm = {.pre = WISP_PRE_RMSNORM, .pre_in = x.g, .pre_dim = cols, .norm = &nw,
                                        .eps = 1e-5f, .W = &h.m, .x = xn.g, .y = y.g, .accumulate = 1};
          const wisp_fused_matmul sm = {.pre = WISP_PRE_SWIGLU, .pre_in = gu.g, .pre_dim = cols, .W = &h.m,
                                        .x = act.g, .y = y.g, .accumulate = 1};
          const wisp_fused_matmul cm = {.pre = WISP_PRE_RMSNORM, .pre_in = x.g, .pre_dim = cols, .norm = &nw,
                                        .eps = 1e-5f, .W = &h.m, .x = xn.g, .y = y2.g, .post = WISP_POST_SHORTCONV,
                                        .post_out = co.g, .post_dim = 40, .taps = &taps, .conv_len = 3,
                                        .conv_state = st.g};
          b->matmul_fused(b, &nm);
          b->matmul_fused(b, &sm);
          if (!b->matmul_fused(b, &cm)) b->shortconv(b, y2.g, &taps, 3, 1, 40, st.g, co.g);
          continue;
        }
        b->rmsnorm(b, x.c, &nw, 1e-5f, 1, cols, xn.c);
        b->matmul(b, &h.m, xn.c, 0, 1, y.c, 1);
        b->swiglu(b, gu.c, 1, cols, act.c);
        b->matmul(b, &h.m, act.c, 0, 1, y.c, 1);
        b->rmsnorm(b, x.c, &nw, 1e-5f, 1, cols, xn.c);
        b->matmul(b, &h.m, xn.c, 0, 1, y2.c, 0);
        b->shortconv(b, y2.c, &taps, 3, 1, 40, st.c, co.c);
      }
      char w2[160];
      snprintf(w2, sizeof w2, "f32 %dx%d one-token products", rows, cols);
      ok = compare(&p, &y, y.n, TOL_MATMUL, w2, err, sizeof err);
      snprintf(w2, sizeof w2, "f32 %dx%d conv block: product", rows, cols);
      ok = ok && compare(&p, &y2, y2.n, TOL_MATMUL, w2, err, sizeof err);
      snprintf(w2, sizeof w2, "f32 %dx%d conv block: conv output", rows, cols);
      ok = ok && compare(&p, &co, co.n, TOL_MATMUL, w2, err, sizeof err);
    }
    bfree(&p, &x);
    bfree(&p, &gu);
    bfree(&p, &y);
    bfree(&p, &y2);
    bfree(&p, &xn);
    bfree(&p, &act);
    bfree(&p, &st);
    bfree(&p, &co);
    wmat_keep(&p, &h);
    keep(&p, nw.data);
    keep(&p, taps.data);
  }
  pair_close(&p);
  CHECKF(ok, "%s", err);
  report("matvec partial vec4 runs");
}

/* Decode-time fusion of a conv block's input: rmsnorm -> in_proj matmul ->
 * shortconv runs as one matvec_conv dispatch (and matmul -> shortconv
 * without the norm); the product, the norm output, the conv output and the
 * carried state must all match, over several calls. */
TEST(webgpu_backend_fused_conv) {
  WEBGPU_OR_SKIP(d);
  if (d->info.max_storage_buffers_per_shader_stage < 10) SKIP("fewer than 10 storage buffers per stage");
  static const int sgs[] = {-1, 0};
  static const wisp_wtype types[] = {WISP_W_F32, WISP_W_Q4, WISP_W_Q4Z};
  static const int dims[] = {64, 96, 992};
  g_worst = 0;
  char err[600] = "";
  for (int v = 0; v < 2; v++) {
    PAIR_OR_FAIL(p, d, sgs[v], 0);
    wisp_wgpu_backend_stats s0, s1;
    wisp_wgpu_backend_stats_get(p.gpu, &s0);
    uint64_t seed = 101;
    int ok = 1, fused_calls = 0;
    for (int ti = 0; ok && ti < 3; ti++)
      for (int di = 0; ok && di < 3; di++) {
        int dim = dims[di], L = 3 + (ti == 2);
        /* Fewer variants to compile: no f32 in_proj, the plain variant with Q4 only. */
        if (types[ti] == WISP_W_F32 || (sgs[v] == 0 && types[ti] != WISP_W_Q4)) continue;
        wmat_host h;
        wmat_make(&h, types[ti], 3 * dim, dim, &seed);
        wisp_vector nw = vec_make(dim, &seed, 1.0f, 0.5f), taps = vec_make(dim * L, &seed, 0.0f, 1.0f);
        bpair x, y, xn, o, state;
        ok = !p.cpu->prepare_matrix(p.cpu, &h.m) && !p.gpu->prepare_matrix(p.gpu, &h.m) && prep_vec(&p, &nw) &&
             prep_vec(&p, &taps) && fill(&p, &x, 1, dim, &seed, 2.0f);
        y = zeros(&p, (size_t)3 * dim);
        xn = zeros(&p, (size_t)dim);
        o = zeros(&p, (size_t)dim);
        state = zeros(&p, (size_t)dim * (L - 1));
        if (!ok) snprintf(err, sizeof err, "setup: %s", wisp_last_error());
        for (int call = 0; ok && call < 4; call++) {
          int norm = call != 2 || types[ti] != WISP_W_Q4; /* one call without the norm (PRE 0), Q4 */
          wisp_backend *bs[2] = {p.cpu, p.gpu};
          for (int k = 0; k < 2; k++) {
            wisp_backend *b = bs[k];
            if (k) { /* the graph's fused op: (rmsnorm+) matmul+shortconv */
              const wisp_fused_matmul f = {.pre = norm ? WISP_PRE_RMSNORM : WISP_PRE_NONE, .pre_in = x.g,
                                           .pre_dim = dim, .norm = &nw, .eps = 1e-5f, .W = &h.m,
                                           .x = norm ? xn.g : x.g, .y = y.g, .post = WISP_POST_SHORTCONV,
                                           .post_out = o.g, .post_dim = dim, .taps = &taps, .conv_len = L,
                                           .conv_state = state.g};
              if (!b->matmul_fused(b, &f)) b->shortconv(b, y.g, &taps, L, 1, dim, state.g, o.g);
              continue;
            }
            if (norm) b->rmsnorm(b, x.c, &nw, 1e-5f, 1, dim, xn.c);
            b->matmul(b, &h.m, norm ? xn.c : x.c, 0, 1, y.c, 0);
            b->shortconv(b, y.c, &taps, L, 1, dim, state.c, o.c);
          }
          fused_calls++;
          char what[96];
          snprintf(what, sizeof what, "%s %s dim %d call %d", sgs[v] ? "subgroups" : "plain",
                   wisp_wtype_name(types[ti]), dim, call);
          char w2[160];
          snprintf(w2, sizeof w2, "fused conv %s: out", what);
          ok = compare(&p, &o, o.n, TOL_MATMUL, w2, err, sizeof err);
          snprintf(w2, sizeof w2, "fused conv %s: in_proj output", what);
          ok = ok && compare(&p, &y, y.n, TOL_MATMUL, w2, err, sizeof err);
          snprintf(w2, sizeof w2, "fused conv %s: state", what);
          ok = ok && compare(&p, &state, state.n, TOL_MATMUL, w2, err, sizeof err);
          snprintf(w2, sizeof w2, "fused conv %s: norm output", what);
          ok = ok && (!norm || compare(&p, &xn, xn.n, TOL_RMSNORM, w2, err, sizeof err));
          /* Next call's input: this call's conv output (as a residual would). */
          bpair t = x;
          x = o;
          o = t;
        }
        bfree(&p, &x);
        bfree(&p, &y);
        bfree(&p, &xn);
        bfree(&p, &o);
        bfree(&p, &state);
        wmat_keep(&p, &h);
        keep(&p, nw.data);
        keep(&p, taps.data);
      }
    wisp_wgpu_backend_stats_get(p.gpu, &s1);
    pair_close(&p);
    CHECKF(ok, "%s", err);
    /* Each call is one dispatch (plus the fills): at most fills + calls. */
    CHECKF(s1.dispatches - s0.dispatches <= (uint64_t)(9 + fused_calls), "%llu dispatches for %d fused calls",
           (unsigned long long)(s1.dispatches - s0.dispatches), fused_calls);
  }
  report("fused conv");
}

/* Another geometry (override constants) gives the same products (Q4Z). */
TEST(webgpu_backend_matmul_geometries) {
  WEBGPU_OR_SKIP(d);
  g_worst = 0;
  static const int rows_[] = {33, 1000};
  static const int cols_[] = {96, 512};
  static const uint32_t geo[][4] = {{32, 16, 256, 16}};
  char err[600] = "";
  for (int i = 0; i < 1; i++) {
    g_mm_tm = geo[i][0], g_mm_tn = geo[i][1], g_mv_wg = geo[i][2], g_mv_rows = geo[i][3];
    pair p;
    int opened = pair_open(&p, d, -1, 0);
    g_mm_tm = g_mm_tn = g_mv_wg = g_mv_rows = 0;
    CHECKF(opened, "geometry %d: %s", i, wisp_last_error());
    char label[64];
    snprintf(label, sizeof label, "TM %u TN %u WG %u ROWS %u", geo[i][0], geo[i][1], geo[i][2], geo[i][3]);
    int ok = matmul_suite(&p, label, 2, 3, rows_, 2, cols_, 2, err, sizeof err);
    pair_close(&p);
    CHECKF(ok, "%s", err);
  }
  report("matmul geometries");
}

/* A one-token product geometry the seed manifest's plan selects, as the
 * engine hands it to the backend (wisp_engine_kernel_choice). */
typedef struct {
  wisp_kernel_choice c;
  char from[224];
} seed_geometry;

/* The plan the engine resolves for the seed manifest (the default profile,
 * wisp's registry) on the device the manifest was tuned for
 * (runtime.extraFeatures, expectedSubgroupSize: subgroups of 32; on
 * lavapipe, subgroups of 8, the plan keeps the registry geometry, so no
 * session here ever runs these): its decode matmuls whose geometry came
 * from candidate.matvec.SHAPE.geometry or, for the shapes the candidate
 * leaves out, runtime.knee. Distinct (workgroupSize, rowsPerSubgroup)
 * pairs into g[0..*n); *from_candidate counts those of the candidate. */
static int seed_geometries(seed_geometry *g, int cap, int *n, int *from_candidate, char *err, size_t ecap) {
  *n = *from_candidate = 0;
  cJSON *manifest = NULL;
  wisp_model_shape *shape = calloc(1, sizeof *shape);
  wisp_registry *reg = NULL;
  wisp_profile *prof = NULL;
  wisp_plan *plan = NULL;
  const cJSON *cand = NULL, *knee = NULL;
  wisp_device_caps dev;
  wisp_device_caps_default(&dev, "webgpu");
  wisp_registry_options ro = {.kernels_dir = WISP_DEFAULT_KERNELS_DIR};
  wisp_profile_options po = {.profiles_dir = WISP_DEFAULT_PROFILES_DIR, .kernels_dir = WISP_DEFAULT_KERNELS_DIR};
  int ok = shape && !wisp_json_load(fixture_seed_manifest(), &manifest) &&
           !wisp_plan_manifest_parts(manifest, fixture_seed_manifest(), shape, &cand, &knee);
  if (ok) wisp_device_caps_from_manifest(&dev, manifest);
  ok = ok && !wisp_registry_load(WISP_DEFAULT_REGISTRY, &ro, &reg) && !wisp_profile_load("default", &po, &prof);
  if (ok) {
    wisp_plan_inputs in = {.shape = shape, .candidate = cand, .knee = knee, .profile = prof, .registry = reg,
                           .device = &dev, .backend = "webgpu"};
    ok = !wisp_plan_resolve(&in, &plan);
  }
  if (!ok) snprintf(err, ecap, "the seed manifest's plan: %s", wisp_last_error());
  const wisp_plan_phase *ph = ok ? &plan->phases[WISP_PHASE_DECODE] : NULL;
  for (int part = 0; ok && part < 3; part++) {
    const int ngroups = part == 2 ? ph->n_groups : 1;
    for (int gi = 0; ok && gi < ngroups; gi++) {
      const wisp_plan_op *ops = part == 0 ? ph->prologue : part == 1 ? ph->epilogue : ph->groups[gi].ops;
      const int nops = part == 0 ? ph->n_prologue : part == 1 ? ph->n_epilogue : ph->groups[gi].n_ops;
      for (int i = 0; ok && i < nops; i++) {
        const wisp_plan_op *op = &ops[i];
        const wisp_prov_kind k = op->geometry_from.kind;
        if (strcmp(op->op, "matmul") || (k != WISP_PROV_CANDIDATE && k != WISP_PROV_KNEE)) continue;
        int have = 0;
        for (int j = 0; j < *n && !have; j++)
          have = g[j].c.workgroup_size == op->geometry.workgroup_size &&
                 g[j].c.rows_per_subgroup == op->geometry.rows_per_subgroup;
        if (have) continue;
        if (*n == cap) {
          snprintf(err, ecap, "more than %d geometries", cap);
          ok = 0;
          break;
        }
        seed_geometry *e = &g[(*n)++];
        memset(e, 0, sizeof *e);
        if (wisp_engine_kernel_choice(&e->c, op)) {
          snprintf(err, ecap, "the choice of %s: %s", op->section, wisp_last_error());
          ok = 0;
          break;
        }
        snprintf(e->from, sizeof e->from, "%.150s (%.60s)", op->geometry_from.detail, e->c.variant);
        *from_candidate += k == WISP_PROV_CANDIDATE;
      }
    }
  }
  wisp_plan_free(plan);
  wisp_profile_free(prof);
  wisp_registry_free(reg);
  cJSON_Delete(manifest);
  free(shape);
  return ok;
}

/* Every one-token product geometry the seed manifest's plan can select
 * (seed_geometries: today 256x8 head, 512x6 conv.in_proj, 256x1
 * conv.out_proj, 512x4 attn.qkv, 512x1 attn.o_proj from the candidate,
 * 128x1 of the knee for the MLP products), given to Q4 and Q4Z matrices as
 * the engine gives a plan's choice (wisp_matrix.choice, read at
 * prepare_matrix), on rows that are no multiple of the rows a workgroup
 * takes (1001; 37, fewer than one workgroup takes): the product, and a
 * second one accumulating with the rmsnorm before it fused in (PRE 1, as
 * the decode runs qkv, in_proj and the head), against the CPU backend.
 * The columns are the seed's hidden size (1,024: a staged input shorter
 * than, as long as and longer than the workgroup) for both shapes, so that
 * each geometry and weight type is one pipeline: lavapipe compiles each in
 * ~1.4 s with an empty shader cache (16 s in all; 35 s with a second
 * column count); few-column inputs are webgpu_backend_fused_matvec's. A
 * geometry outside what matvec.wgsl supports (17 rows) is refused at
 * prepare: the choice is read, not ignored. */
TEST(webgpu_backend_seed_matvec_geometries) {
  WEBGPU_OR_SKIP(d);
  if (!d->has_subgroups) SKIP("the plan's matvec geometries are for the subgroup kernel");
  seed_geometry geo[16];
  int ngeo = 0, from_candidate = 0;
  char err[600] = "";
  CHECKF(seed_geometries(geo, 16, &ngeo, &from_candidate, err, sizeof err), "%s", err);
  CHECKF(ngeo > 0 && from_candidate > 0, "%d geometries, %d from the candidate", ngeo, from_candidate);
  static const wisp_wtype types[] = {WISP_W_Q4, WISP_W_Q4Z};
  static const int shapes[][2] = {{1001, 1024}, {37, 1024}};
  g_worst = 0;
  PAIR_OR_FAIL(p, d, -1, 0);
  uint64_t seed = 97;
  int ok = 1;
  for (int gi = 0; ok && gi < ngeo; gi++)
    for (int ti = 0; ok && ti < 2; ti++)
      for (int si = 0; ok && si < 2; si++) {
        const int rows = shapes[si][0], cols = shapes[si][1];
        wmat_host h;
        wmat_make(&h, types[ti], rows, cols, &seed);
        wisp_matrix mc = h.m; /* the CPU's: its own kernels, no choice (it refuses wgsl_ variants) */
        h.m.choice[WISP_PHASE_DECODE] = geo[gi].c;
        char what[320];
        snprintf(what, sizeof what, "WG %d ROWS %d [%s] %s %dx%d", geo[gi].c.workgroup_size,
                 geo[gi].c.rows_per_subgroup, geo[gi].from, wisp_wtype_name(types[ti]), rows, cols);
        wisp_vector nw = vec_make(cols, &seed, 1.0f, 0.5f);
        bpair x = {0}, y = {0}, xn = {0};
        ok = !p.cpu->prepare_matrix(p.cpu, &mc) && !p.gpu->prepare_matrix(p.gpu, &h.m) && prep_vec(&p, &nw) &&
             fill(&p, &x, 1, cols, &seed, 2.0f) && fill(&p, &y, 1, rows, &seed, 1.0f);
        xn = zeros(&p, (size_t)cols);
        if (!ok) snprintf(err, sizeof err, "%s: setup: %s", what, wisp_last_error());
        wisp_matrix *ms[2] = {&mc, &h.m};
        if (ok) {
          wisp_backend *bs[2] = {p.cpu, p.gpu};
          for (int k = 0; k < 2; k++) {
            wisp_backend *b = bs[k];
            b->matmul(b, ms[k], k ? x.g : x.c, 0, 1, k ? y.g : y.c, 0);
          }
          char w2[384];
          snprintf(w2, sizeof w2, "%s: product", what);
          ok = compare(&p, &y, y.n, TOL_MATMUL, w2, err, sizeof err);
          for (int k = 0; ok && k < 2; k++) {
            wisp_backend *b = bs[k];
            b->rmsnorm(b, k ? x.g : x.c, &nw, 1e-5f, 1, cols, k ? xn.g : xn.c);
            b->matmul(b, ms[k], k ? xn.g : xn.c, 0, 1, k ? y.g : y.c, 1);
          }
          snprintf(w2, sizeof w2, "%s: rmsnorm + product accumulated", what);
          ok = ok && compare(&p, &y, y.n, TOL_MATMUL, w2, err, sizeof err);
          snprintf(w2, sizeof w2, "%s: rmsnorm output", what);
          ok = ok && compare(&p, &xn, xn.n, TOL_RMSNORM, w2, err, sizeof err);
        }
        bfree(&p, &x);
        bfree(&p, &y);
        bfree(&p, &xn);
        wmat_keep(&p, &h);
        keep(&p, nw.data);
      }
  if (ok) { /* a geometry matvec.wgsl cannot run: refused when the matrix is prepared */
    wmat_host h;
    wmat_make(&h, WISP_W_Q4, 37, 96, &seed);
    h.m.choice[WISP_PHASE_DECODE] = geo[0].c;
    h.m.choice[WISP_PHASE_DECODE].rows_per_subgroup = 17;
    wisp_status st = p.gpu->prepare_matrix(p.gpu, &h.m);
    wmat_keep(&p, &h);
    if (st != WISP_EUNSUPPORTED) {
      snprintf(err, sizeof err, "a 17-row geometry: prepare gave %d, want WISP_EUNSUPPORTED", (int)st);
      ok = 0;
    }
  }
  pair_close(&p);
  CHECKF(ok, "%s", err);
  for (int gi = 0; gi < ngeo; gi++)
    printf("     WG %d ROWS %d: %s\n", geo[gi].c.workgroup_size, geo[gi].c.rows_per_subgroup, geo[gi].from);
  report("seed matvec geometries");
}

TEST(webgpu_backend_shortconv_state_carries) {
  WEBGPU_OR_SKIP(d);
  PAIR_OR_FAIL(p, d, -1, 0);
  g_worst = 0;
  uint64_t seed = 41;
  char err[600] = "";
  int ok = 1;
  static const int dims[] = {64, 96, 1000};
  static const int Ls[] = {3, 4, 2};
  /* token blocks of 16 (shortconv.wgsl TT): calls within one, across two
   * and three, and shorter than the state */
  static const int calls[] = {3, 1, 17, 1, 2, 40};
  for (int di = 0; ok && di < 3; di++)
    for (int li = 0; ok && li < 3; li++) {
      int dim = dims[di], L = Ls[li];
      wisp_vector taps = vec_make(dim * L, &seed, 0.0f, 1.0f);
      ok = prep_vec(&p, &taps);
      bpair state = zeros(&p, (size_t)dim * (L - 1));
      for (int c = 0; ok && c < 6; c++) {
        int n = calls[c];
        bpair bcx, o;
        ok = fill(&p, &bcx, n, 3 * dim, &seed, 1.0f);
        o = zeros(&p, (size_t)n * dim);
        if (ok) {
          p.cpu->shortconv(p.cpu, bcx.c, &taps, L, n, dim, state.c, o.c);
          p.gpu->shortconv(p.gpu, bcx.g, &taps, L, n, dim, state.g, o.g);
          char what[96];
          snprintf(what, sizeof what, "shortconv dim %d L %d call %d (n %d)", dim, L, c, n);
          ok = compare(&p, &o, o.n, TOL_SHORTCONV, what, err, sizeof err) &&
               compare(&p, &state, state.n, TOL_SHORTCONV, "shortconv state", err, sizeof err);
        }
        bfree(&p, &bcx);
        bfree(&p, &o);
      }
      bfree(&p, &state);
      keep(&p, taps.data);
    }
  pair_close(&p);
  CHECKF(ok, "%s", err);
  report("shortconv");
}

/* Like compare, for a packed-f16 cache on the GPU side (tests/webgpu_fixture.h). */
static int compare_kv16(pair *p, const bpair *b, size_t n, double tol, const char *what, char *err, size_t cap) {
  return test_compare_kv16(p->cpu, b->c, p->gpu, b->g, n, tol, what, &g_worst, err, cap);
}

/* With g_attn_proj set, attention_case follows every call with the output
 * projection (a Q4 matrix of 37 rows, accumulated into a residual) reading
 * the attention output, as a model does (a decode step as the graph's
 * mixer+matmul fused op): its split merge may then be computed by that
 * product (matvec.wgsl PRE 3); the residual is compared
 * too, and g_attn_merges counts the decode steps that had splits. */
static int g_attn_proj;
static int g_attn_merges;

/* Attention over a sequence of calls (prefill, then decode steps), so that
 * later calls attend to cached keys written by earlier ones. */
static int attention_case(pair *p, int H, int KVH, int D, const int *calls, int ncalls, uint64_t *seed, char *err,
                          size_t cap) {
  wmat_host proj;
  bpair resid = {0};
  if (g_attn_proj) {
    wmat_make(&proj, WISP_W_Q4, 37, H * D, seed);
    if (p->cpu->prepare_matrix(p->cpu, &proj.m) || p->gpu->prepare_matrix(p->gpu, &proj.m) ||
        !fill(p, &resid, 1, 37, seed, 1.0f)) {
      snprintf(err, cap, "projection setup: %s", wisp_last_error());
      return 0;
    }
  }
  const int max_pos = 160, half = D / 2;
  float *cs = malloc(sizeof(float) * (size_t)max_pos * half), *sn = malloc(sizeof(float) * (size_t)max_pos * half);
  for (int pos = 0; cs && sn && pos < max_pos; pos++)
    for (int i = 0; i < half; i++) {
      float ang = (float)pos * powf(10000.0f, -2.0f * i / D);
      cs[pos * half + i] = cosf(ang);
      sn[pos * half + i] = sinf(ang);
    }
  wisp_vector vc = {max_pos * half, cs, NULL}, vs = {max_pos * half, sn, NULL};
  wisp_vector qn = vec_make(D, seed, 1.0f, 0.3f), kn = vec_make(D, seed, 1.0f, 0.3f);
  int ok = cs && sn && prep_vec(p, &vc) && prep_vec(p, &vs) && prep_vec(p, &qn) && prep_vec(p, &kn);
  if (!ok) snprintf(err, cap, "setup: %s", wisp_last_error());
  size_t kvn = (size_t)max_pos * KVH * D;
  bpair kc = zeros(p, kvn), vcache = zeros(p, kvn);
  if (g_kv16) { /* packed f16: the backend's own, half-size KV buffers */
    p->gpu->buf_free(p->gpu, kc.g);
    p->gpu->buf_free(p->gpu, vcache.g);
    kc.g = p->gpu->kv_buf_new(p->gpu, kvn);
    vcache.g = p->gpu->kv_buf_new(p->gpu, kvn);
    ok = ok && kc.g && vcache.g;
  }
  int pos0 = 0;
  for (int c = 0; ok && c < ncalls; c++) {
    int n = calls[c];
    bpair qkv, o;
    ok = fill(p, &qkv, n, (H + 2 * KVH) * D, seed, 2.0f);
    o = zeros(p, (size_t)n * H * D);
    if (ok) {
      wisp_attention_args a = {.n = n, .pos0 = pos0, .heads = H, .kv_heads = KVH, .head_dim = D, .q_norm = &qn,
                               .k_norm = &kn, .eps = 1e-5f, .rope_cos = &vc, .rope_sin = &vs};
      a.qkv = qkv.c, a.k_cache = kc.c, a.v_cache = vcache.c, a.out = o.c;
      p->cpu->attention(p->cpu, &a);
      a.qkv = qkv.g, a.k_cache = kc.g, a.v_cache = vcache.g, a.out = o.g;
      if (g_attn_proj && n == 1) { /* one token: the graph's mixer+matmul fused op */
        const wisp_fused_matmul f = {.pre = WISP_PRE_ATTENTION, .attention = &a, .W = &proj.m, .x = o.g,
                                     .y = resid.g, .accumulate = 1};
        p->gpu->matmul_fused(p->gpu, &f);
      } else {
        p->gpu->attention(p->gpu, &a);
      }
      char what[128];
      snprintf(what, sizeof what, "attention H %d KVH %d D %d call %d (pos0 %d, n %d)", H, KVH, D, c, pos0, n);
      if (g_attn_proj) { /* the last token's output projected into the residual */
        p->cpu->matmul(p->cpu, &proj.m, o.c, n - 1, 1, resid.c, 1);
        if (n > 1) p->gpu->matmul(p->gpu, &proj.m, o.g, n - 1, 1, resid.g, 1);
        if (n == 1 && pos0 >= 32) g_attn_merges++;
        char w2[160];
        snprintf(w2, sizeof w2, "%s: projected", what);
        ok = compare(p, &resid, resid.n, g_kv16 ? TOL_KV16 : TOL_MATMUL, w2, err, cap);
      }
      size_t used = (size_t)(pos0 + n) * KVH * D;
      if (g_kv16)
        ok = ok && compare(p, &o, o.n, TOL_KV16, what, err, cap) &&
             compare_kv16(p, &kc, used, TOL_KV16, "k cache", err, cap) &&
             compare_kv16(p, &vcache, used, TOL_KV16, "v cache", err, cap);
      else
        ok = ok && compare(p, &o, o.n, TOL_ATTENTION, what, err, cap) &&
             compare(p, &kc, used, TOL_ATTENTION, "k cache", err, cap) &&
             compare(p, &vcache, used, TOL_ATTENTION, "v cache", err, cap);
    }
    bfree(p, &qkv);
    bfree(p, &o);
    pos0 += n;
  }
  bfree(p, &kc);
  bfree(p, &vcache);
  if (g_attn_proj) {
    bfree(p, &resid);
    wmat_keep(p, &proj);
  }
  keep(p, cs);
  keep(p, sn);
  keep(p, qn.data);
  keep(p, kn.data);
  return ok;
}

/* Prefill 17 at 0, decode at 17, 3 more at 18; a long prefill that crosses
 * the 64-key tile of the kernels, decode steps past it. */
static const int k_short_calls[] = {17, 1, 3};
static const int k_long_calls[] = {64, 1, 70, 1};

/* The cases the packed-f16 and tiled-prefill variants run: short calls with
 * small heads, long calls with GQA and with one KV head a query head. */
static int attention_mixed(pair *p, uint64_t *seed, char *err, size_t cap) {
  return attention_case(p, 4, 2, 16, k_short_calls, 3, seed, err, cap) &&
         attention_case(p, 16, 8, 64, k_long_calls, 4, seed, err, cap) &&
         attention_case(p, 4, 4, 64, k_long_calls, 4, seed, err, cap);
}

TEST(webgpu_backend_attention) {
  WEBGPU_OR_SKIP(d);
  PAIR_OR_FAIL(p, d, -1, 0);
  g_worst = 0;
  uint64_t seed = 51;
  char err[600] = "";
  const int *short_calls = k_short_calls, *long_calls = k_long_calls;
  int ok = attention_case(&p, 4, 2, 16, short_calls, 3, &seed, err, sizeof err) &&
           attention_case(&p, 16, 8, 64, short_calls, 3, &seed, err, sizeof err) &&
           attention_case(&p, 4, 2, 16, long_calls, 4, &seed, err, sizeof err) &&
           attention_case(&p, 16, 8, 64, long_calls, 2, &seed, err, sizeof err) &&
           attention_case(&p, 4, 4, 64, long_calls, 4, &seed, err, sizeof err);
  pair_close(&p);
  CHECKF(ok, "%s", err);
  /* Flash-decoding with at most 2 splits: a decode step over 3 tiles (pos
   * 135) gives splits of 2 tiles and 1; with 1, no split at all; then the
   * same with decode steps through attn_rope + attn_flash (no fusion)
   * instead of attn_decode. */
  static const uint32_t split_caps[] = {2, 1, 2, 0};
  for (int i = 0; i < 4; i++) {
    g_attn_splits = split_caps[i];
    g_no_fuse = i >= 2;
    PAIR_OR_FAIL(q, d, -1, 0);
    g_attn_splits = 0;
    g_no_fuse = 0;
    ok = attention_case(&q, 4, 2, 16, long_calls, 4, &seed, err, sizeof err) &&
         attention_case(&q, 16, 8, 64, long_calls, 4, &seed, err, sizeof err);
    pair_close(&q);
    CHECKF(ok, "max splits %u: %s", split_caps[i], err);
  }
  report("attention");
}

/* The tiled prefill attention (attn_prefill.wgsl; off by default, slower
 * on the H200 than attn_flash) when asked for: the same cases as above
 * against the CPU, f32 and packed-f16 caches, prompts that cross its
 * 64-query and 32-key tiles. */
TEST(webgpu_backend_attention_tiled_prefill) {
  WEBGPU_OR_SKIP(d);
  uint64_t seed = 53;
  char err[600] = "";
  g_worst = 0;
  for (int kv16 = 0; kv16 < 2; kv16++) {
    g_tune.attn_prefill = 1;
    g_kv16 = kv16;
    PAIR_OR_FAIL(p, d, -1, 0);
    int ok = attention_mixed(&p, &seed, err, sizeof err);
    g_kv16 = 0; /* attention_case compares against TOL_KV16 while set */
    pair_close(&p);
    CHECKF(ok, "kv16 %d: %s", kv16, err);
  }
  report("attention (tiled prefill)");
}

/* Decode attention's split merge fused into the output projection
 * (matvec.wgsl PRE 3): projection and attention output (written by the
 * fused product's workgroup 0) against the CPU, for decode steps with
 * splits (positions past one 32-key tile), f32 and packed-f16 caches, and
 * one dispatch fewer per such step than with the merge on its own. */
TEST(webgpu_backend_attention_merge_fused) {
  WEBGPU_OR_SKIP(d);
  g_worst = 0;
  uint64_t seed = 57;
  char err[600] = "";
  static const int calls[] = {64, 1, 1, 70, 1};
  uint64_t per_run[2] = {0, 0};
  for (int i = 0; i < 3; i++) {
    g_kv16 = i == 2;
    g_tune.no_xstage = i == 1; /* unstaged: the merge is recorded on its own */
    PAIR_OR_FAIL(q, d, -1, 0);
    wisp_wgpu_backend_stats s0, s1;
    wisp_wgpu_backend_stats_get(q.gpu, &s0);
    g_attn_proj = 1;
    g_attn_merges = 0;
    /* head dim 20: not a packed-f16 shape, f32 caches only */
    int ok = attention_case(&q, 16, 8, 64, calls, 5, &seed, err, sizeof err) &&
             (g_kv16 || attention_case(&q, 8, 2, 20, calls, 5, &seed, err, sizeof err));
    g_attn_proj = 0;
    g_kv16 = 0;
    wisp_wgpu_backend_stats_get(q.gpu, &s1);
    pair_close(&q);
    CHECKF(ok, "case %d: %s", i, err);
    CHECKF(g_attn_merges == (i == 2 ? 3 : 6), "%d decode steps with splits", g_attn_merges);
    if (i < 2) per_run[i] = s1.dispatches - s0.dispatches;
  }
  CHECKF(per_run[0] + 6 == per_run[1], "%llu dispatches fused, %llu with the merge on its own (6 fewer expected)",
         (unsigned long long)per_run[0], (unsigned long long)per_run[1]);
  report("attention merge fused");
}

/* Packed-f16 KV cache (kv_f16): prefill through attn_rope + attn_flash,
 * decode through attn_decode (split and unsplit) and, without fusion,
 * attn_rope + attn_flash; output and caches within TOL_KV16. */
TEST(webgpu_backend_attention_kv16) {
  WEBGPU_OR_SKIP(d);
  g_worst = 0;
  uint64_t seed = 53;
  char err[600] = "";
  static const uint32_t split_caps[] = {0, 2, 0};
  for (int i = 0; i < 3; i++) {
    g_kv16 = 1;
    g_attn_splits = split_caps[i];
    g_no_fuse = i == 2;
    PAIR_OR_FAIL(q, d, -1, 0);
    g_attn_splits = 0;
    g_no_fuse = 0;
    int ok = i ? attention_case(&q, 16, 8, 64, k_long_calls, 4, &seed, err, sizeof err)
               : attention_mixed(&q, &seed, err, sizeof err);
    g_kv16 = 0; /* attention_case compares against TOL_KV16 while set */
    pair_close(&q);
    CHECKF(ok, "kv16 case %d: %s", i, err);
  }
  report("attention kv16");
}

TEST(webgpu_backend_swiglu) {
  WEBGPU_OR_SKIP(d);
  PAIR_OR_FAIL(p, d, -1, 0);
  g_worst = 0;
  uint64_t seed = 61;
  char err[600] = "";
  int ok = 1;
  static const int ffns[] = {7, 128, 1000};
  static const int ns[] = {1, 3, 17};
  for (int fi = 0; ok && fi < 3; fi++)
    for (int ni = 0; ok && ni < 3; ni++) {
      int ffn = ffns[fi], n = ns[ni];
      bpair gu, o;
      ok = fill(&p, &gu, n, 2 * ffn, &seed, 6.0f);
      o = zeros(&p, (size_t)n * ffn);
      if (ok) {
        p.cpu->swiglu(p.cpu, gu.c, n, ffn, o.c);
        p.gpu->swiglu(p.gpu, gu.g, n, ffn, o.g);
        char what[64];
        snprintf(what, sizeof what, "swiglu ffn %d n %d", ffn, n);
        ok = compare(&p, &o, o.n, TOL_SWIGLU, what, err, sizeof err);
      } else {
        snprintf(err, sizeof err, "setup: %s", wisp_last_error());
      }
      bfree(&p, &gu);
      bfree(&p, &o);
    }
  pair_close(&p);
  CHECKF(ok, "%s", err);
  report("swiglu");
}

/* A read after a sync with nothing recorded since a plain submit (here
 * buf_write submitting the recorded swiglu first): the speculative readback
 * copy of the previous sync is stale then, and the read must not be served
 * from it. */
TEST(webgpu_backend_read_after_plain_submit) {
  WEBGPU_OR_SKIP(d);
  PAIR_OR_FAIL(p, d, -1, 0);
  g_worst = 0;
  uint64_t seed = 67;
  char err[600] = "";
  bpair a, b, o, z;
  int ok = fill(&p, &a, 1, 2 * 96, &seed, 6.0f) && fill(&p, &b, 1, 2 * 96, &seed, 6.0f);
  o = zeros(&p, 96);
  z = zeros(&p, 4);
  if (!ok) snprintf(err, sizeof err, "setup: %s", wisp_last_error());
  const float ones[4] = {1, 1, 1, 1};
  for (int k = 0; ok && k < 2; k++) {
    const bpair *in = k ? &b : &a;
    p.cpu->swiglu(p.cpu, in->c, 1, 96, o.c);
    p.gpu->swiglu(p.gpu, in->g, 1, 96, o.g);
    if (k) p.gpu->buf_write(p.gpu, z.g, 0, 4, ones); /* submits the swiglu without the readback copy */
    ok = compare(&p, &o, o.n, TOL_SWIGLU, k ? "swiglu read after a plain submit" : "swiglu", err, sizeof err);
  }
  bfree(&p, &a);
  bfree(&p, &b);
  bfree(&p, &o);
  bfree(&p, &z);
  pair_close(&p);
  CHECKF(ok, "%s", err);
}

/* More dispatches than the uniform arena has slots: the recording is
 * submitted early, the cached bind groups (which own the slots) dropped and
 * the arena reused, without disturbing parameters of work already recorded.
 * 300 accumulating products into one y, with a 4 KiB arena (16 slots at a
 * 256-byte alignment, 128 at 32): fixed, it fills up again and again; let
 * double up to 256 KiB (arena_max_bytes), it grows until the 300 fit and
 * then stops submitting early. How many rounds the growing takes depends on
 * the device's uniform alignment, so rounds run until one takes a single
 * submit (at most `rounds`); *submits is the last round's count. The same
 * sums either way. */
static int arena_run(wisp_wgpu_device *d, size_t max_bytes, int rounds, uint64_t *submits, char *err, size_t cap) {
  wisp_backend *cpu = NULL, *gpu = NULL;
  wisp_wgpu_backend_opts o = {.device = d, .subgroups = -1, .arena_bytes = 4096, .arena_max_bytes = max_bytes};
  if (wisp_cpu_backend_new(1, &cpu) || wisp_wgpu_backend_new(&o, &gpu)) {
    snprintf(err, cap, "backends: %s", wisp_last_error());
    if (cpu) cpu->destroy(cpu);
    return 0;
  }
  pair p = {cpu, gpu, NULL, 0, 0};
  uint64_t seed = 91;
  wmat_host h;
  wmat_make(&h, WISP_W_Q4, 33, 64, &seed);
  bpair x, y;
  int ok = !cpu->prepare_matrix(cpu, &h.m) && !gpu->prepare_matrix(gpu, &h.m) && fill(&p, &x, 4, 64, &seed, 1.0f) &&
           fill(&p, &y, 1, 33, &seed, 1.0f);
  snprintf(err, cap, "setup failed");
  wisp_wgpu_backend_stats s0, s1;
  for (int round = 0; ok && round < rounds; round++) { /* later rounds find the arena grown */
    wisp_wgpu_backend_stats_get(gpu, &s0);
    for (int i = 0; i < 300; i++) {
      cpu->matmul(cpu, &h.m, x.c, i % 4, 1, y.c, 1);
      gpu->matmul(gpu, &h.m, x.g, i % 4, 1, y.g, 1);
    }
    ok = compare(&p, &y, y.n, 1e-5, "300 accumulated products", err, cap);
    wisp_wgpu_backend_stats_get(gpu, &s1);
    *submits = s1.submits - s0.submits;
    if (*submits == 1) break;
  }
  bfree(&p, &x);
  bfree(&p, &y);
  wmat_keep(&p, &h);
  pair_close(&p);
  return ok;
}

TEST(webgpu_backend_arena_overflow) {
  WEBGPU_OR_SKIP(d);
  char err[600] = "";
  uint64_t fixed = 0, grown = 0;
  CHECKF(arena_run(d, 0, 2, &fixed, err, sizeof err), "fixed arena: %s", err);
  CHECKF(arena_run(d, 256 << 10, 8, &grown, err, sizeof err), "growing arena: %s", err);
  CHECKF(fixed > 2, "only %llu submits: the arena never filled up", (unsigned long long)fixed);
  CHECKF(grown == 1, "still %llu submits for 300 products after 8 rounds of a growing arena (fixed: %llu)",
         (unsigned long long)grown, (unsigned long long)fixed);
}

/* ---- errors -------------------------------------------------------------------- */

TEST(webgpu_backend_errors_surface_from_sync) {
  WEBGPU_OR_SKIP(d);
  wisp_backend *g;
  wisp_wgpu_backend_opts o = {.device = d, .subgroups = -1};
  CHECK(wisp_wgpu_backend_new(&o, &g) == WISP_OK);
  wisp_buf *x = g->buf_new(g, 64), *y = g->buf_new(g, 64);
  static float w[64 * 64];
  wisp_matrix m = {.type = WISP_W_F32, .rows = 64, .cols = 64, .f32 = w};
  g->matmul(g, &m, x, 0, 1, y, 0); /* never prepared */
  wisp_status st = g->sync(g);
  char msg[512];
  snprintf(msg, sizeof msg, "%s", wisp_last_error());
  int ok1 = st != WISP_OK && strstr(msg, "not prepared") && !strchr(msg, '\n');
  /* The error is reported once; the backend keeps working afterwards. */
  CHECK(g->prepare_matrix(g, &m) == WISP_OK);
  g->matmul(g, &m, x, 0, 1, y, 0);
  wisp_status st2 = g->sync(g);
  /* An unsupported head dimension. */
  wisp_attention_args a = {.n = 1, .heads = 2, .kv_heads = 1, .head_dim = 1000};
  g->attention(g, &a);
  wisp_status st3 = g->sync(g);
  char msg3[512];
  snprintf(msg3, sizeof msg3, "%s", wisp_last_error());
  g->buf_free(g, x);
  g->buf_free(g, y);
  g->destroy(g);
  CHECKF(ok1, "expected a 'not prepared' error, got status %d: %s", st, msg);
  CHECKF(st2 == WISP_OK, "sync after a reported error: %s", wisp_last_error());
  CHECKF(st3 != WISP_OK && strstr(msg3, "head dim 1000"), "%s", msg3);
}

TEST(webgpu_backend_auto_falls_back_from_cpu_adapter) {
  WEBGPU_OR_SKIP(d);
  wisp_backend *be = NULL;
  CHECK(wisp_backend_create("auto", 1, &be) == WISP_OK);
  const char *name = be->name;
  int is_cpu_adapter = d->info.adapter_type == WGPUAdapterType_CPU;
  char got[16];
  snprintf(got, sizeof got, "%s", name);
  be->destroy(be);
  if (is_cpu_adapter) CHECKF(!strcmp(got, "cpu"), "auto chose %s on a CPU adapter", got);
  else CHECKF(!strcmp(got, "webgpu"), "auto chose %s on a GPU", got);
}

/* ---- the whole model ------------------------------------------------------------ */

/* These tests check the f32 prefill product (wgsl_tiled_*; exact parity,
 * TOL_LOGITS): the default plan's Q4 x int8 product is turned off. */
static wisp_status f32_prefill(wisp_session *s) {
  wisp_wgpu_mm8_opts o = {.mode = 3};
  return wisp_wgpu_mm8_configure(s->backend, &o);
}

/* The whole model without fusion (tuning fuse=0: every op on its own,
 * 53 dispatches a token): 17-token prompt + 8 greedy tokens against the CPU. */
TEST(webgpu_backend_small_model_unfused) {
  WEBGPU_OR_SKIP(d);
  const char *dir = fixture_small_model();
  CHECK(dir);
  wisp_model *m = NULL;
  CHECKF(wisp_model_open(dir, &m) == WISP_OK, "%s", wisp_last_error());
  const int V = wisp_model_vocab(m);
  wisp_session *sc = NULL, *sg = NULL;
  wisp_session_options oc = {.backend = "cpu", .threads = 1}, og = {.backend = "webgpu", .tuning = "fuse=0"};
  wisp_status st = wisp_session_new(m, &oc, &sc);
  if (!st) st = wisp_session_new(m, &og, &sg);
  if (!st) st = f32_prefill(sg); /* the int8 prefill product: test_webgpu_matmul_i8.c */
  float *lc = malloc(sizeof(float) * V), *lg = malloc(sizeof(float) * V);
  char err[600] = "";
  int ok = !st && lc && lg;
  if (!ok) snprintf(err, sizeof err, "setup: %s", wisp_last_error());
  int32_t ids[17];
  uint64_t seed = 73;
  for (int i = 0; i < 17; i++) ids[i] = (int32_t)(test_rand_u32(&seed) % (uint32_t)V);
  if (ok) ok = !wisp_session_eval(sc, ids, 17, lc) && !wisp_session_eval(sg, ids, 17, lg);
  wisp_wgpu_backend_stats s0 = {0}, s1 = {0};
  for (int step = 0; ok && step < 8; step++) {
    double mx = 0, e = 0;
    int tc = 0, tg = 0;
    for (int i = 0; i < V; i++) {
      mx = fmax(mx, fabs(lc[i]));
      e = fmax(e, fabs((double)lg[i] - lc[i]));
      if (lc[i] > lc[tc]) tc = i;
      if (lg[i] > lg[tg]) tg = i;
    }
    if (tc != tg || !(e <= TOL_LOGITS * mx)) {
      snprintf(err, sizeof err, "step %d: token cpu %d gpu %d, logit error %.3g of max %.3g", step, tc, tg, e, mx);
      ok = 0;
      break;
    }
    int32_t t = tc;
    wisp_wgpu_backend_stats_get(sg->backend, &s0);
    ok = !wisp_session_eval(sc, &t, 1, lc) && !wisp_session_eval(sg, &t, 1, lg);
    wisp_wgpu_backend_stats_get(sg->backend, &s1);
    if (!ok) snprintf(err, sizeof err, "decode: %s", wisp_last_error());
  }
  free(lc);
  free(lg);
  wisp_session_free(sc);
  wisp_session_free(sg);
  wisp_model_close(m);
  CHECKF(ok, "%s", err);
  CHECKF(s1.dispatches - s0.dispatches == 53, "%llu dispatches per unfused token",
         (unsigned long long)(s1.dispatches - s0.dispatches));
}

static int argmax(const float *v, int n) {
  int b = 0;
  for (int i = 1; i < n; i++)
    if (v[i] > v[b]) b = i;
  return b;
}

TEST(webgpu_backend_small_model_parity) {
  WEBGPU_OR_SKIP(d);
  const char *dir = fixture_small_model();
  CHECK(dir);
  wisp_model *m = NULL;
  CHECKF(wisp_model_open(dir, &m) == WISP_OK, "%s", wisp_last_error());
  const int V = wisp_model_vocab(m);
  wisp_session *sc = NULL, *sg = NULL;
  wisp_session_options oc = {.backend = "cpu", .threads = 1}, og = {.backend = "webgpu"};
  wisp_status st = wisp_session_new(m, &oc, &sc);
  if (!st) st = wisp_session_new(m, &og, &sg);
  if (!st) st = f32_prefill(sg); /* the int8 prefill product: test_webgpu_matmul_i8.c */
  if (st) {
    wisp_session_free(sc);
    wisp_model_close(m);
    CHECKF(0, "sessions: %s", wisp_last_error());
  }
  float *lc = malloc(sizeof(float) * V), *lg = malloc(sizeof(float) * V);
  static const int prompts[] = {1, 17, 150};
  uint64_t seed = 71;
  char err[600] = "";
  int ok = lc && lg;
  double worst = 0;
  wisp_wgpu_backend_stats s0, s1;
  memset(&s0, 0, sizeof s0);
  memset(&s1, 0, sizeof s1);
  for (int pi = 0; ok && pi < 3; pi++) {
    int32_t ids[150];
    for (int i = 0; i < prompts[pi]; i++) ids[i] = (int32_t)(test_rand_u32(&seed) % (uint32_t)V);
    wisp_session_reset(sc);
    wisp_session_reset(sg);
    ok = !wisp_session_eval(sc, ids, prompts[pi], lc) && !wisp_session_eval(sg, ids, prompts[pi], lg);
    if (!ok) snprintf(err, sizeof err, "prompt %d: %s", prompts[pi], wisp_last_error());
    for (int step = 0; ok && step <= 32; step++) {
      double mx = 0, e = 0;
      for (int i = 0; i < V; i++) {
        mx = fmax(mx, fabs(lc[i]));
        e = fmax(e, fabs((double)lg[i] - lc[i]));
      }
      if (isnan(e) || isnan(mx)) e = INFINITY;
      worst = fmax(worst, e / mx);
      int tc = argmax(lc, V), tg = argmax(lg, V);
      if (tc != tg || !(e <= TOL_LOGITS * mx)) {
        snprintf(err, sizeof err, "prompt %d step %d: token cpu %d gpu %d, logit error %.3g of max %.3g",
                 prompts[pi], step, tc, tg, e, mx);
        ok = 0;
        break;
      }
      if (step == 32) break;
      int32_t t = tc;
      if (pi == 0 && step == 1) wisp_wgpu_backend_stats_get(sg->backend, &s0);
      ok = !wisp_session_eval(sc, &t, 1, lc) && !wisp_session_eval(sg, &t, 1, lg);
      if (pi == 0 && step == 1) wisp_wgpu_backend_stats_get(sg->backend, &s1);
      if (!ok) snprintf(err, sizeof err, "decode: %s", wisp_last_error());
    }
  }
  free(lc);
  free(lg);
  wisp_session_free(sc);
  wisp_session_free(sg);
  wisp_model_close(m);
  CHECKF(ok, "%s", err);
  printf("     model: max logit error %.3g of max|logit|; one decode token = %llu dispatches, %llu submit(s)\n", worst,
         (unsigned long long)(s1.dispatches - s0.dispatches), (unsigned long long)(s1.submits - s0.submits));
  /* One submit per forward; the small model (4 conv + 2 attention layers)
   * records embed + 4*4 + 2*5 + head = 28 dispatches per token at position
   * 2 (53 without fusion; one more per attention layer past 64 positions,
   * for the split merge). */
  CHECK(s1.submits - s0.submits == 1);
  CHECK(s1.dispatches - s0.dispatches == 28);
  /* The logits came back through the copy recorded in that submit. */
  CHECK(s1.spec_reads - s0.spec_reads == 1);
}

/* Packed-f16 KV cache (tuning kv=f16) on the whole small model: prompts
 * of 17 and 150 tokens + 32 greedy tokens, the same tokens as the CPU
 * backend (f32 cache) and logits within TOL_LOGITS of max|logit|. */
TEST(webgpu_backend_small_model_kv16) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  const char *dir = fixture_small_model();
  CHECK(dir);
  wisp_model *m = NULL;
  CHECKF(wisp_model_open(dir, &m) == WISP_OK, "%s", wisp_last_error());
  const int V = wisp_model_vocab(m);
  wisp_session *sc = NULL, *sg = NULL;
  wisp_session_options oc = {.backend = "cpu", .threads = 1}, og = {.backend = "webgpu", .tuning = "kv=f16"};
  wisp_status st = wisp_session_new(m, &oc, &sc);
  if (!st) st = wisp_session_new(m, &og, &sg);
  if (!st) st = f32_prefill(sg); /* the int8 prefill product: test_webgpu_matmul_i8.c */
  float *lc = malloc(sizeof(float) * V), *lg = malloc(sizeof(float) * V);
  static const int prompts[] = {17, 150};
  uint64_t seed = 79;
  char err[600] = "";
  int ok = !st && lc && lg;
  if (!ok) snprintf(err, sizeof err, "setup: %s", wisp_last_error());
  double worst = 0;
  for (int pi = 0; ok && pi < 2; pi++) {
    int32_t ids[150];
    for (int i = 0; i < prompts[pi]; i++) ids[i] = (int32_t)(test_rand_u32(&seed) % (uint32_t)V);
    wisp_session_reset(sc);
    wisp_session_reset(sg);
    ok = !wisp_session_eval(sc, ids, prompts[pi], lc) && !wisp_session_eval(sg, ids, prompts[pi], lg);
    if (!ok) snprintf(err, sizeof err, "prompt %d: %s", prompts[pi], wisp_last_error());
    for (int step = 0; ok && step <= 32; step++) {
      double mx = 0, e = 0;
      for (int i = 0; i < V; i++) {
        mx = fmax(mx, fabs(lc[i]));
        e = fmax(e, fabs((double)lg[i] - lc[i]));
      }
      if (isnan(e) || isnan(mx)) e = INFINITY;
      worst = fmax(worst, e / mx);
      int tc = argmax(lc, V), tg = argmax(lg, V);
      if (tc != tg || !(e <= TOL_LOGITS * mx)) {
        snprintf(err, sizeof err, "kv16 prompt %d step %d: token cpu %d gpu %d, logit error %.3g of max %.3g",
                 prompts[pi], step, tc, tg, e, mx);
        ok = 0;
        break;
      }
      if (step == 32) break;
      int32_t t = tc;
      ok = !wisp_session_eval(sc, &t, 1, lc) && !wisp_session_eval(sg, &t, 1, lg);
      if (!ok) snprintf(err, sizeof err, "decode: %s", wisp_last_error());
    }
  }
  free(lc);
  free(lg);
  wisp_session_free(sc);
  wisp_session_free(sg);
  wisp_model_close(m);
  CHECKF(ok, "%s", err);
  printf("     model kv16: max logit error %.3g of max|logit|\n", worst);
}

/* The fused greedy head with more workgroups than one grid dimension takes
 * (65535 on lavapipe): wisp_wgpu_grid rounds the x*y grid up, and the
 * surplus workgroups (no rows) must not write argmax partials past the
 * dispatch's own (with Dawn's robustness on such a write was clamped onto
 * the last real partial, losing the rows it covered). One row per
 * workgroup, 70001 rows, the largest logit in the last row. */
TEST(webgpu_backend_fused_argmax_rounded_grid) {
  WEBGPU_OR_SKIP(d);
  enum { V = 70001, C = 32 };
  uint64_t seed = 89;
  wisp_matrix W = f32_matrix(V, C, &seed, 0.5f);
  CHECK(W.f32);
  float *w = (float *)W.f32;
  for (int c = 0; c < C; c++) w[(size_t)(V - 1) * C + c] = 1.0f;
  float x[C];
  for (int c = 0; c < C; c++) x[c] = 1.0f;
  char err[300] = "";
  int ok = 1;
  for (int cfg = 0; ok && cfg < 2; cfg++) {
    if (cfg == 1 && !d->has_subgroups) break;
    /* plain: ROWS 1 a workgroup; subgroups: one 32-lane group of 1 row */
    wisp_wgpu_backend_opts o = {.device = d, .subgroups = cfg, .matvec_wg = cfg ? 32 : 128, .matvec_rows = 1,
                                .matvec_big_rows = 1};
    wisp_backend *be = NULL;
    wisp_status st = wisp_wgpu_backend_new(&o, &be);
    if (st) {
      snprintf(err, sizeof err, "backend: %s", wisp_last_error());
      ok = 0;
      break;
    }
    wisp_buf *xb = be->buf_new(be, C), *yb = be->buf_new(be, V), *ids = be->buf_new(be, 4);
    ok = xb && yb && ids && !be->prepare_matrix(be, &W);
    if (ok) {
      be->buf_write(be, xb, 0, C, x);
      wisp_sampling greedy = {.top_p = 1, .seed = 1};
      const wisp_fused_matmul f = {.W = &W, .x = xb, .y = yb, .post = WISP_POST_ARGMAX, .sampling = &greedy,
                                   .ids = ids, .slot = 1}; /* the graph's head+argmax fused op */
      if (!be->matmul_fused(be, &f)) be->sample_id(be, yb, V, &greedy, 0, ids, 1);
      float got_f;
      ok = !be->sync(be);
      be->buf_read(be, ids, 1, 1, &got_f);
      ok = ok && !be->sync(be);
      uint32_t got;
      memcpy(&got, &got_f, 4);
      wisp_wgpu_backend_stats s;
      wisp_wgpu_backend_stats_get(be, &s);
      if (!ok) snprintf(err, sizeof err, "%s: %s", cfg ? "subgroups" : "plain", wisp_last_error());
      else if (got != V - 1 || s.argmax_fused != 1) {
        snprintf(err, sizeof err, "%s: id %u (want %d), %llu fused argmax", cfg ? "subgroups" : "plain", got, V - 1,
                 (unsigned long long)s.argmax_fused);
        ok = 0;
      }
    }
    if (xb) be->buf_free(be, xb);
    if (yb) be->buf_free(be, yb);
    if (ids) be->buf_free(be, ids);
    be->destroy(be);
  }
  free(w);
  CHECKF(ok, "%s", err);
}

/* Greedy sample_id fused into the head product (matvec ARGMAX = 1, sample
 * PARTS = 1), with ties: identical rows give bit-identical values, and the
 * lowest index must win, within one workgroup (rows 4321, 4322, and 4353
 * in a later row chunk) and across workgroups (row 17 vs 4321, 4322). Subgroup variant whole and split into
 * 256-row parts (part offsets), plain variant; the logits are still
 * written; no_fuse_argmax (caps without head+argmax) gives the same ids
 * unfused. */
TEST(webgpu_backend_fused_argmax_ties) {
  WEBGPU_OR_SKIP(d);
  enum { V = 20000, C = 64 }; /* >= 16384 rows: the tall (head) geometry */
  uint64_t seed = 83;
  wisp_matrix W = f32_matrix(V, C, &seed, 0.5f);
  CHECK(W.f32);
  float *w = (float *)W.f32;
  for (int c = 0; c < C; c++) {
    w[4321 * C + c] = w[4322 * C + c] = w[4353 * C + c] = 1.0f;
    w[17 * C + c] = c < C / 2 ? 1.0f : 0.0f;
  }
  float x[2][C];
  for (int c = 0; c < C; c++) {
    x[0][c] = 1.0f;
    x[1][c] = c < C / 2 ? 1.0f : 0.0f;
  }
  static const int want[2] = {4321, 17};
  /* configs 4 and 5: three row chunks per workgroup (head_chunks,
   * 32-row chunks: 4353 ties 4321 in the same slot of the next chunk), the
   * second with the weight loads issued ahead */
  static const int sg[6] = {-1, -1, 0, -1, -1, -1};
  static const uint64_t mb[6] = {0, 65536, 0, 0, 0, 0};
  float *y = malloc(sizeof(float) * V);
  char err[300] = "";
  int ok = y != NULL;
  for (int cfg = 0; ok && cfg < 6; cfg++) {
    wisp_wgpu_backend_opts o = {.device = d, .subgroups = sg[cfg], .max_binding = mb[cfg]};
    o.no_fuse_argmax = cfg == 3;
    o.head_chunks = cfg >= 4 ? 3 : 0;
    o.prefetch = cfg == 5;
    wisp_backend *be = NULL;
    wisp_status st = wisp_wgpu_backend_new(&o, &be);
    if (st) {
      snprintf(err, sizeof err, "backend: %s", wisp_last_error());
      ok = 0;
      break;
    }
    wisp_buf *xb = be->buf_new(be, C), *yb = be->buf_new(be, V), *ids = be->buf_new(be, 4);
    ok = xb && yb && ids && !be->prepare_matrix(be, &W);
    for (int k = 0; ok && k < 2; k++) {
      be->buf_write(be, xb, 0, C, x[k]);
      wisp_sampling greedy = {.top_p = 1, .seed = 1};
      /* the graph's head+argmax fused op where the backend's caps name it
       * (not with tuning fuseArgmax=0: then the two ops) */
      wisp_device_caps caps;
      be->caps(be, &caps);
      const wisp_fused_matmul f = {.W = &W, .x = xb, .y = yb, .post = WISP_POST_ARGMAX, .sampling = &greedy,
                                   .ids = ids, .slot = 1 + k};
      if (!(caps.fusions & WISP_FUSE_HEAD_ARGMAX)) be->matmul(be, &W, xb, 0, 1, yb, 0);
      if (!(caps.fusions & WISP_FUSE_HEAD_ARGMAX) || !be->matmul_fused(be, &f))
        be->sample_id(be, yb, V, &greedy, 0, ids, 1 + k);
      float got_f;
      ok = !be->sync(be);
      be->buf_read(be, ids, 1 + (size_t)k, 1, &got_f);
      be->buf_read(be, yb, 0, V, y);
      ok = ok && !be->sync(be);
      uint32_t got;
      memcpy(&got, &got_f, 4);
      double e = 0;
      for (int r = 0; ok && r < V; r++) {
        double ref = 0;
        for (int c = 0; c < C; c++) ref += (double)w[r * C + c] * x[k][c];
        e = fmax(e, fabs(ref - y[r]));
      }
      if (!ok) snprintf(err, sizeof err, "config %d: %s", cfg, wisp_last_error());
      else if ((int)got != want[k] || !(e <= TOL_MATMUL * 64)) {
        snprintf(err, sizeof err, "config %d case %d: id %u (want %d), logit error %.3g", cfg, k, got, want[k], e);
        ok = 0;
      }
    }
    wisp_wgpu_backend_stats s;
    wisp_wgpu_backend_stats_get(be, &s);
    if (ok && s.argmax_fused != (cfg == 3 ? 0u : 2u)) {
      snprintf(err, sizeof err, "config %d: %llu fused argmax", cfg, (unsigned long long)s.argmax_fused);
      ok = 0;
    }
    if (ok && cfg == 1 && s.weight_parts < 10) {
      snprintf(err, sizeof err, "only %llu weight parts", (unsigned long long)s.weight_parts);
      ok = 0;
    }
    if (xb) be->buf_free(be, xb);
    if (yb) be->buf_free(be, yb);
    if (ids) be->buf_free(be, ids);
    be->destroy(be);
  }
  free(y);
  free(w);
  CHECKF(ok, "%s", err);
}

/* The suite's sessions take the worker's device (wisp_wgpu_set_device_hook,
 * tests/main.c) as if it were their own: an uncaptured error an earlier
 * backend left on it unchecked does not fail the next session, and a lost
 * device is not taken (the session opens one of its own). */
TEST(webgpu_hooked_device_drops_stale_errors_and_skips_a_lost_one) {
  WEBGPU_OR_SKIP(d);
  wisp_model *m = NULL;
  CHECKF(wisp_model_open(fixture_small_model(), &m) == WISP_OK, "%s", wisp_last_error());
  const int32_t tok = 3;
  wisp_session_options so = {.backend = "webgpu"};
  /* a stale error */
  pthread_mutex_lock(&d->lock);
  snprintf(d->last_error, sizeof d->last_error, "validation error: planted by a test");
  d->error_count++;
  pthread_mutex_unlock(&d->lock);
  wisp_session *s = NULL;
  CHECKF(wisp_session_new(m, &so, &s) == WISP_OK, "%s", wisp_last_error());
  CHECKF(((wgpu_backend *)s->backend)->d == d, "the session did not take the worker's device");
  CHECKF(wisp_session_eval(s, &tok, 1, NULL) == WISP_OK, "%s", wisp_last_error());
  wisp_session_free(s);
  /* a lost device */
  pthread_mutex_lock(&d->lock);
  d->lost = WGPUDeviceLostReason_Unknown;
  snprintf(d->lost_message, sizeof d->lost_message, "device lost (reason 1): planted by a test");
  pthread_mutex_unlock(&d->lock);
  s = NULL;
  wisp_status st = wisp_session_new(m, &so, &s);
  const int own = st == WISP_OK && ((wgpu_backend *)s->backend)->d != d;
  const int ran = st == WISP_OK && wisp_session_eval(s, &tok, 1, NULL) == WISP_OK;
  wisp_session_free(s);
  pthread_mutex_lock(&d->lock);
  d->lost = 0;
  d->lost_message[0] = 0;
  pthread_mutex_unlock(&d->lock);
  CHECKF(st == WISP_OK, "%s", wisp_last_error());
  CHECKF(own, "the session took the lost device");
  CHECKF(ran, "%s", wisp_last_error());
  wisp_model_close(m);
}
