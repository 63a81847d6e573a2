/* Gated-layer ops of the WebGPU backend (kept apart from wgpu_backend.c):
 * gated attention (attn_gated_rope + attn_flash [+ attn_combine] +
 * attn_gate), Gated DeltaNet (dn_conv + dn_recur) and Q4_K products
 * (q4k_matvec / q4k_matvec_nosg, or the profile kernel
 * fused_matmul_q4_metal_simd16). Semantics: backend.h, reference: the CPU
 * backend. Recording goes through wgpu_internal.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/webgpu/wgpu_backend.h"
#include "backend/webgpu/wgpu_internal.h"
#include "util/err.h"

#define QATTN_WG 64
/* attn_gated_decode.wgsl: threads (one per head dimension) and keys per tile */
#define QDEC_WG 256
/* q4k_matvec.wgsl's GN for a fused input op (floats of per-head values) */
#define QIN_ROOM 1024
#define QDEC_KT 32

/* A one-token Q4_K product held back for a consumer that fuses it (the
 * session switches): swiglu (fusedFfnQ4K), gated_deltanet (the in_proj row
 * ranges), a greedy sample_id (the head's argmax partials). nx != NULL: a
 * held-back rmsnorm of nx (weights nw) is fused in, its output nxo == x. */
typedef struct {
  int active;
  const wisp_matrix *W;
  const wisp_buf *nx, *nxo, *x;
  WGPUBuffer nw;
  float eps;
  wisp_buf *y;
} q4k_pend;

/* An op whose one-token output a following Q4_K product may compute while
 * staging its input (q4k_matvec.wgsl PRE) instead of a dispatch of its
 * own: 1 = dn_norm (DeltaNet's gated RMSNorm over split heads), 2 =
 * attn_gated_combine. Held back by the op; recorded on its own by
 * wisp_wgpu_gated_emit when no product takes it. */
typedef struct {
  int kind;
  WGPUBuffer aux, src, nw; /* 1: raw o, proj (z), norm weights; 2: the splits, qkv (gates) */
  const wisp_buf *out;     /* what the op writes (the product's nominal input) */
  int heads, hd, zoff, splits;
  float eps;
} qin_pend;

typedef struct {
  wisp_wgpu_buf cbuf; /* conv outputs of the current gated_deltanet call */
  wisp_wgpu_buf qbuf; /* normed + rotated queries of the current attention */
  wisp_wgpu_buf part; /* flash-decoding partials */
  wisp_wgpu_buf dum[3]; /* placeholders for q4k_fused's unused writable bindings (must not alias) */
  q4k_pend pend;
  wisp_wgpu_buf dnraw; /* a split DeltaNet decode step's output before its gated norm */
  qin_pend fin;        /* held back (kind != 0) */
  qin_pend taken;      /* taken by the next Q4_K product (wisp_wgpu_gated_take_input) */
} gated_state;

static gated_state *qs_of(wisp_backend *be) {
  void **slot = wisp_wgpu_int_gated_slot(be);
  if (!*slot) {
    *slot = calloc(1, sizeof(gated_state));
    if (!*slot) wisp_wgpu_int_fail(be, WISP_ENOMEM, "out of memory");
  }
  return *slot;
}

void wisp_wgpu_gated_free(wisp_backend *be) {
  void **slot = wisp_wgpu_int_gated_slot(be);
  gated_state *q = *slot;
  if (!q) return;
  wisp_wgpu_int_scratch_free(be, &q->cbuf);
  wisp_wgpu_int_scratch_free(be, &q->qbuf);
  wisp_wgpu_int_scratch_free(be, &q->part);
  wisp_wgpu_int_scratch_free(be, &q->dnraw);
  for (int i = 0; i < 3; i++) wisp_wgpu_int_scratch_free(be, &q->dum[i]);
  free(q);
  *slot = NULL;
}

static uint32_t cdiv(uint64_t a, uint64_t b) { return (uint32_t)((a + b - 1) / b); }

static wisp_wgpu_binding whole(WGPUBuffer b) { return (wisp_wgpu_binding){b, 0, 0}; }

/* ---- gated attention ---- */

#define HEAD256 "attention_decode_online_head256_f16kv_output_gate"

/* The seed profile's decode attention (registry variant attention_gated/wgsl_decode_head256_gate
 * or the profile key's file); used for one token when head_dim is 256, else the default path. */
static int is_head256(const char *v) { return !strcmp(v, "wgsl_decode_head256_gate") || !strcmp(v, "profile:" HEAD256); }

/* out (n rows of H * D) *= sigmoid(gate), the gate being the second half
 * of head h's (q | gate) slice of each qkv row (attn_gate.wgsl);
 * elementwise, so one dispatch for any number of rows. */
static void record_attn_gate(wisp_backend *be, WGPUBuffer qkv, WGPUBuffer out, int n, int H, int KVH, int D) {
  wisp_wgpu_const cg[1] = {{"WG", 256}};
  wisp_wgpu_kernel *kg = wisp_wgpu_int_kernel(be, "attn_gate", cg, 1);
  const uint64_t count = (uint64_t)n * H * D;
  struct {
    uint32_t count, H, D, row;
  } pg = {(uint32_t)count, (uint32_t)H, (uint32_t)D, (uint32_t)((2 * H + 2 * KVH) * D)};
  wisp_wgpu_binding bg[2] = {whole(qkv), whole(out)};
  uint32_t gx, gy;
  wisp_wgpu_grid(wisp_wgpu_int_device(be), cdiv(count, 256), &gx, &gy);
  wisp_wgpu_int_record(be, kg, bg, 2, &pg, sizeof pg, gx, gy, 1);
}

