/* Every read of a WISP_* environment variable in the library; see env.h. */
#include "util/env.h"

#include <stdlib.h>
#include <string.h>

/* secure_getenv: in a setuid or setgid program (or one with file
 * capabilities) every WISP_* variable reads as unset, so no one can point
 * such a program at a library or directory of their choosing. */
static const char *get(const char *name) {
  const char *v = secure_getenv(name);
  return v && *v ? v : NULL;
}

const char *wisp_env_webgpu_lib(void) { return get("WISP_WEBGPU_LIB"); }

const char *wisp_env_home(void) { return get("WISP_HOME"); }
const char *wisp_env_named(const char *name) { return get(name); }

int wisp_env_verbose(void) {
  const char *v = get("WISP_VERBOSE");
  return v && strcmp(v, "0") != 0;
}

int wisp_env_webgpu_profile(void) {
  const char *v = get("WISP_WEBGPU_PROFILE");
  const int n = v ? atoi(v) : 0;
  return n >= 1 && n <= 64 ? n : 0;
}

uint32_t wisp_env_webgpu_guard(int *each) {
  const char *v = get("WISP_WEBGPU_GUARD");
  if (each) *each = v && !strcmp(v, "each");
  if (!v || !strcmp(v, "0")) return 0;
  const long n = atol(v);
  return n > 1 ? (uint32_t)n : 4096u;
}

int wisp_env_webgpu_robust(void) {
  const char *v = get("WISP_WEBGPU_ROBUST");
  return v && strcmp(v, "0") != 0;
}
