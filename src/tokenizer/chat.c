/* Chat configuration; see chat.h. */
#include "tokenizer/chat.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/err.h"
#include "util/file.h"

const char *wisp_chat_template_name(wisp_chat_template kind) {
  switch (kind) {
  case WISP_CHAT_LFM2: return "lfm2";
  case WISP_CHAT_QWEN: return "qwen";
  case WISP_CHAT_CHATML: return "chatml";
  default: return "none";
  }
}

const char *wisp_chat_token_field(const cJSON *cfg, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, key);
  if (cJSON_IsObject(v)) v = cJSON_GetObjectItemCaseSensitive(v, "content");
  return cJSON_IsString(v) ? v->valuestring : NULL;
}

const char *wisp_chat_template_text(const cJSON *cfg) {
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(cfg, "chat_template");
  if (cJSON_IsString(t)) return t->valuestring;
  if (cJSON_IsArray(t)) { /* [{"name": ..., "template": ...}]: the default one */
    const cJSON *e, *first = NULL;
    cJSON_ArrayForEach(e, t) {
      const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "name"), *tt = cJSON_GetObjectItemCaseSensitive(e, "template");
      if (!cJSON_IsString(tt)) continue;
      if (!first) first = tt;
      if (cJSON_IsString(name) && !strcmp(name->valuestring, "default")) return tt->valuestring;
    }
    return first ? first->valuestring : NULL;
  }
  return NULL;
}

wisp_chat_template wisp_chat_detect(const cJSON *cfg) {
  if (!cfg) return WISP_CHAT_NONE;
  const char *t = wisp_chat_template_text(cfg), *bos = wisp_chat_token_field(cfg, "bos_token");
  if (!t) return WISP_CHAT_NONE;
  /* LFM2 first: its BOS is the signature (its templates may mention <think> too). */
  if (strstr(t, "<|startoftext|>") || (bos && !strcmp(bos, "<|startoftext|>") && strstr(t, "bos_token")))
    return WISP_CHAT_LFM2;
  if (strstr(t, "<think>") || strstr(t, "enable_thinking")) return WISP_CHAT_QWEN;
  if (strstr(t, "<|im_start|>")) return WISP_CHAT_CHATML;
  return WISP_CHAT_NONE;
}

/* Adds a stop id once; 0 when the list is full. */
static int add_stop(wisp_chat_info *c, int32_t id) {
  if (id < 0 || wisp_chat_is_stop(c, id)) return 1;
  if (c->n_stop >= WISP_CHAT_MAX_STOP) return 0;
  c->stop[c->n_stop++] = id;
  return 1;
}

/* One eos_token_id value as a stop: an integer id (a negative one means
 * none, as some configs write -1); anything else, or one id too many, is an
 * error naming the file. */
static wisp_status take_eos(wisp_chat_info *c, const cJSON *v, const char *label) {
  double d = cJSON_IsNumber(v) ? v->valuedouble : 0.5;
  if (d != floor(d) || d > 2147483647.0)
    return wisp_fail(WISP_EFORMAT, "%s: eos_token_id must be an integer or a list of integers", label);
  if (d >= 0 && !add_stop(c, (int32_t)d))
    return wisp_fail(WISP_EFORMAT, "%s: eos_token_id lists more stop tokens than wisp keeps (%d)", label,
                     WISP_CHAT_MAX_STOP);
  return WISP_OK;
}

static wisp_status read_json(const char *path, cJSON **out) {
  *out = NULL;
  if (!path) return WISP_OK;
  char *text = NULL;
  wisp_status st = wisp_read_file(path, &text, NULL);
  if (st) return st;
  *out = cJSON_Parse(text);
  free(text);
  if (!*out) return wisp_fail(WISP_EFORMAT, "%s: malformed JSON", path);
  return WISP_OK;
}

wisp_status wisp_chat_info_from_json(const cJSON *cfg, const cJSON *gen, const char *gen_label,
                                    const wisp_tokenizer *t, wisp_chat_info *out) {
  memset(out, 0, sizeof *out);
  out->kind = wisp_chat_detect(cfg);
  /* The template's own end tokens first, so that a long generation_config
   * list can never crowd them out. */
  const char *eos_tok = wisp_chat_token_field(cfg, "eos_token");
  if (eos_tok) add_stop(out, wisp_tokenizer_token_id(t, eos_tok));
  /* The turn ends the families' templates write, where the files name
   * another eos (a base model's, or Gemma's <eos>): as llama.cpp does, a
   * token with one of these texts ends a reply. The shorter, more generic
   * texts count only as special tokens (a vocabulary may hold "<|end|>" as
   * a plain piece); ChatML's and Gemma's have always counted as they are. */
  static const struct {
    const char *text;
    int special_only;
  } turn_ends[] = {
      {"<|im_end|>", 0},    /* ChatML (Qwen) */
      {"<end_of_turn>", 0}, /* Gemma */
      {"<|eot_id|>", 1},    /* Llama 3 */
      {"<|eom_id|>", 1},    /* Llama 3, after a tool call */
      {"<|end|>", 1},       /* Phi-3 */
  };
  for (size_t i = 0; i < sizeof turn_ends / sizeof turn_ends[0]; i++) {
    int32_t id = wisp_tokenizer_token_id(t, turn_ends[i].text);
    if (id >= 0 && (!turn_ends[i].special_only || wisp_tokenizer_is_special(t, id))) add_stop(out, id);
  }
  const cJSON *eos = cJSON_GetObjectItemCaseSensitive(gen, "eos_token_id"), *e;
  if (!eos || cJSON_IsNull(eos)) return WISP_OK;
  if (!cJSON_IsArray(eos)) return take_eos(out, eos, gen_label);
  cJSON_ArrayForEach(e, eos) {
    wisp_status st = take_eos(out, e, gen_label);
    if (st) return st;
  }
  return WISP_OK;
}

wisp_status wisp_chat_load(const char *config_path, const char *generation_path, const wisp_tokenizer *t,
                           wisp_chat_info *out) {
  memset(out, 0, sizeof *out);
  cJSON *cfg = NULL, *gen = NULL;
  wisp_status st;
  if (!(st = read_json(config_path, &cfg)) && !(st = read_json(generation_path, &gen)))
    st = wisp_chat_info_from_json(cfg, gen, generation_path, t, out);
  cJSON_Delete(cfg);
  cJSON_Delete(gen);
  return st;
}

int wisp_chat_is_stop(const wisp_chat_info *c, int32_t id) {
  for (int i = 0; i < c->n_stop; i++)
    if (c->stop[i] == id) return 1;
  return 0;
}
