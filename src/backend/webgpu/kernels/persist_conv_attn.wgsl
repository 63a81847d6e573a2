// Persistent decode: `steps` greedy decode steps of a hybrid
// (short-conv and attention layers, SwiGLU MLP; Q4, Q4Z, Q4_K, f32, f16 or
// Q8_0 matrices, each its own: persist_quant.wgsli) in ONE dispatch. The one-token products of a decode step are too small to
// fill the GPU, so the per-op path spends most of a token in ~66 dispatch
// launches and ramp-ups; here a fixed grid of p.nwg workgroups (all resident
// at once: the host probes how many fit) walks the whole step, and phases
// that depend on each other are separated by a grid barrier (an atomic
// counter every workgroup adds to and spins on, ~1 us on an H200). Host side
// and the phase list: wgpu_persist.c; docs/webgpu.md, "Persistent decode".
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
// weights, conv taps and rope tables. S: the run's state as words: the
// residual x, scratch vectors, per-layer conv state and KV cache (f32, or f16
// pairs when kv16). ctr: [0] barrier arrivals (wrapping; the host passes the
// count before this run), [1] timeout flag. ids: the decode loop's id slots.
enable subgroups;
diagnostic(off, subgroup_uniformity);

override WG: u32 = 256;     // threads per workgroup (a multiple of the subgroup size and of D, <= 256)
override XS4: u32 = 640;    // vec4s of the staged input (largest of hidden, ffn, heads * headDim) / 4
override MAXSG: u32 = 64;   // most subgroups per workgroup (WG / smallest subgroup size)
// Round-trip savers, measured one by one on the H200 (docs/webgpu.md,
// "Persistent decode"; the host turns on both): 1 the attention merge
// loads every split first (+31 %), 8 a product's residuals are loaded with
// its weights (+16 %). Three more were measured and removed: attention
// loading a chunk's keys and values a chunk ahead (+12 % alone, -33 % with
// 1), the stage loading norm weights with the values (+1 %), and the conv
// loading taps and state together (-7 %).
override OPT: u32 = 0;
// The weight types of this graph's matrices, bit 1 << T_* each (the host
// sets it). A graph of Q4 / Q4Z only (the seed's) compiles the other types'
// products away: its product is the Q4 loop alone, as it was.
override TYPES: u32 = 0xffffffffu;

const NONE: u32 = 0xffffffffu;
// The layer table (wgpu_persist.c, layout_conv_attn): layer l's words at
// l * LAYER_WORDS. 0 kind (1 attention); 1 op_norm; in (2 q, 3 s, 4 z);
// out (5-7); 8 conv taps or q_norm; 9 k_norm; 10 ffn_norm; gate_up
// (11-13); down (14-16); 17 the conv state or K cache, 18 the V cache
// (arena words); the types (T_*) of in, out, gate_up, down at 19-22.
const LAYER_WORDS: u32 = 24u;

struct Params {
  n_layers: u32, H: u32, F: u32, heads: u32,
  kvh: u32, D: u32, L: u32, vocab: u32,
  eps: f32, pos0: u32, steps: u32, bar_base: u32,
  slot: u32, kv16: u32, spin_max: u32, probe: u32,
  embed_q: u32, embed_s: u32, embed_z: u32, head_q: u32,
  head_s: u32, head_z: u32, fnorm: u32, rope_cos: u32,
  rope_sin: u32, s_x: u32, s_mid: u32, s_h: u32,
  s_q: u32, s_part: u32, barriers_per_step: u32, nsmax: u32,
  s_ao: u32, s_am: u32, nwg: u32, skip: u32, // skip: phases left out (timing probes only)
  bmode: u32, backoff: u32, embed_t: u32, head_t: u32,
}

@group(0) @binding(0) var<storage, read> Wv: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> Wu: array<u32>;
@group(0) @binding(2) var<storage, read_write> S: array<u32>;
@group(0) @binding(3) var<storage, read_write> ctr: array<atomic<u32>>;
@group(0) @binding(4) var<storage, read_write> ids: array<u32>;
@group(0) @binding(5) var<uniform> p: Params;

