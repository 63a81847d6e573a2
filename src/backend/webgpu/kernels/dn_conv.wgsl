// Gated DeltaNet, step 1 (Qwen 3.5 linear_attention; backend.h
// wisp_deltanet_args): causal depthwise conv + SiLU over the qkv part of the
// projection rows, token by token, with the rolling conv state.
//   c[t][ch] = silu(sum_{k<S} taps[ch][k] * state[ch][k] + taps[ch][S] * x[t][ch]),
//   then state[ch] shifts left by one and takes x[t][ch] last (S = L - 1).
// One thread per channel (grid x = ceil(cdim / WG)); the token loop is
// sequential inside the thread, so the state carries across tokens and calls.
override WG: u32 = 64;

struct Params {
  n: u32,     // tokens
  cdim: u32,  // channels = 2K + V
  L: u32,     // taps per channel
  row: u32,   // floats per projection row (2K + 2V + 2*v_heads)
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
  for (var t = 0u; t < p.n; t++) {
    let x = proj[t * p.row + ch];
    var acc = 0.0;
    for (var k = 0u; k < S; k++) {
      acc += taps[ch * L + k] * state[ch * S + k];
    }
    acc += taps[ch * L + S] * x;
    for (var k = 0u; k + 1u < S; k++) {
      state[ch * S + k] = state[ch * S + k + 1u];
    }
    if (S > 0u) {
      state[ch * S + S - 1u] = x;
    }
    cout[t * p.cdim + ch] = acc / (1.0 + exp(-acc));
  }
}
