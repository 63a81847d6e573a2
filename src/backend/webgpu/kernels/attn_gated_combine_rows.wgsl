// Merges the splits of attn_gated_decode_rows.wgsl and applies the output
// gate, for the tokens of its row table whose position it split (as
// attn_gated_combine.wgsl does for one token, attn_gated_merge.wgsli).
// Entry i is (row, -, -, pos); its partials are block i of H * max_splits
// * (D + 2) in part, its gates and output rows `row` of qkv and out. One
// workgroup per (head, entry): grid x = H, y = count.
override WG: u32 = 256;
const KT: u32 = 32u;    // keys per tile of attn_gated_decode_rows.wgsl
const MAXR: u32 = 256u; // most entries (WISP_MAX_ROWS)

struct Params {
  H: u32,
  KVH: u32,
  D: u32,
  count: u32,
  max_splits: u32, // the split rule (attn_split.wgsli: wisp_wgpu_split_rule)
  pad0: u32,
  pad1: u32,
  pad2: u32,
  rows: array<vec4<u32>, MAXR>,
}

@group(0) @binding(0) var<storage, read> part: array<f32>;
@group(0) @binding(1) var<storage, read> qkv: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

// #include "attn_gated_merge.wgsli"

// #include "attn_split.wgsli"

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
  let h = wid.x;
  let i = wid.y;
  if (i >= p.count) {
    return;
  }
  let e = p.rows[i];
  let splits = decode_split(e.w, p.max_splits).x; // as the attention split this row
  if (splits == 1u) {
    return; // written (and gated) by the attention itself
  }
  let D = p.D;
  let row = e.x * (2u * p.H + 2u * p.KVH) * D;
  merge_gated_head((i * p.H * split_most(p.max_splits) + h * splits) * (D + 2u), row + h * 2u * D + D, (e.x * p.H + h) * D, D,
                   splits, li);
}
