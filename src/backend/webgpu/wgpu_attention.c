/* Attention of the WebGPU backend (backend.h attention, attention_rows):
 * one token by attn_decode.wgsl (norm, rope, cache append and attention in
 * one dispatch, keys split over workgroups and merged by attn_combine or,
 * where the graph fuses it, by the product reading the output), several by attn_rope + attn_flash (or attn_prefill);
 * a batched step's rows by attn_decode_rows (+ attn_combine_rows). */
#include "backend/webgpu/wgpu_attention.h"

#include <math.h>
#include <string.h>

#include "backend/webgpu/wgpu_attention_long.h"
#include "backend/webgpu/wgpu_attention_tiled.h"
#include "backend/webgpu/wgpu_core.h"
#include "util/err.h"

#define ATTN_WG 64
#define ATTN_DEC_KT 32 /* keys per tile of attn_decode.wgsl */
/* threads of attn_combine.wgsl with WIDE = 1 (attn_merge_wide.wgsli: the
 * long kernel's splits shared out over them) */
#define ATTN_MERGE_WIDE_WG 256
/* attn_prefill.wgsl: query tokens per workgroup, keys per shared tile, most head dimensions */
#define ATTN_PREFILL_QB 64
#define ATTN_PREFILL_KT 32
#define ATTN_PREFILL_MAXD 64

static void rec_attn_merge(wgpu_backend *g, int heads, int head_dim, int splits, const wisp_buf *out, int wide);
static void emit_merge(wisp_backend *be, const wisp_wgpu_tail *t) {
  rec_attn_merge(as_g(be), t->heads, t->hd, t->splits, t->out, 0);
}

