// Gated DeltaNet decode core in one dispatch (useLinearAttentionFusedDecodeCore):
// dn_conv.wgsl + dn_recur.wgsl for one token. One workgroup per k-head kh
// (grid x = k_heads): it owns the conv channels of q and k of head kh and of
// v for its v-heads kh*G .. kh*G + G - 1 (G = v_heads / k_heads), so every
// conv-state channel and every recurrent state has exactly one writer:
//   c[ch] = silu(sum_{k<S} taps[ch][k] * cstate[ch][k] + taps[ch][S] * x[ch]),
//   cstate[ch] shifts left and takes x[ch] (S = L - 1);
// then per v-head h of the group, as dn_recur.wgsl: q, k L2-normalised
// (q *= k_dim^-0.5), beta = sigmoid(b[h]), decay = exp(-exp(A_log[h]) *
// softplus(a[h] + dt_bias[h])), kv = (decay S)^T k, delta = (v - kv) * beta,
// S = decay S + k delta^T, o = S^T q, out = rmsnorm(o) * norm * silu(z).
// q, k and the group's v sit in workgroup memory (k_dim <= 256,
// G * v_dim <= 1024). The recurrence is split as in dn_recur.wgsl: the WG
// threads are IG = WG / CW row groups of CW columns (both powers of two,
// CW >= v_dim); thread (g, e) holds S[i][e] for i = g, g + IG, ... (NJ =
// ceil(k_dim / IG) rows, a constant so that they stay in registers), and the
// two matrix-vector steps are column sums over the row groups in workgroup
// memory, so no thread walks a k_dim-long column alone.
//
// Latency is what this kernel is made of (one token, a few workgroups), so
// the first head's state rows are loaded before the convolution (they do not
// depend on it: the loads overlap instead of queueing behind it), and the
// workgroup sums are subgroupAdd plus one pass over the subgroup sums
// rather than a tree of barriers. Needs subgroups (the host falls back to
// dn_conv + dn_recur without them).
enable subgroups;

override WG: u32 = 1024;
override CW: u32 = 128;
override NJ: u32 = 16u; // state rows per thread: ceil(k_dim / (WG / CW))
const MAXK: u32 = 256u;
const MAXV: u32 = 1024u;
const MAXI: u32 = 32u;
const MAXL: u32 = 8u; // most conv taps (the host checks)

