// Test fixture: one entry point per op so a webgpu plan can resolve every op.
@group(0) @binding(1) var<storage, read> x : array<f32>;
@group(0) @binding(2) var<storage, read_write> y : array<f32>;

@compute @workgroup_size(64) fn embed(@builtin(global_invocation_id) g : vec3<u32>) { y[g.x] = x[g.x]; }
@compute @workgroup_size(64) fn rmsnorm_portable(@builtin(global_invocation_id) g : vec3<u32>) { y[g.x] = x[g.x]; }
@compute @workgroup_size(64) fn matvec_portable(@builtin(global_invocation_id) g : vec3<u32>) { y[g.x] = x[g.x]; }
@compute @workgroup_size(8, 8) fn matmul_tiled(@builtin(global_invocation_id) g : vec3<u32>) { y[g.x] = x[g.x]; }
@compute @workgroup_size(64) fn shortconv(@builtin(global_invocation_id) g : vec3<u32>) { y[g.x] = x[g.x]; }
@compute @workgroup_size(64) fn attention(@builtin(global_invocation_id) g : vec3<u32>) { y[g.x] = x[g.x]; }
@compute @workgroup_size(64) fn swiglu(@builtin(global_invocation_id) g : vec3<u32>) { y[g.x] = x[g.x]; }
@compute @workgroup_size(64) fn residual_add(@builtin(global_invocation_id) g : vec3<u32>) { y[g.x] = x[g.x]; }
@compute @workgroup_size(64) fn sample(@builtin(global_invocation_id) g : vec3<u32>) { y[g.x] = x[g.x]; }
