// Gated DeltaNet, step 1 (linear_attention layers; backend.h
// wisp_deltanet_args): causal depthwise conv + SiLU over the qkv part of the
// projection rows, token by token, with the rolling conv state.
//   c[t][ch] = silu(sum_{k<S} taps[ch][k] * x[p - S + k][ch] + taps[ch][S] * x[p][ch])
// for token t at position p = pos0 + t (S = L - 1). The conv state is the
// WebGPU backend's ring (dn_decode.wgsl explains why): state[ch][L] holds
// the input of position p in slot p % L, so token p reads slots
// (p + 1 + k) % L (k < S) and then writes x[p] to slot p % L.
// One thread per channel (grid x = ceil(cdim / WG)); the token loop is
// sequential inside the thread, so the state carries across tokens and calls.
override WG: u32 = 64;

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
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let ch = gid.x;
  if (ch >= p.cdim) {
    return;
  }
  let L = p.L;
  let S = L - 1u;
  let ring = ch * L;
  for (var t = 0u; t < p.n; t++) {
    let pos = p.pos0 + t;
    let x = proj[t * p.row + ch];
    var acc = 0.0;
    for (var k = 0u; k < S; k++) {
      acc += taps[ch * L + k] * state[ring + (pos + 1u + k) % L];
    }
    acc += taps[ch * L + S] * x;
    state[ring + pos % L] = x;
    cout[t * p.cdim + ch] = acc / (1.0 + exp(-acc));
  }
}
