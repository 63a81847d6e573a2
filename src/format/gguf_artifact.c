/* A GGUF file opened in place as an artifact; see gguf_artifact.h. */
#include "format/gguf_artifact.h"

#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/gguf_arch.h"
#include "format/gguf_import.h"
#include "format/quant.h"
#include "format/tensor.h"
#include "format/weight_source.h"
#include "format/writer.h"
#include "util/err.h"
#include "util/file.h"

/* The model's longest context is the file's context_length; a session runs
 * with the context its `-c` names (at most that), builds the rope tables
 * past the plan's rows from rope.freq, and grows its KV caches on demand.
 * The tables stored with the file cover the plan's rows only. */
#define GGUF_PLAN_POSITIONS 1024
#define MAX_PARTS 4

/* One wisp section and the GGUF tensors (parts, by first row) that make it. */
typedef struct {
  char name[64];
  int vec; /* an f32 vector (norm weights, conv taps, A_log, dt_bias) */
  const wisp_gguf_rule *rule[MAX_PARTS];
  const wisp_gguf_tensor *t[MAX_PARTS];
  int r0[MAX_PARTS];
  int n;
} piece;

typedef struct {
  const wisp_gguf *g;
  const wisp_gguf_model *m;
  wisp_gguf_geom geo;
  struct wisp_gguf_source *src;
  piece *pieces;
  int n_pieces, cap;
  /* the sections built: name, bytes, pointer, origin (index = manifest order) */
  wisp_section *out;
  int n_out, cap_out;
} builder;

int wisp_gguf_split_name(const char *name, int *part, int *count) {
  const char *base = strrchr(name, '/');
  base = base ? base + 1 : name;
  size_t n = strlen(base);
  /* ...-00001-of-00003.gguf: "-NNNNN-of-NNNNN.gguf" is 20 characters */
  if (n < 20 || strcmp(base + n - 5, ".gguf")) return 0;
  const char *s = base + n - 20;
  int p, c, used = 0;
  if (sscanf(s, "-%5d-of-%5d.gguf%n", &p, &c, &used) != 2 || used != 20 || s[1] < '0' || s[1] > '9') return 0;
  *part = p;
  *count = c;
  return 1;
}

void wisp_gguf_source_free(struct wisp_gguf_source *s) {
  if (!s) return;
  if (s->tokenizer && s->g) wisp_gguf_memory_tokenizer_drop(s->g->label);
  for (int i = 0; i < s->n_owned; i++) free(s->owned[i]);
  free(s->owned);
  wisp_gguf_close(s->g);
  free(s);
}

static uint8_t *own(builder *b, size_t bytes) {
  uint8_t **grown = realloc(b->src->owned, sizeof(uint8_t *) * ((size_t)b->src->n_owned + 1));
  if (!grown) return NULL;
  b->src->owned = grown;
  uint8_t *p = calloc(1, bytes ? bytes : 1);
  if (!p) return NULL;
  b->src->owned[b->src->n_owned++] = p;
  b->src->owned_bytes += bytes;
  return p;
}

static wisp_status add_section(builder *b, const char *name, const uint8_t *data, uint64_t bytes, const char *origin) {
  if (b->n_out == b->cap_out) {
    int cap = b->cap_out ? 2 * b->cap_out : 64;
    wisp_section *grown = realloc(b->out, sizeof *grown * (size_t)cap);
    if (!grown) return wisp_fail(WISP_ENOMEM, "out of memory");
    b->out = grown;
    b->cap_out = cap;
  }
  wisp_section *s = &b->out[b->n_out];
  memset(s, 0, sizeof *s);
  if (!(s->name = strdup(name)) || !(s->origin = strdup(origin))) {
    free(s->name);
    return wisp_fail(WISP_ENOMEM, "out of memory");
  }
  s->data = data;
  s->bytes = bytes;
  b->n_out++;
  return WISP_OK;
}

/* ---- which tensors make which section (the architecture's table) ---- */

