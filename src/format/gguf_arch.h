/* The tensor names of every architecture wisp imports (lfm2, qwen3, llama,
 * qwen35, qwen2, gemma3: the llama.cpp names, which also name the Hugging Face
 * architectures), one table per architecture. Each row ties a GGUF tensor
 * name to its Hugging Face name and to the wisp section (and rows of a
 * fused section) that holds it, with the transforms between the three
 * layouts. Every reader and writer of names walks these tables: the Hugging
 * Face import (hf_import.c), the GGUF import (gguf_import.c) and the GGUF
 * export (cmd_export_gguf.c), so a name or a transform is written down
 * once. docs/gguf.md and docs/convert.md list them. */
#ifndef WISP_GGUF_ARCH_H
#define WISP_GGUF_ARCH_H

#include <stddef.h>

#include "wisp.h"

/* Which layers carry a tensor. */
enum { GA_GLOBAL, GA_EVERY, GA_CONV, GA_ATTN, GA_LINEAR };

/* Which part of which wisp section: the geometry (rows of the whole
 * section, first row and row count of the part, columns) follows from the
 * model shape (wisp_gguf_part_dims). GA_P_VEC is an f32 vector (1-d in
 * GGUF), GA_P_TAPS a conv kernel: f32 [channels][L], ne = {L, channels} in
 * GGUF, [channels, 1, L] in Hugging Face. */
enum {
  GA_P_VEC, GA_P_TAPS, GA_P_VOCAB, GA_P_CONV_IN, GA_P_CONV_OUT, GA_P_Q, GA_P_K, GA_P_V, GA_P_O, GA_P_GATE, GA_P_UP,
  GA_P_DOWN, GA_P_LQKV, GA_P_LZ, GA_P_LB, GA_P_LA, GA_P_LOUT
};

/* Rows of a GA_P_VEC vector or GA_P_TAPS kernel (its channels). */
enum { GA_N_HIDDEN, GA_N_HEAD_DIM, GA_N_LIN_V_HEADS, GA_N_LIN_V_DIM, GA_N_LIN_QKV,
       GA_N_Q,   /* q rows: heads * head_dim (a q bias) */
       GA_N_KV   /* k or v rows: kv_heads * head_dim (a k or v bias) */ };

/* Transforms between wisp/Hugging Face layout and GGUF (bit set); only
 * GA_X_PLUS1 also applies between Hugging Face and wisp. */
enum {
  /* llama: the rows of each q (k) head reordered so that rotate-half pairs
   * (i, i + D/2) become adjacent pairs (2i, 2i + 1), llama.cpp's rope */
  GA_X_ROPE_Q = 1, GA_X_ROPE_K = 2,
  /* qwen35 (1+w) norms: Hugging Face stores w, wisp and GGUF store 1 + w */
  GA_X_PLUS1 = 4,
  /* qwen35 A_log: GGUF stores -exp(A_log) */
  GA_X_NEGEXP = 8,
  /* qwen35 value heads from grouped order (the heads sharing a key head
   * adjacent) to tiled order (head j*NK + g is grouped head g*NV/NK + j):
   * rows of DV (in_proj_z), rows of 1 (in_proj_b/a, A_log, dt_bias), the
   * value rows after the 2K q/k rows (in_proj_qkv, conv taps), or column
   * blocks of DV (out_proj) */
  GA_X_VH_ROWS = 16, GA_X_VH_ROWS1 = 32, GA_X_VH_QKV = 64, GA_X_VH_COLS = 128
};

/* A tensor present in GGUF only on import (an alias) has no section. The
 * rows of one fused section (q, k, v of L%d.attn.qkv) are consecutive and
 * in the section's row order. */
typedef struct {
  const char *gguf;    /* after "blk.N." for layer tensors, whole for GA_GLOBAL */
  const char *hf;      /* Hugging Face name, %d = layer */
  const char *section; /* wisp section (matrix base or vector name), %d = layer; NULL: import alias */
  unsigned char where, part, xform;
  unsigned char len; /* GA_P_VEC, GA_P_TAPS: rows (GA_N_*) */
  /* Hugging Face: the name older checkpoints use when `hf` is absent */
  const char *hf_alt;
} wisp_gguf_rule;

