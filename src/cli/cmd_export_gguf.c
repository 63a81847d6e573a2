/* wisp export-gguf DIR -o FILE.gguf: writes an artifact as a GGUF v3 file of
 * llama.cpp's architecture lfm2, qwen3, llama, qwen35 or qwen2, with the tensor
 * names, metadata keys and layout transforms of llama.cpp's own converter
 * (the tables of format/gguf_arch.c; docs/gguf.md).
 * Matrices stored as Q4_K, Q8_0 or F16 keep their bytes (GGUF has the same
 * layouts); every other matrix (f32, Q4, Q4Z) is written as F32 (Q4/Q4Z
 * dequantized), or as Q8_0 with --q8_0. --keep-quant writes Q4 / Q4Z as
 * GGUF Q4_0 / Q4_1 instead (the same nibbles, scales rounded to f16), so
 * that llama.cpp reads every matrix in the kind and size wisp reads it. Vectors are F32. The rope tables are not written
 * (llama.cpp computes them from rope.freq_base). A byte-level BPE tokenizer
 * in the artifact becomes tokenizer.ggml.* metadata. The file appears
 * atomically (temporary name + rename; Ctrl-C removes the temporary); an
 * existing non-empty FILE is replaced only with --force. */
#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/commands.h"
#include "format/artifact.h"
#include "format/gguf.h"
#include "format/gguf_arch.h"
#include "format/gguf_spm.h"
#include "format/quant.h"
#include "format/tensor.h"
#include "tokenizer/tok_settings.h"
#include "tokenizer/tokenizer.h"
#include "util/err.h"
#include "util/file.h"
#include "cli/opts.h"

typedef struct {
  const wisp_artifact *a;
  wisp_gguf_writer *w;
  int q8, keep; /* --q8_0, --keep-quant */
  wisp_gguf_geom geo;
  int file_type, file_type_rank; /* general.file_type (note_type) */
} exporter;

/* A wisp_matrix view of section base NAME (rows x cols), any weight type. */
static wisp_status view(const exporter *e, const char *name, int rows, int cols, wisp_matrix *m) {
  return wisp_matrix_bind(e->a, name, rows, cols, m);
}

/* general.file_type: llama.cpp's "mostly" type, the most compact matrix
 * type written (0 when all are F32). */
static void note_type(exporter *e, uint32_t ggml_type) {
  static const struct { uint32_t ggml; int file_type; } order[] = {
      {WISP_GGML_F16, 1}, {WISP_GGML_Q8_0, 7}, {WISP_GGML_Q4_1, 3}, {WISP_GGML_Q4_0, 2}, {WISP_GGML_Q4_K, 15}};
  for (int i = 0; i < 5; i++)
    if (order[i].ggml == ggml_type && i + 1 > e->file_type_rank) {
      e->file_type_rank = i + 1;
      e->file_type = order[i].file_type;
    }
}

/* Rows r0 + map[r] of a matrix as f32, then its columns reordered by cmap. */
static wisp_status gather_f32(const wisp_matrix *m, int r0, const int *map, int rows, const int *cmap, float *out) {
  const int cols = m->cols;
  float *row = malloc(sizeof(float) * (size_t)cols);
  if (!row) return wisp_fail(WISP_ENOMEM, "out of memory");
  for (int r = 0; r < rows; r++) {
    wisp_matrix_row_f32(m, r0 + map[r], row);
    for (int c = 0; c < cols; c++) out[(size_t)r * cols + c] = row[cmap[c]];
  }
  free(row);
  return WISP_OK;
}

/* 1 when the column map moves whole blocks of `block` columns (each block
 * kept in order and aligned), so that the blocks' bytes can be copied. */
static int cols_keep_blocks(const int *cmap, int cols, int block) {
  for (int c = 0; c < cols; c++) {
    const int first = cmap[c - c % block];
    if (first % block || cmap[c] != first + c % block) return 0;
  }
  return 1;
}

/* Block b of row r of a Q4/Q4Z matrix as GGUF Q4_0 (Q4) or Q4_1 (Q4Z):
 * the same nibbles, moved from wisp's pairs (elements 2j, 2j+1 in byte j)
 * to ggml's halves (elements j, j+16 in byte j); the f32 scale rounded to
 * f16, and Q4_1's min = -zero_point * scale. */
static size_t put_q4_block(const wisp_matrix *m, int r, int b, uint8_t *out) {
  const int nb = m->cols / 32;
  const size_t blk = (size_t)r * nb + b;
  const uint8_t *in = m->q + blk * 16;
  const float s = m->scales[blk];
  uint8_t u[32];
  for (int e = 0; e < 32; e++) u[e] = e & 1 ? in[e / 2] >> 4 : in[e / 2] & 15;
  uint16_t d = wisp_f32_to_f16(s);
  out[0] = (uint8_t)d, out[1] = (uint8_t)(d >> 8);
  size_t at = 2;
  if (m->type == WISP_W_Q4Z) {
    const int z = wisp_q4z_zero_point(m->zp, blk);
    uint16_t mn = wisp_f32_to_f16(-(float)z * s);
    out[2] = (uint8_t)mn, out[3] = (uint8_t)(mn >> 8);
    at = 4;
  }
  for (int j = 0; j < 16; j++) out[at + j] = (uint8_t)(u[j] | u[j + 16] << 4);
  return at + 16;
}

/* rows x cols f32 (already reordered) requantized to wisp type t; the
 * view's planes are allocated into mem[0..2] (freed by the caller). */
