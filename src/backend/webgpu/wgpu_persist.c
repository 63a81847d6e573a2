/* Persistent decode (backend.h, decode_graph): k greedy decode steps of an
 * short-conv + attention graph in one dispatch of kernels/persist_conv_attn.wgsl, or of a
 * gated graph (Gated DeltaNet + gated attention) in one dispatch of
 * kernels/persist_deltanet_attn.wgsl.
 *
 * Why: a decode step of the seed model is ~66 small dispatches; each one
 * costs a launch and a ramp-up that dwarf its arithmetic (docs/webgpu.md,
 * "What bounds decode"). One dispatch of a fixed grid of co-resident
 * workgroups that walks every phase of every step, phases separated by grid
 * barriers, pays that once per k tokens instead.
 *
 * What it needs, checked here (anything else: WISP_EUNSUPPORTED, and the
 * decode loop records decode_step as before):
 *   - greedy sampling; matrices of the types the op-by-op decode serves
 *     (Q4, Q4Z, Q4_K, f32, f16, Q8_0: persist_quant.wgsli, a type word per
 *     matrix in the layer table; gated graphs: Q4, Q4Z and Q4_K matrices,
 *     the embedding and head Q4 / Q4Z, what convert writes and the op-by-op
 *     embedding reads); the subgroups feature;
 *   - all weights in one binding (the blob below, built once per graph);
 *   - a grid whose workgroups really run at the same time: probed at build
 *     (a probe-mode dispatch whose one barrier must complete before a short
 *     spin limit), halving from tuning persistGrid (default 128).
 *
 *     (1 on CPU adapters, whose workgroups share a few threads).
 *
 * State: the kernel works on its own arena (residual, scratch, conv states,
 * the DeltaNet recurrent states, KV caches in the session's layout). Before a run the session's state is
 * copied in (skipped when nothing has written state since this module's
 * last run and the position continues it). The new state (conv states, the
 * new KV rows) is copied back lazily: every op of the backend that reads or
 * writes state first calls wisp_wgpu_persist_flush, so prefill, snapshots
 * and rewinds, and the op-by-op decode see the session's buffers as if
 * decode_step had run, while runs that follow each other copy nothing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/webgpu/wgpu_backend.h"
#include "backend/webgpu/wgpu_internal.h"
#include "format/quant.h"
#include "util/clock.h"
#include "util/env.h"
#include "util/err.h"

#define PERSIST_WG 256
#define PERSIST_OPT 9 /* persist_conv_attn.wgsl OPT bits on by default: 1 + 8 (measured best, sixth session) */
#define LAYER_WORDS 24      /* persist_conv_attn.wgsl's layer table */
#define DN_LAYER_WORDS 28 /* persist_deltanet_attn.wgsl's */
#define DN_CW 16          /* persist_deltanet_attn.wgsl's CW: value columns of a DeltaNet task */
#define DN_MIN_STEPS 32   /* fewest steps a run of persist_deltanet_attn.wgsl takes without a plan (the registry's minSteps) */
#define NONE 0xffffffffu
#define SPIN_RUN (1u << 26)   /* polls before a barrier of a real run gives up (seconds) */
#define SPIN_PROBE (1u << 20) /* polls before a probe's barrier gives up (~0.1-1 s; only a failing probe waits) */

/* The kernel's uniform parameters (persist_conv_attn.wgsl, struct Params). */
typedef struct {
  uint32_t n_layers, H, F, heads;
  uint32_t kvh, D, L, vocab;
  float eps;
  uint32_t pos0, steps, bar_base;
  uint32_t slot, kv16, spin_max, probe;
  uint32_t embed_q, embed_s, embed_z, head_q;
  uint32_t head_s, head_z, fnorm, rope_cos;
  uint32_t rope_sin, s_x, s_mid, s_h;
  uint32_t s_q, s_part, barriers_per_step, nsmax;
  uint32_t s_ao, s_am, nwg, skip; /* skip: phases left out (timing probes of the kernel; 0 here) */
  uint32_t bmode, backoff; /* grid barrier variant and back-off (kernel experiments; 0 here) */
  uint32_t embed_t, head_t; /* their types (persist_quant.wgsli's T_*) */
  /* persist_deltanet_attn.wgsl only (persist_conv_attn.wgsl's Params ends above) */
  uint32_t rot_half, lkh, lvh, dk;
  uint32_t dv, s_big, ns, rp_force; /* rp_force: tuning persistRp=1|2|4 (tests: the product's row split) */
} persist_params;

typedef struct {
  const wisp_matrix *embed; /* the graph this was built for (its identity) */
  int n_layers, max_pos;
  int unsupported;          /* built and found unusable: every call answers WISP_EUNSUPPORTED */
  int failed;               /* a run failed (decode_graph_reset): no more runs */
  /* Tuning persistFail=N at build (tests): run N (from 1) starts as
   * if a barrier had timed out, and leaves its conv states scribbled on */
  uint32_t fail_run;
  uint32_t runs;            /* runs recorded; run r found the conv states kept in half r % 2 of bak */
  int run_pos[2];           /* where the last two runs began (-1: none) */
  int gated;                 /* built for a gated graph (persist_deltanet_attn.wgsl) */
  uint32_t s_conv, n_conv;  /* the states changed in place (conv, recurrent) in the arena, side by side, words */
  wisp_wgpu_buf bak;        /* two copies of them (WebGPU copies need two buffers) */
  wisp_wgpu_buf blob, arena, ctr;
  wisp_wgpu_kernel *k;
  uint32_t nwg, bar_base, barriers_per_step;
  persist_params base;      /* the parameters fixed at build */
  uint32_t state_off[WISP_GRAPH_MAX_LAYERS], v_off[WISP_GRAPH_MAX_LAYERS]; /* arena words */
  uint32_t rec_off[WISP_GRAPH_MAX_LAYERS];  /* DeltaNet layers: the recurrent state (arena words) */
  uint64_t conv_words, rec_words; /* one layer's conv state (DeltaNet: ring) and recurrent state (DeltaNet; else 0) */
  /* Where the arena's state stands: valid for positions [0, end) as of
   * backend state epoch `epoch` (-1: not valid). Rows [out0, end) and the
   * conv states are newer than the session's buffers until flushed
   * (out0 < 0: nothing to copy back). */
  int end, out0;
  uint64_t epoch;
    wisp_decode_graph *gcopy;
} persist;

/* ---- the weight blob ---------------------------------------------------- */

typedef struct {
  uint8_t *p;
  size_t n, cap;
  int oom;
} blob_builder;

