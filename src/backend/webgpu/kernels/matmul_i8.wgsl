// Integer x int8 tiled product for several tokens (prefill):
//   y[t * y_stride + y_off + r] (+)= sum_b xs[t][b] * (ws[r][b] * sum_{c in b} q[r][c] * xq[t][c]
//                                                      - wo[r][b] * sum_{c in b} xq[t][c])
// for r < rows (a row range of W) and t < n, blocks b of 32 columns, with
// the weights' integers q and per-block scale ws and offset wo by QT:
//   1 Q4: q = nibble - 8, wo = 0 (wisp's Q4 layout, see matvec.wgsl);
//   2 Q4Z: q = nibble - the block's zero point, wo = 0;
//   3 Q4_K: block b is sub-block b % 8 of super-block b / 8 (ggml's 144-byte
//     layout, q4k_matvec.wgsl), q = its nibble (0..15), ws = d * scale,
//     wo = dmin * min (the value is ws * q - wo; cols % 256 == 0);
//   5 Q8_0: q = the int8 value, ws = the block's scale, wo = 0 (the upload's
//     layout, unpack_weights.wgsli).
// The activations were quantized by quant_x8.wgsl (xq: 32 int8 per (token,
// block) as 2 vec4<u32>, xs: one f32 scale per (token, block)).
//
// One workgroup computes a TM x TN tile (TM rows of W, TN tokens) with
// (TM/RM)*(TN/RN) threads, each an RM x RN register tile (rows tr + i*TM/RM,
// tokens tc + j*TN/RN). K advances KB blocks (32*KB columns) per stage: the
// weight nibbles of the stage are read as one vec4<u32> per (row, block),
// expanded to signed int8 (q - z, in -15..15) packed 4 per u32 and stored in
// workgroup memory next to the int8 activations, both as vec4<u32> rows with
// a pitch of 8*KB + 4 words (no bank conflicts for the strided reads); Q4_K
// nibbles are masked to bytes 0..15 and Q8_0 values copied as they are. Per
// block each output is 8 dot4I8Packed (an exact integer dot over 32
// elements, |dot| <= 32*127*127 < 2^22), converted to f32 exactly and
// accumulated as acc += dot * (w_scale * x_scale); Q4_K then subtracts
// w_offset * x_scale * sum(xq), the activation sum kept beside the tile
// (two exact half-block sums). The next stage's global loads go to
// registers before the current stage is computed from workgroup memory
// (software pipelining). Grid: x = ceil(rows / TM), y = ceil(n / TN).
override TM: u32 = 64;  // rows per tile, a multiple of RM
override TN: u32 = 32;  // tokens per tile, a multiple of RN
override RM: u32 = 4;   // rows per thread, <= 8
override RN: u32 = 4;   // tokens per thread, <= 8
override KB: u32 = 2;   // 32-column blocks per stage
override QT: u32 = 1;   // 1 Q4 (zero point 8), 2 Q4Z, 3 Q4_K, 5 Q8_0
// 1: binding 3 holds the f32 activations (read as bits) and each workgroup
// quantizes its own tile exactly as quant_x8.wgsl does (no quantize
// dispatch, but every column of tiles quantizes x again); needs TN*KB <= NT.
override FUSEQ: u32 = 0;

override TR: u32 = TM / RM;
override TC: u32 = TN / RN;
override NT: u32 = TR * TC;
override P4: u32 = 2u * KB + 1u;  // row pitch in vec4<u32> (8*KB + 4 words)
override NW: u32 = (TM * KB + NT - 1u) / NT;       // weight vectors a thread loads per stage, <= 8
override NX: u32 = (TN * KB * 2u + NT - 1u) / NT;  // activation vectors a thread loads per stage, <= 8

struct Params {
  rows: u32,
  cols: u32,
  y_off: u32,
  acc: u32,
  n: u32,
  y_stride: u32,  // floats between consecutive tokens' rows of y
  x_off: u32,  // FUSEQ: vec4 offset of token 0's row of x
  pad1: u32,
}

// Q4/Q4Z: one 32-block of nibbles per vec4; Q4_K: 9 vec4 per super-block;
// Q8_0: two vec4 of int8 per block.
@group(0) @binding(0) var<storage, read> w: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> scales: array<f32>;  // Q4, Q4Z, Q8_0: one per block
@group(0) @binding(2) var<storage, read> zp: array<u32>;
@group(0) @binding(3) var<storage, read> xq: array<vec4<u32>>;  // FUSEQ: x (f32 bits)
@group(0) @binding(4) var<storage, read> xs: array<f32>;
@group(0) @binding(5) var<storage, read_write> y: array<f32>;
@group(0) @binding(6) var<uniform> p: Params;

