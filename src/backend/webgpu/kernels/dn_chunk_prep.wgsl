// Chunked Gated DeltaNet, step 1 of 3 (wgpu_deltanet.c, docs/webgpu.md):
// everything about one chunk of C tokens of one v-head that does not depend
// on the state, for every chunk of a wave at once (grid x = v_heads, y =
// chunks). The algebra is the CPU's (cpu_deltanet.c): with G_t = g_0 + ...
// + g_t the cumulative log decay inside the chunk, gamma_t = exp(G_t),
// d_ts = exp(G_t - G_s) (s <= t) and S0 the state before the chunk,
//   u_t = beta_t v_t - beta_t gamma_t k_t S0 - beta_t sum_{s<t} d_ts (k_t . k_s) u_s
//   o_t = gamma_t q_t S0 + sum_{s<=t} d_ts (q_t . k_s) u_s
//   S_next = gamma_last S0 + sum_s d_last,s k_s u_s^T
// The u are a unit lower triangular system, linear in S0: u = U' - W S0
// with U' and W the solutions for the right-hand sides beta v and beta
// gamma k (the WY form). This kernel solves for both (forward substitution,
// a thread per column of [W | U']), so that step 2 (dn_chunk_state.wgsl),
// which walks the chunks in order, only does dense products:
//   U = U' - W S0; O = Qg S0 + M U; S_next = gamma_last S0 + Kd^T U.
//
// Per token t < c (c = C, or fewer in the call's last chunk), from the conv
// outputs cv ([n][2K + V]) and the projection rows: q, k of the k-head kh =
// h / (v_heads / k_heads), L2-normalised (x * inverseSqrt(sum x^2 + 1e-6)),
// q scaled by k_dim^-0.5; beta = sigmoid(b[h]); g = -exp(A_log[h]) *
// softplus(a[h] + dt_bias[h]). G is summed in two floats (TwoSum) so that
// G_t - G_s keeps its small differences after a large decay.
//
// Out: one block of `blk` floats a (chunk, v-head) in prep, at (chunk *
// v_heads + h) * blk, rows t >= c zero; the rows of W, Qg and Kd have a
// pitch of dkp = dk rounded up to 4, the columns past dk zero, so that
// step 2 reads them as vec4:
//   W [C][dkp], U' [C][dv], Qg [C][dkp] = gamma_t q_t, Kd [C][dkp] = d_last,t k_t,
//   M [C][C] = d_ts (q_t . k_s) (s <= t), F [C][C] = -beta_t d_ts (k_t . k_s)
//   (s < t), then gamma_last.
// The solve reads F from workgroup memory (FSH = 1: F takes the gram
// tiles' space once the grams are done, so the device must allow C * C
// floats there, 20 KiB in all at C = 64) or, where the device allows less,
// back from prep after a storage barrier (FSH = 0; then F is stored in
// prep). Either way the same sums in the same order.
const WG: u32 = 256u;   // threads: 16 x 16 for the gram's blocks of RB x RB
override C: u32 = 64;   // tokens a chunk (WISP_WGPU_DN_CHUNK; the tiling holds 16, 32 or 64)
override FSH: u32 = 0;  // 1: F in workgroup memory (see above)
const KT: u32 = 16u;    // key dims a gram tile
const MAXC: u32 = 64u;
// floats of `tiles`: the gram's q and k tiles (2 * MAXC * KT), and with FSH
// F after them (C * C, the larger at C = 64)
override TILES: u32 = 2048;

struct Params {
  n: u32,    // tokens of the call
  t0: u32,   // first token of the wave
  kh: u32,   // k heads
  vh: u32,   // v heads
  dk: u32,   // k_dim
  dv: u32,   // v_dim
  row: u32,  // floats per projection row
  blk: u32,  // floats per prep block
  dkp: u32,  // row pitch of W, Qg and Kd: dk rounded up to 4
  pad0: u32,
  pad1: u32,
  pad2: u32,
}

@group(0) @binding(0) var<storage, read> proj: array<f32>;
@group(0) @binding(1) var<storage, read> cv: array<f32>;
@group(0) @binding(2) var<storage, read> a_log: array<f32>;
@group(0) @binding(3) var<storage, read> dt_bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> prep: array<f32>;
@group(0) @binding(5) var<uniform> p: Params;

