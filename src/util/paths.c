/* Data-file lookup; see paths.h. */
#include "util/paths.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/env.h"
#include "util/file.h"

const char *wisp_repo_root(void) {
  static char root[PATH_MAX];
  if (root[0]) return root;
  const char *home = wisp_env_home();
  if (home) {
    snprintf(root, sizeof root, "%s", home);
    return root;
  }
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) {
    snprintf(root, sizeof root, ".");
    return root;
  }
  exe[n] = 0;
  char *slash = strrchr(exe, '/');
  if (slash) *slash = 0;           /* .../build */
  slash = strrchr(exe, '/');
  if (slash) *slash = 0;           /* the repository */
  char *real = realpath(exe[0] ? exe : "/", NULL);
  snprintf(root, sizeof root, "%s", real ? real : exe);
  free(real);
  return root;
}

const char *wisp_data_path(const char *rel, char *out, size_t cap) {
  if (rel[0] == '/' || wisp_path_exists(rel)) {
    snprintf(out, cap, "%s", rel);
    return out;
  }
  snprintf(out, cap, "%s/%s", wisp_repo_root(), rel);
  return out;
}
