/* `wisp convert` on tiny checkpoints written from C (st_fixture.h): the HF
 * tensor -> section mapping, f32 and q4 artifacts that open and run, and
 * every bad input ending in one clear line, a non-zero exit and no output
 * directory (complete or partial). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "format/artifact.h"
#include "format/safetensors.h"
#include "format/tensor.h"
#include "st_fixture.h"
#include "test.h"
#include "util/file.h"
#include "wisp.h"

static const char *make_hf(const char *name, const fx_lfm2_opts *o) {
  static char dir[8][512];
  static int k;
  k = (k + 1) % 8;
  snprintf(dir[k], sizeof dir[k], "%s/%s", test_tmpdir(), name);
  if (mkdir(dir[k], 0755) != 0) return NULL;
  if (fx_write_tiny_lfm2(dir[k], o) != 0) return NULL;
  return dir[k];
}

static int run_convert(const char *hf, const char *out, const char *quant, char *log, size_t cap) {
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "%s convert %s -o %s --quant %s", test_wisp_bin(), hf, out, quant);
  return test_run(cmd, log, cap);
}

/* No entry in test_tmpdir() whose name starts with `prefix` (DIR or DIR.partial-*). */
static int nothing_named(const char *prefix) {
  DIR *d = opendir(test_tmpdir());
  if (!d) return 0;
  struct dirent *e;
  int found = 0;
  while ((e = readdir(d)))
    if (!strncmp(e->d_name, prefix, strlen(prefix))) found = 1;
  closedir(d);
  return !found;
}

static int one_line_error(const char *log, const char *needle) {
  /* The last line of output is the error; progress lines may precede it. */
  const char *last = log;
  size_t n = strlen(log);
  while (n > 0 && log[n - 1] == '\n') n--;
  for (size_t i = 0; i < n; i++)
    if (log[i] == '\n') last = log + i + 1;
  return !strncmp(last, "wisp convert: ", 14) && strstr(last, needle) != NULL;
}

static int section_f32(const wisp_artifact *a, const char *name, size_t index, float *out) {
  const wisp_section *s = wisp_artifact_section(a, name);
  if (!s || (index + 1) * 4 > s->bytes) return 0;
  memcpy(out, a->weights + s->offset + index * 4, 4);
  return 1;
}

