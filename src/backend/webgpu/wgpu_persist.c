/* Persistent decode (backend.h, decode_graph): k decode steps of a
 * graph in one dispatch of kernels/persist.wgsl, which walks the graph's
 * list of generic phases (backend.h wisp_decode_phase, lowered from the
 * step graph by src/model/graph_lower.c). This file builds the pipeline
 * for the phases, weight types and product engine the graph has (override
 * constants: the code of the others is compiled away), the weight blob with
 * its layer table, and the arena.
 *
 * Why: a decode step of the seed model is ~66 small dispatches; each one
 * costs a launch and a ramp-up that dwarf its arithmetic (docs/webgpu.md,
 * "What bounds decode"). One dispatch of a fixed grid of co-resident
 * workgroups that walks every phase of every step, phases separated by grid
 * barriers, pays that once per k tokens instead.
 *
 * What it needs, checked here and in wgpu_persist_fit.c (anything else:
 * WISP_EUNSUPPORTED, and the decode loop records decode_step as before):
 *   - no repetition penalty (greedy or sampled draws: the head keeps its
 *     logits and one workgroup draws as sample.wgsl does); matrices of the types the op-by-op decode serves
 *     (Q4, Q4Z, Q4_K, f32, f16, Q8_0: persist_quant.wgsli, a type word per
 *     matrix in the layer table; graphs with gated attention or DeltaNet
 *     layers, which use the units-split product engine: Q4, Q4Z and Q4_K
 *     matrices, the embedding and head Q4 / Q4Z, what convert writes and the
 *     op-by-op embedding reads); each layer's mixer of a shape its phases
 *     take, its flags ones they take (persist_graph_fits); the subgroups
 *     feature;
 *   - all weights in one binding (the blob below, built once per graph);
 *   - a grid whose workgroups really run at the same time: probed at build
 *     (a probe-mode dispatch whose one barrier must complete before a short
 *     spin limit), halving from tuning persistGrid (default 128; 1 on CPU
 *     adapters, whose workgroups share a few threads).
 *
 * State: the kernel works on its own arena (residual, scratch, conv states,
 * the DeltaNet recurrent states, KV caches in the session's layout), bound
 * as two bindings: S, the words before kv0, and KV, the caches from kv0,
 * which the streamed attention reads as 16-byte words (arena_bindings). Before a run the session's state is
 * copied in (skipped when nothing has written state since this module's
 * last run and the position continues it). The new state (conv states, the
 * new KV rows) is copied back lazily: every op of the backend that reads or
 * writes state first calls wisp_wgpu_persist_flush, so prefill, snapshots
 * and rewinds, and the op-by-op decode see the session's buffers as if
 * decode_step had run, while runs that follow each other copy nothing. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/tuning_defaults.h"
#include "backend/webgpu/wgpu_core.h"
#include "backend/webgpu/wgpu_persist.h"
#include "backend/webgpu/wgpu_persist_blob.h"
#include "backend/webgpu/wgpu_persist_fit.h"
#include "format/quant.h"
#include "format/weight_source.h"
#include "util/clock.h"
#include "util/env.h"
#include "util/err.h"

#define DN_MIN_STEPS 32 /* fewest steps a run of a units-split graph takes without a plan (the registry's minSteps) */
#define NONE PBLOB_NONE
#define SPIN_RUN (1u << 26)   /* polls before a barrier of a real run gives up (seconds) */
#define SPIN_PROBE (1u << 20) /* polls before a probe's barrier gives up (~0.1-1 s; only a failing probe waits) */

/* The kernel's uniform parameters (persist.wgsl, struct Params). */
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
  uint32_t s_ao, s_am, nwg, skip; /* skip: works left out, bit 1 << wisp_work_kind (tuning persistSkip: timing probes) */
  uint32_t bmode, backoff; /* grid barrier variant and back-off (kernel experiments; 0 here) */
  uint32_t embed_t, head_t; /* their types (persist_quant.wgsli's T_*) */
  uint32_t rot_half, lkh, lvh, dk;
  uint32_t dv, s_big, ns, rp_force; /* rp_force: tuning persistRp=1|2|4 (tests: the product's row split) */
  uint32_t n_phases;
  float escale, ascale; /* the embedding's scale, plain attention's score scale */
  uint32_t s_y;
  uint32_t s_x2, s_logits, s_pick, top_k; /* a sampled run's logits (vocab words) and token (a word) */
  uint32_t seed;
  float temperature, top_p, min_p; /* the draw's settings (temperature 0: greedy) */
  uint32_t ph[MAX_PHASES]; /* the phase words: stage | work << 4 | layer << 8 | flags << 16 */
} persist_params;

