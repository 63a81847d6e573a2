// Merges the splits of attn_flash.wgsl (flash-decoding): for token t and
// head h, with (m_z, l_z, acc_z) the running max, sum and unnormalized output
// of split z,
//   out[t][h][d] = sum_z acc_z[d] e^(m_z - M) / sum_z l_z e^(m_z - M),
// M = max_z m_z (attn_merge.wgsli). One workgroup per (head, token):
// grid x = H, y = n. WIDE = 1: the workgroup shares the splits out
// (attn_merge_wide.wgsli; the many splits of attn_decode_long.wgsl),
// another summation order.
override WG: u32 = 64;
override WIDE: u32 = 0u;

struct Params {
  n: u32,
  H: u32,
  D: u32,
  splits: u32,
}

@group(0) @binding(0) var<storage, read> part: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

// #include "attn_merge.wgsli"

// #include "attn_merge_wide.wgsli"

// merge_head's result, the splits shared out (WIDE = 1)
fn merge_head_wide(base: u32, ob: u32, D: u32, splits: u32, li: u32) {
  let ml = merge_prepare(base, D, splits, li);
  if (D <= WG) {
    let t = merge_dims(base, D, splits, ml.x, li);
    if (li < D) {
      out[ob + li] = t / ml.y;
    }
  } else {
    for (var d = li; d < D; d += WG) {
      out[ob + d] = merge_sum(base, D, splits, ml.x, d, 0u, 1u) / ml.y;
    }
  }
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
  let h = wid.x;
  let t = wid.y;
  if (WIDE == 1u) {
    merge_head_wide((t * p.H + h) * p.splits * (p.D + 2u), (t * p.H + h) * p.D, p.D, p.splits, li);
  } else {
    merge_head((t * p.H + h) * p.splits * (p.D + 2u), (t * p.H + h) * p.D, p.D, p.splits, li);
  }
}
