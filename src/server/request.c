/* Request bodies of `wisp serve` -> srv_request (request.h). Types are
 * checked strictly: a field of the wrong type, out of range, or a body that
 * is not UTF-8 JSON is a 400 naming the field; fields wisp does not know are
 * ignored, as OpenAI clients send extras (user, metadata). */
#include "server/request.h"

#include <cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer.h"

int srv_error_set(srv_error *err, int status, const char *type, const char *code, const char *param,
                  const char *fmt, ...) {
  err->status = status;
  err->type = type;
  err->code = code;
  snprintf(err->param, sizeof err->param, "%s", param ? param : "");
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err->message, sizeof err->message, fmt, ap);
  va_end(ap);
  return -1;
}

static int bad(srv_error *err, const char *param, const char *what) {
  return srv_error_set(err, 400, "invalid_request_error", "invalid_value", param, "'%s': %s", param, what);
}

void srv_request_free(srv_request *r) {
  if (!r) return;
  free(r->model);
  for (int i = 0; i < r->n_messages; i++) {
    free(r->messages[i].role);
    free(r->messages[i].content);
  }
  free(r->messages);
  for (int i = 0; i < r->n_prompts; i++) {
    free(r->prompts[i]);
    if (r->prompt_ids) free(r->prompt_ids[i]);
  }
  free(r->prompts);
  free(r->prompt_ids);
  free(r->n_prompt_ids);
  for (int i = 0; i < r->n_stop; i++) free(r->stop[i]);
  memset(r, 0, sizeof *r);
}

/* An optional field: NULL when absent or JSON null. */
static const cJSON *field(const cJSON *root, const char *name) {
  const cJSON *f = cJSON_GetObjectItemCaseSensitive(root, name);
  return f && !cJSON_IsNull(f) ? f : NULL;
}

static int read_number(const cJSON *root, const char *name, double lo, double hi, float *out, srv_error *err) {
  const cJSON *f = field(root, name);
  if (!f) return 0;
  if (!cJSON_IsNumber(f)) return bad(err, name, "must be a number");
  if (!isfinite(f->valuedouble) || f->valuedouble < lo || f->valuedouble > hi) {
    char what[96];
    snprintf(what, sizeof what, "must be between %g and %g", lo, hi);
    return bad(err, name, what);
  }
  *out = (float)f->valuedouble;
  return 0;
}

/* An integer in [lo, hi]; 1 when present, 0 when absent, -1 on error. */
static int read_int(const cJSON *root, const char *name, double lo, double hi, int64_t *out, srv_error *err) {
  const cJSON *f = field(root, name);
  if (!f) return 0;
  if (!cJSON_IsNumber(f) || !isfinite(f->valuedouble) || f->valuedouble != floor(f->valuedouble))
    return bad(err, name, "must be an integer");
  if (f->valuedouble < lo || f->valuedouble > hi) {
    char what[96];
    snprintf(what, sizeof what, "must be between %.0f and %.0f", lo, hi);
    return bad(err, name, what);
  }
  *out = (int64_t)f->valuedouble;
  return 1;
}

static int read_bool(const cJSON *root, const char *name, int *out, srv_error *err) {
  const cJSON *f = field(root, name);
  if (!f) return 0;
  if (!cJSON_IsBool(f)) return bad(err, name, "must be a boolean");
  *out = cJSON_IsTrue(f);
  return 0;
}

static char *dup_text(const char *s) {
  size_t n = strlen(s);
  char *d = malloc(n + 1);
  if (d) memcpy(d, s, n + 1);
  return d;
}

static int oom(srv_error *err) {
  return srv_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
}

/* A message's content: a string, or an array of {"type":"text","text":...}
 * parts, joined. */
