// y[y_off + r] (+)= sum_c W[r][c] x'[c]: matrix-vector product for one
// token (decode), subgroup reduction (assumes subgroups are contiguous ranges of
// local_invocation_index, checked by tests/test_webgpu_abi.c).
//
// QT: 0 = f32 (w holds the floats' bits, cols % 4 == 0), 1 = Q4, 2 = Q4Z,
// 4 = F16 (halves two to a word, cols % 8 == 0), 5 = Q8_0 (int8 four to a
// word, an f32 scale per 32-block in scales; unpack_weights.wgsli).
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
// (2*cols values) and x' = silu(gate) * up; 3 = the merge of decode
// attention's flash-decoding splits (attn_combine.wgsl): x' is the heads'
// outputs, cols = heads * p.hd, read from the splits' partials in aux
// (per head h and split z at (h * p.splits + z) * (hd + 2): max m, sum l,
// unnormalised output[hd]); x' = sum_z acc_z e^(m_z - M) / sum_z l_z e^(m_z - M)
// per head, staged (needs XN > 1 and CMB >= heads * splits), so the merge
// costs no dispatch of its own: every workgroup redoes it from L2 (a few
// KB) while its weight loads are in flight. Workgroup 0 also writes x' to xo,
// so the fused op's output buffer holds what the unfused op would have
// written. For PRE 0, nw and xo are bound to placeholders.
//
// PAIR 1 (an override constant: its own pipeline): the product is a
// stacked [gate; up] matrix of 2F rows (p.pair = F, rows = 2F, one part)
// followed by SwiGLU; lane groups take rows in pairs (logical row L is
// physical row L / 2 + (L % 2) * F, ROWS even), both outputs go to y as
// usual and the group also writes h[j] = silu(gate[j]) * up[j] to the
// binding amax (unused without ARGMAX), so that the down product reads h
// instead of applying SwiGLU in every one of its workgroups.
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
override QT: u32 = 1;    // 0 f32, 1 Q4, 2 Q4Z, 4 F16, 5 Q8_0, 6 int8 + scale/offset per 16, 7 packed 6-bit
const MAXR: u32 = 16u;   // most ROWS
override XN: u32 = 1u;   // > 1: x' staged in workgroup memory, XN = cols / 4 (matvec_common.wgsli)
override ARGMAX: u32 = 0u; // 1: per-workgroup argmax partials to amax
override PF: u32 = 0u;     // 1: weight loads issued ahead (see main), 0: in place
override CMB: u32 = 1u;    // PRE 3: room for heads * splits merge weights (1: PRE 3 unused)
override RCH: u32 = 1u;    // row chunks per workgroup (see main)
override PAIR: u32 = 0u;   // 1: gate/up rows in pairs with SwiGLU into amax (see above)

struct Params {
  rows: u32,
  cols: u32,
  y_off: u32,  // float offset in y of the first row
  x_off: u32,  // vec4 offset of x in its buffer
  acc: u32,    // 1: add into y
  eps: f32,    // PRE 1
  pre: u32,    // PRE: what x is: 0 as bound, 1 rmsnorm(x) * nw, 2 swiglu(x)
  part_off: u32, // ARGMAX: index of this dispatch's first workgroup in amax
  hd: u32,       // PRE 3: head dimension (a multiple of 4)
  splits: u32,   // PRE 3: splits per head
  pair: u32,     // PAIR: F, the up rows' offset
  pad1: u32,
}

@group(0) @binding(0) var<storage, read> w: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> scales: array<f32>;
@group(0) @binding(2) var<storage, read> zp: array<u32>;
@group(0) @binding(3) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
@group(0) @binding(5) var<storage, read> nw: array<vec4<f32>>;       // PRE 1: norm weights
@group(0) @binding(6) var<storage, read_write> xo: array<vec4<f32>>; // PRE 1/2: x as used
@group(0) @binding(7) var<storage, read_write> amax: array<f32>;    // ARGMAX: partials out; PRE 3: the splits in; PAIR: h out
@group(0) @binding(8) var<uniform> p: Params;

// #include "unpack_weights.wgsli"

// #include "matvec_unit.wgsli"

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
var<workgroup> cmb: array<f32, CMB>;
var<workgroup> pair_t: array<f32, (WG / LG) * ROWS>;

// The physical row of logical row L (PAIR: gate and up rows alternate).
fn row_at(L: u32) -> u32 {
  if (PAIR == 1u) {
    return (L >> 1u) + (L & 1u) * p.pair;
  }
  return L;
}

// PRE 3: stages the merged attention output (see the top) in xsh and
// returns nothing to reduce. Two passes: the merge weights
// e^(m_z - M) / L of every (head, split) into cmb, then the weighted sums of
// the splits' vec4s. Call from uniform control flow; ends with a barrier.
fn merge_part(i: u32) -> f32 {
  return amax[i];
}

fn merge_store(i: u32, w: f32) {
  cmb[i] = w;
}

// #include "split_merge.wgsli"

fn stage_attention_merge(li: u32) {
  let S = p.splits;
  let row = p.hd + 2u;
  merge_weights(li, p.cols / p.hd, S, row);
  for (var i = li; i < p.cols / 4u; i += WG) {
    let h = (4u * i) / p.hd;
    let d = (4u * i) % p.hd;
    var a = vec4<f32>(0.0);
    for (var z = 0u; z < S; z++) {
      let e = (h * S + z) * row + 2u + d;
      a += vec4<f32>(amax[e], amax[e + 1u], amax[e + 2u], amax[e + 3u]) * cmb[h * S + z];
    }
    xsh[xsw(i)] = a;
  }
  workgroupBarrier();
}

