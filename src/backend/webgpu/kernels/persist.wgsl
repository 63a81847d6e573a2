// Persistent decode: `steps` greedy decode steps of a graph in ONE dispatch.
// The one-token products of a decode step are too small to fill the GPU, so
// the op-by-op path spends most of a token in dispatch launches and
// ramp-ups; here a fixed grid of p.nwg workgroups (all resident at once:
// the host probes how many fit) walks the whole step, and phases that
// depend on each other are separated by a grid barrier (an atomic counter
// every workgroup adds to and spins on, ~1 us on an H200:
// persist_common.wgsli). Host side: wgpu_persist.c; docs/webgpu.md,
// "Persistent decode".
//
// A step is the list of generic phases the host passes in p.ph (lowered
// from the model's step graph: src/model/graph_lower.c, backend.h
// wisp_decode_phase): each phase stages an input into xs (a norm of x, the
// mixer's output, a merge of attention splits, ...), does one piece of
// work over the whole grid (a product, a short conv, attention, DeltaNet,
// the head) and ends at a grid barrier; the last, the head, ends at the
// token choice. Which phases and weight types the graph has are override
// constants (WORKS, STAGES, TYPES): the code of the others is compiled
// away, so a graph's kernel holds only what it runs.
//
// WGSL guarantees neither that the workgroups of a dispatch run at the same
// time nor any ordering between them; this kernel relies on what the host
// checked on the device (tools/grid_probe.c: plain stores of one workgroup
// seen by plain loads of others after the barrier). A barrier that waits
// longer than spin_max polls sets a flag and gives up instead of hanging;
// the ids of such a run are all 0xffffffff, which the decode loop rejects.
//
// Data: Wv/Wu: one read-only blob (the same buffer twice, as vec4 and as
// words) holding a layer table (LAYER_WORDS words per layer at word 0),
// the matrices (16-byte aligned planes: persist_quant.wgsli), norm
// weights, conv taps, DeltaNet vectors and rope tables. S: the run's state
// as words: the residual x, scratch vectors, per-layer conv states, DeltaNet
// recurrent states. KV: the KV caches (f32, or f16 pairs when kv16), the
// arena's tail bound on its own (the layer table's cache offsets count
// from it), so that the streamed attention (OPT 256) loads 16-byte words
// of them. ctr: [0]
// barrier arrivals (wrapping; the host passes the count before this run),
// [1] timeout flag. ids: the decode loop's id slots.
enable subgroups;
diagnostic(off, subgroup_uniformity);

override PAIRS: u32 = 0u;  // rope pairs: 0 halves, 1 adjacent (rope_pair.wgsli)
override WG: u32 = 256;     // threads per workgroup (a multiple of the subgroup size and of D, <= 256)
override XS4: u32 = 640;    // vec4s of the staged input (the largest staged vector / 4, a multiple of 8)
override MAXSG: u32 = 64;   // most subgroups per workgroup (WG / smallest subgroup size)
// The product engine (persist_products.wgsli): 0 rows in quads, 1 units
// split (with the 16-element input sums in xsum).
override SPLIT: u32 = 0u;
override XSUMN: u32 = 1u;   // floats of xsum: XS4 / 4 with SPLIT, else 1 (unused)
override VSLN: u32 = 1u;    // floats of vsl: CW with DeltaNet phases, else 1 (unused)
// Engine 0's round-trip savers, measured one by one on the H200
// (docs/webgpu.md, "Persistent decode"; the host turns on both): 1 the
// attention merge loads every split first (+31 %), 8 a product's
// residuals are loaded with its weights (+16 %); 16 a split's keys in
// chunks of WG (attn_keys_wide; subgroups of >= 8 lanes); 256 a
// (head, split) task's keys streamed (attn_stream).
override OPT: u32 = 0;
// The attention's head dimension and K/V element type (attn_stream, which
// unrolls its loads by them; the rest reads p.D and p.kv16): HD % 32 == 0
// and HD <= 256 where OPT has 256.
override HD: u32 = 64u;
override KVF16: u32 = 0u;
// 1: a sampled run's kernel (the head keeps its logits, draw_step draws);
// greedy runs take the kernel built with 0, where all of it compiles away.
override DRAW: u32 = 0u;
// The weight types of this graph's matrices, bit 1 << T_* each
// (persist_quant.wgsli). A graph of Q4 / Q4Z only (the seed's) compiles
// the other types' products away.
override TYPES: u32 = 0xffffffffu;
// The phases' works (bit 1 << W_*) and stages (bit 1 << ST_*) the graph has.
override WORKS: u32 = 0xffffffffu;
override STAGES: u32 = 0xffffffffu;
// The phases' flags (bit PF_*) the graph has.
override FLAGS: u32 = 0xffffffffu;
override CW: u32 = 16;      // value columns of a DeltaNet task
override NJ: u32 = 8;       // state rows per thread in a DeltaNet task: ceil(dk / (WG / CW))

