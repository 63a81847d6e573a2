/* File helpers; see file.h (sha256 is in sha256.c). */
#include "util/file.h"

#include <errno.h>
#include <stdint.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/builtin.h"
#include "util/memfile.h"
#include "util/err.h"
#include "util/target.h"

/* Reads from fd until end of file, at most `max` bytes: past them the read
 * stops with one line, so /dev/zero or an endless pipe costs max + 1 bytes
 * of memory and no more. `size` is a regular file's size (refused at once
 * when over the limit, so a 2 GB file is never read), 0 for a stream
 * (pipe, terminal, FIFO). */
static wisp_status read_all(int fd, const char *name, size_t size, size_t max, char **data, size_t *len) {
  if (size > max)
    return wisp_fail(WISP_EINVAL, "%s: %zu bytes, over the limit of %zu bytes for this input", name, size, max);
  size_t cap = size + 1 > 4096 ? size + 1 : 4096, n = 0;
  if (cap > max + 2) cap = max + 2;
  char *buf = malloc(cap);
  if (!buf) return wisp_fail(WISP_ENOMEM, "%s: out of memory (%zu bytes)", name, cap);
  for (;;) {
    if (n > max) {
      free(buf);
      return wisp_fail(WISP_EINVAL, "%s: more than %zu bytes, the limit for this input", name, max);
    }
    if (n + 1 >= cap) {
      size_t want = cap < (max + 2) / 2 ? cap * 2 : max + 2;
      char *more = realloc(buf, want);
      if (!more) { free(buf); return wisp_fail(WISP_ENOMEM, "%s: out of memory (%zu bytes)", name, want); }
      buf = more;
      cap = want;
    }
    ssize_t got = read(fd, buf + n, cap - 1 - n);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      wisp_status st = wisp_fail(WISP_EIO, "%s: read failed: %s", name, strerror(errno));
      free(buf);
      return st;
    }
    if (got == 0) break;
    n += (size_t)got;
  }
  buf[n] = 0;
  *data = buf;
  if (len) *len = n;
  return WISP_OK;
}

/* Opens path for reading and says precisely why not: missing, no
 * permission, a directory, or something that is neither a file nor a stream. */
static wisp_status open_input(const char *path, int *fd_out, struct stat *st) {
  int fd = open(path, O_RDONLY);
  if (fd < 0) {
    if (errno == EISDIR) return wisp_fail(WISP_EIO, "%s: is a directory, not a file", path);
    return wisp_fail(WISP_EIO, "%s: cannot open: %s", path, strerror(errno));
  }
  if (fstat(fd, st) != 0) {
    wisp_status e = wisp_fail(WISP_EIO, "%s: cannot stat: %s", path, strerror(errno));
    close(fd);
    return e;
  }
  if (S_ISDIR(st->st_mode)) {
    close(fd);
    return wisp_fail(WISP_EIO, "%s: is a directory, not a file", path);
  }
  if (!S_ISREG(st->st_mode) && !S_ISFIFO(st->st_mode) && !S_ISCHR(st->st_mode) && !S_ISSOCK(st->st_mode)) {
    close(fd);
    return wisp_fail(WISP_EIO, "%s: not a regular file", path);
  }
  *fd_out = fd;
  return WISP_OK;
}

wisp_status wisp_read_file_max(const char *path, size_t max, char **data, size_t *len) {
  if (wisp_is_builtin(path)) {
    const wisp_builtin_file *b = wisp_builtin_find(path);
    if (!b) return wisp_fail(WISP_EIO, "%s: no such built-in file", path);
    char *buf = malloc(b->len + 1);
    if (!buf) return wisp_fail(WISP_ENOMEM, "%s: out of memory", path);
    memcpy(buf, b->data, b->len);
    buf[b->len] = 0;
    *data = buf;
    if (len) *len = b->len;
    return WISP_OK;
  }
  if (wisp_memfile_read(path, data, len)) return WISP_OK; /* a GGUF's derived tokenizer files */
  int fd;
  struct stat st;
  wisp_status e = open_input(path, &fd, &st);
  if (e) return e;
  e = read_all(fd, path, S_ISREG(st.st_mode) ? (size_t)st.st_size : 0, max, data, len);
  close(fd);
  return e;
}

wisp_status wisp_read_file(const char *path, char **data, size_t *len) {
  return wisp_read_file_max(path, WISP_FILE_MAX, data, len);
}

wisp_status wisp_read_fd(int fd, const char *name, size_t max, char **data, size_t *len) {
  struct stat st;
  size_t size = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? (size_t)st.st_size : 0;
  return read_all(fd, name, size, max, data, len);
}

wisp_status wisp_map_file(const char *path, const uint8_t **data, size_t *len) {
  int fd;
  struct stat st;
  wisp_status e = open_input(path, &fd, &st);
  if (e) return e;
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return wisp_fail(WISP_EIO, "%s: not a regular file (it must be mapped)", path);
  }
  *len = (size_t)st.st_size;
  *data = NULL;
  if (st.st_size > 0) {
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      wisp_status m = wisp_fail(WISP_EIO, "%s: mmap failed: %s", path, strerror(errno));
      close(fd);
      return m;
    }
    *data = p;
  }
  close(fd);
  return WISP_OK;
}

void wisp_unmap_file(const uint8_t *data, size_t len) {
  if (data && len) munmap((void *)data, len);
}

wisp_status wisp_write_file_atomic(const char *path, const void *data, size_t len) {
  char tmp[4200];
  int fd;
  wisp_status st = wisp_target_create_temp(path, tmp, sizeof tmp, &fd);
  if (st) return st;
  const char *p = data;
  size_t left = len;
  int err = 0;
  while (left > 0 && !err) {
    ssize_t n = write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) err = n < 0 ? errno : EIO;
    else { p += n; left -= (size_t)n; }
  }
  if (!err && fsync(fd) != 0) err = errno;
  if (close(fd) != 0 && !err) err = errno;
  if (err) {
    unlink(tmp);
    return wisp_fail(WISP_EIO, "%s: write failed: %s", path, strerror(err));
  }
  return wisp_target_replace(tmp, path);
}

int wisp_path_exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 || wisp_memfile_exists(path);
}

int wisp_is_regular_file(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}