static wisp_status add_part(builder *b, const char *section, const wisp_gguf_rule *rule, const wisp_gguf_tensor *t) {
  piece *p = NULL;
  for (int i = 0; i < b->n_pieces && !p; i++)
    if (!strcmp(b->pieces[i].name, section)) p = &b->pieces[i];
  if (!p) {
    if (b->n_pieces == b->cap) {
      int cap = b->cap ? 2 * b->cap : 64;
      piece *grown = realloc(b->pieces, sizeof *grown * (size_t)cap);
      if (!grown) return wisp_fail(WISP_ENOMEM, "out of memory");
      b->pieces = grown;
      b->cap = cap;
    }
    p = &b->pieces[b->n_pieces++];
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", section);
    p->vec = rule->part == GA_P_VEC || rule->part == GA_P_TAPS;
  }
  if (p->n == MAX_PARTS || (p->vec && p->n))
    return wisp_fail(WISP_EFORMAT, "%s: tensor '%s' maps to section '%s' a second time", b->g->label, t->name, section);
  int total = 0, r0 = 0, rows = 0, cols = 0;
  if (!p->vec) {
    wisp_gguf_part_dims(&b->geo, rule->part, &total, &r0, &rows, &cols);
    if (t->n_dims != 2 || t->ne[0] != (uint64_t)cols || t->ne[1] != (uint64_t)rows)
      return wisp_fail(WISP_EFORMAT, "%s: tensor '%s' is %llu x %llu, the model's shape needs %d x %d", b->g->label,
                       t->name, (unsigned long long)t->ne[0], (unsigned long long)t->ne[1], cols, rows);
  }
  /* keep the parts in row order */
  int at = p->n;
  while (at > 0 && p->r0[at - 1] > r0) {
    p->rule[at] = p->rule[at - 1];
    p->t[at] = p->t[at - 1];
    p->r0[at] = p->r0[at - 1];
    at--;
  }
  p->rule[at] = rule;
  p->t[at] = t;
  p->r0[at] = r0;
  p->n++;
  return WISP_OK;
}

static wisp_status collect(builder *b, const wisp_gguf_arch *ga) {
  const wisp_gguf_model *m = b->m;
  char k[160], sec[64];
  wisp_status st;
  for (int i = 0; i < m->n_layers; i++)
    for (size_t r = 0; r < ga->n_rules; r++) {
      const wisp_gguf_rule *rule = &ga->rules[r];
      if (rule->where == GA_GLOBAL || !rule->section || !wisp_gguf_rule_applies(rule, m->layer_types[i])) continue;
      snprintf(k, sizeof k, "blk.%d.%s", i, rule->gguf);
      const wisp_gguf_tensor *t = wisp_gguf_tensor_find(b->g, k);
      if (!t) return wisp_fail(WISP_EFORMAT, "%s: missing tensor '%s'", b->g->label, k);
      snprintf(sec, sizeof sec, rule->section, i);
      if ((st = add_part(b, sec, rule, t))) return st;
    }
  for (size_t r = 0; r < ga->n_rules; r++) {
    const wisp_gguf_rule *rule = &ga->rules[r];
    if (rule->where != GA_GLOBAL) continue;
    const wisp_gguf_tensor *t = wisp_gguf_tensor_find(b->g, rule->gguf);
    if (!t) continue;
    const wisp_gguf_rule *target = rule;
    if (!rule->section) { /* an alias: stands in for its rule's tensor when that one is absent */
      for (size_t a = 0; a < ga->n_rules && target == rule; a++)
        if (ga->rules[a].where == GA_GLOBAL && ga->rules[a].section && !strcmp(ga->rules[a].hf, rule->hf))
          target = &ga->rules[a];
      if (target == rule || wisp_gguf_tensor_find(b->g, target->gguf)) continue;
    }
    snprintf(sec, sizeof sec, "%s", target->section);
    if ((st = add_part(b, sec, target, t))) return st;
  }
  return WISP_OK;
}

/* ---- building one section ---- */

/* wisp's weight type for a GGUF type: the quant table's type with the
 * same bytes (its section suffix), used where the file holds it; or f32
 * (dequantized) for a type with none. */
enum { AS_BYTES, AS_F32 };

static int kind_of(uint32_t type, const char **suffix) {
  int n;
  const wisp_quant_traits *tab = wisp_quant_table(&n);
  for (int i = 0; i < n; i++)
    if (tab[i].ggml_type == type && tab[i].n_planes == 1) {
      *suffix = tab[i].planes[0].suffix;
      return AS_BYTES;
    }
  *suffix = "weight";
  return AS_F32;
}

/* A rule's transform at open: llama's q/k rows stay in llama.cpp's order
 * (mapped; the manifest says ropePairs "adjacent"). */
static unsigned xf(const wisp_gguf_rule *r) { return wisp_gguf_xform_for(r->xform, WISP_ROPE_ADJACENT); }

/* Whether a transform moves rows or column blocks of this model. The value
 * head reorder is the identity when there are as many value heads as key
 * heads (Qwen 3.5 0.8B and 2B): those tensors are mapped as they are. */
static int moves_rows_or_cols(const builder *b, unsigned xform) {
  if (b->geo.lin_v_heads == b->geo.lin_k_heads)
    xform &= ~(unsigned)(GA_X_VH_ROWS | GA_X_VH_ROWS1 | GA_X_VH_QKV | GA_X_VH_COLS);
  return (xform & ~(unsigned)(GA_X_PLUS1 | GA_X_NEGEXP)) != 0;
}

