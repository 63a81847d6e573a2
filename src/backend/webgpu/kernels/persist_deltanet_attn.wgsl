// Persistent decode of Gated DeltaNet hybrids: `steps` greedy decode steps of the hybrid
// (Gated DeltaNet and gated attention layers, SwiGLU MLP, Q4_K / Q4 / Q4Z
// weights) in ONE dispatch, as persist_conv_attn.wgsl does for short-conv hybrids: a fixed
// grid of p.nwg co-resident workgroups walks every phase of every step, and
// phases that depend on each other are separated by grid barriers
// (persist_common.wgsli). Why: the op-by-op decode of the 0.8B is 124
// dispatches a token, each a launch and a ramp-up (~2.7 us on the H200
// before any work) and host recording. Measured (docs/webgpu.md,
// "Persistent decode of Gated DeltaNet hybrids"): a phase here costs ~2.5 us before any
// work too, so this wins only where the host's recording and submits
// mattered (many steps a batch: +13 % on the 0.8B at 64); the host runs it
// from the plan's minSteps (32). Host side: wgpu_persist.c.
//
// A step, per layer (5 barriers), exactly what the model file's decode_step
// records (src/model/ has the maths):
//   A  every workgroup stages rmsnorm(x) * op_norm; the layer's input
//      product (DeltaNet in_proj [qkv | z | b | a], attention q|gate, k, v)
//      goes raw to big.
//   B  DeltaNet: task (v-head, CW value columns): conv + SiLU of the head's
//      q/k channels and its columns' v channels (the conv state is a ring:
//      several tasks read a channel, one writes it), L2 norms, the delta
//      rule on its columns of the f32 state, raw o to mid.
//      Attention: task (head, key split): q and (in the split holding the
//      new key) k rmsnorm'd and partially roped, the new K/V row stored,
//      online softmax over the split's keys into ao / am.
//   C  stage the mixer's output (DeltaNet: rmsnorm(o) * norm * silu(z) per
//      v-head; attention: the splits merged, times sigmoid(gate)); out_proj
//      / o_proj added to x.
//   D  stage rmsnorm(x) * ffn_norm; gate/up rows of a unit together, h =
//      silu(gate) * up.
//   E  stage h; down added to x.
// then the tied head's argmax (one more barrier) picks the next token.
//
// Products: a subgroup takes four (row, unit range) components at a time
// (four rows, or two or one row split in halves or quarters when few rows
// are left: product()), its lanes the 32-element units (a Q4 block, or a
// quarter of a Q4_K super-block's byte group: q4k_scales.wgsli); the staged
// input and the sums of each 16 of it (for the Q4_K mins and Q4 zero
// points) sit in workgroup memory.
//
// Data: Wv/Wu the read-only blob (the same buffer twice): a layer table
// (LAYER_WORDS words a layer), the matrices as the artifact stores them
// (16-byte aligned), norms, conv taps, A_log, dt_bias, rope tables. S: the
// run's arena as words (x, big, mid, h, attention partials, then the conv
// rings, recurrent states and KV caches in the session's layouts). ctr:
// [0] barrier arrivals, [1] the timeout flag. ids: the decode loop's ids.
enable subgroups;
diagnostic(off, subgroup_uniformity);

override WG: u32 = 256;     // threads per workgroup (a multiple of the subgroup size and of D, <= 256)
override XS4: u32 = 640;    // vec4s of the staged input (largest product input / 4, a multiple of 8)
override MAXSG: u32 = 64;   // most subgroups per workgroup (WG / smallest subgroup size)
override CW: u32 = 16;      // value columns of a DeltaNet task
override NJ: u32 = 8;       // state rows per thread in a DeltaNet task: ceil(dk / (WG / CW))

const NONE: u32 = 0xffffffffu;
// The layer table (wgpu_persist.c, layout_deltanet_attn): layer l's LAYER_WORDS
// words at blob word l * LAYER_WORDS. 0 kind (1 attention); 1 op_norm;
// 2-5 in, 6-9 out, 10-13 gate_up, 14-17 down (each q, s, z, kind: mat());
// 18 ffn_norm; DeltaNet: 19 conv taps, 20 A_log, 21 dt_bias, 22 the gated
// norm's weight, 23 its conv ring and 24 its recurrent state (arena words);
// attention: 19 q_norm, 20 k_norm, 23 the K and 24 the V cache (arena
// words). NONE where a layer has no such vector.
const LAYER_WORDS: u32 = 28u;
// The weight types this kernel reads (persist_quant.wgsli): Q4, Q4Z, Q4_K (the host checks).
const TYPES: u32 = 7u;
const MAXI: u32 = 32u;      // most state rows per thread (the host checks NJ)
const MAXL: u32 = 8u;       // most conv taps (the host checks)

