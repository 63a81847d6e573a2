/* The CPU backend's integer products (src/backend/cpu/cpu_i8.h): the scalar
 * reference against an f64 product of the dequantized weights with the
 * dequantized int8 activations (same numbers, exact arithmetic), and each
 * SIMD kernel set against the scalar reference: identical quantized bytes,
 * products equal up to f32 summation order. Q4 / Q4Z products read the
 * block scales rounded to f16 (cpu_i8.h), the exact products the f32 ones:
 * both are checked on scales that f16 cannot hold. A set this CPU lacks is
 * reported as skipped (not run), never as passed. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cpu/cpu_i8.h"
#include "backend/cpu/cpu_kernels.h"
#include "format/qblocks.h"
#include "format/quant.h"
#include "engine/engine.h"
#include "fixtures.h"
#include "test.h"
#include "util/err.h"

/* m, and m16: the same matrix with its Q4 / Q4Z scales rounded to f16
 * (s16 as floats: what the integer products read); m16 = m for the others.
 * For F16, f16 is the matrix of halves in q and m its Q8_0 copy in q8
 * (wisp_i8_q8_0_of_f16), which the integer products read in its place. */
typedef struct {
  wisp_matrix m, m16, f16;
  uint8_t *q, *zp, *q8;
  float *scales, *scales16;
  uint16_t *s16;
} test_mat;

static uint32_t rng_state = 12345;
static float rnd(void) { /* uniform in [-1, 1) */
  rng_state = rng_state * 1664525u + 1013904223u;
  return (float)((rng_state >> 8) & 0xffffff) / 8388608.0f - 1.0f;
}

static void mat_free(test_mat *t) {
  free(t->q);
  free(t->q8);
  free(t->zp);
  free(t->scales);
  free(t->scales16);
  free(t->s16);
}

/* (Re)makes s16 and m16 from t->m's scales. 0 out of memory. */
static int mat_round_scales(test_mat *t) {
  t->m16 = t->m;
  if (!wisp_i8_needs_f16_scales(&t->m)) return 1;
  const size_t n = (size_t)t->m.rows * (t->m.cols / 32);
  if (!t->s16) t->s16 = malloc(n * sizeof(uint16_t));
  if (!t->scales16) t->scales16 = malloc(n * sizeof(float));
  if (!t->s16 || !t->scales16) return 0;
  wisp_i8_scales_f16(&t->m, t->s16);
  for (size_t i = 0; i < n; i++) t->scales16[i] = wisp_f16_to_f32(t->s16[i]);
  t->m16.scales = t->scales16;
  return 1;
}

/* The ggml block types the integer products read in their own bytes,
 * tested on random blocks. */
static int ggml_random_type(wisp_wtype t) {
  return t == WISP_W_Q4_1 || t == WISP_W_Q5_1 || t == WISP_W_Q5K || t == WISP_W_Q6K || t == WISP_W_Q3K ||
         t == WISP_W_Q2K;
}

/* Where a block of these types keeps its f16 d and, where it has one, its
 * f16 min (dmin, m); -1 for none. */
static void ggml_f16_fields(wisp_wtype t, int *d_at, int *m_at) {
  switch (t) {
    case WISP_W_Q4_1:
    case WISP_W_Q5_1:
    case WISP_W_Q5K: *d_at = 0, *m_at = 2; return;
    case WISP_W_Q6K: *d_at = 208, *m_at = -1; return;
    case WISP_W_Q3K: *d_at = 108, *m_at = -1; return;
    default: *d_at = 80, *m_at = 82; return; /* Q2_K */
  }
}

/* rows x cols of random blocks of a ggml type: every byte random (so every
 * value, high bit, sub-scale and min occurs), then the f16 d (and min) of
 * each block set to a sane size, scaled up 64 times on some blocks. Some
 * blocks have their integer scale and min bytes all ones or all zeros (the
 * extremes: Q6_K's sub-scales -1 and 0; Q3_K's 31 and -32; Q2_K's scale
 * and min 15 and 0; Q5_K's 63 and 0), and on Q6_K some are -128. */
static uint8_t *ggml_random_blocks(wisp_wtype type, int rows, int cols) {
  const wisp_quant_traits *tr = wisp_quant_traits_of(type);
  const size_t nblk = (size_t)rows * (cols / tr->block), bb = (size_t)tr->block_bytes;
  uint8_t *q = malloc(nblk * bb);
  if (!q) return NULL;
  int d_at, m_at;
  ggml_f16_fields(type, &d_at, &m_at);
  /* the bytes of the integer scales: Q5_K 4..15, Q6_K 192..207, Q3_K 96..107, Q2_K 0..15 */
  const int sc0 = type == WISP_W_Q5K ? 4 : type == WISP_W_Q6K ? 192 : type == WISP_W_Q3K ? 96 : 0;
  const int nsc = type == WISP_W_Q5K || type == WISP_W_Q3K ? 12 : type == WISP_W_Q6K || type == WISP_W_Q2K ? 16 : 0;
  for (size_t b = 0; b < nblk; b++) {
    uint8_t *blk = q + b * bb;
    for (size_t k = 0; k < bb; k++) blk[k] = (uint8_t)((rnd() + 1.0f) * 128.0f);
    if (nsc && b % 7 == 3) memset(blk + sc0, 0xff, (size_t)nsc);
    if (nsc && b % 7 == 5) memset(blk + sc0, 0x00, (size_t)nsc);
    if (type == WISP_W_Q6K && b % 11 == 4) memset(blk + sc0, 0x80, 16);
    const float big = b % 29 == 0 ? 64.0f : 1.0f;
    uint16_t d = wisp_f32_to_f16(0.01f * (1.0f + rnd()) * big);
    memcpy(blk + d_at, &d, 2);
    if (m_at >= 0) {
      uint16_t m = wisp_f32_to_f16(0.02f * rnd() * big);
      memcpy(blk + m_at, &m, 2);
    }
  }
  return q;
}

/* rows x cols of `type` quantized from random values (some rows scaled up so
 * that blocks differ in scale by orders of magnitude). 0 on failure. */