static wisp_status requantize(const float *w, int rows, int cols, wisp_wtype t, wisp_matrix *m, void *mem[3]) {
  const size_t nb = (size_t)rows * (cols / 32);
  uint8_t *q = mem[0] = malloc((size_t)wisp_quant_bytes(t, rows, cols));
  float *sc = mem[1] = malloc(nb * sizeof(float) + 1);
  uint8_t *zp = mem[2] = malloc(nb / 2 + 1);
  if (!q || !sc || !zp) return wisp_fail(WISP_ENOMEM, "out of memory");
  *m = (wisp_matrix){.type = t, .rows = rows, .cols = cols, .q = q, .scales = sc, .zp = zp};
  if (t == WISP_W_Q4) wisp_quantize_q4(w, rows, cols, q, sc);
  else if (t == WISP_W_Q4Z) wisp_quantize_q4z(w, rows, cols, q, sc, zp);
  else if (t == WISP_W_Q4K) wisp_quantize_q4k(w, rows, cols, q);
  else if (t == WISP_W_Q8_0) wisp_quantize_q8_0_rows(w, rows, cols, q);
  else wisp_quantize_f16(w, rows, cols, q);
  return WISP_OK;
}

/* A matrix part (rule->part of section SEC) as GGUF tensor GNAME: a
 * quantized type with a GGUF twin (Q4_K, Q8_0, F16: format/quant.h) keeps
 * its bytes, copied block by block (a row permutation, or a column one that
 * moves whole blocks, keeps them valid); others go out as F32, or Q8_0 with
 * --q8_0, after the rule's transforms. With --keep-quant every quantized
 * matrix keeps its kind and size: Q4 / Q4Z become Q4_0 / Q4_1 (the same
 * nibbles), and a column transform that splits blocks requantizes the
 * reordered values to the matrix's own type. */
static wisp_status put_matrix(exporter *e, const wisp_gguf_rule *rule, const char *sec, const char *gname) {
  int total, r0, rows, cols;
  wisp_gguf_part_dims(&e->geo, rule->part, &total, &r0, &rows, &cols);
  wisp_matrix m;
  wisp_status st = view(e, sec, total, cols, &m);
  if (st) return st;
  if (m.n_parts) { /* a matrix in row parts (a GGUF's fused section mixing types): the part holding these rows */
    int i = 0;
    while (i + 1 < m.n_parts && r0 >= m.parts[i + 1].out_row0) i++;
    if (r0 + rows > m.parts[i].out_row0 + m.parts[i].rows)
      return wisp_fail(WISP_EFORMAT, "%s: rows %d-%d of section '%s' span two of its parts", e->a->dir, r0,
                       r0 + rows - 1, sec);
    r0 -= m.parts[i].out_row0;
    m = m.parts[i];
  }
  int *map = malloc(sizeof(int) * (size_t)rows), *cmap = malloc(sizeof(int) * (size_t)cols);
  size_t n = (size_t)rows * cols;
  float *buf = NULL;
  uint8_t *q = NULL;
  void *mem[3] = {NULL, NULL, NULL};
  uint64_t ne[2] = {(uint64_t)cols, (uint64_t)rows};
  if (!map || !cmap) { st = wisp_fail(WISP_ENOMEM, "out of memory"); goto done; }
  /* an adjacent-pair artifact's q/k rows are already in llama.cpp's order */
  const unsigned xform = wisp_gguf_xform_for(rule->xform, e->a->shape.rope_pairs);
  if ((st = wisp_gguf_row_map(&e->geo, xform, rows, gname, map)) ||
      (st = wisp_gguf_col_map(&e->geo, xform, cols, gname, cmap)))
    goto done;
  const wisp_quant_traits *qt = wisp_quant_traits_of(m.type);
  const int is_q4 = m.type == WISP_W_Q4 || m.type == WISP_W_Q4Z;
  const int twin = m.type != WISP_W_F32 && qt->ggml_type != WISP_QUANT_NO_GGML;
  /* types with a quantizer here (requantize); the other ggml block types
   * whose blocks a column order splits go out as F32 (or Q8_0) instead */
  const int requantizable = is_q4 || m.type == WISP_W_Q4K || m.type == WISP_W_Q8_0 || m.type == WISP_W_F16;
  int keeps_kind = twin || (is_q4 && e->keep); /* goes out in its own kind of blocks */
  if (keeps_kind && !requantizable && !cols_keep_blocks(cmap, cols, qt->block)) keeps_kind = 0;
  if (keeps_kind && e->keep && !cols_keep_blocks(cmap, cols, qt->block)) {
    /* the blocks do not survive the column order: same type, new blocks */
    if (!(buf = malloc(n * sizeof(float)))) { st = wisp_fail(WISP_ENOMEM, "out of memory"); goto done; }
    if ((st = gather_f32(&m, r0, map, rows, cmap, buf)) || (st = requantize(buf, rows, cols, m.type, &m, mem)))
      goto done;
    r0 = 0;
    for (int r = 0; r < rows; r++) map[r] = r;
    for (int c = 0; c < cols; c++) cmap[c] = c;
  }
  if (keeps_kind && cols_keep_blocks(cmap, cols, qt->block)) {
    const int nb = cols / qt->block;
    const uint32_t gt = !is_q4 ? qt->ggml_type : m.type == WISP_W_Q4 ? WISP_GGML_Q4_0 : WISP_GGML_Q4_1;
    size_t bb;
    wisp_ggml_block(gt, &bb);
    const size_t rb = bb * (size_t)nb, src_rb = (size_t)wisp_quant_bytes(m.type, 1, cols);
    if (!(q = malloc(rb * (size_t)rows))) { st = wisp_fail(WISP_ENOMEM, "out of memory"); goto done; }
    for (int r = 0; r < rows; r++)
      for (int b = 0; b < nb; b++) {
        const int sb = cmap[b * qt->block] / qt->block;
        uint8_t *dst = q + (size_t)r * rb + (size_t)b * bb;
        if (is_q4) put_q4_block(&m, r0 + map[r], sb, dst);
        else memcpy(dst, m.q + (size_t)(r0 + map[r]) * src_rb + (size_t)sb * bb, bb);
      }
    st = wisp_gguf_add_tensor(e->w, gname, 2, ne, gt, q, rb * (size_t)rows);
    note_type(e, gt);
    goto done;
  }
  if (!buf && !(buf = malloc(n * sizeof(float)))) { st = wisp_fail(WISP_ENOMEM, "out of memory"); goto done; }
  if ((st = gather_f32(&m, r0, map, rows, cmap, buf))) goto done;
  if (e->q8 && cols % 32 == 0) {
    if (!(q = malloc(n / 32 * 34 + 1))) { st = wisp_fail(WISP_ENOMEM, "out of memory"); goto done; }
    wisp_quantize_q8_0(buf, n, q);
    st = wisp_gguf_add_tensor(e->w, gname, 2, ne, WISP_GGML_Q8_0, q, n / 32 * 34);
    note_type(e, WISP_GGML_Q8_0);
  } else {
    st = wisp_gguf_add_tensor(e->w, gname, 2, ne, WISP_GGML_F32, buf, n * sizeof(float));
  }
done:
  free(map);
  free(cmap);
  free(buf);
  free(q);
  for (int i = 0; i < 3; i++) free(mem[i]);
  return st;
}

