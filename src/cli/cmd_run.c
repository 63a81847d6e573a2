/* wisp run: generate text, streaming tokens as they are made.
 *   wisp run [-m DIR] (-p TEXT | -p - | -f FILE) [-n N] [sampling options]
 *            [--profile NAME|FILE] [--registry FILE] (default: the ones built in)
 *            generation stops early at a stop token (BPE tokenizers: the eos ids
 *            of generation_config.json / tokenizer_config.json and <|im_end|>)
 *            unless --ignore-eos; -n -1 generates until then or until the
 *            context ends; --ids adds two lines on stderr after the text,
 *            "prompt ids: ..." and "generated ids: ..." (space-separated).
 *   wisp run [-m DIR] --chat [-sys TEXT] [--think] [-n N per reply] ...
 *            interactive: one user message per stdin line, the reply streams
 *            to stdout; the session keeps its state across turns. A line that
 *            is not UTF-8, or a turn that does not fit the context, is
 *            refused and the session goes on (--context-shift drops the
 *            oldest turns instead). Ctrl-C stops the reply being written;
 *            Ctrl-C at the prompt, Ctrl-D (end of input) or /exit ends.
 *            The template (rendered as transformers renders it,
 *            tokenizer/chat_template.h; --chat-template FILE replaces it) and
 *            the stop tokens come from the artifact's tokenizer_config.json /
 *            generation_config.json (tokenizer/chat.h).
 *            -sys without --chat is an error: a system message is part of a chat. */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <utf8proc.h>

#include "cli/commands.h"
#include "cli/opts.h"
#include "engine/engine.h"
#include "engine/sampler.h"
#include "tokenizer/chat.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"
#include "util/clock.h"
#include "util/err.h"

/* A model whose weights are not finite gives NaN logits; sampling them
 * would print the same token forever. */
static wisp_status check_logits(const float *logits, int vocab, int pos) {
  for (int i = 0; i < vocab; i++)
    if (!isfinite(logits[i]))
      return wisp_fail(WISP_EFORMAT, "the model produced a non-finite logit (id %d at position %d): generation "
                       "stopped (are the weights finite? wisp verify checks their digests)", i, pos);
  return WISP_OK;
}

/* Evaluates tokens and checks the logits they give. */
static wisp_status eval_checked(wisp_session *s, const int32_t *ids, int n, float *logits, int vocab) {
  wisp_status st = wisp_session_eval(s, ids, n, logits);
  return st ? st : check_logits(logits, vocab, wisp_session_position(s));
}

/* Kernel compilation (WebGPU, first use of each pipeline) is announced and
 * kept out of the tok/s figures. */
typedef struct {
  int gpu;
  wisp_backend_stats at;
} compile_watch;

/* The distinct WGSL files of a list of ops, added to seen[0..*n). */
static void add_kernels(const wisp_plan_op *ops, int count, const char **seen, int *n, int cap) {
  for (int k = 0; k < count; k++) {
    int dup = !ops[k].wgsl[0];
    for (int j = 0; j < *n && !dup; j++) dup = !strcmp(seen[j], ops[k].wgsl);
    if (!dup && *n < cap) seen[(*n)++] = ops[k].wgsl;
  }
}

/* The distinct WGSL files the plan's ops name: the kernels a first run
 * compiles (a few more pipelines may follow: variants by constants). */
static int plan_kernels(const wisp_plan *p) {
  const char *seen[512];
  int n = 0;
  for (int ph = 0; ph < 2; ph++) {
    const wisp_plan_phase *f = &p->phases[ph];
    add_kernels(f->prologue, f->n_prologue, seen, &n, 512);
    for (int g = 0; g < f->n_groups; g++) add_kernels(f->groups[g].ops, f->groups[g].n_ops, seen, &n, 512);
    add_kernels(f->epilogue, f->n_epilogue, seen, &n, 512);
  }
  return n;
}

static void compile_begin(const wisp_session *s, compile_watch *w) {
  w->gpu = wisp_session_device_stats(s, &w->at);
  if (w->gpu && w->at.pipelines == 0) {
    fprintf(stderr, "wisp: compiling %d kernels (first run)...\n", plan_kernels(wisp_session_plan(s)));
  }
}