var<workgroup> xs: array<vec4<f32>, XS4>;  // the staged input of the current product, vec4 i at xsw(i)
var<workgroup> red: array<f32, MAXSG>;     // per-subgroup partials of a workgroup reduction
var<workgroup> redi: array<u32, MAXSG>;
var<workgroup> hv: array<f32, 256>;        // one head's values (qkv phase), a chunk's key weights (attention)
var<workgroup> qv: array<f32, 256>;        // the query of the head being attended
var<workgroup> acc4: array<f32, 256>;      // attention: score partials, per-group output partials
var<workgroup> wuni: u32;                  // a value made workgroup-uniform
var<workgroup> wtok: u32;                  // the token this step embeds

// #include "persist_common.wgsli"

// #include "persist_quant.wgsli"

// #include "q4k_scales.wgsli"

fn lt(l: u32, k: u32) -> u32 { return Wu[l * LAYER_WORDS + k]; }

// Where vec4 i of the staged input sits in xs. A product's lane reads the
// 8 vec4s of its own block (lanes 128 bytes apart), which all fall in the
// same shared-memory banks unless each block's run of 8 is rotated by its
// block number: tools/phase_probe measured the unrotated reads as the cost
// of a product (a 1,024 x 2,560 product 13 us, the head 87 us on the H200).
// XS4 is a multiple of 8 (the host rounds it), so every run is whole.
fn xsw(i: u32) -> u32 { return i ^ ((i >> 3u) & 7u); }

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
  workgroupBarrier();
}

// A matrix of `cols` columns (persist_quant.wgsli's Mat).
fn mat(q: u32, s: u32, z: u32, t: u32, cols: u32) -> Mat { return Mat(q, s, z, t, cols / 32u); }

// The matrix of layer l whose q, s, z sit at table words k, k + 1, k + 2
// (in 2, out 5, gate_up 11, down 14; their types at 19, 20, 21, 22).
fn lmat(l: u32, k: u32, cols: u32) -> Mat {
  var t = 19u;
  if (k == 5u) { t = 20u; } else if (k == 11u) { t = 21u; } else if (k == 14u) { t = 22u; }
  return mat(lt(l, k), lt(l, k + 1u), lt(l, k + 2u), lt(l, t), cols);
}

// True when m is Q4 / Q4Z: a constant true for a graph of those types only
// (the seed's), false for one without them.
fn is_q4(m: Mat) -> bool {
  return (TYPES & ~3u) == 0u || ((TYPES & 3u) != 0u && m.t <= T_Q4Z);
}


// The zero point of block g (global block index) of m: 8 for Q4.
fn zpt(m: Mat, g: u32) -> f32 {
  if (m.z == NONE) { return 8.0; }
  return f32((Wu[m.z + (g >> 3u)] >> ((g & 7u) * 4u)) & 15u);
}

// This lane's share of block b of row r times the staged input.
fn blk(m: Mat, r: u32, b: u32) -> f32 {
  let g = r * m.nb + b;
  let w = Wv[m.q / 4u + g];
  let sc = wf(m.s + g);
  let zp = zpt(m, g);
  var a = 0.0;
  var xsum = 0.0;
  for (var j = 0u; j < 4u; j++) {
    let wj = w[j];
    let x0 = xs[xsw(b * 8u + 2u * j)];
    let x1 = xs[xsw(b * 8u + 2u * j + 1u)];
    let lo = nib_lo(wj);
    let hi = nib_hi(wj);
    a += dot(lo, x0) + dot(hi, x1);
    xsum += dot(x0, vec4<f32>(1.0)) + dot(x1, vec4<f32>(1.0));
  }
  return sc * (a - zp * xsum);
}

// Block b of row r of m read as type t (a constant: persist_quant.wgsli's
// deq4 folds to that type's function) times the staged input.
fn blk_as(t: u32, m: Mat, r: u32, b: u32) -> f32 {
  var a = 0.0;
  for (var j = 0u; j < 8u; j++) { a += dot(deq4(t, m, r, b, j), xs[xsw(b * 8u + j)]); }
  return a;
}

// This lane's share of four rows of m read as type t (a constant).
fn dot4_as(t: u32, m: Mat, r: vec4<u32>, sl: u32, sgs: u32) -> vec4<f32> {
  var a = vec4<f32>(0.0);
  for (var b = sl; b < m.nb; b += sgs) {
    a += vec4<f32>(blk_as(t, m, r.x, b), blk_as(t, m, r.y, b), blk_as(t, m, r.z, b), blk_as(t, m, r.w, b));
  }
  return a;
}