const NONE: u32 = 0xffffffffu;
const MAXI: u32 = 32u;      // most DeltaNet state rows per thread (the host checks NJ)
const MAXL: u32 = 8u;       // most DeltaNet conv taps (the host checks)

// The phase kinds: backend.h's wisp_stage_kind and wisp_work_kind. A phase
// word is stage | work << 4 | layer << 8.
const ST_EMBED: u32 = 0u;
const ST_NORM_OP: u32 = 1u;
const ST_NORM_FFN: u32 = 2u;
const ST_NORM_FINAL: u32 = 3u;
const ST_MID: u32 = 4u;
const ST_H: u32 = 5u;
const ST_NONE: u32 = 6u;
const ST_ATTN_MERGE: u32 = 7u;
const ST_ATTN_MERGE_GATE: u32 = 8u;
const ST_GATED_NORM: u32 = 9u;
const W_IN: u32 = 0u;
const W_CONV_IN: u32 = 1u;
const W_QKV: u32 = 2u;
const W_ATTN: u32 = 3u;
const W_ATTN_GATED: u32 = 4u;
const W_DELTANET: u32 = 5u;
const W_OUT: u32 = 6u;
const W_FFN: u32 = 7u;
const W_DOWN: u32 = 8u;
const W_HEAD: u32 = 9u;

// A phase's flags (backend.h WISP_PHASE_FLAG_*), bits 16 and up of its word:
// PF_POST on an output / down product: its rows are stored in y, and the
// next stage (a norm of x) first adds rmsnorm(y) * the layer's post norm
// to x (stage_fold); PF_GELU on the FFN: gelu_tanh(gate) * up.
const PF_POST: u32 = 1u;
const PF_GELU: u32 = 2u;

fn has_work(w: u32) -> bool { return (WORKS & (1u << w)) != 0u; }
fn has_stage(s: u32) -> bool { return (STAGES & (1u << s)) != 0u; }
fn has_flag(f: u32) -> bool { return (FLAGS & f) != 0u; }
// Beside the phase flags: some layer has a sliding window (wgpu_persist_fit.h
// PERSIST_KFLAG_WINDOW).
const KF_WINDOW: u32 = 256u;

// The layer table (wgpu_persist.c, layout): layer l's words at
// l * LAYER_WORDS. 0 mixer kind; 1 op_norm; 2-5 in, 6-9 out, 10-13 gate_up,
// 14-17 down (each q, s, z, type: mat()); 18 ffn_norm; 19 conv taps
// (short conv, DeltaNet) or q_norm; 20 A_log or k_norm; 21 dt_bias or the
// attention in-product's bias (q, k, v rows); 22 the
// gated norm's weight; 23 the conv state / ring or the K cache, 24 the
// recurrent state (arena words) or the V cache (KV words); 25 the input product's
// rows; 26 the output product's columns; 27, 28 the rope cos / sin table
// of a plain attention layer; 29 its sliding window (0: every key); 30, 31
// the mixer's and the FFN's post norm. NONE where a layer has no such
// vector.
const LAYER_WORDS: u32 = 32u;
const MAXPH4: u32 = 161u; // vec4s of phase words: 644 >= 5 * 128 layers + 1

struct Params {
  n_layers: u32, H: u32, F: u32, heads: u32,
  kvh: u32, D: u32, L: u32, vocab: u32,
  eps: f32, pos0: u32, steps: u32, bar_base: u32,
  slot: u32, kv16: u32, spin_max: u32, probe: u32,
  embed_q: u32, embed_s: u32, embed_z: u32, head_q: u32,
  head_s: u32, head_z: u32, fnorm: u32, rope_cos: u32,
  rope_sin: u32, s_x: u32, s_mid: u32, s_h: u32,
  s_q: u32, s_part: u32, barriers_per_step: u32, nsmax: u32,
  s_ao: u32, s_am: u32, nwg: u32, skip: u32, // skip: works left out, bit 1 << W_* (timing probes only)
  bmode: u32, backoff: u32, embed_t: u32, head_t: u32,
  rot_half: u32, lkh: u32, lvh: u32, dk: u32, // rotary dims / 2; DeltaNet heads and dims
  dv: u32, s_big: u32, ns: u32, rp_force: u32, // ns: value-column slices a v-head (ceil(dv / CW)); rp_force: product_u's rp (tests)
  n_phases: u32, escale: f32, ascale: f32, s_y: u32, // the embedding's scale; plain attention's score scale; y
  s_x2: u32, s_logits: u32, s_pick: u32, top_k: u32,  // x's second place (the post-norm folds alternate); a sampled run's logits and token
  seed: u32, temperature: f32, top_p: f32, min_p: f32, // the draw's settings (temperature 0: greedy)
  ph: array<vec4<u32>, MAXPH4>, // the phase words, four a vec4
}

