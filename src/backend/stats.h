/* Counters of the work a device backend did (the webgpu backend keeps
 * them; `wisp run --stats` and `wisp bench` report them). */
#ifndef WISP_BACKEND_STATS_H
#define WISP_BACKEND_STATS_H

#include <stdint.h>

typedef struct wisp_backend_stats {
  uint64_t dispatches;      /* recorded since creation */
  uint64_t submits;         /* command buffers submitted (one per sync with work) */
  uint64_t last_dispatches; /* dispatches in the last submitted command buffer */
  uint64_t bind_groups;     /* bind groups created (cache misses) */
  uint64_t weight_parts;    /* weight bindings sets uploaded (a split matrix counts its parts) */
  uint64_t spec_reads;      /* readbacks served by the copy recorded at the end of the last sync */
  uint64_t argmax_fused;    /* greedy sample_id calls served by head-product argmax partials */
  uint64_t deltanet_chunked; /* multi-token Gated DeltaNet calls run in chunks (dn_chunk_prep + dn_chunk_state + dn_chunk_norm) */
  uint64_t deltanet_split;  /* one-token Gated DeltaNet steps split over several workgroups a v-head (dn_decode + dn_norm) */
  uint64_t persistent_steps; /* decode steps run by the persistent kernel */
  uint64_t persistent_copy_ins; /* persistent runs that copied the session's state into their arena (the others went on from the last run's) */
  uint64_t persistent_gave_up; /* grid barriers that gave up (a run redone op by op) or grids the probe found smaller than asked: the device's workgroups were not all running at once (a loaded CPU adapter) */
  uint64_t input_fused;     /* DeltaNet gated norms / gated attention merges computed by the Q4_K product reading them (PRE) */
  uint64_t q4k_superblock;  /* one-token Q4_K products by q4k_sb.wgsl (a thread per super-block) */
  uint64_t rows_shared;     /* batched-step products (matmul_rows of n > 1) by matvec_rows / q4k_matvec_rows: a weight read once for several rows */
  uint64_t tiled_products;  /* f32-activation prefill products by matmul.wgsl (wgpu_products_tiled.c) */
  uint64_t rows_sampled;    /* batched steps whose draws ran as one dispatch for all rows (sample_rows) */
  uint64_t attn_splits;     /* key blocks one-token attentions (wgpu_attention.c) were split over, summed (1 when unsplit) */
  uint64_t attn_long;       /* one-token attentions by attn_decode_long.wgsl (a workgroup per KV head and split) */
  uint64_t kv_grows;        /* KV caches grown (kv_buf_grow: reallocated and copied) */
  uint64_t persist_arena_grows; /* persistent-decode arenas remade to the KV caches' grown capacity (at the first batch after the caches grew) */
  uint64_t prefill_tiled;   /* several-token attentions by attn_flash_tiled.wgsl */
  uint64_t prefill_tiled_two_rows; /* of them, those whose lane groups took two query rows */
  uint64_t pipelines;       /* compute pipelines compiled (first use of each kernel variant) */
  double compile_seconds;   /* time spent compiling them: kept out of tok/s by run and bench */
} wisp_backend_stats;

#endif
