// Embedding gather: out[t][c] = E[tokens[t]][c] dequantized, for up to 64
// tokens per dispatch, from one row range [row0, row0 + rows) of E (a matrix
// larger than a storage binding is split into several ranges, one dispatch
// each; tokens outside the range are left alone).
//
// QT selects the weight type: 0 = f32 (w holds the floats' bits), 1 = Q4
// (symmetric, zero point 8), 2 = Q4Z (a 4-bit zero point per block, packed
// two per byte, blocks numbered row-major), 4 = F16, 5 = Q8_0 (layouts in
// unpack_weights.wgsli). Q4 layout as in matvec.wgsl.
// Grid: x = ceil(cols / WG), y = number of tokens.
override WG: u32 = 64;  // threads per workgroup
override QT: u32 = 1;   // 0 f32, 1 Q4, 2 Q4Z, 4 F16, 5 Q8_0, 6 int8 + scale/offset per 16, 7 packed 6-bit
override FROM_IDS: u32 = 0u; // 1: one token, read from ids[p.pad0] (the decode loop)

struct Params {
  n: u32,        // tokens in this dispatch
  cols: u32,
  row0: u32,     // first row of the bound range
  rows: u32,     // rows in the bound range
  out_off: u32,  // float offset of out row 0
  pad0: u32,
  pad1: u32,
  pad2: u32,
  tok: array<vec4<u32>, 16>,  // token t at tok[t / 4][t % 4]
}

@group(0) @binding(0) var<storage, read> w: array<u32>;
@group(0) @binding(1) var<storage, read> scales: array<f32>;
@group(0) @binding(2) var<storage, read> zp: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<storage, read> ids: array<u32>;
@group(0) @binding(5) var<uniform> p: Params;

// #include "unpack_weights.wgsli"

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
  let t = wid.y;
  let c = wid.x * WG + li;
  if (t >= p.n || c >= p.cols) {
    return;
  }
  var token = p.tok[t / 4u][t % 4u];
  if (FROM_IDS == 1u) {
    token = ids[p.pad0];
  }
  if (token < p.row0 || token >= p.row0 + p.rows) {
    return;
  }
  let r = token - p.row0;
  var v: f32;
  if (QT == 0u) {
    v = bitcast<f32>(w[r * p.cols + c]);
  } else if (QT == 4u) {
    let e = r * p.cols + c;
    v = unpack2x16float(w[e / 2u])[e % 2u];
  } else if (QT == 5u) {
    let e = r * p.cols + c;
    v = scales[r * (p.cols / 32u) + c / 32u] * i8x4(w[e / 4u])[e % 4u];
  } else if (QT == 7u) {
    let e = r * p.cols + c;
    let g = e / 16u;
    let i = e % 16u;
    let lo = (w[4u * g + i / 8u] >> ((i % 8u) * 4u)) & 15u;
    let hi = (w[4u * g + 2u] >> (2u * i)) & 3u;
    v = bitcast<f32>(w[4u * g + 3u]) * (f32(lo | (hi << 4u)) - 32.0);
  } else if (QT == 6u) {
    let e = r * p.cols + c;
    let g = e / 16u;
    v = scales[2u * g] * i8x4(w[e / 4u])[e % 4u] + scales[2u * g + 1u];
  } else {
    let word = w[(r * p.cols + c) / 8u];
    let q = f32((word >> ((c % 8u) * 4u)) & 15u);
    let nb = p.cols / 32u;
    let blk = r * nb + c / 32u;
    var z = 8.0;
    if (QT == 2u) {
      z = f32((zp[blk / 8u] >> ((blk % 8u) * 4u)) & 15u);
    }
    v = scales[blk] * (q - z);
  }
  out[p.out_off + t * p.cols + c] = v;
}