/* Seconds spent compiling since compile_begin (0 on the CPU). */
static double compile_end(const wisp_session *s, const compile_watch *w, int announce) {
  wisp_backend_stats now;
  if (!w->gpu || !wisp_session_device_stats(s, &now)) return 0;
  double dt = now.compile_seconds - w->at.compile_seconds;
  if (announce && now.pipelines > w->at.pipelines)
    fprintf(stderr, "wisp: compiled %llu kernels in %.1f s (not counted in tok/s)\n",
            (unsigned long long)(now.pipelines - w->at.pipelines), dt);
  return dt;
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

/* Ctrl-C in chat: the first stops the reply being written, one at the
 * prompt ends the session. No SA_RESTART, so a blocked read or write
 * returns at once. */
static volatile sig_atomic_t g_interrupted;
static void on_sigint(int sig) {
  (void)sig;
  g_interrupted = 1;
}

/* Lines of standard input, read with read(2) rather than stdio so that
 * waiting for one can be interrupted without a race: SIGINT stays blocked
 * except inside ppoll, which unblocks it and waits in one step, so a Ctrl-C
 * at the prompt always ends the wait. */
typedef struct {
  char *buf, *line; /* what was read; the line handed out */
  size_t start, len, cap;
  size_t max;   /* the longest line kept (cli_prompt_limit of the context) */
  int eof;
  int skipping; /* inside a line past max: dropped up to its newline */
} line_reader;

/* 1: *line (NUL-terminated, newline kept) of *n bytes; 0: end of input;
 * -1: Ctrl-C while waiting (or just before); 2: a line longer than r->max
 * was read and dropped (in at most max + 8 KiB of memory). */
static int read_line(line_reader *r, char **line, size_t *n) {
  sigset_t block, orig;
  sigemptyset(&block);
  sigaddset(&block, SIGINT);
  sigprocmask(SIG_BLOCK, &block, &orig);
  int rc = 0;
  for (;;) {
    const char *nl = r->len > r->start ? memchr(r->buf + r->start, '\n', r->len - r->start) : NULL;
    if (r->skipping || (!nl && r->len - r->start > r->max)) { /* too long: drop it up to its newline */
      r->skipping = 1;
      if (nl || r->eof) {
        r->start = nl ? (size_t)(nl - r->buf) + 1 : r->len;
        r->skipping = 0;
        rc = 2;
        break;
      }
      r->start = r->len = 0;
    }
    if (nl || (r->eof && r->len > r->start)) {
      size_t k = (nl ? (size_t)(nl - r->buf) + 1 : r->len) - r->start;
      char *l = realloc(r->line, k + 1);
      if (!l) break;
      memcpy(l, r->buf + r->start, k);
      l[k] = 0;
      r->line = l;
      r->start += k;
      *line = l;
      *n = k;
      rc = 1;
      break;
    }
    if (r->eof) break;
    if (g_interrupted) { rc = -1; break; }
    struct pollfd p = {.fd = 0, .events = POLLIN};
    if (ppoll(&p, 1, NULL, &orig) < 0) {
      if (errno == EINTR) continue; /* the loop looks at g_interrupted */
      break;
    }
    if (r->start > 0) { /* drop what was handed out */
      memmove(r->buf, r->buf + r->start, r->len - r->start);
      r->len -= r->start;
      r->start = 0;
    }
    if (r->cap - r->len < 4096) {
      size_t cap = r->cap ? r->cap * 2 : 8192;
      char *more = realloc(r->buf, cap);
      if (!more) break;
      r->buf = more;
      r->cap = cap;
    }
    ssize_t got = read(0, r->buf + r->len, r->cap - r->len);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) r->eof = 1;
    else r->len += (size_t)got;
  }
  sigprocmask(SIG_SETMASK, &orig, NULL);
  return rc;
}

/* One user/assistant exchange kept for --context-shift. */
typedef struct {
  char *user, *reply;
  size_t reply_len, reply_cap;
} chat_turn;

static int reply_add(chat_turn *t, const char *bytes, size_t n) {
  if (t->reply_len + n + 1 > t->reply_cap) {
    size_t cap = t->reply_cap ? t->reply_cap * 2 : 256;
    while (cap < t->reply_len + n + 1) cap *= 2;
    char *p = realloc(t->reply, cap);
    if (!p) return 0;
    t->reply = p;
    t->reply_cap = cap;
  }
  memcpy(t->reply + t->reply_len, bytes, n);
  t->reply_len += n;
  t->reply[t->reply_len] = 0;
  return 1;
}