void wisp_wgpu_attention_gated(wisp_backend *be, const wisp_gated_attention_args *a) {
  wisp_wgpu_int_emit_pending(be);
  gated_state *q = qs_of(be);
  if (!q) return;
  const int D = a->head_dim, H = a->heads, KVH = a->kv_heads, R = a->rotary_dim;
  if (D <= 0 || D > 4 * QATTN_WG || R < 2 || R % 2 || R > D || KVH <= 0 || H % KVH || a->n <= 0) {
    wisp_wgpu_int_fail(be, WISP_EUNSUPPORTED, "attention_gated with %d heads, %d kv heads, head dim %d, rotary dim %d",
                       H, KVH, D, R);
    return;
  }
  /* KV16: a cache word holds two halves; rows are packed by whole words
   * (the fused decode kernel by vec4<u32>, 8 halves). */
  const int kv16 = wisp_wgpu_int_kv16(be);
  if (kv16 && D % 8) {
    wisp_wgpu_int_fail(be, WISP_EUNSUPPORTED, "attention_gated with head dim %d and f16 KV (needs a multiple of 8)", D);
    return;
  }
  WGPUBuffer qn = wisp_wgpu_int_vec(be, a->q_norm), kn = qn ? wisp_wgpu_int_vec(be, a->k_norm) : NULL;
  WGPUBuffer cs = kn ? wisp_wgpu_int_vec(be, a->rope_cos) : NULL, sn = cs ? wisp_wgpu_int_vec(be, a->rope_sin) : NULL;
  if (!sn) return;
  if (!wisp_wgpu_int_scratch(be, &q->qbuf, (uint64_t)a->n * H * D * 4, (uint64_t)64 * H * D * 4, "wisp gated queries"))
    return;
  const uint32_t max_splits = wisp_wgpu_int_max_splits(be);
  /* The decode arrangement the session switches ask for (docs/webgpu.md):
   * attn_gated_decode.wgsl, which needs subgroups (and 10 storage buffers). */
  const wisp_backend_settings *set = wisp_wgpu_int_settings(be);
  const int dec = a->n == 1 && wisp_wgpu_int_fuse(be) && D % 4 == 0 && D <= QDEC_WG && wisp_wgpu_int_subgroups(be) &&
                  wisp_wgpu_int_device(be)->info.max_storage_buffers_per_shader_stage >= 10;
  const uint32_t tile = dec ? QDEC_KT : QATTN_WG; /* keys per tile of the kernel that runs */
  const uint32_t ntile = (uint32_t)(a->pos0 + a->n - 1) / tile + 1;
  uint32_t tps = 0xFFFFFFFFu;
  const uint32_t splits = a->n == 1 ? wisp_wgpu_int_key_splits(ntile, max_splits, &tps) : 1;
  if (splits > 1 && !wisp_wgpu_int_scratch(be, &q->part, (uint64_t)H * splits * (D + 2) * 4,
                                           (uint64_t)H * max_splits * (D + 2) * 4, "wisp gated attention splits"))
    return;
  WGPUBuffer qkv = wisp_wgpu_int_buf(a->qkv);
  const wisp_wgpu_binding kc = wisp_wgpu_int_bind(a->k_cache), vc = wisp_wgpu_int_bind(a->v_cache);
  WGPUBuffer out = wisp_wgpu_int_buf(a->out);
  wisp_wgpu_const c[2] = {{"WG", QATTN_WG}, {"KV16", kv16}};
  wisp_wgpu_kernel *kr = wisp_wgpu_int_kernel(be, "attn_gated_rope", c, 2);
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
  if (!(rope_in && !h256)) {
    if (dec && !set->attn_fused_rope) { /* unfused: split + norm, then the rotation */
      pr.stage = 1;
      wisp_wgpu_int_record(be, kr, br, 8, &pr, sizeof pr, (uint32_t)(H + 2 * KVH), 1, 1);
      pr.stage = 2;
    }
    wisp_wgpu_int_record(be, kr, br, 8, &pr, sizeof pr, (uint32_t)(H + 2 * KVH), (uint32_t)a->n, 1);
  }
  if (h256) {
    /* the seed profile's decode kernel: online softmax + output gate in one dispatch */
    wisp_wgpu_const c256[2] = {{"USE_DIRECT_KV_LAYOUT", set->attn_direct_kv ? 1 : 0}, {"KV16", kv16}};
    wisp_wgpu_kernel *kd = wisp_wgpu_int_kernel(be, HEAD256, c256, 2);
    struct {
      uint32_t pos, H, KVH, row;
      float scale;
      uint32_t kv_pos, kv_head, pad;
    } pd = {(uint32_t)a->pos0, (uint32_t)H, (uint32_t)KVH, (uint32_t)((2 * H + 2 * KVH) * D), 1.0f / 16.0f,
            (uint32_t)(KVH * D), (uint32_t)D, 0};
    wisp_wgpu_binding bd[5] = {whole(q->qbuf.b), kc, vc, whole(qkv), whole(out)};
    wisp_wgpu_int_record(be, kd, bd, 5, &pd, sizeof pd, (uint32_t)H, 1, 1);
    return;
  }
  if (dec) {
    /* the cache's row strides: DIRECT_KV 0 addresses it through them */
    wisp_wgpu_const cd[5] = {{"WG", QDEC_WG},
                             {"FUSE_ROPE", rope_in},
                             {"GATE", gate_in},
                             {"DIRECT_KV", set->attn_direct_kv ? 1 : 0},
                             {"KV16", kv16}};
    wisp_wgpu_kernel *kd = wisp_wgpu_int_kernel(be, "attn_gated_decode", cd, 5);
    struct {
      uint32_t pos, H, KVH, D, R;
      float eps, scale;
      uint32_t splits, tps, kv_pos, kv_head, pad;
    } pd = {(uint32_t)a->pos0, (uint32_t)H, (uint32_t)KVH, (uint32_t)D, (uint32_t)R, a->eps, 1.0f / sqrtf((float)D),
            splits, tps, (uint32_t)(KVH * D), (uint32_t)D, 0};
    wisp_wgpu_binding bd[10] = {whole(qkv), whole(qn), whole(kn), whole(cs), whole(sn), whole(q->qbuf.b), kc,
                                vc, whole(out), whole(splits > 1 ? q->part.b : wisp_wgpu_int_dummy(be, 1))};
    wisp_wgpu_int_record(be, kd, bd, 10, &pd, sizeof pd, (uint32_t)H, 1, splits);
    if (splits > 1 && gate_in) { /* the gated merge: held back for the o_proj product */
      q->fin = (qin_pend){2, q->part.b, qkv, NULL, a->out, H, D, 0, (int)splits, 0};
      return;
    }
  } else {
    wisp_wgpu_kernel *kf = wisp_wgpu_int_kernel(be, "attn_flash", c, 2);
    struct {
      uint32_t n, pos0, H, KVH, D;
      float scale;
      uint32_t splits, tps;
    } pf = {(uint32_t)a->n, (uint32_t)a->pos0, (uint32_t)H, (uint32_t)KVH, (uint32_t)D, 1.0f / sqrtf((float)D), splits,
            tps};
    wisp_wgpu_binding bf[5] = {whole(q->qbuf.b), kc, vc, whole(out),
                               whole(splits > 1 ? q->part.b : wisp_wgpu_int_dummy(be, 1))};
    wisp_wgpu_int_record(be, kf, bf, 5, &pf, sizeof pf, (uint32_t)H, (uint32_t)a->n, splits);
  }
  if (splits > 1) {
    wisp_wgpu_kernel *kc2 = wisp_wgpu_int_kernel(be, "attn_combine", c, 1);
    struct {
      uint32_t n, H, D, splits;
    } pc = {1, (uint32_t)H, (uint32_t)D, splits};
    wisp_wgpu_binding bc[2] = {whole(q->part.b), whole(out)};
    wisp_wgpu_int_record(be, kc2, bc, 2, &pc, sizeof pc, (uint32_t)H, 1, 1);
  }
  if (gate_in && splits == 1) return;
  record_attn_gate(be, qkv, out, a->n, H, KVH, D);
}

/* The split of a one-token gated decode attention at position pos
 * (wisp_wgpu_attention_gated's, QDEC_KT-key tiles). */
static uint32_t gated_splits_at(uint32_t max_splits, int pos, uint32_t *tps) {
  return wisp_wgpu_int_key_splits((uint32_t)pos / QDEC_KT + 1, max_splits, tps);
}

/* backend.h attention_gated_rows: every row's gated attention as the
 * one-token decode arrangement with its fused split + norm + rope + KV
 * append computes it (attn_gated_decode.wgsl through
 * attn_gated_decode_rows.wgsl; splits merged by attn_gated_combine_rows /
 * attn_combine_rows, the gate by attn_gate over all rows when it is not
 * inside the attention). 0 where the one-token op would take another
 * arrangement (no subgroups or fusion, the unfused rope switch, the seed
 * profile's head-256 kernel). */
int wisp_wgpu_attention_gated_rows(wisp_backend *be, const wisp_gated_attention_args *a, const wisp_mixer_rows *rows) {
  const int D = a->head_dim, H = a->heads, KVH = a->kv_heads, R = a->rotary_dim;
  const wisp_backend_settings *set = wisp_wgpu_int_settings(be);
  const int kv16 = wisp_wgpu_int_kv16(be);
  const int dec = wisp_wgpu_int_fuse(be) && D % 4 == 0 && D <= QDEC_WG && wisp_wgpu_int_subgroups(be) &&
                  wisp_wgpu_int_device(be)->info.max_storage_buffers_per_shader_stage >= 10;
  const int h256 = D == 256 && a->choice && is_head256(a->choice[WISP_PHASE_DECODE].variant) && set->attn_output_gate;
  if (!dec || !set->attn_fused_rope || h256 || rows->n < 1 || rows->n > WISP_WGPU_MIX_ROWS || D <= 0 || R < 2 || R % 2 ||
      R > D || KVH <= 0 || H % KVH || (kv16 && D % 8))
    return 0;
  wisp_wgpu_int_state_op(be);
  wisp_wgpu_int_emit_pending(be);
  gated_state *q = qs_of(be);
  if (!q) return 1;
  WGPUBuffer qn = wisp_wgpu_int_vec(be, a->q_norm), kn = qn ? wisp_wgpu_int_vec(be, a->k_norm) : NULL;
  WGPUBuffer cs = kn ? wisp_wgpu_int_vec(be, a->rope_cos) : NULL, sn = cs ? wisp_wgpu_int_vec(be, a->rope_sin) : NULL;
  if (!sn) return 1; /* error kept */
  const uint32_t max_splits = wisp_wgpu_int_max_splits(be);
  uint32_t most = 1, tps;
  for (int r = 0; r < rows->n; r++) {
    const uint32_t sp = gated_splits_at(max_splits, rows->pos[r], &tps);
    if (sp > most) most = sp;
  }
  const uint64_t block = (uint64_t)H * max_splits * (D + 2) * 4; /* a row's partials */
  if (most > 1 && !wisp_wgpu_int_scratch(be, &q->part, block * (uint64_t)rows->n, block * (uint64_t)rows->n,
                                         "wisp gated attention splits"))
    return 1;
  const int gate_in = set->attn_output_gate;
  WGPUBuffer qkv = wisp_wgpu_int_buf(a->qkv), out = wisp_wgpu_int_buf(a->out);
  wisp_wgpu_const cd[5] = {{"WG", QDEC_WG}, {"FUSE_ROPE", 1}, {"GATE", gate_in},
                           {"DIRECT_KV", set->attn_direct_kv ? 1 : 0}, {"KV16", kv16}};
  wisp_wgpu_kernel *kd = wisp_wgpu_int_kernel(be, "attn_gated_decode_rows", cd, 5);
  wisp_wgpu_const cc[1] = {{"WG", gate_in ? QDEC_WG : QATTN_WG}};
  wisp_wgpu_kernel *kc = most > 1 ? wisp_wgpu_int_kernel(be, gate_in ? "attn_gated_combine_rows" : "attn_combine_rows",
                                                         cc, 1)
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
  while ((p.count = wisp_wgpu_int_rows_group(rows, done, p.rows, &kb, &vb)) > 0) {
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
                                whole(wisp_wgpu_int_dummy(be, 0)),
                                whole(kb),
                                whole(vb),
                                whole(out),
                                whole(most > 1 ? q->part.b : wisp_wgpu_int_dummy(be, 1))};
    wisp_wgpu_int_record(be, kd, bd, 10, &p, sizeof p, (uint32_t)H, p.count, z);
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
      wisp_wgpu_int_record(be, kc, bc, 3, &pc, sizeof pc, (uint32_t)H, p.count, 1);
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
      wisp_wgpu_int_record(be, kc, bc, 2, &pc, sizeof pc, (uint32_t)H, p.count, 1);
    }
  }
  if (gate_in) return 1;
  record_attn_gate(be, qkv, out, rows->n, H, KVH, D); /* elementwise: every row at once */
  return 1;
}

