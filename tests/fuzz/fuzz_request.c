/* libFuzzer harness: the request bodies of `wisp serve` (src/server/request.c).
 * The first byte picks the endpoint (even: chat, odd: completions); the rest
 * is the body, passed with its length and without a NUL at the end (as the
 * HTTP layer hands it over). An accepted request must hold what the
 * validation promises; an error must name a status and carry a message. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/request.h"
#include "server/response.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  const srv_kind kind = data[0] & 1 ? SRV_COMPLETION : SRV_CHAT;
  char *body = malloc(size - 1 ? size - 1 : 1); /* exact size: ASan sees any read past the body */
  if (!body) return 0;
  memcpy(body, data + 1, size - 1);
  srv_request r;
  srv_error e;
  if (srv_request_parse(body, size - 1, kind, &r, &e) == 0) {
    if (r.n < 1 || r.n > SRV_MAX_N || r.n_stop > SRV_MAX_STOP || r.top_logprobs < 0 ||
        r.top_logprobs > SRV_MAX_TOP_LOGPROBS || (r.max_tokens != -1 && r.max_tokens < 1) ||
        !(r.temperature >= 0 && r.temperature <= 2) || !(r.top_p >= 0 && r.top_p <= 1))
      abort();
    if (kind == SRV_CHAT ? r.n_messages < 1 : (r.n_prompts < 1 || r.n_prompts > SRV_MAX_PROMPTS)) abort();
    for (int i = 0; i < r.n_messages; i++) (void)strlen(r.messages[i].content);
    for (int i = 0; i < r.n_stop; i++)
      if (!r.stop[i][0]) abort();
    srv_request_free(&r);
  } else {
    if (e.status < 400 || e.status > 599 || !e.message[0] || !e.type) abort();
    char *json = srv_error_json(&e);
    free(json);
  }
  free(body);
  return 0;
}
