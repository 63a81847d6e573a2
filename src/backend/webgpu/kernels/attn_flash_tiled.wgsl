// Causal grouped-query attention for a block of prompt tokens (prefill),
// tiled flash-attention: the same result as attn_flash.wgsl
//   out[t][h] = sum_{j <= pos0 + t} softmax_j(scale * q_t . k_j) v_j
// with queries and keys both in tiles. A workgroup takes QB = (WG / TPQ) *
// RPL query rows of one KV head: the rows are (token, query head of that
// KV head's group) pairs, token-major, so the G = H / KVH heads that share
// a key row read it from workgroup memory together. It walks the keys in
// tiles of KT: the workgroup loads a tile of K and V rows into workgroup
// memory once (as f32 vec4s; KV16 caches unpacked), the next tile's loads
// issued into registers before this tile is scored, then every row scores
// the tile's keys and folds them into its online softmax.
//
// A lane group is TPQ threads of one subgroup (lanes li = group * TPQ + r)
// and takes RPL consecutive rows: lane r holds the vec4s r, r + TPQ, ... of
// each of its rows' query and output (so the lanes of a group read
// consecutive words of a key row, and the groups of the workgroup read the
// same ones: broadcasts). Each K or V vec4 it reads from workgroup memory
// serves its RPL rows, so RPL = 2 halves the reads a product takes (the
// reads, not the products, bound this loop; the host gives two rows twice
// a row's lanes, so QB is the same either way). It computes its part of each
// key's dot products, and TPQ - 1 subgroupShuffleXor steps give every lane
// of the group the whole scores. Each lane then has its rows' scores,
// running maxima and sums, and updates its own slices of the outputs: no
// workgroup barrier inside a tile.
//
// q is [n][H][D] (from attn_rope / attn_gated_rope, unscaled), caches
// [position][KVH][D], out [n][H * D]. Overrides: D4 = D / 4, TPQ divides D4
// and the smallest subgroup (the host checks), D4 / TPQ <= MAXS4 (a row's
// vec4s a lane), KT <= MAXKT, KT * D4 <= MAXL * WG. Grid: x = KVH, y =
// ceil(n * G / QB). Needs subgroups: without them the host runs
// attn_flash.wgsl.
enable subgroups;
diagnostic(off, subgroup_uniformity);

override WG: u32 = 128u;
override TPQ: u32 = 4u;  // threads a query row
override KT: u32 = 32u;  // keys a tile
override D4: u32 = 16u;  // head dim / 4
override G: u32 = 1u;    // query heads a KV head
override KV16: u32 = 0u; // caches of packed f16 pairs (attn_kv.wgsli's layout)
override RPL: u32 = 1u;  // rows a lane group (1 or 2; tuning attnRows)

const MAXKT: u32 = 32u;
const MAXS4: u32 = 16u;
const MAXL: u32 = 8u;  // most vec4s of a K (and a V) tile a thread loads: NL
override NL: u32 = (KT * D4 + WG - 1u) / WG;
const NEG: f32 = -3.0e38;

struct Params {
  n: u32,
  pos0: u32,
  H: u32,
  KVH: u32,
  D: u32,
  scale: f32,
  splits: u32, // 1 (prefill is not split)
  tps: u32,
}

@group(0) @binding(0) var<storage, read> q: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> kc: array<u32>;
@group(0) @binding(2) var<storage, read> vc: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<vec4<f32>>;
@group(0) @binding(4) var<uniform> p: Params;

var<workgroup> kt: array<vec4<f32>, KT * D4>;
var<workgroup> vt: array<vec4<f32>, KT * D4>;

// vec4 c of cache row `key` (KV head kvh) of the cache `which` (0: K, 1: V).
fn row4(which: u32, key: u32, kvh: u32, c: u32) -> vec4<f32> {
  let e = (key * p.KVH + kvh) * 4u * D4 + 4u * c; // element index
  if (KV16 == 1u) {
    if (which == 0u) {
      return vec4<f32>(unpack2x16float(kc[e / 2u]), unpack2x16float(kc[e / 2u + 1u]));
    }
    return vec4<f32>(unpack2x16float(vc[e / 2u]), unpack2x16float(vc[e / 2u + 1u]));
  }
  if (which == 0u) {
    return bitcast<vec4<f32>>(vec4<u32>(kc[e], kc[e + 1u], kc[e + 2u], kc[e + 3u]));
  }
  return bitcast<vec4<f32>>(vec4<u32>(vc[e], vc[e + 1u], vc[e + 2u], vc[e + 3u]));
}

