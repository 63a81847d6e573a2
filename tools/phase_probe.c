/* Phase probe: the cost of one phase of a persistent decode kernel
 * (barrier, staged input, RMSNorm, Q4 products of decode shapes) on the
 * device, each piece timed alone. tools/phase_probe.wgsl says what the MODE
 * bits turn on. Run from the repository root:
 *
 *   build/phase_probe [workgroups] [rounds]
 *
 * It prints one line per case: microseconds per phase (the dispatch time of
 * `rounds` rounds less that of one round, over rounds - 1). Only use
 * workgroup counts that fit on the GPU at once (e.g. one per SM). Product
 * B's blocks per lane assume 32-lane subgroups; PHASE_BL=4 sets them for
 * 8-lane ones (lavapipe), where its check against product A then holds. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/webgpu/wgpu_compute.h"
#include "probe_open.h"
#include "util/clock.h"
#include "util/err.h"

typedef struct {
  const char *name;
  uint32_t mode, rows, cols, nmat, rb, bl;
} probe_case;

static const probe_case cases[] = {
    {"barrier only", 0, 1024, 1024, 1, 1, 1},
    {"stage, no norm", 1, 1024, 1024, 1, 1, 1},
    {"stage + norm (weights after)", 3, 1024, 1024, 1, 1, 1},
    {"stage + norm (weights with x)", 5, 1024, 1024, 1, 1, 1},
    {"product A 1024x1024 only", 8, 1024, 1024, 128, 1, 1},
    {"stage+norm + A 1024x1024", 11, 1024, 1024, 128, 1, 1},
    {"stage+norm + B 1024x1024 rb1", 19, 1024, 1024, 128, 1, 1},
    {"stage+norm + C 1024x1024 rb1", 35, 1024, 1024, 128, 1, 1},
    {"stage+norm + C 1024x1024 rb1 pre", 99, 1024, 1024, 128, 1, 1},
    {"stage+norm(with x) + C 1024 pre", 101, 1024, 1024, 128, 1, 1},
    {"stage+norm + A 5120x1024", 11, 5120, 1024, 24, 1, 1},
    {"stage+norm + C 5120x1024 rb5", 35, 5120, 1024, 24, 5, 1},
    {"stage+norm + C 5120x1024 rb5 pre", 99, 5120, 1024, 24, 5, 1},
    {"stage+norm + B 5120x1024 rb4", 19, 5120, 1024, 24, 4, 1},
    {"stage+norm + B 5120x1024 rb8", 19, 5120, 1024, 24, 8, 1},
    {"stage + A 1024x2560", 9, 1024, 2560, 48, 1, 1},
    {"stage + B 1024x2560 rb1 bl3", 17, 1024, 2560, 48, 1, 3},
    {"stage + C 1024x2560 rb1 bl3", 33, 1024, 2560, 48, 1, 3},
    {"stage + C 1024x2560 rb1 bl3 pre", 97, 1024, 2560, 48, 1, 3},
    {"stage+norm + A 65536x1024", 11, 65536, 1024, 2, 1, 1},
    {"stage+norm + B 65536x1024 rb8", 19, 65536, 1024, 2, 8, 1},
    {"stage+norm + B 65536x1024 rb4", 19, 65536, 1024, 2, 4, 1},
};

typedef struct {
  wisp_wgpu_buf w, s, ctr;
} probe_bufs;

/* One dispatch of `rounds` rounds; its wall time in *secs. With out != NULL
 * (one round), the input vector is set first and the product read back. */
static int run_case(wisp_wgpu_device *d, const char *wgsl, const probe_bufs *pb, const probe_case *c, uint32_t nwg,
                    uint32_t rounds, double *secs, float *out) {
  wisp_wgpu_const k_c[] = {{"NWG", nwg},       {"ROUNDS", rounds}, {"WG", 256},        {"MODE", c->mode},
                           {"ROWS", c->rows},  {"COLS", c->cols},  {"NMAT", c->nmat},  {"RB", c->rb},
                           {"BL", getenv("PHASE_BL") ? (uint32_t)atoi(getenv("PHASE_BL")) : c->bl}};
  wisp_wgpu_kernel *k = NULL;
  WGPUBindGroup g = NULL;
  int ok = wisp_wgpu_kernel_create(d, wgsl, "main", k_c, 9, "phase_probe", &k) == WISP_OK &&
           wisp_wgpu_bind(d, k,
                          (wisp_wgpu_binding[]){{pb->w.b, 0, 0}, {pb->w.b, 0, 0}, {pb->s.b, 0, 0}, {pb->ctr.b, 0, 0}},
                          4, &g) == WISP_OK;
  uint32_t zero[4] = {0, 0, 0, 0};
  ok = ok && wisp_wgpu_buf_write(d, pb->ctr, 0, zero, sizeof zero) == WISP_OK;
  if (ok && out) {
    float x[4096];
    for (int i = 0; i < 4096; i++) x[i] = (float)((i * 37) % 101 - 50) / 64.0f;
    ok = wisp_wgpu_buf_write(d, pb->s, 0, x, sizeof x) == WISP_OK;
  }
  ok = ok && wisp_wgpu_finish(d) == WISP_OK;
  if (ok) {
    wisp_wgpu_batch b;
    double t0 = wisp_now_s();
    ok = wisp_wgpu_batch_begin(d, &b) == WISP_OK;
    if (ok) {
      wisp_wgpu_batch_dispatch(&b, k, g, nwg, 1, 1);
      ok = wisp_wgpu_batch_submit(&b) == WISP_OK && wisp_wgpu_finish(d) == WISP_OK;
    }
    *secs = wisp_now_s() - t0;
    if (ok && out) ok = wisp_wgpu_buf_read(d, pb->s, 8192 * 4, out, (size_t)c->rows * 4) == WISP_OK;
  }
  if (g) wisp_wgpu_bind_free(d, g);
  if (k) wisp_wgpu_kernel_free(d, k);
  return ok;
}

