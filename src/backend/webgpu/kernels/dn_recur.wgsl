// Gated DeltaNet, step 2 (backend.h wisp_deltanet_args): the delta-rule
// recurrence and the gated RMSNorm, one workgroup per value head h (grid x =
// v_heads), tokens in order inside the workgroup (prefill loops here).
// For each token t, with c = the conv outputs of dn_conv.wgsl [n][2K + V]:
//   q, k = c's k-head kh = h / (v_heads / k_heads) slices, L2-normalised
//          (x * inverseSqrt(sum x^2 + 1e-6)), q *= k_dim^-0.5
//   beta = sigmoid(b[h]), decay = exp(-exp(A_log[h]) * softplus(a[h] + dt_bias[h]))
//   S (f32 [k_dim][v_dim] in `state`, persists across calls):
//     kv = (decay S)^T k; delta = (v - kv) * beta; S = decay S + k delta^T; o = S^T q
//   out[t][h*v_dim + e] = rmsnorm(o)[e] * norm[e] * silu(z[e])
//
// Work split: the WG threads form IG row groups of CW columns (WG = IG * CW,
// both powers of two, CW >= v_dim). Thread (g, e) holds the state entries
// S[i][e] for i = g, g + IG, ... in registers for all n tokens: the state
// is read once and written once per call, and a step is two column sums
// over the IG groups (through workgroup memory) instead of a k_dim-long
// serial loop per column. Consecutive threads take consecutive columns, so
// the state loads and stores are contiguous.
override WG: u32 = 1024; // threads, IG * CW
override CW: u32 = 128;  // columns per row group: a power of two >= v_dim
const MAXI: u32 = 32u;   // most state rows per thread: ceil(k_dim / IG)
const MAXK: u32 = 256u;  // most k_dim

struct Params {
  n: u32,
  kh: u32,    // k heads
  vh: u32,    // v heads
  dk: u32,    // k_dim
  dv: u32,    // v_dim
  row: u32,   // floats per projection row
  eps: f32,
  pad: u32,
}

@group(0) @binding(0) var<storage, read> proj: array<f32>;
@group(0) @binding(1) var<storage, read> cv: array<f32>;
@group(0) @binding(2) var<storage, read> a_log: array<f32>;
@group(0) @binding(3) var<storage, read> dt_bias: array<f32>;
@group(0) @binding(4) var<storage, read> nw: array<f32>;
@group(0) @binding(5) var<storage, read_write> st: array<f32>;
@group(0) @binding(6) var<storage, read_write> outv: array<f32>;
@group(0) @binding(7) var<uniform> p: Params;

var<workgroup> qs: array<f32, MAXK>;
var<workgroup> ks: array<f32, MAXK>;
var<workgroup> red: array<vec2<f32>, WG>;

// #include "dn_common.wgsli"

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
  let IG = WG / CW;
  let h = wid.x;
  let dk = p.dk;
  let dv = p.dv;
  let K = p.kh * dk;
  let V = p.vh * dv;
  let cdim = 2u * K + V;
  let khd = h / (p.vh / p.kh);
  let sbase = h * dk * dv;
  let A = exp(a_log[h]);
  let qscale = 1.0 / sqrt(f32(dk));
  let e = li % CW;
  let g = li / CW;
  let col = e < dv;
  let nj = (dk + IG - 1u) / IG;
  var s: array<f32, MAXI>;
  for (var j = 0u; j < nj; j++) {
    let i = g + j * IG;
    s[j] = 0.0;
    if (col && i < dk) {
      s[j] = st[sbase + i * dv + e];
    }
  }
  for (var t = 0u; t < p.n; t++) {
    let c0 = t * cdim;
    let r0 = t * p.row;
    var ss = vec2<f32>(0.0, 0.0);
    for (var i = li; i < dk; i += WG) {
      let qv = cv[c0 + khd * dk + i];
      let kv = cv[c0 + K + khd * dk + i];
      qs[i] = qv;
      ks[i] = kv;
      ss += vec2<f32>(qv * qv, kv * kv);
    }
    let tot = wg_sum2(li, ss); // its barriers also publish qs and ks
    let iq = inverseSqrt(tot.x + 1e-6) * qscale;
    let ik = inverseSqrt(tot.y + 1e-6);
    let beta = 1.0 / (1.0 + exp(-proj[r0 + cdim + V + h]));
    let decay = exp(-A * softplus(proj[r0 + cdim + V + p.vh + h] + dt_bias[h]));
    // kv[e] = decay * sum_i S[i][e] k[i]
    var part = 0.0;
    for (var j = 0u; j < nj; j++) {
      let i = g + j * IG;
      if (i < dk) {
        part += s[j] * ks[i];
      }
    }
    let kvs = col_sum(li, e, part) * ik * decay;
    var v = 0.0;
    if (col) {
      v = cv[c0 + 2u * K + h * dv + e];
    }
    let delta = (v - kvs) * beta;
    // S = decay S + k delta^T; o[e] = sum_i S[i][e] q[i]
    part = 0.0;
    for (var j = 0u; j < nj; j++) {
      let i = g + j * IG;
      if (i < dk) {
        s[j] = s[j] * decay + ks[i] * ik * delta;
        part += s[j] * qs[i];
      }
    }
    let o = col_sum(li, e, part) * iq;
    var osq = 0.0;
    if (col && g == 0u) {
      osq = o * o;
    }
    let tot2 = wg_sum2(li, vec2<f32>(osq, 0.0));
    let inv = inverseSqrt(tot2.x / f32(dv) + p.eps);
    if (col && g == 0u) {
      let z = proj[r0 + cdim + h * dv + e];
      outv[t * V + h * dv + e] = nw[e] * (o * inv) * (z / (1.0 + exp(-z)));
    }
    workgroupBarrier(); // qs and ks are rewritten by the next token
  }
  for (var j = 0u; j < nj; j++) {
    let i = g + j * IG;
    if (col && i < dk) {
      st[sbase + i * dv + e] = s[j];
    }
  }
}
