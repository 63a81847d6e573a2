/* Sampling on the device (backend.h sample_id, penalize): sample.wgsl,
 * reading either the logits or, where the graph fuses the greedy choice
 * into the head product (wgpu_fused.c), that product's per-workgroup
 * argmax pairs. */
#include "backend/webgpu/wgpu_sampling.h"

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
  vt->penalize = g_penalize;
}
