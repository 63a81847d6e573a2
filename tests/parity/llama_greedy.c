/* llama_greedy: greedy token ids from llama.cpp's library, printed as wisp
 * run --ids prints them, for tests/parity/llama_cpp_greedy.sh.
 *
 *   llama_greedy MODEL.gguf PROMPT N
 *
 * The prompt is tokenized as llama.cpp's own tools do (special tokens added
 * as the file says: tokenizer.ggml.add_bos_token ..., special-token text
 * parsed), then N tokens are chosen by argmax of the logits (lowest id on a
 * tie), with no stop token. Output on stdout:
 *   prompt ids: A B C
 *   generated ids: X Y Z
 * Built by the script against the llama.cpp tree it is given (include/ and
 * ggml/include/) and its libllama. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"

static void quiet(enum ggml_log_level level, const char *text, void *user) {
  (void)user;
  if (level == GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: llama_greedy MODEL.gguf PROMPT N\n");
    return 2;
  }
  const char *path = argv[1], *prompt = argv[2];
  int n_gen = atoi(argv[3]);
  llama_log_set(quiet, NULL);
  llama_backend_init();
  struct llama_model *model = llama_model_load_from_file(path, llama_model_default_params());
  if (!model) {
    fprintf(stderr, "llama_greedy: cannot load %s\n", path);
    return 1;
  }
  const struct llama_vocab *vocab = llama_model_get_vocab(model);
  int cap = (int)strlen(prompt) + 16;
  llama_token *ids = malloc(sizeof(llama_token) * (size_t)(cap + n_gen));
  int n = llama_tokenize(vocab, prompt, (int32_t)strlen(prompt), ids, cap, true, true);
  if (!ids || n <= 0) {
    fprintf(stderr, "llama_greedy: cannot tokenize the prompt\n");
    return 1;
  }
  struct llama_context_params cp = llama_context_default_params();
  cp.n_ctx = (uint32_t)(n + n_gen + 8);
  cp.n_batch = cp.n_ctx;
  struct llama_context *ctx = llama_init_from_model(model, cp);
  if (!ctx) {
    fprintf(stderr, "llama_greedy: cannot create a context\n");
    return 1;
  }
  printf("prompt ids:");
  for (int i = 0; i < n; i++) printf(" %d", ids[i]);
  printf("\ngenerated ids:");
  const int n_vocab = llama_vocab_n_tokens(vocab);
  llama_token *feed = ids;
  int n_feed = n;
  for (int g = 0; g < n_gen; g++) {
    if (llama_decode(ctx, llama_batch_get_one(feed, n_feed))) {
      fprintf(stderr, "\nllama_greedy: decode failed\n");
      return 1;
    }
    const float *logits = llama_get_logits_ith(ctx, -1);
    int best = 0;
    for (int v = 1; v < n_vocab; v++)
      if (logits[v] > logits[best]) best = v;
    printf(" %d", best);
    ids[n + g] = best;
    feed = &ids[n + g];
    n_feed = 1;
  }
  printf("\n");
  llama_free(ctx);
  llama_model_free(model);
  free(ids);
  return 0;
}