TEST(convert_f32_maps_hf_tensors_to_sections) {
  const char *hf = make_hf("hf_map", NULL);
  CHECK(hf);
  char out[600], log[8192];
  snprintf(out, sizeof out, "%s/art_f32", test_tmpdir());
  int rc = run_convert(hf, out, "f32", log, sizeof log);
  CHECKF(rc == 0, "convert failed: %s", log);
  CHECK(strstr(log, "L1.attn.qkv")); /* progress */
  wisp_artifact *a = NULL;
  CHECKF(wisp_artifact_open(out, &a) == WISP_OK, "%s", wisp_last_error());
  CHECK(a->shape.n_layers == 3 && a->shape.layer_types[1] == WISP_LAYER_ATTENTION);
  CHECK(a->shape.hidden == 64 && a->shape.ffn == 64 && a->shape.vocab == 96 && a->shape.head_dim == 16);
  CHECK(a->shape.heads == 4 && a->shape.kv_heads == 2 && a->shape.conv_cache == 3);
  CHECK(a->max_positions == 256 && fabs(a->rope_theta - 10000.0) < 1e-3 && fabs(a->norm_eps - 1e-5) < 1e-11);
  const int H = 64, D = 16;
  float v;
  /* qkv: q rows, then k rows, then v rows. */
  CHECK(section_f32(a, "L1.attn.qkv.weight", 5, &v) && v == fx_tiny_value("model.layers.1.self_attn.q_proj.weight", 0, 5));
  CHECK(section_f32(a, "L1.attn.qkv.weight", (size_t)4 * D * H + 7, &v) &&
        v == fx_tiny_value("model.layers.1.self_attn.k_proj.weight", 0, 7));
  CHECK(section_f32(a, "L1.attn.qkv.weight", (size_t)6 * D * H + 9, &v) &&
        v == fx_tiny_value("model.layers.1.self_attn.v_proj.weight", 0, 9));
  CHECK(section_f32(a, "L1.attn.o_proj.weight", 3, &v) && v == fx_tiny_value("model.layers.1.self_attn.out_proj.weight", 0, 3));
  CHECK(section_f32(a, "L1.attn.qkv.norm", 2, &v) && v == fx_tiny_value("model.layers.1.operator_norm.weight", 0, 2));
  CHECK(section_f32(a, "L1.attn.qkv.q_norm", 1, &v) && v == fx_tiny_value("model.layers.1.self_attn.q_layernorm.weight", 0, 1));
  CHECK(section_f32(a, "L1.attn.qkv.k_norm", 1, &v) && v == fx_tiny_value("model.layers.1.self_attn.k_layernorm.weight", 0, 1));
  /* gate_up: w1 rows, then w3 rows; down = w2. */
  CHECK(section_f32(a, "L0.mlp.gate_up.weight", 11, &v) && v == fx_tiny_value("model.layers.0.feed_forward.w1.weight", 0, 11));
  CHECK(section_f32(a, "L0.mlp.gate_up.weight", (size_t)64 * H + 11, &v) &&
        v == fx_tiny_value("model.layers.0.feed_forward.w3.weight", 0, 11));
  CHECK(section_f32(a, "L2.mlp.down.weight", 100, &v) && v == fx_tiny_value("model.layers.2.feed_forward.w2.weight", 0, 100));
  CHECK(section_f32(a, "L2.mlp.gate_up.norm", 3, &v) && v == fx_tiny_value("model.layers.2.ffn_norm.weight", 0, 3));
  /* conv: in_proj as stored (B, C, x), taps [hidden][L], operator_norm. */
  CHECK(section_f32(a, "L0.conv.in_proj.weight", (size_t)2 * H * H + 1, &v) &&
        v == fx_tiny_value("model.layers.0.conv.in_proj.weight", 0, (int64_t)2 * H * H + 1));
  CHECK(section_f32(a, "L2.conv.core.taps", 3 * 5 + 2, &v) && v == fx_tiny_value("model.layers.2.conv.conv.weight", 0, 17));
  CHECK(section_f32(a, "L2.conv.out_proj.weight", 70, &v) && v == fx_tiny_value("model.layers.2.conv.out_proj.weight", 0, 70));
  CHECK(section_f32(a, "L2.conv.in_proj.norm", 4, &v) && v == fx_tiny_value("model.layers.2.operator_norm.weight", 0, 4));
  CHECK(section_f32(a, "embed.weight", 200, &v) && v == fx_tiny_value("model.embed_tokens.weight", 0, 200));
  CHECK(section_f32(a, "head.norm", 6, &v) && v == fx_tiny_value("model.embedding_norm.weight", 0, 6));
  /* Tied: head.weight shares embed's bytes. */
  const wisp_section *hs = wisp_artifact_section(a, "head.weight"), *es = wisp_artifact_section(a, "embed.weight");
  CHECK(hs && es && hs->offset == es->offset && hs->bytes == es->bytes);
  /* rope: cos(p * theta^(-2i/D)) for planPosition rows, and the inverse
   * frequencies (no table for maxPositions rows: a session builds its own). */
  const wisp_section *rc1 = wisp_artifact_section(a, "rope.cos"), *rf = wisp_artifact_section(a, "rope.freq");
  CHECK(rc1 && rf && rc1->bytes == 256u * 8 * 4 && rf->bytes == 8u * 4 && !wisp_artifact_section(a, "rope.cos_ext"));
  CHECK(section_f32(a, "rope.cos", 7 * 8 + 3, &v));
  CHECK_NEAR(v, cos(7.0 * pow(10000.0, -6.0 / 16.0)), 1e-6);
  CHECK(section_f32(a, "rope.freq", 3, &v));
  CHECK_NEAR(v, pow(10000.0, -6.0 / 16.0), 1e-7);
  CHECK(section_f32(a, "rope.sin", 100 * 8 + 0, &v));
  CHECK_NEAR(v, sin(100.0), 1e-5);
  char *text = NULL;
  char mp[700];
  snprintf(mp, sizeof mp, "%s/manifest.json", out);
  CHECK(wisp_read_file(mp, &text, NULL) == WISP_OK);
  int ok = strstr(text, "\"weightsSha256\"") && strstr(text, "\"planPosition\":\t256") &&
           strstr(text, "\"weightsUrl\":\t\"/weights.bin\"") && strstr(text, "\"architecture\":\t\"lfm2\"");
  free(text);
  wisp_artifact_free(a);
  CHECK(ok);
}