/* dn_recur.wgsl geometry: CW columns (a power of two >=
 * v_dim) times IG row groups, each thread holding ceil(k_dim / IG) <= 32
 * state rows of its column. 0 (error kept) when the head does not fit. */
static int dn_geometry(wisp_backend *be, const wisp_deltanet_args *a, uint32_t *cw_out, uint32_t *ig_out) {
  uint32_t cw = 1, maxinv = wisp_wgpu_int_max_invocations(be);
  while (cw < (uint32_t)a->v_dim) cw <<= 1;
  uint32_t ig = 1;
  while (ig < 32 && cw * ig * 2 <= maxinv && cw * ig * 2 <= 1024 && (uint32_t)a->k_dim > ig * 16) ig <<= 1;
  if (cw > maxinv || ((uint32_t)a->k_dim + ig - 1) / ig > 32) {
    wisp_wgpu_int_fail(be, WISP_EUNSUPPORTED, "gated_deltanet: v_dim %d x k_dim %d does not fit a workgroup of %u",
                       a->v_dim, a->k_dim, maxinv);
    return 0;
  }
  *cw_out = cw;
  *ig_out = ig;
  return 1;
}

/* ---- Gated DeltaNet ---- */

/* dn_decode.wgsl's geometry (one token, split over value columns): CW
 * columns per workgroup (the tuning's; when that is >= v_dim, a whole head:
 * CW the power of two >= v_dim), NS = ceil(v_dim / CW) workgroups per
 * v-head, IG row groups (the tuning's, else the fewest that leave each
 * thread at most 8 state rows within the workgroup limit), NJ =
 * ceil(k_dim / IG) <= 32 rows a thread. 0 when it does not fit: the caller
 * takes dn_conv + dn_recur. */
typedef struct {
  uint32_t cw, ig, nj, ns;
} dn_split;

static int dn_split_geometry(wisp_backend *be, const wisp_deltanet_args *a, dn_split *g) {
  const wisp_wgpu_dn_tuning *t = wisp_wgpu_int_dn_tuning(be);
  uint32_t lim = wisp_wgpu_int_max_invocations(be);
  if (lim > 1024) lim = 1024;
  const uint32_t dk = (uint32_t)a->k_dim, dv = (uint32_t)a->v_dim;
  uint32_t cw = t->cols;
  if (cw >= dv)
    for (cw = 1; cw < dv;) cw <<= 1;
  uint32_t ig = t->groups;
  if (!ig)
    for (ig = 1; cdiv(dk, ig) > 8 && cw * ig * 2 <= lim;) ig <<= 1;
  if ((uint64_t)cw * ig > lim || cdiv(dk, ig) > 32) return 0;
  *g = (dn_split){cw, ig, cdiv(dk, ig), cdiv(dv, cw)};
  return 1;
}

static void deltanet_in_proj(wisp_backend *be, gated_state *q, const wisp_deltanet_args *a);

/* One token through dn_decode.wgsl (and dn_norm.wgsl when a head is split
 * over several workgroups); 0 (nothing recorded) when the kernel cannot
 * take it. */
static int deltanet_decode(wisp_backend *be, const wisp_deltanet_args *a, WGPUBuffer taps, WGPUBuffer al,
                           WGPUBuffer dt, WGPUBuffer nw) {
  dn_split g;
  /* MAXL 8 conv taps; subgroup sums */
  if (a->n != 1 || !wisp_wgpu_int_settings(be)->lin_core || !wisp_wgpu_int_fuse(be) || a->conv_len > 8 ||
      !wisp_wgpu_int_subgroups(be) || !dn_split_geometry(be, a, &g))
    return 0;
  const int K = a->k_heads * a->k_dim, V = a->v_heads * a->v_dim;
  wisp_wgpu_const cd[3] = {{"WG", g.cw * g.ig}, {"CW", g.cw}, {"NJ", g.nj}};
  wisp_wgpu_kernel *kd = wisp_wgpu_int_kernel(be, "dn_decode", cd, 3);
  struct {
    uint32_t kh, vh, dk, dv, L, pos, ns;
    float eps;
  } pd = {(uint32_t)a->k_heads, (uint32_t)a->v_heads, (uint32_t)a->k_dim, (uint32_t)a->v_dim, (uint32_t)a->conv_len,
          (uint32_t)a->pos0, g.ns, a->eps};
  WGPUBuffer proj = wisp_wgpu_int_buf(a->proj), out = wisp_wgpu_int_buf(a->out);
  /* split heads: the raw output goes to dnraw, the gated norm follows */
  gated_state *q = qs_of(be);
  if (g.ns > 1 && (!q || !wisp_wgpu_int_scratch(be, &q->dnraw, (uint64_t)V * 4, (uint64_t)V * 4, "wisp deltanet raw")))
    return 1; /* failure kept */
  wisp_wgpu_binding bd[8] = {whole(proj), whole(taps), wisp_wgpu_int_bind(a->conv_state), whole(al), whole(dt),
                             whole(nw), wisp_wgpu_int_bind(a->state), whole(g.ns > 1 ? q->dnraw.b : out)};
  uint32_t gx, gy;
  wisp_wgpu_grid(wisp_wgpu_int_device(be), (uint32_t)a->v_heads * g.ns, &gx, &gy);
  wisp_wgpu_int_record(be, kd, bd, 8, &pd, sizeof pd, gx, gy, 1);
  if (g.ns > 1) { /* the gated norm over each whole head: held back for the out_proj product */
    q->fin = (qin_pend){1, q->dnraw.b, proj, nw, a->out, a->v_heads, a->v_dim, 2 * K + V, 0, a->eps};
    wisp_wgpu_int_stats(be)->deltanet_split++;
  }
  return 1;
}

/* backend.h gated_deltanet_rows: every row's step as the one-token decode
 * core computes it (dn_decode.wgsl through dn_decode_rows.wgsl, a
 * dispatch per device buffer the rows' states lie in; with heads split
 * over several workgroups, the gated norm of all rows by dn_norm_rows.wgsl
 * as dn_norm.wgsl applies it). 0 where the one-token op would not take
 * dn_decode (the fused core off, no subgroups, more than 8 taps, a head
 * that does not fit). */
