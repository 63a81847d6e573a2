/* Host side of the WGSL kernels in kernels/; see wgpu_kernels.h. */
#include "backend/webgpu/wgpu_kernels.h"

#include <stdio.h>
#include <string.h>

#include "backend/webgpu/wgsl_kernels.h"
#include "util/err.h"

static int is_pow2(uint32_t v) { return v && !(v & (v - 1)); }

/* Chooses the variant, checks the geometry against the device and compiles. */
static wisp_status make_kernel(wisp_wgpu_device *d, const char *base, uint32_t wg, uint32_t rows_per_wg,
                               int subgroups, size_t shared_bytes_plain, wisp_wgpu_kernel **out) {
  *out = NULL;
  int sg = subgroups < 0 ? d->has_subgroups : subgroups;
  if (sg && !d->has_subgroups)
    return wisp_fail(WISP_EDEVICE, "WebGPU: %s: the device lacks the subgroups feature", base);
  if (wg == 0 || wg > d->info.max_compute_invocations_per_workgroup || wg > d->info.max_compute_workgroup_size_x)
    return wisp_fail(WISP_EINVAL, "WebGPU: %s: workgroup size %u outside 1..%u", base, wg,
                     d->info.max_compute_invocations_per_workgroup);
  if (rows_per_wg == 0 || rows_per_wg > wg)
    return wisp_fail(WISP_EINVAL, "WebGPU: %s: rows per workgroup %u outside 1..%u", base, rows_per_wg, wg);
  if (!sg && !is_pow2(wg))
    return wisp_fail(WISP_EINVAL, "WebGPU: %s: the plain variant needs a power-of-two workgroup size, not %u",
                     base, wg);
  if (!sg && shared_bytes_plain > d->info.max_compute_workgroup_storage_size)
    return wisp_fail(WISP_EINVAL, "WebGPU: %s: %zu bytes of workgroup storage exceed the limit %u", base,
                     shared_bytes_plain, d->info.max_compute_workgroup_storage_size);
  char name[64];
  snprintf(name, sizeof name, "%s%s", base, sg ? "" : "_nosg");
  const char *src = wisp_wgsl_kernel(name);
  if (!src) return wisp_fail(WISP_EUNSUPPORTED, "WebGPU: no embedded kernel %s", name);
  wisp_wgpu_const c[2] = {{"WG", (double)wg}, {"ROWS", (double)rows_per_wg}};
  int nc = !strcmp(base, "q4_matvec") ? 2 : 1;
  wisp_status st = wisp_wgpu_kernel_create(d, src, "main", c, nc, name, out);
  if (st) return st;
  (*out)->wg = wg;
  (*out)->rows_per_wg = rows_per_wg;
  return WISP_OK;
}

wisp_status wisp_wgpu_q4_matvec_kernel(wisp_wgpu_device *d, uint32_t wg, uint32_t rows_per_wg, int subgroups,
                                       wisp_wgpu_kernel **out) {
  return make_kernel(d, "q4_matvec", wg, rows_per_wg, subgroups, (size_t)rows_per_wg * wg * 4u, out);
}

wisp_status wisp_wgpu_rmsnorm_kernel(wisp_wgpu_device *d, uint32_t wg, int subgroups, wisp_wgpu_kernel **out) {
  return make_kernel(d, "rmsnorm", wg, 1, subgroups, (size_t)wg * 4u, out);
}

static uint64_t bound_size(wisp_wgpu_device *d, wisp_wgpu_binding b) {
  return b.size ? b.size : wisp_wgpu_buffer_data_size(d, b.buffer) - b.offset;
}

static wisp_status need(wisp_wgpu_device *d, const char *op, const char *what, wisp_wgpu_binding b,
                        uint64_t bytes) {
  if (!b.buffer) return wisp_fail(WISP_EINVAL, "WebGPU: %s: no buffer bound for %s", op, what);
  uint64_t have = bound_size(d, b);
  if (have < bytes)
    return wisp_fail(WISP_EINVAL, "WebGPU: %s: %s binding has %llu bytes, needs %llu", op, what,
                     (unsigned long long)have, (unsigned long long)bytes);
  if (bytes > d->info.max_storage_buffer_binding_size)
    return wisp_fail(WISP_EINVAL,
                     "WebGPU: %s: %s needs a %llu-byte binding, over maxStorageBufferBindingSize %llu "
                     "(split it into row ranges)",
                     op, what, (unsigned long long)bytes,
                     (unsigned long long)d->info.max_storage_buffer_binding_size);
  return WISP_OK;
}