TEST(convert_q4_and_bf16_open_and_run) {
  fx_lfm2_opts o = {.dtype = "BF16", .untied = 1, .seed = 3};
  const char *hf = make_hf("hf_bf16", &o);
  CHECK(hf);
  char q4[600], f32[600], log[8192];
  snprintf(q4, sizeof q4, "%s/art_q4", test_tmpdir());
  snprintf(f32, sizeof f32, "%s/art_bf_f32", test_tmpdir());
  CHECKF(run_convert(hf, q4, "q4", log, sizeof log) == 0, "%s", log);
  CHECKF(run_convert(hf, f32, "f32", log, sizeof log) == 0, "%s", log);
  wisp_artifact *a = NULL, *b = NULL;
  CHECKF(wisp_artifact_open(q4, &a) == WISP_OK, "%s", wisp_last_error());
  CHECKF(wisp_artifact_open(f32, &b) == WISP_OK, "%s", wisp_last_error());
  /* Untied: separate head sections with zero points; transposed down copy. */
  const wisp_section *hq = wisp_artifact_section(a, "head.quant"), *eq = wisp_artifact_section(a, "embed.quant");
  CHECK(hq && eq && hq->offset != eq->offset && wisp_artifact_section(a, "head.zero_points"));
  CHECK(wisp_artifact_section(a, "L0.mlp.down.kquant") && wisp_artifact_section(a, "L2.mlp.down.kscales"));
  CHECK(!wisp_artifact_section(b, "L0.mlp.down.kquant"));
  /* BF16 values were converted exactly; q4 rows dequantize close to them. */
  float v;
  CHECK(section_f32(b, "head.weight", 9, &v));
  CHECK_NEAR(v, fx_tiny_value("lm_head.weight", 3, 9), 0.004);
  const uint8_t *q, *s;
  CHECK(wisp_artifact_bytes(a, "L1.attn.qkv.quant", 0, &q) == WISP_OK);
  CHECK(wisp_artifact_bytes(a, "L1.attn.qkv.scales", 0, &s) == WISP_OK);
  wisp_matrix m = {.type = WISP_W_Q4, .rows = 128, .cols = 64, .q = q, .scales = (const float *)s};
  float row[64], ref[64];
  wisp_matrix_row_f32(&m, 70, row); /* a k_proj row: 70 - 64 = 6 */
  const wisp_section *fs = wisp_artifact_section(b, "L1.attn.qkv.weight");
  CHECK(fs);
  memcpy(ref, b->weights + fs->offset + (size_t)70 * 64 * 4, sizeof ref);
  for (int i = 0; i < 64; i++) CHECK_NEAR(row[i], ref[i], 0.125 * 0.5 / 7 * 1.01 + 1e-6);
  /* Transposed down: row r of kquant is column r of down. */
  CHECK(wisp_artifact_bytes(a, "L0.mlp.down.kquant", 0, &q) == WISP_OK);
  CHECK(wisp_artifact_bytes(a, "L0.mlp.down.kscales", 0, &s) == WISP_OK);
  wisp_matrix kt = {.type = WISP_W_Q4, .rows = 64, .cols = 64, .q = q, .scales = (const float *)s};
  wisp_matrix_row_f32(&kt, 5, row);
  fs = wisp_artifact_section(b, "L0.mlp.down.weight");
  for (int i = 0; i < 64; i++) {
    float w;
    memcpy(&w, b->weights + fs->offset + ((size_t)i * 64 + 5) * 4, 4);
    CHECK_NEAR(row[i], w, 0.125 * 0.5 / 7 * 1.01 + 1e-6);
  }
  wisp_artifact_free(a);
  wisp_artifact_free(b);
  /* Both run. */
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "%s logits --backend cpu -m %s --tokens 1,2,3,95", test_wisp_bin(), q4);
  CHECKF(test_run(cmd, log, sizeof log) == 0 && strstr(log, "\"logits\""), "%s", log);
  snprintf(cmd, sizeof cmd, "%s logits --backend cpu -m %s --tokens 1,2,3,95 --greedy 4", test_wisp_bin(), f32);
  CHECKF(test_run(cmd, log, sizeof log) == 0 && strstr(log, "\"greedy\": [") , "%s", log);
}

