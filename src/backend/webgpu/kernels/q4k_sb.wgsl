// y[r] (+)= sum_c W[r][c] x[c] for a Q4_K matrix and one token: a thread
// per 256-element super-block. Every thread issues the nine 16-byte loads
// of its super-block (144 bytes) before the workgroup stages x, so a
// dispatch has the whole matrix in flight at once instead of a lane's
// units one after another (q4k_matvec.wgsl walks a row's units in a loop,
// one unit ahead). A row's S = cols / 256 threads are consecutive; the
// workgroup holds WG / S whole rows and sums each row's S partials through
// workgroup memory. Grid: ceil(rows / (WG / S)) workgroups as x*y.
//
// Q4_K layout and the unit arithmetic: q4k_common.wgsli (unit u of a
// super-block is its quant vec4 1 + u).
override WG: u32 = 256;
override XN: u32 = 65u; // staged x: (cols / 256) * 65 vec4s (64 a super-block + 1 of padding)

struct Params {
  rows: u32,  // rows of the bound part
  cols: u32,  // a multiple of 256, at most WG * 256
  y_off: u32, // float offset in y of the part's first row
  x_off: u32, // vec4 offset of x
  acc: u32,   // 1: add into y
  pad0: u32,
  pad1: u32,
  pad2: u32,
}

@group(0) @binding(0) var<storage, read> w: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

// #include "q4k_common.wgsli"

var<workgroup> xsh: array<vec4<f32>, XN>;
var<workgroup> part: array<f32, WG>;

// Slot of x vec4 i: one vec4 of padding after each super-block's 64, so
// that the threads of a row (consecutive super-blocks, reading the same
// offset within theirs) fall on different banks.
fn xslot(i: u32) -> u32 {
  return i + (i >> 6u);
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
  let S = p.cols / 256u;
  let rpw = WG / S;
  let lr = li / S;
  let sb = li % S;
  let row = (wid.x + wid.y * nwg.x) * rpw + lr;
  let live = lr < rpw && row < p.rows;
  var hd = vec4<u32>(0u);
  var q: array<vec4<u32>, 8>;
  if (live) {
    let base = (row * S + sb) * 9u;
    hd = w[base];
    for (var k = 0u; k < 8u; k++) {
      q[k] = w[base + 1u + k];
    }
  }
  for (var i = li; i < p.cols / 4u; i += WG) {
    xsh[xslot(i)] = x[p.x_off + i];
  }
  workgroupBarrier();
  var acc = 0.0;
  if (live) {
    var xs: array<vec4<f32>, 8>;
    for (var u = 0u; u < 8u; u++) {
      let xo = sb * 64u + q4k_unit_x(u) / 4u;
      var sx = vec2<f32>(0.0);
      for (var k = 0u; k < 4u; k++) {
        xs[k] = xsh[xslot(xo + k)];
        xs[k + 4u] = xsh[xslot(xo + 8u + k)];
        sx += vec2<f32>(dot(xs[k], vec4<f32>(1.0)), dot(xs[k + 4u], vec4<f32>(1.0)));
      }
      acc += q4k_dot(QUnit(hd, q[u]), u, &xs, sx);
    }
  }
  part[li] = acc;
  workgroupBarrier();
  if (live && sb == 0u) {
    var t = 0.0;
    for (var k = 0u; k < S; k++) {
      t += part[li + k];
    }
    let o = p.y_off + row;
    if (p.acc == 1u) {
      t += y[o];
    }
    y[o] = t;
  }
}
