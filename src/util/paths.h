/* Where the wisp executable is installed or built, for the files that stay
 * outside the binary: the default model. The registry, profiles and WGSL
 * are built in (util/builtin.h); nothing is looked up in the working
 * directory. */
#ifndef WISP_PATHS_H
#define WISP_PATHS_H

/* The parent of the executable's directory, without a trailing slash: the
 * build tree for build/wisp, the prefix for PREFIX/bin/wisp. */
const char *wisp_exe_root(void);
/* Where bench keeps its receipts (ROOT/bench/results): $WISP_HOME, else
 * wisp_exe_root(). */
const char *wisp_repo_root(void);

#endif
