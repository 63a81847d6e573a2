/* The CPU backend: executes each op at once on host memory, spreading rows
 * or heads over a thread pool. It is the reference the GPU backend is tested
 * against, once it has itself matched Hugging Face transformers
 * (tests/parity). Inner loops live in cpu_kernels.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend.h"
#include "backend/cpu/cpu_deltanet.h"
#include "backend/cpu/cpu_i8.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/threadpool.h"
#include "format/quant.h"
#include "util/clock.h"
#include "util/err.h"

/* What the op timer (wisp_cpu_backend_time_ops) adds each op's time to. */
enum {
  OP_EMBED, OP_RMSNORM, OP_NORM_QUANTIZE, OP_I8_QUANTIZE, OP_I8_PREFILL, OP_I8_DECODE, OP_EXACT_PREFILL,
  OP_EXACT_DECODE, OP_SHORTCONV, OP_ATTENTION, OP_DELTANET_CONV, OP_DELTANET_HEADS, OP_SWIGLU, OP_SAMPLE, OP_COPY,
  OP_OTHER, OP_N
};
static const char *const op_names[OP_N] = {
    "embed", "rmsnorm", "rmsnorm+i8.quantize", "matmul.i8.quantize", "matmul.i8.prefill", "matmul.i8.decode",
    "matmul.exact.prefill", "matmul.exact.decode", "shortconv", "attention", "deltanet.conv", "deltanet.heads",
    "swiglu", "sample", "copy", "other"};

/* n 32-bit words at data. A KV cache made while the caches are f16
 * (cpu_kv_buf_new) holds IEEE binary16 values, two a word (f16 = 1): only
 * attention reads and writes those as values; zeroing and copying words
 * work on either kind. */
struct wisp_buf {
  float *data;
  size_t n;
  int f16;
};

/* What the integer products of one matrix read in place of its own bytes
 * (cpu_i8.h): the f16 copy of a Q4 / Q4Z matrix's block scales (read
 * instead of its f32 scales), or the Q8_0 copy of an F16 matrix (f16_i8).
 * `host` is what it was made from (the f32 scales, the f16 weights), n the
 * matrix's count of 32-blocks, q8 which of the two it is. */
typedef struct {
  const void *host;
  size_t n;
  int q8;
  void *data; /* uint16_t[n] scales, or n Q8_0 blocks of WISP_Q8_0_BYTES */
} i8_copy;

typedef struct {
  wisp_backend base;
  wisp_pool *pool;
  const wisp_cpu_kernels *k;
  const wisp_i8_kernels *i8; /* integer products (cpu_i8.h), the best set this CPU runs */
  wisp_i8_act act;           /* the current product's activations, quantized */
  /* the copies the integer products read (f16 block scales of Q4 / Q4Z,
   * Q8_0 weights of F16), owned here (a matrix is a view of the model's
   * weights, and the model outlives the backend); looked up from
   * copy_next on, the slot after the last hit, since the products of a step
   * run in the order they were prepared */
  i8_copy *copies;
  size_t n_copies, cap_copies, copy_next;
  /* per-thread scratch, grown on demand */
  float **scratch;
  size_t scratch_len;
  float *qbuf; /* rotated queries of the current attention call */
  size_t qbuf_len;
  float *kbuf; /* its normed and rotated keys, before they are rounded into an f16 cache */
  size_t kbuf_len;
  int kv16;    /* KV caches made from now on are f16 (configure: the plan's kvDtype, tuning kv=f16) */
  float *dnbuf; /* conv outputs of the current gated_deltanet call */
  size_t dnbuf_len;
  float *dnconv; /* that call's conv taps and state, transposed (dn_conv) */
  size_t dnconv_len;
  float *scbuf; /* a short conv prefill's B*x rows, taps and state, transposed (shortconv_prefill) */
  size_t scbuf_len;
  float *dnprep; /* that call's chunk preparations, a wave's worth (dn_chunked) */
  size_t dnprep_len;
  wisp_status error; /* first failure inside an op, reported by sync */
  /* A held-back rmsnorm (cpu_rmsnorm): the integer product that reads its
   * output next normalizes and quantizes each token in one pass; any other
   * entry point runs it first (flush_norm). */
  struct {
    int on;
    const wisp_buf *x;
    const wisp_vector *w;
    float eps;
    int n, dim;
    wisp_buf *out;
  } norm;
  int timing;        /* the op timer is on */
  double op_s[OP_N];
  long op_calls[OP_N];
} cpu_backend;

static cpu_backend *as_cpu(wisp_backend *be) { return (cpu_backend *)be; }
static void flush_norm(cpu_backend *c);

/* The op timer: t = op_start(c); ...; op_stop(c, OP_X, t). */
static double op_start(const cpu_backend *c) { return c->timing ? wisp_now_s() : 0; }
static void op_stop(cpu_backend *c, int op, double t0) {
  if (!c->timing) return;
  c->op_s[op] += wisp_now_s() - t0;
  c->op_calls[op]++;
}

static int ensure_scratch(cpu_backend *c, size_t n) {
  if (n <= c->scratch_len) return 1;
  int nt = wisp_pool_size(c->pool);
  for (int i = 0; i < nt; i++) {
    float *p = realloc(c->scratch[i], n * sizeof(float));
    if (!p) return 0;
    c->scratch[i] = p;
  }
  c->scratch_len = n;
  return 1;
}

/* ---- memory ---- */

static wisp_buf *cpu_buf_new(wisp_backend *be, size_t n) {
  (void)be;
  wisp_buf *b = calloc(1, sizeof *b);
  if (!b) return NULL;
  b->data = calloc(n ? n : 1, sizeof(float));
  if (!b->data) { free(b); return NULL; }
  b->n = n;
  return b;
}

/* A KV cache of n values: binary16 when the session's caches are f16
 * (half the bytes of f32), else an f32 buffer. */
static wisp_buf *cpu_kv_buf_new(wisp_backend *be, size_t n) {
  if (!as_cpu(be)->kv16) return cpu_buf_new(be, n);
  wisp_buf *b = cpu_buf_new(be, (n + 1) / 2);
  if (b) b->f16 = 1;
  return b;
}

static uint16_t *halves(const wisp_buf *b) { return (uint16_t *)b->data; }

static void cpu_configure(wisp_backend *be, const wisp_backend_settings *s) { as_cpu(be)->kv16 = s->kv_f16; }

static void cpu_buf_free(wisp_backend *be, wisp_buf *b) {
  flush_norm(as_cpu(be)); /* a held-back rmsnorm first (cpu_rmsnorm) */
  if (!b) return;
  free(b->data);
  free(b);
}

static void cpu_buf_read(wisp_backend *be, const wisp_buf *b, size_t off, size_t n, float *dst) {
  flush_norm(as_cpu(be)); /* a held-back rmsnorm first (cpu_rmsnorm) */
  memcpy(dst, b->data + off, n * sizeof(float));
}

static void cpu_buf_zero(wisp_backend *be, wisp_buf *b) {
  flush_norm(as_cpu(be)); /* a held-back rmsnorm first (cpu_rmsnorm) */
  memset(b->data, 0, b->n * sizeof(float));
}

/* The plan names a registry variant per matrix and phase; these are the
 * ones this backend implements (kernels/registry.json, backend "cpu"). */
static int is_i8_variant(const char *variant) {
  return !strcmp(variant, "q4_i8") || !strcmp(variant, "q4k_i8") || !strcmp(variant, "q8_0_i8") ||
         !strcmp(variant, "f16_i8");
}

/* The weight type an integer variant reads (f16_i8: an F16 matrix, through
 * its Q8_0 copy; q4_i8 also takes Q4Z). */
static wisp_wtype i8_variant_type(const char *variant) {
  return !strcmp(variant, "q4k_i8")   ? WISP_W_Q4K
         : !strcmp(variant, "q8_0_i8") ? WISP_W_Q8_0
         : !strcmp(variant, "f16_i8")  ? WISP_W_F16
                                       : WISP_W_Q4;
}

/* 1 when W of this variant runs as an integer product. */
static int runs_i8(const char *variant, const wisp_matrix *W) {
  if (!is_i8_variant(variant)) return 0;
  if (W->type == WISP_W_F16) return !strcmp(variant, "f16_i8") && W->cols > 0 && W->cols % 32 == 0;
  return wisp_i8_supported(W);
}

static const wisp_cpu_kernels *kernels_for(const cpu_backend *c, const char *variant) {
  if (!variant[0] || is_i8_variant(variant)) return c->k;
  if (!strcmp(variant, "q4_scalar") || !strcmp(variant, "q4k_scalar") || !strcmp(variant, "f16_scalar") ||
      !strcmp(variant, "q8_0_scalar"))
    return wisp_cpu_kernels_scalar();
  if (!strcmp(variant, "q4_avx2") || !strcmp(variant, "q4k_avx2") || !strcmp(variant, "f32") ||
      !strcmp(variant, "f16_avx2") || !strcmp(variant, "q8_0_avx2"))
    return c->k;
  return NULL;
}

/* The integer products read a copy of F16 matrices (Q8_0 weights) and of
 * Q4 / Q4Z ones (f16 block scales); none of the others. */
static int needs_i8_copy(const wisp_matrix *m) { return m->type == WISP_W_F16 || wisp_i8_needs_f16_scales(m); }

/* What m's copy is made from: the f16 weights, or the f32 scales. */
static const void *copy_source(const wisp_matrix *m) {
  return m->type == WISP_W_F16 ? (const void *)m->q : (const void *)m->scales;
}

/* The entry of this backend's copy for m, or NULL. Keyed by the source's
 * address and block count, not by m->device: a model's matrices are
 * prepared by every session's backend in turn, and m->device holds the
 * last one's. A tied head finds the embedding's entry this way. */
static i8_copy *find_copy(cpu_backend *c, const wisp_matrix *m) {
  const size_t n = (size_t)m->rows * (size_t)(m->cols / 32);
  const void *host = copy_source(m);
  const int q8 = m->type == WISP_W_F16;
  for (size_t k = 0; k < c->n_copies; k++) {
    size_t i = (c->copy_next + k) % c->n_copies;
    if (c->copies[i].host == host && c->copies[i].n == n && c->copies[i].q8 == q8) {
      c->copy_next = i + 1;
      return &c->copies[i];
    }
  }
  return NULL;
}

/* The Q8_0 copy of an F16 matrix, made by the pool in runs of rows: a
 * seed-sized model's 750 million weights take seconds on one core. */
typedef struct {
  cpu_backend *c;
  const wisp_matrix *m;
  uint8_t *out;
  int rows_per_task;
} q8_copy_job;

static void q8_copy_task(void *ctx, int task, int thread) {
  const q8_copy_job *j = ctx;
  const int r0 = task * j->rows_per_task, r1 = r0 + j->rows_per_task < j->m->rows ? r0 + j->rows_per_task : j->m->rows;
  wisp_i8_q8_0_of_f16_rows(j->m, r0, r1, j->out, j->c->scratch[thread], j->c->k->row_f32);
}

/* Fills a copy from m: the Q8_0 rounding of F16 weights, or the f16
 * rounding of Q4 / Q4Z scales. 0 out of memory. */
