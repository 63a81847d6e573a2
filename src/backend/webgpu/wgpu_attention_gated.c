/* Gated attention of the WebGPU backend (backend.h attention_gated,
 * attention_gated_rows): the queries and their output gate interleaved per
 * head, partial rotary, one token by attn_gated_decode.wgsl (or the seed
 * profile's head-256 kernel), several by attn_gated_rope + attn_flash, the
 * gate by attn_gate.wgsl or fused into the merge of the splits
 * (attn_gated_combine, itself computed by the Q4_K product reading the
 * output where the graph fuses them and it fits). Semantics: backend.h; reference: the CPU backend. */
#include "backend/webgpu/wgpu_attention_gated.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/webgpu/wgpu_attention_long.h"
#include "backend/webgpu/wgpu_attention_tiled.h"
#include "backend/webgpu/wgpu_core.h"
#include "util/err.h"

#define QATTN_WG 64
/* attn_gated_decode.wgsl: threads (one per head dimension) and keys per tile */
#define QDEC_WG 256
#define QDEC_KT 32

typedef struct {
  wisp_wgpu_buf qbuf; /* normed + rotated queries of the current attention */
  wisp_wgpu_buf part; /* flash-decoding partials */
} attn_gated_state;

static attn_gated_state *state_of(wisp_backend *be) {
  wgpu_backend *g = as_g(be);
  if (!g->attn_gated) {
    g->attn_gated = calloc(1, sizeof(attn_gated_state));
    if (!g->attn_gated) wisp_wgpu_op_fail(g, WISP_ENOMEM, "out of memory");
  }
  return g->attn_gated;
}

void wisp_wgpu_attention_gated_free(wisp_backend *be) {
  wgpu_backend *g = as_g(be);
  attn_gated_state *q = g->attn_gated;
  if (!q) return;
  wisp_wgpu_scratch_free(as_g(be), &q->qbuf);
  wisp_wgpu_scratch_free(as_g(be), &q->part);
  free(q);
  g->attn_gated = NULL;
}

/* The merge of a one-token gated attention's splits
 * (attn_gated_combine.wgsl, a thread per dimension; wide: the splits shared
 * out over the workgroup, WIDE = 1, for attn_decode_long's many) on its
 * own, when no Q4_K product took it (wisp_wgpu_tail kind 2). */
static void record_combine(wisp_backend *be, const wisp_wgpu_tail *f, int wide) {
  wisp_wgpu_const cc[2] = {{"WG", QDEC_WG}, {"WIDE", wide}};
  wisp_wgpu_kernel *kc2 = wisp_wgpu_pipeline(as_g(be), "attn_gated_combine", cc, 2);
  struct {
    uint32_t H, D, splits, pad;
  } pc = {(uint32_t)f->heads, (uint32_t)f->hd, (uint32_t)f->splits, 0};
  wisp_wgpu_binding bc[3] = {whole(f->aux), whole(f->src), whole(f->out->g.b)};
  wisp_wgpu_record_xyz(as_g(be), kc2, bc, 3, &pc, sizeof pc, (uint32_t)f->heads, 1, 1);
}

static void emit_combine(wisp_backend *be, const wisp_wgpu_tail *f) { record_combine(be, f, 0); }

#define HEAD256 "attention_decode_online_head256_f16kv_output_gate"

/* The seed profile's decode attention (registry variant attention_gated/wgsl_decode_head256_gate
 * or the profile key's file); used for one token when head_dim is 256, else the default path. */
static int is_head256(const char *v) { return !strcmp(v, "wgsl_decode_head256_gate") || !strcmp(v, "profile:" HEAD256); }

/* out (n rows of H * D) *= sigmoid(gate), the gate being the second half
 * of head h's (q | gate) slice of each qkv row (attn_gate.wgsl);
 * elementwise, so one dispatch for any number of rows. */
