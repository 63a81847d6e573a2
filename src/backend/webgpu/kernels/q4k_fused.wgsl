// One-token Q4_K product with the gated-layer decode fusions of the seed
// profile's session switches (docs/webgpu.md, "Fusion"): y (+)= W x' for rows [w_row0, w_row0 + rows) of the bound
// weights, where
//   pre 0: x' = x;
//   pre 1: x' = rmsnorm(x) * nw (every workgroup reduces sum(x^2) itself;
//          workgroup 0 also writes x' to xo, the norm's own output);
//   pair F (SwiGLU, fusedFfnQ4K): output index r computes rows r and r + F
//          (gate and up) and writes z[r] = silu(gate) * up (and both to y);
//   ARGMAX 1 (greedy head, lmHeadArgmaxQ4K): each workgroup writes its
//          (largest value, lowest row index) pair to amax[part_off + id].
// Geometry: COLS_PER_WG outputs per workgroup of WORKGROUP_SIZE =
// COLS_PER_WG * THREADS_PER_COL threads (THREADS_PER_COL a power of two,
// WORKGROUP_SIZE need not be); the THREADS_PER_COL lanes of an
// output reduce in workgroup memory (no subgroup operations). With
// USE_FULL_BLOCK_FAST_PATH a lane takes whole super-blocks when a row has at
// least THREADS_PER_COL of them. Grid: ceil(rows / COLS_PER_WG) as x*y.
override WORKGROUP_SIZE: u32 = 256;
override COLS_PER_WG: u32 = 16;
override THREADS_PER_COL: u32 = 16; // a power of two
override USE_FULL_BLOCK_FAST_PATH: bool = true;
override ARGMAX: u32 = 0u;
override PF: u32 = 0u; // 1: weight loads issued ahead (rows_part), 0: in place
override XN: u32 = 1u; // > 1: x' staged in workgroup memory, XN = cols / 4 (as q4k_matvec.wgsl)

// Q4_K layout (src/format/tensor.h): a row is cols/256 super-blocks of 144
// bytes = 9 vec4<u32>: word 0 = f16 d | f16 dmin << 16, words 1-3 the packed
// 6-bit scales/mins, words 4-35 the quants (element 64c + l, l < 32: low
// nibble of byte 32c + l; 64c + 32 + l: its high nibble); value =
// d*sc[j]*nibble - dmin*m[j], j = element / 32.

struct Params {
  rows: u32,     // outputs of this dispatch (pair mode: gate rows)
  cols: u32,     // a multiple of 256
  y_off: u32,    // float offset in y of output 0 (also its row index, for ARGMAX)
  x_off: u32,    // vec4 offset of x
  acc: u32,      // 1: add into y
  w_row0: u32,   // row of the bound weights that output 0 reads
  pre: u32,
  eps: f32,
  pair: u32,     // 0, or F: rows r and r + F, SwiGLU into z
  part_off: u32, // ARGMAX: index of this dispatch's first workgroup in amax
  pad0: u32,
  pad1: u32,
}

@group(0) @binding(0) var<storage, read> w: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<storage, read> nw: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> xo: array<vec4<f32>>;
@group(0) @binding(5) var<storage, read_write> z: array<f32>;
@group(0) @binding(6) var<storage, read_write> amax: array<f32>;
@group(0) @binding(7) var<uniform> p: Params;

var<workgroup> red: array<f32, WORKGROUP_SIZE>;
var<workgroup> red2: array<f32, WORKGROUP_SIZE>;
var<workgroup> am_v: array<f32, 256>;
var<workgroup> am_i: array<u32, 256>;
var<private> inv: f32 = 1.0;

// x' without the norm's scale inv (applied to the row sums: the weight
// loads need not wait for the norm's reduction).
fn xv(i: u32) -> vec4<f32> {
  let v = x[p.x_off + i];
  if (p.pre == 1u) {
    return v * nw[i];
  }
  return v;
}

