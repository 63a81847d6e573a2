/* Where wisp takes code and data from outside the binary: the Dawn library
 * and the default model. The registry, profiles and WGSL are built in
 * (util/builtin.h); nothing is looked up in the working directory or beside
 * wherever the executable happens to be.
 *
 * The one place is the root fixed when the binary was made (the Makefile
 * compiles it in as WISP_ROOT): the build tree's absolute path for
 * build/wisp, PREFIX for the copy `make install` links (PREFIX/lib/wisp,
 * PREFIX/share/wisp). A copied executable still looks only there. */
#ifndef WISP_PATHS_H
#define WISP_PATHS_H

#include "wisp.h"

/* The compiled-in root, an absolute path without a trailing slash. */
const char *wisp_trusted_root(void);
/* Where bench keeps its receipts (ROOT/bench/results): $WISP_HOME when set,
 * else the trusted root when it is a build tree (it has a bench/ directory);
 * NULL when neither (an installed wisp writes receipts only with -o). */
const char *wisp_receipt_root(void);
/* Whether code or data at `path` may be trusted, as ld.so trusts a system
 * directory: the path and every directory above it (symbolic links
 * resolved) are owned by root or by this user, and none is writable by other
 * users (a sticky directory such as /tmp excepted: others cannot replace
 * what they do not own in it) or by a group other than root's or this
 * user's. `what` names the thing in the one-line error ("WebGPU library").
 * WISP_OK, or WISP_EIO with the error set. */
wisp_status wisp_check_trusted(const char *path, const char *what);

#endif