static int mat_make(test_mat *t, wisp_wtype type, int rows, int cols) {
  memset(t, 0, sizeof *t);
  float *w = malloc((size_t)rows * cols * sizeof(float));
  if (!w) return 0;
  for (int i = 0; i < rows * cols; i++) w[i] = rnd() * (i % 97 == 0 ? 8.0f : 1.0f) + (type == WISP_W_Q4Z ? 0.3f : 0);
  t->m = (wisp_matrix){.type = type, .rows = rows, .cols = cols};
  int ok = 1;
  if (type == WISP_W_Q4 || type == WISP_W_Q4Z) {
    t->q = malloc(wisp_q4_quant_bytes(rows, cols));
    t->scales = malloc(wisp_q4_scale_bytes(rows, cols));
    t->zp = malloc(wisp_q4_zp_bytes(rows, cols) + 1);
    ok = t->q && t->scales && t->zp;
    if (ok && type == WISP_W_Q4) wisp_quantize_q4(w, rows, cols, t->q, t->scales);
    if (ok && type == WISP_W_Q4Z) wisp_quantize_q4z(w, rows, cols, t->q, t->scales, t->zp);
  } else if (type == WISP_W_Q4K) {
    ok = (t->q = malloc(wisp_q4k_bytes(rows, cols))) != NULL;
    if (ok) wisp_quantize_q4k(w, rows, cols, t->q);
  } else if (type == WISP_W_Q5_0) { /* random blocks: every 5-bit value and high bit occurs */
    const size_t nblk = (size_t)rows * (cols / 32);
    ok = (t->q = malloc(nblk * WISP_Q5_0_BYTES)) != NULL;
    for (size_t b = 0; ok && b < nblk; b++) {
      uint8_t *blk = t->q + b * WISP_Q5_0_BYTES;
      uint16_t d = wisp_f32_to_f16(0.01f * (1.0f + rnd()) * (b % 29 == 0 ? 64.0f : 1.0f));
      memcpy(blk, &d, 2);
      for (int k = 2; k < WISP_Q5_0_BYTES; k++) blk[k] = (uint8_t)((rnd() + 1.0f) * 128.0f);
    }
  } else if (ggml_random_type(type)) {
    ok = (t->q = ggml_random_blocks(type, rows, cols)) != NULL;
  } else if (type == WISP_W_F16) {
    t->q = malloc(wisp_f16_bytes(rows, cols));
    t->q8 = malloc(wisp_q8_0_bytes(rows, cols));
    ok = t->q && t->q8;
    if (ok) wisp_quantize_f16(w, rows, cols, t->q);
    t->f16 = (wisp_matrix){.type = type, .rows = rows, .cols = cols, .q = t->q};
    ok = ok && wisp_i8_q8_0_of_f16(&t->f16, t->q8);
  } else {
    ok = (t->q = malloc(wisp_q8_0_bytes(rows, cols))) != NULL;
    if (ok) wisp_quantize_q8_0_rows(w, rows, cols, t->q);
  }
  t->m.q = t->q;
  t->m.scales = t->scales;
  t->m.zp = t->zp;
  if (type == WISP_W_F16 && ok) t->m = wisp_i8_q8_0_view(&t->f16, t->q8);
  free(w);
  return ok && mat_round_scales(t);
}

static float *acts_make(int n, int K) {
  float *x = malloc((size_t)n * K * sizeof(float));
  if (!x) return NULL;
  for (int i = 0; i < n * K; i++) x[i] = rnd() * (i % 61 == 0 ? 20.0f : 1.0f);
  if (n > 2)
    for (int i = 0; i < K; i++) x[(size_t)2 * K + i] = 0; /* an all-zero token: d = 0 */
  return x;
}

/* F16 through its Q8_0 copy, as the backend runs f16_i8 */
static const wisp_wtype TYPES[] = {WISP_W_Q4,   WISP_W_Q4Z,  WISP_W_Q4K, WISP_W_Q8_0, WISP_W_Q5_0, WISP_W_F16,
                                   WISP_W_Q4_1, WISP_W_Q5_1, WISP_W_Q5K, WISP_W_Q6K,  WISP_W_Q3K,  WISP_W_Q2K};
/* tokens: decode, a tail, more than a chunk */
static const int NTOK[] = {1, 7, 37};
/* rows x cols (Q4_K: x its cols): rows not a multiple of any tile, 16
 * blocks a row (whole pairs and runs of 16), then rows in several decode tiles plus a tail, with 39
 * blocks a row (runs of 16 and a run of 7: three pairs and a block alone;
 * Q4Z zero points starting mid-byte on odd rows) or, for Q4_K, 24 (a run
 * of two super-blocks and one of a single one); then the smallest rows: one
 * block (nothing but a block alone), three blocks (a pair and a block), one
 * super-block. */
static const int SHAPES[][3] = {{13, 512, 512}, {37, 1248, 768}, {5, 32, 256}, {6, 96, 256}};
static int shape_cols(int si, wisp_wtype t) {
  return wisp_quant_traits_of(t)->block == 256 ? SHAPES[si][2] : SHAPES[si][1];
}

/* Element e of token t, from the quantized activations. */
static double act_value(const wisp_i8_act *a, int t, int e) {
  if (a->per256) return (double)a->d256[(size_t)t * (a->K / 256) + e / 256] * a->q[(size_t)t * a->K + e];
  int b = e / 32, i = e % 32;
  const int nb = a->K / 32;
  int at = 32 * b + i; /* NATURAL */
  if (a->layout == WISP_I8_PAIRED) /* pairs of blocks: evens of b, of b^1, odds of b, of b^1; an odd last block alone */
    at = (nb & 1) && b == nb - 1 ? 32 * b + (i & 1) * 16 + i / 2 : 64 * (b / 2) + 32 * (i & 1) + 16 * (b & 1) + i / 2;
  return (double)a->d[(size_t)t * nb + b] * a->q[(size_t)t * a->K + at];
}

/* The int8 step of element e of token t (d, or per256 d256). */
static double act_step(const wisp_i8_act *a, int t, int e) {
  return a->per256 ? a->d256[(size_t)t * (a->K / 256) + e / 256] : a->d[(size_t)t * (a->K / 32) + e / 32];
}

TEST(cpu_i8_scalar_matches_exact_product) {
  const wisp_i8_kernels *k = wisp_i8_kernels_scalar();
  printf("  cpu_i8: ran the scalar reference\n");
  /* decode (PAIRED activations for Q4 / Q4Z) and several tokens (NATURAL), every shape; the per-16 types
   * also on per256 activations (their decode's) */
  for (int c = 0; c < 2 * (int)(sizeof SHAPES / sizeof SHAPES[0]); c++)
  for (size_t ti = 0; ti < sizeof TYPES / sizeof TYPES[0]; ti++)
  for (int per256 = 0; per256 <= wisp_i8_per16(TYPES[ti]); per256++) {
    const int n = c & 1 ? 7 : 1, ROWS = SHAPES[c >> 1][0], COLS = shape_cols(c >> 1, TYPES[ti]);
    test_mat t;
    CHECK(mat_make(&t, TYPES[ti], ROWS, COLS));
    float *x = acts_make(n, COLS), *y = calloc((size_t)n * ROWS, sizeof(float)), *row = malloc(COLS * sizeof(float));
    float *scratch = malloc(WISP_I8_SCRATCH(COLS) * sizeof(float));
    wisp_i8_act a = {0};
    int ok = x && y && row && scratch && wisp_i8_act_reserve(&a, n, COLS);
    double worst = 0, qerr = 0;
    if (ok) {
      a.layout = wisp_i8_layout_for(t.m.type, n);
      a.per256 = per256;
      k->quantize(x, 0, n, &a);
      k->gemm(&t.m, t.s16, 0, ROWS, &a, 0, n, y, ROWS, 0, scratch);
      for (int r = 0; r < ROWS; r++) {
        wisp_matrix_row_f32(&t.m16, r, row); /* Q4 / Q4Z: the scales as the integer products read them */
        for (int tok = 0; tok < n; tok++) {
          double want = 0, mag = 0;
          for (int e = 0; e < COLS; e++) {
            want += (double)row[e] * act_value(&a, tok, e);
            mag += fabs((double)row[e] * x[(size_t)tok * COLS + e]);
            /* the int8 value stays within half a step of x */
            double step = act_step(&a, tok, e);
            double dx = fabs(act_value(&a, tok, e) - x[(size_t)tok * COLS + e]);
            if (step > 0 && dx / step > qerr) qerr = dx / step;
          }
          double err = fabs(y[(size_t)tok * ROWS + r] - want) / (mag + 1e-30);
          if (err > worst) worst = err;
        }
      }
    }
    wisp_i8_act_free(&a);
    free(x);
    free(y);
    free(row);
    free(scratch);
    mat_free(&t);
    CHECKF(ok, "out of memory");
    CHECKF(worst < 1e-5, "%s%s: int8 product (%d x %d, %d tokens) differs from the dequantized product by %g of sum|w x|",
           wisp_wtype_name(TYPES[ti]), per256 ? " (per256)" : "", ROWS, COLS, n, worst);
    CHECKF(qerr <= 0.5 + 1e-4, "%s%s: an int8 activation is %g steps from its value", wisp_wtype_name(TYPES[ti]),
           per256 ? " (per256)" : "", qerr);
  }
}

