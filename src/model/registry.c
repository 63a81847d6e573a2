/* Architecture lookup by the manifest's wisp.architecture name. */
#include <string.h>

#include "model/model.h"

static const wisp_arch *const k_archs[] = {&wisp_arch_lfm2, &wisp_arch_qwen3_5, &wisp_arch_qwen2, &wisp_arch_gemma3};

const wisp_arch *wisp_arch_find(const char *name) {
  for (size_t i = 0; i < sizeof k_archs / sizeof k_archs[0]; i++)
    if (!strcmp(k_archs[i]->name, name)) return k_archs[i];
  return NULL;
}
