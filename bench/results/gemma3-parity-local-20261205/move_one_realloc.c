#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <malloc.h>
#include <dlfcn.h>
/* moves only a realloc to exactly MOVE_NODES * 136 bytes (one growth of the node array) */
void *realloc(void *p, size_t n) {
  static void *(*real)(void *, size_t);
  if (!real) real = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
  const char *e = getenv("MOVE_NODES");
  if (!p || !e || n != (size_t)atoi(e) * 136) return real(p, n);
  void *q = malloc(n);
  size_t old = malloc_usable_size(p);
  memcpy(q, p, old < n ? old : n);
  free(p);
  return q;
}
