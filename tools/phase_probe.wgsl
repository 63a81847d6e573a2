// Phase probe (tools/phase_probe.c): what one phase of a persistent decode
// kernel costs on a device, piece by piece. Every workgroup of a co-resident
// grid runs ROUNDS rounds of [stage] [product] grid-barrier; the host times
// the dispatch and divides. MODE bits pick the pieces:
//   1  stage: every workgroup loads a COLS-float vector written by others in
//      the previous round and reduces its sum of squares (the RMSNorm input)
//   2  ... and scales it by norm weights loaded after the reduction (as
//      persist.wgsl's stage does)
//   4  ... norm weights loaded together with the vector instead
//   8  product A: rows of a Q4 matrix times the staged vector, the
//      persistent kernel's way (4 rows per subgroup pass, lanes over blocks)
//   16 product B: RB consecutive rows per subgroup, all of a pass's loads
//      issued before any is used (BL blocks per lane)
//   32 product C: product B's one pass (ROWS <= subgroups * RB) with the
//      weights loaded right after the grid barrier, before the stage
//   64 ... loaded before the grid barrier instead (do the barrier's fences
//      wait for loads in flight?)
// Weights cycle through NMAT matrices so that they stream from memory, not
// from the L2, as a real decode step's do.
enable subgroups;
diagnostic(off, subgroup_uniformity);

override NWG: u32 = 1;
override ROUNDS: u32 = 1;
override WG: u32 = 256;
override MODE: u32 = 0;
override ROWS: u32 = 1024;
override COLS: u32 = 1024;
override NMAT: u32 = 1;
override RB: u32 = 4;
override BL: u32 = 1;

const RBMAX: u32 = 8u;
const BLMAX: u32 = 4u;
const VEC: u32 = 8192u; // words between the two halves of the vector ping-pong

@group(0) @binding(0) var<storage, read> Wv: array<vec4<u32>>;
@group(0) @binding(1) var<storage, read> Wu: array<u32>;
@group(0) @binding(2) var<storage, read_write> S: array<u32>;
@group(0) @binding(3) var<storage, read_write> ctr: array<atomic<u32>>;

var<workgroup> xs: array<vec4<f32>, 1280>;
var<workgroup> red: array<f32, 64>;

fn grid_sync(goal: u32, li: u32) {
  storageBarrier();
  workgroupBarrier();
  if (li == 0u) {
    atomicAdd(&ctr[0], 1u);
    for (var it = 0u; it < (1u << 26u); it++) { if (atomicLoad(&ctr[0]) >= goal) { break; } }
  }
  workgroupBarrier();
  storageBarrier();
}

fn wg_sum(li: u32, sli: u32, sgs: u32, v: f32) -> f32 {
  workgroupBarrier();
  let s = subgroupAdd(v);
  if (sli == 0u) { red[li / sgs] = s; }
  workgroupBarrier();
  var t = 0.0;
  for (var i = 0u; i < WG / sgs; i++) { t += red[i]; }
  return t;
}

fn sf(i: u32) -> f32 { return bitcast<f32>(S[i]); }
// Scales and norm weights are random words here: made small finite numbers.
fn wf(i: u32) -> f32 { return f32(Wu[i] & 0xffffu) * (1.0 / 65536.0); }

// The words of one matrix: nibbles (ROWS * nb vec4s), then ROWS * nb scales.
fn mat_words() -> u32 { return ROWS * (COLS / 32u) * 5u; }

fn stage(src: u32, wn: u32, li: u32, sl: u32, sgs: u32) {
  let n4 = COLS / 4u;
  var ss = 0.0;
  var wpre = array<vec4<f32>, 5>();
  for (var k = 0u; k < 5u; k++) {
    let i = li + k * WG;
    if (i < n4) {
      let b = src + 4u * i;
      let v = vec4<f32>(sf(b), sf(b + 1u), sf(b + 2u), sf(b + 3u));
      if ((MODE & 4u) != 0u) { wpre[k] = vec4<f32>(wf(wn + 4u * i), wf(wn + 4u * i + 1u), wf(wn + 4u * i + 2u), wf(wn + 4u * i + 3u)); }
      xs[i] = v;
      ss += dot(v, v);
    }
  }
  let tot = wg_sum(li, sl, sgs, ss);
  let inv = inverseSqrt(tot / f32(COLS) + 1e-5);
  if ((MODE & 6u) != 0u) {
    for (var k = 0u; k < 5u; k++) {
      let i = li + k * WG;
      if (i < n4) {
        var w = wpre[k];
        if ((MODE & 4u) == 0u) { w = vec4<f32>(wf(wn + 4u * i), wf(wn + 4u * i + 1u), wf(wn + 4u * i + 2u), wf(wn + 4u * i + 3u)); }
        xs[i] = xs[i] * inv * w;
      }
    }
  }
  workgroupBarrier();
}

fn nib_lo(w: u32) -> vec4<f32> { return vec4<f32>(f32(w & 15u), f32((w >> 4u) & 15u), f32((w >> 8u) & 15u), f32((w >> 12u) & 15u)); }
fn nib_hi(w: u32) -> vec4<f32> { return vec4<f32>(f32((w >> 16u) & 15u), f32((w >> 20u) & 15u), f32((w >> 24u) & 15u), f32(w >> 28u)); }

// Block b's share of a row whose 32 nibbles are w and scale sc.
fn blk_dot(w: vec4<u32>, sc: f32, b: u32) -> f32 {
  var a = 0.0;
  var xsum = 0.0;
  for (var j = 0u; j < 4u; j++) {
    let x0 = xs[b * 8u + 2u * j];
    let x1 = xs[b * 8u + 2u * j + 1u];
    a += dot(nib_lo(w[j]), x0) + dot(nib_hi(w[j]), x1);
    xsum += dot(x0, vec4<f32>(1.0)) + dot(x1, vec4<f32>(1.0));
  }
  return sc * (a - 8.0 * xsum);
}

