/* The debug guard against out-of-bounds storage accesses (wgpu_device_memory.h:
 * sentinel padding after every storage buffer, checked after each submit):
 * first that it catches a kernel reading and writing past a buffer, then
 * re-runs of the tests that drive every WebGPU kernel (whole models, the
 * decode loop, the profile kernels, odd shapes) on guarded devices. Dawn's
 * robustness transform is off by default (wgpu_device.c), so a kernel that
 * reads or writes past a binding is a bug these re-runs must catch rather
 * than something clamping hides. */
#include <stdlib.h>
#include <string.h>

#include "backend/webgpu/wgpu_compute.h"
#include "test.h"
#include "util/err.h"
#include "webgpu_fixture.h"

/* y[i] = x[i + p.x] ^ p.y for i < n, and with p.z = 1 also y[n] = 7 (one
 * past y's end). */
static const char *k_probe =
    "struct P { off: u32, flip: u32, write_past: u32, n: u32 }\n"
    "@group(0) @binding(0) var<storage, read> x: array<u32>;\n"
    "@group(0) @binding(1) var<storage, read_write> y: array<u32>;\n"
    "@group(0) @binding(2) var<uniform> p: P;\n"
    "@compute @workgroup_size(64)\n"
    "fn main(@builtin(global_invocation_id) gid: vec3<u32>) {\n"
    "  let i = gid.x;\n"
    "  if (i < p.n) {\n"
    "    y[i] = x[i + p.off] ^ p.flip;\n"
    "  } else if (i == p.n && p.write_past == 1u) {\n"
    "    y[i] = 7u;\n"
    "  }\n"
    "}\n";

enum { N = 37 };

/* One dispatch of the probe; reads y back into out. */
static wisp_status probe(wisp_wgpu_device *d, const wisp_wgpu_kernel *k, wisp_wgpu_buf x, wisp_wgpu_buf y,
                         uint32_t off, uint32_t write_past, uint32_t *out) {
  const uint32_t pv[4] = {off, 0x5a5a5a5au, write_past, N};
  wisp_wgpu_buf pb = {0};
  WGPUBindGroup g = NULL;
  wisp_wgpu_batch b;
  wisp_status st = wisp_wgpu_buf_create(d, sizeof pv, WISP_WGPU_UNIFORM, "probe params", &pb);
  if (!st) st = wisp_wgpu_buf_write(d, pb, 0, pv, sizeof pv);
  if (!st) st = wisp_wgpu_bind(d, k, (wisp_wgpu_binding[]){{x.b, 0, 0}, {y.b, 0, 0}, {pb.b, 0, 0}}, 3, &g);
  if (!st) st = wisp_wgpu_batch_begin(d, &b);
  if (!st) {
    wisp_wgpu_batch_dispatch(&b, k, g, 1, 1, 1);
    st = wisp_wgpu_batch_submit(&b);
  }
  if (!st) st = wisp_wgpu_buf_read(d, y, 0, out, N * 4);
  wisp_wgpu_bind_free(d, g);
  wisp_wgpu_buf_free(d, &pb);
  return st;
}

/* The guard itself: a read past x's end sees the sentinel, a write past y's
 * end fails the check (once: the padding is refilled), and in-bounds work
 * passes. Also with Dawn's robustness on (opts.robust), where the
 * padding is inside the binding and nothing is clamped before it. */
TEST(webgpu_guard_catches_out_of_bounds) {
  WEBGPU_OR_SKIP(shared);
  (void)shared;
  char err[1100] = "";
  int ok = 1;
  for (int robust = 0; ok && robust < 2; robust++) {
    wisp_wgpu_device_opts o = {.guard_bytes = 256, .robust = robust};
    wisp_wgpu_device *d = NULL;
    wisp_status st = wisp_wgpu_device_open(&o, &d);
    CHECKF(!st, "guarded device: %s", wisp_last_error());
    uint32_t xs[N], y0[N], y1[N], y2[N];
    for (uint32_t i = 0; i < N; i++) xs[i] = 1000 + i;
    wisp_wgpu_kernel *k = NULL;
    wisp_wgpu_buf x = {0}, y = {0};
    wisp_status e_in = WISP_OK, e_read = WISP_OK, e_write = WISP_OK, c_in = WISP_OK, c_read = WISP_OK, c_again = WISP_OK;
    wisp_status c_write = WISP_OK;
    char c_write_msg[600] = "";
    st = wisp_wgpu_kernel_create(d, k_probe, "main", NULL, 0, "guard probe", &k);
    if (!st) st = wisp_wgpu_buf_from(d, xs, sizeof xs, "guard x", &x);
    if (!st) st = wisp_wgpu_buf_create(d, sizeof y0, WISP_WGPU_STORAGE, "guard y", &y);
    if (!st) {
      e_in = probe(d, k, x, y, 0, 0, y0);
      c_in = wisp_wgpu_guard_check(d);
      e_read = probe(d, k, x, y, 1, 0, y1);
      c_read = wisp_wgpu_guard_check(d);
      e_write = probe(d, k, x, y, 0, 1, y2);
      c_write = wisp_wgpu_guard_check(d);
      snprintf(c_write_msg, sizeof c_write_msg, "%s", wisp_last_error());
      c_again = wisp_wgpu_guard_check(d);
    }
    const uint64_t data = st ? 0 : wisp_wgpu_buffer_data_size(d, y.b);
    const uint64_t whole = st ? 0 : d->api->BufferGetSize(y.b);
    wisp_wgpu_buf_free(d, &x);
    wisp_wgpu_buf_free(d, &y);
    wisp_wgpu_kernel_free(d, k);
    wisp_wgpu_device_close(d);
    const char *mode = robust ? "robustness on" : "robustness off";
    if (st || e_in || e_read || e_write) {
      snprintf(err, sizeof err, "%s: %s", mode, wisp_last_error());
      ok = 0;
      break;
    }
    for (uint32_t i = 0; ok && i < N; i++) {
      const uint32_t want1 = i + 1 < N ? xs[i + 1] : WISP_WGPU_GUARD_WORD; /* x[N] is padding */
      if (y0[i] != (xs[i] ^ 0x5a5a5a5au) || y1[i] != (want1 ^ 0x5a5a5a5au) || y2[i] != y0[i]) {
        snprintf(err, sizeof err, "%s: y[%u] = %08x / %08x / %08x", mode, i, y0[i], y1[i], y2[i]);
        ok = 0;
      }
    }
    if (ok && (c_in || c_read)) {
      snprintf(err, sizeof err, "%s: in-bounds work failed the guard check", mode);
      ok = 0;
    }
    if (ok && (c_write != WISP_EDEVICE || !strstr(c_write_msg, "guard y") || !strstr(c_write_msg, "past its end"))) {
      snprintf(err, sizeof err, "%s: a write past y's end was not caught: %s", mode, c_write_msg);
      ok = 0;
    }
    if (ok && c_again) {
      snprintf(err, sizeof err, "%s: the same overwrite was reported twice", mode);
      ok = 0;
    }
    if (ok && (data != N * 4 || whole != data + 256)) {
      snprintf(err, sizeof err, "%s: y holds %llu bytes of data in %llu", mode, (unsigned long long)data,
               (unsigned long long)whole);
      ok = 0;
    }
  }
  CHECKF(ok, "%s", err);
}

