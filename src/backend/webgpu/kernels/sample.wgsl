// The decode loop's token choice: ids[slot] = the next token from logits,
// greedy or sampled. One workgroup does it all; this file follows
// src/backend/sampling.h step for step (the C reference the tests compare
// against):
//   m = max logit (greedy: the first index holding it)
//   z_i = (logit_i - m) / temperature
//   t = max(-64, log(min_p)); top-k and top-p raise t by 24-step bisections
//   draw = argmax over z_i >= t of z_i - log(-log(u_i)), u_i from a hash of
//          (seed, step, i).
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

fn hash(v: u32) -> u32 {
  let state = v * 747796405u + 2891336453u;
  let word = ((state >> ((state >> 28u) + 4u)) ^ state) * 277803737u;
  return (word >> 22u) ^ word;
}

fn uniform01(i: u32) -> f32 {
  let h = hash(hash(p.seed + p.step * 0x9E3779B9u) ^ i);
  return (f32(h >> 8u) + 0.5) * (1.0 / 16777216.0);
}

// Workgroup max of (value, index): larger value wins, lower index on ties.
fn reduce_argmax(li: u32, v: f32, idx: u32) -> u32 {
  red_f[li] = v;
  red_u[li] = idx;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s = s >> 1u) {
    if (li < s) {
      let ov = red_f[li + s];
      let oi = red_u[li + s];
      if (ov > red_f[li] || (ov == red_f[li] && oi < red_u[li])) {
        red_f[li] = ov;
        red_u[li] = oi;
      }
    }
    workgroupBarrier();
  }
  let r = red_u[0];
  workgroupBarrier();
  return r;
}

fn reduce_sum(li: u32, v: f32) -> f32 {
  red_f[li] = v;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s = s >> 1u) {
    if (li < s) {
      red_f[li] = red_f[li] + red_f[li + s];
    }
    workgroupBarrier();
  }
  let r = red_f[0];
  workgroupBarrier();
  return r;
}

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
    let pbest = reduce_argmax(li, pv, pi);
    if (li == 0u) {
      ids[p.slot] = pbest;
    }
    return;
  }
  // 1. argmax, lowest index on ties
  var bv = -3.0e38;
  var bi = 0xFFFFFFFFu;
  for (var i = li; i < n; i = i + WG) {
    let v = logits[i];
    if (v > bv || bi == 0xFFFFFFFFu) {
      bv = v;
      bi = i;
    }
  }
  let best = reduce_argmax(li, bv, bi);
  if (p.temperature <= 0.0) {
    if (li == 0u) {
      ids[p.slot] = best;
    }
    return;
  }
  let m = logits[best];
  let inv_t = 1.0 / p.temperature;
  // 2. thresholds
  var t = -64.0;
  if (p.min_p > 0.0) {
    t = max(t, log(p.min_p));
  }
  if (p.top_k > 0u && p.top_k < n) {
    var lo = t;
    var hi = 0.0;
    for (var it = 0u; it < 24u; it = it + 1u) {
      let mid = 0.5 * (lo + hi);
      var cnt = 0.0;
      for (var i = li; i < n; i = i + WG) {
        if ((logits[i] - m) * inv_t >= mid) {
          cnt = cnt + 1.0;
        }
      }
      if (reduce_sum(li, cnt) >= f32(p.top_k)) {
        lo = mid;
      } else {
        hi = mid;
      }
    }
    t = lo;
  }
  if (p.top_p > 0.0 && p.top_p < 1.0) {
    var part = 0.0;
    for (var i = li; i < n; i = i + WG) {
      let z = (logits[i] - m) * inv_t;
      if (z >= t) {
        part = part + exp(z);
      }
    }
    let total = reduce_sum(li, part);
    var lo = t;
    var hi = 0.0;
    for (var it = 0u; it < 24u; it = it + 1u) {
      let mid = 0.5 * (lo + hi);
      var mass = 0.0;
      for (var i = li; i < n; i = i + WG) {
        let z = (logits[i] - m) * inv_t;
        if (z >= mid) {
          mass = mass + exp(z);
        }
      }
      if (reduce_sum(li, mass) >= p.top_p * total) {
        lo = mid;
      } else {
        hi = mid;
      }
    }
    t = lo;
  }
  // 3. Gumbel-max draw over the kept tokens
  var gv = -3.0e38;
  var gi = best;
  for (var i = li; i < n; i = i + WG) {
    let z = (logits[i] - m) * inv_t;
    if (z >= t) {
      let g = z - log(-log(uniform01(i)));
      if (g > gv) {
        gv = g;
        gi = i;
      }
    }
  }
  let pick = reduce_argmax(li, gv, gi);
  if (li == 0u) {
    ids[p.slot] = pick;
  }
}