/* Whether a column order moves whole blocks of `block` columns. */
static int keeps_blocks(const int *cs, int cols, int block) {
  for (int c = 0; c < cols; c += block) {
    if (cs[c] % block) return 0;
    for (int k = 1; k < block; k++)
      if (cs[c + k] != cs[c] + k) return 0;
  }
  return 1;
}

static void origin_of(const builder *b, const piece *p, const char *how, char *out, size_t cap) {
  size_t at = (size_t)snprintf(out, cap, "%s:", how);
  for (int i = 0; i < p->n && at < cap; i++)
    at += (size_t)snprintf(out + at, cap - at, " %s %s", p->t[i]->name, wisp_ggml_type_name(p->t[i]->type));
  (void)b;
}

static wisp_status build_vector(builder *b, const piece *p) {
  const wisp_gguf_tensor *t = p->t[0];
  const unsigned xform = xf(p->rule[0]);
  char origin[512];
  if (t->type == WISP_GGML_F32 && !moves_rows_or_cols(b, xform) && !(xform & GA_X_NEGEXP) &&
      (uintptr_t)t->data % 4 == 0) {
    origin_of(b, p, "mapped", origin, sizeof origin);
    b->src->mapped_bytes += t->bytes;
    return add_section(b, p->name, t->data, t->numel * 4, origin);
  }
  float *v = (float *)own(b, t->numel * 4), *tmp = NULL;
  int *rs = NULL;
  if (!v) return wisp_fail(WISP_ENOMEM, "out of memory");
  wisp_status st = wisp_gguf_read_f32(b->g, t, v);
  const int cols = t->n_dims == 1 ? 1 : (int)t->ne[0], rows = (int)(t->numel / (uint64_t)cols);
  if (!st && moves_rows_or_cols(b, xform)) {
    rs = malloc(sizeof(int) * (size_t)rows);
    tmp = malloc(t->numel * 4);
    if (!rs || !tmp) st = wisp_fail(WISP_ENOMEM, "out of memory");
    if (!st) st = wisp_gguf_row_map(&b->geo, xform, rows, t->name, rs);
    if (!st) {
      memcpy(tmp, v, t->numel * 4);
      for (int r = 0; r < rows; r++) memcpy(v + (size_t)rs[r] * cols, tmp + (size_t)r * cols, sizeof(float) * cols);
    }
  }
  /* GGUF and wisp both store Qwen 3.5's norms as 1 + w; A_log is -exp(A_log) in GGUF */
  if (!st) wisp_gguf_values_import(xform & GA_X_NEGEXP, v, t->numel);
  free(rs);
  free(tmp);
  if (st) return st;
  origin_of(b, p, t->type == WISP_GGML_F32 ? "copied (rows reordered or values transformed)" : "dequantized to f32",
            origin, sizeof origin);
  return add_section(b, p->name, (const uint8_t *)v, t->numel * 4, origin);
}

/* One matrix section, BASE.SUFFIX, from parts of one GGUF type (p's rows
 * r0 relative to its first row; total rows). */
