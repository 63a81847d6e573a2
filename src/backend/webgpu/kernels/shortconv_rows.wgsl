// The gated short convolution (shortconv.wgsl) of one token in each of
// `count` sequences (a batched decode step): entry i of the row table is
// (row, s0, -, -): the token is row `row` of bcx and out, its sequence's
// state [dim][L-1] starts at word s0 of `state` (the layer's states of all
// slots, backend.h buf_new_slots). Each token's arithmetic is
// shortconv.wgsl's for n = 1:
//   out[ch] = C[ch] * (taps[ch][S] * bx + sum_{k<S} taps[ch][k] * old[k]),
//   bx = B[ch] * X[ch], S = L - 1; the new state is old[1..S) then bx.
// A thread per (channel, entry): grid x = ceil(dim / WG), y = count.
override WG: u32 = 64;
const MAXS: u32 = 8u;   // most state taps (L - 1), checked by the host
const MAXR: u32 = 256u; // most entries (WISP_MAX_ROWS)

struct Params {
  dim: u32,
  L: u32,
  count: u32,
  pad0: u32,
  rows: array<vec4<u32>, MAXR>,
}

@group(0) @binding(0) var<storage, read> bcx: array<f32>;
@group(0) @binding(1) var<storage, read> taps: array<f32>;
@group(0) @binding(2) var<storage, read_write> state: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let ch = gid.x;
  let i = gid.y;
  if (ch >= p.dim || i >= p.count) {
    return;
  }
  let e = p.rows[i];
  let S = p.L - 1u;
  let tw = ch * p.L;
  let sb = e.y + ch * S;
  let row = e.x * 3u * p.dim;
  var old: array<f32, MAXS>;
  for (var k = 0u; k < S; k++) {
    old[k] = state[sb + k];
  }
  let bx = bcx[row + ch] * bcx[row + 2u * p.dim + ch];
  var acc = taps[tw + S] * bx;
  for (var k = 0u; k < S; k++) {
    acc += taps[tw + k] * old[k];
  }
  out[e.x * p.dim + ch] = bcx[row + p.dim + ch] * acc;
  for (var k = 0u; k < S; k++) {
    if (1u + k >= S) {
      state[sb + k] = bx;
    } else {
      state[sb + k] = old[1u + k];
    }
  }
}
