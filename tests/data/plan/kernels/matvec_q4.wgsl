// Test fixture (not a wisp kernel): stands in for src/backend/webgpu/kernels/matvec_q4.wgsl.
enable subgroups;

@group(0) @binding(1) var<storage, read> x : array<f32>;
@group(0) @binding(3) var<storage, read_write> y : array<f32>;

@compute @workgroup_size(128)
fn main(@builtin(global_invocation_id) gid : vec3<u32>) {
  y[gid.x] = subgroupAdd(x[gid.x]);
}