@group(0) @binding(0) var<storage, read> Wv: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> Wu: array<u32>;
@group(0) @binding(2) var<storage, read_write> S: array<u32>;
@group(0) @binding(3) var<storage, read_write> ctr: array<atomic<u32>>;
@group(0) @binding(4) var<storage, read_write> ids: array<u32>;
@group(0) @binding(5) var<storage, read_write> KV: array<vec4<u32>>;
@group(0) @binding(6) var<uniform> p: Params;

var<workgroup> xs: array<vec4<f32>, XS4>;  // the staged input of the current product, vec4 i at xsw(i)
var<workgroup> xsum: array<f32, XSUMN>;    // engine 1: sum of each 16 staged inputs (per-head sums of squares while staging o)
var<workgroup> red: array<f32, MAXSG>;     // per-subgroup partials of a workgroup reduction
var<workgroup> redi: array<u32, MAXSG>;
var<workgroup> hv: array<f32, 256>;        // one head's values (qkv), a chunk's key weights (attention), DeltaNet's q
var<workgroup> qv: array<f32, 256>;        // the query of the head being attended, DeltaNet's k
var<workgroup> acc4: array<f32, 256>;      // score partials, per-group output partials, column sums
var<workgroup> vsl: array<f32, VSLN>;      // DeltaNet: the task's v values
var<workgroup> wuni: u32;                  // a value made workgroup-uniform
var<workgroup> wtok: u32;                  // the token this step embeds

// #include "persist_common.wgsli"

// #include "q4k_scales.wgsli"

// #include "persist_quant.wgsli"

// #include "persist_products.wgsli"

// #include "rope_pair.wgsli"
// #include "persist_mixers.wgsli"

// ---- a sampled run's token ---------------------------------------------------
// Workgroup 0 draws from the head's logits (kept in s_logits by the head
// product) as sample.wgsl does; the others wait at a grid barrier and read
// its pick. One barrier a step more than a greedy run (the host counts it).

var<private> draw_sl: u32; // the subgroup lane and size, for the reductions below
var<private> draw_sgs: u32;

fn draw_logit(i: u32) -> f32 { return sf(i); }

// Workgroup max of (value, index), the lowest index on ties.
fn draw_max(li: u32, v: f32, idx: u32) -> u32 {
  let sm = subgroupMax(v);
  let si = subgroupMin(select(0xffffffffu, idx, v == sm));
  workgroupBarrier();
  if (draw_sl == 0u) {
    red[li / draw_sgs] = sm;
    redi[li / draw_sgs] = si;
  }
  workgroupBarrier();
  var wb = red[0];
  var wi = redi[0];
  for (var i = 1u; i < WG / draw_sgs; i++) {
    if (red[i] > wb || (red[i] == wb && redi[i] < wi)) {
      wb = red[i];
      wi = redi[i];
    }
  }
  return wi;
}

fn draw_sum(li: u32, v: f32) -> f32 { return wg_sum(li, draw_sl, draw_sgs, v); }

// #include "sample_draw.wgsli"

// The step's token: best is the head's argmax (every logit is in s_logits,
// written before argmax_step's barrier); the token takes position pos + 1,
// which seeds its noise as the op-by-op draw's.
fn draw_step(best: u32, pos: u32, step: u32, wid: u32, li: u32) -> u32 {
  if (wid == 0u) {
    let d = Draw(p.vocab, p.top_k, p.seed, pos + 1u, p.temperature, p.top_p, p.min_p);
    let pick = draw_from(li, d, p.s_logits, best);
    if (li == 0u) {
      S[p.s_pick] = pick;
      ids[p.slot + 1u + step] = pick;
    }
  }
  grid_sync(li);
  return uniform_u32(li, S[p.s_pick]);
}

