/* wisp tune -m DIR [--budget SECONDS] [--quick] [--dry-run] [-o DIR]:
 * sweeps the kernel geometries of the model's plan on this device's WebGPU
 * adapter and writes the winners into DIR/manifest.json as this device's
 * tuned entry (engine/tune.h, docs/tuning.md); a JSON receipt of every
 * measurement and one SVG plot per shape class go to -o. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cli/commands.h"
#include "cli/opts.h"
#include "engine/tune.h"
#include "util/err.h"
#include "util/file.h"

/* mkdir -p for the results directory. */
static int make_dirs(const char *path) {
  char p[1024];
  if (strlen(path) >= sizeof p) return -1;
  snprintf(p, sizeof p, "%s", path);
  for (char *s = p + 1; *s; s++)
    if (*s == '/') {
      *s = 0;
      if (mkdir(p, 0755) && errno != EEXIST) return -1;
      *s = '/';
    }
  return mkdir(p, 0755) && errno != EEXIST ? -1 : 0;
}

int cmd_tune(int argc, char **argv) {
  const char *dir = NULL, *out_dir = NULL;
  double budget = 0;
  int quick = 0, dry_run = 0, no_write = 0;
  const cli_opt opts[] = {
      {"-m|--model", CLI_STR, &dir, 0, 0, "DIR", "the model artifact (default: models/default); its manifest.json gets the entry"},
      {"--budget", CLI_NUM, &budget, 0, 1e6, "SECONDS", "stop sweeping after this long, keeping the best so far (default 0: no limit)"},
      {"--quick", CLI_FLAG, &quick, 0, 0, NULL, "a small sweep: two geometries a class, one short context, few rounds (CI)"},
      {"--dry-run", CLI_FLAG, &dry_run, 0, 0, NULL, "list the shape classes and geometries that would be swept; measure nothing"},
      {"--no-write", CLI_FLAG, &no_write, 0, 0, NULL, "measure and write the receipt, but leave manifest.json alone"},
      {"-o|--output", CLI_STR, &out_dir, 0, 0, "DIR", "where the receipt and the plots go (default: bench/results/tune-STAMP)"},
  };
  const cli_spec spec = {"tune", "-m DIR [--budget SECONDS] [--quick] [--dry-run] [-o DIR]",
                         "Sweeps the kernel geometries of the model's plan on this machine's WebGPU adapter (GPU\n"
                         "timestamps where it has timestamp-query, else wall time around a device sync), repeated\n"
                         "until the noise is below the differences, and writes the winners into DIR/manifest.json\n"
                         "as this device's tuned entry (docs/tuning.md). `wisp plan` then says it uses it.",
                         opts, (int)(sizeof opts / sizeof opts[0]), NULL, 0, NULL};
  int pr = cli_parse(&spec, argc, argv);
  if (pr != CLI_CONTINUE) return pr;
  if (!dir && !(dir = cli_default_model())) return cli_error("tune");
  char stamped[256];
  if (!out_dir && !dry_run) {
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    char stamp[32];
    strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
    snprintf(stamped, sizeof stamped, "%s/tune-%s", wisp_path_exists("bench/results") ? "bench/results" : ".", stamp);
    out_dir = stamped;
  }
  wisp_tune_options o = {.model_dir = dir, .budget_s = budget, .quick = quick, .dry_run = dry_run,
                         .no_write = no_write, .progress = dry_run ? NULL : stderr, .listing = stdout};
  cJSON *receipt = NULL;
  if (wisp_tune_run(&o, &receipt)) return cli_error("tune");
  int rc = 0;
  if (!dry_run) {
    char path[1200];
    char *text = cJSON_Print(receipt);
    if (make_dirs(out_dir)) {
      wisp_fail(WISP_EIO, "cannot make the results directory %s: %s", out_dir, strerror(errno));
      rc = cli_error("tune");
    } else if (snprintf(path, sizeof path, "%s/tune-receipt.json", out_dir),
               !text || wisp_write_file_atomic(path, text, strlen(text))) {
      rc = cli_error("tune");
    } else {
      const int plots = wisp_tune_write_plots(receipt, out_dir);
      if (plots < 0) rc = cli_error("tune");
      else {
        const cJSON *cls = cJSON_GetObjectItemCaseSensitive(receipt, "classes");
        const cJSON *man = cJSON_GetObjectItemCaseSensitive(receipt, "manifest");
        printf("tuned %d shape classes (%s); receipt %s, %d plots in %s\n", cJSON_GetArraySize(cls),
               cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(receipt, "timing")), path, plots, out_dir);
        for (const cJSON *c = cls ? cls->child : NULL; c; c = c->next) {
          const cJSON *ch = cJSON_GetObjectItemCaseSensitive(c, "chosen"), *sp = cJSON_GetObjectItemCaseSensitive(c, "speedup");
          printf("  %-28s %-18s %s", cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "class")),
                 cJSON_IsString(ch) ? ch->valuestring : "(none)",
                 cJSON_IsString(cJSON_GetObjectItemCaseSensitive(c, "default")) ? "" : "(no default measured)");
          if (cJSON_IsNumber(sp)) printf("%.2fx the default", sp->valuedouble);
          printf("\n");
        }
        if (cJSON_IsString(man)) printf("wrote this device's entry into %s\n", man->valuestring);
      }
    }
    free(text);
  }
  cJSON_Delete(receipt);
  return rc;
}
