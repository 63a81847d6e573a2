/* The WebGPU backend (see wgpu_backend.h and docs/webgpu.md): its
 * creation from the options and the device, configure, caps and destroy.
 * The recording core is wgpu_core.c; each op family is a file of its own
 * (wgpu_products.c, wgpu_attention.c, ...) that installs its entries into
 * the backend's table. */
#include "backend/webgpu/wgpu_backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/webgpu/wgpu_attention.h"
#include "backend/webgpu/wgpu_attention_gated.h"
#include "backend/webgpu/wgpu_attention_tiled.h"
#include "backend/webgpu/wgpu_deltanet.h"
#include "backend/webgpu/wgpu_conv.h"
#include "backend/webgpu/wgpu_core.h"
#include "backend/webgpu/wgpu_elementwise.h"
#include "backend/webgpu/wgpu_fused.h"
#include "backend/webgpu/wgpu_persist.h"
#include "backend/webgpu/wgpu_products.h"
#include "backend/webgpu/wgpu_products_i8.h"
#include "backend/webgpu/wgpu_products_q4k.h"
#include "backend/webgpu/wgpu_products_tiled.h"
#include "backend/webgpu/wgpu_rowops.h"
#include "backend/webgpu/wgpu_variants.h"
#include "backend/webgpu/wgpu_sampling.h"
#include "backend/tuning_defaults.h"
#include "util/env.h"
#include "util/err.h"

#define ARENA_BYTES (8u << 20) /* 32k slots of 256 bytes: a 64-token decode batch of a 0.8B gated hybrid uses ~8k */
#define ARENA_MAX (64u << 20)

static void g_destroy(wisp_backend *be) {
  wgpu_backend *g = as_g(be);
  if (!g) return;
  if (g->d) {
    if (g->open) wisp_wgpu_batch_abort(&g->batch);
    if (wisp_env_verbose())
      fprintf(stderr, "webgpu: %llu dispatches, %llu submits, %llu in the last submit, %llu bind groups\n",
              (unsigned long long)g->stats.dispatches, (unsigned long long)g->stats.submits,
              (unsigned long long)g->stats.last_dispatches, (unsigned long long)g->stats.bind_groups);
    wisp_wgpu_q4k_free(be); /* before the bind groups go */
    wisp_wgpu_attention_gated_free(be);
    wisp_wgpu_deltanet_free(be);
    wisp_wgpu_persist_free(be);
    wisp_wgpu_mm8_free(be);
    wisp_wgpu_drop_bind_groups(g);
    /* the kernels are the device's (wisp_wgpu_kernel_shared) */
    for (int i = 0; i < g->n_mats; i++) wisp_wgpu_mat_free(g, g->mats[i]);
    for (int i = 0; i < g->n_vecs; i++) {
      wisp_wgpu_buf_free(g->d, &g->vecs[i]->g);
      free(g->vecs[i]);
    }
    wisp_wgpu_buf_free(g->d, &g->arena);
    wisp_wgpu_buf_free(g->d, &g->dummy);
    wisp_wgpu_buf_free(g->d, &g->dummy_rw);
    wisp_wgpu_buf_free(g->d, &g->dummy_rw2);
    wisp_wgpu_buf_free(g->d, &g->qbuf);
    wisp_wgpu_buf_free(g->d, &g->staging);
    wisp_wgpu_buf_free(g->d, &g->rstage[0]);
    wisp_wgpu_buf_free(g->d, &g->rstage[1]);
    wisp_wgpu_buf_free(g->d, &g->part);
    wisp_wgpu_buf_free(g->d, &g->amax);
    wisp_wgpu_free_retired(g);
    if (g->own_device) wisp_wgpu_device_close(g->d);
  }
  free(g->mats);
  free(g->vecs);
  free(g->retired);
  free(g->arena_host);
  free(g);
}

static int pow2(unsigned x) { return x && !(x & (x - 1)); }