static int read_content(const cJSON *c, const char *param, char **out, srv_error *err) {
  if (cJSON_IsString(c)) {
    *out = dup_text(c->valuestring);
    return *out ? 0 : oom(err);
  }
  if (!cJSON_IsArray(c)) return bad(err, param, "must be a string or an array of text parts");
  size_t total = 0;
  const cJSON *part;
  cJSON_ArrayForEach(part, c) {
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(part, "type");
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(part, "text");
    if (!cJSON_IsObject(part) || !cJSON_IsString(type)) return bad(err, param, "each part must be an object with a 'type'");
    if (strcmp(type->valuestring, "text")) return bad(err, param, "only text parts are supported");
    if (!cJSON_IsString(text)) return bad(err, param, "a text part needs a string 'text'");
    total += strlen(text->valuestring);
  }
  char *s = malloc(total + 1);
  if (!s) return oom(err);
  size_t at = 0;
  cJSON_ArrayForEach(part, c) {
    const char *t = cJSON_GetObjectItemCaseSensitive(part, "text")->valuestring;
    size_t n = strlen(t);
    memcpy(s + at, t, n);
    at += n;
  }
  s[at] = 0;
  *out = s;
  return 0;
}

static int read_messages(const cJSON *root, srv_request *r, srv_error *err) {
  const cJSON *ms = cJSON_GetObjectItemCaseSensitive(root, "messages");
  if (!ms || cJSON_IsNull(ms))
    return srv_error_set(err, 400, "invalid_request_error", "missing_required_parameter", "messages",
                         "'messages' is required");
  if (!cJSON_IsArray(ms)) return bad(err, "messages", "must be an array of messages");
  int n = cJSON_GetArraySize(ms);
  if (n < 1) return bad(err, "messages", "must hold at least one message");
  if (!(r->messages = calloc((size_t)n, sizeof *r->messages))) return oom(err);
  const cJSON *m;
  cJSON_ArrayForEach(m, ms) {
    char param[64];
    snprintf(param, sizeof param, "messages[%d]", r->n_messages);
    if (!cJSON_IsObject(m)) return bad(err, param, "must be an object");
    const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content");
    snprintf(param, sizeof param, "messages[%d].role", r->n_messages);
    if (!cJSON_IsString(role)) return bad(err, param, "must be a string");
    const char *rv = role->valuestring;
    if (strcmp(rv, "system") && strcmp(rv, "user") && strcmp(rv, "assistant") && strcmp(rv, "developer"))
      return bad(err, param, "must be system, developer, user or assistant");
    srv_message *out = &r->messages[r->n_messages++];
    if (!(out->role = dup_text(!strcmp(rv, "developer") ? "system" : rv))) return oom(err);
    snprintf(param, sizeof param, "messages[%d].content", r->n_messages - 1);
    if ((!content || cJSON_IsNull(content)) && !strcmp(rv, "assistant")) {
      if (!(out->content = dup_text(""))) return oom(err);
    } else if (!content) {
      return srv_error_set(err, 400, "invalid_request_error", "missing_required_parameter", param,
                           "'%s' is required", param);
    } else if (read_content(content, param, &out->content, err)) {
      return -1;
    }
  }
  return 0;
}

/* One prompt given as token ids (OpenAI's completions take an array of
 * integers): each a whole number in 0..2^31-1; the scheduler checks them
 * against the vocabulary when the request is submitted. */
static int read_id_prompt(const cJSON *a, srv_request *r, srv_error *err) {
  const int n = cJSON_GetArraySize(a);
  const int i = r->n_prompts;
  if (n < 1) return bad(err, "prompt", "a token-id prompt must hold at least one id");
  if (!(r->prompt_ids[i] = malloc((size_t)n * sizeof(int32_t)))) return oom(err);
  r->n_prompt_ids[i] = n;
  r->n_prompts++;
  int k = 0;
  const cJSON *e;
  cJSON_ArrayForEach(e, a) {
    if (!cJSON_IsNumber(e) || e->valuedouble != (double)(int64_t)e->valuedouble || e->valuedouble < 0 ||
        e->valuedouble > 2147483647.0)
      return bad(err, "prompt", "token ids must be whole numbers from 0 to 2147483647");
    r->prompt_ids[i][k++] = (int32_t)e->valuedouble;
  }
  return 0;
}

