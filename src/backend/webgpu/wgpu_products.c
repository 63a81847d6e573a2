/* Matrix-vector and matrix products of the WebGPU backend (backend.h
 * prepare_matrix, matmul, matmul_rows) for f32, F16, Q4, Q4Z and Q8_0
 * weights: weights uploaded in parts that fit one binding; one-token
 * products by matvec.wgsl, several
 * tokens by matmul.wgsl (tiled) or matvec_rows.wgsl (a batched step's rows,
 * each with the one-token sums). The fused forms (an op computed inside the
 * product) are wgpu_fused.c's, through wisp_wgpu_rec_matvec's PRE. Q4_K
 * products are wgpu_products_q4k.c's, the integer prefill products (Q4,
 * Q4Z, Q4_K, Q8_0 x int8) wgpu_products_i8.c's. */
#include "backend/webgpu/wgpu_products.h"

#include <stdlib.h>
#include <string.h>

#include "backend/webgpu/wgpu_core.h"
#include "backend/webgpu/wgpu_products_i8.h"
#include "backend/webgpu/wgpu_products_q4k.h"
#include "backend/webgpu/wgpu_products_tiled.h"
#include "format/qblocks.h"
#include "format/quant.h"
#include "format/weight_source.h"
#include "util/err.h"

/* ---- weights ------------------------------------------------------------- */





/* matvec.wgsl's own workgroup arrays (partial, inv_s, am_v / am_i, cmb). */
static uint64_t matvec_own_bytes(uint32_t wg, uint32_t lg, uint32_t rows, uint32_t cmb) {
  return ((uint64_t)(wg / lg) * rows * (lg / 4) + wg / 4 + 1) * 4 + (uint64_t)(wg / lg) * rows * 8 + (uint64_t)cmb * 4;
}

/* The most heads x splits a merge fused into a product (matvec PRE 3) takes. */
#define MERGE_MAX 1024

/* The plan's kernel choice for a matrix: a wgsl_* matmul variant of
 * kernels/registry.json, and for one-token products the geometry (WG
 * threads, ROWS rows per workgroup) the plan resolved. */
static wisp_status apply_choice(wgpu_backend *g, const wisp_matrix *m, wmat *w) {
  if (m->type == WISP_W_Q4K) return wisp_wgpu_q4k_check_choice(m); /* wgpu_products_q4k.c */
  for (int ph = 0; ph < 2; ph++) {
    const char *v = m->choice[ph].variant;
    /* The seed profile's Q4_K kernel set on a section that this artifact
     * stores as Q4 (columns not a multiple of 256): the default kernel runs. */
    if (v[0] && strncmp(v, "wgsl_", 5) != 0 && strcmp(v, "profile:fused_matmul_q4_metal_simd16"))
      return wisp_fail(WISP_EUNSUPPORTED, "the plan chose matmul kernel '%s', which the webgpu backend does not have", v);
  }
  const wisp_kernel_choice *c = &m->choice[WISP_PHASE_DECODE];
  if (!strncmp(c->variant, "profile:", 8)) return WISP_OK; /* its geometry is the profile kernel's */
  /* settings.matvec_wg: one geometry for every matrix (configure set it) */
  if (g->set.matvec_wg || (!c->workgroup_size && !c->rows_per_subgroup)) return WISP_OK;
  uint32_t wg = c->workgroup_size ? (uint32_t)c->workgroup_size : g->mv_wg;
  uint32_t rows = c->rows_per_subgroup ? (uint32_t)c->rows_per_subgroup : g->mv_rows;
  if (rows > 16 || rows > wg || wg > g->d->info.max_compute_invocations_per_workgroup ||
      (!g->sg && (wg & (wg - 1))) || (g->sg && wg % wisp_wgpu_matvec_lanes(g, wg)))
    return wisp_fail(WISP_EUNSUPPORTED, "webgpu: the plan's matvec geometry WG=%u ROWS=%u for a %dx%d matrix is outside "
                     "what matvec%s.wgsl supports (ROWS <= 16 and <= WG%s)", wg, rows, m->rows, m->cols,
                     g->sg ? "" : "_nosg", g->sg ? ", WG a multiple of the subgroup size" : ", WG a power of two");
  w->mv_wg = wg;
  w->mv_rows = rows;
  return WISP_OK;
}

