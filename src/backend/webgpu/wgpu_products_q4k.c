/* Q4_K products of the WebGPU backend (products of a Q4_K matrix that
 * wgpu_products.c hands over): one token by q4k_matvec.wgsl (or the seed
 * profile's fused_matmul_q4_metal_simd16, or q4k_sb.wgsl, a thread per
 * super-block), with the graph's fusions (wgpu_fused.c) by q4k_fused.wgsl
 * (an rmsnorm of the input, the SwiGLU of a [gate; up] product, the greedy
 * head's argmax, a DeltaNet in_proj by row ranges) and a mixer's tail
 * (wisp_wgpu_tail) computed while staging the input; several
 * tokens by matmul.wgsl (QT 3), a batched step's rows by
 * q4k_matvec_rows.wgsl. */
#include "backend/webgpu/wgpu_products_q4k.h"

#include <stdlib.h>
#include <string.h>

#include "backend/webgpu/wgpu_core.h"
#include "backend/webgpu/wgpu_products_tiled.h"
#include "util/err.h"

/* q4k_matvec.wgsl's GN for a fused input op (floats of per-head values) */
#define QIN_ROOM 1024


typedef struct {
  wisp_wgpu_buf dum[3]; /* placeholders for q4k_fused's unused writable bindings (must not alias) */
} q4k_state;

static q4k_state *state_of(wisp_backend *be) {
  wgpu_backend *g = as_g(be);
  if (!g->q4k) {
    g->q4k = calloc(1, sizeof(q4k_state));
    if (!g->q4k) wisp_wgpu_op_fail(g, WISP_ENOMEM, "out of memory");
  }
  return g->q4k;
}

void wisp_wgpu_q4k_free(wisp_backend *be) {
  wgpu_backend *g = as_g(be);
  q4k_state *q = g->q4k;
  if (!q) return;
  for (int i = 0; i < 3; i++) wisp_wgpu_scratch_free(as_g(be), &q->dum[i]);
  free(q);
  g->q4k = NULL;
}

/* q4k_matvec.wgsl / q4k_fused.wgsl's XN (wisp_wgpu_staged_vec4s): room
 * kept for the kernels' own arrays (q4k_fused: 4 KiB at its largest
 * workgroup; q4k_matvec: far less at its default geometry). */
#define Q4K_OWN_BYTES 8192

#define SIMD16 "fused_matmul_q4_metal_simd16"
/* The registry variant of q4k_sb.wgsl (a thread per super-block). */
#define SUPERBLOCK "wgsl_matvec_q4k_superblock"

/* The seed profile's Q4_K kernel: as registry variant matmul/wgsl_q4k_metal_simd16 or as a
 * profile addKernels key (plan_apply hands it over as "profile:" + file stem). */
static int is_simd16(const char *v) { return !strcmp(v, "wgsl_q4k_metal_simd16") || !strcmp(v, "profile:" SIMD16); }

wisp_status wisp_wgpu_q4k_check_choice(const wisp_matrix *m) {
  for (int ph = 0; ph < 2; ph++) {
    const wisp_kernel_choice *c = &m->choice[ph];
    const char *v = c->variant;
    if (!v[0] || (!strncmp(v, "wgsl_", 5) && strcmp(v, "wgsl_q4k_metal_simd16"))) continue;
    if (!is_simd16(v))
      return wisp_fail(WISP_EUNSUPPORTED, "the plan chose kernel '%s' for a Q4_K matrix, which the webgpu backend does "
                       "not have for Q4_K", v);
    uint32_t tpc = c->subgroups_per_row ? (uint32_t)c->subgroups_per_row : 16;
    uint32_t cols = c->rows_per_subgroup ? (uint32_t)c->rows_per_subgroup : 16;
    uint32_t wg = c->workgroup_size ? (uint32_t)c->workgroup_size : tpc * cols;
    if (wg != tpc * cols || !tpc || (tpc & (tpc - 1)) || wg > 256)
      return wisp_fail(WISP_EUNSUPPORTED,
                       "webgpu: " SIMD16 ": WORKGROUP_SIZE %u must be COLS_PER_WG %u * THREADS_PER_COL_GEMV %u (a power "
                       "of two) and at most 256", wg, cols, tpc);
  }
  return WISP_OK;
}

