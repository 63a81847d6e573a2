/* safetensors reader: round trips through F32/F16/BF16, sharded checkpoints,
 * and every structural error named in safetensors.h. Also defines the
 * fixture writers declared in st_fixture.h. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "format/safetensors.h"
#include "st_fixture.h"
#include "test.h"
#include "util/err.h"

/* ---- fixture writers ---- */

int fx_write_bytes(const char *path, const void *data, size_t len) {
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  int ok = fwrite(data, 1, len, f) == len;
  return (fclose(f) == 0 && ok) ? 0 : -1;
}

static uint16_t to_f16(float v) {
  uint32_t x;
  memcpy(&x, &v, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  int exp = (int)((x >> 23) & 255) - 127 + 15;
  uint32_t man = x & 0x7fffffu;
  if (exp >= 31) return (uint16_t)(sign | 0x7c00u);
  if (exp <= 0) {
    if (exp < -10) return (uint16_t)sign;
    man |= 0x800000u;
    int shift = 14 - exp;
    uint32_t h = man >> shift, rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1))) h++;
    return (uint16_t)(sign | h);
  }
  uint32_t h = ((uint32_t)exp << 10) | (man >> 13), rem = man & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) h++;
  return (uint16_t)(sign | h);
}

static uint16_t to_bf16(float v) {
  uint32_t x;
  memcpy(&x, &v, 4);
  uint32_t r = x + 0x7fffu + ((x >> 16) & 1);
  return (uint16_t)(r >> 16);
}

static size_t fx_esize(const char *dtype) {
  return (!strcmp(dtype, "F16") || !strcmp(dtype, "BF16")) ? 2 : 4;
}

int fx_write_layered_checkpoint(const char *dir, const fx_layer_tensor *per, int n_per, int n_layers, int vocab,
                                int hidden, double (*value)(const char *name, int layer, int64_t i)) {
  const int n = n_per * n_layers + 2;
  fx_tensor *t = calloc((size_t)n, sizeof *t);
  char(*names)[96] = calloc((size_t)n, sizeof *names);
  float **data = calloc((size_t)n, sizeof *data);
  int rc = t && names && data ? 0 : -1;
  for (int l = 0, k = 0; !rc && l < n_layers; l++)
    for (int j = 0; j < n_per; j++, k++) {
      snprintf(names[k], sizeof names[k], per[j].fmt, l);
      t[k] = per[j].rows ? (fx_tensor){names[k], "F32", 2, {per[j].rows, per[j].cols}, NULL}
                         : (fx_tensor){names[k], "F32", 1, {per[j].cols}, NULL};
    }
  if (!rc) {
    t[n - 2] = (fx_tensor){"model.embed_tokens.weight", "F32", 2, {vocab, hidden}, NULL};
    t[n - 1] = (fx_tensor){"model.norm.weight", "F32", 1, {hidden}, NULL};
  }
  for (int i = 0; i < n && !rc; i++) {
    int64_t ne = t[i].shape[0] * (t[i].ndim == 2 ? t[i].shape[1] : 1);
    if (!(data[i] = malloc(sizeof(float) * (size_t)ne))) rc = -1;
    for (int64_t j = 0; !rc && j < ne; j++) data[i][j] = (float)value(t[i].name, 0, j);
    t[i].data = data[i];
  }
  char path[4200];
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  if (!rc) rc = fx_write_safetensors(path, t, n);
  for (int i = 0; data && i < n; i++) free(data[i]);
  free(data);
  free(names);
  free(t);
  return rc;
}