fn lt(l: u32, k: u32) -> u32 { return Wu[l * LAYER_WORDS + k]; }

// The matrix whose 4-word descriptor (q, s, z, type) is at blob word d,
// with `cols` columns.
fn mat(d: u32, cols: u32) -> Mat { return Mat(Wu[d], Wu[d + 1u], Wu[d + 2u], Wu[d + 3u], cols / 32u); }

// ---- staging -----------------------------------------------------------------

// Where vec4 i of the staged input sits in xs: each run of 8 rotated, so
// that the lanes of a product, each reading its own block (engine 0) or
// unit (engine 1), fall in different shared-memory banks
// (tools/phase_probe measured the unrotated reads as the cost of a
// product: a 1,024 x 2,560 product 13 us, the head 87 us on the H200).
// XS4 is a multiple of 8 (the host rounds it), so every run is whole.
fn xsw(i: u32) -> u32 {
  if (SPLIT == 1u) { return q4k_xsw(i); }
  return i ^ ((i >> 3u) & 7u);
}

// Engine 1: the sums of each 16 staged inputs (n % 16 == 0).
fn stage_sums(n: u32, li: u32) {
  workgroupBarrier();
  for (var g = li; g < n / 16u; g += WG) {
    let o = vec4<f32>(1.0);
    xsum[g] = dot(xs[xsw(4u * g)], o) + dot(xs[xsw(4u * g + 1u)], o) + dot(xs[xsw(4u * g + 2u)], o) +
              dot(xs[xsw(4u * g + 3u)], o);
  }
  workgroupBarrier();
}

// Every stage of n values ends here: xs is complete for the product.
fn stage_end(n: u32, li: u32) {
  if (SPLIT == 1u) {
    stage_sums(n, li);
  } else {
    workgroupBarrier();
  }
}

// Stages n values (n % 4 == 0) of S from word `src` into xs; with a norm
// weight offset w != NONE, as rmsnorm(x) * w.
fn stage(src: u32, n: u32, w: u32, li: u32, sli: u32, sgs: u32) {
  var ss = 0.0;
  for (var i = li; i < n / 4u; i += WG) {
    let b = src + 4u * i;
    let v = vec4<f32>(sf(b), sf(b + 1u), sf(b + 2u), sf(b + 3u));
    xs[xsw(i)] = v;
    ss += dot(v, v);
  }
  let tot = wg_sum(li, sli, sgs, ss); // always (a barrier: uniform control flow)
  if (w != NONE) {
    let inv = inverseSqrt(tot / f32(n) + p.eps);
    for (var i = li; i < n / 4u; i += WG) {
      let b = w + 4u * i;
      xs[xsw(i)] = xs[xsw(i)] * inv * vec4<f32>(wf(b), wf(b + 1u), wf(b + 2u), wf(b + 3u));
    }
  }
  stage_end(n, li);
}

// STAGE_EMBED: x = embed[t] * escale: every workgroup dequantizes it into xs and
// norms it with weight nw (no barrier needed); workgroup 0 also keeps it in
// S as the residual, read by the first residual add one barrier later.
fn stage_embed(em: Mat, t: u32, nw: u32, wid: u32, li: u32, sl: u32, sgs: u32) {
  let H = p.H;
  var ss = 0.0;
  for (var b = li; b < em.nb && !is_q4(em); b += WG) {
    for (var j = 0u; j < 8u; j++) {
      let v = deq4(em.t, em, t, b, j) * p.escale;
      xs[xsw(b * 8u + j)] = v;
      ss += dot(v, v);
      if (wid == 0u) {
        for (var k = 0u; k < 4u; k++) { S[p.s_x + b * 32u + 4u * j + k] = bitcast<u32>(v[k]); }
      }
    }
  }
  for (var b = li; b < em.nb && is_q4(em); b += WG) {
    let g = t * em.nb + b;
    let w = Wv[em.q / 4u + g];
    let sc = wf(em.s + g) * p.escale;
    let zp = zpt(em, g);
    for (var j = 0u; j < 4u; j++) {
      let wj = w[j];
      let lo = nib_lo(wj);
      let hi = nib_hi(wj);
      let v0 = (lo - zp) * sc;
      let v1 = (hi - zp) * sc;
      xs[xsw(b * 8u + 2u * j)] = v0;
      xs[xsw(b * 8u + 2u * j + 1u)] = v1;
      ss += dot(v0, v0) + dot(v1, v1);
      if (wid == 0u) {
        for (var k = 0u; k < 4u; k++) {
          S[p.s_x + b * 32u + 8u * j + k] = bitcast<u32>(v0[k]);
          S[p.s_x + b * 32u + 8u * j + 4u + k] = bitcast<u32>(v1[k]);
        }
      }
    }
  }
  let tot = wg_sum(li, sl, sgs, ss);
  let inv0 = inverseSqrt(tot / f32(H) + p.eps);
  for (var i = li; i < H / 4u; i += WG) {
    let b = nw + 4u * i;
    xs[xsw(i)] = xs[xsw(i)] * inv0 * vec4<f32>(wf(b), wf(b + 1u), wf(b + 2u), wf(b + 3u));
  }
  stage_end(H, li);
}