TEST(convert_overwrites_an_existing_artifact_only) {
  const char *hf = make_hf("hf_over", NULL);
  CHECK(hf);
  char out[600], log[8192], cmd[2048];
  snprintf(out, sizeof out, "%s/over_art", test_tmpdir());
  CHECKF(run_convert(hf, out, "f32", log, sizeof log) == 0, "%s", log);
  /* an existing artifact is replaced only with --force (the one overwrite rule, docs/cli.md) */
  CHECK(run_convert(hf, out, "q4", log, sizeof log) == 2);
  CHECKF(strstr(log, "already exists and is not empty") && strstr(log, "--force"), "%s", log);
  snprintf(cmd, sizeof cmd, "%s convert %s -o %s --quant q4 --force", test_wisp_bin(), hf, out);
  CHECKF(test_run(cmd, log, sizeof log) == 0, "%s", log);
  /* an empty directory is fine */
  snprintf(out, sizeof out, "%s/over_empty", test_tmpdir());
  CHECK(mkdir(out, 0755) == 0);
  CHECKF(run_convert(hf, out, "f32", log, sizeof log) == 0, "%s", log);
  snprintf(cmd, sizeof cmd, "mkdir -p %s/over_plain && touch %s/over_plain/keep", test_tmpdir(), test_tmpdir());
  CHECK(test_run(cmd, NULL, 0) == 0);
  snprintf(out, sizeof out, "%s/over_plain", test_tmpdir());
  snprintf(cmd, sizeof cmd, "%s convert %s -o %s --quant q4 --force", test_wisp_bin(), hf, out);
  CHECK(test_run(cmd, log, sizeof log) != 0); /* not even with --force */
  CHECKF(one_line_error(log, "is not an artifact wisp wrote"), "%s", log);
  snprintf(cmd, sizeof cmd, "%s/over_plain/keep", test_tmpdir());
  CHECK(wisp_path_exists(cmd));
}

/* Each bad input: non-zero exit, one clear line, nothing left behind. */
static void expect_failure(const char *hf, const char *out_name, const char *needle) {
  char out[600], log[8192];
  snprintf(out, sizeof out, "%s/%s", test_tmpdir(), out_name);
  int rc = run_convert(hf, out, "q4", log, sizeof log);
  CHECKF(rc != 0, "convert succeeded: %s", log);
  CHECKF(one_line_error(log, needle), "expected a line with '%s', got: %s", needle, log);
  CHECKF(nothing_named(out_name), "%s (or a partial copy) was left behind", out);
}

TEST(convert_rejects_wrong_tensor_shape) {
  fx_lfm2_opts o = {.bad_shape = "model.layers.1.self_attn.k_proj.weight"};
  const char *hf = make_hf("hf_shape", &o);
  CHECK(hf);
  expect_failure(hf, "out_shape", "tensor 'model.layers.1.self_attn.k_proj.weight' has shape [33, 64], the config expects [32, 64]");
  fx_lfm2_opts o2 = {.bad_shape = "model.layers.0.conv.conv.weight"};
  hf = make_hf("hf_shape2", &o2);
  CHECK(hf);
  expect_failure(hf, "out_shape2", "'model.layers.0.conv.conv.weight' has shape [65, 1, 3], the config expects [64, 1, 3]");
}

TEST(convert_rejects_non_lfm2) {
  fx_lfm2_opts o = {.arch = "MistralForCausalLM", .model_type = "mistral"}; /* llama is imported now */
  const char *hf = make_hf("hf_llama", &o);
  CHECK(hf);
  expect_failure(hf, "out_llama", "architecture 'MistralForCausalLM' is not supported");
  fx_lfm2_opts o2 = {.arch = "Lfm2ForCausalLM", .model_type = "mistral"}; /* qwen3 is imported now */
  hf = make_hf("hf_qwen", &o2);
  CHECK(hf);
  expect_failure(hf, "out_qwen", "model_type 'mistral' is not supported");
}

TEST(convert_rejects_truncated_safetensors) {
  const char *hf = make_hf("hf_trunc", NULL);
  CHECK(hf);
  char p[700];
  snprintf(p, sizeof p, "%s/model.safetensors", hf);
  CHECK(fx_write_bytes(p, "\x20\x00\x00\x00", 4) == 0);
  expect_failure(hf, "out_trunc", "model.safetensors: truncated header");
  CHECK(fx_write_bytes(p, "\xff\xff\x00\x00\x00\x00\x00\x00{}", 10) == 0);
  expect_failure(hf, "out_trunc2", "header length 65535 passes the end of the file (10 bytes)");
}

