// Gated attention for one new token (decode) at position pos, the
// arrangement the seed profile's session switches ask for:
//   FUSE_ROPE = 1 (useFusedQKVSplitQKNormRoPE): this kernel splits the qkv
//     row ([(q|gate) per head: 2D each][k: KVH*D][v: KVH*D]), RMSNorms q and k
//     per head (weights qn / kn, the artifact's 1 + w), rotates their first R
//     dims with NEOX RoPE (pairs i, i + R/2) and appends k and v to the
//     caches [position][KVH][D] (the last split of the first q head of each
//     KV group writes them; no workgroup reads the caches at pos, the new key
//     and value are used from workgroup memory);
//   FUSE_ROPE = 0: q comes normed and rotated in qin [H][D] and the caches
//     already hold position pos (attn_gated_rope.wgsl ran before).
//   GATE = 1 (attentionDecodeOnline.useOutputGateFusion): the output is
//     multiplied by sigmoid(gate) here (unsplit) or in
//     attn_gated_combine.wgsl (split); GATE = 0: attn_gate.wgsl does it.
// out[h] = sum_{j <= pos} softmax_j(scale * q . k_j) v_j.
//
// Work split (flash decoding): one workgroup per (head, split), grid x = H,
// z = splits; split z takes the key tiles [z*tps, (z+1)*tps) of KT keys and,
// when splits > 1, writes (max, sum, unnormalized output) to part for the
// combine. In a tile the subgroups share out the KT keys: a subgroup's lanes
// stride over one key's D values in 16-byte loads and one subgroupAdd gives
// the score, so a score costs a few loads in flight rather than a D-long
// loop; then thread d (< D) sums the tile's KT probability-weighted values of
// dimension d, loads that are contiguous across threads and independent.
// KV16 = 1: the caches hold f16 pairs packed in u32 words (element e is half
// e & 1 of word e >> 1; pack2x16float / unpack2x16float, no `enable f16`):
// a vec4<u32> of kc is 8 key elements; needs D % 8 == 0. KV16 = 0: f32, the
// same bindings read through bitcast (a vec4<u32> of kc is 4 elements).
// Needs D <= WG, D % 4 == 0, subgroups of at least 4 lanes laid out as
// contiguous ranges of local_invocation_index (tests/test_webgpu_abi.c).
// The body is attn_gated_decode_head.wgsli's, shared with
// attn_gated_decode_rows.wgsl.
enable subgroups;
// A subgroup takes whole keys (its loop bounds are uniform within the
// subgroup, not across the workgroup).
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

struct Params {
  pos: u32,
  H: u32,
  KVH: u32,
  D: u32,
  R: u32,
  eps: f32,
  scale: f32,
  splits: u32,
  tps: u32,
  kv_pos: u32,  // DIRECT_KV 0: elements from one position's rows to the next
  kv_head: u32, // DIRECT_KV 0: elements from one KV head's row to the next
  pad2: u32,
}

@group(0) @binding(10) var<uniform> p: Params;

// #include "rope_pair.wgsli"
// #include "attn_gated_decode_head.wgsli"

// #include "sg_reduce.wgsli"

// #include "attn_tile.wgsli"

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32,
        @builtin(subgroup_invocation_id) sli: u32, @builtin(subgroup_size) sgs: u32) {
  attend(wid.x, wid.z, Tok(p.pos, p.splits, p.tps, 0u, 0u, 0u, 0u, 0u), li, sli, sgs);
}
