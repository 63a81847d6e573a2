// The Gated DeltaNet decode core (dn_decode.wgsl, whose arithmetic it
// shares through dn_decode_head.wgsli) of one token in each of `count`
// sequences, a batched decode step: entry i of the row table is (row, c0,
// s0, pos): the token is row `row` of proj (rows of prow floats) and of
// outv (rows of vh * dv: the gated output, or with ns > 1 the raw one that
// dn_norm_rows.wgsl normalises), at position pos of its sequence, whose
// conv ring and recurrent state start at words c0 of cstate and s0 of st
// (the layer's states of all slots, backend.h buf_new_slots). Grid: x =
// vh * ns (the one-token dispatch's workgroups), y = count.
enable subgroups;

override WG: u32 = 256; // threads, CW * IG
override CW: u32 = 16;  // value columns per workgroup (the slice)
override NJ: u32 = 8u;  // state rows per thread: ceil(k_dim / (WG / CW))
const MAXR: u32 = 256u; // most entries (WISP_MAX_ROWS)

struct Params {
  kh: u32,
  vh: u32,
  dk: u32,
  dv: u32,
  L: u32,
  ns: u32,
  eps: f32,
  count: u32,
  prow: u32, // floats of a projection row
  pad0: u32,
  pad1: u32,
  pad2: u32,
  rows: array<vec4<u32>, MAXR>,
}

@group(0) @binding(8) var<uniform> p: Params;

// #include "dn_decode_head.wgsli"

// #include "dn_common.wgsli"

// #include "sg_reduce.wgsli"

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32,
        @builtin(subgroup_invocation_id) sli: u32, @builtin(subgroup_size) sgs: u32) {
  let i = wid.y;
  if (wid.x >= p.vh * p.ns || i >= p.count) {
    return;
  }
  let e = p.rows[i];
  dn_token(wid.x, Tok(e.w, e.x * p.prow, e.y, e.z, e.x * p.vh * p.dv), li, sli, sgs);
}
