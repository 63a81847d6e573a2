/* Checks of wisp's declared webgpu.h subset (src/backend/webgpu/wgpu_api.h)
 * against the loaded Dawn build: each test would fail if an enum value or a
 * struct layout were wrong. */
#include <stdlib.h>
#include <string.h>

#include "backend/webgpu/wgpu_compute.h"
#include "backend/webgpu/wgpu_loader.h"
#include "test.h"
#include "util/err.h"
#include "webgpu_fixture.h"

static int is_pow2_u64(uint64_t v) { return v && !(v & (v - 1)); }

/* AdapterInfo layout: strings and enums land in the right fields. */
TEST(webgpu_abi_adapter_info) {
  WEBGPU_OR_SKIP(d);
  const wisp_wgpu_info *i = &d->info;
  printf("  adapter: %s (%s), %s, %s, subgroups %u..%u\n", i->name, i->vendor,
         wisp_wgpu_backend_name(i->backend), wisp_wgpu_adapter_type_name(i->adapter_type),
         i->subgroup_min_size, i->subgroup_max_size);
  CHECKF(i->name[0] != 0, "empty adapter name");
  CHECKF(i->backend >= WGPUBackendType_WebGPU && i->backend <= WGPUBackendType_OpenGLES,
         "backend type %d out of range", (int)i->backend);
  CHECKF(i->adapter_type >= WGPUAdapterType_DiscreteGPU && i->adapter_type <= WGPUAdapterType_Unknown,
         "adapter type %d out of range", (int)i->adapter_type);
  if (strstr(i->name, "llvmpipe")) {
    CHECK(i->adapter_type == WGPUAdapterType_CPU);
    CHECK(i->backend == WGPUBackendType_Vulkan);
  }
  if (d->has_subgroups) {
    CHECKF(i->subgroup_min_size >= 4 && i->subgroup_min_size <= i->subgroup_max_size &&
               i->subgroup_max_size <= 128 && is_pow2_u64(i->subgroup_min_size) &&
               is_pow2_u64(i->subgroup_max_size),
           "subgroup sizes %u..%u", i->subgroup_min_size, i->subgroup_max_size);
  }
}

/* Limits layout: every key limit within the range WebGPU guarantees. A
 * shifted field would put a u32 where a u64 is read, or vice versa. */
TEST(webgpu_abi_limits) {
  WEBGPU_OR_SKIP(d);
  const wisp_wgpu_info *i = &d->info;
  printf("  maxBufferSize %llu, maxStorageBufferBindingSize %llu, invocations %u, wg storage %u, "
         "storage buffers %u\n",
         (unsigned long long)i->max_buffer_size, (unsigned long long)i->max_storage_buffer_binding_size,
         i->max_compute_invocations_per_workgroup, i->max_compute_workgroup_storage_size,
         i->max_storage_buffers_per_shader_stage);
  CHECK(i->max_buffer_size >= (256ull << 20) && i->max_buffer_size <= (1ull << 48));
  CHECK(i->max_storage_buffer_binding_size >= (128ull << 20));
  CHECK(i->max_storage_buffer_binding_size <= i->max_buffer_size);
  CHECK(i->max_uniform_buffer_binding_size >= 16384 && i->max_uniform_buffer_binding_size <= (1ull << 32));
  CHECK(i->max_compute_invocations_per_workgroup >= 256 && i->max_compute_invocations_per_workgroup <= 4096);
  CHECK(i->max_compute_workgroup_storage_size >= 16384 && i->max_compute_workgroup_storage_size <= (1u << 20));
  CHECK(i->max_storage_buffers_per_shader_stage >= 8 && i->max_storage_buffers_per_shader_stage <= 1u << 20);
  CHECK(i->max_compute_workgroup_size_x >= 256 && i->max_compute_workgroup_size_x <= 4096);
  CHECK(i->max_compute_workgroups_per_dimension >= 65535);
  CHECK(is_pow2_u64(i->min_storage_buffer_offset_alignment) && i->min_storage_buffer_offset_alignment <= 256);
  CHECK(is_pow2_u64(i->min_uniform_buffer_offset_alignment) && i->min_uniform_buffer_offset_alignment <= 256);
  CHECK(i->max_bind_groups >= 4 && i->max_bind_groups <= 64);
  CHECK(i->max_bindings_per_bind_group >= 640);
}

/* The `subgroups` feature requested by wisp's enum value: the device reports
 * it, `enable subgroups` compiles, subgroupAdd sums correctly, and subgroups
 * are contiguous ranges of local_invocation_index (kernels rely on it). A
 * device opened without the feature must reject the same shader, which shows
 * that the value really is `subgroups` in this build. */
