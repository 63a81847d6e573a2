/* The compute helpers (wgpu_compute.h): buffers, override constants, batches
 * of dependent dispatches, error reporting; plus a dispatch-overhead probe. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/webgpu/wgpu_compute.h"
#include "test.h"
#include "util/err.h"
#include "webgpu_fixture.h"

TEST(webgpu_buffer_roundtrip) {
  WEBGPU_OR_SKIP(d);
  unsigned char src[1001], back[1001];
  uint64_t seed = 7;
  for (size_t i = 0; i < sizeof src; i++) src[i] = (unsigned char)test_rand_u32(&seed);
  wisp_wgpu_buf b;
  CHECKF(wisp_wgpu_buf_create(d, 1001, WISP_WGPU_STORAGE, "roundtrip", &b) == WISP_OK, "%s", wisp_last_error());
  CHECK(b.size == 1004);
  int ok = wisp_wgpu_buf_write(d, b, 0, src, 1001) == WISP_OK && wisp_wgpu_buf_read(d, b, 0, back, 1001) == WISP_OK;
  int same = ok && !memcmp(src, back, 1001);
  /* Partial write at an offset, odd length; then read a sub-range. */
  unsigned char patch[13];
  memset(patch, 0xAB, sizeof patch);
  ok = ok && wisp_wgpu_buf_write(d, b, 100, patch, sizeof patch) == WISP_OK &&
       wisp_wgpu_buf_read(d, b, 96, back, 20) == WISP_OK;
  int patched = ok && !memcmp(back, src + 96, 4) && !memcmp(back + 4, patch, 13) && back[17] == 0;
  /* Out-of-range and misaligned requests are refused with a message. */
  wisp_status e1 = wisp_wgpu_buf_write(d, b, 2, patch, 4);
  wisp_status e2 = wisp_wgpu_buf_read(d, b, 1000, back, 8);
  wisp_wgpu_buf_free(d, &b);
  CHECKF(ok, "%s", wisp_last_error());
  CHECK(same);
  CHECK(patched);
  CHECK(e1 == WISP_EINVAL && e2 == WISP_EINVAL);
}

/* Override constants reach the shader: the same module, three pipelines. */
TEST(webgpu_override_constants) {
  WEBGPU_OR_SKIP(d);
  const char *src =
      "override SCALE: f32 = 1.0;\n"
      "override WG: u32 = 1;\n"
      "@group(0) @binding(0) var<storage, read_write> o: array<f32>;\n"
      "@compute @workgroup_size(WG)\n"
      "fn main(@builtin(global_invocation_id) gid: vec3<u32>) {\n"
      "  o[gid.x] = SCALE * f32(WG) + f32(gid.x);\n"
      "}\n";
  WGPUShaderModule m;
  CHECKF(wisp_wgpu_shader_create(d, src, "override_probe", &m) == WISP_OK, "%s", wisp_last_error());
  const double scales[3] = {0.5, 2.0, -3.0};
  const uint32_t wgs[3] = {1, 4, 32};
  int ok = 1;
  char err[1100] = "";
  for (int t = 0; t < 3 && ok; t++) {
    wisp_wgpu_const c[2] = {{"SCALE", scales[t]}, {"WG", wgs[t]}};
    wisp_wgpu_kernel *k = NULL;
    wisp_wgpu_buf o = {0};
    WGPUBindGroup g = NULL;
    float out[64];
    ok = wisp_wgpu_kernel_from_module(d, m, "main", c, 2, "override_probe", &k) == WISP_OK &&
         wisp_wgpu_buf_create(d, sizeof out, WISP_WGPU_STORAGE, "o", &o) == WISP_OK &&
         wisp_wgpu_bind(d, k, (wisp_wgpu_binding[]){{o.b, 0, 0}}, 1, &g) == WISP_OK;
    if (ok) {
      wisp_wgpu_batch b;
      ok = wisp_wgpu_batch_begin(d, &b) == WISP_OK;
      if (ok) {
        wisp_wgpu_batch_dispatch(&b, k, g, 2, 1, 1);
        ok = wisp_wgpu_batch_submit(&b) == WISP_OK && wisp_wgpu_buf_read(d, o, 0, out, sizeof out) == WISP_OK;
      }
    }
    if (!ok) snprintf(err, sizeof err, "%s", wisp_last_error());
    for (uint32_t i = 0; ok && i < 2 * wgs[t]; i++)
      if (out[i] != (float)(scales[t] * wgs[t] + i)) {
        snprintf(err, sizeof err, "WG=%u SCALE=%g: o[%u] = %g", wgs[t], scales[t], i, out[i]);
        ok = 0;
      }
    wisp_wgpu_bind_free(d, g);
    wisp_wgpu_buf_free(d, &o);
    wisp_wgpu_kernel_free(d, k);
  }
  /* An unknown constant name is an error naming the pipeline. */
  wisp_wgpu_kernel *bad = NULL;
  wisp_wgpu_const c[1] = {{"NO_SUCH_CONSTANT", 1}};
  wisp_status st = wisp_wgpu_kernel_from_module(d, m, "main", c, 1, "override_bad", &bad);
  char bad_msg[1100];
  snprintf(bad_msg, sizeof bad_msg, "%s", wisp_last_error());
  wisp_wgpu_kernel_free(d, bad);
  d->api->ShaderModuleRelease(m);
  CHECKF(ok, "%s", err);
  CHECK(st == WISP_EDEVICE);
  CHECKF(strstr(bad_msg, "override_bad") != NULL, "%s", bad_msg);
}