/* prompt: a string, an array of strings, an array of token ids, or an
 * array of arrays of token ids. */
static int read_prompts(const cJSON *root, srv_request *r, srv_error *err) {
  const cJSON *p = cJSON_GetObjectItemCaseSensitive(root, "prompt");
  if (!p || cJSON_IsNull(p))
    return srv_error_set(err, 400, "invalid_request_error", "missing_required_parameter", "prompt",
                         "'prompt' is required");
  if (!cJSON_IsString(p) && !cJSON_IsArray(p))
    return bad(err, "prompt", "must be a string, an array of strings or an array of token ids");
  const int ids_one = cJSON_IsArray(p) && cJSON_IsNumber(cJSON_GetArrayItem(p, 0));
  int n = cJSON_IsString(p) || ids_one ? 1 : cJSON_GetArraySize(p);
  if (n < 1 || n > SRV_MAX_PROMPTS) return bad(err, "prompt", "must hold 1 to 16 prompts");
  if (!(r->prompts = calloc((size_t)n, sizeof *r->prompts)) || !(r->prompt_ids = calloc((size_t)n, sizeof *r->prompt_ids)) ||
      !(r->n_prompt_ids = calloc((size_t)n, sizeof *r->n_prompt_ids)))
    return oom(err);
  if (cJSON_IsString(p)) {
    if (!(r->prompts[r->n_prompts++] = dup_text(p->valuestring))) return oom(err);
    return 0;
  }
  if (ids_one) return read_id_prompt(p, r, err);
  const cJSON *s;
  cJSON_ArrayForEach(s, p) {
    if (cJSON_IsArray(s)) {
      if (read_id_prompt(s, r, err)) return -1;
    } else if (cJSON_IsString(s)) {
      if (!(r->prompts[r->n_prompts++] = dup_text(s->valuestring))) return oom(err);
    } else {
      return bad(err, "prompt", "must be a string, an array of strings or an array of token ids");
    }
  }
  return 0;
}

static int read_stop(const cJSON *root, srv_request *r, srv_error *err) {
  const cJSON *s = field(root, "stop");
  if (!s) return 0;
  if (cJSON_IsString(s)) {
    if (!s->valuestring[0]) return bad(err, "stop", "must not be empty");
    return (r->stop[r->n_stop++] = dup_text(s->valuestring)) ? 0 : oom(err);
  }
  if (!cJSON_IsArray(s)) return bad(err, "stop", "must be a string or an array of up to 4 strings");
  if (cJSON_GetArraySize(s) > SRV_MAX_STOP) return bad(err, "stop", "must hold at most 4 strings");
  const cJSON *e;
  cJSON_ArrayForEach(e, s) {
    if (!cJSON_IsString(e) || !e->valuestring[0]) return bad(err, "stop", "each entry must be a non-empty string");
    if (!(r->stop[r->n_stop++] = dup_text(e->valuestring))) return oom(err);
  }
  return 0;
}