typedef struct {
  const wisp_matrix *embed; /* the graph this was built for (its identity) */
  int n_layers, max_pos;
  uint32_t phase_sig;       /* and its phase list's (phase_sig) */
  int unsupported;          /* built and found unusable: every call answers WISP_EUNSUPPORTED */
  int failed;               /* a run failed (decode_graph_reset): no more runs */
  /* Tuning persistFail=N at build (tests): run N (from 1) starts as
   * if a barrier had timed out, and leaves its conv states scribbled on */
  uint32_t fail_run;
  uint32_t runs;            /* runs recorded; run r found the conv states kept in half r % 2 of bak */
  int run_pos[2];           /* where the last two runs began (-1: none) */
  uint32_t s_conv, n_conv;  /* the states changed in place (conv, recurrent) in the arena, side by side, words */
  wisp_wgpu_buf bak;        /* two copies of them (WebGPU copies need two buffers) */
  wisp_wgpu_buf blob, arena, ctr;
  wisp_wgpu_kernel *k;
  wisp_wgpu_kernel *k_draw; /* k with the sampled draw (built on the first sampled run; NULL before) */
  uint32_t xs4, opt;        /* k's staging size and OPT bits, for k_draw */
  uint32_t nwg, bar_base, barriers_per_step;
  persist_params base;      /* the parameters fixed at build */
  uint32_t state_off[WISP_GRAPH_MAX_LAYERS], v_off[WISP_GRAPH_MAX_LAYERS]; /* arena words */
  uint32_t rec_off[WISP_GRAPH_MAX_LAYERS];  /* DeltaNet layers: the recurrent state (arena words) */
  /* per layer: its conv state (DeltaNet: ring) and recurrent state (DeltaNet; else 0), words */
  uint64_t conv_words[WISP_GRAPH_MAX_LAYERS], rec_words[WISP_GRAPH_MAX_LAYERS];
  /* Where the arena's state stands: valid for positions [0, end) as of
   * backend state epoch `epoch` (-1: not valid). Rows [out0, end) and the
   * conv states are newer than the session's buffers until flushed
   * (out0 < 0: nothing to copy back). */
  int end, out0;
  uint64_t epoch;
  /* The KV caches at the arena's end, from word kv0: kv_cap positions a
   * layer, as many as the session's caches hold (they grow together:
   * grow_arena) */
  uint32_t kv0;
  int kv_cap;
  wisp_decode_graph *gcopy;
} persist;

/* A phase as the kernel reads it (persist.wgsl, Params.ph). */
static uint32_t phase_word(const wisp_decode_phase *f) {
  return f->stage | (uint32_t)f->work << 4 | (uint32_t)f->layer << 8 | (uint32_t)f->flags << 16;
}

/* ---- build --------------------------------------------------------------- */

static void persist_release(wisp_backend *be, persist *P) {
  wisp_wgpu_scratch_free(as_g(be), &P->blob);
  wisp_wgpu_scratch_free(as_g(be), &P->arena);
  wisp_wgpu_scratch_free(as_g(be), &P->ctr);
  wisp_wgpu_scratch_free(as_g(be), &P->bak);
}

/* The kernel's arena bindings: S, the words before kv0, and KV, the
 * caches from kv0 (WebGPU forbids overlapping writable bindings). */
static void arena_bindings(const persist *P, wisp_wgpu_binding *s, wisp_wgpu_binding *kv) {
  *s = (wisp_wgpu_binding){P->arena.b, 0, (uint64_t)P->kv0 * 4};
  *kv = (wisp_wgpu_binding){P->arena.b, (uint64_t)P->kv0 * 4, 0};
}

/* Whether an arena of `words` words (caches from kv0) fits the device's
 * binding limit, binding by binding, and 32-bit word offsets. */
static int arena_fits(const persist *P, uint64_t words, uint64_t limit) {
  return (uint64_t)P->kv0 * 4 <= limit && (words - P->kv0) * 4 <= limit && words <= UINT32_MAX / 2;
}

/* Runs the kernel in probe mode with `nwg` workgroups: one barrier, a short
 * spin limit. 1 when every workgroup arrived in time (they are co-resident). */
static int probe_grid(wisp_backend *be, persist *P, uint32_t nwg) {
  wisp_wgpu_device *d = as_g(be)->d;
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
  wisp_wgpu_binding b[7] = {{P->blob.b, 0, 0}, {P->blob.b, 0, 0}, {0}, {P->ctr.b, 0, 0}, {ids.b, 0, 0}, {0},
                            {params.b, 0, 0}};
  arena_bindings(P, &b[2], &b[5]);
  ok = ok && wisp_wgpu_bind(d, P->k, b, 7, &bg) == WISP_OK;
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
  uint32_t t = 1u << pblob_type_code(g->embed->type) | 1u << pblob_type_code(g->head->type);
  for (int i = 0; i < g->n_layers; i++) {
    const wisp_graph_layer *L = &g->layers[i];
    t |= 1u << pblob_type_code(L->in->type) | 1u << pblob_type_code(L->out->type) | 1u << pblob_type_code(L->gate_up->type) |
         1u << pblob_type_code(L->down->type);
  }
  return t;
}

/* persist.wgsl for graph g: only its phases, weight types and product
 * engine compiled in (override constants). */
/* tuning persistOpt (the kernel's OPT bits, for A/B runs) as this device
 * and graph can take them: bits 16 (attn_keys_wide) and 32 (grouped
 * queries, attn_group) sum a key's 8 lanes within one subgroup; 32 also
 * needs at most 8 (GQMAX) query heads a KV head and their queries within
 * the staging (xs4 vec4s). */
static uint32_t persist_opt_bits(wisp_backend *be, const wisp_decode_graph *g, uint32_t xs4) {
  uint32_t opt = as_g(be)->opts.persist_opt;
  if (as_g(be)->d->info.subgroup_min_size < 8) opt &= ~(16u | 32u | 64u);
  /* bit 128 (more loads in flight in attn_keys_wide, the same sums) makes
   * lavapipe's compile of every kernel variant about a fifth longer and
   * buys a CPU adapter nothing: there only when asked */
  if (as_g(be)->d->info.adapter_type == WGPUAdapterType_CPU && !wisp_tuning_given(&as_g(be)->opts, "persistOpt"))
    opt &= ~128u;
  const int gq = g->kv_heads > 0 ? g->heads / g->kv_heads : 0;
  if (gq < 1 || gq > 8 || g->heads % g->kv_heads || (uint64_t)gq * (uint64_t)g->head_dim > 4ull * xs4) opt &= ~32u;
  /* 256 (attn_stream): a head of whole 16-byte words a lane (HD % 32) that
   * fits qv (256); it takes (head, split) tasks, so not with 32 */
  if (g->head_dim <= 0 || g->head_dim % 32 || g->head_dim > 256 || (opt & 32u)) opt &= ~256u;
  return opt;
}