static void record_attn_gate(wisp_backend *be, WGPUBuffer qkv, WGPUBuffer out, int n, int H, int KVH, int D) {
  wisp_wgpu_const cg[1] = {{"WG", 256}};
  wisp_wgpu_kernel *kg = wisp_wgpu_pipeline(as_g(be), "attn_gate", cg, 1);
  const uint64_t count = (uint64_t)n * H * D;
  struct {
    uint32_t count, H, D, row;
  } pg = {(uint32_t)count, (uint32_t)H, (uint32_t)D, (uint32_t)((2 * H + 2 * KVH) * D)};
  wisp_wgpu_binding bg[2] = {whole(qkv), whole(out)};
  uint32_t gx, gy;
  wisp_wgpu_grid(as_g(be)->d, cdiv(count, 256), &gx, &gy);
  wisp_wgpu_record_xyz(as_g(be), kg, bg, 2, &pg, sizeof pg, gx, gy, 1);
}

void wisp_wgpu_attention_gated_rec(wisp_backend *be, const wisp_gated_attention_args *a, wisp_wgpu_tail *tail) {
  attn_gated_state *q = state_of(be);
  if (!q) return;
  const int D = a->head_dim, H = a->heads, KVH = a->kv_heads, R = a->rotary_dim;
  if (D <= 0 || D > 4 * QATTN_WG || R < 2 || R % 2 || R > D || KVH <= 0 || H % KVH || a->n <= 0) {
    wisp_wgpu_op_fail(as_g(be), WISP_EUNSUPPORTED, "attention_gated with %d heads, %d kv heads, head dim %d, rotary dim %d", H, KVH, D, R);
    return;
  }
  /* KV16: a cache word holds two halves; rows are packed by whole words
   * (the fused decode kernel by vec4<u32>, 8 halves). */
  const int kv16 = as_g(be)->kv16;
  if (kv16 && D % 8) {
    wisp_wgpu_op_fail(as_g(be), WISP_EUNSUPPORTED, "attention_gated with head dim %d and f16 KV (needs a multiple of 8)", D);
    return;
  }
  WGPUBuffer qn = wisp_wgpu_vec_buffer(as_g(be), a->q_norm), kn = qn ? wisp_wgpu_vec_buffer(as_g(be), a->k_norm) : NULL;
  WGPUBuffer cs = kn ? wisp_wgpu_vec_buffer(as_g(be), a->rope_cos) : NULL, sn = cs ? wisp_wgpu_vec_buffer(as_g(be), a->rope_sin) : NULL;
  if (!sn) return;
  wisp_wgpu_state_op(be); /* the KV caches as the persistent decode left them, and its copies stale */
  if (!wisp_wgpu_scratch(as_g(be), &q->qbuf, (uint64_t)a->n * H * D * 4, (uint64_t)64 * H * D * 4, "wisp gated queries"))
    return;
  const uint32_t max_splits = wisp_wgpu_split_rule(as_g(be)); /* the split rule */
  /* The decode arrangement the session switches ask for (docs/webgpu.md):
   * attn_gated_decode.wgsl, which needs subgroups (and 10 storage buffers). */
  const wisp_backend_settings *set = &as_g(be)->set;
  const int dec = a->n == 1 && as_g(be)->fuse && D % 4 == 0 && D <= QDEC_WG && as_g(be)->sg &&
                  as_g(be)->d->info.max_storage_buffers_per_shader_stage >= 10;
  const uint32_t tile = dec ? QDEC_KT : QATTN_WG; /* keys per tile of the kernel that runs */
  const uint32_t ntile = (uint32_t)(a->pos0 + a->n - 1) / tile + 1;
  uint32_t tps = 0xFFFFFFFFu;
  const uint32_t splits = a->n == 1 ? wisp_wgpu_key_splits(ntile, max_splits, &tps) : 1;
  if (splits > 1 && !wisp_wgpu_scratch(as_g(be), &q->part, (uint64_t)H * splits * (D + 2) * 4, (uint64_t)H * wisp_wgpu_split_most(max_splits) * (D + 2) * 4, "wisp gated attention splits"))
    return;
  WGPUBuffer qkv = a->qkv->g.b;
  const wisp_wgpu_binding kc = bind_of(a->k_cache), vc = bind_of(a->v_cache);
  WGPUBuffer out = a->out->g.b;
  wisp_wgpu_const c[3] = {{"WG", QATTN_WG}, {"KV16", kv16}, {"PAIRS", a->rope_pairs}};
  wisp_wgpu_kernel *kr = wisp_wgpu_pipeline(as_g(be), "attn_gated_rope", c, 3);
  const int gate_in = dec && set->attn_output_gate;  /* gate inside the attention kernel */
  const int rope_in = dec && set->attn_fused_rope;   /* split + norm + rope (+ KV append) fused */
  const int h256 = a->n == 1 && D == 256 && a->choice && is_head256(a->choice[WISP_PHASE_DECODE].variant) &&
                   (!dec || set->attn_output_gate);
  struct {
    uint32_t n, pos0, H, KVH, D, R;
    float eps;
    uint32_t stage;
  } pr = {(uint32_t)a->n, (uint32_t)a->pos0, (uint32_t)H, (uint32_t)KVH, (uint32_t)D, (uint32_t)R, a->eps, 0};
  wisp_wgpu_binding br[8] = {whole(qkv), whole(qn), whole(kn), whole(cs), whole(sn), whole(q->qbuf.b), kc,
                             vc};
  /* Many keys: the whole pre-pass (q out, k and v into the caches), then a
   * workgroup per KV head and split (wgpu_attention_long.c), the gated
   * merge after it. */
  if (a->n == 1 && !h256 && wisp_wgpu_attn_long_wanted(as_g(be), a->pos0, 0, H, KVH, D)) {
    wisp_wgpu_record_xyz(as_g(be), kr, br, 8, &pr, sizeof pr, (uint32_t)(H + 2 * KVH), 1, 1);
    const uint32_t ls = wisp_wgpu_attn_long(as_g(be), q->qbuf.b, kc, vc, &q->part, a->pos0, 0, H, KVH, D,
                                            1.0f / sqrtf((float)D));
    if (!ls) return;
    const wisp_wgpu_tail t = {2, q->part.b, qkv, NULL, a->out, H, D, 0, (int)ls, 0, emit_combine};
    if (tail && ls <= as_g(be)->max_splits) *tail = t;
    else record_combine(be, &t, 1);
    return;
  }
  if (!(rope_in && !h256)) {
    if (dec && !set->attn_fused_rope) { /* unfused: split + norm, then the rotation */
      pr.stage = 1;
      wisp_wgpu_record_xyz(as_g(be), kr, br, 8, &pr, sizeof pr, (uint32_t)(H + 2 * KVH), 1, 1);
      pr.stage = 2;
    }
    wisp_wgpu_record_xyz(as_g(be), kr, br, 8, &pr, sizeof pr, (uint32_t)(H + 2 * KVH), (uint32_t)a->n, 1);
  }
  if (h256) {
    /* the seed profile's decode kernel: online softmax + output gate in one dispatch */
    wisp_wgpu_const c256[2] = {{"USE_DIRECT_KV_LAYOUT", set->attn_direct_kv ? 1 : 0}, {"KV16", kv16}};
    wisp_wgpu_kernel *kd = wisp_wgpu_pipeline(as_g(be), HEAD256, c256, 2);
    struct {
      uint32_t pos, H, KVH, row;
      float scale;
      uint32_t kv_pos, kv_head, pad;
    } pd = {(uint32_t)a->pos0, (uint32_t)H, (uint32_t)KVH, (uint32_t)((2 * H + 2 * KVH) * D), 1.0f / 16.0f,
            (uint32_t)(KVH * D), (uint32_t)D, 0};
    wisp_wgpu_binding bd[5] = {whole(q->qbuf.b), kc, vc, whole(qkv), whole(out)};
    wisp_wgpu_record_xyz(as_g(be), kd, bd, 5, &pd, sizeof pd, (uint32_t)H, 1, 1);
    return;
  }
  if (dec) {
    /* the cache's row strides: DIRECT_KV 0 addresses it through them */
    wisp_wgpu_const cd[6] = {{"WG", QDEC_WG},
                             {"FUSE_ROPE", rope_in},
                             {"GATE", gate_in},
                             {"DIRECT_KV", set->attn_direct_kv ? 1 : 0},
                             {"KV16", kv16},
                             {"PAIRS", a->rope_pairs}};
    wisp_wgpu_kernel *kd = wisp_wgpu_pipeline(as_g(be), "attn_gated_decode", cd, 6);
    struct {
      uint32_t pos, H, KVH, D, R;
      float eps, scale;
      uint32_t splits, tps, kv_pos, kv_head, pad;
    } pd = {(uint32_t)a->pos0, (uint32_t)H, (uint32_t)KVH, (uint32_t)D, (uint32_t)R, a->eps, 1.0f / sqrtf((float)D),
            splits, tps, (uint32_t)(KVH * D), (uint32_t)D, 0};
    wisp_wgpu_binding bd[10] = {whole(qkv), whole(qn), whole(kn), whole(cs), whole(sn), whole(q->qbuf.b), kc,
                                vc, whole(out), whole(splits > 1 ? q->part.b : as_g(be)->dummy_rw.b)};
    wisp_wgpu_record_xyz(as_g(be), kd, bd, 10, &pd, sizeof pd, (uint32_t)H, 1, splits);
    if (splits > 1 && gate_in) {
      /* the gated merge: left to the product reading out where the graph
       * fuses them (its every workgroup merges the partials while staging:
       * up to the short cap); the long rule's many splits are merged once here */
      const wisp_wgpu_tail t = {2, q->part.b, qkv, NULL, a->out, H, D, 0, (int)splits, 0, emit_combine};
      if (tail && splits <= as_g(be)->max_splits) *tail = t;
      else emit_combine(be, &t);
      return;
    }
  } else {
    wisp_wgpu_kernel *kf = wisp_wgpu_pipeline(as_g(be), "attn_flash", c, 2);
    struct {
      uint32_t n, pos0, H, KVH, D;
      float scale;
      uint32_t splits, tps, win, pad[3]; /* win 0: no sliding window */
    } pf = {(uint32_t)a->n, (uint32_t)a->pos0, (uint32_t)H, (uint32_t)KVH, (uint32_t)D, 1.0f / sqrtf((float)D), splits,
            tps, 0, {0, 0, 0}};
    wisp_wgpu_binding bf[5] = {whole(q->qbuf.b), kc, vc, whole(out),
                               whole(splits > 1 ? q->part.b : as_g(be)->dummy_rw.b)};
    if (splits > 1 || !wisp_wgpu_attn_tiled(as_g(be), q->qbuf.b, kc, vc, out, a->n, a->pos0, H, KVH, D))
      wisp_wgpu_record_xyz(as_g(be), kf, bf, 5, &pf, sizeof pf, (uint32_t)H, (uint32_t)a->n, splits);
  }
  if (splits > 1) {
    wisp_wgpu_kernel *kc2 = wisp_wgpu_pipeline(as_g(be), "attn_combine", c, 1);
    struct {
      uint32_t n, H, D, splits;
    } pc = {1, (uint32_t)H, (uint32_t)D, splits};
    wisp_wgpu_binding bc[2] = {whole(q->part.b), whole(out)};
    wisp_wgpu_record_xyz(as_g(be), kc2, bc, 2, &pc, sizeof pc, (uint32_t)H, 1, 1);
  }
  if (gate_in && splits == 1) return;
  record_attn_gate(be, qkv, out, a->n, H, KVH, D);
}

