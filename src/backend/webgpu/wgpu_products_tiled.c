/* The f32-activation prefill product of the WebGPU backend (docs/webgpu.md,
 * "Products"): matmul.wgsl, register tiles of RM x RN outputs a thread over
 * a TM x TN tile a workgroup, 16 columns a stage, the next stage loaded into
 * registers while the current one is computed (double-buffered workgroup
 * memory where it fits). Each output is summed in column order whatever the
 * tile, so the exact profile gets the same bits from every geometry. */
#include "backend/webgpu/wgpu_products_tiled.h"

#include "util/err.h"

/* Workgroup memory of a tile: the weight and input stages (5 vec4 a row),
 * twice with DB. */
static uint64_t tile_bytes(const wisp_wgpu_tile *t, uint32_t db) {
  return ((uint64_t)t->tm + t->tn) * 5u * 16u * (db ? 2u : 1u);
}

int wisp_wgpu_matmul_tile_ok(const wgpu_backend *g, const wisp_wgpu_tile *t) {
  if (!t->tm || !t->tn || !t->rm || !t->rn || t->rm > 8 || t->rn > 8 || t->tm % t->rm || t->tn % t->rn) return 0;
  const uint64_t threads = (uint64_t)(t->tm / t->rm) * (t->tn / t->rn);
  return threads <= g->d->info.max_compute_invocations_per_workgroup &&
         threads <= g->d->info.max_compute_workgroup_size_x && (uint64_t)t->tm * 4 <= 8 * threads &&
         (uint64_t)t->tn * 4 <= 8 * threads && tile_bytes(t, t->db) <= g->d->info.max_compute_workgroup_storage_size;
}

wisp_wgpu_tile wisp_wgpu_matmul_tile(const wgpu_backend *g, int rows, int n) {
  /* Measured on the H200 (bench/results/tiles-h200-20261205): 4x4 a thread
   * beats 8x8 by 2-3x at 1,024 tokens; 64 tokens a tile from 256 tokens on
   * gives 1.1-1.2x over 32, which is faster below that. */
  wisp_wgpu_tile t = {64, 32, 4, 4, 1};
  if (n >= 256 && rows >= 128) t.tn = 64;
  if (g->mm_tm && g->mm_tn) t = (wisp_wgpu_tile){g->mm_tm, g->mm_tn, 4, 4, 1}; /* a given tile: 4x4 a thread */
  if (g->mm_rm && g->mm_rn) t.rm = g->mm_rm, t.rn = g->mm_rn;
  if (g->mm_one_buffer || tile_bytes(&t, 1) > g->d->info.max_compute_workgroup_storage_size) t.db = 0;
  return t;
}

void wisp_wgpu_rec_matmul_tiled(wgpu_backend *g, const wisp_matrix *W, uint32_t qt, const wisp_buf *x, int x_row0,
                                int n, wisp_buf *y, int accumulate) {
  const wisp_wgpu_tile t = wisp_wgpu_matmul_tile(g, W->rows, n);
  if (!wisp_wgpu_matmul_tile_ok(g, &t)) {
    wisp_wgpu_op_fail(g, WISP_EUNSUPPORTED, "matmul tile %ux%u with %ux%u a thread (DB %u) does not fit matmul.wgsl or "
                      "this device", t.tm, t.tn, t.rm, t.rn, t.db);
    return;
  }
  wisp_wgpu_const c[6] = {{"TM", t.tm}, {"TN", t.tn}, {"RM", t.rm}, {"RN", t.rn}, {"DB", t.db}, {"QT", qt}};
  wisp_wgpu_kernel *k = wisp_wgpu_pipeline(g, "matmul", c, 6);
  int row0, rows;
  wisp_wgpu_binding b[5];
  for (int q = 0; wisp_wgpu_mat_bufs(g, W, q, &row0, &rows, b); q++) {
    struct {
      uint32_t rows, cols, y_off, x_off, acc, n, y_stride, pad;
    } p = {(uint32_t)rows, (uint32_t)W->cols, (uint32_t)(W->out_row0 + row0), (uint32_t)((size_t)x_row0 * W->cols / 4),
           accumulate ? 1u : 0u, (uint32_t)n, (uint32_t)wisp_matrix_out_rows(W), 0};
    b[3] = whole(x->g.b);
    b[4] = whole(y->g.b);
    wisp_wgpu_record_xyz(g, k, b, 5, &p, sizeof p, cdiv((uint64_t)rows, t.tm), cdiv((uint64_t)n, t.tn), 1);
  }
  g->stats.tiled_products++;
}