/* Appends bytes at a 16-byte boundary; returns the word offset. */
static uint32_t put(blob_builder *b, const void *src, size_t n) {
  size_t at = (b->n + 15) & ~(size_t)15;
  if (at + n > b->cap) {
    size_t cap = b->cap ? b->cap : 1 << 20;
    while (cap < at + n) cap *= 2;
    uint8_t *q = realloc(b->p, cap);
    if (!q) {
      b->oom = 1;
      return 0;
    }
    b->p = q;
    b->cap = cap;
  }
  memset(b->p + b->n, 0, at - b->n);
  if (n) memcpy(b->p + at, src, n);
  b->n = at + n;
  return (uint32_t)(at / 4);
}

static uint32_t put_vec(blob_builder *b, const wisp_vector *v) {
  return v && v->n ? put(b, v->data, (size_t)v->n * 4) : NONE;
}

/* persist_quant.wgsli's type codes (T_*). */
enum { T_Q4, T_Q4Z, T_Q4K, T_F32, T_F16, T_Q8_0 };

static uint32_t type_code(wisp_wtype t) {
  switch (t) {
    case WISP_W_Q4: return T_Q4;
    case WISP_W_Q4Z: return T_Q4Z;
    case WISP_W_Q4K: return T_Q4K;
    case WISP_W_F32: return T_F32;
    case WISP_W_F16: return T_F16;
    case WISP_W_Q8_0: return T_Q8_0;
  }
  return NONE;
}

static const void *host_data(const wisp_matrix *m) { return m->type == WISP_W_F32 ? (const void *)m->f32 : m->q; }

/* Q8_0's 34-byte blocks (f16 scale, 32 int8) as the kernel reads them: the
 * int8s of every block (8 words each) at *q, the scales as f32 at *s. */
static void put_q8_0(blob_builder *b, const wisp_matrix *m, uint32_t *q, uint32_t *s) {
  const size_t nb = (size_t)m->rows * (size_t)(m->cols / WISP_Q8_0_BLOCK);
  int8_t *vals = malloc(nb * WISP_Q8_0_BLOCK);
  float *sc = malloc(nb * sizeof *sc);
  if (!vals || !sc) {
    b->oom = 1;
  } else {
    for (size_t g = 0; g < nb; g++) {
      const uint8_t *blk = m->q + g * WISP_Q8_0_BYTES;
      sc[g] = wisp_f16_to_f32((uint16_t)(blk[0] | blk[1] << 8));
      memcpy(vals + g * WISP_Q8_0_BLOCK, blk + 2, WISP_Q8_0_BLOCK);
    }
    *q = put(b, vals, nb * WISP_Q8_0_BLOCK);
    *s = put(b, sc, nb * sizeof *sc);
  }
  free(vals);
  free(sc);
}

/* A matrix's planes (data, scales, zero points: word offsets, NONE where the
 * type has none) and its type code, as persist_quant.wgsli reads them: Q4 /
 * Q4Z nibbles, f32 scales and packed zero points; Q4_K super-blocks, f32 and
 * f16 rows as stored; Q8_0 repacked (put_q8_0). Tied matrices (same host
 * bytes as an earlier one) share theirs. */
typedef struct {
  const void *host;
  uint32_t off[4];
} seen_mat;

static void put_mat(blob_builder *b, const wisp_matrix *m, seen_mat *seen, int *n_seen, uint32_t out[4]) {
  for (int i = 0; i < *n_seen; i++)
    if (seen[i].host == host_data(m)) {
      memcpy(out, seen[i].off, sizeof seen[i].off);
      return;
    }
  size_t nb = (size_t)m->rows * (size_t)(m->cols / 32);
  out[1] = out[2] = NONE;
  out[3] = type_code(m->type);
  switch (m->type) {
    case WISP_W_Q4K: /* one plane as stored: its size from the quant table */
    case WISP_W_F32:
    case WISP_W_F16: out[0] = put(b, host_data(m), (size_t)wisp_quant_bytes(m->type, m->rows, m->cols)); break;
    case WISP_W_Q8_0: put_q8_0(b, m, &out[0], &out[1]); break;
    case WISP_W_Q4:
    case WISP_W_Q4Z:
      out[0] = put(b, m->q, (size_t)m->rows * (size_t)m->cols / 2);
      out[1] = put(b, m->scales, nb * 4);
      if (m->type == WISP_W_Q4Z) out[2] = put(b, m->zp, (nb + 1) / 2);
      break;
  }
  seen[*n_seen].host = host_data(m);
  memcpy(seen[*n_seen].off, out, sizeof seen[*n_seen].off);
  (*n_seen)++;
}

/* ---- applicability ------------------------------------------------------- */

static int q4(const wisp_matrix *m, int rows, int cols) {
  return m && (m->type == WISP_W_Q4 || m->type == WISP_W_Q4Z) && m->rows == rows && m->cols == cols && cols % 32 == 0 &&
         m->q && m->scales && (m->type == WISP_W_Q4 || m->zp);
}

/* Q4, Q4Z or Q4_K of this shape (persist_deltanet_attn.wgsl's products). */
static int qmat(const wisp_matrix *m, int rows, int cols) {
  if (m && m->type == WISP_W_Q4K) return m->rows == rows && m->cols == cols && cols % 256 == 0 && m->q;
  return q4(m, rows, cols);
}

/* Any type persist_quant.wgsli reads, of this shape (persist_conv_attn.wgsl). */
static int any_mat(const wisp_matrix *m, int rows, int cols) {
  if (!m || m->rows != rows || m->cols != cols || cols % 32) return 0;
  switch (m->type) {
    case WISP_W_F32: return m->f32 != NULL;
    case WISP_W_F16:
    case WISP_W_Q8_0: return m->q != NULL;
    default: return qmat(m, rows, cols);
  }
}

