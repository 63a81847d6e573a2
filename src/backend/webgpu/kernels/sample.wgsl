// The decode loop's token choice: ids[slot] = the next token from logits,
// greedy or sampled. One workgroup does it all, by sample_draw.wgsli, which
// follows src/backend/sampling.h step for step (the C reference the tests
// compare against).
//
// PARTS = 1 (greedy only): `logits` holds p.vocab (value, index bits) pairs
// written by matvec.wgsl with ARGMAX = 1, one per workgroup of the head
// product, in row order; the pick is the largest value, lowest index on ties.
override WG: u32 = 256;
override PARTS: u32 = 0u;

struct Params {
  vocab: u32,
  top_k: u32,
  seed: u32,
  step: u32,
  slot: u32,
  pad0: u32,
  pad1: u32,
  pad2: u32,
  temperature: f32,
  top_p: f32,
  min_p: f32,
  pad3: f32,
}

@group(0) @binding(0) var<storage, read> logits: array<f32>;
@group(0) @binding(1) var<storage, read_write> ids: array<u32>;
@group(0) @binding(2) var<uniform> p: Params;

var<workgroup> red_f: array<f32, WG>;
var<workgroup> red_u: array<u32, WG>;

fn draw_logit(i: u32) -> f32 { return logits[i]; }

// #include "sample_reduce.wgsli"

// #include "sample_draw.wgsli"

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) li: u32) {
  let n = p.vocab;
  if (PARTS == 1u) {
    var pv = -3.0e38;
    var pi = 0xFFFFFFFFu;
    for (var i = li; i < n; i = i + WG) {
      let v = logits[2u * i];
      let idx = bitcast<u32>(logits[2u * i + 1u]);
      if (idx != 0xFFFFFFFFu && (v > pv || pi == 0xFFFFFFFFu)) {
        pv = v;
        pi = idx;
      }
    }
    let pbest = draw_max(li, pv, pi);
    if (li == 0u) {
      ids[p.slot] = pbest;
    }
    return;
  }
  let pick = draw(li, Draw(p.vocab, p.top_k, p.seed, p.step, p.temperature, p.top_p, p.min_p), 0u);
  if (li == 0u) {
    ids[p.slot] = pick;
  }
}