// This thread's part of the tile of keys [j0, j0 + KT): vec4s li, li + WG,
// ... of its KT x D4 (zero past kend).
fn load_tile(pk: ptr<function, array<vec4<f32>, MAXL>>, pv: ptr<function, array<vec4<f32>, MAXL>>, j0: u32,
             kend: u32, kvh: u32, li: u32) {
  for (var u = 0u; u < NL; u++) {
    let e = li + u * WG;
    let key = j0 + e / D4;
    var kv = vec4<f32>(0.0);
    var vv = vec4<f32>(0.0);
    if (e < KT * D4 && key < kend) {
      kv = row4(0u, key, kvh, e % D4);
      vv = row4(1u, key, kvh, e % D4);
    }
    (*pk)[u] = kv;
    (*pv)[u] = vv;
  }
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
  let kvh = wid.x;
  let QB = (WG / TPQ) * RPL;
  let S4 = D4 / TPQ;
  let nrows = p.n * G;
  // The lane group's rows: row, and with RPL = 2 row + 1 (its "1" twins
  // below). Each row is written as one row alone would be: with RPL = 1
  // the second row's code folds away, RPL being a constant.
  let row = wid.y * QB + (li / TPQ) * RPL;
  let r = li % TPQ;
  let live = row < nrows;
  let t = row / G;
  let h = kvh * G + row % G;
  let pos = p.pos0 + t;
  let live1 = RPL == 2u && row + 1u < nrows;
  let t1 = (row + 1u) / G;
  let h1 = kvh * G + (row + 1u) % G;
  let pos1 = p.pos0 + t1;
  var qv: array<vec4<f32>, MAXS4>;
  var o: array<vec4<f32>, MAXS4>;
  var qv1: array<vec4<f32>, MAXS4>;
  var o1: array<vec4<f32>, MAXS4>;
  for (var i = 0u; i < S4; i++) {
    qv[i] = vec4<f32>(0.0);
    o[i] = vec4<f32>(0.0);
    qv1[i] = vec4<f32>(0.0);
    o1[i] = vec4<f32>(0.0);
    if (live) {
      qv[i] = q[(t * p.H + h) * D4 + i * TPQ + r] * p.scale;
    }
    if (live1) {
      qv1[i] = q[(t1 * p.H + h1) * D4 + i * TPQ + r] * p.scale;
    }
  }
  var m = NEG;
  var l = 0.0;
  var m1 = NEG;
  var l1 = 0.0;
  // keys [0, kend): up to the last token of this workgroup's rows
  let last = min(nrows, (wid.y + 1u) * QB) - 1u;
  let kend = p.pos0 + last / G + 1u;
  // The next tile's K and V are loaded into registers (pk, pv) while this
  // tile is scored from workgroup memory, so the loads' latency overlaps
  // the sums instead of stalling every tile.
  var pk: array<vec4<f32>, MAXL>;
  var pv: array<vec4<f32>, MAXL>;
  load_tile(&pk, &pv, 0u, kend, kvh, li);
  for (var j0 = 0u; j0 < kend; j0 += KT) {
    workgroupBarrier(); // the previous tile is used up
    for (var u = 0u; u < NL; u++) {
      let e = li + u * WG;
      if (e < KT * D4) {
        kt[e] = pk[u];
        vt[e] = pv[u];
      }
    }
    workgroupBarrier();
    load_tile(&pk, &pv, j0 + KT, kend, kvh, li);
    // scores: each key vec4 read once from workgroup memory serves both rows
    var s: array<f32, MAXKT>;
    var s1: array<f32, MAXKT>;
    var mt = m;
    var mt1 = m1;
    for (var k = 0u; k < KT; k++) {
      var a = 0.0;
      var a1 = 0.0;
      for (var i = 0u; i < S4; i++) {
        let kv = kt[k * D4 + i * TPQ + r];
        a += dot(qv[i], kv);
        if (RPL == 2u) {
          a1 += dot(qv1[i], kv);
        }
      }
      for (var w = 1u; w < TPQ; w *= 2u) {
        a += subgroupShuffleXor(a, w);
        if (RPL == 2u) {
          a1 += subgroupShuffleXor(a1, w);
        }
      }
      if (live && j0 + k <= pos) {
        s[k] = a;
        mt = max(mt, a);
      } else {
        s[k] = NEG;
      }
      if (RPL == 2u) {
        if (live1 && j0 + k <= pos1) {
          s1[k] = a1;
          mt1 = max(mt1, a1);
        } else {
          s1[k] = NEG;
        }
      }
    }
    let alpha = exp(m - mt);
    let alpha1 = exp(m1 - mt1);
    for (var i = 0u; i < S4; i++) {
      o[i] *= alpha;
      if (RPL == 2u) {
        o1[i] *= alpha1;
      }
    }
    var ls = 0.0;
    var ls1 = 0.0;
    for (var k = 0u; k < KT; k++) {
      var e = 0.0;
      if (live && j0 + k <= pos) {
        e = exp(s[k] - mt);
      }
      ls += e;
      var e1 = 0.0;
      if (RPL == 2u && live1 && j0 + k <= pos1) {
        e1 = exp(s1[k] - mt1);
      }
      ls1 += e1;
      for (var i = 0u; i < S4; i++) {
        let vv = vt[k * D4 + i * TPQ + r];
        o[i] += e * vv;
        if (RPL == 2u) {
          o1[i] += e1 * vv;
        }
      }
    }
    l = l * alpha + ls;
    m = mt;
    l1 = l1 * alpha1 + ls1;
    m1 = mt1;
  }
  if (live) {
    for (var i = 0u; i < S4; i++) {
      out[(t * p.H + h) * D4 + i * TPQ + r] = o[i] / l;
    }
  }
  if (live1) {
    for (var i = 0u; i < S4; i++) {
      out[(t1 * p.H + h1) * D4 + i * TPQ + r] = o1[i] / l1;
    }
  }
}
