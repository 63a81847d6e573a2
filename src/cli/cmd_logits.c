/* `wisp logits`: final-position logits for parity checks against a reference.
 *
 *   wisp logits [-m DIR] --prompts FILE -o OUT [--greedy N [--decode-loop]] [--backend cpu] [--threads T] [--profile P]
 *   wisp logits [-m DIR] --tokens 1,2,3 [-o OUT] [--greedy N]
 *
 * FILE is {"prompts": [[ids...], ...], "greedy_prompt": k}. Each prompt is
 * evaluated from a reset session and the logits of its last position are
 * recorded; then prompt k (default 0) is continued greedily for N tokens
 * (argmax, ties to the lowest id; with --decode-loop the tokens after the
 * first come from the decode loop, wisp_session_generate, one eval a token
 * otherwise). OUT (stdout when absent) gets
 * {"logits": [[...], ...], "greedy": [...]} with 9 significant digits, the
 * same format tests/parity/hf_reference.py writes; with --decode-loop also
 * "persistent_steps", how many of the loop's steps the backend's persistent
 * decode ran (0: op by op). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "cli/commands.h"
#include "engine/engine.h"
#include "util/err.h"
#include "util/file.h"
#include "cli/opts.h"
#include "wisp.h"

typedef struct {
  int32_t *ids;
  int n;
} prompt;

typedef struct {
  char *p;
  size_t len, cap;
  int oom;
} sbuf;

static void sb_add(sbuf *b, const char *s, size_t n) {
  if (b->oom) return;
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + n + 1) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) { b->oom = 1; return; }
    b->p = p;
    b->cap = cap;
  }
  memcpy(b->p + b->len, s, n);
  b->len += n;
  b->p[b->len] = 0;
}

static void sb_str(sbuf *b, const char *s) { sb_add(b, s, strlen(s)); }

static void sb_float(sbuf *b, float v) {
  char t[48];
  if (isfinite(v)) snprintf(t, sizeof t, "%.9g", (double)v);
  else snprintf(t, sizeof t, "null"); /* JSON has no NaN/inf; a comparison must fail on it */
  sb_str(b, t);
}

static int argmax(const float *x, int n) {
  int best = 0;
  for (int i = 1; i < n; i++)
    if (x[i] > x[best] || (isnan(x[best]) && !isnan(x[i]))) best = i;
  return best;
}

static wisp_status parse_ids(const cJSON *arr, const char *what, prompt *p) {
  if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) == 0)
    return wisp_fail(WISP_EFORMAT, "%s must be a non-empty array of token ids", what);
  p->n = cJSON_GetArraySize(arr);
  p->ids = malloc(sizeof(int32_t) * (size_t)p->n);
  if (!p->ids) return wisp_fail(WISP_ENOMEM, "out of memory");
  int i = 0;
  const cJSON *e;
  cJSON_ArrayForEach(e, arr) {
    if (!cJSON_IsNumber(e) || e->valuedouble != floor(e->valuedouble) || e->valuedouble < 0 ||
        e->valuedouble > 2147483647.0)
      return wisp_fail(WISP_EFORMAT, "%s[%d] must be a non-negative integer token id", what, i);
    p->ids[i++] = (int32_t)e->valuedouble;
  }
  return WISP_OK;
}

static wisp_status load_prompts(const char *path, prompt **out, int *n_out, int *greedy_prompt) {
  char *text = NULL;
  wisp_status st = wisp_read_file(path, &text, NULL);
  if (st) return st;
  cJSON *root = cJSON_Parse(text);
  free(text);
  const cJSON *arr = cJSON_GetObjectItemCaseSensitive(root, "prompts");
  if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) == 0) {
    cJSON_Delete(root);
    return wisp_fail(WISP_EFORMAT, "%s: needs a non-empty array 'prompts' of token-id arrays", path);
  }
  int n = cJSON_GetArraySize(arr);
  prompt *ps = calloc((size_t)n, sizeof(prompt));
  if (!ps) { cJSON_Delete(root); return wisp_fail(WISP_ENOMEM, "out of memory"); }
  int i = 0;
  const cJSON *e;
  cJSON_ArrayForEach(e, arr) {
    char what[64];
    snprintf(what, sizeof what, "prompts[%d]", i);
    if ((st = parse_ids(e, what, &ps[i++]))) break;
  }
  const cJSON *g = cJSON_GetObjectItemCaseSensitive(root, "greedy_prompt");
  if (!st && g) {
    if (!cJSON_IsNumber(g) || g->valuedouble != floor(g->valuedouble) || g->valuedouble < 0 || g->valuedouble >= n)
      st = wisp_fail(WISP_EFORMAT, "greedy_prompt must be a prompt index below %d", n);
    else *greedy_prompt = (int)g->valuedouble;
  }
  cJSON_Delete(root);
  if (st) {
    wisp_error_prefix("%s", path);
    for (int k = 0; k < n; k++) free(ps[k].ids);
    free(ps);
    return st;
  }
  *out = ps;
  *n_out = n;
  return WISP_OK;
}