static wisp_status build_run(builder *b, const piece *p, const char *base, int total) {
  const char *suffix;
  int kind = kind_of(p->t[0]->type, &suffix);
  int moved = 0, adjacent = 1;
  for (int i = 0; i < p->n; i++) {
    moved |= moves_rows_or_cols(b, xf(p->rule[i]));
    if (i && p->t[i - 1]->data + p->t[i - 1]->bytes != p->t[i]->data) adjacent = 0;
  }
  const int cols = (int)p->t[0]->ne[0];
  char name[96], origin[512];
  snprintf(name, sizeof name, "%s.%s", base, suffix);
  if (kind == AS_BYTES && !moved && adjacent && (uintptr_t)p->t[0]->data % 4 == 0) {
    uint64_t bytes = 0;
    for (int i = 0; i < p->n; i++) bytes += p->t[i]->bytes;
    origin_of(b, p, "mapped", origin, sizeof origin);
    b->src->mapped_bytes += bytes;
    return add_section(b, name, p->t[0]->data, bytes, origin);
  }
  size_t bb = 4;
  int block = 1;
  if (kind != AS_F32) block = wisp_ggml_block(p->t[0]->type, &bb);
  const int nb = cols / block;
  /* column orders that split blocks (Qwen 3.5's out_proj with small value heads) fall back to f32 */
  int *rs = malloc(sizeof(int) * (size_t)total), *cs = malloc(sizeof(int) * (size_t)cols);
  wisp_status st = WISP_OK;
  if (!rs || !cs) st = wisp_fail(WISP_ENOMEM, "out of memory");
  for (int i = 0; !st && i < p->n; i++) {
    if ((st = wisp_gguf_col_map(&b->geo, xf(p->rule[i]), cols, p->t[i]->name, cs))) break;
    if (kind != AS_F32 && !keeps_blocks(cs, cols, block)) {
      kind = AS_F32;
      suffix = "weight";
      snprintf(name, sizeof name, "%s.%s", base, suffix);
    }
  }
  uint8_t *q = NULL;
  float *tmp = NULL;
  const size_t n = (size_t)total * (size_t)cols;
  if (!st) {
    q = own(b, kind == AS_F32 ? n * 4 : (size_t)total * nb * bb);
    if (!q) st = wisp_fail(WISP_ENOMEM, "out of memory for section '%s'", base);
  }
  for (int i = 0; !st && i < p->n; i++) {
    const wisp_gguf_tensor *t = p->t[i];
    const int prow = (int)t->ne[1], base = p->r0[i];
    if ((st = wisp_gguf_row_map(&b->geo, xf(p->rule[i]), prow, t->name, rs)) ||
        (st = wisp_gguf_col_map(&b->geo, xf(p->rule[i]), cols, t->name, cs)))
      break;
    if (kind == AS_F32) {
      if (!(tmp = malloc((size_t)prow * cols * 4))) { st = wisp_fail(WISP_ENOMEM, "out of memory"); break; }
      if (!(st = wisp_gguf_read_f32(b->g, t, tmp))) {
        float *dst = (float *)q;
        for (int r = 0; r < prow; r++)
          for (int c = 0; c < cols; c++) dst[(size_t)(base + rs[r]) * cols + cs[c]] = tmp[(size_t)r * cols + c];
      }
      free(tmp);
      tmp = NULL;
      continue;
    }
    void *owned = NULL; /* the tensor read in, when streamed (format/weight_source.h) */
    const uint8_t *data = wisp_weights_borrow(t->data, (size_t)prow * nb * bb, &owned);
    if (!data) {
      st = WISP_ENOMEM;
      break;
    }
    for (int r = 0; r < prow; r++)
      for (int k = 0; k < nb; k++) {
        const uint8_t *blk = data + ((size_t)r * nb + k) * bb;
        const size_t at = (size_t)(base + rs[r]) * nb + (size_t)(cs[k * block] / block);
        memcpy(q + at * bb, blk, bb);
      }
    free(owned);
  }
  free(rs);
  free(cs);
  if (st) return st;
  const char *how = kind == AS_F32 && p->t[0]->type != WISP_GGML_F32
                        ? "dequantized to f32 (a column order splits blocks)"
                    : moved ? "copied (rows or column blocks reordered as llama.cpp's converter stored them)"
                            : "copied (not 4-byte aligned in the file)";
  origin_of(b, p, how, origin, sizeof origin);
  return add_section(b, name, q, kind == AS_F32 ? n * 4 : (size_t)total * nb * bb, origin);
}

/* Whether tensors i-1 and i of a piece start a new run: a run is tensors
 * of one type that lie back to back in the file, stored as wisp stores
 * them (mapped as one section), or consecutive tensors of one type whose
 * rows or column blocks llama.cpp's converter reordered (copied as one
 * section with the order undone). */
static int starts_run(const builder *b, const piece *p, int i) {
  const int moved = moves_rows_or_cols(b, xf(p->rule[i])), before = moves_rows_or_cols(b, xf(p->rule[i - 1]));
  if (p->t[i]->type != p->t[i - 1]->type || moved != before) return 1;
  return !moved && p->t[i - 1]->data + p->t[i - 1]->bytes != p->t[i]->data;
}

/* A matrix section from its GGUF tensors: one section when they make one
 * run; else a matrix in row parts (format/quant.h), one section NAME@R.SUFFIX
 * for each run, R its first row, each built as a section of its own. So
 * every tensor keeps its stored type and nothing is copied but what the
 * converter reordered: llama-quantize writes a layer's tensors in name
 * order (attn_k, attn_norm, attn_output, attn_q, attn_v, ...), so q, k and
 * v are apart in the file, each a part mapped where it lies. Parts of one
 * type run as one matrix of it (wisp_matrix_mixed). */
