// Chunked Gated DeltaNet, step 2 of 3 (wgpu_deltanet.c; the algebra in
// dn_chunk_prep.wgsl): the wave's chunks in order, carrying the state from
// one to the next. Column e of the state, the values, the u and the outputs
// only ever meets column e, so a workgroup takes CB value columns of one
// v-head (grid x = v_heads * ceil(v_dim / CB)) and keeps their state slice
// S [dk][CB] in workgroup memory for the whole wave, loaded from and stored
// back to the state buffer decode uses ([v_heads][dk][dv]). Per chunk, from
// its prep block:
//   U = U' - W S             (the chunk's u, [C][CB], into workgroup memory)
//   O = Qg S + M U           (the raw outputs, before the gated norm)
//   S = gamma_last S + Kd^T U
//
// The walk over the chunks is a chain no other workgroup shortens, so the
// speed is that of one workgroup's loop: every read of W, Qg, Kd and M is a
// vec4 (their rows have a pitch of dk rounded up to 4, zero past dk, and M's
// of C), and S and U sit in workgroup memory as vec4s of 4 consecutive rows
// of one column, so a thread's step is a vec4 from workgroup memory, a few
// vec4 from the chunk's block and dot products. Thread (r, e) of R = WG /
// CB row groups: column e = li % CB, r = li / CB; it owns rows 4 * (r * NJ4
// + g) .. + 3 of U and O (g < NJ4) and the vec4 groups r * NI4 + g of S's
// rows (g < NI4).
override WG: u32 = 256;   // R * CB
override C: u32 = 64;     // tokens a chunk: a multiple of 4 * R, at most 8 * R
override CB: u32 = 16;    // value columns a workgroup
override DK: u32 = 128;   // k_dim (a constant: the loops unroll, the arrays stay in registers)
override DK4: u32 = (DK + 3u) / 4u;      // vec4s a row of W, Qg and Kd
override R: u32 = WG / CB;               // row groups
override NJ4: u32 = C / (4u * R);        // vec4 groups of U's and O's rows a thread
override NI4: u32 = (DK4 + R - 1u) / R;  // vec4 groups of S's rows a thread
override SP: u32 = DK4 + 1u;  // vec4s a column of S takes in S4 (the 1 spreads the columns over the banks)
override UP: u32 = C / 4u + 1u;
const MAXJ4: u32 = 2u;
const MAXI4: u32 = 8u;  // dk <= 256 with R >= 8
// Loads in flight: each loop over a chunk's block takes a batch of UN steps
// at a time, issuing the batch's loads (up to LB vec4s) before its sums, so
// a thread waits for the memory once a batch instead of once a step (the
// block was just written by dn_chunk_prep: its reads come from L2).
// UNROLL 1 (tuning dnChunkUnroll=1): a step a batch.
override UNROLL: u32 = 4u;
const LB: u32 = 32u;
const MAXUN: u32 = 4u;  // UNROLL's most (tuning dnChunkUnroll, 1..4)
override UN1: u32 = max(1u, min(UNROLL, LB / (8u * NJ4)));      // W and Qg: 8 NJ4 loads a step
override UN2: u32 = max(1u, min(UNROLL, LB / 4u));              // M: 4 loads a step
override UN3: u32 = max(1u, min(UNROLL, LB / (4u * NI4)));      // Kd: 4 NI4 loads a step

struct Params {
  n: u32,       // tokens of the call
  t0: u32,      // first token of the wave
  chunks: u32,  // chunks in the wave
  vh: u32,      // v heads
  dv: u32,
  blk: u32,     // floats per prep block (a multiple of 4)
  pad0: u32,
  pad1: u32,
}

@group(0) @binding(0) var<storage, read> prep: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> st: array<f32>;
@group(0) @binding(2) var<storage, read_write> raw: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