static const char *k_sg_wgsl =
    "enable subgroups;\n"
    "override WG: u32 = 64;\n"
    "@group(0) @binding(0) var<storage, read> a: array<f32>;\n"
    "@group(0) @binding(1) var<storage, read_write> o: array<u32>;\n"
    "@group(0) @binding(2) var<storage, read_write> sums: array<f32>;\n"
    "@compute @workgroup_size(WG)\n"
    "fn main(@builtin(local_invocation_index) li: u32, @builtin(subgroup_invocation_id) sli: u32,\n"
    "        @builtin(subgroup_size) sgs: u32) {\n"
    "  let s = subgroupAdd(a[li]);\n"
    "  let first = subgroupMin(li);\n"
    "  o[3u * li] = sgs;\n"
    "  o[3u * li + 1u] = sli;\n"
    "  o[3u * li + 2u] = first;\n"
    "  sums[li] = s;\n"
    "}\n";

TEST(webgpu_abi_subgroups) {
  WEBGPU_OR_SKIP(d);
  if (!wisp_wgpu_has_feature(&d->info, WGPUFeatureName_Subgroups) && !d->has_subgroups)
    SKIP("adapter %s does not offer subgroups", d->info.name);
  CHECKF(d->has_subgroups, "device created without subgroups although requested");
  enum { WG = 64 };
  wisp_wgpu_kernel *k = NULL;
  wisp_wgpu_const c[] = {{"WG", WG}};
  CHECKF(wisp_wgpu_kernel_create(d, k_sg_wgsl, "main", c, 1, "subgroup_probe", &k) == WISP_OK, "%s",
         wisp_last_error());
  float a[WG];
  uint64_t seed = 42;
  for (int i = 0; i < WG; i++) a[i] = (float)(test_rand_u32(&seed) % 1000) / 8.0f; /* exact sums */
  wisp_wgpu_buf A = {0}, O = {0}, S = {0};
  WGPUBindGroup g = NULL;
  int ok = wisp_wgpu_buf_from(d, a, sizeof a, "a", &A) == WISP_OK &&
           wisp_wgpu_buf_create(d, 3 * WG * 4, WISP_WGPU_STORAGE, "o", &O) == WISP_OK &&
           wisp_wgpu_buf_create(d, WG * 4, WISP_WGPU_STORAGE, "sums", &S) == WISP_OK &&
           wisp_wgpu_bind(d, k, (wisp_wgpu_binding[]){{A.b, 0, 0}, {O.b, 0, 0}, {S.b, 0, 0}}, 3, &g) == WISP_OK;
  uint32_t o[3 * WG];
  float sums[WG];
  if (ok) {
    wisp_wgpu_batch b;
    ok = wisp_wgpu_batch_begin(d, &b) == WISP_OK;
    if (ok) {
      wisp_wgpu_batch_dispatch(&b, k, g, 1, 1, 1);
      ok = wisp_wgpu_batch_submit(&b) == WISP_OK && wisp_wgpu_buf_read(d, O, 0, o, sizeof o) == WISP_OK &&
           wisp_wgpu_buf_read(d, S, 0, sums, sizeof sums) == WISP_OK;
    }
  }
  char err[1100];
  snprintf(err, sizeof err, "%s", wisp_last_error());
  wisp_wgpu_bind_free(d, g);
  wisp_wgpu_buf_free(d, &A);
  wisp_wgpu_buf_free(d, &O);
  wisp_wgpu_buf_free(d, &S);
  wisp_wgpu_kernel_free(d, k);
  CHECKF(ok, "%s", err);
  uint32_t sgs = o[0];
  CHECKF(sgs >= d->info.subgroup_min_size && sgs <= d->info.subgroup_max_size, "subgroup size %u not in %u..%u",
         sgs, d->info.subgroup_min_size, d->info.subgroup_max_size);
  for (int i = 0; i < WG; i++) {
    CHECKF(o[3 * i] == sgs, "invocation %d: subgroup size %u vs %u", i, o[3 * i], sgs);
    CHECKF(o[3 * i + 1] == (uint32_t)i % sgs && o[3 * i + 2] == (uint32_t)i - (uint32_t)i % sgs,
           "invocation %d: subgroup lane %u, first %u: subgroups are not contiguous", i, o[3 * i + 1],
           o[3 * i + 2]);
    float want = 0;
    for (uint32_t j = i - i % sgs; j < i - i % sgs + sgs && j < WG; j++) want += a[j];
    CHECKF(sums[i] == want, "subgroupAdd at %d: %g, want %g", i, sums[i], want);
  }

  /* The same shader on a device without the feature must not compile. */
  wisp_wgpu_device_opts opts = {0};
  opts.no_subgroups = 1;
  opts.no_optional_features = 1;
  wisp_wgpu_device *d2 = NULL;
  CHECKF(wisp_wgpu_device_open(&opts, &d2) == WISP_OK, "%s", wisp_last_error());
  int has = d2->has_subgroups;
  WGPUShaderModule m = NULL;
  wisp_status st = wisp_wgpu_shader_create(d2, k_sg_wgsl, "subgroup_probe_without", &m);
  if (m) d2->api->ShaderModuleRelease(m);
  wisp_wgpu_device_close(d2);
  CHECK(!has);
  CHECKF(st != WISP_OK, "`enable subgroups` compiled on a device created without the feature");
}

