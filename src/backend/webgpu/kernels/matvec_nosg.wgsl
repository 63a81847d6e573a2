// y[y_off + r] (+)= sum_c W[r][c] x'[c]: matrix-vector product for one
// token (decode), without subgroups: partial sums in workgroup memory
// (ROWS * WG * 4 bytes), summed by one thread per row. Same layout,
// parameters, bindings and grid as matvec.wgsl.
//
// QT: 0 = f32 (w holds the floats' bits, cols % 4 == 0), 1 = Q4, 2 = Q4Z,
// 4 = F16, 5 = Q8_0 (layouts: unpack_weights.wgsli).
// Q4 layout (wisp_matrix): row-major, cols/2 bytes a row, byte j holds
// element 2j in its low nibble and 2j+1 in its high nibble, so nibble k of a
// little-endian u32 word is element k of that word's 8; one f32 scale per
// 32-element block; Q4Z adds a 4-bit zero point per block (packed two per
// byte, blocks numbered row-major, so block b is nibble b % 8 of word b / 8).
// value = scale * (nibble - zero point), zero point 8 for Q4.
//
// PRE (p.pre, a uniform parameter rather than an override constant, so
// that the fusions share one pipeline per weight type) fuses the op that
// produced x (decode only): 0 = x' = x; 1 = RMSNorm,
// x' = x * nw / sqrt(mean(x^2) + eps), computed as inv * (W (x * nw)) with
// the sum of squares reduced by every workgroup; 2 = SwiGLU, x is [gate | up]
// (2*cols values) and x' = silu(gate) * up. Workgroup 0 also writes x' to xo,
// so the fused op's output buffer holds what the unfused op would have
// written. For PRE 0, nw and xo are bound to placeholders.
//
// Work unit: 8 elements (one u32 word of Q4/Q4Z nibbles, four words of F16
// halves, two of Q8_0 int8 values), one vec4 (4 elements) for f32. One workgroup computes ROWS consecutive rows; its WG threads stride
// over a row's units. Grid: ceil(rows / ROWS) workgroups as x*y (linear id
// wid.x + wid.y*nwg.x). The bound w/scales/zp may be a row range of a larger
// matrix (rows = the range's rows; y_off places it in y).
//
// ARGMAX = 1 (greedy decode: the head product followed by the token choice)
// also writes this workgroup's (largest y, lowest row index on ties) to
// amax[2*(part_off + wg id)] (value) and [.. + 1] (row index of y as u32
// bits); sample.wgsl with PARTS = 1 reduces those pairs, so the logits are
// not read again. y is still written.

override WG: u32 = 128;  // threads per workgroup
override ROWS: u32 = 4;  // rows per workgroup, <= WG and <= 16
override QT: u32 = 1;    // 0 f32, 1 Q4, 2 Q4Z, 4 F16, 5 Q8_0, 6 int8 + scale/offset per 16, 7 packed 6-bit
const MAXR: u32 = 16u;   // most ROWS
override ARGMAX: u32 = 0u; // 1: per-workgroup argmax partials to amax

struct Params {
  rows: u32,
  cols: u32,
  y_off: u32,  // float offset in y of the first row
  x_off: u32,  // vec4 offset of x in its buffer
  acc: u32,    // 1: add into y
  eps: f32,    // PRE 1
  pre: u32,    // PRE: what x is: 0 as bound, 1 rmsnorm(x) * nw, 2 swiglu(x)
  part_off: u32, // ARGMAX: index of this dispatch's first workgroup in amax
}

@group(0) @binding(0) var<storage, read> w: array<u32>;
@group(0) @binding(1) var<storage, read> scales: array<f32>;
@group(0) @binding(2) var<storage, read> zp: array<u32>;
@group(0) @binding(3) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
@group(0) @binding(5) var<storage, read> nw: array<vec4<f32>>;       // PRE 1: norm weights
@group(0) @binding(6) var<storage, read_write> xo: array<vec4<f32>>; // PRE 1/2: x as used
@group(0) @binding(7) var<storage, read_write> amax: array<f32>;    // ARGMAX: partials
@group(0) @binding(8) var<uniform> p: Params;

// Vector i (4 elements) of the input as the product uses it.
fn xin(i: u32) -> vec4<f32> {
  if (p.pre == 1u) {
    return x[p.x_off + i] * nw[i];
  }
  if (p.pre == 2u) {
    let g = x[p.x_off + i];
    return g / (1.0 + exp(-g)) * x[p.x_off + p.cols / 4u + i];
  }
  return x[p.x_off + i];
}

// #include "unpack_weights.wgsli"

