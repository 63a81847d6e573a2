// y = W x for wisp's symmetric Q4 block-32 weights, subgroup reduction.
//
// W is rows x cols (cols a multiple of 32). quant: row-major, cols/2 bytes per
// row; byte j holds element 2j in its low nibble and 2j+1 in its high nibble,
// so one 32-element block is 16 bytes = one vec4<u32>, and nibble k of word w
// is element 8w+k of the block. scales: one f32 per block, row-major.
// value = scale * (nibble - 8).
//
// One workgroup computes ROWS consecutive rows; its WG threads stride over the
// blocks of each row, then reduce with subgroupAdd and a small workgroup sum.
// Grid: ceil(rows/ROWS) workgroups, possibly split as x*y (linear id
// wid.x + wid.y * nwg.x). Assumes subgroups are contiguous ranges of
// local_invocation_index (checked by tests/test_webgpu_abi.c).
enable subgroups;

override WG: u32 = 64;   // threads per workgroup
override ROWS: u32 = 4;  // rows per workgroup, <= WG

struct Params {
  rows: u32,
  cols: u32,
  pad0: u32,
  pad1: u32,
}

@group(0) @binding(0) var<storage, read> quant: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> scales: array<f32>;
@group(0) @binding(2) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<uniform> p: Params;

// One slot per (row, subgroup); subgroups have at least 4 invocations.
var<workgroup> partial: array<f32, ROWS * ((WG + 3u) / 4u)>;

// Dot product of one quantized block (without its scale) with x, where xb is
// the index of the block's first vec4 of x.
fn block_dot(q: vec4<u32>, xb: u32) -> f32 {
  var s = 0.0;
  for (var w = 0u; w < 4u; w++) {
    let word = q[w];
    let lo = vec4<f32>((vec4<u32>(word) >> vec4<u32>(0u, 4u, 8u, 12u)) & vec4<u32>(15u)) - 8.0;
    let hi = vec4<f32>((vec4<u32>(word) >> vec4<u32>(16u, 20u, 24u, 28u)) & vec4<u32>(15u)) - 8.0;
    s += dot(lo, x[xb + 2u * w]) + dot(hi, x[xb + 2u * w + 1u]);
  }
  return s;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32,
        @builtin(subgroup_invocation_id) sli: u32,
        @builtin(subgroup_size) sgs: u32) {
  let row0 = (wid.x + wid.y * nwg.x) * ROWS;
  let nb = p.cols / 32u;
  let slots = (WG + 3u) / 4u;
  for (var r = 0u; r < ROWS; r++) {
    let row = row0 + r;
    var acc = 0.0;
    if (row < p.rows) {
      let base = row * nb;
      for (var b = li; b < nb; b += WG) {
        acc += scales[base + b] * block_dot(quant[base + b], b * 8u);
      }
    }
    let s = subgroupAdd(acc);
    if (sli == 0u) {
      partial[r * slots + li / sgs] = s;
    }
  }
  workgroupBarrier();
  if (li < ROWS) {
    let row = row0 + li;
    if (row < p.rows) {
      let nsg = (WG + sgs - 1u) / sgs;
      var t = 0.0;
      for (var i = 0u; i < nsg; i++) {
        t += partial[li * slots + i];
      }
      y[row] = t;
    }
  }
}