// Four rows at once (loads of all four in flight), summed over the subgroup.
// Q4 / Q4Z: blk, the fast path; the other types: dot4_as, the type picked
// once (only those in TYPES are compiled).
fn dot4(m: Mat, r: vec4<u32>, sl: u32, sgs: u32) -> vec4<f32> {
  var a = vec4<f32>(0.0);
  if (is_q4(m)) {
    for (var b = sl; b < m.nb; b += sgs) {
      a += vec4<f32>(blk(m, r.x, b), blk(m, r.y, b), blk(m, r.z, b), blk(m, r.w, b));
    }
  } else if (has_type(T_Q4K) && m.t == T_Q4K) {
    a = dot4_as(T_Q4K, m, r, sl, sgs);
  } else if (has_type(T_F32) && m.t == T_F32) {
    a = dot4_as(T_F32, m, r, sl, sgs);
  } else if (has_type(T_F16) && m.t == T_F16) {
    a = dot4_as(T_F16, m, r, sl, sgs);
  } else if (has_type(T_Q8_0) && m.t == T_Q8_0) {
    a = dot4_as(T_Q8_0, m, r, sl, sgs);
  }
  return subgroupAdd(a);
}

// Rows [0, n) of m times xs, four at a time per subgroup; row j's result
// added to S[dst + j] (acc) or stored there.
fn product(m: Mat, n: u32, dst: u32, acc: bool, gsg: u32, nsg: u32, sl: u32, sgs: u32) {
  for (var r0 = gsg; r0 < n; r0 += 4u * nsg) {
    let r = vec4<u32>(r0, r0 + nsg, r0 + 2u * nsg, r0 + 3u * nsg);
    let rc = min(r, vec4<u32>(n - 1u));
    if ((OPT & 8u) != 0u) {
      // Lane k < 4 owns row r[k] (a subgroup has at least 4 lanes): its
      // residual is loaded with the weights.
      var o = 0.0;
      var mine = n;
      for (var k = 0u; k < 4u; k++) { if (k == sl) { mine = r[k]; } }
      if (acc && mine < n) { o = sf(dst + mine); }
      let v = dot4(m, rc, sl, sgs);
      for (var k = 0u; k < 4u; k++) { if (k == sl) { o += v[k]; } }
      if (mine < n) { S[dst + mine] = bitcast<u32>(o); }
      continue;
    }
    let v = dot4(m, rc, sl, sgs);
    if (sl == 0u) {
      for (var k = 0u; k < 4u; k++) {
        if (r[k] < n) {
          var o = v[k];
          if (acc) { o += sf(dst + r[k]); }
          S[dst + r[k]] = bitcast<u32>(o);
        }
      }
    }
  }
}

// ---- the phases of one layer --------------------------------------------

// Short conv: in_proj rows (B, C, X of a channel) together, then the
// channel's causal conv over its state (L - 1 inputs kept) into mid.
fn conv_in(l: u32, gsg: u32, nsg: u32, sl: u32, sgs: u32) {
  let H = p.H;
  let m = lmat(l, 2u, H);
  let taps = lt(l, 8u);
  let st = lt(l, 17u);
  let keep = p.L - 1u;
  for (var c0 = gsg; c0 < H; c0 += 2u * nsg) {
    let c1 = min(c0 + nsg, H - 1u);
    let v0 = dot4(m, vec4<u32>(c0, H + c0, 2u * H + c0, c1), sl, sgs);
    let v1 = dot4(m, vec4<u32>(H + c1, 2u * H + c1, c1, c1), sl, sgs);
    if (sl == 0u) {
      for (var k = 0u; k < 2u; k++) {
        var c = c0;
        var b = v0.x;
        var cc = v0.y;
        var x = v0.z;
        if (k == 1u) { c = c0 + nsg; b = v0.w; cc = v1.x; x = v1.y; }
        if (c < H) {
          let bx = b * x;
          var a = wf(taps + c * p.L + keep) * bx;
          for (var j = 0u; j < keep; j++) { a += wf(taps + c * p.L + j) * sf(st + c * keep + j); }
          for (var j = 0u; j + 1u < keep; j++) { S[st + c * keep + j] = S[st + c * keep + j + 1u]; }
          if (keep > 0u) { S[st + c * keep + keep - 1u] = bitcast<u32>(bx); }
          S[p.s_mid + c] = bitcast<u32>(cc * a);
        }
      }
    }
  }
}


