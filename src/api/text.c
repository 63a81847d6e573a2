/* The text half of the public API (include/wisp.h, "Text" block): the
 * model's tokenizer and chat template, loaded once per model on first use,
 * and wisp_generate_text, which feeds a prompt and streams a reply as text.
 * The work itself is the tokenizer's (src/tokenizer/), the chat template's
 * (tokenizer/chat.c), the host sampler's (engine/sampler.c) and the
 * session's; this file joins them the way an embedder needs them. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "engine/sampler.h"
#include "tokenizer/chat.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"
#include "util/err.h"
#include "util/file.h"
#include "util/options.h"

struct wisp_text_state {
  wisp_tokenizer *tok;
  wisp_chat_info chat;   /* template family and stop tokens */
  wisp_chat_tmpl *tmpl;  /* the chat template; NULL when the model has none */
  char *tmpl_error;      /* why there is none */
};

/* One lock for every model's first load: loads are rare and short next to
 * opening the model, and a model may be shared by threads. */
static pthread_mutex_t g_load_lock = PTHREAD_MUTEX_INITIALIZER;

static void text_state_free(struct wisp_text_state *t) {
  if (!t) return;
  wisp_tokenizer_free(t->tok);
  wisp_chat_tmpl_free(t->tmpl);
  free(t->tmpl_error);
  free(t);
}

void wisp_free(void *p) { free(p); }

const char *wisp_status_name(wisp_status st) {
  switch (st) {
  case WISP_OK: return "WISP_OK";
  case WISP_EINVAL: return "WISP_EINVAL";
  case WISP_EIO: return "WISP_EIO";
  case WISP_EFORMAT: return "WISP_EFORMAT";
  case WISP_ENOMEM: return "WISP_ENOMEM";
  case WISP_EUNSUPPORTED: return "WISP_EUNSUPPORTED";
  case WISP_EHASH: return "WISP_EHASH";
  case WISP_EDEVICE: return "WISP_EDEVICE";
  case WISP_EBUSY: return "WISP_EBUSY";
  }
  return "WISP_E?";
}

/* The tokenizer and chat info of the artifact, as `wisp run` builds them. */
static wisp_status load_text(wisp_model *m, struct wisp_text_state **out) {
  const wisp_artifact *a = m->artifact;
  struct wisp_text_state *t = calloc(1, sizeof *t);
  if (!t) return wisp_fail(WISP_ENOMEM, "out of memory");
  wisp_status st = wisp_tokenizer_for_artifact(a->dir, a->tokenizer, a->manifest, wisp_model_vocab(m), &t->tok);
  if (!st && !strcmp(wisp_tokenizer_kind(t->tok), "bpe")) {
    char cfg[4096], gen[4096];
    int has_cfg = wisp_tokenizer_artifact_file(a->dir, a->manifest, "config", cfg, sizeof cfg);
    int has_gen = wisp_tokenizer_artifact_file(a->dir, a->manifest, "generation", gen, sizeof gen);
    st = wisp_chat_load(has_cfg ? cfg : NULL, has_gen ? gen : NULL, t->tok, &t->chat);
    /* No template, or one that does not parse, only stops chat: the
     * error is kept for the chat calls. */
    if (!st && wisp_chat_tmpl_load(has_cfg ? cfg : NULL, NULL, &t->tmpl)) t->tmpl_error = strdup(wisp_last_error());
  } else if (!st) {
    t->tmpl_error = strdup("the tokenizer is not a BPE tokenizer with a tokenizer_config.json");
  }
  if (st) { text_state_free(t); return st; }
  *out = t;
  return WISP_OK;
}

static wisp_status text_of(wisp_model *m, struct wisp_text_state **out) {
  *out = NULL;
  if (!m) return wisp_fail(WISP_EINVAL, "no model");
  pthread_mutex_lock(&g_load_lock);
  wisp_status st = WISP_OK;
  if (!m->text && !(st = load_text(m, &m->text))) m->text_free = text_state_free; /* wisp_model_close calls it */
  pthread_mutex_unlock(&g_load_lock);
  *out = m->text;
  return st;
}

