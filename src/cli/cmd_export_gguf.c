/* wisp export-gguf DIR -o FILE.gguf: writes an LFM2 artifact as a GGUF v3
 * file with llama.cpp's tensor names and metadata keys (docs/gguf.md).
 * Matrices stored as Q4_K keep their bytes (GGUF Q4_K is the same layout);
 * every other matrix (f32, Q4, Q4Z) is written as F32 (Q4/Q4Z dequantized),
 * or as Q8_0 with --q8_0. Vectors are F32. The rope tables are not written
 * (llama.cpp computes them from rope.freq_base). A byte-level BPE tokenizer
 * in the artifact becomes tokenizer.ggml.* metadata. The file appears
 * atomically (temporary name + rename). */
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "format/artifact.h"
#include "format/gguf.h"
#include "format/tensor.h"
#include "util/err.h"
#include "util/file.h"

typedef struct {
  const wisp_artifact *a;
  wisp_gguf_writer *w;
  int q8;
} exporter;

/* Builds a wisp_matrix view of section base NAME (rows x cols). */
static wisp_status view(const exporter *e, const char *name, int rows, int cols, wisp_matrix *m) {
  char s[128];
  const uint8_t *d;
  memset(m, 0, sizeof *m);
  m->rows = rows;
  m->cols = cols;
  snprintf(s, sizeof s, "%s.weight", name);
  if (wisp_artifact_section(e->a, s)) {
    m->type = WISP_W_F32;
    wisp_status st = wisp_artifact_bytes(e->a, s, (uint64_t)rows * cols * 4, &d);
    m->f32 = (const float *)d;
    return st;
  }
  snprintf(s, sizeof s, "%s.f16", name);
  if (wisp_artifact_section(e->a, s)) {
    m->type = WISP_W_F16;
    wisp_status st = wisp_artifact_bytes(e->a, s, wisp_f16_bytes(rows, cols), &d);
    m->q = d;
    return st;
  }
  snprintf(s, sizeof s, "%s.q8_0", name);
  if (wisp_artifact_section(e->a, s)) {
    m->type = WISP_W_Q8_0;
    if (cols % WISP_Q8_0_BLOCK) return wisp_fail(WISP_EFORMAT, "section '%s': cols %d not a multiple of 32", s, cols);
    wisp_status st = wisp_artifact_bytes(e->a, s, wisp_q8_0_bytes(rows, cols), &d);
    m->q = d;
    return st;
  }
  snprintf(s, sizeof s, "%s.q4k", name);
  if (wisp_artifact_section(e->a, s)) {
    m->type = WISP_W_Q4K;
    if (cols % WISP_Q4K_BLOCK) return wisp_fail(WISP_EFORMAT, "section '%s': cols %d not a multiple of 256", s, cols);
    wisp_status st = wisp_artifact_bytes(e->a, s, wisp_q4k_bytes(rows, cols), &d);
    m->q = d;
    return st;
  }
  wisp_status st;
  snprintf(s, sizeof s, "%s.quant", name);
  if ((st = wisp_artifact_bytes(e->a, s, wisp_q4_quant_bytes(rows, cols), &d))) return st;
  m->q = d;
  snprintf(s, sizeof s, "%s.scales", name);
  if ((st = wisp_artifact_bytes(e->a, s, wisp_q4_scale_bytes(rows, cols), &d))) return st;
  m->scales = (const float *)d;
  m->type = WISP_W_Q4;
  snprintf(s, sizeof s, "%s.zero_points", name);
  const wisp_section *z = wisp_artifact_section(e->a, s);
  if (z) {
    if (z->bytes != wisp_q4_zp_bytes(rows, cols))
      return wisp_fail(WISP_EFORMAT, "section '%s' has %llu bytes, expected %zu", s, (unsigned long long)z->bytes,
                       wisp_q4_zp_bytes(rows, cols));
    m->zp = e->a->weights + z->offset;
    m->type = WISP_W_Q4Z;
  }
  return WISP_OK;
}

