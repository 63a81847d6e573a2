/* wisp gen-synthetic --like MANIFEST -o DIR [--seed N] | --small -o DIR */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "format/synthetic.h"
#include "util/err.h"
#include "util/file.h"

int cmd_gen_synthetic(int argc, char **argv) {
  const char *like = NULL, *out = NULL;
  unsigned long long seed = 1;
  int small = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--like") && i + 1 < argc) like = argv[++i];
    else if (!strcmp(argv[i], "-o") && i + 1 < argc) out = argv[++i];
    else if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
      char *end;
      seed = strtoull(argv[++i], &end, 10);
      if (*end) { fprintf(stderr, "wisp gen-synthetic: --seed needs a non-negative integer, got '%s'\n", argv[i]); return 2; }
    } else if (!strcmp(argv[i], "--small")) small = 1;
    else {
      fprintf(stderr, "wisp gen-synthetic: unknown or incomplete option '%s'\n", argv[i]);
      return 2;
    }
  }
  if (!out || (!like && !small) || (like && small)) {
    fprintf(stderr, "usage: wisp gen-synthetic (--like MANIFEST | --small) -o DIR [--seed N]\n");
    return 2;
  }
  char *text = NULL;
  const char *label = like;
  if (small) {
    text = wisp_synthetic_small_manifest();
    label = "built-in small manifest";
    if (!text) { fprintf(stderr, "wisp gen-synthetic: out of memory\n"); return 1; }
  } else if (wisp_read_file(like, &text, NULL)) {
    return cli_error("gen-synthetic");
  }
  fprintf(stderr, "gen-synthetic: writing %s (seed %llu)...\n", out, seed);
  wisp_status st = wisp_synthetic_write(text, label, out, seed);
  free(text);
  if (st) return cli_error("gen-synthetic");
  fprintf(stderr, "gen-synthetic: done\n");
  return 0;
}