TEST(convert_rejects_unknown_dtype) {
  const char *hf = make_hf("hf_dtype", NULL);
  CHECK(hf);
  char p[700];
  snprintf(p, sizeof p, "%s/model.safetensors", hf);
  const float x[2] = {1, 2};
  fx_tensor t = {"model.embed_tokens.weight", "F32", 1, {2}, x};
  CHECK(fx_write_safetensors(p, &t, 1) == 0);
  /* Patch the dtype string in place: "F32" -> "X32". */
  char *data = NULL;
  size_t len = 0;
  CHECK(wisp_read_file(p, &data, &len) == WISP_OK);
  char *at = strstr(data + 8, "\"F32\"");
  CHECK(at);
  at[1] = 'X';
  CHECK(fx_write_bytes(p, data, len) == 0);
  free(data);
  expect_failure(hf, "out_dtype", "tensor 'model.embed_tokens.weight': unknown dtype 'X32'");
}

TEST(convert_rejects_missing_output_parent) {
  const char *hf = make_hf("hf_parent", NULL);
  CHECK(hf);
  char out[600], log[8192];
  snprintf(out, sizeof out, "%s/no/such/dir/art", test_tmpdir());
  CHECK(run_convert(hf, out, "f32", log, sizeof log) != 0);
  CHECKF(one_line_error(log, "parent directory") && strstr(log, "does not exist"), "%s", log);
  CHECK(nothing_named("no"));
}

TEST(convert_rejects_missing_tensor_and_bad_args) {
  char dir[600], log[8192], cmd[2048];
  snprintf(dir, sizeof dir, "%s/hf_missing", test_tmpdir());
  CHECK(mkdir(dir, 0755) == 0);
  CHECK(fx_write_tiny_lfm2(dir, NULL) == 0);
  char p[700];
  snprintf(p, sizeof p, "%s/model.safetensors", dir);
  const float x[64] = {0};
  fx_tensor t = {"model.embedding_norm.weight", "F32", 1, {64}, x};
  CHECK(fx_write_safetensors(p, &t, 1) == 0);
  /* the first missing one in the name table's order (format/gguf_arch.c) */
  expect_failure(dir, "out_missing", "missing tensor 'model.layers.0.operator_norm.weight'");
  snprintf(cmd, sizeof cmd, "%s convert %s -o %s/x --quant q8", test_wisp_bin(), dir, test_tmpdir());
  CHECK(test_run(cmd, log, sizeof log) == 2 && strstr(log, "--quant must be f32, q4, q4k, f16, q8_0 or keep"));
  snprintf(cmd, sizeof cmd, "%s convert %s/none -o %s/x", test_wisp_bin(), test_tmpdir(), test_tmpdir());
  CHECK(test_run(cmd, log, sizeof log) == 1 && strstr(log, "config.json"));
}

/* Rewrites the tiny model's config.json with `extra` JSON members in place of
 * the layer/rope/tie keys. */
static int write_config(const char *hf, const char *extra) {
  char p[700], text[2048];
  snprintf(p, sizeof p, "%s/config.json", hf);
  snprintf(text, sizeof text,
           "{\"architectures\": [\"Lfm2ForCausalLM\"], \"model_type\": \"lfm2\", \"hidden_size\": 64,"
           " \"intermediate_size\": 96, \"block_auto_adjust_ff_dim\": true, \"block_ffn_dim_multiplier\": 1.0,"
           " \"block_multiple_of\": 32, \"num_hidden_layers\": 3, \"num_attention_heads\": 4,"
           " \"num_key_value_heads\": 2, \"conv_L_cache\": 3, \"vocab_size\": 96, \"norm_eps\": 1e-06,"
           " \"max_position_embeddings\": 128000, %s}",
           extra);
  return fx_write_bytes(p, text, strlen(text));
}

