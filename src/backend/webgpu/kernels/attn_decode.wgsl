// Attention for one new token (decode), fused: attn_rope + attn_flash in one
// dispatch. For head h (KV head h / (H / KVH)) at position pos:
//   q = rope(rmsnorm(q_h) * qn), k = rope(rmsnorm(k) * kn), v from the qkv row
//   (QNORM = 0 / KNORM = 0: q / k not normed, qn / kn bound to placeholders),
//   out[h] = sum_{pos - win < j <= pos} softmax_j(scale * q . k_j) v_j (win 0: every j <= pos),
// where keys/values j < pos come from the caches and j = pos from the ones
// just computed (kept in workgroup memory). The last split of the first q
// head of each KV group also appends k and v to the caches; no workgroup of
// this dispatch reads the caches at pos, so there is no race.
//
// Work split (flash decoding, merged by attn_combine.wgsl): one workgroup
// per (head, split), grid x = H, z = splits; split z takes the key tiles
// [z*tps, (z+1)*tps) of KT keys. In a tile the subgroups share out the keys:
// a subgroup's lanes stride over one key's cache words (coalesced) and one
// subgroupAdd gives its score; then the threads, KG = WG / D key groups of
// D, sum the probability-weighted values: thread (g, d) takes dimension d of
// the tile's keys g, g + KG, ... (loads contiguous across threads,
// independent), and the KG partial sums meet in workgroup memory at the
// end. With many threads per head dimension, neither the scores nor the
// value sums are long serial chains. Thread i < D owns element i of q, k
// and v in the prologue; the norms are subgroup sums. Needs D <= WG, D % 4 == 0 (KV16:
// D % 8 == 0), D <= 256, subgroups of >= 4 lanes as contiguous ranges of
// local_invocation_index (tests/test_webgpu_abi.c), 9 storage bindings.
// The body is attn_decode_head.wgsli's, shared with attn_decode_rows.wgsl.
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

struct Params {
  pos: u32,
  H: u32,
  KVH: u32,
  D: u32,
  eps: f32,
  scale: f32,
  splits: u32,
  tps: u32,
  win: u32, // sliding window (0: none)
  pad0: u32,
  pad1: u32,
  pad2: u32,
}

@group(0) @binding(9) var<uniform> p: Params;

// #include "rope_pair.wgsli"
// #include "attn_decode_head.wgsli"

// #include "sg_reduce.wgsli"

// #include "attn_tile.wgsli"

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32,
        @builtin(subgroup_invocation_id) sli: u32, @builtin(subgroup_size) sgs: u32) {
  attend(wid.x, wid.z, Tok(p.pos, p.splits, p.tps, 0u, 0u, 0u, 0u, 0u), li, sli, sgs);
}
