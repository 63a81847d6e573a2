/* Safe writes; see target.h. */
#include "util/target.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/err.h"

void wisp_target_lock_path(const char *path, char *out, size_t cap) { snprintf(out, cap, "%s.wisp-lock", path); }

/* The pid written in a lock file; 0 when it cannot be read. */
static long lock_owner(const char *lock) {
  char buf[32] = "";
  int fd = open(lock, O_RDONLY | O_NOFOLLOW);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  return strtol(buf, NULL, 10);
}

wisp_status wisp_target_lock(const char *path) {
  char lock[4200];
  wisp_target_lock_path(path, lock, sizeof lock);
  for (int attempt = 0; attempt < 2; attempt++) {
    int fd = open(lock, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0644);
    if (fd >= 0) {
      char pid[32];
      int n = snprintf(pid, sizeof pid, "%d\n", (int)getpid());
      int ok = write(fd, pid, (size_t)n) == n;
      ok = close(fd) == 0 && ok;
      if (!ok) {
        unlink(lock);
        return wisp_fail(WISP_EIO, "%s: cannot write: %s", lock, strerror(errno));
      }
      return WISP_OK;
    }
    if (errno == ENOENT || errno == ENOTDIR) {
      char parent[4200];
      snprintf(parent, sizeof parent, "%s", path);
      char *slash = strrchr(parent, '/');
      if (slash) *slash = 0;
      return wisp_fail(WISP_EIO, "%s: the output's parent directory '%s' does not exist", path,
                       slash ? (parent[0] ? parent : "/") : ".");
    }
    if (errno != EEXIST) return wisp_fail(WISP_EIO, "%s: cannot create: %s", lock, strerror(errno));
    const long owner = lock_owner(lock);
    /* A lock whose writer is gone (killed with SIGKILL, a crash) is taken
     * over once; one whose writer runs is not. */
    if (owner > 0 && owner != (long)getpid() && kill((pid_t)owner, 0) != 0 && errno == ESRCH) {
      unlink(lock);
      continue;
    }
    return wisp_fail(WISP_EBUSY, "another wisp (pid %ld) is writing %s; not writing it too (%s is its lock)", owner, path,
                     lock);
  }
  return wisp_fail(WISP_EBUSY, "%s: cannot take the lock %s", path, lock);
}

void wisp_target_unlock(const char *path) {
  char lock[4200];
  wisp_target_lock_path(path, lock, sizeof lock);
  if (lock_owner(lock) == (long)getpid()) unlink(lock);
}

/* Why a non-regular file is refused, in words. */
static const char *kind_of(mode_t m) {
  return S_ISLNK(m)    ? "a symbolic link (wisp does not write through one; name its target)"
         : S_ISDIR(m)  ? "a directory (give a file name)"
         : S_ISCHR(m)  ? "a character device"
         : S_ISBLK(m)  ? "a block device"
         : S_ISFIFO(m) ? "a FIFO"
         : S_ISSOCK(m) ? "a socket"
                       : "not a regular file";
}

wisp_status wisp_target_check_file(const char *path, int force) {
  struct stat sb;
  if (lstat(path, &sb) != 0) {
    if (errno == ENOENT) return WISP_OK;
    return wisp_fail(WISP_EIO, "%s: %s", path, strerror(errno));
  }
  if (!S_ISREG(sb.st_mode))
    return wisp_fail(WISP_EIO, "%s is %s; wisp replaces only a regular file", path, kind_of(sb.st_mode));
  if (sb.st_size > 0 && !force)
    return wisp_fail(WISP_EIO, "%s already exists and is not empty; not overwriting (--force replaces it)", path);
  return WISP_OK;
}

wisp_status wisp_target_create_temp(const char *path, char *tmp, size_t cap, int *fd) {
  int k = snprintf(tmp, cap, "%s.tmp-%d", path, (int)getpid());
  if (k < 0 || (size_t)k >= cap) return wisp_fail(WISP_EINVAL, "%s: path too long", path);
  unlink(tmp); /* a leftover of an earlier process with this pid */
  *fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (*fd < 0) return wisp_fail(WISP_EIO, "%s: cannot create: %s", tmp, strerror(errno));
  return WISP_OK;
}

wisp_status wisp_target_replace(const char *tmp, const char *path) {
  struct stat sb;
  if (lstat(path, &sb) == 0 && !S_ISREG(sb.st_mode)) {
    unlink(tmp);
    return wisp_fail(WISP_EIO, "%s is %s; wisp replaces only a regular file", path, kind_of(sb.st_mode));
  }
  if (rename(tmp, path) != 0) {
    wisp_status st = wisp_fail(WISP_EIO, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
    unlink(tmp);
    return st;
  }
  return WISP_OK;
}
