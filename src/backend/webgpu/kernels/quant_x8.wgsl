// Quantizes activations to int8 for matmul_i8.wgsl, one 32-element block of
// one token per thread:
//   d = max|x| / 127 over the block, q = clamp(round(x * (127 / max|x|)), -127, 127)
//   (d = 0 and q = 0 for an all-zero block); x ~ d * q.
// Input: n tokens of `cols` floats starting at float x_off of x (cols % 32
// == 0). Output, token t (0-based from x_off) and block b, nb = cols / 32:
//   xq[2 * (t * nb + b) + 0/1]: the 32 int8 values, 4 per u32 (element 4k in
//                               the low byte of word k), 8 words = 2 vec4
//   xs[t * nb + b]            : d
// round() is round-half-to-even. Grid: ceil(n * nb / WG) workgroups, split
// into x*y (id = wid.x + wid.y * nwg.x).
override WG: u32 = 64;

struct Params {
  n: u32,
  cols: u32,
  x_off: u32,  // vec4 offset of token 0's row of x
  pad0: u32,
}

@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> xq: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read_write> xs: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

// #include "quant_block.wgsli"

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
  let nb = p.cols / 32u;
  let id = (wid.x + wid.y * nwg.x) * WG + li;
  if (id >= p.n * nb) {
    return;
  }
  let t = id / nb;
  let b = id % nb;
  let base = p.x_off + t * (p.cols / 4u) + b * 8u;
  var v: array<vec4<f32>, 8>;
  for (var k = 0u; k < 8u; k++) {
    v[k] = x[base + k];
  }
  var wds: array<u32, 8>;
  let scale = quant_block(&v, &wds);
  xq[2u * id] = vec4<u32>(wds[0], wds[1], wds[2], wds[3]);
  xq[2u * id + 1u] = vec4<u32>(wds[4], wds[5], wds[6], wds[7]);
  xs[id] = scale;
}
