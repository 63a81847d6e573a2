/* The WebGPU backend's options (wisp_wgpu_backend_new) and its counters
 * (wisp_wgpu_backend_stats_get); apart from wgpu_backend.h so that the
 * backend's own files can read them without including the constructor's
 * header. A session makes the backend with the device fields only (the
 * factory); the tuning keys' fields come at configure, from the settings
 * object (backend.h wisp_backend_settings.tuning). Unit tests of the
 * backend's files set them here. */
#ifndef WISP_WGPU_OPTIONS_H
#define WISP_WGPU_OPTIONS_H

#include <stddef.h>
#include <stdint.h>

#include "backend/stats.h"
#include "backend/webgpu/wgpu_device.h"

typedef struct wisp_wgpu_backend_opts {
  wisp_wgpu_device *device; /* use this device (not owned); NULL = open one */
  int subgroups;            /* -1 auto (subgroup variants when the device has them), 0 plain, 1 require */
  int refuse_cpu_adapter;   /* fail when the adapter is a CPU (lavapipe): "auto" prefers the CPU backend */
  int no_fuse;              /* no decode-time fusion (rmsnorm/swiglu into the next matvec, in_proj with
                               shortconv, attn_decode): every op on its own (tuning fuse=0) */
  /* Geometry; 0 = the tuning table's default (tuning matvec=WGxROWS,
   * matmul=TMxTN). A session's settings (configure) may replace matvec_wg/rows
   * for every matrix (wisp_backend_settings.matvec_wg). */
  uint32_t matvec_wg, matvec_rows, matmul_tm, matmul_tn, matmul_rm, matmul_rn; /* matmul*: 0 = by size */
  int matmul_one_buffer; /* tests: matmul.wgsl with DB 0 (one workgroup buffer) even where two fit */
  /* Flash-decoding: most workgroups per head that one decode token's
   * attention is split over (one per 64-key tile up to this; 0 = the table's
   * default, 1 = no split); the plan's flashBlocks replaces it (configure). */
  uint32_t attn_max_splits;
  /* Flash-decoding at long contexts (tuning attnSplitsLong=TILESxMOST):
   * past attn_max_splits splits, one split per TILES key tiles, up to MOST
   * splits, so that a split's keys stop growing with the context (0: the
   * count stays at attn_max_splits). */
  uint32_t attn_long_tiles, attn_long_most;
  /* One-token attention over attn_decode_long_min keys or more by
   * attn_decode_long.wgsl (a workgroup per KV head and split, every query
   * head of the group at once), split for about attn_decode_long_wgs
   * workgroups in all (tuning attnLong=KEYSxWORKGROUPS; KEYS 0: never). */
  uint32_t attn_decode_long_min, attn_decode_long_wgs;
  /* Test hook: largest storage binding the backend may use for a weight part
   * (0 = the device's maxStorageBufferBindingSize); smaller forces splits. */
  uint64_t max_binding;
  /* Test hook: bytes of the uniform arena (0 = 8 MiB); a small one makes a
   * long recording submit early and start the arena again. When the arena
   * fills up it doubles, up to arena_max_bytes (0: 64 MiB for the default
   * arena, no growth for a given arena_bytes). */
  size_t arena_bytes, arena_max_bytes;
  /* KV cache as f16 pairs packed in u32 words (pack2x16float, no shader-f16
   * needed): half the KV bytes, f16 rounding of keys and values (~1e-3
   * relative). Caches from kv_buf_new are half-size; an f32-sized one from
   * buf_new works too (its first half is used). Needs head_dim % 8 == 0.
   * Also tuning kv=f16, or a plan whose kvDtype is f16 (configure's
   * wisp_backend_settings.kv_f16, before the session makes its caches).
   * 0 = f32 (exact parity with the CPU backend). */
  int kv_f16;
  /* One-token Gated DeltaNet (dn_decode.wgsl): value columns of a v-head
   * per workgroup (a power of two; 0 = 16; >= v_dim: one workgroup per
   * v-head with the gated norm inside, else a second dispatch, dn_norm,
   * applies it) and row groups per workgroup (a power of two; 0 = about 8
   * state rows per thread). Also tuning dnSlice=COLS or COLSxGROUPS. */
  uint32_t dn_cols, dn_groups;
  /* Chunked Gated DeltaNet (wgpu_deltanet_chunked.c): calls of at least
   * dn_chunk_min tokens run the chunkwise-parallel form instead of the
   * token-by-token dn_recur (0: the table's default; tuning dnChunkMin=N),
   * its state pass taking dn_chunk_cols value columns a workgroup (4, 8, 16
   * or 32; 0: the default; tuning dnChunkCols=N). */
  uint32_t dn_chunk_min, dn_chunk_cols;
  int no_dn_prep_shared; /* tuning dnPrepShared=0: dn_chunk_prep's solve reads F back from storage, not from
                          * workgroup memory (an A/B switch; the same sums either way) */
  uint32_t dn_chunk_unroll; /* tuning dnChunkUnroll=N (1..4; 0: the default, 4): dn_chunk_state's loops take up
                             * to N steps a batch of loads; the same sums either way */
  /* Persistent decode (wgpu_persist.c: greedy decode steps of a short-conv
   * / attention or gated model in one dispatch): 0 auto (on: measured faster than
   * the op-by-op path at every batch size on the H200 and on lavapipe; for
   * gated models not on CPU adapters, where lavapipe compiles its kernel for
   * ~35 s), -1 off, 1 on (tuning persist=0|1). */
  int persist;
  /* The rest: tuning and test switches, set through the session's tuning
   * string (src/backend/tuning.c lists the keys and their defaults;
   * docs/configuration.md); 0 = the table's default (wisp_tuning_fill_defaults). */
  uint32_t persist_grid;      /* persistGrid: workgroups of the persistent decode (0: probed from 128 or 132) */
  uint32_t persist_splits;    /* persistSplits: its attention splits per head (0: grid / heads) */
  uint32_t persist_min_steps; /* persistMinSteps: fewest steps a batch needs to take it (0: the plan's) */
  uint32_t persist_max_keys;  /* persistMaxKeys: most keys a batch's last step may attend to take it (0: no limit) */
  uint32_t persist_rp;        /* persistRp=1|2|4: the units-split engine's row split (0: by the shape) */
  uint32_t persist_split;     /* persistSplit=1 (tests): the units-split product engine for any graph */
  uint32_t persist_opt;       /* persistOpt=BITS: persist.wgsl's engine-0 OPT bits (A/B runs) */
  uint32_t persist_fail;      /* persistFail=N (tests): run N starts as if its grid barrier had given up */
  uint32_t persist_skip;      /* persistSkip=BITS (timing probes): the works (bit 1 << wisp_work_kind) left
                               * out of every step, so that a run's time less the whole run's is their cost */
  int no_fuse_argmax;         /* fuseArgmax=0: greedy token choice not fused into the head product */
  int no_xstage;              /* xstage=0: matvec inputs from global memory, not staged */
  int no_rows_shared;         /* rowsShared=0: a batched step's products row by row (one-row kernels), not
                               * matvec_rows / q4k_matvec_rows (A/B runs; the same bits either way) */
  int no_rows_q4k;            /* rowsQ4K=0: Q4_K products of a batched step row by row (q4k_matvec, a weight
                               * read a row), not through q4k_matvec_rows (same bits either way) */
  int rows_stage_always;      /* rowsStage=1: the multi-row kernels stage their inputs whenever they fit (default:
                               * only where a workgroup reads more weight bytes than it stages; rows_tile) */
  uint32_t rows_nt;           /* rowsNt=N: most rows a matvec_rows / q4k_matvec_rows workgroup takes (1..64; 0: 64) */
  uint32_t rows_i8_min, rows_i8_max; /* rowsI8=MINxMAX: a batched step of MIN..MAX rows runs its Q4/Q4Z/Q4_K/Q8_0
                               * products through matvec_i8_rows where the plan gives int8 products (MAX 0: never) */
  uint32_t rows_i8_rpl;       /* rowsI8Rpl=N: its weight rows a lane group (1..8) */
  int no_rows_i8_fuse;        /* rowsI8Fuse=0: its inputs quantized by quant_x8, not by the norm / SwiGLU
                               * that writes them (rmsnorm_q8, swiglu_q8) */
  uint32_t rows_prefill;      /* rowsPrefill=N: a batched step of N rows or more runs its products as a prefill
                               * of N tokens does (the plan's prefill kernel: matmul_i8 where it gives int8, else
                               * the tiled matmul), not the multi-row kernels: every row's sums then depend on the
                               * step's rows (0: never) */
  int prefetch;               /* prefetch=0|1: -1 no product, 1 every product issues weight loads ahead;
                               * 0 (default) q4k_matvec only */
  int attn_prefill;           /* attnPrefill=1: attn_prefill.wgsl for several tokens, 2: attn_flash_tiled.wgsl (else attn_flash) */
  unsigned attn_rows;         /* attnRows: query rows a lane group of attn_flash_tiled.wgsl (0: 2 for head dim 256, else 1) */
  uint32_t head_chunks;       /* headChunks=N: row chunks a workgroup of tall matrices takes */
  uint32_t matvec_big_rows;   /* matvecBigRows=N: ROWS of matrices of >= 16384 rows (0: 8) */
  int q4k_sb_cols;            /* q4kSbCols=N: q4k_sb.wgsl for one-token products of N columns or more;
                               * -1 (q4kSbCols=0) never; 0 where the plan chose it */
  uint32_t q4k_rows2_rows;    /* q4kRows2Rows=R: 2 rows a lane group from R rows on (0: 2048) */
  uint32_t q4k_lg;            /* q4kLg=N: lanes of a q4k_matvec row group */
  uint32_t q4k_mv_wg, q4k_mv_rows;     /* q4kMatvec=WGxROWS */
  uint32_t q4k_fused_cols, q4k_fused_tpc; /* q4kFused=COLSxTPC */
  int i8_mode;                /* i8=0|1: the Q4 x int8 prefill product never (3) / always (2); 0 the plan's */
  int i8_fuseq;               /* i8Fuseq=1: it quantizes its own tiles */
  uint32_t i8_min_n;          /* i8MinN=N: fewest tokens that take it (0: 2) */
  uint32_t i8_geometry[5];    /* matmulI8=TMxTNxRMxRNxKB (all 0: the default) */
  const char *toggles;        /* dawnToggles=a:b: Dawn toggles for the device it opens (read at creation) */
  uint64_t given;             /* a bit for each tuning key the string gave (its row in tuning.c's table): a
                               * given 0 (persistOpt=0) is not replaced by the default */
} wisp_wgpu_backend_opts;

wisp_status wisp_wgpu_backend_new(const wisp_wgpu_backend_opts *opts, wisp_backend **out);

/* backend/stats.h: the counters this backend keeps. */
typedef wisp_backend_stats wisp_wgpu_backend_stats;

#endif