static int fill_copy(cpu_backend *c, const wisp_matrix *m, void *data) {
  if (m->type != WISP_W_F16) {
    wisp_i8_scales_f16(m, data);
    return 1;
  }
  if (!ensure_scratch(c, (size_t)m->cols)) return 0;
  q8_copy_job j = {c, m, data, 64};
  if (m->rows > 0) wisp_pool_run(c->pool, (m->rows + j.rows_per_task - 1) / j.rows_per_task, q8_copy_task, &j);
  return 1;
}

/* The copy the integer products read for m (needs_i8_copy), made on first
 * use. `convert` rounds it again into an existing entry: prepare_matrix
 * does, since the same address may hold another model's weights by now.
 * NULL when out of memory. */
static const void *i8_copy_for(cpu_backend *c, const wisp_matrix *m, int convert) {
  i8_copy *e = find_copy(c, m);
  if (!e) {
    if (c->n_copies == c->cap_copies) {
      size_t cap = c->cap_copies ? 2 * c->cap_copies : 64;
      i8_copy *p = realloc(c->copies, cap * sizeof *p);
      if (!p) return NULL;
      c->copies = p;
      c->cap_copies = cap;
    }
    const size_t n = (size_t)m->rows * (size_t)(m->cols / 32);
    const int q8 = m->type == WISP_W_F16;
    void *data = malloc((n ? n : 1) * (q8 ? WISP_Q8_0_BYTES : sizeof(uint16_t)));
    if (!data) return NULL;
    e = &c->copies[c->n_copies++];
    *e = (i8_copy){copy_source(m), n, q8, data};
    convert = 1;
  }
  if (convert && !fill_copy(c, m, e->data)) return NULL;
  return e->data;
}

static wisp_status cpu_prepare_matrix(wisp_backend *be, wisp_matrix *m) {
  cpu_backend *c = as_cpu(be);
  const int block = wisp_quant_traits_of(m->type)->block;
  if (m->cols % block)
    return wisp_fail(WISP_EFORMAT, "%s matrix with %d columns is not a whole number of %d-blocks",
                     wisp_wtype_name(m->type), m->cols, block);
  for (int ph = 0; ph < 2; ph++) {
    const char *v = m->choice[ph].variant;
    if (!kernels_for(c, v))
      return wisp_fail(WISP_EUNSUPPORTED, "the plan chose matmul kernel '%s', which the cpu backend does not have", v);
    if (!strcmp(v, "q4_avx2") && !c->k->avx2)
      return wisp_fail(WISP_EDEVICE, "the plan chose matmul kernel 'q4_avx2' but this CPU lacks AVX2+FMA");
    if (!strcmp(v, "q4k_avx2") && !c->k->avx2)
      return wisp_fail(WISP_EDEVICE, "the plan chose matmul kernel 'q4k_avx2' but this CPU lacks AVX2+FMA");
    /* a kernel reads the weight types of its registry weightDtype (format/quant.h) */
    const wisp_quant_traits *reads = wisp_quant_of_cpu_kernel(v);
    if (reads && strcmp(reads->weight_dtype, wisp_quant_traits_of(m->type)->weight_dtype))
      return wisp_fail(WISP_EINVAL, "the plan chose %s kernel '%s' for a %s matrix", reads->weight_dtype, v,
                       wisp_wtype_name(m->type));
    if ((!strcmp(v, "f16_avx2") || !strcmp(v, "q8_0_avx2")) && !c->k->avx2)
      return wisp_fail(WISP_EDEVICE, "the plan chose matmul kernel '%s' but this CPU lacks AVX2+FMA+F16C", v);
    if (is_i8_variant(v)) {
      wisp_wtype want = i8_variant_type(v);
      int fits = m->type == want || (want == WISP_W_Q4 && m->type == WISP_W_Q4Z);
      if (!fits || !runs_i8(v, m))
        return wisp_fail(WISP_EINVAL, "the plan chose integer kernel '%s' for a %s matrix of %d columns", v,
                         wisp_wtype_name(m->type), m->cols);
    }
  }
  /* the integer products of Q4 / Q4Z read f16 scales, of F16 a Q8_0 copy of
   * the weights, made now so that a lack of memory stops the session before
   * it starts; the exact kernels read m as it is */
  const int i8 = is_i8_variant(m->choice[WISP_PHASE_PREFILL].variant) || is_i8_variant(m->choice[WISP_PHASE_DECODE].variant);
  if (i8 && needs_i8_copy(m) && !i8_copy_for(c, m, 1))
    return wisp_fail(WISP_ENOMEM, "out of memory for the %s of a %dx%d %s matrix",
                     m->type == WISP_W_F16 ? "Q8_0 copy (f16_i8)" : "f16 block scales", m->rows, m->cols,
                     wisp_wtype_name(m->type));
  return WISP_OK;
}

static void cpu_caps(wisp_backend *be, wisp_device_caps *out) {
  cpu_backend *c = as_cpu(be);
  wisp_device_caps_default(out, "cpu");
  out->has_avx2 = c->k->avx2;
}

static wisp_status cpu_prepare_vector(wisp_backend *be, wisp_vector *v) {
  (void)be;
  (void)v;
  return WISP_OK;
}

/* ---- ops ---- */

static void cpu_embed_run(wisp_backend *be, const wisp_matrix *E, const int32_t *tokens, int n, wisp_buf *out) {
  cpu_backend *c = as_cpu(be);
  for (int t = 0; t < n; t++) c->k->row_f32(E, tokens[t], out->data + (size_t)t * E->cols);
}

static void cpu_embed(wisp_backend *be, const wisp_matrix *E, const int32_t *tokens, int n, wisp_buf *out) {
  flush_norm(as_cpu(be)); /* a held-back rmsnorm first (cpu_rmsnorm) */
  double t = op_start(as_cpu(be));
  cpu_embed_run(be, E, tokens, n, out);
  op_stop(as_cpu(be), OP_EMBED, t);
}

/* Elementwise ops spread over the pool in ranges of `grain` items when
 * there are enough of them (fn(ctx, i0, i1) handles items [i0, i1)). */
typedef void (*range_fn)(void *ctx, int i0, int i1);
typedef struct {
  range_fn fn;
  void *ctx;
  int n, grain;
} range_job;

static void range_task(void *ctx, int task, int thread) {
  (void)thread;
  range_job *j = ctx;
  int i0 = task * j->grain, i1 = i0 + j->grain < j->n ? i0 + j->grain : j->n;
  j->fn(j->ctx, i0, i1);
}

static void run_ranges(cpu_backend *c, int n, int grain, range_fn fn, void *ctx) {
  if (grain < 1) grain = 1;
  int tasks = (n + grain - 1) / grain;
  if (tasks <= 1 || wisp_pool_size(c->pool) == 1) {
    if (n > 0) fn(ctx, 0, n);
    return;
  }
  range_job j = {fn, ctx, n, grain};
  wisp_pool_run(c->pool, tasks, range_task, &j);
}

typedef struct {
  const float *x, *w;
  float *out;
  float eps;
  int dim;
} rms_job;

static void rmsnorm_rows(void *ctx, int t0, int t1) {
  const rms_job *j = ctx;
  for (int t = t0; t < t1; t++) {
    const float *xr = j->x + (size_t)t * j->dim;
    float *o = j->out + (size_t)t * j->dim;
    double ss = 0;
    for (int i = 0; i < j->dim; i++) ss += (double)xr[i] * xr[i];
    float inv = 1.0f / sqrtf((float)(ss / j->dim) + j->eps);
    for (int i = 0; i < j->dim; i++) o[i] = xr[i] * inv * j->w[i];
  }
}

static void cpu_rmsnorm_run(wisp_backend *be, const wisp_buf *x, const wisp_vector *w, float eps, int n, int dim,
                        wisp_buf *out) {
  rms_job j = {x->data, w->data, out->data, eps, dim};
  /* about 4k elements a task: a 64-token prefill of width 1024 in 16 tasks */
  run_ranges(as_cpu(be), n, (4096 + dim - 1) / dim, rmsnorm_rows, &j);
}

/* Runs a held-back rmsnorm, if there is one. */
static void flush_norm(cpu_backend *c) {
  if (!c->norm.on) return;
  c->norm.on = 0;
  double t = op_start(c);
  cpu_rmsnorm_run(&c->base, c->norm.x, c->norm.w, c->norm.eps, c->norm.n, c->norm.dim, c->norm.out);
  op_stop(c, OP_RMSNORM, t);
}

/* Held back until the next entry point: an integer product reading `out`
 * takes it into its quantization (matmul_i8), anything else runs it first. */
static void cpu_rmsnorm(wisp_backend *be, const wisp_buf *x, const wisp_vector *w, float eps, int n, int dim,
                        wisp_buf *out) {
  cpu_backend *c = as_cpu(be);
  flush_norm(c);
  c->norm.on = 1, c->norm.x = x, c->norm.w = w, c->norm.eps = eps, c->norm.n = n, c->norm.dim = dim, c->norm.out = out;
}

typedef struct {
  cpu_backend *c;
  const wisp_cpu_kernels *k;
  const wisp_matrix *W;
  const float *x; /* first input row */
  int n, accumulate, rows_per_task;
  float *y;
} matmul_job;

static void put(const matmul_job *j, int t, int r, float v) {
  float *dst = j->y + (size_t)t * j->W->rows + r;
  *dst = j->accumulate ? *dst + v : v;
}

/* Row r of W as f32: the weights themselves, or dequantized into buf. */
static const float *row_of(const matmul_job *j, int r, float *buf) {
  if (j->W->type == WISP_W_F32) return j->W->f32 + (size_t)r * j->W->cols;
  j->k->row_f32(j->W, r, buf);
  return buf;
}

static void matmul_task(void *ctx, int task, int thread) {
  matmul_job *j = ctx;
  const wisp_matrix *W = j->W;
  const int K = W->cols, N = W->rows;
  int r0 = task * j->rows_per_task, r1 = r0 + j->rows_per_task;
  if (r1 > N) r1 = N;
  const wisp_cpu_kernels *k = j->k;
  if (j->n == 1) {
    for (int r = r0; r < r1; r++) {
      float v = W->type == WISP_W_F32    ? k->dot_f32(W->f32 + (size_t)r * K, j->x, K)
                : W->type == WISP_W_Q4K  ? k->dot_q4k_row(W, r, j->x)
                : W->type == WISP_W_F16  ? k->dot_f16_row(W, r, j->x)
                : W->type == WISP_W_Q8_0 ? k->dot_q8_0_row(W, r, j->x)
                                         : k->dot_q4_row(W, r, j->x);
      j->y[r] = j->accumulate ? j->y[r] + v : v;
    }
    return;
  }
  /* Several tokens: dequantize two rows at a time once and run them against
   * four tokens at a time (the sums in the same order as one row alone). */
  float *buf = j->c->scratch[thread];
  for (int r = r0; r < r1; r += 2) {
    const int two = r + 1 < r1;
    const float *rows[2] = {row_of(j, r, buf), two ? row_of(j, r + 1, buf + K) : NULL};
    int t = 0;
    for (; t + 4 <= j->n; t += 4) {
      const float *xs[4] = {j->x + (size_t)t * K, j->x + (size_t)(t + 1) * K, j->x + (size_t)(t + 2) * K,
                            j->x + (size_t)(t + 3) * K};
      float v[2][4];
      if (two) k->dot2x4_f32(rows, xs, K, v);
      else k->dot4_f32(rows[0], xs, K, v[0]);
      for (int q = 0; q < 1 + two; q++)
        for (int u = 0; u < 4; u++) put(j, t + u, r + q, v[q][u]);
    }
    for (; t < j->n; t++)
      for (int q = 0; q < 1 + two; q++) put(j, t, r + q, k->dot_f32(rows[q], j->x + (size_t)t * K, K));
  }
}

