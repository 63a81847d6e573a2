/* libFuzzer harness: a GGUF's tokenizer.ggml.* vocabulary (SentencePiece
 * `llama`: tokens, scores, token types, add_space_prefix) turned into
 * tokenizer.json (src/format/gguf_spm.c), loaded as a tokenizer, then encode
 * + decode of a fixed text. */
#include <stdint.h>
#include <stdlib.h>

#include <cJSON.h>

#include "format/gguf.h"
#include "format/gguf_spm.h"
#include "tokenizer/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  wisp_gguf *g = NULL;
  if (wisp_gguf_parse(data, size, "fuzz.gguf", &g)) return 0;
  const wisp_gguf_kv *tok = wisp_gguf_kv_find(g, "tokenizer.ggml.tokens");
  const wisp_gguf_kv *typ = wisp_gguf_kv_find(g, "tokenizer.ggml.token_type");
  if (typ && (typ->type != WISP_GGUF_ARRAY || !typ->arr || !tok || typ->n != tok->n)) typ = NULL;
  cJSON *root = NULL;
  if (tok && tok->type == WISP_GGUF_ARRAY && tok->arr_type == WISP_GGUF_STRING && tok->n < 4096 &&
      !wisp_gguf_spm_json(g, tok, typ, &root)) {
    char *json = cJSON_PrintUnformatted(root);
    wisp_tokenizer *t = NULL;
    if (json && !wisp_tokenizer_from_json(json, "fuzz", &t)) {
      int32_t *ids = NULL;
      int n = 0;
      if (!wisp_tokenizer_encode(t, "Hello,  w\xc3\xb6rld! \xf0\x9f\xa6\x99 </s>x\n\t", &ids, &n)) {
        char *s = NULL;
        size_t len;
        if (!wisp_tokenizer_decode(t, ids, n, &s, &len)) free(s);
        free(ids);
      }
      wisp_tokenizer_free(t);
    }
    free(json);
    cJSON_Delete(root);
  }
  wisp_gguf_close(g);
  return 0;
}
