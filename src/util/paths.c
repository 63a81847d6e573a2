/* The trusted root and the trust check; see paths.h. */
#include "util/paths.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/env.h"
#include "util/err.h"

/* The Makefile defines WISP_ROOT for this file only (the build tree, or
 * PREFIX for `make install`); a build without it trusts no directory. */
#ifndef WISP_ROOT
#define WISP_ROOT "/nonexistent"
#endif

const char *wisp_trusted_root(void) { return WISP_ROOT; }

const char *wisp_receipt_root(void) {
  const char *home = wisp_env_home();
  if (home) return home;
  static char bench[PATH_MAX];
  snprintf(bench, sizeof bench, "%s/bench", WISP_ROOT);
  struct stat sb;
  return lstat(bench, &sb) == 0 && S_ISDIR(sb.st_mode) ? WISP_ROOT : NULL;
}

/* One component: owned by root or this user, and not writable by anyone
 * else (see paths.h). */
static wisp_status check_one(const char *path, const char *what, const char *full) {
  struct stat sb;
  if (lstat(path, &sb) != 0) return wisp_fail(WISP_EIO, "%s %s: cannot stat %s: %s", what, full, path, strerror(errno));
  const int sticky_dir = S_ISDIR(sb.st_mode) && (sb.st_mode & S_ISVTX);
  if (sb.st_uid != 0 && sb.st_uid != geteuid())
    return wisp_fail(WISP_EIO, "%s %s: not trusted: %s belongs to user %u, not to root or you", what, full, path,
                     (unsigned)sb.st_uid);
  if ((sb.st_mode & S_IWOTH) && !sticky_dir)
    return wisp_fail(WISP_EIO, "%s %s: not trusted: %s is writable by other users", what, full, path);
  if ((sb.st_mode & S_IWGRP) && !sticky_dir && sb.st_gid != 0 && sb.st_gid != getegid())
    return wisp_fail(WISP_EIO, "%s %s: not trusted: %s is writable by group %u", what, full, path,
                     (unsigned)sb.st_gid);
  return WISP_OK;
}

wisp_status wisp_check_trusted(const char *path, const char *what) {
  char real[PATH_MAX];
  if (!realpath(path, real)) return wisp_fail(WISP_EIO, "%s %s: %s", what, path, strerror(errno));
  /* "/", then each longer prefix up to the whole path */
  wisp_status st = check_one("/", what, path);
  for (char *p = real + 1; !st && *p; p++) {
    if (*p != '/') continue;
    *p = 0;
    st = check_one(real, what, path);
    *p = '/';
  }
  if (!st && strcmp(real, "/")) st = check_one(real, what, path);
  return st;
}
