/* Sampling on the device (wgpu_sampling.c). */
#ifndef WISP_WGPU_SAMPLING_H
#define WISP_WGPU_SAMPLING_H

#include "backend/backend.h"

/* backend.h's sample_id, penalize. */
void wisp_wgpu_sampling_install(wisp_backend *vt);

#endif