// q/k/v rows of one head per workgroup; q and k get their RMSNorm and
// rope, k and v go to the cache at pos, q to s_q.
fn attn_qkv(l: u32, pos: u32, wid: u32, li: u32, sg: u32, nsgw: u32, sl: u32, sgs: u32) {
  let D = p.D;
  let m = lmat(l, 2u, p.H);
  let ntask = p.heads + 2u * p.kvh;
  let half = D / 2u;
  for (var t = wid; t < ntask; t += p.nwg) {
    for (var r0 = sg; r0 < D; r0 += 4u * nsgw) {
      let r = vec4<u32>(r0, r0 + nsgw, r0 + 2u * nsgw, r0 + 3u * nsgw);
      let v = dot4(m, t * D + min(r, vec4<u32>(D - 1u)), sl, sgs);
      if (sl == 0u) {
        for (var k = 0u; k < 4u; k++) {
          if (r[k] < D) { hv[r[k]] = v[k]; }
        }
      }
    }
    workgroupBarrier();
    let is_v = t >= p.heads + p.kvh;
    var nw = NONE;
    if (t < p.heads) { nw = lt(l, 8u); } else if (!is_v) { nw = lt(l, 9u); }
    var ss = 0.0;
    for (var i = li; i < D; i += WG) { ss += hv[i] * hv[i]; }
    let inv = inverseSqrt(wg_sum(li, sl, sgs, ss) / f32(D) + p.eps);
    workgroupBarrier();
    var a = 0.0;
    var b = 0.0;
    if (li < half) {
      a = hv[li];
      b = hv[li + half];
      if (nw != NONE) {
        a = a * inv * wf(nw + li);
        b = b * inv * wf(nw + li + half);
      }
      if (!is_v) {
        let cs = wf(p.rope_cos + pos * half + li);
        let sn = wf(p.rope_sin + pos * half + li);
        let ra = a * cs - b * sn;
        let rb = b * cs + a * sn;
        a = ra;
        b = rb;
      }
    }
    workgroupBarrier();
    if (li < half) {
      hv[li] = a;
      hv[li + half] = b;
    }
    workgroupBarrier();
    if (t < p.heads) {
      for (var i = li; i < D; i += WG) { S[p.s_q + t * D + i] = bitcast<u32>(hv[i]); }
    } else if (li < half) {
      var kh = t - p.heads;
      var base = lt(l, 17u);
      if (is_v) {
        kh = t - p.heads - p.kvh;
        base = lt(l, 18u);
      }
      kv_store(base, pos, kh, 2u * li, hv[2u * li], hv[2u * li + 1u]);
    }
    workgroupBarrier();
  }
}

// Attention over keys 0..pos, split like flash-decoding: task (head,
// split) per workgroup, a split's keys in chunks of KC = WG / 8 keys (8
// lanes per key, each over D / 8 dims, for the scores; WG / D groups of D
// threads for the weighted values), an online softmax across chunks. Each
// task leaves its unnormalised output and (max, sum) in s_ao / s_am; the
// o_proj phase merges the splits while it stages its input (stage_attn).
const LK: u32 = 8u;

fn n_splits(pos: u32) -> u32 {
  let kc = WG / LK;
  return max(1u, min((pos + kc) / kc, p.nsmax));
}

