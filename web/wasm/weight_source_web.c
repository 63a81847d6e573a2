/* The browser's weight source (format/weight_source.h): a model file is read
 * into wasm memory (wasi-libc's emulated mmap), or, when the page asks for
 * it (the environment's WISP_STREAM_WEIGHTS=1, which web/index.html sets for
 * the webgpu backend), left where the page has it and streamed.
 *
 * A streamed file gets a range of addresses at the top of the 4 GiB wasm32
 * address space, above any memory the module has: its first byte is
 * top - size. Nothing is there, so a stray read of it traps; the readers
 * of format/weight_source.h read it through the file's descriptor instead
 * (pread, which the page's WASI answers from the File or URL a slice at a
 * time, web/wasi.js), in chunks of READ_CHUNK bytes. wasm memory must stay
 * below the lowest streamed range: every read checks that it has, and a
 * module that grew into it stops with a one-line message. */
#include <errno.h>
#include <fcntl.h>
#include <sha2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "format/weight_source.h"
#include "util/err.h"
#include "util/file.h"

#define MAX_STREAMS 8
#define PAGE (64u * 1024u)
#define TOP (0xFFFFFFFFu - PAGE + 1u) /* the end of the highest range (the last page stays unused) */
#define READ_CHUNK (4u << 20)

typedef struct {
  uint32_t base, len;
  int fd;
} stream;

static stream streams[MAX_STREAMS];
static int n_streams;

static uint32_t lowest(void) {
  uint32_t low = TOP;
  for (int i = 0; i < n_streams; i++)
    if (streams[i].base < low) low = streams[i].base;
  return low;
}

static const stream *stream_of(const void *p) {
  const uint32_t a = (uint32_t)(uintptr_t)p;
  for (int i = 0; i < n_streams; i++)
    if (a >= streams[i].base && a - streams[i].base <= streams[i].len) return &streams[i];
  return NULL;
}

static uint64_t memory_bytes(void) { return (uint64_t)__builtin_wasm_memory_size(0) * PAGE; }

static int stream_wanted(void) {
  const char *v = getenv("WISP_STREAM_WEIGHTS");
  return v && !strcmp(v, "1");
}

wisp_status wisp_weights_open(const char *path, const uint8_t **data, size_t *len) {
  if (!stream_wanted()) return wisp_map_file(path, data, len);
  *data = NULL;
  *len = 0;
  int fd = open(path, O_RDONLY);
  if (fd < 0) return wisp_fail(WISP_EIO, "%s: %s", path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return wisp_fail(WISP_EIO, "%s: not a regular file", path);
  }
  const uint64_t size = (uint64_t)st.st_size, room = lowest() - memory_bytes();
  if (n_streams == MAX_STREAMS || lowest() < memory_bytes() || size + PAGE > room) {
    close(fd);
    return wisp_fail(WISP_ENOMEM, "%s: %llu bytes do not fit beside this page's wasm memory (%llu MiB in use, 4 GiB at most)",
                     path, (unsigned long long)size, (unsigned long long)(memory_bytes() >> 20));
  }
  stream *s = &streams[n_streams++];
  s->base = (uint32_t)((lowest() - size) & ~(uint64_t)(PAGE - 1));
  s->len = (uint32_t)size;
  s->fd = fd;
  *data = (const uint8_t *)(uintptr_t)s->base;
  *len = (size_t)size;
  return WISP_OK;
}

void wisp_weights_close(const uint8_t *data, size_t len) {
  for (int i = 0; i < n_streams; i++)
    if ((uint32_t)(uintptr_t)data == streams[i].base) {
      close(streams[i].fd);
      streams[i] = streams[--n_streams];
      return;
    }
  wisp_unmap_file(data, len);
}

int wisp_weights_resident(const void *p, size_t n) {
  (void)n;
  return stream_of(p) == NULL;
}

/* Reads n bytes of a streamed range at p into dst. */
static wisp_status stream_read(const stream *s, void *dst, const void *p, size_t n) {
  if (memory_bytes() > lowest())
    return wisp_fail(WISP_ENOMEM, "wasm memory (%llu MiB) grew into the streamed weights' addresses: the model is too "
                     "large for this page", (unsigned long long)(memory_bytes() >> 20));
  uint32_t at = (uint32_t)(uintptr_t)p - s->base;
  if (at > s->len || n > s->len - at) return wisp_fail(WISP_EINVAL, "read of %zu bytes past a streamed file's end", n);
  uint8_t *d = dst;
  while (n) {
    ssize_t k = pread(s->fd, d, n, (off_t)at);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return wisp_fail(WISP_EIO, "reading the model file: %s", k < 0 ? strerror(errno) : "unexpected end");
    d += k, at += (uint32_t)k, n -= (size_t)k;
  }
  return WISP_OK;
}

wisp_status wisp_weights_read(void *dst, const void *p, size_t n) {
  const stream *s = n ? stream_of(p) : NULL;
  if (!s) {
    if (n) memcpy(dst, p, n);
    return WISP_OK;
  }
  return stream_read(s, dst, p, n);
}

const void *wisp_weights_borrow(const void *p, size_t n, void **owned) {
  *owned = NULL;
  if (!n || !stream_of(p)) return p;
  void *copy = malloc(n);
  if (!copy) {
    wisp_fail(WISP_ENOMEM, "out of memory reading %zu bytes of weights", n);
    return NULL;
  }
  if (wisp_weights_read(copy, p, n)) {
    free(copy);
    return NULL;
  }
  *owned = copy;
  return copy;
}

wisp_status wisp_weights_sha256_hex(const void *p, size_t n, char out[65]) {
  const stream *s = n ? stream_of(p) : NULL;
  if (!s) {
    wisp_sha256_hex(n ? p : "", n, out);
    return WISP_OK;
  }
  SHA2_CTX c;
  SHA256Init(&c);
  uint8_t *buf = malloc(READ_CHUNK);
  wisp_status st = buf ? WISP_OK : wisp_fail(WISP_ENOMEM, "out of memory hashing weights");
  for (size_t o = 0; !st && o < n; o += READ_CHUNK) {
    const size_t k = n - o < READ_CHUNK ? n - o : READ_CHUNK;
    if (!(st = stream_read(s, buf, (const uint8_t *)p + o, k))) SHA256Update(&c, buf, k);
  }
  free(buf);
  if (st) return st;
  uint8_t md[SHA256_DIGEST_LENGTH];
  SHA256Final(md, &c);
  for (int i = 0; i < SHA256_DIGEST_LENGTH; i++) snprintf(out + 2 * i, 3, "%02x", md[i]);
  out[64] = 0;
  return WISP_OK;
}