wisp_status wisp_tokenize(wisp_model *m, const char *text, size_t len, int add_special, int32_t **ids, int *n_ids) {
  if (!ids || !n_ids) return wisp_fail(WISP_EINVAL, "wisp_tokenize: no place for the ids (ids or n_ids is NULL)");
  *ids = NULL;
  *n_ids = 0;
  struct wisp_text_state *t = NULL;
  wisp_status st = text_of(m, &t);
  if (st) return st;
  if (!text) return wisp_fail(WISP_EINVAL, "wisp_tokenize: no text");
  if (!strcmp(wisp_tokenizer_kind(t->tok), "bpe") && !wisp_utf8_valid(text, len))
    return wisp_fail(WISP_EINVAL, "wisp_tokenize: the text is not valid UTF-8");
  return wisp_tokenizer_encode_n(t->tok, text, len, add_special, ids, n_ids);
}

wisp_status wisp_detokenize(wisp_model *m, const int32_t *ids, int n_ids, char **text, size_t *len) {
  if (!text) return wisp_fail(WISP_EINVAL, "wisp_detokenize: no place for the text (text is NULL)");
  *text = NULL;
  struct wisp_text_state *t = NULL;
  wisp_status st = text_of(m, &t);
  if (st) return st;
  if (n_ids < 0 || (n_ids && !ids))
    return wisp_fail(WISP_EINVAL, "wisp_detokenize: %d ids%s", n_ids, n_ids < 0 ? " is negative" : " but ids is NULL");
  /* An id outside the vocabulary has no text: refused, as `wisp tokenize
   * --decode` refuses it, rather than dropped from the text. */
  const int vocab = wisp_model_vocab(m);
  for (int i = 0; i < n_ids; i++)
    if (ids[i] < 0 || ids[i] >= vocab)
      return wisp_fail(WISP_EINVAL, "wisp_detokenize: id %d (entry %d) is outside the vocabulary (0..%d)", ids[i], i,
                       vocab - 1);
  size_t n = 0;
  st = wisp_tokenizer_decode(t->tok, ids, n_ids, text, &n);
  if (!st && len) *len = n;
  return st;
}

/* The model's chat template, or why it has none. */
static wisp_status chat_tmpl(wisp_model *m, struct wisp_text_state **out) {
  wisp_status st = text_of(m, out);
  if (st) return st;
  if (!(*out)->tmpl)
    return wisp_fail(WISP_EUNSUPPORTED, "%s: no chat template: %s", m->artifact->dir,
                     (*out)->tmpl_error ? (*out)->tmpl_error : "none");
  return WISP_OK;
}

const char *wisp_chat_template_of(wisp_model *m) {
  struct wisp_text_state *t = NULL;
  if (chat_tmpl(m, &t)) return NULL;
  return t->chat.kind == WISP_CHAT_NONE ? "jinja" : wisp_chat_template_name(t->chat.kind);
}

wisp_status wisp_chat_set_template(wisp_model *m, const char *source) {
  struct wisp_text_state *t = NULL;
  wisp_status st = text_of(m, &t);
  if (st) return st;
  if (!source) return wisp_fail(WISP_EINVAL, "wisp_chat_set_template: no template");
  wisp_chat_tmpl *nt = NULL;
  char cfg[4096];
  const wisp_artifact *a = m->artifact;
  const char *bos = NULL, *eos = NULL;
  cJSON *c = NULL;
  if (wisp_tokenizer_artifact_file(a->dir, a->manifest, "config", cfg, sizeof cfg)) { /* keep the model's tokens */
    char *text = NULL;
    if (!wisp_read_file(cfg, &text, NULL)) c = cJSON_Parse(text);
    free(text);
    bos = c ? wisp_chat_token_field(c, "bos_token") : NULL;
    eos = c ? wisp_chat_token_field(c, "eos_token") : NULL;
  }
  st = wisp_chat_tmpl_new(source, bos, eos, "chat template", &nt);
  cJSON_Delete(c);
  if (st) return st;
  pthread_mutex_lock(&g_load_lock);
  wisp_chat_tmpl_free(t->tmpl);
  t->tmpl = nt;
  pthread_mutex_unlock(&g_load_lock);
  return WISP_OK;
}

