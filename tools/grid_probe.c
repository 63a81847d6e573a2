/* Grid-barrier probe: can the workgroups of one WebGPU dispatch wait for each
 * other (a spin barrier on an atomic counter), how long does one such
 * barrier take, and do plain (non-atomic) storage writes of one workgroup
 * reach the others' plain loads after it?
 *
 * A persistent decode kernel (one dispatch running a whole forward pass,
 * phases separated by grid barriers) needs all three. WGSL promises none of
 * them (no forward-progress or inter-workgroup ordering guarantee), so this
 * measures what a given device does:
 *
 *   build/grid_probe [workgroups] [rounds] [threads]
 *
 * It prints, per setting, the time per barrier and the count of stale reads
 * seen through plain loads and through atomic loads. Only use workgroup
 * counts that fit on the GPU at once (e.g. one per SM): more deadlocks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/webgpu/wgpu_compute.h"
#include "probe_open.h"
#include "util/clock.h"
#include "util/err.h"

static const char *probe_wgsl =
    "override NWG: u32 = 1;\n"
    "override ROUNDS: u32 = 1;\n"
    "override WG: u32 = 64;\n"
    "@group(0) @binding(0) var<storage, read_write> ctr: array<atomic<u32>>;\n"
    "@group(0) @binding(1) var<storage, read_write> av: array<atomic<u32>>;\n"
    "@group(0) @binding(2) var<storage, read_write> pv: array<u32>;\n"
    "@group(0) @binding(3) var<storage, read_write> errs: array<atomic<u32>>;\n"
    "fn grid_sync(goal: u32, lid: u32) {\n"
    "  storageBarrier();\n"
    "  workgroupBarrier();\n"
    "  if (lid == 0u) {\n"
    "    atomicAdd(&ctr[0], 1u);\n"
    "    loop { if (atomicLoad(&ctr[0]) >= goal) { break; } }\n"
    "  }\n"
    "  workgroupBarrier();\n"
    "  storageBarrier();\n"
    "}\n"
    "@compute @workgroup_size(WG)\n"
    "fn main(@builtin(workgroup_id) wid3: vec3<u32>, @builtin(local_invocation_index) lid: u32) {\n"
    "  let wid = wid3.x;\n"
    "  let nb = (wid + 1u) % NWG;\n"
    "  var bad_plain = 0u;\n"
    "  var bad_atomic = 0u;\n"
    "  for (var r = 0u; r < ROUNDS; r++) {\n"
    "    let half = (r & 1u) * NWG * WG;\n"
    "    let v = r * 7919u + wid * 31u + lid + 1u;\n"
    "    pv[half + wid * WG + lid] = v;\n"
    "    atomicStore(&av[half + wid * WG + lid], v);\n"
    "    grid_sync((r + 1u) * NWG, lid);\n"
    "    let want = r * 7919u + nb * 31u + lid + 1u;\n"
    "    if (pv[half + nb * WG + lid] != want) { bad_plain++; }\n"
    "    if (atomicLoad(&av[half + nb * WG + lid]) != want) { bad_atomic++; }\n"
    "  }\n"
    "  if (bad_plain > 0u) { atomicAdd(&errs[0], bad_plain); }\n"
    "  if (bad_atomic > 0u) { atomicAdd(&errs[1], bad_atomic); }\n"
    "}\n";

static int run_one(wisp_wgpu_device *d, uint32_t nwg, uint32_t rounds, uint32_t wg, double *secs,
                   uint32_t errs_out[2]) {
  wisp_wgpu_const c[3] = {{"NWG", nwg}, {"ROUNDS", rounds}, {"WG", wg}};
  wisp_wgpu_kernel *k = NULL;
  wisp_wgpu_buf ctr = {0}, av = {0}, pv = {0}, errs = {0};
  WGPUBindGroup g = NULL;
  uint64_t vb = (uint64_t)2 * nwg * wg * 4;
  int ok = wisp_wgpu_kernel_create(d, probe_wgsl, "main", c, 3, "grid_probe", &k) == WISP_OK &&
           wisp_wgpu_buf_create(d, 16, WISP_WGPU_STORAGE, "ctr", &ctr) == WISP_OK &&
           wisp_wgpu_buf_create(d, vb, WISP_WGPU_STORAGE, "av", &av) == WISP_OK &&
           wisp_wgpu_buf_create(d, vb, WISP_WGPU_STORAGE, "pv", &pv) == WISP_OK &&
           wisp_wgpu_buf_create(d, 16, WISP_WGPU_STORAGE, "errs", &errs) == WISP_OK &&
           wisp_wgpu_bind(d, k, (wisp_wgpu_binding[]){{ctr.b, 0, 0}, {av.b, 0, 0}, {pv.b, 0, 0}, {errs.b, 0, 0}}, 4,
                          &g) == WISP_OK;
  if (ok) {
    wisp_wgpu_batch b;
    double t0 = wisp_now_s();
    ok = wisp_wgpu_batch_begin(d, &b) == WISP_OK;
    if (ok) {
      wisp_wgpu_batch_dispatch(&b, k, g, nwg, 1, 1);
      ok = wisp_wgpu_batch_submit(&b) == WISP_OK && wisp_wgpu_finish(d) == WISP_OK;
    }
    *secs = wisp_now_s() - t0;
    ok = ok && wisp_wgpu_buf_read(d, errs, 0, errs_out, 8) == WISP_OK;
  }
  if (g) wisp_wgpu_bind_free(d, g);
  wisp_wgpu_buf_free(d, &ctr);
  wisp_wgpu_buf_free(d, &av);
  wisp_wgpu_buf_free(d, &pv);
  wisp_wgpu_buf_free(d, &errs);
  if (k) wisp_wgpu_kernel_free(d, k);
  return ok;
}

int main(int argc, char **argv) {
  uint32_t nwg = argc > 1 ? (uint32_t)atoi(argv[1]) : 0;
  uint32_t rounds = argc > 2 ? (uint32_t)atoi(argv[2]) : 20000;
  uint32_t wg = argc > 3 ? (uint32_t)atoi(argv[3]) : 256;
  wisp_wgpu_device *d = NULL;
  if (!probe_open("grid_probe", NULL, 20000, NULL, &d)) return 1;
  printf("device: %s\n", d->info.name);
  uint32_t counts[] = {1, 2, 8, 32, 66, 132, 264};
  int n = nwg ? 1 : (int)(sizeof counts / sizeof counts[0]);
  for (int i = 0; i < n; i++) {
    uint32_t w = nwg ? nwg : counts[i];
    double t_base = 0, t = 0;
    uint32_t e0[2] = {0, 0}, e[2] = {0, 0};
    if (!run_one(d, w, 1, wg, &t_base, e0) || !run_one(d, w, rounds, wg, &t, e)) {
      printf("workgroups %u: failed: %s\n", w, wisp_last_error());
      break;
    }
    printf("workgroups %4u x %u threads: %u barriers %.3f s, %.3f us per barrier; stale plain %u, stale atomic %u\n", w,
           wg, rounds, t, (t - t_base) * 1e6 / rounds, e[0], e[1]);
    fflush(stdout);
  }
  wisp_wgpu_device_close(d);
  return 0;
}
