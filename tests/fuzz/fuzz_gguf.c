/* libFuzzer harness: the GGUF reader, dequantization, the import mapping
 * (tensors to HF names, hyperparameters) and the in-place open (`-m
 * FILE.gguf`: sections built from the tensors, the derived manifest, the
 * tokenizer held in memory) on arbitrary bytes. */
#include <stdint.h>
#include <stdlib.h>

#include "format/artifact.h"
#include "format/gguf.h"
#include "format/gguf_artifact.h"
#include "format/gguf_import.h"
#include "format/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  wisp_gguf *g = NULL;
  if (wisp_gguf_parse(data, size, "fuzz.gguf", &g)) return 0;
  for (uint64_t i = 0; i < g->n_tensors; i++) {
    const wisp_gguf_tensor *t = &g->tensors[i];
    if (t->numel > (1u << 20)) continue;
    float *out = malloc((size_t)t->numel * sizeof(float) + 1);
    if (out) wisp_gguf_read_f32(g, t, out);
    free(out);
  }
  int64_t v;
  double d;
  wisp_gguf_get_int(g, "lfm2.block_count", &v);
  wisp_gguf_get_float(g, "lfm2.rope.freq_base", &d);
  const wisp_gguf_kv *kv = wisp_gguf_kv_find(g, "lfm2.attention.head_count_kv");
  if (kv) for (uint64_t i = 0; i < kv->n && i < 64; i++) (void)wisp_gguf_arr_int(kv, i);
  wisp_gguf_model m = {0};
  wisp_safetensors *st = NULL;
  uint64_t total = 0;
  for (uint64_t i = 0; i < g->n_tensors; i++) total += g->tensors[i].numel;
  if (total < (1u << 22) && !wisp_gguf_import(g, &m, &st)) wisp_safetensors_close(st);
  wisp_gguf_model_free(&m);
  wisp_gguf_close(g);
  /* the in-place open parses again: it takes ownership of its own g */
  wisp_artifact *a = NULL;
  if (total < (1u << 22) && !wisp_gguf_parse(data, size, "fuzz.gguf", &g) && !wisp_gguf_artifact_from(g, &a)) {
    for (int i = 0; i < a->n_sections; i++) {
      const uint8_t *p = wisp_section_data(a, &a->sections[i]);
      volatile uint8_t sink = a->sections[i].bytes && p ? p[a->sections[i].bytes - 1] : 0; /* inside its buffer */
      (void)sink;
    }
    wisp_artifact_free(a);
  }
  return 0;
}