/* One SIMD set against the scalar reference, over every type and token
 * count, for plain and accumulating products. */
static void check_set(const char *name) {
  const wisp_i8_kernels *sets[4], *set = NULL;
  int can[4], runnable = 0;
  int n_sets = wisp_i8_kernels_all(sets, can, 4);
  for (int i = 0; i < n_sets; i++)
    if (!strcmp(sets[i]->name, name)) set = sets[i], runnable = can[i];
  if (!set) SKIP("the %s kernel set is not compiled on this architecture (not run)", name);
  if (!runnable) SKIP("this CPU lacks %s: that kernel set was not run", name);
  printf("  cpu_i8: ran the %s kernel set against the scalar reference\n", name);
  const wisp_i8_kernels *ref = wisp_i8_kernels_scalar();
  for (size_t si = 0; si < sizeof SHAPES / sizeof SHAPES[0]; si++)
  for (size_t ti = 0; ti < sizeof TYPES / sizeof TYPES[0]; ti++)
    for (size_t ni = 0; ni < sizeof NTOK / sizeof NTOK[0]; ni++)
    for (int per256 = 0; per256 <= wisp_i8_per16(TYPES[ti]); per256++) { /* per-16 types: both activations */
      const int n = NTOK[ni], ROWS = SHAPES[si][0], COLS = shape_cols((int)si, TYPES[ti]);
      test_mat t;
      CHECK(mat_make(&t, TYPES[ti], ROWS, COLS));
      float *x = acts_make(n, COLS);
      float *y0 = malloc((size_t)n * ROWS * sizeof(float)), *y1 = malloc((size_t)n * ROWS * sizeof(float));
      float *scratch = malloc(WISP_I8_SCRATCH(COLS) * sizeof(float));
      wisp_i8_act a = {0}, b = {0};
      int ok = x && y0 && y1 && scratch && wisp_i8_act_reserve(&a, n, COLS) && wisp_i8_act_reserve(&b, n, COLS);
      int same_bytes = 1;
      double worst = 0;
      if (ok) {
        a.layout = b.layout = wisp_i8_layout_for(t.m.type, n);
        a.per256 = b.per256 = per256;
        ref->quantize(x, 0, n, &a);
        set->quantize(x, 0, n, &b);
        same_bytes = !memcmp(a.q, b.q, (size_t)n * COLS) && !memcmp(a.qs16, b.qs16, (size_t)n * (COLS / 16) * 2);
        if (per256) same_bytes = same_bytes && !memcmp(a.d256, b.d256, (size_t)n * (COLS / 256) * 4);
        else
          same_bytes = same_bytes && !memcmp(a.d, b.d, (size_t)n * (COLS / 32) * 4) &&
                       !memcmp(a.ds, b.ds, (size_t)n * (COLS / 32) * 4) &&
                       !memcmp(a.ds16, b.ds16, (size_t)n * (COLS / 16) * 4);
        for (int acc = 0; acc < 2; acc++) {
          for (int i = 0; i < n * ROWS; i++) y0[i] = y1[i] = acc ? (float)i : -1.0f;
          ref->gemm(&t.m, t.s16, 0, ROWS, &a, 0, n, y0, ROWS, acc, scratch);
          /* rows 1.. and tokens 1.. through offsets, the first row and token on their own */
          set->gemm(&t.m, t.s16, 0, 1, &a, 0, n, y1, ROWS, acc, scratch);
          set->gemm(&t.m, t.s16, 1, ROWS - 1, &a, 0, 1, y1 + 1, ROWS, acc, scratch);
          if (n > 1) set->gemm(&t.m, t.s16, 1, ROWS - 1, &a, 1, n - 1, y1 + ROWS + 1, ROWS, acc, scratch);
          double mag = 0;
          for (int i = 0; i < n * ROWS; i++) mag = fmax(mag, fabs(y0[i]));
          for (int i = 0; i < n * ROWS; i++) worst = fmax(worst, fabs(y0[i] - y1[i]) / (mag + 1e-30));
        }
      }
      wisp_i8_act_free(&a);
      wisp_i8_act_free(&b);
      free(x);
      free(y0);
      free(y1);
      free(scratch);
      mat_free(&t);
      CHECKF(ok, "out of memory");
      CHECKF(same_bytes, "%s: %s quantized activations%s differ from the scalar reference", name,
             wisp_wtype_name(TYPES[ti]), per256 ? " (per256)" : "");
      CHECKF(worst < 1e-5, "%s: %s product%s, %d x %d, %d tokens, differs from the scalar reference by %g of max|y|",
             name, wisp_wtype_name(TYPES[ti]), per256 ? " (per256)" : "", ROWS, COLS, n, worst);
    }
}

TEST(cpu_i8_avx2_matches_scalar) { check_set("avx2"); }
TEST(cpu_i8_avxvnni_matches_scalar) { check_set("avxvnni"); }
TEST(cpu_i8_avx512vnni_matches_scalar) { check_set("avx512vnni"); }

/* ---- f16 block scales ---- */

/* A Q4 / Q4Z matrix of positive weights whose every f32 scale lies 0.45 of
 * an f16 step above an f16 value, so that it rounds to that value: with
 * positive activations every term of a product is positive, and the
 * product with the f32 scales comes out 2.2e-4 to 4.4e-4 larger than the
 * one with the f16 scales, over 20 times the tolerance of the checks. */