// The first 40 words are persist_conv_attn.wgsl's (the host fills one struct).
struct Params {
  n_layers: u32, H: u32, F: u32, heads: u32,
  kvh: u32, D: u32, L: u32, vocab: u32,
  eps: f32, pos0: u32, steps: u32, bar_base: u32,
  slot: u32, kv16: u32, spin_max: u32, probe: u32,
  embed_q: u32, embed_s: u32, embed_z: u32, head_q: u32,
  head_s: u32, head_z: u32, fnorm: u32, rope_cos: u32,
  rope_sin: u32, s_x: u32, s_mid: u32, s_h: u32,
  s_q: u32, s_part: u32, barriers_per_step: u32, nsmax: u32,
  s_ao: u32, s_am: u32, nwg: u32, skip: u32,
  bmode: u32, backoff: u32, embed_t: u32, head_t: u32,
  rot_half: u32, lkh: u32, lvh: u32, dk: u32, // rotary dims / 2; DeltaNet heads and dims
  dv: u32, s_big: u32, ns: u32, rp_force: u32, // ns: value-column slices a v-head (ceil(dv / CW)); rp_force: product's rp (tests)
}

@group(0) @binding(0) var<storage, read> Wv: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> Wu: array<u32>;
@group(0) @binding(2) var<storage, read_write> S: array<u32>;
@group(0) @binding(3) var<storage, read_write> ctr: array<atomic<u32>>;
@group(0) @binding(4) var<storage, read_write> ids: array<u32>;
@group(0) @binding(5) var<uniform> p: Params;

var<workgroup> xs: array<vec4<f32>, XS4>;  // the staged input, vec4 i at q4k_xsw(i)
var<workgroup> xsum: array<f32, XS4 / 4u>; // sum of each 16 staged inputs (per-head sums of squares while staging o)
var<workgroup> red: array<f32, MAXSG>;     // per-subgroup partials of a workgroup reduction
var<workgroup> redi: array<u32, MAXSG>;
var<workgroup> hv: array<f32, 256>;        // DeltaNet: the head's q; attention: a chunk's key weights, the new k
var<workgroup> qv: array<f32, 256>;        // DeltaNet: the head's k; attention: the query
var<workgroup> acc4: array<f32, 256>;      // column sums, score partials, output partials
var<workgroup> vsl: array<f32, 64>;        // DeltaNet: the task's v values (CW <= 64)
var<workgroup> wuni: u32;
var<workgroup> wtok: u32;

// #include "persist_common.wgsli"

// #include "q4k_scales.wgsli"

// #include "persist_quant.wgsli"

fn lt(l: u32, k: u32) -> u32 { return Wu[l * LAYER_WORDS + k]; }

// ---- staging ---------------------------------------------------------------

fn xsw(i: u32) -> u32 { return q4k_xsw(i); }

// The sums of each 16 staged inputs (n % 16 == 0), then a barrier: every
// stage ends here.
fn stage_sums(n: u32, li: u32) {
  workgroupBarrier();
  for (var g = li; g < n / 16u; g += WG) {
    let o = vec4<f32>(1.0);
    xsum[g] = dot(xs[xsw(4u * g)], o) + dot(xs[xsw(4u * g + 1u)], o) + dot(xs[xsw(4u * g + 2u)], o) +
              dot(xs[xsw(4u * g + 3u)], o);
  }
  workgroupBarrier();
}

// Stages n values of S from word `src`; with a norm weight offset w !=
// NONE, as rmsnorm(x) * w.
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
  stage_sums(n, li);
}

// DeltaNet: stages rmsnorm(o_h) * norm * silu(z_h) for every v-head h
// (the gated RMSNorm), o raw in mid, z in big after the conv channels.
fn stage_gated(l: u32, li: u32) {
  let dv = p.dv;
  let V = p.lvh * dv;
  let zb = p.s_big + 2u * p.lkh * p.dk + V;
  for (var i = li; i < V / 4u; i += WG) {
    let b = p.s_mid + 4u * i;
    xs[xsw(i)] = vec4<f32>(sf(b), sf(b + 1u), sf(b + 2u), sf(b + 3u));
  }
  workgroupBarrier();
  for (var g = li; g < V / 16u; g += WG) {
    var s = 0.0;
    for (var k = 0u; k < 4u; k++) { let v = xs[xsw(4u * g + k)]; s += dot(v, v); }
    xsum[g] = s;
  }
  workgroupBarrier();
  let gph = dv / 16u; // 16-groups a head (dv % 16 == 0: the host checks)
  if (li < p.lvh) {
    var s = 0.0;
    for (var k = 0u; k < gph; k++) { s += xsum[li * gph + k]; }
    acc4[li] = inverseSqrt(s / f32(dv) + p.eps);
  }
  workgroupBarrier();
  let nw = lt(l, 22u);
  for (var i = li; i < V / 4u; i += WG) {
    let e = 4u * i;
    let inv = acc4[e / dv];
    let j = e % dv;
    let z = vec4<f32>(sf(zb + e), sf(zb + e + 1u), sf(zb + e + 2u), sf(zb + e + 3u));
    let nv = vec4<f32>(wf(nw + j), wf(nw + j + 1u), wf(nw + j + 2u), wf(nw + j + 3u));
    xs[xsw(i)] = xs[xsw(i)] * inv * nv * (z / (1.0 + exp(-z)));
  }
  stage_sums(V, li);
}

