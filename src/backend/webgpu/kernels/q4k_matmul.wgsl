// Tiled Q4_K matrix-matrix product for several tokens (prefill):
//   y[t * y_stride + y_off + r] (+)= sum_c W[r][c] x[x_off*4 + t*cols + c]
// for r < rows (a row range of a Q4_K matrix, layout in q4k_matvec.wgsl) and
// t < n; cols % 256 == 0.
//
// As matmul.wgsl: one workgroup computes a TM x TN tile (TM rows of W, TN
// tokens) with (TM/4)*(TN/4) threads, each a 4x4 micro-tile; K advances one
// 32-column sub-block at a time, the sub-block of the TM rows dequantized
// into workgroup memory once (d * scale * q - dmin * min) and reused by all
// TN tokens, so a prompt reads the weights ceil(n / TN) times instead of n.
// Grid: x = ceil(rows / TM), y = ceil(n / TN).
override TM: u32 = 64;  // rows per tile, a multiple of 4
override TN: u32 = 32;  // tokens per tile, a multiple of 4

const PAD: u32 = 33u;   // row pitch of the tiles in workgroup memory

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
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

var<workgroup> ws: array<f32, TM * PAD>;
var<workgroup> xs: array<f32, TN * PAD>;

fn sbyte(base: u32, j: u32) -> u32 {
  return (w[base + 1u + j / 4u] >> (8u * (j % 4u))) & 255u;
}

// d * scale and dmin * min of sub-block j of the super-block at word base.
fn sub_scale(base: u32, j: u32) -> vec2<f32> {
  let dm = unpack2x16float(w[base]);
  var sc: u32;
  var mn: u32;
  if (j < 4u) {
    sc = sbyte(base, j) & 63u;
    mn = sbyte(base, j + 4u) & 63u;
  } else {
    sc = (sbyte(base, j + 4u) & 15u) | ((sbyte(base, j - 4u) >> 6u) << 4u);
    mn = (sbyte(base, j + 4u) >> 4u) | ((sbyte(base, j) >> 6u) << 4u);
  }
  return vec2<f32>(dm.x * f32(sc), dm.y * f32(mn));
}

@compute @workgroup_size((TM / 4u) * (TN / 4u))
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
  let nthreads = (TM / 4u) * (TN / 4u);
  let tr = li % (TM / 4u);
  let tc = li / (TM / 4u);
  let r0 = wid.x * TM;
  let t0 = wid.y * TN;
  let nsb = p.cols / 256u;
  let nb = p.cols / 32u;
  var acc: array<array<f32, 4>, 4>;
  for (var i = 0u; i < 4u; i++) {
    for (var j = 0u; j < 4u; j++) {
      acc[i][j] = 0.0;
    }
  }
  for (var b = 0u; b < nb; b++) {
    let sb = b / 8u;   // super-block
    let j = b % 8u;    // sub-block: low (j even) or high nibbles of byte group j / 2
    // W sub-block: TM rows x 32 columns, 8 words (4 elements each) a row.
    for (var e = li; e < TM * 8u; e += nthreads) {
      let r = e / 8u;
      let k = e % 8u;
      let row = r0 + r;
      let o = r * PAD + k * 4u;
      if (row < p.rows) {
        let base = (row * nsb + sb) * 36u;
        let sm = sub_scale(base, j);
        let word = w[base + 4u + 8u * (j / 2u) + k] >> (4u * (j % 2u));
        for (var q = 0u; q < 4u; q++) {
          ws[o + q] = sm.x * f32((word >> (8u * q)) & 15u) - sm.y;
        }
      } else {
        for (var q = 0u; q < 4u; q++) {
          ws[o + q] = 0.0;
        }
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
      let o = t * PAD + c4 * 4u;
      xs[o] = v.x;
      xs[o + 1u] = v.y;
      xs[o + 2u] = v.z;
      xs[o + 3u] = v.w;
    }
    workgroupBarrier();
    for (var k = 0u; k < 32u; k++) {
      var a: array<f32, 4>;
      var bx: array<f32, 4>;
      for (var i = 0u; i < 4u; i++) {
        a[i] = ws[(tr + i * (TM / 4u)) * PAD + k];
        bx[i] = xs[(tc + i * (TN / 4u)) * PAD + k];
      }
      for (var i = 0u; i < 4u; i++) {
        for (var jj = 0u; jj < 4u; jj++) {
          acc[i][jj] += a[i] * bx[jj];
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
    for (var jj = 0u; jj < 4u; jj++) {
      let t = t0 + tc + jj * (TN / 4u);
      if (t < p.n) {
        let dst = t * p.y_stride + p.y_off + row;
        var v = acc[i][jj];
        if (p.acc != 0u) {
          v += y[dst];
        }
        y[dst] = v;
      }
    }
  }
}
