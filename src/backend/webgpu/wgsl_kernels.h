/* WGSL kernels embedded into the binary at build time: every
 * src/backend/webgpu/kernels/NAME.wgsl becomes wisp_wgsl_kernel("NAME")
 * (generated into $(BUILD)/gen/wgsl_kernels.c by scripts/embed-wgsl.sh). */
#ifndef WISP_WGSL_KERNELS_H
#define WISP_WGSL_KERNELS_H

/* The WGSL text of kernel `name`, or NULL when there is none. */
const char *wisp_wgsl_kernel(const char *name);
/* The i-th kernel's name (sorted by file name), NULL past the end. */
const char *wisp_wgsl_kernel_name(int i);

#endif