/* Uploads rows [P->row0, +P->rows) of a Q8_0 matrix: ggml's 34-byte blocks
 * (f16 scale, 32 int8) become the int8 values, four to a word (P->w), and
 * one f32 scale a block (P->s), the layout of QT 5 (unpack_weights.wgsli). */
static wisp_status q8_0_part(wgpu_backend *g, const wisp_matrix *m, wmat_part *P) {
  const size_t nb = (size_t)m->cols / WISP_Q8_0_BLOCK, nblk = (size_t)P->rows * nb;
  int8_t *q = malloc(nblk * WISP_Q8_0_BLOCK);
  float *sc = malloc(nblk * sizeof(float));
  void *owned = NULL; /* the part's blocks read in, when streamed (format/weight_source.h) */
  const uint8_t *blk = q && sc ? wisp_weights_borrow(m->q + (size_t)P->row0 * nb * WISP_Q8_0_BYTES,
                                                     nblk * WISP_Q8_0_BYTES, &owned)
                               : NULL;
  wisp_status st = q && sc ? (blk ? WISP_OK : WISP_ENOMEM) : wisp_fail(WISP_ENOMEM, "out of memory");
  for (size_t b = 0; !st && b < nblk; b++, blk += WISP_Q8_0_BYTES) {
    sc[b] = wisp_f16_to_f32((uint16_t)(blk[0] | blk[1] << 8));
    memcpy(q + b * WISP_Q8_0_BLOCK, blk + 2, WISP_Q8_0_BLOCK);
  }
  if (!st) st = wisp_wgpu_buf_from(g->d, q, nblk * WISP_Q8_0_BLOCK, "wisp q8_0 values", &P->w);
  if (!st) st = wisp_wgpu_buf_from(g->d, sc, nblk * sizeof(float), "wisp q8_0 scales", &P->s);
  free(owned);
  free(q);
  free(sc);
  return st;
}

/* QT 7: n split values (q in -32..31, offsets all 0) with their scales
 * (so[2g]) packed 16 to a vec4<u32> (unpack_weights.wgsli) into P->w. */
static wisp_status pack_6bit(wgpu_backend *g, const int8_t *q, const float *so, size_t n, wmat_part *P) {
  uint32_t *v = calloc(n / 4, sizeof *v);
  if (!v) return wisp_fail(WISP_ENOMEM, "out of memory");
  for (size_t grp = 0; grp < n / 16; grp++) {
    uint32_t *u = v + 4 * grp;
    for (int i = 0; i < 16; i++) {
      const uint32_t b = (uint32_t)(q[16 * grp + (size_t)i] + 32); /* 0..63 */
      u[i / 8] |= (b & 15) << (4 * (i % 8));
      u[2] |= (b >> 4) << (2 * i);
    }
    memcpy(&u[3], &so[2 * grp], sizeof(float));
  }
  wisp_status st = wisp_wgpu_buf_from(g->d, v, n, "wisp packed 6-bit values", &P->w);
  free(v);
  return st;
}

/* Uploads rows [P->row0, +P->rows) of a matrix of the other ggml block
 * types (QT 6): each block split (format/qblocks.h) into its int8 values,
 * four to a word (P->w), and per 16 elements an f32 scale and offset, two
 * floats side by side (P->s): value = s * q + o, the CPU's decoded value. */
static wisp_status split_part(wgpu_backend *g, const wisp_matrix *m, wmat_part *P) {
  const wisp_quant_traits *t = wisp_quant_traits_of(m->type);
  const size_t nb = (size_t)(m->cols / t->block), n = (size_t)P->rows * (size_t)m->cols;
  int8_t *q = malloc(n);
  float *so = malloc(n / 16 * 2 * sizeof(float));
  void *owned = NULL; /* the part's blocks read in, when streamed (format/weight_source.h) */
  const uint8_t *blk = q && so ? wisp_weights_borrow(m->q + (size_t)P->row0 * nb * (size_t)t->block_bytes,
                                                     (size_t)P->rows * nb * (size_t)t->block_bytes, &owned)
                               : NULL;
  wisp_status st = q && so ? (blk ? WISP_OK : WISP_ENOMEM) : wisp_fail(WISP_ENOMEM, "out of memory");
  float s[16], o[16];
  for (size_t b = 0; !st && b < (size_t)P->rows * nb; b++, blk += t->block_bytes) {
    const size_t e0 = b * (size_t)t->block;
    wisp_qblock_split(m->type, blk, q + e0, s, o);
    for (int k = 0; k < t->block / 16; k++) so[2 * (e0 / 16 + (size_t)k)] = s[k], so[2 * (e0 / 16 + (size_t)k) + 1] = o[k];
  }
  if (!st && qt_of(m->type) == 7) st = pack_6bit(g, q, so, n, P);
  else if (!st) st = wisp_wgpu_buf_from(g->d, q, n, "wisp block values", &P->w);
  if (!st && qt_of(m->type) == 6)
    st = wisp_wgpu_buf_from(g->d, so, n / 16 * 2 * sizeof(float), "wisp block scales and offsets", &P->s);
  free(owned);
  free(q);
  free(so);
  return st;
}