/* shader-f16 (0x0A) and timestamp-query (0x03): what the device got when
 * asking by wisp's values must unlock exactly those capabilities. */
static wisp_status try_f16(wisp_wgpu_device *d) {
  WGPUShaderModule m = NULL;
  wisp_status st = wisp_wgpu_shader_create(
      d, "enable f16;\n@compute @workgroup_size(1) fn main() { var h: f16 = 1.0h; h = h + 1.0h; }\n", "f16_probe",
      &m);
  if (m) d->api->ShaderModuleRelease(m);
  return st;
}

static wisp_status try_timestamps(wisp_wgpu_device *d) {
  WGPUQuerySetDescriptor qd;
  memset(&qd, 0, sizeof qd);
  qd.type = WGPUQueryType_Timestamp;
  qd.count = 2;
  wisp_wgpu_scope_begin(d);
  WGPUQuerySet q = d->api->DeviceCreateQuerySet(d->device, &qd);
  wisp_status st = wisp_wgpu_scope_end(d, "timestamp query set");
  if (q) {
    d->api->QuerySetDestroy(q);
    d->api->QuerySetRelease(q);
  }
  return st;
}

TEST(webgpu_abi_optional_features) {
  WEBGPU_OR_SKIP(d);
  int f16 = wisp_wgpu_has_feature(&d->info, WGPUFeatureName_ShaderF16);
  int ts = wisp_wgpu_has_feature(&d->info, WGPUFeatureName_TimestampQuery);
  CHECK(f16 == d->has_shader_f16 && ts == d->has_timestamp_query);
  if (f16) CHECKF(try_f16(d) == WISP_OK, "shader-f16 requested but `enable f16` fails: %s", wisp_last_error());
  if (ts) CHECKF(try_timestamps(d) == WISP_OK, "timestamp-query requested but: %s", wisp_last_error());
  /* Without them, both must be refused. */
  wisp_wgpu_device_opts opts = {0};
  opts.no_optional_features = 1;
  wisp_wgpu_device *d2 = NULL;
  CHECKF(wisp_wgpu_device_open(&opts, &d2) == WISP_OK, "%s", wisp_last_error());
  wisp_status s16 = try_f16(d2), sts = try_timestamps(d2);
  int has16 = d2->has_shader_f16, hasts = d2->has_timestamp_query;
  wisp_wgpu_device_close(d2);
  CHECK(!has16 && !hasts);
  CHECKF(s16 != WISP_OK, "`enable f16` compiled without shader-f16");
  CHECKF(sts != WISP_OK, "timestamp query set created without timestamp-query");
  if (!f16 && !ts) SKIP("adapter offers neither shader-f16 nor timestamp-query (checked only their absence)");
}

/* The WGSL source chain (sType) works and compilation errors come back as
 * one line naming the line and column. */
TEST(webgpu_abi_wgsl_errors) {
  WEBGPU_OR_SKIP(d);
  WGPUShaderModule m = NULL;
  CHECKF(wisp_wgpu_shader_create(d, "@compute @workgroup_size(1)\nfn main() {}\n", "ok", &m) == WISP_OK, "%s",
         wisp_last_error());
  d->api->ShaderModuleRelease(m);
  m = NULL;
  wisp_status st =
      wisp_wgpu_shader_create(d, "@compute @workgroup_size(1)\nfn main() {\n  let x: u32 = 1.5;\n}\n", "bad", &m);
  CHECK(st == WISP_EDEVICE);
  CHECK(m == NULL);
  const char *e = wisp_last_error();
  CHECKF(strstr(e, ":3:") != NULL, "no line number in: %s", e);
  CHECKF(strstr(e, "bad") != NULL, "label missing in: %s", e);
  CHECKF(strchr(e, '\n') == NULL, "message has several lines: %s", e);
  /* The device stays usable and no uncaptured error was left behind. */
  CHECKF(wisp_wgpu_device_check(d) == WISP_OK, "%s", wisp_last_error());
}
