// y[y_off + r] (+)= sum_c W[r][c] x'[c]: matrix-vector product for one
// token (decode), subgroup reduction (assumes subgroups are contiguous ranges of
// local_invocation_index, checked by tests/test_webgpu_abi.c).
//
// QT: 0 = f32 (w holds the floats' bits, cols % 4 == 0), 1 = Q4, 2 = Q4Z.
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
// Work split: lane groups of LG threads (LG >= the subgroup size and a
// multiple of it; the host sets it). Each group owns ROWS consecutive rows;
// its lanes stride over the row's units -- one 32-element block (one
// vec4<u32> of nibbles and one scale) for Q4/Q4Z, one vec4 for f32 -- so the
// loads of a group are 16-byte, contiguous across lanes, and each lane keeps
// the input vectors of its unit in registers for all ROWS rows. A workgroup
// of WG threads computes (WG / LG) * ROWS consecutive rows. Grid:
// ceil(rows / that) workgroups as x*y (linear id wid.x + wid.y*nwg.x). The
// bound w/scales/zp may be a row range of a larger matrix (rows = the
// range's rows; y_off places it in y).
//
enable subgroups;

override WG: u32 = 128;  // threads per workgroup, a multiple of LG
override ROWS: u32 = 4;  // rows per lane group, <= 16
override LG: u32 = 32;   // lanes per group: a multiple of the subgroup size
override QT: u32 = 1;    // 0 f32, 1 Q4, 2 Q4Z
const MAXR: u32 = 16u;   // most ROWS
override XN: u32 = 1u;   // > 1: x' staged in workgroup memory, XN = cols / 4 (matvec_common.wgsli)
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

@group(0) @binding(0) var<storage, read> w: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> scales: array<f32>;
@group(0) @binding(2) var<storage, read> zp: array<u32>;
@group(0) @binding(3) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
@group(0) @binding(5) var<storage, read> nw: array<vec4<f32>>;       // PRE 1: norm weights
@group(0) @binding(6) var<storage, read_write> xo: array<vec4<f32>>; // PRE 1/2: x as used
@group(0) @binding(7) var<storage, read_write> amax: array<f32>;    // ARGMAX: partials
@group(0) @binding(8) var<uniform> p: Params;

// #include "matvec_common.wgsli"

// partial[(group * ROWS + r) * (LG / 4) + subgroup within the group]: the
// subgroup sums of row r (a subgroup has at least 4 lanes); the last
// WG / 4 slots hold the norm's per-subgroup sums (PRE 1).
var<workgroup> partial: array<f32, (WG / LG) * ROWS * (LG / 4u) + WG / 4u>;
var<workgroup> inv_s: f32;
// Whole runs of 8 slots: xsw permutes the slots within each run of 8, so
// with cols / 4 not a multiple of 8 the last, partial run's vec4s land
// anywhere in that run, up to 7 slots past XN.
var<workgroup> xsh: array<vec4<f32>, (XN + 7u) / 8u * 8u>;
var<workgroup> am_v: array<f32, (WG / LG) * ROWS>;
var<workgroup> am_i: array<u32, (WG / LG) * ROWS>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32,
        @builtin(subgroup_invocation_id) sli: u32,
        @builtin(subgroup_size) sgs: u32) {
  let wg_id = wid.x + wid.y * nwg.x;
  let ng = WG / LG;
  let grp = li / LG;
  let lane = li % LG;
  let row0 = (wg_id * ng + grp) * ROWS;
  let pslots = LG / 4u;
  let norm_base = ng * ROWS * pslots;
  var units = p.cols / 32u;
  if (QT == 0u) {
    units = p.cols / 4u;
  }
  var acc: array<f32, MAXR>;
  for (var r = 0u; r < ROWS; r++) {
    acc[r] = 0.0;
  }
  var staged_ss = 0.0;
  if (XN > 1u) {
    staged_ss = stage_input(li);
  }
  var xs: array<vec4<f32>, 8>;
  for (var u = lane; u < units; u += LG) {
    var xsum = 0.0;
    if (QT == 0u) {
      xs[0] = xget(u);
    } else {
      for (var i = 0u; i < 8u; i++) {
        xs[i] = xget(u * 8u + i);
        xsum += dot(xs[i], vec4<f32>(1.0));
      }
    }
    for (var r = 0u; r < ROWS; r++) {
      let row = row0 + r;
      if (row < p.rows) {
        acc[r] += unit_dot(row, u, &xs, xsum);
      }
    }
  }
  // The fused norm's scale only multiplies the row sums, so its reduction
  // comes after the product: the weight loads need not wait for it.
  let scale = input_scale(li, sli, sgs, norm_base, wg_id, staged_ss);
  // Row sums: subgroupAdd within each subgroup, then the LG / sgs subgroup
  // sums of a group through workgroup memory.
  for (var r = 0u; r < ROWS; r++) {
    let s = subgroupAdd(acc[r]);
    if (sli == 0u) {
      partial[(grp * ROWS + r) * pslots + lane / sgs] = s;
    }
  }
  workgroupBarrier();
  if (lane < ROWS) {
    let slot = grp * ROWS + lane;
    let row = row0 + lane;
    if (row < p.rows) {
      var t = 0.0;
      for (var i = 0u; i < LG / sgs; i++) {
        t += partial[slot * pslots + i];
      }
      t *= scale;
      let dst = p.y_off + row;
      if (p.acc != 0u) {
        t += y[dst];
      }
      y[dst] = t;
      am_v[slot] = t;
      am_i[slot] = dst;
    } else {
      am_v[slot] = -3.0e38;
      am_i[slot] = 0xFFFFFFFFu;
    }
  }
  if (ARGMAX == 1u) {
    workgroupBarrier();
    // Only the workgroups that own rows have a slot: a grid split as x*y
    // (wisp_wgpu_grid) may have surplus workgroups past the last row, and
    // their slot would lie past the dispatch's, at the end past amax's.
    if (li == 0u && wg_id * ng * ROWS < p.rows) {
      var bv = am_v[0];
      var bi = am_i[0];
      for (var r = 1u; r < ng * ROWS; r++) {
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