/* The prefill product's tiles for small and large products fit matmul.wgsl
 * and the device (tuning matmul / matmulTile may have set them). */
static int matmul_tiles_ok(const wgpu_backend *g) {
  const wisp_wgpu_tile a = wisp_wgpu_matmul_tile(g, 1, 2), b = wisp_wgpu_matmul_tile(g, 1 << 20, 1 << 20);
  return wisp_wgpu_matmul_tile_ok(g, &a) && wisp_wgpu_matmul_tile_ok(g, &b);
}

/* matvec.wgsl / matvec_nosg.wgsl take this one-token geometry. */
static int matvec_fits(const wgpu_backend *g, uint32_t wg, uint32_t rows) {
  return rows <= wg && rows <= 16 && (g->sg || !(wg & (wg - 1))) && (!g->sg || !(wg % wisp_wgpu_matvec_lanes(g, wg)));
}

/* The backend's geometry and switches from o (every field filled from the
 * tuning table's defaults): at creation, and again at configure from the
 * session's tuning keys (the settings object). The kernels are compiled at
 * first use, after both. */
static wisp_status apply_options(wgpu_backend *g, const wisp_wgpu_backend_opts *o) {
  wisp_status st = WISP_OK;
  g->fuse = !o->no_fuse;
  g->conv_rows = 12;
  g->conv_fuse_capable = g->d->info.max_storage_buffers_per_shader_stage >= 10 &&
                         g->conv_rows <= g->d->info.max_compute_invocations_per_workgroup;
  g->attn_fuse = g->fuse && g->sg && g->d->info.max_storage_buffers_per_shader_stage >= 9;
  g->kv16 = o->kv_f16;
  g->no_argmax = o->no_fuse_argmax;
  /* Persistent decode (wgpu_persist.c): on unless turned off, being faster
   * than the op-by-op path at every batch size on the H200 and on lavapipe
   * (docs/webgpu.md, "Persistent decode"); the op-by-op path stays for
   * sampling, other models and tuning persist=0. */
  g->persist_on = o->persist >= 0;
  g->persist_asked = o->persist > 0;
  g->persist_wg = o->persist_grid;
  g->opts = *o;
  g->opts.toggles = NULL; /* used at creation only; the text is the caller's */
  g->mv_wg = o->matvec_wg;
  g->mv_rows = o->matvec_rows;
  g->mm_tm = o->matmul_tm;
  g->mm_tn = o->matmul_tn;
  g->mm_rm = o->matmul_rm;
  g->mm_rn = o->matmul_rn;
  g->mm_one_buffer = o->matmul_one_buffer;
  g->max_splits = o->attn_max_splits;
  g->mv_rows_big = o->matvec_big_rows;
  g->no_xstage = o->no_xstage;
  g->no_rows_shared = o->no_rows_shared;
  g->no_rows_q4k = o->no_rows_q4k;
  g->rows_nt = o->rows_nt;
  /* rowsPrefill=N given (0: never), else -1: the plan decides (g_matmul_rows) */
  g->rows_prefill = wisp_tuning_given(o, "rowsPrefill") ? (int)o->rows_prefill : -1;
  g->rows_stage_always = o->rows_stage_always;
  /* Loads issued ahead (PF) measured on the H200 (bench/results/README.md):
   * faster for q4k_matvec (8.2 vs 9.4 us for the 0.8B hybrid's down product), slower
   * where a lane holds many rows or the staging is long (the 16-row head
   * 49 vs 43 us, q4k_fused 10.5 vs 9.8, the merge-fused projection): on for
   * q4k_matvec only unless tuning prefetch says 0 or 1 for all. */
  g->prefetch = o->prefetch > 0 ? 1 : o->prefetch < 0 ? 0 : -1;
  /* Off unless asked for: on the H200 it took 893 us a dispatch for a
   * 1,024-token seed prefill (a thread per query walking every key: too
   * little parallelism), half the prefill's GPU time; attn_flash gives
   * 72,800 tok/s against 51,800 with it (tools/device-prefill.sh). */
  g->attn_prefill = o->attn_prefill;
  g->attn_rows = o->attn_rows; /* 0: by head dim (wgpu_attention_tiled.c) */
  g->head_chunks = o->head_chunks; /* 0: by the matrix (rec_matvec) */
  /* Rows a lane group by the matrix (ROWS 0): one row for products of
   * fewer than rows2_rows rows, two from there (faster on the H200 for the
   * 0.8B and 2B hybrids respectively; 4 and 8 rows slower still): about
   * 256 workgroups either way. */
  /* q4k_sb (a thread per super-block) where the plan chose it for a matrix
   * (the registry's decode rule for Q4_K); tuning q4kSbCols=N instead
   * takes it for every matrix of N columns or more, 0 for none. */
  g->q4k_tune = (wisp_wgpu_q4k_tuning){o->q4k_mv_wg, o->q4k_mv_rows, 0, 0, o->q4k_lg, o->q4k_rows2_rows,
                                        g->prefetch != 0, g->prefetch == 1, -1};
  if (o->q4k_sb_cols) g->q4k_tune.superblock_cols = o->q4k_sb_cols > 0 ? o->q4k_sb_cols : 0;
  if (o->q4k_fused_cols && o->q4k_fused_tpc)
    g->q4k_tune.fused_cols = o->q4k_fused_cols, g->q4k_tune.fused_tpc = o->q4k_fused_tpc;
  g->dn_tune = (wisp_wgpu_dn_tuning){o->dn_cols,       o->dn_groups,         o->dn_chunk_min,
                                     o->dn_chunk_cols, o->no_dn_prep_shared, o->dn_chunk_unroll ? o->dn_chunk_unroll : 4};
  /* The kernels size their per-thread and workgroup arrays for these
   * bounds (ROWS <= 16 rows of accumulators; whole lane groups of LG). */
  const uint32_t q4k_lg = g->d->info.subgroup_max_size > 32 ? g->d->info.subgroup_max_size : 32;
  if (g->mv_rows > g->mv_wg || g->mv_rows > 16 || g->mv_rows_big > 16 || g->mv_rows_big > g->mv_wg ||
      g->conv_rows > 16 || g->conv_rows > g->mv_wg || g->conv_rows % 3 || (!g->sg && (g->mv_wg & (g->mv_wg - 1))) ||
      (g->sg && g->mv_wg % wisp_wgpu_matvec_lanes(g, g->mv_wg)) || !matmul_tiles_ok(g) ||
      g->q4k_tune.mv_rows > 16 || (g->sg && g->q4k_tune.mv_wg % q4k_lg) ||
      (g->q4k_tune.mv_lg && (g->q4k_tune.mv_lg % q4k_lg || g->q4k_tune.mv_wg % g->q4k_tune.mv_lg)) ||
      !pow2(g->dn_tune.cols) || g->dn_tune.cols > 1024 || (g->dn_tune.groups && !pow2(g->dn_tune.groups)) ||
      g->dn_tune.groups > 1024 || !pow2(g->dn_tune.chunk_cols) || g->dn_tune.chunk_cols < 4 ||
      g->dn_tune.chunk_cols > 32) {
    st = wisp_fail(WISP_EINVAL,
                   "webgpu: bad geometry: matvec %ux%u (big %u, conv %u), matmul %ux%u tile %ux%u, Q4_K matvec %ux%u "
                   "(lanes %u), deltanet %ux%u (chunked: %u columns)",
                   g->mv_wg, g->mv_rows, g->mv_rows_big, g->conv_rows, g->mm_tm, g->mm_tn, g->mm_rm, g->mm_rn,
                   g->q4k_tune.mv_wg, g->q4k_tune.mv_rows, g->q4k_tune.mv_lg, g->dn_tune.cols, g->dn_tune.groups,
                   g->dn_tune.chunk_cols);
    return st;
  }
  g->base.decode_graph = g->persist_on ? wisp_wgpu_decode_graph : NULL; /* the persistent decode, unless turned off */
  g->base.decode_graph_reset = g->persist_on ? wisp_wgpu_decode_graph_reset : NULL;
  return WISP_OK;
}