/* Prefill (n > 1): matmul.wgsl with QT 3, a TM x TN tile per workgroup,
 * each 16 columns of a sub-block dequantized once into workgroup memory for
 * TN tokens (the Q4/f32 prefill product's kernel; scales/zp are unused). */
static void q4k_matmul_tiled(wisp_backend *be, const wisp_matrix *W, const wisp_buf *x, int x_row0, int n, wisp_buf *y,
                             int accumulate) {
  wisp_wgpu_rec_matmul_tiled(as_g(be), W, 3, x, x_row0, n, y, accumulate); /* wgpu_products_tiled.c */
}

/* GN of q4k_matvec.wgsl for a mixer's tail over `cols` inputs (0: it
 * cannot fuse: too many heads or splits for the kernel's arrays). */
static uint32_t input_op_room(const wisp_wgpu_tail *f, int cols) {
  if (!f || f->heads <= 0 || f->heads > 256) return 0;
  uint64_t need = f->kind == 1 ? (uint64_t)cols / 4 + (uint64_t)f->heads : (uint64_t)f->heads * (uint64_t)f->splits;
  return need <= QIN_ROOM && (uint64_t)cols / 4 + 256 <= QIN_ROOM ? QIN_ROOM : 0;
}

static void rec_q4k_matvec(wisp_backend *be, const wisp_matrix *W, const wisp_buf *x, int x_row0, int n, wisp_buf *y,
                           int accumulate, const wisp_wgpu_tail *pre);

void wisp_wgpu_q4k_matmul(wisp_backend *be, const wisp_matrix *W, const wisp_buf *x, int x_row0, int n, wisp_buf *y,
                          int accumulate) {
  rec_q4k_matvec(be, W, x, x_row0, n, y, accumulate, NULL);
}

/* Whether a mixer's tail (kind 1 or 2) can fuse into a one-token
 * q4k_matvec by W reading x: the subgroup kernel (not the seed profile's
 * simd16 one), x' staged beside the op's per-head values. */
int wisp_wgpu_q4k_tail_fits(wisp_backend *be, const wisp_wgpu_tail *f, const wisp_matrix *W, const wisp_buf *x,
                            const wisp_buf *y) {
  if ((f->kind != 1 && f->kind != 2) || f->out != x || y == x || W->cols != f->heads * f->hd || f->hd % 4 ||
      !as_g(be)->sg || is_simd16(W->choice[WISP_PHASE_DECODE].variant))
    return 0;
  const uint32_t gn = input_op_room(f, W->cols);
  return gn && wisp_wgpu_staged_vec4s(as_g(be), W->cols, Q4K_OWN_BYTES + (uint64_t)gn * 4) > 1;
}

void wisp_wgpu_q4k_matvec_tail(wisp_backend *be, const wisp_matrix *W, const wisp_buf *x, wisp_buf *y, int accumulate,
                               const wisp_wgpu_tail *t) {
  rec_q4k_matvec(be, W, x, 0, 1, y, accumulate, t);
  as_g(be)->stats.input_fused++;
}

/* Placeholders for the q4k kernels' unused read-write bindings. */
static int dummies(wisp_backend *be, q4k_state *q) {
  for (int i = 0; i < 3; i++)
    if (!wisp_wgpu_scratch(as_g(be), &q->dum[i], 16, 16, "wisp q4k placeholder")) return 0;
  return 1;
}