int fx_write_safetensors(const char *path, const fx_tensor *t, int n) {
  char *hdr = malloc(65536);
  if (!hdr) return -1;
  size_t h = 0, off = 0;
  h += (size_t)snprintf(hdr + h, 65536 - h, "{\"__metadata__\":{\"format\":\"pt\"}");
  for (int i = 0; i < n; i++) {
    int64_t numel = 1;
    for (int d = 0; d < t[i].ndim; d++) numel *= t[i].shape[d];
    size_t bytes = (size_t)numel * fx_esize(t[i].dtype);
    h += (size_t)snprintf(hdr + h, 65536 - h, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[", t[i].name, t[i].dtype);
    for (int d = 0; d < t[i].ndim; d++)
      h += (size_t)snprintf(hdr + h, 65536 - h, "%s%lld", d ? "," : "", (long long)t[i].shape[d]);
    h += (size_t)snprintf(hdr + h, 65536 - h, "],\"data_offsets\":[%zu,%zu]}", off, off + bytes);
    off += bytes;
  }
  h += (size_t)snprintf(hdr + h, 65536 - h, "}");
  while (h % 8) hdr[h++] = ' '; /* the format pads the header with spaces */
  size_t total = 8 + h + off;
  uint8_t *buf = calloc(1, total);
  if (!buf) { free(hdr); return -1; }
  for (int i = 0; i < 8; i++) buf[i] = (uint8_t)((uint64_t)h >> (8 * i));
  memcpy(buf + 8, hdr, h);
  uint8_t *p = buf + 8 + h;
  for (int i = 0; i < n; i++) {
    int64_t numel = 1;
    for (int d = 0; d < t[i].ndim; d++) numel *= t[i].shape[d];
    for (int64_t k = 0; k < numel; k++) {
      float v = t[i].data ? t[i].data[k] : 0.0f;
      if (!strcmp(t[i].dtype, "F16") || !strcmp(t[i].dtype, "BF16")) {
        uint16_t u = !strcmp(t[i].dtype, "F16") ? to_f16(v) : to_bf16(v);
        p[0] = (uint8_t)u;
        p[1] = (uint8_t)(u >> 8);
        p += 2;
      } else {
        memcpy(p, &v, 4);
        p += 4;
      }
    }
  }
  int rc = fx_write_bytes(path, buf, total);
  free(buf);
  free(hdr);
  return rc;
}

static uint32_t hash_str(const char *s) {
  uint32_t h = 2166136261u;
  while (*s) h = (h ^ (uint8_t)*s++) * 16777619u;
  return h;
}

float fx_tiny_value(const char *name, unsigned seed, int64_t i) {
  uint32_t x = hash_str(name) ^ (seed * 0x9e3779b9u) ^ (uint32_t)(i * 2654435761u);
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  float u = (float)(x >> 8) / 16777216.0f - 0.5f; /* [-0.5, 0.5) */
  if (strstr(name, "norm") || strstr(name, "layernorm")) return 1.0f + 0.2f * u;
  if (strstr(name, "conv.conv")) return 0.8f * u;
  if (strstr(name, "embed_tokens") || strstr(name, "lm_head")) return 0.8f * u;
  return 0.25f * u;
}

int fx_write_tiny_lfm2(const char *dir, const fx_lfm2_opts *o) {
  const int H = 64, F = 64, V = 96, D = 16, NH = 4, KV = 2, L = 3, K = 3;
  const int attn[3] = {0, 1, 0};
  const char *dtype = o && o->dtype ? o->dtype : "F32";
  unsigned seed = o ? o->seed : 0;
  char path[1024];
  snprintf(path, sizeof path, "%s/config.json", dir);
  char cfg[2048];
  snprintf(cfg, sizeof cfg,
           "{\"architectures\": [\"%s\"], \"model_type\": \"%s\", \"hidden_size\": %d, \"intermediate_size\": 96,"
           " \"block_auto_adjust_ff_dim\": true, \"block_ffn_dim_multiplier\": 1.0, \"block_multiple_of\": 32,"
           " \"num_hidden_layers\": %d, \"num_attention_heads\": %d, \"num_key_value_heads\": %d,"
           " \"conv_L_cache\": %d, \"conv_bias\": false, \"layer_types\": [\"conv\", \"full_attention\", \"conv\"],"
           " \"vocab_size\": %d, \"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": 10000.0},"
           " \"norm_eps\": 1e-05, \"max_position_embeddings\": 256, \"tie_word_embeddings\": %s,"
           " \"torch_dtype\": \"float32\"}\n",
           o && o->arch ? o->arch : "Lfm2ForCausalLM", o && o->model_type ? o->model_type : "lfm2", H, L, NH, KV, K,
           V, o && o->untied ? "false" : "true");
  if (fx_write_bytes(path, cfg, strlen(cfg))) return -1;
  fx_tensor t[64];
  char names[64][96];
  int n = 0;
#define ADD(shape_n, s0, s1, s2, fmt, ...)                                       \
  do {                                                                          \
    snprintf(names[n], sizeof names[n], fmt, __VA_ARGS__);                      \
    t[n] = (fx_tensor){names[n], dtype, shape_n, {s0, s1, s2, 0}, NULL};        \
    n++;                                                                        \
  } while (0)
  ADD(2, V, H, 0, "%s", "model.embed_tokens.weight");
  ADD(1, H, 0, 0, "%s", "model.embedding_norm.weight");
  if (o && o->untied) ADD(2, V, H, 0, "%s", "lm_head.weight");
  for (int i = 0; i < L; i++) {
    ADD(1, H, 0, 0, "model.layers.%d.operator_norm.weight", i);
    ADD(1, H, 0, 0, "model.layers.%d.ffn_norm.weight", i);
    ADD(2, F, H, 0, "model.layers.%d.feed_forward.w1.weight", i);
    ADD(2, H, F, 0, "model.layers.%d.feed_forward.w2.weight", i);
    ADD(2, F, H, 0, "model.layers.%d.feed_forward.w3.weight", i);
    if (attn[i]) {
      ADD(2, NH * D, H, 0, "model.layers.%d.self_attn.q_proj.weight", i);
      ADD(2, KV * D, H, 0, "model.layers.%d.self_attn.k_proj.weight", i);
      ADD(2, KV * D, H, 0, "model.layers.%d.self_attn.v_proj.weight", i);
      ADD(2, H, NH * D, 0, "model.layers.%d.self_attn.out_proj.weight", i);
      ADD(1, D, 0, 0, "model.layers.%d.self_attn.q_layernorm.weight", i);
      ADD(1, D, 0, 0, "model.layers.%d.self_attn.k_layernorm.weight", i);
    } else {
      ADD(2, 3 * H, H, 0, "model.layers.%d.conv.in_proj.weight", i);
      ADD(3, H, 1, K, "model.layers.%d.conv.conv.weight", i);
      ADD(2, H, H, 0, "model.layers.%d.conv.out_proj.weight", i);
    }
  }
#undef ADD
  float *data[64] = {0};
  int rc = 0;
  for (int k = 0; k < n; k++) {
    if (o && o->bad_shape && !strcmp(t[k].name, o->bad_shape)) t[k].shape[0] += 1;
    int64_t numel = 1;
    for (int d = 0; d < t[k].ndim; d++) numel *= t[k].shape[d];
    data[k] = malloc(sizeof(float) * (size_t)numel);
    if (!data[k]) { rc = -1; break; }
    for (int64_t e = 0; e < numel; e++) data[k][e] = fx_tiny_value(t[k].name, seed, e);
    t[k].data = data[k];
  }
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  if (!rc) rc = fx_write_safetensors(path, t, n);
  for (int k = 0; k < n; k++) free(data[k]);
  return rc;
}

/* ---- tests ---- */

static const char *tpath(const char *name) {
  static char buf[4][512];
  static int k;
  k = (k + 1) % 4;
  snprintf(buf[k], sizeof buf[k], "%s/%s", test_tmpdir(), name);
  return buf[k];
}

/* Writes an 8-byte length + the given header text + data_len zero bytes. */
static int write_raw(const char *path, const char *header, uint64_t claimed_len, size_t data_len) {
  size_t h = strlen(header);
  uint8_t *buf = calloc(1, 8 + h + data_len);
  if (!buf) return -1;
  for (int i = 0; i < 8; i++) buf[i] = (uint8_t)(claimed_len >> (8 * i));
  memcpy(buf + 8, header, h);
  int rc = fx_write_bytes(path, buf, 8 + h + data_len);
  free(buf);
  return rc;
}

static int open_fails_with(const char *path, const char *needle) {
  wisp_safetensors *st = NULL;
  wisp_status rc = wisp_safetensors_open_file(path, &st);
  wisp_safetensors_close(st);
  if (rc == WISP_OK) { fprintf(stderr, "  opened %s, expected an error\n", path); return 0; }
  const char *msg = wisp_last_error();
  if (!strstr(msg, needle) || !strstr(msg, path) || strchr(msg, '\n')) {
    fprintf(stderr, "  message '%s' lacks '%s' or the path\n", msg, needle);
    return 0;
  }
  return 1;
}

TEST(safetensors_roundtrip_dtypes) {
  const float a[6] = {0.5f, -1.25f, 3.0f, 0.0f, -0.0078125f, 65504.0f};
  const float b[4] = {1.0f, -2.0f, 0.375f, 100.0f};
  const float c[2] = {-3.5f, 7.0f};
  fx_tensor t[3] = {{"a.weight", "F32", 2, {2, 3}, a}, {"b", "F16", 1, {4}, b}, {"c.bf", "BF16", 3, {1, 2, 1}, c}};
  const char *p = tpath("rt.safetensors");
  CHECK(fx_write_safetensors(p, t, 3) == 0);
  wisp_safetensors *st = NULL;
  CHECKF(wisp_safetensors_open_file(p, &st) == WISP_OK, "%s", wisp_last_error());
  CHECK(st->n_tensors == 3);
  const wisp_st_tensor *ta = wisp_safetensors_find(st, "a.weight"), *tb = wisp_safetensors_find(st, "b"),
                       *tc = wisp_safetensors_find(st, "c.bf");
  CHECK(ta && tb && tc && !wisp_safetensors_find(st, "__metadata__") && !wisp_safetensors_find(st, "zz"));
  CHECK(ta->dtype == WISP_ST_F32 && ta->ndim == 2 && ta->shape[0] == 2 && ta->shape[1] == 3 && ta->numel == 6);
  CHECK(tb->dtype == WISP_ST_F16 && tb->bytes == 8);
  CHECK(tc->dtype == WISP_ST_BF16 && tc->ndim == 3 && tc->numel == 2);
  float out[6];
  CHECK(wisp_safetensors_read_f32(st, ta, out) == WISP_OK);
  for (int i = 0; i < 6; i++) CHECK(out[i] == a[i]);
  CHECK(wisp_safetensors_read_f32(st, tb, out) == WISP_OK);
  for (int i = 0; i < 4; i++) CHECK(out[i] == b[i]);
  CHECK(wisp_safetensors_read_f32(st, tc, out) == WISP_OK);
  for (int i = 0; i < 2; i++) CHECK(out[i] == c[i]);
  wisp_safetensors_close(st);
}

TEST(safetensors_half_conversions) {
  CHECK(wisp_f16_to_f32(0x3c00) == 1.0f);
  CHECK(wisp_f16_to_f32(0xc000) == -2.0f);
  CHECK(wisp_f16_to_f32(0x7bff) == 65504.0f);
  CHECK(wisp_f16_to_f32(0x0001) == ldexpf(1.0f, -24)); /* smallest subnormal */
  CHECK(wisp_f16_to_f32(0x03ff) == ldexpf(1023.0f, -24));
  CHECK(wisp_f16_to_f32(0x8000) == 0.0f && signbit(wisp_f16_to_f32(0x8000)));
  CHECK(isinf(wisp_f16_to_f32(0x7c00)) && isnan(wisp_f16_to_f32(0x7e00)));
  CHECK(wisp_bf16_to_f32(0x3f80) == 1.0f && wisp_bf16_to_f32(0xc040) == -3.0f);
}

TEST(safetensors_truncated_header) {
  const char *p = tpath("trunc.safetensors");
  CHECK(fx_write_bytes(p, "\x10\x00\x00", 3) == 0);
  CHECK(open_fails_with(p, "truncated header"));
}

TEST(safetensors_header_length_past_end) {
  const char *p = tpath("pastend.safetensors");
  CHECK(write_raw(p, "{}", 4096, 0) == 0);
  CHECK(open_fails_with(p, "header length 4096 passes the end of the file"));
}

TEST(safetensors_malformed_header_json) {
  const char *p = tpath("badjson.safetensors");
  const char *h = "{\"a\": {\"dtype\": \"F32\",";
  CHECK(write_raw(p, h, strlen(h), 0) == 0);
  CHECK(open_fails_with(p, "malformed JSON"));
}

TEST(safetensors_unknown_dtype) {
  const char *p = tpath("dtype.safetensors");
  const char *h = "{\"w.weight\": {\"dtype\": \"Q7\", \"shape\": [2], \"data_offsets\": [0, 8]}}";
  CHECK(write_raw(p, h, strlen(h), 8) == 0);
  CHECK(open_fails_with(p, "tensor 'w.weight': unknown dtype 'Q7'"));
}

TEST(safetensors_offsets_out_of_range) {
  const char *p = tpath("range.safetensors");
  const char *h = "{\"w\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [0, 16]}}";
  CHECK(write_raw(p, h, strlen(h), 12) == 0);
  CHECK(open_fails_with(p, "tensor 'w': data_offsets [0, 16] pass the end of the data (12 bytes)"));
}

TEST(safetensors_offsets_disagree_with_shape) {
  const char *p = tpath("size.safetensors");
  const char *h = "{\"w\": {\"dtype\": \"BF16\", \"shape\": [3, 2], \"data_offsets\": [0, 16]}}";
  CHECK(write_raw(p, h, strlen(h), 16) == 0);
  CHECK(open_fails_with(p, "tensor 'w': data_offsets [0, 16] hold 16 bytes, but BF16 [3, 2] needs 12"));
  const char *p2 = tpath("rev.safetensors");
  const char *h2 = "{\"w\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [8, 4]}}";
  CHECK(write_raw(p2, h2, strlen(h2), 16) == 0);
  CHECK(open_fails_with(p2, "end before they begin"));
  const char *p3 = tpath("neg.safetensors");
  const char *h3 = "{\"w\": {\"dtype\": \"F32\", \"shape\": [-1], \"data_offsets\": [0, 4]}}";
  CHECK(write_raw(p3, h3, strlen(h3), 16) == 0);
  CHECK(open_fails_with(p3, "shape[0] must be a non-negative integer"));
}

TEST(safetensors_overlapping_tensors) {
  const char *p = tpath("overlap.safetensors");
  const char *h = "{\"a\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [0, 16]},"
                  " \"b\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [8, 16]}}";
  CHECK(write_raw(p, h, strlen(h), 16) == 0);
  CHECK(open_fails_with(p, "tensors 'a' and 'b' overlap"));
  /* zero-sized tensors never overlap anything */
  const char *p2 = tpath("empty.safetensors");
  const char *h2 = "{\"a\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [0, 16]},"
                   " \"e\": {\"dtype\": \"F32\", \"shape\": [0, 3], \"data_offsets\": [4, 4]}}";
  CHECK(write_raw(p2, h2, strlen(h2), 16) == 0);
  wisp_safetensors *st = NULL;
  CHECKF(wisp_safetensors_open_file(p2, &st) == WISP_OK, "%s", wisp_last_error());
  wisp_safetensors_close(st);
}

TEST(safetensors_sharded_index) {
  char dir[512];
  snprintf(dir, sizeof dir, "%s/sharded", test_tmpdir());
  CHECK(mkdir(dir, 0755) == 0);
  const float a[2] = {1, 2}, b[3] = {3, 4, 5};
  fx_tensor ta = {"x.a", "F32", 1, {2}, a}, tb = {"x.b", "BF16", 1, {3}, b};
  char p[600];
  snprintf(p, sizeof p, "%s/model-00001-of-00002.safetensors", dir);
  CHECK(fx_write_safetensors(p, &ta, 1) == 0);
  snprintf(p, sizeof p, "%s/model-00002-of-00002.safetensors", dir);
  CHECK(fx_write_safetensors(p, &tb, 1) == 0);
  const char *idx = "{\"metadata\": {\"total_size\": 14}, \"weight_map\": {\"x.a\": \"model-00001-of-00002.safetensors\","
                    " \"x.b\": \"model-00002-of-00002.safetensors\"}}";
  snprintf(p, sizeof p, "%s/model.safetensors.index.json", dir);
  CHECK(fx_write_bytes(p, idx, strlen(idx)) == 0);
  wisp_safetensors *st = NULL;
  CHECKF(wisp_safetensors_open_dir(dir, &st) == WISP_OK, "%s", wisp_last_error());
  CHECK(st->n_files == 2 && st->n_tensors == 2);
  const wisp_st_tensor *t = wisp_safetensors_find(st, "x.b");
  CHECK(t && strstr(wisp_safetensors_file_of(st, t), "00002"));
  float out[3];
  CHECK(wisp_safetensors_read_f32(st, t, out) == WISP_OK && out[0] == 3 && out[2] == 5);
  wisp_safetensors_close(st);
  /* An index naming a tensor its shard lacks. */
  const char *bad = "{\"weight_map\": {\"x.a\": \"model-00001-of-00002.safetensors\","
                    " \"x.c\": \"model-00002-of-00002.safetensors\"}}";
  CHECK(fx_write_bytes(p, bad, strlen(bad)) == 0);
  CHECK(wisp_safetensors_open_dir(dir, &st) != WISP_OK && st == NULL);
  CHECKF(strstr(wisp_last_error(), "tensor 'x.c' is mapped to"), "%s", wisp_last_error());
  /* A tensor stored in two shards. */
  snprintf(p, sizeof p, "%s/model-00002-of-00002.safetensors", dir);
  fx_tensor two[2] = {tb, {"x.a", "F32", 1, {2}, a}};
  CHECK(fx_write_safetensors(p, two, 2) == 0);
  snprintf(p, sizeof p, "%s/model.safetensors.index.json", dir);
  CHECK(fx_write_bytes(p, idx, strlen(idx)) == 0);
  CHECK(wisp_safetensors_open_dir(dir, &st) != WISP_OK);
  CHECKF(strstr(wisp_last_error(), "tensor 'x.a' appears in both"), "%s", wisp_last_error());
}

TEST(safetensors_missing_files) {
  wisp_safetensors *st = NULL;
  CHECK(wisp_safetensors_open_dir(test_tmpdir(), &st) != WISP_OK);
  CHECK(strstr(wisp_last_error(), "no model.safetensors"));
  CHECK(wisp_safetensors_open_file(tpath("nope.safetensors"), &st) != WISP_OK);
  CHECK(strstr(wisp_last_error(), "nope.safetensors"));
}