int wisp_wgpu_backend_kv16(const wisp_backend *be) {
  return be && be->name && !strcmp(be->name, "webgpu") && ((const wgpu_backend *)be)->kv16;
}

int wisp_wgpu_backend_stats_get(const wisp_backend *be, wisp_wgpu_backend_stats *out) {
  if (!be || !be->name || strcmp(be->name, "webgpu")) return 0;
  *out = ((const wgpu_backend *)be)->stats;
  return 1;
}

/* The session's settings: its tuning keys (s->tuning; the backend was made
 * without them), then the plan's values, with the keys that replace them
 * already applied (wisp_tuning_over_plan). Without s->tuning (a test that
 * set the options at creation) the options stay as they were made. */
static wisp_status g_configure(wisp_backend *be, const wisp_backend_settings *s) {
  wgpu_backend *g = as_g(be);
  if (s->tuning) {
    wisp_wgpu_backend_opts o = *wisp_tuning_webgpu(s->tuning);
    /* what only a caller of wisp_wgpu_backend_new sets (no tuning key):
     * the device, subgroups, the test hooks */
    o.device = g->opts.device;
    o.subgroups = g->opts.subgroups;
    o.refuse_cpu_adapter = g->opts.refuse_cpu_adapter;
    o.matmul_one_buffer = g->opts.matmul_one_buffer;
    o.max_binding = g->opts.max_binding;
    o.arena_bytes = g->opts.arena_bytes;
    o.arena_max_bytes = g->opts.arena_max_bytes;
    o.toggles = NULL; /* the device is open */
    wisp_tuning_fill_defaults(&o);
    wisp_status st = apply_options(g, &o);
    if (st) return st;
  }
  if (s->flash_blocks >= 1) g->max_splits = (uint32_t)s->flash_blocks;
  /* One geometry for every matrix (a tuning sweep); kept only where the
   * kernels take it (the same bounds as at creation). */
  if (s->matvec_wg >= 1 && s->matvec_rows >= 1 && matvec_fits(g, (uint32_t)s->matvec_wg, (uint32_t)s->matvec_rows))
    g->mv_wg = (uint32_t)s->matvec_wg, g->mv_rows = (uint32_t)s->matvec_rows;
  /* The plan's prefill tiles (a tuned entry), where matmul.wgsl takes them
   * (matmul_tiles_ok, as at creation) and no tuning key gave another; the
   * integer product checks its own at first use. */
  if (s->prefill_tm > 0 && s->prefill_tn > 0 && !wisp_tuning_given(&g->opts, "matmul")) {
    const uint32_t tm = g->mm_tm, tn = g->mm_tn;
    g->mm_tm = (uint32_t)s->prefill_tm, g->mm_tn = (uint32_t)s->prefill_tn;
    if (!matmul_tiles_ok(g)) g->mm_tm = tm, g->mm_tn = tn;
  }
  if (s->prefill_i8[0] > 0 && !wisp_tuning_given(&g->opts, "matmulI8"))
    for (int i = 0; i < 5; i++) g->opts.i8_geometry[i] = (uint32_t)s->prefill_i8[i];
  g->set = *s;
  g->set.tuning = NULL; /* the session's, read above */
  /* The plan's kvDtype f16 turns packed-f16 KV on (kv_f16 / tuning kv=f16
   * may have already); the session makes its caches after configure. */
  if (s->kv_f16) g->kv16 = 1;
  return WISP_OK;
}

