/* Short convolutions of the WebGPU backend (wgpu_conv.c). */
#ifndef WISP_WGPU_CONV_H
#define WISP_WGPU_CONV_H

#include "backend/backend.h"

/* backend.h's shortconv, shortconv_rows. */
void wisp_wgpu_conv_install(wisp_backend *vt);

#endif