/* An f32 vector section (1-d in GGUF) or conv kernel ([channels][L],
 * ne = {L, channels}), rows reordered and values transformed per the rule. */
static wisp_status put_vector(exporter *e, const wisp_gguf_rule *rule, const char *sec, const char *gname) {
  const wisp_section *s = wisp_artifact_section(e->a, sec);
  if (!s) return wisp_fail(WISP_EFORMAT, "%s: missing section '%s'", e->a->dir, sec);
  const int L = e->geo.conv_l, taps = rule->part == GA_P_TAPS;
  const uint64_t n = s->bytes / 4;
  const int cols = taps ? L : 1, rows = (int)(n / (uint64_t)cols);
  if (s->bytes % 4 || n % (uint64_t)cols || n > (1u << 30))
    return wisp_fail(WISP_EFORMAT, "section '%s' has %llu bytes, not a whole number of rows of %d f32", sec,
                     (unsigned long long)s->bytes, cols);
  const uint8_t *v; /* the mapped section, copied bytewise (no alignment assumed) */
  wisp_status st = wisp_artifact_bytes(e->a, sec, 0, &v);
  float *out = malloc(sizeof(float) * (size_t)n + 1);
  int *map = malloc(sizeof(int) * (size_t)rows + 1);
  if (!st && (!out || !map)) st = wisp_fail(WISP_ENOMEM, "out of memory");
  if (!st) st = wisp_gguf_row_map(&e->geo, wisp_gguf_xform_for(rule->xform, e->a->shape.rope_pairs), rows, gname, map);
  if (!st) {
    for (int r = 0; r < rows; r++)
      memcpy(out + (size_t)r * cols, v + sizeof(float) * (size_t)map[r] * cols, sizeof(float) * cols);
    wisp_gguf_values_export(rule->xform, out, (size_t)n);
    uint64_t ne[2] = {taps ? (uint64_t)L : n, (uint64_t)rows};
    st = wisp_gguf_add_tensor(e->w, gname, taps ? 2 : 1, ne, WISP_GGML_F32, out, (size_t)n * 4);
  }
  free(out);
  free(map);
  return st;
}

/* One table row for layer `layer` (-1: a global tensor). */
static wisp_status put_rule(exporter *e, const wisp_gguf_rule *rule, int layer) {
  char sec[96], gname[128];
  if (layer >= 0) {
    snprintf(sec, sizeof sec, rule->section, layer);
    snprintf(gname, sizeof gname, "blk.%d.%s", layer, rule->gguf);
  } else {
    snprintf(sec, sizeof sec, "%s", rule->section);
    snprintf(gname, sizeof gname, "%s", rule->gguf);
  }
  return rule->part == GA_P_VEC || rule->part == GA_P_TAPS ? put_vector(e, rule, sec, gname)
                                                           : put_matrix(e, rule, sec, gname);
}

/* A SentencePiece-style tokenizer.json -> tokenizer.ggml.model "llama":
 * tokens, scores in merge order, token types, add_space_prefix (llama.cpp
 * merges by score, so the scores carry the merge ranks). */
