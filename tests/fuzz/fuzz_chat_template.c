/* libFuzzer harness: chat templates. The input is split at NUL bytes into
 * the chat_template text, a bos_token, and message contents (alternating
 * user / assistant after an optional system message); the template is
 * detected, the conversation and its turns rendered with it, encoded and
 * decoded back (byte for byte). The first byte's low bit turns thinking on. */
#include "fuzz_chat_fixture.h"

enum { MAX_PARTS = 8 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  wisp_tokenizer *t = fx_tokenizer();
  if (size < 1) return 0;
  int think = data[0] & 1;
  char *text = fx_text(data + 1, size - 1);
  if (!text) return 0;
  const char *parts[MAX_PARTS];
  int n = 0;
  for (char *p = text; n < MAX_PARTS;) {
    parts[n++] = p;
    char *end = memchr(p, 0, (size_t)(text + size - 1 - p));
    if (!end) break;
    p = end + 1;
    if (p > text + size - 1) break;
  }
  cJSON *cfg = cJSON_CreateObject();
  cJSON_AddStringToObject(cfg, "chat_template", parts[0]);
  if (n > 1) cJSON_AddStringToObject(cfg, "bos_token", parts[1]);
  wisp_chat_template kind = wisp_chat_detect(cfg);
  wisp_chat_message m[MAX_PARTS];
  int nm = 0;
  for (int i = 2; i < n; i++) {
    const char *role = i == 2 && (data[0] & 2) ? "system" : (i % 2 ? "assistant" : "user");
    m[nm++] = (wisp_chat_message){role, parts[i]};
  }
  fx_render_and_encode(t, kind, m, nm, think);
  cJSON_Delete(cfg);
  free(text);
  return 0;
}
