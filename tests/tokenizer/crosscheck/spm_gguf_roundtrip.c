/* A SentencePiece-style tokenizer.json through wisp's GGUF form and back:
 * export's tokenizer.ggml.* arrays (src/format/gguf_spm.c: tokens, scores
 * from the merge ranks, token types, add_space_prefix) written to a GGUF,
 * imported as tokenizer.json again, and both tokenizers run on the corpus.
 *   spm_gguf_roundtrip TOKENIZER.json N_IDS CORPUS WORKDIR
 * Prints "K of N entries differ". Built and run by spm.sh. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "format/gguf.h"
#include "format/gguf_import.h"
#include "format/gguf_spm.h"
#include "tokenizer/tokenizer.h"
#include "util/file.h"

int main(int argc, char **argv) {
  if (argc != 5) return fprintf(stderr, "usage: %s TOKENIZER.json N_IDS CORPUS WORKDIR\n", argv[0]), 2;
  char *text = NULL, *corpus = NULL, path[4200];
  if (wisp_read_file(argv[1], &text, NULL) || wisp_read_file(argv[3], &corpus, NULL))
    return fprintf(stderr, "%s\n", wisp_last_error()), 1;
  cJSON *root = cJSON_Parse(text);
  wisp_spm_vocab v;
  const int n = atoi(argv[2]);
  if (!root || wisp_spm_vocab_from_json(root, n, argv[1], &v)) return fprintf(stderr, "%s\n", wisp_last_error()), 1;
  wisp_gguf_writer *w = wisp_gguf_writer_new();
  wisp_gguf_put_str(w, "tokenizer.ggml.model", "llama");
  wisp_gguf_put_arr_str(w, "tokenizer.ggml.tokens", v.tokens, (uint64_t)n);
  wisp_gguf_put_arr_f32(w, "tokenizer.ggml.scores", v.scores, (uint64_t)n);
  wisp_gguf_put_arr_i32(w, "tokenizer.ggml.token_type", v.types, (uint64_t)n);
  wisp_gguf_put_bool(w, "tokenizer.ggml.add_space_prefix", v.add_space_prefix);
  snprintf(path, sizeof path, "%s/vocab.gguf", argv[4]);
  wisp_gguf *g = NULL;
  int written = 0;
  if (wisp_gguf_writer_write(w, path) || wisp_gguf_open(path, &g) || wisp_gguf_write_tokenizer(g, argv[4], &written))
    return fprintf(stderr, "%s\n", wisp_last_error()), 1;
  wisp_tokenizer *a = NULL, *b = NULL;
  snprintf(path, sizeof path, "%s/tokenizer.json", argv[4]);
  if (wisp_tokenizer_from_file(argv[1], &a) || wisp_tokenizer_from_file(path, &b))
    return fprintf(stderr, "%s\n", wisp_last_error()), 1;
  int bad = 0, count = 0;
  for (char *p = corpus, *e; *p && (e = strchr(p, '\n')); p = e + 1) {
    *e = 0;
    char *o = p; /* corpus.txt's escapes: \\ \n \r */
    for (char *q = p; *q; q++) {
      if (*q == '\\' && (q[1] == 'n' || q[1] == 'r' || q[1] == '\\')) {
        *o++ = q[1] == 'n' ? '\n' : q[1] == 'r' ? '\r' : '\\';
        q++;
      } else {
        *o++ = *q;
      }
    }
    int32_t *x = NULL, *y = NULL;
    int nx = -1, ny = -2;
    wisp_tokenizer_encode_n(a, p, (size_t)(o - p), 0, &x, &nx);
    wisp_tokenizer_encode_n(b, p, (size_t)(o - p), 0, &y, &ny);
    count++;
    bad += nx != ny || memcmp(x, y, sizeof(int32_t) * (size_t)(nx > 0 ? nx : 0));
    free(x);
    free(y);
  }
  printf("%d of %d entries differ after the GGUF round trip\n", bad, count);
  return bad != 0;
}