// ---- products ----------------------------------------------------------------

// A matrix (persist_quant.wgsli's Mat): here of type T_Q4, T_Q4Z or T_Q4K
// (the host checks), nb 32-element units a row.

// The matrix whose 4-word descriptor is at blob word d, with `cols` columns.
fn mat(d: u32, cols: u32) -> Mat { return Mat(Wu[d], Wu[d + 1u], Wu[d + 2u], Wu[d + 3u], cols / 32u); }


// Block b of row r of a Q4/Q4Z matrix times the staged input.
fn blk_q4(m: Mat, r: u32, b: u32) -> f32 {
  let g = r * m.nb + b;
  let w = Wv[m.q / 4u + g];
  let sc = wf(m.s + g);
  var zp = 8.0;
  if (m.t == T_Q4Z) { zp = f32((Wu[m.z + (g >> 3u)] >> ((g & 7u) * 4u)) & 15u); }
  var a = 0.0;
  for (var j = 0u; j < 4u; j++) {
    let wj = w[j];
    a += dot(nib_lo(wj), xs[xsw(b * 8u + 2u * j)]) + dot(nib_hi(wj), xs[xsw(b * 8u + 2u * j + 1u)]);
  }
  return sc * (a - zp * (xsum[2u * b] + xsum[2u * b + 1u]));
}

// The weights of units u[k] of rows r[k] of a Q4_K matrix (loaded apart
// from the arithmetic, so that a lane can have two units' loads in flight).
struct K4 {
  hd: array<vec4<u32>, 4>, // the super-block headers
  qq: array<vec4<u32>, 4>, // the units' quant vec4s
}

fn load_k4(m: Mat, r: vec4<u32>, u: vec4<u32>) -> K4 {
  var w: K4;
  let spr = m.nb / 8u; // super-blocks a row
  for (var k = 0u; k < 4u; k++) {
    let base = m.q / 4u + (r[k] * spr + u[k] / 8u) * 9u;
    w.hd[k] = Wv[base];
    w.qq[k] = Wv[base + 1u + u[k] % 8u];
  }
  return w;
}

// The staged inputs of unit u (xs[0..3] its low-nibble, [4..7] its high-nibble elements).
fn unit_x(u: u32) -> array<vec4<f32>, 8> {
  var x: array<vec4<f32>, 8>;
  let e0 = q4k_unit_x(u);
  for (var j = 0u; j < 4u; j++) {
    x[j] = xs[xsw(e0 / 4u + j)];
    x[4u + j] = xs[xsw(e0 / 4u + 8u + j)];
  }
  return x;
}

// Component k: unit u[k] of w's row k times the staged input (same: every
// u[k] is u.x, whose inputs are then read once).
fn dot_k4(w: K4, u: vec4<u32>, same: bool) -> vec4<f32> {
  var x = unit_x(u.x);
  var o = vec4<f32>(0.0);
  for (var k = 0u; k < 4u; k++) {
    if (!same && k > 0u) { x = unit_x(u[k]); }
    let e0 = q4k_unit_x(u[k]);
    let sx = vec2<f32>(xsum[e0 / 16u], xsum[e0 / 16u + 2u]);
    let c = (u[k] % 8u) / 2u;
    let dm = unpack2x16float(w.hd[k].x);
    let s0 = scale_min(w.hd[k], 2u * c);
    let s1 = scale_min(w.hd[k], 2u * c + 1u);
    let qx = nib_dot(w.qq[k], &x);
    o[k] = dm.x * (s0.x * qx.x + s1.x * qx.y) - dm.y * (s0.y * sx.x + s1.y * sx.y);
  }
  return o;
}