/* The integer product: activations quantized once (spread over the pool
 * for a prefill), then rows split into tasks; each task runs its rows over
 * every token, so a weight row is read from memory once per product. */
typedef struct {
  cpu_backend *c;
  const wisp_matrix *W;
  const uint16_t *s16; /* W's f16 block scales (Q4 / Q4Z), else NULL */
  const float *x;
  int n, accumulate, rows_per_task, tokens_per_task;
  float *y;
  const rms_job *norm; /* a held-back rmsnorm whose output is x: each token normalized, then quantized */
} i8_job;

static void i8_quant_task(void *ctx, int task, int thread) {
  (void)thread;
  i8_job *j = ctx;
  int t0 = task * j->tokens_per_task, t1 = t0 + j->tokens_per_task;
  if (t1 > j->n) t1 = j->n;
  if (j->norm) rmsnorm_rows((void *)j->norm, t0, t1); /* the rows quantize reads next, still in cache */
  j->c->i8->quantize(j->x, t0, t1, &j->c->act);
}

static void i8_gemm_task(void *ctx, int task, int thread) {
  i8_job *j = ctx;
  int r0 = task * j->rows_per_task, nr = j->rows_per_task;
  if (r0 + nr > j->W->rows) nr = j->W->rows - r0;
  j->c->i8->gemm(j->W, j->s16, r0, nr, &j->c->act, 0, j->n, j->y + r0, (size_t)j->W->rows, j->accumulate,
                 j->c->scratch[thread]);
}

static void matmul_i8(cpu_backend *c, const wisp_matrix *W, const float *x, int n, float *y, int accumulate,
                      const rms_job *norm) {
  const int threads = wisp_pool_size(c->pool);
  if (!wisp_i8_act_reserve(&c->act, n, W->cols) || !ensure_scratch(c, WISP_I8_SCRATCH(W->cols))) {
    c->error = wisp_fail(WISP_ENOMEM, "matmul: out of memory for %d quantized activations", n);
    return;
  }
  /* found by address (made by prepare_matrix; made now only for a matrix
   * that was not prepared) */
  const void *copy = needs_i8_copy(W) ? i8_copy_for(c, W, 0) : NULL;
  if (needs_i8_copy(W) && !copy) {
    c->error = wisp_fail(WISP_ENOMEM, "matmul: out of memory for the integer product's copy of a %dx%d %s matrix",
                         W->rows, W->cols, wisp_wtype_name(W->type));
    return;
  }
  /* an F16 matrix runs as its Q8_0 copy */
  wisp_matrix q8;
  if (W->type == WISP_W_F16) q8 = wisp_i8_q8_0_view(W, copy), W = &q8;
  const uint16_t *s16 = wisp_i8_needs_f16_scales(W) ? copy : NULL;
  c->act.layout = wisp_i8_layout_for(W->type, n);
  double t = op_start(c);
  i8_job j = {c, W, s16, x, n, accumulate, 0, 0, y, norm};
  /* quantize: whole tokens per task */
  j.tokens_per_task = n < 8 * threads ? 1 : n / (4 * threads);
  int qtasks = (n + j.tokens_per_task - 1) / j.tokens_per_task;
  if ((double)n * W->cols < 65536.0) qtasks = 1, j.tokens_per_task = n;
  if (qtasks == 1) i8_quant_task(&j, 0, 0);
  else wisp_pool_run(c->pool, qtasks, i8_quant_task, &j);
  op_stop(c, norm ? OP_NORM_QUANTIZE : OP_I8_QUANTIZE, t);
  t = op_start(c);
  /* rows: a multiple of 4 (the decode tile). A small decode product (a few
   * microseconds at 16 threads) is one task a thread, each thread's own
   * (threadpool.c: no shared counter touched), the usual split of a
   * matrix-vector product; larger ones about four tasks a thread, enough
   * that a thread the machine preempts does not hold up the others. Either
   * way each thread streams long runs of consecutive weight rows. */
  const int small = n == 1 && (double)W->rows * W->cols < 4194304.0; /* under ~2.5 MB of 4-bit weights */
  int per = small ? (W->rows + threads - 1) / threads : W->rows / (threads * 4);
  per = per < 4 ? 4 : (per + 3) / 4 * 4;
  if (n > 1 && per > 64) per = 64;
  j.rows_per_task = per;
  int tasks = (W->rows + per - 1) / per;
  if ((double)W->rows * W->cols * n < 131072.0 || tasks == 1)
    for (int k = 0; k < tasks; k++) i8_gemm_task(&j, k, 0);
  else
    wisp_pool_run(c->pool, tasks, i8_gemm_task, &j);
  op_stop(c, n > 1 ? OP_I8_PREFILL : OP_I8_DECODE, t);
}

static void cpu_matmul_run(wisp_backend *be, const wisp_matrix *W, const wisp_buf *x, int x_row0, int n, wisp_buf *y,
                       int accumulate) {
  cpu_backend *c = as_cpu(be);
  const char *variant = W->choice[n > 1 ? WISP_PHASE_PREFILL : WISP_PHASE_DECODE].variant;
  if (runs_i8(variant, W)) {
    /* cpu_matmul left a held-back rmsnorm only when it is this product's input */
    rms_job nj, *norm = NULL;
    if (c->norm.on) {
      nj = (rms_job){c->norm.x->data, c->norm.w->data, c->norm.out->data, c->norm.eps, c->norm.dim};
      norm = &nj;
      c->norm.on = 0;
    }
    matmul_i8(c, W, x->data + (size_t)x_row0 * W->cols, n, y->data, accumulate, norm);
    return;
  }
  const wisp_cpu_kernels *k = kernels_for(c, variant);
  if (!k) k = c->k; /* prepare_matrix rejected unknown variants already */
  if (n > 1 && !ensure_scratch(c, (size_t)2 * W->cols)) {
    /* Out of memory for a row buffer: fall back to per-token dot products. */
    for (int t = 0; t < n; t++) {
      matmul_job j = {c, k, W, x->data + (size_t)(x_row0 + t) * W->cols, 1, accumulate, W->rows,
                      y->data + (size_t)t * W->rows};
      matmul_task(&j, 0, 0);
    }
    return;
  }
  matmul_job j = {c, k, W, x->data + (size_t)x_row0 * W->cols, n, accumulate, 16, y->data};
  int tasks = (W->rows + j.rows_per_task - 1) / j.rows_per_task;
  /* Waking the workers costs tens of microseconds: small products run inline. */
  if ((double)W->rows * W->cols * n < 262144.0) {
    for (int t = 0; t < tasks; t++) matmul_task(&j, t, 0);
    return;
  }
  wisp_pool_run(c->pool, tasks, matmul_task, &j);
}

static void cpu_matmul(wisp_backend *be, const wisp_matrix *W, const wisp_buf *x, int x_row0, int n, wisp_buf *y,
                       int accumulate) {
  cpu_backend *c = as_cpu(be);
  const char *variant = W->choice[n > 1 ? WISP_PHASE_PREFILL : WISP_PHASE_DECODE].variant;
  const int i8 = runs_i8(variant, W);
  /* The held-back rmsnorm goes into an integer product of exactly its
   * output (the same tokens and width, y neither its input nor its output);
   * else it runs on its own first. */
  if (c->norm.on && !(i8 && c->norm.out == x && x_row0 == 0 && c->norm.n == n && c->norm.dim == W->cols &&
                      y != c->norm.x && y != c->norm.out))
    flush_norm(c);
  double t = op_start(c);
  cpu_matmul_run(be, W, x, x_row0, n, y, accumulate);
  if (!i8) op_stop(c, n > 1 ? OP_EXACT_PREFILL : OP_EXACT_DECODE, t); /* matmul_i8 times its own two parts */
}

/* Grows a buffer of the backend to n floats (kept for later calls). */
static int ensure_buf(float **buf, size_t *len, size_t n) {
  if (n <= *len) return 1;
  float *p = realloc(*buf, n * sizeof(float));
  if (!p) return 0;
  *buf = p;
  *len = n;
  return 1;
}

/* Channels are independent (each has its own taps and state), so a range of
 * channels runs every token; ranges spread over the pool. */
typedef struct {
  const float *bcx, *taps;
  float *state, *out;
  int L, n, dim;
} conv_job;

static void shortconv_channels(void *ctx, int c0, int c1) {
  const conv_job *j = ctx;
  const int S = j->L - 1, dim = j->dim; /* S: inputs remembered per channel */
  for (int t = 0; t < j->n; t++) {
    const float *B = j->bcx + (size_t)t * 3 * dim, *C = B + dim, *X = C + dim;
    float *o = j->out + (size_t)t * dim;
    for (int ch = c0; ch < c1; ch++) {
      const float *w = j->taps + (size_t)ch * j->L;
      float *st = j->state + (size_t)ch * S;
      float bx = B[ch] * X[ch];
      float acc = w[S] * bx;
      for (int k = 0; k < S; k++) acc += w[k] * st[k];
      for (int k = 0; k + 1 < S; k++) st[k] = st[k + 1];
      if (S > 0) st[S - 1] = bx;
      o[ch] = C[ch] * acc;
    }
  }
}

/* Channels per task for a mixer over n tokens of dim channels: about 2k
 * channel-steps a task, whole 64-byte lines of each token's output row. A
 * decode token from 4 threads up is spread over every thread instead: its
 * inputs were just written by the product before it, spread over every
 * core's cache, and one thread pulling them all over took longer (about
 * 10 us a call at 8 threads on the H200 host) than the hand-out. */
static int channel_grain(const cpu_backend *c, int n, int dim) {
  const int threads = wisp_pool_size(c->pool);
  int g = n == 1 && threads >= 4 ? (dim + threads - 1) / threads : (2048 + n - 1) / n;
  return (g + 15) / 16 * 16;
}

/* A prefill's short conv, vectorized over channels: every output
 * out[t][ch] = C[t][ch] * (w[ch][S] bx[t][ch] + sum_k<S w[ch][k] bx[t-S+k][ch])
 * (bx = B * x, the state standing in for the inputs before the call) is
 * independent of the others, so tasks are runs of tokens by blocks of
 * channels reading the B * x rows made first, with the taps transposed to
 * [L][channels] in the sum's order (newest input first, as the per-token
 * loop adds them, so both give the same bits); the state is written after
 * all tasks. */
