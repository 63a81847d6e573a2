/* The ggml block types kept in their GGUF bytes (Q6_K, Q5_K, Q3_K, Q2_K,
 * Q4_0, Q4_1, Q5_0, Q5_1, BF16: format/qblocks.h), checked against a
 * decoder written here, element by element, from ggml's format description
 * (not from wisp's decoders): the quant table's rows and sizes, the
 * dequantization, every CPU kernel set's products and decoded rows, the
 * CPU backend under the plan's variant names (and its refusal of a
 * variant of another type), the WebGPU backend's products (one token,
 * several, rows of a batched step) and row gathers, and GGUF files holding
 * these types read back.
 * Blocks are random bytes with valid f16 scales; fixtures made by
 * llama-quantize come from tools/make-quant-fixtures.sh. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cpu/cpu_i8.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/webgpu/wgpu_backend.h"
#include "format/gguf.h"
#include "format/quant.h"
#include "format/tensor.h"
#include "test.h"
#include "webgpu_fixture.h"
#include "wisp.h"

typedef struct {
  wisp_wtype type;
  const char *name;
  uint32_t ggml; /* the GGUF type number */
  int block, bytes;
  int halves[2]; /* byte offsets of its f16 fields (-1: none) */
} blk_type;

static const blk_type k_types[] = {
    {WISP_W_Q6K, "q6k", 14, 256, 210, {208, -1}}, {WISP_W_Q5K, "q5k", 13, 256, 176, {0, 2}},
    {WISP_W_Q3K, "q3k", 11, 256, 110, {108, -1}}, {WISP_W_Q2K, "q2k", 10, 256, 84, {80, 82}},
    {WISP_W_Q4_0, "q4_0", 2, 32, 18, {0, -1}},    {WISP_W_Q4_1, "q4_1", 3, 32, 20, {0, 2}},
    {WISP_W_Q5_0, "q5_0", 6, 32, 22, {0, -1}},    {WISP_W_Q5_1, "q5_1", 7, 32, 24, {0, 2}},
    {WISP_W_BF16, "bf16", 30, 1, 2, {-1, -1}},
};
enum { N_TYPES = sizeof k_types / sizeof k_types[0] };

static uint32_t next_u32(uint64_t *s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return (uint32_t)(*s >> 33);
}

/* IEEE binary16 (normal or zero only: the test writes no others). */
static double half(const uint8_t *p) {
  unsigned h = (unsigned)(p[0] | p[1] << 8), e = h >> 10 & 31, m = h & 1023;
  double v = e ? ldexp(1024 + m, (int)e - 25) : ldexp(m, -24);
  return h & 0x8000 ? -v : v;
}

/* Element e of a block, from the format's description. */
static double ref_elem(wisp_wtype t, const uint8_t *b, int e) {
  const int j = e % 16; /* block-32 types: byte j of the nibbles */
  switch (t) {
    case WISP_W_Q4_0: return half(b) * (((e < 16 ? b[2 + j] : b[2 + j] >> 4) & 15) - 8);
    case WISP_W_Q4_1: return half(b) * ((e < 16 ? b[4 + j] : b[4 + j] >> 4) & 15) + half(b + 2);
    case WISP_W_Q5_0: {
      const uint32_t qh = (uint32_t)b[2] | (uint32_t)b[3] << 8 | (uint32_t)b[4] << 16 | (uint32_t)b[5] << 24;
      const int q = ((e < 16 ? b[6 + j] : b[6 + j] >> 4) & 15) + 16 * (int)(qh >> e & 1);
      return half(b) * (q - 16);
    }
    case WISP_W_Q5_1: {
      const uint32_t qh = (uint32_t)b[4] | (uint32_t)b[5] << 8 | (uint32_t)b[6] << 16 | (uint32_t)b[7] << 24;
      const int q = ((e < 16 ? b[8 + j] : b[8 + j] >> 4) & 15) + 16 * (int)(qh >> e & 1);
      return half(b) * q + half(b + 2);
    }
    case WISP_W_Q2K: {
      const int h = e / 128, shift = 2 * (e % 128 / 32), g = e % 32 / 16, l = e % 16;
      const int q = b[16 + 32 * h + 16 * g + l] >> shift & 3, s = b[e / 16];
      return half(b + 80) * (s & 15) * q - half(b + 82) * (s >> 4);
    }
    case WISP_W_Q3K: {
      const int h = e / 128, jj = e % 128 / 32, g = e % 32 / 16, l = e % 16, i = e / 16;
      const int low = b[32 + 32 * h + 16 * g + l] >> (2 * jj) & 3;
      const int hbit = b[16 * g + l] >> (4 * h + jj) & 1;
      const uint8_t *sc = b + 96;
      const int s6 = (i < 8 ? sc[i] & 15 : sc[i - 8] >> 4) + 16 * (sc[8 + i % 4] >> (2 * (i / 4)) & 3);
      return half(b + 108) * (s6 - 32) * (low - 4 * !hbit);
    }
    case WISP_W_Q5K: {
      const int sub = e / 32, c = e / 64, l = e % 32;
      const uint8_t *s = b + 4;
      const int sc = sub < 4 ? s[sub] & 63 : (s[sub + 4] & 15) | (s[sub - 4] >> 6) << 4;
      const int mn = sub < 4 ? s[sub + 4] & 63 : (s[sub + 4] >> 4) | (s[sub] >> 6) << 4;
      const int nib = sub % 2 ? b[48 + 32 * c + l] >> 4 : b[48 + 32 * c + l] & 15;
      const int q = nib + 16 * (b[16 + l] >> sub & 1);
      return half(b) * sc * q - half(b + 2) * mn;
    }
    case WISP_W_Q6K: {
      const int h = e / 128, k = e % 128 / 32, l = e % 32;
      const uint8_t lq = b[64 * h + 32 * (k & 1) + l];
      const int q = (k < 2 ? lq & 15 : lq >> 4) + 16 * (b[128 + 32 * h + l] >> (2 * k) & 3) - 32;
      return half(b + 208) * (int8_t)b[192 + e / 16] * q;
    }
    case WISP_W_BF16: {
      uint32_t u = (uint32_t)(b[0] | b[1] << 8) << 16;
      float f;
      memcpy(&f, &u, 4);
      return f;
    }
    default: return NAN;
  }
}