static wisp_status build_matrix(builder *b, const piece *p) {
  int total, r0, rows, cols;
  wisp_gguf_part_dims(&b->geo, p->rule[0]->part, &total, &r0, &rows, &cols);
  int covered = 0, runs = 1;
  for (int i = 0; i < p->n; i++) {
    covered += (int)p->t[i]->ne[1];
    if (i) runs += starts_run(b, p, i);
  }
  if (covered != total)
    return wisp_fail(WISP_EFORMAT, "%s: the tensors of section '%s' hold %d rows, the model needs %d", b->g->label,
                     p->name, covered, total);
  if (runs == 1) return build_run(b, p, p->name, total);
  wisp_status st = WISP_OK;
  for (int i = 0, j; !st && i < p->n; i = j) {
    piece run = {.n = 0};
    for (j = i; j < p->n && (j == i || !starts_run(b, p, j)); j++) {
      run.rule[run.n] = p->rule[j];
      run.t[run.n] = p->t[j];
      run.r0[run.n++] = p->r0[j] - p->r0[i];
    }
    const int run_rows = (j < p->n ? p->r0[j] : total) - p->r0[i];
    if (snprintf(run.name, sizeof run.name, "%s@%d", p->name, p->r0[i]) >= (int)sizeof run.name)
      return wisp_fail(WISP_EFORMAT, "%s: section name '%s' too long", b->g->label, p->name);
    st = build_run(b, &run, run.name, run_rows);
  }
  return st;
}

/* rope.freq (the inverse frequencies, with llama's rope_freqs divisors
 * when the file has them) and the tables for the plan's rows, computed in
 * f32 as convert computes them, so that the file runs exactly as the
 * artifact converted from it. A session builds longer tables from
 * rope.freq by the same formula (wisp_rope_rows). */
static wisp_status build_rope(builder *b, int rows) {
  const int dim = !strcmp(b->m->arch, "qwen35") ? b->m->rotary_dim : b->m->head_dim, half = dim / 2;
  const size_t bytes = sizeof(float) * (size_t)rows * half;
  float *inv = (float *)own(b, sizeof(float) * (size_t)half);
  float *cs = (float *)own(b, bytes), *sn = (float *)own(b, bytes);
  if (!inv || !cs || !sn) return wisp_fail(WISP_ENOMEM, "out of memory for rope tables");
  for (int i = 0; i < half; i++) {
    inv[i] = 1.0f / powf((float)b->m->rope_theta, (float)(2 * i) / (float)dim);
    if (b->m->rope_factors) inv[i] = inv[i] / b->m->rope_factors[i];
  }
  wisp_rope_rows(inv, half, rows, cs, sn);
  const char *how = b->m->rope_factors ? "computed from rope.freq_base and rope_freqs.weight" : "computed from rope.freq_base";
  wisp_status st = add_section(b, "rope.freq", (const uint8_t *)inv, sizeof(float) * (size_t)half, how);
  if (!st) st = add_section(b, "rope.cos", (const uint8_t *)cs, bytes, how);
  if (!st) st = add_section(b, "rope.sin", (const uint8_t *)sn, bytes, how);
  return st;
}

/* Gemma 3: rope.freq (the global layers', divided by the linear factor) and
 * rope.freq_local (the sliding layers'), f32 as transformers computes them;
 * the model builds its tables from them. */
static wisp_status build_gemma3_freqs(builder *b) {
  const int D = b->m->head_dim, half = D / 2;
  float *g = (float *)own(b, sizeof(float) * (size_t)half), *l = (float *)own(b, sizeof(float) * (size_t)half);
  if (!g || !l) return wisp_fail(WISP_ENOMEM, "out of memory for rope frequencies");
  for (int i = 0; i < half; i++) {
    const float e = (float)(2 * i) / (float)D;
    g[i] = 1.0f / powf((float)b->m->rope_theta, e) / (float)b->m->rope_linear;
    l[i] = 1.0f / powf((float)b->m->rope_local_theta, e);
  }
  wisp_status st = add_section(b, "rope.freq", (const uint8_t *)g, sizeof(float) * (size_t)half,
                               "computed from rope.freq_base (and rope.scaling.factor)");
  if (!st)
    st = add_section(b, "rope.freq_local", (const uint8_t *)l, sizeof(float) * (size_t)half,
                     "computed from rope.freq_base_swa (default 10000)");
  return st;
}

/* ---- the derived manifest ---- */

/* A manifest's section entry {name, offset, bytes} at *at, which moves on
 * past it, rounded up to 4 bytes (as convert lays weights.bin out). */
static void add_layout(cJSON *secs, const char *name, uint64_t bytes, uint64_t *at) {
  cJSON *s = cJSON_CreateObject();
  cJSON_AddStringToObject(s, "name", name);
  cJSON_AddNumberToObject(s, "offset", (double)*at);
  cJSON_AddNumberToObject(s, "bytes", (double)bytes);
  cJSON_AddItemToArray(secs, s);
  *at += (bytes + 3) / 4 * 4;
}

