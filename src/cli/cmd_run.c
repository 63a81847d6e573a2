/* wisp run: generate text, streaming tokens as they are made.
 *   wisp run [-m DIR] -p TEXT [-n N] [--temp T] [--top-k K] [--top-p P]
 *            [--min-p P] [--repeat-penalty R] [--repeat-last-n N] [--seed S]
 *            [-t THREADS] [--backend cpu|webgpu|auto] [-c CTX] [--ids] [--ignore-eos]
 *            generation stops early at a stop token (BPE tokenizers: the eos ids
 *            of generation_config.json / tokenizer_config.json and <|im_end|>)
 *            unless --ignore-eos; --ids adds two lines on stderr after the text,
 *            "prompt ids: ..." and "generated ids: ..." (space-separated).
 *   wisp run [-m DIR] --chat [-sys TEXT] [--think] [-n N per reply] ...
 *            interactive: one user message per stdin line, the reply streams
 *            to stdout; the session keeps its state across turns; /exit or
 *            EOF ends. The template and stop tokens come from the artifact's
 *            tokenizer_config.json / generation_config.json (tokenizer/chat.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util/clock.h"
#include "cli/commands.h"
#include "engine/engine.h"
#include "engine/sampler.h"
#include "tokenizer/chat.h"
#include "tokenizer/tokenizer.h"
#include "util/err.h"

static int parse_num(const char *opt, const char *v, double lo, double hi, double *out) {
  char *end;
  double d = strtod(v, &end);
  if (!*v || *end || d < lo || d > hi) {
    fprintf(stderr, "wisp run: %s needs a number in [%g, %g], got '%s'\n", opt, lo, hi, v);
    return 0;
  }
  *out = d;
  return 1;
}

/* Writes a token's text: BPE through the streaming decoder (never half a
 * character), byte ids >= 256 as "<|id|>". */
static wisp_status emit(const wisp_tokenizer *tok, wisp_stream_decoder *dec, int32_t id) {
  size_t len;
  const char *out;
  if (!wisp_tokenizer_token_bytes(tok, id, &len) && !strcmp(wisp_tokenizer_kind(tok), "byte")) {
    char piece[32];
    len = wisp_tokenizer_piece(tok, id, piece, sizeof piece);
    fwrite(piece, 1, len, stdout);
    return WISP_OK;
  }
  wisp_status st = wisp_stream_push(dec, id, &out, &len);
  if (!st && len) fwrite(out, 1, len, stdout);
  return st;
}

/* Streams tokens as the decode loop hands them over (one call per batch):
 * records and prints each until a stop token, which is not printed. */
typedef struct {
  const wisp_tokenizer *tok;
  wisp_stream_decoder *dec;
  const wisp_chat_info *stops;
  int32_t *ids; /* every printed token */
  int count, stopped, failed;
} run_stream;

static int run_stream_tokens(void *user, const int32_t *ids, int n) {
  run_stream *rs = user;
  for (int i = 0; i < n && !rs->stopped; i++) {
    if (rs->stops->n_stop && wisp_chat_is_stop(rs->stops, ids[i])) {
      rs->stopped = 1;
      break;
    }
    rs->ids[rs->count++] = ids[i];
    if (emit(rs->tok, rs->dec, ids[i])) {
      rs->failed = 1;
      return 1;
    }
  }
  fflush(stdout);
  return rs->stopped;
}

static void flush_stream(wisp_stream_decoder *dec) {
  const char *out;
  size_t len;
  wisp_stream_flush(dec, &out, &len);
  if (len) fwrite(out, 1, len, stdout);
}

static wisp_status check_ids(const int32_t *ids, int n, int vocab) {
  for (int i = 0; i < n; i++)
    if (ids[i] < 0 || ids[i] >= vocab)
      return wisp_fail(WISP_EFORMAT, "the tokenizer gave id %d, outside the model's vocabulary of %d", ids[i], vocab);
  return WISP_OK;
}

