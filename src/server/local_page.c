/* The /local page's files; see local_page.h. */
#include "server/local_page.h"

#include <stdio.h>
#include <string.h>

#include "util/err.h"
#include "util/file.h"
#include "util/paths.h"

static const struct {
  const char *name, *type;
} k_files[] = {
    {"index.html", "text/html; charset=utf-8"},
    {"wisp.js", "text/javascript; charset=utf-8"},
    {"wasi.js", "text/javascript; charset=utf-8"},
    {"wgpu.js", "text/javascript; charset=utf-8"},
    {"wisp.wasm", "application/wasm"},
};

/* The directory of an installed page, else the build tree's. */
static int page_dir(char *dir, size_t cap) {
  const char *root = wisp_trusted_root();
  const char *where[2] = {"share/wisp/web", "build/wasm"};
  for (int i = 0; i < 2; i++) {
    char index[4200];
    snprintf(dir, cap, "%s/%s", root, where[i]);
    snprintf(index, sizeof index, "%s/index.html", dir);
    if (wisp_is_regular_file(index)) return 0;
  }
  return -1;
}

int srv_local_file(const char *name, char *path, size_t cap, const char **type, const char **why) {
  *why = NULL;
  if (!*name) name = "index.html";
  int found = -1;
  for (size_t i = 0; i < sizeof k_files / sizeof k_files[0]; i++)
    if (!strcmp(name, k_files[i].name)) {
      found = (int)i;
      *type = k_files[i].type;
    }
  if (found < 0) return -1;
  char dir[4096];
  if (page_dir(dir, sizeof dir)) {
    *why = "the browser page is not built: run make wasm (or make install after it)";
    return -2;
  }
  snprintf(path, cap, "%s/%s", dir, name);
  if (wisp_check_trusted(path, "browser page")) {
    *why = wisp_last_error();
    return -2;
  }
  return wisp_is_regular_file(path) ? 0 : -1;
}