int main(int argc, char **argv) {
  uint32_t nwg = argc > 1 ? (uint32_t)atoi(argv[1]) : 132;
  uint32_t rounds = argc > 2 ? (uint32_t)atoi(argv[2]) : 2000;
  char *wgsl = NULL;
  wisp_wgpu_device *d = NULL;
  if (!probe_open("phase_probe", "tools/phase_probe.wgsl", 60000, &wgsl, &d)) return 1;
  printf("device: %s, %u workgroups x 256, %u rounds\n", d->info.name, nwg, rounds);
  /* Weights: the largest case's matrices plus norm weights; random nibbles,
   * small scales (the values only have to stay finite). */
  uint64_t words = 0;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    uint64_t w = (uint64_t)cases[i].nmat * cases[i].rows * (cases[i].cols / 32) * 5 + 8192;
    if (w > words) words = w;
  }
  uint32_t *host = malloc(words * 4);
  probe_bufs pb = {0};
  int ok = host != NULL;
  if (ok) {
    uint32_t x = 12345;
    for (uint64_t i = 0; i < words; i++) {
      x = x * 1664525u + 1013904223u;
      host[i] = x;
    }
    ok = wisp_wgpu_buf_from(d, host, words * 4, "phase_w", &pb.w) == WISP_OK &&
         wisp_wgpu_buf_create(d, (8192 + 65536 + 64) * 4, WISP_WGPU_STORAGE, "phase_s", &pb.s) == WISP_OK &&
         wisp_wgpu_buf_create(d, 64, WISP_WGPU_STORAGE, "phase_ctr", &pb.ctr) == WISP_OK;
  }
  free(host);
  /* The last product A result of each shape, to check product B against. */
  float *ref = malloc(65536 * 4), *got = malloc(65536 * 4);
  uint32_t ref_rows = 0, ref_cols = 0, ref_norm = 0;
  ok = ok && ref && got;
  for (size_t i = 0; ok && i < sizeof cases / sizeof cases[0]; i++) {
    const probe_case *c = &cases[i];
    double t1 = 0, tn = 0;
    /* The one-round run twice: the first may include a lazy compile. */
    if (!run_case(d, wgsl, &pb, c, nwg, 1, &t1, NULL) || !run_case(d, wgsl, &pb, c, nwg, 1, &t1, got) ||
        !run_case(d, wgsl, &pb, c, nwg, rounds, &tn, NULL)) {
      printf("%-34s failed: %s\n", c->name, wisp_last_error());
      break;
    }
    double us = (tn - t1) * 1e6 / (rounds - 1);
    double mb = (double)c->rows * (c->cols / 32) * 20 / 1e6;
    printf("%-34s %7.2f us a phase%s", c->name, us, c->mode & 56 ? "" : "\n");
    if (c->mode & 56) printf("  (%.2f MB of weights, %.0f GB/s)", mb, mb * 1e3 / us);
    if (c->mode & 8) {
      memcpy(ref, got, (size_t)c->rows * 4);
      ref_rows = c->rows, ref_cols = c->cols, ref_norm = c->mode & 7;
    } else if ((c->mode & 48) && ref_rows == c->rows && ref_cols == c->cols && ref_norm == (c->mode & 7)) {
      double worst = 0, big = 1e-30;
      for (uint32_t r = 0; r < c->rows; r++) {
        double e = ref[r] - got[r];
        if (e < 0) e = -e;
        if (e > worst) worst = e;
        if (ref[r] > big) big = ref[r];
        if (-ref[r] > big) big = -ref[r];
      }
      printf("  [vs A: max diff %.2g of %.3g]", worst, big);
    }
    if (c->mode & 56) printf("\n");
    fflush(stdout);
  }
  free(ref);
  free(got);
  wisp_wgpu_buf_free(d, &pb.w);
  wisp_wgpu_buf_free(d, &pb.s);
  wisp_wgpu_buf_free(d, &pb.ctr);
  wisp_wgpu_device_close(d);
  free(wgsl);
  return ok ? 0 : 1;
}
