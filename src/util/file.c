/* File helpers; see file.h. sha256 comes from OpenSSL's libcrypto. */
#include "util/file.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/builtin.h"
#include "util/err.h"

wisp_status wisp_read_file(const char *path, char **data, size_t *len) {
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
  FILE *f = fopen(path, "rb");
  if (!f) return wisp_fail(WISP_EIO, "%s: cannot open: %s", path, strerror(errno));
  if (fseek(f, 0, SEEK_END) != 0) { fclose(f); return wisp_fail(WISP_EIO, "%s: cannot seek", path); }
  long n = ftell(f);
  if (n < 0) { fclose(f); return wisp_fail(WISP_EIO, "%s: cannot size", path); }
  rewind(f);
  char *buf = malloc((size_t)n + 1);
  if (!buf) { fclose(f); return wisp_fail(WISP_ENOMEM, "%s: out of memory (%ld bytes)", path, n); }
  if (n > 0 && fread(buf, 1, (size_t)n, f) != (size_t)n) {
    free(buf);
    fclose(f);
    return wisp_fail(WISP_EIO, "%s: short read", path);
  }
  fclose(f);
  buf[n] = 0;
  *data = buf;
  if (len) *len = (size_t)n;
  return WISP_OK;
}

wisp_status wisp_map_file(const char *path, const uint8_t **data, size_t *len) {
  int fd = open(path, O_RDONLY);
  if (fd < 0) return wisp_fail(WISP_EIO, "%s: cannot open: %s", path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) { close(fd); return wisp_fail(WISP_EIO, "%s: cannot stat", path); }
  *len = (size_t)st.st_size;
  *data = NULL;
  if (st.st_size > 0) {
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) { close(fd); return wisp_fail(WISP_EIO, "%s: mmap failed: %s", path, strerror(errno)); }
    *data = p;
  }
  close(fd);
  return WISP_OK;
}

void wisp_unmap_file(const uint8_t *data, size_t len) {
  if (data && len) munmap((void *)data, len);
}

wisp_status wisp_write_file_atomic(const char *path, const void *data, size_t len) {
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s.tmp-%d", path, (int)getpid());
  FILE *f = fopen(tmp, "wb");
  if (!f) return wisp_fail(WISP_EIO, "%s: cannot create: %s", tmp, strerror(errno));
  int ok = fwrite(data, 1, len, f) == len;
  ok = (fclose(f) == 0) && ok;
  if (!ok || rename(tmp, path) != 0) {
    unlink(tmp);
    return wisp_fail(WISP_EIO, "%s: write failed", path);
  }
  return WISP_OK;
}

void wisp_sha256_hex(const void *data, size_t len, char out[65]) {
  unsigned char md[32];
  unsigned int n = 0;
  EVP_Digest(data, len, md, &n, EVP_sha256(), NULL);
  for (int i = 0; i < 32; i++) snprintf(out + 2 * i, 3, "%02x", md[i]);
  out[64] = 0;
}

int wisp_path_exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}
