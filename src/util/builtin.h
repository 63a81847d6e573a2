/* Files built into the library: the kernel registry, the runtime profiles
 * and the WGSL sources, embedded verbatim at build time by
 * scripts/embed-data.sh. A path "builtin:kernels/registry.json" names the
 * built-in copy of the source tree's kernels/registry.json; the file helpers
 * (wisp_read_file, wisp_file_exists) serve such paths from memory, so the
 * plan's defaults never depend on the working directory or on where the
 * binary was built. Any other path is an ordinary file. */
#ifndef WISP_BUILTIN_H
#define WISP_BUILTIN_H

#include <stddef.h>

#define WISP_BUILTIN_PREFIX "builtin:"

typedef struct {
  const char *path; /* repository-relative, e.g. "profiles/default.json" */
  const char *data;
  size_t len;
} wisp_builtin_file;

/* The generated table, ended by a {NULL} entry. */
extern const wisp_builtin_file wisp_builtin_files[];

/* 1 when path starts with "builtin:". */
int wisp_is_builtin(const char *path);
/* The built-in file named by a "builtin:" path, or NULL. */
const wisp_builtin_file *wisp_builtin_find(const char *path);
/* The name (no directory) of the i-th built-in file directly inside the
 * "builtin:" directory dir, or NULL past the end. */
const char *wisp_builtin_list(const char *dir, int i);

#endif