TEST(convert_config_variants) {
  const char *hf = make_hf("hf_variants", NULL);
  CHECK(hf);
  /* full_attn_idxs, rope parameters keyed by layer type, tie_embedding. */
  CHECK(write_config(hf, "\"full_attn_idxs\": [1], \"rope_parameters\": {\"full_attention\": {\"rope_type\": "
                         "\"default\", \"rope_theta\": 5000.0}, \"conv\": null}, \"tie_embedding\": true") == 0);
  char out[600], log[8192];
  snprintf(out, sizeof out, "%s/var_art", test_tmpdir());
  CHECKF(run_convert(hf, out, "f32", log, sizeof log) == 0, "%s", log);
  wisp_artifact *a = NULL;
  CHECKF(wisp_artifact_open(out, &a) == WISP_OK, "%s", wisp_last_error());
  int ok = a->shape.layer_types[0] == WISP_LAYER_CONV && a->shape.layer_types[1] == WISP_LAYER_ATTENTION &&
           a->rope_theta == 5000.0f && fabs(a->norm_eps - 1e-6) < 1e-11 && a->max_positions == 128000;
  /* the model's own context, uncapped: no table of its rows, the plan's rows and the frequencies */
  const wisp_section *freq = wisp_artifact_section(a, "rope.freq"), *plan = wisp_artifact_section(a, "rope.cos");
  ok = ok && freq && plan && !wisp_artifact_section(a, "rope.cos_ext") && freq->bytes == 8u * 4 &&
       plan->bytes == 1024u * 8 * 4;
  wisp_artifact_free(a);
  CHECK(ok);
  /* Unsupported variants fail with a line naming the field. */
  CHECK(write_config(hf, "\"layer_types\": [\"conv\", \"full_attention\", \"conv\"], \"rope_scaling\": "
                         "{\"rope_type\": \"yarn\", \"factor\": 4.0}") == 0);
  expect_failure(hf, "out_yarn", "rope_type 'yarn' is not supported");
  CHECK(write_config(hf, "\"layer_types\": [\"conv\", \"full_attention\", \"conv\"], \"conv_bias\": true") == 0);
  expect_failure(hf, "out_bias", "conv_bias is true");
  CHECK(write_config(hf, "\"layer_types\": [\"conv\", \"full_attention\"]") == 0);
  expect_failure(hf, "out_types", "layer_types has 2 entries, num_hidden_layers is 3");
  CHECK(write_config(hf, "\"layer_types\": [\"conv\", \"sliding_attention\", \"conv\"]") == 0);
  expect_failure(hf, "out_sliding", "layer_types[1] is 'sliding_attention'");
}

TEST(convert_reads_an_index_and_f16) {
  fx_lfm2_opts o = {.dtype = "F16", .seed = 5};
  const char *hf = make_hf("hf_index", &o);
  CHECK(hf);
  char a[700], b[700], log[8192], out[600];
  snprintf(a, sizeof a, "%s/model.safetensors", hf);
  snprintf(b, sizeof b, "%s/model-00001-of-00001.safetensors", hf);
  CHECK(rename(a, b) == 0);
  wisp_safetensors *st = NULL;
  CHECK(wisp_safetensors_open_file(b, &st) == WISP_OK);
  static char idx[16384];
  size_t n = (size_t)snprintf(idx, sizeof idx, "{\"metadata\": {}, \"weight_map\": {");
  for (int i = 0; i < st->n_tensors && n < sizeof idx; i++)
    n += (size_t)snprintf(idx + n, sizeof idx - n, "%s\"%s\": \"model-00001-of-00001.safetensors\"", i ? ", " : "",
                          st->tensors[i].name);
  if (n < sizeof idx) snprintf(idx + n, sizeof idx - n, "}}");
  wisp_safetensors_close(st);
  snprintf(a, sizeof a, "%s/model.safetensors.index.json", hf);
  CHECK(fx_write_bytes(a, idx, strlen(idx)) == 0);
  snprintf(out, sizeof out, "%s/index_art", test_tmpdir());
  CHECKF(run_convert(hf, out, "f32", log, sizeof log) == 0, "%s", log);
  wisp_artifact *art = NULL;
  CHECKF(wisp_artifact_open(out, &art) == WISP_OK, "%s", wisp_last_error());
  float v;
  int ok = section_f32(art, "L1.attn.qkv.weight", 3, &v);
  wisp_artifact_free(art);
  CHECK(ok);
  CHECK_NEAR(v, fx_tiny_value("model.layers.1.self_attn.q_proj.weight", 5, 3), 1e-3 * 0.125);
}
