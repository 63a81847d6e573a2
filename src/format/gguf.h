/* GGUF v3 (llama.cpp's single-file model format), read and written by wisp's
 * own code from the public format description (docs/gguf.md):
 *
 *   "GGUF" magic, u32 version (3), u64 tensor count, u64 metadata count,
 *   metadata: {string key, u32 value type, value}..., where a string is a u64
 *   length + bytes and an array is u32 element type + u64 count + elements,
 *   tensor infos: {string name, u32 n_dims, u64 ne[n_dims], u32 ggml type,
 *   u64 offset}..., padding to `general.alignment` (default 32), tensor data.
 *   ne[0] is the fastest-varying dimension (the columns of a matrix).
 *
 * Opening validates everything structural and fails with one line naming the
 * file: bad magic, unsupported version, truncated header or metadata, an
 * unknown value or tensor type, a tensor whose data lies past the end of the
 * file, misaligned or duplicate tensors. Nothing is copied; values and
 * tensor data point into the mapped file. */
#ifndef WISP_GGUF_H
#define WISP_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "wisp.h"

enum {
  WISP_GGUF_UINT8 = 0, WISP_GGUF_INT8 = 1, WISP_GGUF_UINT16 = 2, WISP_GGUF_INT16 = 3, WISP_GGUF_UINT32 = 4,
  WISP_GGUF_INT32 = 5, WISP_GGUF_FLOAT32 = 6, WISP_GGUF_BOOL = 7, WISP_GGUF_STRING = 8, WISP_GGUF_ARRAY = 9,
  WISP_GGUF_UINT64 = 10, WISP_GGUF_INT64 = 11, WISP_GGUF_FLOAT64 = 12
};

/* ggml tensor types wisp reads (numbers as in the format). */
enum {
  WISP_GGML_F32 = 0, WISP_GGML_F16 = 1, WISP_GGML_Q4_0 = 2, WISP_GGML_Q4_1 = 3, WISP_GGML_Q5_0 = 6, WISP_GGML_Q5_1 = 7,
  WISP_GGML_Q8_0 = 8, WISP_GGML_Q2_K = 10, WISP_GGML_Q3_K = 11, WISP_GGML_Q4_K = 12, WISP_GGML_Q5_K = 13,
  WISP_GGML_Q6_K = 14, WISP_GGML_BF16 = 30
};

#define WISP_GGUF_MAX_DIMS 4

typedef struct {
  const char *s; /* not NUL-terminated */
  uint64_t len;
} wisp_gguf_str;

typedef struct {
  char *key;
  uint32_t type;     /* WISP_GGUF_* */
  uint32_t arr_type; /* element type of an ARRAY */
  uint64_t n;        /* element count of an ARRAY */
  union { uint64_t u; int64_t i; double f; } num; /* integer, float and bool scalars */
  wisp_gguf_str str;     /* STRING */
  const uint8_t *arr;    /* numeric ARRAY elements (little-endian, unaligned) */
  wisp_gguf_str *strs;   /* STRING ARRAY elements (n of them) */
} wisp_gguf_kv;

typedef struct {
  char *name;
  int n_dims;
  uint64_t ne[WISP_GGUF_MAX_DIMS]; /* unused dims are 1 */
  uint32_t type;                   /* WISP_GGML_* */
  uint64_t offset;                 /* relative to the data section */
  uint64_t numel, bytes;
  const uint8_t *data;
} wisp_gguf_tensor;

typedef struct {
  char *label;
  const uint8_t *map;
  size_t len;
  int mapped; /* map belongs to us (wisp_gguf_open) */
  uint8_t *head; /* a streamed file's header, read into memory (format/weight_source.h), or NULL */
  uint32_t version;
  uint64_t alignment, data_offset;
  wisp_gguf_kv *kv;
  uint64_t n_kv;
  wisp_gguf_tensor *tensors;
  uint64_t n_tensors;
} wisp_gguf;

wisp_status wisp_gguf_open(const char *path, wisp_gguf **out);
/* Parses a GGUF image in memory (not copied; must outlive the result). */
wisp_status wisp_gguf_parse(const uint8_t *data, size_t len, const char *label, wisp_gguf **out);
void wisp_gguf_close(wisp_gguf *g);

const wisp_gguf_kv *wisp_gguf_kv_find(const wisp_gguf *g, const char *key);
/* Scalar values of any integer (or bool) type; 0 when absent or not one. */
int wisp_gguf_get_int(const wisp_gguf *g, const char *key, int64_t *out);
/* Any float or integer scalar. */
int wisp_gguf_get_float(const wisp_gguf *g, const char *key, double *out);
/* Element i of a numeric array as an integer / double. */
int64_t wisp_gguf_arr_int(const wisp_gguf_kv *kv, uint64_t i);
double wisp_gguf_arr_float(const wisp_gguf_kv *kv, uint64_t i);
const wisp_gguf_tensor *wisp_gguf_tensor_find(const wisp_gguf *g, const char *name);

const char *wisp_ggml_type_name(uint32_t type);
/* Elements per block and bytes per block; 0 for a type wisp does not read. */
int wisp_ggml_block(uint32_t type, size_t *bytes);
/* Dequantizes a tensor of any supported type into out[numel]. */
wisp_status wisp_gguf_read_f32(const wisp_gguf *g, const wisp_gguf_tensor *t, float *out);

/* Q8_0 (blocks of 32: f16 d, 32 int8; value = d * q), used by export. */
void wisp_quantize_q8_0(const float *x, size_t n, uint8_t *out);

/* ---- writing ---- */
typedef struct wisp_gguf_writer wisp_gguf_writer;
wisp_gguf_writer *wisp_gguf_writer_new(void);
void wisp_gguf_writer_free(wisp_gguf_writer *w);
void wisp_gguf_put_u32(wisp_gguf_writer *w, const char *key, uint32_t v);
void wisp_gguf_put_i32(wisp_gguf_writer *w, const char *key, int32_t v);
void wisp_gguf_put_f32(wisp_gguf_writer *w, const char *key, float v);
void wisp_gguf_put_bool(wisp_gguf_writer *w, const char *key, int v);
void wisp_gguf_put_str(wisp_gguf_writer *w, const char *key, const char *v);
void wisp_gguf_put_arr_str(wisp_gguf_writer *w, const char *key, const char *const *v, uint64_t n);
void wisp_gguf_put_arr_i32(wisp_gguf_writer *w, const char *key, const int32_t *v, uint64_t n);
void wisp_gguf_put_arr_f32(wisp_gguf_writer *w, const char *key, const float *v, uint64_t n);
/* Adds a tensor; `data` (bytes long) is copied. ne[0] is the row length. */
wisp_status wisp_gguf_add_tensor(wisp_gguf_writer *w, const char *name, int n_dims, const uint64_t *ne, uint32_t type,
                                 const void *data, size_t bytes);
/* Writes the file atomically (PATH.tmp-PID, then rename). */
wisp_status wisp_gguf_writer_write(wisp_gguf_writer *w, const char *path);

#endif