// A norm stage after a post-normed block (PF_POST): x' = x + rmsnorm(y) *
// post, the block's output y normed (S words xsrc, p.s_y; weights at blob
// word post), staged as rmsnorm(x') * w. Every workgroup computes x';
// workgroup 0 keeps it at xdst (not xsrc: the others read that in this
// phase), where the phases after the barrier read x.
fn stage_fold(xsrc: u32, xdst: u32, post: u32, w: u32, wid: u32, li: u32, sli: u32, sgs: u32) {
  let H = p.H;
  var sy = 0.0;
  for (var i = li; i < H / 4u; i += WG) {
    let b = p.s_y + 4u * i;
    let v = vec4<f32>(sf(b), sf(b + 1u), sf(b + 2u), sf(b + 3u));
    xs[xsw(i)] = v;
    sy += dot(v, v);
  }
  let iy = inverseSqrt(wg_sum(li, sli, sgs, sy) / f32(H) + p.eps);
  var sx = 0.0;
  for (var i = li; i < H / 4u; i += WG) {
    let b = xsrc + 4u * i;
    let c = post + 4u * i;
    let x = vec4<f32>(sf(b), sf(b + 1u), sf(b + 2u), sf(b + 3u)) +
            xs[xsw(i)] * iy * vec4<f32>(wf(c), wf(c + 1u), wf(c + 2u), wf(c + 3u));
    xs[xsw(i)] = x;
    sx += dot(x, x);
    if (wid == 0u) {
      for (var k = 0u; k < 4u; k++) { S[xdst + 4u * i + k] = bitcast<u32>(x[k]); }
    }
  }
  let ix = inverseSqrt(wg_sum(li, sli, sgs, sx) / f32(H) + p.eps);
  for (var i = li; i < H / 4u; i += WG) {
    let c = w + 4u * i;
    xs[xsw(i)] = xs[xsw(i)] * ix * vec4<f32>(wf(c), wf(c + 1u), wf(c + 2u), wf(c + 3u));
  }
  stage_end(H, li);
}

