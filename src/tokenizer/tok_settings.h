/* A tokenizer's behaviour beyond its vocabulary and merges: the special ids
 * (BOS, EOS and further stop ids, padding), whether encoding adds BOS / EOS,
 * and the chat template text. Hugging Face spreads them over tokenizer.json's
 * post-processor, tokenizer_config.json and generation_config.json; GGUF
 * keeps them in tokenizer.ggml.* and tokenizer.chat_template. export-gguf
 * reads an artifact's through here (docs/gguf.md, "Tokenizer"). */
#ifndef WISP_TOK_SETTINGS_H
#define WISP_TOK_SETTINGS_H

#include <cJSON.h>
#include <stdint.h>

#include "tokenizer/tokenizer.h"
#include "wisp.h"

#define WISP_TOK_MAX_EXTRA_STOP 2

typedef struct {
  int32_t bos, eos, pad; /* -1 when none */
  /* stop ids besides eos (generation_config.json's eos_token_id list), which
   * GGUF carries as eot / eom ids */
  int32_t extra_stop[WISP_TOK_MAX_EXTRA_STOP];
  int n_extra_stop;
  int add_bos, add_eos; /* encoding with special tokens puts bos first / eos last */
  char *chat_template;  /* malloc'd; NULL when none */
} wisp_tok_settings;

/* From a loaded tokenizer (its post-processor decides add_bos / add_eos) and
 * the parsed tokenizer_config.json / generation_config.json (either may be
 * NULL). Ids outside the tokenizer's vocabulary are ignored. A post-processor
 * that adds more than one token before or after the text has no GGUF form:
 * EUNSUPPORTED naming `label`. */
wisp_status wisp_tok_settings_from_json(const wisp_tokenizer *t, const cJSON *cfg, const cJSON *gen,
                                        const char *label, wisp_tok_settings *out);
/* The same for an artifact directory (its wisp.tokenizerFiles). */
wisp_status wisp_tok_settings_for_artifact(const char *dir, const cJSON *manifest, const wisp_tokenizer *t,
                                           wisp_tok_settings *out);
void wisp_tok_settings_free(wisp_tok_settings *s);

#endif