/* rows x cols of type t: random bytes, every f16 field a normal half in
 * [2^-10, 2) of random sign (scales positive), BF16 values in (-4, 4). */
static uint8_t *random_matrix(const blk_type *bt, int rows, int cols, uint64_t seed) {
  const size_t nblk = (size_t)rows * (size_t)(cols / bt->block);
  uint8_t *q = malloc(nblk * (size_t)bt->bytes);
  if (!q) return NULL;
  for (size_t i = 0; i < nblk * (size_t)bt->bytes; i++) q[i] = (uint8_t)next_u32(&seed);
  for (size_t k = 0; k < nblk; k++) {
    uint8_t *b = q + k * (size_t)bt->bytes;
    if (bt->type == WISP_W_BF16) {
      uint16_t v = (uint16_t)((next_u32(&seed) & 0x8000) | (uint32_t)(126 + next_u32(&seed) % 3) << 7 | (next_u32(&seed) & 127));
      b[0] = (uint8_t)v, b[1] = (uint8_t)(v >> 8);
      continue;
    }
    for (int f = 0; f < 2 && bt->halves[f] >= 0; f++) {
      const int minus = f == 1 && (bt->type == WISP_W_Q4_1 || bt->type == WISP_W_Q5_1) && next_u32(&seed) % 2;
      uint16_t h = (uint16_t)(minus << 15 | (5 + next_u32(&seed) % 11) << 10 | (next_u32(&seed) & 1023));
      b[bt->halves[f]] = (uint8_t)h, b[bt->halves[f] + 1] = (uint8_t)(h >> 8);
    }
  }
  return q;
}

static double ref_at(const blk_type *bt, const uint8_t *q, int cols, int r, int c) {
  const size_t blk = (size_t)r * (size_t)(cols / bt->block) + (size_t)(c / bt->block);
  return ref_elem(bt->type, q + blk * (size_t)bt->bytes, c % bt->block);
}

static int cols_of(const blk_type *bt) { return bt->block == 256 ? 768 : bt->block == 32 ? 224 : 100; }

TEST(ggml_blocks_table_and_dequant) {
  for (int t = 0; t < N_TYPES; t++) {
    const blk_type *bt = &k_types[t];
    const wisp_quant_traits *q = wisp_quant_traits_of(bt->type);
    CHECKF(q && !strcmp(q->name, bt->name) && !strcmp(q->weight_dtype, bt->name), "%s: no table row", bt->name);
    CHECKF(q->block == bt->block && q->block_bytes == bt->bytes && q->ggml_type == bt->ggml,
           "%s: block %d bytes %d ggml %u", bt->name, q->block, q->block_bytes, q->ggml_type);
    CHECK(!strcmp(wisp_wtype_name(bt->type), bt->name));
    size_t gb;
    CHECKF(wisp_ggml_block(bt->ggml, &gb) == bt->block && gb == (size_t)bt->bytes, "%s: GGUF block", bt->name);
    const int R = 3, C = cols_of(bt);
    CHECK(wisp_quant_bytes(bt->type, R, C) == (uint64_t)R * (uint64_t)(C / bt->block) * (uint64_t)bt->bytes);
    uint8_t *bytes = random_matrix(bt, R, C, 100 + (uint64_t)t);
    float *row = malloc(sizeof(float) * (size_t)C);
    CHECK(bytes && row);
    wisp_matrix m = {.type = bt->type, .rows = R, .cols = C, .q = bytes};
    for (int r = 0; r < R; r++) {
      wisp_matrix_row_f32(&m, r, row);
      for (int c = 0; c < C; c++) {
        const double want = ref_at(bt, bytes, C, r, c);
        CHECKF(isfinite(want) && fabs(row[c] - want) <= 1e-6 * fabs(want) + 1e-12, "%s row %d col %d: %.9g, want %.9g",
               bt->name, r, c, row[c], want);
      }
    }
    free(bytes);
    free(row);
  }
}

