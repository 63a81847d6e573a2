/* libFuzzer harness: tokenizer.json loading (BPE model, pre-tokenizers,
 * normalizers, post-processor, added tokens), then encode + decode. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  if (!text) return 0;
  memcpy(text, data, size);
  text[size] = 0;
  wisp_tokenizer *t = NULL;
  if (!wisp_tokenizer_from_json(text, "fuzz.json", &t)) {
    int32_t *ids = NULL;
    int n = 0;
    if (!wisp_tokenizer_encode(t, "Hello, world! 123 caf\xc3\xa9 \n\n  x", &ids, &n)) {
      char *s = NULL;
      size_t len = 0;
      if (!wisp_tokenizer_decode(t, ids, n, &s, &len)) free(s);
      free(ids);
    }
    wisp_tokenizer_free(t);
  }
  free(text);
  return 0;
}