static int mat_make_off_f16(test_mat *t, wisp_wtype type, int rows, int cols) {
  memset(t, 0, sizeof *t);
  const size_t nw = (size_t)rows * cols, n = nw / 32;
  float *w = malloc(nw * sizeof(float));
  t->q = malloc(wisp_q4_quant_bytes(rows, cols));
  t->scales = malloc(wisp_q4_scale_bytes(rows, cols));
  t->zp = malloc(wisp_q4_zp_bytes(rows, cols) + 1);
  int ok = w && t->q && t->scales && t->zp;
  if (ok) {
    for (size_t i = 0; i < nw; i++) w[i] = 0.1f + fabsf(rnd());
    if (type == WISP_W_Q4) wisp_quantize_q4(w, rows, cols, t->q, t->scales);
    else wisp_quantize_q4z(w, rows, cols, t->q, t->scales, t->zp);
    for (size_t i = 0; i < n; i++) {
      uint16_t h = wisp_f32_to_f16(t->scales[i]);
      float lo = wisp_f16_to_f32(h), hi = wisp_f16_to_f32((uint16_t)(h + 1));
      t->scales[i] = lo + 0.45f * (hi - lo);
    }
  }
  free(w);
  t->m = (wisp_matrix){.type = type, .rows = rows, .cols = cols, .q = t->q, .scales = t->scales, .zp = t->zp};
  return ok && mat_round_scales(t);
}

static float *acts_positive(int n, int K) {
  float *x = malloc((size_t)n * K * sizeof(float));
  if (x)
    for (int i = 0; i < n * K; i++) x[i] = 0.1f + fabsf(rnd());
  return x;
}

/* Row r of m (dequantized into row) times token t: of a's int8 values
 * when a is given, else of the f32 x. */
static double f64_product(const wisp_matrix *m, int r, const wisp_i8_act *a, const float *x, int t, float *row) {
  wisp_matrix_row_f32(m, r, row);
  double v = 0;
  for (int e = 0; e < m->cols; e++) v += (double)row[e] * (a ? act_value(a, t, e) : x[(size_t)t * m->cols + e]);
  return v;
}

/* Every kernel set this CPU runs, the scalar reference too, reads the f16
 * scales in decode (PAIRED) and prefill (NATURAL): each product equals the
 * f64 product with the f16-rounded scales, and not the one with the f32
 * scales it was given in W->scales. */
/* y [n][rows] = m x the n tokens of x [n][m->cols], through the backend's
 * matmul (buffers made, written, read back, synced and freed here). */
static wisp_status backend_product(wisp_backend *be, const wisp_matrix *m, const float *x, int n, int rows, float *y) {
  const size_t K = (size_t)m->cols;
  wisp_buf *bx = be->buf_new(be, (size_t)n * K), *by = be->buf_new(be, (size_t)n * rows);
  wisp_status st = bx && by ? WISP_OK : wisp_fail(WISP_ENOMEM, "no buffers for a product of %d tokens", n);
  if (!st) {
    be->buf_write(be, bx, 0, (size_t)n * K, x);
    be->matmul(be, m, bx, 0, n, by, 0);
    be->buf_read(be, by, 0, (size_t)n * rows, y);
    st = be->sync(be);
  }
  if (bx) be->buf_free(be, bx);
  if (by) be->buf_free(be, by);
  return st;
}

/* Over n tokens x `rows` rows of a backend's product y: the largest
 * exact (f64) product *mag, and y's largest distances to want (the scalar
 * integer product) and to the exact product. row: scratch of m->cols. */
static void product_distances(const wisp_matrix *m, const float *x, const float *y, const float *want, int n, int rows,
                              float *row, double *mag, double *to_want, double *to_exact) {
  *mag = *to_want = *to_exact = 0;
  for (int r = 0; r < rows; r++)
    for (int tok = 0; tok < n; tok++) {
      const double exact = f64_product(m, r, NULL, x, tok, row), got = y[(size_t)tok * rows + r];
      *mag = fmax(*mag, fabs(exact));
      *to_want = fmax(*to_want, fabs(got - want[(size_t)tok * rows + r]));
      *to_exact = fmax(*to_exact, fabs(got - exact));
    }
}

TEST(cpu_i8_q4_products_read_the_f16_scales) {
  const wisp_i8_kernels *sets[4];
  int can[4];
  const int n_sets = wisp_i8_kernels_all(sets, can, 4);
  const wisp_wtype types[2] = {WISP_W_Q4, WISP_W_Q4Z};
  for (int si = 0; si < n_sets; si++) {
    if (!can[si]) continue;
    printf("  cpu_i8: f16 scales in the %s kernel set\n", sets[si]->name);
    for (int c = 0; c < 8; c++) {
      const wisp_wtype type = types[c & 1];
      const int n = c & 2 ? 7 : 1, ROWS = SHAPES[c >> 2][0], COLS = SHAPES[c >> 2][1];
      test_mat t;
      int ok = mat_make_off_f16(&t, type, ROWS, COLS);
      float *x = acts_positive(n, COLS), *y = malloc((size_t)n * ROWS * sizeof(float)), *row = malloc(COLS * sizeof(float));
      float *scratch = malloc(WISP_I8_SCRATCH(COLS) * sizeof(float));
      wisp_i8_act a = {0};
      ok = ok && x && y && row && scratch && wisp_i8_act_reserve(&a, n, COLS);
      double worst16 = 0, least32 = 1;
      if (ok) {
        a.layout = wisp_i8_layout_for(type, n);
        sets[si]->quantize(x, 0, n, &a);
        sets[si]->gemm(&t.m, t.s16, 0, ROWS, &a, 0, n, y, ROWS, 0, scratch);
        for (int r = 0; r < ROWS; r++)
          for (int tok = 0; tok < n; tok++) {
            double v16 = f64_product(&t.m16, r, &a, NULL, tok, row), v32 = f64_product(&t.m, r, &a, NULL, tok, row);
            worst16 = fmax(worst16, fabs(y[(size_t)tok * ROWS + r] - v16) / v16);
            least32 = fmin(least32, (v32 - v16) / v16);
          }
      }
      wisp_i8_act_free(&a);
      free(x), free(y), free(row), free(scratch);
      mat_free(&t);
      CHECKF(ok, "out of memory");
      CHECKF(least32 > 1e-4, "the test's f32 scales are too close to f16 (%g)", least32);
      CHECKF(worst16 < 1e-5, "%s: %s product, %d tokens, is %g from the one with f16 scales", sets[si]->name,
             wisp_wtype_name(type), n, worst16);
    }
  }
}

/* Through the backend: an exact product (the default profile's kernels)
 * reads the f32 scales, as before the f16 copy existed; an integer one
 * (q4_i8) the f16 copy that prepare_matrix made, and a matrix prepared
 * again after its scales changed (the same address, another model) reads
 * the new ones. Decode and a 7-token prefill. */
