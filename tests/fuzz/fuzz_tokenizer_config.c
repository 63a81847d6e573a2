/* libFuzzer harness: tokenizer_config.json, as wisp reads it: the chat
 * template's detection (chat_template string or named list, bos_token as a
 * string or {"content": ...}), stop tokens (eos_token), the settings
 * export-gguf writes (bos/eos/pad tokens, chat template), then a chat rendered
 * with its chat template and encoded. */
#include "fuzz_chat_fixture.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  wisp_tokenizer *t = fx_tokenizer();
  char *text = fx_text(data, size);
  if (!text) return 0;
  cJSON *cfg = cJSON_Parse(text);
  free(text);
  if (!cfg) return 0;
  wisp_chat_template kind = wisp_chat_detect(cfg);
  (void)wisp_chat_template_name(kind);
  wisp_chat_info ci;
  wisp_tok_settings ts;
  if (!wisp_chat_info_from_json(cfg, NULL, "gen.json", t, &ci) &&
      !wisp_tok_settings_from_json(t, cfg, NULL, "fuzz", &ts)) {
    fx_check_ids(t, &ci, &ts);
    const wisp_chat_message m[] = {{"system", "Be brief."}, {"user", "Hello \xc3\xa9 <|im_end|>"}};
    wisp_chat_tmpl *tm = NULL;
    if (!wisp_chat_tmpl_from_config(cfg, "fuzz", &tm)) fx_render_and_encode(t, tm, m, 2, size & 1);
    wisp_chat_tmpl_free(tm);
    wisp_tok_settings_free(&ts);
  }
  cJSON_Delete(cfg);
  return 0;
}