/* draw: with a sampled run's draw (DRAW = 1), built on the first sampled
 * run; greedy runs take the kernel without it (lavapipe compiles each
 * variant for seconds to tens of seconds, and a greedy run needs none of it). */
static wisp_wgpu_kernel *make_kernel(wisp_backend *be, const wisp_decode_graph *g, uint32_t xs4, uint32_t opt,
                                     int draw) {
  const uint32_t sgmin = 4; /* the smallest subgroup size WebGPU allows */
  const uint32_t split = (uint32_t)persist_split(be, g), works = persist_works(g);
  const uint32_t ig = PERSIST_WG / DN_CW;
  const int dn = (works & 1u << WISP_WORK_DELTANET) != 0;
  /* attn_stream's unrolling (HD 64 where it is off: its override
   * expressions must still hold) */
  const uint32_t hd = opt & 256u ? (uint32_t)g->head_dim : 64;
  wisp_wgpu_const c[17] = {{"WG", PERSIST_WG},
                           {"XS4", xs4},
                           {"MAXSG", PERSIST_WG / sgmin},
                           {"SPLIT", split},
                           {"XSUMN", split ? xs4 / 4 : 1},
                           {"VSLN", dn ? 64 : 1},
                           {"OPT", opt},
                           {"TYPES", graph_types(g)},
                           {"WORKS", works},
                           {"STAGES", persist_stages(g)},
                           {"FLAGS", persist_flags(g)},
                           {"CW", DN_CW},
                           {"NJ", dn ? ((uint32_t)g->lin_k_dim + ig - 1) / ig : 1},
                           {"PAIRS", g->rope_pairs},
                           {"HD", hd},
                           {"KVF16", as_g(be)->kv16 ? 1 : 0},
                           {"DRAW", draw ? 1 : 0}};
  return wisp_wgpu_pipeline(as_g(be), "persist", c, 17);
}

/* A rope table's rows up to the context only (the full table can be 100+ MB). */
static uint32_t put_rope(const wisp_decode_graph *g, pblob *b, const wisp_vector *t) {
  const int rows = g->rope_rows < g->max_pos ? g->rope_rows : g->max_pos, half = g->rotary_dim / 2;
  if (!t || half <= 0 || rows <= 0 || t->n < rows * half) return NONE;
  return pblob_put(b, t->data, (size_t)rows * half * 4);
}

/* The tied embedding/head, final norm and rope tables (both ropes'). */
static void put_tail(persist *P, const wisp_decode_graph *g, pblob *b, pblob_seen *seen, int *n_seen, uint32_t rope[4]) {
  uint32_t m[4];
  pblob_put_mat(b, g->embed, seen, n_seen, m);
  P->base.embed_q = m[0], P->base.embed_s = m[1], P->base.embed_z = m[2], P->base.embed_t = m[3];
  pblob_put_mat(b, g->head, seen, n_seen, m);
  P->base.head_q = m[0], P->base.head_s = m[1], P->base.head_z = m[2], P->base.head_t = m[3];
  P->base.fnorm = pblob_put_vec(b, g->final_norm);
  rope[0] = P->base.rope_cos = put_rope(g, b, g->rope_cos);
  rope[1] = P->base.rope_sin = put_rope(g, b, g->rope_sin);
  int local = 0;
  for (int i = 0; i < g->n_layers; i++) local |= g->layers[i].rope_local;
  rope[2] = local ? put_rope(g, b, g->rope_cos_local) : NONE;
  rope[3] = local ? put_rope(g, b, g->rope_sin_local) : NONE;
}

/* Positions the session's KV caches hold now: the fewest over the graph's
 * attention layers (max_pos without any). */
static int session_kv_positions(const wisp_decode_graph *g, int kv16) {
  const uint64_t row = (uint64_t)g->kv_heads * g->head_dim;
  int cap = g->max_pos;
  for (int i = 0; row && i < g->n_layers; i++) {
    const wisp_graph_layer *L = &g->layers[i];
    if (!L->attention) continue;
    const wisp_buf *c[2] = {L->state, L->v_cache};
    for (int k = 0; k < 2; k++) {
      const uint64_t held = (uint64_t)c[k]->n * (kv16 ? 2 : 1) / row;
      if (held < (uint64_t)cap) cap = (int)held;
    }
  }
  return cap;
}

/* Places the attention layers' K and V caches of P->kv_cap positions from
 * arena word P->kv0 (state_off, v_off: arena words, for the copies) and
 * writes their layer table words 23, 24 as offsets into the kernel's KV
 * binding, which starts at kv0; returns the arena's words (at least one
 * 16-byte word of KV, which a graph without attention binds too). */
static uint64_t kv_offsets(persist *P, const wisp_decode_graph *g, int kv16, uint32_t *table) {
  const uint64_t kv_words = (uint64_t)P->kv_cap * g->kv_heads * g->head_dim / (kv16 ? 2 : 1);
  uint64_t a = P->kv0;
  for (int i = 0; i < g->n_layers; i++) {
    if (!g->layers[i].attention) continue;
    P->state_off[i] = (uint32_t)a, a += kv_words;
    P->v_off[i] = (uint32_t)a, a += kv_words;
    table[(size_t)i * LAYER_WORDS + 23] = P->state_off[i] - P->kv0;
    table[(size_t)i * LAYER_WORDS + 24] = P->v_off[i] - P->kv0;
  }
  return a > P->kv0 ? a : P->kv0 + 4;
}

