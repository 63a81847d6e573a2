/* The integer prefill product of the WebGPU backend (docs/webgpu.md,
 * "Products") for Q4, Q4Z, Q4_K and Q8_0 weights: quant_x8.wgsl quantizes
 * the product's input rows to int8 with one f32 scale per (token, 32-block)
 * into two scratch buffers, matmul_i8.wgsl multiplies the weights' integers
 * (nibbles, Q4_K's with its per-sub-block offset, or Q8_0's int8) with them
 * through dot4I8Packed. Consecutive products reading the same
 * input (nothing recorded in between, same rows and columns) quantize it once.
 * Recording goes through wgpu_core.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/tuning_defaults.h"
#include "backend/webgpu/wgpu_core.h"
#include "backend/webgpu/wgpu_products_i8.h"
#include "util/err.h"

/* The registry's integer prefill variant for each weight type (QT of
 * matmul_i8.wgsl), or NULL where there is none. */
static const char *variant_of(wisp_wtype t, uint32_t *qt) {
  switch (t) {
    case WISP_W_Q4: *qt = 1; return "wgsl_tiled_q4_i8";
    case WISP_W_Q4Z: *qt = 2; return "wgsl_tiled_q4_i8";
    case WISP_W_Q4K: *qt = 3; return "wgsl_tiled_q4k_i8";
    case WISP_W_Q8_0: *qt = 5; return "wgsl_tiled_q8_0_i8";
    default: return NULL;
  }
}
#define QUANT_WG 64

typedef struct {
  int mode; /* 1 plan, 2 always, 3 never */
  uint32_t tm, tn, rm, rn, kb;
  int fuseq; /* the product quantizes its own tiles (matmul_i8 FUSEQ = 1) */
  int min_n;
  /* matvec_i8_rows.wgsl, the batched step's integer product: steps of
   * rows_min..rows_max rows (rows_max 0: never), rows_rpl weight rows a
   * lane group */
  int rows_min, rows_max;
  uint32_t rows_rpl;
  int rows_fuse; /* its inputs quantized by the RMSNorm or SwiGLU that writes them */
  wisp_wgpu_buf xq, xs; /* quantized input: int8 words, scales */
  /* What xq/xs hold: input buffer, first row, tokens, columns, and the
   * backend's dispatch/submit counters right after the last product that
   * used them (unchanged = nothing recorded or submitted since). */
  int valid;
  WGPUBuffer src, last_y;
  int x_row0, n, cols;
  uint64_t dispatches, submits;
  uint64_t products, quantizations; /* recorded so far */
  uint64_t rows_products;           /* of them by matvec_i8_rows */
  uint64_t fused_quantizations;     /* inputs quantized by rmsnorm_q8 / swiglu_q8 */
} mm8_state;


/* Whether matmul_i8.wgsl takes the geometry on this device (0: no; the
 * bytes of workgroup memory and threads through *shared_out, *threads_out). */
static int geometry_ok(const wisp_wgpu_device *d, const mm8_state *s, uint64_t *threads_out, uint64_t *shared_out) {
  uint64_t threads = s->rm && s->rn ? (uint64_t)(s->tm / s->rm) * (s->tn / s->rn) : 0;
  /* wt, xt; wsc, xsc; wof, xsm (the Q4_K offsets and activation sums) */
  uint64_t shared = ((uint64_t)s->tm + s->tn) * (2u * s->kb + 1u) * 16u + ((uint64_t)s->tm + s->tn) * s->kb * 4u +
                    ((uint64_t)s->tm + 2u * s->tn) * s->kb * 4u;
  *threads_out = threads;
  *shared_out = shared;
  if (!s->tm || !s->tn || !s->rm || !s->rn || s->rm > 8 || s->rn > 8 || s->tm % s->rm || s->tn % s->rn || !s->kb ||
      s->kb > 8 || threads == 0 || (uint64_t)s->tm * s->kb > 8 * threads || (uint64_t)s->tn * s->kb * 2 > 8 * threads || threads > d->info.max_compute_invocations_per_workgroup ||
      threads > d->info.max_compute_workgroup_size_x || (s->fuseq && (uint64_t)s->tn * s->kb > threads) || shared > d->info.max_compute_workgroup_storage_size)
    return 0;
  return 1;
}