var<workgroup> wt: array<vec4<u32>, TM * P4>;
var<workgroup> xt: array<vec4<u32>, TN * P4>;
var<workgroup> wsc: array<f32, TM * KB>;
var<workgroup> xsc: array<f32, TN * KB>;
var<workgroup> wof: array<f32, TM * KB>;      // Q4_K: dmin * min per (row, block)
var<workgroup> xsm: array<f32, TN * KB * 2u>; // Q4_K: sum of xq per (token, half block)

// #include "i8_common.wgsli"

// #include "quant_block.wgsli"

@compute @workgroup_size(NT)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
  let tr = li % TR;
  let tc = li / TR;
  let r0 = wid.x * TM;
  let t0 = wid.y * TN;
  let nb = p.cols / 32u;
  var acc: array<array<f32, 8>, 8>;
  for (var i = 0u; i < RM; i++) {
    for (var j = 0u; j < RN; j++) {
      acc[i][j] = 0.0;
    }
  }
  // Stage st's global data is loaded into registers before stage st-1 is
  // computed from workgroup memory, so the loads' latency overlaps it.
  let ns = (nb + KB - 1u) / KB;
  var pw: array<vec4<u32>, 8>;  // NW (row, block) nibble vectors (Q4_K, Q8_0: first half)
  var pw2: array<vec4<u32>, 8>; // Q4_K, Q8_0: second half of the block's bytes
  var ps: array<f32, 8>;
  var po: array<f32, 8>;        // Q4_K offsets
  var pz: array<u32, 8>;
  var px: array<vec4<u32>, 8>;  // NX activation vectors
  var pxs: array<f32, 8>;
  var pxf: array<vec4<f32>, 8>;  // FUSEQ: the f32 block this thread quantizes
  for (var st = 0u; st <= ns; st++) {
    if (st < ns) {
      let kb0 = st * KB;
      for (var u = 0u; u < NW; u++) {
        let e = li + u * NT;
        let row = r0 + e / KB;
        let b = kb0 + e % KB;
        pw[u] = vec4<u32>(0u);
        pw2[u] = vec4<u32>(0u);
        ps[u] = 0.0;
        po[u] = 0.0;
        pz[u] = 8u;
        if (e < TM * KB && row < p.rows && b < nb) {
          let blk = row * nb + b;
          if (QT == 3u) {
            let base = (row * (nb / 8u) + b / 8u) * 9u;  // the super-block's header vec4
            let so = q4k_scale_offset(w[base], b % 8u);
            let sh = vec4<u32>(4u * (b % 2u));  // odd sub-blocks: the high nibbles
            let qv = base + 1u + 2u * ((b % 8u) / 2u);
            pw[u] = (w[qv] >> sh) & vec4<u32>(0x0F0F0F0Fu);
            pw2[u] = (w[qv + 1u] >> sh) & vec4<u32>(0x0F0F0F0Fu);
            ps[u] = so.x;
            po[u] = so.y;
          } else if (QT == 5u) {
            pw[u] = w[2u * blk];
            pw2[u] = w[2u * blk + 1u];
            ps[u] = scales[blk];
          } else {
            pw[u] = w[blk];
            ps[u] = scales[blk];
          }
          if (QT == 2u) {
            pz[u] = (zp[blk / 8u] >> ((blk % 8u) * 4u)) & 15u;
          }
        }
      }
      if (FUSEQ == 1u) {
        let t = li / KB;
        let b = kb0 + li % KB;
        let ok = li < TN * KB && t0 + t < p.n && b < nb;
        let base = p.x_off + (t0 + t) * (p.cols / 4u) + b * 8u;
        for (var k = 0u; k < 8u; k++) {
          pxf[k] = vec4<f32>(0.0);
          if (ok) {
            pxf[k] = bitcast<vec4<f32>>(xq[base + k]);
          }
        }
      }
      for (var u = 0u; u < NX && FUSEQ == 0u; u++) {
        let e = li + u * NT;
        let t = e / (2u * KB);
        let h = e % (2u * KB);
        let b = kb0 + h / 2u;
        px[u] = vec4<u32>(0u);
        pxs[u] = 0.0;
        if (e < TN * KB * 2u && t0 + t < p.n && b < nb) {
          let blk = (t0 + t) * nb + b;
          px[u] = xq[2u * blk + (h & 1u)];
          pxs[u] = xs[blk];
        }
      }
    }
    if (st > 0u) {
      for (var kk = 0u; kk < KB; kk++) {
        var bx: array<vec4<u32>, 16>;
        var sx: array<f32, 8>;
        var mx: array<f32, 8>;  // Q4_K: x_scale * sum(xq)
        for (var j = 0u; j < RN; j++) {
          let c = tc + j * TC;
          bx[2u * j] = xt[c * P4 + 2u * kk];
          bx[2u * j + 1u] = xt[c * P4 + 2u * kk + 1u];
          sx[j] = xsc[c * KB + kk];
          if (QT == 3u) {
            mx[j] = sx[j] * (xsm[2u * (c * KB + kk)] + xsm[2u * (c * KB + kk) + 1u]);
          }
        }
        for (var i = 0u; i < RM; i++) {
          let r = tr + i * TR;
          let a0 = wt[r * P4 + 2u * kk];
          let a1 = wt[r * P4 + 2u * kk + 1u];
          let sw = wsc[r * KB + kk];
          for (var j = 0u; j < RN; j++) {
            let d = dot8(a0, a1, bx[2u * j], bx[2u * j + 1u]);
            acc[i][j] = fma(to_f32(d), sw * sx[j], acc[i][j]);
            if (QT == 3u) {
              acc[i][j] = fma(-wof[r * KB + kk], mx[j], acc[i][j]);
            }
          }
        }
      }
    }
    workgroupBarrier();
    if (st < ns) {
      // W: TM rows x KB blocks, expanded to int8; x: TN tokens x KB blocks.
      for (var u = 0u; u < NW; u++) {
        let e = li + u * NT;
        if (e < TM * KB) {
          let r = e / KB;
          let kk = e % KB;
          if (QT == 3u || QT == 5u) {
            wt[r * P4 + 2u * kk] = pw[u];
            wt[r * P4 + 2u * kk + 1u] = pw2[u];
            wof[r * KB + kk] = po[u];
          } else {
            let q = pw[u];
            let e0 = expand(q.x, pz[u]);
            let e1 = expand(q.y, pz[u]);
            let e2 = expand(q.z, pz[u]);
            let e3 = expand(q.w, pz[u]);
            wt[r * P4 + 2u * kk] = vec4<u32>(e0.x, e0.y, e1.x, e1.y);
            wt[r * P4 + 2u * kk + 1u] = vec4<u32>(e2.x, e2.y, e3.x, e3.y);
          }
          wsc[r * KB + kk] = ps[u];
        }
      }
      if (FUSEQ == 1u && li < TN * KB) {
        // quant_x8.wgsl's arithmetic (the same function), for the block loaded above.
        var wds: array<u32, 8>;
        let scale = quant_block(&pxf, &wds);
        let t = li / KB;
        let kk = li % KB;
        let h0 = vec4<u32>(wds[0], wds[1], wds[2], wds[3]);
        let h1 = vec4<u32>(wds[4], wds[5], wds[6], wds[7]);
        xt[t * P4 + 2u * kk] = h0;
        xt[t * P4 + 2u * kk + 1u] = h1;
        xsc[t * KB + kk] = scale;
        if (QT == 3u) {
          xsm[2u * (t * KB + kk)] = half_sum(h0);
          xsm[2u * (t * KB + kk) + 1u] = half_sum(h1);
        }
      }
      for (var u = 0u; u < NX && FUSEQ == 0u; u++) {
        let e = li + u * NT;
        if (e < TN * KB * 2u) {
          let t = e / (2u * KB);
          let h = e % (2u * KB);
          xt[t * P4 + h] = px[u];
          if (QT == 3u) {
            xsm[t * KB * 2u + h] = half_sum(px[u]);
          }
          if ((h & 1u) == 0u) {
            xsc[t * KB + h / 2u] = pxs[u];
          }
        }
      }
    }
    workgroupBarrier();
  }
  for (var i = 0u; i < RM; i++) {
    let row = r0 + tr + i * TR;
    if (row >= p.rows) {
      continue;
    }
    for (var j = 0u; j < RN; j++) {
      let t = t0 + tc + j * TC;
      if (t < p.n) {
        let dst = t * p.y_stride + p.y_off + row;
        var v = acc[i][j];
        if (p.acc != 0u) {
          v += y[dst];
        }
        y[dst] = v;
      }
    }
  }
}
