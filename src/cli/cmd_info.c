/* placeholder until the command lands (being written in this session) */
#include <stdio.h>
#include "cli/commands.h"
int cmd_info(int argc, char **argv) { (void)argc; (void)argv; fprintf(stderr, "wisp: 'info' is not built yet\n"); return 2; }
