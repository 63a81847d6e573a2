/* wisp info [-m DIR | DIR] [--verify]: open an artifact, bind it to its
 * architecture (which checks every section's size and digest) and its
 * tokenizer, and print a summary;
 * --verify also recomputes sha256 of weights.bin against the manifest. */
#include <cJSON.h>
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "format/gguf_artifact.h"
#include "format/weight_source.h"
#include "engine/engine.h"
#include "tokenizer/tokenizer.h"
#include "util/err.h"
#include "util/file.h"
#include "cli/opts.h"

int cmd_info(int argc, char **argv) {
  const char *dir = NULL, *pos[1];
  int verify = 0, n_pos = 0;
  const cli_opt opts[] = {
      {"-m|--model", CLI_STR, &dir, 0, 0, "DIR", "the model artifact (default: models/default; DIR alone works too)"},
      {"--verify", CLI_FLAG, &verify, 0, 0, NULL, "also check weights.bin's sha256 (wisp verify checks every section)"},
  };
  const cli_spec spec = {"info", "[-m DIR | DIR] [--verify]", "Validates an artifact and prints its shape and sections.",
                         opts, (int)(sizeof opts / sizeof opts[0]), pos, 1, &n_pos};
  int pr = cli_parse(&spec, argc, argv);
  if (pr != CLI_CONTINUE) return pr;
  if (n_pos && dir) { fprintf(stderr, "wisp info: give the model once (-m DIR or DIR)\n"); return 2; }
  if (n_pos) dir = pos[0];
  if (!dir && !(dir = cli_default_model())) return cli_error("info");
  wisp_model *m = NULL;
  if (wisp_model_open(dir, &m)) return cli_error("info");
  const wisp_artifact *a = m->artifact;
  const wisp_shape *s = &a->shape;
  int n_attn = 0, n_lin = 0;
  for (int i = 0; i < s->n_layers; i++) {
    n_attn += s->layer_types[i] == WISP_LAYER_ATTENTION;
    n_lin += s->layer_types[i] == WISP_LAYER_LINEAR;
  }
  printf("artifact:     %s\n", dir);
  if (n_lin)
    printf("architecture: %s (%d layers: %d linear_attention, %d full_attention)\n", a->architecture, s->n_layers,
           n_lin, n_attn);
  else
    printf("architecture: %s (%d layers: %d conv, %d attention)\n", a->architecture, s->n_layers,
           s->n_layers - n_attn, n_attn);
  printf("shape:        hidden %d, ffn %d, vocab %d, heads %d/%d kv, head_dim %d, conv %d\n", s->hidden, s->ffn,
         s->vocab, s->heads, s->kv_heads, s->head_dim, s->conv_cache);
  if (!strcmp(a->architecture, "qwen3_5"))
    printf("linear:       %d key / %d value heads, dims %d/%d; rotary dims %d\n", s->lin_k_heads, s->lin_v_heads,
           s->lin_k_dim, s->lin_v_dim, s->rotary_dim);
  printf("weights:      %llu bytes in %d sections, context %d\n", (unsigned long long)a->weight_bytes,
         a->n_sections, m->arch->max_positions(m->weights));
  int rc = 0;
  /* The tokenizer is loaded as run would load it: a broken tokenizer.json
   * fails info too. */
  wisp_tokenizer *tok = NULL;
  if (wisp_tokenizer_for_artifact(a->dir, a->tokenizer, a->manifest, wisp_model_vocab(m), &tok)) {
    cli_error("info");
    wisp_model_close(m);
    return 1;
  }
  printf("tokenizer:    %s\n", wisp_tokenizer_kind(tok));
  wisp_tokenizer_free(tok);
  if (a->gguf)
    printf("source:       GGUF v%u, %llu tensors, run in place (%.1f MB mapped, %.1f MB built at open; wisp plan lists them)\n",
           a->gguf->g->version, (unsigned long long)a->gguf->g->n_tensors, (double)a->gguf->mapped_bytes / 1e6,
           (double)a->gguf->owned_bytes / 1e6);
  if (verify && a->gguf) {
    printf("verify:       a GGUF carries no digests; its structure and every tensor's extent were checked at open\n");
  } else if (verify) {
    const cJSON *ext = cJSON_GetObjectItemCaseSensitive(a->manifest, "wisp");
    const cJSON *want = ext ? cJSON_GetObjectItemCaseSensitive(ext, "weightsSha256") : NULL;
    char got[65];
    if (wisp_weights_sha256_hex(a->weights, a->weights_len, got)) snprintf(got, sizeof got, "(unreadable)");
    if (!cJSON_IsString(want)) {
      fprintf(stderr, "wisp info: %s/manifest.json has no wisp.weightsSha256 to verify against\n", dir);
      rc = 1;
    } else if (strcmp(want->valuestring, got) != 0) {
      fprintf(stderr, "wisp info: %s/weights.bin sha256 %s does not match the manifest's %s\n", dir, got,
              want->valuestring);
      rc = 1;
    } else {
      printf("sha256:       %s (verified)\n", got);
    }
  }
  wisp_model_close(m);
  return rc;
}
