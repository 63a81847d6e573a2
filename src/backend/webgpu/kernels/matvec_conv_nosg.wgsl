// Short-conv block input for one token (decode), fused: the in_proj
// product y = W x' (W is [B; C; X] = 3*dim rows; x' as in matvec.wgsl with
// PRE, usually the RMSNorm of x) followed by the gated short convolution of
// shortconv.wgsl, out[ch] = C * conv(B * X) with the state [dim][L-1]
// updated in place. One workgroup takes CH = ROWS/3 channels and computes
// their B, C and X rows (rows ch, dim + ch, 2*dim + ch), so the convolution
// of those channels, state update included, stays inside the workgroup.
// y, xo, out and state end up as the three unfused ops would leave them.
// Needs 10 storage bindings. Partial sums in workgroup memory, summed by one
// thread per row.
// Weight layouts, QT and PRE (p.pre): see matvec.wgsl. Grid: ceil(dim / CH) as x*y.

override WG: u32 = 128;  // threads per workgroup
override ROWS: u32 = 12; // rows per workgroup, a multiple of 3, <= WG and <= 16
override QT: u32 = 1;    // 0 f32, 1 Q4, 2 Q4Z
const MAXR: u32 = 16u;   // most ROWS

struct Params {
  rows: u32,
  cols: u32,
  y_off: u32,  // float offset in y of the first row
  x_off: u32,  // vec4 offset of x in its buffer
  acc: u32,    // 1: add into y
  eps: f32,    // PRE 1
  dim: u32,    // channels (rows = 3 * dim)
  L: u32,      // conv taps
  pre: u32,    // what x is: 0 as bound, 1 rmsnorm(x) * nw, 2 swiglu(x)
  pad0: u32,
  pad1: u32,
  pad2: u32,
}

@group(0) @binding(0) var<storage, read> w: array<u32>;
@group(0) @binding(1) var<storage, read> scales: array<f32>;
@group(0) @binding(2) var<storage, read> zp: array<u32>;
@group(0) @binding(3) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
@group(0) @binding(5) var<storage, read> nw: array<vec4<f32>>;       // PRE 1: norm weights
@group(0) @binding(6) var<storage, read_write> xo: array<vec4<f32>>; // PRE 1/2: x as used
@group(0) @binding(7) var<storage, read> taps: array<f32>;
@group(0) @binding(8) var<storage, read_write> state: array<f32>;
@group(0) @binding(9) var<storage, read_write> cout: array<f32>;
@group(0) @binding(10) var<uniform> p: Params;

var<workgroup> res: array<f32, ROWS>;

// Matrix row of the workgroup's r-th row, or 0xFFFFFFFF past the channels.
fn row_of(wg_id: u32, r: u32) -> u32 {
  let CH = ROWS / 3u;
  let ch = wg_id * CH + r % CH;
  if (ch >= p.dim) {
    return 0xFFFFFFFFu;
  }
  return (r / CH) * p.dim + ch;
}

fn conv(wg_id: u32, li: u32) {
  let CH = ROWS / 3u;
  let ch = wg_id * CH + li;
  if (li >= CH || ch >= p.dim) {
    return;
  }
  let S = p.L - 1u;
  let tw = ch * p.L;
  let sb = ch * S;
  let bx = res[li] * res[2u * CH + li];
  var acc = taps[tw + S] * bx;
  for (var k = 0u; k < S; k++) {
    acc += taps[tw + k] * state[sb + k];
  }
  for (var k = 0u; k + 1u < S; k++) {
    state[sb + k] = state[sb + k + 1u];
  }
  if (S > 0u) {
    state[sb + S - 1u] = bx;
  }
  cout[ch] = res[CH + li] * acc;
}

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

// Dot product of unit u of a row with the input vectors xa (and xb, Q4).
fn unit_dot(row: u32, u: u32, xa: vec4<f32>, xb: vec4<f32>) -> f32 {
  if (QT == 0u) {
    let i = (row * (p.cols / 4u) + u) * 4u;
    let wv = bitcast<vec4<f32>>(vec4<u32>(w[i], w[i + 1u], w[i + 2u], w[i + 3u]));
    return dot(wv, xa);
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

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
  let wg_id = wid.x + wid.y * nwg.x;
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
      let row = row_of(wg_id, r);
      if (row != 0xFFFFFFFFu) {
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
    let row = row_of(wg_id, li);
    if (row != 0xFFFFFFFFu) {
      let t = red[li * WG] * scale;
      y[p.y_off + row] = t;
      res[li] = t;
    }
  }
  workgroupBarrier();
  conv(wg_id, li);
}