TEST(ggml_blocks_every_kernel_set) {
  const wisp_cpu_kernels *sets[8];
  int runnable[8];
  const int n_sets = wisp_cpu_kernels_all(sets, runnable, 8);
  for (int t = 0; t < N_TYPES; t++) {
    const blk_type *bt = &k_types[t];
    const int R = 5, C = cols_of(bt);
    uint8_t *bytes = random_matrix(bt, R, C, 300 + (uint64_t)t);
    float *x = malloc(sizeof(float) * (size_t)C), *row = malloc(sizeof(float) * (size_t)C);
    CHECK(bytes && x && row);
    uint64_t seed = 7 + (uint64_t)t;
    for (int c = 0; c < C; c++) x[c] = (float)((int)(next_u32(&seed) % 2001) - 1000) / 1000.0f;
    wisp_matrix m = {.type = bt->type, .rows = R, .cols = C, .q = bytes};
    for (int s = 0; s < n_sets; s++) {
      if (!runnable[s]) continue;
      for (int r = 0; r < R; r++) {
        double want = 0, mag = 0;
        for (int c = 0; c < C; c++) {
          const double w = ref_at(bt, bytes, C, r, c);
          want += w * x[c];
          mag += fabs(w * x[c]);
        }
        const float got = sets[s]->dot_blocks_row(&m, r, x);
        CHECKF(fabs(got - want) <= 1e-5 * mag, "%s set %s row %d: dot %.9g, want %.9g", bt->name, sets[s]->name, r, got,
               want);
        sets[s]->row_f32(&m, r, row);
        for (int c = 0; c < C; c++) {
          const double w = ref_at(bt, bytes, C, r, c);
          CHECKF(fabs(row[c] - w) <= 1e-6 * fabs(w) + 1e-12, "%s set %s row %d col %d: %.9g, want %.9g", bt->name,
                 sets[s]->name, r, c, row[c], w);
        }
      }
    }
    free(bytes), free(x), free(row);
  }
}

/* y = W x through the backend under one variant, n tokens, both the
 * product and (decode) the rows of a batched step: the worst error over
 * the sum of |w x| (i8: over the bound of rounding weights and activations
 * to 8 bits per 32-block, each off by at most half a step of amax/127,
 * counted twice). The weights W as the decoder written here reads m's
 * blocks (bt), or, with dec, those rows already decoded. */
static double backend_error_of(wisp_backend *be, const blk_type *bt, const float *dec, wisp_matrix *m, const float *x,
                               int n, int rows_op, int i8) {
  const int R = m->rows, C = m->cols;
  wisp_buf *bx = be->buf_new(be, (size_t)n * C), *by = be->buf_new(be, (size_t)n * R);
  float *y = malloc(sizeof(float) * (size_t)n * R);
  double worst = INFINITY;
  if (!bx || !by || !y) goto out;
  be->buf_write(be, bx, 0, (size_t)n * C, x);
  if (rows_op) be->matmul_rows(be, m, bx, n, by, 0);
  else be->matmul(be, m, bx, 0, n, by, 0);
  be->buf_read(be, by, 0, (size_t)n * R, y);
  if (be->sync(be) != WISP_OK) goto out;
  worst = 0;
  for (int tok = 0; tok < n; tok++)
    for (int r = 0; r < R; r++) {
      double want = 0, mag = 0, bound = 0;
      for (int c0 = 0; c0 < C; c0 += 32) {
        double aw = 0, ax = 0, sw = 0, sx = 0;
        for (int c = c0; c < c0 + 32 && c < C; c++) {
          const double w = dec ? dec[(size_t)r * C + c] : ref_at(bt, m->q, C, r, c), xv = x[(size_t)tok * C + c];
          want += w * xv;
          mag += fabs(w * xv);
          aw = fmax(aw, fabs(w)), ax = fmax(ax, fabs(xv)), sw += fabs(w), sx += fabs(xv);
        }
        bound += (aw * sx + ax * sw) / 127;
      }
      const double tol = (i8 ? bound : 0) + 1e-5 * mag + 1e-30;
      worst = fmax(worst, fabs(y[(size_t)tok * R + r] - want) / tol);
    }
out:
  if (bx) be->buf_free(be, bx);
  if (by) be->buf_free(be, by);
  free(y);
  return worst;
}

static double backend_error_i8(wisp_backend *be, const blk_type *bt, wisp_matrix *m, const float *x, int n, int rows_op,
                               int i8) {
  return backend_error_of(be, bt, NULL, m, x, n, rows_op, i8);
}

static double backend_error(wisp_backend *be, const blk_type *bt, wisp_matrix *m, const float *x, int n, int rows_op) {
  return backend_error_i8(be, bt, m, x, n, rows_op, 0) * 1e-5;
}

TEST(ggml_blocks_cpu_backend) {
  const int have_avx2 = wisp_cpu_kernels_get()->avx2;
  for (int t = 0; t < N_TYPES; t++) {
    const blk_type *bt = &k_types[t];
    const int R = 37, C = cols_of(bt), N = 5;
    uint8_t *bytes = random_matrix(bt, R, C, 500 + (uint64_t)t);
    float *x = malloc(sizeof(float) * (size_t)N * C);
    CHECK(bytes && x);
    uint64_t seed = 9 + (uint64_t)t;
    for (int i = 0; i < N * C; i++) x[i] = (float)((int)(next_u32(&seed) % 2001) - 1000) / 1000.0f;
    static const char *const kinds[3] = {"scalar", "avx2", "i8"};
    for (int v = 0; v < 3; v++) {
      if (v == 1 && !have_avx2) continue;
      if (v == 2 && C % 32) continue; /* the Q8_0 copy needs whole 32-blocks */
      wisp_matrix m = {.type = bt->type, .rows = R, .cols = C, .q = bytes};
      for (int ph = 0; ph < 2; ph++)
        snprintf(m.choice[ph].variant, sizeof m.choice[ph].variant, "%s_%s", bt->name, kinds[v]);
      wisp_backend *be = NULL;
      CHECK(wisp_cpu_backend_new(2, &be) == WISP_OK);
      CHECKF(be->prepare_matrix(be, &m) == WISP_OK, "%s: %s", m.choice[0].variant, wisp_last_error());
      /* errors over their tolerance (1e-5 of sum |w x|, plus the rounding bound for i8) */
      const double e1 = backend_error_i8(be, bt, &m, x, 1, 0, v == 2), en = backend_error_i8(be, bt, &m, x, N, 0, v == 2);
      const double er = v == 2 ? 0 : backend_error_i8(be, bt, &m, x, N, 1, 0); /* matmul_rows runs exact kernels */
      be->destroy(be);
      CHECKF(e1 < 1 && en < 1 && er < 1, "%s: one token %g, %d tokens %g, rows %g (of the tolerance)", m.choice[0].variant,
             e1, N, en, er);
    }
    /* a kernel of another weight type is refused before any product */
    wisp_matrix m = {.type = bt->type, .rows = R, .cols = C, .q = bytes};
    snprintf(m.choice[0].variant, sizeof m.choice[0].variant, "%s", "q4k_scalar");
    wisp_backend *be = NULL;
    CHECK(wisp_cpu_backend_new(1, &be) == WISP_OK);
    const wisp_status st = be->prepare_matrix(be, &m);
    be->destroy(be);
    CHECKF(st != WISP_OK && strstr(wisp_last_error(), "q4k_scalar"), "%s: q4k_scalar accepted (%s)", bt->name,
           wisp_last_error());
    free(bytes), free(x);
  }
}

