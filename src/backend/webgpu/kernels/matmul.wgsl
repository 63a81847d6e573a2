// Tiled matrix-matrix product for several tokens (prefill):
//   y[t * y_stride + y_off + r] (+)= sum_c W[r][c] x[x_off*4 + t*cols + c]
// for r < rows (a row range of W, see matvec.wgsl for the weight layouts and
// QT; QT 3 is Q4_K, layout in q4k_matvec.wgsl, with cols % 256 == 0; 4 F16
// and 5 Q8_0, layouts in unpack_weights.wgsli) and
// t < n. cols % 32 == 0 for every type.
//
// One workgroup computes a TM x TN tile (TM rows of W, TN tokens) with
// (TM/RM)*(TN/RN) threads, each an RM x RN register tile (rows tr + i*TM/RM,
// tokens tc + j*TN/RN). K advances 16 columns (half a 32-column block) a
// stage: the stage's weights are dequantized once into workgroup memory
// (4 vec4 a row, pitch 5 vec4: conflict-free vec4 reads) and reused by all
// TN tokens; per 4 columns a thread reads RM + RN vec4 for 4*RM*RN FMAs.
// The next stage's weights and inputs are loaded (and dequantized) into
// registers before the current stage is computed, so that their latency
// overlaps the arithmetic. DB 1: two workgroup buffers, the next stage
// stored into the other one, one barrier a stage; DB 0: one buffer, stored
// after the compute, two barriers a stage (half the workgroup memory).
//
// Every output is one f32 accumulator adding fma(w, x) over c = 0, 1, ...,
// cols - 1 in order, and a weight's value is the same expression of its
// stored bits whatever the tile: the result does not depend on TM, TN, RM,
// RN, DB or n (tests/test_webgpu_matmul_tiles.c checks the bits).
// Grid: x = ceil(rows / TM), y = ceil(n / TN).
override TM: u32 = 64;  // rows per tile, a multiple of RM
override TN: u32 = 32;  // tokens per tile, a multiple of RN
override RM: u32 = 4;   // rows per thread, <= 8
override RN: u32 = 4;   // tokens per thread, <= 8
override DB: u32 = 0;   // 1: double-buffered workgroup memory
override QT: u32 = 1;   // 0 f32, 1 Q4, 2 Q4Z, 3 Q4_K (scales and zp unused), 4 F16, 5 Q8_0, 6 int8 + scale/offset per 16, 7 packed 6-bit

override TR: u32 = TM / RM;
override TC: u32 = TN / RN;
override NT: u32 = TR * TC;
override NW: u32 = (TM * 4u + NT - 1u) / NT;  // weight vec4s a thread loads a stage, <= 8
override NX: u32 = (TN * 4u + NT - 1u) / NT;  // input vec4s a thread loads a stage, <= 8
override NB: u32 = DB + 1u;                   // workgroup buffers
const P4: u32 = 5u;  // row pitch of the tiles in vec4 (4 used)

struct Params {
  rows: u32,
  cols: u32,
  y_off: u32,
  x_off: u32,     // vec4 offset of token 0's row of x
  acc: u32,
  n: u32,
  y_stride: u32,  // floats between consecutive tokens' rows of y
  pad0: u32,
}

@group(0) @binding(0) var<storage, read> w: array<u32>;
@group(0) @binding(1) var<storage, read> scales: array<f32>;
@group(0) @binding(2) var<storage, read> zp: array<u32>;
@group(0) @binding(3) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
@group(0) @binding(5) var<uniform> p: Params;

var<workgroup> ws: array<vec4<f32>, NB * TM * P4>;
var<workgroup> xs: array<vec4<f32>, NB * TN * P4>;

// #include "q4k_words.wgsli"

// #include "unpack_weights.wgsli"

// Q4_K (QT 3): d * scale and dmin * min of sub-block j of the super-block
// at u32 word `base`.
fn q4k_sub_scale(base: u32, j: u32) -> vec2<f32> {
  let dm = unpack2x16float(w[base]);
  return dm * q4k_wscale_min(base, j);
}

