/* Sampling on the device (backend.h sample_id, penalize): sample.wgsl,
 * reading either the logits or, where the graph fuses the greedy choice
 * into the head product (wgpu_fused.c), that product's per-workgroup
 * argmax pairs. */
#include "backend/webgpu/wgpu_sampling.h"

#include <string.h>

#include "backend/webgpu/wgpu_core.h"

void wisp_wgpu_rec_sample(wgpu_backend *g, const wisp_buf *logits, int vocab, int parts, const wisp_sampling *sp,
                          uint32_t step, wisp_buf *ids, int slot) {
  wisp_wgpu_const c[2] = {{"WG", 256}, {"PARTS", parts}};
  wisp_wgpu_kernel *k = wisp_wgpu_pipeline(g, "sample", c, 2);
  struct {
    uint32_t vocab, top_k, seed, step, slot, pad[3];
    float temperature, top_p, min_p, pad2;
  } p = {parts ? g->amax_count : (uint32_t)vocab, (uint32_t)(sp->top_k > 0 ? sp->top_k : 0), sp->seed, step,
         (uint32_t)slot, {0, 0, 0}, sp->temperature, sp->top_p, sp->min_p, 0};
  wisp_wgpu_binding b[2] = {whole(parts ? g->amax.b : logits->g.b), whole(ids->g.b)};
  wisp_wgpu_record(g, k, b, 2, &p, sizeof p, 1, 1);
}

static void g_sample_id(wisp_backend *be, const wisp_buf *logits, int vocab, const wisp_sampling *sp, uint32_t step,
                        wisp_buf *ids, int slot) {
  wisp_wgpu_rec_sample(as_g(be), logits, vocab, 0, sp, step, ids, slot);
}

/* sample_rows.wgsl: a workgroup a row, each drawing as sample.wgsl does
 * (sample_draw.wgsli), so a row gets the token g_sample_id gets for it. The
 * rows' settings travel in the uniform (MAXR of them). */
#define SAMPLE_MAXR 256
static int g_sample_rows(wisp_backend *be, const wisp_buf *logits, int vocab, int n, const wisp_sampling *sp,
                         const uint32_t *steps, wisp_buf *ids) {
  wgpu_backend *g = as_g(be);
  if (n < 1 || n > SAMPLE_MAXR || vocab < 1 || (uint64_t)n * (uint64_t)vocab * 4 > g->max_binding) return 0;
  static struct {
    uint32_t vocab, n, pad0, pad1;
    struct {
      uint32_t top_k, seed, step, pad0;
      float temperature, top_p, min_p, pad1;
    } rows[SAMPLE_MAXR];
  } p; /* 8 KiB: not on the stack; recording copies it */
  memset(&p, 0, sizeof p);
  p.vocab = (uint32_t)vocab;
  p.n = (uint32_t)n;
  for (int r = 0; r < n; r++) {
    p.rows[r].top_k = (uint32_t)(sp[r].top_k > 0 ? sp[r].top_k : 0);
    p.rows[r].seed = sp[r].seed;
    p.rows[r].step = steps[r];
    p.rows[r].temperature = sp[r].temperature;
    p.rows[r].top_p = sp[r].top_p;
    p.rows[r].min_p = sp[r].min_p;
  }
  wisp_wgpu_const c[1] = {{"WG", 256}};
  wisp_wgpu_kernel *k = wisp_wgpu_pipeline(g, "sample_rows", c, 1);
  wisp_wgpu_binding b[2] = {bind_of(logits), bind_of(ids)};
  wisp_wgpu_record(g, k, b, 2, &p, sizeof p, (uint32_t)n, 1);
  g->stats.rows_sampled++;
  return 1;
}

/* penalty.wgsl; see backend.h. */
static void g_penalize(wisp_backend *be, wisp_buf *logits, int vocab, const wisp_buf *hist, size_t hist_off, int n,
                       float penalty) {
  wgpu_backend *g = as_g(be);
  if (n <= 0) return;
  wisp_wgpu_const c[1] = {{"WG", 64}};
  wisp_wgpu_kernel *k = wisp_wgpu_pipeline(g, "penalty", c, 1);
  struct {
    uint32_t vocab, off, n, pad0;
    float penalty, inv_penalty, pad1, pad2;
  } p = {(uint32_t)vocab, (uint32_t)hist_off, (uint32_t)n, 0, penalty, 1.0f / penalty, 0, 0};
  wisp_wgpu_binding b[2] = {whole(logits->g.b), whole(hist->g.b)};
  wisp_wgpu_record(g, k, b, 2, &p, sizeof p, cdiv((uint64_t)n, 64), 1);
}

void wisp_wgpu_sampling_install(wisp_backend *vt) {
  vt->sample_id = g_sample_id;
  vt->sample_rows = g_sample_rows;
  vt->penalize = g_penalize;
}