/* Writes rows [r0, r0+rows) of matrix section NAME as GGUF tensor GNAME. */
static wisp_status put_matrix(exporter *e, const char *name, int total_rows, int cols, int r0, int rows,
                              const char *gname) {
  wisp_matrix m;
  wisp_status st = view(e, name, total_rows, cols, &m);
  if (st) return st;
  uint64_t ne[2] = {(uint64_t)cols, (uint64_t)rows};
  if (m.type == WISP_W_Q4K) {
    size_t rb = (size_t)(cols / WISP_Q4K_BLOCK) * WISP_Q4K_BYTES;
    return wisp_gguf_add_tensor(e->w, gname, 2, ne, WISP_GGML_Q4_K, m.q + (size_t)r0 * rb, rb * (size_t)rows);
  }
  size_t n = (size_t)rows * cols;
  float *buf = malloc(n * sizeof(float));
  if (!buf) return wisp_fail(WISP_ENOMEM, "out of memory");
  for (int r = 0; r < rows; r++) wisp_matrix_row_f32(&m, r0 + r, buf + (size_t)r * cols);
  if (e->q8 && cols % 32 == 0) {
    uint8_t *q = malloc(n / 32 * 34 + 1);
    if (!q) { free(buf); return wisp_fail(WISP_ENOMEM, "out of memory"); }
    wisp_quantize_q8_0(buf, n, q);
    st = wisp_gguf_add_tensor(e->w, gname, 2, ne, WISP_GGML_Q8_0, q, n / 32 * 34);
    free(q);
  } else {
    st = wisp_gguf_add_tensor(e->w, gname, 2, ne, WISP_GGML_F32, buf, n * sizeof(float));
  }
  free(buf);
  return st;
}

static wisp_status put_vector(exporter *e, const char *name, int n_dims, const uint64_t *ne, const char *gname) {
  uint64_t n = 1;
  for (int i = 0; i < n_dims; i++) n *= ne[i];
  const uint8_t *d;
  wisp_status st = wisp_artifact_bytes(e->a, name, n * 4, &d);
  if (st) return st;
  return wisp_gguf_add_tensor(e->w, gname, n_dims, ne, WISP_GGML_F32, d, (size_t)n * 4);
}

/* tokenizer.json (byte-level BPE) -> tokenizer.ggml.* */
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
  if (pt && strstr(pt, "\\\\p{N}{1,3}")) pre = "llama-bpe";
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

static wisp_status export_lfm2(exporter *e, const char *dir) {
  const wisp_artifact *a = e->a;
  const wisp_shape *s = &a->shape;
  const int H = s->hidden, F = s->ffn, D = s->head_dim, V = s->vocab, L = s->conv_cache;
  wisp_gguf_writer *w = e->w;
  /* An all-attention artifact imported from Qwen3 goes out as llama.cpp's qwen3. */
  const cJSON *src = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(a->manifest, "wisp"), "source");
  int n_conv = 0;
  for (int i = 0; i < s->n_layers; i++) n_conv += s->layer_types[i] == WISP_LAYER_CONV;
  const int qwen3 = !n_conv && cJSON_IsString(src) && strstr(src->valuestring, "Qwen3ForCausalLM");
  const char *arch = qwen3 ? "qwen3" : "lfm2";
  char key[128];
