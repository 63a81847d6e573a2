/* Section layout of an LFM2 artifact; see layout.h. The order mirrors the
 * seed manifest: per-layer matrices, then embed/head, then per-layer norms
 * and conv taps, the final norm and rope tables, the transposed down copies,
 * and last the extended rope tables. */
#include "format/layout.h"

#include <stdio.h>

#include "format/quant.h"
#include "format/tensor.h"
#include "util/err.h"

typedef struct {
  cJSON *arr;
  uint64_t off;
  int ok;
} builder;

static void add_at(builder *b, const char *name, uint64_t offset, uint64_t bytes) {
  cJSON *e = cJSON_CreateObject();
  if (!e) { b->ok = 0; return; }
  cJSON_AddStringToObject(e, "name", name);
  cJSON_AddNumberToObject(e, "offset", (double)offset);
  cJSON_AddNumberToObject(e, "bytes", (double)bytes);
  cJSON_AddItemToArray(b->arr, e);
}

static void add(builder *b, const char *name, uint64_t bytes) {
  add_at(b, name, b->off, bytes);
  b->off += bytes;
}

/* The weight type convert stores a matrix in: the one --quant names; Q4_K
 * only where cols is a whole number of super-blocks (else Q4); embed and
 * head asymmetric Q4Z under q4/q4k. */
static wisp_wtype matrix_type(const wisp_layout_options *o, int cols, int embed_or_head) {
  if (o->f32) return WISP_W_F32;
  if (o->f16) return WISP_W_F16;
  if (o->q8_0) return WISP_W_Q8_0;
  if (embed_or_head) return WISP_W_Q4Z;
  return o->q4k && cols % WISP_Q4K_BLOCK == 0 ? WISP_W_Q4K : WISP_W_Q4;
}

/* BASE.<section> for each section of the matrix's type (format/quant.h). */
static void add_matrix(builder *b, const wisp_layout_options *o, const char *base, int rows, int cols) {
  const wisp_quant_traits *q = wisp_quant_traits_of(matrix_type(o, cols, 0));
  char name[128];
  for (int p = 0; p < q->n_planes; p++) {
    snprintf(name, sizeof name, "%s.%s", base, q->planes[p].suffix);
    add(b, name, q->planes[p].bytes(rows, cols));
  }
}

/* head.* then embed.* (tied: the same offsets), as the seed orders them. */
static void add_embed_head(builder *b, const wisp_layout_options *o, int V, int H) {
  char name[128];
  const wisp_quant_traits *q = wisp_quant_traits_of(matrix_type(o, H, 1));
  const char *parts[WISP_QUANT_MAX_PLANES];
  uint64_t sizes[WISP_QUANT_MAX_PLANES];
  int nparts = q->n_planes;
  for (int k = 0; k < nparts; k++) {
    parts[k] = q->planes[k].suffix;
    sizes[k] = q->planes[k].bytes(V, H);
  }
  uint64_t at = b->off;
  for (int k = 0; k < nparts; k++) {
    snprintf(name, sizeof name, "head.%s", parts[k]);
    if (o->tied) {
      add_at(b, name, at, sizes[k]);
      at += sizes[k];
    } else {
      add(b, name, sizes[k]);
    }
  }
  for (int k = 0; k < nparts; k++) {
    snprintf(name, sizeof name, "embed.%s", parts[k]);
    add(b, name, sizes[k]);
  }
  /* keep what follows 4-byte aligned (zero_points may be an odd count) */
  if (b->off % 4) b->off += 4 - b->off % 4;
}

wisp_status wisp_layout_gemma3(const wisp_shape *s, const wisp_layout_options *o, cJSON **sections,
                               uint64_t *total_bytes) {
  builder b = {cJSON_CreateArray(), 0, 1};
  if (!b.arr) return wisp_fail(WISP_ENOMEM, "out of memory");
  const int H = s->hidden, F = s->ffn, D = s->head_dim;
  char name[128];
  for (int i = 0; i < s->n_layers; i++) {
    snprintf(name, sizeof name, "L%d.attn.qkv", i);
    add_matrix(&b, o, name, (s->heads + 2 * s->kv_heads) * D, H);
    snprintf(name, sizeof name, "L%d.attn.o_proj", i);
    add_matrix(&b, o, name, H, s->heads * D);
    snprintf(name, sizeof name, "L%d.mlp.gate_up", i);
    add_matrix(&b, o, name, 2 * F, H);
    snprintf(name, sizeof name, "L%d.mlp.down", i);
    add_matrix(&b, o, name, H, F);
  }
  add_embed_head(&b, o, s->vocab, H);
  static const char *const vecs[6] = {"attn.qkv.norm", "attn.qkv.q_norm", "attn.qkv.k_norm", "attn.o_proj.post_norm",
                                      "mlp.gate_up.norm", "mlp.down.post_norm"};
  for (int i = 0; i < s->n_layers; i++)
    for (int k = 0; k < 6; k++) {
      snprintf(name, sizeof name, "L%d.%s", i, vecs[k]);
      add(&b, name, (uint64_t)(k == 1 || k == 2 ? D : H) * 4);
    }
  add(&b, "head.norm", (uint64_t)H * 4);
  if (o->rope_rows > 0) {
    add(&b, "rope.cos", (uint64_t)o->rope_rows * (D / 2) * 4);
    add(&b, "rope.sin", (uint64_t)o->rope_rows * (D / 2) * 4);
  }
  add(&b, "rope.freq", (uint64_t)(D / 2) * 4);
  add(&b, "rope.freq_local", (uint64_t)(D / 2) * 4);
  if (!b.ok) {
    cJSON_Delete(b.arr);
    return wisp_fail(WISP_ENOMEM, "out of memory");
  }
  *sections = b.arr;
  *total_bytes = b.off;
  return WISP_OK;
}