/* Records k, q4k_fused.wgsl or q4k_sb.wgsl (the same parameters and first six
 * bindings), over rows [lo, hi) of W a binding part at a time, rows_wg outputs a
 * workgroup: y[r] (+)= W[r] . x' (pd->nx: x' = rmsnorm(nx) * nw, also written to
 * nxo; else x' = pd->x from row x_row0); pair F: rows r and r + F with SwiGLU into
 * z; with amax (q4k_fused's ARGMAX), bound seventh, partials from part_off on.
 * nb: the bindings k has (6 or 7). Returns the next part_off; *records (may be
 * NULL) counts the dispatches. */
static uint32_t rec_q4k_parts(wisp_backend *be, q4k_state *q, wisp_wgpu_kernel *k, int nb, uint32_t rows_wg,
                              const wisp_matrix *W, int lo, int hi, const wisp_wgpu_q4k_one *pd, int x_row0, int acc, int pair,
                              wisp_buf *z, WGPUBuffer amax, uint32_t part_off, uint64_t *records) {
  const int pre = pd->nx != NULL;
  int row0, prow;
  WGPUBuffer wb;
  for (int i = 0; wisp_wgpu_mat_part(as_g(be), W, i, &row0, &prow, &wb); i++) {
    int a = lo > row0 ? lo : row0, b = hi < row0 + prow ? hi : row0 + prow;
    if (a >= b) continue;
    struct {
      uint32_t rows, cols, y_off, x_off, acc, w_row0, pre;
      float eps;
      uint32_t pair, part_off, pad0, pad1;
    } p = {(uint32_t)(b - a), (uint32_t)W->cols, (uint32_t)(W->out_row0 + a), (uint32_t)((size_t)x_row0 * W->cols / 4),
           acc ? 1u : 0u, (uint32_t)(a - row0), (uint32_t)pre, pd->eps, (uint32_t)pair, part_off, 0, 0};
    wisp_wgpu_binding bd[7] = {whole(wb),
                               whole((pre ? pd->nx : pd->x)->g.b),
                               whole(pd->y->g.b),
                               whole(pre ? pd->nw : as_g(be)->dummy.b),
                               whole(pre ? pd->nxo->g.b : q->dum[0].b),
                               whole(z ? z->g.b : q->dum[1].b),
                               whole(amax ? amax : q->dum[2].b)};
    uint32_t nwg = cdiv((uint64_t)(b - a), rows_wg), gx, gy;
    wisp_wgpu_grid(as_g(be)->d, nwg, &gx, &gy);
    wisp_wgpu_record_xyz(as_g(be), k, bd, nb, &p, sizeof p, gx, gy, 1);
    part_off += nwg;
    if (records) ++*records;
  }
  return part_off;
}

/* q4k_sb.wgsl: a one-token product with a thread per super-block, where the
 * plan chose it (wgsl_matvec_q4k_superblock) or tuning q4kSbCols asks, when a
 * row's super-blocks (pair: two rows') fit a workgroup and the staged x its
 * memory; rows [lo, hi) as rec_q4k_parts. 0: not taken (the caller records
 * another kernel). */
static int q4k_superblock(wisp_backend *be, const wisp_matrix *W, int lo, int hi, const wisp_wgpu_q4k_one *pd, int x_row0,
                          int acc, int pair, wisp_buf *z) {
  const uint32_t wg = 256, S = (uint32_t)W->cols / 256;
  const uint64_t xn = (uint64_t)S * 65;
  const int min_cols = as_g(be)->q4k_tune.superblock_cols;
  const char *v = W->choice[WISP_PHASE_DECODE].variant;
  const int chosen = min_cols < 0 ? !strcmp(v, SUPERBLOCK) : min_cols && W->cols >= min_cols;
  if (!chosen || W->cols % 256 || S == 0 || S > (pair ? wg / 2 : wg) || is_simd16(v) ||
      xn * 16 + (uint64_t)S * 64 + wg * 8 > as_g(be)->d->info.max_compute_workgroup_storage_size)
    return 0;
  q4k_state *q = state_of(be);
  if (!q || !dummies(be, q)) return 0;
  wisp_wgpu_const c[2] = {{"WG", wg}, {"XN", (uint32_t)xn}};
  wisp_wgpu_kernel *k = wisp_wgpu_pipeline(as_g(be), "q4k_sb", c, 2);
  const uint32_t rows_wg = pair ? (wg / S) / 2 : wg / S; /* outputs a workgroup */
  rec_q4k_parts(be, q, k, 6, rows_wg, W, lo, hi, pd, x_row0, acc, pair, z, NULL, 0,
                &as_g(be)->stats.q4k_superblock);
  return 1;
}

