/* Quant types as data: one table row per weight type (wisp_wtype, byte
 * layouts in tensor.h) with everything the rest of wisp asks about a type:
 * its name, block size and bytes per block, the artifact sections that hold
 * it and their sizes, its dequantization, the registry's weightDtype and
 * quantBits that select its kernels, the CPU kernels that read it, and the
 * GGUF type with the same bytes. Binding (model files, export-gguf), byte
 * accounting (bench's GB/s), planning and the backends' checks read it here
 * instead of switching on the type (docs/artifact.md, "Weight types"). */
#ifndef WISP_QUANT_H
#define WISP_QUANT_H

#include <stddef.h>
#include <stdint.h>

#include "format/artifact.h"
#include "format/tensor.h"
#include "wisp.h"

/* Which wisp_matrix field a section fills. */
typedef enum { WISP_QP_F32, WISP_QP_Q, WISP_QP_SCALES, WISP_QP_ZP } wisp_quant_field;

typedef struct {
  const char *suffix; /* the section is BASE.suffix */
  wisp_quant_field field;
  size_t (*bytes)(int rows, int cols);
} wisp_quant_plane;

#define WISP_QUANT_MAX_PLANES 3
#define WISP_QUANT_NO_GGML 0xffffffffu

typedef struct {
  wisp_wtype type;
  const char *name;         /* "f32", "q4", "q4z", "q4k", "f16", "q8_0", "q6k", "q4_1", "bf16", ... */
  int block;                /* elements per block along a row; cols must be a multiple */
  int block_bytes;          /* bytes of the main plane per block (q4/q4z: the nibbles; scales apart) */
  const char *weight_dtype; /* the registry's weightDtype whose kernels serve it */
  int quant_bits;           /* the plan's quantBits for an artifact stored in this type */
  /* the sections of a matrix, in binding order; the last one marks the type
   * (q4z: BASE.zero_points beside BASE.quant and BASE.scales) */
  wisp_quant_plane planes[WISP_QUANT_MAX_PLANES];
  int n_planes;
  void (*dequant_row)(const wisp_matrix *m, int row, float *out);
  const char *cpu_kernels[3]; /* the cpu backend's matmul variants that read it (NULL-ended) */
  uint32_t ggml_type;         /* GGUF type with the very same bytes, or WISP_QUANT_NO_GGML */
  /* Single-plane block types (Q8_0, Q4_K and the ggml types of qblocks.h):
   * one block of `q` (block_bytes) into `block` floats; NULL for the others. */
  void (*block_f32)(const uint8_t *blk, float *out);
} wisp_quant_traits;

/* The row of a type (NULL for a value outside the enum). */
const wisp_quant_traits *wisp_quant_traits_of(wisp_wtype t);
/* All rows, in binding order; *n gets the count. */
const wisp_quant_traits *wisp_quant_table(int *n);
/* Bytes a rows x cols matrix of type t occupies, every section counted. */
uint64_t wisp_quant_bytes(wisp_wtype t, int rows, int cols);
/* The same for a bound matrix (a matrix in row parts: its parts'). */
uint64_t wisp_matrix_bytes(const wisp_matrix *m);
/* The quantBits of a matrix's type (in row parts: its first part's). */
int wisp_matrix_quant_bits(const wisp_matrix *m);
/* 1 for a matrix in row parts of different types (type WISP_W_PARTS): a
 * product by it is a product by each part, with each part's own kernel. A
 * matrix in row parts of one type (n_parts, type that type) runs as one
 * matrix of its type; only reading its bytes needs the parts. */
int wisp_matrix_mixed(const wisp_matrix *m);
/* The host bytes that identify a matrix (its f32 values or `q`; a matrix in
 * row parts: its first part's), e.g. to find its device copy or a tied one. */
const void *wisp_matrix_host(const wisp_matrix *m);
/* Rows [row0, row0 + rows) of a matrix of a single-plane type, as a plain
 * matrix of that type stores them, into out (wisp_quant_bytes(type, rows,
 * cols) bytes): a matrix in row parts of one type gathered from its parts. */
void wisp_matrix_copy_rows(const wisp_matrix *m, int row0, int rows, uint8_t *out);
/* A matrix in row parts of one type as a plain matrix of it: *flat its
 * copy with no parts, its bytes gathered into a new buffer (*owned, the
 * caller's to free). 0 when out of memory. */
int wisp_matrix_gather(const wisp_matrix *m, wisp_matrix *flat, uint8_t **owned);
/* 1 when m is of type t, or has a part of that type. */
int wisp_matrix_holds(const wisp_matrix *m, wisp_wtype t);
/* The type whose cpu_kernels name `variant`, or NULL. */
const wisp_quant_traits *wisp_quant_of_cpu_kernel(const char *variant);
/* Binds BASE.* sections of an artifact as a rows x cols matrix: the first
 * type of the table whose marking section is present, each of its sections
 * checked against its size. One line naming the artifact and section when
 * cols is not a whole number of blocks or nothing matches. */
wisp_status wisp_matrix_bind(const wisp_artifact *a, const char *base, int rows, int cols, wisp_matrix *m);

/* 1 when the artifact holds BASE in any weight type (e.g. an untied head). */
int wisp_matrix_present(const wisp_artifact *a, const char *base);

#endif