int wisp_wgpu_gated_deltanet_rows(wisp_backend *be, const wisp_deltanet_args *a, const wisp_mixer_rows *rows) {
  dn_split g;
  if (rows->n < 1 || rows->n > WISP_WGPU_MIX_ROWS || a->k_heads <= 0 || a->v_heads % a->k_heads || a->k_dim <= 0 ||
      a->k_dim > 256 || a->v_dim <= 0 || a->conv_len < 1 || a->conv_len > 8 || !wisp_wgpu_int_settings(be)->lin_core ||
      !wisp_wgpu_int_fuse(be) || !wisp_wgpu_int_subgroups(be) || !dn_split_geometry(be, a, &g))
    return 0;
  wisp_wgpu_int_state_op(be);
  wisp_wgpu_int_emit_pending(be);
  gated_state *q = qs_of(be);
  if (!q) return 1;
  WGPUBuffer taps = wisp_wgpu_int_vec(be, a->conv_taps), al = taps ? wisp_wgpu_int_vec(be, a->a_log) : NULL;
  WGPUBuffer dt = al ? wisp_wgpu_int_vec(be, a->dt_bias) : NULL, nw = dt ? wisp_wgpu_int_vec(be, a->norm) : NULL;
  if (!nw) return 1; /* error kept */
  const int K = a->k_heads * a->k_dim, V = a->v_heads * a->v_dim, prow = 2 * K + 2 * V + 2 * a->v_heads;
  if (g.ns > 1 && !wisp_wgpu_int_scratch(be, &q->dnraw, (uint64_t)rows->n * V * 4, (uint64_t)rows->n * V * 4,
                                         "wisp deltanet raw"))
    return 1;
  WGPUBuffer proj = wisp_wgpu_int_buf(a->proj), out = wisp_wgpu_int_buf(a->out);
  wisp_wgpu_const cd[3] = {{"WG", g.cw * g.ig}, {"CW", g.cw}, {"NJ", g.nj}};
  wisp_wgpu_kernel *kd = wisp_wgpu_int_kernel(be, "dn_decode_rows", cd, 3);
  struct {
    uint32_t kh, vh, dk, dv, L, ns;
    float eps;
    uint32_t count, prow, pad[3];
    uint32_t rows[WISP_WGPU_MIX_ROWS][4];
  } p;
  memset(&p, 0, sizeof p);
  unsigned char done[WISP_WGPU_MIX_ROWS] = {0};
  WGPUBuffer cb, sb;
  while ((p.count = wisp_wgpu_int_rows_group(rows, done, p.rows, &cb, &sb)) > 0) {
    p.kh = (uint32_t)a->k_heads;
    p.vh = (uint32_t)a->v_heads;
    p.dk = (uint32_t)a->k_dim;
    p.dv = (uint32_t)a->v_dim;
    p.L = (uint32_t)a->conv_len;
    p.ns = g.ns;
    p.eps = a->eps;
    p.prow = (uint32_t)prow;
    wisp_wgpu_binding bd[8] = {whole(proj), whole(taps), whole(cb), whole(al), whole(dt),
                               whole(nw),   whole(sb),   whole(g.ns > 1 ? q->dnraw.b : out)};
    wisp_wgpu_int_record(be, kd, bd, 8, &p, sizeof p, (uint32_t)a->v_heads * g.ns, p.count, 1);
  }
  if (g.ns > 1) {
    wisp_wgpu_int_stats(be)->deltanet_split++;
    uint32_t wg = 32;
    while (wg < (uint32_t)a->v_dim && wg < 256) wg <<= 1;
    wisp_wgpu_const cn[1] = {{"WG", wg}};
    wisp_wgpu_kernel *kn = wisp_wgpu_int_kernel(be, "dn_norm_rows", cn, 1);
    struct {
      uint32_t vh, dv, zoff;
      float eps;
      uint32_t count, prow, pad0, pad1;
    } pn = {(uint32_t)a->v_heads, (uint32_t)a->v_dim, (uint32_t)(2 * K + V), a->eps, (uint32_t)rows->n,
            (uint32_t)prow, 0, 0};
    wisp_wgpu_binding bn[4] = {whole(proj), whole(nw), whole(q->dnraw.b), whole(out)};
    wisp_wgpu_int_record(be, kn, bn, 4, &pn, sizeof pn, (uint32_t)a->v_heads, (uint32_t)rows->n, 1);
  }
  return 1;
}

/* A held-back input op (qin_pend) as a dispatch of its own. */
static void rec_input_op(wisp_backend *be, const qin_pend *f) {
  if (f->kind == 1) { /* dn_norm.wgsl */
    uint32_t wg = 32;
    while (wg < (uint32_t)f->hd && wg < 256) wg <<= 1;
    wisp_wgpu_const cn[1] = {{"WG", wg}};
    wisp_wgpu_kernel *kn = wisp_wgpu_int_kernel(be, "dn_norm", cn, 1);
    struct {
      uint32_t vh, dv, zoff;
      float eps;
    } pn = {(uint32_t)f->heads, (uint32_t)f->hd, (uint32_t)f->zoff, f->eps};
    wisp_wgpu_binding bn[4] = {whole(f->src), whole(f->nw), whole(f->aux), whole(wisp_wgpu_int_buf(f->out))};
    wisp_wgpu_int_record(be, kn, bn, 4, &pn, sizeof pn, (uint32_t)f->heads, 1, 1);
  } else if (f->kind == 2) { /* attn_gated_combine.wgsl: a thread per dimension */
    wisp_wgpu_const cc[1] = {{"WG", QDEC_WG}};
    wisp_wgpu_kernel *kc2 = wisp_wgpu_int_kernel(be, "attn_gated_combine", cc, 1);
    struct {
      uint32_t H, D, splits, pad;
    } pc = {(uint32_t)f->heads, (uint32_t)f->hd, (uint32_t)f->splits, 0};
    wisp_wgpu_binding bc[3] = {whole(f->aux), whole(f->src), whole(wisp_wgpu_int_buf(f->out))};
    wisp_wgpu_int_record(be, kc2, bc, 3, &pc, sizeof pc, (uint32_t)f->heads, 1, 1);
  }
}

void wisp_wgpu_gated_deltanet(wisp_backend *be, const wisp_deltanet_args *a) {
  gated_state *q = qs_of(be);
  if (!q) return;
  const int K0 = a->k_heads * a->k_dim, V0 = a->v_heads * a->v_dim;
  if (q->pend.active && q->pend.y == a->proj && a->n == 1 && q->pend.W->rows == 2 * K0 + 2 * V0 + 2 * a->v_heads)
    deltanet_in_proj(be, q, a);
  wisp_wgpu_int_emit_pending(be);
  const int K = a->k_heads * a->k_dim, V = a->v_heads * a->v_dim;
  const int cdim = 2 * K + V, row = 2 * K + 2 * V + 2 * a->v_heads;
  if (a->k_heads <= 0 || a->v_heads % a->k_heads || a->k_dim <= 0 || a->k_dim > 256 || a->v_dim <= 0 ||
      a->conv_len < 1 || a->n <= 0 || a->pos0 < 0) {
    wisp_wgpu_int_fail(be, WISP_EUNSUPPORTED, "gated_deltanet with %d k heads x %d, %d v heads x %d, conv %d, pos %d",
                       a->k_heads, a->k_dim, a->v_heads, a->v_dim, a->conv_len, a->pos0);
    return;
  }
  WGPUBuffer taps = wisp_wgpu_int_vec(be, a->conv_taps), al = taps ? wisp_wgpu_int_vec(be, a->a_log) : NULL;
  WGPUBuffer dt = al ? wisp_wgpu_int_vec(be, a->dt_bias) : NULL, nw = dt ? wisp_wgpu_int_vec(be, a->norm) : NULL;
  if (!nw) return;
  /* useLinearAttentionFusedDecodeCore: conv + recurrence + gated norm */
  if (deltanet_decode(be, a, taps, al, dt, nw)) return;
  if (!wisp_wgpu_int_scratch(be, &q->cbuf, (uint64_t)a->n * cdim * 4, (uint64_t)(a->n > 64 ? a->n : 64) * cdim * 4,
                             "wisp deltanet conv"))
    return;
  WGPUBuffer proj = wisp_wgpu_int_buf(a->proj);
  wisp_wgpu_const c[1] = {{"WG", 64}};
  wisp_wgpu_kernel *kc = wisp_wgpu_int_kernel(be, "dn_conv", c, 1);
  struct {
    uint32_t n, cdim, L, row, pos0, pad0, pad1, pad2;
  } pc = {(uint32_t)a->n, (uint32_t)cdim, (uint32_t)a->conv_len, (uint32_t)row, (uint32_t)a->pos0, 0, 0, 0};
  wisp_wgpu_binding bc[4] = {whole(proj), whole(taps), wisp_wgpu_int_bind(a->conv_state), whole(q->cbuf.b)};
  wisp_wgpu_int_record(be, kc, bc, 4, &pc, sizeof pc, cdiv((uint64_t)cdim, 64), 1, 1);
  uint32_t cw, ig;
  if (!dn_geometry(be, a, &cw, &ig)) return;
  wisp_wgpu_const cr[2] = {{"WG", cw * ig}, {"CW", cw}};
  wisp_wgpu_kernel *kr = wisp_wgpu_int_kernel(be, "dn_recur", cr, 2);
  struct {
    uint32_t n, kh, vh, dk, dv, row;
    float eps;
    uint32_t pad;
  } pr = {(uint32_t)a->n, (uint32_t)a->k_heads, (uint32_t)a->v_heads, (uint32_t)a->k_dim, (uint32_t)a->v_dim,
          (uint32_t)row, a->eps, 0};
  wisp_wgpu_binding br[7] = {whole(proj), whole(q->cbuf.b), whole(al), whole(dt), whole(nw),
                             wisp_wgpu_int_bind(a->state), whole(wisp_wgpu_int_buf(a->out))};
  wisp_wgpu_int_record(be, kr, br, 7, &pr, sizeof pr, (uint32_t)a->v_heads, 1, 1);
}

