/* libFuzzer harness: chat templates through wisp's Jinja renderer
 * (tokenizer/jinja.h, tokenizer/chat_template.h). The input is split at NUL
 * bytes into the template text, a bos_token, and message contents
 * (alternating user / assistant after an optional system message). The
 * template is parsed; the conversation, its turns, and a request with
 * content parts, tools and continue_final_message are rendered; every
 * rendering is encoded and decoded back byte for byte. Any input must end in
 * text or a one-line error, within the renderer's limits. The first byte:
 * bit 0 thinking, bit 1 a system message first, bit 2 content as parts. */
#include "fuzz_chat_fixture.h"

enum { MAX_PARTS = 8 };

static void render_request(const wisp_tokenizer *t, const wisp_chat_tmpl *tm, const wisp_chat_message *m, int n,
                           int parts) {
  cJSON *req = cJSON_CreateObject(), *list = cJSON_AddArrayToObject(req, "messages");
  for (int i = 0; i < n; i++) {
    cJSON *x = cJSON_CreateObject();
    cJSON_AddStringToObject(x, "role", m[i].role);
    if (parts) {
      cJSON *p = cJSON_AddArrayToObject(x, "content"), *part = cJSON_CreateObject();
      cJSON_AddStringToObject(part, "type", "text");
      cJSON_AddStringToObject(part, "text", m[i].content);
      cJSON_AddItemToArray(p, part);
    } else cJSON_AddStringToObject(x, "content", m[i].content);
    cJSON_AddItemToArray(list, x);
  }
  cJSON *tools = cJSON_Parse("[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"description\": \"d\\u00e9\", "
                             "\"parameters\": {\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"integer\"}}}}}]");
  cJSON_AddItemToObject(req, "tools", tools);
  cJSON_AddBoolToObject(req, "continue_final_message", n > 0);
  char *out = NULL;
  wisp_status st = wisp_chat_tmpl_render(tm, req, 1721990000, &out);
  if (!st == !out) abort();
  if (st && strchr(wisp_last_error(), '\n')) abort(); /* errors are one line */
  if (out) {
    fx_encode_text(t, out);
    free(out);
  }
  cJSON_Delete(req);
}

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
  wisp_chat_tmpl *tm = NULL;
  if (wisp_chat_tmpl_new(parts[0], n > 1 ? parts[1] : NULL, "</s>", "fuzz", &tm)) {
    if (strchr(wisp_last_error(), '\n')) abort();
    free(text);
    return 0;
  }
  wisp_chat_message m[MAX_PARTS];
  int nm = 0;
  for (int i = 2; i < n; i++) {
    const char *role = i == 2 && (data[0] & 2) ? "system" : (i % 2 ? "assistant" : "user");
    m[nm++] = (wisp_chat_message){role, parts[i]};
  }
  fx_render_and_encode(t, tm, m, nm, think);
  render_request(t, tm, m, nm, data[0] & 4);
  wisp_chat_tmpl_free(tm);
  free(text);
  return 0;
}
