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

const KT: u32 = 32u;    // keys per tile
const MAXD: u32 = 256u;
const NEG: f32 = -3.0e38;

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

@group(0) @binding(0) var<storage, read> qkv: array<f32>;
@group(0) @binding(1) var<storage, read> qn: array<f32>;
@group(0) @binding(2) var<storage, read> kn: array<f32>;
@group(0) @binding(3) var<storage, read> cosv: array<f32>;
@group(0) @binding(4) var<storage, read> sinv: array<f32>;
@group(0) @binding(5) var<storage, read> qin: array<f32>;
@group(0) @binding(6) var<storage, read_write> kc: array<vec4<u32>>; // f32: 4 elements, KV16: 8
@group(0) @binding(7) var<storage, read_write> vc: array<u32>;      // f32: 1 element, KV16: 2
@group(0) @binding(8) var<storage, read_write> out: array<f32>;
@group(0) @binding(9) var<storage, read_write> part: array<f32>;
@group(0) @binding(10) var<uniform> p: Params;

var<workgroup> qf: array<vec4<f32>, MAXD / 4u>; // q as used: normed, rotated
var<workgroup> ks: array<vec4<f32>, MAXD / 4u>; // the new key (FUSE_ROPE)
var<workgroup> vs: array<f32, MAXD>;            // the new value (FUSE_ROPE)
var<workgroup> sc: array<f32, KT>;              // the tile's scores
var<workgroup> sgred: array<vec2<f32>, 64>;     // per-subgroup sums (sg_reduce.wgsli)

// #include "sg_reduce.wgsli"

// #include "attn_tile.wgsli"

// First element of the cache row of position j, KV head kvh.
fn kv_row(j: u32, kvh: u32) -> u32 {
  if (DIRECT_KV == 1u) {
    return (j * p.KVH + kvh) * p.D;
  }
  return j * p.kv_pos + kvh * p.kv_head;
}

// Element i of a head at qkv[src..] scaled by inv * w (w: 0 q, 1 k norm),
// with the NEOX rotation of its first R dims at position pos.
fn rot(src: u32, inv: f32, wsel: u32, i: u32, pos: u32) -> f32 {
  var wi = qn[i];
  if (wsel == 1u) {
    wi = kn[i];
  }
  var r = qkv[src + i] * inv * wi;
  let half = p.R / 2u;
  if (i < p.R) {
    var j = i + half;
    if (i >= half) {
      j = i - half;
    }
    var wj = qn[j];
    if (wsel == 1u) {
      wj = kn[j];
    }
    let o = qkv[src + j] * inv * wj;
    let ci = i % half;
    let c = cosv[pos * half + ci];
    let s = sinv[pos * half + ci];
    if (i < half) {
      r = r * c - o * s;
    } else {
      r = r * c + o * s;
    }
  }
  return r;
}

// q . k over the key row at element e, the lanes of a subgroup striding over
// it (qf holds q as vec4s).
fn key_dot(e: u32, sli: u32, sgs: u32) -> f32 {
  var s = 0.0;
  if (KV16 == 1u) {
    let kb8 = e / 8u;
    for (var d8 = sli; d8 < p.D / 8u; d8 += sgs) {
      let w = kc[kb8 + d8];
      s += dot(qf[2u * d8], vec4<f32>(unpack2x16float(w.x), unpack2x16float(w.y)));
      s += dot(qf[2u * d8 + 1u], vec4<f32>(unpack2x16float(w.z), unpack2x16float(w.w)));
    }
  } else {
    let kb4 = e / 4u;
    for (var d4 = sli; d4 < p.D / 4u; d4 += sgs) {
      s += dot(qf[d4], bitcast<vec4<f32>>(kc[kb4 + d4]));
    }
  }
  return s;
}

// Value element e of the cache.
fn value(e: u32) -> f32 {
  if (KV16 == 1u) {
    return unpack2x16float(vc[e >> 1u])[e & 1u];
  }
  return bitcast<f32>(vc[e]);
}