typedef struct {
  const char *name;  /* general.architecture */
  const char *graph; /* for messages */
  const wisp_gguf_rule *rules;
  size_t n_rules;
  /* A layer holding blk.N.<probe> is of kind probe_kind, others attention. */
  const char *probe;
  int probe_kind;
  /* attention q rows carry [q | gate] per head (wisp_gguf_geom.q_rows) */
  int q_gated;
  /* Hugging Face: a prefix that stands for "model." in every name when the
   * checkpoint holds the embedding under it (a multimodal checkpoint's
   * text model), and the name prefixes of tensors outside the text graph
   * (NULL-terminated), both for Qwen 3.5; NULL for the others */
  const char *hf_nested;
  const char *const *hf_ignore;
} wisp_gguf_arch;

/* NULL when wisp does not know the architecture. */
const wisp_gguf_arch *wisp_gguf_arch_find(const char *name);
/* "lfm2, qwen3, llama, qwen35, qwen2 and gemma3", for messages. */
const char *wisp_gguf_arch_list(void);
/* The rule for GGUF tensor `name` (already stripped of "blk.N." when
 * `layer_tensor`), or NULL. */
const wisp_gguf_rule *wisp_gguf_rule_find(const wisp_gguf_arch *a, const char *name, int layer_tensor);
/* Whether a rule applies to a layer of kind `kind` (WISP_LAYER_*). */
int wisp_gguf_rule_applies(const wisp_gguf_rule *r, int kind);

/* The dimensions the transforms and part geometry need. */
typedef struct {
  int hidden, ffn, vocab, conv_l;
  int heads, kv_heads, head_dim, q_rows; /* q_rows: heads*head_dim, twice that for qwen35's q|gate */
  int lin_k_heads, lin_v_heads, lin_k_dim, lin_v_dim;
} wisp_gguf_geom;

/* Rows of the whole section, first row and rows of the part, columns
 * (a matrix part). */
void wisp_gguf_part_dims(const wisp_gguf_geom *g, int part, int *total, int *r0, int *rows, int *cols);
/* A GA_P_VEC or GA_P_TAPS rule's rows (channels) and columns (1, or the
 * conv kernel's L for taps). */
void wisp_gguf_vec_dims(const wisp_gguf_geom *g, const wisp_gguf_rule *r, int *rows, int *cols);

/* Row (column) r of the GGUF tensor is row (column) src[r] of the wisp /
 * Hugging Face tensor. Fails (one line naming `what`) when the tensor's
 * rows do not split into the heads the transform needs. */
/* The transform left between GGUF and an artifact whose q/k rows are in
 * rope pair order `pairs` (format/tensor.h wisp_rope_pairs): an artifact of
 * adjacent pairs keeps llama.cpp's q/k row order as stored, so GA_X_ROPE_*
 * drop out (the rows are mapped, and attention rotates adjacent pairs). */
unsigned wisp_gguf_xform_for(unsigned xform, int pairs);
/* Whether an architecture's GGUF stores q/k rows in llama.cpp's rope order
 * (a rule with GA_X_ROPE_*): its artifacts opened from GGUF are adjacent. */
int wisp_gguf_arch_rope_permuted(const wisp_gguf_arch *ga);
wisp_status wisp_gguf_row_map(const wisp_gguf_geom *g, unsigned xform, int rows, const char *what, int *src);
wisp_status wisp_gguf_col_map(const wisp_gguf_geom *g, unsigned xform, int cols, const char *what, int *src);

/* Value transforms: wisp section values -> GGUF values (export), GGUF
 * values -> Hugging Face values (import), in place. */
void wisp_gguf_values_export(unsigned xform, float *v, size_t n);
void wisp_gguf_values_import(unsigned xform, float *v, size_t n);

#endif
