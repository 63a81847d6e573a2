// The repetition penalty, on the logits before the decode loop's token
// choice (src/backend/sampling.h, wisp_penalize_reference, step for step):
// hist[p.off .. p.off + p.n) holds token ids (u32; ids >= vocab are empty
// entries); each distinct id's logit is multiplied by 1/penalty (computed
// on the host) when positive, else by the penalty, once: only the thread of
// the id's first entry touches it, so no two threads write one logit.
// Grid: ceil(n / WG).
override WG: u32 = 64;

struct Params {
  vocab: u32,
  off: u32,
  n: u32,
  pad0: u32,
  penalty: f32,
  inv_penalty: f32,
  pad1: f32,
  pad2: f32,
}

@group(0) @binding(0) var<storage, read_write> logits: array<f32>;
@group(0) @binding(1) var<storage, read> hist: array<u32>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x;
  if (i >= p.n) {
    return;
  }
  let t = hist[p.off + i];
  if (t >= p.vocab) {
    return;
  }
  for (var j = 0u; j < i; j = j + 1u) {
    if (hist[p.off + j] == t) {
      return;
    }
  }
  let l = logits[t];
  logits[t] = select(l * p.penalty, l * p.inv_penalty, l > 0.0);
}
