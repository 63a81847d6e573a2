/* The table of weight types and what reads it; see quant.h. The byte
 * layouts themselves are specified in tensor.h and docs/artifact.md. */
#include "format/quant.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/gguf.h"
#include "format/qblocks.h"
#include "format/safetensors.h"
#include "util/err.h"

/* ---- dequantization of one row, per type ---- */

static void row_f32(const wisp_matrix *m, int row, float *out) {
  memcpy(out, m->f32 + (size_t)row * m->cols, (size_t)m->cols * sizeof(float));
}

static void row_f16(const wisp_matrix *m, int row, float *out) {
  const uint8_t *h = m->q + (size_t)row * m->cols * 2;
  for (int i = 0; i < m->cols; i++) out[i] = wisp_f16_to_f32((uint16_t)(h[2 * i] | h[2 * i + 1] << 8));
}

static void row_q8_0(const wisp_matrix *m, int row, float *out) {
  const int nb = m->cols / WISP_Q8_0_BLOCK;
  const uint8_t *blk = m->q + (size_t)row * nb * WISP_Q8_0_BYTES;
  for (int b = 0; b < nb; b++, blk += WISP_Q8_0_BYTES) {
    float d = wisp_f16_to_f32((uint16_t)(blk[0] | blk[1] << 8));
    for (int i = 0; i < WISP_Q8_0_BLOCK; i++) out[b * WISP_Q8_0_BLOCK + i] = d * (float)(int8_t)blk[2 + i];
  }
}

static void row_q4k(const wisp_matrix *m, int row, float *out) {
  const int nsb = m->cols / WISP_Q4K_BLOCK;
  const uint8_t *blk = m->q + (size_t)row * nsb * WISP_Q4K_BYTES;
  for (int b = 0; b < nsb; b++) wisp_q4k_block_f32(blk + (size_t)b * WISP_Q4K_BYTES, out + b * WISP_Q4K_BLOCK);
}

/* Q4 and Q4Z: value = scale * (nibble - zero), zero 8 or the block's zero point. */
static void row_q4(const wisp_matrix *m, int row, float *out) {
  const int nb = m->cols / WISP_Q4_BLOCK;
  const uint8_t *q = m->q + (size_t)row * (m->cols / 2);
  const float *s = m->scales + (size_t)row * nb;
  for (int b = 0; b < nb; b++) {
    int zero = 8;
    if (m->type == WISP_W_Q4Z) {
      zero = wisp_q4z_zero_point(m->zp, (size_t)row * nb + b);
    }
    for (int j = 0; j < WISP_Q4_BLOCK / 2; j++) {
      uint8_t byte = q[b * 16 + j];
      out[b * 32 + 2 * j] = s[b] * (float)((byte & 15) - zero);
      out[b * 32 + 2 * j + 1] = s[b] * (float)((byte >> 4) - zero);
    }
  }
}

/* The single-plane block types: row after row of whole blocks in `q`, each
 * decoded by the type's block_f32. */
static void row_blocks(const wisp_matrix *m, int row, float *out) {
  const wisp_quant_traits *t = wisp_quant_traits_of(m->type);
  const int nb = m->cols / t->block;
  const uint8_t *blk = m->q + (size_t)row * nb * t->block_bytes;
  for (int b = 0; b < nb; b++) t->block_f32(blk + (size_t)b * t->block_bytes, out + (size_t)b * t->block);
}

static void row_bf16(const wisp_matrix *m, int row, float *out) {
  const uint8_t *h = m->q + (size_t)row * m->cols * 2;
  for (int i = 0; i < m->cols; i++) out[i] = wisp_bf16_to_f32((uint16_t)(h[2 * i] | h[2 * i + 1] << 8));
}

const wisp_matrix *wisp_matrix_row_part(const wisp_matrix *m, int *row) {
  if (!m->n_parts) return m;
  int i = 0;
  while (i + 1 < m->n_parts && *row >= m->parts[i].rows) *row -= m->parts[i++].rows;
  return &m->parts[i];
}

void wisp_matrix_row_f32(const wisp_matrix *m, int row, float *out) {
  m = wisp_matrix_row_part(m, &row);
  wisp_quant_traits_of(m->type)->dequant_row(m, row, out);
}

