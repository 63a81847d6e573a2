/* Helpers shared by the cmd_*.c files. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/commands.h"
#include "format/synthetic.h"
#include "util/err.h"
#include "util/file.h"
#include "util/paths.h"
#include "wisp.h"

int cli_error(const char *cmd) {
  fprintf(stderr, "wisp %s: %s\n", cmd, wisp_last_error());
  return 1;
}

/* The default model, next to the executable: an installed one
 * (PREFIX/share/wisp/models/default), the tree's models/default (the trained
 * LFM2 of docs/default-model.md), or the tree's seed-shaped synthetic model,
 * generated on first use. */
static int has_manifest(const char *dir) {
  char manifest[PATH_MAX + 96];
  snprintf(manifest, sizeof manifest, "%s/manifest.json", dir);
  return wisp_path_exists(manifest);
}

const char *cli_default_model(void) {
  static char path[PATH_MAX + 64];
  const char *root = wisp_exe_root();
  snprintf(path, sizeof path, "%s/share/wisp/models/default", root);
  if (has_manifest(path)) return path;
  snprintf(path, sizeof path, "%s/models/default", root);
  if (has_manifest(path)) return path;
  snprintf(path, sizeof path, "%s/models/synthetic-seed", root);
  if (has_manifest(path)) return path;
  /* First use: generate the built-in default from the seed-shaped manifest. */
  char seed_manifest[PATH_MAX + 96], models[PATH_MAX + 16];
  snprintf(seed_manifest, sizeof seed_manifest, "%s/assets/lfm2-hybrid-q4.manifest.json", root);
  snprintf(models, sizeof models, "%s/models", root);
  char *text = NULL;
  if (!wisp_path_exists(seed_manifest)) {
    wisp_fail(WISP_EIO, "no default model next to the executable (none in %s/share/wisp/models/default or "
              "%s/models/default); pass -m DIR", root, root);
    return NULL;
  }
  if (wisp_read_file(seed_manifest, &text, NULL)) return NULL;
  if (mkdir(models, 0755) != 0 && errno != EEXIST) {
    fprintf(stderr, "wisp: cannot create %s: %s\n", models, strerror(errno));
    free(text);
    return NULL;
  }
  fprintf(stderr, "wisp: generating the built-in default model (seed-shaped synthetic LFM2) in %s ...\n", path);
  wisp_status st = wisp_synthetic_write(text, seed_manifest, path, 1);
  free(text);
  return st ? NULL : path;
}
