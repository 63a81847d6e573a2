/* llama_logits: llama.cpp's logits of token-id prompts, as `wisp logits`
 * writes them, so that tests/parity/compare.py checks wisp against llama.cpp
 * on the same GGUF file (the second oracle beside transformers).
 *
 *   llama_logits MODEL.gguf PROMPTS.txt GREEDY_PROMPT N > OUT.json
 *
 * PROMPTS.txt: one prompt a line, its token ids separated by commas (made
 * from a prompts.json by tools/device.sh). Each prompt runs in a fresh
 * context on the CPU (a CUDA build offloads nothing), with f32 K/V caches
 * and no flash attention, so that the cache rounds nothing; the last
 * position's logits are printed. On an f32 file its floor against an exact
 * forward is about 7e-4 of max|logit| even for a one-token prompt (ggml's
 * CPU GELU), under compare.py's 1e-3. Then prompt
 * GREEDY_PROMPT is continued for N tokens by argmax (lowest id on a tie).
 * Output: {"logits": [[...], ...], "greedy": [...]} on stdout.
 * Built by the caller against the llama.cpp tree it is given (include/ and
 * ggml/include/) and its libllama, as llama_greedy.c is. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"

enum { MAX_PROMPTS = 16, MAX_IDS = 8192 };

static void quiet(enum ggml_log_level level, const char *text, void *user) {
  (void)user;
  if (level == GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

/* Prompts from the file: n[i] ids each; returns the count, -1 on a bad file. */
static int read_prompts(const char *path, llama_token **ids, int *n) {
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  static char line[MAX_IDS * 12];
  int count = 0;
  while (count < MAX_PROMPTS && fgets(line, sizeof line, f)) {
    ids[count] = malloc(sizeof(llama_token) * MAX_IDS);
    if (!ids[count]) break;
    n[count] = 0;
    for (char *s = strtok(line, ", \n"); s && n[count] < MAX_IDS; s = strtok(NULL, ", \n"))
      ids[count][n[count]++] = (llama_token)atoi(s);
    if (n[count] > 0) count++;
    else free(ids[count]);
  }
  fclose(f);
  return count;
}

static struct llama_context *fresh_context(struct llama_model *model, int positions) {
  struct llama_context_params cp = llama_context_default_params();
  cp.n_ctx = (uint32_t)positions;
  cp.n_batch = cp.n_ctx;
  cp.n_ubatch = cp.n_ctx;
  cp.type_k = GGML_TYPE_F32;
  cp.type_v = GGML_TYPE_F32;
  cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  cp.op_offload = false; /* a CUDA build computes on the CPU too: one oracle, whatever the build */
  return llama_init_from_model(model, cp);
}

static int argmax(const float *v, int n) {
  int best = 0;
  for (int i = 1; i < n; i++)
    if (v[i] > v[best]) best = i;
  return best;
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: llama_logits MODEL.gguf PROMPTS.txt GREEDY_PROMPT N\n");
    return 2;
  }
  const int k = atoi(argv[3]), n_gen = atoi(argv[4]);
  llama_token *ids[MAX_PROMPTS];
  int n[MAX_PROMPTS];
  const int count = read_prompts(argv[2], ids, n);
  if (count <= 0 || k < 0 || k >= count || n_gen < 0) {
    fprintf(stderr, "llama_logits: %s: no usable prompts (or greedy prompt %d out of range)\n", argv[2], k);
    return 1;
  }
  llama_log_set(quiet, NULL);
  llama_backend_init();
  struct llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  struct llama_model *model = llama_model_load_from_file(argv[1], mp);
  if (!model) {
    fprintf(stderr, "llama_logits: cannot load %s\n", argv[1]);
    return 1;
  }
  const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
  printf("{\"logits\": [");
  for (int p = 0; p < count; p++) {
    struct llama_context *ctx = fresh_context(model, n[p] + 8);
    if (!ctx || llama_decode(ctx, llama_batch_get_one(ids[p], n[p]))) {
      fprintf(stderr, "llama_logits: prompt %d (%d ids) did not run\n", p, n[p]);
      return 1;
    }
    const float *lg = llama_get_logits_ith(ctx, -1);
    printf(p ? ",\n[" : "\n[");
    for (int v = 0; v < n_vocab; v++) printf(v ? ",%.9g" : "%.9g", lg[v]);
    printf("]");
    llama_free(ctx);
  }
  printf("],\n\"greedy\": [");
  struct llama_context *ctx = fresh_context(model, n[k] + n_gen + 8);
  llama_token *feed = ids[k], next;
  int n_feed = n[k];
  for (int g = 0; g < n_gen; g++) {
    if (!ctx || llama_decode(ctx, llama_batch_get_one(feed, n_feed))) {
      fprintf(stderr, "llama_logits: greedy step %d did not run\n", g);
      return 1;
    }
    next = (llama_token)argmax(llama_get_logits_ith(ctx, -1), n_vocab);
    printf(g ? ", %d" : "%d", next);
    feed = &next;
    n_feed = 1;
  }
  printf("],\n\"source\": {\"reference\": \"llama.cpp (tests/parity/llama_logits.c)\", \"gguf\": \"%s\"}}\n", argv[1]);
  llama_free(ctx);
  llama_model_free(model);
  for (int p = 0; p < count; p++) free(ids[p]);
  return 0;
}
