/* The CPU backend: executes each op at once on host memory, spreading rows
 * or heads over a thread pool. It is the reference the GPU backend is tested
 * against, once it has itself matched Hugging Face transformers
 * (tests/parity). This file owns the backend: buffers, norms, the products,
 * SwiGLU, copies and sampling; the mixers have a file each
 * (cpu_shortconv.c, cpu_attention.c, cpu_gated_deltanet.c, sharing
 * cpu_internal.h), and the inner loops live in cpu_kernels.c and cpu_i8.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/cpu/cpu_blocks.h"
#include "backend/cpu/cpu_internal.h"
#include "backend/tuning_defaults.h"
#include "format/qblocks.h"
#include "format/quant.h"
#include "util/err.h"

static const char *const op_names[OP_N] = {
    "embed", "rmsnorm", "rmsnorm+i8.quantize", "matmul.i8.quantize", "matmul.i8.prefill", "matmul.i8.decode",
    "matmul.exact.prefill", "matmul.exact.decode", "shortconv", "attention", "deltanet.conv", "deltanet.heads",
    "swiglu", "sample", "copy", "other"};

int wisp_cpu_ensure_scratch(cpu_backend *c, size_t n) {
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

/* The handle stays; its words move (ops read b->data when they run). */
static wisp_status cpu_kv_buf_grow(wisp_backend *be, wisp_buf *b, size_t n) {
  (void)be;
  size_t words = b->f16 ? (n + 1) / 2 : n;
  if (words <= b->n) return WISP_OK;
  float *p = realloc(b->data, words * sizeof(float));
  if (!p) return wisp_fail(WISP_ENOMEM, "out of memory for a KV cache of %zu values", n);
  memset(p + b->n, 0, (words - b->n) * sizeof(float));
  b->data = p;
  b->n = words;
  return WISP_OK;
}

/* The session's settings: the plan's KV type, and tuning cpuScalar (the
 * scalar reference kernels for everything). */
static wisp_status cpu_configure(wisp_backend *be, const wisp_backend_settings *s) {
  as_cpu(be)->kv16 = s->kv_f16;
  if (s->tuning && wisp_tuning_cpu_scalar(s->tuning)) wisp_cpu_backend_use_scalar(be);
  return WISP_OK;
}

static void cpu_buf_free(wisp_backend *be, wisp_buf *b) {
  (void)be;
  if (!b) return;
  free(b->data);
  free(b);
}

static void cpu_buf_read(wisp_backend *be, const wisp_buf *b, size_t off, size_t n, float *dst) {
  (void)be;
  memcpy(dst, b->data + off, n * sizeof(float));
}

static void cpu_buf_zero(wisp_backend *be, wisp_buf *b) {
  (void)be;
  memset(b->data, 0, b->n * sizeof(float));
}

/* The plan names a registry variant per matrix and phase; these are the
 * ones this backend implements (kernels/registry.json, backend "cpu"). */
/* The integer variants and the weight type each reads (f16_i8 and bf16_i8
 * through a Q8_0 copy, q4_0_i8 through a Q4 copy, the prefill of q6k_i8,
 * q3k_i8 and q2k_i8 through a Q8_0 copy, the others in the matrix's own
 * bytes; q4_i8 also takes Q4Z). */
static const struct {
  const char *name;
  wisp_wtype type;
} i8_variants[] = {{"q4_i8", WISP_W_Q4},     {"q4k_i8", WISP_W_Q4K},   {"q8_0_i8", WISP_W_Q8_0}, {"f16_i8", WISP_W_F16},
                   {"q6k_i8", WISP_W_Q6K},    {"q5k_i8", WISP_W_Q5K},   {"q3k_i8", WISP_W_Q3K},   {"q2k_i8", WISP_W_Q2K},
                   {"q4_0_i8", WISP_W_Q4_0},  {"q4_1_i8", WISP_W_Q4_1}, {"q5_0_i8", WISP_W_Q5_0}, {"q5_1_i8", WISP_W_Q5_1},
                   {"bf16_i8", WISP_W_BF16}};