/* Everything but the prompt: sampling, limits, streaming, logprobs. */
static int read_options(const cJSON *root, srv_request *r, srv_error *err) {
  const cJSON *model = field(root, "model");
  if (model) {
    if (!cJSON_IsString(model)) return bad(err, "model", "must be a string");
    if (!(r->model = dup_text(model->valuestring))) return oom(err);
  }
  int64_t v;
  int got;
  /* max_completion_tokens is the newer name; either may be given. */
  if ((got = read_int(root, "max_tokens", 1, 1e9, &v, err)) < 0) return -1;
  if (got) r->max_tokens = (int)v;
  if ((got = read_int(root, "max_completion_tokens", 1, 1e9, &v, err)) < 0) return -1;
  if (got) r->max_tokens = (int)v;
  if (read_number(root, "temperature", 0, 2, &r->temperature, err)) return -1;
  if (read_number(root, "top_p", 0, 1, &r->top_p, err)) return -1;
  if (read_number(root, "min_p", 0, 1, &r->min_p, err)) return -1;
  if ((got = read_int(root, "top_k", 0, 1e9, &v, err)) < 0) return -1;
  if (got) r->top_k = (int)v;
  /* Any integer seed a double holds exactly enough: negative ones wrap, as C's conversion to unsigned. */
  const cJSON *seed = field(root, "seed");
  if (seed) {
    double d = cJSON_IsNumber(seed) ? seed->valuedouble : NAN;
    if (!isfinite(d) || d != floor(d) || d < -9.2e18 || d > 1.8e19) return bad(err, "seed", "must be an integer");
    r->has_seed = 1;
    r->seed = d < 0 ? (uint64_t)(int64_t)d : (uint64_t)d;
  }
  if (read_stop(root, r, err)) return -1;
  if (read_bool(root, "stream", &r->stream, err)) return -1;
  const cJSON *so = field(root, "stream_options");
  if (so) {
    if (!cJSON_IsObject(so)) return bad(err, "stream_options", "must be an object");
    if (read_bool(so, "include_usage", &r->include_usage, err)) {
      snprintf(err->param, sizeof err->param, "stream_options.include_usage");
      return -1;
    }
  }
  if (read_number(root, "presence_penalty", -2, 2, &r->presence_penalty, err)) return -1;
  if (read_number(root, "frequency_penalty", -2, 2, &r->frequency_penalty, err)) return -1;
  if ((got = read_int(root, "n", 1, SRV_MAX_N, &v, err)) < 0) return -1;
  if (got) r->n = (int)v;
  if (read_bool(root, "ignore_eos", &r->ignore_eos, err)) return -1;
  if (r->kind == SRV_CHAT) {
    /* chat: logprobs is a boolean, top_logprobs the alternatives */
    if (read_bool(root, "logprobs", &r->logprobs, err)) return -1;
    if ((got = read_int(root, "top_logprobs", 0, SRV_MAX_TOP_LOGPROBS, &v, err)) < 0) return -1;
    if (got) {
      if (!r->logprobs) return bad(err, "top_logprobs", "needs 'logprobs': true");
      r->top_logprobs = (int)v;
    }
  } else {
    /* completions: logprobs is the number of alternatives */
    if ((got = read_int(root, "logprobs", 0, SRV_MAX_TOP_LOGPROBS, &v, err)) < 0) return -1;
    if (got) {
      r->logprobs = 1;
      r->top_logprobs = (int)v;
    }
  }
  return 0;
}

int srv_request_parse(const char *body, size_t len, srv_kind kind, srv_request *r, srv_error *err) {
  memset(r, 0, sizeof *r);
  memset(err, 0, sizeof *err);
  r->kind = kind;
  r->max_tokens = -1;
  r->temperature = 1;
  r->top_p = 1;
  r->n = 1;
  if (!wisp_utf8_valid(body, len))
    return srv_error_set(err, 400, "invalid_request_error", "invalid_encoding", NULL, "the body is not valid UTF-8");
  const char *end = NULL;
  cJSON *root = cJSON_ParseWithLengthOpts(body, len, &end, 0);
  if (root) {
    /* only white space may follow the value */
    while (end < body + len && (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r')) end++;
    if (end != body + len) {
      cJSON_Delete(root);
      root = NULL;
    }
  }
  if (!root)
    return srv_error_set(err, 400, "invalid_request_error", "invalid_json", NULL,
                         "the body is not valid JSON (near byte %ld)", end ? (long)(end - body) : 0L);
  int rc = 0;
  if (!cJSON_IsObject(root))
    rc = srv_error_set(err, 400, "invalid_request_error", "invalid_json", NULL, "the body must be a JSON object");
  else if (kind == SRV_CHAT ? read_messages(root, r, err) : read_prompts(root, r, err))
    rc = -1;
  else if (read_options(root, r, err))
    rc = -1;
  cJSON_Delete(root);
  if (rc) srv_request_free(r);
  return rc;
}