/* 1 when persist_conv_attn.wgsl can run graph g (reasons are for WISP_VERBOSE). */
static int conv_attn_fits(wisp_backend *be, const wisp_decode_graph *g, const char **why) {
  const int H = g->hidden, F = g->ffn, D = g->head_dim, NH = g->heads, KVH = g->kv_heads;
  *why = NULL;
  if (!wisp_wgpu_int_subgroups(be)) *why = "no subgroups";
  else if (g->n_layers <= 0 || H % 32 || F % 32 || H <= 0 || F <= 0) *why = "hidden/ffn not multiples of 32";
  else if (D <= 0 || D % 16 || D > PERSIST_WG || PERSIST_WG % D || (NH * D) % 32) *why = "head dim";
  else if (NH > 1024) *why = "more than 1024 heads";
  else if (KVH <= 0 || NH % KVH) *why = "heads not a multiple of kv heads";
  else if (g->conv_len < 1 || g->conv_len > 16) *why = "conv length";
  else if (!any_mat(g->embed, g->vocab, H) || !any_mat(g->head, g->vocab, H)) *why = "embed/head of another type or shape";
  else if (!g->final_norm || g->final_norm->n != H) *why = "final norm";
  for (int i = 0; !*why && i < g->n_layers; i++) {
    const wisp_graph_layer *L = &g->layers[i];
    int in_rows = L->attention ? (NH + 2 * KVH) * D : 3 * H;
    int out_cols = L->attention ? NH * D : H;
    if (!any_mat(L->in, in_rows, H) || !any_mat(L->out, H, out_cols) || !any_mat(L->gate_up, 2 * F, H) ||
        !any_mat(L->down, H, F))
      *why = "a layer matrix of another type or shape";
    else if (!L->op_norm || !L->ffn_norm || !L->state || (L->attention && !L->v_cache) ||
             (!L->attention && (!L->taps || L->taps->n != H * g->conv_len)))
      *why = "a layer lacks a vector or state buffer";
    else if (L->attention && ((L->q_norm && L->q_norm->n != D) || (L->k_norm && L->k_norm->n != D)))
      *why = "q/k norm size";
  }
  return *why == NULL;
}

static int vec_n(const wisp_vector *v, int n) { return v && v->data && v->n == n; }

/* The largest input a product stages (floats). */
static int deltanet_stage_max(const wisp_decode_graph *g) {
  int m = g->hidden;
  if (g->ffn > m) m = g->ffn;
  if (g->heads * g->head_dim > m) m = g->heads * g->head_dim;
  if (g->lin_v_heads * g->lin_v_dim > m) m = g->lin_v_heads * g->lin_v_dim;
  return m;
}

static uint32_t deltanet_xs4(const wisp_decode_graph *g) { return ((uint32_t)deltanet_stage_max(g) / 4 + 7) / 8 * 8; }

/* 1 when persist_deltanet_attn.wgsl can run graph g. */
static int deltanet_attn_fits(wisp_backend *be, const wisp_decode_graph *g, const char **why) {
  const int H = g->hidden, F = g->ffn, D = g->head_dim, NH = g->heads, KVH = g->kv_heads;
  const int KH = g->lin_k_heads, VH = g->lin_v_heads, DK = g->lin_k_dim, DV = g->lin_v_dim;
  const int K = KH * DK, V = VH * DV, C = 2 * K + V;
  /* the kernel's workgroup arrays: xs (16 bytes a vec4) + xsum (XS4 / 4 floats), red + redi (MAXSG
   * each), hv + qv + acc4 (256 floats each), vsl (64), wuni + wtok */
  const uint64_t shared = (uint64_t)deltanet_xs4(g) * 17 + 2 * 4 * (PERSIST_WG / 4) + 3 * 256 * 4 + 64 * 4 + 8;
  *why = NULL;
  if (!wisp_wgpu_int_subgroups(be)) *why = "no subgroups";
  else if (g->n_layers <= 0 || H % 32 || F % 32 || H <= 0 || F <= 0) *why = "hidden/ffn not multiples of 32";
  else if (D <= 0 || D % 32 || D > PERSIST_WG || PERSIST_WG % D || (NH * D) % 32) *why = "head dim";
  else if (NH > 1024 || KVH <= 0 || NH % KVH) *why = "heads not a multiple of kv heads";
  else if (g->rotary_dim <= 0 || g->rotary_dim % 2 || g->rotary_dim > D) *why = "rotary dims";
  else if (KH <= 0 || VH <= 0 || VH % KH || VH > 256 || DK <= 0 || DK > 256 || DV <= 0 || DV % 16 || V % 32)
    *why = "DeltaNet heads or dims";
  else if ((DK + PERSIST_WG / DN_CW - 1) / (PERSIST_WG / DN_CW) > 32) *why = "DeltaNet k dim";
  else if (g->conv_len < 1 || g->conv_len > 8) *why = "conv length";
  else if (!q4(g->embed, g->vocab, H) || !q4(g->head, g->vocab, H)) *why = "embed/head not Q4";
  else if (!vec_n(g->final_norm, H)) *why = "final norm";
  else if (shared > wisp_wgpu_int_device(be)->info.max_compute_workgroup_storage_size) *why = "workgroup memory";
  for (int i = 0; !*why && i < g->n_layers; i++) {
    const wisp_graph_layer *L = &g->layers[i];
    int in_rows = L->attention ? (2 * NH + 2 * KVH) * D : C + V + 2 * VH;
    int out_cols = L->attention ? NH * D : V;
    if (!qmat(L->in, in_rows, H) || !qmat(L->out, H, out_cols) || !qmat(L->gate_up, 2 * F, H) || !qmat(L->down, H, F))
      *why = "a layer matrix is not Q4 / Q4_K of the expected shape";
    else if (!vec_n(L->op_norm, H) || !vec_n(L->ffn_norm, H) || !L->state)
      *why = "a layer lacks a norm or state buffer";
    else if (L->attention && (!L->v_cache || !vec_n(L->q_norm, D) || !vec_n(L->k_norm, D)))
      *why = "an attention layer lacks its q/k norm or V cache";
    else if (!L->attention && (!L->rec_state || !vec_n(L->taps, C * g->conv_len) || !vec_n(L->a_log, VH) ||
                               !vec_n(L->dt_bias, VH) || !vec_n(L->gnorm, DV)))
      *why = "a DeltaNet layer lacks a vector or its recurrent state";
  }
  return *why == NULL;
}

static int graph_fits(wisp_backend *be, const wisp_decode_graph *g, const char **why) {
  return g->gated_layers ? deltanet_attn_fits(be, g, why) : conv_attn_fits(be, g, why);
}

/* ---- build --------------------------------------------------------------- */

static void persist_release(wisp_backend *be, persist *P) {
  wisp_wgpu_int_scratch_free(be, &P->blob);
  wisp_wgpu_int_scratch_free(be, &P->arena);
  wisp_wgpu_int_scratch_free(be, &P->ctr);
  wisp_wgpu_int_scratch_free(be, &P->bak);
}

/* Runs the kernel in probe mode with `nwg` workgroups: one barrier, a short
 * spin limit. 1 when every workgroup arrived in time (they are co-resident). */