// Whether candidate (v, i) beats (bv, bi) for the argmax: a larger value,
// or an equal one at a lower row (the CPU's first maximum); i = NONE never.
fn beats(v: f32, i: u32, bv: f32, bi: u32) -> bool {
  return i != 0xFFFFFFFFu && (bi == 0xFFFFFFFFu || v > bv || (v == bv && i < bi));
}

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
  let norm_base = ng * ROWS * pslots;
  let units = row_units();
  // Software pipelining of the weight loads (they never depend on the
  // input): the lane's first unit is loaded before the input is staged, so
  // the two memory round trips overlap instead of queueing, and each
  // iteration issues the next unit's loads before it computes.
  var wu: array<WUnit, MAXR>;
  let first_row0 = (wg_id * RCH * ng + grp) * ROWS;
  if (PF == 1u && lane < units) {
    for (var r = 0u; r < ROWS; r++) {
      if (first_row0 + r < p.rows) {
        wu[r] = load_unit(row_at(first_row0 + r), lane);
      }
    }
  }
  var staged_ss = 0.0;
  if (p.pre == 3u) {
    stage_attention_merge(li);
  } else if (XN > 1u) {
    staged_ss = stage_input(li);
  }
  // RCH chunks of (WG / LG) * ROWS rows, one after another over the same
  // staged input: a tall matrix (the head) with fewer workgroups, each
  // staging x' (and reducing its norm) once for RCH times the rows.
  var scale = 1.0;
  for (var ck = 0u; ck < RCH; ck++) {
    let row0 = ((wg_id * RCH + ck) * ng + grp) * ROWS;
    var acc: array<f32, MAXR>;
    for (var r = 0u; r < ROWS; r++) {
      acc[r] = 0.0;
    }
    if (PF == 1u && ck > 0u && lane < units) {
      for (var r = 0u; r < ROWS; r++) {
        if (row0 + r < p.rows) {
          wu[r] = load_unit(row_at(row0 + r), lane);
        }
      }
    }
    var xs: array<vec4<f32>, 8>;
    for (var u = lane; u < units; u += LG) {
      let xsum = unit_input(u, &xs);
      for (var r = 0u; r < ROWS; r++) {
        let row = row_at(row0 + r);
        if (row0 + r < p.rows) {
          if (PF == 1u) {
            let cur = wu[r];
            if (u + LG < units) {
              wu[r] = load_unit(row, u + LG);
            }
            acc[r] += unit_dot(cur, &xs, xsum);
          } else {
            acc[r] += unit_dot(load_unit(row, u), &xs, xsum);
          }
        }
      }
    }
    if (ck == 0u) {
      // The fused norm's scale only multiplies the row sums, so its
      // reduction comes after the product: the weight loads need not wait.
      if (p.pre == 3u) {
        if (wg_id == 0u) { // the merged output, as attn_combine would have left it
          for (var i = li; i < p.cols / 4u; i += WG) {
            xo[i] = xsh[xsw(i)];
          }
        }
      } else {
        scale = input_scale(li, sli, sgs, norm_base, wg_id, staged_ss);
      }
    }
    // Row sums: subgroupAdd within each subgroup, then the LG / sgs
    // subgroup sums of a group through workgroup memory.
    for (var r = 0u; r < ROWS; r++) {
      let s = subgroupAdd(acc[r]);
      if (sli == 0u) {
        partial[(grp * ROWS + r) * pslots + lane / sgs] = s;
      }
    }
    workgroupBarrier();
    if (lane < ROWS) {
      let slot = grp * ROWS + lane;
      let row = row_at(row0 + lane);
      if (row0 + lane < p.rows) {
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
        pair_t[slot] = t;
        if (ck == 0u || beats(t, dst, am_v[slot], am_i[slot])) {
          am_v[slot] = t;
          am_i[slot] = dst;
        }
      } else if (ck == 0u) {
        am_v[slot] = -3.0e38;
        am_i[slot] = 0xFFFFFFFFu;
      }
    }
    workgroupBarrier(); // partial is rewritten by the next chunk
    if (PAIR == 1u && lane < ROWS && lane % 2u == 0u && row0 + lane + 1u < p.rows) {
      let gt = pair_t[grp * ROWS + lane];
      amax[(row0 + lane) >> 1u] = gt / (1.0 + exp(-gt)) * pair_t[grp * ROWS + lane + 1u];
    }
  }
  if (ARGMAX == 1u) {
    // Only the workgroups that own rows have a slot: a grid split as x*y
    // (wisp_wgpu_grid) may have surplus workgroups past the last row, and
    // their slot would lie past the dispatch's, at the end past amax's.
    // (The chunk loop ended with a barrier: am_v / am_i are complete.)
    if (li == 0u && wg_id * RCH * ng * ROWS < p.rows) {
      var bv = am_v[0];
      var bi = am_i[0];
      for (var r = 1u; r < ng * ROWS; r++) {
        if (beats(am_v[r], am_i[r], bv, bi)) {
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
