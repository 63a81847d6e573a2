/* The chunked Gated DeltaNet of the WebGPU backend (wgpu_deltanet_chunked.h;
 * docs/webgpu.md "Short conv and Gated DeltaNet"). dn_recur.wgsl walks a
 * prefill token by token in one workgroup a v-head: a handful of
 * workgroups, each a chain of n dependent steps. Here the call runs in
 * chunks of WISP_WGPU_DN_CHUNK tokens (the CPU backend's algebra,
 * cpu_deltanet.c), in waves of chunks whose scratch fits a budget:
 *   dn_chunk_prep   a workgroup per (v-head, chunk) of the wave, all at once:
 *                   the decays, the grams and the chunk's triangular solve
 *                   (WY form), what the state does not enter;
 *   dn_chunk_state  a workgroup per (v-head, block of value columns): the
 *                   wave's chunks in order, three dense products a chunk,
 *                   the state slice in workgroup memory;
 * then, once for the call, dn_chunk_norm, the gated RMSNorm of every
 * (token, v-head). */
#include "backend/webgpu/wgpu_deltanet_chunked.h"

#include "util/err.h"

/* The most bytes of prep blocks a wave takes (and never more than a
 * binding): 16 v-heads of 128 x 128 fit 25 chunks, 1,600 tokens. */
#define DN_WAVE_BYTES (64u << 20)

/* dn_chunk_prep.wgsl's workgroup memory: 4 KiB of per-token values and
 * reduction space, and `tiles`, which holds the grams' q and k tiles (2 x
 * MAXC x KT floats) and, with FSH, the chunk's F after them (C x C). */
#define DN_PREP_FIXED_BYTES 4096u
#define DN_PREP_GRAM_FLOATS (2u * 64u * 16u)

/* Floats of dn_chunk_prep's tiles: with F in them (fsh), C x C if larger. */
static uint32_t prep_tiles(int fsh) {
  const uint32_t C = WISP_WGPU_DN_CHUNK;
  return fsh && C * C > DN_PREP_GRAM_FLOATS ? C * C : DN_PREP_GRAM_FLOATS;
}

/* The row pitch of W, Qg and Kd in a prep block: k_dim rounded up to 4,
 * so that dn_chunk_state reads them as vec4. */
static uint32_t prep_pitch(const wisp_deltanet_args *a) { return ((uint32_t)a->k_dim + 3) & ~3u; }

/* Floats of one (chunk, v-head) prep block: W, Qg, Kd [C][pitch], U'
 * [C][dv], M and F [C][C], gamma_last (dn_chunk_prep.wgsl), padded to 16
 * bytes (C is a multiple of 4, so every part starts on a vec4). */
static uint64_t prep_floats(const wisp_deltanet_args *a) {
  const uint64_t C = WISP_WGPU_DN_CHUNK;
  return C * (3 * (uint64_t)prep_pitch(a) + (uint64_t)a->v_dim + 2 * C) + 4;
}

/* dn_chunk_state's row groups for CB columns: as many as 256 threads
 * allow, at most C / 4 (a thread takes whole vec4 groups of a chunk's
 * rows, dn_chunk_state.wgsl). */
static uint32_t state_row_groups(uint32_t cb) {
  const uint32_t most = WISP_WGPU_DN_CHUNK / 4;
  return 256 / cb < most ? 256 / cb : most;
}

/* Value columns a dn_chunk_state workgroup takes: the tuning's (a power of
 * two, 4..32), fewer where v_dim is smaller or the workgroup memory (the
 * state slice and the chunk's u, each a column's vec4s plus one) would not
 * fit; 0 when even 4 do not. */
static uint32_t state_cols(wisp_backend *be, const wisp_deltanet_args *a) {
  const wgpu_backend *g = as_g(be);
  uint32_t cb = g->dn_tune.chunk_cols;
  const uint64_t col_bytes = 16 * ((uint64_t)prep_pitch(a) / 4 + 1 + WISP_WGPU_DN_CHUNK / 4 + 1);
  while (cb > 4 && cb / 2 >= (uint32_t)a->v_dim) cb /= 2;
  while (cb >= 4 && col_bytes * cb > g->d->info.max_compute_workgroup_storage_size) cb /= 2;
  return cb >= 4 ? cb : 0;
}

int wisp_wgpu_deltanet_chunked_fits(wisp_backend *be, const wisp_deltanet_args *a) {
  const wgpu_backend *g = as_g(be);
  const uint64_t V = (uint64_t)a->v_heads * a->v_dim;
  /* dn_chunk_prep's 256 threads and workgroup memory (without F); k_dim <=
   * 256 (dn_chunk_state: at most 32 state rows a thread); the raw outputs
   * and one chunk's prep blocks within a binding; a grid dimension per
   * v-head */
  return a->n >= (int)g->dn_tune.chunk_min && a->k_dim <= 256 &&
         g->d->info.max_compute_invocations_per_workgroup >= 256 && g->d->info.max_compute_workgroup_size_x >= 256 &&
         g->d->info.max_compute_workgroup_storage_size >= DN_PREP_FIXED_BYTES + 4 * prep_tiles(0) && state_cols(be, a) &&
         (uint64_t)a->n * V * 4 <= g->max_binding && prep_floats(a) * a->v_heads * 4 <= g->max_binding &&
         (uint64_t)a->v_heads * cdiv((uint64_t)a->v_dim, 4) <= g->d->info.max_compute_workgroups_per_dimension;
}