static wisp_status put_spm_tokenizer(exporter *e, const cJSON *root, const char *path) {
  wisp_spm_vocab v;
  wisp_status st = wisp_spm_vocab_from_json(root, e->a->shape.vocab, path, &v);
  if (st) return st;
  wisp_gguf_put_str(e->w, "tokenizer.ggml.model", "llama");
  wisp_gguf_put_str(e->w, "tokenizer.ggml.pre", "default");
  wisp_gguf_put_arr_str(e->w, "tokenizer.ggml.tokens", v.tokens, (uint64_t)v.n);
  wisp_gguf_put_arr_f32(e->w, "tokenizer.ggml.scores", v.scores, (uint64_t)v.n);
  wisp_gguf_put_arr_i32(e->w, "tokenizer.ggml.token_type", v.types, (uint64_t)v.n);
  wisp_gguf_put_bool(e->w, "tokenizer.ggml.add_space_prefix", v.add_space_prefix);
  if (v.unk >= 0) wisp_gguf_put_u32(e->w, "tokenizer.ggml.unknown_token_id", (uint32_t)v.unk);
  wisp_spm_vocab_free(&v);
  return WISP_OK;
}

/* tokenizer.json (byte-level BPE, or SentencePiece style) -> tokenizer.ggml.* */
static wisp_status put_tokenizer(exporter *e, const char *dir) {
  const cJSON *wx = cJSON_GetObjectItemCaseSensitive(e->a->manifest, "wisp");
  const cJSON *files = cJSON_GetObjectItemCaseSensitive(wx, "tokenizerFiles");
  const cJSON *tj = cJSON_GetObjectItemCaseSensitive(files, "tokenizer");
  char path[4200];
  snprintf(path, sizeof path, "%s/%s", dir, cJSON_IsString(tj) ? tj->valuestring : "tokenizer.json");
  char *text = NULL;
  wisp_status st = wisp_read_file(path, &text, NULL);
  if (st) return st;
  cJSON *root = cJSON_Parse(text);
  free(text);
  if (wisp_spm_is_sentencepiece(root)) {
    st = put_spm_tokenizer(e, root, path);
    cJSON_Delete(root);
    return st;
  }
  const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
  const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
  const cJSON *merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
  if (!cJSON_IsObject(vocab) || !cJSON_IsArray(merges)) {
    cJSON_Delete(root);
    return wisp_fail(WISP_EFORMAT, "%s: needs model.vocab and model.merges", path);
  }
  int n = e->a->shape.vocab;
  const char **tokens = calloc((size_t)n, sizeof *tokens);
  int32_t *types = calloc((size_t)n, sizeof *types);
  char (*pad)[24] = calloc((size_t)n, 24);
  int nm = cJSON_GetArraySize(merges);
  char **ms = calloc((size_t)nm + 1, sizeof *ms);
  if (!tokens || !types || !pad || !ms) { st = wisp_fail(WISP_ENOMEM, "out of memory"); goto done; }
  const cJSON *v;
  cJSON_ArrayForEach(v, vocab) {
    int id = (int)cJSON_GetNumberValue(v);
    if (id >= 0 && id < n) { tokens[id] = v->string; types[id] = 1; }
  }
  const cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
  cJSON_ArrayForEach(v, added) {
    int id = (int)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(v, "id"));
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(v, "content");
    if (id >= 0 && id < n && cJSON_IsString(c)) {
      tokens[id] = c->valuestring;
      types[id] = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(v, "special")) ? 3 : 4;
    }
  }
  for (int i = 0; i < n; i++)
    if (!tokens[i]) { snprintf(pad[i], 24, "[PAD%d]", i); tokens[i] = pad[i]; types[i] = 5; /* unused */ }
  int k = 0;
  cJSON_ArrayForEach(v, merges) {
    if (cJSON_IsString(v)) ms[k] = strdup(v->valuestring);
    else if (cJSON_IsArray(v) && cJSON_GetArraySize(v) == 2) {
      const char *a = cJSON_GetStringValue(cJSON_GetArrayItem(v, 0)), *b = cJSON_GetStringValue(cJSON_GetArrayItem(v, 1));
      if (a && b && (ms[k] = malloc(strlen(a) + strlen(b) + 2))) sprintf(ms[k], "%s %s", a, b);
    }
    if (!ms[k]) { st = wisp_fail(WISP_EFORMAT, "%s: model.merges[%d] is not \"a b\" or [a, b]", path, k); goto done; }
    k++;
  }
  wisp_gguf_put_str(e->w, "tokenizer.ggml.model", "gpt2");
  /* The pre-tokenizer's name, recognised from its split regex. */
  const char *pre = "default";
  char *pt = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"));
  if (pt && strstr(pt, "\\\\p{M}")) pre = "qwen35";
  else if (pt && strstr(pt, "\\\\p{N}{1,3}")) pre = "llama-bpe";
  else if (pt && strstr(pt, "\\\\p{N}|")) pre = "qwen2";
  free(pt);
  wisp_gguf_put_str(e->w, "tokenizer.ggml.pre", pre);
  wisp_gguf_put_arr_str(e->w, "tokenizer.ggml.tokens", tokens, (uint64_t)n);
  wisp_gguf_put_arr_i32(e->w, "tokenizer.ggml.token_type", types, (uint64_t)n);
  wisp_gguf_put_arr_str(e->w, "tokenizer.ggml.merges", (const char *const *)ms, (uint64_t)k);
done:
  for (int i = 0; i < nm; i++) free(ms[i]);
  free(ms);
  free(tokens);
  free(types);
  free(pad);
  cJSON_Delete(root);
  return st;
}

/* What the tokenizer does beyond its vocabulary: the BOS/EOS flags (from the
 * post-processor), the special ids and the chat template, under llama.cpp's
 * keys, so that llama.cpp encodes prompts as wisp does and an import gets
 * them back (docs/gguf.md, "Tokenizer"). */
