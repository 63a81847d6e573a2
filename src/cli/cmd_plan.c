/* wisp plan [-m DIR] [--profile P] [--registry FILE] [--backend auto|cpu|webgpu] [--json]:
 * prints the execution plan that `wisp run` and `wisp bench` execute for this
 * model on this device: per phase and layer type, every op with its kernel,
 * geometry and where the choice came from, and the plan id; then, under
 * "why this path", which backend and profile run and why (auto's finding,
 * the default profile) and the products each phase runs. */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "engine/engine.h"
#include "engine/internal.h"
#include "engine/plan_apply.h"
#include "engine/session.h"
#include "format/gguf_artifact.h"
#include "util/err.h"
#include "cli/opts.h"

/* The products each phase runs (distinct matmul kernels) and the rule or
 * patch that chose the first of each: which path runs (integer, f32,
 * subgroup) and why, in one line a phase. */
static void print_products(const wisp_plan *plan) {
  for (int ph = 0; ph < 2; ph++) {
    const wisp_plan_phase *P = &plan->phases[ph];
    const wisp_plan_op *seen[16];
    int n = 0;
    for (int g = -1; g <= P->n_groups; g++) {
      const wisp_plan_op *ops = g < 0 ? P->prologue : g == P->n_groups ? P->epilogue : P->groups[g].ops;
      const int n_ops = g < 0 ? P->n_prologue : g == P->n_groups ? P->n_epilogue : P->groups[g].n_ops;
      for (int i = 0; i < n_ops; i++) {
        if (strcmp(ops[i].op, "matmul")) continue;
        int dup = 0;
        for (int k = 0; k < n && !dup; k++) dup = !strcmp(seen[k]->kernel, ops[i].kernel);
        if (!dup && n < 16) seen[n++] = &ops[i];
      }
    }
    printf("products, %s:", P->name);
    for (int k = 0; k < n; k++)
      printf("%s %s (%s%s%s)", k ? "," : "", seen[k]->kernel, wisp_prov_kind_name(seen[k]->kernel_from.kind),
             seen[k]->kernel_from.detail[0] ? " " : "", seen[k]->kernel_from.detail);
    printf("\n");
  }
}

int cmd_plan(int argc, char **argv) {
  const char *dir = NULL, *profile = NULL, *backend = CLI_DEFAULT_BACKEND, *registry = NULL;
  int as_json = 0, ctx = 0;
  const cli_opt opts[] = {
      {"-m|--model", CLI_STR, &dir, 0, 0, "DIR", "the model artifact (default: models/default)"},
      {"--profile", CLI_STR, &profile, 0, 0, "P", "runtime profile: a built-in NAME (default: throughput, the fast one; exact: the reference path) or FILE.json"},
      {"--registry", CLI_STR, &registry, 0, 0, "FILE", "kernel registry file (default: the built-in one)"},
      {"--backend", CLI_STR, &backend, 0, 0, "B", "auto (default: a GPU adapter, else the CPU), cpu or webgpu"},
      {"-c|--ctx-size", CLI_INT, &ctx, 0, 1e9, "N", "the context to size the KV caches for (default 0: the model's, at most 4096)"},
      {"--json", CLI_FLAG, &as_json, 0, 0, NULL, "print the plan's canonical JSON"},
  };
  const cli_spec spec = {"plan", "[-m DIR] [--profile P] [--registry FILE] [--backend B] [--json]",
                         "Prints the execution plan that run and bench execute for this model on this device.",
                         opts, (int)(sizeof opts / sizeof opts[0]), NULL, 0, NULL};
  int pr = cli_parse(&spec, argc, argv);
  if (pr != CLI_CONTINUE) return pr;
  if (!dir && !(dir = cli_default_model())) return cli_error("plan");
  wisp_model *m = NULL;
  wisp_backend *be = NULL;
  wisp_plan *plan = NULL;
  int rc = 1;
  if (wisp_model_open(dir, &m)) goto done;
  const int model_max = m->arch->max_positions(m->weights);
  if (ctx > model_max) {
    wisp_fail(WISP_EINVAL, "-c %d exceeds the model's maximum context of %d tokens", ctx, model_max);
    goto done;
  }
  if (wisp_backend_create(backend, 1, &be)) goto done;
  wisp_device_caps caps;
  be->caps(be, &caps);
  if (wisp_engine_resolve_plan(m, &caps, cli_profile_or_fast(profile), registry, &plan)) goto done;
  if (as_json) {
    printf("%s\n", plan->json);
  } else {
    wisp_plan_print(plan, stdout);
    /* which path runs and why (the first line stays "plan ID" for scripts) */
    char why[512];
    cli_backend_why(backend, be->name, why, sizeof why);
    printf("\nwhy this path\nbackend %s\n", why);
    cli_profile_why(profile, why, sizeof why);
    printf("profile %s: %s\n", plan->profile_id ? plan->profile_id : "(none)", why);
    print_products(plan);
  }
  /* the context a session gets (as wisp_session_new decides it) and its KV caches, made for all of it */
  const int context = ctx ? ctx : model_max < WISP_DEFAULT_CONTEXT ? model_max : WISP_DEFAULT_CONTEXT;
  wisp_backend_settings bs;
  wisp_engine_backend_settings(plan, &bs);
  /* the kernels the backend picks by its options past the plan's variants,
   * configured as a session would configure it */
  if (!as_json && be->prefill_paths) {
    char paths[1536];
    if ((be->configure && be->configure(be, &bs)) || wisp_engine_prefill_paths(m, plan, be, paths, sizeof paths))
      printf("prefill paths: none (%s)\n", wisp_last_error()); /* a session would stop with the same message */
    else
      fputs(paths, stdout);
  }
  const int kv16 = bs.kv_f16 && be->kv_buf_new;
  if (!as_json)
    printf("\ncontext: %d positions (the model's maximum %d); KV caches: %.1f MiB a sequence (%s)\n", context,
           model_max, (double)wisp_graph_kv_bytes(&m->graph, context, kv16 ? 2 : 4) / (1024.0 * 1024.0),
           kv16 ? "f16" : "f32");
  /* the prefill chunk a session gets (wisp_session_prefill_chunk) */
  if (!as_json)
    printf("prefill: %d tokens a forward call in a session of one slot, %d in one of several (tuning prefillChunk)\n",
           wisp_session_prefill_chunk(&m->graph, &caps, 1), wisp_session_prefill_chunk(&m->graph, &caps, 2));
  const wisp_artifact *a = m->artifact;
  if (!as_json && a->gguf) { /* where each piece of a GGUF run in place came from */
    printf("\nsource: %s (GGUF v%u, %llu tensors), manifest derived in memory (wisp.source '%s'); "
           "%.1f MB mapped, %.1f MB built at open\n", a->dir, a->gguf->g->version,
           (unsigned long long)a->gguf->g->n_tensors, "gguf", (double)a->gguf->mapped_bytes / 1e6,
           (double)a->gguf->owned_bytes / 1e6);
    printf("tokenizer: %s\n", !strcmp(a->tokenizer, "bpe") ? "tokenizer.ggml.* and tokenizer.chat_template, in memory"
                                                           : "byte-level (the file has no tokenizer)");
    for (int i = 0; i < a->n_sections; i++)
      printf("  %-28s %10llu bytes  %s\n", a->sections[i].name, (unsigned long long)a->sections[i].bytes,
             a->sections[i].origin ? a->sections[i].origin : "");
  }
  rc = 0;
done:
  if (rc) cli_error("plan");
  wisp_plan_free(plan);
  if (be) be->destroy(be);
  wisp_model_close(m);
  return rc;
}
