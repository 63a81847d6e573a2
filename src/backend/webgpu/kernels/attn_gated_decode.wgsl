// Qwen 3.5 gated attention for one new token (decode) at position pos, the
// arrangement the seed profile's session switches ask for:
//   FUSE_ROPE = 1 (useFusedQKVSplitQKNormRoPE): this kernel splits the qkv
//     row ([(q|gate) per head: 2D each][k: KVH*D][v: KVH*D]), RMSNorms q and k
//     per head (weights qn / kn, the artifact's 1 + w), rotates their first R
//     dims with NEOX RoPE (pairs i, i + R/2) and appends k and v to the f32
//     caches [position][KVH][D] (the last split of the first q head of each
//     KV group writes them; no workgroup reads the caches at pos, the new key
//     and value are used from workgroup memory);
//   FUSE_ROPE = 0: q comes normed and rotated in qin [H][D] and the caches
//     already hold position pos (attn_gated_rope.wgsl ran before).
//   GATE = 1 (attentionDecodeOnline.useOutputGateFusion): the output is
//     multiplied by sigmoid(gate) here (unsplit) or in
//     attn_gated_combine.wgsl (split); GATE = 0: attn_gate.wgsl does it.
// out[h] = sum_{j <= pos} softmax_j(scale * q . k_j) v_j. One workgroup per
// (head, split): grid x = H, z = splits; split z takes key tiles
// [z*tps, (z+1)*tps) of WG keys and, when splits > 1, writes (max, sum,
// unnormalized output) to part for the combine. WG is a power of two,
// D <= 4*WG and <= 256.
override WG: u32 = 64;
override FUSE_ROPE: u32 = 1u;
override GATE: u32 = 1u;

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
  pad0: u32,
  pad1: u32,
  pad2: u32,
}

@group(0) @binding(0) var<storage, read> qkv: array<f32>;
@group(0) @binding(1) var<storage, read> qn: array<f32>;
@group(0) @binding(2) var<storage, read> kn: array<f32>;
@group(0) @binding(3) var<storage, read> cosv: array<f32>;
@group(0) @binding(4) var<storage, read> sinv: array<f32>;
@group(0) @binding(5) var<storage, read> qin: array<f32>;
@group(0) @binding(6) var<storage, read_write> kc: array<vec4<f32>>; // read as vec4: D % 4 == 0
@group(0) @binding(7) var<storage, read_write> vc: array<f32>;
@group(0) @binding(8) var<storage, read_write> out: array<f32>;
@group(0) @binding(9) var<storage, read_write> part: array<f32>;
@group(0) @binding(10) var<uniform> p: Params;

var<workgroup> qf: array<f32, MAXD>;
var<workgroup> ks: array<f32, MAXD>;
var<workgroup> vs: array<f32, MAXD>;
var<workgroup> sc: array<f32, WG>;
var<workgroup> red: array<f32, WG>;

// #include "wg_reduce.wgsli"

// #include "attn_rms.wgsli"

// Element i of the normed + rotated head at qkv[src..] (weights w: 0 q, 1 k).
fn rot(src: u32, inv: f32, wsel: u32, i: u32, pos: u32) -> f32 {
  var wi: f32;
  if (wsel == 0u) {
    wi = qn[i];
  } else {
    wi = kn[i];
  }
  var r = qkv[src + i] * inv * wi;
  let half = p.R / 2u;
  if (i < p.R) {
    var j: u32;
    if (i < half) {
      j = i + half;
    } else {
      j = i - half;
    }
    var wj: f32;
    if (wsel == 0u) {
      wj = qn[j];
    } else {
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

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
  let h = wid.x;
  let z = wid.z;
  let D = p.D;
  let pos = p.pos;
  let kvh = h / (p.H / p.KVH);
  let qsrc = h * 2u * D;
  let ksrc = 2u * p.H * D + kvh * D;
  let vsrc = 2u * p.H * D + p.KVH * D + kvh * D;
  if (FUSE_ROPE == 1u) {
    let qinv = inv_rms(li, qsrc);
    let kinv = inv_rms(li, ksrc);
    for (var i = li; i < D; i += WG) {
      qf[i] = rot(qsrc, qinv, 0u, i, pos);
      ks[i] = rot(ksrc, kinv, 1u, i, pos);
      vs[i] = qkv[vsrc + i];
    }
    workgroupBarrier();
    if (z == p.splits - 1u && h % (p.H / p.KVH) == 0u) {
      let dst = (pos * p.KVH + kvh) * D;
      for (var d = li; d < D; d += WG) {
        vc[dst + d] = vs[d];
      }
      for (var d4 = li; d4 < D / 4u; d4 += WG) {
        kc[dst / 4u + d4] = vec4<f32>(ks[4u * d4], ks[4u * d4 + 1u], ks[4u * d4 + 2u], ks[4u * d4 + 3u]);
      }
    }
  } else {
    for (var i = li; i < D; i += WG) {
      qf[i] = qin[h * D + i];
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
    if (j < pos || (j == pos && FUSE_ROPE == 0u)) {
      // 16-byte key loads: a thread walks its key's D values a vec4 at a time
      let kb4 = (j * p.KVH + kvh) * (D / 4u);
      var dotv = 0.0;
      for (var d4 = 0u; d4 < D / 4u; d4++) {
        let qv = vec4<f32>(qf[4u * d4], qf[4u * d4 + 1u], qf[4u * d4 + 2u], qf[4u * d4 + 3u]);
        dotv += dot(qv, kc[kb4 + d4]);
      }
      s = dotv * p.scale;
    } else if (j == pos) {
      var dotv = 0.0;
      for (var d = 0u; d < D; d++) {
        dotv += qf[d] * ks[d];
      }
      s = dotv * p.scale;
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
        var a = 0.0;
        for (var jj = 0u; jj < cnt; jj++) {
          let jk = j0 + jj;
          var v: f32;
          if (jk == pos && FUSE_ROPE == 1u) {
            v = vs[d];
          } else {
            v = vc[(jk * p.KVH + kvh) * D + d];
          }
          a += sc[jj] * v;
        }
        acc[k] = acc[k] * alpha + a;
      }
    }
    m = mn;
    workgroupBarrier();
  }
  if (p.splits == 1u) {
    for (var k = 0u; k < 4u; k++) {
      let d = li + k * WG;
      if (d < D) {
        var o = acc[k] / l;
        if (GATE == 1u) {
          o = o / (1.0 + exp(-qkv[qsrc + D + d]));
        }
        out[h * D + d] = o;
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
