/* Where a model file's weight bytes are read from: weights.bin of an
 * artifact, or a GGUF file.
 *
 * Natively the file is mapped (weight_source.c): every byte is memory and
 * these calls are the map, memcpy and sha256. The browser build
 * (web/wasm/weight_source_web.c) can leave a large file where the page has
 * it (a File from disk, a URL) and give it addresses past the end of wasm
 * memory instead, so that a model is never held whole in wasm memory: a
 * "streamed" range. The CPU must not read a streamed range directly; the
 * readers that need its bytes go through this header:
 *   - the WebGPU upload (wgpu_web.c's queue write) reads it in chunks
 *     straight into the GPU buffer;
 *   - the digest check hashes it in chunks (wisp_weights_sha256_hex);
 *   - what the CPU itself uses (norm vectors, blocks re-laid-out before
 *     upload) is copied in with wisp_weights_read or kept as a section's
 *     resident copy (wisp_artifact_bytes_resident, format/artifact.h). */
#ifndef WISP_FORMAT_WEIGHT_SOURCE_H
#define WISP_FORMAT_WEIGHT_SOURCE_H

#include <stddef.h>
#include <stdint.h>

#include "wisp.h"

/* Opens a model file read-only: *data is its first byte (mapped, or the
 * start of a streamed range), *len its size. */
wisp_status wisp_weights_open(const char *path, const uint8_t **data, size_t *len);
void wisp_weights_close(const uint8_t *data, size_t len);
/* 1 when the n bytes at p are memory the CPU may read; 0 for a streamed range. */
int wisp_weights_resident(const void *p, size_t n);
/* Copies n bytes at p (memory, or a streamed range) to dst. */
wisp_status wisp_weights_read(void *dst, const void *p, size_t n);
/* The n bytes at p, readable: p itself when resident, else a copy in a
 * buffer *owned that the caller frees (NULL and an error when out of memory
 * or the read fails). */
const void *wisp_weights_borrow(const void *p, size_t n, void **owned);
/* sha256 of the n bytes at p as 64 lowercase hex digits + NUL. Fails
 * (WISP_EIO, out unset) only when a streamed range could not be read. */
wisp_status wisp_weights_sha256_hex(const void *p, size_t n, char out[65]);

#endif