static int probe_grid(wisp_backend *be, persist *P, uint32_t nwg) {
  wisp_wgpu_device *d = wisp_wgpu_int_device(be);
  uint32_t zero[64] = {0};
  persist_params pp = P->base;
  pp.probe = 1;
  pp.nwg = nwg;
  pp.bar_base = 0;
  pp.spin_max = SPIN_PROBE;
  wisp_wgpu_buf params = {0};
  WGPUBindGroup bg = NULL;
  int ok = wisp_wgpu_buf_write(d, P->ctr, 0, zero, sizeof zero) == WISP_OK &&
           wisp_wgpu_buf_create(d, sizeof pp, WISP_WGPU_UNIFORM, "persist probe", &params) == WISP_OK &&
           wisp_wgpu_buf_write(d, params, 0, &pp, sizeof pp) == WISP_OK;
  /* The probe never touches its ids binding: a small buffer of its own. */
  wisp_wgpu_buf ids = {0};
  ok = ok && wisp_wgpu_buf_create(d, 16, WISP_WGPU_STORAGE, "persist probe ids", &ids) == WISP_OK;
  wisp_wgpu_binding b[6] = {{P->blob.b, 0, 0}, {P->blob.b, 0, 0}, {P->arena.b, 0, 0}, {P->ctr.b, 0, 0},
                            {ids.b, 0, 0},     {params.b, 0, 0}};
  ok = ok && wisp_wgpu_bind(d, P->k, b, 6, &bg) == WISP_OK;
  if (ok) {
    wisp_wgpu_batch bt;
    double t0 = wisp_now_s();
    ok = wisp_wgpu_batch_begin(d, &bt) == WISP_OK;
    if (ok) {
      wisp_wgpu_batch_dispatch(&bt, P->k, bg, nwg, 1, 1);
      /* The first dispatch of this large kernel may include its compilation
       * (lavapipe: LLVM, seconds on a cold cache): the device's wait limit
       * (minutes) allows for it. */
      ok = wisp_wgpu_batch_submit(&bt) == WISP_OK && wisp_wgpu_finish(d) == WISP_OK;
    }
    if (wisp_env_verbose()) fprintf(stderr, "webgpu: grid probe %u: %.3f s\n", nwg, wisp_now_s() - t0);
  }
  uint32_t got[2] = {1, 1};
  ok = ok && wisp_wgpu_buf_read(d, P->ctr, 0, got, sizeof got) == WISP_OK;
  if (!ok && wisp_env_verbose()) fprintf(stderr, "webgpu: grid probe failed: %s\n", wisp_last_error());
  if (bg) wisp_wgpu_bind_free(d, bg);
  wisp_wgpu_buf_free(d, &params);
  wisp_wgpu_buf_free(d, &ids);
  if (wisp_env_verbose())
    fprintf(stderr, "webgpu: persistent grid probe: %u workgroups: %s (arrived %u, timed out %u)\n", nwg,
            ok && got[1] == 0 && got[0] == nwg ? "co-resident" : "no", got[0], got[1]);
  return ok && got[1] == 0 && got[0] == nwg;
}

/* The types of the graph's matrices, bit 1 << T_* each (the kernel's TYPES). */
static uint32_t graph_types(const wisp_decode_graph *g) {
  uint32_t t = 1u << type_code(g->embed->type) | 1u << type_code(g->head->type);
  for (int i = 0; i < g->n_layers; i++) {
    const wisp_graph_layer *L = &g->layers[i];
    t |= 1u << type_code(L->in->type) | 1u << type_code(L->out->type) | 1u << type_code(L->gate_up->type) |
         1u << type_code(L->down->type);
  }
  return t;
}

static wisp_wgpu_kernel *make_kernel(wisp_backend *be, const wisp_decode_graph *g, uint32_t xs4) {
  uint32_t sgmin = 4; /* the smallest subgroup size WebGPU allows */
  if (g->gated_layers) {
    const uint32_t ig = PERSIST_WG / DN_CW;
    wisp_wgpu_const c[5] = {{"WG", PERSIST_WG},
                            {"XS4", xs4},
                            {"MAXSG", PERSIST_WG / sgmin},
                            {"CW", DN_CW},
                            {"NJ", ((uint32_t)g->lin_k_dim + ig - 1) / ig}};
    return wisp_wgpu_int_kernel(be, "persist_deltanet_attn", c, 5);
  }
  /* tuning persistOpt: the kernel's round-trip savers (OPT bits), for A/B runs */
  const wisp_wgpu_backend_opts *o = wisp_wgpu_int_opts(be);
  wisp_wgpu_const c[5] = {{"WG", PERSIST_WG}, {"XS4", xs4}, {"MAXSG", PERSIST_WG / sgmin},
                          {"OPT", o->persist_opt_given ? o->persist_opt : PERSIST_OPT}, {"TYPES", graph_types(g)}};
  return wisp_wgpu_int_kernel(be, "persist_conv_attn", c, 5);
}

/* Barriers per step. persist_conv_attn.wgsl: 4 per short-conv layer, 5 per
 * attention layer; persist_deltanet_attn.wgsl: 5 per layer; both one after the head. */
static uint32_t barriers_per_step(const wisp_decode_graph *g) {
  uint32_t n = 1;
  for (int i = 0; i < g->n_layers; i++) n += g->layers[i].attention || g->gated_layers ? 5 : 4;
  return n;
}

/* The arena's scratch common to both kernels (words): x, then the
 * attention partials after the kernel's own vectors. */
static void arena_attention(persist *P, uint64_t *a, int D) {
  P->base.s_part = (uint32_t)*a, *a += 2 * 1024;
  /* attention splits: at most 1024 (head, split) tasks (n_splits in the kernels) */
  P->base.s_ao = (uint32_t)*a, *a += (uint64_t)1024 * D;
  P->base.s_am = (uint32_t)*a, *a += 2 * 1024;
}

/* The tied embedding/head, final norm and rope tables (rows [0, rows)). */
static void put_tail(persist *P, const wisp_decode_graph *g, blob_builder *b, seen_mat *seen, int *n_seen, int rows,
                     int half) {
  uint32_t m[4];
  put_mat(b, g->embed, seen, n_seen, m);
  P->base.embed_q = m[0], P->base.embed_s = m[1], P->base.embed_z = m[2], P->base.embed_t = m[3];
  put_mat(b, g->head, seen, n_seen, m);
  P->base.head_q = m[0], P->base.head_s = m[1], P->base.head_z = m[2], P->base.head_t = m[3];
  P->base.fnorm = put_vec(b, g->final_norm);
  if (rows < 0) {
    P->base.rope_cos = put_vec(b, g->rope_cos);
    P->base.rope_sin = put_vec(b, g->rope_sin);
  } else {
    P->base.rope_cos = put(b, g->rope_cos->data, (size_t)rows * half * 4);
    P->base.rope_sin = put(b, g->rope_sin->data, (size_t)rows * half * 4);
  }
}