static size_t f32_bytes(int rows, int cols) { return (size_t)rows * (size_t)cols * 4; }

/* Bytes of a rows x cols matrix of a single-plane block type. */
#define BLOCK_BYTES(fn, block, bytes) \
  static size_t fn(int rows, int cols) { return (size_t)rows * (size_t)(cols / (block)) * (bytes); }
BLOCK_BYTES(q6k_bytes, 256, WISP_Q6K_BYTES)
BLOCK_BYTES(q5k_bytes, 256, WISP_Q5K_BYTES)
BLOCK_BYTES(q3k_bytes, 256, WISP_Q3K_BYTES)
BLOCK_BYTES(q2k_bytes, 256, WISP_Q2K_BYTES)
BLOCK_BYTES(q4_0_bytes, 32, WISP_Q4_0_BYTES)
BLOCK_BYTES(q4_1_bytes, 32, WISP_Q4_1_BYTES)
BLOCK_BYTES(q5_0_bytes, 32, WISP_Q5_0_BYTES)
BLOCK_BYTES(q5_1_bytes, 32, WISP_Q5_1_BYTES)
BLOCK_BYTES(bf16_bytes, 1, 2)

static void bf16_block(const uint8_t *b, float *out) { *out = wisp_bf16_to_f32((uint16_t)(b[0] | b[1] << 8)); }

/* ---- the table, in binding order: a type is recognised by its last
 * section, so Q4Z (quant + scales + zero_points) comes before Q4 ---- */
static const wisp_quant_traits k_table[] = {
    {WISP_W_F16, "f16", 1, 2, "f16", 16,
     {{"f16", WISP_QP_Q, wisp_f16_bytes}}, 1, row_f16, {"f16_avx2", "f16_scalar"}, WISP_GGML_F16, NULL},
    {WISP_W_Q8_0, "q8_0", WISP_Q8_0_BLOCK, WISP_Q8_0_BYTES, "q8_0", 8,
     {{"q8_0", WISP_QP_Q, wisp_q8_0_bytes}}, 1, row_q8_0, {"q8_0_avx2", "q8_0_scalar"}, WISP_GGML_Q8_0,
     wisp_q8_0_block_f32},
    {WISP_W_Q4K, "q4k", WISP_Q4K_BLOCK, WISP_Q4K_BYTES, "q4k", 4,
     {{"q4k", WISP_QP_Q, wisp_q4k_bytes}}, 1, row_q4k, {"q4k_avx2", "q4k_scalar"}, WISP_GGML_Q4_K, wisp_q4k_block_f32},
    {WISP_W_Q6K, "q6k", 256, WISP_Q6K_BYTES, "q6k", 6,
     {{"q6k", WISP_QP_Q, q6k_bytes}}, 1, row_blocks, {"q6k_avx2", "q6k_scalar"}, WISP_GGML_Q6_K, wisp_q6k_block_f32},
    {WISP_W_Q5K, "q5k", 256, WISP_Q5K_BYTES, "q5k", 5,
     {{"q5k", WISP_QP_Q, q5k_bytes}}, 1, row_blocks, {"q5k_avx2", "q5k_scalar"}, WISP_GGML_Q5_K, wisp_q5k_block_f32},
    {WISP_W_Q3K, "q3k", 256, WISP_Q3K_BYTES, "q3k", 3,
     {{"q3k", WISP_QP_Q, q3k_bytes}}, 1, row_blocks, {"q3k_avx2", "q3k_scalar"}, WISP_GGML_Q3_K, wisp_q3k_block_f32},
    {WISP_W_Q2K, "q2k", 256, WISP_Q2K_BYTES, "q2k", 2,
     {{"q2k", WISP_QP_Q, q2k_bytes}}, 1, row_blocks, {"q2k_avx2", "q2k_scalar"}, WISP_GGML_Q2_K, wisp_q2k_block_f32},
    {WISP_W_Q4_0, "q4_0", 32, WISP_Q4_0_BYTES, "q4_0", 4,
     {{"q4_0", WISP_QP_Q, q4_0_bytes}}, 1, row_blocks, {"q4_0_avx2", "q4_0_scalar"}, WISP_GGML_Q4_0, wisp_q4_0_block_f32},
    {WISP_W_Q4_1, "q4_1", 32, WISP_Q4_1_BYTES, "q4_1", 4,
     {{"q4_1", WISP_QP_Q, q4_1_bytes}}, 1, row_blocks, {"q4_1_avx2", "q4_1_scalar"}, WISP_GGML_Q4_1, wisp_q4_1_block_f32},
    {WISP_W_Q5_0, "q5_0", 32, WISP_Q5_0_BYTES, "q5_0", 5,
     {{"q5_0", WISP_QP_Q, q5_0_bytes}}, 1, row_blocks, {"q5_0_avx2", "q5_0_scalar"}, WISP_GGML_Q5_0, wisp_q5_0_block_f32},
    {WISP_W_Q5_1, "q5_1", 32, WISP_Q5_1_BYTES, "q5_1", 5,
     {{"q5_1", WISP_QP_Q, q5_1_bytes}}, 1, row_blocks, {"q5_1_avx2", "q5_1_scalar"}, WISP_GGML_Q5_1, wisp_q5_1_block_f32},
    {WISP_W_BF16, "bf16", 1, 2, "bf16", 16,
     {{"bf16", WISP_QP_Q, bf16_bytes}}, 1, row_bf16, {"bf16_avx2", "bf16_scalar"}, WISP_GGML_BF16, bf16_block},
    {WISP_W_Q4Z, "q4z", WISP_Q4_BLOCK, WISP_Q4_BLOCK / 2, "q4", 4,
     {{"quant", WISP_QP_Q, wisp_q4_quant_bytes}, {"scales", WISP_QP_SCALES, wisp_q4_scale_bytes},
      {"zero_points", WISP_QP_ZP, wisp_q4_zp_bytes}},
     3, row_q4, {"q4_avx2", "q4_scalar"}, WISP_QUANT_NO_GGML, NULL},
    {WISP_W_Q4, "q4", WISP_Q4_BLOCK, WISP_Q4_BLOCK / 2, "q4", 4,
     {{"quant", WISP_QP_Q, wisp_q4_quant_bytes}, {"scales", WISP_QP_SCALES, wisp_q4_scale_bytes}}, 2, row_q4,
     {"q4_avx2", "q4_scalar"}, WISP_QUANT_NO_GGML, NULL},
    {WISP_W_F32, "f32", 1, 4, "f32", 32,
     {{"weight", WISP_QP_F32, f32_bytes}}, 1, row_f32, {"f32"}, WISP_GGML_F32, NULL},
};
enum { N_TYPES = sizeof k_table / sizeof k_table[0] };

