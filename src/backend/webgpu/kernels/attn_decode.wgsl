// Attention for one new token (decode), fused: attn_rope + attn_flash in one
// dispatch. For head h (KV head h / (H / KVH)) at position pos:
//   q = rope(rmsnorm(q_h) * qn), k = rope(rmsnorm(k) * kn), v from the qkv row,
//   out[h] = sum_{j <= pos} softmax_j(scale * q . k_j) v_j,
// where keys/values j < pos come from the caches and j = pos from the ones
// just computed (kept in workgroup memory). One workgroup per (head, split):
// grid x = H, z = splits (see attn_flash.wgsl for the split scheme and
// attn_combine.wgsl for the merge). The last split of the first q head of
// each KV group also appends k and v to the caches; no workgroup of this
// dispatch reads the caches at pos, so there is no race. WG is a power of two,
// D % 4 == 0, D <= 4*WG and <= 256. Needs 9 storage bindings.
override WG: u32 = 64;
// KV16 = 1: caches of f16 pairs packed in u32 words (unpack2x16float; element
// e is half e & 1 of word e >> 1), D % 8 == 0; 0: f32 (words are f32 bits).
override KV16: u32 = 0u;

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
@group(0) @binding(5) var<storage, read_write> kc: array<vec4<u32>>;
@group(0) @binding(6) var<storage, read_write> vc: array<u32>;
@group(0) @binding(7) var<storage, read_write> out: array<f32>;
@group(0) @binding(8) var<storage, read_write> part: array<f32>;
@group(0) @binding(9) var<uniform> p: Params;

var<workgroup> qs: array<vec4<f32>, MAXD / 4u>;
var<workgroup> qf: array<f32, MAXD>;
var<workgroup> ks: array<f32, MAXD>;
var<workgroup> vs: array<f32, MAXD>;
var<workgroup> sc: array<f32, WG>;
var<workgroup> red: array<f32, WG>;

// #include "attn_kv.wgsli"

// #include "wg_reduce.wgsli"

// #include "attn_rms.wgsli"

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
  let h = wid.x;
  let z = wid.z;
  let D = p.D;
  let half = D / 2u;
  let pos = p.pos;
  let kvh = h / (p.H / p.KVH);
  let qsrc = h * D;
  let ksrc = (p.H + kvh) * D;
  let vsrc = (p.H + p.KVH + kvh) * D;
  let qinv = inv_rms(li, qsrc);
  let kinv = inv_rms(li, ksrc);
  for (var i = li; i < half; i += WG) {
    let c = cosv[pos * half + i];
    let s = sinv[pos * half + i];
    let qa = qkv[qsrc + i] * qinv * qn[i];
    let qb = qkv[qsrc + i + half] * qinv * qn[i + half];
    qf[i] = (qa * c - qb * s) * p.scale;
    qf[i + half] = (qb * c + qa * s) * p.scale;
    let ka = qkv[ksrc + i] * kinv * kn[i];
    let kb = qkv[ksrc + i + half] * kinv * kn[i + half];
    ks[i] = ka * c - kb * s;
    ks[i + half] = kb * c + ka * s;
  }
  for (var d = li; d < D; d += WG) {
    vs[d] = qkv[vsrc + d];
  }
  workgroupBarrier();
  for (var i = li; i < D / 4u; i += WG) {
    qs[i] = vec4<f32>(qf[4u * i], qf[4u * i + 1u], qf[4u * i + 2u], qf[4u * i + 3u]);
  }
  if (z == p.splits - 1u && h % (p.H / p.KVH) == 0u) {
    let dst = (pos * p.KVH + kvh) * D;
    if (KV16 == 1u) {
      for (var i = li; i < D / 8u; i += WG) {
        let o = 8u * i;
        kc[dst / 8u + i] = vec4<u32>(pack2x16float(vec2<f32>(ks[o], ks[o + 1u])),
                                     pack2x16float(vec2<f32>(ks[o + 2u], ks[o + 3u])),
                                     pack2x16float(vec2<f32>(ks[o + 4u], ks[o + 5u])),
                                     pack2x16float(vec2<f32>(ks[o + 6u], ks[o + 7u])));
      }
      for (var w = li; w < D / 2u; w += WG) {
        vc[dst / 2u + w] = pack2x16float(vec2<f32>(vs[2u * w], vs[2u * w + 1u]));
      }
    } else {
      for (var i = li; i < D / 4u; i += WG) {
        kc[dst / 4u + i] = bitcast<vec4<u32>>(vec4<f32>(ks[4u * i], ks[4u * i + 1u], ks[4u * i + 2u], ks[4u * i + 3u]));
      }
      for (var d = li; d < D; d += WG) {
        vc[dst + d] = bitcast<u32>(vs[d]);
      }
    }
  }
  workgroupBarrier();
  var m = NEG;
  var l = 0.0;
  var acc = array<f32, 4>(0.0, 0.0, 0.0, 0.0);
  let ntile = pos / WG + 1u;
  let tile0 = z * p.tps;
  let tile1 = min(ntile, tile0 + p.tps);
  for (var tile = tile0; tile < tile1; tile++) {
    let j0 = tile * WG;
    let j = j0 + li;
    var s = NEG;
    if (j < pos) {
      s = qk((j * p.KVH + kvh) * D);
    } else if (j == pos) {
      var dotv = 0.0;
      for (var i = 0u; i < D / 4u; i++) {
        dotv += dot(qs[i], vec4<f32>(ks[4u * i], ks[4u * i + 1u], ks[4u * i + 2u], ks[4u * i + 3u]));
      }
      s = dotv;
    }
    let mn = max(m, reduce_max(li, s));
    let alpha = exp(m - mn);
    var e = 0.0;
    if (j <= pos) {
      e = exp(s - mn);
    }
    sc[li] = e;
    l = l * alpha + reduce_sum(li, e);
    let cnt = min(WG, pos + 1u - j0);
    for (var k = 0u; k < 4u; k++) {
      let d = li + k * WG;
      if (d < D) {
        // The tile that holds pos ends with it: cached values before it,
        // the new value (vs) last.
        if (j0 + cnt - 1u == pos) {
          acc[k] = acc[k] * alpha + pv(j0, cnt - 1u, kvh, d) + sc[cnt - 1u] * vs[d];
        } else {
          acc[k] = acc[k] * alpha + pv(j0, cnt, kvh, d);
        }
      }
    }
    m = mn;
    workgroupBarrier();
  }
  if (p.splits == 1u) {
    for (var k = 0u; k < 4u; k++) {
      let d = li + k * WG;
      if (d < D) {
        out[h * D + d] = acc[k] / l;
      }
    }
    return;
  }
  let pb = (h * p.splits + z) * (D + 2u);
  if (li == 0u) {
    part[pb] = m;
    part[pb + 1u] = l;
  }
  for (var k = 0u; k < 4u; k++) {
    let d = li + k * WG;
    if (d < D) {
      part[pb + 2u + d] = acc[k];
    }
  }
}