void wisp_wgpu_deltanet_chunked(wisp_backend *be, const wisp_deltanet_args *a, WGPUBuffer cv, WGPUBuffer al,
                                WGPUBuffer dt, WGPUBuffer nw, wisp_wgpu_dn_chunk_bufs *bufs) {
  wgpu_backend *g = as_g(be);
  const uint32_t C = WISP_WGPU_DN_CHUNK, n = (uint32_t)a->n, vh = (uint32_t)a->v_heads;
  const uint32_t dk = (uint32_t)a->k_dim, dv = (uint32_t)a->v_dim;
  const uint32_t K = (uint32_t)a->k_heads * dk, V = vh * dv, row = 2 * K + 2 * V + 2 * vh;
  const uint64_t blk = prep_floats(a), block_bytes = blk * 4 * vh;
  uint64_t budget = DN_WAVE_BYTES < g->max_binding ? DN_WAVE_BYTES : g->max_binding;
  const uint32_t chunks = cdiv(n, C);
  uint32_t wave = (uint32_t)(budget / block_bytes);
  if (wave < 1) wave = 1;
  if (wave > chunks) wave = chunks;
  const uint32_t maxd = g->d->info.max_compute_workgroups_per_dimension;
  if (wave > maxd) wave = maxd;
  if (!wisp_wgpu_scratch(g, &bufs->prep, wave * block_bytes, wave * block_bytes, "wisp deltanet chunks") ||
      !wisp_wgpu_scratch(g, &bufs->raw, (uint64_t)n * V * 4, (uint64_t)n * V * 4, "wisp deltanet raw outputs"))
    return; /* error kept */
  const uint32_t cb = state_cols(be, a), nb = cdiv(dv, cb);
  /* F in workgroup memory where the device allows it (dn_chunk_prep.wgsl: FSH, the same sums) */
  const uint32_t fsh = !g->dn_tune.no_prep_shared &&
                       DN_PREP_FIXED_BYTES + 4 * prep_tiles(1) <= g->d->info.max_compute_workgroup_storage_size;
  wisp_wgpu_const cp[3] = {{"C", C}, {"FSH", fsh}, {"TILES", prep_tiles(fsh)}};
  wisp_wgpu_kernel *kp = wisp_wgpu_pipeline(g, "dn_chunk_prep", cp, 3);
  wisp_wgpu_const cs[5] = {
      {"WG", state_row_groups(cb) * cb}, {"C", C}, {"CB", cb}, {"DK", dk}, {"UNROLL", g->dn_tune.unroll}};
  wisp_wgpu_kernel *ks = wisp_wgpu_pipeline(g, "dn_chunk_state", cs, 5);
  uint32_t wn = 32;
  while (wn < dv && wn < 256) wn <<= 1;
  wisp_wgpu_const cn[1] = {{"WG", wn}};
  wisp_wgpu_kernel *kn = wisp_wgpu_pipeline(g, "dn_chunk_norm", cn, 1);
  if (!kp || !ks || !kn) return;
  for (uint32_t c0 = 0; c0 < chunks; c0 += wave) {
    const uint32_t wc = chunks - c0 < wave ? chunks - c0 : wave, t0 = c0 * C;
    struct {
      uint32_t n, t0, kh, vh, dk, dv, row, blk, dkp, pad0, pad1, pad2;
    } pp = {n, t0, (uint32_t)a->k_heads, vh, dk, dv, row, (uint32_t)blk, prep_pitch(a), 0, 0, 0};
    wisp_wgpu_binding bp[5] = {whole(a->proj->g.b), whole(cv), whole(al), whole(dt), whole(bufs->prep.b)};
    wisp_wgpu_record_xyz(g, kp, bp, 5, &pp, sizeof pp, vh, wc, 1);
    struct {
      uint32_t n, t0, chunks, vh, dv, blk, pad0, pad1;
    } ps = {n, t0, wc, vh, dv, (uint32_t)blk, 0, 0};
    wisp_wgpu_binding bs[3] = {whole(bufs->prep.b), bind_of(a->state), whole(bufs->raw.b)};
    wisp_wgpu_record_xyz(g, ks, bs, 3, &ps, sizeof ps, vh * nb, 1, 1);
  }
  for (uint32_t t0 = 0; t0 < n; t0 += maxd) {
    struct {
      uint32_t t0, vh, dv, zoff, row;
      float eps;
      uint32_t pad0, pad1;
    } pn = {t0, vh, dv, 2 * K + V, row, a->eps, 0, 0};
    wisp_wgpu_binding bn[4] = {whole(a->proj->g.b), whole(nw), whole(bufs->raw.b), whole(a->out->g.b)};
    wisp_wgpu_record_xyz(g, kn, bn, 4, &pn, sizeof pn, vh, n - t0 < maxd ? n - t0 : maxd, 1);
  }
  g->stats.deltanet_chunked++;
}
