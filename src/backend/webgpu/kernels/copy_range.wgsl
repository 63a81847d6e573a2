// dst[dst_off + i] = src[src_off + i] for i < n, in 32-bit words between two
// buffers: the decode loop's snapshot of the recurrent state before a batch
// and its restore (buf_copy_to, offsets 0), and the persistent decode's
// state copies between the session's buffers and its arena (wgpu_persist.c).
// Grid: ceil(n / WG) workgroups as x*y.
override WG: u32 = 256;

struct Params {
  src_off: u32,
  dst_off: u32,
  n: u32,
  pad: u32,
}

@group(0) @binding(0) var<storage, read> src: array<u32>;
@group(0) @binding(1) var<storage, read_write> dst: array<u32>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
  let i = (wid.x + wid.y * nwg.x) * WG + li;
  if (i < p.n) {
    dst[p.dst_off + i] = src[p.src_off + i];
  }
}