fn attn_split(l: u32, pos: u32, wid: u32, li: u32) {
  let D = p.D;
  let G = WG / D;
  let grp = li / D;
  let di = li % D;
  let kc = WG / LK;
  let dpl = D / LK; // dims per lane (even)
  let kl = li / LK;
  let lane = li % LK;
  let scale = inverseSqrt(f32(D));
  let kb = lt(l, 17u);
  let vb = lt(l, 18u);
  let ns = n_splits(pos);
  let kps = (pos + ns) / ns; // keys per split, ceil((pos + 1) / ns)
  for (var task = wid; task < p.heads * ns; task += p.nwg) {
    let h = task / ns;
    let sp = task % ns;
    let kh = h / (p.heads / p.kvh);
    let k0 = sp * kps;
    let k1 = min(k0 + kps, pos + 1u);
    workgroupBarrier();
    for (var i = li; i < D; i += WG) { qv[i] = sf(p.s_q + h * D + i); }
    workgroupBarrier();
    var m = -3.0e38;
    var den = 0.0;
    var o = 0.0;
    for (var c0 = k0; c0 < k1; c0 += kc) {
      let key = c0 + kl;
      var part = 0.0;
      if (key < k1) {
        for (var j = 0u; j < dpl; j += 2u) {
          let d = lane * dpl + j;
          part += qv[d] * kv_load(kb, key, kh, d) + qv[d + 1u] * kv_load(kb, key, kh, d + 1u);
        }
      }
      acc4[li] = part;
      workgroupBarrier();
      if (li < kc) {
        var sc = -3.0e38;
        if (c0 + li < k1) {
          var t = 0.0;
          for (var j = 0u; j < LK; j++) { t += acc4[li * LK + j]; }
          sc = t * scale;
        }
        hv[li] = sc;
      }
      workgroupBarrier();
      let nk = min(kc, k1 - c0);
      var cm = hv[0];
      for (var t = 1u; t < nk; t++) { cm = max(cm, hv[t]); }
      let mn = max(m, cm);
      let corr = exp(m - mn);
      workgroupBarrier();
      if (li < nk) { hv[li] = exp(hv[li] - mn); }
      workgroupBarrier();
      var es = 0.0;
      for (var t = 0u; t < nk; t++) { es += hv[t]; }
      den = den * corr + es;
      o = o * corr;
      for (var t = grp; t < nk; t += G) { o += hv[t] * kv_load(vb, c0 + t, kh, di); }
      m = mn;
      workgroupBarrier();
    }
    acc4[li] = o;
    workgroupBarrier();
    if (li < D) {
      var t = 0.0;
      for (var g = 0u; g < G; g++) { t += acc4[g * D + li]; }
      S[p.s_ao + task * D + li] = bitcast<u32>(t);
    }
    if (li == 0u) {
      S[p.s_am + 2u * task] = bitcast<u32>(m);
      S[p.s_am + 2u * task + 1u] = bitcast<u32>(den);
    }
    workgroupBarrier();
  }
}

// stage_attn with OPT 1: a thread
// merges 4 values of one head; it loads every split's (max, sum) and values
// before using any (at most NSMAX splits: the host caps nsmax).
const NSMAX: u32 = 16u;

fn stage_attn_together(pos: u32, li: u32) {
  let D = p.D;
  let ns = n_splits(pos);
  for (var e = 4u * li; e < p.heads * D; e += 4u * WG) {
    let h = e / D;
    let i = e % D;
    var am: array<vec2<f32>, 16>;
    var ao: array<vec4<f32>, 16>;
    for (var sp = 0u; sp < NSMAX; sp++) {
      if (sp < ns) {
        let t = h * ns + sp;
        am[sp] = vec2<f32>(sf(p.s_am + 2u * t), sf(p.s_am + 2u * t + 1u));
        let o = p.s_ao + t * D + i;
        ao[sp] = vec4<f32>(sf(o), sf(o + 1u), sf(o + 2u), sf(o + 3u));
      }
    }
    var mx = -3.0e38;
    for (var sp = 0u; sp < NSMAX; sp++) { if (sp < ns) { mx = max(mx, am[sp].x); } }
    var num = vec4<f32>(0.0);
    var den = 0.0;
    for (var sp = 0u; sp < NSMAX; sp++) {
      if (sp < ns) {
        let wt = exp(am[sp].x - mx);
        num += wt * ao[sp];
        den += wt * am[sp].y;
      }
    }
    xs[xsw(e >> 2u)] = num / den;
  }
  workgroupBarrier();
}

// xs = the attention output of every head, its splits merged.
fn stage_attn(pos: u32, li: u32) {
  if ((OPT & 1u) != 0u) {
    stage_attn_together(pos, li);
    return;
  }
  let D = p.D;
  let ns = n_splits(pos);
  for (var e = li; e < p.heads * D; e += WG) {
    let h = e / D;
    let i = e % D;
    var mx = -3.0e38;
    for (var sp = 0u; sp < ns; sp++) { mx = max(mx, sf(p.s_am + 2u * (h * ns + sp))); }
    var num = 0.0;
    var den = 0.0;
    for (var sp = 0u; sp < ns; sp++) {
      let t = h * ns + sp;
      let w = exp(sf(p.s_am + 2u * t) - mx);
      num += w * sf(p.s_ao + t * D + i);
      den += w * sf(p.s_am + 2u * t + 1u);
    }
    xs[xsw(e >> 2u)][e & 3u] = num / den;
  }
  workgroupBarrier();
}