/* The split of a one-token gated decode attention at position pos
 * (wisp_wgpu_attention_gated's, QDEC_KT-key tiles). */
static uint32_t gated_splits_at(uint32_t max_splits, int pos, uint32_t *tps) {
  return wisp_wgpu_key_splits((uint32_t)pos / QDEC_KT + 1, max_splits, tps);
}

/* backend.h attention_gated_rows: every row's gated attention as the
 * one-token decode arrangement with its fused split + norm + rope + KV
 * append computes it (attn_gated_decode.wgsl through
 * attn_gated_decode_rows.wgsl; splits merged by attn_gated_combine_rows /
 * attn_combine_rows, the gate by attn_gate over all rows when it is not
 * inside the attention). 0 where the one-token op would take another
 * arrangement (no subgroups or fusion, the unfused rope switch, the seed
 * profile's head-256 kernel). */
static int g_attention_gated_rows(wisp_backend *be, const wisp_gated_attention_args *a, const wisp_mixer_rows *rows) {
  const int D = a->head_dim, H = a->heads, KVH = a->kv_heads, R = a->rotary_dim;
  const wisp_backend_settings *set = &as_g(be)->set;
  const int kv16 = as_g(be)->kv16;
  const int dec = as_g(be)->fuse && D % 4 == 0 && D <= QDEC_WG && as_g(be)->sg &&
                  as_g(be)->d->info.max_storage_buffers_per_shader_stage >= 10;
  const int h256 = D == 256 && a->choice && is_head256(a->choice[WISP_PHASE_DECODE].variant) && set->attn_output_gate;
  if (!dec || !set->attn_fused_rope || h256 || rows->n < 1 || rows->n > WISP_WGPU_MIX_ROWS || D <= 0 || R < 2 || R % 2 ||
      R > D || KVH <= 0 || H % KVH || (kv16 && D % 8))
    return 0;
  wisp_wgpu_state_op(be);
  attn_gated_state *q = state_of(be);
  if (!q) return 1;
  WGPUBuffer qn = wisp_wgpu_vec_buffer(as_g(be), a->q_norm), kn = qn ? wisp_wgpu_vec_buffer(as_g(be), a->k_norm) : NULL;
  WGPUBuffer cs = kn ? wisp_wgpu_vec_buffer(as_g(be), a->rope_cos) : NULL, sn = cs ? wisp_wgpu_vec_buffer(as_g(be), a->rope_sin) : NULL;
  if (!sn) return 1; /* error kept */
  const uint32_t max_splits = wisp_wgpu_split_rule(as_g(be)); /* the split rule */
  uint32_t most = 1, tps;
  for (int r = 0; r < rows->n; r++) {
    const uint32_t sp = gated_splits_at(max_splits, rows->pos[r], &tps);
    if (sp > most) most = sp;
  }
  const uint64_t block = (uint64_t)H * wisp_wgpu_split_most(max_splits) * (D + 2) * 4; /* a row's partials */
  if (most > 1 && !wisp_wgpu_scratch(as_g(be), &q->part, block * (uint64_t)rows->n, block * (uint64_t)rows->n, "wisp gated attention splits"))
    return 1;
  const int gate_in = set->attn_output_gate;
  WGPUBuffer qkv = a->qkv->g.b, out = a->out->g.b;
  wisp_wgpu_const cd[6] = {{"WG", QDEC_WG}, {"FUSE_ROPE", 1}, {"GATE", gate_in},
                           {"DIRECT_KV", set->attn_direct_kv ? 1 : 0}, {"KV16", kv16}, {"PAIRS", a->rope_pairs}};
  wisp_wgpu_kernel *kd = wisp_wgpu_pipeline(as_g(be), "attn_gated_decode_rows", cd, 6);
  wisp_wgpu_const cc[1] = {{"WG", gate_in ? QDEC_WG : QATTN_WG}};
  wisp_wgpu_kernel *kc = most > 1 ? wisp_wgpu_pipeline(as_g(be), gate_in ? "attn_gated_combine_rows" : "attn_combine_rows", cc, 1)
                                  : NULL;
  struct {
    uint32_t H, KVH, D, R;
    float eps, scale;
    uint32_t kv_pos, kv_head, count, max_splits, pad0, pad1;
    uint32_t rows[WISP_WGPU_MIX_ROWS][4];
  } p;
  memset(&p, 0, sizeof p);
  unsigned char done[WISP_WGPU_MIX_ROWS] = {0};
  WGPUBuffer kb, vb;
  while ((p.count = wisp_wgpu_rows_group(rows, done, p.rows, &kb, &vb)) > 0) {
    p.H = (uint32_t)H;
    p.KVH = (uint32_t)KVH;
    p.D = (uint32_t)D;
    p.R = (uint32_t)R;
    p.eps = a->eps;
    p.scale = 1.0f / sqrtf((float)D);
    p.kv_pos = (uint32_t)(KVH * D);
    p.kv_head = (uint32_t)D;
    p.max_splits = max_splits;
    uint32_t z = 1;
    for (uint32_t i = 0; i < p.count; i++) {
      const uint32_t sp = gated_splits_at(max_splits, (int)p.rows[i][3], &tps);
      if (sp > z) z = sp;
    }
    wisp_wgpu_binding bd[10] = {whole(qkv),
                                whole(qn),
                                whole(kn),
                                whole(cs),
                                whole(sn),
                                whole(as_g(be)->dummy.b),
                                whole(kb),
                                whole(vb),
                                whole(out),
                                whole(most > 1 ? q->part.b : as_g(be)->dummy_rw.b)};
    wisp_wgpu_record_xyz(as_g(be), kd, bd, 10, &p, sizeof p, (uint32_t)H, p.count, z);
    if (z == 1) continue;
    if (gate_in) { /* attn_gated_combine_rows: Params as attn_gated_decode_rows' head, then the table */
      struct {
        uint32_t H, KVH, D, count, max_splits, pad[3];
        uint32_t rows[WISP_WGPU_MIX_ROWS][4];
      } pc;
      memset(&pc, 0, sizeof pc);
      pc.H = (uint32_t)H;
      pc.KVH = (uint32_t)KVH;
      pc.D = (uint32_t)D;
      pc.count = p.count;
      pc.max_splits = max_splits;
      memcpy(pc.rows, p.rows, sizeof pc.rows);
      wisp_wgpu_binding bc[3] = {whole(q->part.b), whole(qkv), whole(out)};
      wisp_wgpu_record_xyz(as_g(be), kc, bc, 3, &pc, sizeof pc, (uint32_t)H, p.count, 1);
    } else { /* attn_combine_rows */
      struct {
        uint32_t H, D, count, max_splits;
        uint32_t rows[WISP_WGPU_MIX_ROWS][4];
      } pc;
      memset(&pc, 0, sizeof pc);
      pc.H = (uint32_t)H;
      pc.D = (uint32_t)D;
      pc.count = p.count;
      pc.max_splits = max_splits;
      memcpy(pc.rows, p.rows, sizeof pc.rows);
      wisp_wgpu_binding bc[2] = {whole(q->part.b), whole(out)};
      wisp_wgpu_record_xyz(as_g(be), kc, bc, 2, &pc, sizeof pc, (uint32_t)H, p.count, 1);
    }
  }
  if (gate_in) return 1;
  record_attn_gate(be, qkv, out, rows->n, H, KVH, D); /* elementwise: every row at once */
  return 1;
}

static void g_attention_gated(wisp_backend *be, const wisp_gated_attention_args *a) {
  wisp_wgpu_attention_gated_rec(be, a, NULL);
}

void wisp_wgpu_attention_gated_install(wisp_backend *vt) {
  vt->attention_gated = g_attention_gated;
  vt->attention_gated_rows = g_attention_gated_rows;
}