/* ---- Q4_K products ---- */

/* q4k_matvec.wgsl / q4k_fused.wgsl's XN (wisp_wgpu_int_staged_vec4s): room
 * kept for the kernels' own arrays (q4k_fused: 4 KiB at its largest
 * workgroup; q4k_matvec: far less at its default geometry). */
#define Q4K_OWN_BYTES 8192

#define SIMD16 "fused_matmul_q4_metal_simd16"
/* The registry variant of q4k_sb.wgsl (a thread per super-block). */
#define SUPERBLOCK "wgsl_matvec_q4k_superblock"

/* The seed profile's Q4_K kernel: as registry variant matmul/wgsl_q4k_metal_simd16 or as a
 * profile addKernels key (plan_apply hands it over as "profile:" + file stem). */
static int is_simd16(const char *v) { return !strcmp(v, "wgsl_q4k_metal_simd16") || !strcmp(v, "profile:" SIMD16); }

wisp_status wisp_wgpu_q4k_check_choice(const wisp_matrix *m) {
  for (int ph = 0; ph < 2; ph++) {
    const wisp_kernel_choice *c = &m->choice[ph];
    const char *v = c->variant;
    if (!v[0] || (!strncmp(v, "wgsl_", 5) && strcmp(v, "wgsl_q4k_metal_simd16"))) continue;
    if (!is_simd16(v))
      return wisp_fail(WISP_EUNSUPPORTED, "the plan chose kernel '%s' for a Q4_K matrix, which the webgpu backend does "
                       "not have for Q4_K", v);
    uint32_t tpc = c->subgroups_per_row ? (uint32_t)c->subgroups_per_row : 16;
    uint32_t cols = c->rows_per_subgroup ? (uint32_t)c->rows_per_subgroup : 16;
    uint32_t wg = c->workgroup_size ? (uint32_t)c->workgroup_size : tpc * cols;
    if (wg != tpc * cols || !tpc || (tpc & (tpc - 1)) || wg > 256)
      return wisp_fail(WISP_EUNSUPPORTED,
                       "webgpu: " SIMD16 ": WORKGROUP_SIZE %u must be COLS_PER_WG %u * THREADS_PER_COL_GEMV %u (a power "
                       "of two) and at most 256", wg, cols, tpc);
  }
  return WISP_OK;
}

/* Prefill (n > 1): matmul.wgsl with QT 3, a TM x TN tile per workgroup,
 * each 32-column sub-block dequantized once into workgroup memory for TN
 * tokens (the Q4/f32 prefill product's kernel; scales/zp are unused). */
static void q4k_matmul_tiled(wisp_backend *be, const wisp_matrix *W, const wisp_buf *x, int x_row0, int n, wisp_buf *y,
                             int accumulate) {
  const uint32_t tm = 64, tn = 32;
  wisp_wgpu_const c[3] = {{"TM", tm}, {"TN", tn}, {"QT", 3}};
  wisp_wgpu_kernel *k = wisp_wgpu_int_kernel(be, "matmul", c, 3);
  WGPUBuffer none = wisp_wgpu_int_dummy(be, 0);
  int row0, prow;
  WGPUBuffer wb;
  for (int i = 0; wisp_wgpu_int_mat_part(be, W, i, &row0, &prow, &wb); i++) {
    struct {
      uint32_t rows, cols, y_off, x_off, acc, n, y_stride, pad;
    } p = {(uint32_t)prow, (uint32_t)W->cols, (uint32_t)row0, (uint32_t)((size_t)x_row0 * W->cols / 4),
           accumulate ? 1u : 0u, (uint32_t)n, (uint32_t)W->rows, 0};
    wisp_wgpu_binding b[5] = {whole(wb), whole(none), whole(none), whole(wisp_wgpu_int_buf(x)),
                              whole(wisp_wgpu_int_buf(y))};
    wisp_wgpu_int_record(be, k, b, 5, &p, sizeof p, cdiv((uint64_t)prow, tm), cdiv((uint64_t)n, tn), 1);
  }
}

/* GN of q4k_matvec.wgsl for a held-back input op over `cols` inputs (0:
 * the op cannot fuse: too many heads or splits for the kernel's arrays). */
static uint32_t input_op_room(const qin_pend *f, int cols) {
  if (!f || f->heads <= 0 || f->heads > 256) return 0;
  uint64_t need = f->kind == 1 ? (uint64_t)cols / 4 + (uint64_t)f->heads : (uint64_t)f->heads * (uint64_t)f->splits;
  return need <= QIN_ROOM && (uint64_t)cols / 4 + 256 <= QIN_ROOM ? QIN_ROOM : 0;
}

static void rec_q4k_matvec(wisp_backend *be, const wisp_matrix *W, const wisp_buf *x, int x_row0, int n, wisp_buf *y,
                           int accumulate, const qin_pend *pre);

void wisp_wgpu_q4k_matmul(wisp_backend *be, const wisp_matrix *W, const wisp_buf *x, int x_row0, int n, wisp_buf *y,
                          int accumulate) {
  rec_q4k_matvec(be, W, x, x_row0, n, y, accumulate, NULL);
}

/* Whether the held-back input op can fuse into a one-token q4k_matvec by W
 * reading x: the subgroup kernel (not the seed profile's simd16 one), x'
 * staged beside the op's per-head values. */
static int input_op_fits(wisp_backend *be, const qin_pend *f, const wisp_matrix *W, const wisp_buf *x, int x_row0,
                         int n, const wisp_buf *y) {
  if (!f->kind || f->out != x || n != 1 || x_row0 || y == x || W->cols != f->heads * f->hd || f->hd % 4 ||
      !wisp_wgpu_int_subgroups(be) || is_simd16(W->choice[WISP_PHASE_DECODE].variant))
    return 0;
  const uint32_t gn = input_op_room(f, W->cols);
  return gn && wisp_wgpu_int_staged_vec4s(be, W->cols, Q4K_OWN_BYTES + (uint64_t)gn * 4) > 1;
}

int wisp_wgpu_gated_take_input(wisp_backend *be, const wisp_matrix *W, const wisp_buf *x, int x_row0, int n,
                              const wisp_buf *y) {
  gated_state *q = *wisp_wgpu_int_gated_slot(be);
  if (!q || !input_op_fits(be, &q->fin, W, x, x_row0, n, y)) return 0;
  q->taken = q->fin;
  q->fin.kind = 0;
  return 1;
}

/* Placeholders for the q4k kernels' unused read-write bindings. */
static int dummies(wisp_backend *be, gated_state *q) {
  for (int i = 0; i < 3; i++)
    if (!wisp_wgpu_int_scratch(be, &q->dum[i], 16, 16, "wisp q4k placeholder")) return 0;
  return 1;
}

