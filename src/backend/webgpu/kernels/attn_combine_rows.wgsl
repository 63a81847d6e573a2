// Merges the splits of attn_decode_rows.wgsl: the tokens of its row table
// whose position it split (as attn_combine.wgsl merges a one-token split,
// attn_merge.wgsli). Entry i of the table is (row, -, -, pos); its partials
// are block i of H * max_splits * (D + 2) in part, its output row `row` of
// out. One workgroup per (head, entry): grid x = H, y = count.
override WG: u32 = 64;
const KT: u32 = 32u;    // keys per tile of attn_decode_rows.wgsl
const MAXR: u32 = 256u; // most entries (WISP_MAX_ROWS)

struct Params {
  H: u32,
  D: u32,
  count: u32,
  max_splits: u32, // the split rule (attn_split.wgsli: wisp_wgpu_split_rule)
  rows: array<vec4<u32>, MAXR>,
}

@group(0) @binding(0) var<storage, read> part: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

// #include "attn_merge.wgsli"

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
    return; // written by the attention itself
  }
  let base = (i * p.H * split_most(p.max_splits) + h * splits) * (p.D + 2u);
  merge_head(base, (e.x * p.H + h) * p.D, p.D, splits, li);
}
