/* dlopen + dlsym of the Dawn library into a wisp_wgpu_api table; see
 * wgpu_loader.h for the search order. */
#include "backend/webgpu/wgpu_loader.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/env.h"
#include "util/err.h"
#include "util/paths.h"

#define LIB_NAME "libwebgpu_wrapper.so"

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static wisp_wgpu_api g_api;
static int g_loaded;
static char g_path[PATH_MAX];

static int file_exists(const char *p) { return access(p, R_OK) == 0; }

/* Where the library may be under the trusted root (util/paths.h): an
 * installed prefix's lib/wisp/, or a build tree's set-up cache .cache/webgpu/
 * (filled by scripts/webgpu-deps.sh). */
static const char *const k_under_root[] = {"/lib/wisp", "/.cache/webgpu"};
#define N_UNDER_ROOT (sizeof k_under_root / sizeof k_under_root[0])

/* Fills path with the real path of `cand` once it passes the trust check. */
static wisp_status take(const char *cand, char *path, size_t cap) {
  char real[PATH_MAX];
  if (!realpath(cand, real)) return wisp_fail(WISP_EDEVICE, "WebGPU library %s: %s", cand, strerror(errno));
  wisp_status st = wisp_check_trusted(real, "WebGPU library");
  if (st) return st;
  int k = snprintf(path, cap, "%s", real);
  if (k < 0 || (size_t)k >= cap) return wisp_fail(WISP_EDEVICE, "WebGPU library path too long: %s", real);
  return WISP_OK;
}

wisp_status wisp_wgpu_find_in(const char *root, char *path, size_t cap) {
  char tried[2 * PATH_MAX + 16] = "";
  for (size_t i = 0; i < N_UNDER_ROOT; i++) {
    char cand[PATH_MAX + 64];
    int m = snprintf(cand, sizeof cand, "%s%s/%s", root, k_under_root[i], LIB_NAME);
    if (m < 0 || (size_t)m >= sizeof cand) continue;
    if (file_exists(cand)) return take(cand, path, cap);
    size_t used = strlen(tried);
    if (used + strlen(cand) + 3 < sizeof tried) snprintf(tried + used, sizeof tried - used, "%s%s", used ? ", " : "", cand);
  }
  return wisp_fail(WISP_EDEVICE, "WebGPU library not found: tried %s (run scripts/webgpu-deps.sh in the build tree, "
                   "or set WISP_WEBGPU_LIB=/path/to/libwebgpu_wrapper.so)", tried);
}

/* Picks the library path; returns 0 and fills `path`, or a wisp_fail.
 * $WISP_WEBGPU_LIB (ignored in a setuid program, util/env.h), else the
 * trusted root only: never the working directory nor the executable's
 * directory, where anyone who can write there could plant a library. */
static wisp_status find_library(char *path, size_t cap) {
  const char *env = wisp_env_webgpu_lib();
  if (env) {
    if (!file_exists(env)) return wisp_fail(WISP_EDEVICE, "WebGPU library not found at WISP_WEBGPU_LIB=%s", env);
    return take(env, path, cap);
  }
  return wisp_wgpu_find_in(wisp_trusted_root(), path, cap);
}

static wisp_status load_locked(void) {
  char path[PATH_MAX];
  wisp_status st = find_library(path, sizeof path);
  if (st) return st;
  /* RTLD_LOCAL: Dawn's bundled absl/SPIRV-Tools symbols stay private. */
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *e = dlerror();
    return wisp_fail(WISP_EDEVICE, "cannot load WebGPU library %s: %s", path, e ? e : "dlopen failed");
  }
  wisp_wgpu_api api;
  memset(&api, 0, sizeof api);
  /* dlsym returns void*; converting it to a function pointer is what POSIX
   * requires to work, done through memcpy to stay within ISO C. */
#define WISP_WGPU_FN_LOAD(name, ret, params)                                              \
  {                                                                                       \
    void *sym = dlsym(h, "wgpu" #name);                                                   \
    if (!sym) {                                                                           \
      dlclose(h);                                                                         \
      return wisp_fail(WISP_EDEVICE, "WebGPU library %s lacks symbol wgpu" #name, path);  \
    }                                                                                     \
    memcpy(&api.name, &sym, sizeof sym);                                                  \
  }
  WISP_WGPU_FUNCS(WISP_WGPU_FN_LOAD)
#undef WISP_WGPU_FN_LOAD
  g_api = api;
  snprintf(g_path, sizeof g_path, "%s", path);
  g_loaded = 1;
  return WISP_OK;
}

wisp_status wisp_wgpu_load(const wisp_wgpu_api **out) {
  pthread_mutex_lock(&g_lock);
  wisp_status st = g_loaded ? WISP_OK : load_locked();
  pthread_mutex_unlock(&g_lock);
  if (out) *out = st ? NULL : &g_api;
  return st;
}

const wisp_wgpu_api *wisp_wgpu(void) { return g_loaded ? &g_api : NULL; }

const char *wisp_wgpu_lib_path(void) { return g_loaded ? g_path : ""; }
