/* wisp_artifact_open: a model is an artifact directory or a GGUF file.
 * The choice lives here, apart from both readers, so that artifact.c and
 * gguf_artifact.c do not include each other. */
#include <string.h>

#include "format/artifact.h"
#include "format/gguf_artifact.h"
#include "util/file.h"

wisp_status wisp_artifact_open(const char *dir, wisp_artifact **out) {
  *out = NULL;
  /* a file, or a missing FILE.gguf (whose error should name the file, not
   * FILE.gguf/manifest.json) */
  const size_t n = strlen(dir);
  if (wisp_is_regular_file(dir) || (n > 5 && !strcmp(dir + n - 5, ".gguf") && !wisp_path_exists(dir)))
    return wisp_gguf_artifact_open(dir, out);
  return wisp_artifact_open_dir(dir, out);
}
