/* wisp serve: an OpenAI-compatible HTTP server (docs/serve.md).
 *   wisp serve [-m DIR] [--host ADDR] [--port N] [--parallel N] [-c CTX]
 *              [--api-key KEY] [--profile P] [--backend B] [-t N]
 * It listens at once and loads the model after (GET /health: 503 until it
 * is ready); SIGINT/SIGTERM shut it down gracefully. The work is in
 * src/server/; this file reads the options. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/opts.h"
#include "server/server.h"
#include "util/env.h"

int cmd_serve(int argc, char **argv) {
  srv_config c = {.host = "127.0.0.1", .port = 8080, .parallel = 4, .backend = CLI_DEFAULT_BACKEND};
  const char *api_key_env = NULL;
  const cli_opt opts[] = {
      {"-m|--model", CLI_STR, &c.model_dir, 0, 0, "DIR", "the model artifact, or a GGUF file (default: models/default)"},
      {"--host", CLI_STR, &c.host, 0, 0, "ADDR", "address to listen on (default 127.0.0.1; 0.0.0.0 or :: for all)"},
      {"--port", CLI_INT, &c.port, 0, 65535, "N", "TCP port (default 8080; 0: any free port, printed)"},
      {"-np|--parallel", CLI_INT, &c.parallel, 1, 1024, "N", "sequences decoded together (default 4)"},
      {"--max-queue", CLI_INT, &c.max_queue, 0, 1000000, "N",
       "requests waiting for a sequence before 429 (default 0: 4 x --parallel)"},
      {"-c|--ctx-size", CLI_INT, &c.context, 0, 1e9, "N", "context tokens per sequence, at most the model's (default 0: the model's, at most 4096)"},
      {"--prefill-chunk", CLI_INT, &c.prefill_chunk, 0, 1 << 20, "N",
       "prompt tokens a scheduler step, the waiting prompts' segments in one batched prefill (default 0: 512)"},
      {"--run-ahead", CLI_INT, &c.run_ahead, -1, 4096, "N",
       "tokens a submit for a request decoding alone (default 0: the plan's decode loop; -1: one a step)"},
      {"--api-key", CLI_STR, &c.api_key, 0, 0, "KEY", "require Authorization: Bearer KEY on /v1/* and /metrics"},
      {"--api-key-env", CLI_STR, &api_key_env, 0, 0, "VAR", "read the API key from environment variable VAR"},
      {"--profile", CLI_STR, &c.profile, 0, 0, "P", "runtime profile: a built-in NAME (default: throughput, the fast one; exact: the reference path) or FILE.json"},
      {"--backend", CLI_STR, &c.backend, 0, 0, "B", "auto (default: a GPU adapter, else the CPU), cpu or webgpu"},
      {"--tuning", CLI_STR, &c.tuning, 0, 0, "K=V,...", "backend tuning keys (docs/configuration.md)"},
      {"-t|--threads", CLI_INT, &c.threads, 0, 1024, "N", "CPU threads (default 0: one per core)"},
      {"--http-threads", CLI_INT, &c.http_threads, 1, 64, "N", "HTTP polling threads (default 2)"},
      {"--max-connections", CLI_INT, &c.max_connections, 1, 100000, "N", "open connections at most (default 1024)"},
      {"--timeout", CLI_INT, &c.timeout_s, 1, 86400, "S", "close a connection idle this long (default 60 s)"},
      {"--grace", CLI_INT, &c.grace_s, -1, 3600, "S",
       "on SIGINT/SIGTERM, let running requests finish this long (default 5 s; -1: cancel at once)"},
  };
  const cli_spec spec = {"serve", "[-m DIR] [--host ADDR] [--port N] [--parallel N] [-c CTX] [--api-key KEY] [options]",
                         "Serves the model over HTTP with the OpenAI API: /v1/chat/completions, /v1/completions,\n"
                         "/v1/models, /health, /metrics and a chat page at / (docs/serve.md). Ctrl-C stops it.",
                         opts, (int)(sizeof opts / sizeof opts[0]), NULL, 0, NULL};
  int pr = cli_parse(&spec, argc, argv);
  if (pr != CLI_CONTINUE) return pr;
  if (api_key_env) {
    if (c.api_key) {
      fprintf(stderr, "wisp serve: give --api-key or --api-key-env, not both\n");
      return 2;
    }
    if (!(c.api_key = wisp_env_named(api_key_env))) {
      fprintf(stderr, "wisp serve: --api-key-env %s: the variable is not set\n", api_key_env);
      return 2;
    }
  }
  if (c.api_key && !c.api_key[0]) {
    fprintf(stderr, "wisp serve: --api-key must not be empty\n");
    return 2;
  }
  if (!c.model_dir && !(c.model_dir = cli_default_model())) return cli_error("serve");
  if (c.grace_s == 0) c.grace_s = 5;
  c.profile = cli_profile_or_fast(c.profile);
  return srv_run(&c);
}
