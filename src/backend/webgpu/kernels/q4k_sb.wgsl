// y[r] (+)= sum_c W[r][c] x[c] for a Q4_K matrix and one token: a thread
// per 256-element super-block. Every thread issues the nine 16-byte loads
// of its super-block (144 bytes) before the workgroup stages x, so a
// dispatch has the whole matrix in flight at once instead of a lane's
// units one after another (q4k_matvec.wgsl walks a row's units in a loop,
// one unit ahead). A row's S = cols / 256 threads are consecutive; the
// workgroup holds WG / S whole rows and sums each row's S partials through
// workgroup memory. Grid: ceil(rows / (WG / S)) workgroups as x*y (pair:
// ceil(rows / (WG / S / 2))).
//
// The fusions of q4k_fused.wgsl without its argmax: pre 1, x' = rmsnorm(x)
// * nw (the staging reduces sum(x^2), the row sums take the 1 / rms;
// workgroup 0 writes x' to xo); pair F, output r is rows r (gate) and
// r + F (up) of the bound weights, both to y and silu(gate) * up to z[r]
// (the workgroup's rows alternate gate, up).
//
// The one-token products are bound by instructions, not bytes (a dispatch
// streams these matrices in 4-5 us on the H200, tools/stream_probe.c, the
// products took 9-15), so the thread keeps per-element work small: the
// super-block's 8 scales and mins are decoded once, not per 32-element
// unit, and the sums of each 16 inputs (for the mins) come from the
// staging, not from the thread.
//
// Q4_K layout (src/format/tensor.h): vec4 0 of a super-block = word 0
// (f16 d | f16 dmin << 16) and words 1-3 (12 bytes of packed 6-bit scales
// and mins); vec4s 1-8 the quants, byte group c (32 bytes, vec4s 1 + 2c and
// 2 + 2c): element 64c + l (l < 32) is the low nibble of byte 32c + l,
// element 64c + 32 + l its high nibble; value = d*sc[j]*nibble - dmin*m[j],
// j = element / 32.
override WG: u32 = 256;
override XN: u32 = 65u; // staged x: (cols / 256) * 65 vec4s (64 a super-block + 1 of padding)

struct Params {
  rows: u32,   // outputs (pair: gate rows)
  cols: u32,   // a multiple of 256, at most WG * 256 (pair: WG * 128)
  y_off: u32,  // float offset in y of output 0
  x_off: u32,  // vec4 offset of x
  acc: u32,    // 1: add into y (not with pair)
  w_row0: u32, // row of the bound weights that output 0 reads
  pre: u32,    // 1: x' = rmsnorm(x) * nw
  eps: f32,
  pair: u32,   // 0, or F
  pad0: u32,   // q4k_fused's part_off (the host fills both kernels' parameters alike)
  pad1: u32,
  pad2: u32,
}

@group(0) @binding(0) var<storage, read> w: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<storage, read> nw: array<vec4<f32>>;       // pre 1
@group(0) @binding(4) var<storage, read_write> xo: array<vec4<f32>>; // pre 1: x' (workgroup 0)
@group(0) @binding(5) var<storage, read_write> z: array<f32>;        // pair: silu(gate) * up
@group(0) @binding(6) var<uniform> p: Params;

var<workgroup> xsh: array<vec4<f32>, XN>;
var<workgroup> xs16: array<f32, XN / 65u * 16u>; // sums of x's 16-element runs
var<workgroup> part: array<f32, WG>;
var<workgroup> tot: array<f32, WG>; // row totals (pair: gate and up side by side)

// Slot of x vec4 i: one vec4 of padding after each super-block's 64, so
// that the threads of a row (consecutive super-blocks, reading the same
// offset within theirs) fall on different banks.
fn xslot(i: u32) -> u32 {
  return i + (i >> 6u);
}

// Low (element 4k + 0..3 of a run) and high nibbles of the bytes of word q
// dotted with the staged inputs at vec4s lo and hi.
fn word_dot(q: u32, lo: u32, hi: u32) -> vec2<f32> {
  let sh = vec4<u32>(0u, 8u, 16u, 24u);
  let m = vec4<u32>(15u);
  return vec2<f32>(dot(vec4<f32>((vec4<u32>(q) >> sh) & m), xsh[xslot(lo)]),
                   dot(vec4<f32>((vec4<u32>(q) >> (sh + vec4<u32>(4u))) & m), xsh[xslot(hi)]));
}

