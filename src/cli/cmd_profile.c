/* placeholder until written below */
#include <stdio.h>
#include "cli/commands.h"
int cmd_profile(int argc, char **argv) { (void)argc; (void)argv; return 2; }
int cmd_plan_file(int argc, char **argv) { (void)argc; (void)argv; return 2; }