static wisp_status put_tokenizer_settings(exporter *e, const char *dir) {
  const wisp_artifact *a = e->a;
  wisp_tokenizer *t = NULL;
  wisp_tok_settings ts;
  wisp_status st = wisp_tokenizer_for_artifact(dir, a->tokenizer, a->manifest, a->shape.vocab, &t);
  if (st) return st;
  st = wisp_tok_settings_for_artifact(dir, a->manifest, t, &ts);
  wisp_tokenizer_free(t);
  if (st) return st;
  if (ts.bos >= 0) wisp_gguf_put_u32(e->w, "tokenizer.ggml.bos_token_id", (uint32_t)ts.bos);
  if (ts.eos >= 0) wisp_gguf_put_u32(e->w, "tokenizer.ggml.eos_token_id", (uint32_t)ts.eos);
  static const char *const extra_keys[WISP_TOK_MAX_EXTRA_STOP] = {"tokenizer.ggml.eot_token_id",
                                                                   "tokenizer.ggml.eom_token_id"};
  for (int i = 0; i < ts.n_extra_stop; i++) wisp_gguf_put_u32(e->w, extra_keys[i], (uint32_t)ts.extra_stop[i]);
  if (ts.pad >= 0) wisp_gguf_put_u32(e->w, "tokenizer.ggml.padding_token_id", (uint32_t)ts.pad);
  /* Always written: llama.cpp's default when absent depends on the
   * pre-tokenizer's name (true for llama-bpe) and would differ from wisp. */
  wisp_gguf_put_bool(e->w, "tokenizer.ggml.add_bos_token", ts.add_bos);
  wisp_gguf_put_bool(e->w, "tokenizer.ggml.add_eos_token", ts.add_eos);
  if (ts.chat_template) wisp_gguf_put_str(e->w, "tokenizer.chat_template", ts.chat_template);
  wisp_tok_settings_free(&ts);
  return WISP_OK;
}

static const cJSON *wisp_field(const wisp_artifact *a, const char *key) {
  return cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(a->manifest, "wisp"), key);
}

/* The llama.cpp architecture an artifact goes out as: qwen35 for Qwen 3.5;
 * an lfm2 graph without q/k norm is a Llama import; an all-attention one
 * that came from Qwen3 (Hugging Face or a qwen3 GGUF) is qwen3; else lfm2. */
static wisp_status export_arch(const wisp_artifact *a, const wisp_gguf_arch **out) {
  const cJSON *src = wisp_field(a, "source");
  const char *from = cJSON_IsString(src) ? src->valuestring : "";
  int n_conv = 0;
  for (int i = 0; i < a->shape.n_layers; i++) n_conv += a->shape.layer_types[i] == WISP_LAYER_CONV;
  const char *name = "lfm2";
  if (!strcmp(a->architecture, "qwen3_5")) name = "qwen35";
  else if (!strcmp(a->architecture, "qwen2")) name = "qwen2";
  else if (!strcmp(a->architecture, "gemma3")) name = "gemma3";
  else if (strcmp(a->architecture, "lfm2"))
    return wisp_fail(WISP_EUNSUPPORTED, "%s: architecture '%s' cannot be exported to GGUF (lfm2, qwen3_5, qwen2 and gemma3)",
                     a->dir, a->architecture);
  else if (cJSON_IsFalse(wisp_field(a, "qkNorm"))) name = "llama";
  else if (!n_conv && (strstr(from, "Qwen3ForCausalLM") || !strcmp(from, "gguf qwen3"))) name = "qwen3";
  *out = wisp_gguf_arch_find(name);
  return WISP_OK;
}

static wisp_gguf_geom geom_of(const wisp_artifact *a) {
  const wisp_shape *s = &a->shape;
  const int gated = !strcmp(a->architecture, "qwen3_5"); /* q rows: [q | gate] per head */
  wisp_gguf_geom g = {.hidden = s->hidden, .ffn = s->ffn, .vocab = s->vocab, .conv_l = s->conv_cache,
                      .heads = s->heads, .kv_heads = s->kv_heads, .head_dim = s->head_dim,
                      .q_rows = (gated ? 2 : 1) * s->heads * s->head_dim, .lin_k_heads = s->lin_k_heads,
                      .lin_v_heads = s->lin_v_heads, .lin_k_dim = s->lin_k_dim, .lin_v_dim = s->lin_v_dim};
  return g;
}

/* qwen35 marks its full-attention layers by an interval (layer i attends
 * when (i + 1) % interval == 0); other patterns cannot be written. */
static wisp_status full_attention_interval(const wisp_artifact *a, int *out) {
  const wisp_shape *s = &a->shape;
  int first = s->n_layers;
  for (int i = s->n_layers - 1; i >= 0; i--)
    if (s->layer_types[i] != WISP_LAYER_LINEAR) first = i;
  *out = first + 1;
  for (int i = 0; i < s->n_layers; i++)
    if ((s->layer_types[i] != WISP_LAYER_LINEAR) != ((i + 1) % *out == 0))
      return wisp_fail(WISP_EUNSUPPORTED, "%s: the full-attention layers are not every %dth layer, which is all "
                       "qwen35.full_attention_interval can say", a->dir, *out);
  return WISP_OK;
}

/* The Gated DeltaNet keys (llama.cpp's ssm.*) and the partial, sectioned
 * rope of qwen35 (text positions: every section sees the same position). */