/* Types whose integer product reads a Q8_0 copy of the weights made at
 * prepare time (F16 and BF16, which have no integer values of their own):
 * each row decoded, then rounded by convert's Q8_0 quantizer. The ggml
 * block types' kernels read their own blocks (Q4_0 through a Q4 copy of
 * the same values, below). */
static int i8_through_q8_0(const wisp_matrix *m) { return m->type == WISP_W_F16 || m->type == WISP_W_BF16; }

/* Types whose integer decode reads the matrix's own bytes but whose
 * integer prefill reads a Q8_0 copy (made as above): the types with a
 * scale per 16 values (Q6_K, Q3_K, Q2_K), on a kernel set whose Q8_0
 * prefill runs on the lanes (VNNI): there their second scale a block (or
 * its packing) costs more than the copy's extra bytes; AVX2 runs a Q8_0
 * prefill on the slower row tiles, and their own lanes beat it (docs/cpu.md,
 * "Blocks with a scale per 16 values"). */
static int i8_prefill_through_q8_0(const cpu_backend *c, const wisp_matrix *m) {
  return wisp_i8_per16(m->type) && c->i8->q8_0_lanes;
}

/* Q4_0 takes the Q4 integer product, exactly: a Q4_0 block is a Q4 block
 * (value d * (q - 8)) with its nibbles in another order and its scale
 * inline. The copy holds the nibbles in Q4's order and the f16 scales as
 * stored, the very numbers the Q4 kernels read (no rounding). */
static int i8_through_q4(const wisp_matrix *m) { return m->type == WISP_W_Q4_0; }

static int copy_kind(const cpu_backend *c, const wisp_matrix *m) {
  return i8_through_q8_0(m) || i8_prefill_through_q8_0(c, m) ? I8_COPY_Q8_0 : i8_through_q4(m) ? I8_COPY_Q4 : I8_COPY_SCALES;
}

/* The index of an integer variant in i8_variants, or -1 for the exact ones. */
static int i8_variant_index(const char *variant) {
  for (size_t i = 0; i < sizeof i8_variants / sizeof i8_variants[0]; i++)
    if (!strcmp(variant, i8_variants[i].name)) return (int)i;
  return -1;
}

static int is_i8_variant(const char *variant) { return i8_variant_index(variant) >= 0; }

/* 1 when W of this variant runs as an integer product. */
static int runs_i8(const char *variant, const wisp_matrix *W) {
  if (!is_i8_variant(variant)) return 0;
  if (i8_through_q8_0(W) || i8_through_q4(W))
    return i8_variants[i8_variant_index(variant)].type == W->type && W->cols > 0 && W->cols % 32 == 0;
  return wisp_i8_supported(W);
}

/* An op met a kernel name this backend does not have: an error from the
 * next sync, never a quiet run of some other kernel. */
static void unknown_kernel(cpu_backend *c, const char *variant) {
  if (!c->error)
    c->error = wisp_fail(WISP_EUNSUPPORTED, "matmul kernel '%s' is not one the cpu backend has", variant);
}

/* The kernel set of a plan's variant name; "" (no plan chose) is the
 * backend's own; NULL for a name the backend does not have. */
static const wisp_cpu_kernels *kernels_for(const cpu_backend *c, const char *variant) {
  if (!variant[0] || is_i8_variant(variant)) return c->k;
  /* the exact variants are the quant table's cpu_kernels: TYPE_scalar (the
   * scalar set), TYPE_avx2 and f32 (the best set) */
  if (!wisp_quant_of_cpu_kernel(variant)) return NULL;
  const size_t n = strlen(variant);
  if (n > 7 && !strcmp(variant + n - 7, "_scalar")) return wisp_cpu_kernels_scalar();
  return c->k;
}

/* The integer products read a copy of F16 / BF16 matrices (Q8_0
 * weights), of Q4_0 ones (Q4), of Q4 / Q4Z ones (f16 block scales) and, for
 * prefill only, of Q6_K, Q3_K and Q2_K ones (Q8_0); none of the others. */
static int needs_i8_copy(const cpu_backend *c, const wisp_matrix *m) {
  return i8_through_q8_0(m) || i8_prefill_through_q8_0(c, m) || i8_through_q4(m) || wisp_i8_needs_f16_scales(m);
}

