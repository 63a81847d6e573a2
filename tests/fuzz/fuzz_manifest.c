/* libFuzzer harness: manifest.json parsing and structural validation. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "format/artifact.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  if (!text) return 0;
  memcpy(text, data, size);
  text[size] = 0;
  wisp_artifact *a = NULL;
  if (!wisp_manifest_parse(text, "fuzz.json", &a)) {
    for (int i = 0; i < a->n_sections; i++) (void)wisp_artifact_section(a, a->sections[i].name);
    wisp_artifact_free(a);
  }
  free(text);
  return 0;
}