// Appends the new key (ks) and value (vs) at the row starting at element
// dst; thread li < D owns element li (KV16: thread li < D/2 owns word li of
// the values, li % 8 == 0 one vec4<u32> of the key).
fn append_kv(li: u32, dst: u32) {
  if (KV16 == 1u) {
    if (li < p.D / 2u) {
      vc[dst / 2u + li] = pack2x16float(vec2<f32>(vs[2u * li], vs[2u * li + 1u]));
    }
    if ((li & 7u) == 0u) {
      let a = ks[li / 4u];
      let b = ks[li / 4u + 1u];
      kc[dst / 8u + li / 8u] = vec4<u32>(pack2x16float(a.xy), pack2x16float(a.zw), pack2x16float(b.xy),
                                         pack2x16float(b.zw));
    }
  } else {
    vc[dst + li] = bitcast<u32>(vs[li]);
    if ((li & 3u) == 0u) {
      kc[dst / 4u + li / 4u] = bitcast<vec4<u32>>(ks[li / 4u]);
    }
  }
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32,
        @builtin(subgroup_invocation_id) sli: u32, @builtin(subgroup_size) sgs: u32) {
  let h = wid.x;
  let z = wid.z;
  let D = p.D;
  let D4 = D / 4u;
  let pos = p.pos;
  let kvh = h / (p.H / p.KVH);
  let qsrc = h * 2u * D;
  let ksrc = 2u * p.H * D + kvh * D;
  let vsrc = 2u * p.H * D + p.KVH * D + kvh * D;
  let dl = li < D;
  var qv = 0.0;
  var kv = 0.0;
  if (FUSE_ROPE == 1u) {
    // Thread i < D owns element i of q, k and v.
    var ss = vec2<f32>(0.0, 0.0);
    if (dl) {
      let a = qkv[qsrc + li];
      let b = qkv[ksrc + li];
      ss = vec2<f32>(a * a, b * b);
    }
    let tot = wg_sum2_sg(li, sli, sgs, ss);
    let qinv = inverseSqrt(tot.x / f32(D) + p.eps);
    let kinv = inverseSqrt(tot.y / f32(D) + p.eps);
    if (dl) {
      qv = rot(qsrc, qinv, 0u, li, pos);
      kv = rot(ksrc, kinv, 1u, li, pos);
      vs[li] = qkv[vsrc + li];
    }
  } else if (dl) {
    qv = qin[h * D + li];
  }
  // Gather each thread's element into vec4s through the subgroup (lanes
  // 4c .. 4c+3 hold vec4 c of their range): no extra barrier.
  let b4 = sli & ~3u;
  let q4 = vec4<f32>(subgroupShuffle(qv, b4), subgroupShuffle(qv, b4 + 1u), subgroupShuffle(qv, b4 + 2u),
                     subgroupShuffle(qv, b4 + 3u));
  let k4 = vec4<f32>(subgroupShuffle(kv, b4), subgroupShuffle(kv, b4 + 1u), subgroupShuffle(kv, b4 + 2u),
                     subgroupShuffle(kv, b4 + 3u));
  if (dl && (li & 3u) == 0u) {
    qf[li / 4u] = q4;
    ks[li / 4u] = k4;
  }
  workgroupBarrier();
  if (FUSE_ROPE == 1u && z == p.splits - 1u && h % (p.H / p.KVH) == 0u && dl) {
    append_kv(li, kv_row(pos, kvh));
  }

  let nsg = WG / sgs;
  let sg = li / sgs;
  var m = NEG;
  var l = 0.0;
  var acc = 0.0;
  let ntile = pos / KT + 1u;
  let tile0 = z * p.tps;
  let tile1 = min(ntile, tile0 + p.tps);
  for (var tile = tile0; tile < tile1; tile++) {
    let j0 = tile * KT;
    let cnt = min(KT, pos + 1u - j0);
    // Scores: subgroup sg takes keys sg, sg + nsg, ... of the tile.
    for (var kk = sg; kk < cnt; kk += nsg) {
      let j = j0 + kk;
      var s = 0.0;
      if (j == pos && FUSE_ROPE == 1u) {
        for (var d4 = sli; d4 < D4; d4 += sgs) {
          s += dot(qf[d4], ks[d4]);
        }
      } else {
        s = key_dot(kv_row(j, kvh), sli, sgs);
      }
      s = subgroupAdd(s);
      if (sli == 0u) {
        sc[kk] = s * p.scale;
      }
    }
    workgroupBarrier();
    // Online softmax over the tile (every thread, from workgroup memory).
    let mt = tile_max(m, cnt);
    let alpha = exp(m - mt);
    let lt = tile_expsum(mt, cnt);
    var a = 0.0;
    for (var jj = 0u; jj < cnt; jj++) {
      let e = exp(sc[jj] - mt);
      if (dl) {
        let jk = j0 + jj;
        var v: f32;
        if (jk == pos && FUSE_ROPE == 1u) {
          v = vs[li];
        } else {
          v = value(kv_row(jk, kvh) + li);
        }
        a += e * v;
      }
    }
    l = l * alpha + lt;
    acc = acc * alpha + a;
    m = mt;
    workgroupBarrier(); // sc is rewritten by the next tile
  }
  if (!dl) {
    return;
  }
  if (p.splits == 1u) {
    var o = acc / l;
    if (GATE == 1u) {
      o = o / (1.0 + exp(-qkv[qsrc + D + li]));
    }
    out[h * D + li] = o;
    return;
  }
  let pb = (h * p.splits + z) * (D + 2u);
  if (li == 0u) {
    part[pb] = m;
    part[pb + 1u] = l;
  }
  part[pb + 2u + li] = acc;
}