static cJSON *derive_manifest(const builder *b, int max_pos, int tokenizer) {
  const wisp_gguf_model *m = b->m;
  const int qwen = !strcmp(m->arch, "qwen35");
  cJSON *root = cJSON_CreateObject();
  cJSON *rt = cJSON_AddObjectToObject(root, "runtime");
  cJSON *shape = cJSON_AddObjectToObject(rt, "shape");
  cJSON *lt = cJSON_AddArrayToObject(shape, "layerTypes");
  for (int i = 0; i < m->n_layers; i++)
    cJSON_AddItemToArray(lt, cJSON_CreateString(m->layer_types[i] == WISP_LAYER_CONV     ? "conv"
                                                : m->layer_types[i] == WISP_LAYER_LINEAR ? "linear_attention"
                                                                                         : "attention"));
  cJSON_AddNumberToObject(shape, "hidden", m->hidden);
  cJSON_AddNumberToObject(shape, "ffn", m->ffn);
  cJSON_AddNumberToObject(shape, "vocab", m->vocab);
  cJSON_AddNumberToObject(shape, "heads", m->heads);
  cJSON_AddNumberToObject(shape, "kvHeads", m->kv_heads);
  cJSON_AddNumberToObject(shape, "headDim", m->head_dim);
  cJSON_AddNumberToObject(shape, "convCache", m->conv_l);
  if (qwen) {
    cJSON_AddNumberToObject(shape, "linearKeyHeads", m->lin_k_heads);
    cJSON_AddNumberToObject(shape, "linearValueHeads", m->lin_v_heads);
    cJSON_AddNumberToObject(shape, "linearKeyDim", m->lin_k_dim);
    cJSON_AddNumberToObject(shape, "linearValueDim", m->lin_v_dim);
    cJSON_AddNumberToObject(shape, "rotaryDim", m->rotary_dim);
  }
  if (wisp_gguf_arch_rope_permuted(wisp_gguf_arch_find(m->arch))) cJSON_AddStringToObject(shape, "ropePairs", "adjacent");
  /* offsets in a virtual weights space: the sections carry their own pointers */
  uint64_t at = 0;
  cJSON *secs = cJSON_AddArrayToObject(rt, "sections");
  for (int i = 0; i < b->n_out; i++) add_layout(secs, b->out[i].name, b->out[i].bytes, &at);
  cJSON_AddNumberToObject(rt, "weightBytes", (double)at);
  cJSON_AddNumberToObject(rt, "maxQueries", 1);
  cJSON_AddNumberToObject(rt, "maxPositions", max_pos);
  cJSON_AddNumberToObject(rt, "planPosition", max_pos < GGUF_PLAN_POSITIONS ? max_pos : GGUF_PLAN_POSITIONS);
  cJSON_AddNumberToObject(rt, "maxTotalPositions", max_pos);
  cJSON *wx = cJSON_AddObjectToObject(root, "wisp");
  const int gemma3 = !strcmp(m->arch, "gemma3");
  cJSON_AddStringToObject(wx, "architecture", qwen                      ? "qwen3_5"
                                              : !strcmp(m->arch, "qwen2") ? "qwen2"
                                              : gemma3                    ? "gemma3"
                                                                          : "lfm2");
  if (gemma3) { /* docs/artifact.md, "Gemma 3" */
    cJSON_AddNumberToObject(wx, "slidingWindow", m->sliding_window > 0 ? m->sliding_window : max_pos);
    cJSON *gl = cJSON_AddArrayToObject(wx, "globalLayers");
    for (int i = 0; i < m->n_layers; i++)
      if (m->global[i]) cJSON_AddItemToArray(gl, cJSON_CreateNumber(i));
    cJSON_AddNumberToObject(wx, "attnScale", (double)(float)(1.0 / sqrt(m->attn_scalar)));
    cJSON_AddNumberToObject(wx, "ropeLocalTheta", m->rope_local_theta);
    if (m->rope_linear != 1.0) {
      cJSON *rs = cJSON_AddObjectToObject(wx, "ropeScaling");
      cJSON_AddStringToObject(rs, "type", "linear");
      cJSON_AddNumberToObject(rs, "factor", m->rope_linear);
    }
  }
  cJSON_AddNumberToObject(wx, "ropeTheta", m->rope_theta);
  cJSON_AddNumberToObject(wx, "normEps", m->norm_eps);
  cJSON_AddStringToObject(wx, "tokenizer", tokenizer ? "bpe" : "byte");
  if (!strcmp(m->arch, "llama")) cJSON_AddBoolToObject(wx, "qkNorm", 0);
  char source[96]; /* "gguf ARCH": export-gguf writes the same architecture back */
  snprintf(source, sizeof source, "gguf %s", m->arch);
  cJSON_AddStringToObject(wx, "source", source);
  return root;
}