#define SCONV_MIN_TOKENS 4
#define SCONV_MAX_TAPS 16
typedef struct {
  const float *bcx;
  float *bx, *hist, *taps_t, *out;
  const wisp_cpu_kernels *k;
  int L, n, dim, tokens_per_task, channel_tasks, channels_per_task;
} sconv_job;

static void sconv_bx_rows(void *ctx, int t0, int t1) {
  const sconv_job *j = ctx;
  for (int t = t0; t < t1; t++) {
    const float *B = j->bcx + (size_t)t * 3 * j->dim, *X = B + 2 * (size_t)j->dim;
    float *bx = j->bx + (size_t)t * j->dim;
    for (int ch = 0; ch < j->dim; ch++) bx[ch] = B[ch] * X[ch];
  }
}

/* Input row i of the conv (i < 0: the state's row i + S). */
static const float *sconv_input(const sconv_job *j, int i) {
  return i >= 0 ? j->bx + (size_t)i * j->dim : j->hist + (size_t)(i + j->L - 1) * j->dim;
}

static void sconv_block(void *ctx, int task, int thread) {
  (void)thread;
  const sconv_job *j = ctx;
  const int S = j->L - 1;
  const int t0 = task / j->channel_tasks * j->tokens_per_task, c0 = task % j->channel_tasks * j->channels_per_task;
  const int t1 = t0 + j->tokens_per_task < j->n ? t0 + j->tokens_per_task : j->n;
  const int nc = c0 + j->channels_per_task < j->dim ? j->channels_per_task : j->dim - c0;
  const float *x[SCONV_MAX_TAPS];
  for (int t = t0; t < t1; t++) {
    x[0] = sconv_input(j, t) + c0;
    for (int k = 0; k < S; k++) x[1 + k] = sconv_input(j, t - S + k) + c0;
    float *o = j->out + (size_t)t * j->dim + c0;
    j->k->conv_f32(o, x, j->taps_t + c0, (size_t)j->dim, j->L, nc);
    const float *C = j->bcx + (size_t)t * 3 * j->dim + j->dim + c0;
    for (int c = 0; c < nc; c++) o[c] = C[c] * o[c];
  }
}

static void shortconv_prefill(cpu_backend *c, const conv_job *cj) {
  const int L = cj->L, S = L - 1, n = cj->n, dim = cj->dim;
  sconv_job j = {.bcx = cj->bcx, .out = cj->out, .k = c->k, .L = L, .n = n, .dim = dim};
  j.bx = c->scbuf;
  j.taps_t = j.bx + (size_t)n * dim;
  j.hist = j.taps_t + (size_t)L * dim;
  for (int ch = 0; ch < dim; ch++) {
    j.taps_t[ch] = cj->taps[(size_t)ch * L + S];
    for (int k = 0; k < S; k++) j.taps_t[(size_t)(1 + k) * dim + ch] = cj->taps[(size_t)ch * L + k];
    for (int s = 0; s < S; s++) j.hist[(size_t)s * dim + ch] = cj->state[(size_t)ch * S + s];
  }
  run_ranges(c, n, (4096 + dim - 1) / dim, sconv_bx_rows, &j);
  /* about 16k outputs a task: 1k channels by runs of 16 tokens */
  j.channels_per_task = dim < 1024 ? dim : 1024;
  j.channel_tasks = (dim + j.channels_per_task - 1) / j.channels_per_task;
  j.tokens_per_task = 16;
  const int tasks = (n + j.tokens_per_task - 1) / j.tokens_per_task * j.channel_tasks;
  if (tasks == 1 || wisp_pool_size(c->pool) == 1)
    for (int t = 0; t < tasks; t++) sconv_block(&j, t, 0);
  else
    wisp_pool_run(c->pool, tasks, sconv_block, &j);
  for (int s = 0; s < S; s++) { /* the state after the call: each channel's last S inputs */
    const float *x = sconv_input(&j, n - S + s);
    for (int ch = 0; ch < dim; ch++) cj->state[(size_t)ch * S + s] = x[ch];
  }
}

static void cpu_shortconv_run(wisp_backend *be, const wisp_buf *bcx, const wisp_vector *taps, int L, int n, int dim,
                              wisp_buf *state, wisp_buf *out) {
  cpu_backend *c = as_cpu(be);
  conv_job j = {bcx->data, taps->data, state->data, out->data, L, n, dim};
  if (n >= SCONV_MIN_TOKENS && L <= SCONV_MAX_TAPS &&
      ensure_buf(&c->scbuf, &c->scbuf_len, (size_t)(n + 2 * L - 1) * dim)) {
    shortconv_prefill(c, &j);
    return;
  }
  run_ranges(c, dim, channel_grain(c, n, dim), shortconv_channels, &j);
}

static void cpu_shortconv(wisp_backend *be, const wisp_buf *bcx, const wisp_vector *taps, int L, int n, int dim,
                          wisp_buf *state, wisp_buf *out) {
  flush_norm(as_cpu(be)); /* a held-back rmsnorm first (cpu_rmsnorm) */
  double t = op_start(as_cpu(be));
  cpu_shortconv_run(be, bcx, taps, L, n, dim, state, out);
  op_stop(as_cpu(be), OP_SHORTCONV, t);
}

static void rmsnorm_inplace(float *v, const float *w, int d, float eps) {
  double ss = 0;
  for (int i = 0; i < d; i++) ss += (double)v[i] * v[i];
  float inv = 1.0f / sqrtf((float)(ss / d) + eps);
  for (int i = 0; i < d; i++) v[i] = v[i] * inv * w[i];
}

/* NEOX rotation: pairs (i, i + d/2). */
static void rope_inplace(float *v, const float *cs, const float *sn, int d) {
  int h = d / 2;
  for (int i = 0; i < h; i++) {
    float a = v[i], b = v[i + h];
    v[i] = a * cs[i] - b * sn[i];
    v[i + h] = b * cs[i] + a * sn[i];
  }
}

/* The pre-pass of an attention call, token by token (tokens are
 * independent: each writes its own queries and its own cache position):
 * q and k heads normed (when the model has the norms) and rotated, k and
 * v appended to the caches. Plain attention's qkv row is [q | k | v];
 * gated attention's is [(q | gate) per head | k | v]. An f16 cache gets
 * each value rounded to nearest even once, at this append; its keys are
 * normed and rotated in f32 first (in kbuf), as the f32 cache's are. */
typedef struct {
  const wisp_cpu_kernels *k;
  const float *qkv, *q_norm, *k_norm, *cos, *sin;
  float *qbuf, *kbuf;
  wisp_buf *kc, *vc;
  float eps;
  int row, H, KVH, D, rot, q_stride, k_off, pos0;
} attn_prep_job;

/* Where token t's key head h is normed and rotated: its cache row (f32
 * cache), else its row of kbuf. */
static float *key_work_row(const attn_prep_job *j, int t, int h) {
  if (j->kc->f16) return j->kbuf + ((size_t)t * j->KVH + h) * j->D;
  return j->kc->data + ((size_t)(j->pos0 + t) * j->KVH + h) * j->D;
}

/* Cache row (pos, h) of c := x (D values), rounded when the cache is f16. */
static void cache_put(const attn_prep_job *j, wisp_buf *c, int pos, int h, const float *x) {
  const size_t at = ((size_t)pos * j->KVH + h) * j->D;
  if (c->f16) j->k->f32_to_f16(halves(c) + at, x, j->D);
  else if (c->data + at != x) memcpy(c->data + at, x, (size_t)j->D * sizeof(float));
}

/* Heads [h0, h1) of token t: query heads first (0..H-1), then KV heads. */
static void attn_prep_heads_of(const attn_prep_job *j, int t, int h0, int h1) {
  const int D = j->D, half = j->rot / 2;
  const int pos = j->pos0 + t;
  const float *src = j->qkv + (size_t)t * j->row;
  const float *cs = j->cos + (size_t)pos * half, *sn = j->sin + (size_t)pos * half;
  for (int h = h0; h < h1 && h < j->H; h++) {
    float *q = j->qbuf + ((size_t)t * j->H + h) * D;
    memcpy(q, src + (size_t)h * j->q_stride, (size_t)D * sizeof(float));
    if (j->q_norm) rmsnorm_inplace(q, j->q_norm, D, j->eps);
    rope_inplace(q, cs, sn, j->rot);
  }
  const float *ks = src + j->k_off, *vs = ks + (size_t)j->KVH * D;
  for (int h = h0 > j->H ? h0 - j->H : 0; h < h1 - j->H; h++) {
    float *kd = key_work_row(j, t, h);
    memcpy(kd, ks + (size_t)h * D, (size_t)D * sizeof(float));
    if (j->k_norm) rmsnorm_inplace(kd, j->k_norm, D, j->eps);
    rope_inplace(kd, cs, sn, j->rot);
    cache_put(j, j->kc, pos, h, kd);
    cache_put(j, j->vc, pos, h, vs + (size_t)h * D);
  }
}

static void attn_prep_tokens(void *ctx, int t0, int t1) {
  const attn_prep_job *j = ctx;
  for (int t = t0; t < t1; t++) attn_prep_heads_of(j, t, 0, j->H + j->KVH);
}

/* A decode token's pre-pass by heads (its qkv row was just written by the
 * product before it, spread over every core's cache: see channel_grain). */
static void attn_prep_heads(void *ctx, int h0, int h1) { attn_prep_heads_of(ctx, 0, h0, h1); }

/* o = sum over positions p < n of w[p] * inv * (value row p of KV head
 * kvh), added in position order from zero (wsum), from an f32 or f16
 * cache; wsum fetches the rows, a cache stride apart, ahead. */
static void weighted_values(const wisp_cpu_kernels *k, const wisp_buf *v, int kvh, int KVH, int D, const float *w, int n,
                            float inv, float *o) {
  const size_t row = (size_t)KVH * D;
  if (v->f16) k->wsum_f16(o, w, inv, n, halves(v) + (size_t)kvh * D, row, D);
  else k->wsum_f32(o, w, inv, n, v->data + (size_t)kvh * D, row, D);
}

/* Attention proper: a task is a few query heads of one KV head (a group
 * reads the same cached keys and values, so they are read from memory once
 * a group instead of once a head) over a run of tokens, so that a prefill
 * keeps every thread busy even when there are fewer heads than threads.
 * Later tokens see more positions: the runs are handed out last first, so
 * the long ones do not end up alone at the end. */
typedef struct {
  cpu_backend *c;
  const wisp_attention_args *a;
  const float *gate; /* gated attention: the qkv rows (head h's gate at h*2D + D); NULL: no gate */
  int gate_row, tokens_per_task, runs, heads_per_task;
} attn_job;

/* One query head h at token t: scores of every cached position, softmax,
 * the weighted sum of the value rows, the gate. */
