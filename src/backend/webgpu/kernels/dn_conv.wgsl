// Gated DeltaNet, step 1 (linear_attention layers; backend.h
// wisp_deltanet_args): causal depthwise conv + SiLU over the qkv part of
// the projection rows,
//   c[t][ch] = silu(sum_{k<S} taps[ch][k] * x[p - S + k][ch] + taps[ch][S] * x[p][ch])
// for token t at position p = pos0 + t (S = L - 1). A thread per channel
// and block of TB tokens (grid x = ceil(cdim / WG), y = ceil(n / TB)): a
// prefill's conv runs over all its tokens at once, not a thread per
// channel walking every token.
//
// Inputs before the call come from the conv state, the WebGPU backend's
// ring (dn_decode.wgsl): state[ch][L] holds the input of position q in slot
// q % L. Only tokens t < S read it, all in block 0 (TB >= L), and the
// ring's new contents (the call's last S inputs) are written by block 0's
// thread of the channel after its tokens: no thread of another block
// touches the ring, so nothing is overwritten before it is read.
override WG: u32 = 64;
override TB: u32 = 16; // tokens a thread, >= L

struct Params {
  n: u32,     // tokens
  cdim: u32,  // channels = 2K + V
  L: u32,     // taps per channel (ring slots)
  row: u32,   // floats per projection row (2K + 2V + 2*v_heads)
  pos0: u32,  // position of token 0
  pad0: u32,
  pad1: u32,
  pad2: u32,
}

@group(0) @binding(0) var<storage, read> proj: array<f32>;
@group(0) @binding(1) var<storage, read> taps: array<f32>;
@group(0) @binding(2) var<storage, read_write> state: array<f32>;
@group(0) @binding(3) var<storage, read_write> cout: array<f32>;
@group(0) @binding(4) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
  let ch = gid.x;
  if (ch >= p.cdim) {
    return;
  }
  let L = p.L;
  let S = L - 1u;
  let ring = ch * L;
  let t0 = wid.y * TB;
  let t1 = min(t0 + TB, p.n);
  for (var t = t0; t < t1; t++) {
    let pos = p.pos0 + t;
    var acc = 0.0;
    for (var k = 0u; k < S; k++) {
      // input of position pos - S + k = qL - L (qL >= 0, unlike the position)
      let qL = pos + 1u + k;
      var x = 0.0;
      if (qL >= L + p.pos0) {
        x = proj[(qL - L - p.pos0) * p.row + ch];
      } else {
        x = state[ring + qL % L];
      }
      acc += taps[ch * L + k] * x;
    }
    let x = proj[t * p.row + ch];
    acc += taps[ch * L + S] * x;
    cout[t * p.cdim + ch] = acc / (1.0 + exp(-acc));
  }
  if (wid.y == 0u) {
    // positions pos0 + n - S .. pos0 + n - 1; those before pos0 (a call of
    // fewer than S tokens) are in the ring already
    for (var j = 0u; j < S; j++) {
      if (p.n + j >= S) {
        let t = p.n + j - S;
        state[ring + (p.pos0 + t) % L] = proj[t * p.row + ch];
      }
    }
  }
}
