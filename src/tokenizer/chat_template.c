/* The model's own chat template, rendered; see chat_template.h. */
#include "tokenizer/chat_template.h"

#include <stdlib.h>
#include <string.h>

#include "tokenizer/chat.h"
#include "tokenizer/jinja.h"
#include "util/err.h"
#include "util/file.h"

struct wisp_chat_tmpl {
  wisp_jinja *jinja;
  char *bos, *eos;
};

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

wisp_status wisp_chat_tmpl_new(const char *source, const char *bos, const char *eos, const char *label,
                               wisp_chat_tmpl **out) {
  *out = NULL;
  wisp_chat_tmpl *t = calloc(1, sizeof *t);
  if (!t) return wisp_fail(WISP_ENOMEM, "out of memory");
  wisp_status st = wisp_jinja_parse(source, &t->jinja);
  if (st) {
    if (label) wisp_error_prefix("%s", label);
    free(t);
    return st;
  }
  t->bos = dup_or_null(bos);
  t->eos = dup_or_null(eos);
  if ((bos && !t->bos) || (eos && !t->eos)) {
    wisp_chat_tmpl_free(t);
    return wisp_fail(WISP_ENOMEM, "out of memory");
  }
  *out = t;
  return WISP_OK;
}

wisp_status wisp_chat_tmpl_from_config(const cJSON *cfg, const char *label, wisp_chat_tmpl **out) {
  *out = NULL;
  const char *src = cfg ? wisp_chat_template_text(cfg) : NULL;
  if (!src)
    return wisp_fail(WISP_EUNSUPPORTED, "%s: no chat_template (give one with --chat-template FILE)",
                     label ? label : "tokenizer_config.json");
  return wisp_chat_tmpl_new(src, wisp_chat_token_field(cfg, "bos_token"), wisp_chat_token_field(cfg, "eos_token"),
                            label, out);
}

void wisp_chat_tmpl_free(wisp_chat_tmpl *t) {
  if (!t) return;
  wisp_jinja_free(t->jinja);
  free(t->bos);
  free(t->eos);
  free(t);
}

wisp_status wisp_chat_tmpl_load(const char *config_path, const char *override_path, wisp_chat_tmpl **out) {
  *out = NULL;
  cJSON *cfg = NULL;
  char *text = NULL;
  wisp_status st = WISP_OK;
  if (config_path) {
    if ((st = wisp_read_file(config_path, &text, NULL))) return st;
    cfg = cJSON_Parse(text);
    free(text);
    text = NULL;
    if (!cfg) return wisp_fail(WISP_EFORMAT, "%s: malformed JSON", config_path);
  }
  if (override_path) {
    if (!(st = wisp_read_file(override_path, &text, NULL))) {
      cJSON *o = text[0] == '{' ? cJSON_Parse(text) : NULL;
      const char *src = o ? wisp_chat_template_text(o) : text;
      const cJSON *tok_src = o && wisp_chat_token_field(o, "bos_token") ? o : cfg;
      if (!src) st = wisp_fail(WISP_EFORMAT, "%s: a JSON object without a chat_template", override_path);
      else
        st = wisp_chat_tmpl_new(src, tok_src ? wisp_chat_token_field(tok_src, "bos_token") : NULL,
                                tok_src ? wisp_chat_token_field(tok_src, "eos_token") : NULL, override_path, out);
      cJSON_Delete(o);
      free(text);
    }
  } else if (!cfg) {
    st = wisp_fail(WISP_EUNSUPPORTED, "no tokenizer_config.json, so no chat template (give one with --chat-template FILE)");
  } else {
    st = wisp_chat_tmpl_from_config(cfg, config_path, out);
  }
  cJSON_Delete(cfg);
  return st;
}

/* transformers' continue_final_message: the text ends where the last
 * message's content (its last text part) ends, so generation continues it. */
static wisp_status cut_after_final(const cJSON *messages, char *text) {
  const cJSON *last = cJSON_GetArrayItem(messages, cJSON_GetArraySize(messages) - 1);
  const cJSON *content = cJSON_GetObjectItemCaseSensitive(last, "content");
  if (cJSON_IsArray(content)) {
    const cJSON *part, *found = NULL;
    cJSON_ArrayForEach(part, content) {
      const cJSON *t = cJSON_GetObjectItemCaseSensitive(part, "text");
      if (cJSON_IsString(t)) found = t;
    }
    content = found;
  }
  if (!cJSON_IsString(content))
    return wisp_fail(WISP_EINVAL, "continue_final_message: the last message has no text content");
  const char *final = content->valuestring;
  size_t n = strlen(final), lead = 0;
  while (lead < n && strchr(" \t\n\r\f\v", final[lead])) lead++;
  size_t end = n;
  while (end > lead && strchr(" \t\n\r\f\v", final[end - 1])) end--;
  if (end == lead) return WISP_OK; /* nothing to cut after */
  /* the last occurrence of the stripped content */
  const char *at = NULL;
  for (const char *p = text; (p = memmem(p, strlen(p), final + lead, end - lead)); p++) at = p;
  if (!at) return wisp_fail(WISP_EINVAL, "continue_final_message: the final message is not in the rendered text");
  /* the content's trailing whitespace stays when the template kept it */
  size_t keep = lead == 0 && !strncmp(at, final, n) ? n : end - lead;
  ((char *)at)[keep] = 0;
  return WISP_OK;
}

