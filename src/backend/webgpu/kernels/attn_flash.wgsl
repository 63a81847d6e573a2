// Causal grouped-query attention over the KV cache with an online softmax
// (one pass over the keys, flash-attention style): for token t (position
// pos0 + t) and head h (KV head h / (H / KVH)),
//   out[t][h] = sum_{j <= pos} softmax_j(scale * q . k_j) v_j,
// over the last win keys only (pos - j < win) when win > 0 (a sliding window).
// One workgroup per (head, token, split): grid x = H, y = n, z = splits.
// Keys are taken WG at a time (a tile): each thread scores one key, the
// tile's max and sum are reduced in workgroup memory, and each thread
// accumulates the output dimensions d = li + k*WG (k < 4, so D <= 4*WG and
// D <= 256) with the running max/sum rescaling. q is [n][H][D] (from
// attn_rope), caches [position][KVH][D], out [n][H*D]. WG is a power of two,
// D % 4 == 0 (keys are read as vec4).
//
// Flash-decoding: with splits > 1, workgroup z takes tiles
// [z*tps, (z+1)*tps) only and writes its running max, sum and unnormalized
// output to part[((t*H + h)*splits + z)*(D+2) ...] = (m, l, acc[D]);
// attn_combine.wgsl merges the splits into out. A split with no keys writes
// m = -3e38, l = 0, acc = 0.
override WG: u32 = 64;
// KV16 = 1: caches of f16 pairs packed in u32 words (unpack2x16float; element
// e is half e & 1 of word e >> 1), D % 8 == 0; 0: f32 (words are f32 bits).
override KV16: u32 = 0u;

const MAXD: u32 = 256u;
const NEG: f32 = -3.0e38;

struct Params {
  n: u32,
  pos0: u32,
  H: u32,
  KVH: u32,
  D: u32,
  scale: f32,
  splits: u32,  // 1: write out directly
  tps: u32,     // tiles per split
  win: u32,     // sliding window (0: none)
  pad0: u32,
  pad1: u32,
  pad2: u32,
}

@group(0) @binding(0) var<storage, read> q: array<f32>;
@group(0) @binding(1) var<storage, read> kc: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> vc: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<storage, read_write> part: array<f32>;
@group(0) @binding(5) var<uniform> p: Params;

var<workgroup> qs: array<vec4<f32>, MAXD / 4u>;
var<workgroup> sc: array<f32, WG>;
var<workgroup> red: array<f32, WG>;

// #include "attn_kv.wgsli"

// #include "wg_reduce.wgsli"

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
  let h = wid.x;
  let t = wid.y;
  let D = p.D;
  let kvh = h / (p.H / p.KVH);
  let pos = p.pos0 + t;
  let qb = (t * p.H + h) * D;
  for (var i = li; i < D / 4u; i += WG) {
    let o = qb + 4u * i;
    qs[i] = vec4<f32>(q[o], q[o + 1u], q[o + 2u], q[o + 3u]) * p.scale;
  }
  workgroupBarrier();
  var m = NEG;
  var l = 0.0;
  var acc = array<f32, 4>(0.0, 0.0, 0.0, 0.0);
  let ntile = pos / WG + 1u;
  // a sliding window: the tiles wholly before its first key are skipped
  var first = 0u;
  if (p.win > 0u && pos + 1u > p.win) {
    first = (pos + 1u - p.win) / WG;
  }
  let start = wid.z * p.tps; // this split's tiles (tps 0xFFFFFFFF: one split)
  let tile0 = max(start, first);
  let tile1 = min(ntile, start + p.tps);
  for (var tile = tile0; tile < tile1; tile++) {
    let j0 = tile * WG;
    let j = j0 + li;
    let live = j <= pos && (p.win == 0u || pos - j < p.win);
    var s = NEG;
    if (live) {
      s = qk((j * p.KVH + kvh) * D);
    }
    let mn = max(m, reduce_max(li, s));
    let alpha = exp(m - mn);
    var e = 0.0;
    if (live) {
      e = exp(s - mn);
    }
    sc[li] = e;
    l = l * alpha + reduce_sum(li, e);
    let cnt = min(WG, pos + 1u - j0);
    for (var k = 0u; k < 4u; k++) {
      let d = li + k * WG;
      if (d < D) {
        acc[k] = acc[k] * alpha + pv(j0, cnt, kvh, d);
      }
    }
    m = mn;
    workgroupBarrier();
  }
  if (p.splits == 1u) {
    let ob = (t * p.H + h) * D;
    for (var k = 0u; k < 4u; k++) {
      let d = li + k * WG;
      if (d < D) {
        out[ob + d] = acc[k] / l;
      }
    }
    return;
  }
  let pb = ((t * p.H + h) * p.splits + wid.z) * (D + 2u);
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