/* The blob (layer table first, described at LAYER_WORDS in persist.wgsl,
 * then the weights) and the arena: x, big, mid, h, y and x's second place
 * (post-norm blocks), q, the attention and argmax partials, then the
 * states changed in place (conv states and rings, recurrent states) side by
 * side, for the backup before each run, then the KV caches. *a: arena
 * words, *xs4: the staging size. */
static void layout(persist *P, const wisp_decode_graph *g, int kv16, pblob *b, uint32_t *table, pblob_seen *seen,
                   uint64_t *a, uint32_t *xs4) {
  const int H = g->hidden, F = g->ffn, D = g->head_dim, NH = g->heads;
  const int VH = g->lin_v_heads, DK = g->lin_k_dim, DV = g->lin_v_dim;
  const int V = VH * DV, C = 2 * g->lin_k_heads * DK + V;
  int n_seen = 0;
  pblob_put(b, table, (size_t)g->n_layers * LAYER_WORDS * 4); /* filled in by the caller */
  int big = 0, mid = H;
  for (int i = 0; i < g->n_layers; i++) {
    const wisp_graph_layer *L = &g->layers[i];
    if (L->mixer == WISP_MIX_ATTENTION_GATED || L->mixer == WISP_MIX_DELTANET)
      big = persist_in_rows(g, L) > big ? persist_in_rows(g, L) : big;
    if (persist_out_cols(g, L) > mid) mid = persist_out_cols(g, L);
  }
  P->base.s_x = (uint32_t)*a, *a += (uint64_t)H;
  P->base.s_big = (uint32_t)*a, *a += (uint64_t)big;
  P->base.s_mid = (uint32_t)*a, *a += (uint64_t)mid;
  P->base.s_h = (uint32_t)*a, *a += (uint64_t)F;
  P->base.s_y = (uint32_t)*a, *a += (uint64_t)H;
  P->base.s_x2 = (uint32_t)*a, *a += (uint64_t)H;
  P->base.s_q = (uint32_t)*a, *a += (uint64_t)NH * D;
  P->base.s_part = (uint32_t)*a, *a += 2 * 1024;
  P->base.s_logits = (uint32_t)*a, *a += (uint64_t)g->vocab;
  P->base.s_pick = (uint32_t)*a, *a += 1;
  /* attention splits: at most 1024 (head, split) tasks (n_splits in the kernel) */
  P->base.s_ao = (uint32_t)*a, *a += (uint64_t)1024 * D;
  P->base.s_am = (uint32_t)*a, *a += 2 * 1024;
  P->s_conv = (uint32_t)*a;
  for (int i = 0; i < g->n_layers; i++) {
    const wisp_graph_layer *L = &g->layers[i];
    P->conv_words[i] = P->rec_words[i] = 0;
    if (L->mixer == WISP_MIX_SHORTCONV) {
      P->conv_words[i] = (uint64_t)H * (uint64_t)(g->conv_len - 1);
    } else if (L->mixer == WISP_MIX_DELTANET) {
      P->conv_words[i] = (uint64_t)C * g->conv_len;
      P->rec_words[i] = (uint64_t)VH * DK * DV;
    } else {
      continue;
    }
    P->state_off[i] = (uint32_t)*a, *a += P->conv_words[i];
    P->rec_off[i] = (uint32_t)*a, *a += P->rec_words[i];
  }
  P->n_conv = (uint32_t)(*a - P->s_conv);
  *a = (*a + 63) / 64 * 64; /* KV's binding offset: a multiple of 256 bytes (minStorageBufferOffsetAlignment) */
  P->kv0 = (uint32_t)*a;
  for (int i = 0; i < g->n_layers; i++) {
    const wisp_graph_layer *L = &g->layers[i];
    uint32_t *t = table + (size_t)i * LAYER_WORDS;
    t[0] = (uint32_t)L->mixer;
    t[1] = pblob_put_vec(b, L->op_norm);
    pblob_put_mat(b, L->in, seen, &n_seen, t + 2);
    pblob_put_mat(b, L->out, seen, &n_seen, t + 6);
    pblob_put_mat(b, L->gate_up, seen, &n_seen, t + 10);
    pblob_put_mat(b, L->down, seen, &n_seen, t + 14);
    t[18] = pblob_put_vec(b, L->ffn_norm);
    t[21] = t[22] = NONE;
    if (L->attention) {
      t[19] = pblob_put_vec(b, L->q_norm);
      t[20] = pblob_put_vec(b, L->k_norm);
      t[21] = pblob_put_vec(b, L->in_bias);
    } else {
      t[19] = pblob_put_vec(b, L->taps);
      t[20] = pblob_put_vec(b, L->a_log);
      t[21] = pblob_put_vec(b, L->dt_bias);
      t[22] = pblob_put_vec(b, L->gnorm);
      t[24] = P->rec_words[i] ? P->rec_off[i] : NONE;
    }
    t[23] = P->state_off[i];
    t[25] = (uint32_t)persist_in_rows(g, L);
    t[26] = (uint32_t)persist_out_cols(g, L);
    t[29] = L->mixer == WISP_MIX_ATTENTION ? (uint32_t)L->window : 0;
    t[30] = pblob_put_vec(b, L->mixer_post);
    t[31] = pblob_put_vec(b, L->ffn_post);
  }
  *a = kv_offsets(P, g, kv16, table);
  uint32_t rope[4];
  put_tail(P, g, b, seen, &n_seen, rope);
  for (int i = 0; i < g->n_layers; i++) { /* each layer's rope tables: the second rope's where it has rope_local */
    table[(size_t)i * LAYER_WORDS + 27] = rope[g->layers[i].rope_local ? 2 : 0];
    table[(size_t)i * LAYER_WORDS + 28] = rope[g->layers[i].rope_local ? 3 : 1];
  }
  *xs4 = persist_stage_xs4(g);
  P->base.rot_half = (uint32_t)g->rotary_dim / 2;
  P->base.lkh = (uint32_t)g->lin_k_heads, P->base.lvh = (uint32_t)VH;
  P->base.dk = (uint32_t)DK, P->base.dv = (uint32_t)DV;
  P->base.ns = DV > 0 ? (uint32_t)(DV + DN_CW - 1) / DN_CW : 0;
  P->base.n_phases = (uint32_t)g->n_phases;
  for (int i = 0; i < g->n_phases; i++) P->base.ph[i] = phase_word(&g->phases[i]);
}