/* persist_conv_attn.wgsl's blob (layer table first) and arena; *a: arena words,
 * *xs4: its staging size. */
static void layout_conv_attn(persist *P, const wisp_decode_graph *g, int kv16, blob_builder *b, uint32_t *table,
                        seen_mat *seen, uint64_t *a, uint32_t *xs4) {
  const int H = g->hidden, F = g->ffn, D = g->head_dim, NH = g->heads, KVH = g->kv_heads;
  int n_seen = 0;
  put(b, table, (size_t)g->n_layers * LAYER_WORDS * 4); /* filled in by the caller */
  /* Arena layout (words): x, mid, h, q, argmax partials, then states. */
  const uint32_t mid_n = (uint32_t)(NH * D > H ? NH * D : H);
  P->base.s_x = (uint32_t)*a, *a += (uint64_t)H;
  P->base.s_mid = (uint32_t)*a, *a += mid_n;
  P->base.s_h = (uint32_t)*a, *a += (uint64_t)F;
  P->base.s_q = (uint32_t)*a, *a += (uint64_t)NH * D;
  arena_attention(P, a, D);
  const uint64_t kv_words = (uint64_t)g->max_pos * KVH * D / (kv16 ? 2 : 1);
  /* The conv states side by side (one copy backs them all up before a
   * run), then the KV caches. */
  P->conv_words = (uint64_t)H * (uint64_t)(g->conv_len - 1);
  P->rec_words = 0;
  P->s_conv = (uint32_t)*a;
  for (int i = 0; i < g->n_layers; i++)
    if (!g->layers[i].attention) P->state_off[i] = (uint32_t)*a, *a += P->conv_words;
  P->n_conv = (uint32_t)(*a - P->s_conv);
  for (int i = 0; i < g->n_layers; i++) {
    const wisp_graph_layer *L = &g->layers[i];
    uint32_t *t = table + (size_t)i * LAYER_WORDS, m[4];
    t[0] = (uint32_t)L->attention;
    t[1] = put_vec(b, L->op_norm);
    put_mat(b, L->in, seen, &n_seen, m);
    memcpy(t + 2, m, 3 * sizeof *m); /* q, s, z; the type at 19 */
    t[19] = m[3];
    put_mat(b, L->out, seen, &n_seen, m);
    memcpy(t + 5, m, 3 * sizeof *m);
    t[20] = m[3];
    t[8] = L->attention ? put_vec(b, L->q_norm) : put_vec(b, L->taps);
    t[9] = L->attention ? put_vec(b, L->k_norm) : NONE;
    t[10] = put_vec(b, L->ffn_norm);
    put_mat(b, L->gate_up, seen, &n_seen, m);
    memcpy(t + 11, m, 3 * sizeof *m);
    t[21] = m[3];
    put_mat(b, L->down, seen, &n_seen, m);
    memcpy(t + 14, m, 3 * sizeof *m);
    t[22] = m[3];
    if (L->attention) {
      P->state_off[i] = (uint32_t)*a;
      *a += kv_words;
      P->v_off[i] = (uint32_t)*a;
      t[18] = (uint32_t)*a;
      *a += kv_words;
    } else {
      t[18] = NONE;
    }
    t[17] = P->state_off[i];
  }
  put_tail(P, g, b, seen, &n_seen, -1, 0);
  *xs4 = (uint32_t)((F > (int)mid_n ? F : (int)mid_n) / 4);
  *xs4 = (*xs4 + 7) / 8 * 8; /* whole runs of 8 for the kernel's xsw swizzle */
}

/* persist_deltanet_attn.wgsl's blob (its layer table is described at LAYER_WORDS
 * in the kernel) and arena. */
static void layout_deltanet_attn(persist *P, const wisp_decode_graph *g, int kv16, blob_builder *b, uint32_t *table,
                        seen_mat *seen, uint64_t *a, uint32_t *xs4) {
  const int H = g->hidden, F = g->ffn, D = g->head_dim, NH = g->heads, KVH = g->kv_heads;
  const int VH = g->lin_v_heads, DK = g->lin_k_dim, DV = g->lin_v_dim;
  const int V = VH * DV, C = 2 * g->lin_k_heads * DK + V;
  int n_seen = 0;
  put(b, table, (size_t)g->n_layers * DN_LAYER_WORDS * 4); /* filled in by the caller */
  int big = C + V + 2 * VH;
  if ((2 * NH + 2 * KVH) * D > big) big = (2 * NH + 2 * KVH) * D;
  P->base.s_x = (uint32_t)*a, *a += (uint64_t)H;
  P->base.s_big = (uint32_t)*a, *a += (uint64_t)big;
  P->base.s_mid = (uint32_t)*a, *a += (uint64_t)V;
  P->base.s_h = (uint32_t)*a, *a += (uint64_t)F;
  arena_attention(P, a, D);
  /* The states changed in place (conv rings, recurrent states) side by
   * side, for the backup before each run; then the KV caches. */
  P->conv_words = (uint64_t)C * g->conv_len;
  P->rec_words = (uint64_t)VH * DK * DV;
  const uint64_t kv_words = (uint64_t)g->max_pos * KVH * D / (kv16 ? 2 : 1);
  P->s_conv = (uint32_t)*a;
  for (int i = 0; i < g->n_layers; i++)
    if (!g->layers[i].attention) {
      P->state_off[i] = (uint32_t)*a, *a += P->conv_words;
      P->rec_off[i] = (uint32_t)*a, *a += P->rec_words;
    }
  P->n_conv = (uint32_t)(*a - P->s_conv);
  for (int i = 0; i < g->n_layers; i++) {
    const wisp_graph_layer *L = &g->layers[i];
    uint32_t *t = table + (size_t)i * DN_LAYER_WORDS;
    t[0] = (uint32_t)L->attention;
    t[1] = put_vec(b, L->op_norm);
    put_mat(b, L->in, seen, &n_seen, t + 2);
    put_mat(b, L->out, seen, &n_seen, t + 6);
    put_mat(b, L->gate_up, seen, &n_seen, t + 10);
    put_mat(b, L->down, seen, &n_seen, t + 14);
    t[18] = put_vec(b, L->ffn_norm);
    if (L->attention) {
      t[19] = put_vec(b, L->q_norm);
      t[20] = put_vec(b, L->k_norm);
      t[21] = t[22] = NONE;
      P->state_off[i] = (uint32_t)*a, *a += kv_words;
      P->v_off[i] = (uint32_t)*a, *a += kv_words;
      t[24] = P->v_off[i];
    } else {
      t[19] = put_vec(b, L->taps);
      t[20] = put_vec(b, L->a_log);
      t[21] = put_vec(b, L->dt_bias);
      t[22] = put_vec(b, L->gnorm);
      t[24] = P->rec_off[i];
    }
    t[23] = P->state_off[i];
  }
  /* rope rows up to the context only (the full table can be 100+ MB) */
  int rows = g->rope_rows < g->max_pos ? g->rope_rows : g->max_pos;
  put_tail(P, g, b, seen, &n_seen, rows, g->rotary_dim / 2);
  *xs4 = deltanet_xs4(g);
  P->base.rot_half = (uint32_t)g->rotary_dim / 2;
  P->base.lkh = (uint32_t)g->lin_k_heads, P->base.lvh = (uint32_t)VH;
  P->base.dk = (uint32_t)DK, P->base.dv = (uint32_t)DV;
  P->base.ns = (uint32_t)(DV + DN_CW - 1) / DN_CW;
}

