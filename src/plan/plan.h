/* The inspectable execution plan: for prefill and decode, the ordered ops of
 * each layer type (plus embed first and final norm + head + sample last),
 * each with its kernel, geometry and provenance; serialized to canonical JSON
 * whose sha256 is the plan id. See docs/plan.md. */
#ifndef WISP_PLAN_PLAN_H
#define WISP_PLAN_PLAN_H

#include <stdio.h>
#include <cJSON.h>

#include "format/artifact.h"
#include "format/tensor.h"
#include "model/shape.h"
#include "plan/profile.h"
#include "plan/registry.h"
#include "plan/rules.h"
#include "wisp.h"

/* Reads a manifest's runtime.shape object (layerTypes, hidden, ffn, vocab,
 * heads, kvHeads, headDim, quantBits, convCache). `where` prefixes errors. */
wisp_status wisp_model_shape_from_json(const cJSON *shape, const char *where, wisp_model_shape *out);

typedef enum {
  WISP_PROV_DEFAULT = 0, /* registry order / the variant's own workgroup */
  WISP_PROV_RULE,        /* a registry rule chain, detail "CHAIN#INDEX" */
  WISP_PROV_PROFILE,     /* a profile patch, detail "PROFILE-ID: JSON.PATH" */
  WISP_PROV_CANDIDATE,   /* the manifest candidate, detail "KEY: matvec.SHAPE" */
  WISP_PROV_KNEE         /* the manifest knee, detail "knee[i]: SHAPE" */
} wisp_prov_kind;

typedef struct {
  wisp_prov_kind kind;
  char detail[192];
} wisp_provenance;

typedef struct {
  int workgroup_size, subgroup_size, rows_per_subgroup, subgroups_per_row; /* 0 = not set */
} wisp_geometry;

#define WISP_PLAN_MAX_CONSTANTS 16
#define WISP_PLAN_MAX_FUSIONS 32

typedef struct {
  char op[32];        /* registry operation: "matmul", ... (for `add`, the step's name) */
  char section[32];   /* "conv.in_proj", "head.norm", ... or "" */
  int layer;          /* -1 in the prologue/epilogue; in a group, its first layer */
  char kernel[96];    /* "OP/VARIANT" (registry) or a profile addKernels key */
  char backend[8];
  char entry[64];
  char wgsl[128];     /* webgpu: file under the kernels dir; "" for cpu */
  int workgroup[3];
  int rows, cols;     /* matmul / embed: weight rows x cols; 0 otherwise */
  int residual;       /* the op adds its output into the residual stream */
  wisp_geometry geometry;
  char manifest_variant[32]; /* candidate.matvec[SHAPE].variant, informational */
  int n_constants;    /* profile kernel constants */
  struct { char key[48]; double value; int is_bool; } constants[WISP_PLAN_MAX_CONSTANTS];
  wisp_provenance kernel_from, geometry_from;
  char note[160];     /* e.g. why manifest geometry was not applied */
  /* A matmul by a matrix in row parts of different types (format/tensor.h,
   * a GGUF's fused section): each part's kernel, resolved as for a matrix
   * of that part's type (kernel above is the first part's); 0 otherwise. */
  int n_parts;
  struct {
    int rows;
    char weight_dtype[8];
    char kernel[96], wgsl[64];
    wisp_geometry geometry;
    wisp_provenance kernel_from;
  } parts[WISP_MATRIX_MAX_PARTS];
  int part_at; /* while resolving: the part whose weight type the rules see */
} wisp_plan_op;

typedef struct {
  wisp_layer_kind type;
  int n_layers;
  int *layers;
  int n_ops;
  wisp_plan_op *ops;
} wisp_plan_group;

typedef struct {
  const char *name; /* "prefill" | "decode" */
  int tokens;
  int n_prologue, n_groups, n_epilogue;
  wisp_plan_op *prologue, *epilogue;
  wisp_plan_group *groups;
  int n_layers;
  int *layer_group; /* layer -> index into groups */
} wisp_plan_phase;


