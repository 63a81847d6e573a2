/* Weight views shared by the model files and the backends.
 *
 * A wisp_matrix is a read-only view of one weight matrix inside the
 * memory-mapped weights.bin; nothing is copied. Rows are output features,
 * columns input features (y = W x). The byte layouts are specified in
 * docs/artifact.md:
 *   WISP_W_F32  rows*cols little-endian f32, row-major.
 *   WISP_W_Q4   symmetric 4-bit, blocks of 32 along a row: `q` holds cols/2
 *               bytes per row (element 2j in the low nibble of byte j,
 *               element 2j+1 in the high nibble), `scales` one f32 per block;
 *               value = scale * (nibble - 8).
 *   WISP_W_Q4Z  asymmetric 4-bit (embed/head): as Q4 plus `zp`, one 4-bit zero
 *               point per block packed two per byte (block 2k low nibble, 2k+1
 *               high nibble, blocks numbered row-major); value = scale *
 *               (nibble - zero_point).
 *   WISP_W_Q4K  llama.cpp's Q4_K layout (described from its public format
 *               docs, code written here): super-blocks of 256 consecutive
 *               elements of a row, 144 bytes each, `q` holds rows*cols/256
 *               of them:
 *                 bytes 0-1   d    (IEEE f16, little-endian): scale of scales
 *                 bytes 2-3   dmin (f16): scale of mins
 *                 bytes 4-15  8 6-bit sub-block scales sc[j] and mins m[j]:
 *                             j < 4: sc = b[j] & 63, m = b[j+4] & 63;
 *                             j >= 4: sc = (b[j+4] & 15) | (b[j-4] >> 6) << 4,
 *                                     m  = (b[j+4] >> 4) | (b[j] >> 6) << 4
 *                 bytes 16-143 4-bit quants, 32 bytes per 64 elements:
 *                             element 64c + l (l < 32) is the low nibble of
 *                             byte 32c + l, element 64c + 32 + l its high
 *                             nibble; elements 64c..+31 are sub-block 2c,
 *                             64c+32..+63 sub-block 2c+1.
 *               value = d*sc[j] * nibble - dmin*m[j] (j = element / 32).
 *               cols must be a multiple of 256.
 *   WISP_W_F16  rows*cols little-endian IEEE binary16, row-major (`q`).
 *   WISP_W_Q8_0 ggml's Q8_0 layout: blocks of 32 consecutive elements of a
 *               row, 34 bytes each (`q`): f16 scale d, then 32 int8 q;
 *               value = d * q. cols must be a multiple of 32.
 *   WISP_W_Q6K, Q5K, Q3K, Q2K, Q4_0, Q4_1, Q5_0, Q5_1, BF16: ggml's
 *               blocks of that name, row after row in `q`, byte for byte
 *               as GGUF stores them (format/qblocks.h); cols a multiple of
 *               the block (256 for the K types, 32 for the others, 1 for
 *               BF16).
 * `device` is free for a backend to cache its own copy (e.g. a GPU buffer).
 * What the rest of wisp needs to know about each type (block, bytes, the
 * sections that hold it, dequantization, the kernels that read it) is one
 * table in format/quant.h. */
#ifndef WISP_TENSOR_H
#define WISP_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#define WISP_Q4_BLOCK 32
#define WISP_Q4K_BLOCK 256
#define WISP_Q4K_BYTES 144 /* bytes per 256-element super-block */
#define WISP_Q8_0_BLOCK 32
#define WISP_Q8_0_BYTES 34 /* f16 d + 32 int8 */
#define WISP_MATRIX_MAX_PARTS 4 /* row parts of one matrix at most */

/* The ggml block types after F16 and Q8_0 keep their GGUF bytes too
 * (format/qblocks.h describes them). */
typedef enum {
  WISP_W_F32 = 0, WISP_W_Q4, WISP_W_Q4Z, WISP_W_Q4K, WISP_W_F16, WISP_W_Q8_0,
  WISP_W_Q6K, WISP_W_Q5K, WISP_W_Q3K, WISP_W_Q2K, WISP_W_Q4_0, WISP_W_Q4_1, WISP_W_Q5_0, WISP_W_Q5_1, WISP_W_BF16,
  WISP_W_PARTS /* row parts of their own types (wisp_matrix.parts): no bytes of its own */
} wisp_wtype;

/* What the execution plan chose for one matrix in one phase (prefill,
 * decode): a registry variant name and its geometry. Empty = the backend's
 * own default. Set by the engine from the plan, read by the backend. */
typedef struct {
  char variant[72];
  int workgroup_size, rows_per_subgroup, subgroups_per_row; /* 0 = kernel default */
} wisp_kernel_choice;

/* Phases of execution: several tokens at once (prefill) or one (decode). */
enum { WISP_PHASE_PREFILL = 0, WISP_PHASE_DECODE = 1 };

typedef struct wisp_matrix {
  wisp_wtype type;
  int rows, cols;
  wisp_kernel_choice choice[2]; /* [prefill, decode] */
  const float *f32;     /* WISP_W_F32 */
  const uint8_t *q;     /* Q4/Q4Z nibbles; Q4K super-blocks; F16 halves; Q8_0 and the other ggml blocks */
  const float *scales;  /* Q4/Q4Z, rows * cols/32 */
  const uint8_t *zp;    /* Q4Z zero points */
  void *device;         /* backend-private */
  /* A matrix whose row ranges are stored in different types (a GGUF fused
   * section such as q|k|v whose tensors differ, Q4_K beside Q6_K:
   * docs/gguf.md): type WISP_W_PARTS, and n_parts plain matrices of the same
   * cols, rows one after the other, each with its own type, bytes, kernel
   * choice and device copy. A product by it is a product by each part.
   * When every part has the same type (a GGUF's fused section whose tensors
   * are not back to back in the file), `type` is that type and f32/q are
   * NULL: it runs as one matrix of that type (format/quant.h,
   * wisp_matrix_mixed), a backend gathering the parts' bytes where it needs
   * them contiguous. */
  int n_parts;
  struct wisp_matrix *parts;
  /* A part's place in its whole: its products write rows
   * [out_row0, out_row0 + rows) of outputs out_rows wide (y[t * out_rows +
   * out_row0 + r]); out_rows 0 for a whole matrix (y[t * rows + r]). */
  int out_row0, out_rows;
} wisp_matrix;

