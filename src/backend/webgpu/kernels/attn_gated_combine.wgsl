// Merges the splits of attn_gated_decode.wgsl (one decode token) and applies
// the output gate (attentionDecodeOnline.useOutputGateFusion):
//   out[h][d] = sigmoid(gate_h[d]) * sum_z acc_z[d] e^(m_z - M) / sum_z l_z e^(m_z - M),
// M = max_z m_z, gate_h = the second half of head h's (q|gate) slice of the
// qkv row (attn_gated_merge.wgsli). One workgroup per head: grid x = H; WG
// >= D threads (one per dimension, so no thread walks the splits more than
// once). WIDE = 1: the workgroup shares the splits out (attn_merge_wide.wgsli;
// the many splits of attn_decode_long.wgsl), another summation order.
override WG: u32 = 256;
override WIDE: u32 = 0u;

struct Params {
  H: u32,
  D: u32,
  splits: u32,
  pad: u32,
}

@group(0) @binding(0) var<storage, read> part: array<f32>;
@group(0) @binding(1) var<storage, read> qkv: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

// #include "attn_gated_merge.wgsli"

// #include "attn_merge_wide.wgsli"

// merge_gated_head's result, the splits shared out (WIDE = 1)
fn merge_gated_head_wide(base: u32, g0: u32, ob: u32, D: u32, splits: u32, li: u32) {
  let ml = merge_prepare(base, D, splits, li);
  if (D <= WG) {
    let t = merge_dims(base, D, splits, ml.x, li);
    if (li < D) {
      out[ob + li] = t / ml.y / (1.0 + exp(-qkv[g0 + li]));
    }
  } else {
    for (var d = li; d < D; d += WG) {
      out[ob + d] = merge_sum(base, D, splits, ml.x, d, 0u, 1u) / ml.y / (1.0 + exp(-qkv[g0 + d]));
    }
  }
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
  let h = wid.x;
  if (WIDE == 1u) {
    merge_gated_head_wide(h * p.splits * (p.D + 2u), h * 2u * p.D + p.D, h * p.D, p.D, p.splits, li);
  } else {
    merge_gated_head(h * p.splits * (p.D + 2u), h * 2u * p.D + p.D, h * p.D, p.D, p.splits, li);
  }
}