/* 1 when a product of n tokens of m reads m's copy. */
static int reads_i8_copy(const cpu_backend *c, const wisp_matrix *m, int n) {
  return needs_i8_copy(c, m) && (n > 1 || !i8_prefill_through_q8_0(c, m));
}

/* What m's copy is made from: the weights, or the f32 scales. */
static const void *copy_source(const cpu_backend *c, const wisp_matrix *m) {
  return copy_kind(c, m) != I8_COPY_SCALES ? (const void *)m->q : (const void *)m->scales;
}

/* The entry of this backend's copy for m, or NULL. Keyed by the source's
 * address and block count, so that a tied head (its own matrix view over
 * the embedding's bytes) finds the embedding's entry. */
static i8_copy *find_copy(cpu_backend *c, const wisp_matrix *m) {
  const size_t n = (size_t)m->rows * (size_t)(m->cols / 32);
  const void *host = copy_source(c, m);
  const int q8 = copy_kind(c, m);
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

/* Rows of a Q4_0 matrix's Q4 copy: Q4_0 keeps element j in the low nibble
 * of byte j and element j + 16 in its high nibble, Q4 elements 2k and
 * 2k + 1 in byte k; the f16 scale is copied as it is. */
static void q4_copy_task(void *ctx, int task, int thread) {
  (void)thread;
  const q8_copy_job *j = ctx;
  const int r0 = task * j->rows_per_task, r1 = r0 + j->rows_per_task < j->m->rows ? r0 + j->rows_per_task : j->m->rows;
  const size_t nb = (size_t)(j->m->cols / 32), n = (size_t)j->m->rows * nb;
  uint8_t *nib = j->out, *scales = j->out + 16 * n;
  for (size_t b = (size_t)r0 * nb; b < (size_t)r1 * nb; b++) {
    const uint8_t *blk = j->m->q + b * WISP_Q4_0_BYTES;
    uint8_t e[32];
    for (int k = 0; k < 16; k++) {
      e[k] = blk[2 + k] & 15;
      e[k + 16] = blk[2 + k] >> 4;
    }
    for (int k = 0; k < 16; k++) nib[16 * b + k] = (uint8_t)(e[2 * k] | e[2 * k + 1] << 4);
    memcpy(scales + 2 * b, blk, 2);
  }
}

/* Fills a copy from m: the Q8_0 rounding of F16 weights, the Q4 order of
 * Q4_0 ones, or the f16 rounding of Q4 / Q4Z scales. 0 out of memory. */
static int fill_copy(cpu_backend *c, const wisp_matrix *m, void *data) {
  if (i8_through_q4(m)) {
    q8_copy_job j = {c, m, data, 64};
    if (m->rows > 0) wisp_pool_run(c->pool, (m->rows + j.rows_per_task - 1) / j.rows_per_task, q4_copy_task, &j);
    return 1;
  }
  if (copy_kind(c, m) == I8_COPY_SCALES) {
    wisp_i8_scales_f16(m, data);
    return 1;
  }
  if (!wisp_cpu_ensure_scratch(c, (size_t)m->cols)) return 0;
  q8_copy_job j = {c, m, data, 64};
  if (m->rows > 0) wisp_pool_run(c->pool, (m->rows + j.rows_per_task - 1) / j.rows_per_task, q8_copy_task, &j);
  return 1;
}

/* The bytes of one copy's data. */
static size_t copy_bytes(const i8_copy *e) {
  return e->n * (e->q8 == I8_COPY_Q8_0 ? WISP_Q8_0_BYTES : e->q8 == I8_COPY_Q4 ? 18 : sizeof(uint16_t));
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
    const int q8 = copy_kind(c, m);
    const i8_copy made = {copy_source(c, m), n, q8, NULL};
    void *data = malloc(n ? copy_bytes(&made) : 1);
    if (!data) return NULL;
    e = &c->copies[c->n_copies++];
    *e = made;
    e->data = data;
    convert = 1;
  }
  if (convert && !fill_copy(c, m, e->data)) return NULL;
  return e->data;
}

