// wisp's own kernel for the seed profile key "attn_decode_head256"
// (the seed profile): gated-attention decode
// (one token at position pos) for head_dim D = 256, online softmax over the
// KV cache, with the output gate fused:
//   out[h] = sigmoid(gate[h]) * sum_{j <= pos} softmax_j(scale * q_h . k_j) v_j
// KV LAYOUT: the caches are [position][KVH][D] as attn_gated_rope.wgsl
// writes them. KV16 = 1 (the profile's precision.kvDtype "f16", or
// tuning kv=f16): f16 pairs packed in u32 words, element e is half
// e & 1 of word e >> 1 (unpack2x16float); KV16 = 0: f32, the same u32
// bindings read through bitcast.
// q comes normed and rotated from attn_gated_rope.wgsl ([H][D]); the gate is
// the second half of head h's (q|gate) slice of the qkv row.
// One workgroup of 64 threads per head (grid x = H): keys are taken 64 at a
// time (a tile), each thread scores one key, the tile max/sum are reduced
// in workgroup memory, and thread li accumulates dims li, li+64, li+128,
// li+192 with the running max/sum rescaling. No `enable f16`.
const WG: u32 = 64u;
const D: u32 = 256u;
const NEG: f32 = -3.0e38;

// USE_DIRECT_KV_LAYOUT = 1 (attentionDecodeOnline.useDirectContiguousKVLayout):
// cache rows addressed with the contiguous layout's formula
// (pos * KVH + kvh) * D; 0: through the row strides kv_pos / kv_head of the
// parameters (elements, even), the form any other layout would need.
override USE_DIRECT_KV_LAYOUT: u32 = 1u;
override KV16: u32 = 0u;

struct Params {
  pos: u32,
  H: u32,
  KVH: u32,
  row: u32,   // floats per qkv row
  scale: f32,
  kv_pos: u32,  // USE_DIRECT_KV_LAYOUT 0: elements between positions' rows
  kv_head: u32, // USE_DIRECT_KV_LAYOUT 0: elements between KV heads' rows
  pad2: u32,
}

@group(0) @binding(0) var<storage, read> q: array<f32>;
@group(0) @binding(1) var<storage, read> kc: array<u32>; // f32 bits, or KV16 half pairs
@group(0) @binding(2) var<storage, read> vc: array<u32>;
@group(0) @binding(3) var<storage, read> qkv: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;
@group(0) @binding(5) var<uniform> p: Params;

var<workgroup> qs: array<f32, 256>;
var<workgroup> ps: array<f32, 64>;
var<workgroup> red: array<f32, 64>;

fn reduce_max(li: u32, v: f32) -> f32 {
  workgroupBarrier();
  red[li] = v;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s >>= 1u) {
    if (li < s) {
      red[li] = max(red[li], red[li + s]);
    }
    workgroupBarrier();
  }
  return workgroupUniformLoad(&red[0]);
}

fn reduce_sum(li: u32, v: f32) -> f32 {
  workgroupBarrier();
  red[li] = v;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s >>= 1u) {
    if (li < s) {
      red[li] += red[li + s];
    }
    workgroupBarrier();
  }
  return workgroupUniformLoad(&red[0]);
}

// First element of the cache row of position j, KV head kvh.
fn kv_row(j: u32, kvh: u32) -> u32 {
  if (USE_DIRECT_KV_LAYOUT == 1u) {
    return (j * p.KVH + kvh) * D;
  }
  return j * p.kv_pos + kvh * p.kv_head;
}

// Key elements 2i, 2i + 1 of the row starting at element e (e even).
fn key_pair(e: u32, i: u32) -> vec2<f32> {
  if (KV16 == 1u) {
    return unpack2x16float(kc[e / 2u + i]);
  }
  return vec2<f32>(bitcast<f32>(kc[e + 2u * i]), bitcast<f32>(kc[e + 2u * i + 1u]));
}

// Value element e of the cache.
fn value(e: u32) -> f32 {
  if (KV16 == 1u) {
    return unpack2x16float(vc[e >> 1u])[e & 1u];
  }
  return bitcast<f32>(vc[e]);
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
  let h = wid.x;
  let kvh = h / (p.H / p.KVH);
  for (var d = li; d < D; d += WG) {
    qs[d] = q[h * D + d];
  }
  workgroupBarrier();
  var m = NEG;
  var l = 0.0;
  var acc = vec4<f32>(0.0);
  let nkeys = p.pos + 1u;
  for (var t0 = 0u; t0 < nkeys; t0 += WG) {
    let j = t0 + li;
    var sc = NEG;
    if (j < nkeys) {
      let kb = kv_row(j, kvh);
      var dotv = 0.0;
      for (var i = 0u; i < D / 2u; i++) {
        let k2 = key_pair(kb, i);
        dotv += qs[2u * i] * k2.x + qs[2u * i + 1u] * k2.y;
      }
      sc = dotv * p.scale;
    }
    let tmax = reduce_max(li, sc);
    let mnew = max(m, tmax);
    var e = 0.0;
    if (j < nkeys) {
      e = exp(sc - mnew);
    }
    ps[li] = e;
    let tsum = reduce_sum(li, e);
    let corr = exp(m - mnew);
    l = l * corr + tsum;
    acc *= corr;
    let cnt = min(WG, nkeys - t0);
    for (var k = 0u; k < cnt; k++) {
      let vb = kv_row(t0 + k, kvh);
      let w = ps[k];
      acc += w * vec4<f32>(value(vb + li), value(vb + li + 64u), value(vb + li + 128u), value(vb + li + 192u));
    }
    m = mnew;
  }
  let gb = h * 2u * D + D;
  let o = acc / l;
  out[h * D + li] = o.x / (1.0 + exp(-qkv[gb + li]));
  out[h * D + li + 64u] = o.y / (1.0 + exp(-qkv[gb + li + 64u]));
  out[h * D + li + 128u] = o.z / (1.0 + exp(-qkv[gb + li + 128u]));
  out[h * D + li + 192u] = o.w / (1.0 + exp(-qkv[gb + li + 192u]));
}