/* BF16 rows widened to f32 (exact: a BF16 is the top half of its f32), QT 0. */
static wisp_status bf16_part(wgpu_backend *g, const wisp_matrix *m, wmat_part *P) {
  const size_t n = (size_t)P->rows * (size_t)m->cols;
  float *f = malloc(n * sizeof(float));
  if (!f) return wisp_fail(WISP_ENOMEM, "out of memory");
  /* the part's rows as a matrix of their own, read in when streamed
   * (format/weight_source.h) */
  wisp_matrix part = *m;
  void *owned = NULL;
  part.rows = P->rows;
  part.q = wisp_weights_borrow(m->q + (size_t)P->row0 * (size_t)m->cols * 2, n * 2, &owned);
  if (!part.q) {
    free(f);
    return WISP_ENOMEM;
  }
  for (int r = 0; r < P->rows; r++) wisp_matrix_row_f32(&part, r, f + (size_t)r * m->cols);
  wisp_status st = wisp_wgpu_buf_from(g->d, f, n * sizeof(float), "wisp weights (bf16 widened)", &P->w);
  free(owned);
  free(f);
  return st;
}

static wisp_status g_prepare_matrix(wisp_backend *be, wisp_matrix *m);

/* A matrix in row parts of one type: its parts gathered into one host copy
 * (freed once uploaded), uploaded as the plain matrix they make, so that
 * the device holds the very bytes of the contiguous matrix and every
 * kernel, fused group and the persistent decode run it as one. The device
 * copy is known by the first part's host bytes (wisp_matrix_host). */
static wisp_status prepare_gathered(wisp_backend *be, wisp_matrix *m) {
  wisp_matrix flat;
  uint8_t *flat_bytes = NULL;
  if (!wisp_matrix_gather(m, &flat, &flat_bytes))
    return wisp_fail(WISP_ENOMEM, "out of memory gathering a %dx%d matrix", m->rows, m->cols);
  wisp_status st = g_prepare_matrix(be, &flat);
  free(flat_bytes);
  if (st) return st;
  ((wmat *)flat.device)->host = wisp_matrix_host(m);
  m->device = flat.device;
  return WISP_OK;
}

