/* `wisp devices`: the WebGPU adapters this machine offers, with the
 * features and limits the WebGPU backend cares about (factory.h,
 * wisp_backend_print_devices). */
#include <stdio.h>
#include <string.h>

#include "backend/factory.h"
#include "backend/webgpu/wgpu_device.h"
#include "backend/webgpu/wgpu_loader.h"

static void print_size(FILE *out, const char *name, uint64_t v) {
  if (v >= (1ull << 30) && v % (1ull << 20) == 0)
    fprintf(out, "    %-36s %llu (%.1f GiB)\n", name, (unsigned long long)v, (double)v / (double)(1ull << 30));
  else if (v >= (1ull << 20))
    fprintf(out, "    %-36s %llu (%.1f MiB)\n", name, (unsigned long long)v, (double)v / (double)(1ull << 20));
  else
    fprintf(out, "    %-36s %llu\n", name, (unsigned long long)v);
}

wisp_status wisp_backend_print_devices(FILE *out) {
  wisp_wgpu_info infos[8];
  int n = 0;
  wisp_status st = wisp_wgpu_list_adapters(infos, 8, &n);
  if (st) return st;
  fprintf(out, "WebGPU library: %s\n", wisp_wgpu_lib_path());
  for (int a = 0; a < n; a++) {
    const wisp_wgpu_info *i = &infos[a];
    fprintf(out, "adapter %d: %s\n", a, i->name);
    fprintf(out, "  vendor:       %s (0x%04x), device 0x%04x, architecture %s\n", i->vendor[0] ? i->vendor : "?",
           i->vendor_id, i->device_id, i->architecture[0] ? i->architecture : "?");
    if (i->description[0]) fprintf(out, "  driver:       %s\n", i->description);
    fprintf(out, "  backend:      %s\n", wisp_wgpu_backend_name(i->backend));
    fprintf(out, "  type:         %s\n", wisp_wgpu_adapter_type_name(i->adapter_type));
    fprintf(out, "  subgroups:    %u..%u\n", i->subgroup_min_size, i->subgroup_max_size);
    fprintf(out, "  features:    ");
    for (int f = 0; f < i->n_features; f++) {
      const char *nm = wisp_wgpu_feature_name(i->features[f]);
      if (nm) fprintf(out, " %s", nm);
      else fprintf(out, " 0x%x", i->features[f]);
    }
    fprintf(out, "\n  limits:\n");
    print_size(out, "maxBufferSize", i->max_buffer_size);
    print_size(out, "maxStorageBufferBindingSize", i->max_storage_buffer_binding_size);
    print_size(out, "maxUniformBufferBindingSize", i->max_uniform_buffer_binding_size);
    print_size(out, "maxComputeInvocationsPerWorkgroup", i->max_compute_invocations_per_workgroup);
    print_size(out, "maxComputeWorkgroupSizeX", i->max_compute_workgroup_size_x);
    print_size(out, "maxComputeWorkgroupStorageSize", i->max_compute_workgroup_storage_size);
    print_size(out, "maxComputeWorkgroupsPerDimension", i->max_compute_workgroups_per_dimension);
    print_size(out, "maxStorageBuffersPerShaderStage", i->max_storage_buffers_per_shader_stage);
    print_size(out, "maxBindGroups", i->max_bind_groups);
    print_size(out, "minStorageBufferOffsetAlignment", i->min_storage_buffer_offset_alignment);
  }
  return WISP_OK;
}
