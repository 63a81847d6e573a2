/* Gated DeltaNet of the WebGPU backend (backend.h gated_deltanet,
 * gated_deltanet_rows): one token through dn_decode.wgsl (conv, recurrence
 * and gated norm in one dispatch; a head split over workgroups takes
 * dn_norm.wgsl after it, computed by the out_proj Q4_K product where the
 * graph fuses them and it fits), several through dn_conv and then, from the
 * tuning's dnChunkMin tokens on, the chunked form
 * (wgpu_deltanet_chunked.c), below it dn_recur token by token; a batched
 * step's rows through dn_decode_rows (+ dn_norm_rows). Semantics:
 * backend.h; reference: the CPU backend. */
#include "backend/webgpu/wgpu_deltanet.h"

#include <stdlib.h>
#include <string.h>

#include "backend/webgpu/wgpu_core.h"
#include "backend/webgpu/wgpu_deltanet_chunked.h"
#include "util/err.h"

typedef struct {
  wisp_wgpu_buf cbuf;  /* conv outputs of the current gated_deltanet call */
  wisp_wgpu_buf dnraw; /* a split decode step's output before its gated norm */
  wisp_wgpu_dn_chunk_bufs chunk; /* the chunked form's scratch */
} deltanet_state;

static deltanet_state *state_of(wisp_backend *be) {
  wgpu_backend *g = as_g(be);
  if (!g->deltanet) {
    g->deltanet = calloc(1, sizeof(deltanet_state));
    if (!g->deltanet) wisp_wgpu_op_fail(g, WISP_ENOMEM, "out of memory");
  }
  return g->deltanet;
}

void wisp_wgpu_deltanet_free(wisp_backend *be) {
  wgpu_backend *g = as_g(be);
  deltanet_state *q = g->deltanet;
  if (!q) return;
  wisp_wgpu_scratch_free(as_g(be), &q->cbuf);
  wisp_wgpu_scratch_free(as_g(be), &q->dnraw);
  wisp_wgpu_scratch_free(as_g(be), &q->chunk.prep);
  wisp_wgpu_scratch_free(as_g(be), &q->chunk.raw);
  free(q);
  g->deltanet = NULL;
}

/* The gated norm over a split step's whole heads (dn_norm.wgsl)
 * on its own, when no Q4_K product took it (wisp_wgpu_tail kind 1). */
static void emit_norm(wisp_backend *be, const wisp_wgpu_tail *f) {
  uint32_t wg = 32;
  while (wg < (uint32_t)f->hd && wg < 256) wg <<= 1;
  wisp_wgpu_const cn[1] = {{"WG", wg}};
  wisp_wgpu_kernel *kn = wisp_wgpu_pipeline(as_g(be), "dn_norm", cn, 1);
  struct {
    uint32_t vh, dv, zoff;
    float eps;
  } pn = {(uint32_t)f->heads, (uint32_t)f->hd, (uint32_t)f->zoff, f->eps};
  wisp_wgpu_binding bn[4] = {whole(f->src), whole(f->nw), whole(f->aux), whole(f->out->g.b)};
  wisp_wgpu_record_xyz(as_g(be), kn, bn, 4, &pn, sizeof pn, (uint32_t)f->heads, 1, 1);
}

/* dn_recur.wgsl geometry: CW columns (a power of two >=
 * v_dim) times IG row groups, each thread holding ceil(k_dim / IG) <= 32
 * state rows of its column. 0 (error kept) when the head does not fit. */
