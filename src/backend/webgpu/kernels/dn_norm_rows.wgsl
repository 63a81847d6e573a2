// The gated RMSNorm of dn_decode_rows.wgsl's raw outputs (split heads),
// as dn_norm.wgsl applies it to one token's (dn_norm_head.wgsli), for
// tokens 0 .. count - 1: token t's raw output and output are row t of raw
// and outv (vh * dv floats), its z at zoff of row t of proj (prow floats).
// One workgroup per (v-head, token): grid x = v_heads, y = count.
enable subgroups;

override WG: u32 = 128;

struct Params {
  vh: u32,
  dv: u32,
  zoff: u32,
  eps: f32,
  count: u32,
  prow: u32,
  pad0: u32,
  pad1: u32,
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
  let t = wid.y;
  if (t >= p.count) {
    return;
  }
  norm_head((t * p.vh + h) * p.dv, t * p.prow + p.zoff + h * p.dv, li, sli, sgs);
}
