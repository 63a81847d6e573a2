/* A wisp model artifact: a directory with manifest.json and weights.bin.
 *
 * manifest.json's `runtime` object follows the seed schema (shape, weightBytes,
 * sections with name/offset/bytes, maxPositions, candidate, ...); wisp adds an
 * optional top-level `wisp` object (architecture, ropeTheta, normEps,
 * tokenizer, weightsSha256). weights.bin is memory-mapped, never copied
 * (or, in the browser, streamed: format/weight_source.h).
 * docs/artifact.md is the specification; this file owns parsing and
 * structural validation (sizes, offsets, overlaps). What each section means
 * for an architecture is checked by the model file (src/model/). */
#ifndef WISP_ARTIFACT_H
#define WISP_ARTIFACT_H

#include <cJSON.h>
#include <stdint.h>

#include "wisp.h"

/* Layer kinds: LFM2 "conv"; "attention" (synonym "full_attention"); Qwen 3.5
 * "linear_attention" (Gated DeltaNet). */
enum { WISP_LAYER_CONV = 0, WISP_LAYER_ATTENTION = 1, WISP_LAYER_LINEAR = 2 };

/* The architecture of a manifest that names none (artifacts written before
 * wisp.architecture existed). */
#define WISP_DEFAULT_ARCHITECTURE "lfm2"

typedef struct {
  int n_layers;
  int *layer_types; /* WISP_LAYER_* per layer */
  int hidden, ffn, vocab, heads, kv_heads, head_dim, conv_cache;
  int quant_bits, quant_block;
  /* Qwen 3.5 (wisp fields of runtime.shape, 0 when absent): Gated DeltaNet
   * key/value heads and head widths, rotated dims of full-attention heads. */
  int lin_k_heads, lin_v_heads, lin_k_dim, lin_v_dim, rotary_dim;
  int rope_pairs; /* wisp_rope_pairs (format/tensor.h): runtime.shape.ropePairs "halves" (default) or "adjacent" */
} wisp_shape;

typedef struct {
  char *name;
  uint64_t offset, bytes;
  /* A model opened from a GGUF (format/gguf_artifact.h): the section's
   * bytes (inside the file's mapping, or an owned buffer for a tensor
   * transformed at open) and where they came from, for `wisp plan`.
   * NULL for an artifact directory: weights + offset. */
  const uint8_t *data;
  char *origin;
  /* A copy in memory of a streamed section the CPU reads
   * (wisp_artifact_bytes_resident), or NULL. */
  uint8_t *resident;
  /* The first part of a matrix stored in row parts (format/quant.h
   * wisp_matrix_bind): the parts as bound, kept here so that the matrix
   * views need no freeing; owned. */
  struct wisp_matrix *parts;
  int n_parts;
} wisp_section;

typedef struct {
  char *dir;                 /* NULL for a manifest parsed on its own */
  cJSON *manifest;           /* owned; the whole document */
  const cJSON *runtime;      /* borrowed from manifest */
  wisp_shape shape;
  char architecture[32];     /* wisp.architecture, WISP_DEFAULT_ARCHITECTURE when the manifest names none */
  char tokenizer[32];        /* "byte" */
  double rope_theta, norm_eps;
  int max_positions;         /* longest context the artifact supports */
  uint64_t weight_bytes;
  wisp_section *sections;
  int n_sections;
  const uint8_t *weights;    /* mapped weights.bin (NULL until opened) */
  size_t weights_len;
  /* Opened from a GGUF file (dir is then the file's path): the parsed,
   * mapped file and the buffers of tensors transformed at open. */
  struct wisp_gguf_source *gguf;
  /* How to release it (set by the GGUF open), so that this file needs
   * nothing of format/gguf_artifact.h: the two would otherwise include each
   * other (docs/architecture.md forbids include circles). */
  void (*gguf_free)(struct wisp_gguf_source *);
} wisp_artifact;

/* Parses and structurally validates a manifest (no weights). `label` names
 * the file in error messages. On success *out owns everything. */
wisp_status wisp_manifest_parse(const char *text, const char *label, wisp_artifact **out);
/* runtime.shape.ropePairs into *out (wisp_rope_pairs, format/tensor.h):
 * "halves", also when absent, or "adjacent"; any other value fails with
 * one line naming `where` (the shape's place, e.g. "DIR: runtime.shape"). */
wisp_status wisp_shape_rope_pairs(const cJSON *shape, const char *where, int *out);
/* Opens DIR/manifest.json + DIR/weights.bin, validates, maps the weights.
 * A regular file (FILE.gguf) is opened as a GGUF instead
 * (format/gguf_artifact.h); that choice is made in format/artifact_open.c. */
wisp_status wisp_artifact_open(const char *dir, wisp_artifact **out);
/* The directory case alone (artifact.c). */
wisp_status wisp_artifact_open_dir(const char *dir, wisp_artifact **out);
void wisp_artifact_free(wisp_artifact *a);

/* The bytes of a section: its own pointer (GGUF) or weights + offset. */
const uint8_t *wisp_section_data(const wisp_artifact *a, const wisp_section *s);
const wisp_section *wisp_artifact_section(const wisp_artifact *a, const char *name);
/* Pointer to a section's bytes; checks the expected size when bytes > 0. */
wisp_status wisp_artifact_bytes(const wisp_artifact *a, const char *name, uint64_t expect_bytes,
                                const uint8_t **data);
/* The same for bytes the CPU reads itself (norm vectors, tables): a
 * streamed section (format/weight_source.h) is read into memory once and
 * kept with the section. */
wisp_status wisp_artifact_bytes_resident(const wisp_artifact *a, const char *name, uint64_t expect_bytes,
                                         const uint8_t **data);

#endif
