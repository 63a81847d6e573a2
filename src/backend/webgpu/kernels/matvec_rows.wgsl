// y[y_off + t * y_stride + r] (+)= sum_c W[r][c] x[t][c] for the n tokens
// of a batched decode step (backend.h matmul_rows, several sequences at
// once), f32/Q4/Q4Z/F16/Q8_0 weights (QT as in matvec.wgsl), subgroup
// reduction.
//
// Why it exists: matvec.wgsl takes one token, so n tokens as n dispatches
// read the weight n times. Here a workgroup computes its rows for NT tokens
// (grid z: the chunks of NT tokens), and each weight unit a lane loads is
// applied to all of them: the weight is read once per NT tokens.
//
// Exactness: a token's sums are bit for bit those matvec.wgsl computes
// for that token alone (PRE 0, the same LG; the host passes matvec's
// geometry), so a sequence decoded beside others gets the tokens it gets
// alone. Per (row, token) the arithmetic is the same sequence of
// operations: lanes of a group of LG stride over the row's units in the same
// order (u = lane, lane + LG, ...), each adds unit_dot (matvec_unit.wgsli)
// of the same unit against the same inputs (their sum xsum formed in the
// same order) to an accumulator that starts at 0; the lanes' sums reduce
// with subgroupAdd, then the LG / subgroup-size subgroup sums are added in
// order, then y is added (acc). ROWS (rows per lane group), NT and whether
// x is staged change which thread does what, never the arithmetic of one
// sum. tests/test_webgpu_rows.c compares every output bit for bit.
//
// Work split: WG / LG lane groups of ROWS consecutive rows each; a lane
// loads its unit of each of its ROWS rows once, then for each of the
// workgroup's tokens takes that token's inputs for the unit into registers
// and adds the ROWS dots. XS 1: the inputs come from workgroup memory,
// staged with coalesced loads a tile of TU units (all tokens) at a time:
// TU is a multiple of LG, so each lane's units keep their order, a tile
// being a run of its loop's iterations (TU >= the row's units: the whole
// row once). XS 0: lanes read x from global memory.
enable subgroups;

override WG: u32 = 128; // threads, a multiple of LG
override ROWS: u32 = 4; // rows per lane group, <= MAXR
override LG: u32 = 32;  // lanes per group: matvec.wgsl's for this matrix
override QT: u32 = 1;   // 0 f32, 1 Q4, 2 Q4Z, 4 F16, 5 Q8_0, 6 int8 + scale/offset per 16, 7 packed 6-bit
override NT: u32 = 8;   // tokens per workgroup, <= MAXT, ROWS * NT <= MAXA
override XS: u32 = 1u;  // 1: inputs staged in tiles of TU units, 0: read from global memory
override TU: u32 = 32u; // units a staged tile holds: a multiple of LG and of 8 (1 with XS 0)
const MAXR: u32 = 8u;
const MAXT: u32 = 64u;
const MAXA: u32 = 64u; // sums a lane keeps (ROWS * NT), registers on the GPU

struct Params {
  rows: u32,     // rows of the bound part
  cols: u32,
  y_off: u32,    // float offset in y of the part's first row, token 0
  x_off: u32,    // vec4 offset of token 0's x
  acc: u32,      // 1: add into y
  n: u32,        // tokens
  y_stride: u32, // floats between tokens in y (the whole matrix's rows)
  pad0: u32,
}

@group(0) @binding(0) var<storage, read> w: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> scales: array<f32>;
@group(0) @binding(2) var<storage, read> zp: array<u32>;
@group(0) @binding(3) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
@group(0) @binding(5) var<uniform> p: Params;

// #include "unpack_weights.wgsli"

// #include "matvec_unit.wgsli"
// #include "rows_store.wgsli"

// Vec4s a unit's inputs take: 1 (f32), 2 (F16), 4 (Q8_0 half block), 8 (Q4/Q4Z block).
override UV: u32 = select(select(select(8u, 4u, QT == 5u || QT == 6u || QT == 7u), 2u, QT == 4u), 1u, QT == 0u);
// A token's staged tile: TU * UV vec4s, whole runs of 8 (xslot permutes
// slots within a run, as matvec_common.wgsli's xsw).
override TV: u32 = TU * UV;
// (one vec4 with XS 0: many tokens unstaged must not hold NT * 8 vec4s of workgroup memory)
var<workgroup> xsh: array<vec4<f32>, select(1u, NT * TV, XS == 1u)>;
// part[((group * ROWS + r) * NT + t) * (LG / 4) + subgroup within the group]
var<workgroup> part: array<f32, (WG / LG) * ROWS * NT * (LG / 4u)>;