/* The width of the outputs a product by m writes: its rows, or for a part
 * its whole's (the part's first output is out_row0). */
static inline int wisp_matrix_out_rows(const wisp_matrix *m) { return m->out_rows ? m->out_rows : m->rows; }

typedef struct {
  int n;
  const float *data;
  void *device;
} wisp_vector;

const char *wisp_wtype_name(wisp_wtype t);
/* The 4-bit zero point of Q4Z block `block` (counted over the whole
 * matrix): two a byte, the even block in the low nibble, as
 * wisp_quantize_q4z writes them. */
static inline int wisp_q4z_zero_point(const uint8_t *zp, size_t block) {
  return block & 1 ? zp[block >> 1] >> 4 : zp[block >> 1] & 15;
}
/* Bytes of each part for a rows x cols matrix of the given type. */
size_t wisp_q4_quant_bytes(int rows, int cols);
size_t wisp_q4_scale_bytes(int rows, int cols);
size_t wisp_q4_zp_bytes(int rows, int cols);
size_t wisp_q4k_bytes(int rows, int cols); /* rows * cols/256 * 144 */
size_t wisp_f16_bytes(int rows, int cols);  /* rows * cols * 2 */
size_t wisp_q8_0_bytes(int rows, int cols); /* rows * cols/32 * 34 */

/* IEEE binary16 <-> f32 (round to nearest even; f16 subnormals handled);
 * wisp_f16_to_f32 lives in safetensors.c. */
float wisp_f16_to_f32(uint16_t h);
uint16_t wisp_f32_to_f16(float f);
/* The 6-bit scale and min of sub-block j (0..7) from a super-block's 12
 * packed bytes (layout above). */
void wisp_q4k_scale_min(const uint8_t *packed, int j, int *sc, int *m);
/* Dequantizes one 256-element super-block. */
void wisp_q4k_block_f32(const uint8_t *block, float *out);

/* Reference (scalar) dequantization of one row into out[cols] (a matrix
 * in row parts: from the part that holds it). */
void wisp_matrix_row_f32(const wisp_matrix *m, int row, float *out);
/* The matrix that holds row `row` of m: m itself, or for a matrix in row
 * parts the part, with *row made the part's own row. */
const wisp_matrix *wisp_matrix_row_part(const wisp_matrix *m, int *row);

/* Quantizers used by convert and gen-synthetic; `w` is rows x cols f32.
 * Q4: per block d = max|w|/7, q = round(w/d) + 8, so 0 is exact and the
 * range [-7d, 7d] never saturates. */
void wisp_quantize_q4(const float *w, int rows, int cols, uint8_t *q, float *scales);
/* Asymmetric: per block scale = (max-min)/15, zp = round(-min/scale)
 * clamped to [0,15], q = clamp(round(w/scale)+zp, 0, 15). */
void wisp_quantize_q4z(const float *w, int rows, int cols, uint8_t *q, float *scales, uint8_t *zp);
/* Q4_K (cols % 256 == 0): per sub-block of 32 an affine fit x ~ s*q - mn
 * (q in 0..15, mn >= 0) chosen by a small search over the scale that
 * minimises the squared error (each candidate refitted by least squares),
 * then the 8 scales and mins quantized to 6 bits against the super-block's
 * f16 d and dmin, and the nibbles recomputed with the quantized values. */
void wisp_quantize_q4k(const float *w, int rows, int cols, uint8_t *out);
/* F16: each element rounded to nearest-even binary16 (little-endian). */
void wisp_quantize_f16(const float *w, int rows, int cols, uint8_t *out);
/* Q8_0 (cols % 32 == 0): per block d = max|x|/127 (stored as f16),
 * q = round(x/d) clamped to [-127, 127] (using the f16-rounded d). */
void wisp_quantize_q8_0_rows(const float *w, int rows, int cols, uint8_t *out);

/* Which dims RoPE turns together, within the first R (rotary) dims of a
 * head, pair i at angle p * freq[i]: HALVES pairs (i, i + R/2) (Hugging
 * Face's rotate-half); ADJACENT pairs (2i, 2i + 1) (the order llama.cpp's
 * converter stores llama's q/k rows in, so such rows run as stored). The
 * two give the same scores when q and k rows are permuted alike. */
typedef enum { WISP_ROPE_HALVES = 0, WISP_ROPE_ADJACENT = 1 } wisp_rope_pairs;

/* RoPE tables for positions [0, rows): cs/sn[p * half + i] = cos/sin(p *
 * theta^(-2i/dim)), half = dim/2, inv_freq rounded to f32 as transformers
 * does and the angle taken in f32. */
void wisp_rope_table(double theta, int dim, int rows, float *cs, float *sn);
/* Rows [0, rows) of rope tables ([rows][half]) from the inverse frequencies
 * inv[half]: cs[p][i] = cos((float)p * inv[i]), sn likewise, the angle in f32
 * as transformers computes it. A table built here from an artifact's
 * rope.freq equals the one convert would have stored. */
void wisp_rope_rows(const float *inv, int half, int rows, float *cs, float *sn);

#endif
