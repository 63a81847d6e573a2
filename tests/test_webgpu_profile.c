/* The per-kernel profiler (WISP_WEBGPU_PROFILE=1, wgpu_profile.h): every
 * dispatch is timed under its kernel's label, and work still computes the
 * same results in its one-pass-per-dispatch mode. */
#include <stdlib.h>
#include <string.h>

#include "backend/webgpu/wgpu_compute.h"
#include "backend/webgpu/wgpu_profile.h"
#include "test.h"
#include "util/err.h"
#include "webgpu_fixture.h"

static const char *k_add_one =
    "@group(0) @binding(0) var<storage, read_write> v: array<u32>;\n"
    "@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) g: vec3<u32>) {\n"
    "  if (g.x < arrayLength(&v)) { v[g.x] = v[g.x] + 1u; }\n"
    "}\n";

TEST(webgpu_profile_times_each_dispatch_by_kernel) {
  WEBGPU_OR_SKIP(shared);
  if (!shared->has_timestamp_query) SKIP("adapter has no timestamp-query (profiler unavailable, checked: none)");
  wisp_wgpu_device_opts o = {.profile = 1};
  wisp_wgpu_device *d = NULL;
  wisp_status st = wisp_wgpu_device_open(&o, &d);
  CHECKF(st == WISP_OK, "%s", wisp_last_error());
  if (st) return;
  wisp_wgpu_kernel *ka = NULL, *kb = NULL;
  wisp_wgpu_buf v = {0};
  WGPUBindGroup ga = NULL, gb = NULL;
  CHECK(!wisp_wgpu_kernel_create(d, k_add_one, "main", NULL, 0, "add_a", &ka));
  CHECK(!wisp_wgpu_kernel_create(d, k_add_one, "main", NULL, 0, "add_b", &kb));
  CHECK(!wisp_wgpu_buf_create(d, 1000 * 4, WISP_WGPU_STORAGE, "v", &v));
  if (ka && kb && v.b) {
    CHECK(!wisp_wgpu_bind(d, ka, (wisp_wgpu_binding[]){{v.b, 0, 0}}, 1, &ga));
    CHECK(!wisp_wgpu_bind(d, kb, (wisp_wgpu_binding[]){{v.b, 0, 0}}, 1, &gb));
    wisp_wgpu_batch b;
    CHECK(!wisp_wgpu_batch_begin(d, &b));
    CHECK(d->profile != NULL); /* made by the first batch */
    wisp_wgpu_batch_dispatch(&b, ka, ga, 16, 1, 1);
    wisp_wgpu_batch_dispatch(&b, kb, gb, 16, 1, 1);
    wisp_wgpu_batch_dispatch(&b, ka, ga, 16, 1, 1);
    CHECKF(!wisp_wgpu_batch_submit(&b), "%s", wisp_last_error());
    uint32_t out[1000];
    CHECK(!wisp_wgpu_buf_read(d, v, 0, out, sizeof out));
    int ok = 1;
    for (int i = 0; i < 1000; i++) ok &= out[i] == 3u;
    CHECKF(ok, "three dispatches in separate timed passes did not each add one (v[0] = %u)", out[0]);
    uint64_t ns_a = 0, ns_b = 0;
    CHECK(wisp_wgpu_profile_dispatches(d->profile, "add_a", &ns_a) == 2);
    CHECK(wisp_wgpu_profile_dispatches(d->profile, "add_b", &ns_b) == 1);
    CHECK(wisp_wgpu_profile_dispatches(d->profile, "missing", NULL) == 0);
    /* A dispatch takes some time, and far less than a second. */
    CHECKF(ns_a > 0 && ns_a < 1000000000ull, "add_a timed %llu ns", (unsigned long long)ns_a);
  }
  if (ga) wisp_wgpu_bind_free(d, ga);
  if (gb) wisp_wgpu_bind_free(d, gb);
  wisp_wgpu_buf_free(d, &v);
  wisp_wgpu_kernel_free(d, ka);
  wisp_wgpu_kernel_free(d, kb);
  wisp_wgpu_device_close(d); /* prints the report to stderr */
}