typedef struct {
  char id[65];                  /* sha256 hex of the canonical JSON without planId */
  char backend[8];
  wisp_device_caps device;
  wisp_plan_phase phases[2];
  wisp_batching batching, decode_loop;
  wisp_fusions fusions;
  /* Execution the manifest's tuned candidate asks for (candidate.convFuse:
   * the decode conv fused into its in_proj product; candidate.flashBlocks:
   * how many blocks one decode token's attention is split over), with
   * where each value came from ("default" or "manifest candidate"). */
  int conv_fuse, flash_blocks;
  const char *conv_fuse_from, *flash_blocks_from;
  /* The prefill products' tiles a tuned entry chose (candidate.prefillTile
   * "TMxTN", prefillTileI8 "TMxTNxRMxRNxKB"; docs/tuning.md); 0: the
   * backend's own. */
  int prefill_tile[2], prefill_tile_i8[5];
  /* The KV caches' element type, "f32" or "f16" (packed halves): f16 when a
   * decode attention op is bound to a profile kernel whose
   * precision.kvDtype is "f16" (kv_dtype_from names it), else "f32"
   * ("default"). The cpu backend keeps f32 caches whatever it says. */
  char kv_dtype[4];
  int rope_pairs; /* the model's wisp_rope_pairs (format/tensor.h), shown with the attention layers */
  const char *kv_dtype_from;
  /* The persistent decode (WebGPU, greedy decoding): the registry's
   * persistent_decode variant for the architecture ("persistent_decode/wgsl"
   * for LFM2-style graphs, ".../wgsl_qwen3_5" for Qwen 3.5) when the
   * backend is webgpu, the device has subgroups and the registry has the
   * variant and no profile patch binds a kernel to a decode op (the persistent
   * decode would not run it), else "" (persist_min_steps 0); persist_min_steps: the fewest
   * decode steps a batch needs to take it (the variant's metadata
   * "minSteps", else 1). The backend still checks the weights, the sampling
   * and its grid when it runs. */
  char persist_kernel[48];
  int persist_min_steps;
  char persist_off[256]; /* why persist_kernel is "" (for wisp plan) */
  /* The fusions the pass over the model's graph found (model/graph_fuse.c),
   * one entry per pair of ops, with the layers where the pair occurs and
   * whether this plan applies it (a backend that fuses, and the switch that
   * allows it; `why` names them). */
  int n_graph_fusions;
  struct {
    char name[24];          /* "rmsnorm+matmul" */
    char first[48], second[48]; /* "rmsnorm mlp.gate_up.norm", "matmul mlp.gate_up" */
    char layers[128];       /* "0-5,7" ("" for the epilogue) */
    int applied;
    char why[96];
  } graph_fusions[WISP_PLAN_MAX_FUSIONS];
  int n_not_implemented;
  char **not_implemented;
  /* The manifest's tuned entries (plan/tuned.h): tuned_used says which entry
   * this plan uses ("" none), tuned_ignored each other one with its reason;
   * tuned_present 0 when the manifest has no "tuned" array. */
  int tuned_present;
  char *tuned_used;
  int n_tuned_ignored;
  char **tuned_ignored;
  char *profile_id;             /* NULL without a profile */
  char *json;                   /* canonical JSON including "planId" */
  wisp_arena *arena;            /* owns the arrays above */
} wisp_plan;

struct wisp_graph; /* model/graph.h */

typedef struct {
  const wisp_model_shape *shape;
  /* The model's step (model/graph.h) the op lists are read from; NULL: the
   * architecture the shape names describes it from the shape. */
  const struct wisp_graph *graph;
  const cJSON *candidate;        /* manifest "candidate" (may be NULL) */
  const cJSON *knee;             /* manifest runtime.knee array (may be NULL) */
  const wisp_profile *profile;   /* may be NULL: registry choices only */
  const wisp_registry *registry;
  const wisp_device_caps *device;
  const char *backend;           /* "cpu" | "webgpu" */
  int prefill_tokens;            /* context "tokens" for prefill; 0 = 512 */
  /* The manifest's tuned entries as plan/tuned.h picked them (NULL: the
   * manifest has none); candidate and knee above already carry the used
   * entry. The plan keeps what was used and what was ignored, and why. */
  const struct wisp_tuned_choice_s *tuned;
} wisp_plan_inputs;

/* The manifest's parts a plan needs: runtime.shape into *shape; candidate and
 * runtime.knee borrowed from `manifest` (NULL when absent). `name` (the
 * manifest's file) prefixes errors. */
wisp_status wisp_plan_manifest_parts(const cJSON *manifest, const char *name, wisp_model_shape *shape,
                                     const cJSON **candidate, const cJSON **knee);
/* For webgpu: hasSubgroups / hasF16 from runtime.extraFeatures ("subgroups",
 * "shader-f16") and subgroupSize from runtime.expectedSubgroupSize, when the
 * manifest gives them. Leaves other fields alone. */
void wisp_device_caps_from_manifest(wisp_device_caps *d, const cJSON *manifest);

wisp_status wisp_plan_resolve(const wisp_plan_inputs *in, wisp_plan **out);
void wisp_plan_free(wisp_plan *p);
/* The ops of one layer in a phase (WISP_PHASE_*); NULL when out of range. */
const wisp_plan_op *wisp_plan_layer_ops(const wisp_plan *p, int phase, int layer, int *n_ops);
/* Human-readable listing. */
void wisp_plan_print(const wisp_plan *p, FILE *f);
const char *wisp_prov_kind_name(wisp_prov_kind k);
/* 1 when session switch i (WISP_SW_*) is on in f. */
int wisp_switch_on(const wisp_fusions *f, int i);
/* The session switch that lets the rmsnorm before product `section` run
 * inside it: the FFN's own norm (mlp.gate_up) fusedFfnQ4K, the norms after a
 * residual (a layer's input norm, the final norm before the head)
 * usePostFfnNextInputRMSNormPairFusion. */
int wisp_norm_fuse_switch(const char *section);
/* The fusions (WISP_FUSE_*) of graph g's node `node` that plan p applies
 * (node -1: the head's, g->fused); g is the graph p was resolved from, or a
 * session's copy of it. */
unsigned wisp_plan_fusions_at(const wisp_plan *p, const struct wisp_graph *g, int node);
/* The plan's settings.session object (switches with on/off and provenance). */
cJSON *wisp_plan_switches_json(const wisp_plan *p);

#endif