static wisp_status parse_token_list(const char *s, const char *what, prompt **out, int *n_out) {
  prompt *p = calloc(1, sizeof *p);
  if (!p) return wisp_fail(WISP_ENOMEM, "out of memory");
  size_t cap = strlen(s) / 2 + 2;
  p->ids = malloc(sizeof(int32_t) * cap);
  if (!p->ids) { free(p); return wisp_fail(WISP_ENOMEM, "out of memory"); }
  const char *c = s;
  while (*c) {
    char *end;
    long v = strtol(c, &end, 10);
    if (end == c || v < 0 || v > 2147483647L || (*end && *end != ',') || (size_t)p->n >= cap) {
      free(p->ids);
      free(p);
      return wisp_fail(WISP_EINVAL, "%s: expected comma-separated non-negative ids, got '%s'", what, s);
    }
    p->ids[p->n++] = (int32_t)v;
    c = *end ? end + 1 : end;
  }
  if (p->n == 0) { free(p->ids); free(p); return wisp_fail(WISP_EINVAL, "%s: no ids", what); }
  *out = p;
  *n_out = 1;
  return WISP_OK;
}

/* --follow: the session stands after the last prompt with its logits in
 * `logits`; before each of the ids (another engine's greedy tokens) it
 * writes the top_k largest logits as [id, logit] and max|logit|, then feeds
 * the id. Where the two engines part, the tops say by how much each one
 * prefers its own token: a near tie, or a disagreement. */
static wisp_status write_follow(wisp_session *s, const prompt *f, float *logits, int vocab, int top_k, sbuf *out) {
  if (top_k > vocab) top_k = vocab;
  int *top = malloc(sizeof(int) * (size_t)top_k);
  if (!top) return wisp_fail(WISP_ENOMEM, "out of memory");
  sb_str(out, ",\n\"follow\": [");
  wisp_status st = WISP_OK;
  for (int t = 0; t < f->n && !st; t++) {
    if (f->ids[t] < 0 || f->ids[t] >= vocab) {
      st = wisp_fail(WISP_EINVAL, "--follow id %d is outside the vocabulary of %d", (int)f->ids[t], vocab);
      break;
    }
    float max_abs = 0;
    int n_top = 0;
    for (int v = 0; v < vocab; v++) { /* insertion into the top (descending; ties to the lower id) */
      if (fabsf(logits[v]) > max_abs) max_abs = fabsf(logits[v]);
      if (n_top == top_k && logits[v] <= logits[top[n_top - 1]]) continue;
      int at = n_top < top_k ? n_top++ : top_k - 1;
      while (at > 0 && logits[top[at - 1]] < logits[v]) { top[at] = top[at - 1]; at--; }
      top[at] = v;
    }
    sb_str(out, t ? ",\n{\"top\": [" : "\n{\"top\": [");
    for (int k = 0; k < n_top; k++) {
      char num[16];
      snprintf(num, sizeof num, "%s[%d, ", k ? ", " : "", top[k]);
      sb_str(out, num);
      sb_float(out, logits[top[k]]);
      sb_str(out, "]");
    }
    sb_str(out, "], \"fed_logit\": ");
    sb_float(out, logits[f->ids[t]]);
    sb_str(out, ", \"max_abs\": ");
    sb_float(out, max_abs);
    sb_str(out, "}");
    if (t + 1 < f->n && (st = wisp_session_eval(s, &f->ids[t], 1, logits))) wisp_error_prefix("--follow step %d", t + 1);
  }
  sb_str(out, "]");
  free(top);
  return st;
}