TEST(cpu_backend_q4_exact_reads_f32_scales_integer_f16) {
  enum { ROWS_B = 37, K = 1248 };
  const wisp_wtype types[2] = {WISP_W_Q4, WISP_W_Q4Z};
  const char *variants[2] = {"", "q4_i8"};
  for (int c = 0; c < 4; c++) {
    const wisp_wtype type = types[c & 1];
    const int i8 = c >> 1;
    test_mat t;
    CHECK(mat_make_off_f16(&t, type, ROWS_B, K));
    for (int ph = 0; ph < 2; ph++) snprintf(t.m.choice[ph].variant, sizeof t.m.choice[ph].variant, "%s", variants[i8]);
    wisp_backend *be = NULL;
    CHECK(wisp_cpu_backend_new(2, &be) == WISP_OK);
    for (int round = 0; round < 2; round++) {
      if (round) { /* new scales at the same address: twice the old ones (exact in f16 too) */
        for (size_t i = 0; i < (size_t)ROWS_B * (K / 32); i++) t.scales[i] *= 2;
        CHECK(mat_round_scales(&t));
      }
      CHECKF(be->prepare_matrix(be, &t.m) == WISP_OK, "%s", wisp_last_error());
      for (int k = 0; k < 2; k++) {
        const int n = k ? 7 : 1;
        float *x = acts_positive(n, K), *y = malloc(sizeof(float) * n * ROWS_B), *row = malloc(sizeof(float) * K);
        wisp_i8_act a = {0};
        CHECK(x && y && row && wisp_i8_act_reserve(&a, n, K));
        CHECKF(backend_product(be, &t.m, x, n, ROWS_B, y) == WISP_OK, "%s", wisp_last_error());
        /* the backend's int8 activations are the scalar quantizer's bytes (check_set) */
        a.layout = wisp_i8_layout_for(type, n);
        wisp_i8_kernels_scalar()->quantize(x, 0, n, &a);
        double worst = 0;
        for (int r = 0; r < ROWS_B; r++)
          for (int tok = 0; tok < n; tok++) {
            double want = i8 ? f64_product(&t.m16, r, &a, NULL, tok, row) : f64_product(&t.m, r, NULL, x, tok, row);
            worst = fmax(worst, fabs(y[(size_t)tok * ROWS_B + r] - want) / want);
          }
        CHECKF(worst < 1e-5, "%s %s, %d tokens, prepared %d times: %g from the product with %s scales",
               i8 ? "integer" : "exact", wisp_wtype_name(type), n, round + 1, worst, i8 ? "f16" : "f32");
        wisp_i8_act_free(&a);
        free(x), free(y), free(row);
      }
    }
    be->destroy(be);
    mat_free(&t);
  }
}

TEST(cpu_i8_picks_a_runnable_set) {
  const wisp_i8_kernels *sets[4];
  int can[4];
  int n = wisp_i8_kernels_all(sets, can, 4);
  const wisp_i8_kernels *best = wisp_i8_kernels_get();
  printf("  cpu_i8: this CPU runs");
  int found = 0;
  for (int i = 0; i < n; i++) {
    printf(" %s=%s", sets[i]->name, can[i] ? "yes" : "no");
    if (sets[i] == best) {
      found = 1;
      CHECKF(can[i], "picked %s, which this CPU cannot run", best->name);
      for (int j = 0; j < i; j++) CHECKF(!can[j], "picked %s though %s is better and runs", best->name, sets[j]->name);
    }
  }
  printf("; picked %s\n", best->name);
  CHECKF(found, "picked a set that is not in the list");
}

/* ---- through the plan ---- */

/* The throughput profile's plan names the integer products on an AVX2 CPU
 * and the backend runs them (prefill of several tokens and decode of one):
 * the logits move by the activation rounding, a little, against the
 * default plan's exact f32-activation products. */
TEST(cpu_i8_throughput_plan_runs_integer_products) {
  wisp_model *m = NULL;
  wisp_session *s = NULL;
  CHECK(wisp_model_open(fixture_small_model(), &m) == WISP_OK);
  const int32_t ids[6] = {87, 105, 115, 112, 32, 105};
  float out[2][2][512]; /* [profile][prefill, decode] */
  const char *profiles[2] = {"default", "throughput"};
  for (int p = 0; p < 2; p++) {
    wisp_session_options o = {.backend = "cpu", .threads = 2, .profile = profiles[p]};
    CHECKF(wisp_session_new(m, &o, &s) == WISP_OK, "%s", wisp_last_error());
    if (!wisp_session_plan(s)->device.has_avx2) {
      wisp_session_free(s);
      wisp_model_close(m);
      SKIP("no AVX2: the registry keeps the exact products everywhere (not run)");
    }
    const wisp_matrix *w = wisp_graph_matrix(&s->graph, 3, "mlp.down");
    const char *want = p ? "q4_i8" : "q4_avx2";
    CHECKF(!strcmp(w->choice[WISP_PHASE_PREFILL].variant, want) && !strcmp(w->choice[WISP_PHASE_DECODE].variant, want),
           "%s profile: mlp.down runs %s / %s, want %s", profiles[p], w->choice[0].variant, w->choice[1].variant, want);
    CHECK(wisp_session_eval(s, ids, 6, out[p][0]) == WISP_OK);
    wisp_session_free(s);
    CHECK(wisp_session_new(m, &o, &s) == WISP_OK);
    for (int i = 0; i < 6; i++) CHECK(wisp_session_eval(s, ids + i, 1, out[p][1]) == WISP_OK);
    wisp_session_free(s);
  }
  wisp_model_close(m);
  for (int ph = 0; ph < 2; ph++) {
    float worst = 0, scale = 0;
    for (int i = 0; i < 512; i++) {
      worst = fmaxf(worst, fabsf(out[0][ph][i] - out[1][ph][i]));
      scale = fmaxf(scale, fabsf(out[0][ph][i]));
    }
    printf("  cpu_i8: %s logits, int8 vs exact: max|diff| %.3g of max|logit| %.3g\n", ph ? "decode" : "prefill", worst,
           scale);
    CHECKF(worst > 0, "%s: the throughput plan gave the exact logits: the integer products did not run",
           ph ? "decode" : "prefill");
    CHECKF(worst <= 0.05f * scale, "%s: int8 logits differ by %g of max|logit| %g", ph ? "decode" : "prefill", worst,
           scale);
  }
}

/* rmsnorm then an integer product of its output as one op (rmsnorm_matmul,
 * the graph pass's rmsnorm+matmul): the backend runs the norm inside the
 * product's quantization (one pass a token). The product and the normalized
 * rows must be bit for bit those of the two ops one after the other, for a
 * decode row and a prefill, with 3 threads; and the op timer must show the
 * fused kind, so that the fusion is known to have run. */