// ---- the whole run ---------------------------------------------------------

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid3: vec3<u32>, @builtin(local_invocation_index) li: u32,
        @builtin(subgroup_invocation_id) sl: u32, @builtin(subgroup_size) sgs: u32) {
  let wid = wid3.x;
  draw_sl = sl;
  draw_sgs = sgs;
  let sg = li / sgs;
  let nsgw = WG / sgs;
  let gsg = wid * nsgw + sg;
  let nsg = p.nwg * nsgw;
  if (p.probe != 0u) {
    grid_sync(li);
    return;
  }
  let H = p.H;
  var tok = ids[p.slot];
  if (tok >= p.vocab) { tok = 0u; } // a failed batch's marker (the decode loop drops this run's ids)
  let em = Mat(p.embed_q, p.embed_s, p.embed_z, p.embed_t, H / 32u);
  let hm = Mat(p.head_q, p.head_s, p.head_z, p.head_t, H / 32u);
  for (var step = 0u; step < p.steps; step++) {
    let pos = p.pos0 + step;
    // Where x is: s_x from the embedding on; each post-norm fold moves it to
    // the other place (s_x, s_x2). fold: the next norm stage folds in the
    // block output in y with the post norm at blob word post.
    var xc = p.s_x;
    var fold = false;
    var post = NONE;
    if (li == 0u) { wtok = tok; }
    let t = workgroupUniformLoad(&wtok);
    best = -3.0e38;
    best_i = 0xffffffffu;
    if ((p.skip & (1u << W_HEAD)) != 0u) { best_i = 0u; } // a timing probe without the head: token 0, not a failed run's marker
    for (var ph = 0u; ph < p.n_phases; ph++) {
      let w = p.ph[ph / 4u][ph % 4u];
      let st = w & 15u;
      let wk = (w >> 4u) & 15u;
      let l = (w >> 8u) & 255u;
      let fl = w >> 16u;
      let lw = l * LAYER_WORDS;
      // The staged input.
      if (st == ST_EMBED) {
        stage_embed(em, t, lt(l, 1u), wid, li, sl, sgs);
      } else if (st == ST_NORM_OP || st == ST_NORM_FFN || st == ST_NORM_FINAL) {
        var nw = p.fnorm;
        if (st == ST_NORM_OP) { nw = lt(l, 1u); } else if (st == ST_NORM_FFN) { nw = lt(l, 18u); }
        if (has_flag(PF_POST) && fold) {
          let xn = select(p.s_x2, p.s_x, xc == p.s_x2);
          stage_fold(xc, xn, post, nw, wid, li, sl, sgs);
          xc = xn;
          fold = false;
        } else {
          stage(xc, H, nw, li, sl, sgs);
        }
      } else if (st == ST_H) {
        stage(p.s_h, p.F, NONE, li, sl, sgs);
      } else if (has_stage(ST_MID) && st == ST_MID) {
        // the short conv's output: hidden values (a constant bound, not a
        // table load ahead of the staging)
        stage(p.s_mid, H, NONE, li, sl, sgs);
      } else if (has_stage(ST_ATTN_MERGE) && st == ST_ATTN_MERGE) {
        stage_attn(l, pos, li);
      } else if (has_stage(ST_ATTN_MERGE_GATE) && st == ST_ATTN_MERGE_GATE) {
        stage_attn_gated(pos, li);
      } else if (has_stage(ST_GATED_NORM) && st == ST_GATED_NORM) {
        stage_gated(l, li);
      }
      // The work: a mixer, or a product (one call site, below).
      let run = (p.skip & (1u << wk)) == 0u;
      var m = hm;
      var n = 0u;
      var dst = xc;
      var mode = ACC;
      if (wk == W_OUT) {
        m = mat(lw + 6u, lt(l, 26u));
        n = H;
      } else if (wk == W_DOWN) {
        m = mat(lw + 14u, p.F);
        n = H;
      } else if (wk == W_FFN) {
        m = mat(lw + 10u, H);
        n = p.F;
        dst = p.s_h;
        mode = SWIGLU;
        if (has_flag(PF_GELU) && (fl & PF_GELU) != 0u) { mode = GEGLU; }
      } else if (wk == W_HEAD) {
        n = p.vocab;
        mode = ARGMAX;
      } else if (has_work(W_IN) && wk == W_IN) {
        m = mat(lw + 2u, H);
        n = lt(l, 25u);
        dst = p.s_big;
        mode = STORE;
      } else if (!run) {
      } else if (has_work(W_CONV_IN) && wk == W_CONV_IN) {
        conv_in(l, gsg, nsg, sl, sgs);
      } else if (has_work(W_QKV) && wk == W_QKV) {
        attn_qkv(l, pos, wid, li, sg, nsgw, sl, sgs);
      } else if (has_work(W_ATTN) && wk == W_ATTN) {
        if ((OPT & 32u) != 0u) {
          attn_split_grouped(l, pos, wid, li);
        } else {
          attn_split(l, pos, wid, li, sl, sgs);
        }
      } else if (has_work(W_ATTN_GATED) && wk == W_ATTN_GATED) {
        if ((OPT & 32u) != 0u) {
          attn_split_gated_grouped(l, pos, wid, li, sl, sgs);
        } else {
          attn_split_gated(l, pos, wid, li, sl, sgs);
        }
      } else if (has_work(W_DELTANET) && wk == W_DELTANET) {
        deltanet(l, pos, wid, li, sl, sgs);
      }
      if (has_flag(PF_POST) && (fl & PF_POST) != 0u) { // the block's output to y, folded in by the next stage
        dst = p.s_y;
        mode = STORE;
        fold = true;
        post = lt(l, select(31u, 30u, wk == W_OUT));
      }
      if (!run) { n = 0u; }
      product(m, n, dst, mode, gsg, nsg, sl, sgs);
      if (ph + 1u < p.n_phases) { grid_sync(li); }
    }
    // The head's argmax: each subgroup kept its best row, the workgroup
    // leaves its best of those in s_part; after a barrier every workgroup
    // reduces them all.
    tok = argmax_step(best, best_i, step, wid, li, sl, sg, nsgw);
    if (DRAW != 0u && p.temperature > 0.0) { tok = draw_step(tok, pos, step, wid, li); }
  }
  run_end(wid, li);
}