var<workgroup> red: array<vec2<f32>, WG>;
var<workgroup> ghi: array<f32, MAXC>; // G_t in two floats
var<workgroup> glo: array<f32, MAXC>;
var<workgroup> gg: array<f32, MAXC>;  // g_t
var<workgroup> bet: array<f32, MAXC>;
var<workgroup> nq: array<f32, MAXC>;  // q_t's norm factor (with k_dim^-0.5)
var<workgroup> nk: array<f32, MAXC>;
var<workgroup> gam: array<f32, MAXC>; // gamma_t
var<workgroup> dl: array<f32, MAXC>;  // d_last,t
var<workgroup> tiles: array<f32, TILES>; // raw q then k of the chunk, KT dims; then F (FSH)

fn softplus(x: f32) -> f32 {
  if (x > 20.0) {
    return x;
  }
  return log(1.0 + exp(x));
}

// F[t][s] from workgroup memory (FSH) or from prep
fn f_at(t: u32, s: u32, oF: u32) -> f32 {
  if (FSH == 1u) {
    return tiles[t * C + s];
  }
  return prep[oF + t * C + s];
}

fn f_row4(t: u32, s: u32, oF: u32) -> vec4<f32> {
  return vec4<f32>(f_at(t, s, oF), f_at(t, s + 1u, oF), f_at(t, s + 2u, oF), f_at(t, s + 3u, oF));
}

