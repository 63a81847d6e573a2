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

// #include "dn_norm_head.wgsli"

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32,
        @builtin(subgroup_invocation_id) sli: u32, @builtin(subgroup_size) sgs: u32) {
  let h = wid.x;
  norm_head(h * p.dv, p.zoff + h * p.dv, li, sli, sgs);
}