static wisp_status put_qwen35_keys(exporter *e) {
  const wisp_shape *s = &e->a->shape;
  int interval;
  wisp_status st = full_attention_interval(e->a, &interval);
  if (st) return st;
  wisp_gguf_put_u32(e->w, "qwen35.ssm.conv_kernel", (uint32_t)s->conv_cache);
  wisp_gguf_put_u32(e->w, "qwen35.ssm.state_size", (uint32_t)s->lin_k_dim);
  wisp_gguf_put_u32(e->w, "qwen35.ssm.group_count", (uint32_t)s->lin_k_heads);
  wisp_gguf_put_u32(e->w, "qwen35.ssm.time_step_rank", (uint32_t)s->lin_v_heads);
  wisp_gguf_put_u32(e->w, "qwen35.ssm.inner_size", (uint32_t)(s->lin_v_dim * s->lin_v_heads));
  wisp_gguf_put_u32(e->w, "qwen35.full_attention_interval", (uint32_t)interval);
  wisp_gguf_put_u32(e->w, "qwen35.rope.dimension_count", (uint32_t)s->rotary_dim);
  /* rotary pairs split in thirds: [11, 11, 10, 0] for the released 64 dims */
  const int pairs = s->rotary_dim / 2;
  int32_t sections[4] = {(pairs + 2) / 3, (pairs + 1) / 3, pairs / 3, 0};
  wisp_gguf_put_arr_i32(e->w, "qwen35.rope.dimension_sections", sections, 4);
  return WISP_OK;
}

/* gemma3: the sliding window and which layers slide (llama.cpp: layer i is
 * global when i % pattern == pattern - 1), the sliding layers' rope base,
 * the global layers' linear rope factor; llama.cpp scales the scores by
 * 1/sqrt(key_length) (n_embd/n_head for 62 layers), so another scale is refused. */
static wisp_status put_gemma3_keys(exporter *e) {
  const wisp_artifact *a = e->a;
  const int n = a->shape.n_layers;
  const cJSON *sw = wisp_field(a, "slidingWindow"), *gl = wisp_field(a, "globalLayers");
  if (!cJSON_IsNumber(sw) || !cJSON_IsArray(gl))
    return wisp_fail(WISP_EFORMAT, "%s: a gemma3 artifact needs wisp.slidingWindow and wisp.globalLayers", a->dir);
  unsigned char *global = calloc((size_t)n, 1);
  if (!global) return wisp_fail(WISP_ENOMEM, "out of memory");
  const cJSON *x;
  cJSON_ArrayForEach(x, gl) if (cJSON_IsNumber(x) && x->valuedouble >= 0 && x->valuedouble < n) global[(int)x->valuedouble] = 1;
  int pattern = 0;
  for (int i = 0; i < n && !pattern; i++)
    if (global[i]) pattern = i + 1;
  if (!pattern) pattern = n + 1; /* no global layer */
  int regular = 1;
  for (int i = 0; i < n; i++) regular &= global[i] == (i % pattern == pattern - 1);
  free(global);
  if (!regular)
    return wisp_fail(WISP_EUNSUPPORTED, "%s: the global layers are not every %dth layer, which is all "
                     "gemma3.attention.sliding_window_pattern can say", a->dir, pattern);
  const cJSON *sc = wisp_field(a, "attnScale");
  const double want = n == 62 ? 1.0 / sqrt((double)a->shape.hidden / a->shape.heads) : 1.0 / sqrt(a->shape.head_dim);
  if (cJSON_IsNumber(sc) && fabs(sc->valuedouble - want) > 1e-6 * want)
    return wisp_fail(WISP_EUNSUPPORTED, "%s: attention scale %g (query_pre_attn_scalar) is not the %g llama.cpp "
                     "uses for gemma3", a->dir, sc->valuedouble, want);
  wisp_gguf_put_u32(e->w, "gemma3.attention.sliding_window", (uint32_t)sw->valuedouble);
  wisp_gguf_put_u32(e->w, "gemma3.attention.sliding_window_pattern", (uint32_t)pattern);
  const cJSON *lt = wisp_field(a, "ropeLocalTheta");
  wisp_gguf_put_f32(e->w, "gemma3.rope.freq_base_swa", cJSON_IsNumber(lt) ? (float)lt->valuedouble : 10000.0f);
  const cJSON *rs = wisp_field(a, "ropeScaling");
  const char *type = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(rs, "type"));
  if (type && !strcmp(type, "linear")) {
    wisp_gguf_put_str(e->w, "gemma3.rope.scaling.type", "linear");
    wisp_gguf_put_f32(e->w, "gemma3.rope.scaling.factor",
                      (float)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(rs, "factor")));
  }
  return WISP_OK;
}

