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

#define LIB_NAME "libwebgpu_wrapper.so"

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static wisp_wgpu_api g_api;
static int g_loaded;
static char g_path[PATH_MAX];

static int file_exists(const char *p) { return access(p, R_OK) == 0; }

/* Where the library may be, relative to a directory holding wisp's code
 * (the executable's, or libwisp.so's): beside it; an installed prefix
 * (PREFIX/lib/wisp/ from PREFIX/lib or PREFIX/bin); a build tree's set-up
 * cache (build/../.cache/webgpu/, filled by scripts/webgpu-deps.sh). */
static const char *const k_beside[] = {"", "/wisp", "/../lib/wisp", "/../.cache/webgpu"};
#define N_BESIDE (sizeof k_beside / sizeof k_beside[0])

/* The directory of a path (cut at its last '/'); 0 when it has none. */
static int dir_of(const char *file, char *dir, size_t cap) {
  const char *slash = strrchr(file, '/');
  if (!slash || (size_t)(slash - file) >= cap) return 0;
  memcpy(dir, file, (size_t)(slash - file));
  dir[slash - file] = 0;
  return 1;
}

/* Tries each k_beside place under dir; on success path holds the real path. */
static int try_dir(const char *dir, char *path, size_t cap, char *tried, size_t tried_cap) {
  for (size_t i = 0; i < N_BESIDE; i++) {
    char cand[PATH_MAX + 64], real[PATH_MAX];
    int m = snprintf(cand, sizeof cand, "%s%s/%s", dir, k_beside[i], LIB_NAME);
    if (m < 0 || (size_t)m >= sizeof cand) continue;
    if (file_exists(cand) && realpath(cand, real)) {
      int k = snprintf(path, cap, "%s", real);
      if (k > 0 && (size_t)k < cap) return 1;
    }
    size_t used = strlen(tried);
    if (used + strlen(cand) + 3 < tried_cap) snprintf(tried + used, tried_cap - used, "%s%s", used ? ", " : "", cand);
  }
  return 0;
}

/* Picks the library path; returns 0 and fills `path`, or a wisp_fail. The
 * working directory is never searched: a library planted in whatever
 * directory wisp runs from must not be executed. */
static wisp_status find_library(char *path, size_t cap) {
  const char *env = wisp_env_webgpu_lib();
  if (env) {
    char real[PATH_MAX];
    if (!file_exists(env) || !realpath(env, real))
      return wisp_fail(WISP_EDEVICE, "WebGPU library not found at WISP_WEBGPU_LIB=%s", env);
    int k = snprintf(path, cap, "%s", real);
    if (k < 0 || (size_t)k >= cap) return wisp_fail(WISP_EDEVICE, "WISP_WEBGPU_LIB path too long");
    return WISP_OK;
  }
  char tried[2048] = "", dir[PATH_MAX];
  /* The executable's directory, then the directory of the object this code
   * is linked into (libwisp.so in an embedding program). */
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    exe[n] = 0;
    if (dir_of(exe, dir, sizeof dir) && try_dir(dir, path, cap, tried, sizeof tried)) return WISP_OK;
  }
  Dl_info info;
  char self[PATH_MAX];
  if (dladdr((void *)&g_lock, &info) && info.dli_fname && info.dli_fname[0] == '/' &&
      realpath(info.dli_fname, self) && dir_of(self, dir, sizeof dir) && try_dir(dir, path, cap, tried, sizeof tried))
    return WISP_OK;
  return wisp_fail(WISP_EDEVICE, "WebGPU library not found: tried %s (run scripts/webgpu-deps.sh or set WISP_WEBGPU_LIB)",
                   tried[0] ? tried : "nothing (no executable path)");
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
