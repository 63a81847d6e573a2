// RMSNorm of `rows` vectors of length n (rmsnorm.wgsl, the same bits in y),
// and y quantized to int8 for the integer products that read it, as
// quant_x8.wgsl would quantize it (the same function on the same values,
// so the same bits): xq[2 * (row * nb + b) + 0/1] the 32 int8 of block b
// (nb = n / 32), xs[row * nb + b] its scale. One dispatch where the norm
// and the quantizing took two (a batched step's layers: before each
// product that reads the norm's output). n % 32 == 0. One workgroup per row.
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
@group(0) @binding(3) var<storage, read_write> xq: array<vec4<u32>>;
@group(0) @binding(4) var<storage, read_write> xs: array<f32>;
@group(0) @binding(5) var<uniform> p: Params;

var<workgroup> partial: array<f32, (WG + 3u) / 4u>;
var<workgroup> scale: f32;

// #include "rmsnorm_scale.wgsli"
// #include "quant_block.wgsli"

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
  // a thread a block: its 32 values formed again as above (not read back
  // from y, which other threads wrote)
  let nb = p.n / 32u;
  for (var b = li; b < nb; b += WG) {
    var v: array<vec4<f32>, 8>;
    for (var k = 0u; k < 8u; k++) {
      let i = b * 32u + 4u * k;
      v[k] = vec4<f32>(x[base + i] * inv * w[i], x[base + i + 1u] * inv * w[i + 1u],
                       x[base + i + 2u] * inv * w[i + 2u], x[base + i + 3u] * inv * w[i + 3u]);
    }
    var wds: array<u32, 8>;
    let s = quant_block(&v, &wds);
    let id = row * nb + b;
    xq[2u * id] = vec4<u32>(wds[0], wds[1], wds[2], wds[3]);
    xq[2u * id + 1u] = vec4<u32>(wds[4], wds[5], wds[6], wds[7]);
    xs[id] = s;
  }
}
