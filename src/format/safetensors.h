/* A reader for Hugging Face safetensors checkpoints, memory-mapped.
 *
 * A .safetensors file is: an 8-byte little-endian header length N, N bytes of
 * JSON ({"NAME": {"dtype": "F32", "shape": [..], "data_offsets": [b, e]}, ...,
 * "__metadata__": {...}}), then the data; offsets are relative to the byte
 * after the header. A checkpoint directory holds either model.safetensors or
 * model.safetensors.index.json ({"weight_map": {"NAME": "shard file"}}) and
 * the shards it names.
 *
 * Opening validates everything structural and fails with a one-line message
 * naming the file (and tensor): truncated header, header length past the end
 * of the file, malformed JSON, unknown dtype, data_offsets out of range or
 * not equal to shape * dtype size, overlapping tensors, a tensor in two
 * shards, an index entry missing from its shard. Nothing is copied until a
 * tensor is read; F32, F16 and BF16 tensors convert to f32 on request. */
#ifndef WISP_SAFETENSORS_H
#define WISP_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "wisp.h"

#define WISP_ST_MAX_DIMS 8

typedef enum {
  WISP_ST_F32 = 0,
  WISP_ST_F16,
  WISP_ST_BF16,
  WISP_ST_F64,
  WISP_ST_I64,
  WISP_ST_I32,
  WISP_ST_I16,
  WISP_ST_I8,
  WISP_ST_U64,
  WISP_ST_U32,
  WISP_ST_U16,
  WISP_ST_U8,
  WISP_ST_BOOL,
  WISP_ST_F8_E4M3,
  WISP_ST_F8_E5M2,
} wisp_st_dtype;

typedef struct {
  char *name;
  wisp_st_dtype dtype;
  int ndim;
  int64_t shape[WISP_ST_MAX_DIMS];
  uint64_t numel;
  const uint8_t *data; /* inside the mapped file; may be unaligned */
  uint64_t bytes;
  int file;            /* index into the checkpoint's files */
} wisp_st_tensor;

typedef struct {
  char *path;
  const uint8_t *map;
  size_t len;
} wisp_st_file;

typedef struct {
  wisp_st_file *files;
  int n_files;
  wisp_st_tensor *tensors; /* sorted by name */
  int n_tensors;
} wisp_safetensors;

const char *wisp_st_dtype_name(wisp_st_dtype t);
size_t wisp_st_dtype_size(wisp_st_dtype t);

/* Opens one .safetensors file. */
wisp_status wisp_safetensors_open_file(const char *path, wisp_safetensors **out);
/* Opens DIR/model.safetensors, or the shards named by
 * DIR/model.safetensors.index.json when that exists. */
wisp_status wisp_safetensors_open_dir(const char *dir, wisp_safetensors **out);
void wisp_safetensors_close(wisp_safetensors *st);

/* NULL when absent. */
const wisp_st_tensor *wisp_safetensors_find(const wisp_safetensors *st, const char *name);
/* The file a tensor lives in (for messages). */
const char *wisp_safetensors_file_of(const wisp_safetensors *st, const wisp_st_tensor *t);
/* Shape as "[a, b, c]" into buf. */
const char *wisp_st_shape_str(const int64_t *shape, int ndim, char *buf, size_t cap);
/* Converts a F32/F16/BF16 tensor into out[numel]; other dtypes fail. */
wisp_status wisp_safetensors_read_f32(const wisp_safetensors *st, const wisp_st_tensor *t, float *out);

/* IEEE half and bfloat16 to f32 (exact). */
float wisp_f16_to_f32(uint16_t h);
float wisp_bf16_to_f32(uint16_t h);

#endif
