/* llama_greedy: greedy token ids from llama.cpp's library, printed as wisp
 * run --ids prints them, for tests/parity/llama_cpp_greedy.sh.
 *
 *   llama_greedy MODEL.gguf PROMPT N [TOPFILE]
 *
 * The prompt is tokenized as llama.cpp's own tools do (special tokens added
 * as the file says: tokenizer.ggml.add_bos_token ..., special-token text
 * parsed), then N tokens are chosen by argmax of the logits (lowest id on a
 * tie), with no stop token. Output on stdout:
 *   prompt ids: A B C
 *   generated ids: X Y Z
 * With TOPFILE, each step's eight largest logits go there too, a JSON line
 * a step: {"top": [[id, logit], ...], "max_abs": M}, for the summary to
 * tell a near tie from a disagreement where wisp's ids part from these.
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

/* The eight largest logits (descending, ties to the lower id) and max|logit|. */
static void write_top(FILE *f, const float *logits, int n_vocab) {
  int top[8], n = 0;
  float max_abs = 0;
  for (int v = 0; v < n_vocab; v++) {
    float a = logits[v] < 0 ? -logits[v] : logits[v];
    if (a > max_abs) max_abs = a;
    if (n == 8 && logits[v] <= logits[top[7]]) continue;
    int at = n < 8 ? n++ : 7;
    while (at > 0 && logits[top[at - 1]] < logits[v]) { top[at] = top[at - 1]; at--; }
    top[at] = v;
  }
  fprintf(f, "{\"top\": [");
  for (int k = 0; k < n; k++) fprintf(f, "%s[%d, %.9g]", k ? ", " : "", top[k], logits[top[k]]);
  fprintf(f, "], \"max_abs\": %.9g}\n", max_abs);
}

int main(int argc, char **argv) {
  if (argc != 4 && argc != 5) {
    fprintf(stderr, "usage: llama_greedy MODEL.gguf PROMPT N [TOPFILE]\n");
    return 2;
  }
  const char *path = argv[1], *prompt = argv[2];
  int n_gen = atoi(argv[3]);
  FILE *tops = argc == 5 ? fopen(argv[4], "w") : NULL;
  if (argc == 5 && !tops) {
    fprintf(stderr, "llama_greedy: cannot write %s\n", argv[4]);
    return 1;
  }
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
  /* f32 K/V caches (llama.cpp's default is f16) and no flash attention
   * (its CPU kernel rounds q, k and v to f16 whatever the caches hold): on
   * a file dequantized to F32 the whole forward is then f32, as wisp's
   * exact profile is, so the two engines' logits differ by summation order */
  cp.type_k = GGML_TYPE_F32;
  cp.type_v = GGML_TYPE_F32;
  cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
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
    if (tops) write_top(tops, logits, n_vocab);
    ids[n + g] = best;
    feed = &ids[n + g];
    n_feed = 1;
  }
  printf("\n");
  if (tops) fclose(tops);
  llama_free(ctx);
  llama_model_free(model);
  free(ids);
  return 0;
}
