/* Helpers shared by the cmd_*.c files. */
#include <stdio.h>

#include "cli/commands.h"
#include "wisp.h"

int cli_error(const char *cmd) {
  fprintf(stderr, "wisp %s: %s\n", cmd, wisp_last_error());
  return 1;
}
