/* wisp bench: a fixed workload (a seeded prompt of P token ids, then D greedy
 * decode steps) timed per phase, written as a JSON receipt in the results
 * directory, bench/results/ of the wisp repository (beside build/; the
 * same place wherever bench runs), or to -o FILE.
 *   wisp bench [-m DIR] [-p P] [-n D] [--backend B] [--profile P]
 *              [--batch N] [-t T] [-o FILE [--force]] [--no-warmup] [--sequential]
 *              [--op-times] [--temp T [--top-k K] [--top-p P] [--min-p P] [--seed S]]
 * -p/-n are llama-bench's names; --prompt/--decode stay as aliases.
 * Kernel compilation (WebGPU, first use) is timed apart: the receipt's
 * "compile" object, never part of a phase's seconds or tok/s.
 * Decode runs through the decode loop (greedy on the device, or with --temp
 * the draw `wisp run` makes, by default its top-k / top-p / min-p), N tokens per
 * submit (default: the plan's decodeLoop batch), the next batch recorded
 * while the device runs the current one unless --sequential. */
#include <cJSON.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/clock.h"
#include "cli/commands.h"
#include "engine/engine.h"
#include "engine/sampler.h"
#include "util/err.h"
#include "util/file.h"
#include "util/paths.h"
#include "cli/opts.h"

/* Per-token times from the decode loop's per-batch callback, and each
 * batch's own time and size (a stall shows as one slow batch, which the
 * per-token percentiles spread thin). */
typedef struct {
  double *step;
  int done, total;
  double last;
  double *batch_s; /* room for `total` batches (each has a token at least) */
  int *batch_n, n_batches;
} bench_clock;

static int bench_on_tokens(void *user, const int32_t *tokens, int n) {
  (void)tokens;
  bench_clock *c = user;
  double t = wisp_now_s();
  for (int i = 0; i < n && c->done < c->total; i++) c->step[c->done++] = (t - c->last) / n;
  if (c->n_batches < c->total) {
    c->batch_s[c->n_batches] = t - c->last;
    c->batch_n[c->n_batches++] = n;
  }
  c->last = t;
  if (c->done % 64 < n || c->done == c->total) fprintf(stderr, "\rbench: decode %d/%d", c->done, c->total);
  return 0;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double percentile(const double *sorted, int n, double p) {
  if (n == 0) return 0;
  double idx = p * (n - 1);
  int lo = (int)idx;
  int hi = lo + 1 < n ? lo + 1 : lo;
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (idx - lo);
}

static void cpu_name(char *out, size_t cap) {
  snprintf(out, cap, "unknown cpu");
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return;
  char line[512];
  while (fgets(line, sizeof line, f)) {
    if (!strncmp(line, "model name", 10)) {
      char *c = strchr(line, ':');
      if (c) {
        c++;
        while (*c == ' ') c++;
        c[strcspn(c, "\n")] = 0;
        snprintf(out, cap, "%s", c);
      }
      break;
    }
  }
  fclose(f);
}

/* --op-times: each op kind's share of a phase, most expensive first; what
 * the ops do not cover (the engine, the pool's hand-offs outside ops) is
 * the rest of the phase's wall time. */
static int by_seconds(const void *a, const void *b) {
  double x = ((const wisp_cpu_op_time *)a)->seconds, y = ((const wisp_cpu_op_time *)b)->seconds;
  return (x < y) - (x > y);
}

static void print_op_times(const char *phase, wisp_cpu_op_time *ops, int n, double total_s, int tokens) {
  qsort(ops, (size_t)n, sizeof *ops, by_seconds);
  double sum = 0;
  fprintf(stderr, "bench: %s op times (%d tokens, %.2f ms)\n", phase, tokens, 1e3 * total_s);
  fprintf(stderr, "  %-22s %10s %8s %10s %6s\n", "op", "ms", "calls", "us/call", "share");
  for (int i = 0; i < n; i++) {
    sum += ops[i].seconds;
    fprintf(stderr, "  %-22s %10.2f %8ld %10.1f %5.1f%%\n", ops[i].op, 1e3 * ops[i].seconds, ops[i].calls,
            1e6 * ops[i].seconds / (double)ops[i].calls, total_s > 0 ? 100 * ops[i].seconds / total_s : 0);
  }
  fprintf(stderr, "  %-22s %10.2f %8s %10s %5.1f%%\n", "(outside ops)", 1e3 * (total_s - sum), "", "",
          total_s > 0 ? 100 * (total_s - sum) / total_s : 0);
}

static void add_op_times(cJSON *phase, const wisp_cpu_op_time *ops, int n) {
  cJSON *a = cJSON_AddArrayToObject(phase, "op_times");
  for (int i = 0; i < n; i++) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "op", ops[i].op);
    cJSON_AddNumberToObject(o, "seconds", ops[i].seconds);
    cJSON_AddNumberToObject(o, "calls", (double)ops[i].calls);
    cJSON_AddItemToArray(a, o);
  }
}