static void attn_head_token(const attn_job *j, int h, int t, float *scores) {
  const wisp_attention_args *a = j->a;
  const int D = a->head_dim, KVH = a->kv_heads, kvh = h / (a->heads / a->kv_heads);
  const int pos = a->pos0 + t;
  const wisp_cpu_kernels *k = j->c->k;
  const float *q = j->c->qbuf + ((size_t)t * a->heads + h) * D;
  const float scale = 1.0f / sqrtf((float)D);
  if (a->k_cache->f16) k->dots_f16(q, halves(a->k_cache) + (size_t)kvh * D, (size_t)KVH * D, pos + 1, D, scale, scores);
  else k->dots_f32(q, a->k_cache->data + (size_t)kvh * D, (size_t)KVH * D, pos + 1, D, scale, scores);
  float mx = -INFINITY;
  for (int p = 0; p <= pos; p++)
    if (scores[p] > mx) mx = scores[p];
  double sum = 0;
  for (int p = 0; p <= pos; p++) {
    scores[p] = expf(scores[p] - mx);
    sum += scores[p];
  }
  float inv = (float)(1.0 / sum);
  float *o = a->out->data + ((size_t)t * a->heads + h) * D;
  weighted_values(k, a->v_cache, kvh, KVH, D, scores, pos + 1, inv, o);
  if (j->gate) { /* out *= sigmoid(gate) */
    const float *g = j->gate + (size_t)t * j->gate_row + (size_t)h * 2 * D + D;
    for (int i = 0; i < D; i++) o[i] *= 1.0f / (1.0f + expf(-g[i]));
  }
}

static void attn_task(void *ctx, int task, int thread) {
  attn_job *j = ctx;
  const int groups = j->a->heads / j->heads_per_task;
  const int h0 = task % groups * j->heads_per_task, run = j->runs - 1 - task / groups;
  const int t0 = run * j->tokens_per_task, t1 = t0 + j->tokens_per_task < j->a->n ? t0 + j->tokens_per_task : j->a->n;
  for (int t = t0; t < t1; t++)
    for (int h = h0; h < h0 + j->heads_per_task; h++) attn_head_token(j, h, t, j->c->scratch[thread]);
}

/* Query heads a task: all the heads of a KV head while that still leaves a
 * task for every thread, else fewer (a divisor of the group). */
static int attn_heads_per_task(int heads, int kv_heads, int runs, int threads) {
  int hpt = heads / kv_heads;
  while (hpt > 1 && (heads / hpt) * runs < threads) {
    do hpt--;
    while (heads / kv_heads % hpt);
  }
  return hpt;
}

/* The pre-pass over the pool, then the (head, run of tokens) tasks. */
static void attention_common(cpu_backend *c, const attn_prep_job *prep, const wisp_attention_args *a,
                             const float *gate, int gate_row) {
  const int H = a->heads, D = a->head_dim;
  size_t need_q = (size_t)a->n * H * D;
  if (need_q > c->qbuf_len) {
    float *p = realloc(c->qbuf, need_q * sizeof(float));
    if (!p) { c->error = wisp_fail(WISP_ENOMEM, "attention: out of memory for %zu queries", need_q); return; }
    c->qbuf = p;
    c->qbuf_len = need_q;
  }
  if (!ensure_scratch(c, (size_t)(a->pos0 + a->n))) { c->error = wisp_fail(WISP_ENOMEM, "attention: out of memory"); return; }
  size_t need_k = a->k_cache->f16 ? (size_t)a->n * a->kv_heads * D : 0;
  if (need_k > c->kbuf_len) {
    float *p = realloc(c->kbuf, need_k * sizeof(float));
    if (!p) { c->error = wisp_fail(WISP_ENOMEM, "attention: out of memory for %zu keys", need_k); return; }
    c->kbuf = p;
    c->kbuf_len = need_k;
  }
  attn_prep_job pj = *prep;
  pj.k = c->k;
  pj.qbuf = c->qbuf;
  pj.kbuf = c->kbuf;
  const int per_token = (H + a->kv_heads) * D, threads = wisp_pool_size(c->pool);
  if (a->n == 1 && threads >= 4)
    run_ranges(c, H + a->kv_heads, (H + a->kv_heads + threads - 1) / threads, attn_prep_heads, &pj);
  else
    run_ranges(c, a->n, (8192 + per_token - 1) / per_token, attn_prep_tokens, &pj);
  /* about four tasks a thread, in runs of at least four tokens */
  int runs = (4 * threads + H - 1) / H;
  if (runs > (a->n + 3) / 4) runs = (a->n + 3) / 4;
  if (runs < 1) runs = 1;
  attn_job j = {c, a, gate, gate_row, (a->n + runs - 1) / runs, 0, 1};
  j.runs = (a->n + j.tokens_per_task - 1) / j.tokens_per_task;
  j.heads_per_task = attn_heads_per_task(H, a->kv_heads, j.runs, threads);
  wisp_pool_run(c->pool, H / j.heads_per_task * j.runs, attn_task, &j);
}

static void cpu_attention_run(wisp_backend *be, const wisp_attention_args *a) {
  const int D = a->head_dim, H = a->heads, KVH = a->kv_heads;
  attn_prep_job pj = {.qkv = a->qkv->data, .q_norm = a->q_norm ? a->q_norm->data : NULL,
                      .k_norm = a->k_norm ? a->k_norm->data : NULL, .cos = a->rope_cos->data,
                      .sin = a->rope_sin->data, .kc = a->k_cache, .vc = a->v_cache, .eps = a->eps,
                      .row = (H + 2 * KVH) * D, .H = H, .KVH = KVH, .D = D, .rot = D, .q_stride = D,
                      .k_off = H * D, .pos0 = a->pos0};
  attention_common(as_cpu(be), &pj, a, NULL, 0);
}

static void cpu_attention(wisp_backend *be, const wisp_attention_args *a) {
  flush_norm(as_cpu(be)); /* a held-back rmsnorm first (cpu_rmsnorm) */
  double t = op_start(as_cpu(be));
  cpu_attention_run(be, a);
  op_stop(as_cpu(be), OP_ATTENTION, t);
}

/* ---- gated attention ---- */

static void cpu_attention_gated_run(wisp_backend *be, const wisp_gated_attention_args *g) {
  const int D = g->head_dim, H = g->heads, KVH = g->kv_heads;
  const int row = (2 * H + 2 * KVH) * D;
  attn_prep_job pj = {.qkv = g->qkv->data, .q_norm = g->q_norm->data, .k_norm = g->k_norm->data,
                      .cos = g->rope_cos->data, .sin = g->rope_sin->data, .kc = g->k_cache,
                      .vc = g->v_cache, .eps = g->eps, .row = row, .H = H, .KVH = KVH, .D = D,
                      .rot = g->rotary_dim, .q_stride = 2 * D, .k_off = 2 * H * D, .pos0 = g->pos0};
  wisp_attention_args a = {.n = g->n, .pos0 = g->pos0, .heads = H, .kv_heads = KVH, .head_dim = D,
                           .k_cache = g->k_cache, .v_cache = g->v_cache, .out = g->out};
  attention_common(as_cpu(be), &pj, &a, g->qkv->data, row);
}

static void cpu_attention_gated(wisp_backend *be, const wisp_gated_attention_args *g) {
  flush_norm(as_cpu(be)); /* a held-back rmsnorm first (cpu_rmsnorm) */
  double t = op_start(as_cpu(be));
  cpu_attention_gated_run(be, g);
  op_stop(as_cpu(be), OP_ATTENTION, t);
}

/* ---- Gated DeltaNet ---- */

static float softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); } /* torch's threshold 20 */

/* Prefills of this many tokens or more run the recurrence in chunks
 * (cpu_deltanet.c); shorter calls, decode among them, token by token. */
#define DN_CHUNKED_MIN 4

/* Prefill runs in waves of chunks (cpu_gated_deltanet): a wave's
 * preparations (wisp_dn_prep, about 128 KB each for keys of 128) sit in
 * the backend's heap, at most this many of them. */
#define DN_WAVE_PREPS 32
/* Value columns a task of the chunked recurrence takes (a head's dv when
 * it is not a multiple of this): the columns of a head's state are
 * independent, so a head splits into blocks that keep every thread busy
 * with fewer heads than threads; fixed by the shape, not the thread count. */
#define DN_COLUMN_BLOCK 32

typedef struct {
  cpu_backend *c;
  const wisp_deltanet_args *a;
  /* the chunked form's current wave: its first token and chunks, their
   * preparations ([v_heads][chunks]), the blocks of value columns */
  int t0, chunks;
  float *prep;
  int col_block, col_blocks;
} dn_job;

/* Token t's inputs to v-head h: the normalised key and the normalised,
 * scaled query of its k-head, its log decay g and its beta. */
static void dn_token_inputs(const dn_job *j, int t, int h, float *q, float *k, float *g, float *beta) {
  const wisp_deltanet_args *a = j->a;
  const int dk = a->k_dim, K = a->k_heads * dk, V = a->v_heads * a->v_dim;
  const int conv_dim = 2 * K + V, proj_row = 2 * K + 2 * V + 2 * a->v_heads;
  const int kh = h / (a->v_heads / a->k_heads);
  const float *cv = j->c->dnbuf + (size_t)t * conv_dim;
  const float *pr = a->proj->data + (size_t)t * proj_row;
  double sq = 0, sk = 0;
  for (int i = 0; i < dk; i++) {
    q[i] = cv[kh * dk + i];
    k[i] = cv[K + kh * dk + i];
    sq += (double)q[i] * q[i];
    sk += (double)k[i] * k[i];
  }
  const float iq = 1.0f / sqrtf((float)sq + 1e-6f), ik = 1.0f / sqrtf((float)sk + 1e-6f);
  const float qscale = 1.0f / sqrtf((float)dk);
  for (int i = 0; i < dk; i++) { q[i] = q[i] * iq * qscale; k[i] *= ik; }
  const float b = pr[conv_dim + V + h], av = pr[conv_dim + V + a->v_heads + h];
  *beta = 1.0f / (1.0f + expf(-b));
  *g = -expf(a->a_log->data[h]) * softplus(av + a->dt_bias->data[h]);
}

/* Token t's value row of v-head h (in the conv output). */
static const float *dn_value(const dn_job *j, int t, int h) {
  const wisp_deltanet_args *a = j->a;
  const int K = a->k_heads * a->k_dim, conv_dim = 2 * K + a->v_heads * a->v_dim;
  return j->c->dnbuf + (size_t)t * conv_dim + 2 * K + (size_t)h * a->v_dim;
}

/* out[t] of v-head h = rmsnorm(o) * w * silu(z); o may be that output row;
 * zs: v_dim floats of scratch. */
static void dn_gated_norm(const dn_job *j, int t, int h, const float *o, float *zs) {
  const wisp_deltanet_args *a = j->a;
  const int dv = a->v_dim, K = a->k_heads * a->k_dim, V = a->v_heads * dv;
  const int proj_row = 2 * K + 2 * V + 2 * a->v_heads;
  const float *z = a->proj->data + (size_t)t * proj_row + 2 * K + V + (size_t)h * dv;
  float *out = a->out->data + (size_t)t * V + (size_t)h * dv;
  j->c->k->silu_f32(zs, z, dv);
  double ss = 0;
  for (int e = 0; e < dv; e++) ss += (double)o[e] * o[e];
  const float inv = 1.0f / sqrtf((float)(ss / dv) + a->eps);
  for (int e = 0; e < dv; e++) out[e] = a->norm->data[e] * (o[e] * inv) * zs[e];
}

