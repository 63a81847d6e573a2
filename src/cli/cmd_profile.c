/* `wisp profile check FILE [--profiles-dir DIR] [--kernels-dir DIR]
 * [--no-digests] [--intent I]`. */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/opts.h"
#include "plan/plan.h"
#include "plan/profile.h"

static void print_batching(const char *name, const wisp_batching *b) {
  if (!b->present) { printf("%s: (unset)\n", name); return; }
  printf("%s: batchSize=%d readbackInterval=%d stopCheckMode=%s readbackMode=%s ringTokens=%d ringStop=%d "
         "ringStaging=%d maxBatchDecodeTokens=%d disableCommandBatching=%s",
         name, b->batch_size, b->readback_interval, b->stop_check_mode ? b->stop_check_mode : "-",
         b->readback_mode ? b->readback_mode : "-", b->ring_tokens, b->ring_stop, b->ring_staging,
         b->max_batch_decode_tokens, b->disable_command_batching ? "true" : "false");
  if (b->has_submit_latency) printf(" submitLatencyThresholdMs=%g", b->submit_latency_threshold_ms);
  printf("\n");
}

static const char *verb_name(wisp_patch_verb v) {
  return v == WISP_PATCH_SET ? "set" : v == WISP_PATCH_ADD ? "add" : "remove";
}

static int profile_check(int argc, char **argv) {
  const char *file = NULL, *pos[1];
  int n_pos = 0, no_digests = 0;
  wisp_profile_options opt = {0};
  const cli_opt opts[] = {
      {"--profiles-dir", CLI_STR, &opt.profiles_dir, 0, 0, "DIR", "where profiles are"},
      {"--kernels-dir", CLI_STR, &opt.kernels_dir, 0, 0, "DIR", "where the WGSL files are"},
      {"--intent", CLI_STR, &opt.intent, 0, 0, "I", "the intent to check against"},
      {"--no-digests", CLI_FLAG, &no_digests, 0, 0, NULL, "check the structure only"},
  };
  const cli_spec spec = {"profile check", "FILE [--profiles-dir DIR] [--kernels-dir DIR] [--no-digests] [--intent I]",
                         "Validates a runtime profile.", opts, (int)(sizeof opts / sizeof opts[0]), pos, 1, &n_pos};
  int pr = cli_parse(&spec, argc, argv);
  if (pr != CLI_CONTINUE) return pr;
  opt.skip_digests = no_digests;
  if (!n_pos) { fprintf(stderr, "wisp profile check: give the profile FILE (see --help)\n"); return 2; }
  file = pos[0];
  wisp_profile *p = NULL;
  if (wisp_profile_load(file, &opt, &p)) return cli_error("profile check");
  printf("%s: ok (%s)\n", p->path, p->digests_verified ? "digests verified" : "structure only: digests not checked");
  printf("id: %s\nintent: %s\n", p->id, p->intent ? p->intent : "-");
  printf("chain:");
  for (int i = 0; i < p->n_chain; i++) printf("%s%s", i ? " -> " : " ", p->chain[i]);
  printf("\n");
  for (int i = 0; i < p->n_kernels; i++)
    printf("kernel %s: %s entry %s %s\n", p->kernels[i].key, p->kernels[i].file, p->kernels[i].entry, p->kernels[i].digest);
  for (int i = 0; i < p->n_patches; i++) {
    const wisp_patch *w = &p->patches[i];
    printf("patch %s section=%s op=%s", verb_name(w->verb), w->section, w->op);
    if (w->kernel_key) printf(" kernel=%s", w->kernel_key);
    if (w->after) printf(" after=%s", w->after);
    if (w->before) printf(" before=%s", w->before);
    if (w->n_layers) {
      printf(" layers=");
      for (int k = 0; k < w->n_layers; k++) printf("%s%d", k ? "," : "", w->layers[k]);
    }
    printf("\n");
  }
  print_batching("batching", &p->batching);
  print_batching("decodeLoop", &p->decode_loop);
  printf("fusions: fuseResidualAdd=%s\n", p->fusions.residual_add ? "true" : "false");
  printf("session switches:");
  for (int i = 0; i < WISP_SW_COUNT; i++)
    if (i != WISP_SW_HEAD_ARGMAX_Q4K) printf(" %s=%s", wisp_switch_name(i), wisp_switch_on(&p->fusions, i) ? "on" : "off");
  printf("\n");
  for (int i = 0; i < p->n_not_implemented; i++) printf("%s\n", p->not_implemented[i]);
  for (int i = 0; i < p->n_warnings; i++) printf("warning: %s\n", p->warnings[i]);
  wisp_profile_free(p);
  return 0;
}

int cmd_profile(int argc, char **argv) {
  if (argc >= 2 && !strcmp(argv[1], "check")) return profile_check(argc - 1, argv + 1);
  int help = argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"));
  fprintf(help ? stdout : stderr, "usage: wisp profile check FILE [--profiles-dir DIR] [--kernels-dir DIR] "
                                  "[--no-digests] [--intent I]\n  (wisp profile check --help: every option)\n");
  return help ? 0 : 2;
}