static wisp_status g_prepare_matrix(wisp_backend *be, wisp_matrix *m) {
  wgpu_backend *g = as_g(be);
  for (int i = 0; wisp_matrix_mixed(m) && i < m->n_parts; i++) { /* each part uploaded as a matrix of its own */
    wisp_status st = g_prepare_matrix(be, &m->parts[i]);
    if (st) return st;
  }
  if (wisp_matrix_mixed(m)) return WISP_OK;
  wisp_wgpu_rows_note(m, &g->int8_planned, &g->int8_planned_q4k);
  wmat *have = wisp_wgpu_find_mat(g, m);
  if (have) {
    m->device = have;
    return apply_choice(g, m, have);
  }
  if (m->n_parts) return prepare_gathered(be, m);
  const int rows = m->rows, cols = m->cols;
  if (rows <= 0 || cols <= 0) return wisp_fail(WISP_EINVAL, "webgpu: matrix %dx%d", rows, cols);
  if (m->type == WISP_W_Q4K && cols % WISP_Q4K_BLOCK)
    return wisp_fail(WISP_EFORMAT, "Q4_K matrix with %d columns is not a whole number of 256-blocks", cols);
  if (m->type == WISP_W_F16 && cols % 8) /* a product's unit is 8 halves (one vec4 of words) */
    return wisp_fail(WISP_EUNSUPPORTED, "webgpu: an f16 matrix of %d columns (a multiple of 8 is needed)", cols);
  if (m->type != WISP_W_F32 && m->type != WISP_W_F16 && m->type != WISP_W_BF16 && cols % WISP_Q4_BLOCK)
    return wisp_fail(WISP_EFORMAT, "matrix with %d columns is not a whole number of 32-blocks", cols);
  const int nb = cols / WISP_Q4_BLOCK;
  /* Bytes a row on the device: Q8_0 is repacked (q8_0_part) into its int8
   * values and an f32 scale a block, so that rows and values are word-aligned. */
  const int split = qt_of(m->type) >= 6; /* uploaded as split_part makes it (QT 6 and 7) */
  uint64_t wrow = m->type == WISP_W_F32 || m->type == WISP_W_BF16 ? (uint64_t)cols * 4
                  : m->type == WISP_W_Q4K                         ? (uint64_t)cols / WISP_Q4K_BLOCK * WISP_Q4K_BYTES
                  : m->type == WISP_W_F16                         ? (uint64_t)cols * 2
                  : m->type == WISP_W_Q8_0 || split               ? (uint64_t)cols
                                                                  : (uint64_t)cols / 2;
  uint64_t srow = m->type == WISP_W_Q4K || m->type == WISP_W_F16 || m->type == WISP_W_BF16 || qt_of(m->type) == 7 ? 0
                  : split ? (uint64_t)cols / 16 * 8
                                                                                          : (uint64_t)nb * 4;
  uint64_t per_row = wrow > srow ? wrow : srow;
  uint64_t limit = g->max_binding;
  /* A Q4Z part must start at an even block (zero points are two a byte). */
  uint64_t gran = m->type == WISP_W_Q4Z && nb % 2 ? 2 : 1;
  uint64_t rpp = limit / per_row / gran * gran;
  if (rpp == 0) return wisp_fail(WISP_EUNSUPPORTED, "webgpu: a row of %d columns exceeds the binding limit %llu",
                                 cols, (unsigned long long)limit);
  if (rpp > (uint64_t)rows) rpp = (uint64_t)rows;
  wmat *w = calloc(1, sizeof *w);
  if (!w) return wisp_fail(WISP_ENOMEM, "out of memory");
  w->host = m->type == WISP_W_F32 ? (const void *)m->f32 : (const void *)m->q;
  w->type = m->type;
  w->rows = rows;
  w->cols = cols;
  w->y0 = m->out_row0;
  w->y_stride = wisp_matrix_out_rows(m);
  w->nparts = (int)(((uint64_t)rows + rpp - 1) / rpp);
  w->parts = calloc((size_t)w->nparts, sizeof *w->parts);
  wisp_status st = WISP_OK;
  if (!w->parts) st = wisp_fail(WISP_ENOMEM, "out of memory");
  for (int p = 0; !st && p < w->nparts; p++) {
    wmat_part *P = &w->parts[p];
    P->row0 = (int)(p * rpp);
    P->rows = (int)((uint64_t)rows - (uint64_t)P->row0 < rpp ? (uint64_t)rows - (uint64_t)P->row0 : rpp);
    if (m->type == WISP_W_F32) {
      st = wisp_wgpu_buf_from(g->d, m->f32 + (size_t)P->row0 * cols, (uint64_t)P->rows * wrow, "wisp weights", &P->w);
      continue;
    }
    if (m->type == WISP_W_Q8_0) {
      st = q8_0_part(g, m, P);
      continue;
    }
    if (split || m->type == WISP_W_BF16) {
      st = split ? split_part(g, m, P) : bf16_part(g, m, P);
      continue;
    }
    st = wisp_wgpu_buf_from(g->d, m->q + (size_t)P->row0 * (size_t)wrow, (uint64_t)P->rows * wrow, "wisp quant",
                            &P->w);
    if (!st && m->type != WISP_W_Q4K && m->type != WISP_W_F16)
      st = wisp_wgpu_buf_from(g->d, m->scales + (size_t)P->row0 * nb, (uint64_t)P->rows * srow, "wisp scales", &P->s);
    if (!st && m->type == WISP_W_Q4Z) {
      size_t b0 = (size_t)P->row0 * nb; /* even, see gran */
      size_t nblk = (size_t)P->rows * nb;
      st = wisp_wgpu_buf_from(g->d, m->zp + b0 / 2, (nblk + 1) / 2, "wisp zero points", &P->z);
    }
  }
  if (!st && g->n_mats == g->cap_mats) {
    int cap = g->cap_mats ? 2 * g->cap_mats : 64;
    wmat **p = realloc(g->mats, (size_t)cap * sizeof *p);
    if (!p) st = wisp_fail(WISP_ENOMEM, "out of memory");
    else {
      g->mats = p;
      g->cap_mats = cap;
    }
  }
  if (st) {
    wisp_error_prefix("webgpu: uploading a %dx%d %s matrix", rows, cols, wisp_wtype_name(m->type));
    wisp_wgpu_mat_free(g, w);
    return st;
  }
  g->mats[g->n_mats++] = w;
  g->stats.weight_parts += (uint64_t)w->nparts;
  m->device = w;
  return apply_choice(g, m, w);
}