static int dn_column_block(const wisp_deltanet_args *a) {
  return a->v_dim % DN_COLUMN_BLOCK == 0 ? DN_COLUMN_BLOCK : a->v_dim;
}

/* Per-thread scratch floats of dn_task or of the chunked form's tasks. */
static size_t dn_scratch_floats(const wisp_deltanet_args *a) {
  const size_t dk = (size_t)a->k_dim, dv = (size_t)a->v_dim, C = WISP_DN_CHUNK;
  const size_t by_token = 2 * dk + 3 * dv;
  const size_t prepare = C + wisp_dn_prepare_scratch(a->k_dim), columns = wisp_dn_columns_scratch(dn_column_block(a));
  const size_t chunked = prepare > columns ? prepare : columns;
  return a->n >= DN_CHUNKED_MIN ? (chunked > dv ? chunked : dv) : by_token;
}

/* One v-head token by token (decode, short calls). */
static void dn_head_by_token(const dn_job *j, int h, float *scratch) {
  const wisp_deltanet_args *a = j->a;
  const int dk = a->k_dim, dv = a->v_dim, V = a->v_heads * dv;
  float *q = scratch, *k = q + dk, *kv = k + dk, *zs = kv + dv;
  float *S = a->state->data + (size_t)h * dk * dv;
  for (int t = 0; t < a->n; t++) {
    float g, beta;
    dn_token_inputs(j, t, h, q, k, &g, &beta);
    float *o = a->out->data + (size_t)t * V + (size_t)h * dv;
    j->c->k->deltanet_step(S, dk, dv, k, q, dn_value(j, t, h), expf(g), beta, kv, o);
    dn_gated_norm(j, t, h, o, zs);
  }
}

/* One v-head over all n tokens: the recurrence is sequential in t. */
static void dn_task(void *ctx, int h, int thread) {
  const dn_job *j = ctx;
  dn_head_by_token(j, h, j->c->scratch[thread]);
}

/* Chunk ci of the current wave for v-head h: its first token, and its
 * preparation pointed into the wave's memory. */
static int dn_chunk_at(const dn_job *j, int h, int ci, wisp_dn_prep *p) {
  const int t0 = j->t0 + ci * WISP_DN_CHUNK, c = j->a->n - t0 < WISP_DN_CHUNK ? j->a->n - t0 : WISP_DN_CHUNK;
  const size_t slot = (size_t)h * j->chunks + ci;
  wisp_dn_prep_init(p, j->prep + slot * wisp_dn_prep_floats(j->a->k_dim), j->a->k_dim, c);
  return t0;
}

/* Task h * chunks + ci: what every value column of head h shares in chunk
 * ci (its keys, queries, betas and decays through wisp_dn_chunk_prepare). */
static void dn_prepare_task(void *ctx, int task, int thread) {
  const dn_job *j = ctx;
  const int h = task / j->chunks, dk = j->a->k_dim;
  wisp_dn_prep p;
  const int t0 = dn_chunk_at(j, h, task % j->chunks, &p);
  float *g = j->c->scratch[thread], *work = g + WISP_DN_CHUNK;
  for (int i = 0; i < p.c; i++)
    dn_token_inputs(j, t0 + i, h, p.kq + (size_t)(p.c + i) * dk, p.kq + (size_t)i * dk, &g[i], &p.beta[i]);
  wisp_dn_chunk_prepare(j->c->k, &p, g, work);
}

/* Task h * col_blocks + b: block b of head h's value columns through the
 * wave's chunks in order (its slice of the state carried from one to the
 * next), the raw outputs written to the op's output (normed afterwards). */
static void dn_columns_task(void *ctx, int task, int thread) {
  const dn_job *j = ctx;
  const wisp_deltanet_args *a = j->a;
  const int h = task / j->col_blocks, e0 = task % j->col_blocks * j->col_block;
  const int dk = a->k_dim, dv = a->v_dim, V = a->v_heads * dv, K = a->k_heads * dk, conv_dim = 2 * K + V;
  const int n = dv - e0 < j->col_block ? dv - e0 : j->col_block;
  float *S = a->state->data + (size_t)h * dk * dv + e0;
  for (int ci = 0; ci < j->chunks; ci++) {
    wisp_dn_prep p;
    const int t0 = dn_chunk_at(j, h, ci, &p);
    float *o = a->out->data + (size_t)t0 * V + (size_t)h * dv + e0;
    wisp_dn_chunk_columns(j->c->k, &p, S, dv, n, dn_value(j, t0, h) + e0, conv_dim, o, V, j->c->scratch[thread]);
  }
}

/* Task i: the gated norm of a run of tokens, every head, in place. */
#define DN_NORM_TOKENS 8
static void dn_norm_task(void *ctx, int task, int thread) {
  const dn_job *j = ctx;
  const wisp_deltanet_args *a = j->a;
  const int dv = a->v_dim, V = a->v_heads * dv, t0 = task * DN_NORM_TOKENS;
  const int t1 = t0 + DN_NORM_TOKENS < a->n ? t0 + DN_NORM_TOKENS : a->n;
  for (int t = t0; t < t1; t++)
    for (int h = 0; h < a->v_heads; h++)
      dn_gated_norm(j, t, h, a->out->data + (size_t)t * V + (size_t)h * dv, j->c->scratch[thread]);
}

/* fn over tasks [0, n): on the caller alone when the call is small. */
static void dn_run(dn_job *j, int serial, int tasks, wisp_task_fn fn) {
  if (serial || tasks == 1 || wisp_pool_size(j->c->pool) == 1)
    for (int t = 0; t < tasks; t++) fn(j, t, 0);
  else
    wisp_pool_run(j->c->pool, tasks, fn, j);
}

static int dn_wave_chunks(const wisp_deltanet_args *a) {
  const int chunks = (a->n + WISP_DN_CHUNK - 1) / WISP_DN_CHUNK, fit = DN_WAVE_PREPS / a->v_heads;
  return fit < 1 ? 1 : fit < chunks ? fit : chunks;
}

/* The chunked recurrence over the call, wave by wave, then the gated norm. */
static void dn_chunked(dn_job *j, int serial) {
  const wisp_deltanet_args *a = j->a;
  const int wave = dn_wave_chunks(a);
  j->prep = j->c->dnprep;
  j->col_block = dn_column_block(a);
  j->col_blocks = a->v_dim / j->col_block;
  for (j->t0 = 0; j->t0 < a->n; j->t0 += wave * WISP_DN_CHUNK) {
    const int left = (a->n - j->t0 + WISP_DN_CHUNK - 1) / WISP_DN_CHUNK;
    j->chunks = left < wave ? left : wave;
    dn_run(j, serial, a->v_heads * j->chunks, dn_prepare_task);
    dn_run(j, serial, a->v_heads * j->col_blocks, dn_columns_task);
  }
  dn_run(j, serial, (a->n + DN_NORM_TOKENS - 1) / DN_NORM_TOKENS, dn_norm_task);
}

/* The causal depthwise conv + SiLU, out[t][ch] = silu(sum_k w[ch][k] x[t-S+k][ch])
 * with S = L-1 and x[-S..-1] the conv state ([ch][S], oldest first). */
typedef struct {
  const wisp_deltanet_args *a;
  const wisp_cpu_kernels *k;
  float *out;
  const float *taps_t, *hist; /* [L][conv_dim] taps and [S][conv_dim] state, transposed (blocked form) */
  int conv_dim, proj_row;
  int tokens_per_task, channels_per_task, channel_tasks;
} dn_conv_job;

/* Few tokens (decode): a range of channels, each with its own taps and
 * state, shifted in place token by token; SiLU over the range at the end of
 * each token. */
static void dn_conv_channels(void *ctx, int c0, int c1) {
  const dn_conv_job *j = ctx;
  const wisp_deltanet_args *a = j->a;
  const int L = a->conv_len, S = L - 1;
  for (int t = 0; t < a->n; t++) {
    const float *x = a->proj->data + (size_t)t * j->proj_row;
    float *o = j->out + (size_t)t * j->conv_dim;
    for (int ch = c0; ch < c1; ch++) {
      const float *w = a->conv_taps->data + (size_t)ch * L;
      float *st = a->conv_state->data + (size_t)ch * S;
      float acc = 0;
      for (int k = 0; k < S; k++) acc += w[k] * st[k];
      acc += w[S] * x[ch];
      for (int k = 0; k + 1 < S; k++) st[k] = st[k + 1];
      if (S > 0) st[S - 1] = x[ch];
      o[ch] = acc;
    }
    j->k->silu_f32(o + c0, o + c0, c1 - c0);
  }
}

/* Input row i of the conv (i < 0: the state's row i + S), from channel 0. */
static const float *dn_conv_input(const dn_conv_job *j, int i) {
  const int S = j->a->conv_len - 1;
  return i >= 0 ? j->a->proj->data + (size_t)i * j->proj_row : j->hist + (size_t)(i + S) * j->conv_dim;
}

/* Many tokens: a task is a run of tokens by a block of channels; each
 * output is independent of the others, and the state is read from its
 * transposed copy and written after all tasks (dn_conv_update_state). */
#define DN_CONV_MAX_TAPS 16
static void dn_conv_block(void *ctx, int task, int thread) {
  (void)thread;
  const dn_conv_job *j = ctx;
  const int L = j->a->conv_len, S = L - 1;
  const int t0 = task / j->channel_tasks * j->tokens_per_task, c0 = task % j->channel_tasks * j->channels_per_task;
  const int t1 = t0 + j->tokens_per_task < j->a->n ? t0 + j->tokens_per_task : j->a->n;
  const int nc = c0 + j->channels_per_task < j->conv_dim ? j->channels_per_task : j->conv_dim - c0;
  const float *x[DN_CONV_MAX_TAPS];
  for (int t = t0; t < t1; t++) {
    for (int k = 0; k < L; k++) x[k] = dn_conv_input(j, t - S + k) + c0;
    j->k->conv_silu_f32(j->out + (size_t)t * j->conv_dim + c0, x, j->taps_t + c0, (size_t)j->conv_dim, L, nc);
  }
}

/* The state after the call: each channel's last S inputs, from the old
 * state where the call had fewer than S tokens. */
static void dn_conv_update_state(const dn_conv_job *j) {
  const int S = j->a->conv_len - 1, n = j->a->n;
  float *st = j->a->conv_state->data;
  for (int s = 0; s < S; s++) {
    const float *x = dn_conv_input(j, n - S + s);
    for (int ch = 0; ch < j->conv_dim; ch++) st[(size_t)ch * S + s] = x[ch];
  }
}

