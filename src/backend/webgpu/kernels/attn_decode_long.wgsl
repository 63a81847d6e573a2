// Decode attention over many keys (flash decoding by KV head): one new
// token's G = H / KVH query heads of KV head kvh against keys
// lo..pos of the caches, split over workgroups, each writing its split's
// partials (running max m, sum l, unnormalized output acc) for the merge
// (attn_combine.wgsl, or attn_gated_combine.wgsl with the output gate):
//   part[(h * splits + z) * (D + 2)] = m, l, acc[0..D),  h = kvh * G + g.
// q comes rotated and normed (attn_rope / attn_gated_rope, which also
// appended the token's k and v to the caches), unscaled.
//
// Why a kernel of its own: attn_decode.wgsl takes one query head a
// workgroup, re-reading a KV head's keys for each of its G query heads,
// and every thread walks each 32-key tile's scores twice (max, then sum);
// at tens of thousands of keys that, not the bytes, sets its speed. Here a
// workgroup takes every query head of one KV head (each key and value read
// once for all G), and a tile is WG keys:
//   scores: thread i takes key i of the tile whole (two 16-byte loads a
//     step: one 32-byte sector), its G dot products against q in workgroup
//     memory (a broadcast read), no lane-crossing sums;
//   softmax: the tile's maximum per head by subgroupMax and one barrier;
//     each thread exponentiates its own key's scores once; a thread keeps
//     its own share of the sum l (every thread rescales by the same
//     factor), summed once at the end;
//   values: CW = D / CE threads a value row (CE elements a thread: 4 f32
//     or 8 f16), rows loaded contiguously, KG = WG / CW rows at a time,
//     the KG partial sums met in workgroup memory at the end.
// Two barriers a tile. Needs subgroups (contiguous ranges of
// local_invocation_index), G <= 8, G * D <= 1024, D % 16 == 0, WG % CW == 0.
enable subgroups;
diagnostic(off, subgroup_uniformity);

override WG: u32 = 128;   // threads, and keys a tile
override G: u32 = 1u;     // query heads a KV head
override D: u32 = 64u;    // head dimension
// KV16 = 1: caches of f16 pairs packed in u32 words (element e is half
// e & 1 of word e >> 1); 0: f32 (words are f32 bits)
override KV16: u32 = 0u;

struct Params {
  pos: u32,    // the new token's position (its key is in the caches)
  H: u32,
  KVH: u32,
  splits: u32,
  tps: u32,    // tiles a split
  win: u32,    // sliding window (0: none)
  scale: f32,
  pad: u32,
}

@group(0) @binding(0) var<storage, read> q: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> kc: array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> vc: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read_write> part: array<f32>;
@group(0) @binding(4) var<uniform> p: Params;

const MAXG: u32 = 8u;
const MAXQ4: u32 = 256u;  // vec4s of q: G * D <= 1024
const MAXSC: u32 = 1024u; // G * WG scores; also the value sums' meeting place
const MAXSG: u32 = 32u;   // subgroups a workgroup (WG <= 32 * the smallest subgroup)
const NEG: f32 = -3.0e38;
override CE: u32 = 4u + 4u * KV16; // elements a 16-byte cache word holds (not to be set)

var<workgroup> qs: array<vec4<f32>, MAXQ4>;      // [g][D/4], scaled
var<workgroup> sc: array<f32, MAXSC>;            // [g][WG] probabilities of the tile
var<workgroup> red: array<f32, MAXG * MAXSG>;    // [g][subgroup] tile maxima, then sums

