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
// Thread li owns the value columns e = li + j*WG: it reads and writes only
// its own columns of S. q and k sit in workgroup memory (k_dim <= MAXK).
// WG is a power of two.
override WG: u32 = 64;
const MAXK: u32 = 256u;

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

fn reduce2(li: u32, v: vec2<f32>) -> vec2<f32> {
  workgroupBarrier(); // every thread has read the previous result
  red[li] = v;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s >>= 1u) {
    if (li < s) {
      red[li] += red[li + s];
    }
    workgroupBarrier();
  }
  let r = workgroupUniformLoad(&red[0]);
  return r;
}

fn softplus(x: f32) -> f32 {
  if (x > 20.0) {
    return x;
  }
  return log(1.0 + exp(x));
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
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
    let tot = reduce2(li, ss);
    let iq = inverseSqrt(tot.x + 1e-6) * qscale;
    let ik = inverseSqrt(tot.y + 1e-6);
    let beta = 1.0 / (1.0 + exp(-proj[r0 + cdim + V + h]));
    let decay = exp(-A * softplus(proj[r0 + cdim + V + p.vh + h] + dt_bias[h]));
    var osq = 0.0;
    for (var e = li; e < dv; e += WG) {
      var kvs = 0.0;
      for (var i = 0u; i < dk; i++) {
        kvs += st[sbase + i * dv + e] * (ks[i] * ik);
      }
      kvs *= decay;
      let delta = (cv[c0 + 2u * K + h * dv + e] - kvs) * beta;
      var o = 0.0;
      for (var i = 0u; i < dk; i++) {
        let s = st[sbase + i * dv + e] * decay + ks[i] * ik * delta;
        st[sbase + i * dv + e] = s;
        o += s * qs[i];
      }
      o *= iq;
      outv[t * V + h * dv + e] = o;
      osq += o * o;
    }
    let tot2 = reduce2(li, vec2<f32>(osq, 0.0));
    let inv = inverseSqrt(tot2.x / f32(dv) + p.eps);
    for (var e = li; e < dv; e += WG) {
      let z = proj[r0 + cdim + h * dv + e];
      let o = outv[t * V + h * dv + e];
      outv[t * V + h * dv + e] = nw[e] * (o * inv) * (z / (1.0 + exp(-z)));
    }
    workgroupBarrier();
  }
}
