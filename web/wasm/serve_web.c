/* The browser build has no HTTP server (a page has no sockets): `wisp serve`
 * says so in one line. The rest of cmd_serve.c (its options) is the same
 * code as the native build's. */
#include <stdio.h>

#include "server/server.h"

int srv_run(const srv_config *cfg) {
  (void)cfg;
  fprintf(stderr, "wisp serve: not available in the browser build (docs/browser.md)\n");
  return 1;
}
