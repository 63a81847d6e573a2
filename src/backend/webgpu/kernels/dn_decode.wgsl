// Gated DeltaNet decode core for one token (useLinearAttentionFusedDecodeCore):
// dn_conv.wgsl + dn_recur.wgsl in one dispatch, split over many workgroups.
//
// Why the split: one token's work is small (the 0.8B hybrid: 16 v-heads of a
// 128 x 128 f32 state), so a workgroup per head leaves most of a large GPU
// idle and the kernel is bound by each workgroup's chain of loads and
// barriers. The delta rule is independent per value column e of a head's
// state S [k_dim][v_dim]:
//   kv[e] = decay * sum_i S[i][e] k[i]; delta[e] = (v[e] - kv[e]) * beta;
//   S[:, e] = decay * S[:, e] + k delta[e]; o[e] = sum_i S[i][e] q[i]
// so workgroup (h, s) takes the CW value columns s*CW .. s*CW + CW - 1 of
// v-head h (v_heads * NS workgroups, as x*y, NS = ceil(v_dim / CW) slices
// per head; the last slice may be partial). Each workgroup recomputes its head's q and
// k (conv + SiLU + L2 norm of 2 * k_dim channels: cheap) and convolves only
// its slice's v channels. Only the gated RMSNorm couples the columns of a
// head; with NS > 1 this kernel writes the raw o and dn_norm.wgsl applies
// rmsnorm(o) * norm * silu(z) per head in a second, tiny dispatch. With
// NS == 1 (CW >= v_dim: a whole head per workgroup) the norm is done here.
//
// Conv state, race-free: several workgroups read the conv state of a q/k
// channel, so it cannot be shifted in place (a workgroup that shifted it
// could do so before another had read it). It is a ring instead,
// cstate[ch][L] with the input of token position t in slot t % L: token pos
// reads slots (pos + 1 + k) % L for its L - 1 previous inputs (k < L - 1)
// and writes its own input to slot pos % L, which no reader of this token
// touches. dn_conv.wgsl (prefill) keeps the same ring. Each slot has one
// writer: a v channel's slice, and for q/k channels slice 0 of the first
// v-head of the k-head (h % G == 0); the others only read.
//   c[ch] = silu(sum_{k<L-1} taps[ch][k] * x[pos - L + 1 + k] + taps[ch][L-1] * x[pos])
// Then as dn_recur.wgsl: q, k L2-normalised (q *= k_dim^-0.5), beta =
// sigmoid(b[h]), decay = exp(-exp(A_log[h]) * softplus(a[h] + dt_bias[h])).
//
// Inside a workgroup: IG = WG / CW row groups of CW columns; thread (g, e)
// holds S[i][s*CW + e] for i = g, g + IG, ... (NJ = ceil(k_dim / IG) rows, a
// constant so that they stay in registers), and the two matrix-vector
// steps are column sums over the row groups in workgroup memory. Latency is
// what this kernel is made of, so every load that does not depend on the
// convolution (state rows, per-head scalars, z and norm weights) is issued
// before it. Needs subgroups (the host falls back to dn_conv + dn_recur).
enable subgroups;

override WG: u32 = 256; // threads, CW * IG
override CW: u32 = 16;  // value columns per workgroup (the slice)
override NJ: u32 = 8u;  // state rows per thread: ceil(k_dim / (WG / CW))
const MAXK: u32 = 256u;
const MAXI: u32 = 32u;
const MAXL: u32 = 8u; // most conv taps (the host checks)

struct Params {
  kh: u32,    // k heads
  vh: u32,    // v heads
  dk: u32,    // k_dim
  dv: u32,    // v_dim
  L: u32,     // conv taps per channel (ring slots)
  pos: u32,   // token position: its ring slot is pos % L
  ns: u32,    // slices per v-head (1: the gated norm is done here)
  eps: f32,
}

@group(0) @binding(0) var<storage, read> proj: array<f32>;
@group(0) @binding(1) var<storage, read> taps: array<f32>;
@group(0) @binding(2) var<storage, read_write> cstate: array<f32>;
@group(0) @binding(3) var<storage, read> a_log: array<f32>;
@group(0) @binding(4) var<storage, read> dt_bias: array<f32>;
@group(0) @binding(5) var<storage, read> nw: array<f32>;
@group(0) @binding(6) var<storage, read_write> st: array<f32>;
@group(0) @binding(7) var<storage, read_write> outv: array<f32>;
@group(0) @binding(8) var<uniform> p: Params;

var<workgroup> qs: array<f32, MAXK>;
var<workgroup> ks: array<f32, MAXK>;
var<workgroup> vs: array<f32, CW>;
var<workgroup> red: array<vec2<f32>, WG>; // dn_common's col_sum
var<workgroup> sgred: array<vec2<f32>, 256>; // per-subgroup sums (subgroups of >= 4 lanes)

// #include "dn_common.wgsli"

// #include "sg_reduce.wgsli"

// A conv channel's inputs for this token: its L - 1 previous inputs from
// the ring, the new input x and its L taps (L <= MAXL). Loaded by one call
// with constant-bound loops, so that all of a thread's channel loads are in
// flight together instead of one dependent load after another.
struct ConvIn {
  v: array<f32, MAXL>, // v[k] = input pos - S + k (k < S), v[S] = x
  t: array<f32, MAXL>,
}

