// Attention for one new token (decode), fused: attn_rope + attn_flash in one
// dispatch. For head h (KV head h / (H / KVH)) at position pos:
//   q = rope(rmsnorm(q_h) * qn), k = rope(rmsnorm(k) * kn), v from the qkv row
//   (QNORM = 0 / KNORM = 0: q / k not normed, qn / kn bound to placeholders),
//   out[h] = sum_{j <= pos} softmax_j(scale * q . k_j) v_j,
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

const KT: u32 = 32u; // keys per tile
const MAXD: u32 = 256u;
const NEG: f32 = -3.0e38;

struct Params {
  pos: u32,
  H: u32,
  KVH: u32,
  D: u32,
  eps: f32,
  scale: f32,
  splits: u32,
  tps: u32,
}

@group(0) @binding(0) var<storage, read> qkv: array<f32>;
@group(0) @binding(1) var<storage, read> qn: array<f32>;
@group(0) @binding(2) var<storage, read> kn: array<f32>;
@group(0) @binding(3) var<storage, read> cosv: array<f32>;
@group(0) @binding(4) var<storage, read> sinv: array<f32>;
@group(0) @binding(5) var<storage, read_write> kc: array<u32>;
@group(0) @binding(6) var<storage, read_write> vc: array<u32>;
@group(0) @binding(7) var<storage, read_write> out: array<f32>;
@group(0) @binding(8) var<storage, read_write> part: array<f32>;
@group(0) @binding(9) var<uniform> p: Params;

var<workgroup> qf: array<f32, MAXD>;  // q as used: normed, rotated, scaled
var<workgroup> ks: array<f32, MAXD>;  // the new key
var<workgroup> vs: array<f32, MAXD>;  // the new value
var<workgroup> sc: array<f32, KT>;    // the tile's scores
var<workgroup> sgred: array<vec2<f32>, 64>; // per-subgroup sums (sg_reduce.wgsli)
var<workgroup> accs: array<f32, WG>;       // the key groups' value sums

// #include "sg_reduce.wgsli"

// #include "attn_tile.wgsli"

// Cache word i of a key row starting at element e (e even): two elements.
fn key_pair(e: u32, i: u32) -> vec2<f32> {
  if (KV16 == 1u) {
    return unpack2x16float(kc[e / 2u + i]);
  }
  return vec2<f32>(bitcast<f32>(kc[e + 2u * i]), bitcast<f32>(kc[e + 2u * i + 1u]));
}

