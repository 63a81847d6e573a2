/* In-memory files; see memfile.h. A short list: a process holds a few. */
#include "util/memfile.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "util/err.h"

typedef struct memfile {
  char *path, *data;
  size_t len;
  int refs;
  struct memfile *next;
} memfile;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static memfile *g_files;

static memfile *find_locked(const char *path) {
  for (memfile *f = g_files; f; f = f->next)
    if (!strcmp(f->path, path)) return f;
  return NULL;
}

wisp_status wisp_memfile_put(const char *path, const char *data, size_t len) {
  pthread_mutex_lock(&g_lock);
  memfile *f = find_locked(path);
  if (f) { /* a second open of the same file derives the same text */
    f->refs++;
    pthread_mutex_unlock(&g_lock);
    return WISP_OK;
  }
  f = calloc(1, sizeof *f);
  if (f) {
    f->path = strdup(path);
    f->data = malloc(len + 1);
  }
  if (!f || !f->path || !f->data) {
    pthread_mutex_unlock(&g_lock);
    if (f) { free(f->path); free(f->data); free(f); }
    return wisp_fail(WISP_ENOMEM, "out of memory");
  }
  memcpy(f->data, data, len);
  f->data[len] = 0;
  f->len = len;
  f->refs = 1;
  f->next = g_files;
  g_files = f;
  pthread_mutex_unlock(&g_lock);
  return WISP_OK;
}

void wisp_memfile_drop(const char *path) {
  pthread_mutex_lock(&g_lock);
  for (memfile **p = &g_files; *p; p = &(*p)->next) {
    memfile *f = *p;
    if (strcmp(f->path, path)) continue;
    if (--f->refs == 0) {
      *p = f->next;
      free(f->path);
      free(f->data);
      free(f);
    }
    break;
  }
  pthread_mutex_unlock(&g_lock);
}

int wisp_memfile_read(const char *path, char **data, size_t *len) {
  pthread_mutex_lock(&g_lock);
  memfile *f = find_locked(path);
  char *copy = f ? malloc(f->len + 1) : NULL;
  if (copy) {
    memcpy(copy, f->data, f->len + 1);
    if (len) *len = f->len;
  }
  pthread_mutex_unlock(&g_lock);
  if (!copy) return 0;
  *data = copy;
  return 1;
}

int wisp_memfile_exists(const char *path) {
  pthread_mutex_lock(&g_lock);
  int found = find_locked(path) != NULL;
  pthread_mutex_unlock(&g_lock);
  return found;
}
