// Stream probe (tools/stream_probe.c): the fastest one dispatch reads NV
// vec4<u32>s here, for comparison with the one-token products' times. Each
// thread reads U vec4s an iteration (all issued before any is used), then
// strides by the grid; the XOR of everything read decides whether a word
// is written (never, in practice), so the loads cannot be dropped.
override WG: u32 = 256;
override U: u32 = 4;

struct Params { nv: u32, pad0: u32, pad1: u32, pad2: u32, }

@group(0) @binding(0) var<storage, read> w: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
  let g = wid.x + wid.y * nwg.x;
  let threads = nwg.x * nwg.y * WG;
  // thread t's iteration k reads vec4s (k * U + j) * threads + t, j < U:
  // every load instruction of a subgroup is one contiguous 512-byte run
  var acc = vec4<u32>(0u);
  var base = g * WG + li;
  var v: array<vec4<u32>, 8>;
  loop {
    if (base >= p.nv) { break; }
    for (var j = 0u; j < U; j++) {
      let i = base + j * threads;
      if (i < p.nv) { v[j] = w[i]; } else { v[j] = vec4<u32>(0u); }
    }
    for (var j = 0u; j < U; j++) { acc ^= v[j]; }
    base += U * threads;
  }
  if (acc.x == 0x9e3779b9u && acc.y == 0x7f4a7c15u) {
    out[g] = acc.z ^ acc.w;
  }
}
