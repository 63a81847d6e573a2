// Short-conv block input for one token (decode), fused: the in_proj
// product y = W x' (W is [B; C; X] = 3*dim rows; x' as in matvec.wgsl with
// PRE, usually the RMSNorm of x) followed by the gated short convolution of
// shortconv.wgsl, out[ch] = C * conv(B * X) with the state [dim][L-1]
// updated in place. One workgroup takes CH = ROWS/3 channels and computes
// their B, C and X rows (rows ch, dim + ch, 2*dim + ch), so the convolution
// of those channels, state update included, stays inside the workgroup.
// y, xo, out and state end up as the three unfused ops would leave them.
// Needs 10 storage bindings. Subgroup reduction.
// Inside a workgroup the product is split as in matvec.wgsl: lane groups of
// LG threads (a multiple of the subgroup size), group g taking the
// workgroup's rows g, g + WG/LG, ...; a group's lanes stride over 32-element
// blocks (16-byte loads), keeping the block's inputs in registers.
// Weight layouts, QT and PRE (p.pre): see matvec.wgsl. Grid: ceil(dim / CH) as x*y.
enable subgroups;

override WG: u32 = 128;  // threads per workgroup, a multiple of LG
override ROWS: u32 = 12; // rows per workgroup, a multiple of 3, <= WG, <= 16 * WG / LG
override LG: u32 = 32;   // lanes per group: a multiple of the subgroup size
override QT: u32 = 1;    // 0 f32, 1 Q4, 2 Q4Z
const MAXR: u32 = 16u;   // most ROWS
override PF: u32 = 0u;   // 1: weight loads issued ahead (matvec.wgsl), 0: in place
override XN: u32 = 1u;   // > 1: x' staged in workgroup memory, XN = cols / 4 (matvec_common.wgsli)

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

@group(0) @binding(0) var<storage, read> w: array<vec4<u32>>;
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

// #include "unpack_weights.wgsli"

// #include "matvec_unit.wgsli"

// #include "matvec_common.wgsli"

// partial[r * (LG / 4) + subgroup within the group]: subgroup sums of
// workgroup row r; the last WG / 4 slots: the norm's subgroup sums.
var<workgroup> partial: array<f32, ROWS * (LG / 4u) + WG / 4u>;
var<workgroup> inv_s: f32;
// Whole runs of 8 slots: xsw permutes the slots within each run of 8, so
// with cols / 4 not a multiple of 8 the last, partial run's vec4s land
// anywhere in that run, up to 7 slots past XN.
var<workgroup> xsh: array<vec4<f32>, (XN + 7u) / 8u * 8u>;

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
  let pslots = LG / 4u;
  let norm_base = ROWS * pslots;
  let units = row_units();
  // This group's rows: workgroup rows grp + k * ng for k < RG.
  let RG = (ROWS + ng - 1u) / ng;
  var acc: array<f32, MAXR>;
  for (var k = 0u; k < RG; k++) {
    acc[k] = 0.0;
  }
  // Weight loads issued ahead, as in matvec.wgsl: the first unit's before
  // the input is staged, then each iteration the next unit's before the
  // arithmetic.
  var wu: array<WUnit, MAXR>;
  if (PF == 1u && lane < units) {
    for (var k = 0u; k < RG; k++) {
      let r = grp + k * ng;
      if (r < ROWS) {
        let row = row_of(wg_id, r);
        if (row != 0xFFFFFFFFu) {
          wu[k] = load_unit(row, lane);
        }
      }
    }
  }
  var staged_ss = 0.0;
  if (XN > 1u) {
    staged_ss = stage_input(li);
  }
  var xs: array<vec4<f32>, 8>;
  for (var u = lane; u < units; u += LG) {
    let xsum = unit_input(u, &xs);
    for (var k = 0u; k < RG; k++) {
      let r = grp + k * ng;
      if (r < ROWS) {
        let row = row_of(wg_id, r);
        if (row != 0xFFFFFFFFu) {
          if (PF == 1u) {
            let cur = wu[k];
            if (u + LG < units) {
              wu[k] = load_unit(row, u + LG);
            }
            acc[k] += unit_dot(cur, &xs, xsum);
          } else {
            acc[k] += unit_dot(load_unit(row, u), &xs, xsum);
          }
        }
      }
    }
  }
  // The fused norm's scale only multiplies the row sums, so its reduction
  // comes after the product: the weight loads need not wait for it.
  let scale = input_scale(li, sli, sgs, norm_base, wg_id, staged_ss);
  for (var k = 0u; k < RG; k++) {
    let s = subgroupAdd(acc[k]);
    let r = grp + k * ng;
    if (sli == 0u && r < ROWS) {
      partial[r * pslots + lane / sgs] = s;
    }
  }
  workgroupBarrier();
  if (li < ROWS) {
    let row = row_of(wg_id, li);
    if (row != 0xFFFFFFFFu) {
      var t = 0.0;
      for (var i = 0u; i < LG / sgs; i++) {
        t += partial[li * pslots + i];
      }
      t *= scale;
      y[p.y_off + row] = t;
      res[li] = t;
    }
  }
  workgroupBarrier();
  conv(wg_id, li);
}
