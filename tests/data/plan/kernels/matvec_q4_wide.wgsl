// Test fixture: a kernel a profile brings through executionPatch.addKernels.
@group(0) @binding(1) var<storage, read> x : array<f32>;
@group(0) @binding(3) var<storage, read_write> y : array<f32>;

override WORKGROUP_SIZE : u32 = 128u;

@compute @workgroup_size(WORKGROUP_SIZE)
fn main(@builtin(global_invocation_id) gid : vec3<u32>) {
  y[gid.x] = x[gid.x] * 2.0;
}
