/* `wisp serve` (docs/serve.md): an OpenAI-compatible HTTP server over the
 * scheduler of include/wisp.h (wisp_sched_*), on libmicrohttpd. It listens
 * first and loads the model after (GET /health answers 503 until the model
 * is ready), serves until SIGINT or SIGTERM, then shuts down gracefully:
 * new requests get 503, running ones may finish for a short grace period,
 * the rest are cancelled and their streams get a last event. */
#ifndef WISP_SERVER_SERVER_H
#define WISP_SERVER_SERVER_H

typedef struct {
  const char *model_dir;   /* the artifact */
  const char *host;        /* address to bind: "127.0.0.1" (default), "0.0.0.0", "::" ... */
  int port;                /* 0: any free port (printed) */
  int parallel;            /* sequences decoded together */
  int max_queue;           /* requests waiting beyond them (0: the scheduler's default) */
  int context;             /* tokens per sequence (0: the model's) */
  const char *api_key;     /* NULL: no authentication */
  const char *profile, *backend, *tuning;
  int threads;             /* CPU threads of the backend (0: one per core) */
  int http_threads;        /* libmicrohttpd's polling threads (0: 2) */
  int max_connections;     /* 0: 1024 */
  int timeout_s;           /* idle connection timeout, seconds (0: 60) */
  int grace_s;             /* shutdown: how long running requests may finish (default 5; -1: 0) */
  int prefill_chunk;       /* prompt tokens a scheduler step, in one batched prefill (0: the scheduler's) */
  int run_ahead;           /* decode-loop batch of a request decoding alone (0: the plan's, -1: off) */
} srv_config;

/* Runs the server until a signal; returns the process exit status (0 after
 * a clean shutdown, 1 when the model or the socket failed). */
int srv_run(const srv_config *cfg);

#endif