const wisp_quant_traits *wisp_quant_table(int *n) {
  *n = N_TYPES;
  return k_table;
}

const wisp_quant_traits *wisp_quant_traits_of(wisp_wtype t) {
  for (int i = 0; i < N_TYPES; i++)
    if (k_table[i].type == t) return &k_table[i];
  return NULL;
}

const char *wisp_wtype_name(wisp_wtype t) {
  const wisp_quant_traits *q = wisp_quant_traits_of(t);
  return q ? q->name : t == WISP_W_PARTS ? "parts" : "?";
}

uint64_t wisp_quant_bytes(wisp_wtype t, int rows, int cols) {
  const wisp_quant_traits *q = wisp_quant_traits_of(t);
  uint64_t total = 0;
  for (int i = 0; q && i < q->n_planes; i++) total += q->planes[i].bytes(rows, cols);
  return total;
}

uint64_t wisp_matrix_bytes(const wisp_matrix *m) {
  uint64_t total = 0;
  for (int i = 0; i < m->n_parts; i++) total += wisp_matrix_bytes(&m->parts[i]);
  return m->n_parts ? total : wisp_quant_bytes(m->type, m->rows, m->cols);
}

int wisp_matrix_quant_bits(const wisp_matrix *m) {
  return wisp_quant_traits_of(m->n_parts ? m->parts[0].type : m->type)->quant_bits;
}

int wisp_matrix_mixed(const wisp_matrix *m) { return m->n_parts && m->type == WISP_W_PARTS; }

const void *wisp_matrix_host(const wisp_matrix *m) {
  if (m->n_parts) m = &m->parts[0];
  return m->type == WISP_W_F32 ? (const void *)m->f32 : (const void *)m->q;
}

/* A part's rows are whole rows of its single plane, and a uniform matrix's
 * parts follow each other in row order: the matrix's bytes are theirs one
 * after the other. */