wisp_status wisp_chat_apply_json(wisp_model *m, const char *request_json, char **text) {
  if (!text) return wisp_fail(WISP_EINVAL, "wisp_chat_apply_json: no place for the text (text is NULL)");
  *text = NULL;
  struct wisp_text_state *t = NULL;
  wisp_status st = chat_tmpl(m, &t);
  if (st) return st;
  cJSON *req = request_json ? cJSON_Parse(request_json) : NULL;
  if (!cJSON_IsObject(req)) {
    cJSON_Delete(req);
    return wisp_fail(WISP_EINVAL, "wisp_chat_apply_json: the request is not a JSON object");
  }
  st = wisp_chat_tmpl_render(t->tmpl, req, 0, text);
  cJSON_Delete(req);
  return st;
}

wisp_status wisp_stop_tokens(wisp_model *m, const int32_t **ids, int *n_ids) {
  if (!ids || !n_ids) return wisp_fail(WISP_EINVAL, "wisp_stop_tokens: no place for the ids (ids or n_ids is NULL)");
  *ids = NULL;
  *n_ids = 0;
  struct wisp_text_state *t = NULL;
  wisp_status st = text_of(m, &t);
  if (st) return st;
  *ids = t->chat.stop;
  *n_ids = t->chat.n_stop;
  return WISP_OK;
}

wisp_status wisp_chat_apply(wisp_model *m, const wisp_chat_message *msgs, int n_msgs, int add_assistant, int think,
                            char **text) {
  if (!text) return wisp_fail(WISP_EINVAL, "wisp_chat_apply: no place for the text (text is NULL)");
  *text = NULL;
  struct wisp_text_state *t = NULL;
  wisp_status st = chat_tmpl(m, &t);
  if (st) return st;
  if (n_msgs < 0 || (n_msgs && !msgs)) return wisp_fail(WISP_EINVAL, "wisp_chat_apply: bad message list");
  for (int i = 0; i < n_msgs; i++)
    if (!msgs[i].role || !msgs[i].content) return wisp_fail(WISP_EINVAL, "wisp_chat_apply: message %d has no role or content", i);
  return wisp_chat_tmpl_messages(t->tmpl, msgs, n_msgs, add_assistant, think, text);
}

wisp_status wisp_chat_turn(wisp_session *s, const char *system, const char *user, int think, char **text) {
  if (!text) return wisp_fail(WISP_EINVAL, "wisp_chat_turn: no place for the text (text is NULL)");
  *text = NULL;
  if (!s) return wisp_fail(WISP_EINVAL, "wisp_chat_turn: no session");
  struct wisp_text_state *t = NULL;
  wisp_status st = chat_tmpl(s->model, &t);
  if (st) return st;
  if (!user) return wisp_fail(WISP_EINVAL, "wisp_chat_turn: no user message");
  return wisp_chat_tmpl_turn(t->tmpl, wisp_session_position(s) == 0, system, user, think, text);
}

/* Hands the reply's text to on_text as the streaming decoder releases it. */
typedef struct {
  const wisp_tokenizer *tok;
  wisp_stream_decoder dec;
  const wisp_text_options *o;
  int stop_asked;
} text_stream;

static void deliver(text_stream *ts, const char *p, size_t n) {
  if (n && ts->o->on_text && ts->o->on_text(ts->o->user, p, n)) ts->stop_asked = 1;
}

/* Byte tokenizers have ids past 255 with no text; they are shown as
 * "<|id|>", as `wisp run` does. */
static wisp_status stream_token(text_stream *ts, int32_t id) {
  size_t len;
  const char *out;
  if (!wisp_tokenizer_token_bytes(ts->tok, id, &len) && !strcmp(wisp_tokenizer_kind(ts->tok), "byte")) {
    char piece[32];
    len = wisp_tokenizer_piece(ts->tok, id, piece, sizeof piece);
    deliver(ts, piece, len);
    return WISP_OK;
  }
  wisp_status st = wisp_stream_push(&ts->dec, id, &out, &len);
  if (!st) deliver(ts, out, len);
  return st;
}

static wisp_sampler_params sampler_params(const wisp_text_options *o) {
  wisp_sampler_params p = {
      .temperature = o->temperature > 0 ? o->temperature : 0,
      .top_k = o->top_k > 0 ? o->top_k : 0,
      .top_p = o->top_p > 0 && o->top_p < 1 ? o->top_p : 1,
      .min_p = o->min_p > 0 ? o->min_p : 0,
      .repeat_penalty = o->repeat_penalty > 0 ? o->repeat_penalty : 1,
      .repeat_last_n = o->repeat_last_n > 0 ? o->repeat_last_n : 64,
      .seed = o->seed,
  };
  return p;
}