static wisp_status open_source(const char *path, builder *b, wisp_gguf_model *m, int *tokenizer,
                               const wisp_gguf_arch **ga) {
  wisp_status st = WISP_OK;
  b->g = b->src->g;
  int64_t splits = 0;
  if (wisp_gguf_get_int(b->g, "split.count", &splits) && splits > 1)
    return wisp_fail(WISP_EUNSUPPORTED, "%s: one part of a GGUF split into %lld files; wisp reads one file: merge "
                     "them with llama.cpp's `llama-gguf-split --merge FIRST-PART.gguf OUT.gguf` and run OUT.gguf",
                     path, (long long)splits);
  if ((st = wisp_gguf_read_model(b->g, m, ga))) return st;
  b->m = m;
  b->geo = wisp_gguf_model_geom(m);
  if ((st = wisp_gguf_memory_tokenizer(b->g, b->g->label, tokenizer))) return st;
  b->src->tokenizer = *tokenizer;
  return WISP_OK;
}

wisp_status wisp_gguf_artifact_open(const char *path, wisp_artifact **out) {
  *out = NULL;
  int part, count;
  if (wisp_gguf_split_name(path, &part, &count) && count > 1)
    return wisp_fail(WISP_EUNSUPPORTED, "%s: part %d of a GGUF split into %d files; wisp reads one file: merge them "
                     "with llama.cpp's `llama-gguf-split --merge FIRST-PART.gguf OUT.gguf` and run OUT.gguf", path,
                     part, count);
  wisp_gguf *g = NULL;
  wisp_status st = wisp_gguf_open(path, &g);
  if (st) return st;
  return wisp_gguf_artifact_from(g, out);
}

wisp_status wisp_gguf_artifact_from(wisp_gguf *g, wisp_artifact **out) {
  *out = NULL;
  const char *path = g->label;
  builder b = {0};
  wisp_gguf_model m;
  memset(&m, 0, sizeof m);
  wisp_artifact *a = NULL;
  const wisp_gguf_arch *ga = NULL;
  int tokenizer = 0;
  if (!(b.src = calloc(1, sizeof *b.src))) {
    wisp_gguf_close(g);
    return wisp_fail(WISP_ENOMEM, "out of memory");
  }
  b.src->g = g;
  wisp_status st = open_source(path, &b, &m, &tokenizer, &ga);
  if (!st) st = collect(&b, ga);
  for (int i = 0; !st && i < b.n_pieces; i++)
    st = b.pieces[i].vec ? build_vector(&b, &b.pieces[i]) : build_matrix(&b, &b.pieces[i]);
  const int max_pos = m.context;
  if (!strcmp(m.arch, "gemma3")) { /* two ropes: the model builds the tables */
    if (!st) st = build_gemma3_freqs(&b);
  } else if (!st) {
    st = build_rope(&b, max_pos < GGUF_PLAN_POSITIONS ? max_pos : GGUF_PLAN_POSITIONS);
  }
  if (!st) {
    cJSON *man = derive_manifest(&b, max_pos, tokenizer);
    char *text = man ? cJSON_PrintUnformatted(man) : NULL;
    cJSON_Delete(man);
    if (!text) st = wisp_fail(WISP_ENOMEM, "out of memory");
    else st = wisp_manifest_parse(text, path, &a);
    free(text);
  }
  if (!st && a->n_sections != b.n_out) st = wisp_fail(WISP_EFORMAT, "%s: derived manifest lost sections", path);
  for (int i = 0; !st && i < b.n_out; i++) { /* same order as derived */
    a->sections[i].data = b.out[i].data;
    a->sections[i].origin = b.out[i].origin;
    b.out[i].origin = NULL;
  }
  for (int i = 0; i < b.n_out; i++) {
    free(b.out[i].name);
    free(b.out[i].origin);
  }
  free(b.out);
  free(b.pieces);
  wisp_gguf_model_free(&m);
  if (!st && !(a->dir = strdup(path))) st = wisp_fail(WISP_ENOMEM, "out of memory");
  if (st) {
    wisp_artifact_free(a);
    wisp_gguf_source_free(b.src);
    return st;
  }
  a->gguf = b.src;
  a->gguf_free = wisp_gguf_source_free;
  *out = a;
  return WISP_OK;
}

/* The base and suffix of a part's section name, BASE@ROW.SUFFIX; 0 for
 * another name. */
static int part_name(const char *name, char *base, size_t cap, const char **suffix) {
  const char *at = strchr(name, '@'), *dot = at ? strchr(at, '.') : NULL;
  if (!dot || (size_t)(at - name) >= cap) return 0;
  snprintf(base, cap, "%.*s", (int)(at - name), name);
  *suffix = dot + 1;
  return 1;
}

/* How many sections from i on are the parts of one matrix that share a
 * type (a fused section whose tensors lie apart in the file): convert
 * writes them as one section BASE.SUFFIX, their bytes one after another,
 * as a contiguous matrix is stored. 1 for any other section, parts of
 * different types included (they stay parts). */
