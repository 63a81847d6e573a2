/* The section table of an LFM2 artifact in the seed manifest's order, so that
 * convert and gen-synthetic --small lay out weights exactly as the seed does
 * (tests check this against the seed's offsets). */
#ifndef WISP_LAYOUT_H
#define WISP_LAYOUT_H

#include <cJSON.h>
#include <stdint.h>

#include "format/artifact.h"

typedef struct {
  int f32;             /* 1: matrices as NAME.weight f32; 0: Q4 (embed/head Q4Z) */
  int q4k;             /* with f32 = 0: matrices with cols % 256 == 0 as NAME.q4k (Q4_K) */
  int f16;             /* with f32 = 0: every matrix, embed/head too, as NAME.f16 */
  int q8_0;            /* with f32 = 0: every matrix, embed/head too, as NAME.q8_0 (cols % 32 == 0) */
  int tied;            /* head shares embed's sections */
  int down_transposed; /* Q4 only: also L*.mlp.down.kquant/kscales */
  int rope_rows;       /* rows of rope.cos/sin (0 = none) */
  int rope_ext_rows;   /* rows of rope.cos_ext/sin_ext (0 = none) */
  int rope_freq;       /* 1: rope.freq, the [rotary_dim / 2] inverse frequencies */
  int no_qk_norm;      /* LFM2 layout: attention layers without q_norm/k_norm (Llama) */
  int qkv_bias;        /* LFM2 layout: attention layers with L%d.attn.q_bias/k_bias/v_bias (Qwen2) */
} wisp_layout_options;

/* Builds runtime.sections (a new cJSON array) and the total byte count. */
wisp_status wisp_layout_lfm2(const wisp_shape *s, const wisp_layout_options *o, cJSON **sections,
                             uint64_t *total_bytes);

/* Qwen 3.5 (docs/artifact.md, "Qwen 3.5"): per layer its matrices
 * (linear: lin.in_proj, lin.out_proj; full: attn.qkv, attn.o_proj; then
 * mlp.gate_up, mlp.down), head/embed, per layer its vectors, head.norm,
 * rope.cos/sin and rope.cos_ext/sin_ext ([rows][rotaryDim/2]).
 * down_transposed is ignored. */
/* Gemma 3 (docs/artifact.md, "Gemma 3"): per layer attn.qkv, attn.o_proj,
 * mlp.gate_up, mlp.down; head/embed; per layer attn.qkv.norm, .q_norm,
 * .k_norm, attn.o_proj.post_norm, mlp.gate_up.norm, mlp.down.post_norm;
 * head.norm; rope.cos/sin (the global layers'); rope.freq and
 * rope.freq_local. down_transposed and rope_ext_rows are ignored. */
wisp_status wisp_layout_gemma3(const wisp_shape *s, const wisp_layout_options *o, cJSON **sections,
                               uint64_t *total_bytes);

wisp_status wisp_layout_qwen3_5(const wisp_shape *s, const wisp_layout_options *o, cJSON **sections,
                                uint64_t *total_bytes);

#endif