void wisp_wgpu_attention_rec(wisp_backend *be, const wisp_attention_args *a, wisp_wgpu_tail *tail) {
  wgpu_backend *g = as_g(be);
  wisp_wgpu_state_op(be);
  const int D = a->head_dim, H = a->heads, KVH = a->kv_heads;
  if (D <= 0 || D % (g->kv16 ? 8 : 4) || D > 4 * ATTN_WG || D > 256 || KVH <= 0 || H % KVH) {
    wisp_wgpu_op_fail(g, WISP_EUNSUPPORTED, "attention with %d heads, %d kv heads, head dim %d", H, KVH, D);
    return;
  }
  /* q/k norms are optional (NULL: that norm is left out, QNORM / KNORM 0,
   * a placeholder bound in its place) */
  wvec *qn = a->q_norm ? wisp_wgpu_need_vec(g, a->q_norm) : NULL, *kn = a->k_norm ? wisp_wgpu_need_vec(g, a->k_norm) : NULL;
  if ((a->q_norm && !qn) || (a->k_norm && !kn)) return;
  wvec *cs = wisp_wgpu_need_vec(g, a->rope_cos), *sn = cs ? wisp_wgpu_need_vec(g, a->rope_sin) : NULL;
  if (!sn) return;
  const WGPUBuffer qnb = qn ? qn->g.b : g->dummy.b, knb = kn ? kn->g.b : g->dummy.b;
  const double qnorm = qn ? 1 : 0, knorm = kn ? 1 : 0;
  if (!wisp_wgpu_scratch(g, &g->qbuf, (uint64_t)a->n * H * D * 4, (uint64_t)64 * H * D * 4, "wisp queries")) return;
  const float scale = a->scale > 0 ? a->scale : 1.0f / sqrtf((float)D);
  const double pairs = a->rope_pairs; /* PAIRS: which dims rotate together (rope_pair.wgsli) */
  wisp_wgpu_const c[5] = {{"WG", ATTN_WG}, {"KV16", g->kv16 ? 1 : 0}, {"QNORM", qnorm}, {"KNORM", knorm},
                          {"PAIRS", pairs}};
  struct {
    uint32_t n, pos0, H, KVH, D;
    float f;
    uint32_t pad[2];
  } p = {(uint32_t)a->n, (uint32_t)a->pos0, (uint32_t)H, (uint32_t)KVH, (uint32_t)D, a->eps, {0, 0}};
  wisp_wgpu_binding br[8] = {whole(a->qkv->g.b), whole(qnb),           whole(knb),             whole(cs->g.b),
                             whole(sn->g.b),     whole(g->qbuf.b),      bind_of(a->k_cache),    bind_of(a->v_cache)};
  /* Many keys: attn_rope (q out, k and v into the caches), then a workgroup
   * per KV head and split (wgpu_attention_long.c), merged as below. */
  if (a->n == 1 && wisp_wgpu_attn_long_wanted(g, a->pos0, a->window, H, KVH, D)) {
    wisp_wgpu_record(g, wisp_wgpu_pipeline(g, "attn_rope", c, 5), br, 8, &p, sizeof p, (uint32_t)(H + 2 * KVH), 1);
    const uint32_t ls = wisp_wgpu_attn_long(g, g->qbuf.b, bind_of(a->k_cache), bind_of(a->v_cache), &g->part,
                                            a->pos0, a->window, H, KVH, D, scale);
    if (!ls) return;
    if (tail && g->sg && ls <= g->max_splits)
      *tail = (wisp_wgpu_tail){.kind = 3, .aux = g->part.b, .out = a->out, .heads = H, .hd = D,
                               .splits = (int)ls, .emit = emit_merge};
    else
      rec_attn_merge(g, H, D, (int)ls, a->out, 1);
    return;
  }
  /* Flash-decoding: one token over more than one 64-key tile is split over
   * up to max_splits workgroups per head, merged by attn_combine. */
  const int dec = a->n == 1 && g->attn_fuse; /* attn_decode.wgsl: KT-key tiles */
  /* a sliding window: the decode kernel's tiles cover only the window's keys */
  const int keys = dec && a->window > 0 && a->pos0 + 1 > a->window ? a->window : a->pos0 + a->n;
  const uint32_t ntile = (uint32_t)(keys - 1) / (dec ? ATTN_DEC_KT : ATTN_WG) + 1;
  const uint32_t win = a->window > 0 ? (uint32_t)a->window : 0;
  uint32_t tps = 0xFFFFFFFFu;
  const uint32_t rule = wisp_wgpu_split_rule(g), most = wisp_wgpu_split_most(rule);
  const uint32_t splits = a->n == 1 ? wisp_wgpu_key_splits(ntile, rule, &tps) : 1;
  if (a->n == 1) g->stats.attn_splits += splits;
  if (splits > 1 &&
      !wisp_wgpu_scratch(g, &g->part, (uint64_t)H * splits * (D + 2) * 4, (uint64_t)H * most * (D + 2) * 4,
               "wisp attention splits"))
    return;
  /* KV16: the caches hold f16 pairs packed in u32 words (kv_buf_new
   * allocates half-size buffers; an f32-sized one uses its first half). */
  if (dec) {
    /* Decode: norm + rope + cache append + attention in one dispatch; 256
     * threads: WG / D key groups of a thread per head dimension. */
    uint32_t wg = 256; /* >= D (checked above), a multiple of the subgroup size */
    wisp_wgpu_const cd[5] = {{"WG", wg}, {"KV16", g->kv16 ? 1 : 0}, {"QNORM", qnorm}, {"KNORM", knorm},
                             {"PAIRS", pairs}};
    wisp_wgpu_kernel *kd = wisp_wgpu_pipeline(g, "attn_decode", cd, 5);
    struct {
      uint32_t pos, H, KVH, D;
      float eps, scale;
      uint32_t splits, tps, win, pad[3];
    } pd = {(uint32_t)a->pos0, (uint32_t)H, (uint32_t)KVH, (uint32_t)D, a->eps, scale, splits, tps, win, {0, 0, 0}};
    wisp_wgpu_binding bd[9] = {whole(a->qkv->g.b),     whole(qnb),             whole(knb),
                               whole(cs->g.b),         whole(sn->g.b),         bind_of(a->k_cache),
                               bind_of(a->v_cache),    whole(a->out->g.b),     whole(splits > 1 ? g->part.b : g->dummy_rw.b)};
    wisp_wgpu_record_xyz(g, kd, bd, 9, &pd, sizeof pd, (uint32_t)H, 1, splits);
  } else {
    wisp_wgpu_kernel *kr = wisp_wgpu_pipeline(g, "attn_rope", c, 5);
    wisp_wgpu_kernel *kf = wisp_wgpu_pipeline(g, "attn_flash", c, 2);
    wisp_wgpu_record(g, kr, br, 8, &p, sizeof p, (uint32_t)(H + 2 * KVH), (uint32_t)a->n);
    struct {
      uint32_t n, pos0, H, KVH, D;
      float scale;
      uint32_t splits, tps, win, pad[3];
    } pf = {(uint32_t)a->n, (uint32_t)a->pos0, (uint32_t)H, (uint32_t)KVH, (uint32_t)D, scale, splits, tps, win,
            {0, 0, 0}};
    wisp_wgpu_binding bf[5] = {whole(g->qbuf.b), bind_of(a->k_cache), bind_of(a->v_cache), whole(a->out->g.b),
                               whole(splits > 1 ? g->part.b : g->dummy_rw.b)};
    if (splits == 1 && !win && scale == 1.0f / sqrtf((float)D) &&
        wisp_wgpu_attn_tiled(g, g->qbuf.b, bind_of(a->k_cache), bind_of(a->v_cache), a->out->g.b, a->n, a->pos0, H,
                             KVH, D)) {
      /* attn_flash_tiled.wgsl (tuning attnPrefill=2; every key, the default scale): recorded */
    } else if (splits == 1 && a->n > 1 && D <= ATTN_PREFILL_MAXD && g->attn_prefill == 1 && !win &&
        (uint64_t)ATTN_PREFILL_KT * ATTN_PREFILL_MAXD * 8 <= g->d->info.max_compute_workgroup_storage_size) {
      /* attn_prefill.wgsl: a workgroup per 64 query tokens of a head sharing key/value tiles */
      wisp_wgpu_const cp[3] = {{"QB", ATTN_PREFILL_QB}, {"KT", ATTN_PREFILL_KT}, {"KV16", g->kv16 ? 1 : 0}};
      wisp_wgpu_kernel *kp = wisp_wgpu_pipeline(g, "attn_prefill", cp, 3);
      wisp_wgpu_record_xyz(g, kp, bf, 4, &pf, sizeof pf, (uint32_t)H, cdiv((uint64_t)a->n, ATTN_PREFILL_QB), 1);
    } else {
      wisp_wgpu_record_xyz(g, kf, bf, 5, &pf, sizeof pf, (uint32_t)H, (uint32_t)a->n, splits);
    }
  }
  if (splits > 1) {
    /* The product reading out may merge the splits itself (PRE 3): every
     * one of its workgroups reads all the partials, so only up to the short
     * cap; the long rule's many splits are merged once by attn_combine. */
    if (tail && g->sg && D % 4 == 0 && splits <= g->max_splits) {
      *tail = (wisp_wgpu_tail){.kind = 3, .aux = g->part.b, .out = a->out, .heads = H, .hd = D,
                               .splits = (int)splits, .emit = emit_merge};
      return;
    }
    rec_attn_merge(g, H, D, (int)splits, a->out, 0);
  }
}