/* wisp plan's lines on the prefill attention, the integer product and the
 * batched step (backend.h prefill_paths): what the options pick, by the
 * rules the kernels' hosts apply. */
static void g_prefill_paths(wisp_backend *be, int head_dim, const wisp_matrix *const *mats, int n_mats, char *out,
                            size_t cap) {
  wgpu_backend *g = as_g(be);
  size_t n = 0;
  out[0] = 0;
  if (head_dim > 0) {
    uint32_t lanes = 0;
    const uint32_t rows = wisp_wgpu_attn_tiled_rows(g, head_dim, &lanes);
    if (rows)
      n += (size_t)snprintf(out, cap,
                            "prefill attention: attn_flash_tiled.wgsl (tuning attnPrefill=2, the default with "
                            "subgroups), %u query row%s a lane group of %u lanes at head dim %d (tuning attnRows; "
                            "unset, two at head dim 256)\n",
                            rows, rows > 1 ? "s" : "", lanes, head_dim);
    else
      n += (size_t)snprintf(out, cap, "prefill attention: %s (tuning attnPrefill=%u%s)\n",
                            g->attn_prefill == 1 ? "attn_prefill.wgsl" : "attn_rope + attn_flash.wgsl",
                            g->attn_prefill,
                            g->attn_prefill == 2 ? ": attn_flash_tiled.wgsl needs subgroups and takes head dims up "
                                                   "to 256, a multiple of 4" : "");
  }
  uint32_t t[5], small_tn;
  wisp_wgpu_mm8_geometry(be, t, &small_tn);
  char half[64] = "";
  if (small_tn != t[1]) snprintf(half, sizeof half, ", the token tile halved below %u tokens", 2 * t[1]);
  if (n < cap && t[0])
    n += (size_t)snprintf(out + n, cap - n,
                          "integer products (the plan's *_i8 variants): matmul_i8.wgsl %ux%ux%ux%ux%u (tuning matmulI8)%s\n",
                          t[0], t[1], t[2], t[3], t[4], half);
  /* the batched step: the rows from which its products run as a prefill */
  int int8 = 0, int8_q4k = 0;
  for (int i = 0; i < n_mats; i++) wisp_wgpu_rows_note(mats[i], &int8, &int8_q4k);
  const char *why = "";
  int from = wisp_wgpu_rows_prefill_from(g, int8, int8_q4k, &why), lo = 0, hi = 0;
  if (int8) wisp_wgpu_mv8_range(be, &lo, &hi);
  if (n >= cap) return;
  if (!hi) {
    if (from)
      snprintf(out + n, cap - n,
               "batched steps: from %d rows the products run as a prefill of that many tokens (%s); fewer rows: the "
               "multi-row kernels, every row the one-row product's bits\n",
               from, why);
    else
      snprintf(out + n, cap - n, "batched steps: the multi-row kernels at every row count, every row the one-row "
               "product's bits (%s)\n", why);
    return;
  }
  /* the int8 multi-row product takes lo..hi rows before the rule above */
  char few[96] = "", rest[320];
  if (lo == 2) snprintf(few, sizeof few, "1 row: the one-row product; ");
  if (lo > 2) snprintf(few, sizeof few, "1..%d rows: the multi-row kernels, the one-row product's bits; ", lo - 1);
  if (from && from <= hi) from = hi + 1;
  if (from)
    snprintf(rest, sizeof rest, "from %d rows: the products run as a prefill of that many tokens (%s)", from, why);
  else
    snprintf(rest, sizeof rest, "more rows: the multi-row kernels, the one-row product's bits");
  snprintf(out + n, cap - n,
           "batched steps: %s%d..%d rows: matvec_i8_rows.wgsl, every Q4/Q4Z/Q4_K/Q8_0 product with int8 rows, a row's "
           "sums independent of the others (tuning rowsI8); %s\n",
           few, lo, hi, rest);
}

