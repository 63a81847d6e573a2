/* libFuzzer harness: the safetensors reader (header JSON, offsets, dtypes)
 * and f32 conversion, on arbitrary bytes written to a scratch file. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "format/safetensors.h"
#include "util/file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char path[64];
  snprintf(path, sizeof path, "/tmp/wisp-fuzz-st-%d.safetensors", (int)getpid());
  if (wisp_write_file_atomic(path, data, size)) return 0;
  wisp_safetensors *st = NULL;
  if (!wisp_safetensors_open_file(path, &st)) {
    for (int i = 0; i < st->n_tensors; i++) {
      const wisp_st_tensor *t = &st->tensors[i];
      if (t->numel > (1u << 20)) continue;
      float *out = malloc((size_t)t->numel * sizeof(float) + 1);
      if (out) wisp_safetensors_read_f32(st, t, out);
      free(out);
      (void)wisp_safetensors_find(st, t->name);
    }
    wisp_safetensors_close(st);
  }
  unlink(path);
  return 0;
}
