/* wisp gen-synthetic (--like MANIFEST | --small) -o DIR [--seed N] [--context N] [--force]:
 * a seeded synthetic artifact (the writer's temporary directory goes away
 * on Ctrl-C). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/commands.h"
#include "format/synthetic.h"
#include "util/err.h"
#include "util/file.h"
#include "cli/opts.h"

int cmd_gen_synthetic(int argc, char **argv) {
  const char *like = NULL, *out = NULL;
  int64_t seed = 1;
  int small = 0, force = 0, context = 0;
  const cli_opt opts[] = {
      {"--like", CLI_STR, &like, 0, 0, "MANIFEST", "the shape to copy (a manifest.json)"},
      {"--small", CLI_FLAG, &small, 0, 0, NULL, "the built-in small shape instead"},
      {"-o|--output", CLI_STR, &out, 0, 0, "DIR", "the artifact directory to write"},
      {"--seed", CLI_I64, &seed, 0, 9.2e18, "N", "weights seed (default 1)"},
      {"--force", CLI_FLAG, &force, 0, 0, NULL, "replace an existing artifact at -o"},
      {"--context", CLI_INT, &context, 1, 1 << 20, "N",
       "positions the artifact takes (its rope tables computed, not stored; default the manifest's)"},
  };
  const cli_spec spec = {"gen-synthetic", "(--like MANIFEST | --small) -o DIR [--seed N] [--context N] [--force]",
                         "Writes a seeded synthetic artifact (random weights of a real shape).",
                         opts, (int)(sizeof opts / sizeof opts[0]), NULL, 0, NULL};
  int pr = cli_parse(&spec, argc, argv);
  if (pr != CLI_CONTINUE) return pr;
  if (!out || (!like && !small) || (like && small)) {
    fprintf(stderr, "wisp gen-synthetic: give -o DIR and one of --like MANIFEST, --small (see --help)\n");
    return 2;
  }
  if (cli_claim_target("gen-synthetic", out, 1, force)) return 2;
  char *text = NULL;
  const char *label = like;
  if (small) {
    text = wisp_synthetic_small_manifest();
    label = "built-in small manifest";
    if (!text) { fprintf(stderr, "wisp gen-synthetic: out of memory\n"); return 1; }
  } else if (wisp_read_file(like, &text, NULL)) {
    return cli_error("gen-synthetic");
  }
  if (context > 0) {
    char *longer = wisp_synthetic_with_context(text, label, context);
    free(text);
    if (!longer) return cli_error("gen-synthetic");
    text = longer;
  }
  fprintf(stderr, "gen-synthetic: writing %s (seed %lld)...\n", out, (long long)seed);
  char partial[4200];
  snprintf(partial, sizeof partial, "%s.partial-%d", out, (int)getpid()); /* the writer's (format/writer.h) */
  static const char *const files[] = {"weights.bin", "manifest.json"};
  cli_remove_on_interrupt(partial, files, 2);
  wisp_status st = wisp_synthetic_write(text, label, out, (uint64_t)seed);
  cli_interrupt_forget();
  free(text);
  if (st) return cli_error("gen-synthetic");
  fprintf(stderr, "gen-synthetic: done\n");
  return 0;
}
