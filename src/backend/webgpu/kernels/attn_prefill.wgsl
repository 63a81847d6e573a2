// Causal grouped-query attention for a block of prompt tokens (prefill),
// the same result as attn_flash.wgsl with another work split: a workgroup
// takes QB consecutive query tokens of one head (a thread per token; grid
// x = H, y = ceil(n / QB)) and walks the keys in tiles of KT that all its
// threads share from workgroup memory: each key and value row is read from
// the cache once per QB queries instead of once per query, and no
// reduction crosses threads. A thread keeps its query and its output
// (D <= MAXD floats each) in registers and an online softmax per tile:
// scores of the tile's keys, one rescale of the output by the tile's new
// maximum, then the probability-weighted values.
//   out[t][h] = sum_{j <= pos0 + t} softmax_j(scale * q_t . k_j) v_j
// q is [n][H][D] (from attn_rope), caches [position][KVH][D] (KV16 as in
// attn_kv.wgsli), out [n][H * D]. D % 4 == 0, D <= MAXD.
override QB: u32 = 64u;
override KT: u32 = 32u;
override KV16: u32 = 0u;

const MAXD: u32 = 64u;
const MAXKT: u32 = 64u;
const NEG: f32 = -3.0e38;

struct Params {
  n: u32,
  pos0: u32,
  H: u32,
  KVH: u32,
  D: u32,
  scale: f32,
  splits: u32, // 1 (no flash-decoding splits in prefill)
  tps: u32,
}

@group(0) @binding(0) var<storage, read> q: array<f32>;
@group(0) @binding(1) var<storage, read> kc: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> vc: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<uniform> p: Params;

var<workgroup> ks: array<vec4<f32>, KT * (MAXD / 4u)>;
var<workgroup> vs: array<vec4<f32>, KT * (MAXD / 4u)>;

// Row `key` of the K and V caches (head kvh) as f32 vec4s, into tile row r.
fn load_row(key: u32, kvh: u32, r: u32, i: u32) {
  let e = (key * p.KVH + kvh) * p.D + 4u * i; // element index of the vec4
  let D4 = MAXD / 4u;
  if (KV16 == 1u) {
    let w = kc[e / 8u];
    var k4 = vec4<f32>(unpack2x16float(w.x), unpack2x16float(w.y));
    if ((e / 4u) % 2u == 1u) {
      k4 = vec4<f32>(unpack2x16float(w.z), unpack2x16float(w.w));
    }
    ks[r * D4 + i] = k4;
    vs[r * D4 + i] = vec4<f32>(unpack2x16float(vc[e >> 1u]), unpack2x16float(vc[(e >> 1u) + 1u]));
  } else {
    ks[r * D4 + i] = bitcast<vec4<f32>>(kc[e / 4u]);
    vs[r * D4 + i] = vec4<f32>(bitcast<f32>(vc[e]), bitcast<f32>(vc[e + 1u]), bitcast<f32>(vc[e + 2u]),
                               bitcast<f32>(vc[e + 3u]));
  }
}

@compute @workgroup_size(QB)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
  let h = wid.x;
  let kvh = h / (p.H / p.KVH);
  let t0 = wid.y * QB;
  let t = t0 + li;
  let live = t < p.n;
  let pos = p.pos0 + t;
  let D4 = p.D / 4u;
  var qv: array<vec4<f32>, MAXD / 4u>;
  var acc: array<vec4<f32>, MAXD / 4u>;
  for (var i = 0u; i < MAXD / 4u; i++) {
    qv[i] = vec4<f32>(0.0);
    acc[i] = vec4<f32>(0.0);
  }
  if (live) {
    let qb = (t * p.H + h) * p.D;
    for (var i = 0u; i < D4; i++) {
      let o = qb + 4u * i;
      qv[i] = vec4<f32>(q[o], q[o + 1u], q[o + 2u], q[o + 3u]) * p.scale;
    }
  }
  var m = NEG;
  var l = 0.0;
  // keys 0 .. the block's last query's position
  let last = p.pos0 + min(p.n, t0 + QB) - 1u;
  for (var j0 = 0u; j0 <= last; j0 += KT) {
    let cnt = min(KT, last + 1u - j0);
    for (var x = li; x < cnt * D4; x += QB) {
      load_row(j0 + x / D4, kvh, x / D4, x % D4);
    }
    workgroupBarrier();
    var s: array<f32, MAXKT>;
    var mt = m;
    for (var jj = 0u; jj < KT; jj++) {
      s[jj] = NEG;
      if (jj < cnt && j0 + jj <= pos && live) {
        var d = 0.0;
        for (var i = 0u; i < D4; i++) {
          d += dot(qv[i], ks[jj * (MAXD / 4u) + i]);
        }
        s[jj] = d;
        mt = max(mt, d);
      }
    }
    if (mt > NEG) {
      let alpha = exp(m - mt);
      l *= alpha;
      for (var i = 0u; i < D4; i++) {
        acc[i] *= alpha;
      }
      for (var jj = 0u; jj < KT; jj++) {
        if (s[jj] > NEG) {
          let e = exp(s[jj] - mt);
          l += e;
          for (var i = 0u; i < D4; i++) {
            acc[i] += e * vs[jj * (MAXD / 4u) + i];
          }
        }
      }
      m = mt;
    }
    workgroupBarrier(); // the tile is rewritten next
  }
  if (live) {
    let ob = (t * p.H + h) * p.D;
    for (var i = 0u; i < D4; i++) {
      let a = acc[i] / l;
      out[ob + 4u * i] = a.x;
      out[ob + 4u * i + 1u] = a.y;
      out[ob + 4u * i + 2u] = a.z;
      out[ob + 4u * i + 3u] = a.w;
    }
  }
}