typedef struct {
  wisp_session *s;
  const wisp_tokenizer *tok;
  wisp_sampler *smp;
  float *logits;
  wisp_chat_info info;
  wisp_chat_tmpl *tmpl; /* the model's chat template, or --chat-template's */
  const char *system;
  int think, n_predict, context_shift, vocab, ctx;
  chat_turn *turns;
  int n_turns, first_kept; /* turns[first_kept..n_turns) are in the session */
} chat_state;

/* The tokens of the conversation from turn `from` on plus the new line,
 * rendered whole (a fresh session); or, from == -1, the new line as the
 * next turn of the session it continues. */
static wisp_status render_ids(chat_state *c, int from, const char *line, int32_t **ids, int *n) {
  char *text = NULL;
  wisp_status st;
  if (from < 0) {
    st = wisp_chat_tmpl_turn(c->tmpl, c->n_turns == 0, c->system, line, c->think, &text);
  } else {
    int nm = 0;
    wisp_chat_message *m = malloc(sizeof *m * (size_t)(2 * (c->n_turns - from) + 2));
    if (!m) return wisp_fail(WISP_ENOMEM, "out of memory");
    if (c->system) m[nm++] = (wisp_chat_message){"system", c->system};
    for (int i = from; i < c->n_turns; i++) {
      m[nm++] = (wisp_chat_message){"user", c->turns[i].user};
      m[nm++] = (wisp_chat_message){"assistant", c->turns[i].reply ? c->turns[i].reply : ""};
    }
    m[nm++] = (wisp_chat_message){"user", line};
    st = wisp_chat_tmpl_messages(c->tmpl, m, nm, 1, c->think, &text);
    free(m);
  }
  if (st) return st;
  st = wisp_tokenizer_encode_n(c->tok, text, strlen(text), 0, ids, n);
  free(text);
  return st;
}

/* Puts the new line's tokens into the session: as the next turn when they
 * fit; else, with --context-shift, the conversation again without its
 * oldest turns. WISP_EINVAL (message set) when the turn cannot fit: the
 * caller refuses the turn and the session is unchanged. */
static wisp_status feed_turn(chat_state *c, const char *line, int *n_prompt) {
  int32_t *ids = NULL;
  int n = 0;
  wisp_status st = render_ids(c, -1, line, &ids, &n);
  if (st) return st;
  int pos = wisp_session_position(c->s);
  if (pos + n + 1 <= c->ctx) {
    if (!(st = check_ids(ids, n, c->vocab))) st = eval_checked(c->s, ids, n, c->logits, c->vocab);
    for (int i = 0; !st && i < n; i++) wisp_sampler_accept(c->smp, ids[i]);
    free(ids);
    *n_prompt = n;
    return st;
  }
  free(ids);
  if (!c->context_shift || c->n_turns == 0)
    return wisp_fail(WISP_EINVAL, "this turn (%d tokens) does not fit the context: %d of %d tokens are used%s", n, pos,
                     c->ctx, c->context_shift ? "" : " (--context-shift drops the oldest turns instead)");
  /* Drop the oldest turns until the rest and the new line fit. */
  for (int from = c->first_kept + 1; from <= c->n_turns; from++) {
    if ((st = render_ids(c, from, line, &ids, &n))) return st;
    if (n + 1 > c->ctx) { free(ids); continue; }
    wisp_session_reset(c->s);
    if (!(st = check_ids(ids, n, c->vocab))) st = eval_checked(c->s, ids, n, c->logits, c->vocab);
    for (int i = 0; !st && i < n; i++) wisp_sampler_accept(c->smp, ids[i]);
    free(ids);
    if (st) return st;
    fprintf(stderr, "[context full: dropped the oldest %d turn%s]\n", from - c->first_kept, from - c->first_kept == 1 ? "" : "s");
    c->first_kept = from;
    *n_prompt = n;
    return WISP_OK;
  }
  return wisp_fail(WISP_EINVAL, "this turn alone does not fit the context of %d tokens", c->ctx);
}

