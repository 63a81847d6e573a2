/* Importing a checkpoint as a wisp artifact (hf_import.c): a Hugging Face
 * directory (config.json + safetensors) of LFM2, Qwen3, Llama or Qwen 3.5
 * (text), or a GGUF file (docs/gguf.md), written through the atomic writer
 * (format/writer.h): the output is complete or untouched. docs/convert.md
 * lists how tensors map to sections. */
#ifndef WISP_FORMAT_HF_IMPORT_H
#define WISP_FORMAT_HF_IMPORT_H

#include "wisp.h"

typedef struct {
  const char *source;  /* HF_DIR, or FILE.gguf */
  const char *out_dir; /* the artifact directory (the caller decides whether an existing one may go) */
  const char *quant;   /* "f32", "q4" (NULL: q4), "q4k", "f16" or "q8_0" */
  int quiet;           /* 0: progress lines on stderr */
  /* A GGUF source: the directory its tokenizer files are written to on the
   * way (created and removed here; the caller may remove it on Ctrl-C). */
  const char *gguf_tokenizer_dir;
} wisp_hf_import_options;

wisp_status wisp_hf_import(const wisp_hf_import_options *o);

#endif
