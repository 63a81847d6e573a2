/* Lookup in the built-in file table; see builtin.h. */
#include "util/builtin.h"

#include <string.h>

int wisp_is_builtin(const char *path) {
  return path && !strncmp(path, WISP_BUILTIN_PREFIX, strlen(WISP_BUILTIN_PREFIX));
}

const wisp_builtin_file *wisp_builtin_find(const char *path) {
  if (!wisp_is_builtin(path)) return NULL;
  const char *rel = path + strlen(WISP_BUILTIN_PREFIX);
  for (const wisp_builtin_file *f = wisp_builtin_files; f->path; f++)
    if (!strcmp(f->path, rel)) return f;
  return NULL;
}

const char *wisp_builtin_list(const char *dir, int i) {
  if (!wisp_is_builtin(dir)) return NULL;
  const char *rel = dir + strlen(WISP_BUILTIN_PREFIX);
  size_t n = strlen(rel);
  while (n && rel[n - 1] == '/') n--;
  for (const wisp_builtin_file *f = wisp_builtin_files; f->path; f++) {
    if (strncmp(f->path, rel, n) || f->path[n] != '/' || strchr(f->path + n + 1, '/')) continue;
    if (i-- == 0) return f->path + n + 1;
  }
  return NULL;
}