/* y = W x on the CPU backend with one variant for both phases. */
static int cpu_product(wisp_matrix *m, const char *variant, const float *x, int n, float *y) {
  for (int ph = 0; ph < 2; ph++) snprintf(m->choice[ph].variant, sizeof m->choice[ph].variant, "%s", variant);
  wisp_backend *be = NULL;
  if (wisp_cpu_backend_new(2, &be) != WISP_OK) return 0;
  int ok = be->prepare_matrix(be, m) == WISP_OK;
  wisp_buf *bx = be->buf_new(be, (size_t)n * m->cols), *by = be->buf_new(be, (size_t)n * m->rows);
  if (ok && bx && by) {
    be->buf_write(be, bx, 0, (size_t)n * m->cols, x);
    be->matmul(be, m, bx, 0, n, by, 0);
    be->buf_read(be, by, 0, (size_t)n * m->rows, y);
    ok = be->sync(be) == WISP_OK;
  } else {
    ok = 0;
  }
  if (bx) be->buf_free(be, bx);
  if (by) be->buf_free(be, by);
  be->destroy(be);
  return ok;
}

/* Q4_0's integer product reads the file's blocks as wisp Q4 (nibbles put
 * in Q4's order, the f16 scales as stored): the very numbers of the same
 * values stored as Q4 (f32 scales = the f16 widened) through q4_i8, one
 * token and several, bit for bit. */
TEST(ggml_blocks_q4_0_i8_is_q4_i8) {
  const blk_type *bt = NULL;
  for (int t = 0; t < N_TYPES; t++)
    if (k_types[t].type == WISP_W_Q4_0) bt = &k_types[t];
  CHECK(bt != NULL);
  const int R = 37, C = 96, N = 5, nb = C / 32;
  uint8_t *bytes = random_matrix(bt, R, C, 4242), *nib = malloc((size_t)R * C / 2);
  float *scales = malloc(sizeof(float) * (size_t)R * nb), *x = malloc(sizeof(float) * (size_t)N * C);
  float *y0 = malloc(sizeof(float) * (size_t)N * R), *y1 = malloc(sizeof(float) * (size_t)N * R);
  CHECK(bytes && nib && scales && x && y0 && y1);
  for (int b = 0; b < R * nb; b++) {
    const uint8_t *blk = bytes + (size_t)b * 18;
    scales[b] = wisp_f16_to_f32((uint16_t)(blk[0] | blk[1] << 8));
    for (int k = 0; k < 16; k++) { /* Q4: elements 2k, 2k+1 in byte k */
      const int e0 = 2 * k, e1 = 2 * k + 1;
      const int q0 = e0 < 16 ? blk[2 + e0] & 15 : blk[2 + e0 - 16] >> 4, q1 = e1 < 16 ? blk[2 + e1] & 15 : blk[2 + e1 - 16] >> 4;
      nib[(size_t)b * 16 + k] = (uint8_t)(q0 | q1 << 4);
    }
  }
  uint64_t seed = 77;
  for (int i = 0; i < N * C; i++) x[i] = (float)((int)(next_u32(&seed) % 2001) - 1000) / 1000.0f;
  for (int n = 1; n <= N; n += N - 1) {
    wisp_matrix q40 = {.type = WISP_W_Q4_0, .rows = R, .cols = C, .q = bytes};
    wisp_matrix q4 = {.type = WISP_W_Q4, .rows = R, .cols = C, .q = nib, .scales = scales};
    CHECKF(cpu_product(&q40, "q4_0_i8", x, n, y0), "q4_0_i8: %s", wisp_last_error());
    CHECKF(cpu_product(&q4, "q4_i8", x, n, y1), "q4_i8: %s", wisp_last_error());
    int differ = 0;
    for (int i = 0; i < n * R; i++) differ += memcmp(&y0[i], &y1[i], sizeof(float)) != 0;
    CHECKF(differ == 0, "%d tokens: %d of %d outputs differ between q4_0_i8 and q4_i8", n, differ, n * R);
  }
  free(bytes), free(nib), free(scales), free(x), free(y0), free(y1);
}

