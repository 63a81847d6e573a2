/* dlopen + dlsym of the Dawn library into a wisp_wgpu_api table; see
 * wgpu_loader.h for the search order. */
#include "backend/webgpu/wgpu_loader.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/env.h"
#include "util/err.h"

#define LIB_REL ".cache/webgpu/libwebgpu_wrapper.so"

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static wisp_wgpu_api g_api;
static int g_loaded;
static char g_path[PATH_MAX];

static int file_exists(const char *p) { return access(p, R_OK) == 0; }

/* Picks the library path; returns 0 and fills `path`, or a wisp_fail. */
static wisp_status find_library(char *path, size_t cap) {
  const char *env = wisp_env_webgpu_lib();
  if (env) {
    if (!file_exists(env))
      return wisp_fail(WISP_EDEVICE, "WebGPU library not found at WISP_WEBGPU_LIB=%s", env);
    int k = snprintf(path, cap, "%s", env);
    if (k < 0 || (size_t)k >= cap) return wisp_fail(WISP_EDEVICE, "WISP_WEBGPU_LIB path too long");
    return WISP_OK;
  }
  if (file_exists(LIB_REL)) {
    char cwd[PATH_MAX];
    int n = getcwd(cwd, sizeof cwd) ? snprintf(path, cap, "%s/%s", cwd, LIB_REL)
                                    : snprintf(path, cap, "%s", LIB_REL);
    if (n < 0 || (size_t)n >= cap) snprintf(path, cap, "%s", LIB_REL);
    return WISP_OK;
  }
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  char cand[PATH_MAX + 64] = "";
  if (n > 0) {
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    if (slash) *slash = 0;
    int m = snprintf(cand, sizeof cand, "%s/../%s", exe, LIB_REL);
    if (m > 0 && (size_t)m < sizeof cand && file_exists(cand)) {
      char real[PATH_MAX];
      int k = snprintf(path, cap, "%s", realpath(cand, real) ? real : cand);
      if (k < 0 || (size_t)k >= cap) return wisp_fail(WISP_EDEVICE, "WebGPU library path too long: %s", cand);
      return WISP_OK;
    }
  }
  return wisp_fail(WISP_EDEVICE,
                   "WebGPU library not found: tried ./%s and %s (run scripts/webgpu-deps.sh "
                   "or set WISP_WEBGPU_LIB)",
                   LIB_REL, cand[0] ? cand : "<executable dir>/../" LIB_REL);
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
