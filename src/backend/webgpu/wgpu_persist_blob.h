/* The persistent decode's weight blob (wgpu_persist.c): every matrix and
 * vector a graph's phases read, placed in one storage binding at 16-byte
 * boundaries, with the word offsets the layer table records. The blob is a
 * list of pieces, each a range of bytes that lives elsewhere until the
 * upload writes it at its offset: the model's weights and vectors (mapped,
 * or streamed from the file in the browser, format/weight_source.h, so the
 * blob is never gathered whole in host memory) and the few buffers made
 * here (the layer table, repacked Q8_0), which the builder owns. */
#ifndef WISP_WGPU_PERSIST_BLOB_H
#define WISP_WGPU_PERSIST_BLOB_H

#include <stddef.h>
#include <stdint.h>

#include "backend/webgpu/wgpu_core.h"

#define PBLOB_NONE 0xffffffffu /* no such plane / vector */

typedef struct {
  size_t at, n;
  const void *src;
} pblob_piece;

typedef struct {
  pblob_piece *pieces;
  int n_pieces, cap_pieces;
  void **owned;
  int n_owned, cap_owned;
  size_t n; /* bytes so far */
  int oom;
} pblob;

/* Matrices already placed, by their host bytes (tied matrices share). */
typedef struct {
  const void *host;
  uint32_t off[4];
} pblob_seen;

/* persist_quant.wgsli's type codes (T_*). */
enum { T_Q4, T_Q4Z, T_Q4K, T_F32, T_F16, T_Q8_0 };

/* Places n bytes of src (kept until the upload) at a 16-byte boundary;
 * returns the word offset. */
uint32_t pblob_put(pblob *b, const void *src, size_t n);
/* The same for a buffer made by the caller (malloc'd), freed with the builder. */
uint32_t pblob_put_owned(pblob *b, void *buf, size_t n);
/* A vector's word offset (PBLOB_NONE for none). */
uint32_t pblob_put_vec(pblob *b, const wisp_vector *v);
/* A matrix's planes (data, scales, zero points: word offsets, PBLOB_NONE
 * where the type has none) and its type code in out[3]. */
void pblob_put_mat(pblob *b, const wisp_matrix *m, pblob_seen *seen, int *n_seen, uint32_t out[4]);
/* persist_quant.wgsli's code of a weight type; PBLOB_NONE for the others. */
uint32_t pblob_type_code(wisp_wtype t);
/* Creates the blob's buffer and writes every piece at its offset. */
wisp_status pblob_upload(wisp_wgpu_device *d, const pblob *b, wisp_wgpu_buf *out);
void pblob_free(pblob *b);

#endif