fn conv_load(ch: u32) -> ConvIn {
  var c: ConvIn;
  let S = p.L - 1u;
  for (var k = 0u; k < MAXL; k++) {
    c.v[k] = 0.0;
    c.t[k] = 0.0;
    if (k < S) {
      c.v[k] = cstate[ch * p.L + (p.pos + 1u + k) % p.L];
    } else if (k == S) {
      c.v[k] = proj[ch];
    }
    if (k <= S) {
      c.t[k] = taps[ch * p.L + k];
    }
  }
  return c;
}

// silu(conv) of a loaded channel; with `own`, its input goes to the ring.
fn conv_apply(ch: u32, c: ConvIn, own: bool) -> f32 {
  let S = p.L - 1u;
  var acc = 0.0;
  for (var k = 0u; k < MAXL; k++) {
    acc += c.t[k] * c.v[k];
  }
  if (own) {
    cstate[ch * p.L + p.pos % p.L] = c.v[S];
  }
  return acc / (1.0 + exp(-acc));
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32, @builtin(subgroup_invocation_id) sli: u32,
        @builtin(subgroup_size) sgs: u32) {
  let w = wid.x + wid.y * nwg.x;
  if (w >= p.vh * p.ns) {
    return;
  }
  let h = w / p.ns;
  let c0 = (w % p.ns) * CW; // the slice's first column
  let dk = p.dk;
  let dv = p.dv;
  let K = p.kh * dk;
  let V = p.vh * dv;
  let cdim = 2u * K + V;
  let G = p.vh / p.kh;
  let kh = h / G;
  let IG = WG / CW;
  let e = li % CW;
  let grp = li / CW;
  let col = c0 + e < dv;
  let sbase = h * dk * dv + c0 + e; // S[0][c0 + e]
  // Loads that do not depend on the convolution, first: the state rows,
  // the head's scalars, and (for the threads that write o) z and the norm
  // weight.
  var sr: array<f32, MAXI>;
  for (var j = 0u; j < NJ; j++) {
    let i = grp + j * IG;
    sr[j] = 0.0;
    if (col && i < dk) {
      sr[j] = st[sbase + i * dv];
    }
  }
  let al = a_log[h];
  let bv = proj[cdim + V + h];
  let av = proj[cdim + V + p.vh + h] + dt_bias[h];
  var z = 0.0;
  var nwe = 0.0;
  if (p.ns == 1u && col && grp == 0u) {
    z = proj[cdim + h * dv + c0 + e];
    nwe = nw[c0 + e];
  }
  // Thread i convolves q and k channel i of k-head kh (i < dk) and the
  // slice's v channel c0 + i (i < CW): all loads first, then the arithmetic.
  let own_qk = h % G == 0u && c0 == 0u;
  var ss = vec2<f32>(0.0, 0.0);
  for (var i = li; i < max(dk, CW); i += WG) {
    let hq = i < dk;
    let hv = i < CW && c0 + i < dv;
    var cq: ConvIn;
    var ck: ConvIn;
    var cv: ConvIn;
    if (hq) {
      cq = conv_load(kh * dk + i);
      ck = conv_load(K + kh * dk + i);
    }
    if (hv) {
      cv = conv_load(2u * K + h * dv + c0 + i);
    }
    if (hq) {
      let qv = conv_apply(kh * dk + i, cq, own_qk);
      let kv = conv_apply(K + kh * dk + i, ck, own_qk);
      qs[i] = qv;
      ks[i] = kv;
      ss += vec2<f32>(qv * qv, kv * kv);
    }
    if (hv) {
      vs[i] = conv_apply(2u * K + h * dv + c0 + i, cv, true);
    }
  }
  let tot = wg_sum2_sg(li, sli, sgs, ss); // its barrier also publishes qs, ks, vs
  let iq = inverseSqrt(tot.x + 1e-6) * (1.0 / sqrt(f32(dk)));
  let ik = inverseSqrt(tot.y + 1e-6);
  let beta = 1.0 / (1.0 + exp(-bv));
  let decay = exp(-exp(al) * softplus(av));
  var part = 0.0;
  for (var j = 0u; j < NJ; j++) {
    let i = grp + j * IG;
    if (i < dk) {
      part += sr[j] * ks[i];
    }
  }
  let kvs = col_sum(li, e, part) * ik * decay;
  var v = 0.0;
  if (col) {
    v = vs[e];
  }
  let delta = (v - kvs) * beta;
  part = 0.0;
  for (var j = 0u; j < NJ; j++) {
    let i = grp + j * IG;
    if (col && i < dk) {
      let sv = sr[j] * decay + ks[i] * ik * delta;
      st[sbase + i * dv] = sv;
      part += sv * qs[i];
    }
  }
  let o = col_sum(li, e, part) * iq;
  if (p.ns == 1u) {
    var osq = 0.0;
    if (col && grp == 0u) {
      osq = o * o;
    }
    let tot2 = wg_sum2_sg(li, sli, sgs, vec2<f32>(osq, 0.0));
    let inv = inverseSqrt(tot2.x / f32(dv) + p.eps);
    if (col && grp == 0u) {
      outv[h * dv + c0 + e] = nwe * (o * inv) * (z / (1.0 + exp(-z)));
    }
  } else if (col && grp == 0u) {
    outv[h * dv + c0 + e] = o; // dn_norm.wgsl normalises and gates it
  }
}