/* Tests re-run with every device and backend guarded (the shared test
 * device too: webgpu_fixture.c hands out a guarded one while
 * WISP_WEBGPU_GUARD is set), with Dawn's robustness on: then a read past a
 * buffer's data returns the NaN sentinel wherever it lands (clamped into the
 * padding if further out) and a write lands in the padding, which the
 * backend checks after every submit. Together they run every WebGPU kernel:
 * LFM2 and Qwen 3.5 models (fused, unfused, f16 KV, Q4_K, the seed profile's
 * kernels), the device decode loop (sampling, argmax, copies), the int8
 * prefill product, F16 / Q8_0 weights, odd shapes, the products of several
 * sequences a step, the chunked Gated DeltaNet. */
static const char *const k_reruns[] = {
    "webgpu_backend_small_model_parity",      "webgpu_backend_small_model_unfused",
    "webgpu_backend_small_model_kv16",        "webgpu_backend_fused_conv",
    "webgpu_backend_matvec_partial_vec4_runs", "webgpu_backend_fused_argmax_rounded_grid",
    "webgpu_backend_attention",               "webgpu_qwen_small_model_parity",
    "webgpu_qwen_small_model_kv16",           "webgpu_qwen_seed_profile",
    "webgpu_qwen_attention_head256_profile_kernel", "webgpu_qwen_gated_deltanet",
    "webgpu_qwen_q4k_fused_norm_and_ffn",     "decode_loop_webgpu_fused_argmax",
    "decode_loop_webgpu_pipelined_matches_sequential", "decode_loop_webgpu_sampler_matches_reference",
    "webgpu_matmul_i8_small_model_tokens",    "webgpu_backend_f16_q8_0_weights",
    "webgpu_rows_do_not_interfere",           "webgpu_dn_chunked_matches_cpu_and_recurrence",
    "webgpu_dn_chunked_column_blocks",
};

/* Under AddressSanitizer (the second half of `make test`) the re-runs are
 * left out: what they add is the WGSL kernels' accesses, checked by the
 * guard on the device and the same in both builds (the optimised build's
 * re-runs check them), while the host code they run is the tests' own,
 * which the sanitized build runs once already. They are the suite's largest
 * cost (about 40 % of its CPU time: every kernel compiled again for the
 * robust devices), so the sanitized run reports them skipped. */
TEST(webgpu_guard_reruns) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  if (TEST_ASAN) SKIP("ASan build: the guarded re-runs check WGSL kernels, which the optimised build's re-runs cover");
  static const char *const vars[2] = {"WISP_WEBGPU_GUARD", "WISP_WEBGPU_ROBUST"};
  static const char *const vals[2] = {"1", "1"};
  char saved[2][64];
  int had[2];
  for (int i = 0; i < 2; i++) {
    const char *v = getenv(vars[i]);
    had[i] = v != NULL;
    snprintf(saved[i], sizeof saved[i], "%s", v ? v : "");
    setenv(vars[i], vals[i], 1);
  }
  int failed = 0, missing = 0, skipped = 0;
  char skipped_names[512] = "";
  for (size_t i = 0; i < sizeof k_reruns / sizeof k_reruns[0]; i++) {
    const int r = test_run_named(k_reruns[i]);
    if (r == 2) { /* it checked nothing under the guard: not a pass */
      size_t used = strlen(skipped_names);
      snprintf(skipped_names + used, sizeof skipped_names - used, "%s%s", skipped ? ", " : "", k_reruns[i]);
      skipped++;
    }
    if (r == 0) {
      fprintf(stderr, "  (in the guarded re-run of %s)\n", k_reruns[i]);
      failed++;
    }
    if (r < 0) {
      fprintf(stderr, "  no test named %s\n", k_reruns[i]);
      missing++;
    }
  }
  for (int i = 0; i < 2; i++) {
    if (had[i]) setenv(vars[i], saved[i], 1);
    else unsetenv(vars[i]);
  }
  CHECKF(!failed && !missing, "%d guarded re-run(s) failed, %d missing", failed, missing);
  if (skipped) SKIP("%d guarded re-run(s) skipped, so the guard did not check them: %s", skipped, skipped_names);
}
