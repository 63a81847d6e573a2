// RMSNorm without subgroups (workgroup-memory tree reduction; WG a power of
// two). Same bindings, parameters and grid as rmsnorm.wgsl.
override WG: u32 = 256;  // threads per workgroup, a power of two

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

var<workgroup> red: array<f32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
  let row = wid.x + wid.y * nwg.x;
  if (row >= p.rows) {
    return;
  }
  let base = row * p.n;
  var ss = 0.0;
  for (var i = li; i < p.n; i += WG) {
    let v = x[base + i];
    ss += v * v;
  }
  red[li] = ss;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s >>= 1u) {
    if (li < s) {
      red[li] += red[li + s];
    }
    workgroupBarrier();
  }
  let inv = 1.0 / sqrt(workgroupUniformLoad(&red[0]) / f32(p.n) + p.eps);
  for (var i = li; i < p.n; i += WG) {
    y[base + i] = x[base + i] * inv * w[i];
  }
}
