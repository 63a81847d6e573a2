/* The persistent decode's weight blob (wgpu_persist_blob.h). */
#include "backend/webgpu/wgpu_persist_blob.h"

#include <stdlib.h>
#include <string.h>

#include "format/quant.h"
#include "format/weight_source.h"

/* Places n bytes of src (kept until the upload) at a 16-byte boundary;
 * returns the word offset. */
uint32_t pblob_put(pblob *b, const void *src, size_t n) {
  size_t at = (b->n + 15) & ~(size_t)15;
  if (b->n_pieces == b->cap_pieces) {
    int cap = b->cap_pieces ? 2 * b->cap_pieces : 256;
    pblob_piece *q = realloc(b->pieces, (size_t)cap * sizeof *q);
    if (!q) {
      b->oom = 1;
      return 0;
    }
    b->pieces = q;
    b->cap_pieces = cap;
  }
  if (n) b->pieces[b->n_pieces++] = (pblob_piece){at, n, src};
  b->n = at + n;
  return (uint32_t)(at / 4);
}

/* The same for a buffer made here (malloc'd), freed with the builder. */
uint32_t pblob_put_owned(pblob *b, void *buf, size_t n) {
  if (b->n_owned == b->cap_owned) {
    int cap = b->cap_owned ? 2 * b->cap_owned : 16;
    void **q = realloc(b->owned, (size_t)cap * sizeof *q);
    if (!q) {
      free(buf);
      b->oom = 1;
      return 0;
    }
    b->owned = q;
    b->cap_owned = cap;
  }
  b->owned[b->n_owned++] = buf;
  return pblob_put(b, buf, n);
}

void pblob_free(pblob *b) {
  for (int i = 0; i < b->n_owned; i++) free(b->owned[i]);
  free(b->owned);
  free(b->pieces);
}

/* Creates the blob's buffer and writes every piece at its offset. */
wisp_status pblob_upload(wisp_wgpu_device *d, const pblob *b, wisp_wgpu_buf *out) {
  wisp_status st = wisp_wgpu_buf_create(d, b->n, WISP_WGPU_STORAGE, "wisp persist weights", out);
  for (int i = 0; !st && i < b->n_pieces; i++)
    st = wisp_wgpu_buf_write(d, *out, b->pieces[i].at, b->pieces[i].src, b->pieces[i].n);
  if (st) wisp_wgpu_buf_free(d, out);
  return st;
}

uint32_t pblob_put_vec(pblob *b, const wisp_vector *v) {
  return v && v->n ? pblob_put(b, v->data, (size_t)v->n * 4) : PBLOB_NONE;
}

uint32_t pblob_type_code(wisp_wtype t) {
  switch (t) {
    case WISP_W_Q4: return T_Q4;
    case WISP_W_Q4Z: return T_Q4Z;
    case WISP_W_Q4K: return T_Q4K;
    case WISP_W_F32: return T_F32;
    case WISP_W_F16: return T_F16;
    case WISP_W_Q8_0: return T_Q8_0;
    default: break; /* the other ggml types: no persistent decode (any_mat refuses them) */
  }
  return PBLOB_NONE;
}


/* Q8_0's 34-byte blocks (f16 scale, 32 int8) as the kernel reads them: the
 * int8s of every block (8 words each) at *q, the scales as f32 at *s. */
static void put_q8_0(pblob *b, const wisp_matrix *m, uint32_t *q, uint32_t *s) {
  const size_t nb = (size_t)m->rows * (size_t)(m->cols / WISP_Q8_0_BLOCK);
  int8_t *vals = malloc(nb * WISP_Q8_0_BLOCK);
  float *sc = malloc(nb * sizeof *sc);
  void *owned = NULL; /* the blocks read in, when streamed (format/weight_source.h) */
  const uint8_t *blocks = vals && sc ? wisp_weights_borrow(m->q, nb * WISP_Q8_0_BYTES, &owned) : NULL;
  if (!blocks) {
    b->oom = 1;
    free(vals);
    free(sc);
  } else {
    for (size_t g = 0; g < nb; g++) {
      const uint8_t *blk = blocks + g * WISP_Q8_0_BYTES;
      sc[g] = wisp_f16_to_f32((uint16_t)(blk[0] | blk[1] << 8));
      memcpy(vals + g * WISP_Q8_0_BLOCK, blk + 2, WISP_Q8_0_BLOCK);
    }
    *q = pblob_put_owned(b, vals, nb * WISP_Q8_0_BLOCK);
    *s = pblob_put_owned(b, sc, nb * sizeof *sc);
  }
  free(owned);
}

/* A matrix's planes (data, scales, zero points: word offsets, PBLOB_NONE where the
 * type has none) and its type code, as persist_quant.wgsli reads them: Q4 /
 * Q4Z nibbles, f32 scales and packed zero points; Q4_K super-blocks, f32 and
 * f16 rows as stored; Q8_0 repacked (put_q8_0). Tied matrices (same host
 * bytes as an earlier one) share theirs. */
void pblob_put_mat(pblob *b, const wisp_matrix *m, pblob_seen *seen, int *n_seen, uint32_t out[4]) {
  for (int i = 0; i < *n_seen; i++)
    if (seen[i].host == wisp_matrix_host(m)) {
      memcpy(out, seen[i].off, sizeof seen[i].off);
      return;
    }
  const size_t nb = (size_t)m->rows * (size_t)(m->cols / 32);
  out[1] = out[2] = PBLOB_NONE;
  out[3] = pblob_type_code(m->type);
  /* a matrix in row parts of one type (Q4_K, Q8_0, F16, F32 reach here):
   * its parts gathered into the bytes of the plain matrix; the blob owns
   * that copy until the upload (Q8_0 repacks it into blocks of its own) */
  wisp_matrix flat;
  uint8_t *gathered = NULL;
  if (m->n_parts) {
    if (!wisp_matrix_gather(m, &flat, &gathered)) {
      b->oom = 1;
      return;
    }
  }
  const wisp_matrix *w = gathered ? &flat : m;
  switch (m->type) {
    case WISP_W_Q4K: /* one plane as stored: its size from the quant table */
    case WISP_W_F32:
    case WISP_W_F16: {
      const size_t bytes = (size_t)wisp_quant_bytes(m->type, m->rows, m->cols);
      out[0] = gathered ? pblob_put_owned(b, gathered, bytes) : pblob_put(b, wisp_matrix_host(m), bytes);
      gathered = NULL;
      break;
    }
    case WISP_W_Q8_0: put_q8_0(b, w, &out[0], &out[1]); break;
    case WISP_W_Q4:
    case WISP_W_Q4Z:
      out[0] = pblob_put(b, m->q, (size_t)m->rows * (size_t)m->cols / 2);
      out[1] = pblob_put(b, m->scales, nb * 4);
      if (m->type == WISP_W_Q4Z) out[2] = pblob_put(b, m->zp, (nb + 1) / 2);
      break;
    default: break; /* never reached: any_mat takes none of the other types */
  }
  free(gathered);
  seen[*n_seen].host = wisp_matrix_host(m);
  memcpy(seen[*n_seen].off, out, sizeof seen[*n_seen].off);
  (*n_seen)++;
}