static void dn_conv(cpu_backend *c, const wisp_deltanet_args *a, int conv_dim, int proj_row) {
  const int L = a->conv_len, S = L - 1;
  dn_conv_job j = {.a = a, .k = c->k, .out = c->dnbuf, .conv_dim = conv_dim, .proj_row = proj_row};
  if (a->n < DN_CHUNKED_MIN || L > DN_CONV_MAX_TAPS) {
    run_ranges(c, conv_dim, channel_grain(c, a->n, conv_dim), dn_conv_channels, &j);
    return;
  }
  float *taps_t = c->dnconv, *hist = taps_t + (size_t)L * conv_dim;
  for (int ch = 0; ch < conv_dim; ch++) {
    for (int k = 0; k < L; k++) taps_t[(size_t)k * conv_dim + ch] = a->conv_taps->data[(size_t)ch * L + k];
    for (int s = 0; s < S; s++) hist[(size_t)s * conv_dim + ch] = a->conv_state->data[(size_t)ch * S + s];
  }
  j.taps_t = taps_t;
  j.hist = hist;
  /* about 16k outputs a task: 1k channels (4 KB of each input row, the rows
   * of a run reused from L1) by runs of 16 tokens */
  j.channels_per_task = conv_dim < 1024 ? conv_dim : 1024;
  j.channel_tasks = (conv_dim + j.channels_per_task - 1) / j.channels_per_task;
  j.tokens_per_task = 16;
  const int tasks = (a->n + j.tokens_per_task - 1) / j.tokens_per_task * j.channel_tasks;
  if (tasks == 1 || wisp_pool_size(c->pool) == 1)
    for (int t = 0; t < tasks; t++) dn_conv_block(&j, t, 0);
  else
    wisp_pool_run(c->pool, tasks, dn_conv_block, &j);
  dn_conv_update_state(&j);
}


static void cpu_gated_deltanet(wisp_backend *be, const wisp_deltanet_args *a) {
  flush_norm(as_cpu(be)); /* a held-back rmsnorm first (cpu_rmsnorm) */
  cpu_backend *c = as_cpu(be);
  const int K = a->k_heads * a->k_dim, V = a->v_heads * a->v_dim;
  const int conv_dim = 2 * K + V, proj_row = 2 * K + 2 * V + 2 * a->v_heads;
  const size_t preps = a->n >= DN_CHUNKED_MIN ? (size_t)a->v_heads * dn_wave_chunks(a) : 0;
  if (!ensure_buf(&c->dnbuf, &c->dnbuf_len, (size_t)a->n * conv_dim) ||
      !ensure_buf(&c->dnconv, &c->dnconv_len, (size_t)(2 * a->conv_len - 1) * conv_dim) ||
      !ensure_buf(&c->dnprep, &c->dnprep_len, preps * wisp_dn_prep_floats(a->k_dim)) ||
      !ensure_scratch(c, dn_scratch_floats(a))) {
    c->error = wisp_fail(WISP_ENOMEM, "gated_deltanet: out of memory");
    return;
  }
  double t0 = op_start(c);
  dn_conv(c, a, conv_dim, proj_row);
  op_stop(c, OP_DELTANET_CONV, t0);
  t0 = op_start(c);
  dn_job j = {.c = c, .a = a};
  const int serial = (double)a->n * a->v_heads * a->k_dim * a->v_dim < 65536.0;
  if (a->n >= DN_CHUNKED_MIN)
    dn_chunked(&j, serial);
  else
    dn_run(&j, serial, a->v_heads, dn_task);
  op_stop(c, OP_DELTANET_HEADS, t0);
}

typedef struct {
  const wisp_cpu_kernels *k;
  const float *gu;
  float *out;
  int ffn;
} swiglu_job;

/* items are the n * ffn outputs, token-major */
static void swiglu_items(void *ctx, int k0, int k1) {
  const swiglu_job *j = ctx;
  for (int k = k0; k < k1;) {
    const int t = k / j->ffn, i0 = k % j->ffn, i1 = k1 - t * j->ffn < j->ffn ? k1 - t * j->ffn : j->ffn;
    const float *g = j->gu + (size_t)t * 2 * j->ffn, *u = g + j->ffn;
    float *o = j->out + (size_t)t * j->ffn;
    j->k->swiglu_f32(o + i0, g + i0, u + i0, i1 - i0);
    k = t * j->ffn + i1;
  }
}

static void cpu_swiglu_run(wisp_backend *be, const wisp_buf *gu, int n, int ffn, wisp_buf *out) {
  swiglu_job j = {as_cpu(be)->k, gu->data, out->data, ffn};
  /* 4k outputs a task; a decode token (2-4k outputs) in 1k pieces once there
   * are 4 threads or more, where it would otherwise be the longest serial
   * step between two products */
  const int grain = n == 1 && wisp_pool_size(as_cpu(be)->pool) >= 4 ? 1024 : 4096;
  run_ranges(as_cpu(be), n * ffn, grain, swiglu_items, &j);
}

static void cpu_swiglu(wisp_backend *be, const wisp_buf *gu, int n, int ffn, wisp_buf *out) {
  flush_norm(as_cpu(be)); /* a held-back rmsnorm first (cpu_rmsnorm) */
  double t = op_start(as_cpu(be));
  cpu_swiglu_run(be, gu, n, ffn, out);
  op_stop(as_cpu(be), OP_SWIGLU, t);
}

static void cpu_buf_write(wisp_backend *be, wisp_buf *b, size_t off, size_t n, const float *src) {
  flush_norm(as_cpu(be)); /* a held-back rmsnorm first (cpu_rmsnorm) */
  memcpy(b->data + off, src, n * sizeof(float));
}

static void cpu_buf_copy_to(wisp_backend *be, wisp_buf *dst, const wisp_buf *src, size_t n) {
  flush_norm(as_cpu(be)); /* a held-back rmsnorm first (cpu_rmsnorm) */
  memcpy(dst->data, src->data, n * sizeof(float));
}

/* b[dst_off..+n) = b[src_off..+n) (the decode loop's ids buffer). */
static void cpu_buf_copy(wisp_backend *be, wisp_buf *b, size_t dst_off, size_t src_off, size_t n) {
  flush_norm(as_cpu(be)); /* a held-back rmsnorm first (cpu_rmsnorm) */
  memmove(b->data + dst_off, b->data + src_off, n * sizeof(float));
}

static void cpu_buf_copy_at_run(wisp_backend *be, wisp_buf *dst, size_t dst_off, const wisp_buf *src, size_t src_off,
                            size_t n) {
  (void)be;
  memcpy(dst->data + dst_off, src->data + src_off, n * sizeof(float));
}

static void cpu_buf_copy_at(wisp_backend *be, wisp_buf *dst, size_t dst_off, const wisp_buf *src, size_t src_off,
                            size_t n) {
  flush_norm(as_cpu(be)); /* a held-back rmsnorm first (cpu_rmsnorm) */
  double t = op_start(as_cpu(be));
  cpu_buf_copy_at_run(be, dst, dst_off, src, src_off, n);
  op_stop(as_cpu(be), OP_COPY, t);
}

/* ---- several sequences in one step ---- */

/* The mixers over the rows of a batched step (backend.h shortconv_rows
 * ...): each row is the one-token op on that row of the shared buffers
 * (a view: the row's floats inside them) and its own state. */
static wisp_buf row_view(const wisp_buf *b, int r, int width) {
  return (wisp_buf){.data = b->data + (size_t)r * width, .n = (size_t)width}; /* activations: f32 */
}

static int cpu_shortconv_rows(wisp_backend *be, const wisp_buf *bcx, const wisp_vector *taps, int L, int dim,
                              const wisp_mixer_rows *rows, wisp_buf *out) {
  for (int r = 0; r < rows->n; r++) {
    wisp_buf in = row_view(bcx, r, 3 * dim), o = row_view(out, r, dim);
    cpu_shortconv(be, &in, taps, L, 1, dim, rows->s0[r], &o);
  }
  return 1;
}

static int cpu_attention_rows(wisp_backend *be, const wisp_attention_args *a, const wisp_mixer_rows *rows) {
  const int D = a->head_dim;
  for (int r = 0; r < rows->n; r++) {
    wisp_buf in = row_view(a->qkv, r, (a->heads + 2 * a->kv_heads) * D), o = row_view(a->out, r, a->heads * D);
    wisp_attention_args one = *a;
    one.qkv = &in;
    one.out = &o;
    one.n = 1;
    one.pos0 = rows->pos[r];
    one.k_cache = rows->s0[r];
    one.v_cache = rows->s1[r];
    cpu_attention(be, &one);
  }
  return 1;
}

static int cpu_attention_gated_rows(wisp_backend *be, const wisp_gated_attention_args *a,
                                    const wisp_mixer_rows *rows) {
  const int D = a->head_dim;
  for (int r = 0; r < rows->n; r++) {
    wisp_buf in = row_view(a->qkv, r, (2 * a->heads + 2 * a->kv_heads) * D), o = row_view(a->out, r, a->heads * D);
    wisp_gated_attention_args one = *a;
    one.qkv = &in;
    one.out = &o;
    one.n = 1;
    one.pos0 = rows->pos[r];
    one.k_cache = rows->s0[r];
    one.v_cache = rows->s1[r];
    cpu_attention_gated(be, &one);
  }
  return 1;
}

static int cpu_gated_deltanet_rows(wisp_backend *be, const wisp_deltanet_args *a, const wisp_mixer_rows *rows) {
  const int K = a->k_heads * a->k_dim, V = a->v_heads * a->v_dim;
  for (int r = 0; r < rows->n; r++) {
    wisp_buf in = row_view(a->proj, r, 2 * K + 2 * V + 2 * a->v_heads), o = row_view(a->out, r, V);
    wisp_deltanet_args one = *a;
    one.proj = &in;
    one.out = &o;
    one.n = 1;
    one.pos0 = rows->pos[r];
    one.conv_state = rows->s0[r];
    one.state = rows->s1[r];
    cpu_gated_deltanet(be, &one);
  }
  return 1;
}


/* Row r of W times x, as the one-row product (matmul_task, n = 1) does it. */
static float row_dot(const wisp_cpu_kernels *k, const wisp_matrix *W, int r, const float *x) {
  return W->type == WISP_W_F32    ? k->dot_f32(W->f32 + (size_t)r * W->cols, x, W->cols)
         : W->type == WISP_W_Q4K  ? k->dot_q4k_row(W, r, x)
         : W->type == WISP_W_F16  ? k->dot_f16_row(W, r, x)
         : W->type == WISP_W_Q8_0 ? k->dot_q8_0_row(W, r, x)
                                  : k->dot_q4_row(W, r, x);
}

typedef struct {
  const wisp_cpu_kernels *k;
  const wisp_matrix *W;
  const float *x;
  float *y;
  int n, accumulate, rows_per_task;
} rows_job;

/* Weight rows of one task, each against every sequence's row while it is
 * in cache: the weight is read once, each sum is the one-row product's. */
static void rows_task(void *ctx, int task, int thread) {
  (void)thread;
  rows_job *j = ctx;
  const int K = j->W->cols, N = j->W->rows;
  int r1 = (task + 1) * j->rows_per_task;
  if (r1 > N) r1 = N;
  for (int r = task * j->rows_per_task; r < r1; r++)
    for (int t = 0; t < j->n; t++) {
      float v = row_dot(j->k, j->W, r, j->x + (size_t)t * K);
      float *dst = j->y + (size_t)t * N + r;
      *dst = j->accumulate ? *dst + v : v;
    }
}