// #include "q4k_scales.wgsli"

// #include "q4k_common.wgsli"

var<workgroup> xsh: array<vec4<f32>, XN>;

// x' vector i as the product reads it: staged, or from global memory.
fn xget(i: u32) -> vec4<f32> {
  if (XN > 1u) {
    return xsh[q4k_xsw(i)];
  }
  return xv(i);
}

// Units per lane step: with the full-block path a lane takes whole
// super-blocks (8 units) at a time, else one unit.
fn units_per_step() -> u32 {
  if (USE_FULL_BLOCK_FAST_PATH && p.cols / 256u >= THREADS_PER_COL) {
    return 8u;
  }
  return 1u;
}

// The weights of unit u of bound rows r0 and (two) r1.
struct Pair {
  a: QUnit,
  b: QUnit,
}

fn load_pair(r0: u32, r1: u32, two: bool, u: u32) -> Pair {
  let rw = (p.cols / 256u) * 9u;
  var pr: Pair;
  pr.a = q4k_load(r0 * rw, u);
  if (two) {
    pr.b = q4k_load(r1 * rw, u);
  }
  return pr;
}

// Unit u's weights pr times x': the input vectors are loaded once for both
// rows (the unit layout: q4k_common.wgsli).
fn pair_dot(pr: Pair, two: bool, u: u32) -> vec2<f32> {
  let xo4 = q4k_unit_x(u) / 4u;
  var xs: array<vec4<f32>, 8>;
  var sx = vec2<f32>(0.0);
  for (var k = 0u; k < 4u; k++) {
    xs[k] = xget(xo4 + k);
    xs[k + 4u] = xget(xo4 + 8u + k);
    sx += vec2<f32>(dot(xs[k], vec4<f32>(1.0)), dot(xs[k + 4u], vec4<f32>(1.0)));
  }
  var r = vec2<f32>(q4k_dot(pr.a, u, &xs, sx), 0.0);
  if (two) {
    r.y = q4k_dot(pr.b, u, &xs, sx);
  }
  return r;
}

