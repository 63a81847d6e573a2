/* The architecture interface. One file per architecture (lfm2.c, ...) binds
 * an artifact's sections to typed weights (checking every shape) and
 * describes its forward step as a graph of generic ops (graph.h). No file
 * here touches device memory or parses anything but the artifact's sections. */
#ifndef WISP_MODEL_H
#define WISP_MODEL_H

#include "backend/backend.h"
#include "format/artifact.h"
#include "model/graph.h"
#include "model/shape.h"


typedef struct wisp_arch {
  const char *name;
  /* Validates and binds sections; *weights is architecture-private. */
  wisp_status (*bind)(const wisp_artifact *a, void **weights);
  void (*free_weights)(void *weights);
  /* Longest context the bound weights support (rope tables, manifest). */
  int (*max_positions)(const void *weights);
  /* The model-wide facts a plan needs (layer types, sizes, weight dtype). */
  wisp_status (*plan_shape)(const void *weights, wisp_model_shape *out);
  /* The forward step as a graph of generic ops (graph.h), the one
   * description everything else derives from: the plan's op list, the
   * per-sequence state, prefill, decode (op by op, batched, persistent) and
   * the fusions. weights NULL: names and sizes only (a plan of a manifest
   * without weights). The graph points into the weights, which
   * nothing writes once the model is open (a session runs its own bound copy,
   * graph.h wisp_graph_bind). *g is the caller's (wisp_graph_free). */
  wisp_status (*describe)(const wisp_model_shape *shape, void *weights, wisp_graph *g);
  /* What the plan needs to know of the architecture beyond its graph: */
  /* the registry variant of its whole-step kernels (persistent_decode/<key>) */
  const char *registry_key;
  /* Hugging Face module names that profiles written for other runtimes
   * use, each with the op or section of this architecture's graph it
   * means ({"q_proj", "attn.qkv"}, ...); n_profile_aliases of them. */
  const char *const (*profile_aliases)[2];
  int n_profile_aliases;
  /* 1: the plan id's model part names the architecture and the Gated
   * DeltaNet sizes (0 keeps the ids of plans made before it did). */
  int plan_id_names_arch;
} wisp_arch;

const wisp_arch *wisp_arch_find(const char *name);
extern const wisp_arch wisp_arch_lfm2;
extern const wisp_arch wisp_arch_qwen3_5;
extern const wisp_arch wisp_arch_qwen2;
extern const wisp_arch wisp_arch_gemma3;

#endif