static wisp_status build(wisp_backend *be, persist *P, const wisp_decode_graph *g) {
  wisp_wgpu_device *d = wisp_wgpu_int_device(be);
  const int kv16 = wisp_wgpu_int_kv16(be);
  const size_t table_words = (size_t)g->n_layers * (g->gated_layers ? DN_LAYER_WORDS : LAYER_WORDS);
  blob_builder b = {0};
  seen_mat *seen = calloc((size_t)g->n_layers * 4 + 2, sizeof *seen);
  uint32_t *table = calloc(table_words, 4);
  if (!seen || !table) {
    free(seen);
    free(table);
    return wisp_fail(WISP_ENOMEM, "out of memory");
  }
  uint64_t a = 0;
  uint32_t xs4 = 0;
  if (g->gated_layers) layout_deltanet_attn(P, g, kv16, &b, table, seen, &a, &xs4);
  else layout_conv_attn(P, g, kv16, &b, table, seen, &a, &xs4);
  free(seen);
  wisp_status st = WISP_OK;
  const uint64_t limit = d->info.max_storage_buffer_binding_size;
  if (b.oom) st = wisp_fail(WISP_ENOMEM, "out of memory building the persistent decode's weights");
  else if (b.n > limit || a * 4 > limit || a > UINT32_MAX / 2 || b.n / 4 > UINT32_MAX / 2) st = WISP_EUNSUPPORTED;
  if (!st) {
    memcpy(b.p, table, table_words * 4);
    st = wisp_wgpu_buf_from(d, b.p, b.n, "wisp persist weights", &P->blob);
  }
  free(table);
  free(b.p);
  if (!st) st = wisp_wgpu_buf_create(d, a * 4, WISP_WGPU_STORAGE, "wisp persist arena", &P->arena);
  if (!st) st = wisp_wgpu_buf_create(d, 256, WISP_WGPU_STORAGE, "wisp persist barrier", &P->ctr);
  if (!st) st = wisp_wgpu_buf_create(d, 8 * (uint64_t)P->n_conv + 16, WISP_WGPU_STORAGE, "wisp persist conv backup",
                                     &P->bak);
  if (st) return st;
  const int NH = g->heads;
  P->base.n_layers = (uint32_t)g->n_layers;
  P->base.H = (uint32_t)g->hidden, P->base.F = (uint32_t)g->ffn, P->base.heads = (uint32_t)NH;
  P->base.kvh = (uint32_t)g->kv_heads, P->base.D = (uint32_t)g->head_dim, P->base.L = (uint32_t)g->conv_len;
  P->base.vocab = (uint32_t)g->vocab;
  P->base.eps = g->eps;
  P->base.kv16 = (uint32_t)kv16;
  P->base.spin_max = SPIN_RUN;
  const uint32_t rp = wisp_wgpu_int_opts(be)->persist_rp; /* gated layers: the products' row split */
  if (rp == 1 || rp == 2 || rp == 4) P->base.rp_force = rp;
  P->barriers_per_step = barriers_per_step(g);
  P->base.barriers_per_step = P->barriers_per_step;
  /* The grid: tuning persistGrid, else the largest of 128, 64, ...
   * whose workgroups the probe finds co-resident (1 on CPU adapters, whose
   * workgroups share a few threads). */
  const uint32_t asked = wisp_wgpu_int_persist_grid(be);
  /* From 128 (not 256): on the H200 (132 SMs) 256 fit (two a SM) but ran
   * 15 % slower than 132 (1,552 vs 1,843 tok/s); one a SM is the aim. */
  uint32_t want = asked ? asked : d->info.adapter_type == WGPUAdapterType_CPU ? 1 : 128;
  if (want > 1024) want = 1024;
  P->nwg = 0;
  P->k = make_kernel(be, g, xs4);
  if (!P->k || wisp_wgpu_int_has_error(be))
    return wisp_fail(WISP_EDEVICE, "webgpu: building %s failed", g->gated_layers ? "persist_deltanet_attn.wgsl" : "persist_conv_attn.wgsl");
  for (uint32_t n = want; n >= 1; n /= 2) {
    if (probe_grid(be, P, n)) {
      P->nwg = n;
      break;
    }
  }
  if (!P->nwg) return WISP_EUNSUPPORTED;
  /* splits per head: the grid's workgroups shared among the heads */
  P->base.nwg = P->nwg;
  P->fail_run = wisp_wgpu_int_opts(be)->persist_fail;
  P->runs = 0;
  P->run_pos[0] = P->run_pos[1] = -1;
  P->base.nsmax = P->nwg / (uint32_t)NH > 1 ? P->nwg / (uint32_t)NH : 1;
  const uint32_t splits = wisp_wgpu_int_opts(be)->persist_splits; /* tests: splits with few workgroups */
  if (splits) P->base.nsmax = splits;
  if (P->base.nsmax > 16) P->base.nsmax = 16; /* NSMAX in the kernel's stage_attn */
  if (P->base.nsmax * (uint32_t)NH > 1024) P->base.nsmax = 1024 / (uint32_t)NH;
  /* Barrier arrivals so far: the probe's (the counter is zeroed for runs). */
  uint32_t zero[64] = {0};
  if ((st = wisp_wgpu_buf_write(d, P->ctr, 0, zero, sizeof zero))) return st;
  P->bar_base = 0;
  P->end = -1;
  P->out0 = -1;
  if (wisp_env_verbose())
    fprintf(stderr, "webgpu: persistent decode (%s): %u workgroups, %u barriers a step, weights %.1f MB, arena %.1f MB\n",
            g->gated_layers ? "deltanet+attention" : "conv+attention", P->nwg, P->barriers_per_step, (double)P->blob.size / 1e6,
            (double)P->arena.size / 1e6);
  return WISP_OK;
}