TEST(webgpu_ggml_blocks_products) {
  WEBGPU_OR_SKIP(d);
  /* the plain kernels, then the subgroup ones where the device has them */
  for (int pass = 0; pass < 2; pass++) {
  wisp_wgpu_backend_opts opts = {.device = d, .subgroups = pass ? -1 : 0};
  for (int t = 0; t < N_TYPES; t++) {
    const blk_type *bt = &k_types[t];
    const int R = 37, C = cols_of(bt), N = 5;
    uint8_t *bytes = random_matrix(bt, R, C, 900 + (uint64_t)t);
    float *x = malloc(sizeof(float) * (size_t)N * C), *e = malloc(sizeof(float) * 3 * (size_t)C);
    CHECK(bytes && x && e);
    uint64_t seed = 19 + (uint64_t)t;
    for (int i = 0; i < N * C; i++) x[i] = (float)((int)(next_u32(&seed) % 2001) - 1000) / 1000.0f;
    wisp_matrix m = {.type = bt->type, .rows = R, .cols = C, .q = bytes};
    wisp_backend *g = NULL;
    CHECKF(wisp_wgpu_backend_new(&opts, &g) == WISP_OK, "%s", wisp_last_error());
    CHECKF(g->prepare_matrix(g, &m) == WISP_OK, "%s: %s", bt->name, wisp_last_error());
    const double e1 = backend_error(g, bt, &m, x, 1, 0), en = backend_error(g, bt, &m, x, N, 0);
    const double er = backend_error(g, bt, &m, x, 3, 1);
    /* rows 3, 0 and 36 gathered (the embedding) */
    const int32_t tok[3] = {3, 0, 36};
    wisp_buf *be = g->buf_new(g, 3 * (size_t)C);
    CHECK(be);
    g->embed(g, &m, tok, 3, be);
    g->buf_read(g, be, 0, 3 * (size_t)C, e);
    const wisp_status st = g->sync(g);
    g->buf_free(g, be);
    g->destroy(g);
    CHECKF(st == WISP_OK, "%s: %s", bt->name, wisp_last_error());
    CHECKF(e1 < 1e-5 && en < 1e-5 && er < 1e-5, "%s on WebGPU (%s): one token %g, %d tokens %g, rows %g", bt->name,
           pass ? "subgroups" : "plain", e1, N, en, er);
    for (int k = 0; k < 3; k++)
      for (int c = 0; c < C; c++) {
        const double want = ref_at(bt, bytes, C, tok[k], c);
        CHECKF(fabs(e[(size_t)k * C + c] - want) <= 1e-6 * fabs(want) + 1e-12, "%s gather row %d col %d: %.9g, want %.9g",
               bt->name, tok[k], c, e[(size_t)k * C + c], want);
      }
    free(bytes), free(x), free(e);
  }
  }
}

TEST(ggml_blocks_gguf_read) {
  /* one tensor of every type in a GGUF file, read back as f32 */
  wisp_gguf_writer *w = wisp_gguf_writer_new();
  uint8_t *bytes[N_TYPES] = {0};
  CHECK(w);
  for (int t = 0; t < N_TYPES; t++) {
    const blk_type *bt = &k_types[t];
    const int R = 2, C = cols_of(bt);
    bytes[t] = random_matrix(bt, R, C, 700 + (uint64_t)t);
    CHECK(bytes[t]);
    const uint64_t ne[2] = {(uint64_t)C, (uint64_t)R};
    char name[32];
    snprintf(name, sizeof name, "t.%s", bt->name);
    CHECK(wisp_gguf_add_tensor(w, name, 2, ne, bt->ggml, bytes[t], (size_t)R * (size_t)(C / bt->block) * (size_t)bt->bytes) ==
          WISP_OK);
  }
  char path[512];
  snprintf(path, sizeof path, "%s/blocks.gguf", test_tmpdir());
  CHECKF(wisp_gguf_writer_write(w, path) == WISP_OK, "%s", wisp_last_error());
  wisp_gguf_writer_free(w);
  wisp_gguf *g = NULL;
  CHECKF(wisp_gguf_open(path, &g) == WISP_OK, "%s", wisp_last_error());
  for (int t = 0; t < N_TYPES; t++) {
    const blk_type *bt = &k_types[t];
    char name[32];
    snprintf(name, sizeof name, "t.%s", bt->name);
    const wisp_gguf_tensor *gt = wisp_gguf_tensor_find(g, name);
    CHECKF(gt && gt->type == bt->ggml, "%s: not found", name);
    float *out = malloc(sizeof(float) * gt->numel);
    CHECK(out && wisp_gguf_read_f32(g, gt, out) == WISP_OK);
    const int C = cols_of(bt);
    for (uint64_t i = 0; i < gt->numel; i++) {
      const double want = ref_at(bt, bytes[t], C, (int)(i / (uint64_t)C), (int)(i % (uint64_t)C));
      CHECKF(fabs(out[i] - want) <= 1e-6 * fabs(want) + 1e-12, "%s element %llu: %.9g, want %.9g", name,
             (unsigned long long)i, out[i], want);
    }
    free(out);
    free(bytes[t]);
  }
  wisp_gguf_close(g);
}

/* ---- fixtures made by llama.cpp's llama-quantize (tools/make-quant-fixtures.sh) ---- */

#define FIXTURES "tests/data/quant/"