static wisp_status build(wisp_backend *be, persist *P, const wisp_decode_graph *g) {
  wisp_wgpu_device *d = as_g(be)->d;
  const int kv16 = as_g(be)->kv16;
  const size_t table_words = (size_t)g->n_layers * LAYER_WORDS;
  pblob b = {0};
  pblob_seen *seen = calloc((size_t)g->n_layers * 4 + 2, sizeof *seen);
  uint32_t *table = calloc(table_words, 4);
  if (!seen || !table) {
    free(seen);
    free(table);
    return wisp_fail(WISP_ENOMEM, "out of memory");
  }
  uint64_t a = 0;
  uint32_t xs4 = 0;
  P->kv_cap = session_kv_positions(g, kv16);
  layout(P, g, kv16, &b, table, seen, &a, &xs4);
  free(seen);
  wisp_status st = WISP_OK;
  const uint64_t limit = d->info.max_storage_buffer_binding_size;
  if (b.oom) st = wisp_fail(WISP_ENOMEM, "out of memory building the persistent decode's weights");
  else if (b.n > limit || !arena_fits(P, a, limit) || b.n / 4 > UINT32_MAX / 2) st = WISP_EUNSUPPORTED;
  if (!st) st = pblob_upload(d, &b, &P->blob); /* the table is filled in by now */
  free(table);
  pblob_free(&b);
  if (!st) st = wisp_wgpu_buf_create(d, a * 4, WISP_WGPU_STORAGE, "wisp persist arena", &P->arena);
  if (!st) st = wisp_wgpu_buf_create(d, 256, WISP_WGPU_STORAGE, "wisp persist barrier", &P->ctr);
  if (!st) st = wisp_wgpu_buf_create(d, 8 * (uint64_t)P->n_conv + 16, WISP_WGPU_STORAGE, "wisp persist conv backup",
                                     &P->bak);
  if (st) return st;
  const int NH = g->heads > 0 ? g->heads : 1;
  P->base.n_layers = (uint32_t)g->n_layers;
  P->base.H = (uint32_t)g->hidden, P->base.F = (uint32_t)g->ffn, P->base.heads = (uint32_t)NH;
  P->base.kvh = (uint32_t)g->kv_heads, P->base.D = (uint32_t)g->head_dim, P->base.L = (uint32_t)g->conv_len;
  P->base.vocab = (uint32_t)g->vocab;
  P->base.eps = g->eps;
  P->base.escale = g->embed_scale > 0 ? g->embed_scale : 1.0f;
  P->base.ascale = g->attn_scale > 0 ? g->attn_scale : 1.0f / sqrtf((float)g->head_dim);
  P->base.kv16 = (uint32_t)kv16;
  P->base.spin_max = SPIN_RUN;
  const uint32_t rp = as_g(be)->opts.persist_rp; /* the units-split engine: the products' row split */
  if (rp == 1 || rp == 2 || rp == 4) P->base.rp_force = rp;
  P->base.skip = as_g(be)->opts.persist_skip; /* 0 but in timing probes (tuning persistSkip) */
  /* Barriers a step: one after every phase but the head, one in the token choice. */
  P->barriers_per_step = (uint32_t)g->n_phases;
  P->base.barriers_per_step = P->barriers_per_step;
  /* The grid: tuning persistGrid, else the largest of 128 (132 for the
   * units-split engine), half that, ... whose workgroups the probe finds
   * co-resident (1 on CPU adapters, whose workgroups share a few threads). */
  const uint32_t asked = as_g(be)->persist_wg;
  /* From 128 (not 256): on the H200 (132 SMs) 256 fit (two a SM) but ran
   * 15 % slower than 132 (1,552 vs 1,843 tok/s); one a SM is the aim. The
   * units-split engine (graphs with gated or DeltaNet layers) gains from
   * the last four SMs of an H100 or H200 (132): the 2B gated hybrid 519 -> 528
   * tok/s, 0.8B 882 -> 924; the rows-in-quads engine loses (the seed shape
   * 2,395 -> 2,343; bench/results/h100-phases-20261206/). */
  const uint32_t start = persist_split(be, g) ? 132 : 128;
  uint32_t want = asked ? asked : d->info.adapter_type == WGPUAdapterType_CPU ? 1 : start;
  if (want > 1024) want = 1024;
  P->nwg = 0;
  const uint32_t opt = persist_opt_bits(be, g, xs4);
  if ((opt & 256u) && xs4 < 2 * PERSIST_WG) xs4 = 2 * PERSIST_WG; /* attn_stream's row-group sums meet in xs */
  P->k = make_kernel(be, g, xs4, opt, 0);
  P->xs4 = xs4;
  P->opt = opt;
  if (!P->k || as_g(be)->error) return wisp_fail(WISP_EDEVICE, "webgpu: building persist.wgsl failed");
  for (uint32_t n = want; n >= 1; n /= 2) {
    if (probe_grid(be, P, n)) {
      P->nwg = n;
      break;
    }
    as_g(be)->stats.persistent_gave_up++;
  }
  if (!P->nwg) return WISP_EUNSUPPORTED;
  /* splits per head: the grid's workgroups shared among the heads */
  P->base.nwg = P->nwg;
  P->fail_run = as_g(be)->opts.persist_fail;
  P->runs = 0;
  P->run_pos[0] = P->run_pos[1] = -1;
  /* OPT 32: tasks are (KV head, split), so the workgroups are shared among
   * the KV heads, up to 64 splits (the merges read splits past NSMAX from
   * the arena); otherwise among the heads, up to NSMAX (16) */
  const uint32_t task_heads = opt & 32u ? (uint32_t)g->kv_heads : (uint32_t)NH;
  P->base.nsmax = P->nwg / task_heads > 1 ? P->nwg / task_heads : 1;
  const uint32_t splits = as_g(be)->opts.persist_splits; /* tests: splits with few workgroups */
  if (splits) P->base.nsmax = splits;
  const uint32_t most = opt & 32u ? 64 : 16; /* 16: NSMAX in the kernel's stage_attn */
  if (P->base.nsmax > most) P->base.nsmax = most;
  if (P->base.nsmax * (uint32_t)NH > 1024) P->base.nsmax = 1024 / (uint32_t)NH;
  /* Barrier arrivals so far: the probe's (the counter is zeroed for runs). */
  uint32_t zero[64] = {0};
  if ((st = wisp_wgpu_buf_write(d, P->ctr, 0, zero, sizeof zero))) return st;
  P->bar_base = 0;
  P->end = -1;
  P->out0 = -1;
  if (wisp_env_verbose())
    fprintf(stderr,
            "webgpu: persistent decode: %d phases (works 0x%x, stages 0x%x, %s products, OPT %u), %u workgroups, up to "
            "%u splits a %s head, %u barriers a step, weights %.1f MB, arena %.1f MB\n",
            g->n_phases, persist_works(g), persist_stages(g), persist_split(be, g) ? "units-split" : "quad-row", opt,
            P->nwg, P->base.nsmax, opt & 32u ? "KV" : "query", P->barriers_per_step, (double)P->blob.size / 1e6,
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
  WGPUBuffer s = sb->g.b;
  const uint64_t s0 = word0(sb); /* a slot's part of a shared buffer */
  if (to_arena) wisp_wgpu_copy_words(as_g(be), s, s0, P->arena.b, off, n);
  else if (bak == NONE) wisp_wgpu_copy_words(as_g(be), P->arena.b, off, s, s0, n);
  else wisp_wgpu_copy_words(as_g(be), P->bak.b, bak + (off - P->s_conv), s, s0, n);
}

static void copy_state(wisp_backend *be, persist *P, const wisp_decode_graph *g, int p0, int p1, int to_arena,
                       uint32_t bak) {
  const uint64_t row = (uint64_t)g->kv_heads * g->head_dim / (as_g(be)->kv16 ? 2 : 1);
  WGPUBuffer arena = P->arena.b;
  for (int i = 0; i < g->n_layers; i++) {
    const wisp_graph_layer *L = &g->layers[i];
    if (!L->attention) { /* the conv state (DeltaNet: its ring) and the recurrent state, whole */
      if (P->conv_words[i]) copy_whole(be, P, L->state, P->state_off[i], P->conv_words[i], to_arena, bak);
      if (P->rec_words[i]) copy_whole(be, P, L->rec_state, P->rec_off[i], P->rec_words[i], to_arena, bak);
      continue;
    }
    WGPUBuffer kb = L->state->g.b, vb = L->v_cache->g.b;
    const uint64_t k0 = word0(L->state), v0 = word0(L->v_cache); /* slot parts */
    uint64_t o = (uint64_t)p0 * row, n = (uint64_t)(p1 - p0) * row;
    if (to_arena) {
      wisp_wgpu_copy_words(as_g(be), kb, k0 + o, arena, P->state_off[i] + o, n);
      wisp_wgpu_copy_words(as_g(be), vb, v0 + o, arena, P->v_off[i] + o, n);
    } else {
      wisp_wgpu_copy_words(as_g(be), arena, P->state_off[i] + o, kb, k0 + o, n);
      wisp_wgpu_copy_words(as_g(be), arena, P->v_off[i] + o, vb, v0 + o, n);
    }
  }
}

/* The fewest steps a persistent run takes: tuning persistMinSteps,
 * else 1 when the persistent decode was asked for, else the plan's
 * persistentDecodeMinSteps (the registry variant's minSteps; none when the
 * plan has no persistent decode, e.g. a profile binding its own decode
 * kernels), else 1 for quad-row graphs and DN_MIN_STEPS for units-split
 * ones (a backend configured without a plan). UINT32_MAX: never. */
static uint32_t min_steps(wisp_backend *be, const wisp_decode_graph *g) {
  const uint32_t asked = as_g(be)->opts.persist_min_steps;
  if (asked) return asked;
  if (as_g(be)->persist_asked) return 1;
  const int plan = as_g(be)->set.persist_min_steps;
  if (plan > 0) return (uint32_t)plan;
  if (plan < 0) return UINT32_MAX;
  return persist_split(be, g) ? DN_MIN_STEPS : 1;
}

/* A digest of g's phase list (FNV-1a): a graph with other phases needs
 * another kernel and table. */
static uint32_t phase_sig(const wisp_decode_graph *g) {
  uint32_t h = 2166136261u;
  for (int i = 0; i < g->n_phases; i++) {
    const uint32_t w = phase_word(&g->phases[i]);
    for (int k = 0; k < 4; k++) h = (h ^ ((w >> (8 * k)) & 255u)) * 16777619u;
  }
  return h;
}

static persist **slot(wisp_backend *be) { return (persist **)&as_g(be)->persist; }

/* The session's KV caches grew past the arena's (kv_buf_grow, before this
 * batch): the arena is remade with their capacity, its newer state first
 * flushed to the session's buffers and copied in again by the next run
 * (P->end = -1), and the layer table's KV offsets rewritten. The bind
 * group of the old arena goes with it (wisp_wgpu_scratch_free). 1 when the
 * arena holds `need` positions. */
static int grow_arena(wisp_backend *be, persist *P, const wisp_decode_graph *g, int need) {
  wgpu_backend *gb = as_g(be);
  const int kv16 = gb->kv16;
  const int cap = session_kv_positions(g, kv16);
  if (cap < need) return 0;
  wisp_wgpu_persist_flush(be);
  /* recorded runs read the old table and arena: submitted before the table's queue write */
  wisp_wgpu_keep_error(gb, wisp_wgpu_flush(gb));
  const size_t table_words = (size_t)g->n_layers * LAYER_WORDS;
  uint32_t *table = calloc(table_words, 4);
  if (!table) return 0;
  const int old_cap = P->kv_cap;
  P->kv_cap = cap;
  const uint64_t words = kv_offsets(P, g, kv16, table);
  wisp_wgpu_buf arena = {0};
  int ok = arena_fits(P, words, gb->d->info.max_storage_buffer_binding_size) &&
           wisp_wgpu_buf_create(gb->d, words * 4, WISP_WGPU_STORAGE, "wisp persist arena", &arena) == WISP_OK;
  for (int i = 0; ok && i < g->n_layers; i++)
    if (g->layers[i].attention)
      ok = wisp_wgpu_buf_write(gb->d, P->blob, ((uint64_t)i * LAYER_WORDS + 23) * 4,
                               table + (size_t)i * LAYER_WORDS + 23, 8) == WISP_OK;
  free(table);
  if (!ok) { /* the table may be half rewritten: no more runs of this kernel */
    if (arena.b) wisp_wgpu_buf_free(gb->d, &arena);
    P->kv_cap = old_cap;
    P->unsupported = 1;
    return 0;
  }
  wisp_wgpu_scratch_free(gb, &P->arena);
  P->arena = arena;
  P->end = P->out0 = -1;
  gb->stats.persist_arena_grows++;
  if (wisp_env_verbose())
    fprintf(stderr, "webgpu: persistent decode: KV caches of %d positions (arena %.1f MB)\n", cap,
            (double)P->arena.size / 1e6);
  return 1;
}

wisp_status wisp_wgpu_decode_graph(wisp_backend *be, const wisp_decode_graph *g, wisp_buf *ids, int pos, int k,
                                   const wisp_sampling *sp) {
  if (!sp || wisp_sampling_penalized(sp) || k <= 0 || pos < 0 ||
      pos + k > g->max_pos || pos + k > g->rope_rows || as_g(be)->error)
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
  /* Past persistMaxKeys keys, op by op: there the flash-decoding splits
   * grow with the keys (attnSplitsLong), while the persistent kernel's are
   * bounded by its grid (the arena's state is flushed first, as above). */
  const uint32_t max_keys = as_g(be)->opts.persist_max_keys;
  if (max_keys && (uint32_t)(pos + k) > max_keys) return WISP_EUNSUPPORTED;
  persist *P = *slot(be);
  if (P && (P->embed != g->embed || P->n_layers != g->n_layers || P->max_pos != g->max_pos ||
            P->phase_sig != phase_sig(g))) {
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
    P->phase_sig = phase_sig(g);
    P->n_layers = g->n_layers;
    P->max_pos = g->max_pos;
    if (persist_split(be, g) && !as_g(be)->persist_asked &&
        as_g(be)->d->info.adapter_type == WGPUAdapterType_CPU) {
      /* lavapipe compiles the units-split kernel for ~35 s and runs it on one
       * workgroup: no gain there, so only when asked (tests) */
      why = "a CPU adapter (gated attention or DeltaNet: only with tuning persist=1)";
      if (wisp_env_verbose()) fprintf(stderr, "webgpu: no persistent decode: %s\n", why);
      P->unsupported = 1;
    } else if (!persist_graph_fits(be, g, &why)) {
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
  const int sampled = sp->temperature > 0;
  /* Sampled runs take this kernel only when tuning persist=1 asks. H100,
   * one call (bench/results/h100-sampled-20261207/): `wisp bench --temp 0.8`
   * gained on the small hybrid model (1,018 -> 1,233 tok/s) and lost on the
   * 2B one with a 248k vocabulary (316 -> 300), and `wisp run` (stop tokens:
   * the state snapshot before each batch sends the arena's state out and
   * back) lost everywhere, the 2B 221 -> 137 (measured before snapshots
   * stopped voiding the arena, wisp_wgpu_persist_mirrors; not rerun). On
   * a CPU adapter lavapipe would also compile the draw's variant of the
   * whole kernel for about a minute, for nothing. */
  if (sampled && !as_g(be)->persist_asked) return WISP_EUNSUPPORTED;
  if (sampled && !P->k_draw) {
    P->k_draw = make_kernel(be, g, P->xs4, P->opt, 1);
    if (!P->k_draw || as_g(be)->error) return WISP_EUNSUPPORTED;
  }

  if (!P->gcopy && !(P->gcopy = malloc(sizeof *P->gcopy))) return WISP_EUNSUPPORTED;
  /* The arena takes the session's KV capacity as soon as the caches grew:
   * they grow for a whole request before its first step, so this is that
   * request's first batch. Left smaller, the arena would be remade by the
   * step that passes it, mid-request (a flush, a new arena, the state
   * copied in again: 1-3 ms of the seed shape's decode on the H200). */
  if (session_kv_positions(g, as_g(be)->kv16) > P->kv_cap && !grow_arena(be, P, g, pos + k))
    return WISP_EUNSUPPORTED;
  if (pos + k > P->kv_cap) return WISP_EUNSUPPORTED; /* the caches themselves hold fewer positions */
  uint64_t epoch = as_g(be)->state_epoch;
  /* the arena holds the state of the buffers the last batch named: another
   * sequence's (a scheduler slot run ahead after another) starts afresh */
  int same_bufs = P->end > 0; /* > 0: gcopy names the last batch's buffers */
  for (int i = 0; same_bufs && i < g->n_layers; i++)
    same_bufs = P->gcopy->layers[i].state == g->layers[i].state && P->gcopy->layers[i].v_cache == g->layers[i].v_cache &&
                P->gcopy->layers[i].rec_state == g->layers[i].rec_state;
  if (P->end != pos || P->epoch != epoch || !same_bufs) {
    wisp_wgpu_persist_flush(be);
    copy_state(be, P, g, 0, pos, 1, NONE);
    P->out0 = pos;
    as_g(be)->stats.persistent_copy_ins++;
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
  /* A sampled run: the head keeps its logits and workgroup 0 draws each
   * token (persist.wgsl draw_step), one grid barrier a step more. */
  if (sampled) {
    pp.temperature = sp->temperature;
    pp.top_k = sp->top_k > 0 ? (uint32_t)sp->top_k : 0;
    pp.top_p = sp->top_p;
    pp.min_p = sp->min_p;
    pp.seed = sp->seed;
  }
  /* The plan's flashBlocks (the backend's split cap) bounds the attention
   * splits here as in the op-by-op decode; the stats count the key blocks
   * as g_attention does, per attention layer and step (persist.wgsl's
   * n_splits: one block per LK-th of the grid's threads in keys). */
  const uint32_t kc = PERSIST_WG / 8;
  /* The split rule at the run's last position (short cap, or the long
   * part's one split per few tiles) bounds the splits of every step of the
   * run: the kernel's n_splits grows one a block up to nsmax. */
  uint32_t tps;
  const uint32_t cap = wisp_wgpu_key_splits(((uint32_t)(pos + k - 1) + kc) / kc, wisp_wgpu_split_rule(as_g(be)), &tps);
  if (cap >= 1 && pp.nsmax > cap) pp.nsmax = cap;
  for (int l = 0; l < g->n_layers; l++) {
    const int win = g->layers[l].attention ? g->layers[l].window : -1; /* -1: no attention */
    for (int s = 0; win >= 0 && s < k; s++) {
      const uint32_t keys = (uint32_t)(win && pos + s + 1 > win ? win : pos + s + 1);
      uint32_t ns = (keys + kc - 1) / kc;
      if (ns > pp.nsmax) ns = pp.nsmax;
      as_g(be)->stats.attn_splits += ns ? ns : 1;
    }
  }
  /* The conv states as this run finds them, for decode_graph_reset should
   * it fail: a copy ahead of the run (the kernel's own workgroups cannot
   * be trusted to make it before the others change them when a barrier
   * gives up). */
  const uint32_t r = P->runs % 2;
  wisp_wgpu_copy_words(as_g(be), P->arena.b, P->s_conv, P->bak.b, r * P->n_conv, P->n_conv);
  P->run_pos[r] = pos;
  P->runs++;
  wisp_wgpu_binding b[6] = {{P->blob.b, 0, 0}, {P->blob.b, 0, 0}, {0}, {P->ctr.b, 0, 0}, {ids->g.b, 0, 0}, {0}};
  arena_bindings(P, &b[2], &b[5]);
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
    if (wisp_wgpu_buf_write(as_g(be)->d, P->ctr, 4, &flag, sizeof flag) != WISP_OK) return WISP_EDEVICE;
  }
  wisp_wgpu_record_xyz(as_g(be), sampled ? P->k_draw : P->k, b, 6, &pp, sizeof pp, P->nwg, 1, 1);
  if (fail) wisp_wgpu_copy_words(as_g(be), P->blob.b, 0, P->arena.b, P->s_conv, P->n_conv);
  P->bar_base += P->nwg * ((uint32_t)k * (P->barriers_per_step + (uint32_t)sampled) + 1);
  P->end = pos + k; /* copied back lazily: wisp_wgpu_persist_flush */
  P->epoch = as_g(be)->state_epoch;
  as_g(be)->stats.persistent_steps += (uint64_t)k;
  return as_g(be)->error ? WISP_EDEVICE : WISP_OK;
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
  as_g(be)->stats.persistent_gave_up++;
  copy_state(be, P, P->gcopy, 0, pos, 0, (uint32_t)r * P->n_conv);
  fprintf(stderr, "wisp: webgpu: the persistent decode's grid barrier gave up on the batch at position %d; decoding "
          "it and the rest of this session op by op\n", pos);
  return as_g(be)->error ? WISP_EDEVICE : WISP_OK;
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

int wisp_wgpu_persist_mirrors(wisp_backend *be, const wisp_buf *b) {
  persist *P = *slot(be);
  if (!P || !P->gcopy || P->end < 0) return 0;
  for (int i = 0; i < P->gcopy->n_layers; i++) {
    const wisp_graph_layer *L = &P->gcopy->layers[i];
    const wisp_buf *held[3] = {L->state, L->v_cache, L->rec_state};
    for (int j = 0; j < 3; j++)
      if (held[j] && held[j]->g.b == b->g.b) return 1; /* by device buffer: slots share one */
  }
  return 0;
}

void wisp_wgpu_persist_free(wisp_backend *be) {
  persist *P = *slot(be);
  if (!P) return;
  persist_release(be, P);
  free(P->gcopy);
  free(P);
  *slot(be) = NULL;
}
