// Gated-attention pre-pass (full_attention layers, backend.h
// wisp_gated_attention_args) for n new tokens at positions pos0..: the qkv
// row of a token is [(q|gate) per head: 2*D each][k: KVH*D][v: KVH*D].
// q and k are RMSNormed per head over all D dims (weights qn / kn, which
// the artifact stores as 1 + w), the first R dims rotated with RoPE
// (PAIRS: pair i is dims (i, i + R/2) or (2i, 2i + 1), rope_pair.wgsli;
// cos/sin tables [position][R/2]), dims R..D only
// normalised. q goes to qo [n][H][D]; k and v are appended to the caches
// [position][KVH][D]. One workgroup per (head slot, token): grid x =
// H + 2*KVH (q heads, k heads, v heads), y = n. WG is a power of two.
// KV16 = 1: the caches hold f16 pairs packed in u32 words (element e of the
// f32 layout is half e & 1 of word e >> 1; pack2x16float, no `enable f16`),
// D % 8 == 0; a k row is built in workgroup memory and packed by word, so no
// two threads write halves of one word. KV16 = 0: f32 (the words are f32 bits).
// stage (useFusedQKVSplitQKNormRoPE off runs the steps as two dispatches):
// 0 all of it; 1 split + norm only (no rotation); 2 only the rotation, in
// place on qo and on the cached k at each token's position (v heads idle).
override WG: u32 = 64;
override KV16: u32 = 0u;
override PAIRS: u32 = 0u; // rope pairs: 0 halves, 1 adjacent

const MAXD: u32 = 256u;

struct Params {
  n: u32,
  pos0: u32,
  H: u32,
  KVH: u32,
  D: u32,
  R: u32,
  eps: f32,
  stage: u32,
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
var<workgroup> kr: array<f32, MAXD>; // KV16: a k row before packing

// Element e of a cache (KV16: one half of a packed word).
fn kc_get(e: u32) -> f32 {
  if (KV16 == 1u) {
    return unpack2x16float(kc[e >> 1u])[e & 1u];
  }
  return bitcast<f32>(kc[e]);
}

// KV16: packs kr[0..D) into the k row at element dst (even), a word per thread.
fn kc_put_row(li: u32, dst: u32) {
  for (var w = li; w < p.D / 2u; w += WG) {
    kc[dst / 2u + w] = pack2x16float(vec2<f32>(kr[2u * w], kr[2u * w + 1u]));
  }
}

// #include "kv_store.wgsli"
// #include "rope_pair.wgsli"

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
  let hh = wid.x;
  let t = wid.y;
  let D = p.D;
  let half = p.R / 2u;
  let pos = p.pos0 + t;
  let row = t * (2u * p.H + 2u * p.KVH) * D;
  let isq = hh < p.H;
  var src: u32;
  if (isq) {
    src = row + hh * 2u * D;
  } else {
    src = row + 2u * p.H * D + (hh - p.H) * D; // k heads, then v heads
  }
  if (p.stage == 2u) {
    if (hh >= p.H + p.KVH) {
      return;
    }
    var b0: u32;
    if (isq) {
      b0 = (t * p.H + hh) * D;
    } else {
      b0 = (pos * p.KVH + (hh - p.H)) * D;
    }
    if (KV16 == 1u && !isq) {
      // The pair partners may sit in different words: rotate the
      // whole row in workgroup memory, then pack it back.
      for (var d = li; d < D; d += WG) {
        kr[d] = kc_get(b0 + d);
      }
      workgroupBarrier();
      for (var i = li; i < half; i += WG) {
        let c = cosv[pos * half + i];
        let s = sinv[pos * half + i];
        let ea = rope_first_dim(i, half);
        let eb = rope_second_dim(i, half);
        let a = kr[ea];
        let b = kr[eb];
        kr[ea] = a * c - b * s;
        kr[eb] = b * c + a * s;
      }
      workgroupBarrier();
      kc_put_row(li, b0);
      return;
    }
    for (var i = li; i < half; i += WG) {
      let c = cosv[pos * half + i];
      let s = sinv[pos * half + i];
      let ea = rope_first_dim(i, half);
      let eb = rope_second_dim(i, half);
      if (isq) {
        let a = qo[b0 + ea];
        let b = qo[b0 + eb];
        qo[b0 + ea] = a * c - b * s;
        qo[b0 + eb] = b * c + a * s;
      } else {
        let a = bitcast<f32>(kc[b0 + ea]);
        let b = bitcast<f32>(kc[b0 + eb]);
        kc[b0 + ea] = bitcast<u32>(a * c - b * s);
        kc[b0 + eb] = bitcast<u32>(b * c + a * s);
      }
    }
    return;
  }
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
  let inv = 1.0 / sqrt(workgroupUniformLoad(&red[0]) / f32(D) + p.eps);
  var dst: u32;
  if (isq) {
    dst = (t * p.H + hh) * D;
  } else {
    dst = (pos * p.KVH + (hh - p.H)) * D;
  }
  for (var i = li; i < D; i += WG) {
    var w: f32;
    if (isq) {
      w = qn[i];
    } else {
      w = kn[i];
    }
    var r = qkv[src + i] * inv * w;
    if (i < p.R && p.stage == 0u) {
      // pair partner and its weight
      let j = rope_partner(i, half);
      var wj: f32;
      if (isq) {
        wj = qn[j];
      } else {
        wj = kn[j];
      }
      let o = qkv[src + j] * inv * wj;
      let ci = rope_pair_of(i, half);
      let c = cosv[pos * half + ci];
      let s = sinv[pos * half + ci];
      if (rope_is_first(i, half)) {
        r = r * c - o * s;
      } else {
        r = r * c + o * s;
      }
    }
    if (isq) {
      qo[dst + i] = r;
    } else if (KV16 == 1u) {
      kr[i] = r;
    } else {
      kc[dst + i] = bitcast<u32>(r);
    }
  }
  if (KV16 == 1u && !isq) {
    workgroupBarrier();
    kc_put_row(li, dst);
  }
}
