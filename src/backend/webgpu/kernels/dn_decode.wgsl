// Gated DeltaNet decode core for one token (useLinearAttentionFusedDecodeCore):
// dn_conv.wgsl + dn_recur.wgsl in one dispatch, split over many workgroups.
//
// Why the split: one token's work is small (the 0.8B hybrid: 16 v-heads of a
// 128 x 128 f32 state), so a workgroup per head leaves most of a large GPU
// idle and the kernel is bound by each workgroup's chain of loads and
// barriers. The delta rule is independent per value column e of a head's
// state S [k_dim][v_dim]:
//   kv[e] = decay * sum_i S[i][e] k[i]; delta[e] = (v[e] - kv[e]) * beta;
//   S[:, e] = decay * S[:, e] + k delta[e]; o[e] = sum_i S[i][e] q[i]
// so workgroup (h, s) takes the CW value columns s*CW .. s*CW + CW - 1 of
// v-head h (v_heads * NS workgroups, as x*y, NS = ceil(v_dim / CW) slices
// per head; the last slice may be partial). Each workgroup recomputes its head's q and
// k (conv + SiLU + L2 norm of 2 * k_dim channels: cheap) and convolves only
// its slice's v channels. Only the gated RMSNorm couples the columns of a
// head; with NS > 1 this kernel writes the raw o and dn_norm.wgsl applies
// rmsnorm(o) * norm * silu(z) per head in a second, tiny dispatch. With
// NS == 1 (CW >= v_dim: a whole head per workgroup) the norm is done here.
//
// Conv state, race-free: several workgroups read the conv state of a q/k
// channel, so it cannot be shifted in place (a workgroup that shifted it
// could do so before another had read it). It is a ring instead,
// cstate[ch][L] with the input of token position t in slot t % L: token pos
// reads slots (pos + 1 + k) % L for its L - 1 previous inputs (k < L - 1)
// and writes its own input to slot pos % L, which no reader of this token
// touches. dn_conv.wgsl (prefill) keeps the same ring. Each slot has one
// writer: a v channel's slice, and for q/k channels slice 0 of the first
// v-head of the k-head (h % G == 0); the others only read.
//   c[ch] = silu(sum_{k<L-1} taps[ch][k] * x[pos - L + 1 + k] + taps[ch][L-1] * x[pos])
// Then as dn_recur.wgsl: q, k L2-normalised (q *= k_dim^-0.5), beta =
// sigmoid(b[h]), decay = exp(-exp(A_log[h]) * softplus(a[h] + dt_bias[h])).
//
// Inside a workgroup: IG = WG / CW row groups of CW columns; thread (g, e)
// holds S[i][s*CW + e] for i = g, g + IG, ... (NJ = ceil(k_dim / IG) rows, a
// constant so that they stay in registers), and the two matrix-vector
// steps are column sums over the row groups in workgroup memory. Latency is
// what this kernel is made of, so every load that does not depend on the
// convolution (state rows, per-head scalars, z and norm weights) is issued
// before it. Needs subgroups (the host falls back to dn_conv + dn_recur).
// The body is dn_decode_head.wgsli's, shared with dn_decode_rows.wgsl.
enable subgroups;

override WG: u32 = 256; // threads, CW * IG
override CW: u32 = 16;  // value columns per workgroup (the slice)
override NJ: u32 = 8u;  // state rows per thread: ceil(k_dim / (WG / CW))
struct Params {
  kh: u32,    // k heads
  vh: u32,    // v heads
  dk: u32,    // k_dim
  dv: u32,    // v_dim
  L: u32,     // conv taps per channel (ring slots)
  pos: u32,   // token position: its ring slot is pos % L
  ns: u32,    // slices per v-head (1: the gated norm is done here)
  eps: f32,
}

@group(0) @binding(8) var<uniform> p: Params;

// #include "dn_decode_head.wgsli"

// #include "dn_common.wgsli"

// #include "sg_reduce.wgsli"

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32, @builtin(subgroup_invocation_id) sli: u32,
        @builtin(subgroup_size) sgs: u32) {
  let w = wid.x + wid.y * nwg.x;
  if (w >= p.vh * p.ns) {
    return;
  }
  dn_token(w, Tok(p.pos, 0u, 0u, 0u, 0u), li, sli, sgs);
}
