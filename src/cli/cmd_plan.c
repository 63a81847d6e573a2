/* wisp plan [-m DIR] [--profile P] [--registry FILE] [--backend cpu|webgpu|auto] [--json]:
 * prints the execution plan that `wisp run` and `wisp bench` execute for this
 * model on this device: per phase and layer type, every op with its kernel,
 * geometry and where the choice came from, and the plan id. */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "engine/engine.h"
#include "util/err.h"

int cmd_plan(int argc, char **argv) {
  const char *dir = NULL, *profile = NULL, *backend = "cpu", *registry = NULL;
  int as_json = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int more = i + 1 < argc;
    if (!strcmp(a, "-m") && more) dir = argv[++i];
    else if (!strcmp(a, "--profile") && more) profile = argv[++i];
    else if (!strcmp(a, "--backend") && more) backend = argv[++i];
    else if (!strcmp(a, "--registry") && more) registry = argv[++i];
    else if (!strcmp(a, "--json")) as_json = 1;
    else {
      fprintf(stderr, "wisp plan: unknown or incomplete option '%s'\n", a);
      return 2;
    }
  }
  if (!dir && !(dir = cli_default_model())) return cli_error("plan");
  wisp_model *m = NULL;
  wisp_backend *be = NULL;
  wisp_plan *plan = NULL;
  int rc = 1;
  if (wisp_model_open(dir, &m)) goto done;
  if (wisp_backend_create(backend, 1, &be)) goto done;
  wisp_device_caps caps;
  be->caps(be, &caps);
  if (wisp_engine_resolve_plan(m, &caps, profile, registry, &plan)) goto done;
  if (as_json) printf("%s\n", plan->json);
  else wisp_plan_print(plan, stdout);
  rc = 0;
done:
  if (rc) cli_error("plan");
  wisp_plan_free(plan);
  if (be) be->destroy(be);
  wisp_model_close(m);
  return rc;
}
