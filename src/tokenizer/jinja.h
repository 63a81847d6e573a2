/* A small Jinja renderer for chat templates (docs/chat-templates.md).
 *
 * Models ship their prompt format as a Jinja template (tokenizer_config.json
 * "chat_template", GGUF "tokenizer.chat_template") and transformers renders
 * it with jinja2. No C Jinja library is packaged in Debian, so wisp carries
 * its own: the subset real chat templates use, rendered the way transformers'
 * apply_chat_template renders it (trim_blocks and lstrip_blocks on, the
 * loopcontrols extension, tojson without ASCII escaping, raise_exception and
 * strftime_now as globals). A construct outside the subset is a one-line
 * error naming it and its line and column.
 *
 * Pieces, one job each: jinja_lex.c (text -> tokens, whitespace control),
 * jinja_parse.c (tokens -> tree), jinja_value.c (values, str(), tojson),
 * jinja_eval.c (statements and expressions), jinja_builtin.c (filters,
 * tests, methods, globals). Rendering is bounded in nesting depth, loop
 * iterations, memory and output size, so any input ends with text or an
 * error. */
#ifndef WISP_JINJA_H
#define WISP_JINJA_H

#include <cJSON.h>
#include <stddef.h>
#include <time.h>

#include "wisp.h"

typedef struct wisp_jinja wisp_jinja;

/* Parses a template; on error *out is NULL and wisp_last_error() says what
 * and where ("chat template 3:14: ..."). */
wisp_status wisp_jinja_parse(const char *source, wisp_jinja **out);
void wisp_jinja_free(wisp_jinja *t);

/* Renders with the variables of `vars` (a JSON object: messages, tools,
 * bos_token, add_generation_prompt, ...). now: the clock strftime_now reads
 * (0: the current time). *out is malloc'd and NUL-terminated. */
wisp_status wisp_jinja_render(const wisp_jinja *t, const cJSON *vars, time_t now, char **out);

/* Limits: a template's own nesting, the loop iterations and macro calls of
 * one render, the bytes a render may hold, and its output. */
enum {
  WISP_JINJA_MAX_DEPTH = 128,
  WISP_JINJA_MAX_STEPS = 1000000,
};
#define WISP_JINJA_MAX_MEMORY ((size_t)64 << 20)
#define WISP_JINJA_MAX_OUTPUT ((size_t)16 << 20)

#endif
