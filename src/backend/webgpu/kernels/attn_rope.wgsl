// Attention pre-pass for n new tokens at positions pos0..pos0+n-1: split the
// fused qkv rows, RMSNorm q and k per head (weights qn / kn, eps; QNORM = 0
// or KNORM = 0: that norm is left out, its binding a placeholder), rotate
// both with RoPE (PAIRS: pair i is dims (i, i + D/2) or (2i, 2i + 1),
// rope_pair.wgsli; cos/sin tables [position][D/2]),
// write q to qo [n][H][D] and append k and v to the caches
// [position][KVH][D]. One workgroup per (head, token): grid x = H + 2*KVH
// (q heads, then k heads, then v heads), y = n. WG is a power of two.
// KV16 = 1: the caches hold f16 pairs packed in u32 words (element e of the
// f32 layout is half e & 1 of word e >> 1; pack2x16float, no `enable f16`),
// D % 8 == 0. KV16 = 0: f32 (the words are f32 bits).
override WG: u32 = 64;
override KV16: u32 = 0u;
override QNORM: u32 = 1u; // 0: q is not normed (attention without q/k norm)
override KNORM: u32 = 1u; // 0: k is not normed
override PAIRS: u32 = 0u; // rope pairs: 0 halves, 1 adjacent

const MAXD: u32 = 256u;

struct Params {
  n: u32,
  pos0: u32,
  H: u32,
  KVH: u32,
  D: u32,
  eps: f32,
  pad0: u32,
  pad1: u32,
}

@group(0) @binding(0) var<storage, read> qkv: array<f32>;
@group(0) @binding(1) var<storage, read> qn: array<f32>;
@group(0) @binding(2) var<storage, read> kn: array<f32>;
@group(0) @binding(3) var<storage, read> cosv: array<f32>;
@group(0) @binding(4) var<storage, read> sinv: array<f32>;
@group(0) @binding(5) var<storage, read_write> qo: array<f32>;
@group(0) @binding(6) var<storage, read_write> kc: array<u32>;
@group(0) @binding(7) var<storage, read_write> vc: array<u32>;
@group(0) @binding(8) var<uniform> p: Params;

var<workgroup> red: array<f32, WG>;
var<workgroup> kr: array<f32, MAXD>;

// #include "kv_store.wgsli"
// #include "rope_pair.wgsli"

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
  let hh = wid.x;
  let t = wid.y;
  let D = p.D;
  let half = D / 2u;
  let pos = p.pos0 + t;
  let src = t * (p.H + 2u * p.KVH) * D + hh * D;
  if (hh >= p.H + p.KVH) {
    let dst = (pos * p.KVH + (hh - p.H - p.KVH)) * D;
    store_value_row(li, dst, src);
    return;
  }
  var ss = 0.0;
  for (var d = li; d < D; d += WG) {
    let v = qkv[src + d];
    ss += v * v;
  }
  red[li] = ss;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s >>= 1u) {
    if (li < s) {
      red[li] += red[li + s];
    }
    workgroupBarrier();
  }
  let isq = hh < p.H;
  let normed = (isq && QNORM == 1u) || (!isq && KNORM == 1u);
  let ss_all = workgroupUniformLoad(&red[0]);
  var inv = 1.0;
  if (normed) {
    inv = 1.0 / sqrt(ss_all / f32(D) + p.eps);
  }
  for (var i = li; i < half; i += WG) {
    let ea = rope_first_dim(i, half);
    let eb = rope_second_dim(i, half);
    var wa = 1.0;
    var wb = 1.0;
    if (isq && QNORM == 1u) {
      wa = qn[ea];
      wb = qn[eb];
    } else if (!isq && KNORM == 1u) {
      wa = kn[ea];
      wb = kn[eb];
    }
    let a = qkv[src + ea] * inv * wa;
    let b = qkv[src + eb] * inv * wb;
    let c = cosv[pos * half + i];
    let s = sinv[pos * half + i];
    let ra = a * c - b * s;
    let rb = b * c + a * s;
    if (isq) {
      let dst = (t * p.H + hh) * D;
      qo[dst + ea] = ra;
      qo[dst + eb] = rb;
    } else if (KV16 == 1u) {
      kr[ea] = ra;
      kr[eb] = rb;
    } else {
      let dst = (pos * p.KVH + (hh - p.H)) * D;
      kc[dst + ea] = bitcast<u32>(ra);
      kc[dst + eb] = bitcast<u32>(rb);
    }
  }
  if (KV16 == 1u && !isq) {
    workgroupBarrier();
    let dst = (pos * p.KVH + (hh - p.H)) * D;
    for (var w = li; w < D / 2u; w += WG) {
      kc[dst / 2u + w] = pack2x16float(vec2<f32>(kr[2u * w], kr[2u * w + 1u]));
    }
  }
}