/* Creates the parameter block and bind group; bindings[n] is the params. */
static wisp_status make_op(wisp_wgpu_device *d, const wisp_wgpu_kernel *k, wisp_wgpu_binding *bindings, int n,
                           const void *params, size_t params_size, uint32_t groups, wisp_wgpu_op *out) {
  memset(out, 0, sizeof *out);
  out->k = k;
  wisp_status st = wisp_wgpu_buf_create(d, params_size, WISP_WGPU_UNIFORM, k->label, &out->params);
  if (!st) st = wisp_wgpu_buf_write(d, out->params, 0, params, params_size);
  if (st) {
    wisp_wgpu_op_free(d, out);
    return st;
  }
  bindings[n].buffer = out->params.b;
  bindings[n].offset = 0;
  bindings[n].size = 0;
  st = wisp_wgpu_bind(d, k, bindings, n + 1, &out->group);
  if (st) {
    wisp_wgpu_op_free(d, out);
    return st;
  }
  wisp_wgpu_grid(d, groups, &out->gx, &out->gy);
  return WISP_OK;
}

wisp_status wisp_wgpu_q4_matvec_op(wisp_wgpu_device *d, const wisp_wgpu_kernel *k, wisp_wgpu_binding quant,
                                   wisp_wgpu_binding scales, wisp_wgpu_binding x, wisp_wgpu_binding y,
                                   uint32_t rows, uint32_t cols, wisp_wgpu_op *out) {
  memset(out, 0, sizeof *out);
  const char *op = "q4_matvec";
  if (rows == 0 || cols == 0 || cols % 32)
    return wisp_fail(WISP_EINVAL, "WebGPU: %s: shape %ux%u (cols must be a positive multiple of 32)", op, rows,
                     cols);
  wisp_status st;
  if ((st = need(d, op, "quant", quant, (uint64_t)rows * cols / 2)) ||
      (st = need(d, op, "scales", scales, (uint64_t)rows * (cols / 32) * 4)) ||
      (st = need(d, op, "x", x, (uint64_t)cols * 4)) || (st = need(d, op, "y", y, (uint64_t)rows * 4)))
    return st;
  uint32_t params[4] = {rows, cols, 0, 0};
  wisp_wgpu_binding b[5] = {quant, scales, x, y, {0}};
  uint32_t groups = (rows + k->rows_per_wg - 1) / k->rows_per_wg;
  return make_op(d, k, b, 4, params, sizeof params, groups, out);
}

wisp_status wisp_wgpu_rmsnorm_op(wisp_wgpu_device *d, const wisp_wgpu_kernel *k, wisp_wgpu_binding x,
                                 wisp_wgpu_binding w, wisp_wgpu_binding y, uint32_t rows, uint32_t n, float eps,
                                 wisp_wgpu_op *out) {
  memset(out, 0, sizeof *out);
  const char *op = "rmsnorm";
  if (rows == 0 || n == 0) return wisp_fail(WISP_EINVAL, "WebGPU: %s: shape %ux%u", op, rows, n);
  wisp_status st;
  if ((st = need(d, op, "x", x, (uint64_t)rows * n * 4)) || (st = need(d, op, "w", w, (uint64_t)n * 4)) ||
      (st = need(d, op, "y", y, (uint64_t)rows * n * 4)))
    return st;
  struct {
    uint32_t rows, n;
    float eps;
    uint32_t pad;
  } params = {rows, n, eps, 0};
  wisp_wgpu_binding b[4] = {x, w, y, {0}};
  return make_op(d, k, b, 3, &params, sizeof params, rows, out);
}

void wisp_wgpu_op_record(wisp_wgpu_batch *b, const wisp_wgpu_op *op) {
  wisp_wgpu_batch_dispatch(b, op->k, op->group, op->gx, op->gy, 1);
}

void wisp_wgpu_op_free(wisp_wgpu_device *d, wisp_wgpu_op *op) {
  if (!op) return;
  if (op->group) wisp_wgpu_bind_free(d, op->group);
  wisp_wgpu_buf_free(d, &op->params);
  op->group = NULL;
}