// Gate and up rows of two hidden units at once; h = silu(gate) * up.
fn ffn_up(l: u32, gsg: u32, nsg: u32, sl: u32, sgs: u32) {
  let F = p.F;
  let m = lmat(l, 11u, p.H);
  for (var j0 = gsg; j0 < F; j0 += 2u * nsg) {
    let j1 = min(j0 + nsg, F - 1u);
    let v = dot4(m, vec4<u32>(j0, F + j0, j1, F + j1), sl, sgs);
    if (sl == 0u) {
      S[p.s_h + j0] = bitcast<u32>(v.x / (1.0 + exp(-v.x)) * v.y);
      if (j0 + nsg < F) { S[p.s_h + j1] = bitcast<u32>(v.z / (1.0 + exp(-v.z)) * v.w); }
    }
  }
}

// ---- the whole run ---------------------------------------------------------

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid3: vec3<u32>, @builtin(local_invocation_index) li: u32,
        @builtin(subgroup_invocation_id) sl: u32, @builtin(subgroup_size) sgs: u32) {
  let wid = wid3.x;
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
  for (var step = 0u; step < p.steps; step++) {
    let pos = p.pos0 + step;
    // x = embed[tok]: every workgroup dequantizes it into xs for the first
    // norm (no barrier needed); workgroup 0 also keeps it in S as the
    // residual, read by the first residual add one barrier later.
    let em = mat(p.embed_q, p.embed_s, p.embed_z, p.embed_t, H);
    if (li == 0u) { wtok = tok; }
    let t = workgroupUniformLoad(&wtok);
    var ss = 0.0;
    for (var b = li; b < em.nb && !is_q4(em); b += WG) {
      for (var j = 0u; j < 8u; j++) {
        let v = deq4(em.t, em, t, b, j);
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
      let sc = wf(em.s + g);
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
    let nw0 = lt(0u, 1u);
    for (var i = li; i < H / 4u; i += WG) {
      let b = nw0 + 4u * i;
      xs[xsw(i)] = xs[xsw(i)] * inv0 * vec4<f32>(wf(b), wf(b + 1u), wf(b + 2u), wf(b + 3u));
    }
    workgroupBarrier();
    for (var l = 0u; l < p.n_layers; l++) {
      if (l > 0u) { stage(p.s_x, H, lt(l, 1u), li, sl, sgs); }
      if (uniform_u32(li, lt(l, 0u)) == 0u) {
        if ((p.skip & 8u) == 0u) { conv_in(l, gsg, nsg, sl, sgs); }
        grid_sync(li);
        stage(p.s_mid, H, NONE, li, sl, sgs);
        product(lmat(l, 5u, H), H, p.s_x, true, gsg, nsg, sl, sgs);
      } else {
        if ((p.skip & 16u) == 0u) { attn_qkv(l, pos, wid, li, sg, nsgw, sl, sgs); }
        grid_sync(li);
        if ((p.skip & 1u) == 0u) { attn_split(l, pos, wid, li); }
        grid_sync(li);
        stage_attn(pos, li);
        product(lmat(l, 5u, p.heads * p.D), H, p.s_x, true, gsg, nsg, sl, sgs);
      }
      grid_sync(li);
      stage(p.s_x, H, lt(l, 10u), li, sl, sgs);
      if ((p.skip & 4u) == 0u) { ffn_up(l, gsg, nsg, sl, sgs); }
      grid_sync(li);
      stage(p.s_h, p.F, NONE, li, sl, sgs);
      if ((p.skip & 4u) == 0u) { product(lmat(l, 14u, p.F), H, p.s_x, true, gsg, nsg, sl, sgs); }
      grid_sync(li);
    }
    // Head + argmax: each subgroup keeps its best row, the workgroup its best
    // of those in s_part; after the barrier every workgroup reduces them all.
    stage(p.s_x, H, p.fnorm, li, sl, sgs);
    let hm = mat(p.head_q, p.head_s, p.head_z, p.head_t, H);
    var best = -3.0e38;
    var bi = 0xffffffffu;
    for (var r0 = gsg; r0 < p.vocab && (p.skip & 2u) == 0u; r0 += 4u * nsg) {
      let r = vec4<u32>(r0, r0 + nsg, r0 + 2u * nsg, r0 + 3u * nsg);
      let v = dot4(hm, min(r, vec4<u32>(p.vocab - 1u)), sl, sgs);
      for (var k = 0u; k < 4u; k++) {
        if (r[k] < p.vocab && (v[k] > best || (v[k] == best && r[k] < bi))) {
          best = v[k];
          bi = r[k];
        }
      }
    }
    tok = argmax_step(best, bi, step, wid, li, sl, sg, nsgw);
  }
  run_end(wid, li);
}