/* Records k, q4k_fused.wgsl or q4k_sb.wgsl (the same parameters and first six
 * bindings), over rows [lo, hi) of W a binding part at a time, rows_wg outputs a
 * workgroup: y[r] (+)= W[r] . x' (pd->nx: x' = rmsnorm(nx) * nw, also written to
 * nxo; else x' = pd->x from row x_row0); pair F: rows r and r + F with SwiGLU into
 * z; with amax (q4k_fused's ARGMAX), bound seventh, partials from part_off on.
 * nb: the bindings k has (6 or 7). Returns the next part_off; *records (may be
 * NULL) counts the dispatches. */
static uint32_t rec_q4k_parts(wisp_backend *be, gated_state *q, wisp_wgpu_kernel *k, int nb, uint32_t rows_wg,
                              const wisp_matrix *W, int lo, int hi, const q4k_pend *pd, int x_row0, int acc, int pair,
                              wisp_buf *z, WGPUBuffer amax, uint32_t part_off, uint64_t *records) {
  const int pre = pd->nx != NULL;
  int row0, prow;
  WGPUBuffer wb;
  for (int i = 0; wisp_wgpu_int_mat_part(be, W, i, &row0, &prow, &wb); i++) {
    int a = lo > row0 ? lo : row0, b = hi < row0 + prow ? hi : row0 + prow;
    if (a >= b) continue;
    struct {
      uint32_t rows, cols, y_off, x_off, acc, w_row0, pre;
      float eps;
      uint32_t pair, part_off, pad0, pad1;
    } p = {(uint32_t)(b - a), (uint32_t)W->cols, (uint32_t)a, (uint32_t)((size_t)x_row0 * W->cols / 4),
           acc ? 1u : 0u, (uint32_t)(a - row0), (uint32_t)pre, pd->eps, (uint32_t)pair, part_off, 0, 0};
    wisp_wgpu_binding bd[7] = {whole(wb),
                               whole(wisp_wgpu_int_buf(pre ? pd->nx : pd->x)),
                               whole(wisp_wgpu_int_buf(pd->y)),
                               whole(pre ? pd->nw : wisp_wgpu_int_dummy(be, 0)),
                               whole(pre ? wisp_wgpu_int_buf(pd->nxo) : q->dum[0].b),
                               whole(z ? wisp_wgpu_int_buf(z) : q->dum[1].b),
                               whole(amax ? amax : q->dum[2].b)};
    uint32_t nwg = cdiv((uint64_t)(b - a), rows_wg), gx, gy;
    wisp_wgpu_grid(wisp_wgpu_int_device(be), nwg, &gx, &gy);
    wisp_wgpu_int_record(be, k, bd, nb, &p, sizeof p, gx, gy, 1);
    part_off += nwg;
    if (records) ++*records;
  }
  return part_off;
}

/* q4k_sb.wgsl: a one-token product with a thread per super-block, where the
 * plan chose it (wgsl_matvec_q4k_superblock) or tuning q4kSbCols asks, when a
 * row's super-blocks (pair: two rows') fit a workgroup and the staged x its
 * memory; rows [lo, hi) as rec_q4k_parts. 0: not taken (the caller records
 * another kernel). */
static int q4k_superblock(wisp_backend *be, const wisp_matrix *W, int lo, int hi, const q4k_pend *pd, int x_row0,
                          int acc, int pair, wisp_buf *z) {
  const uint32_t wg = 256, S = (uint32_t)W->cols / 256;
  const uint64_t xn = (uint64_t)S * 65;
  const int min_cols = wisp_wgpu_int_q4k_tuning(be)->superblock_cols;
  const char *v = W->choice[WISP_PHASE_DECODE].variant;
  const int chosen = min_cols < 0 ? !strcmp(v, SUPERBLOCK) : min_cols && W->cols >= min_cols;
  if (!chosen || W->cols % 256 || S == 0 || S > (pair ? wg / 2 : wg) || is_simd16(v) ||
      xn * 16 + (uint64_t)S * 64 + wg * 8 > wisp_wgpu_int_device(be)->info.max_compute_workgroup_storage_size)
    return 0;
  gated_state *q = qs_of(be);
  if (!q || !dummies(be, q)) return 0;
  wisp_wgpu_const c[2] = {{"WG", wg}, {"XN", (uint32_t)xn}};
  wisp_wgpu_kernel *k = wisp_wgpu_int_kernel(be, "q4k_sb", c, 2);
  const uint32_t rows_wg = pair ? (wg / S) / 2 : wg / S; /* outputs a workgroup */
  rec_q4k_parts(be, q, k, 6, rows_wg, W, lo, hi, pd, x_row0, acc, pair, z, NULL, 0,
                &wisp_wgpu_int_stats(be)->q4k_superblock);
  return 1;
}

/* q4k_matvec.wgsl's geometry for W: WG threads, ROWS rows a lane group of
 * LG lanes (tuning q4kMatvec / q4kRows2Rows / q4kLg). q4k_matvec_rows.wgsl
 * takes the same LG: a row's sums depend on it. */
static void q4k_matvec_geometry(wisp_backend *be, const wisp_matrix *W, uint32_t *wg, uint32_t *rows, uint32_t *lg) {
  const wisp_wgpu_q4k_tuning *tune = wisp_wgpu_int_q4k_tuning(be);
  const uint32_t sgmax = wisp_wgpu_int_subgroup_max(be);
  *wg = tune->mv_wg;
  *rows = tune->mv_rows ? tune->mv_rows : (uint32_t)W->rows >= tune->rows2_rows ? 2 : 1;
  *lg = tune->mv_lg ? tune->mv_lg : sgmax > 32 ? sgmax : 32;
}

/* per_row (wisp_wgpu_q4k_matmul_rows): every token through the decode
 * choice's one-token kernel (a workgroup z per token), never the tiled
 * prefill product or the superblock kernel, so that a token's sums do not
 * depend on how many tokens share the call. */
