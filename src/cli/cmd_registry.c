/* `wisp registry check FILE [--kernels-dir DIR] [--rules-dir DIR] [--strict]`
 * and `wisp kernels digest FILE ENTRY`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "plan/pjson.h"
#include "plan/registry.h"
#include "util/err.h"

static int registry_check(int argc, char **argv) {
  const char *file = NULL;
  wisp_registry_options opt = {0};
  for (int i = 0; i < argc; i++) {
    if (!strcmp(argv[i], "--kernels-dir") && i + 1 < argc) opt.kernels_dir = argv[++i];
    else if (!strcmp(argv[i], "--rules-dir") && i + 1 < argc) opt.rules_dir = argv[++i];
    else if (!strcmp(argv[i], "--strict")) opt.strict = 1;
    else if (argv[i][0] == '-') { fprintf(stderr, "wisp registry check: unknown option '%s'\n", argv[i]); return 2; }
    else if (!file) file = argv[i];
    else { fprintf(stderr, "wisp registry check: unexpected argument '%s'\n", argv[i]); return 2; }
  }
  if (!file) file = WISP_DEFAULT_REGISTRY;
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
  if (argc >= 2 && !strcmp(argv[1], "check")) return registry_check(argc - 2, argv + 2);
  fprintf(stderr, "usage: wisp registry check [FILE] [--kernels-dir DIR] [--rules-dir DIR] [--strict]\n");
  return 2;
}

int cmd_kernels(int argc, char **argv) {
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
