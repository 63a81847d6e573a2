/* `wisp devices`: the WebGPU adapters this machine offers, with the features
 * and limits the WebGPU backend cares about. Exits 1 with a one-line error
 * when the Dawn library or any adapter is missing. */
#include <stdio.h>
#include <string.h>

#include "backend/webgpu/wgpu_device.h"
#include "backend/webgpu/wgpu_loader.h"
#include "cli/commands.h"
#include "cli/opts.h"

static void print_size(const char *name, uint64_t v) {
  if (v >= (1ull << 30) && v % (1ull << 20) == 0)
    printf("    %-36s %llu (%.1f GiB)\n", name, (unsigned long long)v, (double)v / (double)(1ull << 30));
  else if (v >= (1ull << 20))
    printf("    %-36s %llu (%.1f MiB)\n", name, (unsigned long long)v, (double)v / (double)(1ull << 20));
  else
    printf("    %-36s %llu\n", name, (unsigned long long)v);
}

int cmd_devices(int argc, char **argv) {
  const cli_spec spec = {"devices", "",
                         "Lists WebGPU adapters (Dawn, loaded from $WISP_WEBGPU_LIB or\n"
                         ".cache/webgpu/libwebgpu_wrapper.so) with their features and limits.",
                         NULL, 0, NULL, 0, NULL};
  int pr = cli_parse(&spec, argc, argv);
  if (pr != CLI_CONTINUE) return pr;
  wisp_wgpu_info infos[8];
  int n = 0;
  if (wisp_wgpu_list_adapters(infos, 8, &n) != WISP_OK) return cli_error("devices");
  printf("WebGPU library: %s\n", wisp_wgpu_lib_path());
  for (int a = 0; a < n; a++) {
    const wisp_wgpu_info *i = &infos[a];
    printf("adapter %d: %s\n", a, i->name);
    printf("  vendor:       %s (0x%04x), device 0x%04x, architecture %s\n", i->vendor[0] ? i->vendor : "?",
           i->vendor_id, i->device_id, i->architecture[0] ? i->architecture : "?");
    if (i->description[0]) printf("  driver:       %s\n", i->description);
    printf("  backend:      %s\n", wisp_wgpu_backend_name(i->backend));
    printf("  type:         %s\n", wisp_wgpu_adapter_type_name(i->adapter_type));
    printf("  subgroups:    %u..%u\n", i->subgroup_min_size, i->subgroup_max_size);
    printf("  features:    ");
    for (int f = 0; f < i->n_features; f++) {
      const char *nm = wisp_wgpu_feature_name(i->features[f]);
      if (nm) printf(" %s", nm);
      else printf(" 0x%x", i->features[f]);
    }
    printf("\n  limits:\n");
    print_size("maxBufferSize", i->max_buffer_size);
    print_size("maxStorageBufferBindingSize", i->max_storage_buffer_binding_size);
    print_size("maxUniformBufferBindingSize", i->max_uniform_buffer_binding_size);
    print_size("maxComputeInvocationsPerWorkgroup", i->max_compute_invocations_per_workgroup);
    print_size("maxComputeWorkgroupSizeX", i->max_compute_workgroup_size_x);
    print_size("maxComputeWorkgroupStorageSize", i->max_compute_workgroup_storage_size);
    print_size("maxComputeWorkgroupsPerDimension", i->max_compute_workgroups_per_dimension);
    print_size("maxStorageBuffersPerShaderStage", i->max_storage_buffers_per_shader_stage);
    print_size("maxBindGroups", i->max_bind_groups);
    print_size("minStorageBufferOffsetAlignment", i->min_storage_buffer_offset_alignment);
  }
  return 0;
}
