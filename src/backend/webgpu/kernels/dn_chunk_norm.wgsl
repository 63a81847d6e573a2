// Chunked Gated DeltaNet, step 3 of 3 (wgpu_deltanet.c): the gated RMSNorm
// of the raw outputs dn_chunk_state.wgsl wrote, as dn_recur.wgsl applies it:
//   out[t][h*dv + e] = rmsnorm(o)[e] * norm[e] * silu(z[e])
// with z at zoff of token t's projection row. A workgroup per (v-head,
// token): grid x = v_heads, y = tokens from t0 (a dispatch per 65,535).
// No subgroups: a tree in workgroup memory.
override WG: u32 = 128; // a power of two

struct Params {
  t0: u32,
  vh: u32,
  dv: u32,
  zoff: u32,  // z's offset in a projection row (2K + V)
  row: u32,   // floats per projection row
  eps: f32,
  pad0: u32,
  pad1: u32,
}

@group(0) @binding(0) var<storage, read> proj: array<f32>;
@group(0) @binding(1) var<storage, read> nw: array<f32>;
@group(0) @binding(2) var<storage, read> raw: array<f32>;
@group(0) @binding(3) var<storage, read_write> outv: array<f32>;
@group(0) @binding(4) var<uniform> p: Params;

var<workgroup> red: array<f32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
  let h = wid.x;
  let t = p.t0 + wid.y;
  let base = (t * p.vh + h) * p.dv;
  let zb = t * p.row + p.zoff + h * p.dv;
  var ss = 0.0;
  for (var e = li; e < p.dv; e += WG) {
    let o = raw[base + e];
    ss += o * o;
  }
  red[li] = ss;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s >>= 1u) {
    if (li < s) {
      red[li] += red[li + s];
    }
    workgroupBarrier();
  }
  let inv = inverseSqrt(red[0] / f32(p.dv) + p.eps);
  for (var e = li; e < p.dv; e += WG) {
    let z = proj[zb + e];
    outv[base + e] = nw[e] * (raw[base + e] * inv) * (z / (1.0 + exp(-z)));
  }
}
