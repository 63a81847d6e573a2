// y[y_off + t * y_stride + r] (+)= sum_c W[r][c] x[t][c] for the n tokens
// of a batched decode step (backend.h matmul_rows) with a Q4_K matrix
// (layout: q4k_matvec.wgsl), subgroup reduction.
//
// q4k_matvec.wgsl takes a token a workgroup (grid z = token), so n tokens
// read the weight n times; here a workgroup computes its rows for NT tokens
// (grid z: the chunks of NT tokens) and applies each weight unit a lane
// loads to all of them.
//
// Exactness: a token's sums are bit for bit those q4k_matvec.wgsl computes
// for that token alone (PRE 0, the same LG; the host passes its geometry):
// lanes of a group of LG stride over the row's 32-element units in the same
// order, each adds q4k_dot (q4k_common.wgsli) of the same unit against the
// same inputs (their half sums sx formed in the same order) to an
// accumulator that starts at 0; subgroupAdd, then the subgroup sums in
// order, then y (acc). ROWS, NT and whether x is staged never change the
// arithmetic of one sum (tests/test_webgpu_rows.c checks every output bit
// for bit).
//
// XS 1: the inputs come from workgroup memory, staged with coalesced loads
// a tile of TU units (all tokens) at a time (slots permuted by q4k_xsw): TU
// is a multiple of LG and of 8 (whole super-blocks, contiguous columns), so
// each lane's units keep their order, a tile being a run of its loop's
// iterations (TU >= the row's units: the whole row once). XS 0: lanes read
// x from global memory.
enable subgroups;

override WG: u32 = 128; // threads, a multiple of LG
override ROWS: u32 = 2; // rows per lane group, <= MAXR
override LG: u32 = 32;  // lanes per group: q4k_matvec.wgsl's for this matrix
override NT: u32 = 8;   // tokens per workgroup, <= MAXT, ROWS * NT <= MAXA
override XS: u32 = 1u;  // 1: inputs staged in tiles of TU units, 0: read from global memory
override TU: u32 = 32u; // units a staged tile holds: a multiple of LG and of 8 (1 with XS 0)
const MAXR: u32 = 8u;
const MAXT: u32 = 64u;
const MAXA: u32 = 64u; // sums a lane keeps (ROWS * NT), registers on the GPU

struct Params {
  rows: u32,     // rows of the bound part
  cols: u32,     // a multiple of 256
  y_off: u32,    // float offset in y of the part's first row, token 0
  x_off: u32,    // vec4 offset of token 0's x
  acc: u32,      // 1: add into y
  n: u32,        // tokens
  y_stride: u32, // floats between tokens in y (the whole matrix's rows)
  pad0: u32,
}

@group(0) @binding(0) var<storage, read> w: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

// #include "q4k_scales.wgsli"

// #include "q4k_common.wgsli"
// #include "rows_store.wgsli"

// A token's staged tile: TU units of 8 vec4s.
override TV: u32 = TU * 8u;
// (one vec4 with XS 0: many tokens unstaged must not hold NT * 8 vec4s of workgroup memory)
var<workgroup> xsh: array<vec4<f32>, select(1u, NT * TV, XS == 1u)>;
// part[((group * ROWS + r) * NT + t) * (LG / 4) + subgroup within the group]
var<workgroup> part: array<f32, (WG / LG) * ROWS * NT * (LG / 4u)>;

// Vector i of token t (of this workgroup) of the input: xb is the token's
// first vec4 in x, tb the staged tile's first vec4 within the row.
fn xat(t: u32, xb: u32, tb: u32, i: u32) -> vec4<f32> {
  if (XS == 1u) {
    return xsh[t * TV + q4k_xsw(i - tb)];
  }
  return x[xb + i];
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32, @builtin(subgroup_invocation_id) sgi: u32,
        @builtin(subgroup_size) sgs: u32) {
  let ng = WG / LG;
  let grp = li / LG;
  let lane = li % LG;
  let row0 = ((wid.x + wid.y * nwg.x) * ng + grp) * ROWS;
  let t0 = wid.z * NT;
  let nt = min(NT, p.n - t0); // this workgroup's tokens (uniform)
  let c4 = p.cols / 4u;
  let nsb = p.cols / 256u;
  let units = p.cols / 32u;
  var acc: array<f32, MAXA>;
  for (var k = 0u; k < ROWS * NT; k++) {
    acc[k] = 0.0;
  }
  var wu: array<QUnit, MAXR>;
  // xs[0..3]: the unit's low-nibble elements, xs[4..7]: its high-nibble ones.
  var xs: array<vec4<f32>, 8>;
  let tu = select(units, TU, XS == 1u);
  for (var ub = 0u; ub < units; ub += tu) { // tiles (one without staging)
    let ue = min(ub + tu, units);
    let tb = ub * 8u; // a tile's units are whole super-blocks: contiguous vec4s
    if (XS == 1u) {
      for (var t = 0u; t < NT; t++) {
        if (t < nt) {
          let xb = p.x_off + (t0 + t) * c4 + tb;
          for (var i = li; i < (ue - ub) * 8u; i += WG) {
            xsh[t * TV + q4k_xsw(i)] = x[xb + i];
          }
        }
      }
      workgroupBarrier();
    }
    for (var u = ub + lane; u < ue; u += LG) {
      for (var r = 0u; r < ROWS; r++) {
        if (row0 + r < p.rows) {
          wu[r] = q4k_load((row0 + r) * nsb * 9u, u);
        }
      }
      let xo = q4k_unit_x(u) / 4u;
      for (var t = 0u; t < NT; t++) {
        if (t < nt) {
          let xb = p.x_off + (t0 + t) * c4;
          var sx = vec2<f32>(0.0);
          for (var k = 0u; k < 4u; k++) {
            xs[k] = xat(t, xb, tb, xo + k);
            xs[k + 4u] = xat(t, xb, tb, xo + 8u + k);
            sx += vec2<f32>(dot(xs[k], vec4<f32>(1.0)), dot(xs[k + 4u], vec4<f32>(1.0)));
          }
          for (var r = 0u; r < ROWS; r++) {
            if (row0 + r < p.rows) {
              acc[r * NT + t] += q4k_dot(wu[r], u, &xs, sx);
            }
          }
        }
      }
    }
    if (XS == 1u) {
      workgroupBarrier(); // the next tile overwrites xsh
    }
  }
  rows_store(&acc, grp, lane, sgi, sgs, row0, t0, nt);
}
