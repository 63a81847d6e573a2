// Tiled matrix-matrix product for several tokens (prefill):
//   y[t * y_stride + y_off + r] (+)= sum_c W[r][c] x[x_off*4 + t*cols + c]
// for r < rows (a row range of W, see matvec.wgsl for the weight layouts and
// QT; QT 3 is Q4_K, layout in q4k_matvec.wgsl, with cols % 256 == 0; 4 F16
// and 5 Q8_0, layouts in unpack_weights.wgsli) and
// t < n. cols % 32 == 0 for every type.
//
// One workgroup computes a TM x TN tile (TM rows of W, TN tokens) with
// (TM/4)*(TN/4) threads, each a 4x4 micro-tile (rows tr + i*TM/4, tokens
// tc + j*TN/4). The K dimension advances one 32-column block at a time: the
// block of W is dequantized into workgroup memory once per tile and reused
// by all TN tokens. Both tiles are stored and read as vec4 (k-major rows of
// 8 vec4, pitch 9 vec4): per 4 columns a thread reads 8 vec4 for 64 FMAs.
// Grid: x = ceil(rows / TM), y = ceil(n / TN).
override TM: u32 = 64;  // rows per tile, a multiple of 4
override TN: u32 = 32;  // tokens per tile, a multiple of 4
override QT: u32 = 1;   // 0 f32, 1 Q4, 2 Q4Z, 3 Q4_K (scales and zp unused), 4 F16, 5 Q8_0, 6 int8 + scale/offset per 16, 7 packed 6-bit

const P4: u32 = 9u;   // row pitch of the tiles in vec4 (36 floats: conflict-free vec4 reads)

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

var<workgroup> ws: array<vec4<f32>, TM * P4>;
var<workgroup> xs: array<vec4<f32>, TN * P4>;

// #include "q4k_words.wgsli"

// #include "unpack_weights.wgsli"

// Q4_K (QT 3): d * scale and dmin * min of sub-block j of the super-block
// at u32 word `base`.
fn q4k_sub_scale(base: u32, j: u32) -> vec2<f32> {
  let dm = unpack2x16float(w[base]);
  return dm * q4k_wscale_min(base, j);
}