/* ---- a run ---------------------------------------------------------------- */

/* Copies state rows [p0, p1) between the session's buffers and the arena
 * (to_arena: in; else out); conv states whole (out: from the backup at word
 * `bak` of P->bak when it is not NONE). */
/* n words of a state changed in place, between the session's buffer s and
 * arena word off: in (to_arena), out, or out from the backup at word bak
 * of P->bak (not NONE). */
static void copy_whole(wisp_backend *be, persist *P, const wisp_buf *sb, uint32_t off, uint64_t n, int to_arena,
                       uint32_t bak) {
  WGPUBuffer s = wisp_wgpu_int_buf(sb);
  const uint64_t s0 = wisp_wgpu_int_word0(sb); /* a slot's part of a shared buffer */
  if (to_arena) wisp_wgpu_int_copy_words(be, s, s0, P->arena.b, off, n);
  else if (bak == NONE) wisp_wgpu_int_copy_words(be, P->arena.b, off, s, s0, n);
  else wisp_wgpu_int_copy_words(be, P->bak.b, bak + (off - P->s_conv), s, s0, n);
}

static void copy_state(wisp_backend *be, persist *P, const wisp_decode_graph *g, int p0, int p1, int to_arena,
                       uint32_t bak) {
  const uint64_t row = (uint64_t)g->kv_heads * g->head_dim / (wisp_wgpu_int_kv16(be) ? 2 : 1);
  WGPUBuffer arena = P->arena.b;
  for (int i = 0; i < g->n_layers; i++) {
    const wisp_graph_layer *L = &g->layers[i];
    if (!L->attention) { /* the conv state (DeltaNet: its ring) and the recurrent state, whole */
      copy_whole(be, P, L->state, P->state_off[i], P->conv_words, to_arena, bak);
      if (P->rec_words) copy_whole(be, P, L->rec_state, P->rec_off[i], P->rec_words, to_arena, bak);
      continue;
    }
    WGPUBuffer kb = wisp_wgpu_int_buf(L->state), vb = wisp_wgpu_int_buf(L->v_cache);
    const uint64_t k0 = wisp_wgpu_int_word0(L->state), v0 = wisp_wgpu_int_word0(L->v_cache); /* slot parts */
    uint64_t o = (uint64_t)p0 * row, n = (uint64_t)(p1 - p0) * row;
    if (to_arena) {
      wisp_wgpu_int_copy_words(be, kb, k0 + o, arena, P->state_off[i] + o, n);
      wisp_wgpu_int_copy_words(be, vb, v0 + o, arena, P->v_off[i] + o, n);
    } else {
      wisp_wgpu_int_copy_words(be, arena, P->state_off[i] + o, kb, k0 + o, n);
      wisp_wgpu_int_copy_words(be, arena, P->v_off[i] + o, vb, v0 + o, n);
    }
  }
}

/* The fewest steps a persistent run takes: tuning persistMinSteps,
 * else 1 when the persistent decode was asked for, else the plan's
 * persistentDecodeMinSteps (the registry variant's minSteps; none when the
 * plan has no persistent decode, e.g. a profile binding its own decode
 * kernels), else 1 for short-conv graphs and DN_MIN_STEPS for gated ones (a backend
 * configured without a plan). UINT32_MAX: never. */
static uint32_t min_steps(wisp_backend *be, const wisp_decode_graph *g) {
  const uint32_t asked = wisp_wgpu_int_opts(be)->persist_min_steps;
  if (asked) return asked;
  if (wisp_wgpu_int_persist_asked(be)) return 1;
  const int plan = wisp_wgpu_int_settings(be)->persist_min_steps;
  if (plan > 0) return (uint32_t)plan;
  if (plan < 0) return UINT32_MAX;
  return g->gated_layers ? DN_MIN_STEPS : 1;
}

static persist **slot(wisp_backend *be) { return (persist **)wisp_wgpu_int_persist_slot(be); }

