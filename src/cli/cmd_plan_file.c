/* `wisp plan-file --shape MANIFEST.json [--profile P] [--backend cpu|webgpu]
 * [--json] ...`: resolves an execution plan from a manifest's runtime.shape,
 * candidate and knee (the real `wisp plan -m DIR` goes through the artifact
 * loader). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/opts.h"
#include "plan/pjson.h"
#include "plan/plan.h"
#include "util/err.h"

int cmd_plan_file(int argc, char **argv) {
  const char *shape_file = NULL, *profile_ref = NULL, *backend = "cpu", *registry_file = WISP_DEFAULT_REGISTRY;
  const char *kernels_dir = NULL;
  cli_list caps = {0};
  int as_json = 0, prefill = 0, no_digests = 0;
  wisp_profile_options popt = {0};
  wisp_registry_options ropt = {0};
  const cli_opt opts[] = {
      {"--shape", CLI_STR, &shape_file, 0, 0, "MANIFEST", "the manifest whose runtime.shape to plan for"},
      {"--profile", CLI_STR, &profile_ref, 0, 0, "P", "runtime profile"},
      {"--backend", CLI_STR, &backend, 0, 0, "B", "cpu (default) or webgpu"},
      {"--registry", CLI_STR, &registry_file, 0, 0, "FILE", "kernel registry (default " WISP_DEFAULT_REGISTRY ")"},
      {"--kernels-dir", CLI_STR, &kernels_dir, 0, 0, "DIR", "where the WGSL files are"},
      {"--profiles-dir", CLI_STR, &popt.profiles_dir, 0, 0, "DIR", "where profiles are"},
      {"--intent", CLI_STR, &popt.intent, 0, 0, "I", "the profile intent"},
      {"--no-digests", CLI_FLAG, &no_digests, 0, 0, NULL, "do not check profile kernel digests"},
      {"--cap", CLI_LIST, &caps, 0, 0, "KEY=VALUE", "a device capability (repeatable)"},
      {"--prefill-tokens", CLI_INT, &prefill, 0, 1e7, "N", "prefill context tokens (default 0: 512)"},
      {"--json", CLI_FLAG, &as_json, 0, 0, NULL, "print the plan's canonical JSON"},
  };
  const cli_spec spec = {"plan-file", "--shape MANIFEST.json [--profile P] [--backend cpu|webgpu] [--json] [options]",
                         "Resolves an execution plan from a manifest (wisp plan -m DIR goes through the artifact).",
                         opts, (int)(sizeof opts / sizeof opts[0]), NULL, 0, NULL};
  int pr = cli_parse(&spec, argc, argv);
  if (pr != CLI_CONTINUE) return pr;
  popt.kernels_dir = ropt.kernels_dir = kernels_dir;
  popt.skip_digests = no_digests;
  if (!shape_file) { fprintf(stderr, "wisp plan-file: --shape MANIFEST is required (see --help)\n"); return 2; }
  if (strcmp(backend, "cpu") && strcmp(backend, "webgpu")) {
    fprintf(stderr, "wisp plan-file: --backend: unknown backend '%s' (cpu, webgpu)\n", backend);
    return 2;
  }
  cJSON *manifest = NULL;
  wisp_registry *reg = NULL;
  wisp_profile *prof = NULL;
  wisp_plan *plan = NULL;
  int rc = 1;
  wisp_model_shape *shape = calloc(1, sizeof *shape);
  if (!shape) { wisp_fail(WISP_ENOMEM, "out of memory"); goto done; }
  if (wisp_json_load(shape_file, &manifest)) goto done;
  const cJSON *cand = NULL, *knee = NULL;
  if (wisp_plan_manifest_parts(manifest, shape_file, shape, &cand, &knee)) goto done;
  wisp_device_caps dev;
  wisp_device_caps_default(&dev, backend);
  wisp_device_caps_from_manifest(&dev, manifest);
  for (int i = 0; i < caps.n; i++)
    if (wisp_device_caps_set(&dev, caps.v[i])) goto done;
  if (wisp_registry_load(registry_file, &ropt, &reg)) goto done;
  if (profile_ref && wisp_profile_load(profile_ref, &popt, &prof)) goto done;
  wisp_plan_inputs in = {0};
  in.shape = shape;
  in.candidate = cand;
  in.knee = knee;
  in.profile = prof;
  in.registry = reg;
  in.device = &dev;
  in.backend = backend;
  in.prefill_tokens = prefill;
  if (wisp_plan_resolve(&in, &plan)) goto done;
  if (as_json) printf("%s\n", plan->json);
  else wisp_plan_print(plan, stdout);
  rc = 0;
done:
  if (rc) cli_error("plan-file");
  wisp_plan_free(plan);
  wisp_profile_free(prof);
  wisp_registry_free(reg);
  cJSON_Delete(manifest);
  free(shape);
  return rc;
}