/* matvec.wgsl: lane groups of LG threads, ROWS rows each, WG/LG groups a
 * workgroup; matvec_nosg.wgsl: ROWS rows a workgroup. Tall matrices (the
 * head) take more rows per lane group: fewer workgroups re-reading x (and
 * re-reducing its norm with PRE 1). Subgroup variant only: the plain one
 * with many rows was found very slow on lavapipe (tree reductions of
 * ROWS*WG values). */
static void matvec_geometry(const wgpu_backend *g, const wmat *w, uint32_t *wg, uint32_t *rows, uint32_t *lg) {
  *rows = w->rows >= 16384 && g->sg ? g->mv_rows_big : g->mv_rows;
  *wg = g->mv_wg;
  if (w->mv_wg) { /* the plan's geometry */
    *wg = w->mv_wg;
    *rows = w->mv_rows;
  }
  *lg = wisp_wgpu_matvec_lanes(g, *wg);
}

/* Whether a split merge over heads of w->cols / heads dimensions can fuse
 * into the product by w (matvec.wgsl PRE 3): subgroup variant, the input
 * staged beside MERGE_MAX merge weights. */
int wisp_wgpu_merge_fits(const wgpu_backend *g, const wmat *w, int heads, int splits) {
  uint32_t wg, rows, lg;
  matvec_geometry(g, w, &wg, &rows, &lg);
  return g->sg && w->cols % 4 == 0 && (uint64_t)heads * (uint64_t)splits <= MERGE_MAX &&
         wisp_wgpu_staged_vec4s(g, w->cols, matvec_own_bytes(wg, lg, rows, MERGE_MAX)) > 1;
}

/* One-token product(s) y[t] (+)= W x'[t] for t < n (x' = x, or with pre the
 * op the graph fused in: xin is that op's input, nw its weights, xo its
 * output buffer, which is also the product's nominal input). */