/* attn_combine.wgsl: one token's heads merged from their splits in g->part
 * into out (wide: the splits shared out over the workgroup, WIDE = 1). */
static void rec_attn_merge(wgpu_backend *g, int heads, int head_dim, int splits, const wisp_buf *out, int wide) {
  wisp_wgpu_const c[2] = {{"WG", wide ? ATTN_MERGE_WIDE_WG : ATTN_WG}, {"WIDE", wide}};
  wisp_wgpu_kernel *kc = wisp_wgpu_pipeline(g, "attn_combine", c, 2);
  struct {
    uint32_t n, H, D, splits;
  } pc = {1, (uint32_t)heads, (uint32_t)head_dim, (uint32_t)splits};
  wisp_wgpu_binding bc[2] = {whole(g->part.b), whole(out->g.b)};
  wisp_wgpu_record(g, kc, bc, 2, &pc, sizeof pc, (uint32_t)heads, 1);
}

/* The split of a one-token decode attention at position pos (g_attention). */
static uint32_t attn_splits_at(const wgpu_backend *g, int pos, uint32_t *tps) {
  return wisp_wgpu_key_splits((uint32_t)pos / ATTN_DEC_KT + 1, wisp_wgpu_split_rule(g), tps);
}

/* attn_decode_rows.wgsl (+ attn_combine_rows.wgsl where a row's position
 * is split): every row's attention as the one-token decode attention
 * (attn_decode.wgsl) computes it, on its own slot's caches. Needs what
 * attn_decode needs (subgroups, 9 storage bindings); else 0. */