// Component k: units uo[k] .. uo[k] + nu - 1 of row r[k] times the staged
// input, summed over the subgroup. Q4_K: a lane's units two at a time, both
// loaded before either is used.
fn dot4(m: Mat, r: vec4<u32>, uo: vec4<u32>, nu: u32, sl: u32, sgs: u32) -> vec4<f32> {
  var a = vec4<f32>(0.0);
  let same = all(uo == vec4<u32>(uo.x));
  if (m.t == T_Q4K) {
    var u = sl;
    for (; u + sgs < nu; u += 2u * sgs) {
      let u0 = uo + vec4<u32>(u);
      let u1 = u0 + vec4<u32>(sgs);
      let w0 = load_k4(m, r, u0);
      let w1 = load_k4(m, r, u1);
      a += dot_k4(w0, u0, same) + dot_k4(w1, u1, same);
    }
    if (u < nu) {
      let u0 = uo + vec4<u32>(u);
      a += dot_k4(load_k4(m, r, u0), u0, same);
    }
  } else {
    for (var b = sl; b < nu; b += sgs) {
      a += vec4<f32>(blk_q4(m, r.x, b + uo.x), blk_q4(m, r.y, b + uo.y), blk_q4(m, r.z, b + uo.z),
                     blk_q4(m, r.w, b + uo.w));
    }
  }
  return subgroupAdd(a);
}

// What a product does with its rows (one call site in main, so that the
// compiler inlines the product code once: lavapipe's LLVM took minutes on
// a kernel with a copy per phase).
const STORE: u32 = 0u;  // S[dst + j] = row j
const ACC: u32 = 1u;    // S[dst + j] += row j (the residual)
const SWIGLU: u32 = 2u; // S[dst + j] = silu(row j) * row n + j (gate rows, then up rows)
const ARGMAX: u32 = 3u; // the best row so far in best / best_i

var<private> best: f32;
var<private> best_i: u32;

// Rows [0, n) of m times xs, in rounds: a subgroup computes rp rows a
// round from dot4's four components. While 4 rows a subgroup remain, rp =
// 4; a smaller remainder (all of a small product, like a down or out_proj
// of hidden rows, or the tail of a large one) is spread over the whole
// grid instead: rp = 2 (each row's units in two halves) or rp = 1 (in four
// quarters). SWIGLU: the gate and up rows of 2 units a round, or of one
// in two halves. Lane k < 4 owns output k. The rounds are the same for
// every subgroup (base is uniform).
fn product(m: Mat, n: u32, dst: u32, mode: u32, gsg: u32, nsg: u32, sl: u32, sgs: u32) {
  let split_ok = m.nb % 4u == 0u;
  let h = m.nb / 2u;
  let q = m.nb / 4u;
  var base = 0u;
  loop {
    if (base >= n) { break; }
    let rem = n - base;
    var rp = 4u;
    if (mode == SWIGLU) {
      rp = 2u;
      if (split_ok && rem <= nsg) { rp = 1u; }
    } else if (split_ok && rem <= nsg) {
      rp = 1u;
    } else if (split_ok && rem <= 2u * nsg) {
      rp = 2u;
    }
    if (p.rp_force != 0u && split_ok) {
      rp = p.rp_force;
      if (mode == SWIGLU) { rp = min(rp, 2u); }
    }
    let r0 = base + gsg;
    base += rp * nsg;
    if (r0 >= n) { continue; }
    let rb = min(r0 + nsg, n - 1u); // the second row (unit) of a round, clipped
    var r = min(vec4<u32>(r0, r0 + nsg, r0 + 2u * nsg, r0 + 3u * nsg), vec4<u32>(n - 1u));
    var uo = vec4<u32>(0u);
    var nu = m.nb;
    var rows = vec4<u32>(r0, r0 + nsg, r0 + 2u * nsg, r0 + 3u * nsg);
    if (mode == SWIGLU) {
      if (rp == 2u) {
        r = vec4<u32>(r0, n + r0, rb, n + rb);
      } else {
        r = vec4<u32>(r0, n + r0, r0, n + r0);
        uo = vec4<u32>(0u, 0u, h, h);
        nu = h;
      }
    } else if (rp == 2u) {
      r = vec4<u32>(r0, r0, rb, rb);
      uo = vec4<u32>(0u, h, 0u, h);
      nu = h;
      rows = vec4<u32>(r0, r0 + nsg, n, n);
    } else if (rp == 1u) {
      r = vec4<u32>(r0);
      uo = vec4<u32>(0u, q, 2u * q, 3u * q);
      nu = q;
      rows = vec4<u32>(r0, n, n, n);
    }
    var mine = n;
    for (var k = 0u; k < 4u; k++) { if (k == sl) { mine = rows[k]; } }
    var o = 0.0;
    if (mode == ACC && mine < n) { o = sf(dst + mine); }
    var v = dot4(m, r, uo, nu, sl, sgs);
    if (mode != SWIGLU && rp == 2u) { v = vec4<f32>(v.x + v.y, v.z + v.w, 0.0, 0.0); }
    if (mode != SWIGLU && rp == 1u) { v = vec4<f32>(v.x + v.y + v.z + v.w, 0.0, 0.0, 0.0); }
    if (mode == SWIGLU) {
      if (rp == 1u) { v = vec4<f32>(v.x + v.z, v.y + v.w, 0.0, 0.0); }
      if (sl == 0u) {
        S[dst + r0] = bitcast<u32>(v.x / (1.0 + exp(-v.x)) * v.y);
        if (rp == 2u && r0 + nsg < n) { S[dst + r0 + nsg] = bitcast<u32>(v.z / (1.0 + exp(-v.z)) * v.w); }
      }
    } else if (mode == ARGMAX) {
      for (var k = 0u; k < 4u; k++) {
        if (rows[k] < n && (v[k] > best || (v[k] == best && rows[k] < best_i))) {
          best = v[k];
          best_i = rows[k];
        }
      }
    } else {
      for (var k = 0u; k < 4u; k++) { if (k == sl) { o += v[k]; } }
      if (mine < n) { S[dst + mine] = bitcast<u32>(o); }
    }
  }
}

