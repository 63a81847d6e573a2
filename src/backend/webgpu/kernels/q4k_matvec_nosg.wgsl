// y[t][r] (+)= sum_c W[r][c] x[t][c] for a Q4_K matrix: ROWS rows per
// workgroup, WG threads stride over a row's 64-element units, workgroup-memory
// tree reduction (no subgroups). Grid: ceil(rows / ROWS) workgroups as x*y
// (linear id wid.x + wid.y*nwg.x), z = token (one-token decode: z = 1;
// prefill runs the same product per token). WG is a power of two.
override WG: u32 = 64;
override ROWS: u32 = 4;

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

// #include "q4k_words.wgsli"

// sum over unit (b, c) of row r of W[r][i] * x[i]; xb = vec4 offset of x.
fn unit_dot(r: u32, b: u32, c: u32, xb: u32) -> f32 {
  let nsb = p.cols / 256u;
  let base = (r * nsb + b) * 36u;
  let dm = unpack2x16float(w[base]);
  let s0 = q4k_wscale_min(base, 2u * c);
  let s1 = q4k_wscale_min(base, 2u * c + 1u);
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

var<workgroup> red: array<f32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
  let r0 = (wid.x + wid.y * nwg.x) * ROWS;
  let t = wid.z;
  let xb = p.x_off + t * (p.cols / 4u);
  let units = p.cols / 64u;
  for (var rr = 0u; rr < ROWS; rr++) {
    let r = r0 + rr;
    var acc = 0.0;
    if (r < p.rows) {
      for (var u = li; u < units; u += WG) {
        acc += unit_dot(r, u / 4u, u % 4u, xb);
      }
    }
    red[li] = acc;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
      if (li < s) {
        red[li] += red[li + s];
      }
      workgroupBarrier();
    }
    if (li == 0u && r < p.rows) {
      store(r, t, red[0]);
    }
    workgroupBarrier();
  }
}
