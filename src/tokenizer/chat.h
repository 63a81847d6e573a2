/* Chat configuration from tokenizer_config.json and generation_config.json:
 * the template's text and token fields (rendered by chat_template.h), a
 * label for the template's family (LFM2, Qwen, ChatML, or none of those:
 * shown to people, rendering does not depend on it), and the stop tokens:
 * generation_config.json eos_token_id (int or list), tokenizer_config.json
 * eos_token, and <|im_end|> and <end_of_turn> where the vocabulary has them. */
#ifndef WISP_CHAT_H
#define WISP_CHAT_H

#include <cJSON.h>
#include <stdint.h>

#include "tokenizer/tokenizer.h"
#include "wisp.h"

typedef enum { WISP_CHAT_NONE = 0, WISP_CHAT_LFM2, WISP_CHAT_QWEN, WISP_CHAT_CHATML } wisp_chat_template;

/* wisp_chat_message (role, content) is public: include/wisp.h. */

#define WISP_CHAT_MAX_STOP 16

typedef struct {
  wisp_chat_template kind;
  int32_t stop[WISP_CHAT_MAX_STOP];
  int n_stop;
} wisp_chat_info;

const char *wisp_chat_template_name(wisp_chat_template kind);
/* Which template a tokenizer_config.json describes (NULL -> NONE). */
wisp_chat_template wisp_chat_detect(const cJSON *tokenizer_config);
/* Reads tokenizer_config.json / generation_config.json (either path may be
 * NULL) and resolves stop ids with the tokenizer. */
wisp_status wisp_chat_load(const char *config_path, const char *generation_path, const wisp_tokenizer *t,
                           wisp_chat_info *out);
/* The same from parsed JSON (either may be NULL); gen_label names the
 * generation config in errors. */
wisp_status wisp_chat_info_from_json(const cJSON *cfg, const cJSON *gen, const char *gen_label,
                                    const wisp_tokenizer *t, wisp_chat_info *out);
/* tokenizer_config.json's chat_template: the string, or of a list of named
 * templates the one named "default" (else the first); NULL when none. */
const char *wisp_chat_template_text(const cJSON *tokenizer_config);
/* A token field of tokenizer_config.json (bos_token, eos_token, pad_token):
 * a string or {"content": ...}; NULL when absent. */
const char *wisp_chat_token_field(const cJSON *tokenizer_config, const char *key);
int wisp_chat_is_stop(const wisp_chat_info *c, int32_t id);

#endif