// ---- Gated DeltaNet (phase B) ----------------------------------------------------

// A conv channel's inputs for this token: its L - 1 previous inputs from
// the ring (slot t % L holds position t's input), the new input, its taps.
struct ConvIn {
  v: array<f32, MAXL>,
  t: array<f32, MAXL>,
}

fn conv_load(l: u32, pos: u32, ch: u32) -> ConvIn {
  var c: ConvIn;
  let L = p.L;
  let ring = lt(l, 23u);
  let taps = lt(l, 19u);
  for (var k = 0u; k < MAXL; k++) {
    c.v[k] = 0.0;
    c.t[k] = 0.0;
    if (k < L - 1u) {
      c.v[k] = sf(ring + ch * L + (pos + 1u + k) % L);
    } else if (k == L - 1u) {
      c.v[k] = sf(p.s_big + ch);
    }
    if (k < L) { c.t[k] = wf(taps + ch * L + k); }
  }
  return c;
}

// silu(conv) of a loaded channel; with `own`, its input goes to the ring.
fn conv_apply(l: u32, pos: u32, ch: u32, c: ConvIn, own: bool) -> f32 {
  var a = 0.0;
  for (var k = 0u; k < MAXL; k++) { a += c.t[k] * c.v[k]; }
  if (own) { S[lt(l, 23u) + ch * p.L + pos % p.L] = bitcast<u32>(c.v[p.L - 1u]); }
  return a / (1.0 + exp(-a));
}

// wg_sum of two values at once (the second's partials in acc4).
fn wg_sum2(li: u32, sli: u32, sgs: u32, v: vec2<f32>) -> vec2<f32> {
  workgroupBarrier();
  let s = subgroupAdd(v);
  if (sli == 0u) {
    red[li / sgs] = s.x;
    acc4[li / sgs] = s.y;
  }
  workgroupBarrier();
  var t = vec2<f32>(0.0);
  for (var i = 0u; i < WG / sgs; i++) { t += vec2<f32>(red[i], acc4[i]); }
  return t;
}

// Column sums over the WG / CW row groups (every thread gets its column's).
fn col_sum(li: u32, e: u32, v: f32) -> f32 {
  workgroupBarrier();
  acc4[li] = v;
  workgroupBarrier();
  var t = 0.0;
  for (var g = 0u; g < WG / CW; g++) { t += acc4[g * CW + e]; }
  return t;
}

fn softplus(x: f32) -> f32 {
  if (x > 20.0) { return x; }
  return log(1.0 + exp(x));
}