// Byte group c of a super-block whose inputs start at vec4 xo (unpadded):
// qa, qb its two quant vec4s; returns (sc_lo * lo + sc_hi * hi,
// mn_lo * sum_lo + mn_hi * sum_hi) for the d and dmin terms.
fn group_dot(qa: vec4<u32>, qb: vec4<u32>, xo: u32, sc: vec2<f32>, mn: vec2<f32>) -> vec2<f32> {
  let b = xo;
  var s = word_dot(qa.x, b, b + 8u);
  s += word_dot(qa.y, b + 1u, b + 9u);
  s += word_dot(qa.z, b + 2u, b + 10u);
  s += word_dot(qa.w, b + 3u, b + 11u);
  s += word_dot(qb.x, b + 4u, b + 12u);
  s += word_dot(qb.y, b + 5u, b + 13u);
  s += word_dot(qb.z, b + 6u, b + 14u);
  s += word_dot(qb.w, b + 7u, b + 15u);
  let r = xo / 4u; // the group's first 16-element run
  let sums = vec2<f32>(xs16[r] + xs16[r + 1u], xs16[r + 2u] + xs16[r + 3u]);
  return vec2<f32>(dot(sc, s), dot(mn, sums));
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) li: u32) {
  let S = p.cols / 256u;
  var rpw = WG / S;
  if (p.pair != 0u) {
    rpw = rpw & ~1u; // whole (gate, up) pairs
  }
  let lr = li / S;
  let sb = li % S;
  let wg_id = wid.x + wid.y * nwg.x;
  var out = wg_id * rpw + lr; // output index
  var row = p.w_row0 + out;   // row of the bound weights
  if (p.pair != 0u) {
    out = wg_id * (rpw / 2u) + lr / 2u;
    row = p.w_row0 + out + (lr % 2u) * p.pair;
  }
  let live = lr < rpw && out < p.rows;
  var hd = vec4<u32>(0u);
  var q: array<vec4<u32>, 8>;
  if (live) {
    let base = (row * S + sb) * 9u;
    hd = w[base];
    for (var k = 0u; k < 8u; k++) {
      q[k] = w[base + 1u + k];
    }
  }
  // x' staged by runs of 16 elements, each run's sum beside it (pre 1:
  // x * nw, the 1 / rms applied to the row sums)
  var ss = 0.0;
  for (var r = li; r < p.cols / 16u; r += WG) {
    var t = 0.0;
    for (var k = 0u; k < 4u; k++) {
      var v = x[p.x_off + 4u * r + k];
      if (p.pre == 1u) {
        ss += dot(v, v);
        v *= nw[4u * r + k];
      }
      xsh[xslot(4u * r + k)] = v;
      t += dot(v, vec4<f32>(1.0));
    }
    xs16[r] = t;
  }
  var inv = 1.0;
  if (p.pre == 1u) {
    // two-level sum: 16 partial sums of 16, then their total
    part[li] = ss;
    workgroupBarrier();
    if (li < 16u) {
      var t = 0.0;
      for (var i = li; i < WG; i += 16u) {
        t += part[i];
      }
      tot[li] = t;
    }
    workgroupBarrier();
    var t = 0.0;
    for (var i = 0u; i < min(16u, WG); i++) {
      t += tot[i];
    }
    inv = 1.0 / sqrt(t / f32(p.cols) + p.eps);
    if (wg_id == 0u) {
      for (var i = li; i < p.cols / 4u; i += WG) {
        xo[i] = xsh[xslot(i)] * inv;
      }
    }
  }
  workgroupBarrier();
  var acc = 0.0;
  if (live) {
    // bytes 0-3 (hd.y), 4-7 (hd.z), 8-11 (hd.w) of the packed scales/mins
    let sh = vec4<u32>(0u, 8u, 16u, 24u);
    let b0 = (vec4<u32>(hd.y) >> sh) & vec4<u32>(255u);
    let b4 = (vec4<u32>(hd.z) >> sh) & vec4<u32>(255u);
    let b8 = (vec4<u32>(hd.w) >> sh) & vec4<u32>(255u);
    let sc03 = vec4<f32>(b0 & vec4<u32>(63u));
    let mn03 = vec4<f32>(b4 & vec4<u32>(63u));
    let sc47 = vec4<f32>((b8 & vec4<u32>(15u)) | ((b0 >> vec4<u32>(6u)) << vec4<u32>(4u)));
    let mn47 = vec4<f32>((b8 >> vec4<u32>(4u)) | ((b4 >> vec4<u32>(6u)) << vec4<u32>(4u)));
    let xo = sb * 64u;
    var t = group_dot(q[0], q[1], xo, sc03.xy, mn03.xy);
    t += group_dot(q[2], q[3], xo + 16u, sc03.zw, mn03.zw);
    t += group_dot(q[4], q[5], xo + 32u, sc47.xy, mn47.xy);
    t += group_dot(q[6], q[7], xo + 48u, sc47.zw, mn47.zw);
    let dm = unpack2x16float(hd.x);
    acc = dm.x * t.x - dm.y * t.y;
  }
  part[li] = acc;
  workgroupBarrier();
  if (live && sb == 0u) {
    var t = 0.0;
    for (var k = 0u; k < S; k++) {
      t += part[li + k];
    }
    t *= inv;
    if (p.pair == 0u) {
      let o = p.y_off + out;
      if (p.acc == 1u) {
        t += y[o];
      }
      y[o] = t;
    }
    tot[lr] = t;
  }
  if (p.pair != 0u) {
    workgroupBarrier();
    if (live && sb == 0u && lr % 2u == 0u) {
      let g = tot[lr];
      let u = tot[lr + 1u];
      y[p.y_off + out] = g;
      y[p.y_off + out + p.pair] = u;
      z[out] = g / (1.0 + exp(-g)) * u;
    }
  }
}