/* ARCH.* hyperparameters, as llama.cpp's converter names them. */
static wisp_status put_metadata(exporter *e, const wisp_gguf_arch *ga) {
  const wisp_artifact *a = e->a;
  const wisp_shape *s = &a->shape;
  wisp_gguf_writer *w = e->w;
  const int lfm2 = !strcmp(ga->name, "lfm2");
  char key[128];
#define KEY(suffix) (snprintf(key, sizeof key, "%s.%s", ga->name, suffix), key)
  wisp_gguf_put_str(w, "general.architecture", ga->name);
  wisp_gguf_put_str(w, "general.name", "wisp export");
  wisp_gguf_put_u32(w, "general.alignment", 32);
  wisp_gguf_put_u32(w, "general.quantization_version", 2);
  wisp_gguf_put_u32(w, KEY("block_count"), (uint32_t)s->n_layers);
  wisp_gguf_put_u32(w, KEY("context_length"), (uint32_t)a->max_positions);
  wisp_gguf_put_u32(w, KEY("embedding_length"), (uint32_t)s->hidden);
  wisp_gguf_put_u32(w, KEY("feed_forward_length"), (uint32_t)s->ffn);
  wisp_gguf_put_u32(w, KEY("attention.head_count"), (uint32_t)s->heads);
  if (lfm2) { /* per layer, 0 on conv layers */
    int32_t *kvh = calloc((size_t)s->n_layers, sizeof *kvh);
    if (!kvh) return wisp_fail(WISP_ENOMEM, "out of memory");
    for (int i = 0; i < s->n_layers; i++) kvh[i] = s->layer_types[i] == WISP_LAYER_ATTENTION ? s->kv_heads : 0;
    wisp_gguf_put_arr_i32(w, KEY("attention.head_count_kv"), kvh, (uint64_t)s->n_layers);
    free(kvh);
  } else {
    wisp_gguf_put_u32(w, KEY("attention.head_count_kv"), (uint32_t)s->kv_heads);
  }
  wisp_gguf_put_u32(w, KEY("attention.key_length"), (uint32_t)s->head_dim);
  wisp_gguf_put_u32(w, KEY("attention.value_length"), (uint32_t)s->head_dim);
  wisp_gguf_put_f32(w, KEY("rope.freq_base"), (float)a->rope_theta);
  wisp_gguf_put_f32(w, KEY("attention.layer_norm_rms_epsilon"), (float)a->norm_eps);
  wisp_gguf_put_u32(w, KEY("vocab_size"), (uint32_t)s->vocab);
  if (lfm2) wisp_gguf_put_u32(w, KEY("shortconv.l_cache"), (uint32_t)s->conv_cache);
  if (!strcmp(ga->name, "llama")) wisp_gguf_put_u32(w, KEY("rope.dimension_count"), (uint32_t)s->head_dim);
#undef KEY
  return !strcmp(ga->name, "qwen35") ? put_qwen35_keys(e) : !strcmp(ga->name, "gemma3") ? put_gemma3_keys(e) : WISP_OK;
}

/* rope_freqs.weight (llama): per rope frequency the divisor llama.cpp
 * applies, from wisp.ropeScaling: llama3 parameters evaluated as
 * conversion/llama.py does (1, factor, or 1 / ((1 - s) / factor + s) by
 * wavelength), or the factors a GGUF import carried over. */
static wisp_status put_rope_freqs(exporter *e) {
  const cJSON *rs = wisp_field(e->a, "ropeScaling");
  const char *type = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(rs, "type"));
  if (!type) return WISP_OK;
  const int D = e->a->shape.head_dim, half = D / 2;
  float *f = malloc(sizeof(float) * (size_t)half + 1);
  if (!f) return wisp_fail(WISP_ENOMEM, "out of memory");
  wisp_status st = WISP_OK;
  const cJSON *list = cJSON_GetObjectItemCaseSensitive(rs, "factors");
#define NUM(k) ((float)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(rs, k)))
  const float factor = NUM("factor"), low = NUM("lowFreqFactor"), high = NUM("highFreqFactor");
  const float old = NUM("originalMaxPositions");
#undef NUM
  for (int i = 0; !st && i < half; i++) {
    if (!strcmp(type, "freqFactors")) {
      f[i] = (float)cJSON_GetNumberValue(cJSON_GetArrayItem(list, i));
      if (cJSON_GetArraySize(list) != half || !(f[i] > 0))
        st = wisp_fail(WISP_EFORMAT, "%s: wisp.ropeScaling.factors must hold %d positive numbers", e->a->dir, half);
      continue;
    }
    if (strcmp(type, "llama3") || !(factor > 0) || !(high > low) || !(old > 0)) {
      st = wisp_fail(WISP_EUNSUPPORTED, "%s: wisp.ropeScaling type '%s' cannot be written as GGUF rope_freqs", e->a->dir,
                     type);
      break;
    }
    const float inv = 1.0f / powf((float)e->a->rope_theta, (float)(2 * i) / (float)D);
    const float wl = 2.0f * 3.14159265358979323846f / inv, smooth = (old / wl - low) / (high - low);
    f[i] = wl < old / high ? 1.0f : wl > old / low ? factor : 1.0f / ((1.0f - smooth) / factor + smooth);
  }
  uint64_t ne[1] = {(uint64_t)half};
  if (!st) st = wisp_gguf_add_tensor(e->w, "rope_freqs.weight", 1, ne, WISP_GGML_F32, f, sizeof(float) * (size_t)half);
  free(f);
  return st;
}

/* Whether the artifact has a head with its own bytes (not the embedding's). */
static int own_head(const wisp_artifact *a) {
  int nt;
  const wisp_quant_traits *tab = wisp_quant_table(&nt); /* every type's first section */
  char h[32], m[32];
  for (int i = 0; i < nt; i++) {
    snprintf(h, sizeof h, "head.%s", tab[i].planes[0].suffix);
    snprintf(m, sizeof m, "embed.%s", tab[i].planes[0].suffix);
    const wisp_section *he = wisp_artifact_section(a, h), *ee = wisp_artifact_section(a, m);
    if (he) return !ee || he->offset != ee->offset;
  }
  return 0;
}

