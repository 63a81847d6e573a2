/* One-token attention over many keys (kernels/attn_decode_long.wgsl says
 * why it is a kernel of its own). The split: WG-key tiles, as many splits
 * as give about attn_decode_long_wgs workgroups over the KV heads, a split
 * a whole number of tiles. */
#include "backend/webgpu/wgpu_attention_long.h"

#include "util/err.h"

#define LONG_WG 128  /* threads, and keys a tile */
#define LONG_MAXG 8  /* its MAXG */
#define LONG_MAXQ 1024 /* G * D: its MAXQ4 vec4s */

/* The keys the token at pos attends: the window's where one applies. */
static int keys_at(int pos, int win) { return win > 0 && pos + 1 > win ? win : pos + 1; }

int wisp_wgpu_attn_long_wanted(const wgpu_backend *g, int pos, int win, int H, int KVH, int D) {
  const uint32_t min = g->opts.attn_decode_long_min;
  const int keys = keys_at(pos, win);
  if (!min || keys < 0 || (uint32_t)keys < min || !g->sg || KVH <= 0 || H % KVH || D <= 0 || D % 16) return 0;
  const int G = H / KVH, ce = g->kv16 ? 8 : 4;
  /* a value row's threads divide the workgroup; the subgroups are at most
   * the kernel's MAXSG (32) of them */
  const uint32_t sgmin = g->d->info.subgroup_min_size;
  return G <= LONG_MAXG && G * D <= LONG_MAXQ && LONG_WG % (D / ce) == 0 && (!sgmin || LONG_WG / sgmin <= 32);
}

uint32_t wisp_wgpu_attn_long(wgpu_backend *g, WGPUBuffer q, wisp_wgpu_binding kc, wisp_wgpu_binding vc,
                             wisp_wgpu_buf *part, int pos, int win, int H, int KVH, int D, float scale) {
  const uint32_t ntile = (uint32_t)(keys_at(pos, win) - 1) / LONG_WG + 1;
  const uint32_t wgs = g->opts.attn_decode_long_wgs ? g->opts.attn_decode_long_wgs : 1;
  uint32_t want = (wgs + (uint32_t)KVH - 1) / (uint32_t)KVH;
  if (want > ntile) want = ntile;
  if (want < 1) want = 1;
  const uint32_t tps = (ntile + want - 1) / want, splits = (ntile + tps - 1) / tps;
  const uint64_t bytes = (uint64_t)H * splits * (D + 2) * 4;
  if (!wisp_wgpu_scratch(g, part, bytes, bytes, "wisp long attention splits")) return 0;
  wisp_wgpu_const c[4] = {{"WG", LONG_WG}, {"G", H / KVH}, {"D", D}, {"KV16", g->kv16 ? 1 : 0}};
  wisp_wgpu_kernel *k = wisp_wgpu_pipeline(g, "attn_decode_long", c, 4);
  struct {
    uint32_t pos, H, KVH, splits, tps, win;
    float scale;
    uint32_t pad;
  } p = {(uint32_t)pos, (uint32_t)H, (uint32_t)KVH, splits, tps, win > 0 ? (uint32_t)win : 0, scale, 0};
  wisp_wgpu_binding b[4] = {whole(q), kc, vc, whole(part->b)};
  wisp_wgpu_record_xyz(g, k, b, 4, &p, sizeof p, (uint32_t)KVH, splits, 1);
  g->stats.attn_long++;
  g->stats.attn_splits += splits;
  return splits;
}