static wisp_status check_geometry(wisp_backend *be, const mm8_state *s) {
  wisp_wgpu_device *d = as_g(be)->d;
  uint64_t threads, shared;
  if (!geometry_ok(d, s, &threads, &shared))
    return wisp_fail(WISP_EINVAL,
                     "webgpu: bad int8 matmul geometry TM=%u TN=%u RM=%u RN=%u KB=%u (RM, RN <= 8 dividing TM, TN; at most 8 "
                     "loads of W and of x per thread and stage; "
                     "%llu threads, %llu bytes of workgroup memory; the device allows %u and %u)",
                     s->tm, s->tn, s->rm, s->rn, s->kb, (unsigned long long)threads, (unsigned long long)shared,
                     d->info.max_compute_invocations_per_workgroup, d->info.max_compute_workgroup_storage_size);
  return WISP_OK;
}

/* The token tile of a product of n tokens: the geometry's, or half of it
 * where n fills fewer than two tiles (the batched steps of up to 64 rows,
 * short prompts) and the kernel takes the half: the grid then keeps the
 * workgroups that a token tile of 32 gives such products. */
static uint32_t token_tile(const wisp_wgpu_device *d, const mm8_state *s, int n) {
  if (s->tn < 64 || (uint64_t)n >= 2ull * s->tn) return s->tn;
  mm8_state half = *s;
  half.tn = s->tn / 2;
  uint64_t threads, shared;
  return geometry_ok(d, &half, &threads, &shared) ? half.tn : s->tn;
}

static mm8_state *state_of(wisp_backend *be) {
  void **slot = &as_g(be)->mm8;
  if (*slot) return *slot;
  mm8_state *s = calloc(1, sizeof *s);
  if (!s) {
    wisp_wgpu_op_fail(as_g(be), WISP_ENOMEM, "out of memory");
    return NULL;
  }
  /* The tuning table's default geometry (matmulI8), then the options' own
   * where they give another that the kernel takes. */
  uint32_t def[5];
  wisp_tuning_default_of("matmulI8", def);
  s->mode = 1;
  s->tm = def[0];
  s->tn = def[1];
  s->rm = def[2];
  s->rn = def[3];
  s->kb = def[4];
  const wisp_wgpu_backend_opts *o = &as_g(be)->opts;
  const uint32_t *gm = o->i8_geometry;
  if (gm[0] && gm[1] && gm[2] && gm[3] && gm[4] && memcmp(gm, def, sizeof def)) {
    mm8_state t = *s;
    t.tm = gm[0], t.tn = gm[1], t.rm = gm[2], t.rn = gm[3], t.kb = gm[4];
    if (check_geometry(be, &t) == WISP_OK) *s = t;
    else fprintf(stderr, "wisp: tuning matmulI8 ignored: %s\n", wisp_last_error());
  }
  if (o->i8_mode == 2 || o->i8_mode == 3) s->mode = o->i8_mode;
  if (o->i8_fuseq) {
    mm8_state t = *s;
    t.fuseq = 1;
    if (check_geometry(be, &t) == WISP_OK) *s = t;
    else fprintf(stderr, "wisp: tuning i8Fuseq ignored: %s\n", wisp_last_error());
  }
  s->min_n = (int)o->i8_min_n; /* the table's default unless given */
  s->rows_min = (int)o->rows_i8_min;
  s->rows_max = (int)o->rows_i8_max;
  s->rows_rpl = o->rows_i8_rpl >= 1 && o->rows_i8_rpl <= 8 ? o->rows_i8_rpl : 2;
  s->rows_fuse = !o->no_rows_i8_fuse;
  *slot = s;
  return s;
}

void wisp_wgpu_mm8_free(wisp_backend *be) {
  void **slot = &as_g(be)->mm8;
  mm8_state *s = *slot;
  if (!s) return;
  wisp_wgpu_scratch_free(as_g(be), &s->xq);
  wisp_wgpu_scratch_free(as_g(be), &s->xs);
  free(s);
  *slot = NULL;
}