// A 16-byte word of a cache (CE elements) as two vec4s (f32: the second
// is zero).
fn unpack_word(w: vec4<u32>) -> array<vec4<f32>, 2> {
  if (KV16 == 1u) {
    return array<vec4<f32>, 2>(vec4<f32>(unpack2x16float(w.x), unpack2x16float(w.y)),
                               vec4<f32>(unpack2x16float(w.z), unpack2x16float(w.w)));
  }
  return array<vec4<f32>, 2>(bitcast<vec4<f32>>(w), vec4<f32>(0.0));
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32,
        @builtin(subgroup_invocation_id) sli: u32, @builtin(subgroup_size) sgs: u32) {
  let kvh = wid.x;
  let z = wid.y;
  let pos = p.pos;
  let D4 = D / 4u;
  let nsg = WG / sgs;
  let sg = li / sgs;
  // q of the G heads, scaled
  for (var i = li; i < G * D4; i += WG) {
    qs[i] = q[(kvh * G) * D4 + i] * p.scale;
  }
  workgroupBarrier();

  var lo = 0u;
  if (p.win > 0u && pos + 1u > p.win) {
    lo = pos + 1u - p.win;
  }
  let ntile = (pos - lo) / WG + 1u;
  let tile0 = z * p.tps;
  let tile1 = min(ntile, tile0 + p.tps);
  let CW = D / CE;      // value-pass threads a row
  let KG = WG / CW;     // rows at a time
  let kg = li / CW;
  let cv = li % CW;
  var m: array<f32, MAXG>;
  var l: array<f32, MAXG>;           // this thread's share of the sum
  var acc: array<vec4<f32>, 16>;     // [g][2]: this thread's CE output elements
  for (var g = 0u; g < G; g++) {
    m[g] = NEG;
    l[g] = 0.0;
    acc[2u * g] = vec4<f32>(0.0);
    acc[2u * g + 1u] = vec4<f32>(0.0);
  }
  for (var tile = tile0; tile < tile1; tile++) {
    let j0 = lo + tile * WG;
    let cnt = min(WG, pos + 1u - j0);
    let mine = li < cnt;
    // scores of this thread's key, G heads
    var s: array<f32, MAXG>;
    for (var g = 0u; g < G; g++) {
      s[g] = NEG;
    }
    if (mine) {
      let e0 = ((j0 + li) * p.KVH + kvh) * D;
      for (var g = 0u; g < G; g++) {
        s[g] = 0.0;
      }
      if (KV16 == 1u) {
        for (var c = 0u; c < D / 8u; c++) {
          let k = unpack_word(kc[e0 / CE + c]);
          for (var g = 0u; g < G; g++) {
            s[g] += dot(qs[g * D4 + 2u * c], k[0]) + dot(qs[g * D4 + 2u * c + 1u], k[1]);
          }
        }
      } else {
        for (var c = 0u; c < D4; c += 2u) {
          let k0 = unpack_word(kc[e0 / CE + c])[0];
          let k1 = unpack_word(kc[e0 / CE + c + 1u])[0];
          for (var g = 0u; g < G; g++) {
            s[g] += dot(qs[g * D4 + c], k0) + dot(qs[g * D4 + c + 1u], k1);
          }
        }
      }
    }
    for (var g = 0u; g < G; g++) {
      let mx = subgroupMax(s[g]);
      if (sli == 0u) {
        red[g * MAXSG + sg] = mx;
      }
    }
    workgroupBarrier();
    for (var g = 0u; g < G; g++) {
      var mt = m[g];
      for (var i = 0u; i < nsg; i++) {
        mt = max(mt, red[g * MAXSG + i]);
      }
      let alpha = exp(m[g] - mt);
      m[g] = mt;
      var pj = 0.0;
      if (mine) {
        pj = exp(s[g] - mt);
      }
      sc[g * WG + li] = pj;
      l[g] = l[g] * alpha + pj;
      acc[2u * g] *= alpha;
      acc[2u * g + 1u] *= alpha;
    }
    workgroupBarrier();
    // values: rows kg, kg + KG, ... of the tile, chunk cv of each
    for (var jj = kg; jj < cnt; jj += KG) {
      let v = unpack_word(vc[((j0 + jj) * p.KVH + kvh) * D / CE + cv]);
      for (var g = 0u; g < G; g++) {
        let pr = sc[g * WG + jj];
        acc[2u * g] += pr * v[0];
        acc[2u * g + 1u] += pr * v[1];
      }
    }
    // the next tile writes red after this tile's second barrier and sc
    // after its own first: every thread has left this value pass by then
  }

  // the partials: l summed over the threads, acc over the KG row groups
  workgroupBarrier();
  for (var g = 0u; g < G; g++) {
    let ls = subgroupAdd(l[g]);
    if (sli == 0u) {
      red[g * MAXSG + sg] = ls;
    }
  }
  let zb = kvh * G * p.splits + z; // (h * splits + z) for g = 0
  for (var g = 0u; g < G; g++) {
    // row group kg's CE elements at sc[kg * D + cv * CE ..]
    let b = kg * D + cv * CE;
    sc[b] = acc[2u * g].x;
    sc[b + 1u] = acc[2u * g].y;
    sc[b + 2u] = acc[2u * g].z;
    sc[b + 3u] = acc[2u * g].w;
    if (KV16 == 1u) {
      sc[b + 4u] = acc[2u * g + 1u].x;
      sc[b + 5u] = acc[2u * g + 1u].y;
      sc[b + 6u] = acc[2u * g + 1u].z;
      sc[b + 7u] = acc[2u * g + 1u].w;
    }
    workgroupBarrier();
    let pb = (zb + g * p.splits) * (D + 2u);
    for (var d = li; d < D; d += WG) {
      var a = 0.0;
      for (var r = 0u; r < KG; r++) {
        a += sc[r * D + d];
      }
      part[pb + 2u + d] = a;
    }
    if (li == 0u) {
      var lt = 0.0;
      for (var i = 0u; i < nsg; i++) {
        lt += red[g * MAXSG + i];
      }
      part[pb] = m[g];
      part[pb + 1u] = lt;
    }
    workgroupBarrier();
  }
}