#define KEY(suffix) (snprintf(key, sizeof key, "%s.%s", arch, suffix), key)
  wisp_gguf_put_str(w, "general.architecture", arch);
  wisp_gguf_put_str(w, "general.name", "wisp export");
  wisp_gguf_put_u32(w, "general.alignment", 32);
  wisp_gguf_put_u32(w, KEY("block_count"), (uint32_t)s->n_layers);
  wisp_gguf_put_u32(w, KEY("context_length"), (uint32_t)a->max_positions);
  wisp_gguf_put_u32(w, KEY("embedding_length"), (uint32_t)H);
  wisp_gguf_put_u32(w, KEY("feed_forward_length"), (uint32_t)F);
  wisp_gguf_put_u32(w, KEY("attention.head_count"), (uint32_t)s->heads);
  if (qwen3) {
    wisp_gguf_put_u32(w, KEY("attention.head_count_kv"), (uint32_t)s->kv_heads);
  } else {
    int32_t *kvh = calloc((size_t)s->n_layers, sizeof *kvh);
    if (!kvh) return wisp_fail(WISP_ENOMEM, "out of memory");
    for (int i = 0; i < s->n_layers; i++) kvh[i] = s->layer_types[i] == WISP_LAYER_ATTENTION ? s->kv_heads : 0;
    wisp_gguf_put_arr_i32(w, KEY("attention.head_count_kv"), kvh, (uint64_t)s->n_layers);
    free(kvh);
  }
  wisp_gguf_put_u32(w, KEY("attention.key_length"), (uint32_t)D);
  wisp_gguf_put_u32(w, KEY("attention.value_length"), (uint32_t)D);
  wisp_gguf_put_f32(w, KEY("rope.freq_base"), (float)a->rope_theta);
  wisp_gguf_put_f32(w, KEY("attention.layer_norm_rms_epsilon"), (float)a->norm_eps);
  if (!qwen3) wisp_gguf_put_u32(w, KEY("shortconv.l_cache"), (uint32_t)L);
  wisp_gguf_put_u32(w, KEY("vocab_size"), (uint32_t)V);
#undef KEY
  wisp_status st;
  if (!strcmp(a->tokenizer, "bpe") && (st = put_tokenizer(e, dir))) return st;
  char sec[96], g[96];
  uint64_t hv[1] = {(uint64_t)H}, dv[1] = {(uint64_t)D};
  for (int i = 0; i < s->n_layers; i++) {
#define SEC(...) snprintf(sec, sizeof sec, __VA_ARGS__)
#define G(...) snprintf(g, sizeof g, __VA_ARGS__)
    if (s->layer_types[i] == WISP_LAYER_CONV) {
      SEC("L%d.conv.in_proj", i); G("blk.%d.shortconv.in_proj.weight", i);
      if ((st = put_matrix(e, sec, 3 * H, H, 0, 3 * H, g))) return st;
      SEC("L%d.conv.out_proj", i); G("blk.%d.shortconv.out_proj.weight", i);
      if ((st = put_matrix(e, sec, H, H, 0, H, g))) return st;
      SEC("L%d.conv.in_proj.norm", i); G("blk.%d.attn_norm.weight", i);
      if ((st = put_vector(e, sec, 1, hv, g))) return st;
      uint64_t tv[2] = {(uint64_t)L, (uint64_t)H};
      SEC("L%d.conv.core.taps", i); G("blk.%d.shortconv.conv.weight", i);
      if ((st = put_vector(e, sec, 2, tv, g))) return st;
    } else {
      const int q = s->heads * D, kv = s->kv_heads * D;
      SEC("L%d.attn.qkv", i);
      G("blk.%d.attn_q.weight", i);
      if ((st = put_matrix(e, sec, q + 2 * kv, H, 0, q, g))) return st;
      G("blk.%d.attn_k.weight", i);
      if ((st = put_matrix(e, sec, q + 2 * kv, H, q, kv, g))) return st;
      G("blk.%d.attn_v.weight", i);
      if ((st = put_matrix(e, sec, q + 2 * kv, H, q + kv, kv, g))) return st;
      SEC("L%d.attn.o_proj", i); G("blk.%d.attn_output.weight", i);
      if ((st = put_matrix(e, sec, H, q, 0, H, g))) return st;
      SEC("L%d.attn.qkv.norm", i); G("blk.%d.attn_norm.weight", i);
      if ((st = put_vector(e, sec, 1, hv, g))) return st;
      SEC("L%d.attn.qkv.q_norm", i); G("blk.%d.attn_q_norm.weight", i);
      if ((st = put_vector(e, sec, 1, dv, g))) return st;
      SEC("L%d.attn.qkv.k_norm", i); G("blk.%d.attn_k_norm.weight", i);
      if ((st = put_vector(e, sec, 1, dv, g))) return st;
    }
    SEC("L%d.mlp.gate_up", i);
    G("blk.%d.ffn_gate.weight", i);
    if ((st = put_matrix(e, sec, 2 * F, H, 0, F, g))) return st;
    G("blk.%d.ffn_up.weight", i);
    if ((st = put_matrix(e, sec, 2 * F, H, F, F, g))) return st;
    SEC("L%d.mlp.down", i); G("blk.%d.ffn_down.weight", i);
    if ((st = put_matrix(e, sec, H, F, 0, H, g))) return st;
    SEC("L%d.mlp.gate_up.norm", i); G("blk.%d.ffn_norm.weight", i);
    if ((st = put_vector(e, sec, 1, hv, g))) return st;
#undef SEC
#undef G
  }
  if ((st = put_matrix(e, "embed", V, H, 0, V, "token_embd.weight"))) return st;
  /* A head with its own bytes (not the embedding's) is written as output. */
  const wisp_section *he = wisp_artifact_section(a, "head.weight"), *ee = wisp_artifact_section(a, "embed.weight");
  if (!he) { he = wisp_artifact_section(a, "head.quant"); ee = wisp_artifact_section(a, "embed.quant"); }
  if (!he) { he = wisp_artifact_section(a, "head.q4k"); ee = wisp_artifact_section(a, "embed.q4k"); }
  if (!he) { he = wisp_artifact_section(a, "head.f16"); ee = wisp_artifact_section(a, "embed.f16"); }
  if (!he) { he = wisp_artifact_section(a, "head.q8_0"); ee = wisp_artifact_section(a, "embed.q8_0"); }
  if (he && (!ee || he->offset != ee->offset) && (st = put_matrix(e, "head", V, H, 0, V, "output.weight"))) return st;
  return put_vector(e, "head.norm", 1, hv, qwen3 ? "output_norm.weight" : "token_embd_norm.weight");
}