wisp_status wisp_wgpu_mm8_configure(wisp_backend *be, const wisp_wgpu_mm8_opts *o) {
  mm8_state *s = state_of(be);
  if (!s) return wisp_fail(WISP_ENOMEM, "out of memory");
  mm8_state t = *s;
  if (o->mode) t.mode = o->mode;
  if (o->tm) t.tm = o->tm;
  if (o->tn) t.tn = o->tn;
  if (o->rm) t.rm = o->rm;
  if (o->rn) t.rn = o->rn;
  if (o->kb) t.kb = o->kb;
  if (o->min_n) t.min_n = o->min_n;
  if (o->fuseq) t.fuseq = o->fuseq > 0;
  if (o->rows_max) t.rows_min = o->rows_min > 0 ? o->rows_min : 1, t.rows_max = o->rows_max > 0 ? o->rows_max : 0;
  if (o->rows_rpl) t.rows_rpl = o->rows_rpl;
  if (o->rows_fuse) t.rows_fuse = o->rows_fuse > 0;
  if (t.mode < 1 || t.mode > 3) return wisp_fail(WISP_EINVAL, "webgpu: int8 matmul mode %d", t.mode);
  if (!t.rows_rpl || t.rows_rpl > 8 || t.rows_min < 1 || t.rows_max > 64)
    return wisp_fail(WISP_EINVAL, "webgpu: int8 multi-row product: %d..%d rows, %u a lane group (1..64, 1..8)",
                     t.rows_min, t.rows_max, t.rows_rpl);
  wisp_status st = check_geometry(be, &t);
  if (st) return st;
  *s = t;
  return WISP_OK;
}

static void counters(wisp_backend *be, uint64_t *disp, uint64_t *subs) {
  const wisp_wgpu_backend_stats *st = &as_g(be)->stats;
  *disp = st->dispatches;
  *subs = st->submits;
}

int wisp_wgpu_mm8_planned(const wisp_matrix *W) {
  uint32_t qt;
  const char *variant = variant_of(W->type, &qt);
  return variant && W->cols % 32 == 0 && !strcmp(W->choice[WISP_PHASE_PREFILL].variant, variant);
}

int wisp_wgpu_mm8_takes(wisp_backend *be, const wisp_matrix *W, int n) {
  uint32_t qt;
  if (!variant_of(W->type, &qt) || W->cols % 32) return 0;
  mm8_state *s = state_of(be);
  if (!s || s->mode == 3 || n < s->min_n) return 0;
  return s->mode == 2 || wisp_wgpu_mm8_planned(W);
}

/* The scratch of `blocks` quantized 32-blocks (xq, xs); 0 when out of memory. */
static int reserve_quantized(wisp_backend *be, mm8_state *s, uint64_t blocks) {
  return wisp_wgpu_scratch(as_g(be), &s->xq, blocks * 32, blocks * 32, "wisp int8 activations") &&
         wisp_wgpu_scratch(as_g(be), &s->xs, blocks * 4, blocks * 4, "wisp int8 activation scales");
}

/* Records quant_x8.wgsl over n rows of x from x_row0 (cols columns) into
 * s->xq / s->xs, unless they already hold them: the last product quantized
 * the same rows and nothing has been recorded or submitted since (its
 * output buffer may not be this input). 0 when out of memory. */
static int quantize_input(wisp_backend *be, mm8_state *s, const wisp_buf *x, int x_row0, int n, uint32_t cols) {
  const uint64_t blocks = (uint64_t)n * (cols / 32);
  WGPUBuffer xb = x->g.b;
  uint64_t disp, subs;
  counters(be, &disp, &subs);
  if (s->valid && s->src == xb && s->x_row0 == x_row0 && s->n == n && s->cols == (int)cols && s->dispatches == disp &&
      s->submits == subs && s->last_y != xb)
    return 1;
  s->valid = 0;
  if (!reserve_quantized(be, s, blocks)) return 0;
  wisp_wgpu_const qc[1] = {{"WG", QUANT_WG}};
  wisp_wgpu_kernel *kq = wisp_wgpu_pipeline(as_g(be), "quant_x8", qc, 1);
  struct {
    uint32_t n, cols, x_off, pad;
  } qp = {(uint32_t)n, cols, (uint32_t)((uint64_t)x_row0 * cols / 4), 0};
  wisp_wgpu_binding qb[3] = {whole(xb), whole(s->xq.b), whole(s->xs.b)};
  uint32_t gx, gy;
  wisp_wgpu_grid(as_g(be)->d, cdiv(blocks, QUANT_WG), &gx, &gy);
  wisp_wgpu_record_xyz(as_g(be), kq, qb, 3, &qp, sizeof qp, gx, gy, 1);
  s->quantizations++;
  return 1;
}