static void rec_q4k_matvec_ex(wisp_backend *be, const wisp_matrix *W, const wisp_buf *x, int x_row0, int n,
                              wisp_buf *y, int accumulate, const qin_pend *pre, int per_row) {
  if (n <= 0) return;
  const wisp_kernel_choice *ch = &W->choice[n == 1 || per_row ? WISP_PHASE_DECODE : WISP_PHASE_PREFILL];
  if (n > 1 && !per_row && !is_simd16(ch->variant)) {
    q4k_matmul_tiled(be, W, x, x_row0, n, y, accumulate);
    return;
  }
  if (n == 1 && !pre && !per_row) {
    const q4k_pend plain = {0, W, NULL, NULL, x, NULL, 0, y};
    if (q4k_superblock(be, W, 0, W->rows, &plain, x_row0, accumulate, 0, NULL)) return;
  }
  const char *file;
  wisp_wgpu_const c[6];
  int nc;
  uint32_t rows_wg;
  if (is_simd16(ch->variant)) {
    /* the seed profile's kernel (plan_apply puts the profile key's constants in the choice) */
    uint32_t tpc = ch->subgroups_per_row ? (uint32_t)ch->subgroups_per_row : 16;
    uint32_t cols = ch->rows_per_subgroup ? (uint32_t)ch->rows_per_subgroup : 16;
    uint32_t wg = ch->workgroup_size ? (uint32_t)ch->workgroup_size : tpc * cols;
    if (wg != tpc * cols || (tpc & (tpc - 1)) || wg > 256) {
      wisp_wgpu_int_fail(be, WISP_EUNSUPPORTED,
                         "fused_matmul_q4_metal_simd16: WORKGROUP_SIZE %u != COLS_PER_WG %u * THREADS_PER_COL_GEMV %u "
                         "(a power of two), or over 256", wg, cols, tpc);
      return;
    }
    file = "fused_matmul_q4_metal_simd16";
    c[0] = (wisp_wgpu_const){"WORKGROUP_SIZE", wg};
    c[1] = (wisp_wgpu_const){"COLS_PER_WG", cols};
    c[2] = (wisp_wgpu_const){"THREADS_PER_COL_GEMV", tpc};
    c[3] = (wisp_wgpu_const){"USE_FULL_BLOCK_FAST_PATH", 1};
    nc = 4;
    rows_wg = cols;
  } else {
    const int sg = wisp_wgpu_int_subgroups(be);
    file = sg ? "q4k_matvec" : "q4k_matvec_nosg";
    const wisp_wgpu_q4k_tuning *tune = wisp_wgpu_int_q4k_tuning(be);
    uint32_t wg = 64, rows = 4, lg = 0;
    if (sg) q4k_matvec_geometry(be, W, &wg, &rows, &lg);
    c[0] = (wisp_wgpu_const){"WG", wg};
    c[1] = (wisp_wgpu_const){"ROWS", rows};
    nc = 2;
    rows_wg = 4;
    if (sg) { /* q4k_matvec.wgsl: WG / LG lane groups of ROWS rows */
      const uint32_t gn = pre ? input_op_room(pre, W->cols) : 1;
      c[2] = (wisp_wgpu_const){"LG", lg};
      c[3] = (wisp_wgpu_const){"XN", wisp_wgpu_int_staged_vec4s(be, W->cols, Q4K_OWN_BYTES + (uint64_t)gn * 4)};
      c[4] = (wisp_wgpu_const){"PF", tune->mv_prefetch};
      c[5] = (wisp_wgpu_const){"GN", gn};
      nc = 6;
      rows_wg = (wg / lg) * rows;
    }
  }
  wisp_wgpu_kernel *k = wisp_wgpu_int_kernel(be, file, c, nc);
  int row0, prow;
  WGPUBuffer wb;
  for (int i = 0; wisp_wgpu_int_mat_part(be, W, i, &row0, &prow, &wb); i++) {
    struct { /* the simd16 and plain kernels read the first 8 words */
      uint32_t rows, cols, y_off, x_off, acc, y_stride, pre, hd, zoff, splits;
      float eps;
      uint32_t pad0;
    } p = {(uint32_t)prow, (uint32_t)W->cols, (uint32_t)row0, (uint32_t)((size_t)x_row0 * W->cols / 4),
           accumulate ? 1u : 0u, (uint32_t)W->rows, pre ? (uint32_t)pre->kind : 0u, pre ? (uint32_t)pre->hd : 0u,
           pre ? (uint32_t)pre->zoff : 0u, pre ? (uint32_t)pre->splits : 0u, pre ? pre->eps : 0.0f, 0};
    /* q4k_matvec.wgsl's PRE inputs: placeholders without one (xo must not alias) */
    WGPUBuffer r0 = wisp_wgpu_int_dummy(be, 0);
    wisp_wgpu_binding b[7] = {whole(wb),
                              whole(pre ? r0 : wisp_wgpu_int_buf(x)),
                              whole(wisp_wgpu_int_buf(y)),
                              whole(pre ? pre->aux : r0),
                              whole(pre ? pre->src : r0),
                              whole(pre && pre->nw ? pre->nw : r0),
                              whole(pre ? wisp_wgpu_int_buf(pre->out) : wisp_wgpu_int_dummy(be, 1))};
    const int nb = nc == 6 ? 7 : 3;
    uint32_t gx, gy;
    wisp_wgpu_grid(wisp_wgpu_int_device(be), cdiv((uint64_t)prow, rows_wg), &gx, &gy);
    wisp_wgpu_int_record(be, k, b, nb, &p, sizeof p, gx, gy, (uint32_t)n);
  }
}

static void rec_q4k_matvec(wisp_backend *be, const wisp_matrix *W, const wisp_buf *x, int x_row0, int n, wisp_buf *y,
                           int accumulate, const qin_pend *pre) {
  rec_q4k_matvec_ex(be, W, x, x_row0, n, y, accumulate, pre, 0);
}

/* Several rows of a batched step through q4k_matvec_rows.wgsl (tuning
 * rowsQ4K=1; slower than row by row on the H200 so far): each row's
 * sums are q4k_matvec.wgsl's for that row alone (same LG), the weight is
 * read once per up to 8 rows (wisp_wgpu_int_rows_nt). 0 (nothing recorded) where the
 * one-row product is another kernel: no subgroups (q4k_matvec_nosg), or the
 * profile's simd16 kernel as the decode choice. */
static int q4k_matvec_rows(wisp_backend *be, const wisp_matrix *W, const wisp_buf *x, int n, wisp_buf *y,
                           int accumulate) {
  if (!wisp_wgpu_int_subgroups(be) || !wisp_wgpu_int_rows_shared(be) || !wisp_wgpu_int_rows_q4k(be) ||
      is_simd16(W->choice[WISP_PHASE_DECODE].variant))
    return 0;
  uint32_t wg, rows, lg;
  q4k_matvec_geometry(be, W, &wg, &rows, &lg);
  if (rows > 4) rows = 4; /* rows a lane group: changes no sum */
  const uint32_t nt = wisp_wgpu_int_rows_nt(be, n);
  const uint32_t tu = wisp_wgpu_int_rows_tile(be, (uint32_t)W->cols / 32, 8, wg, lg, rows, nt);
  wisp_wgpu_const c[6] = {{"WG", wg}, {"ROWS", rows}, {"LG", lg}, {"NT", nt}, {"XS", tu > 0}, {"TU", tu ? tu : 1}};
  wisp_wgpu_kernel *k = wisp_wgpu_int_kernel(be, "q4k_matvec_rows", c, 6);
  const uint32_t rows_wg = (wg / lg) * rows;
  int row0, prow;
  WGPUBuffer wb;
  for (int i = 0; wisp_wgpu_int_mat_part(be, W, i, &row0, &prow, &wb); i++) {
    struct {
      uint32_t rows, cols, y_off, x_off, acc, n, y_stride, pad0;
    } p = {(uint32_t)prow, (uint32_t)W->cols, (uint32_t)row0, 0, accumulate ? 1u : 0u, (uint32_t)n,
           (uint32_t)W->rows, 0};
    wisp_wgpu_binding b[3] = {whole(wb), whole(wisp_wgpu_int_buf(x)), whole(wisp_wgpu_int_buf(y))};
    uint32_t gx, gy;
    wisp_wgpu_grid(wisp_wgpu_int_device(be), cdiv((uint64_t)prow, rows_wg), &gx, &gy);
    wisp_wgpu_int_record(be, k, b, 3, &p, sizeof p, gx, gy, cdiv((uint64_t)n, nt));
  }
  wisp_wgpu_int_stats(be)->rows_shared++;
  return 1;
}

void wisp_wgpu_q4k_matmul_rows(wisp_backend *be, const wisp_matrix *W, const wisp_buf *x, int n, wisp_buf *y,
                               int accumulate) {
  if (n > 1 && q4k_matvec_rows(be, W, x, n, y, accumulate)) return;
  rec_q4k_matvec_ex(be, W, x, 0, n, y, accumulate, NULL, 1);
}

/* ---- q4k_fused: Q4_K decode products with the session-switch fusions ---- */

typedef struct {
  uint32_t wg, cols, tpc, full;
  int asked; /* a profile, the matrix's choice or tuning q4kFused set it: q4k_fused, not q4k_sb */
} qgeo;

/* Geometry for a q4k_fused dispatch: explicit (wg/cols/tpc, 0 = unset), else the matrix's
 * simd16 choice (profile constants), else 256 / 16 / 16 / full blocks. */
static qgeo geo_of(wisp_backend *be, const wisp_matrix *W, int wg, int cols, int tpc, int full) {
  qgeo g = {256, 16, 16, 1, 0};
  const wisp_wgpu_q4k_tuning *tune = wisp_wgpu_int_q4k_tuning(be);
  if (tune->fused_cols) { /* tuning q4kFused=COLSxTPC */
    g.cols = tune->fused_cols;
    g.tpc = tune->fused_tpc;
    g.wg = g.cols * g.tpc;
    g.asked = 1;
  }
  const wisp_kernel_choice *ch = &W->choice[WISP_PHASE_DECODE];
  if (is_simd16(ch->variant)) {
    g.asked = 1;
    if (ch->subgroups_per_row) g.tpc = (uint32_t)ch->subgroups_per_row;
    if (ch->rows_per_subgroup) g.cols = (uint32_t)ch->rows_per_subgroup;
    g.wg = g.tpc * g.cols;
  }
  if (cols) g.cols = (uint32_t)cols;
  if (tpc) g.tpc = (uint32_t)tpc;
  if (cols || tpc || wg) g.wg = wg ? (uint32_t)wg : g.cols * g.tpc;
  if (full >= 0) g.full = (uint32_t)full;
  g.asked |= cols || tpc || wg || full >= 0;
  return g;
}

