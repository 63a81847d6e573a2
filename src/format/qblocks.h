/* The ggml block formats wisp keeps as matrix types in their GGUF bytes, so
 * that a tensor mapped from a GGUF file is used as it is stored: one decoder
 * per type, turning one block into f32 values. Layouts (described from
 * ggml's public format documentation; the code is wisp's own), all fields
 * little-endian, f16 = IEEE binary16, a block covers consecutive elements
 * of one row:
 *
 *   Q4_0  32 elements, 18 bytes: f16 d, qs[16]. Element j (j < 16) is the
 *         low nibble of qs[j], element j + 16 its high nibble.
 *         value = d * (q - 8).
 *   Q4_1  32 elements, 20 bytes: f16 d, f16 m, qs[16] as Q4_0.
 *         value = d * q + m.
 *   Q5_0  32 elements, 22 bytes: f16 d, qh[4] (a 32-bit little-endian word,
 *         bit i the fifth bit of element i), qs[16] as Q4_0.
 *         value = d * (q - 16), q = nibble | bit << 4.
 *   Q5_1  32 elements, 24 bytes: f16 d, f16 m, qh[4], qs[16] as Q5_0.
 *         value = d * q + m.
 *   Q2_K  256 elements, 84 bytes: scales[16] (low nibble the scale, high
 *         nibble the min of each 16 elements), qs[64], f16 d, f16 dmin.
 *         Element 128h + 32j + 16g + l (h < 2, j < 4, g < 2, l < 16) is
 *         bits 2j..2j+1 of qs[32h + 16g + l], sub-block 8h + 2j + g.
 *         value = d * scale * q - dmin * min.
 *   Q3_K  256 elements, 110 bytes: hmask[32], qs[64], scales[12], f16 d.
 *         Element 128h + 32j + 16g + l: low 2 bits as Q2_K's qs, the third
 *         bit is bit 4h + j of hmask[16g + l]; q = low - (bit ? 0 : 4),
 *         so q is in -4..3. Sub-block i = 8h + 2j + g has a 6-bit scale:
 *         low 4 bits scales[i] & 15 (i < 8) or scales[i - 8] >> 4 (i >= 8),
 *         high 2 bits (scales[8 + i % 4] >> 2 * (i / 4)) & 3; minus 32.
 *         value = d * (scale - 32) * q.
 *   Q4_K  wisp's WISP_W_Q4K (tensor.h).
 *   Q5_K  256 elements, 176 bytes: f16 d, f16 dmin, scales[12] packed as
 *         Q4_K's, qh[32], qs[128]. Element 64c + l (c < 4, l < 32) is the
 *         low nibble of qs[32c + l] with bit 2c of qh[l] as its fifth bit,
 *         element 64c + 32 + l the high nibble with bit 2c + 1; sub-blocks
 *         2c and 2c + 1. value = d * sc * q - dmin * m.
 *   Q6_K  256 elements, 210 bytes: ql[128], qh[64], scales[16] (int8),
 *         f16 d. Element 128h + 32k + l (h < 2, k < 4, l < 32) takes its
 *         low 4 bits from ql[64h + 32 (k % 2) + l] (the low nibble for
 *         k < 2, the high one for k >= 2) and its high 2 bits from bits
 *         2k..2k+1 of qh[32h + l]; q = those 6 bits - 32, in -32..31;
 *         sub-block (element / 16). value = d * scales[sub-block] * q.
 *   Q8_0  wisp's WISP_W_Q8_0 (tensor.h).
 *   BF16  one element in 2 bytes: the top half of an IEEE f32. */
#ifndef WISP_QBLOCKS_H
#define WISP_QBLOCKS_H

#include <stddef.h>
#include <stdint.h>

#include "format/tensor.h"

#define WISP_Q4_0_BYTES 18
#define WISP_Q4_1_BYTES 20
#define WISP_Q5_0_BYTES 22
#define WISP_Q5_1_BYTES 24
#define WISP_Q2K_BYTES 84
#define WISP_Q3K_BYTES 110
#define WISP_Q5K_BYTES 176
#define WISP_Q6K_BYTES 210

/* One block of type t (Q4_0, Q4_1, Q5_0, Q5_1 or Q2_K to Q6_K but Q4_K) as
 * integers and, per 16 elements, a scale and an offset: element i is
 * s[i / 16] * q[i] + o[i / 16] (q in -32..31; s and o exact in f32).
 * Returns the block's element count (0 for another type). The decoders
 * below compute exactly that; the WebGPU backend uploads these parts. */
int wisp_qblock_split(wisp_wtype t, const uint8_t *blk, int8_t *q, float *s, float *o);

/* Each decodes one block (its type's element count) into out. */
void wisp_q4_0_block_f32(const uint8_t *b, float *out);
void wisp_q4_1_block_f32(const uint8_t *b, float *out);
void wisp_q5_0_block_f32(const uint8_t *b, float *out);
void wisp_q5_1_block_f32(const uint8_t *b, float *out);
void wisp_q2k_block_f32(const uint8_t *b, float *out);
void wisp_q3k_block_f32(const uint8_t *b, float *out);
void wisp_q5k_block_f32(const uint8_t *b, float *out);
void wisp_q6k_block_f32(const uint8_t *b, float *out);
void wisp_q8_0_block_f32(const uint8_t *b, float *out);

#endif