// Dot product of unit u of a row with the input vectors xa (and xb, all but f32).
fn unit_dot(row: u32, u: u32, xa: vec4<f32>, xb: vec4<f32>) -> f32 {
  if (QT == 0u) {
    let i = (row * (p.cols / 4u) + u) * 4u;
    let wv = bitcast<vec4<f32>>(vec4<u32>(w[i], w[i + 1u], w[i + 2u], w[i + 3u]));
    return dot(wv, xa);
  }
  if (QT == 4u) {
    let i = row * (p.cols / 2u) + u * 4u;
    return dot(f16x4(w[i], w[i + 1u]), xa) + dot(f16x4(w[i + 2u], w[i + 3u]), xb);
  }
  if (QT == 5u) {
    let i = row * (p.cols / 4u) + u * 2u;
    return scales[row * (p.cols / 32u) + u / 4u] * (dot(i8x4(w[i]), xa) + dot(i8x4(w[i + 1u]), xb));
  }
  if (QT == 7u) { // half a packed unit (elements 8h..8h+7): s (sum u x - 32 sum x)
    let g = row * (p.cols / 16u) + u / 2u;
    let q = vec4<u32>(w[4u * g], w[4u * g + 1u], w[4u * g + 2u], w[4u * g + 3u]);
    let k = 2u * (u % 2u);
    let xs = dot(xa, vec4<f32>(1.0)) + dot(xb, vec4<f32>(1.0));
    return bitcast<f32>(q.w) * (dot(q6x4(q, k), xa) + dot(q6x4(q, k + 1u), xb) - 32.0 * xs);
  }
  if (QT == 6u) { // 8 of a 16-element group's int8 values: s sum q x + o sum x
    let i = row * (p.cols / 4u) + u * 2u;
    let g = row * (p.cols / 16u) + u / 2u;
    let xs = dot(xa, vec4<f32>(1.0)) + dot(xb, vec4<f32>(1.0));
    return scales[2u * g] * (dot(i8x4(w[i]), xa) + dot(i8x4(w[i + 1u]), xb)) + scales[2u * g + 1u] * xs;
  }
  let word = w[row * (p.cols / 8u) + u];
  let blk = row * (p.cols / 32u) + u / 4u;
  var z = 8.0;
  if (QT == 2u) {
    z = f32((zp[blk / 8u] >> ((blk % 8u) * 4u)) & 15u);
  }
  let lo = vec4<f32>((vec4<u32>(word) >> vec4<u32>(0u, 4u, 8u, 12u)) & vec4<u32>(15u)) - z;
  let hi = vec4<f32>((vec4<u32>(word) >> vec4<u32>(16u, 20u, 24u, 28u)) & vec4<u32>(15u)) - z;
  return scales[blk] * (dot(lo, xa) + dot(hi, xb));
}

// Workgroup 0 stores the input as used (the output of the fused op).
fn store_input(li: u32, scale: f32) {
  for (var i = li; i < p.cols / 4u; i += WG) {
    if (p.pre == 1u) {
      xo[i] = x[p.x_off + i] * scale * nw[i];
    } else {
      xo[i] = xin(i);
    }
  }
}

var<workgroup> red: array<f32, ROWS * WG>;
var<workgroup> inv_s: f32;
var<workgroup> am_v: array<f32, MAXR>;
var<workgroup> am_i: array<u32, MAXR>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
  let wg_id = wid.x + wid.y * nwg.x;
  let row0 = wg_id * ROWS;
  var scale = 1.0;
  if (p.pre == 1u) {
    var ss = 0.0;
    for (var i = li; i < p.cols / 4u; i += WG) {
      let v = x[p.x_off + i];
      ss += dot(v, v);
    }
    red[li] = ss;
    workgroupBarrier();
    if (li == 0u) {
      var t = 0.0;
      for (var i = 0u; i < WG; i++) {
        t += red[i];
      }
      inv_s = 1.0 / sqrt(t / f32(p.cols) + p.eps);
    }
    scale = workgroupUniformLoad(&inv_s);
  }
  if (p.pre != 0u && wg_id == 0u) {
    store_input(li, scale);
  }
  var units = p.cols / 8u;
  if (QT == 0u) {
    units = p.cols / 4u;
  }
  // Units outer, rows inner: a thread's loads for all its rows are
  // independent, so they can be in flight together.
  var acc: array<f32, MAXR>;
  for (var r = 0u; r < ROWS; r++) {
    acc[r] = 0.0;
  }
  for (var u = li; u < units; u += WG) {
    var xa: vec4<f32>;
    var xb = vec4<f32>(0.0);
    if (QT == 0u) {
      xa = xin(u);
    } else {
      xa = xin(u * 2u);
      xb = xin(u * 2u + 1u);
    }
    for (var r = 0u; r < ROWS; r++) {
      let row = row0 + r;
      if (row < p.rows) {
        acc[r] += unit_dot(row, u, xa, xb);
      }
    }
  }
  for (var r = 0u; r < ROWS; r++) {
    red[r * WG + li] = acc[r];
  }
  workgroupBarrier();
  // One thread per row sums its WG partial sums (a single barrier: loops
  // of barriers are costly to compile and run on some implementations).
  if (li < ROWS) {
    var t = 0.0;
    for (var i = 0u; i < WG; i++) {
      t += red[li * WG + i];
    }
    red[li * WG] = t;
  }
  if (li < ROWS) {
    let row = row0 + li;
    if (row < p.rows) {
      var t = red[li * WG] * scale;
      let dst = p.y_off + row;
      if (p.acc != 0u) {
        t += y[dst];
      }
      y[dst] = t;
      am_v[li] = t;
      am_i[li] = dst;
    } else {
      am_v[li] = -3.0e38;
      am_i[li] = 0xFFFFFFFFu;
    }
  }
  if (ARGMAX == 1u) {
    workgroupBarrier();
    // Only the workgroups that own rows have a slot: a grid split as x*y
    // (wisp_wgpu_grid) may have surplus workgroups past the last row, and
    // their slot would lie past the dispatch's, at the end past amax's.
    if (li == 0u && wg_id * ROWS < p.rows) {
      var bv = am_v[0];
      var bi = am_i[0];
      for (var r = 1u; r < ROWS; r++) {
        if (am_i[r] != 0xFFFFFFFFu && (am_v[r] > bv || bi == 0xFFFFFFFFu)) {
          bv = am_v[r];
          bi = am_i[r];
        }
      }
      let o = 2u * (p.part_off + wg_id);
      amax[o] = bv;
      amax[o + 1u] = bitcast<f32>(bi);
    }
  }
}
