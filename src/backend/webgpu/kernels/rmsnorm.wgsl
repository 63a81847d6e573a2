// RMSNorm of `rows` vectors of length n, subgroup reduction:
//   y[r][i] = x[r][i] * w[i] / sqrt(mean_i(x[r][i]^2) + eps)
// One workgroup per row (grid x*y, linear id wid.x + wid.y * nwg.x). Assumes
// subgroups are contiguous ranges of local_invocation_index.
enable subgroups;

override WG: u32 = 256;  // threads per workgroup

struct Params {
  rows: u32,
  n: u32,
  eps: f32,
  pad0: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> w: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

var<workgroup> partial: array<f32, (WG + 3u) / 4u>;
var<workgroup> scale: f32;

// #include "rmsnorm_scale.wgsli"

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32,
        @builtin(subgroup_invocation_id) sli: u32,
        @builtin(subgroup_size) sgs: u32) {
  let row = wid.x + wid.y * nwg.x;
  if (row >= p.rows) {
    return;
  }
  let base = row * p.n;
  let inv = row_scale(base, li, sli, sgs);
  for (var i = li; i < p.n; i += WG) {
    y[base + i] = x[base + i] * inv * w[i];
  }
}
