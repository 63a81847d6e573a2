// out[t][i] = silu(gu[t][i]) * gu[t][ffn + i], one thread per output.
// Grid: ceil(n * ffn / WG) workgroups as x*y (linear id wid.x + wid.y*nwg.x).
override WG: u32 = 256;

struct Params {
  n: u32,
  ffn: u32,
  pad0: u32,
  pad1: u32,
}

@group(0) @binding(0) var<storage, read> gu: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
  let i = (wid.x + wid.y * nwg.x) * WG + li;
  if (i >= p.n * p.ffn) {
    return;
  }
  let t = i / p.ffn;
  let c = i % p.ffn;
  let g = gu[t * 2u * p.ffn + c];
  let u = gu[t * 2u * p.ffn + p.ffn + c];
  out[i] = g / (1.0 + exp(-g)) * u;
}