/* Every tensor of the architecture's table, layer by layer, then the globals. */
static wisp_status put_tensors(exporter *e, const wisp_gguf_arch *ga) {
  const wisp_shape *s = &e->a->shape;
  wisp_status st = WISP_OK;
  for (int i = 0; !st && i < s->n_layers; i++)
    for (size_t k = 0; !st && k < ga->n_rules; k++)
      if (ga->rules[k].section && wisp_gguf_rule_applies(&ga->rules[k], s->layer_types[i]))
        st = put_rule(e, &ga->rules[k], i);
  for (size_t k = 0; !st && k < ga->n_rules; k++) {
    const wisp_gguf_rule *r = &ga->rules[k];
    if (r->where != GA_GLOBAL || !r->section || (!strcmp(r->section, "head") && !own_head(e->a))) continue;
    st = put_rule(e, r, -1);
  }
  return st;
}

static wisp_status export_model(exporter *e, const char *dir) {
  const wisp_gguf_arch *ga = NULL;
  wisp_status st;
  e->geo = geom_of(e->a);
  if ((st = export_arch(e->a, &ga)) || (st = put_metadata(e, ga))) return st;
  /* adjacent pairs are llama.cpp's rope order of llama's q/k rows; an
   * architecture llama.cpp ropes NEOX-style has no GGUF order for them */
  if (e->a->shape.rope_pairs == WISP_ROPE_ADJACENT && !wisp_gguf_arch_rope_permuted(ga))
    return wisp_fail(WISP_EUNSUPPORTED, "%s: q/k rows in adjacent rope pair order cannot be written as %s", dir,
                     ga->name);
  for (int i = 0; i < e->a->shape.n_layers; i++)
    if (e->a->shape.layer_types[i] == WISP_LAYER_CONV && strcmp(ga->name, "lfm2"))
      return wisp_fail(WISP_EUNSUPPORTED, "%s: a conv layer cannot be written as %s", dir, ga->name);
  if (!strcmp(e->a->tokenizer, "bpe") && ((st = put_tokenizer(e, dir)) || (st = put_tokenizer_settings(e, dir))))
    return st;
  if (!strcmp(ga->name, "llama") && (st = put_rope_freqs(e))) return st;
  if ((st = put_tensors(e, ga))) return st;
  /* llama_ftype: 0 all F32, 1 mostly F16, 7 mostly Q8_0, 15 mostly Q4_K_M (note_type) */
  wisp_gguf_put_u32(e->w, "general.file_type", (uint32_t)e->file_type);
  return WISP_OK;
}

int cmd_export_gguf(int argc, char **argv) {
  const char *dir = NULL, *out = NULL, *pos[1];
  int q8 = 0, keep = 0, force = 0, n_pos = 0;
  const cli_opt opts[] = {
      {"-m|--model", CLI_STR, &dir, 0, 0, "DIR", "the artifact to export (default: models/default; DIR alone works too)"},
      {"-o|--output", CLI_STR, &out, 0, 0, "FILE", "the GGUF file to write"},
      {"--q8_0", CLI_FLAG, &q8, 0, 0, NULL, "F32/Q4/Q4Z matrices as Q8_0 instead of F32"},
      {"--keep-quant", CLI_FLAG, &keep, 0, 0, NULL,
       "every quantized matrix in its own kind: Q4/Q4Z as Q4_0/Q4_1 (same nibbles, f16 scales), Q4_K/Q8_0/F16 as is"},
      {"--force", CLI_FLAG, &force, 0, 0, NULL, "replace an existing FILE"},
  };
  const cli_spec spec = {"export-gguf", "[-m DIR | DIR] -o FILE.gguf [--q8_0] [--keep-quant] [--force]",
                         "Writes an artifact as a GGUF v3 file with llama.cpp's names (docs/gguf.md).",
                         opts, (int)(sizeof opts / sizeof opts[0]), pos, 1, &n_pos};
  int pr = cli_parse(&spec, argc, argv);
  if (pr != CLI_CONTINUE) return pr;
  if (n_pos && dir) { fprintf(stderr, "wisp export-gguf: give the model once (-m DIR or DIR)\n"); return 2; }
  if (n_pos) dir = pos[0];
  if (!out) { fprintf(stderr, "wisp export-gguf: -o FILE.gguf is required (see wisp export-gguf --help)\n"); return 2; }
  if (cli_claim_target("export-gguf", out, 0, force)) return 2;
  if (!dir && !(dir = cli_default_model())) return cli_error("export-gguf");
  wisp_artifact *a = NULL;
  if (wisp_artifact_open(dir, &a)) return cli_error("export-gguf");
  int rc = 1;
  exporter e = {.a = a, .w = wisp_gguf_writer_new(), .q8 = q8, .keep = keep};
  wisp_status st;
  if (!e.w) st = wisp_fail(WISP_ENOMEM, "out of memory");
  else if (!(st = export_model(&e, dir))) {
    /* wisp_gguf_writer_write writes OUT.tmp-PID and renames it: Ctrl-C
     * while it writes removes that file. */
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp-%d", out, (int)getpid());
    cli_remove_on_interrupt(tmp, NULL, 0);
    st = wisp_gguf_writer_write(e.w, out);
    cli_interrupt_forget();
  }
  if (st) rc = cli_error("export-gguf");
  else {
    fprintf(stderr, "wisp export-gguf: wrote %s\n", out);
    rc = 0;
  }
  wisp_gguf_writer_free(e.w);
  wisp_artifact_free(a);
  return rc;
}