static const char *k_inc_wgsl =
    "@group(0) @binding(0) var<storage, read_write> v: array<f32>;\n"
    "@compute @workgroup_size(64)\n"
    "fn main(@builtin(global_invocation_id) gid: vec3<u32>) {\n"
    "  if (gid.x < arrayLength(&v)) { v[gid.x] = v[gid.x] * 2.0 + 1.0; }\n"
    "}\n";

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Many dependent dispatches in one pass, one submit: each sees the previous
 * one's writes. Also prints the per-dispatch cost of tiny dispatches. */
TEST(webgpu_batch_dependent_dispatches) {
  WEBGPU_OR_SKIP(d);
  enum { N = 100, STEPS = 20 };
  wisp_wgpu_kernel *k = NULL;
  CHECKF(wisp_wgpu_kernel_create(d, k_inc_wgsl, "main", NULL, 0, "inc", &k) == WISP_OK, "%s", wisp_last_error());
  float v[N];
  for (int i = 0; i < N; i++) v[i] = (float)(i % 5);
  wisp_wgpu_buf buf = {0};
  WGPUBindGroup g = NULL;
  int ok = wisp_wgpu_buf_from(d, v, sizeof v, "v", &buf) == WISP_OK &&
           wisp_wgpu_bind(d, k, (wisp_wgpu_binding[]){{buf.b, 0, 0}}, 1, &g) == WISP_OK;
  wisp_wgpu_batch b;
  if (ok) ok = wisp_wgpu_batch_begin(d, &b) == WISP_OK;
  if (ok) {
    for (int s = 0; s < STEPS; s++) wisp_wgpu_batch_dispatch(&b, k, g, (N + 63) / 64, 1, 1);
    ok = wisp_wgpu_batch_submit(&b) == WISP_OK && wisp_wgpu_buf_read(d, buf, 0, v, sizeof v) == WISP_OK;
  }
  /* Overhead: n tiny dispatches, one submit, wait. */
  double per[3] = {1e30, 1e30, 1e30}; /* best of 3 rounds, in us */
  const int counts[3] = {1, 100, 400};
  for (int round = 0; round < 3; round++) {
    for (int c = 0; ok && c < 3; c++) {
      double t0 = now_s();
      ok = wisp_wgpu_batch_begin(d, &b) == WISP_OK;
      if (!ok) break;
      for (int i = 0; i < counts[c]; i++) wisp_wgpu_batch_dispatch(&b, k, g, 1, 1, 1);
      ok = wisp_wgpu_batch_submit(&b) == WISP_OK && wisp_wgpu_finish(d) == WISP_OK;
      double us = (now_s() - t0) * 1e6;
      if (us < per[c]) per[c] = us;
    }
  }
  char err[1100];
  snprintf(err, sizeof err, "%s", wisp_last_error());
  wisp_wgpu_bind_free(d, g);
  wisp_wgpu_buf_free(d, &buf);
  wisp_wgpu_kernel_free(d, k);
  CHECKF(ok, "%s", err);
  printf("  %s: submit+wait of 1 dispatch %.0f us; %.1f us/dispatch over 100, %.1f us/dispatch over 400\n",
         d->info.name, per[0], (per[1] - per[0]) / 99.0, (per[2] - per[0]) / 399.0);
  for (int i = 0; i < N; i++) {
    double want = i % 5;
    for (int s = 0; s < STEPS; s++) want = want * 2 + 1;
    CHECKF(v[i] == (float)want, "v[%d] = %g, want %g", i, v[i], want);
  }
}