static int uniform_parts(const wisp_artifact *a, int i, char *name, size_t cap) {
  char base[128], other[128];
  const char *suffix, *s2;
  snprintf(name, cap, "%s", a->sections[i].name);
  /* from its first part (row 0), each part of the matrix the same type */
  if (!part_name(a->sections[i].name, base, sizeof base, &suffix) || strncmp(suffix - 3, "@0.", 3)) return 1;
  int n = 1;
  while (i + n < a->n_sections && part_name(a->sections[i + n].name, other, sizeof other, &s2) && !strcmp(other, base)) {
    if (strcmp(s2, suffix)) return 1; /* parts of different types stay parts */
    n++;
  }
  snprintf(name, cap, "%s.%s", base, suffix);
  return n;
}

/* The manifest's layout for the sections convert writes (uniform_parts
 * merged), laid out as the derived one is (add_layout). */
static wisp_status merged_layout(const wisp_artifact *a, cJSON *manifest, uint64_t *total) {
  cJSON *rt = cJSON_GetObjectItemCaseSensitive(manifest, "runtime");
  cJSON *secs = cJSON_CreateArray();
  char name[160];
  uint64_t at = 0;
  if (!secs) return wisp_fail(WISP_ENOMEM, "out of memory");
  for (int i = 0, n; i < a->n_sections; i += n) {
    n = uniform_parts(a, i, name, sizeof name);
    uint64_t bytes = 0;
    for (int k = 0; k < n; k++) bytes += a->sections[i + k].bytes;
    add_layout(secs, name, bytes, &at);
  }
  cJSON_ReplaceItemInObjectCaseSensitive(rt, "sections", secs);
  cJSON_ReplaceItemInObjectCaseSensitive(rt, "weightBytes", cJSON_CreateNumber((double)at));
  *total = at;
  return WISP_OK;
}

/* `--quant keep` (the default for a GGUF): the artifact is what running the
 * GGUF in place uses (format/gguf_artifact.h, one mapping for both), every
 * section written with the bytes it has there: matrices in their stored
 * type (Q4_0 as wisp q4, the same values), no requantization; a matrix in
 * row parts of one type as one contiguous section. */
wisp_status wisp_gguf_convert_keep(const char *path, const char *out_dir, int quiet) {
  wisp_artifact *a = NULL;
  wisp_writer *w = NULL;
  cJSON *manifest = NULL;
  uint64_t total = 0;
  wisp_status rc = wisp_gguf_artifact_open(path, &a);
  if (rc) return rc;
  if (!(manifest = cJSON_Duplicate(a->manifest, 1))) { rc = wisp_fail(WISP_ENOMEM, "out of memory"); goto done; }
  cJSON *wx = cJSON_GetObjectItemCaseSensitive(manifest, "wisp");
  cJSON_AddStringToObject(wx, "weights", "keep");
  if ((rc = merged_layout(a, manifest, &total))) goto done;
  if (!quiet)
    fprintf(stderr, "wisp convert: %s -> %s (keep: matrices in their GGUF types, %d sections, %.1f MB)\n", path,
            out_dir, a->n_sections, (double)total / 1e6);
  if ((rc = wisp_writer_begin(out_dir, total, &w))) goto done;
  static const char *const names[3] = {"tokenizer.json", "tokenizer_config.json", "generation_config.json"};
  char src[4200], name[160];
  for (int i = 0; i < 3 && !rc && !strcmp(a->tokenizer, "bpe"); i++) {
    snprintf(src, sizeof src, "%s/%s", path, names[i]);
    if (wisp_path_exists(src)) rc = wisp_writer_add_file(w, names[i], src);
  }
  const cJSON *secs = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(manifest, "runtime"), "sections");
  const cJSON *e = secs ? secs->child : NULL;
  for (int i = 0, n; i < a->n_sections && !rc && e; i += n, e = e->next) {
    n = uniform_parts(a, i, name, sizeof name);
    uint64_t at = (uint64_t)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(e, "offset"));
    for (int k = 0; k < n && !rc; k++) {
      const wisp_section *s = &a->sections[i + k];
      if (!quiet)
        fprintf(stderr, "  [%3d/%d] %-28s %s%s%s\n", i + k + 1, a->n_sections, s->name, s->origin ? s->origin : "",
                n > 1 ? " -> " : "", n > 1 ? name : "");
      rc = wisp_writer_put(w, at, wisp_section_data(a, s), (size_t)s->bytes);
      at += s->bytes;
    }
  }
  if (rc) goto done;
  rc = wisp_writer_commit(w, manifest);
  w = NULL; /* commit frees the writer, also on failure */
  if (!rc && !quiet) fprintf(stderr, "wisp convert: wrote %s\n", out_dir);
done:
  if (w) wisp_writer_abort(w);
  cJSON_Delete(manifest);
  wisp_artifact_free(a);
  return rc;
}