wisp_status wisp_layout_qwen3_5(const wisp_shape *s, const wisp_layout_options *o, cJSON **sections,
                                uint64_t *total_bytes) {
  builder b = {cJSON_CreateArray(), 0, 1};
  if (!b.arr) return wisp_fail(WISP_ENOMEM, "out of memory");
  const int H = s->hidden, F = s->ffn, D = s->head_dim, V = s->vocab, RD = s->rotary_dim;
  const int LK = s->lin_k_heads * s->lin_k_dim, LV = s->lin_v_heads * s->lin_v_dim;
  char name[128];
  for (int i = 0; i < s->n_layers; i++) {
    if (s->layer_types[i] == WISP_LAYER_LINEAR) {
      snprintf(name, sizeof name, "L%d.lin.in_proj", i);
      add_matrix(&b, o, name, 2 * LK + 2 * LV + 2 * s->lin_v_heads, H);
      snprintf(name, sizeof name, "L%d.lin.out_proj", i);
      add_matrix(&b, o, name, H, LV);
    } else {
      snprintf(name, sizeof name, "L%d.attn.qkv", i);
      add_matrix(&b, o, name, (2 * s->heads + 2 * s->kv_heads) * D, H);
      snprintf(name, sizeof name, "L%d.attn.o_proj", i);
      add_matrix(&b, o, name, H, s->heads * D);
    }
    snprintf(name, sizeof name, "L%d.mlp.gate_up", i);
    add_matrix(&b, o, name, 2 * F, H);
    snprintf(name, sizeof name, "L%d.mlp.down", i);
    add_matrix(&b, o, name, H, F);
  }
  add_embed_head(&b, o, V, H);
  for (int i = 0; i < s->n_layers; i++) {
    if (s->layer_types[i] == WISP_LAYER_LINEAR) {
      snprintf(name, sizeof name, "L%d.lin.in_proj.norm", i);
      add(&b, name, (uint64_t)H * 4);
      snprintf(name, sizeof name, "L%d.lin.conv.taps", i);
      add(&b, name, (uint64_t)(2 * LK + LV) * s->conv_cache * 4);
      snprintf(name, sizeof name, "L%d.lin.A_log", i);
      add(&b, name, (uint64_t)s->lin_v_heads * 4);
      snprintf(name, sizeof name, "L%d.lin.dt_bias", i);
      add(&b, name, (uint64_t)s->lin_v_heads * 4);
      snprintf(name, sizeof name, "L%d.lin.norm", i);
      add(&b, name, (uint64_t)s->lin_v_dim * 4);
    } else {
      snprintf(name, sizeof name, "L%d.attn.qkv.norm", i);
      add(&b, name, (uint64_t)H * 4);
      snprintf(name, sizeof name, "L%d.attn.qkv.q_norm", i);
      add(&b, name, (uint64_t)D * 4);
      snprintf(name, sizeof name, "L%d.attn.qkv.k_norm", i);
      add(&b, name, (uint64_t)D * 4);
    }
    snprintf(name, sizeof name, "L%d.mlp.gate_up.norm", i);
    add(&b, name, (uint64_t)H * 4);
  }
  add(&b, "head.norm", (uint64_t)H * 4);
  if (o->rope_rows > 0) {
    add(&b, "rope.cos", (uint64_t)o->rope_rows * (RD / 2) * 4);
    add(&b, "rope.sin", (uint64_t)o->rope_rows * (RD / 2) * 4);
  }
  if (o->rope_ext_rows > 0) {
    add(&b, "rope.cos_ext", (uint64_t)o->rope_ext_rows * (RD / 2) * 4);
    add(&b, "rope.sin_ext", (uint64_t)o->rope_ext_rows * (RD / 2) * 4);
  }
  if (o->rope_freq) add(&b, "rope.freq", (uint64_t)(RD / 2) * 4);
  if (!b.ok) {
    cJSON_Delete(b.arr);
    return wisp_fail(WISP_ENOMEM, "out of memory");
  }
  *sections = b.arr;
  *total_bytes = b.off;
  return WISP_OK;
}

