/* tokenizer_config.json / generation_config.json as chat reads them
 * (tokenizer/chat.h): regressions found by fuzz_generation_config. A long
 * eos_token_id list used to fill the stop list (16) before the template's
 * own end token was added, so generation ran past <|im_end|>; a fractional
 * id (43.6) was truncated to a stop token (43). */
#include <stdio.h>
#include <string.h>

#include <cJSON.h>

#include "fixtures.h"
#include "test.h"
#include "tokenizer/chat.h"
#include "tokenizer/tokenizer.h"
#include "wisp.h"

/* 256 byte tokens, then <|im_start|> 256 and <|im_end|> 257. */
static wisp_tokenizer *chat_tokenizer(void) {
  static char json[16384];
  size_t at = (size_t)snprintf(json, sizeof json, "{\"model\": {\"type\": \"BPE\", \"merges\": [], \"vocab\": {");
  for (int b = 0; b < 256; b++) /* printable ASCII letters only need to exist as ids; names are unique */
    at += (size_t)snprintf(json + at, sizeof json - at, "%s\"t%d\": %d", b ? ", " : "", b, b);
  snprintf(json + at, sizeof json - at,
           "}}, \"pre_tokenizer\": {\"type\": \"ByteLevel\"}, \"added_tokens\": ["
           "{\"id\": 256, \"content\": \"<|im_start|>\", \"special\": true},"
           "{\"id\": 257, \"content\": \"<|im_end|>\", \"special\": true}]}");
  wisp_tokenizer *t = NULL;
  return wisp_tokenizer_from_json(json, "chat-test", &t) ? NULL : t;
}

static wisp_status load(const wisp_tokenizer *t, const char *cfg_text, const char *gen_text, wisp_chat_info *out) {
  cJSON *cfg = cJSON_Parse(cfg_text), *gen = cJSON_Parse(gen_text);
  wisp_status st = wisp_chat_info_from_json(cfg, gen, "generation_config.json", t, out);
  cJSON_Delete(cfg);
  cJSON_Delete(gen);
  return st;
}

TEST(chat_long_eos_list_keeps_template_end_token) {
  wisp_tokenizer *t = chat_tokenizer();
  CHECKF(t, "%s", wisp_last_error());
  const char *cfg = "{\"eos_token\": \"<|im_end|>\", \"chat_template\": \"<|im_start|>\"}";
  wisp_chat_info ci;
  /* 15 distinct ids fit beside <|im_end|>, and <|im_end|> is a stop */
  char gen[512] = "{\"eos_token_id\": [";
  for (int i = 0; i < 15; i++) snprintf(gen + strlen(gen), sizeof gen - strlen(gen), "%s%d", i ? "," : "", 100 + i);
  strcat(gen, ", 100, 100, -1]}");
  wisp_status st = load(t, cfg, gen, &ci);
  int ok = st == WISP_OK && ci.n_stop == 16 && wisp_chat_is_stop(&ci, 257) && wisp_chat_is_stop(&ci, 114);
  /* one more distinct id: a one-line error, never a silently dropped stop */
  char gen2[600];
  snprintf(gen2, sizeof gen2, "%.*s, 200]}", (int)(strlen(gen) - 2), gen);
  wisp_status st2 = load(t, cfg, gen2, &ci);
  const char *msg = wisp_last_error();
  int ok2 = st2 == WISP_EFORMAT && strstr(msg, "more stop tokens") && !strchr(msg, '\n');
  /* fractional and non-numeric ids are errors, not truncated */
  int ok3 = load(t, cfg, "{\"eos_token_id\": 43.6}", &ci) == WISP_EFORMAT &&
            load(t, cfg, "{\"eos_token_id\": [2, \"x\"]}", &ci) == WISP_EFORMAT &&
            load(t, cfg, "{\"eos_token_id\": [2, 3e12]}", &ci) == WISP_EFORMAT &&
            load(t, cfg, "{\"eos_token_id\": [2, 1e0]}", &ci) == WISP_OK && wisp_chat_is_stop(&ci, 1);
  wisp_tokenizer_free(t);
  CHECKF(ok, "15 ids + <|im_end|>: st %d, %d stops", st, ci.n_stop);
  CHECKF(ok2, "16 ids: st %d: %s", st2, msg);
  CHECK(ok3);
}

/* A Llama 3 file whose eos is the base model's <|end_of_text|>: its
 * template's turn end <|eot_id|> (and <|eom_id|>) still end a reply, as in
 * llama.cpp; a vocab piece that only reads "<|end|>" and is not special
 * does not. */
TEST(chat_turn_end_tokens_stop_when_special) {
  static char json[16384];
  fixture_byte_bpe_json(json, sizeof json, ", \"<|end|>\": 258",
                        "{\"id\": 256, \"content\": \"<|eot_id|>\", \"special\": true},"
                        "{\"id\": 257, \"content\": \"<|eom_id|>\", \"special\": true},"
                        "{\"id\": 259, \"content\": \"<|end_of_text|>\", \"special\": true}");
  wisp_tokenizer *t = NULL;
  CHECKF(wisp_tokenizer_from_json(json, "llama3-chat-test", &t) == WISP_OK, "%s", wisp_last_error());
  wisp_chat_info ci;
  wisp_status st = load(t, "{\"eos_token\": \"<|end_of_text|>\", \"chat_template\": \"x\"}", "{\"eos_token_id\": 259}", &ci);
  int eot = wisp_chat_is_stop(&ci, 256), eom = wisp_chat_is_stop(&ci, 257), end = wisp_chat_is_stop(&ci, 258);
  int eos = wisp_chat_is_stop(&ci, 259), n = ci.n_stop;
  wisp_tokenizer_free(t);
  CHECKF(st == WISP_OK && eot && eom && eos && !end && n == 3, "st %d: <|eot_id|> %d, <|eom_id|> %d, <|end_of_text|> %d, "
         "<|end|> %d, %d stops", st, eot, eom, eos, end, n);
}