// G_t - G_s
fn dG(t: u32, s: u32) -> f32 {
  return (ghi[t] - ghi[s]) + (glo[t] - glo[s]);
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
  let h = wid.x;
  let ci = wid.y;
  let dk = p.dk;
  let dv = p.dv;
  let K = p.kh * dk;
  let V = p.vh * dv;
  let cdim = 2u * K + V;
  let tok0 = p.t0 + ci * C;
  let c = min(C, p.n - tok0);
  let khd = h / (p.vh / p.kh);
  let qo = khd * dk;          // q of the k-head in a conv row
  let ko = K + khd * dk;      // its k
  let vo = 2u * K + h * dv;   // v of the v-head
  let dkp = p.dkp;
  let base = (ci * p.vh + h) * p.blk;
  let oW = base;
  let oU = oW + C * dkp;
  let oQ = oU + C * dv;
  let oK = oQ + C * dkp;
  let oM = oK + C * dkp;
  let oF = oM + C * C;
  let oG = oF + C * C;

  // norms: WG / C threads a token
  let tpt = WG / C;
  let nt = li / tpt;
  let part = li % tpt;
  var ss = vec2<f32>(0.0, 0.0);
  if (nt < c) {
    let r = (tok0 + nt) * cdim;
    for (var i = part; i < dk; i += tpt) {
      let q = cv[r + qo + i];
      let k = cv[r + ko + i];
      ss += vec2<f32>(q * q, k * k);
    }
  }
  red[li] = ss;
  if (li < C) {
    var b = 0.0;
    var g = 0.0;
    if (li < c) {
      let r = (tok0 + li) * p.row;
      b = 1.0 / (1.0 + exp(-proj[r + cdim + V + h]));
      g = -exp(a_log[h]) * softplus(proj[r + cdim + V + p.vh + h] + dt_bias[h]);
    }
    bet[li] = b;
    gg[li] = g;
  }
  workgroupBarrier();
  if (part == 0u && nt < C) {
    var tot = vec2<f32>(0.0, 0.0);
    for (var j = 0u; j < tpt; j++) {
      tot += red[li + j];
    }
    var fq = 0.0;
    var fk = 0.0;
    if (nt < c) {
      fq = inverseSqrt(tot.x + 1e-6) / sqrt(f32(dk));
      fk = inverseSqrt(tot.y + 1e-6);
    }
    nq[nt] = fq;
    nk[nt] = fk;
  }
  if (li == 0u) {
    var hi = 0.0;
    var lo = 0.0;
    for (var t = 0u; t < C; t++) {
      let g = gg[t];
      let s = hi + g;
      let gv = s - hi;
      lo += (hi - (s - gv)) + (g - gv);
      hi = s;
      ghi[t] = hi;
      glo[t] = lo;
    }
  }
  workgroupBarrier();
  if (li < C) {
    gam[li] = exp(ghi[li] + glo[li]);
    dl[li] = exp(dG(c - 1u, li));
  }
  workgroupBarrier();

  // Qg, Kd and gamma_last; W's columns past dk (the solve writes the others)
  for (var idx = li; idx < C * dkp; idx += WG) {
    let t = idx / dkp;
    let i = idx % dkp;
    var qg = 0.0;
    var kd = 0.0;
    if (i >= dk) {
      prep[oW + idx] = 0.0;
    } else if (t < c) {
      let r = (tok0 + t) * cdim;
      qg = cv[r + qo + i] * nq[t] * gam[t];
      kd = cv[r + ko + i] * nk[t] * dl[t];
    }
    prep[oQ + idx] = qg;
    prep[oK + idx] = kd;
  }
  if (li == 0u) {
    prep[oG] = gam[c - 1u];
  }

  // the grams K K^T and Q K^T of the chunk: thread (ty, tx) takes rows
  // ty * RB .. + RB by columns tx * RB .. + RB
  let RB = C / 16u;
  let ty = li / 16u;
  let tx = li % 16u;
  var kk: array<f32, 16>;
  var qk: array<f32, 16>;
  for (var j = 0u; j < 16u; j++) {
    kk[j] = 0.0;
    qk[j] = 0.0;
  }
  for (var i0 = 0u; i0 < dk; i0 += KT) {
    for (var idx = li; idx < C * KT; idx += WG) {
      let t = idx / KT;
      let i = i0 + idx % KT;
      var q = 0.0;
      var k = 0.0;
      if (t < c && i < dk) {
        let r = (tok0 + t) * cdim;
        q = cv[r + qo + i];
        k = cv[r + ko + i];
      }
      tiles[idx] = q;
      tiles[MAXC * KT + idx] = k;
    }
    workgroupBarrier();
    for (var ii = 0u; ii < KT; ii++) {
      for (var a = 0u; a < RB; a++) {
        let qa = tiles[(ty * RB + a) * KT + ii];
        let ka = tiles[MAXC * KT + (ty * RB + a) * KT + ii];
        for (var b = 0u; b < RB; b++) {
          let kb = tiles[MAXC * KT + (tx * RB + b) * KT + ii];
          kk[a * 4u + b] += ka * kb;
          qk[a * 4u + b] += qa * kb;
        }
      }
    }
    workgroupBarrier();
  }
  // M and F, zero outside their triangles and past c
  for (var a = 0u; a < RB; a++) {
    for (var b = 0u; b < RB; b++) {
      let t = ty * RB + a;
      let s = tx * RB + b;
      var m = 0.0;
      var f = 0.0;
      if (t < c && s <= t) {
        let d = exp(dG(t, s));
        m = d * qk[a * 4u + b] * nq[t] * nk[s];
        if (s < t) {
          f = -bet[t] * d * kk[a * 4u + b] * nk[t] * nk[s];
        }
      }
      prep[oM + t * C + s] = m;
      if (FSH == 1u) {
        tiles[t * C + s] = f; // the tiles' last reads were before the loop's barrier
      } else {
        prep[oF + t * C + s] = f;
      }
    }
  }
  // F is read by every thread below
  storageBarrier();
  workgroupBarrier();

  // [W | U'] by forward substitution, a thread per column: X_t = rhs_t +
  // sum_{s<t} F[t][s] X_s, rhs_t = beta_t gamma_t k_t (W) or beta_t v_t (U').
  // The column's X so far sits in x4 (vec4s of 4 consecutive t) and each
  // sum runs as four partial sums over s = 4i .. 4i + 3, added at the end:
  // four independent chains of products instead of one.
  var x4: array<vec4<f32>, MAXC / 4u>;
  for (var col = li; col < dk + dv; col += WG) {
    for (var t = 0u; t < C; t++) {
      var acc = 0.0;
      if (t < c) {
        let r = (tok0 + t) * cdim;
        if (col < dk) {
          acc = bet[t] * gam[t] * cv[r + ko + col] * nk[t];
        } else {
          acc = bet[t] * cv[r + vo + col - dk];
        }
        var part = vec4<f32>(0.0);
        for (var s4 = 0u; s4 < t / 4u; s4++) {
          part += f_row4(t, 4u * s4, oF) * x4[s4];
        }
        let s0 = t & ~3u; // the last, partial group: x4's entries at t and past are not set yet
        var tail = 0.0;
        for (var s = s0; s < t; s++) {
          tail += f_at(t, s, oF) * x4[s / 4u][s % 4u];
        }
        acc += ((part.x + part.y) + (part.z + part.w)) + tail;
      }
      x4[t / 4u][t % 4u] = acc;
      if (col < dk) {
        prep[oW + t * dkp + col] = acc;
      } else {
        prep[oU + t * dv + col - dk] = acc;
      }
    }
  }
}
