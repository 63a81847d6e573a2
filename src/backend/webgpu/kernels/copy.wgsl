// b[dst + i] = b[src + i] for i < n within one buffer (the decode loop moves
// the last sampled token id to slot 0 for the next batch on the device).
// The ranges do not overlap. Grid: ceil(n / WG).
override WG: u32 = 64;

struct Params {
  dst: u32,
  src: u32,
  n: u32,
  pad: u32,
}

@group(0) @binding(0) var<storage, read_write> b: array<u32>;
@group(0) @binding(1) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  if (gid.x < p.n) {
    b[p.dst + gid.x] = b[p.src + gid.x];
  }
}