static uint8_t *read_all(const char *name, size_t want) {
  char path[256];
  snprintf(path, sizeof path, FIXTURES "%s", name);
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  uint8_t *b = malloc(want + 1);
  size_t got = b ? fread(b, 1, want + 1, f) : 0;
  fclose(f);
  if (got != want) {
    free(b);
    return NULL;
  }
  return b;
}

/* The RMS error a type's rounding of random weights stays under, relative
 * to the weights' RMS, by its bits (well above what each type measures). */
static double rms_bound(int bits) {
  return bits <= 2 ? 0.6 : bits == 3 ? 0.3 : bits == 4 ? 0.12 : bits == 5 ? 0.06 : bits == 6 ? 0.03 : bits == 8 ? 0.01 : 0.008;
}

/* The types whose integer prefill reads a Q8_0 copy (decode: their own
 * bytes) on the kernel set the backend picks: cpu_backend.c's
 * i8_prefill_through_q8_0. */
static int prefill_through_q8_0(wisp_wtype t) { return wisp_i8_per16(t) && wisp_i8_kernels_get()->q8_0_lanes; }

/* The integer product (TYPE_i8) of fixture matrix m through the CPU
 * backend, one token and three of x: against the scalar integer reference
 * on the same bytes (for the three tokens of Q6_K, Q3_K and Q2_K: on a
 * Q8_0 copy made here; the same integers, up to f32 summation order: within 1e-5 of
 * sum |w x|) and against the exact product of the decoded rows within the
 * bound of the int8 rounding (backend_error_of: the copy's rounding of the
 * weights is within it too). Returns the worst error over its tolerance
 * (< 1 passes), or INFINITY when the product did not run; *copy gets the
 * backend's copy bytes. */
static double fixture_i8_error(wisp_matrix *m, const char *name, const float *x, size_t *copy) {
  const int R = m->rows, C = m->cols;
  for (int ph = 0; ph < 2; ph++) snprintf(m->choice[ph].variant, sizeof m->choice[ph].variant, "%s_i8", name);
  wisp_backend *be = NULL;
  float *dec = malloc(sizeof(float) * (size_t)R * C), *want = malloc(sizeof(float) * 3 * (size_t)R);
  float *y = malloc(sizeof(float) * 3 * (size_t)R), *scratch = malloc(sizeof(float) * WISP_I8_SCRATCH(C));
  uint8_t *q8 = malloc(wisp_q8_0_bytes(R, C));
  wisp_i8_act a = {0};
  double worst = INFINITY;
  if (!dec || !want || !y || !scratch || !q8 || !wisp_i8_q8_0_of_f16(m, q8) || wisp_cpu_backend_new(2, &be) != WISP_OK)
    goto out;
  const wisp_matrix copy_view = wisp_i8_q8_0_view(m, q8);
  if (be->prepare_matrix(be, m) != WISP_OK) goto out;
  *copy = wisp_cpu_backend_copy_bytes(be);
  for (int r = 0; r < R; r++) wisp_matrix_row_f32(m, r, dec + (size_t)r * C);
  worst = 0;
  for (int k = 0; k < 2; k++) {
    const int n = k ? 3 : 1;
    worst = fmax(worst, backend_error_of(be, NULL, dec, m, x, n, 0, 1));
    wisp_buf *bx = be->buf_new(be, (size_t)n * C), *by = be->buf_new(be, (size_t)n * R);
    if (!bx || !by || !wisp_i8_act_reserve(&a, n, C)) {
      worst = INFINITY;
      break;
    }
    be->buf_write(be, bx, 0, (size_t)n * C, x);
    be->matmul(be, m, bx, 0, n, by, 0);
    be->buf_read(be, by, 0, (size_t)n * R, y);
    const int ok = be->sync(be) == WISP_OK;
    be->buf_free(be, bx), be->buf_free(be, by);
    if (!ok) {
      worst = INFINITY;
      break;
    }
    const wisp_matrix *ref = n > 1 && prefill_through_q8_0(m->type) ? &copy_view : m;
    a.layout = wisp_i8_layout_for(ref->type, n);
    a.per256 = wisp_i8_per256_for(ref->type, n); /* as cpu_backend.c: the per-16 types' decode */
    wisp_i8_kernels_scalar()->quantize(x, 0, n, &a);
    wisp_i8_kernels_scalar()->gemm(ref, NULL, 0, R, &a, 0, n, want, R, 0, scratch);
    for (int t = 0; t < n; t++)
      for (int r = 0; r < R; r++) {
        double mag = 0;
        for (int c = 0; c < C; c++) mag += fabs(dec[(size_t)r * C + c] * x[(size_t)t * C + c]);
        worst = fmax(worst, fabs(y[(size_t)t * R + r] - want[(size_t)t * R + r]) / (1e-5 * mag + 1e-30));
      }
  }
out:
  if (be) be->destroy(be);
  wisp_i8_act_free(&a);
  free(dec), free(want), free(y), free(scratch), free(q8);
  return worst;
}

