// y = W x for wisp's symmetric Q4 block-32 weights, without subgroups (for
// adapters that lack the `subgroups` feature). Same layout, bindings and grid
// as q4_matvec.wgsl; the reduction is a workgroup-memory tree, so WG must be
// a power of two and ROWS * WG * 4 bytes must fit in workgroup storage.
override WG: u32 = 64;   // threads per workgroup, a power of two
override ROWS: u32 = 4;  // rows per workgroup, <= WG

struct Params {
  rows: u32,
  cols: u32,
  pad0: u32,
  pad1: u32,
}

@group(0) @binding(0) var<storage, read> quant: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> scales: array<f32>;
@group(0) @binding(2) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<uniform> p: Params;

var<workgroup> red: array<f32, ROWS * WG>;

fn block_dot(q: vec4<u32>, xb: u32) -> f32 {
  var s = 0.0;
  for (var w = 0u; w < 4u; w++) {
    let word = q[w];
    let lo = vec4<f32>((vec4<u32>(word) >> vec4<u32>(0u, 4u, 8u, 12u)) & vec4<u32>(15u)) - 8.0;
    let hi = vec4<f32>((vec4<u32>(word) >> vec4<u32>(16u, 20u, 24u, 28u)) & vec4<u32>(15u)) - 8.0;
    s += dot(lo, x[xb + 2u * w]) + dot(hi, x[xb + 2u * w + 1u]);
  }
  return s;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
  let row0 = (wid.x + wid.y * nwg.x) * ROWS;
  let nb = p.cols / 32u;
  for (var r = 0u; r < ROWS; r++) {
    let row = row0 + r;
    var acc = 0.0;
    if (row < p.rows) {
      let base = row * nb;
      for (var b = li; b < nb; b += WG) {
        acc += scales[base + b] * block_dot(quant[base + b], b * 8u);
      }
    }
    red[r * WG + li] = acc;
  }
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s >>= 1u) {
    if (li < s) {
      for (var r = 0u; r < ROWS; r++) {
        red[r * WG + li] += red[r * WG + li + s];
      }
    }
    workgroupBarrier();
  }
  if (li < ROWS) {
    let row = row0 + li;
    if (row < p.rows) {
      y[row] = red[li * WG];
    }
  }
}