void wisp_matrix_copy_rows(const wisp_matrix *m, int row0, int rows, uint8_t *out) {
  const int n_parts = m->n_parts ? m->n_parts : 1;
  for (int i = 0; i < n_parts && rows > 0; i++) {
    const wisp_matrix *one = m->n_parts ? &m->parts[i] : m;
    const int first = m->n_parts ? one->out_row0 : 0, end = first + one->rows;
    if (row0 >= end) continue;
    const size_t row_bytes = (size_t)wisp_quant_bytes(one->type, 1, one->cols);
    const uint8_t *src = one->type == WISP_W_F32 ? (const uint8_t *)one->f32 : one->q;
    const int n = end - row0 < rows ? end - row0 : rows;
    memcpy(out, src + (size_t)(row0 - first) * row_bytes, (size_t)n * row_bytes);
    out += (size_t)n * row_bytes;
    row0 += n;
    rows -= n;
  }
}

int wisp_matrix_gather(const wisp_matrix *m, wisp_matrix *flat, uint8_t **owned) {
  const size_t bytes = (size_t)wisp_quant_bytes(m->type, m->rows, m->cols);
  if (!(*owned = malloc(bytes ? bytes : 1))) return 0;
  wisp_matrix_copy_rows(m, 0, m->rows, *owned);
  *flat = *m;
  flat->n_parts = 0;
  flat->parts = NULL;
  flat->device = NULL;
  if (m->type == WISP_W_F32) flat->f32 = (const float *)*owned;
  else flat->q = *owned;
  return 1;
}

int wisp_matrix_holds(const wisp_matrix *m, wisp_wtype t) {
  for (int i = 0; i < m->n_parts; i++)
    if (m->parts[i].type == t) return 1;
  return m->type == t;
}

const wisp_quant_traits *wisp_quant_of_cpu_kernel(const char *variant) {
  for (int i = 0; i < N_TYPES; i++)
    for (int k = 0; k < 3 && k_table[i].cpu_kernels[k]; k++)
      if (!strcmp(k_table[i].cpu_kernels[k], variant)) return &k_table[i];
  return NULL;
}

static int has_section(const wisp_artifact *a, const char *base, const char *suffix) {
  char name[340];
  snprintf(name, sizeof name, "%s.%s", base, suffix);
  return wisp_artifact_section(a, name) != NULL;
}

/* The type of the table that holds BASE (its marking section), or NULL. */
static const wisp_quant_traits *type_held(const wisp_artifact *a, const char *base) {
  for (int i = 0; i < N_TYPES; i++)
    if (has_section(a, base, k_table[i].planes[k_table[i].n_planes - 1].suffix)) return &k_table[i];
  return NULL;
}

int wisp_matrix_present(const wisp_artifact *a, const char *base) {
  char first[320];
  snprintf(first, sizeof first, "%s@0", base);
  return type_held(a, base) || type_held(a, first);
}

/* A matrix in row parts (quant.h): sections BASE@R.SUFFIX of single-section
 * types, R the part's first row, from 0 until the rows are covered. The
 * parts are kept with the first part's section (the artifact frees them), so
 * a bound matrix needs no freeing of its own. *found 0: BASE has no parts. */
