// The integer product of a batched decode step (backend.h matmul_rows, a
// few sequences at once), Q4/Q4Z/Q4_K/Q8_0 weights x int8 activations:
//   y[y_off + t * y_stride + r] (+)= sum_b xs[t][b] * (ws[r][b] * sum_{c in b} q[r][c] * xq[t][c]
//                                                     - wo[r][b] * sum_{c in b} xq[t][c])
// with matmul_i8.wgsl's integers, scales and offsets per weight type (QT)
// and quant_x8.wgsl's int8 activations (xq, one scale xs per (token,
// 32-block)).
//
// Why it exists: matmul_i8.wgsl tiles 64 weight rows x 32-64 tokens, so a
// step of 8 rows fills an eighth of each tile and its grid has one
// workgroup per 64 weight rows, too few to keep the memory busy; matvec
// kernels (matvec_rows.wgsl) read the weight once but multiply every
// (row, token) in f32, 32 fused multiply-adds a block against one integer
// dot of 8 dot4I8Packed here. This kernel is shaped like the one-token
// products: a lane group of LG lanes takes ROWS weight rows, its lanes
// stride over the 32-column blocks (lane, lane + LG, ...), each block of
// each row is loaded and expanded to signed bytes once and applied to the
// NT tokens of the workgroup (grid z: chunks of NT tokens), whose int8
// blocks come from global memory (the same for every lane group: cached).
//
// A row's sum does not depend on the other tokens: each (row, token) adds
// the same blocks in the same order whatever n, NT or the grid, then
// reduces as rows_store.wgsli does. So a sequence stepped beside others gets
// the bits it gets stepped alone through this kernel.
enable subgroups;

override WG: u32 = 128; // threads, a multiple of LG
override ROWS: u32 = 2; // weight rows per lane group, <= MAXR
override LG: u32 = 32;  // lanes per group (>= the subgroup size)
override QT: u32 = 1;   // 1 Q4 (zero point 8), 2 Q4Z, 3 Q4_K, 5 Q8_0
override NT: u32 = 8;   // tokens per workgroup; ROWS * NT <= MAXA
const MAXR: u32 = 8u;
const MAXA: u32 = 64u;

struct Params {
  rows: u32,     // rows of the bound part
  cols: u32,
  y_off: u32,    // float offset in y of the part's first row, token 0
  acc: u32,      // 1: add into y
  n: u32,        // tokens
  y_stride: u32, // floats between tokens in y
  pad0: u32,
  pad1: u32,
}

@group(0) @binding(0) var<storage, read> w: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> scales: array<f32>;
@group(0) @binding(2) var<storage, read> zp: array<u32>;
@group(0) @binding(3) var<storage, read> xq: array<vec4<u32>>;
@group(0) @binding(4) var<storage, read> xs: array<f32>;
@group(0) @binding(5) var<storage, read_write> y: array<f32>;
@group(0) @binding(6) var<uniform> p: Params;

// part[((group * ROWS + r) * NT + t) * (LG / 4) + subgroup within the group]
var<workgroup> part: array<f32, (WG / LG) * ROWS * NT * (LG / 4u)>;

// #include "i8_common.wgsli"
// #include "rows_store.wgsli"

// Block b of weight row `row` as 32 signed bytes (two vec4<u32>, element 4k
// in the low byte of word k, as quant_x8.wgsl packs the activations) and
// its scale and offset (the value is scale * byte - offset).
struct Block {
  q0: vec4<u32>,
  q1: vec4<u32>,
  scale: f32,
  offset: f32,
}

fn load_block(row: u32, b: u32, nb: u32) -> Block {
  var k: Block;
  k.offset = 0.0;
  if (QT == 3u) {
    let base = (row * (nb / 8u) + b / 8u) * 9u; // the super-block's header vec4
    let so = q4k_scale_offset(w[base], b % 8u);
    let sh = vec4<u32>(4u * (b % 2u)); // odd sub-blocks: the high nibbles
    let qv = base + 1u + 2u * ((b % 8u) / 2u);
    k.q0 = (w[qv] >> sh) & vec4<u32>(0x0F0F0F0Fu);
    k.q1 = (w[qv + 1u] >> sh) & vec4<u32>(0x0F0F0F0Fu);
    k.scale = so.x;
    k.offset = so.y;
    return k;
  }
  let blk = row * nb + b;
  k.scale = scales[blk];
  if (QT == 5u) {
    k.q0 = w[2u * blk];
    k.q1 = w[2u * blk + 1u];
    return k;
  }
  var z = 8u;
  if (QT == 2u) {
    z = (zp[blk / 8u] >> ((blk % 8u) * 4u)) & 15u;
  }
  let q = w[blk];
  let e0 = expand(q.x, z);
  let e1 = expand(q.y, z);
  let e2 = expand(q.z, z);
  let e3 = expand(q.w, z);
  k.q0 = vec4<u32>(e0.x, e0.y, e1.x, e1.y);
  k.q1 = vec4<u32>(e2.x, e2.y, e3.x, e3.y);
  return k;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>,
        @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32,
        @builtin(subgroup_invocation_id) sli: u32,
        @builtin(subgroup_size) sgs: u32) {
  let grp = li / LG;
  let lane = li % LG;
  let row0 = ((wid.x + wid.y * nwg.x) * (WG / LG) + grp) * ROWS;
  let t0 = wid.z * NT;
  let nt = min(NT, p.n - t0); // this workgroup's tokens (uniform)
  let nb = p.cols / 32u;
  var acc: array<f32, MAXA>;
  for (var k = 0u; k < ROWS * NT; k++) {
    acc[k] = 0.0;
  }
  var wb: array<Block, MAXR>;
  for (var b = lane; b < nb; b += LG) {
    for (var r = 0u; r < ROWS; r++) {
      if (row0 + r < p.rows) {
        wb[r] = load_block(row0 + r, b, nb);
      } else {
        wb[r] = Block(vec4<u32>(0u), vec4<u32>(0u), 0.0, 0.0);
      }
    }
    for (var t = 0u; t < NT; t++) {
      if (t < nt) {
        let xi = (t0 + t) * nb + b;
        let x0 = xq[2u * xi];
        let x1 = xq[2u * xi + 1u];
        let sx = xs[xi];
        var xsum = 0.0; // Q4_K: x_scale * the sum of the block's int8 activations
        if (QT == 3u) {
          xsum = sx * f32(dot8(x0, x1, vec4<u32>(0x01010101u), vec4<u32>(0x01010101u)));
        }
        for (var r = 0u; r < ROWS; r++) {
          let d = dot8(wb[r].q0, wb[r].q1, x0, x1);
          var a = fma(to_f32(d), wb[r].scale * sx, acc[r * NT + t]);
          if (QT == 3u) {
            a = fma(-wb[r].offset, xsum, a);
          }
          acc[r * NT + t] = a;
        }
      }
    }
  }
  rows_store(&acc, grp, lane, sli, sgs, row0, t0, nt);
}
