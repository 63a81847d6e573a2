// y[t][r] (+)= sum_c W[r][c] x[t][c] for a Q4_K matrix, subgroup variant.
// Grid: ceil(rows / ((WG / LG) * ROWS)) workgroups as x*y, z = token.
//
// Q4_K layout (src/format/tensor.h): a row is cols/256 super-blocks of 144
// bytes = 9 vec4<u32>: vec4 0 = word 0 (f16 d | f16 dmin << 16, read with
// unpack2x16float, no f16 extension) and words 1-3 (the 12 bytes of packed
// 6-bit scales/mins); vec4s 1-8 the quants: element 64c + l (l < 32) is the
// low nibble of byte 32c + l, element 64c + 32 + l its high nibble; value =
// d*sc[j]*nibble - dmin*m[j], j = element / 32.
//
// Work split as in matvec.wgsl: lane groups of LG threads (a multiple of
// the subgroup size) own ROWS consecutive rows; a group's lanes stride over
// 32-element units, one quant vec4 each: unit u is super-block b = u / 8,
// byte group c = (u % 8) / 2, half h = u % 2, i.e. bytes 32c + 16h .. +15,
// whose low nibbles are elements 64c + 16h + (0..15) (sub-block 2c) and
// high nibbles elements 64c + 32 + 16h + (0..15) (sub-block 2c + 1). Per
// row a lane loads the super-block's header vec4 and one quant vec4
// (16-byte loads); the unit's 32 inputs and their two half sums stay in
// registers for all ROWS rows. (A 1024-column row is 32 units: every lane
// of a 32-lane group has work.) A workgroup takes (WG / LG) * ROWS rows.
// XN > 1 (= cols / 4): the workgroup first copies its token's x into
// workgroup memory with coalesced loads, and lanes read their units' inputs
// from there (from global memory a lane's inputs are 16-element runs, which
// cost many more load transactions than the weights).
enable subgroups;

override WG: u32 = 128; // threads, a multiple of LG
override ROWS: u32 = 4; // rows per lane group, <= 16
override LG: u32 = 32;  // lanes per group
const MAXR: u32 = 16u;
override PF: u32 = 1u;  // 1: weight loads issued ahead (see main), 0: in place
override XN: u32 = 1u;  // > 1: x staged in workgroup memory, XN = cols / 4
override GN: u32 = 1u;  // PRE 1: XN + heads, PRE 2: heads * splits (1: no PRE)

struct Params {
  rows: u32,     // rows of the bound part
  cols: u32,     // a multiple of 256
  y_off: u32,    // float offset in y of the part's first row, token 0
  x_off: u32,    // vec4 offset of token 0's x
  acc: u32,      // 1: add into y
  y_stride: u32, // floats between tokens in y (the whole matrix's rows)
  pre: u32,      // 0 x as bound; 1, 2: see the top
  hd: u32,       // PRE 1/2: head dimension (a multiple of 4)
  zoff: u32,     // PRE 1: float offset of z in src
  splits: u32,   // PRE 2: splits per head
  eps: f32,      // PRE 1
  pad0: u32,
}

@group(0) @binding(0) var<storage, read> w: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<storage, read> aux: array<f32>;          // PRE 1: raw o; 2: the splits
@group(0) @binding(4) var<storage, read> src: array<f32>;          // PRE 1: z; 2: the gates
@group(0) @binding(5) var<storage, read> nw: array<f32>;           // PRE 1: norm weights
@group(0) @binding(6) var<storage, read_write> xo: array<vec4<f32>>; // PRE 1/2: x' (workgroup 0)
@group(0) @binding(7) var<uniform> p: Params;

// #include "q4k_scales.wgsli"

// #include "q4k_common.wgsli"

var<workgroup> xsh: array<vec4<f32>, XN>;
var<workgroup> gsh: array<f32, GN>;

fn merge_part(i: u32) -> f32 {
  return aux[i];
}

fn merge_store(i: u32, w: f32) {
  gsh[i] = w;
}

// #include "split_merge.wgsli"

fn vec4_at(a: u32) -> vec4<f32> {
  return vec4<f32>(aux[a], aux[a + 1u], aux[a + 2u], aux[a + 3u]);
}

fn silu4(v: vec4<f32>) -> vec4<f32> {
  return v / (1.0 + exp(-v));
}

