/* A tokenizer's special ids, BOS/EOS flags and chat template; see
 * tok_settings.h. */
#include "tokenizer/tok_settings.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/chat.h"
#include "util/err.h"
#include "util/file.h"

/* An id from JSON: a number that is a valid token id of t, else -1. */
static int32_t json_id(const wisp_tokenizer *t, const cJSON *v) {
  if (!cJSON_IsNumber(v)) return -1;
  double d = v->valuedouble;
  if (!(d >= 0 && d < wisp_tokenizer_vocab_size(t)) || d != (double)(int32_t)d) return -1;
  return (int32_t)d;
}

/* A token named by content in tokenizer_config.json, else -1. */
static int32_t field_id(const wisp_tokenizer *t, const cJSON *cfg, const char *key) {
  const char *s = wisp_chat_token_field(cfg, key);
  return s ? wisp_tokenizer_token_id(t, s) : -1;
}

static void add_extra_stop(wisp_tok_settings *s, int32_t id) {
  if (id < 0 || id == s->eos || s->n_extra_stop >= WISP_TOK_MAX_EXTRA_STOP) return;
  for (int i = 0; i < s->n_extra_stop; i++)
    if (s->extra_stop[i] == id) return;
  s->extra_stop[s->n_extra_stop++] = id;
}

wisp_status wisp_tok_settings_from_json(const wisp_tokenizer *t, const cJSON *cfg, const cJSON *gen,
                                        const char *label, wisp_tok_settings *out) {
  memset(out, 0, sizeof *out);
  out->bos = out->eos = out->pad = -1;
  const int32_t *prefix, *suffix;
  int n_prefix, n_suffix;
  wisp_tokenizer_template_ids(t, &prefix, &n_prefix, &suffix, &n_suffix);
  if (n_prefix > 1 || n_suffix > 1)
    return wisp_fail(WISP_EUNSUPPORTED,
                     "%s: the post-processor adds %d tokens before and %d after the text; GGUF says only whether "
                     "one BOS and one EOS are added",
                     label, n_prefix, n_suffix);
  out->add_bos = n_prefix == 1;
  out->add_eos = n_suffix == 1;

  out->bos = out->add_bos ? prefix[0] : field_id(t, cfg, "bos_token");
  if (out->bos < 0) out->bos = json_id(t, cJSON_GetObjectItemCaseSensitive(gen, "bos_token_id"));

  /* eos: the one the post-processor appends, else tokenizer_config's, else
   * the first of generation_config's list; the others are extra stops. */
  const cJSON *gen_eos = cJSON_GetObjectItemCaseSensitive(gen, "eos_token_id"), *e;
  int32_t cfg_eos = field_id(t, cfg, "eos_token");
  out->eos = out->add_eos ? suffix[0] : cfg_eos;
  if (out->eos < 0) out->eos = cJSON_IsArray(gen_eos) ? json_id(t, cJSON_GetArrayItem(gen_eos, 0)) : json_id(t, gen_eos);
  add_extra_stop(out, cfg_eos);
  if (cJSON_IsArray(gen_eos)) {
    cJSON_ArrayForEach(e, gen_eos) add_extra_stop(out, json_id(t, e));
  } else {
    add_extra_stop(out, json_id(t, gen_eos));
  }

  out->pad = field_id(t, cfg, "pad_token");
  if (out->pad < 0) out->pad = json_id(t, cJSON_GetObjectItemCaseSensitive(gen, "pad_token_id"));

  const char *tmpl = wisp_chat_template_text(cfg);
  if (tmpl && !(out->chat_template = strdup(tmpl))) return wisp_fail(WISP_ENOMEM, "out of memory");
  return WISP_OK;
}

static wisp_status read_json(const char *path, cJSON **out) {
  char *text = NULL;
  wisp_status st = wisp_read_file(path, &text, NULL);
  if (st) return st;
  *out = cJSON_Parse(text);
  free(text);
  return *out ? WISP_OK : wisp_fail(WISP_EFORMAT, "%s: malformed JSON", path);
}

wisp_status wisp_tok_settings_for_artifact(const char *dir, const cJSON *manifest, const wisp_tokenizer *t,
                                           wisp_tok_settings *out) {
  char cfg_path[4200], gen_path[4200], tok_path[4200];
  cJSON *cfg = NULL, *gen = NULL;
  wisp_status st = WISP_OK;
  if (wisp_tokenizer_artifact_file(dir, manifest, "config", cfg_path, sizeof cfg_path)) st = read_json(cfg_path, &cfg);
  if (!st && wisp_tokenizer_artifact_file(dir, manifest, "generation", gen_path, sizeof gen_path))
    st = read_json(gen_path, &gen);
  if (!wisp_tokenizer_artifact_file(dir, manifest, "tokenizer", tok_path, sizeof tok_path))
    snprintf(tok_path, sizeof tok_path, "%s", dir);
  if (!st) st = wisp_tok_settings_from_json(t, cfg, gen, tok_path, out);
  cJSON_Delete(cfg);
  cJSON_Delete(gen);
  return st;
}

void wisp_tok_settings_free(wisp_tok_settings *s) {
  free(s->chat_template);
  s->chat_template = NULL;
}