/* q4k_matvec.wgsl's geometry for W: WG threads, ROWS rows a lane group of
 * LG lanes (tuning q4kMatvec / q4kRows2Rows / q4kLg). q4k_matvec_rows.wgsl
 * takes the same LG: a row's sums depend on it. */
static void q4k_matvec_geometry(wisp_backend *be, const wisp_matrix *W, uint32_t *wg, uint32_t *rows, uint32_t *lg) {
  const wisp_wgpu_q4k_tuning *tune = &as_g(be)->q4k_tune;
  const uint32_t sgmax = as_g(be)->d->info.subgroup_max_size;
  *wg = tune->mv_wg;
  *rows = tune->mv_rows ? tune->mv_rows : (uint32_t)W->rows >= tune->rows2_rows ? 2 : 1;
  *lg = tune->mv_lg ? tune->mv_lg : sgmax > 32 ? sgmax : 32;
}

/* per_row (wisp_wgpu_q4k_matmul_rows): every token through the decode
 * choice's one-token kernel (a workgroup z per token), never the tiled
 * prefill product or the superblock kernel, so that a token's sums do not
 * depend on how many tokens share the call. */
static void rec_q4k_matvec_ex(wisp_backend *be, const wisp_matrix *W, const wisp_buf *x, int x_row0, int n,
                              wisp_buf *y, int accumulate, const wisp_wgpu_tail *pre, int per_row) {
  if (n <= 0) return;
  const wisp_kernel_choice *ch = &W->choice[n == 1 || per_row ? WISP_PHASE_DECODE : WISP_PHASE_PREFILL];
  if (n > 1 && !per_row && !is_simd16(ch->variant)) {
    q4k_matmul_tiled(be, W, x, x_row0, n, y, accumulate);
    return;
  }
  if (n == 1 && !pre && !per_row) {
    const wisp_wgpu_q4k_one plain = {W, NULL, NULL, x, NULL, 0, y};
    if (q4k_superblock(be, W, 0, W->rows, &plain, x_row0, accumulate, 0, NULL)) return;
  }
  const char *file;
  wisp_wgpu_const c[6];
  int nc;
  uint32_t rows_wg;
  if (is_simd16(ch->variant)) {
    /* the seed profile's kernel (plan_apply puts the profile key's constants in the choice) */
    uint32_t tpc = ch->subgroups_per_row ? (uint32_t)ch->subgroups_per_row : 16;
    uint32_t cols = ch->rows_per_subgroup ? (uint32_t)ch->rows_per_subgroup : 16;
    uint32_t wg = ch->workgroup_size ? (uint32_t)ch->workgroup_size : tpc * cols;
    if (wg != tpc * cols || (tpc & (tpc - 1)) || wg > 256) {
      wisp_wgpu_op_fail(as_g(be), WISP_EUNSUPPORTED, "fused_matmul_q4_metal_simd16: WORKGROUP_SIZE %u != COLS_PER_WG %u * THREADS_PER_COL_GEMV %u "
                         "(a power of two), or over 256", wg, cols, tpc);
      return;
    }
    file = "fused_matmul_q4_metal_simd16";
    c[0] = (wisp_wgpu_const){"WORKGROUP_SIZE", wg};
    c[1] = (wisp_wgpu_const){"COLS_PER_WG", cols};
    c[2] = (wisp_wgpu_const){"THREADS_PER_COL_GEMV", tpc};
    c[3] = (wisp_wgpu_const){"USE_FULL_BLOCK_FAST_PATH", 1};
    nc = 4;
    rows_wg = cols;
  } else {
    const int sg = as_g(be)->sg;
    file = sg ? "q4k_matvec" : "q4k_matvec_nosg";
    const wisp_wgpu_q4k_tuning *tune = &as_g(be)->q4k_tune;
    uint32_t wg = 64, rows = 4, lg = 0;
    if (sg) q4k_matvec_geometry(be, W, &wg, &rows, &lg);
    c[0] = (wisp_wgpu_const){"WG", wg};
    c[1] = (wisp_wgpu_const){"ROWS", rows};
    nc = 2;
    rows_wg = 4;
    if (sg) { /* q4k_matvec.wgsl: WG / LG lane groups of ROWS rows */
      const uint32_t gn = pre ? input_op_room(pre, W->cols) : 1;
      c[2] = (wisp_wgpu_const){"LG", lg};
      c[3] = (wisp_wgpu_const){"XN", wisp_wgpu_staged_vec4s(as_g(be), W->cols, Q4K_OWN_BYTES + (uint64_t)gn * 4)};
      c[4] = (wisp_wgpu_const){"PF", tune->mv_prefetch};
      c[5] = (wisp_wgpu_const){"GN", gn};
      nc = 6;
      rows_wg = (wg / lg) * rows;
    }
  }
  wisp_wgpu_kernel *k = wisp_wgpu_pipeline(as_g(be), file, c, nc);
  int row0, prow;
  WGPUBuffer wb;
  for (int i = 0; wisp_wgpu_mat_part(as_g(be), W, i, &row0, &prow, &wb); i++) {
    struct { /* the simd16 and plain kernels read the first 8 words */
      uint32_t rows, cols, y_off, x_off, acc, y_stride, pre, hd, zoff, splits;
      float eps;
      uint32_t pad0;
    } p = {(uint32_t)prow, (uint32_t)W->cols, (uint32_t)(W->out_row0 + row0), (uint32_t)((size_t)x_row0 * W->cols / 4),
           accumulate ? 1u : 0u, (uint32_t)wisp_matrix_out_rows(W), pre ? (uint32_t)pre->kind : 0u,
           pre ? (uint32_t)pre->hd : 0u, pre ? (uint32_t)pre->zoff : 0u, pre ? (uint32_t)pre->splits : 0u,
           pre ? pre->eps : 0.0f, 0};
    /* q4k_matvec.wgsl's PRE inputs: placeholders without one (xo must not alias) */
    WGPUBuffer r0 = as_g(be)->dummy.b;
    wisp_wgpu_binding b[7] = {whole(wb),
                              whole(pre ? r0 : x->g.b),
                              whole(y->g.b),
                              whole(pre ? pre->aux : r0),
                              whole(pre ? pre->src : r0),
                              whole(pre && pre->nw ? pre->nw : r0),
                              whole(pre ? pre->out->g.b : as_g(be)->dummy_rw.b)};
    const int nb = nc == 6 ? 7 : 3;
    uint32_t gx, gy;
    wisp_wgpu_grid(as_g(be)->d, cdiv((uint64_t)prow, rows_wg), &gx, &gy);
    wisp_wgpu_record_xyz(as_g(be), k, b, nb, &p, sizeof p, gx, gy, (uint32_t)n);
  }
}

