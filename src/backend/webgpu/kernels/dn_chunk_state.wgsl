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
// Thread (r, e): column e = li % CB, row group r = li / CB of R = WG / CB;
// it takes rows r, r + R, ... of U and O and state rows r, r + R, ... of S.
override WG: u32 = 256;
override C: u32 = 64;   // tokens a chunk (a multiple of R)
override CB: u32 = 16;  // value columns a workgroup
override DK: u32 = 128; // k_dim (a constant, so that the loops over the
                        // state's rows unroll and the arrays stay in registers)
const MAXJ: u32 = 8u;   // most rows of U a thread: C / R
const MAXI: u32 = 32u;  // most state rows a thread: ceil(DK / R)

struct Params {
  n: u32,       // tokens of the call
  t0: u32,      // first token of the wave
  chunks: u32,  // chunks in the wave
  vh: u32,      // v heads
  dv: u32,
  blk: u32,     // floats per prep block
  pad0: u32,
  pad1: u32,
}

@group(0) @binding(0) var<storage, read> prep: array<f32>;
@group(0) @binding(1) var<storage, read_write> st: array<f32>;
@group(0) @binding(2) var<storage, read_write> raw: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

var<workgroup> S: array<f32, DK * CB>;
var<workgroup> U: array<f32, C * CB>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
  let dk = DK;
  let dv = p.dv;
  let nb = (dv + CB - 1u) / CB;
  let h = wid.x / nb;
  let e = li % CB;
  let col = (wid.x % nb) * CB + e;
  let valid = col < dv;
  let R = WG / CB;
  let r = li / CB;
  let NJ = C / R;
  let NI = (DK + R - 1u) / R;
  let V = p.vh * dv;
  let sb = h * dk * dv;
  for (var i = r; i < dk; i += R) {
    var s = 0.0;
    if (valid) {
      s = st[sb + i * dv + col];
    }
    S[i * CB + e] = s;
  }
  workgroupBarrier();
  for (var ci = 0u; ci < p.chunks; ci++) {
    let base = (ci * p.vh + h) * p.blk;
    let oW = base;
    let oU = oW + C * dk;
    let oQ = oU + C * dv;
    let oK = oQ + C * dk;
    let oM = oK + C * dk;
    let oG = oM + 2u * C * C;
    let tok0 = p.t0 + ci * C;
    let c = min(C, p.n - tok0);
    // U = U' - W S; then O's Qg S in the same pass over S's rows
    var u: array<f32, MAXJ>;
    var o: array<f32, MAXJ>;
    for (var j = 0u; j < NJ; j++) {
      let t = r + j * R;
      u[j] = 0.0;
      if (valid) {
        u[j] = prep[oU + t * dv + col];
      }
      o[j] = 0.0;
    }
    for (var i = 0u; i < dk; i++) {
      let s = S[i * CB + e];
      for (var j = 0u; j < NJ; j++) {
        let t = r + j * R;
        u[j] -= prep[oW + t * dk + i] * s;
        o[j] += prep[oQ + t * dk + i] * s;
      }
    }
    for (var j = 0u; j < NJ; j++) {
      U[(r + j * R) * CB + e] = u[j];
    }
    workgroupBarrier();
    // O += M U (M is zero above the diagonal and past c)
    for (var j = 0u; j < NJ; j++) {
      let t = r + j * R;
      var acc = o[j];
      for (var s = 0u; s <= t; s++) {
        acc += prep[oM + t * C + s] * U[s * CB + e];
      }
      if (valid && t < c) {
        raw[(tok0 + t) * V + h * dv + col] = acc;
      }
    }
    // S = gamma_last S + Kd^T U (every thread's reads of S are done: the
    // barrier above)
    let gl = prep[oG];
    var acc: array<f32, MAXI>;
    for (var j = 0u; j < NI; j++) {
      let i = r + j * R;
      acc[j] = 0.0;
      if (i < DK) {
        acc[j] = gl * S[i * CB + e];
      }
    }
    for (var s = 0u; s < C; s++) { // rows of Kd and U past c are zero
      let us = U[s * CB + e];
      for (var j = 0u; j < NI; j++) {
        let i = r + j * R;
        if (i < DK) {
          acc[j] += prep[oK + s * DK + i] * us;
        }
      }
    }
    for (var j = 0u; j < NI; j++) {
      let i = r + j * R;
      if (i < DK) {
        S[i * CB + e] = acc[j];
      }
    }
    workgroupBarrier(); // S and U are read and rewritten by the next chunk
  }
  for (var i = r; i < dk; i += R) {
    if (valid) {
      st[sb + i * dv + col] = S[i * CB + e];
    }
  }
}
