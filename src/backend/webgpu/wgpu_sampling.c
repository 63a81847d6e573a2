/* Sampling on the device (backend.h sample_id, penalize): sample.wgsl,
 * reading either the logits or, for greedy decoding right after the head
 * product, that product's per-workgroup argmax pairs. */
#include "backend/webgpu/wgpu_sampling.h"

#include <string.h>

#include "backend/webgpu/wgpu_core.h"
#include "backend/webgpu/wgpu_products_q4k.h"
#include "backend/webgpu/wgpu_products.h"

static void g_sample_id(wisp_backend *be, const wisp_buf *logits, int vocab, const wisp_sampling *sp, uint32_t step,
                        wisp_buf *ids, int slot) {
  wgpu_backend *g = as_g(be);
  /* Greedy right after the head product (held back): the product writes
   * per-workgroup argmax pairs and this pass reduces only those. */
  int parts = 0;
  if (g->q4k && wisp_wgpu_q4k_head_argmax(be, logits, vocab, sp->temperature <= 0, ids)) {
    parts = !g->error;
    g->stats.argmax_fused += (uint64_t)parts;
  }
  if (!parts && g->fuse_argmax && g->pend.kind == 3 && g->pend.my == logits && sp->temperature <= 0 && g->pend.m->rows == vocab &&
      logits != ids && g->pend.mx != ids && g->pend.x != ids) {
    g->pend.kind = 0;
    wisp_wgpu_rec_matvec(g, g->pend.m, g->pend.pre, g->pend.x, g->pend.w, g->pend.eps, g->pend.mx, 0, 1, g->pend.my, 0, 1, 0, 0, NULL);
    parts = !g->error;
    g->stats.argmax_fused += (uint64_t)parts;
  }
  wisp_wgpu_emit_pending(g);
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

/* sample_rows.wgsl: a workgroup a row, each drawing as sample.wgsl does
 * (sample_draw.wgsli), so a row gets the token g_sample_id gets for it. The
 * rows' settings travel in the uniform (MAXR of them). */
#define SAMPLE_MAXR 256
static int g_sample_rows(wisp_backend *be, const wisp_buf *logits, int vocab, int n, const wisp_sampling *sp,
                         const uint32_t *steps, wisp_buf *ids) {
  wgpu_backend *g = as_g(be);
  if (n < 1 || n > SAMPLE_MAXR || vocab < 1 || (uint64_t)n * (uint64_t)vocab * 4 > g->max_binding) return 0;
  wisp_wgpu_emit_pending(g);
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
  wisp_wgpu_emit_pending(g);
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