static void rec_q4k_matvec(wisp_backend *be, const wisp_matrix *W, const wisp_buf *x, int x_row0, int n, wisp_buf *y,
                           int accumulate, const wisp_wgpu_tail *pre) {
  rec_q4k_matvec_ex(be, W, x, x_row0, n, y, accumulate, pre, 0);
}

/* Several rows of a batched step through q4k_matvec_rows.wgsl (unless
 * tuning rowsQ4K=0): each row's sums are q4k_matvec.wgsl's for that row
 * alone (same LG), the weight is read once per up to 64 rows
 * (wisp_wgpu_rows_nt). 0 (nothing recorded) where the
 * one-row product is another kernel: no subgroups (q4k_matvec_nosg), or the
 * profile's simd16 kernel as the decode choice. */
static int q4k_matvec_rows(wisp_backend *be, const wisp_matrix *W, const wisp_buf *x, int n, wisp_buf *y,
                           int accumulate) {
  if (!as_g(be)->sg || !(!as_g(be)->no_rows_shared) || as_g(be)->no_rows_q4k ||
      is_simd16(W->choice[WISP_PHASE_DECODE].variant))
    return 0;
  uint32_t wg, rows, lg;
  q4k_matvec_geometry(be, W, &wg, &rows, &lg);
  const uint32_t nt = wisp_wgpu_rows_nt(as_g(be), n);
  rows = wisp_wgpu_rows_per_group(rows, nt); /* rows a lane group: changes no sum */
  const uint32_t tu = wisp_wgpu_rows_tile(as_g(be), (uint32_t)W->cols / 32, 8, wg, lg, rows, nt);
  wisp_wgpu_const c[6] = {{"WG", wg}, {"ROWS", rows}, {"LG", lg}, {"NT", nt}, {"XS", tu > 0}, {"TU", tu ? tu : 1}};
  wisp_wgpu_kernel *k = wisp_wgpu_pipeline(as_g(be), "q4k_matvec_rows", c, 6);
  const uint32_t rows_wg = (wg / lg) * rows;
  int row0, prow;
  WGPUBuffer wb;
  for (int i = 0; wisp_wgpu_mat_part(as_g(be), W, i, &row0, &prow, &wb); i++) {
    struct {
      uint32_t rows, cols, y_off, x_off, acc, n, y_stride, pad0;
    } p = {(uint32_t)prow, (uint32_t)W->cols, (uint32_t)(W->out_row0 + row0), 0, accumulate ? 1u : 0u, (uint32_t)n,
           (uint32_t)wisp_matrix_out_rows(W), 0};
    wisp_wgpu_binding b[3] = {whole(wb), whole(x->g.b), whole(y->g.b)};
    uint32_t gx, gy;
    wisp_wgpu_grid(as_g(be)->d, cdiv((uint64_t)prow, rows_wg), &gx, &gy);
    wisp_wgpu_record_xyz(as_g(be), k, b, 3, &p, sizeof p, gx, gy, cdiv((uint64_t)n, nt));
  }
  as_g(be)->stats.rows_shared++;
  return 1;
}

