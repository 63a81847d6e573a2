/* The browser build's page at /local (docs/browser.md): `wisp serve`
 * serves web/index.html with wisp.wasm and its JS glue, so that a person can
 * run a model in their own browser, from the directory `make wasm` writes
 * (ROOT/build/wasm) or `make install` copies (ROOT/share/wisp/web), under
 * the trusted root compiled into the binary (util/paths.h). Nothing else is
 * looked up: only the page's five files are served, by fixed names. */
#ifndef WISP_SERVER_LOCAL_PAGE_H
#define WISP_SERVER_LOCAL_PAGE_H

#include <stddef.h>

/* The page's file for a URL under /local/ ("" or "index.html", "wisp.js",
 * "wasi.js", "wgpu.js", "wisp.wasm"): its path (in `path`, `cap` bytes) and
 * content type. 0 when found; -1 when the name is not one of the page's
 * (404); -2 when the page is not built or its directory is not trusted
 * (404 too, with *why set to a one-line reason). */
int srv_local_file(const char *name, char *path, size_t cap, const char **type, const char **why);

#endif