// Columns 4*c4 .. 4*c4 + 3 (c4 < 8) of 32-column block b of row `row`
// (row < p.rows), as f32.
fn wvec(row: u32, b: u32, c4: u32) -> vec4<f32> {
  let nb = p.cols / 32u;
  if (QT == 0u) {
    let i = row * p.cols + b * 32u + c4 * 4u;
    return bitcast<vec4<f32>>(vec4<u32>(w[i], w[i + 1u], w[i + 2u], w[i + 3u]));
  } else if (QT == 4u) {
    // F16: 16 words a block row (vec4 c4 from words 2*c4, 2*c4 + 1).
    let i = row * (p.cols / 2u) + b * 16u + c4 * 2u;
    return f16x4(w[i], w[i + 1u]);
  } else if (QT == 5u) {
    // Q8_0: 8 words a block row, one scale a block.
    return scales[row * nb + b] * i8x4(w[row * (p.cols / 4u) + b * 8u + c4]);
  } else if (QT == 7u) {
    // packed 6-bit units (unpack_weights.wgsli): two a block row.
    let g = row * (p.cols / 16u) + b * 2u + c4 / 4u;
    let q = vec4<u32>(w[4u * g], w[4u * g + 1u], w[4u * g + 2u], w[4u * g + 3u]);
    return bitcast<f32>(q.w) * (q6x4(q, c4 % 4u) - 32.0);
  } else if (QT == 6u) {
    // int8 values, 8 words a block row; a scale and an offset per 16.
    let g = row * (p.cols / 16u) + b * 2u + c4 / 4u;
    return scales[2u * g] * i8x4(w[row * (p.cols / 4u) + b * 8u + c4]) + scales[2u * g + 1u];
  } else if (QT == 3u) {
    // Q4_K: the block is sub-block j = b % 8 of super-block b / 8: the low
    // (j even) or high nibbles of its 32 quant bytes, 8 words of 4.
    let j = b % 8u;
    let base = (row * (p.cols / 256u) + b / 8u) * 36u;
    let sm = q4k_sub_scale(base, j);
    let word = w[base + 4u + 8u * (j / 2u) + c4] >> (4u * (j % 2u));
    let q = vec4<u32>(word, word >> 8u, word >> 16u, word >> 24u) & vec4<u32>(15u);
    return sm.x * vec4<f32>(q) - sm.y;
  }
  // Q4 / Q4Z: 4 words a block row, 8 nibbles a word (element k at bits 4k).
  let word = w[row * (p.cols / 8u) + b * 4u + c4 / 2u] >> (16u * (c4 % 2u));
  let blk = row * nb + b;
  var z = 8.0;
  if (QT == 2u) {
    z = f32((zp[blk / 8u] >> ((blk % 8u) * 4u)) & 15u);
  }
  let q = vec4<u32>(word, word >> 4u, word >> 8u, word >> 12u) & vec4<u32>(15u);
  return scales[blk] * (vec4<f32>(q) - z);
}

// Adds stage buffer `buf`'s products to the thread's register tile.
fn compute(acc: ptr<function, array<array<f32, 8>, 8>>, buf: u32, tr: u32, tc: u32) {
  let wb = buf * TM * P4;
  let xb = buf * TN * P4;
  for (var k4 = 0u; k4 < 4u; k4++) {
    var a: array<vec4<f32>, 8>;
    var bx: array<vec4<f32>, 8>;
    for (var i = 0u; i < RM; i++) {
      a[i] = ws[wb + (tr + i * TR) * P4 + k4];
    }
    for (var j = 0u; j < RN; j++) {
      bx[j] = xs[xb + (tc + j * TC) * P4 + k4];
    }
    for (var i = 0u; i < RM; i++) {
      for (var j = 0u; j < RN; j++) {
        var v = (*acc)[i][j];
        v = fma(a[i].x, bx[j].x, v);
        v = fma(a[i].y, bx[j].y, v);
        v = fma(a[i].z, bx[j].z, v);
        v = fma(a[i].w, bx[j].w, v);
        (*acc)[i][j] = v;
      }
    }
  }
}

@compute @workgroup_size(NT)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
  let tr = li % TR;
  let tc = li / TR;
  let r0 = wid.x * TM;
  let t0 = wid.y * TN;
  let ns = p.cols / 16u;  // stages
  var acc: array<array<f32, 8>, 8>;
  for (var i = 0u; i < RM; i++) {
    for (var j = 0u; j < RN; j++) {
      acc[i][j] = 0.0;
    }
  }
  var pw: array<vec4<f32>, 8>;
  var px: array<vec4<f32>, 8>;
  // Iteration st loads stage st into registers, computes stage st - 1 from
  // workgroup memory, and stores stage st (buffer st % NB).
  for (var st = 0u; st <= ns; st++) {
    if (st < ns) {
      let b = st / 2u;
      let h4 = (st % 2u) * 4u;  // first vec4 of the half block
      for (var u = 0u; u < NW; u++) {
        let e = li + u * NT;
        let row = r0 + e / 4u;
        pw[u] = vec4<f32>(0.0);
        if (e < TM * 4u && row < p.rows) {
          pw[u] = wvec(row, b, h4 + e % 4u);
        }
      }
      for (var u = 0u; u < NX; u++) {
        let e = li + u * NT;
        let t = e / 4u;
        px[u] = vec4<f32>(0.0);
        if (e < TN * 4u && t0 + t < p.n) {
          px[u] = x[p.x_off + (t0 + t) * (p.cols / 4u) + st * 4u + e % 4u];
        }
      }
    }
    if (st > 0u) {
      compute(&acc, (st - 1u) % NB, tr, tc);
    }
    if (DB == 0u) {
      workgroupBarrier();  // the one buffer is read by all before it is overwritten
    }
    if (st < ns) {
      let wb = (st % NB) * TM * P4;
      let xb = (st % NB) * TN * P4;
      for (var u = 0u; u < NW; u++) {
        let e = li + u * NT;
        if (e < TM * 4u) {
          ws[wb + (e / 4u) * P4 + e % 4u] = pw[u];
        }
      }
      for (var u = 0u; u < NX; u++) {
        let e = li + u * NT;
        if (e < TN * 4u) {
          xs[xb + (e / 4u) * P4 + e % 4u] = px[u];
        }
      }
    }
    workgroupBarrier();
  }
  for (var i = 0u; i < RM; i++) {
    let row = r0 + tr + i * TR;
    if (row >= p.rows) {
      continue;
    }
    for (var j = 0u; j < RN; j++) {
      let t = t0 + tc + j * TC;
      if (t < p.n) {
        let dst = t * p.y_stride + p.y_off + row;
        var v = acc[i][j];
        if (p.acc != 0u) {
          v += y[dst];
        }
        y[dst] = v;
      }
    }
  }
}