void wisp_wgpu_q4k_matmul_rows(wisp_backend *be, const wisp_matrix *W, const wisp_buf *x, int n, wisp_buf *y,
                               int accumulate) {
  if (n > 1 && q4k_matvec_rows(be, W, x, n, y, accumulate)) return;
  rec_q4k_matvec_ex(be, W, x, 0, n, y, accumulate, NULL, 1);
}

/* ---- q4k_fused: Q4_K decode products with the session-switch fusions ---- */

typedef struct {
  uint32_t wg, cols, tpc, full;
  int asked; /* a profile, the matrix's choice or tuning q4kFused set it: q4k_fused, not q4k_sb */
} qgeo;

/* Geometry for a q4k_fused dispatch: explicit (wg/cols/tpc, 0 = unset), else the matrix's
 * simd16 choice (profile constants), else 256 / 16 / 16 / full blocks. */
static qgeo geo_of(wisp_backend *be, const wisp_matrix *W, int wg, int cols, int tpc, int full) {
  qgeo g = {256, 16, 16, 1, 0};
  const wisp_wgpu_q4k_tuning *tune = &as_g(be)->q4k_tune;
  if (tune->fused_cols) { /* tuning q4kFused=COLSxTPC */
    g.cols = tune->fused_cols;
    g.tpc = tune->fused_tpc;
    g.wg = g.cols * g.tpc;
    g.asked = 1;
  }
  const wisp_kernel_choice *ch = &W->choice[WISP_PHASE_DECODE];
  if (is_simd16(ch->variant)) {
    g.asked = 1;
    if (ch->subgroups_per_row) g.tpc = (uint32_t)ch->subgroups_per_row;
    if (ch->rows_per_subgroup) g.cols = (uint32_t)ch->rows_per_subgroup;
    g.wg = g.tpc * g.cols;
  }
  if (cols) g.cols = (uint32_t)cols;
  if (tpc) g.tpc = (uint32_t)tpc;
  if (cols || tpc || wg) g.wg = wg ? (uint32_t)wg : g.cols * g.tpc;
  if (full >= 0) g.full = (uint32_t)full;
  g.asked |= cols || tpc || wg || full >= 0;
  return g;
}