void wisp_wgpu_rec_matvec(wgpu_backend *g, const wmat *w, int pre, const wisp_buf *xin, const wvec *nw, float eps,
                       const wisp_buf *xo, int x_row0, int n, wisp_buf *y, int accumulate, int argmax, int hd,
                       int splits, const wisp_buf *pair_out) {
  uint32_t wg, rows, lg;
  matvec_geometry(g, w, &wg, &rows, &lg);
  const int pair = pair_out != NULL; /* PAIR: gate/up rows in pairs, SwiGLU into pair_out */
  if (pair && rows % 2) rows = rows == 1 ? 2 : rows + 1;
  /* tall matrices: RCH chunks of rows per workgroup (matvec.wgsl); by
   * default 4 for heads of 131072 rows or more (a 248k vocabulary:
   * 1-2 % faster on the H200), else 1 */
  uint32_t rch = 1;
  if (g->sg && w->rows >= 16384) rch = g->head_chunks ? g->head_chunks : w->rows >= 131072 ? 4 : 1;
  uint32_t rows_wg = g->sg ? (wg / lg) * rows * rch : rows;
  /* argmax (n = 1): per-workgroup (max, index) pairs to g->amax, in row
   * order across the parts; g->amax_count is their number. */
  const uint32_t cmb = pre == 3 ? MERGE_MAX : 1; /* PRE 3's merge weights */
  const uint64_t mv_own = matvec_own_bytes(wg, lg, rows, cmb);
  wisp_wgpu_const c[10] = {{"WG", wg},         {"ROWS", rows}, {"QT", qt_of(w->type)},
                          {"ARGMAX", argmax}, {"LG", lg},     {"XN", wisp_wgpu_staged_vec4s(g, w->cols, mv_own)},
                          {"PF", g->prefetch == 1}, {"CMB", cmb}, {"RCH", rch}, {"PAIR", pair}};
  uint32_t part_off = 0;
  if (argmax) {
    uint64_t total = 0;
    for (int q = 0; q < w->nparts; q++) total += cdiv((uint64_t)w->parts[q].rows, rows_wg);
    if (!wisp_wgpu_scratch(g, &g->amax, total * 8, total * 8, "wisp argmax partials")) return;
    g->amax_count = (uint32_t)total;
  }
  wisp_wgpu_kernel *k = wisp_wgpu_pipeline(g, g->sg ? "matvec" : "matvec_nosg", c, g->sg ? 10 : 4);
  for (int t = 0; t < n; t++) {
    for (int q = 0; q < w->nparts; q++) {
      const wmat_part *P = &w->parts[q];
      struct {
        uint32_t rows, cols, y_off, x_off, acc;
        float eps;
        uint32_t pre, part_off, hd, splits, pair, pad1;
      } p = {(uint32_t)P->rows, (uint32_t)w->cols, (uint32_t)((size_t)t * w->y_stride + w->y0 + P->row0),
             (uint32_t)((size_t)(x_row0 + t) * w->cols / 4), accumulate ? 1u : 0u, eps, (uint32_t)pre, part_off,
             (uint32_t)hd, (uint32_t)splits, pair ? (uint32_t)w->rows / 2 : 0u, 0};
      wisp_wgpu_binding b[8];
      part_bindings(g, P, b);
      b[3] = whole(pre == 3 ? g->dummy.b : xin->g.b);
      b[4] = whole(y->g.b);
      b[5] = whole(pre == 1 ? nw->g.b : g->dummy.b);
      b[6] = whole(pre ? xo->g.b : g->dummy_rw.b);
      b[7] = whole(argmax ? g->amax.b : pre == 3 ? g->part.b : pair ? pair_out->g.b : g->dummy_rw2.b);
      uint32_t gx, gy;
      wisp_wgpu_grid(g->d, cdiv((uint64_t)P->rows, rows_wg), &gx, &gy);
      wisp_wgpu_record(g, k, b, 8, &p, sizeof p, gx, gy);
      part_off += (uint32_t)cdiv((uint64_t)P->rows, rows_wg);
    }
  }
}

static void g_matmul(wisp_backend *be, const wisp_matrix *W, const wisp_buf *x, int x_row0, int n, wisp_buf *y,
                     int accumulate) {
  wgpu_backend *g = as_g(be);
  for (int i = 0; wisp_matrix_mixed(W) && i < W->n_parts; i++)
    g_matmul(be, &W->parts[i], x, x_row0, n, y, accumulate); /* parts of different types: each into its rows */
  if (wisp_matrix_mixed(W)) return;
  if (W->type == WISP_W_Q4K && n > 1 && wisp_wgpu_mm8_takes(be, W, n)) { /* Q4_K x int8 (wgpu_products_i8.c) */
    wisp_wgpu_mm8_matmul(be, W, x, x_row0, n, y, accumulate);
    return;
  }
  if (W->type == WISP_W_Q4K) { /* wgpu_products_q4k.c */
    wisp_wgpu_q4k_matmul(be, W, x, x_row0, n, y, accumulate);
    return;
  }
  wmat *w = wisp_wgpu_need_mat(g, W);
  if (!w || n <= 0) return;
  if (wisp_wgpu_mm8_matmul(be, W, x, x_row0, n, y, accumulate)) return; /* Q4/Q8_0 x int8 (wgpu_products_i8.c) */
  if (w->cols % 4) { /* x is read as vec4 rows */
    wisp_wgpu_op_fail(g, WISP_EUNSUPPORTED, "matmul with an f32 matrix of %d columns (a multiple of 4 is needed)", w->cols);
    return;
  }
  if (n > 1 && w->cols % 32 == 0) { /* matmul.wgsl (wgpu_products_tiled.c) */
    wisp_wgpu_rec_matmul_tiled(g, W, qt_of(w->type), x, x_row0, n, y, accumulate);
    return;
  }
  wisp_wgpu_rec_matvec(g, w, 0, x, NULL, 0, x, x_row0, n, y, accumulate, 0, 0, 0, NULL);
}



/* matvec_rows.wgsl: y[t] (+)= W x[t] for t < n, wisp_wgpu_rows_nt(n) tokens a
 * workgroup (grid z), each weight unit loaded once for them. Its sums are those of
 * matvec.wgsl (PRE 0) for each token alone, given the same lanes per group:
 * the geometry is matvec_geometry's (rows per lane group at most 4 and
 * fewer for many tokens, wisp_wgpu_rows_per_group, which changes no sum). */
