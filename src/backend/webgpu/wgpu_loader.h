/* Loads the Dawn library at run time (dlopen) and resolves every function
 * wisp declares in wgpu_api.h. The library (libwebgpu_wrapper.so) is
 * looked up only in places fixed when wisp was built, never in the working
 * directory nor beside a copied executable:
 *   1. $WISP_WEBGPU_LIB (only this path when set; ignored in a setuid
 *      program);
 *   2. under the trusted root (util/paths.h): ROOT/lib/wisp/ (an installed
 *      prefix) and ROOT/.cache/webgpu/ (a build tree set up by
 *      scripts/webgpu-deps.sh).
 * Whichever is found must pass wisp_check_trusted (owned by root or the
 * user, writable by no one else, up to /), or it is refused with one line.
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
/* The search of step 2 under `root` alone (for tests): fills path with
 * the library's real path, or fails with one line saying where it looked
 * and how to point wisp at a library. Loads nothing. */
wisp_status wisp_wgpu_find_in(const char *root, char *path, size_t cap);
/* Path the library was loaded from ("" before a successful load). */
const char *wisp_wgpu_lib_path(void);

#endif
