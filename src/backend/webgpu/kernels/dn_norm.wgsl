// Gated RMSNorm of a one-token Gated DeltaNet step that dn_decode.wgsl split
// over several workgroups per v-head (see there): each of those workgroups
// saw only its slice of the head's outputs, so the norm, which needs the
// whole head's sum of squares, is applied here:
//   out[h][e] = norm[e] * o[e] / sqrt(mean_e(o[e]^2) + eps) * silu(z[h][e])
// with o = raw[h] as dn_decode left it and z from the projection row.
// (Usually not a dispatch of its own: q4k_matvec.wgsl PRE 1 applies it
// while the out_proj product stages its input.)
// One workgroup per v-head (grid x = v_heads).
enable subgroups;

override WG: u32 = 128;

struct Params {
  vh: u32,   // v heads
  dv: u32,   // v_dim
  zoff: u32, // offset of z in the projection row (2K + V)
  eps: f32,
}

@group(0) @binding(0) var<storage, read> proj: array<f32>;
@group(0) @binding(1) var<storage, read> nw: array<f32>;
@group(0) @binding(2) var<storage, read> raw: array<f32>;
@group(0) @binding(3) var<storage, read_write> outv: array<f32>;
@group(0) @binding(4) var<uniform> p: Params;

var<workgroup> sgred: array<vec2<f32>, 256>; // per-subgroup sums (subgroups of >= 4 lanes)

// #include "sg_reduce.wgsli"

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32,
        @builtin(subgroup_invocation_id) sli: u32, @builtin(subgroup_size) sgs: u32) {
  let h = wid.x;
  let base = h * p.dv;
  // Element li (the host makes WG >= v_dim where it can): its o, z and norm
  // weight loaded together, before the sum; further elements, if any, by
  // the loops.
  var o0 = 0.0;
  var z0 = 0.0;
  var w0 = 0.0;
  if (li < p.dv) {
    o0 = raw[base + li];
    z0 = proj[p.zoff + base + li];
    w0 = nw[li];
  }
  var ss = o0 * o0;
  for (var e = li + WG; e < p.dv; e += WG) {
    let o = raw[base + e];
    ss += o * o;
  }
  let tot = wg_sum2_sg(li, sli, sgs, vec2<f32>(ss, 0.0));
  let inv = inverseSqrt(tot.x / f32(p.dv) + p.eps);
  if (li < p.dv) {
    outv[base + li] = w0 * (o0 * inv) * (z0 / (1.0 + exp(-z0)));
  }
  for (var e = li + WG; e < p.dv; e += WG) {
    let z = proj[p.zoff + base + e];
    outv[base + e] = nw[e] * (raw[base + e] * inv) * (z / (1.0 + exp(-z)));
  }
}