wisp_status wisp_chat_tmpl_render(const wisp_chat_tmpl *t, const cJSON *request, time_t now, char **out) {
  *out = NULL;
  const cJSON *messages = cJSON_GetObjectItemCaseSensitive(request, "messages");
  if (!cJSON_IsArray(messages)) return wisp_fail(WISP_EINVAL, "chat request: no \"messages\" list");
  int cont = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(request, "continue_final_message"));
  if (cont && !cJSON_GetArraySize(messages))
    return wisp_fail(WISP_EINVAL, "continue_final_message needs a message to continue");
  if (cont && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(request, "add_generation_prompt")))
    return wisp_fail(WISP_EINVAL, "continue_final_message and add_generation_prompt cannot both be set");
  /* The variables: transformers' special tokens, its defaults, then the
   * request's own keys (which win). */
  cJSON *vars = cJSON_CreateObject();
  if (!vars) return wisp_fail(WISP_ENOMEM, "out of memory");
  if (t->bos) cJSON_AddStringToObject(vars, "bos_token", t->bos);
  if (t->eos) cJSON_AddStringToObject(vars, "eos_token", t->eos);
  cJSON_AddNullToObject(vars, "tools");
  cJSON_AddNullToObject(vars, "documents");
  cJSON_AddFalseToObject(vars, "add_generation_prompt");
  const cJSON *e;
  cJSON_ArrayForEach(e, request) {
    if (!e->string || !strcmp(e->string, "continue_final_message")) continue;
    cJSON *copy = cJSON_Duplicate(e, 1);
    if (!copy) { cJSON_Delete(vars); return wisp_fail(WISP_ENOMEM, "out of memory"); }
    if (cJSON_GetObjectItemCaseSensitive(vars, e->string)) cJSON_ReplaceItemInObjectCaseSensitive(vars, e->string, copy);
    else cJSON_AddItemToObject(vars, e->string, copy);
  }
  wisp_status st = wisp_jinja_render(t->jinja, vars, now, out);
  cJSON_Delete(vars);
  if (!st && cont && (st = cut_after_final(messages, *out))) {
    free(*out);
    *out = NULL;
  }
  return st;
}

static cJSON *message_json(const char *role, const char *content) {
  cJSON *m = cJSON_CreateObject();
  if (m && (!cJSON_AddStringToObject(m, "role", role) || !cJSON_AddStringToObject(m, "content", content))) {
    cJSON_Delete(m);
    return NULL;
  }
  return m;
}

static wisp_status render_list(const wisp_chat_tmpl *t, const wisp_chat_message *m, int n, int gen, int think,
                               char **out) {
  cJSON *req = cJSON_CreateObject(), *list = req ? cJSON_AddArrayToObject(req, "messages") : NULL;
  int ok = list != NULL;
  for (int i = 0; ok && i < n; i++) {
    cJSON *x = message_json(m[i].role, m[i].content);
    if (!x) ok = 0;
    else cJSON_AddItemToArray(list, x);
  }
  ok = ok && cJSON_AddBoolToObject(req, "add_generation_prompt", gen) && cJSON_AddBoolToObject(req, "enable_thinking", think);
  wisp_status st = ok ? wisp_chat_tmpl_render(t, req, 0, out) : wisp_fail(WISP_ENOMEM, "out of memory");
  cJSON_Delete(req);
  return st;
}

wisp_status wisp_chat_tmpl_messages(const wisp_chat_tmpl *t, const wisp_chat_message *m, int n,
                                    int add_generation_prompt, int think, char **out) {
  *out = NULL;
  for (int i = 0; i < n; i++)
    if (!m[i].role || !m[i].content) return wisp_fail(WISP_EINVAL, "chat message %d has no role or content", i);
  return render_list(t, m, n, add_generation_prompt, think, out);
}

wisp_status wisp_chat_tmpl_turn(const wisp_chat_tmpl *t, int first, const char *system, const char *user, int think,
                                char **out) {
  *out = NULL;
  /* A reply no template writes or changes: what follows its last
   * occurrence is the turn. */
  static const char PLACEHOLDER[] = "WISP_REPLY_PLACEHOLDER_7f3a";
  wisp_chat_message m[4];
  int n = 0;
  if (system && system[0]) m[n++] = (wisp_chat_message){"system", system};
  if (first) {
    m[n++] = (wisp_chat_message){"user", user};
    return render_list(t, m, n, 1, think, out);
  }
  m[n++] = (wisp_chat_message){"user", "WISP_PREVIOUS_USER"};
  m[n++] = (wisp_chat_message){"assistant", PLACEHOLDER};
  m[n++] = (wisp_chat_message){"user", user};
  char *text = NULL;
  wisp_status st = render_list(t, m, n, 1, think, &text);
  if (st) return st;
  const char *at = NULL;
  for (const char *p = text; (p = strstr(p, PLACEHOLDER)); p++) at = p;
  if (!at) {
    free(text);
    return wisp_fail(WISP_EUNSUPPORTED, "the chat template does not show earlier replies, so a turn cannot continue "
                     "a conversation");
  }
  at += sizeof PLACEHOLDER - 1;
  size_t len = strlen(at);
  memmove(text, at, len + 1);
  *out = text;
  return WISP_OK;
}