/* Interactive chat; returns 0 or 1 (error message set). */
static int chat_loop(wisp_model *m, wisp_session *s, const wisp_tokenizer *tok, wisp_sampler *smp, float *logits,
                     const char *system, const char *template_file, int think, int n_predict, int context_shift,
                     int ignore_eos) {
  const wisp_artifact *a = m->artifact;
  char cfg[4096], gen[4096];
  int has_cfg = wisp_tokenizer_artifact_file(a->dir, a->manifest, "config", cfg, sizeof cfg);
  int has_gen = wisp_tokenizer_artifact_file(a->dir, a->manifest, "generation", gen, sizeof gen);
  chat_state c = {.s = s, .tok = tok, .smp = smp, .logits = logits, .system = system, .think = think,
                  .n_predict = n_predict, .context_shift = context_shift, .vocab = wisp_model_vocab(m),
                  .ctx = wisp_session_context(s)};
  if (wisp_chat_load(has_cfg ? cfg : NULL, has_gen ? gen : NULL, tok, &c.info)) return 1;
  if (wisp_chat_tmpl_load(has_cfg ? cfg : NULL, template_file, &c.tmpl)) {
    if (!has_cfg && !template_file) wisp_error_prefix("%s", a->dir);
    return 1;
  }
  /* the model's own template is rendered whatever its family; a known one is named */
  char from[700];
  if (template_file) snprintf(from, sizeof from, "%s template", template_file);
  else snprintf(from, sizeof from, "the model's %s%stemplate", c.info.kind ? wisp_chat_template_name(c.info.kind) : "",
                c.info.kind ? " " : "");
  fprintf(stderr, "wisp: chat (%s, %d stop tokens); Ctrl-C stops a reply; /exit, Ctrl-D or Ctrl-C at the prompt quits\n",
          from, c.info.n_stop);
  struct sigaction sa, old_sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old_sa);
  line_reader lr = {.max = cli_prompt_limit(wisp_session_context(s))};
  char *line = NULL; /* lr.line */
  int rc = 0;
  wisp_stream_decoder dec;
  wisp_stream_init(&dec, tok);
  for (int turn = 0;;) {
    if (isatty(0)) { fprintf(stderr, "> "); fflush(stderr); }
    size_t got = 0;
    const int got_line = read_line(&lr, &line, &got);
    if (got_line <= 0) break; /* end of input, or Ctrl-C at the prompt */
    if (got_line == 2) {
      fprintf(stderr, "[turn refused: the line is longer than %zu bytes, the limit for a context of %d tokens; "
              "the conversation goes on]\n", lr.max, wisp_session_context(s));
      continue;
    }
    while (got > 0 && (line[got - 1] == '\n' || line[got - 1] == '\r')) line[--got] = 0;
    if (!strcmp(line, "/exit")) break;
    if (got != strlen(line) || utf8proc_decompose((const utf8proc_uint8_t *)line, got, NULL, 0, 0) < 0) {
      fprintf(stderr, "[turn refused: the line is not valid UTF-8 text; the conversation goes on]\n");
      continue;
    }
    chat_turn *more = realloc(c.turns, sizeof *c.turns * (size_t)(c.n_turns + 1));
    if (!more) { wisp_fail(WISP_ENOMEM, "out of memory"); rc = 1; break; }
    c.turns = more;
    int n_prompt = 0;
    double t0 = wisp_now_s();
    wisp_status st = feed_turn(&c, line, &n_prompt);
    if (st == WISP_EINVAL) {
      fprintf(stderr, "[turn refused: %s; the conversation goes on]\n", wisp_last_error());
      continue;
    }
    if (st) { rc = 1; break; }
    chat_turn *t = &c.turns[c.n_turns++];
    memset(t, 0, sizeof *t);
    if (!(t->user = strdup(line))) { wisp_fail(WISP_ENOMEM, "out of memory"); rc = 1; break; }
    int produced = 0, interrupted = 0, full = 0;
    for (; n_predict < 0 || produced < n_predict; produced++) {
      if (g_interrupted) { interrupted = 1; break; }
      if (wisp_session_position(s) >= c.ctx) { full = 1; break; }
      int next = wisp_sampler_sample(smp, logits);
      if (!ignore_eos && wisp_chat_is_stop(&c.info, next)) break;
      wisp_sampler_accept(smp, next);
      const char *out;
      size_t len;
      if ((st = wisp_stream_push(&dec, next, &out, &len))) break;
      if (len) {
        fwrite(out, 1, len, stdout);
        if (!reply_add(t, out, len)) { st = wisp_fail(WISP_ENOMEM, "out of memory"); break; }
      }
      fflush(stdout);
      int32_t id = next;
      if ((st = eval_checked(s, &id, 1, logits, c.vocab))) break;
    }
    if (g_interrupted) interrupted = 1;
    /* That Ctrl-C stopped this reply: forget it now, before anything is
     * printed, so that one coming after this point (the caller saw the
     * reply end and pressed Ctrl-C again) is kept and quits at the prompt. */
    if (interrupted) g_interrupted = 0;
    {
      const char *out;
      size_t len;
      wisp_stream_flush(&dec, &out, &len);
      if (len) { fwrite(out, 1, len, stdout); reply_add(t, out, len); }
    }
    printf("\n");
    fflush(stdout);
    clearerr(stdout); /* a write cut short by Ctrl-C */
    if (st) { rc = 1; break; }
    double dt = wisp_now_s() - t0;
    turn++;
    fprintf(stderr, "[reply %d: %d prompt tokens, %d reply tokens, %.1f tok/s%s]\n", turn, n_prompt, produced,
            dt > 0 ? (n_prompt + produced) / dt : 0.0,
            interrupted ? "; interrupted" : full ? "; the context is full" : "");
  }
  sigaction(SIGINT, &old_sa, NULL);
  wisp_stream_free(&dec);
  free(lr.buf);
  free(lr.line);
  for (int i = 0; i < c.n_turns; i++) { free(c.turns[i].user); free(c.turns[i].reply); }
  free(c.turns);
  wisp_chat_tmpl_free(c.tmpl);
  return rc;
}