TEST(cpu_i8_rmsnorm_fused_into_the_product_is_bit_identical) {
  enum { ROWS_F = 300, K = 512 };
  const int ntok[] = {1, 37};
  test_mat t;
  CHECK(mat_make(&t, WISP_W_Q4K, ROWS_F, K));
  for (int ph = 0; ph < 2; ph++) snprintf(t.m.choice[ph].variant, sizeof t.m.choice[ph].variant, "q4k_i8");
  wisp_backend *be = NULL;
  CHECK(wisp_cpu_backend_new(3, &be) == WISP_OK);
  CHECKF(be->prepare_matrix(be, &t.m) == WISP_OK, "%s", wisp_last_error());
  float wv[K];
  for (int i = 0; i < K; i++) wv[i] = 0.5f + (float)(i % 7) / 7.0f;
  wisp_vector w = {.n = K, .data = wv};
  for (int c = 0; c < 2; c++) {
    const int n = ntok[c];
    float *x = acts_make(n, K), *xa = malloc(sizeof(float) * n * K), *xb = malloc(sizeof(float) * n * K);
    float *ya = malloc(sizeof(float) * n * ROWS_F), *yb = malloc(sizeof(float) * n * ROWS_F);
    wisp_buf *bx = be->buf_new(be, (size_t)n * K), *bn = be->buf_new(be, (size_t)n * K);
    wisp_buf *by = be->buf_new(be, (size_t)n * ROWS_F);
    CHECK(x && xa && xb && ya && yb && bx && bn && by);
    be->buf_write(be, bx, 0, (size_t)n * K, x);
    /* fused */
    wisp_cpu_backend_time_ops(be, 1);
    be->rmsnorm_matmul(be, bx, &w, 1e-5f, n, bn, &t.m, by, 0);
    wisp_cpu_op_time ops[32];
    int nops = wisp_cpu_backend_op_times(be, ops, 32), fused = 0, alone = 0;
    for (int i = 0; i < nops; i++) {
      fused += !strcmp(ops[i].op, "rmsnorm+i8.quantize") ? (int)ops[i].calls : 0;
      alone += !strcmp(ops[i].op, "rmsnorm") ? (int)ops[i].calls : 0;
    }
    wisp_cpu_backend_time_ops(be, 0);
    be->buf_read(be, by, 0, (size_t)n * ROWS_F, ya);
    be->buf_read(be, bn, 0, (size_t)n * K, xa);
    /* the two ops */
    be->buf_zero(be, bn);
    be->rmsnorm(be, bx, &w, 1e-5f, n, K, bn);
    be->buf_read(be, bn, 0, (size_t)n * K, xb);
    be->matmul(be, &t.m, bn, 0, n, by, 0);
    be->buf_read(be, by, 0, (size_t)n * ROWS_F, yb);
    CHECK(be->sync(be) == WISP_OK);
    CHECKF(fused == 1 && alone == 0, "%d tokens: fused %d, alone %d", n, fused, alone);
    CHECKF(!memcmp(xa, xb, sizeof(float) * n * K), "%d tokens: normalized rows differ", n);
    CHECKF(!memcmp(ya, yb, sizeof(float) * n * ROWS_F), "%d tokens: products differ", n);
    be->buf_free(be, bx);
    be->buf_free(be, bn);
    be->buf_free(be, by);
    free(x), free(xa), free(xb), free(ya), free(yb);
  }
  be->destroy(be);
  mat_free(&t);
}

/* The fusion is the graph pass's: in a one-token step each rmsnorm the
 * pass marked rmsnorm+matmul runs inside its integer product (the step
 * graph calls rmsnorm_matmul), and so does the final norm with the head;
 * the backend holds nothing back, so a norm the pass left alone runs alone. */
TEST(cpu_i8_step_fuses_the_norms_the_graph_pass_marked) {
  wisp_model *m = NULL;
  wisp_session *s = NULL;
  CHECK(wisp_model_open(fixture_small_model(), &m) == WISP_OK);
  wisp_session_options o = {.backend = "cpu", .threads = 1, .profile = "throughput"};
  CHECKF(wisp_session_new(m, &o, &s) == WISP_OK, "%s", wisp_last_error());
  if (!wisp_session_plan(s)->device.has_avx2) {
    wisp_session_free(s);
    wisp_model_close(m);
    SKIP("no AVX2: the plan keeps the exact products (no integer product to fuse into)");
  }
  int marked = 0, norms = 0;
  for (int i = 0; i < s->graph.n_nodes; i++) {
    marked += (s->graph.nodes[i].fused & WISP_FUSE_NORM_MATMUL) != 0;
    norms += s->graph.nodes[i].op == WISP_GOP_RMSNORM;
  }
  const int32_t id = 87;
  float logits[512];
  wisp_session_time_ops(s, 1);
  CHECK(wisp_session_eval(s, &id, 1, logits) == WISP_OK);
  wisp_cpu_op_time ops[32];
  int nops = wisp_session_op_times(s, ops, 32), fused = 0, alone = 0;
  for (int i = 0; i < nops; i++) {
    fused += !strcmp(ops[i].op, "rmsnorm+i8.quantize") ? (int)ops[i].calls : 0;
    alone += !strcmp(ops[i].op, "rmsnorm") ? (int)ops[i].calls : 0;
  }
  wisp_session_free(s);
  wisp_model_close(m);
  CHECKF(marked > 0 && fused == marked + 1 && alone == norms - marked, "%d norms, %d marked: %d fused, %d alone",
         norms, marked, fused, alone);
}

/* ---- f16 weights: the Q8_0 copy (f16_i8) ---- */

/* The copy wisp_i8_q8_0_of_f16 makes of an f16 matrix against a rounding
 * done here from the f16 values: per 32-block the f16 of max|w|/127 as
 * scale, round-to-nearest-even(w/d) as values; the same bytes. Rows: random
 * values; all zeros (d = 0, every value 0); a block with a single large
 * value and a block with one large value among small ones (it takes +-127,
 * the small ones round to a few steps); small values (scales near the
 * bottom of f16's normal range). Each value also lies within half a step of
 * its weight, or within a step where d rounded down made it saturate. */