/* What xq/xs hold: those rows of x, after a product into last_y (NULL:
 * written by the op that wrote x, rmsnorm_q8 / swiglu_q8). */
static void remember_input(wisp_backend *be, mm8_state *s, const wisp_buf *x, int x_row0, int n, uint32_t cols,
                           WGPUBuffer last_y) {
  if (as_g(be)->error) return;
  s->valid = 1;
  s->src = x->g.b;
  s->last_y = last_y;
  s->x_row0 = x_row0;
  s->n = n;
  s->cols = (int)cols;
  counters(be, &s->dispatches, &s->submits);
}

int wisp_wgpu_mm8_matmul(wisp_backend *be, const wisp_matrix *W, const wisp_buf *x, int x_row0, int n, wisp_buf *y,
                         int accumulate) {
  if (!wisp_wgpu_mm8_takes(be, W, n)) return 0;
  mm8_state *s = as_g(be)->mm8;
  uint32_t qt = 0;
  variant_of(W->type, &qt);
  if (as_g(be)->error) return 1;
  const uint32_t cols = (uint32_t)W->cols;
  WGPUBuffer xb = x->g.b;
  if (s->fuseq) s->valid = 0;
  else if (!quantize_input(be, s, x, x_row0, n, cols)) return 1;
  const uint32_t tn = token_tile(as_g(be)->d, s, n);
  wisp_wgpu_const c[7] = {{"TM", s->tm}, {"TN", tn},    {"RM", s->rm},   {"RN", s->rn},
                          {"KB", s->kb}, {"QT", qt}, {"FUSEQ", s->fuseq}};
  wisp_wgpu_kernel *k = wisp_wgpu_pipeline(as_g(be), "matmul_i8", c, s->fuseq ? 7 : 6);
  int row0, rows;
  wisp_wgpu_binding b[6];
  for (int q = 0; wisp_wgpu_mat_bufs(as_g(be), W, q, &row0, &rows, b); q++) {
    struct {
      uint32_t rows, cols, y_off, acc, n, y_stride, x_off, pad1;
    } p = {(uint32_t)rows, cols, (uint32_t)(W->out_row0 + row0), accumulate ? 1u : 0u, (uint32_t)n,
           (uint32_t)wisp_matrix_out_rows(W),
           (uint32_t)((uint64_t)x_row0 * cols / 4), 0};
    b[3] = whole(s->fuseq ? xb : s->xq.b);
    b[4] = whole(s->fuseq ? as_g(be)->dummy.b : s->xs.b);
    b[5] = whole(y->g.b);
    wisp_wgpu_record_xyz(as_g(be), k, b, 6, &p, sizeof p, cdiv((uint64_t)rows, s->tm), cdiv((uint64_t)n, tn), 1);
  }
  s->products++;
  if (!s->fuseq) remember_input(be, s, x, x_row0, n, cols, y->g.b);
  return 1;
}

/* The batched step's products of rows_min..rows_max rows (default 1..16,
 * tuning rowsI8): where the plan gives products to the int8 kernel (the
 * throughput profile, whose steps of 8 rows and more already ran as int8
 * prefills), every Q4/Q4Z/Q4_K/Q8_0 product of the step, the head's too,
 * goes through matvec_i8_rows.wgsl: quant_x8's int8 rows (once for
 * consecutive products of one input) against each weight block loaded once
 * for up to NT rows. H100 numbers in docs/sequences.md ("Speed"). */