// Task (v-head h, columns c0 .. c0 + CW - 1), as dn_decode.wgsl: the conv
// ring has one writer a slot (q/k channels: slice 0 of the k-head's first
// v-head; v channels: their slice). Raw o goes to mid (stage_gated norms it).
fn deltanet(l: u32, pos: u32, wid: u32, li: u32, sli: u32, sgs: u32) {
  let dk = p.dk;
  let dv = p.dv;
  let K = p.lkh * dk;
  let V = p.lvh * dv;
  let cdim = 2u * K + V;
  let G = p.lvh / p.lkh;
  let IG = WG / CW;
  let e = li % CW;
  let grp = li / CW;
  let rec = lt(l, 24u);
  for (var task = wid; task < p.lvh * p.ns; task += p.nwg) {
    let h = task / p.ns;
    let c0 = (task % p.ns) * CW;
    let kh = h / G;
    let col = c0 + e < dv;
    let sbase = rec + h * dk * dv + c0 + e;
    var sr: array<f32, MAXI>;
    for (var j = 0u; j < NJ; j++) {
      let i = grp + j * IG;
      sr[j] = 0.0;
      if (col && i < dk) { sr[j] = sf(sbase + i * dv); }
    }
    let al = wf(lt(l, 20u) + h);
    let bv = sf(p.s_big + cdim + V + h);
    let av = sf(p.s_big + cdim + V + p.lvh + h) + wf(lt(l, 21u) + h);
    let own_qk = h % G == 0u && c0 == 0u;
    var sq = 0.0;
    var sk = 0.0;
    for (var i = li; i < max(dk, CW); i += WG) {
      let hq = i < dk;
      let hvv = i < CW && c0 + i < dv;
      var cq: ConvIn;
      var ck: ConvIn;
      var cv: ConvIn;
      if (hq) {
        cq = conv_load(l, pos, kh * dk + i);
        ck = conv_load(l, pos, K + kh * dk + i);
      }
      if (hvv) { cv = conv_load(l, pos, 2u * K + h * dv + c0 + i); }
      if (hq) {
        let qx = conv_apply(l, pos, kh * dk + i, cq, own_qk);
        let kx = conv_apply(l, pos, K + kh * dk + i, ck, own_qk);
        hv[i] = qx;
        qv[i] = kx;
        sq += qx * qx;
        sk += kx * kx;
      }
      if (hvv) { vsl[i] = conv_apply(l, pos, 2u * K + h * dv + c0 + i, cv, true); }
    }
    let tot = wg_sum2(li, sli, sgs, vec2<f32>(sq, sk)); // its barriers also publish hv, qv, vsl
    let iq = inverseSqrt(tot.x + 1e-6) * (1.0 / sqrt(f32(dk)));
    let ik = inverseSqrt(tot.y + 1e-6);
    let beta = 1.0 / (1.0 + exp(-bv));
    let decay = exp(-exp(al) * softplus(av));
    var part = 0.0;
    for (var j = 0u; j < NJ; j++) {
      let i = grp + j * IG;
      if (i < dk) { part += sr[j] * qv[i]; }
    }
    let kvs = col_sum(li, e, part) * ik * decay;
    var v = 0.0;
    if (col) { v = vsl[e]; }
    let delta = (v - kvs) * beta;
    part = 0.0;
    for (var j = 0u; j < NJ; j++) {
      let i = grp + j * IG;
      if (col && i < dk) {
        let s = sr[j] * decay + qv[i] * ik * delta;
        S[sbase + i * dv] = bitcast<u32>(s);
        part += s * hv[i];
      }
    }
    let o = col_sum(li, e, part) * iq;
    if (col && grp == 0u) { S[p.s_mid + h * dv + c0 + e] = bitcast<u32>(o); }
    workgroupBarrier();
  }
}

// ---- gated attention (phase B) -----------------------------------------------------

// Values i, i + 1 (i even) of a K or V row: one word when kv16.
fn kv_load2(base: u32, pos: u32, kh: u32, i: u32) -> vec2<f32> {
  let D = p.D;
  if (p.kv16 != 0u) { return unpack2x16float(S[base + ((pos * p.kvh + kh) * D + i) / 2u]); }
  let o = base + (pos * p.kvh + kh) * D + i;
  return vec2<f32>(sf(o), sf(o + 1u));
}

// *a (qv or hv) = rmsnorm(*a) * the weights at blob word nw, its first
// 2 * rot_half dims rotated (NEOX pairs i, i + rot_half) for position pos.
fn norm_rope(a: ptr<workgroup, array<f32, 256>>, pos: u32, nw: u32, li: u32, sli: u32, sgs: u32) {
  let D = p.D;
  var ss = 0.0;
  for (var i = li; i < D; i += WG) { ss += (*a)[i] * (*a)[i]; }
  let inv = inverseSqrt(wg_sum(li, sli, sgs, ss) / f32(D) + p.eps);
  var r0 = 0.0;
  var r1 = 0.0;
  let rh = p.rot_half;
  if (li < rh) {
    let x0 = (*a)[li] * inv * wf(nw + li);
    let x1 = (*a)[li + rh] * inv * wf(nw + li + rh);
    let cs = wf(p.rope_cos + pos * rh + li);
    let sn = wf(p.rope_sin + pos * rh + li);
    r0 = x0 * cs - x1 * sn;
    r1 = x1 * cs + x0 * sn;
  }
  var c = 0.0;
  if (li >= 2u * rh && li < D) { c = (*a)[li] * inv * wf(nw + li); }
  workgroupBarrier();
  if (li < rh) {
    (*a)[li] = r0;
    (*a)[li + rh] = r1;
  } else if (li >= 2u * rh && li < D) {
    (*a)[li] = c;
  }
  workgroupBarrier();
}

