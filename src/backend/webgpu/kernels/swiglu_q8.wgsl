// out[t][i] = silu(gu[t][i]) * gu[t][ffn + i] (swiglu.wgsl, the same bits),
// and out quantized to int8 for the integer product that reads it (the down
// projection), as quant_x8.wgsl would quantize it (the same function on the
// same values): xq[2 * (t * nb + b) + 0/1] the 32 int8 of block b (nb =
// ffn / 32), xs[t * nb + b] its scale. One thread per 32-output block,
// ffn % 32 == 0. Grid: ceil(n * nb / WG) workgroups as x*y.
override WG: u32 = 64;

struct Params {
  n: u32,
  ffn: u32,
  pad0: u32,
  pad1: u32,
}

@group(0) @binding(0) var<storage, read> gu: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<storage, read_write> xq: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read_write> xs: array<f32>;
@group(0) @binding(4) var<uniform> p: Params;

// #include "quant_block.wgsli"

fn silu_mul(t: u32, c: u32) -> f32 {
  let g = gu[t * 2u * p.ffn + c];
  let u = gu[t * 2u * p.ffn + p.ffn + c];
  return g / (1.0 + exp(-g)) * u;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
  let nb = p.ffn / 32u;
  let id = (wid.x + wid.y * nwg.x) * WG + li;
  if (id >= p.n * nb) {
    return;
  }
  let t = id / nb;
  let c0 = (id % nb) * 32u;
  var v: array<vec4<f32>, 8>;
  for (var k = 0u; k < 8u; k++) {
    let c = c0 + 4u * k;
    v[k] = vec4<f32>(silu_mul(t, c), silu_mul(t, c + 1u), silu_mul(t, c + 2u), silu_mul(t, c + 3u));
    let o = t * p.ffn + c;
    out[o] = v[k].x;
    out[o + 1u] = v[k].y;
    out[o + 2u] = v[k].z;
    out[o + 3u] = v[k].w;
  }
  var wds: array<u32, 8>;
  let s = quant_block(&v, &wds);
  xq[2u * id] = vec4<u32>(wds[0], wds[1], wds[2], wds[3]);
  xq[2u * id + 1u] = vec4<u32>(wds[4], wds[5], wds[6], wds[7]);
  xs[id] = s;
}