#define MV8_WG 128
int wisp_wgpu_mv8_rows(wisp_backend *be, const wisp_matrix *W, const wisp_buf *x, int n, wisp_buf *y, int accumulate) {
  wgpu_backend *g = as_g(be);
  uint32_t qt = 0;
  if (!variant_of(W->type, &qt) || W->cols % 32 || !wisp_wgpu_mv8_wants(be, n)) return 0;
  mm8_state *s = g->mm8;
  if (g->error) return 1;
  const uint32_t cols = (uint32_t)W->cols;
  if (!quantize_input(be, s, x, 0, n, cols)) return 1;
  /* tokens a workgroup: the step's rows up to a power of two, at most 16
   * and what the lane's sums (64) allow */
  const uint32_t rpl = s->rows_rpl, nt_max = 64 / rpl < 16 ? 64 / rpl : 16;
  uint32_t nt = 1;
  while (nt < (uint32_t)n && nt < nt_max) nt *= 2;
  const uint32_t lg = wisp_wgpu_matvec_lanes(g, MV8_WG);
  wisp_wgpu_const c[5] = {{"WG", MV8_WG}, {"ROWS", rpl}, {"LG", lg}, {"QT", qt}, {"NT", nt}};
  wisp_wgpu_kernel *k = wisp_wgpu_pipeline(g, "matvec_i8_rows", c, 5);
  int row0, rows;
  wisp_wgpu_binding b[6];
  for (int q = 0; wisp_wgpu_mat_bufs(g, W, q, &row0, &rows, b); q++) {
    struct {
      uint32_t rows, cols, y_off, acc, n, y_stride, pad0, pad1;
    } p = {(uint32_t)rows, cols, (uint32_t)(W->out_row0 + row0), accumulate ? 1u : 0u, (uint32_t)n,
           (uint32_t)wisp_matrix_out_rows(W), 0, 0};
    b[3] = whole(s->xq.b);
    b[4] = whole(s->xs.b);
    b[5] = whole(y->g.b);
    uint32_t gx, gy;
    wisp_wgpu_grid(g->d, cdiv((uint64_t)rows, (uint64_t)(MV8_WG / lg) * rpl), &gx, &gy);
    wisp_wgpu_record_xyz(g, k, b, 6, &p, sizeof p, gx, gy, cdiv((uint64_t)n, nt));
  }
  s->products++;
  s->rows_products++;
  g->stats.rows_shared++;
  remember_input(be, s, x, 0, n, cols, y->g.b);
  return 1;
}

void wisp_wgpu_mv8_range(wisp_backend *be, int *lo, int *hi) {
  const mm8_state *s = state_of(be);
  *lo = *hi = 0;
  if (as_g(be)->sg && s && s->mode != 3 && s->rows_max >= s->rows_min) *lo = s->rows_min, *hi = s->rows_max;
}

int wisp_wgpu_mv8_wants(wisp_backend *be, int n) {
  int lo, hi;
  wisp_wgpu_mv8_range(be, &lo, &hi);
  const mm8_state *s = as_g(be)->mm8;
  return hi && n >= lo && n <= hi && (s->mode == 2 || as_g(be)->int8_planned);
}

/* The RMSNorm and SwiGLU of a batched step whose products take int8 rows
 * (wisp_wgpu_mv8_wants): rmsnorm_q8.wgsl / swiglu_q8.wgsl write their
 * output and its int8 quantization (quant_x8's bits) in one dispatch, and
 * the products that read that output next find it quantized (the state's
 * cache, as after a product): one dispatch less before each. Tuning
 * rowsI8Fuse=0: separate quant_x8 dispatches. */
static int fuse_takes(wisp_backend *be, int n, int cols) {
  return cols % 32 == 0 && wisp_wgpu_mv8_wants(be, n) && ((mm8_state *)as_g(be)->mm8)->rows_fuse;
}