// One lane's share of bound rows r0 and (two) r1: the lane's units in
// order (steps of units_per_step() units, lanes strided by step), first
// holding the weights of its first unit (loaded by the caller before the
// input was staged). Each unit's successor is loaded before the unit's
// arithmetic, so a load is always in flight (PF 1).
fn rows_part(r0: u32, r1: u32, two: bool, lane: u32, first: Pair) -> vec2<f32> {
  let upc = units_per_step();
  let nch = 8u * (p.cols / 256u) / upc;
  var acc = vec2<f32>(0.0);
  var cur = first;
  var ch = lane;
  var k = 0u;
  while (ch < nch) {
    let u = ch * upc + k;
    var ch2 = ch;
    var k2 = k + 1u;
    if (k2 == upc) {
      k2 = 0u;
      ch2 = ch + THREADS_PER_COL;
    }
    if (PF == 1u) {
      var nxt = cur;
      if (ch2 < nch) {
        nxt = load_pair(r0, r1, two, ch2 * upc + k2);
      }
      acc += pair_dot(cur, two, u);
      cur = nxt;
    } else {
      acc += pair_dot(load_pair(r0, r1, two, u), two, u);
    }
    ch = ch2;
    k = k2;
  }
  return acc;
}

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
  let wg_id = wid.x + wid.y * nwg.x;
  let n4 = p.cols / 4u;
  let lane = li % THREADS_PER_COL;
  let col = li / THREADS_PER_COL;
  let r = wg_id * COLS_PER_WG + col;
  let valid = r < p.rows && col < COLS_PER_WG;
  // The lane's first weights, loaded before the input is staged (they do
  // not depend on it): the two memory round trips overlap.
  var first: Pair;
  if (PF == 1u && valid && lane * units_per_step() < 8u * (p.cols / 256u)) {
    first = load_pair(p.w_row0 + r, p.w_row0 + r + p.pair, p.pair != 0u, lane * units_per_step());
  }
  var ss = 0.0; // sum(x^2) share for pre 1
  if (XN > 1u) {
    for (var i = li; i < n4; i += WORKGROUP_SIZE) {
      let v = x[p.x_off + i];
      ss += dot(v, v);
      if (p.pre == 1u) {
        xsh[q4k_xsw(i)] = v * nw[i];
      } else {
        xsh[q4k_xsw(i)] = v;
      }
    }
    workgroupBarrier();
  }
  var a0 = 0.0;
  var a1 = 0.0;
  if (valid) {
    let a = rows_part(p.w_row0 + r, p.w_row0 + r + p.pair, p.pair != 0u, lane, first);
    a0 = a.x;
    a1 = a.y;
  }
  if (p.pre == 1u) {
    if (XN <= 1u) {
      for (var i = li; i < n4; i += WORKGROUP_SIZE) {
        let v = x[p.x_off + i];
        ss += dot(v, v);
      }
    }
    // Two-level sum (16 partial sums of 16, then their total) rather than
    // a tree: three barriers instead of eight, which a kernel of a few
    // microseconds notices.
    red[li] = ss;
    workgroupBarrier();
    if (li < 16u) {
      var t = 0.0;
      for (var i = li; i < WORKGROUP_SIZE; i += 16u) {
        t += red[i];
      }
      red2[li] = t;
    }
    workgroupBarrier();
    if (li == 0u) {
      var t = 0.0;
      for (var i = 0u; i < min(16u, WORKGROUP_SIZE); i++) {
        t += red2[i];
      }
      red[0] = t;
    }
    inv = 1.0 / sqrt(workgroupUniformLoad(&red[0]) / f32(p.cols) + p.eps);
    if (wg_id == 0u) {
      for (var i = li; i < n4; i += WORKGROUP_SIZE) {
        xo[i] = xv(i) * inv;
      }
    }
    workgroupBarrier(); // every thread has read red[0]
  }
  a0 *= inv;
  a1 *= inv;
  red[li] = a0;
  red2[li] = a1;
  workgroupBarrier();
  // Lane 0 of each column adds its THREADS_PER_COL partial sums: one
  // barrier rather than a tree's log2(THREADS_PER_COL).
  if (lane == 0u && col < COLS_PER_WG) {
    var v = 0.0;
    var u = 0.0;
    for (var k = 0u; k < THREADS_PER_COL; k++) {
      v += red[li + k];
      u += red2[li + k];
    }
    if (valid) {
      let o = p.y_off + r;
      if (p.pair != 0u) {
        y[o] = v;
        y[o + p.pair] = u;
        z[r] = v / (1.0 + exp(-v)) * u;
      } else {
        if (p.acc == 1u) {
          v += y[o];
        }
        y[o] = v;
      }
      am_v[col] = v;
      am_i[col] = o;
    } else {
      am_v[col] = -3.0e38;
      am_i[col] = 0xFFFFFFFFu;
    }
  }
  if (ARGMAX == 1u) {
    workgroupBarrier();
    // Only the workgroups that own rows have a slot: a grid split as x*y
    // (wisp_wgpu_grid) may have surplus workgroups past the last row, and
    // their slot would lie past the dispatch's, at the end past amax's.
    if (li == 0u && wg_id * COLS_PER_WG < p.rows) {
      var bv = am_v[0];
      var bi = am_i[0];
      for (var c = 1u; c < COLS_PER_WG; c++) {
        if (am_i[c] != 0xFFFFFFFFu && (am_v[c] > bv || bi == 0xFFFFFFFFu)) {
          bv = am_v[c];
          bi = am_i[c];
        }
      }
      let o = 2u * (p.part_off + wg_id);
      amax[o] = bv;
      amax[o + 1u] = bitcast<f32>(bi);
    }
  }
}
