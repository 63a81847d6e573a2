// The gated decode attention (attn_gated_decode.wgsl, whose arithmetic it
// shares through attn_gated_decode_head.wgsli; FUSE_ROPE = 1) of one token
// in each of `count` sequences, a batched decode step: entry i of the row
// table is (row, k0, v0, pos): the token is row `row` of qkv and out, at
// position pos of its sequence, whose K and V caches start at words k0 and
// v0 of kc and vc (the layer's caches of all slots, backend.h
// buf_new_slots). Each token is split over key tiles as a one-token
// dispatch at its position splits it (splits and tps from pos, max_splits
// and KT as the host computes them for one token), its partials at entry
// i's block of H * max_splits * (D + 2) in part, merged by
// attn_gated_combine_rows.wgsl (GATE = 1) or attn_combine_rows.wgsl.
// Grid: x = H, y = count, z = the most splits of any entry.
enable subgroups;
diagnostic(off, subgroup_uniformity);

override WG: u32 = 256;
override FUSE_ROPE: u32 = 1u;
override GATE: u32 = 1u;
// DIRECT_KV = 1 (attentionDecodeOnline.useDirectContiguousKVLayout): cache
// rows addressed with the contiguous layout's formula (pos * KVH + kvh) * D;
// 0: through the row strides kv_pos / kv_head of the parameters (elements,
// multiples of 4, of 8 with KV16), the form any other layout would need.
override DIRECT_KV: u32 = 1u;
override KV16: u32 = 0u;
override PAIRS: u32 = 0u; // rope pairs: 0 halves, 1 adjacent (rope_pair.wgsli)

const MAXR: u32 = 256u; // most entries (WISP_MAX_ROWS)

struct Params {
  H: u32,
  KVH: u32,
  D: u32,
  R: u32,
  eps: f32,
  scale: f32,
  kv_pos: u32,
  kv_head: u32,
  count: u32,
  max_splits: u32, // the split rule (attn_split.wgsli: wisp_wgpu_split_rule)
  pad0: u32,
  pad1: u32,
  rows: array<vec4<u32>, MAXR>,
}

@group(0) @binding(10) var<uniform> p: Params;

// #include "rope_pair.wgsli"
// #include "attn_gated_decode_head.wgsli"

// #include "sg_reduce.wgsli"

// #include "attn_tile.wgsli"

// #include "attn_split.wgsli"

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32,
        @builtin(subgroup_invocation_id) sli: u32, @builtin(subgroup_size) sgs: u32) {
  let i = wid.y;
  let e = p.rows[i];
  let pos = e.w;
  let sp = decode_split(pos, p.max_splits); // the one-token decode's split of position pos
  let splits = sp.x;
  let tps = sp.y;
  if (i >= p.count || wid.z >= splits) {
    return;
  }
  let D = p.D;
  let t = Tok(pos, splits, tps, e.x * (2u * p.H + 2u * p.KVH) * D, e.x * p.H * D,
              i * p.H * split_most(p.max_splits) * (D + 2u), e.y, e.z);
  attend(wid.x, wid.z, t, li, sli, sgs);
}
