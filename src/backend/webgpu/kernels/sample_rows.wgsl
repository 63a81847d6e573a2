// A batched step's token choices in one dispatch: ids[r] = the next token
// from row r of logits (vocab floats a row), for r < n, each row with its
// own settings. A workgroup a row (grid x = n) draws as sample.wgsl does for
// one token (sample_draw.wgsli), so a row gets the token that row alone gets.
override WG: u32 = 256;

const MAXR: u32 = 256u; // most rows (WISP_MAX_ROWS)

struct Row {
  top_k: u32,
  seed: u32,
  step: u32,
  pad0: u32,
  temperature: f32,
  top_p: f32,
  min_p: f32,
  pad1: f32,
}

struct Params {
  vocab: u32,
  n: u32,
  pad0: u32,
  pad1: u32,
  rows: array<Row, MAXR>,
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
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
  let r = wid.x;
  if (r >= p.n) {
    return;
  }
  let q = p.rows[r];
  let pick = draw(li, Draw(p.vocab, q.top_k, q.seed, q.step, q.temperature, q.top_p, q.min_p), r * p.vocab);
  if (li == 0u) {
    ids[r] = pick;
  }
}