wisp_status wisp_layout_lfm2(const wisp_shape *s, const wisp_layout_options *o, cJSON **sections,
                             uint64_t *total_bytes) {
  builder b = {cJSON_CreateArray(), 0, 1};
  if (!b.arr) return wisp_fail(WISP_ENOMEM, "out of memory");
  const int H = s->hidden, F = s->ffn, D = s->head_dim, V = s->vocab;
  char name[128];
  for (int i = 0; i < s->n_layers; i++) {
    if (s->layer_types[i] == WISP_LAYER_CONV) {
      snprintf(name, sizeof name, "L%d.conv.in_proj", i);
      add_matrix(&b, o, name, 3 * H, H);
      snprintf(name, sizeof name, "L%d.conv.out_proj", i);
      add_matrix(&b, o, name, H, H);
    } else {
      snprintf(name, sizeof name, "L%d.attn.qkv", i);
      add_matrix(&b, o, name, (s->heads + 2 * s->kv_heads) * D, H);
      snprintf(name, sizeof name, "L%d.attn.o_proj", i);
      add_matrix(&b, o, name, H, s->heads * D);
    }
    snprintf(name, sizeof name, "L%d.mlp.gate_up", i);
    add_matrix(&b, o, name, 2 * F, H);
    snprintf(name, sizeof name, "L%d.mlp.down", i);
    add_matrix(&b, o, name, H, F);
  }
  /* Embedding and head: Q4 with zero points, or f32. Tied = same offsets. */
  const wisp_quant_traits *q = wisp_quant_traits_of(matrix_type(o, H, 1));
  const char *parts[WISP_QUANT_MAX_PLANES];
  uint64_t sizes[WISP_QUANT_MAX_PLANES];
  int nparts = q->n_planes;
  for (int k = 0; k < nparts; k++) {
    parts[k] = q->planes[k].suffix;
    sizes[k] = q->planes[k].bytes(V, H);
  }
  /* The seed lists head.* before embed.*; tied heads point at embed's bytes. */
  uint64_t at = b.off;
  for (int k = 0; k < nparts; k++) {
    snprintf(name, sizeof name, "head.%s", parts[k]);
    if (o->tied) {
      add_at(&b, name, at, sizes[k]);
      at += sizes[k];
    } else {
      add(&b, name, sizes[k]);
    }
  }
  for (int k = 0; k < nparts; k++) {
    snprintf(name, sizeof name, "embed.%s", parts[k]);
    add(&b, name, sizes[k]);
  }
  for (int i = 0; i < s->n_layers; i++) {
    if (s->layer_types[i] == WISP_LAYER_CONV) {
      snprintf(name, sizeof name, "L%d.conv.in_proj.norm", i);
      add(&b, name, (uint64_t)H * 4);
      snprintf(name, sizeof name, "L%d.conv.core.taps", i);
      add(&b, name, (uint64_t)H * s->conv_cache * 4);
    } else {
      snprintf(name, sizeof name, "L%d.attn.qkv.norm", i);
      add(&b, name, (uint64_t)H * 4);
      if (!o->no_qk_norm) {
        snprintf(name, sizeof name, "L%d.attn.qkv.q_norm", i);
        add(&b, name, (uint64_t)D * 4);
        snprintf(name, sizeof name, "L%d.attn.qkv.k_norm", i);
        add(&b, name, (uint64_t)D * 4);
      }
      if (o->qkv_bias) {
        const char *part[3] = {"q", "k", "v"};
        for (int k = 0; k < 3; k++) {
          snprintf(name, sizeof name, "L%d.attn.%s_bias", i, part[k]);
          add(&b, name, (uint64_t)(k ? s->kv_heads : s->heads) * D * 4);
        }
      }
    }
    snprintf(name, sizeof name, "L%d.mlp.gate_up.norm", i);
    add(&b, name, (uint64_t)H * 4);
  }
  add(&b, "head.norm", (uint64_t)H * 4);
  if (o->rope_rows > 0) {
    add(&b, "rope.cos", (uint64_t)o->rope_rows * (D / 2) * 4);
    add(&b, "rope.sin", (uint64_t)o->rope_rows * (D / 2) * 4);
  }
  if (o->down_transposed && !o->f32 && !o->q4k && !o->f16 && !o->q8_0) {
    for (int i = 0; i < s->n_layers; i++) {
      snprintf(name, sizeof name, "L%d.mlp.down.kquant", i);
      add(&b, name, wisp_q4_quant_bytes(F, H));
      snprintf(name, sizeof name, "L%d.mlp.down.kscales", i);
      add(&b, name, wisp_q4_scale_bytes(F, H));
    }
  }
  if (o->rope_ext_rows > 0) {
    add(&b, "rope.cos_ext", (uint64_t)o->rope_ext_rows * (D / 2) * 4);
    add(&b, "rope.sin_ext", (uint64_t)o->rope_ext_rows * (D / 2) * 4);
  }
  if (o->rope_freq) add(&b, "rope.freq", (uint64_t)(D / 2) * 4);
  if (!b.ok) {
    cJSON_Delete(b.arr);
    return wisp_fail(WISP_ENOMEM, "out of memory");
  }
  *sections = b.arr;
  *total_bytes = b.off;
  return WISP_OK;
}