/* Interactive chat; returns 0 or 1 (error message set). */
static int chat_loop(wisp_model *m, wisp_session *s, const wisp_tokenizer *tok, wisp_sampler *smp, float *logits,
                     const char *system, int think, int n_predict) {
  const wisp_artifact *a = m->artifact;
  char cfg[4096], gen[4096];
  int has_cfg = wisp_tokenizer_artifact_file(a->dir, a->manifest, "config", cfg, sizeof cfg);
  int has_gen = wisp_tokenizer_artifact_file(a->dir, a->manifest, "generation", gen, sizeof gen);
  wisp_chat_info info;
  if (wisp_chat_load(has_cfg ? cfg : NULL, has_gen ? gen : NULL, tok, &info)) return 1;
  if (info.kind == WISP_CHAT_NONE) {
    wisp_fail(WISP_EUNSUPPORTED, "%s: no chat template wisp knows (needs a BPE tokenizer with a tokenizer_config.json "
              "whose chat_template is LFM2, Qwen or ChatML)", a->dir);
    return 1;
  }
  const int vocab = wisp_model_vocab(m), ctx = wisp_session_context(s);
  fprintf(stderr, "wisp: chat (%s template, %d stop tokens); /exit or end of input to quit\n",
          wisp_chat_template_name(info.kind), info.n_stop);
  char *line = NULL;
  size_t line_cap = 0;
  int rc = 0;
  wisp_stream_decoder dec;
  wisp_stream_init(&dec, tok);
  for (int turn = 0;; turn++) {
    if (isatty(0)) { fprintf(stderr, "> "); fflush(stderr); }
    ssize_t got = getline(&line, &line_cap, stdin);
    if (got < 0) break;
    while (got > 0 && (line[got - 1] == '\n' || line[got - 1] == '\r')) line[--got] = 0;
    if (!strcmp(line, "/exit")) break;
    char *text = wisp_chat_render_turn(info.kind, turn == 0, system, line, think);
    int32_t *ids = NULL;
    int n = 0;
    if (!text) { wisp_fail(WISP_ENOMEM, "out of memory"); rc = 1; break; }
    wisp_status st = wisp_tokenizer_encode_n(tok, text, strlen(text), 0, &ids, &n);
    free(text);
    if (!st) st = check_ids(ids, n, vocab);
    if (!st && wisp_session_position(s) + n + 1 > ctx)
      st = wisp_fail(WISP_EINVAL, "the conversation (%d tokens) no longer fits the context of %d",
                     wisp_session_position(s) + n, ctx);
    for (int i = 0; !st && i < n; i++) wisp_sampler_accept(smp, ids[i]);
    double t0 = wisp_now_s();
    if (!st) st = wisp_session_eval(s, ids, n, logits);
    free(ids);
    if (st) { rc = 1; break; }
    int produced = 0;
    for (; produced < n_predict && wisp_session_position(s) < ctx; produced++) {
      int next = wisp_sampler_sample(smp, logits);
      if (wisp_chat_is_stop(&info, next)) break;
      wisp_sampler_accept(smp, next);
      if ((st = emit(tok, &dec, next))) break;
      fflush(stdout);
      int32_t t = next;
      if ((st = wisp_session_eval(s, &t, 1, logits))) break;
    }
    flush_stream(&dec);
    printf("\n");
    fflush(stdout);
    if (st) { rc = 1; break; }
    double dt = wisp_now_s() - t0;
    fprintf(stderr, "[reply %d: %d prompt tokens, %d reply tokens, %.1f tok/s]\n", turn + 1, n, produced,
            dt > 0 ? (n + produced) / dt : 0.0);
  }
  wisp_stream_free(&dec);
  free(line);
  return rc;
}