wisp_status wisp_wgpu_decode_graph(wisp_backend *be, const wisp_decode_graph *g, wisp_buf *ids, int pos, int k,
                                   const wisp_sampling *sp) {
  if (!sp || sp->temperature > 0 || k <= 0 || pos < 0 ||
      pos + k > g->max_pos || pos + k > g->rope_rows || wisp_wgpu_int_has_error(be))
    return WISP_EUNSUPPORTED;
  /* Only batches of at least min_steps steps (gated graphs: 32 from its
   * registry variant's minSteps through the plan). H200,
   * prompt 128 + 256, tok/s persistent vs op by op at 1 / 4 / 16 / 64 steps
   * a batch: 0.8B 752 / 852 / 860 / 862 vs 823 / 845 / 831 / 765; 2B 515 /
   * 532 / 538 / 540 vs 556 / 564 / 559 / 538 (docs/webgpu.md, "Persistent
   * decode"): large batches (the throughput profile's 64) gain or break
   * even, small ones lose. The smaller batches go op by op
   * (the arena's state is flushed to the session's buffers first); checked
   * first, so that a session of small batches never builds the kernel. */
  if ((uint32_t)k < min_steps(be, g)) return WISP_EUNSUPPORTED;
  persist *P = *slot(be);
  if (P && (P->embed != g->embed || P->n_layers != g->n_layers || P->max_pos != g->max_pos || P->gated != g->gated_layers)) {
    wisp_wgpu_persist_flush(be);
    persist_release(be, P);
    free(P->gcopy);
    free(P);
    P = *slot(be) = NULL;
  }
  if (!P) {
    const char *why;
    P = calloc(1, sizeof *P);
    if (!P) return WISP_EUNSUPPORTED;
    *slot(be) = P;
    P->embed = g->embed;
    P->gated = g->gated_layers;
    P->n_layers = g->n_layers;
    P->max_pos = g->max_pos;
    if (g->gated_layers && !wisp_wgpu_int_persist_asked(be) &&
        wisp_wgpu_int_device(be)->info.adapter_type == WGPUAdapterType_CPU) {
      /* lavapipe compiles persist_deltanet_attn.wgsl for ~35 s and runs it on one
       * workgroup: no gain there, so only when asked (tests) */
      why = "a CPU adapter (gated layers: only with tuning persist=1)";
      if (wisp_env_verbose()) fprintf(stderr, "webgpu: no persistent decode: %s\n", why);
      P->unsupported = 1;
    } else if (!graph_fits(be, g, &why)) {
      if (wisp_env_verbose()) fprintf(stderr, "webgpu: no persistent decode: %s\n", why);
      P->unsupported = 1;
    } else {
      wisp_status st = build(be, P, g);
      if (st) {
        if (wisp_env_verbose())
          fprintf(stderr, "webgpu: no persistent decode: %s\n", st == WISP_EUNSUPPORTED ? "unsupported" : wisp_last_error());
        persist_release(be, P);
        P->unsupported = 1;
      }
    }
  }
  if (P->unsupported || P->failed) return WISP_EUNSUPPORTED;

  if (!P->gcopy && !(P->gcopy = malloc(sizeof *P->gcopy))) return WISP_EUNSUPPORTED;
  wisp_wgpu_int_emit_pending(be);
  uint64_t epoch = wisp_wgpu_int_state_epoch(be);
  if (P->end != pos || P->epoch != epoch) {
    wisp_wgpu_persist_flush(be);
    copy_state(be, P, g, 0, pos, 1, NONE);
    P->out0 = pos;
  } else if (P->out0 < 0) {
    P->out0 = pos;
  }
  memcpy(P->gcopy, g, sizeof *g);
  persist_params pp = P->base;
  pp.pos0 = (uint32_t)pos;
  pp.steps = (uint32_t)k;
  pp.bar_base = P->bar_base;
  pp.slot = 0;
  pp.probe = 0;
  /* The plan's flashBlocks (the backend's split cap) bounds the attention
   * splits here as in the op-by-op decode; the stats count the key blocks
   * as g_attention does, per attention layer and step (persist_conv_attn.wgsl's
   * n_splits: one block per LK-th of the grid's threads in keys). */
  const uint32_t cap = wisp_wgpu_int_max_splits(be);
  if (cap >= 1 && pp.nsmax > cap) pp.nsmax = cap;
  const uint32_t kc = PERSIST_WG / 8;
  int attn_layers = 0;
  for (int l = 0; l < g->n_layers; l++) attn_layers += g->layers[l].attention != 0;
  for (int s = 0; s < k; s++) {
    uint32_t ns = ((uint32_t)(pos + s) + kc) / kc;
    if (ns > pp.nsmax) ns = pp.nsmax;
    wisp_wgpu_int_stats(be)->attn_splits += (uint64_t)attn_layers * (ns ? ns : 1);
  }
  /* The conv states as this run finds them, for decode_graph_reset should
   * it fail: a copy ahead of the run (the kernel's own workgroups cannot
   * be trusted to make it before the others change them when a barrier
   * gives up). */
  const uint32_t r = P->runs % 2;
  wisp_wgpu_int_copy_words(be, P->arena.b, P->s_conv, P->bak.b, r * P->n_conv, P->n_conv);
  P->run_pos[r] = pos;
  P->runs++;
  wisp_wgpu_binding b[5] = {{P->blob.b, 0, 0}, {P->blob.b, 0, 0}, {P->arena.b, 0, 0}, {P->ctr.b, 0, 0},
                            {wisp_wgpu_int_buf(ids), 0, 0}};
  /* Run persistFail=N (tests) starts with its timeout flag
   * set, as if a barrier had given up, and afterwards its conv states are
   * overwritten with weight bytes, as a real failure may leave them. (The
   * kernel clears the flag at the end of each run, so one failed run does
   * not void the later ones.) The flag is written on the queue, ahead of
   * this run but after the runs already submitted: with two batches in
   * flight, the decode loop has submitted the previous one. */
  const int fail = P->fail_run && P->runs == P->fail_run;
  if (fail) {
    uint32_t flag = 1;
    if (wisp_wgpu_buf_write(wisp_wgpu_int_device(be), P->ctr, 4, &flag, sizeof flag) != WISP_OK) return WISP_EDEVICE;
  }
  wisp_wgpu_int_record(be, P->k, b, 5, &pp, sizeof pp, P->nwg, 1, 1);
  if (fail) wisp_wgpu_int_copy_words(be, P->blob.b, 0, P->arena.b, P->s_conv, P->n_conv);
  P->bar_base += P->nwg * ((uint32_t)k * P->barriers_per_step + 1);
  P->end = pos + k; /* copied back lazily: wisp_wgpu_persist_flush */
  P->epoch = wisp_wgpu_int_state_epoch(be);
  wisp_wgpu_int_stats(be)->persistent_steps += (uint64_t)k;
  return wisp_wgpu_int_has_error(be) ? WISP_EDEVICE : WISP_OK;
}

wisp_status wisp_wgpu_decode_graph_reset(wisp_backend *be, int pos) {
  persist *P = *slot(be);
  if (!P || P->unsupported || P->failed || !P->gcopy || P->end < pos) return WISP_EUNSUPPORTED;
  int r = P->run_pos[0] == pos ? 0 : P->run_pos[1] == pos ? 1 : -1;
  if (r < 0) return WISP_EUNSUPPORTED;
  /* The session's buffers get every KV row the arena holds before pos (a
   * flush since the failed run began, e.g. for a stop-token snapshot, may
   * have copied that run's rows out, so out0 is no guide) and the conv
   * states the failed run found (its backup); the arena is void from now. */
  P->out0 = P->end = -1;
  P->failed = 1;
  copy_state(be, P, P->gcopy, 0, pos, 0, (uint32_t)r * P->n_conv);
  fprintf(stderr, "wisp: webgpu: the persistent decode's grid barrier gave up on the batch at position %d; decoding "
          "it and the rest of this session op by op\n", pos);
  return wisp_wgpu_int_has_error(be) ? WISP_EDEVICE : WISP_OK;
}

/* Records the copy of the arena's newer state into the session's buffers;
 * called by every op that reads or writes state (short conv, attention,
 * buf_zero, buf_copy_to, buf_read) before it records anything. */
void wisp_wgpu_persist_flush(wisp_backend *be) {
  persist *P = *slot(be);
  if (!P || P->unsupported || !P->gcopy || P->out0 < 0 || P->end < 0) return;
  int p0 = P->out0;
  P->out0 = -1; /* before recording: the copies must not come back here */
  copy_state(be, P, P->gcopy, p0, P->end, 0, NONE);
}

void wisp_wgpu_persist_forget(wisp_backend *be, const wisp_buf *b) {
  persist *P = *slot(be);
  if (!P || !P->gcopy || P->end < 0) return;
  for (int i = 0; i < P->gcopy->n_layers; i++)
    if (P->gcopy->layers[i].state == b || P->gcopy->layers[i].v_cache == b || P->gcopy->layers[i].rec_state == b) {
      P->out0 = -1;
      P->end = -1;
      return;
    }
}

void wisp_wgpu_persist_free(wisp_backend *be) {
  persist *P = *slot(be);
  if (!P) return;
  persist_release(be, P);
  free(P->gcopy);
  free(P);
  *slot(be) = NULL;
}
