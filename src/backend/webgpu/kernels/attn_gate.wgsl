// Output gate of gated attention: out[t][h*D + d] *= sigmoid(gate),
// gate = the second half of head h's (q|gate) slice of the qkv row
// (row = (2H + 2KVH) * D floats). One thread per output value (grid x*y of
// WG-thread workgroups, linear id wid.x + wid.y * nwg.x).
override WG: u32 = 256;

struct Params {
  count: u32, // n * H * D
  H: u32,
  D: u32,
  row: u32,
}

@group(0) @binding(0) var<storage, read> qkv: array<f32>;
@group(0) @binding(1) var<storage, read_write> outv: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
  let i = (wid.x + wid.y * nwg.x) * WG + li;
  if (i >= p.count) {
    return;
  }
  let hd = p.H * p.D;
  let t = i / hd;
  let h = (i % hd) / p.D;
  let d = i % p.D;
  let g = qkv[t * p.row + h * 2u * p.D + p.D + d];
  outv[i] = outv[i] / (1.0 + exp(-g));
}