static wisp_status cpu_prepare_matrix(wisp_backend *be, wisp_matrix *m) {
  cpu_backend *c = as_cpu(be);
  for (int i = 0; i < m->n_parts; i++) { /* a matrix in row parts: each part as a matrix of its own */
    wisp_status st = cpu_prepare_matrix(be, &m->parts[i]);
    if (st) return st;
  }
  if (m->n_parts) return WISP_OK;
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
    const size_t vn = strlen(v);
    if (vn > 5 && !strcmp(v + vn - 5, "_avx2") && !c->k->avx2)
      return wisp_fail(WISP_EDEVICE, "the plan chose matmul kernel '%s' but this CPU lacks AVX2+FMA+F16C", v);
    if (is_i8_variant(v)) {
      wisp_wtype want = i8_variants[i8_variant_index(v)].type;
      int fits = m->type == want || (want == WISP_W_Q4 && m->type == WISP_W_Q4Z);
      if (!fits || !runs_i8(v, m))
        return wisp_fail(WISP_EINVAL, "the plan chose integer kernel '%s' for a %s matrix of %d columns", v,
                         wisp_wtype_name(m->type), m->cols);
    }
  }
  /* the integer products of Q4 / Q4Z read f16 scales, of F16 a Q8_0 copy of
   * the weights, made now so that a lack of memory stops the session before
   * it starts; the exact kernels read m as it is */
  const int i8_prefill = is_i8_variant(m->choice[WISP_PHASE_PREFILL].variant);
  const int i8 = i8_prefill || is_i8_variant(m->choice[WISP_PHASE_DECODE].variant);
  const int copy = i8_prefill_through_q8_0(c, m) ? i8_prefill : i8 && needs_i8_copy(c, m);
  if (copy && !i8_copy_for(c, m, 1))
    return wisp_fail(WISP_ENOMEM, "out of memory for the %s of a %dx%d %s matrix",
                     copy_kind(c, m) == I8_COPY_Q8_0 ? "Q8_0 copy (TYPE_i8)" : i8_through_q4(m) ? "Q4 copy (q4_0_i8)" : "f16 block scales", m->rows, m->cols,
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
  for (int t = 0; t < n; t++) {
    int row = tokens[t];
    const wisp_matrix *P = wisp_matrix_row_part(E, &row); /* (an embedding in row parts: the part holding it) */
    c->k->row_f32(P, row, out->data + (size_t)t * E->cols);
  }
}

static void cpu_embed(wisp_backend *be, const wisp_matrix *E, const int32_t *tokens, int n, wisp_buf *out) {
  double t = op_start(as_cpu(be));
  cpu_embed_run(be, E, tokens, n, out);
  op_stop(as_cpu(be), OP_EMBED, t);
}

/* Elementwise ops spread over the pool in ranges of `grain` items when
 * there are enough of them (fn(ctx, i0, i1) handles items [i0, i1)). */
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

void wisp_cpu_run_ranges(cpu_backend *c, int n, int grain, range_fn fn, void *ctx) {
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
  wisp_cpu_run_ranges(as_cpu(be), n, (4096 + dim - 1) / dim, rmsnorm_rows, &j);
}

static void cpu_rmsnorm(wisp_backend *be, const wisp_buf *x, const wisp_vector *w, float eps, int n, int dim,
                        wisp_buf *out) {
  cpu_backend *c = as_cpu(be);
  double t = op_start(c);
  cpu_rmsnorm_run(be, x, w, eps, n, dim, out);
  op_stop(c, OP_RMSNORM, t);
}

/* Row r of W times x: the one-row product, also each sequence's row of a
 * batched step (cpu_matmul_rows). */
static float row_dot(const wisp_cpu_kernels *k, const wisp_matrix *W, int r, const float *x) {
  switch (W->type) {
    case WISP_W_F32: return k->dot_f32(W->f32 + (size_t)r * W->cols, x, W->cols);
    case WISP_W_Q4K: return k->dot_q4k_row(W, r, x);
    case WISP_W_F16: return k->dot_f16_row(W, r, x);
    case WISP_W_Q8_0: return k->dot_q8_0_row(W, r, x);
    case WISP_W_Q4:
    case WISP_W_Q4Z: return k->dot_q4_row(W, r, x);
    default: return k->dot_blocks_row(W, r, x);
  }
}

