/* `wisp registry check FILE [--kernels-dir DIR] [--rules-dir DIR] [--strict]`
 * and `wisp kernels digest FILE ENTRY`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/opts.h"
#include "plan/pjson.h"
#include "plan/registry.h"
#include "util/err.h"

static int registry_check(int argc, char **argv) {
  const char *file = NULL, *pos[1];
  int n_pos = 0, strict = 0;
  wisp_registry_options opt = {0};
  const cli_opt opts[] = {
      {"--kernels-dir", CLI_STR, &opt.kernels_dir, 0, 0, "DIR", "where the WGSL files are"},
      {"--rules-dir", CLI_STR, &opt.rules_dir, 0, 0, "DIR", "where rule chain files are"},
      {"--strict", CLI_FLAG, &strict, 0, 0, NULL, "every variant's WGSL must exist"},
  };
  const cli_spec spec = {"registry check", "[FILE] [--kernels-dir DIR] [--rules-dir DIR] [--strict]",
                         "Validates a kernel registry (default: " WISP_DEFAULT_REGISTRY ").",
                         opts, (int)(sizeof opts / sizeof opts[0]), pos, 1, &n_pos};
  int pr = cli_parse(&spec, argc, argv);
  if (pr != CLI_CONTINUE) return pr;
  opt.strict = strict;
  file = n_pos ? pos[0] : WISP_DEFAULT_REGISTRY;
  wisp_registry *r = NULL;
  if (wisp_registry_load(file, &opt, &r)) return cli_error("registry check");
  int cpu = 0, gpu = 0;
  for (int i = 0; i < r->n_ops; i++)
    for (int k = 0; k < r->ops[i].n_variants; k++) {
      if (!strcmp(r->ops[i].variants[k].backend, "cpu")) cpu++;
      else gpu++;
    }
  printf("%s: ok%s\n", file, r->strict ? " (strict)" : "");
  printf("operations: %d\nvariants: %d (cpu %d, webgpu %d)\n", r->n_ops, r->n_variants, cpu, gpu);
  printf("available: %d\nunavailable: %d (WGSL not in %s)\n", r->n_available, r->n_variants - r->n_available,
         r->kernels_dir);
  printf("rule chains: %d\n", r->n_chains);
  if (r->n_external_refs) printf("external rule chain references (files not shipped, not checked): %d\n", r->n_external_refs);
  for (int i = 0; i < r->n_ops; i++)
    for (int k = 0; k < r->ops[i].n_variants; k++) {
      const wisp_variant *v = &r->ops[i].variants[k];
      if (!v->available) printf("unavailable %s.%s (%s)\n", r->ops[i].name, v->key, v->wgsl);
    }
  wisp_registry_free(r);
  return 0;
}

int cmd_registry(int argc, char **argv) {
  if (argc >= 2 && !strcmp(argv[1], "check")) return registry_check(argc - 1, argv + 1);
  int help = argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"));
  fprintf(help ? stdout : stderr, "usage: wisp registry check [FILE] [--kernels-dir DIR] [--rules-dir DIR] [--strict]\n"
                                  "  (wisp registry check --help: every option)\n");
  return help ? 0 : 2;
}

int cmd_kernels(int argc, char **argv) {
  if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") ||
                    (argc >= 3 && !strcmp(argv[1], "digest") && (!strcmp(argv[2], "-h") || !strcmp(argv[2], "--help"))))) {
    printf("usage: wisp kernels digest FILE.wgsl ENTRY\n\nPrints a kernel's sha256 digest (for a profile's "
           "addKernels); ENTRY must be a function in FILE.\n");
    return 0;
  }
  if (argc == 4 && !strcmp(argv[1], "digest")) {
    size_t len = 0;
    char *src = wisp_slurp(argv[2], &len);
    if (!src) return cli_error("kernels digest");
    if (!wisp_wgsl_has_entry(src, argv[3])) {
      free(src);
      wisp_fail(WISP_EFORMAT, "%s: entry point '%s' is not a function in this file", argv[2], argv[3]);
      return cli_error("kernels digest");
    }
    char hex[65];
    wisp_sha256_hex(src, len, hex);
    free(src);
    printf("sha256:%s\n", hex);
    return 0;
  }
  fprintf(stderr, "usage: wisp kernels digest FILE.wgsl ENTRY\n");
  return 2;
}
