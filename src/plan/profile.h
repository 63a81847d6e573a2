/* Runtime profiles (the seed profile's schema): `extends` chains resolved in a
 * profiles dir, intent checks, executionPatch verbs (addKernels with sha256
 * digests verified at load, set, add, remove), and typed batching, decodeLoop
 * and session fusion settings. Switches wisp does not implement are listed in
 * not_implemented, never dropped. See docs/plan.md. */
#ifndef WISP_PLAN_PROFILE_H
#define WISP_PLAN_PROFILE_H

#include <cJSON.h>

#include "plan/pjson.h"
#include "wisp.h"

#define WISP_DEFAULT_PROFILES_DIR "builtin:profiles" /* built in, util/builtin.h */

/* A WGSL kernel a profile brings (executionPatch.addKernels[]). */
typedef struct {
  const char *key;
  const char *file;     /* kernel.kernel: file under the kernels dir */
  const char *entry;    /* kernel.entry */
  const char *digest;   /* kernel.digest: "sha256:<64 hex>" */
  int n_requires;
  const char **requires; /* kernel.requires (wisp extension), may be empty */
  const cJSON *constants; /* kernel.constants, may be NULL */
  const cJSON *precision; /* kernel.precision, may be NULL */
  const char *kv_dtype;   /* kernel.precision.kvDtype: "f16", "f32" or NULL (unset) */
  const char *source;   /* "PROFILE-ID: runtime.inference.executionPatch.addKernels[i]" */
  const char *profile_file, *json_path; /* for messages */
} wisp_profile_kernel;

typedef enum { WISP_PATCH_SET, WISP_PATCH_ADD, WISP_PATCH_REMOVE } wisp_patch_verb;

typedef struct {
  wisp_patch_verb verb;
  const char *section;    /* "prefill" | "decode" | "all" */
  const char *op;         /* set/remove: op name or matmul section; add: the new step's name */
  const char *kernel_key; /* set/add: a profile kernel key or "op/variant" from the registry */
  const char *after, *before; /* add: anchor op (exactly one) */
  int n_layers;           /* 0 = every layer (and the prologue/epilogue) */
  int *layers;
  const char *source;     /* "PROFILE-ID: runtime.inference.executionPatch.set[i]" */
  const char *profile_file, *json_path; /* for messages */
} wisp_patch;

typedef struct {
  int present;
  int batch_size, readback_interval, ring_tokens, ring_stop, ring_staging, max_batch_decode_tokens;
  const char *stop_check_mode, *readback_mode; /* NULL when unset */
  int has_submit_latency;
  double submit_latency_threshold_ms;
  int disable_command_batching;
} wisp_batching;

/* Geometry of a Q4_K one-token product kernel (q4k_fused.wgsl): from
 * session.fusedFfnQ4K.decode.pipelineConstants or session.lmHeadArgmaxQ4K.
 * 0 = the backend's default. */
typedef struct {
  int workgroup_size, cols_per_wg, threads_per_col, full_block; /* full_block: 1/0, -1 unset */
} wisp_q4k_geometry;

/* The session switches (runtime.inference.session), typed. Each boolean is
 * 1 = the fused arrangement, 0 = the unfused one; all default to 1 except
 * where noted. `from[i]` says where switch i (WISP_SW_*) came from:
 * "default" or "PROFILE-ID: runtime.inference.session.KEY". */
enum {
  WISP_SW_RESIDUAL_ADD = 0,   /* fuseResidualAdd */
  WISP_SW_POST_FFN_NORM_PAIR, /* usePostFfnNextInputRMSNormPairFusion */
  WISP_SW_FFN_Q4K,            /* fusedFfnQ4K (.decode) */
  WISP_SW_HEAD_ARGMAX,        /* useGreedyLmHeadArgmaxFusion */
  WISP_SW_HEAD_ARGMAX_Q4K,    /* lmHeadArgmaxQ4K (geometry only) */
  WISP_SW_ATTN_OUTPUT_GATE,   /* attentionDecodeOnline.useOutputGateFusion */
  WISP_SW_ATTN_DIRECT_KV,     /* attentionDecodeOnline.useDirectContiguousKVLayout */
  WISP_SW_LIN_QKVZ,           /* useLinearAttentionQKVZProjectionFusion */
  WISP_SW_LIN_AB,             /* useLinearAttentionABProjectionFusion */
  WISP_SW_LIN_CORE,           /* useLinearAttentionFusedDecodeCore */
  WISP_SW_QKV_NORM_ROPE,      /* useFusedQKVSplitQKNormRoPE */
  WISP_SW_DECODE_LOOP,        /* decodeLoop (on unless decodeLoop.disableCommandBatching) */
  WISP_SW_COUNT
};
/* The JSON name of switch i (relative to runtime.inference.session). */
const char *wisp_switch_name(int i);

typedef struct {
  int residual_add;              /* fuseResidualAdd, default 1 */
  int greedy_head_argmax;        /* useGreedyLmHeadArgmaxFusion */
  int post_ffn_norm_pair;        /* usePostFfnNextInputRMSNormPairFusion */
  int fused_qkv_split_norm_rope; /* useFusedQKVSplitQKNormRoPE */
  int ffn_q4k;                   /* fusedFfnQ4K: false, or {decode: {variant, pipelineConstants}} */
  wisp_q4k_geometry ffn_geometry;
  wisp_q4k_geometry head_geometry; /* lmHeadArgmaxQ4K */
  int attn_output_gate, attn_direct_kv;
  int lin_qkvz, lin_ab, lin_core;
  int decode_loop;               /* 0: decodeLoop.disableCommandBatching (one token per submit) */
  const char *from[WISP_SW_COUNT];
} wisp_fusions;

/* All switches on, every `from` "default". */
void wisp_fusions_default(wisp_fusions *f);

typedef struct {
  char *path;             /* the leaf profile file */
  const char *id, *name, *intent, *model; /* id falls back to the file path */
  int n_compatible;
  const char **compatible_intents;
  int n_chain;
  const char **chain;     /* ids, ancestors first, leaf last */
  int n_kernels;
  wisp_profile_kernel *kernels;
  int n_patches;
  wisp_patch *patches;    /* ancestors' patches first, in file order */
  wisp_batching batching, decode_loop;
  wisp_fusions fusions;
  int n_not_implemented;
  const char **not_implemented; /* "not implemented: session.xyz" */
  int n_warnings;
  const char **warnings;
  int digests_verified;
  /* owned */
  int n_docs;
  cJSON **docs;
  cJSON *settings;
  wisp_arena *arena;
} wisp_profile;

typedef struct {
  const char *profiles_dir; /* NULL: WISP_DEFAULT_PROFILES_DIR */
  const char *kernels_dir;  /* NULL: WISP_DEFAULT_KERNELS_DIR */
  int skip_digests;         /* 1: structure-only (no addKernels digest check) */
  const char *intent;       /* requested intent, NULL: any */
} wisp_profile_options;

/* `ref` is a file path, or a name ("throughput", "profiles/throughput")
 * resolved to PROFILES_DIR/NAME.json. */
wisp_status wisp_profile_load(const char *ref, const wisp_profile_options *opt, wisp_profile **out);
void wisp_profile_free(wisp_profile *p);
const wisp_profile_kernel *wisp_profile_kernel_find(const wisp_profile *p, const char *key);
/* Checks `file` (path) against "sha256:<hex>". WISP_EHASH on mismatch. */
wisp_status wisp_kernel_digest_check(const char *file, const char *digest, char actual[72]);

#endif
