// wisp's own kernel for the seed profile's "q4_decode_metal_simd16" key
// (the seed profile): y (+)= W x for a Q4_K matrix,
// THREADS_PER_COL_GEMV lanes per output column (row of W), COLS_PER_WG
// columns per workgroup of WORKGROUP_SIZE = COLS_PER_WG * THREADS_PER_COL_GEMV
// threads; lanes of a column reduce in workgroup memory (segmented tree, no
// subgroup operations, so it runs where subgroups are absent).
// USE_FULL_BLOCK_FAST_PATH: a lane takes whole 256-element super-blocks
// (4 units in a row, one block header read per 256 values) when the row has
// at least THREADS_PER_COL_GEMV super-blocks; else lanes take 64-element units.
// Grid: ceil(rows / COLS_PER_WG) workgroups as x*y, z = token.
override WORKGROUP_SIZE: u32 = 256;
override COLS_PER_WG: u32 = 16;
override THREADS_PER_COL_GEMV: u32 = 16; // a power of two
override USE_FULL_BLOCK_FAST_PATH: bool = true;

// Q4_K layout (src/format/tensor.h): a row is cols/256 super-blocks of 144
// bytes = 36 u32 words: word 0 = f16 d | f16 dmin << 16 (unpack2x16float,
// no f16 extension), words 1-3 the 12 bytes of packed 6-bit scales/mins,
// words 4-35 the quants: element 64c + l (l < 32) is the low nibble of
// byte 32c + l, element 64c + 32 + l its high nibble; value =
// d*sc[j]*nibble - dmin*m[j], j = element / 32.
// Work unit: 64 elements (super-block b, pair c of sub-blocks 2c, 2c+1).

struct Params {
  rows: u32,     // rows of the bound part
  cols: u32,     // a multiple of 256
  y_off: u32,    // float offset in y of the part's first row, token 0
  x_off: u32,    // vec4 offset of token 0's x
  acc: u32,      // 1: add into y
  y_stride: u32, // floats between tokens in y (the whole matrix's rows)
  pad0: u32,
  pad1: u32,
}

@group(0) @binding(0) var<storage, read> w: array<u32>;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

fn sbyte(base: u32, j: u32) -> u32 {
  return (w[base + 1u + j / 4u] >> (8u * (j % 4u))) & 255u;
}

// (scale, min) of sub-block j of the super-block at word `base`.
fn scale_min(base: u32, j: u32) -> vec2<f32> {
  if (j < 4u) {
    return vec2<f32>(f32(sbyte(base, j) & 63u), f32(sbyte(base, j + 4u) & 63u));
  }
  let sc = (sbyte(base, j + 4u) & 15u) | ((sbyte(base, j - 4u) >> 6u) << 4u);
  let mn = (sbyte(base, j + 4u) >> 4u) | ((sbyte(base, j) >> 6u) << 4u);
  return vec2<f32>(f32(sc), f32(mn));
}

// sum over unit (b, c) of row r of W[r][i] * x[i]; xb = vec4 offset of x.
fn unit_dot(r: u32, b: u32, c: u32, xb: u32) -> f32 {
  let nsb = p.cols / 256u;
  let base = (r * nsb + b) * 36u;
  let dm = unpack2x16float(w[base]);
  let s0 = scale_min(base, 2u * c);
  let s1 = scale_min(base, 2u * c + 1u);
  let xo = xb + b * 64u + c * 16u;
  var qx0 = 0.0;
  var qx1 = 0.0;
  var sx0 = 0.0;
  var sx1 = 0.0;
  let one = vec4<f32>(1.0);
  for (var k = 0u; k < 8u; k++) {
    let q = w[base + 4u + 8u * c + k];
    let a = x[xo + k];
    let e = x[xo + 8u + k];
    let lo = vec4<f32>(f32(q & 15u), f32((q >> 8u) & 15u), f32((q >> 16u) & 15u), f32((q >> 24u) & 15u));
    let hi = vec4<f32>(f32((q >> 4u) & 15u), f32((q >> 12u) & 15u), f32((q >> 20u) & 15u), f32(q >> 28u));
    qx0 += dot(lo, a);
    qx1 += dot(hi, e);
    sx0 += dot(a, one);
    sx1 += dot(e, one);
  }
  return dm.x * (s0.x * qx0 + s1.x * qx1) - dm.y * (s0.y * sx0 + s1.y * sx1);
}

fn store(r: u32, t: u32, v: f32) {
  let o = p.y_off + t * p.y_stride + r;
  if (p.acc == 1u) {
    y[o] = y[o] + v;
  } else {
    y[o] = v;
  }
}

var<workgroup> red: array<f32, WORKGROUP_SIZE>;

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
  let lane = li % THREADS_PER_COL_GEMV;
  let col = li / THREADS_PER_COL_GEMV;
  let r = (wid.x + wid.y * nwg.x) * COLS_PER_WG + col;
  let t = wid.z;
  let xb = p.x_off + t * (p.cols / 4u);
  let nsb = p.cols / 256u;
  var acc = 0.0;
  if (r < p.rows && col < COLS_PER_WG) {
    if (USE_FULL_BLOCK_FAST_PATH && nsb >= THREADS_PER_COL_GEMV) {
      for (var b = lane; b < nsb; b += THREADS_PER_COL_GEMV) {
        acc += unit_dot(r, b, 0u, xb) + unit_dot(r, b, 1u, xb) + unit_dot(r, b, 2u, xb) + unit_dot(r, b, 3u, xb);
      }
    } else {
      for (var u = lane; u < 4u * nsb; u += THREADS_PER_COL_GEMV) {
        acc += unit_dot(r, u / 4u, u % 4u, xb);
      }
    }
  }
  red[li] = acc;
  workgroupBarrier();
  for (var s = THREADS_PER_COL_GEMV / 2u; s > 0u; s >>= 1u) {
    if (lane < s) {
      red[li] += red[li + s];
    }
    workgroupBarrier();
  }
  if (lane == 0u && r < p.rows && col < COLS_PER_WG) {
    store(r, t, red[li]);
  }
}