int cmd_run(int argc, char **argv) {
  const char *model_dir = NULL, *prompt = "Once upon a time", *backend = "cpu", *profile = NULL, *system = NULL;
  int n_predict = 64, threads = 0, ctx = 0, show_ids = 0, chat = 0, think = 0, ignore_eos = 0;
  wisp_sampler_params sp = wisp_sampler_defaults();
  sp.seed = (uint64_t)time(NULL);
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    double d;
    if (!strcmp(a, "--ids")) { show_ids = 1; continue; }
    if (!strcmp(a, "--chat")) { chat = 1; continue; }
    if (!strcmp(a, "--think")) { think = 1; continue; }
    if (!strcmp(a, "--ignore-eos")) { ignore_eos = 1; continue; }
    if (!v) { fprintf(stderr, "wisp run: unknown option or missing value: '%s'\n", a); return 2; }
    i++;
    if (!strcmp(a, "-m") || !strcmp(a, "--model")) model_dir = v;
    else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) prompt = v;
    else if (!strcmp(a, "--backend")) backend = v;
    else if (!strcmp(a, "--profile")) profile = v;
    else if (!strcmp(a, "-sys") || !strcmp(a, "--system") || !strcmp(a, "--system-prompt")) system = v;
    else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) { if (!parse_num(a, v, 0, 1e9, &d)) return 2; n_predict = (int)d; }
    else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) { if (!parse_num(a, v, 0, 1024, &d)) return 2; threads = (int)d; }
    else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size")) { if (!parse_num(a, v, 0, 1e9, &d)) return 2; ctx = (int)d; }
    else if (!strcmp(a, "--temp")) { if (!parse_num(a, v, 0, 100, &d)) return 2; sp.temperature = (float)d; }
    else if (!strcmp(a, "--top-k")) { if (!parse_num(a, v, 0, 1e9, &d)) return 2; sp.top_k = (int)d; }
    else if (!strcmp(a, "--top-p")) { if (!parse_num(a, v, 0, 1, &d)) return 2; sp.top_p = (float)d; }
    else if (!strcmp(a, "--min-p")) { if (!parse_num(a, v, 0, 1, &d)) return 2; sp.min_p = (float)d; }
    else if (!strcmp(a, "--repeat-penalty")) { if (!parse_num(a, v, 0.01, 100, &d)) return 2; sp.repeat_penalty = (float)d; }
    else if (!strcmp(a, "--repeat-last-n")) { if (!parse_num(a, v, 0, 1e6, &d)) return 2; sp.repeat_last_n = (int)d; }
    else if (!strcmp(a, "--seed") || !strcmp(a, "-s")) { if (!parse_num(a, v, 0, 1.8e19, &d)) return 2; sp.seed = (uint64_t)d; }
    else { fprintf(stderr, "wisp run: unknown option '%s'\n", a); return 2; }
  }
  if (!model_dir && !(model_dir = cli_default_model())) return cli_error("run");

  wisp_model *m = NULL;
  wisp_session *s = NULL;
  wisp_tokenizer *tok = NULL;
  wisp_sampler *smp = NULL;
  int32_t *ids = NULL, *gen_ids = NULL;
  float *logits = NULL;
  int rc = 1, n_ids = 0;
  wisp_chat_info stops = {0};
  if (wisp_model_open(model_dir, &m)) goto fail;
  wisp_session_options so = {.backend = backend, .threads = threads, .max_context = ctx, .profile = profile};
  if (wisp_session_new(m, &so, &s)) goto fail;
  if (wisp_tokenizer_for_artifact(m->artifact->dir, m->artifact->tokenizer, m->artifact->manifest, wisp_model_vocab(m), &tok))
    goto fail;
  if (chat) {
    const int vocab = wisp_model_vocab(m);
    logits = malloc(sizeof(float) * (size_t)vocab);
    smp = wisp_sampler_new(&sp, vocab);
    if (!logits || !smp) { wisp_fail(WISP_ENOMEM, "out of memory"); goto fail; }
    fprintf(stderr, "wisp: %s | backend %s | plan %.12s\n", model_dir, wisp_session_backend_name(s),
            wisp_session_plan_id(s));
    if (chat_loop(m, s, tok, smp, logits, system, think, n_predict)) goto fail;
    rc = 0;
    goto fail;
  }
  if (!ignore_eos && !strcmp(wisp_tokenizer_kind(tok), "bpe")) {
    const wisp_artifact *a = m->artifact;
    char cfg[4096], gen[4096];
    int has_cfg = wisp_tokenizer_artifact_file(a->dir, a->manifest, "config", cfg, sizeof cfg);
    int has_gen = wisp_tokenizer_artifact_file(a->dir, a->manifest, "generation", gen, sizeof gen);
    if (wisp_chat_load(has_cfg ? cfg : NULL, has_gen ? gen : NULL, tok, &stops)) goto fail;
  }
  if (wisp_tokenizer_encode(tok, prompt, &ids, &n_ids)) goto fail;
  if (check_ids(ids, n_ids, wisp_model_vocab(m))) goto fail;
  if (n_ids == 0) { wisp_fail(WISP_EINVAL, "the prompt is empty"); goto fail; }
  const int vocab = wisp_model_vocab(m);
  logits = malloc(sizeof(float) * (size_t)vocab);
  smp = wisp_sampler_new(&sp, vocab);
  gen_ids = malloc(sizeof(int32_t) * (size_t)(n_predict > 0 ? n_predict : 1));
  if (!logits || !smp || !gen_ids) { wisp_fail(WISP_ENOMEM, "out of memory"); goto fail; }
  if (n_ids + n_predict > wisp_session_context(s)) {
    wisp_fail(WISP_EINVAL, "prompt (%d tokens) + %d to generate exceed the context of %d", n_ids, n_predict,
              wisp_session_context(s));
    goto fail;
  }
  fprintf(stderr, "wisp: %s | backend %s | plan %.12s | %d prompt tokens\n", model_dir, wisp_session_backend_name(s),
          wisp_session_plan_id(s), n_ids);
  fwrite(prompt, 1, strlen(prompt), stdout);
  fflush(stdout);
  for (int i = 0; i < n_ids; i++) wisp_sampler_accept(smp, ids[i]);
  double t0 = wisp_now_s();
  if (wisp_session_eval(s, ids, n_ids, logits)) goto fail;
  double t1 = wisp_now_s();
  int generated = 0;
  wisp_stream_decoder dec;
  wisp_stream_init(&dec, tok);
  if (n_predict > 0) {
    /* The decode loop: the first token comes from the prompt's logits (host
     * sampler); the rest are chosen on the device, a batch per submit, with
     * the same sampler (a token is the same whichever side drew it, see
     * src/backend/sampling.h), the repetition penalty included. */
    int next = wisp_sampler_sample(smp, logits);
    run_stream rs = {tok, &dec, &stops, gen_ids, 0, 0, 0};
    if (!run_stream_tokens(&rs, &(int32_t){next}, 1) && n_predict > 1) {
      int32_t *out = malloc(sizeof(int32_t) * (size_t)n_predict);
      if (!out) { wisp_stream_free(&dec); wisp_fail(WISP_ENOMEM, "out of memory"); goto fail; }
      wisp_generate_options go = {.temperature = sp.temperature, .top_k = sp.top_k, .top_p = sp.top_p,
                                  .min_p = sp.min_p, .seed = sp.seed, .stop = stops.stop, .n_stop = stops.n_stop,
                                  .on_tokens = run_stream_tokens, .user = &rs, .repeat_penalty = sp.repeat_penalty,
                                  .repeat_last_n = sp.repeat_last_n, .history = ids, .n_history = n_ids};
      int made = 0;
      wisp_status st = wisp_session_generate(s, next, n_predict - 1, &go, out, &made);
      free(out);
      if (st) { wisp_stream_free(&dec); goto fail; }
    }
    if (rs.failed) { wisp_stream_free(&dec); goto fail; }
    generated = rs.count;
  }
  flush_stream(&dec);
  wisp_stream_free(&dec);
  double t2 = wisp_now_s();
  printf("\n");
  fflush(stdout);
  if (show_ids) {
    fprintf(stderr, "prompt ids:");
    for (int i = 0; i < n_ids; i++) fprintf(stderr, " %d", ids[i]);
    fprintf(stderr, "\ngenerated ids:");
    for (int i = 0; i < generated; i++) fprintf(stderr, " %d", gen_ids[i]);
    fprintf(stderr, "\n");
  }
  /* The last sampled token is not fed back, so decode evaluated generated-1 tokens. */
  int decoded = generated > 1 ? generated - 1 : 0;
  fprintf(stderr, "prompt: %d tokens in %.3f s, %.1f tok/s | decode: %d tokens in %.3f s, %.1f tok/s\n", n_ids,
          t1 - t0, n_ids / (t1 - t0), decoded, t2 - t1, decoded > 0 ? decoded / (t2 - t1) : 0.0);
  rc = 0;
fail:
  if (rc) cli_error("run");
  free(logits);
  free(ids);
  free(gen_ids);
  wisp_sampler_free(smp);
  wisp_tokenizer_free(tok);
  wisp_session_free(s);
  wisp_model_close(m);
  return rc;
}