TEST(cpu_i8_f16_q8_0_copy_matches_an_independent_rounding) {
  enum { R = 4, C = 96 };
  float w[R * C];
  for (int i = 0; i < R * C; i++) w[i] = rnd();
  for (int i = 0; i < C; i++) w[C + i] = 0;
  for (int i = 0; i < 64; i++) w[2 * C + i] = i < 32 ? 0 : 0.01f * rnd();
  w[2 * C + 5] = 3.7f;
  w[2 * C + 32 + 17] = -100.25f;
  for (int i = 0; i < C; i++) w[3 * C + i] *= 1e-3f;
  /* row 3's last block: d = 127/8 / 127 = 1/8 exactly and values at half
   * steps (k + 0.5) / 8, ties that go to the even integer */
  for (int i = 0; i < 32; i++) w[3 * C + 64 + i] = (float)((i % 9) - 4 + 0.5) / 8.0f * (i & 1 ? -1.0f : 1.0f);
  w[3 * C + 64 + 31] = 127.0f / 8.0f;
  uint8_t halves[R * C * 2], copy[R * (C / 32) * WISP_Q8_0_BYTES];
  wisp_quantize_f16(w, R, C, halves);
  const wisp_matrix m = {.type = WISP_W_F16, .rows = R, .cols = C, .q = halves};
  CHECK(wisp_i8_q8_0_of_f16(&m, copy));
  int same = 1;
  double worst_steps = 0;
  for (int r = 0; r < R; r++)
    for (int b = 0; b < C / 32; b++) {
      const uint8_t *blk = copy + ((size_t)r * (C / 32) + b) * WISP_Q8_0_BYTES;
      float v[32], amax = 0;
      for (int e = 0; e < 32; e++) {
        const uint8_t *h = halves + 2 * ((size_t)r * C + 32 * b + e);
        v[e] = wisp_f16_to_f32((uint16_t)(h[0] | h[1] << 8));
        amax = fmaxf(amax, fabsf(v[e]));
      }
      const uint16_t hd = wisp_f32_to_f16(amax / 127.0f);
      const float d = wisp_f16_to_f32(hd);
      same &= blk[0] == (hd & 0xff) && blk[1] == hd >> 8;
      for (int e = 0; e < 32; e++) {
        float q = d > 0 ? nearbyintf(v[e] / d) : 0;
        q = fminf(127, fmaxf(-127, q));
        const int8_t got = (int8_t)blk[2 + e];
        same &= got == (int8_t)q;
        if (d > 0) {
          const double steps = fabs((double)v[e] - (double)d * got) / d;
          if (abs(got) < 127) worst_steps = fmax(worst_steps, steps);
          else CHECKF(steps <= 1.0, "row %d block %d: a saturated value is %g steps off", r, b, steps);
        }
      }
    }
  CHECKF(same, "the Q8_0 copy differs from the rounding of the f16 weights");
  CHECKF(worst_steps <= 0.5 + 1e-4, "a Q8_0 value is %g steps from its weight", worst_steps);
  for (int i = 0; i < (C / 32) * WISP_Q8_0_BYTES; i++) CHECKF(copy[(C / 32) * WISP_Q8_0_BYTES + i] == 0, "zero row byte %d", i);
  /* the single large values take the full range */
  CHECK((int8_t)copy[2 * (C / 32) * WISP_Q8_0_BYTES + 2 + 5] == 127);
  CHECK((int8_t)copy[(2 * (C / 32) + 1) * WISP_Q8_0_BYTES + 2 + 17] == -127);
  const uint8_t *ties = copy + (3 * (C / 32) + 2) * WISP_Q8_0_BYTES;
  CHECK(wisp_f16_to_f32((uint16_t)(ties[0] | ties[1] << 8)) == 0.125f);
  CHECK((int8_t)ties[2 + 0] == -4 && (int8_t)ties[2 + 1] == 2 && (int8_t)ties[2 + 4] == 0 && (int8_t)ties[2 + 5] == -2);
}

/* Through the backend: an f16 matrix the plan gave f16_i8 runs the integer
 * product on the Q8_0 copy that prepare_matrix made (the scalar reference
 * on the test's own copy, up to f32 summation order; apart from the exact
 * f16 product, so the integer path is known to run), and a matrix prepared
 * again after its weights changed (the same address, another model) reads
 * the new ones. The default variant keeps the exact product. f16_i8 on a
 * Q8_0 matrix, or on a row that is not whole 32-blocks, stops prepare. */
TEST(cpu_backend_f16_i8_runs_on_the_q8_0_copy) {
  enum { ROWS_B = 37, K = 1248 };
  test_mat t;
  CHECK(mat_make(&t, WISP_W_F16, ROWS_B, K));
  wisp_backend *be = NULL;
  CHECK(wisp_cpu_backend_new(2, &be) == WISP_OK);
  const wisp_i8_kernels *ref = wisp_i8_kernels_scalar();
  float *scratch = malloc(WISP_I8_SCRATCH(K) * sizeof(float));
  CHECK(scratch);
  for (int round = 0; round < 3; round++) {
    const int i8 = round > 0;
    if (round == 2) { /* new weights at the same address: the halves negated (exact), the copy made again */
      for (size_t i = 0; i < (size_t)ROWS_B * K; i++) t.q[2 * i + 1] ^= 0x80;
      CHECK(wisp_i8_q8_0_of_f16(&t.f16, t.q8));
    }
    for (int ph = 0; ph < 2; ph++)
      snprintf(t.f16.choice[ph].variant, sizeof t.f16.choice[ph].variant, "%s", i8 ? "f16_i8" : "");
    CHECKF(be->prepare_matrix(be, &t.f16) == WISP_OK, "%s", wisp_last_error());
    for (int k = 0; k < 2; k++) {
      const int n = k ? 7 : 1;
      float *x = acts_make(n, K), *y = malloc(sizeof(float) * n * ROWS_B), *want = malloc(sizeof(float) * n * ROWS_B);
      float *row = malloc(sizeof(float) * K);
      wisp_i8_act a = {0};
      CHECK(x && y && want && row && wisp_i8_act_reserve(&a, n, K));
      CHECKF(backend_product(be, &t.f16, x, n, ROWS_B, y) == WISP_OK, "%s", wisp_last_error());
      a.layout = wisp_i8_layout_for(WISP_W_Q8_0, n);
      ref->quantize(x, 0, n, &a);
      ref->gemm(&t.m, NULL, 0, ROWS_B, &a, 0, n, want, ROWS_B, 0, scratch);
      double mag, to_i8, to_exact;
      product_distances(&t.f16, x, y, want, n, ROWS_B, row, &mag, &to_i8, &to_exact);
      if (i8) {
        CHECKF(to_i8 <= 1e-5 * mag, "f16_i8, %d tokens, prepared %d times: %g from the scalar integer product (max|y| %g)",
               n, round, to_i8, mag);
        CHECKF(to_exact > 1e-5 * mag, "f16_i8, %d tokens: the exact product (%g off): the integer path did not run", n,
               to_exact);
      } else {
        CHECKF(to_exact <= 1e-5 * mag, "exact f16, %d tokens: %g from the f64 product (max|y| %g)", n, to_exact, mag);
      }
      wisp_i8_act_free(&a);
      free(x), free(y), free(want), free(row);
    }
  }
  /* f16_i8 only on F16 matrices of whole 32-blocks */
  test_mat q;
  CHECK(mat_make(&q, WISP_W_Q8_0, 4, 64));
  snprintf(q.m.choice[0].variant, sizeof q.m.choice[0].variant, "f16_i8");
  CHECK(be->prepare_matrix(be, &q.m) != WISP_OK && strstr(wisp_last_error(), "f16_i8"));
  mat_free(&q);
  uint8_t halves[4 * 48 * 2] = {0};
  wisp_matrix odd = {.type = WISP_W_F16, .rows = 4, .cols = 48, .q = halves};
  snprintf(odd.choice[1].variant, sizeof odd.choice[1].variant, "f16_i8");
  CHECK(be->prepare_matrix(be, &odd) != WISP_OK && strstr(wisp_last_error(), "48 columns"));
  be->destroy(be);
  free(scratch);
  mat_free(&t);
}

/* The widening the backend makes F16 rows with (the exact path's prefill,
 * the Q8_0 copies): the best kernel set's row_f32 gives the scalar
 * reference's floats bit for bit, on every half (normal, subnormal, zero,
 * infinite; a NaN gives a NaN, F16C setting the quiet bit the scalar code
 * keeps as it is) and a row length with a tail after the last group of
 * eight; and the copy made with it has the bytes of wisp_i8_q8_0_of_f16's. */