TEST(ggml_blocks_llama_quantize_fixtures) {
  FILE *list = fopen(FIXTURES "fixtures.txt", "r");
  CHECKF(list != NULL, "no " FIXTURES "fixtures.txt (tools/make-quant-fixtures.sh makes them)");
  char file[64];
  unsigned type;
  int rows, cols, n = 0, n_i8 = 0;
  float *src = NULL;
  while (fscanf(list, "%63s %u %d %d", file, &type, &rows, &cols) == 4) {
    CHECKF(rows > 0 && rows <= 256 && cols > 0 && cols <= 4096, "%s: %d x %d", file, rows, cols);
    if (type == WISP_GGML_F32) { /* the weights llama-quantize started from; listed first */
      free(src);
      src = (float *)read_all(file, (size_t)rows * (size_t)cols * 4);
      CHECKF(src != NULL, "%s: missing or not %d x %d f32", file, rows, cols);
      continue;
    }
    CHECKF(src != NULL, "%s: fixtures.txt names no f32.bin before it", file);
    int nt;
    const wisp_quant_traits *tab = wisp_quant_table(&nt), *q = NULL;
    for (int i = 0; i < nt; i++)
      if (tab[i].ggml_type == type && tab[i].n_planes == 1) q = &tab[i];
    CHECKF(q != NULL, "%s: ggml type %u is not a wisp matrix type", file, type);
    const size_t bytes = (size_t)wisp_quant_bytes(q->type, rows, cols);
    uint8_t *w = read_all(file, bytes);
    CHECKF(w != NULL, "%s: missing or not %zu bytes", file, bytes);
    wisp_matrix m = {.type = q->type, .rows = rows, .cols = cols, .q = w};
    const blk_type *bt = NULL;
    for (int t = 0; t < N_TYPES; t++)
      if (k_types[t].type == q->type) bt = &k_types[t];
    float *row = malloc(sizeof(float) * (size_t)cols), *x = malloc(sizeof(float) * (size_t)cols * 3);
    CHECK(row && x);
    uint64_t seed = 77;
    for (int i = 0; i < cols * 3; i++) x[i] = (float)((int)(next_u32(&seed) % 2001) - 1000) / 1000.0f;
    double err2 = 0, w2 = 0;
    for (int r = 0; r < rows; r++) {
      wisp_matrix_row_f32(&m, r, row);
      for (int c = 0; c < cols; c++) {
        if (bt) { /* llama.cpp's bytes through the decoder written here */
          const double want = ref_at(bt, w, cols, r, c);
          CHECKF(fabs(row[c] - want) <= 1e-6 * fabs(want) + 1e-12, "%s row %d col %d: %.9g, want %.9g", file, r, c,
                 row[c], want);
        }
        const double s = src[(size_t)r * cols + c];
        err2 += (row[c] - s) * (row[c] - s);
        w2 += s * s;
      }
    }
    const double rel = sqrt(err2 / (w2 + 1e-30));
    CHECKF(rel <= rms_bound(q->quant_bits), "%s (%s): RMS error %.4g of the f32 weights, over %.3g", file, q->name, rel,
           rms_bound(q->quant_bits));
    /* and the CPU backend's products of them (its own kernel choice) */
    wisp_backend *be = NULL;
    CHECK(wisp_cpu_backend_new(2, &be) == WISP_OK);
    CHECKF(be->prepare_matrix(be, &m) == WISP_OK, "%s: %s", file, wisp_last_error());
    for (int k = 0; k < 2; k++) {
      const int nx = k ? 3 : 1;
      wisp_buf *bx = be->buf_new(be, (size_t)nx * cols), *by = be->buf_new(be, (size_t)nx * rows);
      float *y = malloc(sizeof(float) * (size_t)nx * rows);
      CHECK(bx && by && y);
      be->buf_write(be, bx, 0, (size_t)nx * cols, x);
      be->matmul(be, &m, bx, 0, nx, by, 0);
      be->buf_read(be, by, 0, (size_t)nx * rows, y);
      CHECK(be->sync(be) == WISP_OK);
      for (int t = 0; t < nx; t++)
        for (int r = 0; r < rows; r++) {
          double want = 0, mag = 0;
          wisp_matrix_row_f32(&m, r, row);
          for (int c = 0; c < cols; c++) want += (double)row[c] * x[(size_t)t * cols + c], mag += fabs(row[c] * x[(size_t)t * cols + c]);
          CHECKF(fabs(y[(size_t)t * rows + r] - want) <= 1e-5 * mag, "%s: token %d row %d: %g, want %g", file, t, r,
                 y[(size_t)t * rows + r], want);
        }
      be->buf_free(be, bx), be->buf_free(be, by), free(y);
    }
    be->destroy(be);
    if (wisp_i8_supported(&m)) { /* every type whose integer product reads its own bytes */
      size_t copy = 1;
      const double e = fixture_i8_error(&m, q->name, x, &copy);
      CHECKF(e < 1, "%s: %s_i8 is %g of its tolerance from the scalar integer reference or the exact product", file,
             q->name, e);
      const size_t want_copy = prefill_through_q8_0(m.type) ? wisp_q8_0_bytes(rows, cols) : 0;
      CHECKF(copy == want_copy, "%s: %s_i8 made a copy of %zu bytes, not %zu", file, q->name, copy, want_copy);
      n_i8++;
    }
    free(w), free(row), free(x);
    n++;
  }
  fclose(list);
  free(src);
  CHECKF(n >= 1, "%s lists no quantized fixture", FIXTURES "fixtures.txt");
  CHECKF(n_i8 >= 9, "only %d fixtures took the integer product in their own bytes", n_i8);
}

/* The same llama-quantize bytes through the WebGPU products (one token,
 * several, and a batched step's rows), plain and subgroup kernels, against
 * the rows as wisp_matrix_row_f32 decodes them (checked against the
 * decoder written here, and the source weights, by the test above). */