int wisp_wgpu_mv8_rmsnorm(wisp_backend *be, const wisp_buf *x, const wvec *w, float eps, int n, int dim,
                          wisp_buf *out) {
  if (!fuse_takes(be, n, dim)) return 0;
  wgpu_backend *g = as_g(be);
  mm8_state *s = g->mm8;
  s->valid = 0;
  if (!reserve_quantized(be, s, (uint64_t)n * (dim / 32))) return 1;
  wisp_wgpu_const c[1] = {{"WG", 256}};
  wisp_wgpu_kernel *k = wisp_wgpu_pipeline(g, "rmsnorm_q8", c, 1);
  struct {
    uint32_t rows, n;
    float eps;
    uint32_t pad;
  } p = {(uint32_t)n, (uint32_t)dim, eps, 0};
  wisp_wgpu_binding b[5] = {whole(x->g.b), whole(w->g.b), whole(out->g.b), whole(s->xq.b), whole(s->xs.b)};
  uint32_t gx, gy;
  wisp_wgpu_grid(g->d, (uint32_t)n, &gx, &gy);
  wisp_wgpu_record(g, k, b, 5, &p, sizeof p, gx, gy);
  remember_input(be, s, out, 0, n, (uint32_t)dim, NULL);
  s->fused_quantizations++;
  return 1;
}

int wisp_wgpu_mv8_swiglu(wisp_backend *be, const wisp_buf *gu, int n, int ffn, wisp_buf *out) {
  if (!fuse_takes(be, n, ffn)) return 0;
  wgpu_backend *g = as_g(be);
  mm8_state *s = g->mm8;
  s->valid = 0;
  const uint64_t blocks = (uint64_t)n * (ffn / 32);
  if (!reserve_quantized(be, s, blocks)) return 1;
  wisp_wgpu_const c[1] = {{"WG", 64}};
  wisp_wgpu_kernel *k = wisp_wgpu_pipeline(g, "swiglu_q8", c, 1);
  struct {
    uint32_t n, ffn, pad[2];
  } p = {(uint32_t)n, (uint32_t)ffn, {0, 0}};
  wisp_wgpu_binding b[4] = {whole(gu->g.b), whole(out->g.b), whole(s->xq.b), whole(s->xs.b)};
  uint32_t gx, gy;
  wisp_wgpu_grid(g->d, cdiv(blocks, 64), &gx, &gy);
  wisp_wgpu_record(g, k, b, 4, &p, sizeof p, gx, gy);
  remember_input(be, s, out, 0, n, (uint32_t)ffn, NULL);
  s->fused_quantizations++;
  return 1;
}

uint64_t wisp_wgpu_mv8_count(wisp_backend *be) {
  const mm8_state *s = as_g(be)->mm8;
  return s ? s->rows_products : 0;
}

uint64_t wisp_wgpu_mv8_fused_count(wisp_backend *be) {
  const mm8_state *s = as_g(be)->mm8;
  return s ? s->fused_quantizations : 0;
}

wisp_status wisp_wgpu_mm8_read_quantized(wisp_backend *be, int n, int cols, int8_t *q, float *d) {
  mm8_state *s = as_g(be)->mm8;
  if (!s || !s->valid || n <= 0 || cols % 32 || (uint64_t)n * cols > s->xq.size)
    return wisp_fail(WISP_EINVAL, "webgpu: no quantized activations of %d x %d to read", n, cols);
  wisp_status st = be->sync(be);
  if (st) return st;
  wisp_wgpu_device *dev = as_g(be)->d;
  st = wisp_wgpu_buf_read(dev, s->xq, 0, q, (size_t)n * cols);
  if (!st) st = wisp_wgpu_buf_read(dev, s->xs, 0, d, (size_t)n * (cols / 32) * 4);
  return st;
}

void wisp_wgpu_mm8_counts(wisp_backend *be, uint64_t *products, uint64_t *quantizations) {
  mm8_state *s = as_g(be)->mm8;
  *products = s ? s->products : 0;
  *quantizations = s ? s->quantizations : 0;
}

void wisp_wgpu_mm8_geometry(wisp_backend *be, uint32_t g[5], uint32_t *small_tn) {
  const mm8_state *s = state_of(be);
  g[0] = s ? s->tm : 0, g[1] = s ? s->tn : 0, g[2] = s ? s->rm : 0, g[3] = s ? s->rn : 0, g[4] = s ? s->kb : 0;
  *small_tn = s ? token_tile(as_g(be)->d, s, 1) : 0;
}