// Vec4 i's slot within its token's run: rotated by the block number so that
// lanes reading vec4 k of their own blocks hit different bank groups.
fn xslot(i: u32) -> u32 {
  return i ^ ((i >> 3u) & 7u);
}

// Vector i of token t (of this workgroup) of the input: xb is the token's
// first vec4 in x, tb the staged tile's first vec4 within the row.
fn xat(t: u32, xb: u32, tb: u32, i: u32) -> vec4<f32> {
  if (XS == 1u) {
    return xsh[t * TV + xslot(i - tb)];
  }
  return x[xb + i];
}

// Token t's inputs for unit u (xs), returning their sum for Q4/Q4Z: the
// same values and the same order of additions as matvec_common.wgsli's
// unit_input.
fn unit_input_t(t: u32, xb: u32, tb: u32, u: u32, xs: ptr<function, array<vec4<f32>, 8>>) -> f32 {
  if (QT == 0u) {
    (*xs)[0] = xat(t, xb, tb, u);
    return 0.0;
  }
  if (QT == 6u || QT == 7u) {
    var xsum = 0.0;
    for (var i = 0u; i < 4u; i++) {
      (*xs)[i] = xat(t, xb, tb, u * 4u + i);
      xsum += dot((*xs)[i], vec4<f32>(1.0));
    }
    return xsum;
  }
  if (QT == 4u || QT == 5u) {
    let nv = select(2u, 4u, QT == 5u);
    for (var i = 0u; i < nv; i++) {
      (*xs)[i] = xat(t, xb, tb, u * nv + i);
    }
    return 0.0;
  }
  var xsum = 0.0;
  for (var i = 0u; i < 8u; i++) {
    (*xs)[i] = xat(t, xb, tb, u * 8u + i);
    xsum += dot((*xs)[i], vec4<f32>(1.0));
  }
  return xsum;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32,
        @builtin(subgroup_invocation_id) sli: u32,
        @builtin(subgroup_size) sgs: u32) {
  let ng = WG / LG;
  let grp = li / LG;
  let lane = li % LG;
  let row0 = ((wid.x + wid.y * nwg.x) * ng + grp) * ROWS;
  let t0 = wid.z * NT;
  let nt = min(NT, p.n - t0); // this workgroup's tokens (uniform)
  let c4 = p.cols / 4u;
  let units = row_units();
  var acc: array<f32, MAXA>;
  for (var k = 0u; k < ROWS * NT; k++) {
    acc[k] = 0.0;
  }
  var wu: array<WUnit, MAXR>;
  var xs: array<vec4<f32>, 8>;
  let tu = select(units, TU, XS == 1u);
  for (var ub = 0u; ub < units; ub += tu) { // tiles (one without staging)
    let ue = min(ub + tu, units);
    let tb = ub * UV;
    if (XS == 1u) {
      for (var t = 0u; t < NT; t++) {
        if (t < nt) {
          let xb = p.x_off + (t0 + t) * c4 + tb;
          for (var i = li; i < (ue - ub) * UV; i += WG) {
            xsh[t * TV + xslot(i)] = x[xb + i];
          }
        }
      }
      workgroupBarrier();
    }
    for (var u = ub + lane; u < ue; u += LG) {
      for (var r = 0u; r < ROWS; r++) {
        if (row0 + r < p.rows) {
          wu[r] = load_unit(row0 + r, u);
        }
      }
      for (var t = 0u; t < NT; t++) {
        if (t < nt) {
          let xsum = unit_input_t(t, p.x_off + (t0 + t) * c4, tb, u, &xs);
          for (var r = 0u; r < ROWS; r++) {
            if (row0 + r < p.rows) {
              acc[r * NT + t] += unit_dot(wu[r], &xs, xsum);
            }
          }
        }
      }
    }
    if (XS == 1u) {
      workgroupBarrier(); // the next tile overwrites xsh
    }
  }
  rows_store(&acc, grp, lane, sli, sgs, row0, t0, nt);
}