/* Rows [lo, hi) of W (one token): y[r] (+)= W[r] . x' (pre: x' = rmsnorm(nx) * nw, also
 * written to nxo); pair F: rows r and r + F with SwiGLU into z; argmax: partials from
 * part_off on (returns the next part_off). */
static uint32_t rec_q4k_fused(wisp_backend *be, q4k_state *q, const wisp_matrix *W, int lo, int hi,
                              const wisp_wgpu_q4k_one *pd, int acc, int pair, wisp_buf *z, WGPUBuffer amax, uint32_t part_off,
                              qgeo g) {
  if (!dummies(be, q)) return part_off;
  if (!amax && !g.asked && q4k_superblock(be, W, lo, hi, pd, 0, acc, pair, z)) return part_off;
  if (g.wg != g.cols * g.tpc || !g.tpc || (g.tpc & (g.tpc - 1)) || g.wg > 256 || g.cols > 256) {
    wisp_wgpu_op_fail(as_g(be), WISP_EUNSUPPORTED, "q4k_fused: WORKGROUP_SIZE %u must be COLS_PER_WG %u x THREADS_PER_COL "
                       "%u (a power of two), at most 256", g.wg, g.cols, g.tpc);
    return part_off;
  }
  wisp_wgpu_const c[7] = {{"WORKGROUP_SIZE", g.wg},
                          {"COLS_PER_WG", g.cols},
                          {"THREADS_PER_COL", g.tpc},
                          {"USE_FULL_BLOCK_FAST_PATH", g.full ? 1 : 0},
                          {"ARGMAX", amax ? 1 : 0},
                          {"XN", wisp_wgpu_staged_vec4s(as_g(be), W->cols, Q4K_OWN_BYTES)},
                          {"PF", as_g(be)->q4k_tune.fused_prefetch}};
  wisp_wgpu_kernel *k = wisp_wgpu_pipeline(as_g(be), "q4k_fused", c, 7);
  return rec_q4k_parts(be, q, k, 7, g.cols, W, lo, hi, pd, 0, acc, pair, z, amax, part_off, NULL);
}

void wisp_wgpu_q4k_norm_matmul(wisp_backend *be, const wisp_wgpu_q4k_one *pd, int accumulate) {
  q4k_state *q = state_of(be);
  if (!q) return;
  if (pd->nx) rec_q4k_fused(be, q, pd->W, 0, pd->W->rows, pd, accumulate, 0, NULL, NULL, 0, geo_of(be, pd->W, 0, 0, 0, -1));
  else wisp_wgpu_q4k_matmul(be, pd->W, pd->x, 0, 1, pd->y, accumulate);
}