/* A float setting as it was written (0.8, not 0.800000011920929). */
static double round6(float x) { return round((double)x * 1e6) / 1e6; }

/* Creates a receipt directory, or checks an existing one: a directory,
 * not a symbolic link (lstat). 0, or 1 with the error set. */
static int receipt_dir(const char *dir) {
  if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
    wisp_fail(WISP_EIO, "cannot create %s: %s", dir, strerror(errno));
    return 1;
  }
  struct stat sb;
  if (lstat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
    wisp_fail(WISP_EIO, "%s is not a directory (a symbolic link is not followed); receipts are not written there", dir);
    return 1;
  }
  return 0;
}

int cmd_bench(int argc, char **argv) {
  const char *model_dir = NULL, *backend = CLI_DEFAULT_BACKEND, *out_path = NULL, *profile = NULL, *tuning = NULL;
  int n_prompt = 128, n_decode = 256, threads = 0, batch_opt = 0, no_warmup = 0, sequential = 0, force = 0;
  int op_times = 0, top_k = -1;
  double temp = 0, top_p = -1, min_p = -1;
  long long seed = 1;
  wisp_cpu_op_time ops[2][32];
  int n_ops[2] = {0, 0};
  const cli_opt opts[] = {
      {"-m|--model", CLI_STR, &model_dir, 0, 0, "DIR", "the model artifact (default: models/default)"},
      {"-p|--n-prompt|--prompt", CLI_INT, &n_prompt, 1, 1e7, "N", "prompt tokens (default 128)"},
      {"-n|--n-gen|--decode", CLI_INT, &n_decode, 0, 1e7, "N", "decode tokens (default 256)"},
      {"--backend", CLI_STR, &backend, 0, 0, "B", "auto (default: a GPU adapter, else the CPU), cpu or webgpu"},
      {"--profile", CLI_STR, &profile, 0, 0, "P", "runtime profile: a built-in NAME (default: throughput, the fast one; exact: the reference path) or FILE.json"},
      {"--tuning", CLI_STR, &tuning, 0, 0, "K=V,...", "backend tuning keys, recorded in the receipt (docs/configuration.md)"},
      {"--batch", CLI_INT, &batch_opt, 1, 1e6, "N", "decode tokens per submit (default: the plan's)"},
      {"-t|--threads", CLI_INT, &threads, 0, 1024, "N", "CPU threads (default 0: one per physical core available)"},
      {"-o|--output", CLI_STR, &out_path, 0, 0, "FILE", "the receipt's path (default: bench/results/ of the repository)"},
      {"--force", CLI_FLAG, &force, 0, 0, NULL, "replace an existing -o FILE"},
      {"--no-warmup", CLI_FLAG, &no_warmup, 0, 0, NULL, "time the first prefill and batch too"},
      {"--sequential", CLI_FLAG, &sequential, 0, 0, NULL, "one decode batch in flight at a time"},
      {"--op-times", CLI_FLAG, &op_times, 0, 0, NULL,
       "cpu backend: time each op kind (prefill and decode apart), printed and in the receipt"},
      {"--temp", CLI_NUM, &temp, 0, 100, "T", "decode with sampling at this temperature (default 0: greedy)"},
      {"--top-k", CLI_INT, &top_k, 0, 1e9, "K", "with --temp: top-k (default: wisp run's, 40)"},
      {"--top-p", CLI_NUM, &top_p, 0, 1, "P", "with --temp: top-p (default: wisp run's, 0.95)"},
      {"--min-p", CLI_NUM, &min_p, 0, 1, "P", "with --temp: min-p (default: wisp run's, 0.05)"},
      {"--seed", CLI_I64, &seed, 0, 4294967295.0, "S", "with --temp: the sampling seed (default 1)"},
  };
  const cli_spec spec = {"bench", "[-m DIR] [-p N] [-n N] [options]",
                         "A seeded prompt of -p token ids, then -n decode steps (greedy, or sampled with --temp), timed per\n"
                         "phase; the JSON receipt goes to bench/results/ of the wisp repository (or -o FILE).",
                         opts, (int)(sizeof opts / sizeof opts[0]), NULL, 0, NULL};
  int pr = cli_parse(&spec, argc, argv);
  if (pr != CLI_CONTINUE) return pr;
  cli_warn_threads("bench", (long)threads);
  if (op_times && strcmp(backend, "cpu") && strcmp(backend, "auto")) {
    fprintf(stderr, "wisp bench: --op-times times the cpu backend's ops, not %s's\n", backend);
    return 2;
  }
  if (out_path && cli_claim_target("bench", out_path, 0, force)) return 2;
  /* the decode's draw: greedy, or wisp run's sampler with what was given */
  const wisp_sampler_params sd = wisp_sampler_defaults();
  const float d_temp = (float)temp, d_top_p = top_p >= 0 ? (float)top_p : sd.top_p,
              d_min_p = min_p >= 0 ? (float)min_p : sd.min_p;
  const int d_top_k = top_k >= 0 ? top_k : sd.top_k;
  const uint64_t d_seed = (uint64_t)seed;
  if (!model_dir && !(model_dir = cli_default_model())) return cli_error("bench");

  wisp_model *m = NULL;
  wisp_session *s = NULL;
  float *logits = NULL;
  double *step = NULL;
  int32_t *prompt = NULL, *generated = NULL;
  double *batch_s = NULL;
  int *batch_n = NULL, n_batches = 0;
  cJSON *r = NULL;
  int rc = 1;
  if (wisp_model_open(model_dir, &m)) goto fail;
  /* a run longer than the default context opens the session with the context it needs (at most the model's) */
  wisp_session_options so = {.backend = backend, .threads = threads, .profile = cli_profile_or_fast(profile), .tuning = tuning,
                             .max_context = n_prompt + n_decode > WISP_DEFAULT_CONTEXT ? n_prompt + n_decode : 0};
  if (wisp_session_new(m, &so, &s)) goto fail;
  const int vocab = wisp_model_vocab(m);
  if (n_prompt + n_decode > wisp_session_context(s)) {
    wisp_fail(WISP_EINVAL, "-p %d + -n %d exceed the context of %d", n_prompt, n_decode,
              wisp_session_context(s));
    goto fail;
  }
  logits = malloc(sizeof(float) * (size_t)vocab);
  step = malloc(sizeof(double) * (size_t)(n_decode + 1));
  prompt = malloc(sizeof(int32_t) * (size_t)n_prompt);
  generated = malloc(sizeof(int32_t) * (size_t)(n_decode + 1));
  batch_s = malloc(sizeof(double) * (size_t)(n_decode + 1));
  batch_n = malloc(sizeof(int) * (size_t)(n_decode + 1));
  if (!logits || !step || !prompt || !generated || !batch_s || !batch_n) {
    wisp_fail(WISP_ENOMEM, "out of memory");
    goto fail;
  }
  uint64_t x = 0x9E3779B97F4A7C15ull; /* fixed prompt: same ids every run */
  for (int i = 0; i < n_prompt; i++) {
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
    prompt[i] = (int32_t)(x % (uint64_t)(vocab < 256 ? vocab : 256));
  }
  /* Warm-up, not timed: the KV caches grown to the timed request's length,
   * the same prefill and two decode batches (the first batch's input comes
   * from the host, later ones from the device), so that one-time work (GPU
   * pipeline compilation, cache growth, first-touch page faults) is not
   * charged to the measured tokens; then the session starts again (its
   * caches keep their size). */
  int batch = batch_opt > 0 ? batch_opt : wisp_session_plan_batch(s);
  wisp_backend_stats c0 = {0};
  if (wisp_session_device_stats(s, &c0) && c0.pipelines == 0)
    fprintf(stderr, "wisp: compiling kernels (first run; the receipt times it apart)...\n");
  if (!no_warmup) {
    fprintf(stderr, "bench: warm-up...\n");
    int made = 0, k = 2 * batch < n_decode ? 2 * batch : n_decode;
    wisp_generate_options wo = {.temperature = d_temp, .top_k = d_top_k, .top_p = d_top_p, .min_p = d_min_p,
                                .seed = d_seed, .batch = batch};
    if (wisp_session_reserve(s, n_prompt + n_decode)) goto fail;
    if (wisp_session_eval(s, prompt, n_prompt, logits)) goto fail;
    if (k > 0 && wisp_session_generate(s, (int32_t)wisp_argmax(logits, vocab), k, &wo, generated, &made)) goto fail;
    wisp_session_reset(s);
  }
  fprintf(stderr, "bench: %s, backend %s, %s KV caches, prefill %d tokens...\n", model_dir, wisp_session_backend_name(s),
          wisp_session_kv_dtype(s), n_prompt);
  wisp_backend_stats g0 = {0}, g1 = {0}, g2 = {0};
  int is_gpu = wisp_session_device_stats(s, &g0);
  if (op_times && strcmp(wisp_session_backend_name(s), "cpu")) {
    wisp_fail(WISP_EINVAL, "--op-times times the cpu backend's ops; this run uses %s", wisp_session_backend_name(s));
    goto fail;
  }
  if (op_times) wisp_session_time_ops(s, 1);
  double t0 = wisp_now_s();
  if (wisp_session_eval(s, prompt, n_prompt, logits)) goto fail;
  double prefill_s = wisp_now_s() - t0;
  if (op_times) {
    n_ops[0] = wisp_session_op_times(s, ops[0], 32);
    wisp_session_time_ops(s, 1);
  }
  if (is_gpu) {
    wisp_session_device_stats(s, &g1);
    prefill_s -= g1.compile_seconds - g0.compile_seconds; /* compiling is reported apart */
  }
  /* Decode: through the decode loop, `batch` tokens per submit; every
   * token of a batch is charged the batch's time divided by its size. */
  double decode_total = 0, rec0 = s->loop_record_s, wait0 = s->loop_wait_s;
  int32_t cur = (int32_t)wisp_argmax(logits, vocab);
  if (n_decode > 0) {
    /* One generate call for all tokens (so a pipelined loop keeps batches in
     * flight); each batch's tokens are charged the time since the previous
     * batch arrived, divided by their number. */
    bench_clock bc = {step, 0, n_decode, wisp_now_s(), batch_s, batch_n, 0};
    wisp_generate_options go = {.temperature = d_temp, .top_k = d_top_k, .top_p = d_top_p, .min_p = d_min_p,
                                .seed = d_seed, .batch = batch, .on_tokens = bench_on_tokens, .user = &bc,
                                .sequential = sequential};
    int made = 0;
    double a = bc.last;
    if (wisp_session_generate(s, cur, n_decode, &go, generated, &made)) goto fail;
    decode_total = wisp_now_s() - a;
    n_batches = bc.n_batches;
    if (made != n_decode) { wisp_fail(WISP_EINVAL, "decode loop made %d of %d tokens", made, n_decode); goto fail; }
  }
  if (n_decode) fprintf(stderr, "\n");
  if (op_times) {
    n_ops[1] = wisp_session_op_times(s, ops[1], 32);
    wisp_session_time_ops(s, 0);
    print_op_times("prefill", ops[0], n_ops[0], prefill_s, n_prompt);
    print_op_times("decode", ops[1], n_ops[1], decode_total, n_decode);
  }
  if (is_gpu) {
    wisp_session_device_stats(s, &g2);
    decode_total -= g2.compile_seconds - g1.compile_seconds;
  }
  qsort(step, (size_t)n_decode, sizeof(double), cmp_double);

  char fp[65], cpu[256];
  wisp_sha256_hex(generated, sizeof(int32_t) * (size_t)n_decode, fp);
  const wisp_plan *plan = wisp_session_plan(s);
  cpu_name(cpu, sizeof cpu);
  const cJSON *ext = cJSON_GetObjectItemCaseSensitive(m->artifact->manifest, "wisp");
  const cJSON *wsha = ext ? cJSON_GetObjectItemCaseSensitive(ext, "weightsSha256") : NULL;

  r = cJSON_CreateObject();
  cJSON *jm = cJSON_AddObjectToObject(r, "model");
  cJSON_AddStringToObject(jm, "dir", model_dir);
  cJSON_AddStringToObject(jm, "architecture", m->artifact->architecture);
  cJSON_AddNumberToObject(jm, "weightBytes", (double)m->artifact->weight_bytes);
  cJSON_AddStringToObject(jm, "weightsSha256", cJSON_IsString(wsha) ? wsha->valuestring : "unknown");
  cJSON_AddStringToObject(r, "plan_id", plan->id);
  cJSON_AddStringToObject(r, "profile", plan->profile_id ? plan->profile_id : "none");
  /* the manifest's tuned entry this run used (wisp tune, docs/tuning.md) */
  if (plan->tuned_present) cJSON_AddStringToObject(r, "tuned", plan->tuned_used[0] ? plan->tuned_used : "none for this device");
  cJSON_AddStringToObject(r, "tuning", tuning ? tuning : ""); /* settings beside the plan (docs/configuration.md) */
  cJSON *js = cJSON_AddObjectToObject(r, "sampling"); /* the decode's draw: temperature 0 is greedy */
  cJSON_AddNumberToObject(js, "temperature", round6(d_temp));
  if (d_temp > 0) {
    cJSON_AddNumberToObject(js, "top_k", d_top_k);
    cJSON_AddNumberToObject(js, "top_p", round6(d_top_p));
    cJSON_AddNumberToObject(js, "min_p", round6(d_min_p));
    cJSON_AddNumberToObject(js, "seed", (double)d_seed);
  }
  /* the KV caches as the backend keeps them: the plan's kvDtype, or f16 by tuning kv=f16 */
  cJSON_AddStringToObject(r, "kv_dtype", wisp_session_kv_dtype(s));
  /* the context the session was opened with and the bytes of its KV caches (made for all of it) */
  cJSON_AddNumberToObject(r, "context", wisp_session_context(s));
  cJSON_AddNumberToObject(r, "kv_bytes", (double)wisp_session_kv_bytes(s));
  cJSON_AddNumberToObject(r, "threads", threads);
  cJSON *jd = cJSON_AddObjectToObject(r, "device");
  cJSON_AddStringToObject(jd, "backend", wisp_session_backend_name(s));
  /* the GPU's name for a GPU backend (the host CPU beside it) */
  cJSON_AddStringToObject(jd, "name", plan->device.name[0] ? plan->device.name : cpu);
  if (plan->device.name[0]) cJSON_AddStringToObject(jd, "host_cpu", cpu);
  cJSON_AddNumberToObject(jd, "online_cores", (double)sysconf(_SC_NPROCESSORS_ONLN));
  cJSON_AddNumberToObject(r, "prompt_tokens", n_prompt);
  cJSON_AddNumberToObject(r, "decode_tokens", n_decode);
  cJSON_AddNumberToObject(r, "decode_batch", batch);
  cJSON_AddBoolToObject(r, "decode_pipelined", !sequential && wisp_session_pipelined(s));
  cJSON_AddBoolToObject(r, "warmup", !no_warmup);
  cJSON *jp = cJSON_AddObjectToObject(r, "prefill");
  cJSON_AddNumberToObject(jp, "seconds", prefill_s);
  cJSON_AddNumberToObject(jp, "tok_per_s", n_prompt / prefill_s);
  cJSON *jdec = cJSON_AddObjectToObject(r, "decode");
  cJSON_AddNumberToObject(jdec, "seconds", decode_total);
  cJSON_AddNumberToObject(jdec, "tok_per_s", n_decode ? n_decode / decode_total : 0);
  cJSON_AddNumberToObject(jdec, "ms_per_token_p50", 1e3 * percentile(step, n_decode, 0.5));
  cJSON_AddNumberToObject(jdec, "ms_per_token_p95", 1e3 * percentile(step, n_decode, 0.95));
  /* What bounds decode: weight bytes streamed per token over the time, and
   * (GPU) how many dispatches and submits each token costs. */
  uint64_t wbytes = wisp_engine_decode_weight_bytes(m, plan);
  cJSON_AddNumberToObject(jdec, "weight_bytes_per_token", (double)wbytes);
  cJSON_AddNumberToObject(jdec, "achieved_GB_per_s", n_decode ? (double)wbytes * n_decode / decode_total / 1e9 : 0);
  /* Host time recording/submitting the batches vs waiting for their ids:
   * a large host share means the device idles while wisp records. */
  cJSON_AddNumberToObject(jdec, "host_record_seconds", s->loop_record_s - rec0);
  if (op_times) {
    add_op_times(jp, ops[0], n_ops[0]);
    add_op_times(jdec, ops[1], n_ops[1]);
  }
  cJSON_AddNumberToObject(jdec, "wait_seconds", s->loop_wait_s - wait0);
  /* Each batch as it arrived: tokens and milliseconds since the previous. */
  cJSON *jb = cJSON_AddArrayToObject(jdec, "batches");
  for (int i = 0; jb && i < n_batches; i++) {
    cJSON *e = cJSON_CreateArray();
    cJSON_AddItemToArray(e, cJSON_CreateNumber(batch_n[i]));
    cJSON_AddItemToArray(e, cJSON_CreateNumber(1e3 * batch_s[i]));
    cJSON_AddItemToArray(jb, e);
  }
  if (is_gpu && n_decode) {
    cJSON_AddNumberToObject(jdec, "dispatches_per_token", (double)(g2.dispatches - g1.dispatches) / n_decode);
    cJSON_AddNumberToObject(jdec, "submits_per_token", (double)(g2.submits - g1.submits) / n_decode);
    /* Decode steps the persistent kernel ran (WISP_WEBGPU_PERSIST=1): says
     * which decode path these numbers are of. */
    cJSON_AddNumberToObject(jdec, "persistent_steps", (double)(g2.persistent_steps - g1.persistent_steps));
    /* Bind groups made while decoding (cache misses): recording cost that a
     * steady state should not have. */
    cJSON_AddNumberToObject(jdec, "bind_groups_created", (double)(g2.bind_groups - g1.bind_groups));
    /* KV caches grown in the timed decode, and persistent arenas remade to
     * follow them: 0 where the warm-up reserved the request's length */
    cJSON_AddNumberToObject(jdec, "kv_grows", (double)(g2.kv_grows - g1.kv_grows));
    cJSON_AddNumberToObject(jdec, "persist_arena_grows", (double)(g2.persist_arena_grows - g1.persist_arena_grows));
    /* one-token attentions by attn_decode_long.wgsl (tuning attnLong): which
     * decode attention these numbers are of */
    cJSON_AddNumberToObject(jdec, "attn_long", (double)(g2.attn_long - g1.attn_long));
    cJSON_AddNumberToObject(jp, "dispatches", (double)(g1.dispatches - g0.dispatches));
    cJSON_AddNumberToObject(jp, "submits", (double)(g1.submits - g0.submits));
    cJSON_AddNumberToObject(jp, "kv_grows", (double)(g1.kv_grows - g0.kv_grows));
  }
  if (is_gpu && n_prompt) {
    cJSON_AddNumberToObject(jp, "dispatches_per_token", (double)(g1.dispatches - g0.dispatches) / n_prompt);
    cJSON_AddNumberToObject(jp, "submits_per_token", (double)(g1.submits - g0.submits) / n_prompt);
  }
  if (n_prompt) {
    /* The prompt is evaluated in chunks of s->chunk tokens, each reading
     * every weight once: bytes per token are the weights over the chunk. */
    const int chunks = (n_prompt + s->chunk - 1) / s->chunk;
    cJSON_AddNumberToObject(jp, "chunk_tokens", s->chunk);
    cJSON_AddNumberToObject(jp, "weight_bytes_per_token", (double)wbytes * chunks / n_prompt);
    cJSON_AddNumberToObject(jp, "achieved_GB_per_s", (double)wbytes * chunks / prefill_s / 1e9);
  }
  if (is_gpu) { /* every pipeline compiled in this run, warm-up included */
    cJSON *jc = cJSON_AddObjectToObject(r, "compile");
    cJSON_AddNumberToObject(jc, "pipelines", (double)g2.pipelines);
    cJSON_AddNumberToObject(jc, "seconds", g2.compile_seconds);
    cJSON_AddNumberToObject(jc, "seconds_in_timed_phases", g2.compile_seconds - g0.compile_seconds);
    /* 0 where the warm-up covered every path the timed run takes */
    cJSON_AddNumberToObject(jc, "pipelines_in_timed_phases", (double)(g2.pipelines - g0.pipelines));
  }
  cJSON_AddStringToObject(r, "output_fingerprint", fp);
  time_t now = time(NULL);
  char stamp[32];
  strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
  cJSON_AddStringToObject(r, "timestamp", stamp);

  char path[PATH_MAX + 200] = "";
  const char *root = wisp_receipt_root();
  if (out_path) snprintf(path, sizeof path, "%s", out_path);
  else if (root) {
    /* ROOT/bench/results, each a real directory: a symbolic link there is
     * refused rather than followed to wherever it points. */
    char dir[PATH_MAX + 32];
    snprintf(dir, sizeof dir, "%s/bench", root);
    if (receipt_dir(dir) || (snprintf(dir, sizeof dir, "%s/bench/results", root), receipt_dir(dir))) goto fail;
    char fstamp[32];
    strftime(fstamp, sizeof fstamp, "%Y%m%d-%H%M%S", gmtime(&now));
    const char *base = strrchr(model_dir, '/');
    base = base ? base + 1 : model_dir;
    snprintf(path, sizeof path, "%s/%s-%s-%s.json", dir, fstamp, base, wisp_session_backend_name(s));
  }
  if (path[0]) {
    char *text = cJSON_Print(r);
    if (!text) { wisp_fail(WISP_ENOMEM, "out of memory"); goto fail; }
    wisp_status st = wisp_write_file_atomic(path, text, strlen(text));
    free(text);
    if (st) goto fail;
  } else {
    snprintf(path, sizeof path, "not kept (an installed wisp keeps receipts only with -o FILE or WISP_HOME=DIR)");
  }
  printf("prefill: %d tokens, %.1f tok/s | decode: %d tokens, %.1f tok/s, %.2f ms/token p50, %.2f p95 "
         "(record %.0f%%, wait %.0f%%)\nreceipt: %s\n",
         n_prompt, n_prompt / prefill_s, n_decode, n_decode ? n_decode / decode_total : 0.0,
         1e3 * percentile(step, n_decode, 0.5), 1e3 * percentile(step, n_decode, 0.95),
         decode_total > 0 ? 100 * (s->loop_record_s - rec0) / decode_total : 0.0,
         decode_total > 0 ? 100 * (s->loop_wait_s - wait0) / decode_total : 0.0, path);
  rc = 0;
fail:
  if (rc) cli_error("bench");
  cJSON_Delete(r);
  free(logits);
  free(step);
  free(prompt);
  free(generated);
  free(batch_s);
  free(batch_n);
  wisp_session_free(s);
  wisp_model_close(m);
  return rc;
}
