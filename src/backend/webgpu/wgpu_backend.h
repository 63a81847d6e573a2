/* The WebGPU backend: every op of backend.h as a WGSL kernel, recorded into
 * one command encoder / compute pass and submitted once at `sync`.
 *
 *   wisp_backend *be;
 *   if (wisp_wgpu_backend_new(NULL, &be)) die(wisp_last_error());
 *   ... be->prepare_matrix(be, &W); be->matmul(be, &W, x, 0, 1, y, 0); be->sync(be);
 *
 * See docs/webgpu.md for the kernels, the recording/submit model and the
 * uniform arena. */
#ifndef WISP_WGPU_BACKEND_H
#define WISP_WGPU_BACKEND_H

#include <stdint.h>

#include "backend/backend.h"
#include "backend/webgpu/wgpu_device.h"

typedef struct wisp_wgpu_backend_opts {
  wisp_wgpu_device *device; /* use this device (not owned); NULL = open one */
  int subgroups;            /* -1 auto (subgroup variants when the device has them), 0 plain, 1 require */
  int refuse_cpu_adapter;   /* fail when the adapter is a CPU (lavapipe): "auto" prefers the CPU backend */
  int no_fuse;              /* no decode-time fusion (rmsnorm/swiglu into the next matvec, in_proj with
                               shortconv, attn_decode): every op on its own (also WISP_WEBGPU_FUSE=0) */
  /* Geometry (override constants); 0 = default. Also read from the
   * environment: WISP_WEBGPU_MATVEC=WGxROWS, WISP_WEBGPU_MATMUL=TMxTN,
   * WISP_WEBGPU_MATVEC_BIG_ROWS=R (matrices of >= 16384 rows). */
  uint32_t matvec_wg, matvec_rows, matmul_tm, matmul_tn;
  /* Flash-decoding: most workgroups per head that one decode token's
   * attention is split over (one per 64-key tile up to this; 0 = 32, 1 = no
   * split). Also WISP_WEBGPU_ATTN_SPLITS. */
  uint32_t attn_max_splits;
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
   * Also WISP_WEBGPU_KV=f16, or a plan whose kvDtype is f16 (configure's
   * wisp_backend_settings.kv_f16, before the session makes its caches).
   * 0 = f32 (exact parity with the CPU backend). */
  int kv_f16;
  /* One-token Gated DeltaNet (dn_decode.wgsl): value columns of a v-head
   * per workgroup (a power of two; 0 = 16; >= v_dim: one workgroup per
   * v-head with the gated norm inside, else a second dispatch, dn_norm,
   * applies it) and row groups per workgroup (a power of two; 0 = about 8
   * state rows per thread). Also WISP_WEBGPU_DN_SLICE=COLS or COLSxGROUPS. */
  uint32_t dn_cols, dn_groups;
  /* Persistent decode (wgpu_persist.c: greedy decode steps of an LFM2-style
   * or Qwen 3.5 model in one dispatch): 0 auto (on: measured faster than
   * the op-by-op path at every batch size on the H200 and on lavapipe; for
   * Qwen 3.5 not on CPU adapters, where lavapipe compiles its kernel for
   * ~35 s), -1 off, 1 on.
   * WISP_WEBGPU_PERSIST=0|1 overrides; WISP_WEBGPU_PERSIST_WG=N sets the
   * grid (else probed from 128). */
  int persist;
} wisp_wgpu_backend_opts;

wisp_status wisp_wgpu_backend_new(const wisp_wgpu_backend_opts *opts, wisp_backend **out);

typedef struct wisp_wgpu_backend_stats {
  uint64_t dispatches;      /* recorded since creation */
  uint64_t submits;         /* command buffers submitted (one per sync with work) */
  uint64_t last_dispatches; /* dispatches in the last submitted command buffer */
  uint64_t bind_groups;     /* bind groups created (cache misses) */
  uint64_t weight_parts;    /* weight bindings sets uploaded (a split matrix counts its parts) */
  uint64_t spec_reads;      /* readbacks served by the copy recorded at the end of the last sync */
  uint64_t argmax_fused;    /* greedy sample_id calls served by head-product argmax partials */
  uint64_t deltanet_split;  /* one-token Gated DeltaNet steps split over several workgroups a v-head (dn_decode + dn_norm) */
  uint64_t persistent_steps; /* decode steps run by the persistent kernel */
  uint64_t input_fused;     /* DeltaNet gated norms / gated attention merges computed by the next Q4_K product (PRE) */
  uint64_t q4k_superblock;  /* one-token Q4_K products by q4k_sb.wgsl (a thread per super-block) */
  uint64_t attn_splits;     /* key blocks one-token attentions (g_attention) were split over, summed (1 when unsplit) */
  uint64_t pipelines;       /* compute pipelines compiled (first use of each kernel variant) */
  double compile_seconds;   /* time spent compiling them: kept out of tok/s by run and bench */
} wisp_wgpu_backend_stats;

/* Returns 1 and fills *out when `be` is a WebGPU backend, else 0. */
int wisp_wgpu_backend_stats_get(const wisp_backend *be, wisp_wgpu_backend_stats *out);

#endif
