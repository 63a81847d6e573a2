/* Section layout of an LFM2 artifact; see layout.h. The order mirrors the
 * seed manifest: per-layer matrices, then embed/head, then per-layer norms
 * and conv taps, the final norm and rope tables, the transposed down copies,
 * and last the extended rope tables. */
#include "format/layout.h"

#include <stdio.h>

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

static void add_matrix(builder *b, const wisp_layout_options *o, const char *base, int rows, int cols) {
  char name[128];
  if (o->f32) {
    snprintf(name, sizeof name, "%s.weight", base);
    add(b, name, (uint64_t)rows * cols * 4);
    return;
  }
  snprintf(name, sizeof name, "%s.quant", base);
  add(b, name, wisp_q4_quant_bytes(rows, cols));
  snprintf(name, sizeof name, "%s.scales", base);
  add(b, name, wisp_q4_scale_bytes(rows, cols));
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
  const char *parts[3] = {"quant", "scales", "zero_points"};
  uint64_t sizes[3] = {wisp_q4_quant_bytes(V, H), wisp_q4_scale_bytes(V, H), wisp_q4_zp_bytes(V, H)};
  int nparts = 3;
  if (o->f32) { parts[0] = "weight"; sizes[0] = (uint64_t)V * H * 4; nparts = 1; }
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
    add(&b, "rope.cos", (uint64_t)o->rope_rows * (D / 2) * 4);
    add(&b, "rope.sin", (uint64_t)o->rope_rows * (D / 2) * 4);
  }
  if (o->down_transposed && !o->f32) {
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
  if (!b.ok) {
    cJSON_Delete(b.arr);
    return wisp_fail(WISP_ENOMEM, "out of memory");
  }
  *sections = b.arr;
  *total_bytes = b.off;
  return WISP_OK;
}