/* A bad dispatch is reported by batch_submit, and the device stays usable. */
TEST(webgpu_batch_reports_errors) {
  WEBGPU_OR_SKIP(d);
  wisp_wgpu_kernel *k = NULL;
  CHECKF(wisp_wgpu_kernel_create(d, k_inc_wgsl, "main", NULL, 0, "inc", &k) == WISP_OK, "%s", wisp_last_error());
  wisp_wgpu_buf buf = {0};
  WGPUBindGroup g = NULL;
  int ok = wisp_wgpu_buf_create(d, 256, WISP_WGPU_STORAGE, "v", &buf) == WISP_OK &&
           wisp_wgpu_bind(d, k, (wisp_wgpu_binding[]){{buf.b, 0, 0}}, 1, &g) == WISP_OK;
  wisp_status st = WISP_OK;
  char msg[1100] = "";
  if (ok) {
    wisp_wgpu_batch b;
    ok = wisp_wgpu_batch_begin(d, &b) == WISP_OK;
    if (ok) {
      wisp_wgpu_batch_dispatch(&b, k, g, d->info.max_compute_workgroups_per_dimension + 1, 1, 1);
      st = wisp_wgpu_batch_submit(&b);
      snprintf(msg, sizeof msg, "%s", wisp_last_error());
    }
  }
  int usable = ok && wisp_wgpu_finish(d) == WISP_OK;
  wisp_wgpu_bind_free(d, g);
  wisp_wgpu_buf_free(d, &buf);
  wisp_wgpu_kernel_free(d, k);
  CHECK(ok);
  CHECK(st == WISP_EDEVICE);
  CHECKF(strstr(msg, "exceeds") != NULL && strchr(msg, '\n') == NULL, "%s", msg);
  CHECKF(usable, "%s", wisp_last_error());
}

/* Waits never hang: a flag nobody sets times out with a message. */
TEST(webgpu_wait_times_out) {
  WEBGPU_OR_SKIP(d);
  uint64_t saved = d->timeout_ns;
  d->timeout_ns = 20ull * 1000000ull;
  volatile int never = 0;
  double t0 = now_s();
  wisp_status st = wisp_wgpu_wait_flag(d, &never, "a flag nobody sets");
  double el = now_s() - t0;
  d->timeout_ns = saved;
  CHECK(st == WISP_EDEVICE);
  CHECKF(strstr(wisp_last_error(), "timed out") && strstr(wisp_last_error(), "a flag nobody sets"), "%s",
         wisp_last_error());
  /* The upper bound only says the wait ended (a loaded machine may be slow
   * to wake the process); the verdict is the status and the message. */
  CHECKF(el >= 0.019 && el < 120.0, "waited %.3f s for a 20 ms timeout", el);
}

/* A wait lasts until the work is done: the limit (only against a device
 * that never answers) is minutes, far beyond what load makes of a readback
 * or a kernel's first compile on lavapipe. */
TEST(webgpu_wait_limit_is_minutes) {
  WEBGPU_OR_SKIP(d);
  CHECKF(d->timeout_ns >= 300ull * 1000000000ull, "wait limit %.1f s", (double)d->timeout_ns * 1e-9);
}

/* A lost device ends a wait with the loss message (after a grace of 2 s
 * for the callbacks Dawn completes on loss; not after the limit with "timed
 * out"). The loss is recorded as on_lost would. */
TEST(webgpu_wait_ends_on_device_loss) {
  WEBGPU_OR_SKIP(d);
  pthread_mutex_lock(&d->lock);
  d->lost = WGPUDeviceLostReason_Unknown;
  snprintf(d->lost_message, sizeof d->lost_message, "device lost (reason 1): planted by a test");
  pthread_mutex_unlock(&d->lock);
  volatile int never = 0;
  wisp_status st = wisp_wgpu_wait_flag(d, &never, "a flag nobody sets");
  char msg[512];
  snprintf(msg, sizeof msg, "%s", wisp_last_error());
  pthread_mutex_lock(&d->lock);
  d->lost = 0;
  d->lost_message[0] = 0;
  pthread_mutex_unlock(&d->lock);
  CHECK(st == WISP_EDEVICE);
  CHECKF(strstr(msg, "planted by a test") && !strstr(msg, "timed out") && !strchr(msg, '\n'), "%s", msg);
}