static void g_caps(wisp_backend *be, wisp_device_caps *out) {
  wgpu_backend *g = as_g(be);
  const wisp_wgpu_info *i = &g->d->info;
  wisp_device_caps_default(out, "webgpu");
  const char *vendor = i->vendor[0] ? i->vendor : "unknown";
  size_t n = strnlen(vendor, sizeof out->vendor - 1);
  memcpy(out->vendor, vendor, n);
  out->vendor[n] = 0;
  n = strnlen(i->name, sizeof out->name - 1);
  memcpy(out->name, i->name, n);
  out->name[n] = 0;
  out->has_subgroups = g->sg;
  out->subgroup_size = g->sg ? (int)i->subgroup_max_size : 0;
  out->has_f16 = g->d->has_shader_f16;
  out->max_workgroup_size = (int)i->max_compute_invocations_per_workgroup;
  out->max_shared_bytes = (int)i->max_compute_workgroup_storage_size;
  out->max_binding_bytes = g->max_binding;
  out->vendor_id = i->vendor_id;
  out->device_id = i->device_id;
  n = strnlen(i->description, sizeof out->driver - 1);
  memcpy(out->driver, i->description, n);
  out->driver[n] = 0;
  /* The fusions this backend runs as one op (matmul_fused, wgpu_fused.c):
   * none with tuning fuse=0; matmul+shortconv where matvec_conv's 10
   * storage bindings fit; head+argmax unless tuning fuseArgmax=0. */
  out->fusions = 0;
  if (g->fuse)
    out->fusions = WISP_FUSE_NORM_MATMUL | WISP_FUSE_RESIDUAL_NORM | WISP_FUSE_GATE_UP_SWIGLU |
                   WISP_FUSE_SWIGLU_MATMUL | WISP_FUSE_QK_NORM_ROPE_KV | WISP_FUSE_MIXER_MATMUL |
                   WISP_FUSE_MATMUL_DELTANET | (g->conv_fuse_capable ? WISP_FUSE_CONV_MATMUL : 0u) |
                   (g->no_argmax ? 0u : WISP_FUSE_HEAD_ARGMAX);
}

