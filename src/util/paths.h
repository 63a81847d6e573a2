/* Where wisp finds its data files (kernels/registry.json, profiles/, models/,
 * assets/): relative to the current directory when they are there, else
 * relative to the repository the executable was built in ($exe/..), or to
 * $WISP_HOME when set. */
#ifndef WISP_PATHS_H
#define WISP_PATHS_H

#include <stddef.h>

/* The repository root as seen from the executable (no trailing slash). */
const char *wisp_repo_root(void);
/* Resolves a repository-relative path into out; returns out. */
const char *wisp_data_path(const char *rel, char *out, size_t cap);

#endif