fn value(e: u32) -> f32 {
  if (KV16 == 1u) {
    return unpack2x16float(vc[e >> 1u])[e & 1u];
  }
  return bitcast<f32>(vc[e]);
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32,
        @builtin(subgroup_invocation_id) sli: u32, @builtin(subgroup_size) sgs: u32) {
  let h = wid.x;
  let z = wid.z;
  let D = p.D;
  let half = D / 2u;
  let pos = p.pos;
  let kvh = h / (p.H / p.KVH);
  let qsrc = h * D;
  let ksrc = (p.H + kvh) * D;
  let vsrc = (p.H + p.KVH + kvh) * D;
  let dl = li < D;
  // Prologue: thread i < D owns element i (its rotation partner is i +- D/2).
  var qa = 0.0;
  var ka = 0.0;
  var ss = vec2<f32>(0.0, 0.0);
  if (dl) {
    qa = qkv[qsrc + li];
    ka = qkv[ksrc + li];
    vs[li] = qkv[vsrc + li];
    ss = vec2<f32>(qa * qa, ka * ka);
  }
  let tot = wg_sum2_sg(li, sli, sgs, ss);
  var qinv = 1.0;
  var kinv = 1.0;
  if (QNORM == 1u) {
    qinv = inverseSqrt(tot.x / f32(D) + p.eps);
  }
  if (KNORM == 1u) {
    kinv = inverseSqrt(tot.y / f32(D) + p.eps);
  }
  if (dl) {
    var j = li + half;
    if (li >= half) {
      j = li - half;
    }
    let ci = li % half;
    let c = cosv[pos * half + ci];
    let s = sinv[pos * half + ci];
    var qw = vec2<f32>(1.0, 1.0); // the norm weights of elements i and j
    var kw = vec2<f32>(1.0, 1.0);
    if (QNORM == 1u) {
      qw = vec2<f32>(qn[li], qn[j]);
    }
    if (KNORM == 1u) {
      kw = vec2<f32>(kn[li], kn[j]);
    }
    let qn_i = qa * qinv * qw.x;
    let qn_j = qkv[qsrc + j] * qinv * qw.y;
    let kn_i = ka * kinv * kw.x;
    let kn_j = qkv[ksrc + j] * kinv * kw.y;
    if (li < half) {
      qf[li] = (qn_i * c - qn_j * s) * p.scale;
      ks[li] = kn_i * c - kn_j * s;
    } else {
      qf[li] = (qn_i * c + qn_j * s) * p.scale;
      ks[li] = kn_i * c + kn_j * s;
    }
  }
  workgroupBarrier();
  if (z == p.splits - 1u && h % (p.H / p.KVH) == 0u) {
    let dst = (pos * p.KVH + kvh) * D;
    if (KV16 == 1u) {
      if (li < D / 2u) {
        kc[dst / 2u + li] = pack2x16float(vec2<f32>(ks[2u * li], ks[2u * li + 1u]));
        vc[dst / 2u + li] = pack2x16float(vec2<f32>(vs[2u * li], vs[2u * li + 1u]));
      }
    } else if (dl) {
      kc[dst + li] = bitcast<u32>(ks[li]);
      vc[dst + li] = bitcast<u32>(vs[li]);
    }
  }

  let nsg = WG / sgs;
  let sg = li / sgs;
  let KG = WG / D;   // key groups of the value sums
  let kg = li / D;
  let dv = li % D;
  let vl = kg < KG; // this thread sums values
  var m = NEG;
  var l = 0.0;
  var acc = 0.0;
  let ntile = pos / KT + 1u;
  let tile0 = z * p.tps;
  let tile1 = min(ntile, tile0 + p.tps);
  for (var tile = tile0; tile < tile1; tile++) {
    let j0 = tile * KT;
    let cnt = min(KT, pos + 1u - j0);
    // Scores: subgroup sg takes keys sg, sg + nsg, ... of the tile; its
    // lanes stride over the key's element pairs.
    for (var kk = sg; kk < cnt; kk += nsg) {
      let j = j0 + kk;
      var s = 0.0;
      if (j == pos) {
        for (var i = sli; i < half; i += sgs) {
          s += qf[2u * i] * ks[2u * i] + qf[2u * i + 1u] * ks[2u * i + 1u];
        }
      } else {
        let e = (j * p.KVH + kvh) * D;
        for (var i = sli; i < half; i += sgs) {
          let kp = key_pair(e, i);
          s += qf[2u * i] * kp.x + qf[2u * i + 1u] * kp.y;
        }
      }
      s = subgroupAdd(s);
      if (sli == 0u) {
        sc[kk] = s;
      }
    }
    workgroupBarrier();
    // Online softmax over the tile (every thread, from workgroup memory).
    let mt = tile_max(m, cnt);
    let alpha = exp(m - mt);
    let lt = tile_expsum(mt, cnt);
    var a = 0.0;
    if (vl) {
      for (var jj = kg; jj < cnt; jj += KG) {
        let e = exp(sc[jj] - mt);
        let jk = j0 + jj;
        var v: f32;
        if (jk == pos) {
          v = vs[dv];
        } else {
          v = value((jk * p.KVH + kvh) * D + dv);
        }
        a += e * v;
      }
    }
    l = l * alpha + lt;
    acc = acc * alpha + a;
    m = mt;
    workgroupBarrier(); // sc is rewritten by the next tile
  }
  accs[li] = acc;
  workgroupBarrier();
  if (!dl) {
    return;
  }
  acc = 0.0;
  for (var g = 0u; g < KG; g++) {
    acc += accs[g * D + li];
  }
  if (p.splits == 1u) {
    out[h * D + li] = acc / l;
    return;
  }
  let pb = (h * p.splits + z) * (D + 2u);
  if (li == 0u) {
    part[pb] = m;
    part[pb + 1u] = l;
  }
  part[pb + 2u + li] = acc;
}
