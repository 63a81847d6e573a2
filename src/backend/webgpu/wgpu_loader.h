/* Loads the Dawn library at run time (dlopen) and resolves every function
 * wisp declares in wgpu_api.h. The library (libwebgpu_wrapper.so) is
 * looked up only in explicit places, never in the working directory:
 *   1. $WISP_WEBGPU_LIB (only this path when set);
 *   2. for D = the executable's directory, then libwisp.so's directory:
 *      D/, D/wisp/, D/../lib/wisp/ (an installed prefix) and
 *      D/../.cache/webgpu/ (a build tree set up by scripts/webgpu-deps.sh).
 * A missing library or symbol fails with WISP_EDEVICE and a one-line message
 * naming the path or symbol. Loading happens once per process; the library
 * stays loaded until exit (Dawn keeps threads and atexit state). */
#ifndef WISP_WGPU_LOADER_H
#define WISP_WGPU_LOADER_H

#include "backend/webgpu/wgpu_api.h"
#include "wisp.h"

/* Loads the library (first call) and returns the table in *out. Thread-safe. */
wisp_status wisp_wgpu_load(const wisp_wgpu_api **out);
/* The table after a successful wisp_wgpu_load, else NULL. */
const wisp_wgpu_api *wisp_wgpu(void);
/* Path the library was loaded from ("" before a successful load). */
const char *wisp_wgpu_lib_path(void);

#endif
