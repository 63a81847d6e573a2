/* Stream probe: how fast one dispatch can read a buffer of a decode
 * product's size on this device, so the products' measured times
 * (WISP_WEBGPU_PROFILE_REPEAT) can be read against a floor. For each size
 * (the Qwen 3.5 2B's Q4_K matrices and the Q4Z heads) and each geometry it
 * records R dependent dispatches of tools/stream_probe.wgsl in one submit
 * and prints the time of one (that of R dispatches less that of one, over
 * R - 1) and the GB/s. Run from the repository root:
 *
 *   build/stream_probe [R]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/webgpu/wgpu_compute.h"
#include "probe_open.h"
#include "util/clock.h"
#include "util/err.h"

typedef struct {
  const char *name;
  double mbytes;
} probe_size;

static const probe_size sizes[] = {
    {"16 KB (a dispatch's floor)", 0.016},  {"2048x2048 Q4_K (o_proj, 2B)", 2.36},  {"2048x6144 Q4_K (down, 2B)", 7.08},
    {"8224x2048 Q4_K (in_proj, 2B)", 9.47}, {"12288x2048 Q4_K (gate/up, 2B)", 14.16},
    {"248320x1024 Q4Z head (0.8B)", 162.9}, {"248320x2048 Q4Z head (2B)", 325.9},
};

typedef struct {
  uint32_t wg, u, per_sm; /* per_sm 0: one pass (a vec4 a load for every thread) */
} probe_geo;

static const probe_geo geos[] = {
    {256, 1, 0}, {256, 4, 0}, {128, 2, 0}, {256, 1, 8}, {256, 4, 8}, {256, 8, 8}, {256, 4, 4}, {512, 4, 4},
};

/* Wall time of `reps` dispatches of k over nwg workgroups in one submit. */
static int timed(wisp_wgpu_device *d, wisp_wgpu_kernel *k, WGPUBindGroup g, uint32_t nwg, int reps, double *secs) {
  uint32_t gx, gy;
  wisp_wgpu_grid(d, nwg, &gx, &gy);
  wisp_wgpu_batch b;
  double t0 = wisp_now_s();
  if (wisp_wgpu_batch_begin(d, &b) != WISP_OK) return 0;
  for (int i = 0; i < reps; i++) wisp_wgpu_batch_dispatch(&b, k, g, gx, gy, 1);
  int ok = wisp_wgpu_batch_submit(&b) == WISP_OK && wisp_wgpu_finish(d) == WISP_OK;
  *secs = wisp_now_s() - t0;
  return ok;
}

int main(int argc, char **argv) {
  int reps = argc > 1 ? atoi(argv[1]) : 50;
  if (reps < 2) reps = 2;
  char *wgsl = NULL;
  wisp_wgpu_device *d = NULL;
  if (!probe_open("stream_probe", "tools/stream_probe.wgsl", 60000, &wgsl, &d)) return 1;
  const uint32_t sms = 132; /* the H200's; only sizes the strided grids */
  uint64_t max_bytes = (uint64_t)(sizes[sizeof sizes / sizeof sizes[0] - 1].mbytes * 1e6) / 16 * 16;
  if (max_bytes > d->info.max_storage_buffer_binding_size) /* lavapipe: 128 MiB (the big sizes are skipped) */
    max_bytes = d->info.max_storage_buffer_binding_size / 16 * 16;
  wisp_wgpu_buf w = {0}, out = {0}, par = {0};
  int ok = wisp_wgpu_buf_create(d, max_bytes, WISP_WGPU_STORAGE, "stream_w", &w) == WISP_OK &&
           wisp_wgpu_buf_create(d, 1 << 20, WISP_WGPU_STORAGE, "stream_out", &out) == WISP_OK &&
           wisp_wgpu_buf_create(d, 16, WISP_WGPU_UNIFORM, "stream_p", &par) == WISP_OK;
  printf("device: %s, %d dispatches a case\n", d->info.name, reps);
  for (size_t gi = 0; ok && gi < sizeof geos / sizeof geos[0]; gi++) {
    const probe_geo *G = &geos[gi];
    wisp_wgpu_const c[] = {{"WG", G->wg}, {"U", G->u}};
    wisp_wgpu_kernel *k = NULL;
    WGPUBindGroup g = NULL;
    if (wisp_wgpu_kernel_create(d, wgsl, "main", c, 2, "stream_probe", &k) != WISP_OK ||
        wisp_wgpu_bind(d, k, (wisp_wgpu_binding[]){{w.b, 0, 0}, {out.b, 0, 0}, {par.b, 0, 0}}, 3, &g) != WISP_OK) {
      ok = 0;
      printf("wg %u u %u: %s\n", G->wg, G->u, wisp_last_error());
      if (k) wisp_wgpu_kernel_free(d, k);
      continue;
    }
    for (size_t si = 0; ok && si < sizeof sizes / sizeof sizes[0]; si++) {
      uint32_t nv = (uint32_t)((uint64_t)(sizes[si].mbytes * 1e6) / 16);
      if ((uint64_t)nv * 16 > max_bytes) continue;
      uint32_t pp[4] = {nv, 0, 0, 0};
      uint32_t nwg = G->per_sm ? sms * G->per_sm : (nv + G->wg * G->u - 1) / (G->wg * G->u);
      double t1 = 0, tn = 0;
      ok = wisp_wgpu_buf_write(d, par, 0, pp, sizeof pp) == WISP_OK && timed(d, k, g, nwg, 1, &t1) &&
           timed(d, k, g, nwg, 1, &t1) && timed(d, k, g, nwg, reps, &tn);
      if (!ok) {
        printf("failed: %s\n", wisp_last_error());
        break;
      }
      double us = (tn - t1) * 1e6 / (reps - 1);
      printf("wg %3u u %u %-9s %-32s %8.2f us  %6.0f GB/s\n", G->wg, G->u,
             G->per_sm ? (G->per_sm == 4 ? "4/SM" : "8/SM") : "one pass", sizes[si].name, us,
             sizes[si].mbytes * 1e3 / us);
      fflush(stdout);
    }
    wisp_wgpu_bind_free(d, g);
    wisp_wgpu_kernel_free(d, k);
  }
  wisp_wgpu_buf_free(d, &w);
  wisp_wgpu_buf_free(d, &out);
  wisp_wgpu_buf_free(d, &par);
  wisp_wgpu_device_close(d);
  free(wgsl);
  return ok ? 0 : 1;
}