TEST(cpu_f16_rows_widened_by_the_kernel_set_match_scalar) {
  enum { R = 8, C = 8200 }; /* 8 * 8200 = 65600 halves: each of the 65536 at least once */
  uint16_t *h = malloc(sizeof(uint16_t) * R * C);
  float *a = malloc(sizeof(float) * C), *b = malloc(sizeof(float) * C);
  CHECK(h && a && b);
  for (int i = 0; i < R * C; i++) h[i] = (uint16_t)(i * 40503u); /* odd multiplier: a permutation of the halves */
  const wisp_matrix m = {.type = WISP_W_F16, .rows = R, .cols = C, .q = (const uint8_t *)h};
  const wisp_cpu_kernels *k = wisp_cpu_kernels_get();
  printf("  cpu_i8: f16 rows widened by the %s kernel set\n", k->name);
  int same = 1;
  for (int r = 0; r < R; r++) {
    wisp_matrix_row_f32(&m, r, a);
    k->row_f32(&m, r, b);
    for (int i = 0; i < C; i++) same &= isnan(a[i]) ? isnan(b[i]) : !memcmp(&a[i], &b[i], sizeof(float));
  }
  CHECKF(same, "%s row_f32 of an f16 row differs from the scalar widening", k->name);
  /* finite weights for the copy: the halves' exponents kept below infinity */
  for (int i = 0; i < R * C; i++) h[i] = (uint16_t)(h[i] & 0xbbff);
  const size_t bytes = wisp_q8_0_bytes(R, 8192);
  uint8_t *q0 = malloc(bytes), *q1 = malloc(bytes);
  CHECK(q0 && q1);
  const wisp_matrix m32 = {.type = WISP_W_F16, .rows = R, .cols = 8192, .q = (const uint8_t *)h};
  CHECK(wisp_i8_q8_0_of_f16(&m32, q0));
  wisp_i8_q8_0_of_f16_rows(&m32, 0, R, q1, b, k->row_f32);
  CHECKF(!memcmp(q0, q1, bytes), "the Q8_0 copy made with %s row_f32 differs", k->name);
  free(h), free(a), free(b), free(q0), free(q1);
}

/* Through the backend: the ggml block types the integer products read in
 * their own bytes make no copy of the weights (wisp_cpu_backend_copy_bytes
 * stays 0 where an F16 matrix's Q8_0 copy counts), except the Q8_0 copy
 * that the prefill of Q6_K, Q3_K and Q2_K reads on a VNNI kernel set
 * (q8_0_lanes), made only when the plan gives the prefill an integer
 * product. One token (decode) equals the
 * scalar reference on the matrix's own bytes and is apart from the exact
 * product (so the integer path ran); seven tokens equal it on the own
 * bytes, or for those three types on a Q8_0 copy made here. */
TEST(cpu_backend_ggml_i8_reads_the_blocks_without_a_copy) {
  enum { ROWS_B = 37, K = 768 };
  static const wisp_wtype own[] = {WISP_W_Q4_1, WISP_W_Q5_1, WISP_W_Q5K, WISP_W_Q6K, WISP_W_Q3K, WISP_W_Q2K};
  const wisp_i8_kernels *ref = wisp_i8_kernels_scalar();
  float *scratch = malloc(WISP_I8_SCRATCH(K) * sizeof(float)), *row = malloc(sizeof(float) * K);
  uint8_t *q8 = malloc(wisp_q8_0_bytes(ROWS_B, K));
  CHECK(scratch && row && q8);
  for (size_t ti = 0; ti < sizeof own / sizeof own[0]; ti++) {
    const wisp_wtype type = own[ti];
    const int prefill_copy = wisp_i8_per16(type) && wisp_i8_kernels_get()->q8_0_lanes; /* as cpu_backend.c */
    test_mat t;
    CHECK(mat_make(&t, type, ROWS_B, K));
    CHECK(wisp_i8_q8_0_of_f16(&t.m, q8));
    const wisp_matrix copy_view = wisp_i8_q8_0_view(&t.m, q8);
    char variant[32];
    snprintf(variant, sizeof variant, "%s_i8", wisp_quant_traits_of(type)->name);
    wisp_backend *be = NULL;
    CHECK(wisp_cpu_backend_new(2, &be) == WISP_OK);
    for (int both = 0; both < 2; both++) { /* decode integer (prefill exact), then both phases */
      snprintf(t.m.choice[WISP_PHASE_DECODE].variant, sizeof t.m.choice[0].variant, "%s", variant);
      snprintf(t.m.choice[WISP_PHASE_PREFILL].variant, sizeof t.m.choice[0].variant, "%s", both ? variant : "");
      CHECKF(be->prepare_matrix(be, &t.m) == WISP_OK, "%s: %s", variant, wisp_last_error());
      const size_t want_copy = both && prefill_copy ? wisp_q8_0_bytes(ROWS_B, K) : 0;
      CHECKF(wisp_cpu_backend_copy_bytes(be) == want_copy, "%s (%s): the backend holds %zu bytes of copies, not %zu",
             variant, both ? "both phases" : "decode", wisp_cpu_backend_copy_bytes(be), want_copy);
      const int n = both ? 7 : 1;
      float *x = acts_make(n, K), *y = malloc(sizeof(float) * n * ROWS_B), *want = malloc(sizeof(float) * n * ROWS_B);
      wisp_i8_act a = {0};
      CHECK(x && y && want && wisp_i8_act_reserve(&a, n, K));
      CHECKF(backend_product(be, &t.m, x, n, ROWS_B, y) == WISP_OK, "%s", wisp_last_error());
      const wisp_matrix *reads = n > 1 && prefill_copy ? &copy_view : &t.m;
      a.layout = wisp_i8_layout_for(reads->type, n);
      a.per256 = wisp_i8_per256_for(reads->type, n); /* as cpu_backend.c: the per-16 types' decode */
      ref->quantize(x, 0, n, &a);
      ref->gemm(reads, NULL, 0, ROWS_B, &a, 0, n, want, ROWS_B, 0, scratch);
      double mag, to_i8, to_exact;
      product_distances(&t.m, x, y, want, n, ROWS_B, row, &mag, &to_i8, &to_exact);
      CHECKF(to_i8 <= 1e-5 * mag, "%s, %d tokens: %g from the scalar integer product (max|y| %g)", variant, n, to_i8, mag);
      CHECKF(to_exact > 1e-5 * mag, "%s, %d tokens: the exact product (%g off): the integer path did not run", variant, n,
             to_exact);
      wisp_i8_act_free(&a);
      free(x), free(y), free(want);
    }
    be->destroy(be);
    mat_free(&t);
  }
  /* the counter sees a copy where one is made: an F16 matrix's */
  test_mat f;
  CHECK(mat_make(&f, WISP_W_F16, 4, 64));
  wisp_backend *be = NULL;
  CHECK(wisp_cpu_backend_new(1, &be) == WISP_OK);
  for (int ph = 0; ph < 2; ph++) snprintf(f.f16.choice[ph].variant, sizeof f.f16.choice[ph].variant, "f16_i8");
  CHECK(be->prepare_matrix(be, &f.f16) == WISP_OK);
  CHECKF(wisp_cpu_backend_copy_bytes(be) == wisp_q8_0_bytes(4, 64), "an F16 matrix's copy counts %zu bytes",
         wisp_cpu_backend_copy_bytes(be));
  be->destroy(be);
  mat_free(&f);
  free(scratch), free(row), free(q8);
}
