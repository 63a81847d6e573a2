/* The model's own chat template, rendered (docs/chat-templates.md).
 *
 * A chat template is the Jinja text of tokenizer_config.json's
 * "chat_template" (a string, or a list of named templates of which the one
 * named "default" is used) with that file's bos_token and eos_token; or a
 * file given with --chat-template. It is rendered by the Jinja renderer
 * (jinja.h) as transformers' apply_chat_template renders it, so the prompt
 * text is the one the model was trained on. */
#ifndef WISP_CHAT_TEMPLATE_H
#define WISP_CHAT_TEMPLATE_H

#include <cJSON.h>
#include <time.h>

#include "wisp.h"

typedef struct wisp_chat_tmpl wisp_chat_tmpl;

/* Parses source; bos/eos (either may be NULL: the variable is then
 * undefined, as transformers leaves it) are copied. label names the source
 * in errors. */
wisp_status wisp_chat_tmpl_new(const char *source, const char *bos, const char *eos, const char *label,
                               wisp_chat_tmpl **out);
/* From a parsed tokenizer_config.json; WISP_EUNSUPPORTED when it has no
 * chat_template. */
wisp_status wisp_chat_tmpl_from_config(const cJSON *cfg, const char *label, wisp_chat_tmpl **out);
/* From tokenizer_config.json at config_path (may be NULL), or, when
 * override_path is set, from that file: Jinja text, or a JSON object with
 * a chat_template (bos and eos then come from it, else from config_path). */
wisp_status wisp_chat_tmpl_load(const char *config_path, const char *override_path, wisp_chat_tmpl **out);
void wisp_chat_tmpl_free(wisp_chat_tmpl *t);

/* Renders a request object: "messages" (each {role, content} with content
 * a string or a list of {type: "text", text} parts; tool_calls and other
 * keys pass through), "tools" (absent: none), "add_generation_prompt",
 * "continue_final_message" (the text then ends where the last message's
 * content ends, as transformers cuts it), and any other key as a template
 * variable (enable_thinking, date_string, ...). now: strftime_now's clock
 * (0: the current time). *out is malloc'd. */
wisp_status wisp_chat_tmpl_render(const wisp_chat_tmpl *t, const cJSON *request, time_t now, char **out);

/* role/content messages (wisp.h), add_generation_prompt, and Qwen's
 * thinking switch (enable_thinking = think). */
wisp_status wisp_chat_tmpl_messages(const wisp_chat_tmpl *t, const wisp_chat_message *m, int n,
                                    int add_generation_prompt, int think, char **out);
/* One turn for a session that keeps its state: the first turn is the whole
 * conversation so far (system, user) with the assistant prefix; a later
 * turn is what the template puts after an assistant reply up to the next
 * assistant prefix (the reply's end-of-turn text, the user message, the
 * prefix), found by rendering a placeholder reply. */
wisp_status wisp_chat_tmpl_turn(const wisp_chat_tmpl *t, int first, const char *system, const char *user, int think,
                                char **out);

#endif