static int dn_geometry(wisp_backend *be, const wisp_deltanet_args *a, uint32_t *cw_out, uint32_t *ig_out) {
  uint32_t cw = 1, maxinv = as_g(be)->d->info.max_compute_invocations_per_workgroup;
  while (cw < (uint32_t)a->v_dim) cw <<= 1;
  uint32_t ig = 1;
  while (ig < 32 && cw * ig * 2 <= maxinv && cw * ig * 2 <= 1024 && (uint32_t)a->k_dim > ig * 16) ig <<= 1;
  if (cw > maxinv || ((uint32_t)a->k_dim + ig - 1) / ig > 32) {
    wisp_wgpu_op_fail(as_g(be), WISP_EUNSUPPORTED, "gated_deltanet: v_dim %d x k_dim %d does not fit a workgroup of %u", a->v_dim, a->k_dim, maxinv);
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
  const wisp_wgpu_dn_tuning *t = &as_g(be)->dn_tune;
  uint32_t lim = as_g(be)->d->info.max_compute_invocations_per_workgroup;
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

/* One token through dn_decode.wgsl (and dn_norm.wgsl when a head is split
 * over several workgroups); 0 (nothing recorded) when the kernel cannot
 * take it. */
static int deltanet_decode(wisp_backend *be, const wisp_deltanet_args *a, WGPUBuffer taps, WGPUBuffer al,
                           WGPUBuffer dt, WGPUBuffer nw, wisp_wgpu_tail *tail) {
  dn_split g;
  /* MAXL 8 conv taps; subgroup sums */
  if (a->n != 1 || !as_g(be)->set.deltanet_core || !as_g(be)->fuse || a->conv_len > 8 ||
      !as_g(be)->sg || !dn_split_geometry(be, a, &g))
    return 0;
  const int K = a->k_heads * a->k_dim, V = a->v_heads * a->v_dim;
  wisp_wgpu_const cd[3] = {{"WG", g.cw * g.ig}, {"CW", g.cw}, {"NJ", g.nj}};
  wisp_wgpu_kernel *kd = wisp_wgpu_pipeline(as_g(be), "dn_decode", cd, 3);
  struct {
    uint32_t kh, vh, dk, dv, L, pos, ns;
    float eps;
  } pd = {(uint32_t)a->k_heads, (uint32_t)a->v_heads, (uint32_t)a->k_dim, (uint32_t)a->v_dim, (uint32_t)a->conv_len,
          (uint32_t)a->pos0, g.ns, a->eps};
  WGPUBuffer proj = a->proj->g.b, out = a->out->g.b;
  /* split heads: the raw output goes to dnraw, the gated norm follows */
  deltanet_state *q = state_of(be);
  if (g.ns > 1 && (!q || !wisp_wgpu_scratch(as_g(be), &q->dnraw, (uint64_t)V * 4, (uint64_t)V * 4, "wisp deltanet raw")))
    return 1; /* failure kept */
  wisp_wgpu_binding bd[8] = {whole(proj), whole(taps), bind_of(a->conv_state), whole(al), whole(dt),
                             whole(nw), bind_of(a->state), whole(g.ns > 1 ? q->dnraw.b : out)};
  uint32_t gx, gy;
  wisp_wgpu_grid(as_g(be)->d, (uint32_t)a->v_heads * g.ns, &gx, &gy);
  wisp_wgpu_record_xyz(as_g(be), kd, bd, 8, &pd, sizeof pd, gx, gy, 1);
  if (g.ns > 1) { /* the gated norm over each whole head: left to the out_proj product where the graph fuses them */
    const wisp_wgpu_tail t = {1, q->dnraw.b, proj, nw, a->out, a->v_heads, a->v_dim, 2 * K + V, 0, a->eps, emit_norm};
    if (tail) *tail = t;
    else emit_norm(be, &t);
    as_g(be)->stats.deltanet_split++;
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
static int g_gated_deltanet_rows(wisp_backend *be, const wisp_deltanet_args *a, const wisp_mixer_rows *rows) {
  dn_split g;
  if (rows->n < 1 || rows->n > WISP_WGPU_MIX_ROWS || a->k_heads <= 0 || a->v_heads % a->k_heads || a->k_dim <= 0 ||
      a->k_dim > 256 || a->v_dim <= 0 || a->conv_len < 1 || a->conv_len > 8 || !as_g(be)->set.deltanet_core ||
      !as_g(be)->fuse || !as_g(be)->sg || !dn_split_geometry(be, a, &g))
    return 0;
  wisp_wgpu_state_op(be);
  deltanet_state *q = state_of(be);
  if (!q) return 1;
  WGPUBuffer taps = wisp_wgpu_vec_buffer(as_g(be), a->conv_taps), al = taps ? wisp_wgpu_vec_buffer(as_g(be), a->a_log) : NULL;
  WGPUBuffer dt = al ? wisp_wgpu_vec_buffer(as_g(be), a->dt_bias) : NULL, nw = dt ? wisp_wgpu_vec_buffer(as_g(be), a->norm) : NULL;
  if (!nw) return 1; /* error kept */
  const int K = a->k_heads * a->k_dim, V = a->v_heads * a->v_dim, prow = 2 * K + 2 * V + 2 * a->v_heads;
  if (g.ns > 1 && !wisp_wgpu_scratch(as_g(be), &q->dnraw, (uint64_t)rows->n * V * 4, (uint64_t)rows->n * V * 4, "wisp deltanet raw"))
    return 1;
  WGPUBuffer proj = a->proj->g.b, out = a->out->g.b;
  wisp_wgpu_const cd[3] = {{"WG", g.cw * g.ig}, {"CW", g.cw}, {"NJ", g.nj}};
  wisp_wgpu_kernel *kd = wisp_wgpu_pipeline(as_g(be), "dn_decode_rows", cd, 3);
  struct {
    uint32_t kh, vh, dk, dv, L, ns;
    float eps;
    uint32_t count, prow, pad[3];
    uint32_t rows[WISP_WGPU_MIX_ROWS][4];
  } p;
  memset(&p, 0, sizeof p);
  unsigned char done[WISP_WGPU_MIX_ROWS] = {0};
  WGPUBuffer cb, sb;
  while ((p.count = wisp_wgpu_rows_group(rows, done, p.rows, &cb, &sb)) > 0) {
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
    wisp_wgpu_record_xyz(as_g(be), kd, bd, 8, &p, sizeof p, (uint32_t)a->v_heads * g.ns, p.count, 1);
  }
  if (g.ns > 1) {
    as_g(be)->stats.deltanet_split++;
    uint32_t wg = 32;
    while (wg < (uint32_t)a->v_dim && wg < 256) wg <<= 1;
    wisp_wgpu_const cn[1] = {{"WG", wg}};
    wisp_wgpu_kernel *kn = wisp_wgpu_pipeline(as_g(be), "dn_norm_rows", cn, 1);
    struct {
      uint32_t vh, dv, zoff;
      float eps;
      uint32_t count, prow, pad0, pad1;
    } pn = {(uint32_t)a->v_heads, (uint32_t)a->v_dim, (uint32_t)(2 * K + V), a->eps, (uint32_t)rows->n,
            (uint32_t)prow, 0, 0};
    wisp_wgpu_binding bn[4] = {whole(proj), whole(nw), whole(q->dnraw.b), whole(out)};
    wisp_wgpu_record_xyz(as_g(be), kn, bn, 4, &pn, sizeof pn, (uint32_t)a->v_heads, (uint32_t)rows->n, 1);
  }
  return 1;
}


void wisp_wgpu_deltanet_rec(wisp_backend *be, const wisp_deltanet_args *a, wisp_wgpu_tail *tail) {
  deltanet_state *q = state_of(be);
  if (!q) return;
  const int K = a->k_heads * a->k_dim, V = a->v_heads * a->v_dim;
  const int cdim = 2 * K + V, row = 2 * K + 2 * V + 2 * a->v_heads;
  if (a->k_heads <= 0 || a->v_heads % a->k_heads || a->k_dim <= 0 || a->k_dim > 256 || a->v_dim <= 0 ||
      a->conv_len < 1 || a->n <= 0 || a->pos0 < 0) {
    wisp_wgpu_op_fail(as_g(be), WISP_EUNSUPPORTED, "gated_deltanet with %d k heads x %d, %d v heads x %d, conv %d, pos %d", a->k_heads, a->k_dim, a->v_heads, a->v_dim, a->conv_len, a->pos0);
    return;
  }
  WGPUBuffer taps = wisp_wgpu_vec_buffer(as_g(be), a->conv_taps), al = taps ? wisp_wgpu_vec_buffer(as_g(be), a->a_log) : NULL;
  WGPUBuffer dt = al ? wisp_wgpu_vec_buffer(as_g(be), a->dt_bias) : NULL, nw = dt ? wisp_wgpu_vec_buffer(as_g(be), a->norm) : NULL;
  if (!nw) return;
  /* the states as the persistent decode left them, and its copies stale */
  wisp_wgpu_state_op(be);
  /* useLinearAttentionFusedDecodeCore: conv + recurrence + gated norm */
  if (deltanet_decode(be, a, taps, al, dt, nw, tail)) return;
  if (!wisp_wgpu_scratch(as_g(be), &q->cbuf, (uint64_t)a->n * cdim * 4, (uint64_t)(a->n > 64 ? a->n : 64) * cdim * 4, "wisp deltanet conv"))
    return;
  WGPUBuffer proj = a->proj->g.b;
  /* a thread per channel and block of TB >= conv_len tokens (dn_conv.wgsl),
   * longer blocks where 16 tokens would need more than a grid dimension */
  uint32_t tb = a->conv_len > 16 ? (uint32_t)a->conv_len : 16;
  const uint32_t maxd = as_g(be)->d->info.max_compute_workgroups_per_dimension;
  if (cdiv((uint64_t)a->n, tb) > maxd) tb = cdiv((uint64_t)a->n, maxd);
  wisp_wgpu_const c[2] = {{"WG", 64}, {"TB", tb}};
  wisp_wgpu_kernel *kc = wisp_wgpu_pipeline(as_g(be), "dn_conv", c, 2);
  struct {
    uint32_t n, cdim, L, row, pos0, pad0, pad1, pad2;
  } pc = {(uint32_t)a->n, (uint32_t)cdim, (uint32_t)a->conv_len, (uint32_t)row, (uint32_t)a->pos0, 0, 0, 0};
  wisp_wgpu_binding bc[4] = {whole(proj), whole(taps), bind_of(a->conv_state), whole(q->cbuf.b)};
  wisp_wgpu_record_xyz(as_g(be), kc, bc, 4, &pc, sizeof pc, cdiv((uint64_t)cdim, 64), cdiv((uint64_t)a->n, tb), 1);
  if (wisp_wgpu_deltanet_chunked_fits(be, a)) {
    wisp_wgpu_deltanet_chunked(be, a, q->cbuf.b, al, dt, nw, &q->chunk);
    return;
  }
  uint32_t cw, ig;
  if (!dn_geometry(be, a, &cw, &ig)) return;
  wisp_wgpu_const cr[2] = {{"WG", cw * ig}, {"CW", cw}};
  wisp_wgpu_kernel *kr = wisp_wgpu_pipeline(as_g(be), "dn_recur", cr, 2);
  struct {
    uint32_t n, kh, vh, dk, dv, row;
    float eps;
    uint32_t pad;
  } pr = {(uint32_t)a->n, (uint32_t)a->k_heads, (uint32_t)a->v_heads, (uint32_t)a->k_dim, (uint32_t)a->v_dim,
          (uint32_t)row, a->eps, 0};
  wisp_wgpu_binding br[7] = {whole(proj), whole(q->cbuf.b), whole(al), whole(dt), whole(nw),
                             bind_of(a->state), whole(a->out->g.b)};
  wisp_wgpu_record_xyz(as_g(be), kr, br, 7, &pr, sizeof pr, (uint32_t)a->v_heads, 1, 1);
}

static void g_gated_deltanet(wisp_backend *be, const wisp_deltanet_args *a) { wisp_wgpu_deltanet_rec(be, a, NULL); }

void wisp_wgpu_deltanet_install(wisp_backend *vt) {
  vt->gated_deltanet = g_gated_deltanet;
  vt->gated_deltanet_rows = g_gated_deltanet_rows;
}