/* wisp_wgpu_set_device_hook: where set, the device a backend takes instead
 * of opening one of its own with the default device options. */
static wisp_wgpu_device *(*g_device_hook)(void);

void wisp_wgpu_set_device_hook(wisp_wgpu_device *(*hook)(void)) { g_device_hook = hook; }

wisp_status wisp_wgpu_backend_new(const wisp_wgpu_backend_opts *opts, wisp_backend **out) {
  *out = NULL;
  wisp_wgpu_backend_opts o;
  memset(&o, 0, sizeof o);
  o.subgroups = -1;
  if (opts) o = *opts;
  wisp_tuning_fill_defaults(&o); /* 0 = the tuning table's default */
  wgpu_backend *g = calloc(1, sizeof *g);
  if (!g) return wisp_fail(WISP_ENOMEM, "out of memory");
  g->state_flush = wisp_wgpu_persist_flush;
  g->state_forget = wisp_wgpu_persist_forget;
  g->state_mirrors = wisp_wgpu_persist_mirrors;
  wisp_status st = WISP_OK;
  /* the hook's device as if it were its own (a lost one: open its own) */
  if (!o.device && g_device_hook && o.subgroups != 0 && !(o.toggles && *o.toggles) && (o.device = g_device_hook()) &&
      !wisp_wgpu_device_adopt(o.device))
    o.device = NULL;
  if (o.device) {
    g->d = o.device;
  } else {
    wisp_wgpu_device_opts dopts;
    memset(&dopts, 0, sizeof dopts);
    dopts.no_subgroups = o.subgroups == 0;
    dopts.toggles = o.toggles;
    if ((st = wisp_wgpu_device_open(&dopts, &g->d))) {
      wisp_error_prefix("backend 'webgpu'");
      free(g);
      return st;
    }
    g->own_device = 1;
  }
  if (o.refuse_cpu_adapter && g->d->info.adapter_type == WGPUAdapterType_CPU) {
    st = wisp_fail(WISP_EUNSUPPORTED, "the WebGPU adapter '%s' runs on the CPU", g->d->info.name);
    goto fail;
  }
  if (o.subgroups == 1 && !g->d->has_subgroups) {
    st = wisp_fail(WISP_EDEVICE, "webgpu: the device lacks the subgroups feature");
    goto fail;
  }
  g->sg = o.subgroups < 0 ? g->d->has_subgroups : o.subgroups;
  int guard_each = 0;
  wisp_env_webgpu_guard(&guard_each);
  g->guard_each = g->d->guard_bytes && guard_each;
  if ((st = apply_options(g, &o))) goto fail;
  wisp_backend_settings_default(&g->set);
  g->max_binding = g->d->info.max_storage_buffer_binding_size;
  if (g->d->info.max_buffer_size < g->max_binding) g->max_binding = g->d->info.max_buffer_size;
  if (o.max_binding && o.max_binding < g->max_binding) g->max_binding = o.max_binding;
  g->ualign = g->d->info.min_uniform_buffer_offset_alignment ? g->d->info.min_uniform_buffer_offset_alignment : 256;
  g->arena_bytes = o.arena_bytes >= 1024 ? o.arena_bytes : ARENA_BYTES;
  g->arena_max = o.arena_max_bytes ? o.arena_max_bytes : o.arena_bytes ? g->arena_bytes : ARENA_MAX;
  g->arena_host = calloc(1, g->arena_bytes);
  g->dirty_lo = SIZE_MAX;
  if (!g->arena_host) {
    st = wisp_fail(WISP_ENOMEM, "out of memory");
    goto fail;
  }
  if ((st = wisp_wgpu_buf_create(g->d, g->arena_bytes, WISP_WGPU_UNIFORM, "wisp uniform arena", &g->arena)) ||
      (st = wisp_wgpu_buf_create(g->d, 16, WISP_WGPU_STORAGE, "wisp dummy", &g->dummy)) ||
      (st = wisp_wgpu_buf_create(g->d, 16, WISP_WGPU_STORAGE, "wisp dummy rw", &g->dummy_rw)) ||
      (st = wisp_wgpu_buf_create(g->d, 16, WISP_WGPU_STORAGE, "wisp dummy rw 2", &g->dummy_rw2)) ||
      /* argmax partials: 16384 pairs (a 262144-token head at 16 rows a
       * workgroup) without a mid-recording reallocation; grows if needed */
      (st = wisp_wgpu_buf_create(g->d, 16384 * 8, WISP_WGPU_STORAGE, "wisp argmax partials", &g->amax)))
    goto fail;
  g->base = (wisp_backend){
      .name = "webgpu",
      .configure = g_configure,
      .check_kernel = wisp_wgpu_check_kernel,
      .caps = g_caps,
      .prefill_paths = g_prefill_paths,
      .decode_graph = g->persist_on ? wisp_wgpu_decode_graph : NULL, /* the persistent decode, unless turned off */
      .decode_graph_reset = g->persist_on ? wisp_wgpu_decode_graph_reset : NULL,
      .destroy = g_destroy,
  };
  wisp_wgpu_core_install(&g->base);
  wisp_wgpu_buffers_install(&g->base);
  wisp_wgpu_kv_install(&g->base);
  wisp_wgpu_products_install(&g->base);
  wisp_wgpu_elementwise_install(&g->base);
  wisp_wgpu_rowops_install(&g->base);
  wisp_wgpu_fused_install(&g->base);
  wisp_wgpu_conv_install(&g->base);
  wisp_wgpu_attention_install(&g->base);
  wisp_wgpu_attention_gated_install(&g->base);
  wisp_wgpu_deltanet_install(&g->base);
  wisp_wgpu_sampling_install(&g->base);
  *out = &g->base;
  return WISP_OK;
fail:
  g_destroy(&g->base);
  return st;
}
