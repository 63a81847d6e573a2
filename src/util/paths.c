/* The executable's root; see paths.h. */
#include "util/paths.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/env.h"

const char *wisp_exe_root(void) {
  static char root[PATH_MAX];
  if (root[0]) return root;
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) {
    snprintf(root, sizeof root, "/nonexistent");
    return root;
  }
  exe[n] = 0;
  char *slash = strrchr(exe, '/');
  if (slash) *slash = 0;           /* .../build or PREFIX/bin */
  slash = strrchr(exe, '/');
  if (slash) *slash = 0;           /* the tree or the prefix */
  char *real = realpath(exe[0] ? exe : "/", NULL);
  snprintf(root, sizeof root, "%s", real ? real : exe);
  free(real);
  return root;
}

/* Where bench keeps its receipts (ROOT/bench/results): $WISP_HOME, else the
 * executable's root (the build tree, or the install prefix). */
const char *wisp_repo_root(void) {
  const char *home = wisp_env_home();
  return home ? home : wisp_exe_root();
}
