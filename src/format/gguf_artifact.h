/* A GGUF file opened as a wisp artifact, in place: `-m FILE.gguf` works
 * wherever `-m DIR` does (docs/gguf.md, "Running a GGUF directly").
 *
 * The file is mapped read-only and parsed (format/gguf.h); the
 * architecture's table (format/gguf_arch.h, the one convert and
 * export-gguf walk) says which GGUF tensors make each wisp section; the
 * manifest the model files read is derived in memory, as convert would
 * write it. A section whose tensors are stored in a wisp weight type with
 * the same bytes (every GGUF type wisp reads has one) and lie back to back
 * in the file, untransformed, points into the mapping: nothing is copied. Only these
 * are built once at open into an owned buffer: fused sections (q|k|v,
 * gate|up) whose parts are not adjacent in the file; tensors whose rows or
 * column blocks llama.cpp's converter reordered (llama's q/k rope order,
 * Qwen 3.5's value heads). A fused section whose tensors differ in type
 * (Q4_K_M's Q6_K attn_v beside Q4_K attn_q) is a matrix in row parts: one
 * section NAME@ROW.TYPE for each run of tensors of one type, each mapped or
 * copied as above, in its stored type (format/tensor.h). Each
 * section records where it came from (wisp plan prints it). The tokenizer
 * files are derived from tokenizer.ggml.* into memory (util/memfile.h). */
#ifndef WISP_GGUF_ARTIFACT_H
#define WISP_GGUF_ARTIFACT_H

#include "format/artifact.h"
#include "format/gguf.h"

struct wisp_gguf_source {
  wisp_gguf *g;
  uint8_t **owned; /* buffers of transformed sections */
  int n_owned;
  size_t owned_bytes, mapped_bytes;
  int tokenizer; /* 1: tokenizer files held in memory under the path */
};

/* Opens PATH (a .gguf file). Every error is one line naming the file and,
 * where there is one, the fix. */
wisp_status wisp_gguf_artifact_open(const char *path, wisp_artifact **out);
/* The same for a GGUF already parsed (wisp_gguf_parse, e.g. by the fuzzer);
 * takes g, also on failure. */
wisp_status wisp_gguf_artifact_from(wisp_gguf *g, wisp_artifact **out);
void wisp_gguf_source_free(struct wisp_gguf_source *s);
/* `wisp convert FILE.gguf -o DIR --quant keep` (the default for a GGUF):
 * writes the artifact this open derives, every section with the bytes it
 * has here (stored types kept; nothing requantized), through the atomic
 * writer (format/writer.h), with the derived tokenizer files. */
wisp_status wisp_gguf_convert_keep(const char *path, const char *out_dir, int quiet);
/* 1 when NAME looks like one part of a split GGUF (NAME-00001-of-00003.gguf);
 * *part and *count get the numbers. */
int wisp_gguf_split_name(const char *name, int *part, int *count);

#endif