static void cpu_matmul_rows_run(wisp_backend *be, const wisp_matrix *W, const wisp_buf *x, int n, wisp_buf *y,
                            int accumulate) {
  cpu_backend *c = as_cpu(be);
  const wisp_cpu_kernels *k = kernels_for(c, W->choice[WISP_PHASE_DECODE].variant);
  rows_job j = {k ? k : c->k, W, x->data, y->data, n, accumulate, 16};
  int tasks = (W->rows + j.rows_per_task - 1) / j.rows_per_task;
  if ((double)W->rows * W->cols * n < 262144.0) {
    for (int t = 0; t < tasks; t++) rows_task(&j, t, 0);
    return;
  }
  wisp_pool_run(c->pool, tasks, rows_task, &j);
}

static void cpu_matmul_rows(wisp_backend *be, const wisp_matrix *W, const wisp_buf *x, int n, wisp_buf *y,
                            int accumulate) {
  flush_norm(as_cpu(be)); /* a held-back rmsnorm first (cpu_rmsnorm) */
  double t = op_start(as_cpu(be));
  cpu_matmul_rows_run(be, W, x, n, y, accumulate);
  op_stop(as_cpu(be), OP_OTHER, t);
}

static void cpu_penalize_run(wisp_backend *be, wisp_buf *logits, int vocab, const wisp_buf *hist, size_t hist_off, int n,
                         float penalty) {
  cpu_backend *c = as_cpu(be);
  uint32_t *ids = malloc(sizeof(uint32_t) * (size_t)(n > 0 ? n : 1)); /* the bit patterns, without type punning */
  if (!ids) {
    c->error = wisp_fail(WISP_ENOMEM, "out of memory for the repetition penalty");
    return;
  }
  memcpy(ids, hist->data + hist_off, sizeof(uint32_t) * (size_t)n);
  wisp_penalize_reference(logits->data, vocab, ids, n, penalty);
  free(ids);
}

static void cpu_penalize(wisp_backend *be, wisp_buf *logits, int vocab, const wisp_buf *hist, size_t hist_off, int n,
                         float penalty) {
  flush_norm(as_cpu(be)); /* a held-back rmsnorm first (cpu_rmsnorm) */
  double t = op_start(as_cpu(be));
  cpu_penalize_run(be, logits, vocab, hist, hist_off, n, penalty);
  op_stop(as_cpu(be), OP_SAMPLE, t);
}

static uint32_t id_at(const wisp_buf *ids, int slot) {
  uint32_t v;
  memcpy(&v, &ids->data[slot], sizeof v);
  return v;
}

static void cpu_embed_id_run(wisp_backend *be, const wisp_matrix *E, const wisp_buf *ids, int slot, wisp_buf *out) {
  cpu_backend *c = as_cpu(be);
  uint32_t id = id_at(ids, slot);
  if (id == WISP_ID_NONFINITE) { /* the step before met non-finite logits (cpu_sample_id) */
    if (!c->error)
      c->error = wisp_fail(WISP_EFORMAT, "non-finite logits: generation stopped (NaN or infinite values in the "
                           "model's weights or activations)");
    return;
  }
  if (id >= (uint32_t)E->rows) {
    c->error = wisp_fail(WISP_EINVAL, "token id %u is outside the vocabulary (%d)", id, E->rows);
    return;
  }
  c->k->row_f32(E, (int)id, out->data);
}

static void cpu_embed_id(wisp_backend *be, const wisp_matrix *E, const wisp_buf *ids, int slot, wisp_buf *out) {
  flush_norm(as_cpu(be)); /* a held-back rmsnorm first (cpu_rmsnorm) */
  double t = op_start(as_cpu(be));
  cpu_embed_id_run(be, E, ids, slot, out);
  op_stop(as_cpu(be), OP_EMBED, t);
}

/* Greedy sampling spread over the pool: each range of the vocabulary finds
 * whether it is all finite and its first largest logit; the ranges combine
 * in order with the same strict comparison, so the id is the reference's
 * (the first index of the maximum). One slot a cache line. */
typedef struct {
  int best, finite;
  char pad[56];
} argmax_part;

typedef struct {
  const float *x;
  argmax_part *part;
  int grain;
  const wisp_cpu_kernels *k;
} argmax_job;

static void argmax_range(void *ctx, int i0, int i1) {
  const argmax_job *j = ctx;
  int finite;
  int best = i0 + j->k->argmax_f32(j->x + i0, i1 - i0, &finite);
  j->part[i0 / j->grain] = (argmax_part){.best = best, .finite = finite};
}

enum { ARGMAX_GRAIN = 16384, ARGMAX_PARTS = 64 };

static void cpu_sample_id_run(wisp_backend *be, const wisp_buf *logits, int vocab, const wisp_sampling *p,
                              uint32_t step, wisp_buf *ids, int slot) {
  const float *x = logits->data;
  int finite = 1;
  uint32_t id;
  int grain = ARGMAX_GRAIN;
  if (vocab > (int64_t)grain * ARGMAX_PARTS) grain = (vocab + ARGMAX_PARTS - 1) / ARGMAX_PARTS;
  if (p->temperature <= 0) {
    /* every slot starts as "index 0, finite": a run that took the whole
     * row in one range (one thread) leaves the others as that */
    argmax_part part[ARGMAX_PARTS];
    for (int k = 0; k < ARGMAX_PARTS; k++) part[k] = (argmax_part){.best = 0, .finite = 1};
    argmax_job j = {x, part, grain, as_cpu(be)->k};
    run_ranges(as_cpu(be), vocab, grain, argmax_range, &j);
    int best = part[0].best;
    for (int k = 0; k * grain < vocab; k++) {
      finite &= part[k].finite;
      if (x[part[k].best] > x[best]) best = part[k].best;
    }
    id = finite ? (uint32_t)best : WISP_ID_NONFINITE;
  } else {
    /* One pass over the row (small beside the head product that made it):
     * a NaN or an infinity anywhere means there is no token to choose. */
    for (int i = 0; i < vocab && finite; i++) finite = isfinite(x[i]);
    id = finite ? (uint32_t)wisp_sample_reference(x, vocab, p, step) : WISP_ID_NONFINITE;
  }
  memcpy(&ids->data[slot], &id, sizeof id);
}

static void cpu_sample_id(wisp_backend *be, const wisp_buf *logits, int vocab, const wisp_sampling *p,
                          uint32_t step, wisp_buf *ids, int slot) {
  flush_norm(as_cpu(be)); /* a held-back rmsnorm first (cpu_rmsnorm) */
  double t = op_start(as_cpu(be));
  cpu_sample_id_run(be, logits, vocab, p, step, ids, slot);
  op_stop(as_cpu(be), OP_SAMPLE, t);
}

static wisp_status cpu_sync(wisp_backend *be) {
  cpu_backend *c = as_cpu(be);
  flush_norm(c);
  wisp_status st = c->error;
  c->error = WISP_OK;
  return st;
}

static void cpu_destroy(wisp_backend *be) {
  cpu_backend *c = as_cpu(be);
  if (!c) return;
  if (c->scratch) {
    for (int i = 0; i < wisp_pool_size(c->pool); i++) free(c->scratch[i]);
    free(c->scratch);
  }
  free(c->qbuf);
  free(c->kbuf);
  free(c->dnbuf);
  free(c->dnconv);
  free(c->scbuf);
  free(c->dnprep);
  wisp_i8_act_free(&c->act);
  for (size_t i = 0; i < c->n_copies; i++) free(c->copies[i].data);
  free(c->copies);
  wisp_pool_free(c->pool);
  free(c);
}

void wisp_cpu_backend_use_scalar(wisp_backend *be) {
  if (be && be->name && !strcmp(be->name, "cpu")) as_cpu(be)->k = wisp_cpu_kernels_scalar();
}

static int is_cpu(const wisp_backend *be) { return be && be->name && !strcmp(be->name, "cpu"); }

void wisp_cpu_backend_time_ops(wisp_backend *be, int on) {
  if (!is_cpu(be)) return;
  cpu_backend *c = as_cpu(be);
  if (on) {
    memset(c->op_s, 0, sizeof c->op_s);
    memset(c->op_calls, 0, sizeof c->op_calls);
  }
  c->timing = on;
}

int wisp_cpu_backend_op_times(const wisp_backend *be, wisp_cpu_op_time *out, int cap) {
  if (!is_cpu(be)) return 0;
  const cpu_backend *c = (const cpu_backend *)be;
  int n = 0;
  for (int i = 0; i < OP_N && n < cap; i++)
    if (c->op_calls[i]) out[n++] = (wisp_cpu_op_time){op_names[i], c->op_s[i], c->op_calls[i]};
  return n;
}

wisp_status wisp_cpu_backend_new(int threads, wisp_backend **out) {
  *out = NULL;
  if (threads <= 0) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    threads = n > 0 ? (int)n : 1;
  }
  cpu_backend *c = calloc(1, sizeof *c);
  if (!c) return wisp_fail(WISP_ENOMEM, "out of memory");
  c->pool = wisp_pool_new(threads);
  if (!c->pool) { free(c); return wisp_fail(WISP_ENOMEM, "cannot start %d threads", threads); }
  c->scratch = calloc((size_t)wisp_pool_size(c->pool), sizeof(float *));
  if (!c->scratch) { cpu_destroy(&c->base); return wisp_fail(WISP_ENOMEM, "out of memory"); }
  c->k = wisp_cpu_kernels_get();
  c->i8 = !strcmp(c->k->name, "scalar") ? wisp_i8_kernels_scalar() : wisp_i8_kernels_get();
  c->base = (wisp_backend){
      .name = "cpu",
      .configure = cpu_configure,
      .caps = cpu_caps,
      .buf_new = cpu_buf_new,
      .buf_free = cpu_buf_free,
      .buf_read = cpu_buf_read,
      .buf_zero = cpu_buf_zero,
      .prepare_matrix = cpu_prepare_matrix,
      .prepare_vector = cpu_prepare_vector,
      .embed = cpu_embed,
      .rmsnorm = cpu_rmsnorm,
      .matmul = cpu_matmul,
      .shortconv = cpu_shortconv,
      .attention = cpu_attention,
      .attention_gated = cpu_attention_gated,
      .gated_deltanet = cpu_gated_deltanet,
      .swiglu = cpu_swiglu,
      .buf_write = cpu_buf_write,
      .buf_copy_to = cpu_buf_copy_to,
      .buf_copy = cpu_buf_copy,
      .buf_copy_at = cpu_buf_copy_at,
      .kv_buf_new = cpu_kv_buf_new,
      .matmul_rows = cpu_matmul_rows,
      .shortconv_rows = cpu_shortconv_rows,
      .attention_rows = cpu_attention_rows,
      .attention_gated_rows = cpu_attention_gated_rows,
      .gated_deltanet_rows = cpu_gated_deltanet_rows,
      .penalize = cpu_penalize,
      .embed_id = cpu_embed_id,
      .sample_id = cpu_sample_id,
      .sync = cpu_sync,
      .destroy = cpu_destroy,
  };
  *out = &c->base;
  return WISP_OK;
}