static wisp_status bind_parts(const wisp_artifact *a, const char *base, int rows, int cols, wisp_matrix *m,
                              int *found) {
  const char *dir = a->dir ? a->dir : "artifact";
  char pb[280], name[320];
  wisp_matrix parts[WISP_MATRIX_MAX_PARTS];
  int n = 0;
  *found = 0;
  if (strlen(base) + 12 >= sizeof pb) return WISP_OK; /* no room for "@ROW": a name no part can have */
  snprintf(pb, sizeof pb, "%s@0", base);
  const wisp_quant_traits *q0 = type_held(a, pb);
  if (!q0) return WISP_OK;
  *found = 1;
  snprintf(name, sizeof name, "%s.%s", pb, q0->planes[0].suffix);
  wisp_section *keep = &a->sections[wisp_artifact_section(a, name) - a->sections];
  for (int r = 0; r < rows; n++) {
    snprintf(pb, sizeof pb, "%s@%d", base, r);
    const wisp_quant_traits *q = type_held(a, pb);
    if (!q)
      return wisp_fail(WISP_EFORMAT, "%s: matrix '%s' in parts covers rows 0-%d of %d: no section '%s.*'", dir, base,
                       r - 1, rows, pb);
    if (q->n_planes != 1 || n == WISP_MATRIX_MAX_PARTS)
      return wisp_fail(WISP_EFORMAT, "%s: matrix '%s' in parts: %s", dir, base,
                       n == WISP_MATRIX_MAX_PARTS ? "more than 4 parts" : "a part of a type with several sections");
    snprintf(name, sizeof name, "%s.%s", pb, q->planes[0].suffix);
    const uint64_t bytes = wisp_artifact_section(a, name)->bytes, row_bytes = q->planes[0].bytes(1, cols);
    if (cols % q->block || !row_bytes || bytes % row_bytes || bytes / row_bytes > (uint64_t)(rows - r) || !bytes)
      return wisp_fail(WISP_EFORMAT, "%s: section '%s' (%llu bytes) is not whole %s rows of %d columns inside the %d "
                       "rows of '%s'", dir, name, (unsigned long long)bytes, q->name, cols, rows, base);
    wisp_status st = wisp_matrix_bind(a, pb, (int)(bytes / row_bytes), cols, &parts[n]);
    if (st) return st;
    parts[n].out_row0 = r;
    parts[n].out_rows = rows;
    r += parts[n].rows;
  }
  int same = keep->parts && keep->n_parts == n;
  for (int i = 0; same && i < n; i++)
    same = keep->parts[i].type == parts[i].type && keep->parts[i].rows == parts[i].rows &&
           keep->parts[i].cols == parts[i].cols && keep->parts[i].q == parts[i].q && keep->parts[i].f32 == parts[i].f32;
  if (keep->parts && !same)
    return wisp_fail(WISP_EINVAL, "%s: matrix '%s' bound twice with different shapes", dir, base);
  if (!keep->parts) {
    if (!(keep->parts = malloc(sizeof *parts * (size_t)n))) return wisp_fail(WISP_ENOMEM, "out of memory");
    memcpy(keep->parts, parts, sizeof *parts * (size_t)n);
    keep->n_parts = n;
  }
  m->type = keep->parts[0].type; /* parts of one type run as one matrix of it */
  for (int i = 1; i < n; i++)
    if (keep->parts[i].type != keep->parts[0].type) m->type = WISP_W_PARTS;
  m->parts = keep->parts;
  m->n_parts = n;
  return WISP_OK;
}

wisp_status wisp_matrix_bind(const wisp_artifact *a, const char *base, int rows, int cols, wisp_matrix *m) {
  const char *dir = a->dir ? a->dir : "artifact";
  memset(m, 0, sizeof *m);
  m->rows = rows;
  m->cols = cols;
  int parted;
  wisp_status st = bind_parts(a, base, rows, cols, m, &parted);
  if (st || parted) return st;
  for (int i = 0; i < N_TYPES; i++) {
    const wisp_quant_traits *q = &k_table[i];
    if (!has_section(a, base, q->planes[q->n_planes - 1].suffix)) continue;
    if (cols % q->block)
      return wisp_fail(WISP_EFORMAT, "%s: section '%s.%s': %d columns are not a multiple of %d", dir, base,
                       q->planes[0].suffix, cols, q->block);
    m->type = q->type;
    for (int p = 0; p < q->n_planes; p++) {
      char name[300];
      const uint8_t *d;
      snprintf(name, sizeof name, "%s.%s", base, q->planes[p].suffix);
      wisp_status st = wisp_artifact_bytes(a, name, q->planes[p].bytes(rows, cols), &d);
      if (st) return st;
      switch (q->planes[p].field) {
        case WISP_QP_F32: m->f32 = (const float *)d; break;
        case WISP_QP_Q: m->q = d; break;
        case WISP_QP_SCALES: m->scales = (const float *)d; break;
        case WISP_QP_ZP: m->zp = d; break;
      }
    }
    return WISP_OK;
  }
  return wisp_fail(WISP_EFORMAT,
                   "%s: missing section '%s.quant' (or '%s.q4k', '%s.q8_0', '%s.f16', another ggml type's, or '%s.weight' for f32)",
                   dir, base, base, base, base, base);
}