wisp_status wisp_generate_text(wisp_session *s, const char *prompt, const wisp_text_options *opt,
                               wisp_text_result *result) {
  wisp_text_options taken;
  const wisp_text_options *o = &taken;
  wisp_text_result r = {0};
  if (result) *result = r;
  if (!s || !prompt) return wisp_fail(WISP_EINVAL, "wisp_generate_text: no session or prompt");
  if (!*prompt) return wisp_fail(WISP_EINVAL, "wisp_generate_text: the prompt is empty");
  wisp_status st = WISP_TAKE_OPTIONS(wisp_text_options, WISP_TEXT_OPTIONS_FIRST_SIZE, opt, &taken);
  if (st) return st;
  if (o->max_tokens < 0) return wisp_fail(WISP_EINVAL, "wisp_generate_text: max_tokens %d is negative", o->max_tokens);
  if (o->top_k < 0 || o->top_p < 0 || o->min_p < 0 || o->repeat_penalty < 0 || o->repeat_last_n < 0)
    return wisp_fail(WISP_EINVAL,
                     "wisp_generate_text: top_k %d, top_p %g, min_p %g, repeat_penalty %g, repeat_last_n %d: none "
                     "may be negative",
                     o->top_k, (double)o->top_p, (double)o->min_p, (double)o->repeat_penalty, o->repeat_last_n);
  struct wisp_text_state *t = NULL;
  if ((st = text_of(s->model, &t))) return st;
  const int vocab = wisp_model_vocab(s->model), ctx = wisp_session_context(s);
  int32_t *ids = NULL;
  int n = 0;
  if ((st = wisp_tokenize(s->model, prompt, strlen(prompt), o->add_special, &ids, &n))) return st;
  for (int i = 0; i < n && !st; i++)
    if (ids[i] < 0 || ids[i] >= vocab)
      st = wisp_fail(WISP_EFORMAT, "the tokenizer gave id %d, outside the model's vocabulary of %d", ids[i], vocab);
  if (!st && n == 0) st = wisp_fail(WISP_EINVAL, "wisp_generate_text: the prompt is empty");
  if (!st && wisp_session_position(s) + n + 1 > ctx)
    st = wisp_fail(WISP_EINVAL, "the prompt (%d tokens at position %d) leaves no room in the context of %d", n,
                   wisp_session_position(s), ctx);
  wisp_sampler_params sp = sampler_params(o);
  wisp_sampler *smp = st ? NULL : wisp_sampler_new(&sp, vocab);
  float *logits = st ? NULL : malloc(sizeof(float) * (size_t)vocab);
  if (!st && (!smp || !logits)) st = wisp_fail(WISP_ENOMEM, "out of memory");
  for (int i = 0; !st && i < n; i++) wisp_sampler_accept(smp, ids[i]);
  if (!st) st = wisp_session_eval(s, ids, n, logits);
  free(ids);
  if (!st) r.n_prompt = n;
  text_stream ts = {.tok = t->tok, .o = o};
  wisp_stream_init(&ts.dec, t->tok);
  /* Every reply token is fed back before the next is drawn, so the session
   * ends where the reply does; a stop token is neither fed nor shown. */
  while (!st && (o->max_tokens == 0 || r.n_generated < o->max_tokens) && wisp_session_position(s) < ctx) {
    int32_t next = wisp_sampler_sample(smp, logits);
    if (!o->ignore_stop && t->chat.n_stop && wisp_chat_is_stop(&t->chat, next)) { r.stopped = 1; break; }
    wisp_sampler_accept(smp, next);
    if ((st = stream_token(&ts, next))) break;
    if ((st = wisp_session_eval(s, &next, 1, logits))) break;
    r.n_generated++;
    if (ts.stop_asked) { r.stopped = 2; break; }
  }
  if (!st) {
    const char *rest;
    size_t len;
    wisp_stream_flush(&ts.dec, &rest, &len);
    deliver(&ts, rest, len);
  }
  wisp_stream_free(&ts.dec);
  wisp_sampler_free(smp);
  free(logits);
  if (result) *result = r;
  return st;
}
