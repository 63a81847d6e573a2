/* The architecture interface. One file per architecture (lfm2.c, ...) binds
 * an artifact's sections to typed weights (checking every shape) and
 * describes its forward pass as calls on a wisp_backend. No file here
 * touches device memory or parses anything but the artifact's sections. */
#ifndef WISP_MODEL_H
#define WISP_MODEL_H

#include "backend/backend.h"
#include "format/artifact.h"
#include "plan/plan.h"

struct wisp_model_rows; /* model/common.h */

typedef struct wisp_arch {
  const char *name;
  /* Validates and binds sections; *weights is architecture-private. */
  wisp_status (*bind)(const wisp_artifact *a, void **weights);
  void (*free_weights)(void *weights);
  /* Longest context the bound weights support (rope tables, manifest). */
  int (*max_positions)(const void *weights);
  /* The matrix a plan op addresses: layer (-1 for global) and section
   * ("conv.in_proj", "mlp.down", "head", ...); NULL when there is none. */
  wisp_matrix *(*matrix)(void *weights, int layer, const char *section);
  /* The model-wide facts a plan needs (layer types, sizes, weight dtype). */
  wisp_status (*plan_shape)(const void *weights, wisp_model_shape *out);
  /* Optional: where the plan's kernel choice for a non-matmul op of a layer
   * goes ([prefill, decode]), e.g. a profile's attention kernel; NULL when
   * the op takes none. */
  wisp_kernel_choice *(*op_choice)(void *weights, int layer, const char *op);
  wisp_status (*prepare)(void *weights, wisp_backend *be);
  /* State for one sequence: KV cache, conv state, activations for up to
   * `chunk` tokens per forward call. */
  wisp_status (*state_new)(const void *weights, wisp_backend *be, int chunk, int max_pos, void **state);
  void (*state_reset)(void *state, wisp_backend *be);
  void (*state_free)(void *state, wisp_backend *be);
  /* The state a token changes for good, beyond its own KV-cache position
   * (conv and recurrent states): up to cap buffers and their lengths in
   * floats; returns how many. The decode loop snapshots them before a
   * batch so that a batch that ran past a stop token can be rewound. */
  int (*state_bufs)(void *state, wisp_buf **bufs, size_t *lens, int cap);
  /* Runs n (<= chunk) tokens at positions pos0.. and, when logits is
   * non-NULL, writes the vocabulary logits of the last one, or with
   * all_logits those of every one (n x vocab, row r = token r). */
  wisp_status (*forward)(const void *weights, void *state, wisp_backend *be, const int32_t *tokens, int n,
                         int pos0, float *logits, int all_logits);
  /* One decode step that never leaves the device (the decode loop): the
   * token is ids[slot], the chosen successor goes to ids[slot + 1], at
   * position pos. Records only; the caller syncs after a batch of steps. */
  wisp_status (*decode_step)(const void *weights, void *state, wisp_backend *be, wisp_buf *ids, int slot, int pos,
                             const wisp_sampling *sampling, uint32_t step);
  /* Optional: the decode step as data (backend.h, wisp_decode_graph) for
   * backends that run many steps in one device call; fills *out and
   * returns WISP_OK, or WISP_EUNSUPPORTED when this model has no such form. */
  wisp_status (*decode_graph)(const void *weights, void *state, wisp_decode_graph *out);
  /* Optional: one decode step for several sequences at once. scratch is a
   * state made by state_new with chunk >= rows->n (its activations serve
   * the rows; its own caches are not used). Feeds tokens[r] to the sequence
   * whose state is rows->states[r] at position rows->pos[r], writes that
   * row's logits into logits ([n][vocab]) and chooses its next token into
   * ids[r] (sampling.h, drawn at step pos[r] + 1). Every product reads its
   * weight once for all rows (backend matmul_rows); the mixers (conv,
   * attention, recurrence) run on each row's own state. A row's arithmetic
   * does not depend on the other rows: each sequence gets the tokens it
   * gets alone. Records only. */
  wisp_status (*step_rows)(const void *weights, void *scratch, wisp_backend *be, const int32_t *tokens,
                           const struct wisp_model_rows *rows, const wisp_sampling *sampling, wisp_buf *logits,
                           wisp_buf *ids);
} wisp_arch;

const wisp_arch *wisp_arch_find(const char *name);
extern const wisp_arch wisp_arch_lfm2;
extern const wisp_arch wisp_arch_qwen3_5;

#endif
