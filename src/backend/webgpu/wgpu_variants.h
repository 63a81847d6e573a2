/* The kernels the WebGPU backend runs, by registry op and variant (wgpu_variants.c). */
#ifndef WISP_WGPU_VARIANTS_H
#define WISP_WGPU_VARIANTS_H

#include "backend/backend.h"

/* WISP_OK when the backend runs registry (or profile)
 * kernel op/variant and loads `wgsl` (may be NULL) for it; else a one-line
 * error naming it. The backend's check_kernel. */
wisp_status wisp_wgpu_check_kernel(wisp_backend *be, const char *op, const char *variant, const char *wgsl);

#endif