struct Params {
  kh: u32,    // k heads
  vh: u32,    // v heads
  dk: u32,    // k_dim
  dv: u32,    // v_dim
  L: u32,     // conv taps per channel
  eps: f32,
  pad0: u32,
  pad1: u32,
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
var<workgroup> vs: array<f32, MAXV>;
var<workgroup> red: array<vec2<f32>, WG>; // dn_common's col_sum
var<workgroup> sgred: array<vec2<f32>, 256>; // per-subgroup sums (subgroups of >= 4 lanes)

// #include "dn_common.wgsli"

// #include "sg_reduce.wgsli"

// A conv channel's inputs for this token: its L - 1 state values, the new
// input x and its L taps (L <= MAXL). Loaded by one call with constant-bound
// loops, so that all of a thread's channel loads are in flight together
// instead of one dependent load after another.
struct ConvIn {
  v: array<f32, MAXL>, // v[k] = state k (k < S), v[S] = x
  t: array<f32, MAXL>,
}

fn conv_load(ch: u32) -> ConvIn {
  var c: ConvIn;
  let S = p.L - 1u;
  for (var k = 0u; k < MAXL; k++) {
    c.v[k] = 0.0;
    c.t[k] = 0.0;
    if (k < S) {
      c.v[k] = cstate[ch * S + k];
    } else if (k == S) {
      c.v[k] = proj[ch];
    }
    if (k <= S) {
      c.t[k] = taps[ch * p.L + k];
    }
  }
  return c;
}

// silu(conv) of a loaded channel; its state shifts left and takes x.
fn conv_apply(ch: u32, c: ConvIn) -> f32 {
  let S = p.L - 1u;
  var acc = 0.0;
  for (var k = 0u; k < MAXL; k++) {
    acc += c.t[k] * c.v[k];
    if (k < S) {
      cstate[ch * S + k] = c.v[k + 1u];
    }
  }
  return acc / (1.0 + exp(-acc));
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32,
        @builtin(subgroup_invocation_id) sli: u32, @builtin(subgroup_size) sgs: u32) {
  let kh = wid.x;
  let dk = p.dk;
  let dv = p.dv;
  let K = p.kh * dk;
  let V = p.vh * dv;
  let cdim = 2u * K + V;
  let G = p.vh / p.kh;
  let IG = WG / CW;
  let e = li % CW;
  let grp = li / CW;
  let col = e < dv;
  // The first v-head's state rows, before anything they do not depend on.
  var sr: array<f32, MAXI>;
  for (var j = 0u; j < NJ; j++) {
    let i = grp + j * IG;
    sr[j] = 0.0;
    if (col && i < dk) {
      sr[j] = st[kh * G * dk * dv + i * dv + e];
    }
  }
  // Thread i convolves q and k channel i (i < dk) and the group's v channel
  // i (i < G * dv): all three channels' loads first, then the arithmetic.
  var ss = vec2<f32>(0.0, 0.0);
  for (var i = li; i < max(dk, G * dv); i += WG) {
    let hq = i < dk;
    let hv = i < G * dv;
    var cq: ConvIn;
    var ck: ConvIn;
    var cv: ConvIn;
    if (hq) {
      cq = conv_load(kh * dk + i);
      ck = conv_load(K + kh * dk + i);
    }
    if (hv) {
      cv = conv_load(2u * K + kh * G * dv + i);
    }
    if (hq) {
      let qv = conv_apply(kh * dk + i, cq);
      let kv = conv_apply(K + kh * dk + i, ck);
      qs[i] = qv;
      ks[i] = kv;
      ss += vec2<f32>(qv * qv, kv * kv);
    }
    if (hv) {
      vs[i] = conv_apply(2u * K + kh * G * dv + i, cv);
    }
  }
  let tot = wg_sum2_sg(li, sli, sgs, ss); // its barrier also publishes qs, ks, vs
  let iq = inverseSqrt(tot.x + 1e-6) * (1.0 / sqrt(f32(dk)));
  let ik = inverseSqrt(tot.y + 1e-6);
  for (var g = 0u; g < G; g++) {
    let h = kh * G + g;
    let sbase = h * dk * dv;
    if (g > 0u) {
      for (var j = 0u; j < NJ; j++) {
        let i = grp + j * IG;
        sr[j] = 0.0;
        if (col && i < dk) {
          sr[j] = st[sbase + i * dv + e];
        }
      }
    }
    let A = exp(a_log[h]);
    let beta = 1.0 / (1.0 + exp(-proj[cdim + V + h]));
    let decay = exp(-A * softplus(proj[cdim + V + p.vh + h] + dt_bias[h]));
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
      v = vs[g * dv + e];
    }
    let delta = (v - kvs) * beta;
    part = 0.0;
    for (var j = 0u; j < NJ; j++) {
      let i = grp + j * IG;
      if (col && i < dk) {
        let sv = sr[j] * decay + ks[i] * ik * delta;
        st[sbase + i * dv + e] = sv;
        part += sv * qs[i];
      }
    }
    let o = col_sum(li, e, part) * iq;
    var osq = 0.0;
    if (col && grp == 0u) {
      osq = o * o;
    }
    let tot2 = wg_sum2_sg(li, sli, sgs, vec2<f32>(osq, 0.0));
    let inv = inverseSqrt(tot2.x / f32(dv) + p.eps);
    if (col && grp == 0u) {
      let z = proj[cdim + h * dv + e];
      outv[h * dv + e] = nw[e] * (o * inv) * (z / (1.0 + exp(-z)));
    }
  }
}
