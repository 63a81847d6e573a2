/* libFuzzer harness: generation_config.json, as wisp reads it: stop tokens
 * (eos_token_id an integer or a list, ids range-checked), and the settings
 * export-gguf writes (eos and extra stop ids, bos_token_id, pad_token_id),
 * beside a fixed LFM2-style tokenizer_config.json. */
#include "fuzz_chat_fixture.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static cJSON *cfg;
  if (!cfg)
    cfg = cJSON_Parse("{\"bos_token\": \"<|startoftext|>\", \"eos_token\": {\"content\": \"<|im_end|>\"},"
                      " \"chat_template\": \"{{ bos_token }}<|im_start|>\"}");
  wisp_tokenizer *t = fx_tokenizer();
  char *text = fx_text(data, size);
  if (!text) return 0;
  cJSON *gen = cJSON_Parse(text);
  free(text);
  if (!gen) return 0;
  wisp_chat_info ci;
  wisp_tok_settings ts;
  if (!wisp_chat_info_from_json(cfg, gen, "fuzz.json", t, &ci)) {
    if (!wisp_tok_settings_from_json(t, cfg, gen, "fuzz", &ts)) {
      fx_check_ids(t, &ci, &ts);
      /* the config's eos_token is a stop token whatever the generation config says */
      if (!wisp_chat_is_stop(&ci, wisp_tokenizer_token_id(t, "<|im_end|>"))) abort();
      wisp_tok_settings_free(&ts);
    }
  }
  cJSON_Delete(gen);
  return 0;
}