static void rec_matvec_rows(wgpu_backend *g, const wmat *w, const wisp_buf *x, int n, wisp_buf *y, int accumulate) {
  uint32_t wg, rows, lg;
  matvec_geometry(g, w, &wg, &rows, &lg);
  const uint32_t nt = wisp_wgpu_rows_nt(g, n), qt = qt_of(w->type);
  rows = wisp_wgpu_rows_per_group(rows, nt);
  const uint32_t uv = qt == 0 ? 1 : qt == 4 ? 2 : qt >= 5 ? 4 : 8; /* vec4s a unit (matvec_unit.wgsli) */
  const uint32_t tu = wisp_wgpu_rows_tile(g, (uint32_t)w->cols / (4 * uv), uv, wg, lg, rows, nt);
  wisp_wgpu_const c[7] = {{"WG", wg}, {"ROWS", rows}, {"LG", lg},           {"QT", qt},
                          {"NT", nt}, {"XS", tu > 0},  {"TU", tu ? tu : 1}};
  wisp_wgpu_kernel *k = wisp_wgpu_pipeline(g, "matvec_rows", c, 7);
  const uint32_t rows_wg = (wg / lg) * rows;
  for (int q = 0; q < w->nparts; q++) {
    const wmat_part *P = &w->parts[q];
    struct {
      uint32_t rows, cols, y_off, x_off, acc, n, y_stride, pad0;
    } p = {(uint32_t)P->rows, (uint32_t)w->cols, (uint32_t)(w->y0 + P->row0), 0, accumulate ? 1u : 0u, (uint32_t)n,
           (uint32_t)w->y_stride, 0};
    wisp_wgpu_binding b[5];
    part_bindings(g, P, b);
    b[3] = whole(x->g.b);
    b[4] = whole(y->g.b);
    uint32_t gx, gy;
    wisp_wgpu_grid(g->d, cdiv((uint64_t)P->rows, rows_wg), &gx, &gy);
    wisp_wgpu_record_xyz(g, k, b, 5, &p, sizeof p, gx, gy, cdiv((uint64_t)n, nt));
  }
  g->stats.rows_shared++;
}

/* A batched step of this many rows or more runs its products as a prefill
 * where the plan gives the int8 prefill kernel (g_matmul_rows). H100,
 * throughput profile, tools/seq_probe (bench/results/h100-session-20261206/):
 * every product from 8 rows took the seed shape at S = 64 from 3,085 to
 * 19,193 tok/s and the 0.8B gated hybrid from 1,318 to 4,893; at S = 8 the seed
 * shape 2,270 -> 2,950 (from 16 rows: 2,445). The int8 products alone,
 * the head as 64 multi-row products: 7,535 and 2,238. */
#define ROWS_PREFILL_INT8 8
/* From 16 where the int8 products include Q4_K ones: q4k_matvec_rows reads
 * a Q4_K weight once for all the rows and needs no quantized copy of them;
 * in seq_probe's S = 8 run the int8 products with their rows' quantizing
 * took 230 ms of GPU time, the exact profile's multi-row Q4_K products of
 * the same steps 33 ms.
 * H100, the 0.8B gated hybrid in Q4_K, seq_probe (bench/results/h100-receipt-20261206-3/):
 * S = 8 1,114 tok/s from 8 rows, 1,308-1,322 with the multi-row kernels;
 * S = 16 1,858 from 8 (so from 16), 1,558-1,577 with them. The seed shape
 * (Q4) keeps 8: at S = 8 3,343 against 2,745-2,775. */
#define ROWS_PREFILL_INT8_Q4K 16

void wisp_wgpu_rows_note(const wisp_matrix *m, int *int8, int *int8_q4k) {
  if (wisp_matrix_mixed(m)) { /* row parts of several types: each part says for itself */
    for (int i = 0; i < m->n_parts; i++) wisp_wgpu_rows_note(&m->parts[i], int8, int8_q4k);
    return;
  }
  if (!wisp_wgpu_mm8_planned(m)) return;
  *int8 = 1;
  if (m->type == WISP_W_Q4K) *int8_q4k = 1;
}