var<workgroup> S4: array<vec4<f32>, CB * SP>; // S4[e * SP + i4] = S[4 i4 .. 4 i4 + 3][e]
var<workgroup> U4: array<vec4<f32>, CB * UP>; // U4[e * UP + t4] = U[4 t4 .. 4 t4 + 3][e]

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
  let dv = p.dv;
  let nb = (dv + CB - 1u) / CB;
  let h = wid.x / nb;
  let e = li % CB;
  let col = (wid.x % nb) * CB + e;
  let valid = col < dv;
  let r = li / CB;
  let V = p.vh * dv;
  let sb = h * DK * dv;
  for (var g = 0u; g < NI4; g++) {
    let i4 = r * NI4 + g;
    if (i4 < DK4) {
      var s = vec4<f32>(0.0);
      for (var k = 0u; k < 4u; k++) {
        let i = 4u * i4 + k;
        if (valid && i < DK) {
          s[k] = st[sb + i * dv + col];
        }
      }
      S4[e * SP + i4] = s;
    }
  }
  workgroupBarrier();
  for (var ci = 0u; ci < p.chunks; ci++) {
    // the block's parts in vec4s: W, U' (read a float at a time), Qg, Kd, M, F, gamma_last
    let oW = (ci * p.vh + h) * (p.blk / 4u);
    let oU = oW + C * DK4;
    let oQ = oU + C * dv / 4u;
    let oK = oQ + C * DK4;
    let oM = oK + C * DK4;
    let oG = oM + C * C / 2u;
    let tok0 = p.t0 + ci * C;
    let c = min(C, p.n - tok0);
    // U = U' - W S; then O's Qg S in the same pass over S's rows
    var u: array<vec4<f32>, MAXJ4>;
    var o: array<vec4<f32>, MAXJ4>;
    for (var g = 0u; g < NJ4; g++) {
      let t0 = 4u * (r * NJ4 + g);
      var v = vec4<f32>(0.0);
      if (valid) {
        for (var k = 0u; k < 4u; k++) {
          let f = 4u * oU + (t0 + k) * dv + col;
          v[k] = prep[f / 4u][f % 4u];
        }
      }
      u[g] = v;
      o[g] = vec4<f32>(0.0);
    }
    for (var i0 = 0u; i0 < DK4; i0 += UN1) {
      // the batch's loads first (UN1 vec4 groups of S's rows), then its sums
      var sv: array<vec4<f32>, MAXUN>;
      var wv: array<vec4<f32>, LB>; // [(ub * NJ4 + g) * 4 + k]
      var qv: array<vec4<f32>, LB>;
      for (var ub = 0u; ub < UN1; ub++) {
        let i4 = i0 + ub;
        sv[ub] = vec4<f32>(0.0);
        if (i4 < DK4) {
          sv[ub] = S4[e * SP + i4];
        }
        for (var g = 0u; g < NJ4; g++) {
          let t0 = 4u * (r * NJ4 + g);
          for (var k = 0u; k < 4u; k++) {
            let b = (ub * NJ4 + g) * 4u + k;
            wv[b] = vec4<f32>(0.0);
            qv[b] = vec4<f32>(0.0);
            if (i4 < DK4) {
              wv[b] = prep[oW + (t0 + k) * DK4 + i4];
              qv[b] = prep[oQ + (t0 + k) * DK4 + i4];
            }
          }
        }
      }
      for (var ub = 0u; ub < UN1; ub++) {
        for (var g = 0u; g < NJ4; g++) {
          for (var k = 0u; k < 4u; k++) {
            let b = (ub * NJ4 + g) * 4u + k;
            u[g][k] -= dot(wv[b], sv[ub]);
            o[g][k] += dot(qv[b], sv[ub]);
          }
        }
      }
    }
    for (var g = 0u; g < NJ4; g++) {
      U4[e * UP + r * NJ4 + g] = u[g];
    }
    workgroupBarrier();
    // O += M U (M is zero above the diagonal and past c: rows t4's four
    // need the vec4 groups of U up to their own)
    for (var g = 0u; g < NJ4; g++) {
      let t4 = r * NJ4 + g;
      var acc = o[g];
      for (var s0 = 0u; s0 <= t4; s0 += UN2) {
        var mv: array<vec4<f32>, LB>; // [ub * 4 + k]
        for (var ub = 0u; ub < UN2; ub++) {
          for (var k = 0u; k < 4u; k++) {
            mv[ub * 4u + k] = vec4<f32>(0.0);
            if (s0 + ub <= t4) {
              mv[ub * 4u + k] = prep[oM + (4u * t4 + k) * (C / 4u) + s0 + ub];
            }
          }
        }
        for (var ub = 0u; ub < UN2 && s0 + ub <= t4; ub++) {
          let us = U4[e * UP + s0 + ub];
          for (var k = 0u; k < 4u; k++) {
            acc[k] += dot(mv[ub * 4u + k], us);
          }
        }
      }
      for (var k = 0u; k < 4u; k++) {
        let t = 4u * t4 + k;
        if (valid && t < c) {
          raw[(tok0 + t) * V + h * dv + col] = acc[k];
        }
      }
    }
    // S = gamma_last S + Kd^T U (every thread's reads of S are done: the
    // barrier above; a thread rewrites only its own rows)
    let gl = prep[oG].x;
    var acc: array<vec4<f32>, MAXI4>;
    for (var g = 0u; g < NI4; g++) {
      let i4 = r * NI4 + g;
      acc[g] = vec4<f32>(0.0);
      if (i4 < DK4) {
        acc[g] = gl * S4[e * SP + i4];
      }
    }
    for (var s0 = 0u; s0 < C / 4u; s0 += UN3) { // rows of Kd and U past c are zero
      var kv: array<vec4<f32>, LB>; // [(ub * 4 + k) * NI4 + g]
      for (var ub = 0u; ub < UN3; ub++) {
        for (var k = 0u; k < 4u; k++) {
          for (var g = 0u; g < NI4; g++) {
            let i4 = r * NI4 + g;
            let b = (ub * 4u + k) * NI4 + g;
            kv[b] = vec4<f32>(0.0);
            if (i4 < DK4) {
              kv[b] = prep[oK + (4u * (s0 + ub) + k) * DK4 + i4];
            }
          }
        }
      }
      for (var ub = 0u; ub < UN3; ub++) {
        let us = U4[e * UP + s0 + ub];
        for (var k = 0u; k < 4u; k++) {
          for (var g = 0u; g < NI4; g++) {
            acc[g] += kv[(ub * 4u + k) * NI4 + g] * us[k];
          }
        }
      }
    }
    for (var g = 0u; g < NI4; g++) {
      let i4 = r * NI4 + g;
      if (i4 < DK4) {
        S4[e * SP + i4] = acc[g];
      }
    }
    workgroupBarrier(); // S and U are read and rewritten by the next chunk
  }
  for (var g = 0u; g < NI4; g++) {
    let i4 = r * NI4 + g;
    if (i4 < DK4) {
      let s = S4[e * SP + i4];
      for (var k = 0u; k < 4u; k++) {
        let i = 4u * i4 + k;
        if (valid && i < DK) {
          st[sb + i * dv + col] = s[k];
        }
      }
    }
  }
}
