/* wisp verify [-m DIR | DIR]: re-hashes every section of weights.bin and the whole file
 * against the digests the writer recorded (runtime.sections[i].sha256,
 * wisp.weightsSha256). Prints one line per problem (mismatch or missing
 * digest) and exits 1 if there was any, 0 with a summary line otherwise. */
#include <cJSON.h>
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "format/artifact.h"
#include "format/gguf_artifact.h"
#include "format/weight_source.h"
#include "tokenizer/tokenizer.h"
#include "util/err.h"
#include "util/file.h"
#include "cli/opts.h"

int cmd_verify(int argc, char **argv) {
  const char *dir = NULL, *pos[1];
  int n_pos = 0;
  const cli_opt opts[] = {
      {"-m|--model", CLI_STR, &dir, 0, 0, "DIR", "the model artifact (default: models/default; DIR alone works too)"},
  };
  const cli_spec spec = {"verify", "[-m DIR | DIR]",
                         "Re-hashes every section of weights.bin and the whole file against the manifest's sha256s, and parses the tokenizer.",
                         opts, 1, pos, 1, &n_pos};
  int pr = cli_parse(&spec, argc, argv);
  if (pr != CLI_CONTINUE) return pr;
  if (n_pos && dir) { fprintf(stderr, "wisp verify: give the model once (-m DIR or DIR)\n"); return 2; }
  if (n_pos) dir = pos[0];
  if (!dir && !(dir = cli_default_model())) return cli_error("verify");
  wisp_artifact *a = NULL;
  if (wisp_artifact_open(dir, &a)) return cli_error("verify");
  if (a->gguf) {
    /* A GGUF has no digests: opening it checked its structure, that every
     * tensor's data lies within the file, and the derived manifest. */
    printf("%s: GGUF v%u, %llu tensors, every one's data within the file (%zu bytes); %d sections derived "
           "(%.1f MB mapped, %.1f MB built at open); a GGUF carries no digests to check\n",
           dir, a->gguf->g->version, (unsigned long long)a->gguf->g->n_tensors, a->gguf->g->len, a->n_sections,
           (double)a->gguf->mapped_bytes / 1e6, (double)a->gguf->owned_bytes / 1e6);
    wisp_tokenizer *tok = NULL;
    int bad = wisp_tokenizer_for_artifact(a->dir, a->tokenizer, a->manifest, a->shape.vocab, &tok) != WISP_OK;
    if (bad) fprintf(stderr, "wisp verify: %s\n", wisp_last_error());
    wisp_tokenizer_free(tok);
    wisp_artifact_free(a);
    return bad;
  }
  int problems = 0;
  const cJSON *secs = cJSON_GetObjectItemCaseSensitive(a->runtime, "sections");
  int i = 0;
  const cJSON *e;
  cJSON_ArrayForEach(e, secs) {
    const wisp_section *s = &a->sections[i++];
    const cJSON *want = cJSON_GetObjectItemCaseSensitive(e, "sha256");
    if (!cJSON_IsString(want)) {
      fprintf(stderr, "wisp verify: %s: section '%s' has no sha256 in the manifest\n", dir, s->name);
      problems++;
      continue;
    }
    char got[65];
    if (wisp_weights_sha256_hex(wisp_section_data(a, s), (size_t)s->bytes, got)) snprintf(got, sizeof got, "(unreadable)");
    if (strcmp(got, want->valuestring)) {
      fprintf(stderr, "wisp verify: %s: section '%s' sha256 %s does not match the manifest's %s\n", dir, s->name,
              got, want->valuestring);
      problems++;
    }
  }
  const cJSON *ext = cJSON_GetObjectItemCaseSensitive(a->manifest, "wisp");
  const cJSON *want = cJSON_GetObjectItemCaseSensitive(ext, "weightsSha256");
  char got[65];
  if (wisp_weights_sha256_hex(a->weights, a->weights_len, got)) snprintf(got, sizeof got, "(unreadable)");
  if (!cJSON_IsString(want)) {
    fprintf(stderr, "wisp verify: %s: manifest has no wisp.weightsSha256\n", dir);
    problems++;
  } else if (strcmp(got, want->valuestring)) {
    fprintf(stderr, "wisp verify: %s: weights.bin sha256 %s does not match the manifest's %s\n", dir, got,
            want->valuestring);
    problems++;
  }
  /* The tokenizer files, parsed as run would: a broken tokenizer.json is a
   * problem too. */
  wisp_tokenizer *tok = NULL;
  if (wisp_tokenizer_for_artifact(a->dir, a->tokenizer, a->manifest, a->shape.vocab, &tok)) {
    fprintf(stderr, "wisp verify: %s\n", wisp_last_error());
    problems++;
  }
  wisp_tokenizer_free(tok);
  int n = a->n_sections;
  wisp_artifact_free(a);
  if (problems) {
    fprintf(stderr, "wisp verify: %s: %d problem%s\n", dir, problems, problems == 1 ? "" : "s");
    return 1;
  }
  printf("%s: %d sections, weights.bin (sha256 %s) and the tokenizer verified\n", dir, n, got);
  return 0;
}