const LK: u32 = 8u;

fn n_splits(pos: u32) -> u32 {
  let kc = WG / LK;
  return max(1u, min((pos + kc) / kc, p.nsmax));
}

// Attention over keys 0..pos split as persist_conv_attn.wgsl's attn_split; the
// split holding pos first stores the new K/V row (every such task of a
// KV head stores the same values).
fn attn_split(l: u32, pos: u32, wid: u32, li: u32, sli: u32, sgs: u32) {
  let D = p.D;
  let G = WG / D;
  let grp = li / D;
  let di = li % D;
  let kc = WG / LK;
  let dpl = D / LK;
  let kl = li / LK;
  let lane = li % LK;
  let scale = inverseSqrt(f32(D));
  let kb = lt(l, 23u);
  let vb = lt(l, 24u);
  let ns = n_splits(pos);
  let kps = (pos + ns) / ns;
  let kraw = p.s_big + 2u * p.heads * D;
  let vraw = kraw + p.kvh * D;
  for (var task = wid; task < p.heads * ns; task += p.nwg) {
    let h = task / ns;
    let sp = task % ns;
    let kh = h / (p.heads / p.kvh);
    let k0 = sp * kps;
    let k1 = min(k0 + kps, pos + 1u);
    workgroupBarrier();
    for (var i = li; i < D; i += WG) {
      qv[i] = sf(p.s_big + h * 2u * D + i);
      hv[i] = sf(kraw + kh * D + i);
    }
    workgroupBarrier();
    norm_rope(&qv, pos, lt(l, 19u), li, sli, sgs);
    if (k1 == pos + 1u) {
      norm_rope(&hv, pos, lt(l, 20u), li, sli, sgs);
      for (var i = 2u * li; i < D; i += 2u * WG) {
        kv_store(kb, pos, kh, i, hv[i], hv[i + 1u]);
        kv_store(vb, pos, kh, i, sf(vraw + kh * D + i), sf(vraw + kh * D + i + 1u));
      }
      storageBarrier();
      workgroupBarrier();
    }
    var m = -3.0e38;
    var den = 0.0;
    var o = 0.0;
    for (var c0 = k0; c0 < k1; c0 += kc) {
      let key = c0 + kl;
      var part = 0.0;
      if (key < k1) {
        for (var j = 0u; j < dpl; j += 4u) { // dpl % 4 == 0 (the host checks D % 32)
          let d = lane * dpl + j;
          let k0 = kv_load2(kb, key, kh, d);
          let k1 = kv_load2(kb, key, kh, d + 2u);
          part += dot(vec4<f32>(qv[d], qv[d + 1u], qv[d + 2u], qv[d + 3u]), vec4<f32>(k0, k1));
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
      // four keys' values in flight at a time
      var t = grp;
      for (; t + 3u * G < nk; t += 4u * G) {
        let v0 = kv_load(vb, c0 + t, kh, di);
        let v1 = kv_load(vb, c0 + t + G, kh, di);
        let v2 = kv_load(vb, c0 + t + 2u * G, kh, di);
        let v3 = kv_load(vb, c0 + t + 3u * G, kh, di);
        o += hv[t] * v0 + hv[t + G] * v1 + hv[t + 2u * G] * v2 + hv[t + 3u * G] * v3;
      }
      for (; t < nk; t += G) { o += hv[t] * kv_load(vb, c0 + t, kh, di); }
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

// xs = every head's attention output (its splits merged) times
// sigmoid(gate); a thread merges 4 values of a head.
const NSMAX: u32 = 16u;

fn stage_attn(pos: u32, li: u32) {
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
    let gb = p.s_big + h * 2u * D + D + i;
    let gate = vec4<f32>(sf(gb), sf(gb + 1u), sf(gb + 2u), sf(gb + 3u));
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
    xs[xsw(e >> 2u)] = num / den / (1.0 + exp(-gate));
  }
  stage_sums(p.heads * D, li);
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
  let em = Mat(p.embed_q, p.embed_s, p.embed_z, p.embed_t, H / 32u);
  let hm = Mat(p.head_q, p.head_s, p.head_z, p.head_t, H / 32u);
  for (var step = 0u; step < p.steps; step++) {
    let pos = p.pos0 + step;
    // x = embed[tok] (Q4/Q4Z: the host checks): every workgroup dequantizes
    // it into xs for the first norm; workgroup 0 also keeps it in S as the
    // residual.
    if (li == 0u) { wtok = tok; }
    let t = workgroupUniformLoad(&wtok);
    var ss = 0.0;
    for (var b = li; b < em.nb; b += WG) {
      let g = t * em.nb + b;
      let w = Wv[em.q / 4u + g];
      let sc = wf(em.s + g);
      var zp = 8.0;
      if (em.t == T_Q4Z) { zp = f32((Wu[em.z + (g >> 3u)] >> ((g & 7u) * 4u)) & 15u); }
      for (var j = 0u; j < 4u; j++) {
        let v0 = (nib_lo(w[j]) - zp) * sc;
        let v1 = (nib_hi(w[j]) - zp) * sc;
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
    let inv0 = inverseSqrt(wg_sum(li, sl, sgs, ss) / f32(H) + p.eps);
    let nw0 = lt(0u, 1u);
    for (var i = li; i < H / 4u; i += WG) {
      let b = nw0 + 4u * i;
      xs[xsw(i)] = xs[xsw(i)] * inv0 * vec4<f32>(wf(b), wf(b + 1u), wf(b + 2u), wf(b + 3u));
    }
    stage_sums(H, li);
    // The step's phases: 5 a layer (the module comment's A-E), then the
    // head; each layer phase ends at a grid barrier.
    best = -3.0e38;
    best_i = 0xffffffffu;
    let nph = p.n_layers * 5u + 1u;
    for (var ph = 0u; ph < nph; ph++) {
      let head = ph + 1u == nph;
      let l = min(ph / 5u, p.n_layers - 1u);
      let lw = l * LAYER_WORDS;
      var k = ph % 5u;
      if (head) { k = 5u; }
      let attn = uniform_u32(li, lt(l, 0u)) != 0u;
      // what the phase stages (B: the mixer itself), then its product
      var m = mat(lw + 2u, H);
      var n = 2u * p.lkh * p.dk + 2u * p.lvh * p.dv + 2u * p.lvh;
      var dst = p.s_big;
      var mode = STORE;
      if (k == 0u) {
        if (l > 0u) { stage(p.s_x, H, lt(l, 1u), li, sl, sgs); }
        if (attn) { n = (2u * p.heads + 2u * p.kvh) * p.D; }
      } else if (k == 1u) {
        if ((p.skip & 8u) != 0u) {
        } else if (attn) {
          attn_split(l, pos, wid, li, sl, sgs);
        } else {
          deltanet(l, pos, wid, li, sl, sgs);
        }
        n = 0u;
      } else if (k == 2u) {
        if (attn) {
          stage_attn(pos, li);
          m = mat(lw + 6u, p.heads * p.D);
        } else {
          stage_gated(l, li);
          m = mat(lw + 6u, p.lvh * p.dv);
        }
        n = H;
        dst = p.s_x;
        mode = ACC;
      } else if (k == 3u) {
        stage(p.s_x, H, lt(l, 18u), li, sl, sgs);
        m = mat(lw + 10u, H);
        n = p.F;
        dst = p.s_h;
        mode = SWIGLU;
      } else if (k == 4u) {
        stage(p.s_h, p.F, NONE, li, sl, sgs);
        m = mat(lw + 14u, p.F);
        n = H;
        dst = p.s_x;
        mode = ACC;
      } else {
        stage(p.s_x, H, p.fnorm, li, sl, sgs);
        m = hm;
        n = p.vocab;
        mode = ARGMAX;
      }
      // p.skip (WISP_WEBGPU_PERSIST_SKIP, timing probes only: wrong tokens):
      // 1 the input products, 2 the head, 4 the MLP products, 8 the
      // mixers, 16 the output products
      var sk = 0u;
      if (k == 0u) { sk = 1u; } else if (k == 5u) { sk = 2u; } else if (k >= 3u) { sk = 4u; } else if (k == 2u) { sk = 16u; }
      if ((p.skip & sk) != 0u) { n = 0u; }
      product(m, n, dst, mode, gsg, nsg, sl, sgs);
      if (!head) { grid_sync(li); }
    }
    // Argmax: each subgroup keeps its best row, the workgroup its best of
    // those in s_part; after the barrier every workgroup reduces them all.
    tok = argmax_step(best, best_i, step, wid, li, sl, sg, nsgw);
  }
  run_end(wid, li);
}
