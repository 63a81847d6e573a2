// dst[i] = src[i] for i < n between two buffers (the decode loop's snapshot
// of the recurrent state before a batch, and its restore when a batch ran
// past a stop token). Grid: ceil(n / WG) workgroups as x*y.
override WG: u32 = 256;

struct Params {
  n: u32,
  pad0: u32,
  pad1: u32,
  pad2: u32,
}

@group(0) @binding(0) var<storage, read> src: array<u32>;
@group(0) @binding(1) var<storage, read_write> dst: array<u32>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
  let i = (wid.x + wid.y * nwg.x) * WG + li;
  if (i < p.n) {
    dst[i] = src[i];
  }
}
