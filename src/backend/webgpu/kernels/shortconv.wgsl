// LFM2 gated short convolution, one thread per channel, tokens in order:
//   bx = B[t][ch] * X[t][ch]
//   out[t][ch] = C[t][ch] * (taps[ch][L-1] * bx + sum_k taps[ch][k] * state[ch][k])
//   state[ch] shifts left by one and takes bx last.
// bcx rows are (B, C, X) of `dim` each; state is [dim][L-1] and persists
// across calls. Grid: ceil(dim / WG) workgroups.
override WG: u32 = 64;

struct Params {
  n: u32,
  dim: u32,
  L: u32,
  pad0: u32,
}

@group(0) @binding(0) var<storage, read> bcx: array<f32>;
@group(0) @binding(1) var<storage, read> taps: array<f32>;
@group(0) @binding(2) var<storage, read_write> state: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let ch = gid.x;
  if (ch >= p.dim) {
    return;
  }
  let S = p.L - 1u;
  let tw = ch * p.L;
  let sb = ch * S;
  for (var t = 0u; t < p.n; t++) {
    let row = t * 3u * p.dim;
    let bx = bcx[row + ch] * bcx[row + 2u * p.dim + ch];
    var acc = taps[tw + S] * bx;
    for (var k = 0u; k < S; k++) {
      acc += taps[tw + k] * state[sb + k];
    }
    for (var k = 0u; k + 1u < S; k++) {
      state[sb + k] = state[sb + k + 1u];
    }
    if (S > 0u) {
      state[sb + S - 1u] = bx;
    }
    out[t * p.dim + ch] = bcx[row + p.dim + ch] * acc;
  }
}