static int g_attention_rows(wisp_backend *be, const wisp_attention_args *a, const wisp_mixer_rows *rows) {
  wgpu_backend *g = as_g(be);
  const int D = a->head_dim, H = a->heads, KVH = a->kv_heads;
  /* a sliding window's rows run one by one (the rows kernels split every key) */
  if (!g->attn_fuse || rows->n < 1 || rows->n > WISP_WGPU_MIX_ROWS || D <= 0 || D % (g->kv16 ? 8 : 4) || D > 256 ||
      KVH <= 0 || H % KVH || a->window > 0)
    return 0;
  wisp_wgpu_state_op(be);
  wvec *qn = a->q_norm ? wisp_wgpu_need_vec(g, a->q_norm) : NULL, *kn = a->k_norm ? wisp_wgpu_need_vec(g, a->k_norm) : NULL;
  wvec *cs = wisp_wgpu_need_vec(g, a->rope_cos), *sn = cs ? wisp_wgpu_need_vec(g, a->rope_sin) : NULL;
  if ((a->q_norm && !qn) || (a->k_norm && !kn) || !sn) return 1; /* error kept */
  uint32_t most = 1, tps;
  for (int r = 0; r < rows->n; r++) {
    const uint32_t sp = attn_splits_at(g, rows->pos[r], &tps);
    g->stats.attn_splits += sp;
    if (sp > most) most = sp;
  }
  const uint32_t rule = wisp_wgpu_split_rule(g);
  const uint64_t block = (uint64_t)H * wisp_wgpu_split_most(rule) * (D + 2) * 4; /* a row's partials */
  if (most > 1 && !wisp_wgpu_scratch(g, &g->part, block * (uint64_t)rows->n, block * (uint64_t)rows->n, "wisp attention splits"))
    return 1;
  const double qnorm = qn ? 1 : 0, knorm = kn ? 1 : 0;
  wisp_wgpu_const cd[5] = {{"WG", 256}, {"KV16", g->kv16 ? 1 : 0}, {"QNORM", qnorm}, {"KNORM", knorm},
                           {"PAIRS", a->rope_pairs}};
  wisp_wgpu_kernel *kd = wisp_wgpu_pipeline(g, "attn_decode_rows", cd, 5);
  wisp_wgpu_const cc[1] = {{"WG", ATTN_WG}};
  wisp_wgpu_kernel *kc = most > 1 ? wisp_wgpu_pipeline(g, "attn_combine_rows", cc, 1) : NULL;
  struct {
    uint32_t H, KVH, D, count;
    float eps, scale;
    uint32_t max_splits, win;
    uint32_t rows[WISP_WGPU_MIX_ROWS][4];
  } p;
  struct {
    uint32_t H, D, count, max_splits;
    uint32_t rows[WISP_WGPU_MIX_ROWS][4];
  } pc;
  memset(&p, 0, sizeof p);
  memset(&pc, 0, sizeof pc);
  unsigned char done[WISP_WGPU_MIX_ROWS] = {0};
  WGPUBuffer kb, vb;
  while ((p.count = wisp_wgpu_rows_group(rows, done, p.rows, &kb, &vb)) > 0) {
    p.H = (uint32_t)H;
    p.KVH = (uint32_t)KVH;
    p.D = (uint32_t)D;
    p.eps = a->eps;
    p.scale = a->scale > 0 ? a->scale : 1.0f / sqrtf((float)D);
    p.max_splits = rule;
    uint32_t z = 1;
    for (uint32_t i = 0; i < p.count; i++) {
      const uint32_t sp = attn_splits_at(g, (int)p.rows[i][3], &tps);
      if (sp > z) z = sp;
    }
    wisp_wgpu_binding bd[9] = {whole(a->qkv->g.b),
                               whole(qn ? qn->g.b : g->dummy.b),
                               whole(kn ? kn->g.b : g->dummy.b),
                               whole(cs->g.b),
                               whole(sn->g.b),
                               whole(kb),
                               whole(vb),
                               whole(a->out->g.b),
                               whole(most > 1 ? g->part.b : g->dummy_rw.b)};
    wisp_wgpu_record_xyz(g, kd, bd, 9, &p, sizeof p, (uint32_t)H, p.count, z);
    if (z > 1) {
      pc.H = (uint32_t)H;
      pc.D = (uint32_t)D;
      pc.count = p.count;
      pc.max_splits = rule;
      memcpy(pc.rows, p.rows, sizeof pc.rows);
      wisp_wgpu_binding bc[2] = {whole(g->part.b), whole(a->out->g.b)};
      wisp_wgpu_record(g, kc, bc, 2, &pc, sizeof pc, (uint32_t)H, p.count);
    }
  }
  return 1;
}


static void g_attention(wisp_backend *be, const wisp_attention_args *a) { wisp_wgpu_attention_rec(be, a, NULL); }

void wisp_wgpu_attention_install(wisp_backend *vt) {
  vt->attention = g_attention;
  vt->attention_rows = g_attention_rows;
}
