// Gated short convolution over n tokens:
//   bx[t] = B[t][ch] * X[t][ch]
//   out[t][ch] = C[t][ch] * sum_{k<L} taps[ch][k] * s(t - S + k),  S = L - 1,
// where s(j) = bx[j] for j >= 0 and the carried state state[ch][S + j] for
// j < 0 (the previous call's last S inputs); afterwards state[ch] holds the
// last S inputs of the sequence s.
// bcx rows are (B, C, X) of `dim` each; state is [dim][L-1] and persists
// across calls.
//
// Every output depends only on inputs (bcx and the old state), never on an
// earlier output, so tokens run in parallel: a thread per (channel, block of
// TT tokens), grid x = ceil(dim / WG), y = ceil(n / TT). (A thread per
// channel walking all n tokens in order made a 1,024-token prefill spend
// ~0.5 ms per conv layer here.) Only token block 0 touches the state: it
// reads the old state before anything else and writes the new one at the
// end from bcx's last rows, so no other workgroup can race with it.
override WG: u32 = 64;
override TT: u32 = 16u; // tokens per thread
const MAXS: u32 = 8u;   // most state taps (L - 1), checked by the host

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

fn bx_at(t: u32, ch: u32) -> f32 {
  let row = t * 3u * p.dim;
  return bcx[row + ch] * bcx[row + 2u * p.dim + ch];
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let ch = gid.x;
  let t0 = gid.y * TT;
  if (ch >= p.dim || t0 >= p.n) {
    return;
  }
  let S = p.L - 1u;
  let tw = ch * p.L;
  let sb = ch * S;
  // The old state, read first (block 0 only: it is the one writer).
  var old: array<f32, MAXS>;
  if (t0 == 0u) {
    for (var k = 0u; k < S; k++) {
      old[k] = state[sb + k];
    }
  }
  let t1 = min(t0 + TT, p.n);
  for (var t = t0; t < t1; t++) {
    var acc = taps[tw + S] * bx_at(t, ch);
    for (var k = 0u; k < S; k++) {
      // s(t - S + k): an input of this call, or the old state
      if (t + k >= S) {
        acc += taps[tw + k] * bx_at(t + k - S, ch);
      } else {
        acc += taps[tw + k] * old[t + k];
      }
    }
    out[t * p.dim + ch] = bcx[t * 3u * p.dim + p.dim + ch] * acc;
  }
  if (t0 == 0u) {
    // New state k = s(n - S + k).
    for (var k = 0u; k < S; k++) {
      if (p.n + k >= S) {
        state[sb + k] = bx_at(p.n + k - S, ch);
      } else {
        state[sb + k] = old[p.n + k];
      }
    }
  }
}
