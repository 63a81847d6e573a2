// The fused decode attention (attn_decode.wgsl, whose arithmetic it shares
// through attn_decode_head.wgsli) of one token in each of `count`
// sequences, a batched decode step: entry i of the row table is (row, k0,
// v0, pos): the token is row `row` of qkv and out, at position pos of its
// sequence, whose K and V caches start at words k0 and v0 of kc and vc (the
// layer's caches of all slots, backend.h buf_new_slots). Each token is
// split over key tiles as a one-token dispatch at its position splits it
// (splits and tps from pos, max_splits and KT as the host computes them for
// one token), its partials at entry i's block of H * max_splits * (D + 2)
// in part, merged by attn_combine_rows.wgsl. Grid: x = H, y = count, z =
// the most splits of any entry (workgroups past an entry's splits return).
enable subgroups;
// A subgroup takes whole keys (its loop bounds are uniform within the
// subgroup, not across the workgroup).
diagnostic(off, subgroup_uniformity);

override WG: u32 = 256;
// KV16 = 1: caches of f16 pairs packed in u32 words (unpack2x16float; element
// e is half e & 1 of word e >> 1); 0: f32 (words are f32 bits).
override KV16: u32 = 0u;
override QNORM: u32 = 1u; // 0: q is not normed (attention without q/k norm)
override KNORM: u32 = 1u; // 0: k is not normed
override PAIRS: u32 = 0u; // rope pairs: 0 halves, 1 adjacent (rope_pair.wgsli)

const MAXR: u32 = 256u; // most entries (WISP_MAX_ROWS)

struct Params {
  H: u32,
  KVH: u32,
  D: u32,
  count: u32,
  eps: f32,
  scale: f32,
  max_splits: u32, // the split rule (attn_split.wgsli: wisp_wgpu_split_rule)
  win: u32, // sliding window: 0 here (the host runs windowed rows one by one)
  rows: array<vec4<u32>, MAXR>,
}

@group(0) @binding(9) var<uniform> p: Params;

// #include "rope_pair.wgsli"
// #include "attn_decode_head.wgsli"

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
  let t = Tok(pos, splits, tps, e.x * (p.H + 2u * p.KVH) * D, e.x * p.H * D, i * p.H * split_most(p.max_splits) * (D + 2u), e.y,
              e.z);
  attend(wid.x, wid.z, t, li, sli, sgs);
}
