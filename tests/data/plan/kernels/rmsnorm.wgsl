// Test fixture (not a wisp kernel): stands in for src/backend/webgpu/kernels/rmsnorm.wgsl.
enable subgroups;

@group(0) @binding(1) var<storage, read> x : array<f32>;
@group(0) @binding(3) var<storage, read_write> y : array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid : vec3<u32>) {
  y[gid.x] = x[gid.x] * inverseSqrt(subgroupAdd(x[gid.x] * x[gid.x]) + 1e-5);
}