/* fusedFfnQ4K: the gate/up product and its SwiGLU in one dispatch. */
int wisp_wgpu_q4k_swiglu(wisp_backend *be, const wisp_wgpu_q4k_one *pd, int ffn, wisp_buf *out) {
  q4k_state *q = state_of(be);
  const wisp_backend_settings *s = &as_g(be)->set;
  if (!q || pd->W->rows != 2 * ffn) return 0;
  int row0, prow;
  WGPUBuffer wb;
  if (!wisp_wgpu_mat_part(as_g(be), pd->W, 0, &row0, &prow, &wb) || prow != pd->W->rows) return 0; /* one part */
  if (out == pd->y || out == pd->x || (pd->nx && (out == pd->nx || out == pd->nxo))) return 0;
  rec_q4k_fused(be, q, pd->W, 0, ffn, pd, 0, ffn, out, NULL, 0,
                geo_of(be, pd->W, s->ffn_wg, s->ffn_cols, s->ffn_tpc, s->ffn_full_block));
  return 1;
}

/* useGreedyLmHeadArgmaxFusion for a Q4_K head (lmHeadArgmaxQ4K geometry). */
int wisp_wgpu_q4k_head_argmax(wisp_backend *be, const wisp_wgpu_q4k_one *pd, const wisp_buf *ids) {
  q4k_state *q = state_of(be);
  const wisp_backend_settings *s = &as_g(be)->set;
  if (!q || pd->y == ids || pd->x == ids || pd->nx == ids) return 0;
  qgeo g = geo_of(be, pd->W, 0, s->head_cols ? s->head_cols : 128, s->head_tpc ? s->head_tpc : 2, s->head_full_block);
  uint64_t total = 0;
  int row0, prow;
  WGPUBuffer wb;
  for (int i = 0; wisp_wgpu_mat_part(as_g(be), pd->W, i, &row0, &prow, &wb); i++) total += cdiv((uint64_t)prow, g.cols);
  WGPUBuffer am = wisp_wgpu_amax(as_g(be), (uint32_t)total);
  if (!am) return 0;
  rec_q4k_fused(be, q, pd->W, 0, pd->W->rows, pd, 0, 0, NULL, am, 0, g);
  return 1;
}

/* The in_proj product of a one-token gated_deltanet a: one product, or the
 * [qkv | z | b | a] row ranges as separate products (QKVZ / AB projection fusion off). */
void wisp_wgpu_q4k_in_proj(wisp_backend *be, const wisp_wgpu_q4k_one *pd, const wisp_deltanet_args *a) {
  q4k_state *q = state_of(be);
  const int K = a->k_heads * a->k_dim, V = a->v_heads * a->v_dim;
  if (!q) return;
  if (pd->y != a->proj || a->n != 1 || pd->W->rows != 2 * K + 2 * V + 2 * a->v_heads) {
    wisp_wgpu_q4k_norm_matmul(be, pd, 0);
    return;
  }
  const wisp_backend_settings *s = &as_g(be)->set;
  int cut[6], nc = 0;
  cut[nc++] = 0;
  if (!s->deltanet_proj_qkvz) cut[nc++] = 2 * K + V;
  if (!s->deltanet_proj_qkvz || !s->deltanet_proj_ab) cut[nc++] = 2 * K + 2 * V;
  if (!s->deltanet_proj_ab) cut[nc++] = 2 * K + 2 * V + a->v_heads;
  cut[nc++] = pd->W->rows;
  qgeo g = geo_of(be, pd->W, 0, 0, 0, -1);
  if (nc == 2 && !pd->nx) { /* one product, nothing fused: the matrix's own kernel choice */
    wisp_wgpu_q4k_matmul(be, pd->W, pd->x, 0, 1, pd->y, 0);
    return;
  }
  for (int i = 0; i + 1 < nc; i++) rec_q4k_fused(be, q, pd->W, cut[i], cut[i + 1], pd, 0, 0, NULL, NULL, 0, g);
}