int cmd_logits(int argc, char **argv) {
  const char *model_dir = NULL, *prompts_path = NULL, *tokens = NULL, *out_path = NULL, *backend = CLI_DEFAULT_BACKEND;
  const char *tuning = NULL, *profile = NULL;
  const char *follow_ids = NULL;
  int greedy = 0, threads = 0, force = 0, decode_loop = 0, ctx = 0, top_k = 8;
  long long persistent_steps = -1; /* --decode-loop: the loop's steps the persistent decode ran */
  const cli_opt opts[] = {
      {"-m|--model", CLI_STR, &model_dir, 0, 0, "DIR", "the model artifact (default: models/default)"},
      {"--prompts", CLI_STR, &prompts_path, 0, 0, "FILE", "{\"prompts\": [[ids...], ...], \"greedy_prompt\": k}"},
      {"--tokens", CLI_STR, &tokens, 0, 0, "IDS", "one prompt of comma-separated ids"},
      {"-o|--output", CLI_STR, &out_path, 0, 0, "FILE", "write the JSON here (default: stdout)"},
      {"--force", CLI_FLAG, &force, 0, 0, NULL, "replace an existing -o FILE"},
      {"--greedy", CLI_INT, &greedy, 0, 1e6, "N", "continue prompt k greedily for N tokens"},
      {"--follow", CLI_STR, &follow_ids, 0, 0, "IDS",
       "after the last prompt, feed these ids one by one (another engine's greedy tokens) and write the top "
       "--top logits before each"},
      {"--top", CLI_INT, &top_k, 1, 1000, "K", "how many of the largest logits --follow writes a step (default 8)"},
      {"-c|--ctx-size", CLI_INT, &ctx, 0, 1e9, "N", "context length, at most the model's (default 0: the model's, at most 4096)"},
      {"--backend", CLI_STR, &backend, 0, 0, "B", "auto (default: a GPU adapter, else the CPU), cpu or webgpu"},
      {"-t|--threads", CLI_INT, &threads, 0, 1024, "N", "CPU threads (default 0: one per physical core available)"},
      {"--tuning", CLI_STR, &tuning, 0, 0, "K=V,...", "backend tuning keys (docs/configuration.md)"},
      {"--profile", CLI_STR, &profile, 0, 0, "P", "runtime profile (e.g. throughput: the CPU's int8 products)"},
      {"--decode-loop", CLI_FLAG, &decode_loop, 0, 0, NULL,
       "greedy tokens after the first come from the session's decode loop (as `wisp run` decodes: on WebGPU the "
       "persistent decode where it applies) instead of one eval per token"},
  };
  const cli_spec spec = {"logits", "[-m DIR] (--prompts FILE | --tokens 1,2,3) [-o OUT] [--greedy N] [--follow IDS]",
                         "Final-position logits of each prompt, for parity checks against a reference.",
                         opts, (int)(sizeof opts / sizeof opts[0]), NULL, 0, NULL};
  int pr = cli_parse(&spec, argc, argv);
  if (pr != CLI_CONTINUE) return pr;
  cli_warn_threads("logits", (long)threads);
  if (!prompts_path == !tokens) {
    fprintf(stderr, "wisp logits: give --prompts FILE or --tokens IDS (see wisp logits --help)\n");
    return 2;
  }
  if (follow_ids && greedy) {
    fprintf(stderr, "wisp logits: --follow and --greedy both continue the last prompt: give one\n");
    return 2;
  }
  if (out_path && cli_claim_target("logits", out_path, 0, force)) return 2;
  if (!model_dir && !(model_dir = cli_default_model())) return cli_error("logits");

  prompt *ps = NULL, *follow = NULL;
  int n_prompts = 0, n_follow = 0, greedy_prompt = 0, status = 1;
  wisp_model *m = NULL;
  wisp_session *s = NULL;
  float *logits = NULL;
  int32_t *gen = NULL;
  sbuf out = {0};
  wisp_status st = prompts_path ? load_prompts(prompts_path, &ps, &n_prompts, &greedy_prompt)
                                : parse_token_list(tokens, "--tokens", &ps, &n_prompts);
  if (!st && follow_ids) {
    st = parse_token_list(follow_ids, "--follow", &follow, &n_follow);
  }
  if (st) goto fail;
  if ((st = wisp_model_open(model_dir, &m))) goto fail;
  if (ctx > m->arch->max_positions(m->weights)) {
    st = wisp_fail(WISP_EINVAL, "-c %d exceeds the model's maximum context of %d tokens", ctx, m->arch->max_positions(m->weights));
    goto fail;
  }
  wisp_session_options opt = {.backend = backend, .threads = threads, .max_context = ctx, .tuning = tuning,
                              .profile = profile};
  if ((st = wisp_session_new(m, &opt, &s))) goto fail;
  const int vocab = wisp_model_vocab(m);
  logits = malloc(sizeof(float) * (size_t)vocab);
  gen = malloc(sizeof(int32_t) * ((size_t)greedy + 1));
  if (!logits || !gen) { st = wisp_fail(WISP_ENOMEM, "out of memory"); goto fail; }

  sb_str(&out, "{\"logits\": [");
  for (int k = 0; k < n_prompts; k++) {
    wisp_session_reset(s);
    if ((st = wisp_session_eval(s, ps[k].ids, ps[k].n, logits))) {
      wisp_error_prefix("prompt %d (%d tokens)", k, ps[k].n);
      goto fail;
    }
    sb_str(&out, k ? ",\n[" : "\n[");
    for (int v = 0; v < vocab; v++) {
      if (v) sb_str(&out, ", ");
      sb_float(&out, logits[v]);
    }
    sb_str(&out, "]");
  }
  sb_str(&out, "],\n\"greedy\": [");
  if (greedy > 0) {
    const prompt *p = &ps[greedy_prompt];
    /* The last prompt leaves the session (and logits) where the greedy prompt
     * starts when it is that one: no second prefill (a 16k-token prompt). */
    if (greedy_prompt != n_prompts - 1) {
      wisp_session_reset(s);
      if ((st = wisp_session_eval(s, p->ids, p->n, logits))) goto fail;
    }
    if (decode_loop) {
      gen[0] = argmax(logits, vocab);
      wisp_generate_options go = {.temperature = 0};
      int made = 0;
      wisp_backend_stats b0 = {0}, b1 = {0};
      wisp_session_device_stats(s, &b0);
      if (greedy > 1 && (st = wisp_session_generate(s, gen[0], greedy - 1, &go, gen + 1, &made))) goto fail;
      if (greedy > 1 && made != greedy - 1) {
        st = wisp_fail(WISP_EINVAL, "the decode loop made %d of %d greedy tokens", made, greedy - 1);
        goto fail;
      }
      wisp_session_device_stats(s, &b1);
      persistent_steps = (long long)(b1.persistent_steps - b0.persistent_steps);
    }
    for (int t = 0; t < greedy && !decode_loop; t++) {
      gen[t] = argmax(logits, vocab);
      if (t + 1 < greedy && (st = wisp_session_eval(s, &gen[t], 1, logits))) {
        wisp_error_prefix("greedy step %d", t + 1);
        goto fail;
      }
    }
    for (int t = 0; t < greedy; t++) {
      char num[16];
      snprintf(num, sizeof num, "%s%d", t ? ", " : "", (int)gen[t]);
      sb_str(&out, num);
    }
  }
  sb_str(&out, "]");
  if (persistent_steps >= 0) { /* which decode made the loop's tokens (tests/parity/compare.py ignores it) */
    char num[64];
    snprintf(num, sizeof num, ",\n\"persistent_steps\": %lld", persistent_steps);
    sb_str(&out, num);
  }
  if (follow && (st = write_follow(s, follow, logits, vocab, top_k, &out))) goto fail;
  sb_str(&out, "}\n");
  if (out.oom) { st = wisp_fail(WISP_ENOMEM, "out of memory formatting the output"); goto fail; }
  if (out_path) {
    if ((st = wisp_write_file_atomic(out_path, out.p, out.len))) goto fail;
  } else {
    fwrite(out.p, 1, out.len, stdout);
  }
  status = 0;
  goto done;
fail:
  status = cli_error("logits");
done:
  free(out.p);
  free(logits);
  free(gen);
  wisp_session_free(s);
  wisp_model_close(m);
  for (int k = 0; k < n_prompts; k++) free(ps[k].ids);
  free(ps);
  if (follow) free(follow->ids);
  free(follow);
  return status;
}