int cmd_export_gguf(int argc, char **argv) {
  const char *dir = NULL, *out = NULL;
  int q8 = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-o") && i + 1 < argc) out = argv[++i];
    else if (!strcmp(argv[i], "-m") && i + 1 < argc) dir = argv[++i];
    else if (!strcmp(argv[i], "--q8_0")) q8 = 1;
    else if (argv[i][0] != '-' && !dir) dir = argv[i];
    else { fprintf(stderr, "wisp export-gguf: unexpected argument '%s'\n", argv[i]); return 2; }
  }
  if (!dir || !out) { fprintf(stderr, "usage: wisp export-gguf DIR -o FILE.gguf [--q8_0]\n"); return 2; }
  wisp_artifact *a = NULL;
  if (wisp_artifact_open(dir, &a)) return cli_error("export-gguf");
  int rc = 1;
  exporter e = {a, wisp_gguf_writer_new(), q8};
  wisp_status st;
  if (!e.w) st = wisp_fail(WISP_ENOMEM, "out of memory");
  else if (cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(a->manifest, "wisp"), "qkNorm")))
    st = wisp_fail(WISP_EUNSUPPORTED, "%s: Llama imports (no q/k norm) cannot be exported to GGUF yet", dir);
  else if (strcmp(a->architecture, "lfm2"))
    st = wisp_fail(WISP_EUNSUPPORTED, "%s: architecture '%s' cannot be exported to GGUF yet (lfm2, and Qwen3 imports)", dir,
                   a->architecture);
  else if (!(st = export_lfm2(&e, dir)))
    st = wisp_gguf_writer_write(e.w, out);
  if (st) rc = cli_error("export-gguf");
  else {
    fprintf(stderr, "wisp export-gguf: wrote %s\n", out);
    rc = 0;
  }
  wisp_gguf_writer_free(e.w);
  wisp_artifact_free(a);
  return rc;
}