typedef struct {
  cpu_backend *c;
  const wisp_cpu_kernels *k;
  const wisp_matrix *W;
  const float *x; /* first input row */
  int n, accumulate, rows_per_task;
  float *y;
} matmul_job;

/* y[t] row r of W's outputs (a part's: at its place in its whole's). */
static void put(const matmul_job *j, int t, int r, float v) {
  float *dst = j->y + (size_t)t * wisp_matrix_out_rows(j->W) + j->W->out_row0 + r;
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
    for (int r = r0; r < r1; r++) put(j, 0, r, row_dot(k, W, r, j->x));
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
  j->c->i8->gemm(j->W, j->s16, r0, nr, &j->c->act, 0, j->n, j->y + j->W->out_row0 + r0,
                 (size_t)wisp_matrix_out_rows(j->W), j->accumulate, j->c->scratch[thread]);
}

static void matmul_i8(cpu_backend *c, const wisp_matrix *W, const float *x, int n, float *y, int accumulate,
                      const rms_job *norm) {
  const int threads = wisp_pool_size(c->pool);
  if (!wisp_i8_act_reserve(&c->act, n, W->cols) || !wisp_cpu_ensure_scratch(c, WISP_I8_SCRATCH(W->cols))) {
    c->error = wisp_fail(WISP_ENOMEM, "matmul: out of memory for %d quantized activations", n);
    return;
  }
  /* found by address (made by prepare_matrix; made now only for a matrix
   * that was not prepared) */
  const int reads_copy = reads_i8_copy(c, W, n);
  const void *copy = reads_copy ? i8_copy_for(c, W, 0) : NULL;
  if (reads_copy && !copy) {
    c->error = wisp_fail(WISP_ENOMEM, "matmul: out of memory for the integer product's copy of a %dx%d %s matrix",
                         W->rows, W->cols, wisp_wtype_name(W->type));
    return;
  }
  /* an F16 matrix runs as its Q8_0 copy */
  wisp_matrix q8;
  const uint16_t *s16 = wisp_i8_needs_f16_scales(W) ? copy : NULL;
  if (copy && copy_kind(c, W) == I8_COPY_Q8_0) {
    q8 = wisp_i8_q8_0_view(W, copy), W = &q8;
  } else if (i8_through_q4(W)) { /* a Q4_0 matrix runs as its Q4 copy */
    const size_t blocks = (size_t)W->rows * (size_t)(W->cols / 32);
    q8 = *W;
    q8.type = WISP_W_Q4;
    q8.q = copy;
    q8.scales = NULL;
    q8.zp = NULL;
    s16 = (const uint16_t *)((const uint8_t *)copy + 16 * blocks);
    W = &q8;
  }
  c->act.layout = wisp_i8_layout_for(W->type, n);
  c->act.per256 = wisp_i8_per256_for(W->type, n);
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

/* norm (may be NULL): an rmsnorm whose output is x, which an integer
 * product runs inside its quantization (cpu_rmsnorm_matmul). */
static void cpu_matmul_run(wisp_backend *be, const wisp_matrix *W, const wisp_buf *x, int x_row0, int n, wisp_buf *y,
                           int accumulate, const rms_job *norm) {
  cpu_backend *c = as_cpu(be);
  if (W->n_parts) { /* a matrix in row parts: each part's product into its rows of y */
    if (norm) rmsnorm_rows((void *)norm, 0, n);
    for (int i = 0; i < W->n_parts; i++) cpu_matmul_run(be, &W->parts[i], x, x_row0, n, y, accumulate, NULL);
    return;
  }
  const char *variant = W->choice[n > 1 ? WISP_PHASE_PREFILL : WISP_PHASE_DECODE].variant;
  if (runs_i8(variant, W)) {
    matmul_i8(c, W, x->data + (size_t)x_row0 * W->cols, n, y->data, accumulate, norm);
    return;
  }
  const wisp_cpu_kernels *k = kernels_for(c, variant);
  if (!k) { /* prepare_matrix rejects unknown names: a matrix it never saw */
    unknown_kernel(c, variant);
    return;
  }
  if (n > 1 && !wisp_cpu_ensure_scratch(c, (size_t)2 * W->cols)) {
    /* Out of memory for a row buffer: fall back to per-token dot products. */
    for (int t = 0; t < n; t++) {
      matmul_job j = {c, k, W, x->data + (size_t)(x_row0 + t) * W->cols, 1, accumulate, W->rows,
                      y->data + (size_t)t * wisp_matrix_out_rows(W)};
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
  if (W->n_parts) { /* a matrix in row parts: each part timed as the kind of product it is */
    for (int i = 0; i < W->n_parts; i++) cpu_matmul(be, &W->parts[i], x, x_row0, n, y, accumulate);
    return;
  }
  const int i8 = runs_i8(W->choice[n > 1 ? WISP_PHASE_PREFILL : WISP_PHASE_DECODE].variant, W);
  double t = op_start(c);
  cpu_matmul_run(be, W, x, x_row0, n, y, accumulate, NULL);
  if (!i8) op_stop(c, n > 1 ? OP_EXACT_PREFILL : OP_EXACT_DECODE, t); /* matmul_i8 times its own two parts */
}

/* The graph pass's rmsnorm+matmul: an integer product normalizes each
 * token in the pass that quantizes it (the row still in cache), writing xn
 * as the rmsnorm op would; any other product (or a y that is x or xn) runs
 * the two ops one after the other. The same bits either way. */
static void cpu_rmsnorm_matmul(wisp_backend *be, const wisp_buf *x, const wisp_vector *w, float eps, int n,
                               wisp_buf *xn, const wisp_matrix *W, wisp_buf *y, int accumulate) {
  const int i8 = runs_i8(W->choice[n > 1 ? WISP_PHASE_PREFILL : WISP_PHASE_DECODE].variant, W);
  if (!i8 || y == x || y == xn || W->n_parts) { /* (a matrix in row parts: one quantization a part) */
    cpu_rmsnorm(be, x, w, eps, n, W->cols, xn);
    cpu_matmul(be, W, xn, 0, n, y, accumulate);
    return;
  }
  const rms_job norm = {x->data, w->data, xn->data, eps, W->cols};
  cpu_matmul_run(be, W, xn, 0, n, y, accumulate, &norm);
}

/* Grows a buffer of the backend to n floats (kept for later calls). */
int wisp_cpu_ensure_buf(float **buf, size_t *len, size_t n) {
  if (n <= *len) return 1;
  float *p = realloc(*buf, n * sizeof(float));
  if (!p) return 0;
  *buf = p;
  *len = n;
  return 1;
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
  wisp_cpu_run_ranges(as_cpu(be), n * ffn, grain, swiglu_items, &j);
}

static void cpu_swiglu(wisp_backend *be, const wisp_buf *gu, int n, int ffn, wisp_buf *out) {
  double t = op_start(as_cpu(be));
  cpu_swiglu_run(be, gu, n, ffn, out);
  op_stop(as_cpu(be), OP_SWIGLU, t);
}

static void cpu_buf_write(wisp_backend *be, wisp_buf *b, size_t off, size_t n, const float *src) {
  (void)be;
  memcpy(b->data + off, src, n * sizeof(float));
}

static void cpu_buf_copy_to(wisp_backend *be, wisp_buf *dst, const wisp_buf *src, size_t n) {
  (void)be;
  memcpy(dst->data, src->data, n * sizeof(float));
}

/* b[dst_off..+n) = b[src_off..+n) (the decode loop's ids buffer). */
static void cpu_buf_copy(wisp_backend *be, wisp_buf *b, size_t dst_off, size_t src_off, size_t n) {
  (void)be;
  memmove(b->data + dst_off, b->data + src_off, n * sizeof(float));
}

static void cpu_buf_copy_at_run(wisp_backend *be, wisp_buf *dst, size_t dst_off, const wisp_buf *src, size_t src_off,
                            size_t n) {
  (void)be;
  memcpy(dst->data + dst_off, src->data + src_off, n * sizeof(float));
}

static void cpu_buf_copy_at(wisp_backend *be, wisp_buf *dst, size_t dst_off, const wisp_buf *src, size_t src_off,
                            size_t n) {
  double t = op_start(as_cpu(be));
  cpu_buf_copy_at_run(be, dst, dst_off, src, src_off, n);
  op_stop(as_cpu(be), OP_COPY, t);
}

/* ---- several sequences in one step ---- */


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
      float *dst = j->y + (size_t)t * wisp_matrix_out_rows(j->W) + j->W->out_row0 + r;
      *dst = j->accumulate ? *dst + v : v;
    }
}

static void cpu_matmul_rows_run(wisp_backend *be, const wisp_matrix *W, const wisp_buf *x, int n, wisp_buf *y,
                            int accumulate) {
  cpu_backend *c = as_cpu(be);
  for (int i = 0; i < W->n_parts; i++) cpu_matmul_rows_run(be, &W->parts[i], x, n, y, accumulate);
  if (W->n_parts) return;
  const wisp_cpu_kernels *k = kernels_for(c, W->choice[WISP_PHASE_DECODE].variant);
  if (!k) {
    unknown_kernel(c, W->choice[WISP_PHASE_DECODE].variant);
    return;
  }
  rows_job j = {k, W, x->data, y->data, n, accumulate, 16};
  int tasks = (W->rows + j.rows_per_task - 1) / j.rows_per_task;
  if ((double)W->rows * W->cols * n < 262144.0) {
    for (int t = 0; t < tasks; t++) rows_task(&j, t, 0);
    return;
  }
  wisp_pool_run(c->pool, tasks, rows_task, &j);
}

static void cpu_matmul_rows(wisp_backend *be, const wisp_matrix *W, const wisp_buf *x, int n, wisp_buf *y,
                            int accumulate) {
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
  int row = (int)id;
  const wisp_matrix *P = wisp_matrix_row_part(E, &row);
  c->k->row_f32(P, row, out->data);
}

static void cpu_embed_id(wisp_backend *be, const wisp_matrix *E, const wisp_buf *ids, int slot, wisp_buf *out) {
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
    wisp_cpu_run_ranges(as_cpu(be), vocab, grain, argmax_range, &j);
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
  double t = op_start(as_cpu(be));
  cpu_sample_id_run(be, logits, vocab, p, step, ids, slot);
  op_stop(as_cpu(be), OP_SAMPLE, t);
}

static wisp_status cpu_sync(wisp_backend *be) {
  cpu_backend *c = as_cpu(be);
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

size_t wisp_cpu_backend_copy_bytes(const wisp_backend *be) {
  if (!is_cpu(be)) return 0;
  const cpu_backend *c = (const cpu_backend *)be;
  size_t n = 0;
  for (size_t i = 0; i < c->n_copies; i++) n += copy_bytes(&c->copies[i]);
  return n;
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
  if (threads <= 0) threads = wisp_pool_default_threads();
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
      .rmsnorm_matmul = cpu_rmsnorm_matmul,
      .matmul = cpu_matmul,
      .shortconv = wisp_cpu_shortconv,
      .attention = wisp_cpu_attention,
      .attention_gated = wisp_cpu_attention_gated,
      .gated_deltanet = wisp_cpu_gated_deltanet,
      .swiglu = cpu_swiglu,
      .buf_write = cpu_buf_write,
      .buf_copy_to = cpu_buf_copy_to,
      .buf_copy = cpu_buf_copy,
      .buf_copy_at = cpu_buf_copy_at,
      .kv_buf_new = cpu_kv_buf_new,
      .kv_buf_grow = cpu_kv_buf_grow,
      .matmul_rows = cpu_matmul_rows,
      .shortconv_rows = wisp_cpu_shortconv_rows,
      .attention_rows = wisp_cpu_attention_rows,
      .attention_gated_rows = wisp_cpu_attention_gated_rows,
      .gated_deltanet_rows = wisp_cpu_gated_deltanet_rows,
      .penalize = cpu_penalize,
      .embed_id = cpu_embed_id,
      .sample_id = cpu_sample_id,
      .sync = cpu_sync,
      .destroy = cpu_destroy,
  };
  wisp_cpu_rowops_install(&c->base);
  *out = &c->base;
  return WISP_OK;
}