/* Rows [lo, hi) of W (one token): y[r] (+)= W[r] . x' (pre: x' = rmsnorm(nx) * nw, also
 * written to nxo); pair F: rows r and r + F with SwiGLU into z; argmax: partials from
 * part_off on (returns the next part_off). */
static uint32_t rec_q4k_fused(wisp_backend *be, gated_state *q, const wisp_matrix *W, int lo, int hi,
                              const q4k_pend *pd, int acc, int pair, wisp_buf *z, WGPUBuffer amax, uint32_t part_off,
                              qgeo g) {
  if (!dummies(be, q)) return part_off;
  if (!amax && !g.asked && q4k_superblock(be, W, lo, hi, pd, 0, acc, pair, z)) return part_off;
  if (g.wg != g.cols * g.tpc || !g.tpc || (g.tpc & (g.tpc - 1)) || g.wg > 256 || g.cols > 256) {
    wisp_wgpu_int_fail(be, WISP_EUNSUPPORTED, "q4k_fused: WORKGROUP_SIZE %u must be COLS_PER_WG %u x THREADS_PER_COL "
                       "%u (a power of two), at most 256", g.wg, g.cols, g.tpc);
    return part_off;
  }
  wisp_wgpu_const c[7] = {{"WORKGROUP_SIZE", g.wg},
                          {"COLS_PER_WG", g.cols},
                          {"THREADS_PER_COL", g.tpc},
                          {"USE_FULL_BLOCK_FAST_PATH", g.full ? 1 : 0},
                          {"ARGMAX", amax ? 1 : 0},
                          {"XN", wisp_wgpu_int_staged_vec4s(be, W->cols, Q4K_OWN_BYTES)},
                          {"PF", wisp_wgpu_int_q4k_tuning(be)->fused_prefetch}};
  wisp_wgpu_kernel *k = wisp_wgpu_int_kernel(be, "q4k_fused", c, 7);
  return rec_q4k_parts(be, q, k, 7, g.cols, W, lo, hi, pd, 0, acc, pair, z, amax, part_off, NULL);
}

void wisp_wgpu_q4k_matmul_ex(wisp_backend *be, const wisp_matrix *W, const wisp_buf *nx, WGPUBuffer nw, float eps,
                             const wisp_buf *nxo, const wisp_buf *x, int x_row0, int n, wisp_buf *y, int accumulate) {
  gated_state *q = qs_of(be);
  if (!q) return;
  if (q->taken.kind) { /* an input op taken by wisp_wgpu_gated_take_input: fused into this product */
    qin_pend f = q->taken;
    q->taken.kind = 0;
    rec_q4k_matvec(be, W, x, x_row0, n, y, accumulate, &f);
    wisp_wgpu_int_stats(be)->input_fused++;
    return;
  }
  q4k_pend pd = {1, W, nx, nxo, x, nw, eps, y};
  if (n == 1 && x_row0 == 0 && !accumulate && wisp_wgpu_int_fuse(be) && !wisp_wgpu_int_has_error(be)) {
    q->pend = pd; /* held back: a consumer may fuse it */
    return;
  }
  if (nx) {
    rec_q4k_fused(be, q, W, 0, W->rows, &pd, accumulate, 0, NULL, NULL, 0, geo_of(be, W, 0, 0, 0, -1));
    return;
  }
  wisp_wgpu_q4k_matmul(be, W, x, x_row0, n, y, accumulate);
}

void wisp_wgpu_gated_emit(wisp_backend *be) {
  gated_state *q = *wisp_wgpu_int_gated_slot(be);
  if (q && q->fin.kind) {
    qin_pend f = q->fin;
    q->fin.kind = 0;
    rec_input_op(be, &f);
  }
  if (!q || !q->pend.active) return;
  q4k_pend pd = q->pend;
  q->pend.active = 0;
  if (pd.nx) rec_q4k_fused(be, q, pd.W, 0, pd.W->rows, &pd, 0, 0, NULL, NULL, 0, geo_of(be, pd.W, 0, 0, 0, -1));
  else wisp_wgpu_q4k_matmul(be, pd.W, pd.x, 0, 1, pd.y, 0);
}

/* fusedFfnQ4K: the held-back gate/up product and this SwiGLU in one dispatch. */
int wisp_wgpu_gated_swiglu(wisp_backend *be, const wisp_buf *gu, int n, int ffn, wisp_buf *out) {
  gated_state *q = *wisp_wgpu_int_gated_slot(be);
  const wisp_backend_settings *s = wisp_wgpu_int_settings(be);
  if (!q || !q->pend.active || !s->ffn_q4k || q->pend.y != gu || n != 1 || q->pend.W->rows != 2 * ffn)
    return 0;
  int row0, prow;
  WGPUBuffer wb;
  if (!wisp_wgpu_int_mat_part(be, q->pend.W, 0, &row0, &prow, &wb) || prow != q->pend.W->rows) return 0; /* one part */
  if (out == gu || out == q->pend.x || (q->pend.nx && (out == q->pend.nx || out == q->pend.nxo))) return 0;
  q4k_pend pd = q->pend;
  q->pend.active = 0;
  rec_q4k_fused(be, q, pd.W, 0, ffn, &pd, 0, ffn, out, NULL, 0,
                geo_of(be, pd.W, s->ffn_wg, s->ffn_cols, s->ffn_tpc, s->ffn_full_block));
  return 1;
}

/* useGreedyLmHeadArgmaxFusion for a Q4_K head (lmHeadArgmaxQ4K geometry). */
int wisp_wgpu_gated_head_argmax(wisp_backend *be, const wisp_buf *logits, int vocab, int greedy, const wisp_buf *ids) {
  gated_state *q = *wisp_wgpu_int_gated_slot(be);
  const wisp_backend_settings *s = wisp_wgpu_int_settings(be);
  if (!q || !q->pend.active || !greedy || !wisp_wgpu_int_fuse_argmax(be) || q->pend.y != logits ||
      q->pend.W->rows != vocab || logits == ids || q->pend.x == ids || q->pend.nx == ids)
    return 0;
  q4k_pend pd = q->pend;
  q->pend.active = 0;
  qgeo g = geo_of(be, pd.W, 0, s->head_cols ? s->head_cols : 128, s->head_tpc ? s->head_tpc : 2, s->head_full_block);
  uint64_t total = 0;
  int row0, prow;
  WGPUBuffer wb;
  for (int i = 0; wisp_wgpu_int_mat_part(be, pd.W, i, &row0, &prow, &wb); i++) total += cdiv((uint64_t)prow, g.cols);
  WGPUBuffer am = wisp_wgpu_int_amax(be, (uint32_t)total);
  if (!am) return 0;
  rec_q4k_fused(be, q, pd.W, 0, pd.W->rows, &pd, 0, 0, NULL, am, 0, g);
  return 1;
}

/* The held-back in_proj product of a one-token gated_deltanet: one product, or the
 * [qkv | z | b | a] row ranges as separate products (QKVZ / AB projection fusion off). */
static void deltanet_in_proj(wisp_backend *be, gated_state *q, const wisp_deltanet_args *a) {
  const wisp_backend_settings *s = wisp_wgpu_int_settings(be);
  const int K = a->k_heads * a->k_dim, V = a->v_heads * a->v_dim;
  q4k_pend pd = q->pend;
  q->pend.active = 0;
  int cut[6], nc = 0;
  cut[nc++] = 0;
  if (!s->lin_qkvz) cut[nc++] = 2 * K + V;
  if (!s->lin_qkvz || !s->lin_ab) cut[nc++] = 2 * K + 2 * V;
  if (!s->lin_ab) cut[nc++] = 2 * K + 2 * V + a->v_heads;
  cut[nc++] = pd.W->rows;
  qgeo g = geo_of(be, pd.W, 0, 0, 0, -1);
  if (nc == 2 && !pd.nx) { /* one product, nothing fused: the matrix's own kernel choice */
    wisp_wgpu_q4k_matmul(be, pd.W, pd.x, 0, 1, pd.y, 0);
    return;
  }
  for (int i = 0; i + 1 < nc; i++) rec_q4k_fused(be, q, pd.W, cut[i], cut[i + 1], &pd, 0, 0, NULL, NULL, 0, g);
}