fn blk(m0: u32, r: u32, b: u32) -> f32 {
  let nb = COLS / 32u;
  let g = r * nb + b;
  return blk_dot(Wv[m0 / 4u + g], wf(m0 + ROWS * nb * 4u + g), b);
}

fn product_a(m0: u32, dst: u32, gsg: u32, nsg: u32, sl: u32, sgs: u32) {
  let nb = COLS / 32u;
  for (var r0 = gsg; r0 < ROWS; r0 += 4u * nsg) {
    let r = vec4<u32>(r0, r0 + nsg, r0 + 2u * nsg, r0 + 3u * nsg);
    let rc = min(r, vec4<u32>(ROWS - 1u));
    var a = vec4<f32>(0.0);
    for (var b = sl; b < nb; b += sgs) {
      a += vec4<f32>(blk(m0, rc.x, b), blk(m0, rc.y, b), blk(m0, rc.z, b), blk(m0, rc.w, b));
    }
    a = subgroupAdd(a);
    if (sl == 0u) {
      for (var k = 0u; k < 4u; k++) { if (r[k] < ROWS) { S[dst + r[k]] = bitcast<u32>(a[k]); } }
    }
  }
}

fn product_b(m0: u32, dst: u32, gsg: u32, nsg: u32, sl: u32, sgs: u32) {
  let nb = COLS / 32u;
  let q0 = m0 / 4u;
  let s0 = m0 + ROWS * nb * 4u;
  for (var p0 = gsg * RB; p0 < ROWS; p0 += nsg * RB) {
    var w: array<vec4<u32>, 32>;
    var sc: array<f32, 32>;
    for (var k = 0u; k < RB; k++) {
      for (var j = 0u; j < BL; j++) {
        let r = min(p0 + k, ROWS - 1u);
        let b = min(sl + j * sgs, nb - 1u);
        w[k * BLMAX + j] = Wv[q0 + r * nb + b];
        sc[k * BLMAX + j] = wf(s0 + r * nb + b);
      }
    }
    var a: array<f32, 8>;
    for (var k = 0u; k < RB; k++) {
      var t = 0.0;
      for (var j = 0u; j < BL; j++) {
        let b = sl + j * sgs;
        if (b < nb) { t += blk_dot(w[k * BLMAX + j], sc[k * BLMAX + j], b); }
      }
      a[k] = subgroupAdd(t);
    }
    if (sl == 0u) {
      for (var k = 0u; k < RB; k++) { if (p0 + k < ROWS) { S[dst + p0 + k] = bitcast<u32>(a[k]); } }
    }
  }
}

struct Pass { w: array<vec4<u32>, 32>, sc: array<f32, 32>, }

fn load_pass(m0: u32, p0: u32, sl: u32, sgs: u32) -> Pass {
  let nb = COLS / 32u;
  var q: Pass;
  for (var k = 0u; k < RB; k++) {
    for (var j = 0u; j < BL; j++) {
      let r = min(p0 + k, ROWS - 1u);
      let b = min(sl + j * sgs, nb - 1u);
      q.w[k * BLMAX + j] = Wv[m0 / 4u + r * nb + b];
      q.sc[k * BLMAX + j] = wf(m0 + ROWS * nb * 4u + r * nb + b);
    }
  }
  return q;
}

fn use_pass(q: Pass, p0: u32, dst: u32, sl: u32, sgs: u32) {
  let nb = COLS / 32u;
  var a: array<f32, 8>;
  for (var k = 0u; k < RB; k++) {
    var t = 0.0;
    for (var j = 0u; j < BL; j++) {
      let b = sl + j * sgs;
      if (b < nb) { t += blk_dot(q.w[k * BLMAX + j], q.sc[k * BLMAX + j], b); }
    }
    a[k] = subgroupAdd(t);
  }
  if (sl == 0u) {
    for (var k = 0u; k < RB; k++) { if (p0 + k < ROWS) { S[dst + p0 + k] = bitcast<u32>(a[k]); } }
  }
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid3: vec3<u32>, @builtin(local_invocation_index) li: u32,
        @builtin(subgroup_invocation_id) sl: u32, @builtin(subgroup_size) sgs: u32) {
  let wid = wid3.x;
  let nsgw = WG / sgs;
  let gsg = wid * nsgw + li / sgs;
  let nsg = NWG * nsgw;
  let wn = NMAT * mat_words(); // norm weights after the matrices
  var pre: Pass;
  if ((MODE & 64u) != 0u) { pre = load_pass(0u, gsg * RB, sl, sgs); }
  for (var r = 0u; r < ROUNDS; r++) {
    let src = (r & 1u) * VEC;
    let dst = VEC - src;
    let m0 = (r % NMAT) * mat_words();
    if ((MODE & 96u) == 32u) { pre = load_pass(m0, gsg * RB, sl, sgs); }
    if ((MODE & 7u) != 0u) { stage(src, wn, li, sl, sgs); }
    if ((MODE & 8u) != 0u) { product_a(m0, dst, gsg, nsg, sl, sgs); }
    if ((MODE & 16u) != 0u) { product_b(m0, dst, gsg, nsg, sl, sgs); }
    if ((MODE & 32u) != 0u) { use_pass(pre, gsg * RB, dst, sl, sgs); }
    if ((MODE & 64u) != 0u) { pre = load_pass(((r + 1u) % NMAT) * mat_words(), gsg * RB, sl, sgs); }
    grid_sync((r + 1u) * NWG, li);
  }
}