// Stages x' for PRE 1 or 2 (one token) in xsh; workgroup 0 also stores it
// to xo. Call from uniform control flow; ends with a barrier.
fn stage_pre(li: u32, wg0: bool) {
  let n4 = p.cols / 4u;
  let heads = p.cols / p.hd;
  let h4 = p.hd / 4u;
  if (p.pre == 1u) {
    // raw o staged, each vec4's sum of squares in gsh[i], then one thread
    // per head adds its hd / 4 of them: 1 / rms per head in gsh[XN + h]
    for (var i = li; i < n4; i += WG) {
      let v = vec4_at(4u * i);
      xsh[q4k_xsw(i)] = v;
      gsh[i] = dot(v, v);
    }
    workgroupBarrier();
    for (var h = li; h < heads; h += WG) {
      var t = 0.0;
      for (var k = 0u; k < h4; k++) {
        t += gsh[h * h4 + k];
      }
      gsh[XN + h] = inverseSqrt(t / f32(p.hd) + p.eps);
    }
    workgroupBarrier();
    for (var i = li; i < n4; i += WG) {
      let e = 4u * i;
      let d = e % p.hd;
      let z = vec4<f32>(src[p.zoff + e], src[p.zoff + e + 1u], src[p.zoff + e + 2u], src[p.zoff + e + 3u]);
      let w4 = vec4<f32>(nw[d], nw[d + 1u], nw[d + 2u], nw[d + 3u]);
      let v = w4 * (xsh[q4k_xsw(i)] * gsh[XN + e / p.hd]) * silu4(z);
      xsh[q4k_xsw(i)] = v;
      if (wg0) {
        xo[i] = v;
      }
    }
  } else {
    // merge weights e^(m_z - M) / L per (head, split), then the weighted
    // sums of the splits' vec4s times the gate's sigmoid
    let S = p.splits;
    let row = p.hd + 2u;
    merge_weights(li, heads, S, row);
    for (var i = li; i < n4; i += WG) {
      let h = (4u * i) / p.hd;
      let d = (4u * i) % p.hd;
      var a = vec4<f32>(0.0);
      for (var z = 0u; z < S; z++) {
        a += vec4_at((h * S + z) * row + 2u + d) * gsh[h * S + z];
      }
      let gb = h * 2u * p.hd + p.hd + d;
      let g = vec4<f32>(src[gb], src[gb + 1u], src[gb + 2u], src[gb + 3u]);
      let v = a / (1.0 + exp(-g));
      xsh[q4k_xsw(i)] = v;
      if (wg0) {
        xo[i] = v;
      }
    }
  }
  workgroupBarrier();
}

fn store(r: u32, t: u32, v: f32) {
  let o = p.y_off + t * p.y_stride + r;
  if (p.acc == 1u) {
    y[o] = y[o] + v;
  } else {
    y[o] = v;
  }
}

// part[(group * ROWS + r) * (LG / 4) + subgroup within the group]
var<workgroup> part: array<f32, (WG / LG) * ROWS * (LG / 4u)>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32, @builtin(subgroup_invocation_id) sgi: u32,
        @builtin(subgroup_size) sgs: u32) {
  let ng = WG / LG;
  let grp = li / LG;
  let lane = li % LG;
  let row0 = ((wid.x + wid.y * nwg.x) * ng + grp) * ROWS;
  let t = wid.z;
  let xb = p.x_off + t * (p.cols / 4u);
  let nsb = p.cols / 256u;
  let units = p.cols / 32u;
  var acc: array<f32, MAXR>;
  for (var r = 0u; r < ROWS; r++) {
    acc[r] = 0.0;
  }
  // Weight loads issued ahead (PF 1; they never depend on the input): the
  // lane's first unit before the input is staged, so that the two memory
  // round trips overlap, then each iteration the next unit's before its
  // arithmetic.
  var wu: array<QUnit, MAXR>;
  if (PF == 1u && lane < units) {
    for (var r = 0u; r < ROWS; r++) {
      if (row0 + r < p.rows) {
        wu[r] = q4k_load((row0 + r) * nsb * 9u, lane);
      }
    }
  }
  // xs[0..3]: the unit's low-nibble elements, xs[4..7]: its high-nibble ones.
  if (p.pre != 0u) {
    stage_pre(li, wid.x + wid.y * nwg.x == 0u);
  } else if (XN > 1u) {
    for (var i = li; i < p.cols / 4u; i += WG) {
      xsh[q4k_xsw(i)] = x[xb + i];
    }
    workgroupBarrier();
  }
  var xs: array<vec4<f32>, 8>;
  for (var u = lane; u < units; u += LG) {
    let xo = q4k_unit_x(u) / 4u;
    var sx = vec2<f32>(0.0);
    for (var k = 0u; k < 4u; k++) {
      if (XN > 1u) {
        xs[k] = xsh[q4k_xsw(xo + k)];
        xs[k + 4u] = xsh[q4k_xsw(xo + 8u + k)];
      } else {
        xs[k] = x[xb + xo + k];
        xs[k + 4u] = x[xb + xo + 8u + k];
      }
      sx += vec2<f32>(dot(xs[k], vec4<f32>(1.0)), dot(xs[k + 4u], vec4<f32>(1.0)));
    }
    for (var r = 0u; r < ROWS; r++) {
      let row = row0 + r;
      if (row < p.rows) {
        if (PF == 1u) {
          let cur = wu[r];
          if (u + LG < units) {
            wu[r] = q4k_load(row * nsb * 9u, u + LG);
          }
          acc[r] += q4k_dot(cur, u, &xs, sx);
        } else {
          acc[r] += q4k_unit(row * nsb * 9u, u, &xs, sx);
        }
      }
    }
  }
  let pslots = LG / 4u;
  for (var r = 0u; r < ROWS; r++) {
    let s = subgroupAdd(acc[r]);
    if (sgi == 0u) {
      part[(grp * ROWS + r) * pslots + lane / sgs] = s;
    }
  }
  workgroupBarrier();
  if (lane < ROWS && row0 + lane < p.rows) {
    var tot = 0.0;
    for (var k = 0u; k < LG / sgs; k++) {
      tot += part[(grp * ROWS + lane) * pslots + k];
    }
    store(row0 + lane, t, tot);
  }
}