@compute @workgroup_size((TM / 4u) * (TN / 4u))
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
  let nthreads = (TM / 4u) * (TN / 4u);
  let tr = li % (TM / 4u);
  let tc = li / (TM / 4u);
  let r0 = wid.x * TM;
  let t0 = wid.y * TN;
  let nb = p.cols / 32u;
  var acc: array<array<f32, 4>, 4>;
  for (var i = 0u; i < 4u; i++) {
    for (var j = 0u; j < 4u; j++) {
      acc[i][j] = 0.0;
    }
  }
  for (var b = 0u; b < nb; b++) {
    // W block: TM rows x 32 columns (8 vec4).
    if (QT == 0u) {
      for (var e = li; e < TM * 8u; e += nthreads) {
        let r = e / 8u;
        let c4 = e % 8u;
        let row = r0 + r;
        var v = vec4<f32>(0.0);
        if (row < p.rows) {
          let i = row * p.cols + b * 32u + c4 * 4u;
          v = bitcast<vec4<f32>>(vec4<u32>(w[i], w[i + 1u], w[i + 2u], w[i + 3u]));
        }
        ws[r * P4 + c4] = v;
      }
    } else if (QT == 4u || QT == 5u) {
      // F16: 16 words a block row (vec4 c4 from words 2*c4, 2*c4 + 1); Q8_0:
      // 8 words a block row, one scale a block.
      for (var e = li; e < TM * 8u; e += nthreads) {
        let r = e / 8u;
        let c4 = e % 8u;
        let row = r0 + r;
        var v = vec4<f32>(0.0);
        if (row < p.rows) {
          if (QT == 4u) {
            let i = row * (p.cols / 2u) + b * 16u + c4 * 2u;
            v = f16x4(w[i], w[i + 1u]);
          } else {
            v = scales[row * nb + b] * i8x4(w[row * (p.cols / 4u) + b * 8u + c4]);
          }
        }
        ws[r * P4 + c4] = v;
      }
    } else if (QT == 7u) {
      // packed 6-bit units (unpack_weights.wgsli): two a block row.
      for (var e = li; e < TM * 8u; e += nthreads) {
        let r = e / 8u;
        let c4 = e % 8u;
        let row = r0 + r;
        var v = vec4<f32>(0.0);
        if (row < p.rows) {
          let g = row * (p.cols / 16u) + b * 2u + c4 / 4u;
          let q = vec4<u32>(w[4u * g], w[4u * g + 1u], w[4u * g + 2u], w[4u * g + 3u]);
          v = bitcast<f32>(q.w) * (q6x4(q, c4 % 4u) - 32.0);
        }
        ws[r * P4 + c4] = v;
      }
    } else if (QT == 6u) {
      // int8 values, 8 words a block row; a scale and an offset per 16.
      for (var e = li; e < TM * 8u; e += nthreads) {
        let r = e / 8u;
        let c4 = e % 8u;
        let row = r0 + r;
        var v = vec4<f32>(0.0);
        if (row < p.rows) {
          let g = row * (p.cols / 16u) + b * 2u + c4 / 4u;
          v = scales[2u * g] * i8x4(w[row * (p.cols / 4u) + b * 8u + c4]) + scales[2u * g + 1u];
        }
        ws[r * P4 + c4] = v;
      }
    } else if (QT == 3u) {
      // Q4_K: the block is sub-block j = b % 8 of super-block b / 8: the low
      // (j even) or high nibbles of its 32 quant bytes, 8 words of 4.
      let sb = b / 8u;
      let j = b % 8u;
      for (var e = li; e < TM * 8u; e += nthreads) {
        let r = e / 8u;
        let k = e % 8u;
        let row = r0 + r;
        var v = vec4<f32>(0.0);
        if (row < p.rows) {
          let base = (row * (p.cols / 256u) + sb) * 36u;
          let sm = q4k_sub_scale(base, j);
          let word = w[base + 4u + 8u * (j / 2u) + k] >> (4u * (j % 2u));
          let q = vec4<u32>(word, word >> 8u, word >> 16u, word >> 24u) & vec4<u32>(15u);
          v = sm.x * vec4<f32>(q) - sm.y;
        }
        ws[r * P4 + k] = v;
      }
    } else {
      for (var e = li; e < TM * 4u; e += nthreads) {
        let r = e / 4u;
        let wd = e % 4u;
        let row = r0 + r;
        var lo = vec4<f32>(0.0);
        var hi = vec4<f32>(0.0);
        if (row < p.rows) {
          let word = w[row * (p.cols / 8u) + b * 4u + wd];
          let blk = row * nb + b;
          var z = 8.0;
          if (QT == 2u) {
            z = f32((zp[blk / 8u] >> ((blk % 8u) * 4u)) & 15u);
          }
          let s = scales[blk];
          let qlo = vec4<u32>(word, word >> 4u, word >> 8u, word >> 12u) & vec4<u32>(15u);
          let qhi = vec4<u32>(word >> 16u, word >> 20u, word >> 24u, word >> 28u) & vec4<u32>(15u);
          lo = s * (vec4<f32>(qlo) - z);
          hi = s * (vec4<f32>(qhi) - z);
        }
        ws[r * P4 + wd * 2u] = lo;
        ws[r * P4 + wd * 2u + 1u] = hi;
      }
    }
    // x block: TN tokens x 32 columns.
    for (var e = li; e < TN * 8u; e += nthreads) {
      let t = e / 8u;
      let c4 = e % 8u;
      var v = vec4<f32>(0.0);
      if (t0 + t < p.n) {
        v = x[p.x_off + (t0 + t) * (p.cols / 4u) + b * 8u + c4];
      }
      xs[t * P4 + c4] = v;
    }
    workgroupBarrier();
    for (var k4 = 0u; k4 < 8u; k4++) {
      var a: array<vec4<f32>, 4>;
      var bx: array<vec4<f32>, 4>;
      for (var i = 0u; i < 4u; i++) {
        a[i] = ws[(tr + i * (TM / 4u)) * P4 + k4];
        bx[i] = xs[(tc + i * (TN / 4u)) * P4 + k4];
      }
      for (var i = 0u; i < 4u; i++) {
        for (var j = 0u; j < 4u; j++) {
          var v = acc[i][j];
          v = fma(a[i].x, bx[j].x, v);
          v = fma(a[i].y, bx[j].y, v);
          v = fma(a[i].z, bx[j].z, v);
          v = fma(a[i].w, bx[j].w, v);
          acc[i][j] = v;
        }
      }
    }
    workgroupBarrier();
  }
  for (var i = 0u; i < 4u; i++) {
    let row = r0 + tr + i * (TM / 4u);
    if (row >= p.rows) {
      continue;
    }
    for (var j = 0u; j < 4u; j++) {
      let t = t0 + tc + j * (TN / 4u);
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