TEST(webgpu_ggml_blocks_llama_quantize_fixtures) {
  WEBGPU_OR_SKIP(d);
  FILE *list = fopen(FIXTURES "fixtures.txt", "r");
  CHECKF(list != NULL, "no " FIXTURES "fixtures.txt (tools/make-quant-fixtures.sh makes them)");
  char file[64];
  unsigned type;
  int rows, cols, n = 0;
  while (fscanf(list, "%63s %u %d %d", file, &type, &rows, &cols) == 4) {
    if (type == WISP_GGML_F32) continue; /* the source weights */
    CHECKF(rows > 0 && rows <= 256 && cols > 0 && cols <= 4096, "%s: %d x %d", file, rows, cols);
    int nt;
    const wisp_quant_traits *tab = wisp_quant_table(&nt), *q = NULL;
    for (int i = 0; i < nt; i++)
      if (tab[i].ggml_type == type && tab[i].n_planes == 1) q = &tab[i];
    CHECKF(q != NULL, "%s: ggml type %u is not a wisp matrix type", file, type);
    uint8_t *w = read_all(file, (size_t)wisp_quant_bytes(q->type, rows, cols));
    float *x = malloc(sizeof(float) * 5 * (size_t)cols), *dec = malloc(sizeof(float) * (size_t)rows * cols);
    CHECKF(w && x && dec, "%s: missing or short", file);
    wisp_matrix m = {.type = q->type, .rows = rows, .cols = cols, .q = w};
    for (int r = 0; r < rows; r++) wisp_matrix_row_f32(&m, r, dec + (size_t)r * cols);
    uint64_t seed = 31;
    for (int i = 0; i < 5 * cols; i++) x[i] = (float)((int)(next_u32(&seed) % 2001) - 1000) / 1000.0f;
    for (int pass = 0; pass < 2; pass++) {
      wisp_wgpu_backend_opts opts = {.device = d, .subgroups = pass ? -1 : 0};
      wisp_matrix gm = m;
      wisp_backend *g = NULL;
      CHECKF(wisp_wgpu_backend_new(&opts, &g) == WISP_OK, "%s", wisp_last_error());
      CHECKF(g->prepare_matrix(g, &gm) == WISP_OK, "%s: %s", file, wisp_last_error());
      const double e1 = backend_error_of(g, NULL, dec, &gm, x, 1, 0, 0) * 1e-5,
                   en = backend_error_of(g, NULL, dec, &gm, x, 5, 0, 0) * 1e-5,
                   er = backend_error_of(g, NULL, dec, &gm, x, 3, 1, 0) * 1e-5;
      g->destroy(g);
      CHECKF(e1 < 1e-5 && en < 1e-5 && er < 1e-5, "%s (%s) on WebGPU (%s): one token %g, 5 tokens %g, rows %g", file,
             q->name, pass ? "subgroups" : "plain", e1, en, er);
    }
    free(x), free(w), free(dec);
    n++;
  }
  fclose(list);
  CHECKF(n >= 12, "%s: %d quantized fixtures", FIXTURES "fixtures.txt", n);
}

/* llama-quantize's Q4_K_M of the whole small Qwen 2 model (the fixture
 * script's qwen2-small-q4_k_m.gguf): every tensor's type is a wisp matrix
 * type, at least two kinds mix (Q4_K with Q6_K), and every tensor of a type
 * decoded here reads back as this file's decoder says. */
TEST(ggml_blocks_llama_quantize_q4_k_m_file) {
  wisp_gguf *g = NULL;
  FILE *f = fopen(FIXTURES "qwen2-small-q4_k_m.gguf", "rb");
  CHECKF(f != NULL, "no " FIXTURES "qwen2-small-q4_k_m.gguf (tools/make-quant-fixtures.sh makes it)");
  fclose(f);
  CHECKF(wisp_gguf_open(FIXTURES "qwen2-small-q4_k_m.gguf", &g) == WISP_OK, "%s", wisp_last_error());
  int nt, seen_q4k = 0, seen_q6k = 0;
  const wisp_quant_traits *tab = wisp_quant_table(&nt);
  for (uint64_t i = 0; i < g->n_tensors; i++) {
    const wisp_gguf_tensor *t = &g->tensors[i];
    int known = 0;
    for (int k = 0; k < nt; k++) known |= tab[k].ggml_type == t->type;
    CHECKF(known, "%s: ggml type %u is not a wisp matrix type", t->name, t->type);
    seen_q4k |= t->type == WISP_GGML_Q4_K, seen_q6k |= t->type == WISP_GGML_Q6_K;
    const blk_type *bt = NULL;
    for (int k = 0; k < N_TYPES; k++)
      if (k_types[k].ggml == t->type) bt = &k_types[k];
    if (!bt || t->n_dims != 2) continue;
    float *out = malloc(sizeof(float) * t->numel);
    CHECK(out && wisp_gguf_read_f32(g, t, out) == WISP_OK);
    const int cols = (int)t->ne[0];
    for (uint64_t e = 0; e < t->numel; e++) {
      const double want = ref_at(bt, t->data, cols, (int)(e / (uint64_t)cols), (int)(e % (uint64_t)cols));
      CHECKF(fabs(out[e] - want) <= 1e-6 * fabs(want) + 1e-12, "%s element %llu: %.9g, want %.9g", t->name,
             (unsigned long long)e, out[e], want);
    }
    free(out);
  }
  wisp_gguf_close(g);
  CHECKF(seen_q4k && seen_q6k, "the Q4_K_M file mixes no Q4_K with Q6_K (%d, %d)", seen_q4k, seen_q6k);
}
