/* Start-up shared by the device probes (grid_probe, phase_probe, stream_probe). */
#ifndef WISP_TOOLS_PROBE_OPEN_H
#define WISP_TOOLS_PROBE_OPEN_H

#include "backend/webgpu/wgpu_compute.h"

/* Reads the probe's WGSL from wgsl_path into *wgsl (NULL path: none; free()
 * it) and opens the default WebGPU device the way the tests do (the pinned
 * Vulkan driver), with a timeout of timeout_ms a wait. On failure prints
 * "<tool>: <why>" on stderr, releases what it took and returns 0. Run from
 * the repository root (the WGSL path is relative to it). */
int probe_open(const char *tool, const char *wgsl_path, int timeout_ms, char **wgsl, wisp_wgpu_device **d);

#endif