/* A seed for --seed -1: the clock and the process id, mixed. */
static int64_t random_seed(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t x = (uint64_t)ts.tv_sec * 1000000007ull ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32);
  x ^= x >> 31; x *= 0x9E3779B97F4A7C15ull; x ^= x >> 29;
  return (int64_t)(x >> 1);
}

int cmd_run(int argc, char **argv) {
  const char *model_dir = NULL, *prompt = NULL, *prompt_file = NULL, *backend = CLI_DEFAULT_BACKEND, *profile = NULL,
             *system = NULL, *chat_template = NULL, *tuning = NULL, *registry = NULL;
  int n_predict = 64, threads = 0, ctx = 0, show_ids = 0, chat = 0, think = 0, ignore_eos = 0, shift = 0;
  int top_k = -2, repeat_last_n = -2;
  double temp = -1, top_p = -1, min_p = -1, repeat_penalty = -1;
  int64_t seed = -1;
  const cli_opt opts[] = {
      {"-m|--model", CLI_STR, &model_dir, 0, 0, "DIR", "the model artifact (default: models/default)"},
      {"-p|--prompt", CLI_STR, &prompt, 0, 0, "TEXT", "the prompt; \"-\" reads it from standard input (default: \"Once upon a time\")"},
      {"-f|--file", CLI_STR, &prompt_file, 0, 0, "FILE", "read the prompt from FILE"},
      {"-n|--n-predict", CLI_INT, &n_predict, -1, 1e9, "N", "tokens to generate (default 64; -1: until EOS or the end of the context)"},
      {"-c|--ctx-size", CLI_INT, &ctx, 0, 1e9, "N", "context length, at most the model's (default 0: the model's, at most 4096)"},
      {"-t|--threads", CLI_INT, &threads, 0, 1024, "N", "CPU threads (default 0: one per physical core available)"},
      {"--backend", CLI_STR, &backend, 0, 0, "B", "auto (default: a GPU adapter, else the CPU), cpu or webgpu"},
      {"--profile", CLI_STR, &profile, 0, 0, "P", "runtime profile: a built-in NAME (default: throughput, the fast one; exact: the reference path) or FILE.json"},
      {"--registry", CLI_STR, &registry, 0, 0, "FILE", "kernel registry file (default: the built-in one)"},
      {"--tuning", CLI_STR, &tuning, 0, 0, "K=V,...", "backend tuning keys (docs/configuration.md)"},
      {"--temp", CLI_NUM, &temp, 0, 100, "T", "temperature (0: greedy)"},
      {"--top-k", CLI_INT, &top_k, 0, 1e9, "K", "keep the K likeliest tokens (0: off)"},
      {"--top-p", CLI_NUM, &top_p, 0, 1, "P", "nucleus sampling (0 or 1: off)"},
      {"--min-p", CLI_NUM, &min_p, 0, 1, "P", "drop tokens below P times the likeliest (0: off)"},
      {"--repeat-penalty", CLI_NUM, &repeat_penalty, 0.01, 100, "R", "penalty for recent tokens (1: off)"},
      {"--repeat-last-n", CLI_INT, &repeat_last_n, -1, 1e6, "N",
       "how many recent tokens the penalty looks at (default 64; 0: none; -1: the whole context)"},
      {"-s|--seed", CLI_I64, &seed, -1, 9.2e18, "S", "sampling seed (default -1: random, printed on stderr when --temp > 0)"},
      {"--ignore-eos", CLI_FLAG, &ignore_eos, 0, 0, NULL, "do not stop at the model's end-of-text tokens (chat too)"},
      {"--ids", CLI_FLAG, &show_ids, 0, 0, NULL, "print the prompt and generated ids on stderr"},
      {"--chat|--conversation|-cnv|-i|--interactive", CLI_FLAG, &chat, 0, 0, NULL,
       "interactive chat: one message per line of standard input"},
      {"-sys|--system|--system-prompt", CLI_STR, &system, 0, 0, "TEXT", "the chat's system message (needs --chat)"},
      {"--think", CLI_FLAG, &think, 0, 0, NULL, "chat: Qwen thinking mode"},
      {"--chat-template|--chat-template-file", CLI_STR, &chat_template, 0, 0, "FILE",
       "chat: render with this Jinja chat template (or tokenizer_config.json) instead of the model's"},
      {"--context-shift", CLI_FLAG, &shift, 0, 0, NULL,
       "chat: when a turn does not fit, drop the oldest turns (default: refuse the turn)"},
  };
  const cli_spec spec = {"run", "[-m DIR] (-p TEXT | -p - | -f FILE) [-n N] [options] | --chat [-sys TEXT] [options]",
                         "Generates text from a prompt, streaming it to stdout, or chats (--chat).\n"
                         "  A prompt from -f FILE or -p - and a chat line are at most 32 bytes per position of the\n"
                         "  context plus 4 KiB (1 MiB for a context of 32768); longer input is refused with one line.",
                         opts, (int)(sizeof opts / sizeof opts[0]), NULL, 0, NULL};
  int pr = cli_parse(&spec, argc, argv);
  if (pr != CLI_CONTINUE) return pr;
  cli_warn_threads("run", (long)threads);
  if (chat_template && !chat) {
    fprintf(stderr, "wisp run: --chat-template needs --chat\n");
    return 2;
  }
  if (system && !chat) {
    fprintf(stderr, "wisp run: -sys/--system needs --chat (a system message belongs to a chat)\n");
    return 2;
  }
  if ((prompt && prompt_file) || (chat && (prompt || prompt_file))) {
    fprintf(stderr, "wisp run: give one prompt: -p TEXT, -p - or -f FILE (and none with --chat)\n");
    return 2;
  }
  wisp_sampler_params sp = wisp_sampler_defaults();
  if (temp >= 0) sp.temperature = (float)temp;
  if (top_k >= 0) sp.top_k = top_k;
  if (top_p >= 0) sp.top_p = (float)top_p;
  if (min_p >= 0) sp.min_p = (float)min_p;
  if (repeat_penalty >= 0) sp.repeat_penalty = (float)repeat_penalty;
  if (repeat_last_n >= 0) sp.repeat_last_n = repeat_last_n;
  /* -1: a random seed, printed in the banner when sampling uses it */
  const int random = seed < 0;
  if (random) seed = random_seed();
  sp.seed = (uint64_t)seed;
  char seed_note[48] = "";
  if (random && sp.temperature > 0) snprintf(seed_note, sizeof seed_note, " | seed %lld", (long long)seed);
  char *prompt_text = NULL;
  const int prompt_from_file = prompt_file || (prompt && !strcmp(prompt, "-"));
  if (!prompt) prompt = "Once upon a time";
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
  const int model_max = m->arch->max_positions(m->weights);
  if (ctx > model_max) {
    wisp_fail(WISP_EINVAL, "-c %d exceeds the model's maximum context of %d tokens", ctx, model_max);
    goto fail;
  }
  wisp_session_options so = {.backend = backend, .threads = threads, .max_context = ctx, .profile = cli_profile_or_fast(profile),
                             .tuning = tuning, .registry = registry};
  if (wisp_session_new(m, &so, &s)) goto fail;
  if (repeat_last_n == -1) sp.repeat_last_n = wisp_session_context(s); /* llama.cpp's -1: the whole context */
  if (wisp_tokenizer_for_artifact(m->artifact->dir, m->artifact->tokenizer, m->artifact->manifest, wisp_model_vocab(m), &tok))
    goto fail;
  const int vocab = wisp_model_vocab(m);
  compile_watch cw;
  if (chat) {
    logits = malloc(sizeof(float) * (size_t)vocab);
    smp = wisp_sampler_new(&sp, vocab);
    if (!logits || !smp) { wisp_fail(WISP_ENOMEM, "out of memory"); goto fail; }
    fprintf(stderr, "wisp: %s | backend %s | plan %.12s%s\n", model_dir, wisp_session_backend_name(s),
            wisp_session_plan_id(s), seed_note);
    compile_begin(s, &cw);
    if (chat_loop(m, s, tok, smp, logits, system, chat_template, think, n_predict, shift, ignore_eos)) goto fail;
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
  /* A prompt from a file or standard input is read once the context is
   * known: at most its cli_prompt_limit bytes. */
  if (prompt_from_file) {
    if (cli_read_text(prompt_file ? prompt_file : "-", cli_prompt_limit(wisp_session_context(s)), &prompt_text, NULL))
      goto fail;
    prompt = prompt_text;
  }
  if (wisp_tokenizer_encode(tok, prompt, &ids, &n_ids)) goto fail;
  if (check_ids(ids, n_ids, vocab)) goto fail;
  if (n_ids == 0) { wisp_fail(WISP_EINVAL, "the prompt is empty"); goto fail; }
  const int context = wisp_session_context(s);
  if (n_predict < 0) n_predict = context - n_ids; /* -1: until EOS or the end of the context */
  if (n_ids + n_predict > context || n_predict < 0) {
    wisp_fail(WISP_EINVAL, "prompt (%d tokens) + %d to generate exceed the context of %d", n_ids,
              n_predict < 0 ? 0 : n_predict, context);
    goto fail;
  }
  logits = malloc(sizeof(float) * (size_t)vocab);
  smp = wisp_sampler_new(&sp, vocab);
  gen_ids = malloc(sizeof(int32_t) * (size_t)(n_predict > 0 ? n_predict : 1));
  if (!logits || !smp || !gen_ids) { wisp_fail(WISP_ENOMEM, "out of memory"); goto fail; }
  fprintf(stderr, "wisp: %s | backend %s | plan %.12s | %d prompt tokens%s\n", model_dir,
          wisp_session_backend_name(s), wisp_session_plan_id(s), n_ids, seed_note);
  fwrite(prompt, 1, strlen(prompt), stdout);
  fflush(stdout);
  for (int i = 0; i < n_ids; i++) wisp_sampler_accept(smp, ids[i]);
  compile_begin(s, &cw);
  double t0 = wisp_now_s();
  if (eval_checked(s, ids, n_ids, logits, vocab)) goto fail;
  double t1 = wisp_now_s();
  const double prompt_compile = compile_end(s, &cw, 0);
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
  const double decode_compile = compile_end(s, &cw, 1) - prompt_compile;
  if (show_ids) {
    fprintf(stderr, "prompt ids:");
    for (int i = 0; i < n_ids; i++) fprintf(stderr, " %d", ids[i]);
    fprintf(stderr, "\ngenerated ids:");
    for (int i = 0; i < generated; i++) fprintf(stderr, " %d", gen_ids[i]);
    fprintf(stderr, "\n");
  }
  /* The last sampled token is not fed back, so decode evaluated generated-1
   * tokens; kernel compilation is not part of either phase's time. */
  int decoded = generated > 1 ? generated - 1 : 0;
  double pt = t1 - t0 - prompt_compile, dtime = t2 - t1 - decode_compile;
  fprintf(stderr, "prompt: %d tokens in %.3f s, %.1f tok/s | decode: %d tokens in %.3f s, %.1f tok/s\n", n_ids, pt,
          pt > 0 ? n_ids / pt : 0.0, decoded, dtime, decoded > 0 && dtime > 0 ? decoded / dtime : 0.0);
  rc = 0;
fail:
  if (rc) cli_error("run");
  free(prompt_text);
  free(logits);
  free(ids);
  free(gen_ids);
  wisp_sampler_free(smp);
  wisp_tokenizer_free(tok);
  wisp_session_free(s);
  wisp_model_close(m);
  return rc;
}