int wisp_wgpu_rows_prefill_from(const wgpu_backend *g, int int8, int int8_q4k, const char **why) {
  const char *w = "tuning rowsPrefill";
  int from = g->rows_prefill;
  if (from < 0 && !int8) w = "no product of the plan is an int8 one; tuning rowsPrefill sets it", from = 0;
  else if (from < 0 && int8_q4k && !g->no_rows_q4k)
    w = "the default where some int8 products are Q4_K; tuning rowsPrefill sets it", from = ROWS_PREFILL_INT8_Q4K;
  else if (from < 0) w = "the default with int8 products; tuning rowsPrefill sets it", from = ROWS_PREFILL_INT8;
  if (why) *why = w;
  return from;
}

/* Every row computed as the one-row product computes it (g_matmul for
 * n = 1 without a fusion: matvec.wgsl PRE 0, or q4k_matvec.wgsl), so that a
 * row's sums do not depend on n; the tiled prefill kernel (matmul.wgsl)
 * sums in another order and is not used here. One row: that very
 * dispatch. Several: matvec_rows.wgsl (q4k_matvec_rows.wgsl for Q4_K),
 * which reads the weight once per up to 64 rows and gives every row the
 * one-row product's bits. Without subgroups (matvec_nosg's tree reduction)
 * each row is its own matvec dispatch. The exception: a step of enough
 * rows runs as a prefill of that many tokens (g_matmul: the plan's prefill
 * kernel), the rows' arithmetic as one matrix product rather than N
 * matrix-vector products, a row's sums then depending on the rows beside
 * it: from N rows with tuning rowsPrefill=N (int8 or tiled f32), else
 * every product from ROWS_PREFILL_INT8 rows (ROWS_PREFILL_INT8_Q4K where
 * some are Q4_K) where the plan gives the int8 prefill kernel (the
 * throughput profile). */
static void g_matmul_rows(wisp_backend *be, const wisp_matrix *W, const wisp_buf *x, int n, wisp_buf *y,
                          int accumulate) {
  wgpu_backend *g = as_g(be);
  if (n <= 0) return;
  /* tuning rowsPrefill=N: from N rows as a prefill (0: never). Not given:
   * from ROWS_PREFILL_INT8 (_Q4K) rows where the plan gives the prefill products
   * to the int8 kernel (the throughput profile, whose prefill already
   * quantizes the activations), every product, the head's too (its f32
   * tiled product: at S = 64 the seed shape's 64 head rows as multi-row
   * products cost 2.5x the rest of the step); the exact profile keeps every
   * row's one-row bits. */
  const int from = wisp_wgpu_rows_prefill_from(g, g->int8_planned, g->int8_planned_q4k, NULL);
  /* Parts of different types: each into its rows, unless the step runs as
   * a prefill (parts and all); where the int8 rows below take the step,
   * they take each part. */
  if (wisp_matrix_mixed(W)) {
    if (from && n >= from && !wisp_wgpu_mv8_wants(be, n)) g_matmul(be, W, x, 0, n, y, accumulate);
    else
      for (int i = 0; i < W->n_parts; i++) g_matmul_rows(be, &W->parts[i], x, n, y, accumulate);
    return;
  }
  /* A few rows where the plan gives int8 products: matvec_i8_rows.wgsl
   * (wgpu_products_i8.c), each Q4/Q4Z/Q4_K/Q8_0 weight read once for them,
   * integer dots. */
  if (wisp_wgpu_mv8_rows(be, W, x, n, y, accumulate)) return;
  if (from && n >= from) { /* as a prefill */
    g_matmul(be, W, x, 0, n, y, accumulate);
    return;
  }
  if (W->type == WISP_W_Q4K) {
    wisp_wgpu_q4k_matmul_rows(be, W, x, n, y, accumulate);
    return;
  }
  wmat *w = wisp_wgpu_need_mat(g, W);
  if (!w) return;
  if (w->cols % 4) {
    wisp_wgpu_op_fail(g, WISP_EUNSUPPORTED, "matmul with an f32 matrix of %d columns (a multiple of 4 is needed)", w->cols);
    return;
  }
  if (n > 1 && g->sg && !g->no_rows_shared)
    rec_matvec_rows(g, w, x, n, y, accumulate);
  else
    wisp_wgpu_rec_matvec(g, w, 0, x, NULL, 0, x, 0, n, y, accumulate, 0, 0, 0, NULL);
}

void wisp_wgpu_products_install(wisp_backend *vt) {
  vt->prepare_matrix = g_prepare_matrix;
  vt->matmul = g_matmul;
  vt->matmul_rows = g_matmul_rows;
}
