/* `wisp plan-file --shape MANIFEST.json [--profile P] [--backend cpu|webgpu]
 * [--json] ...`: resolves an execution plan from a manifest's runtime.shape,
 * candidate and knee (the real `wisp plan -m DIR` goes through the artifact
 * loader). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "plan/pjson.h"
#include "plan/plan.h"
#include "util/err.h"

static void usage(void) {
  fprintf(stderr,
          "usage: wisp plan-file --shape MANIFEST.json [--profile P] [--backend cpu|webgpu] [--json]\n"
          "         [--registry FILE] [--kernels-dir DIR] [--profiles-dir DIR] [--no-digests] [--intent I]\n"
          "         [--cap KEY=VALUE]... [--prefill-tokens N]\n");
}

int cmd_plan_file(int argc, char **argv) {
  const char *shape_file = NULL, *profile_ref = NULL, *backend = "cpu", *registry_file = WISP_DEFAULT_REGISTRY;
  const char *caps[32];
  int n_caps = 0, as_json = 0, prefill = 0;
  wisp_profile_options popt = {0};
  wisp_registry_options ropt = {0};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int more = i + 1 < argc;
    if (!strcmp(a, "--shape") && more) shape_file = argv[++i];
    else if (!strcmp(a, "--profile") && more) profile_ref = argv[++i];
    else if (!strcmp(a, "--backend") && more) backend = argv[++i];
    else if (!strcmp(a, "--registry") && more) registry_file = argv[++i];
    else if (!strcmp(a, "--kernels-dir") && more) popt.kernels_dir = ropt.kernels_dir = argv[++i];
    else if (!strcmp(a, "--profiles-dir") && more) popt.profiles_dir = argv[++i];
    else if (!strcmp(a, "--intent") && more) popt.intent = argv[++i];
    else if (!strcmp(a, "--prefill-tokens") && more) prefill = atoi(argv[++i]);
    else if (!strcmp(a, "--cap") && more && n_caps < 32) caps[n_caps++] = argv[++i];
    else if (!strcmp(a, "--no-digests")) popt.skip_digests = 1;
    else if (!strcmp(a, "--json")) as_json = 1;
    else { fprintf(stderr, "wisp plan-file: unknown or incomplete option '%s'\n", a); usage(); return 2; }
  }
  if (!shape_file) { usage(); return 2; }
  if (prefill < 0) { fprintf(stderr, "wisp plan-file: --prefill-tokens: expected a positive number\n"); return 2; }
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
  for (int i = 0; i < n_caps; i++)
    if (wisp_device_caps_set(&dev, caps[i])) goto done;
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
