/* Tiled flash-attention prefill (kernels/attn_flash_tiled.wgsl): query
 * tiles of the KV head's grouped query heads against key tiles in
 * workgroup memory, an online softmax per query row, a row's dot products
 * summed over TPQ lanes of a subgroup. Chosen with tuning attnPrefill=2 on
 * devices with subgroups; attn_flash.wgsl otherwise (the fallback). */
#include "backend/webgpu/wgpu_attention_tiled.h"

#include <math.h>

#define TILED_WG 128  /* threads a workgroup: WG / TPQ query rows */
#define TILED_MAXS4 16 /* attn_flash_tiled.wgsl's MAXS4: vec4s of a row's q (and of its out) a lane holds */
#define TILED_MAXKT 32 /* its MAXKT */

/* Lanes a query row: enough that a lane's slice of the row fits its
 * registers, TILED_MAXS4 vec4s of q and of out. */
static uint32_t row_lanes(uint32_t d4) {
  uint32_t tpq = 4;
  while (tpq < 32 && d4 > tpq * TILED_MAXS4) tpq *= 2;
  return tpq;
}

/* Keys a tile: K and V tiles of 16 KiB together at most. */
static uint32_t key_tile(int D) {
  uint32_t kt = TILED_MAXKT;
  while (kt > 1 && 2ull * kt * (uint64_t)D * 4 > 16384) kt /= 2;
  return kt;
}

uint32_t wisp_wgpu_attn_tiled_rows(const wgpu_backend *g, int D, uint32_t *lanes) {
  if (g->attn_prefill != 2 || !g->sg || D <= 0 || D % 4 || D > 256) return 0;
  const uint32_t d4 = (uint32_t)D / 4, sgmin = g->d->info.subgroup_min_size;
  /* A lane group's rows (tuning attnRows; unset, two for head dim 256,
   * where they measured faster, else one). Two rows take twice a row's
   * lanes, so a workgroup holds as many rows as with one: more rows a
   * workgroup would make the causal tail (the last rows' workgroups walk
   * every key) twice as long. One row where the group would pass 32 lanes
   * or the smallest subgroup; a group's lanes within one subgroup. */
  uint32_t rpl = g->attn_rows ? g->attn_rows : D >= 256 ? 2 : 1, tpq = row_lanes(d4) * rpl;
  if (rpl > 1 && (tpq > 32 || d4 % tpq || (sgmin && sgmin < tpq))) rpl = 1, tpq = row_lanes(d4);
  if (d4 % tpq || d4 / tpq > TILED_MAXS4 || (sgmin && sgmin < tpq)) return 0;
  if (2ull * key_tile(D) * (uint64_t)D * 4 > g->d->info.max_compute_workgroup_storage_size) return 0;
  *lanes = tpq;
  return rpl;
}

int wisp_wgpu_attn_tiled(wgpu_backend *g, WGPUBuffer q, wisp_wgpu_binding kc, wisp_wgpu_binding vc, WGPUBuffer out,
                         int n, int pos0, int H, int KVH, int D) {
  uint32_t tpq = 0;
  const uint32_t rpl = n < 2 || KVH <= 0 || H % KVH ? 0 : wisp_wgpu_attn_tiled_rows(g, D, &tpq);
  if (!rpl) return 0;
  const uint32_t d4 = (uint32_t)D / 4, kt = key_tile(D);
  const uint32_t G = (uint32_t)(H / KVH), qb = TILED_WG / tpq * rpl;
  const uint64_t wgs = ((uint64_t)n * G + qb - 1) / qb;
  if (wgs > 65535) return 0;
  wisp_wgpu_const c[7] = {{"WG", TILED_WG}, {"TPQ", tpq}, {"KT", kt},        {"D4", d4},
                          {"G", G},         {"KV16", g->kv16 ? 1 : 0}, {"RPL", rpl}};
  wisp_wgpu_kernel *k = wisp_wgpu_pipeline(g, "attn_flash_tiled", c, 7);
  struct {
    uint32_t n, pos0, H, KVH, D;
    float scale;
    uint32_t splits, tps;
  } p = {(uint32_t)n, (uint32_t)pos0, (uint32_t)H, (uint32_t)KVH, (uint32_t)D, 1.0f / sqrtf((float)D), 1, 0};
  wisp_wgpu_binding b[4] = {whole(q), kc, vc, whole(out)};
  wisp_wgpu_record_xyz(g, k, b, 4, &p, sizeof p, (uint32_t)KVH, (uint32_t)wgs, 1);
  g->stats.prefill_tiled++;
  g->stats.prefill_tiled_two_rows += rpl == 2;
  return 1;
}
