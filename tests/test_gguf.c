/* GGUF: the reader on hand-made files (every metadata value type, bad
 * magic/version/truncation/offset/type each one clear line), export-gguf +
 * convert FILE.gguf round trips (identical logits for an f32 LFM2 artifact,
 * identical greedy tokens for the Q4 synthetic one), tokenizer.ggml.* to a
 * working tokenizer.json, `wisp export-gguf --keep-quant` (Q4 / Q4Z as
 * Q4_0 / Q4_1 with the artifact's values), and `wisp verify`. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cJSON.h>

#include <math.h>

#include "format/artifact.h"
#include "format/gguf.h"
#include "format/gguf_import.h"
#include "format/quant.h"
#include "st_fixture.h"
#include "test.h"
#include "tokenizer/tokenizer.h"
#include "util/file.h"
#include "wisp.h"

/* ---- a tiny hand-written GGUF ---- */
typedef struct {
  uint8_t b[4096];
  size_t n;
} gb;
static void g_put(gb *g, const void *p, size_t n) { memcpy(g->b + g->n, p, n); g->n += n; }
static void g_u32(gb *g, uint32_t v) { g_put(g, &v, 4); }
static void g_u64(gb *g, uint64_t v) { g_put(g, &v, 8); }
static void g_str(gb *g, const char *s) { g_u64(g, strlen(s)); g_put(g, s, strlen(s)); }

/* One F32 tensor "t" of 8 elements (or `type`), metadata of every kind;
 * `data_bytes` bytes of data after the aligned header. */
static size_t make_gguf(gb *g, uint32_t version, uint32_t type, uint64_t offset, size_t data_bytes) {
  memset(g, 0, sizeof *g);
  g_put(g, "GGUF", 4);
  g_u32(g, version);
  g_u64(g, 1);  /* tensors */
  g_u64(g, 13); /* kv */
  g_str(g, "k.u8"); g_u32(g, 0); uint8_t u8 = 200; g_put(g, &u8, 1);
  g_str(g, "k.i8"); g_u32(g, 1); int8_t i8 = -5; g_put(g, &i8, 1);
  g_str(g, "k.u16"); g_u32(g, 2); uint16_t u16 = 60000; g_put(g, &u16, 2);
  g_str(g, "k.i16"); g_u32(g, 3); int16_t i16 = -300; g_put(g, &i16, 2);
  g_str(g, "k.u32"); g_u32(g, 4); g_u32(g, 4000000000u);
  g_str(g, "k.i32"); g_u32(g, 5); g_u32(g, (uint32_t)-7);
  g_str(g, "k.f32"); g_u32(g, 6); float f = 1.5f; g_put(g, &f, 4);
  g_str(g, "k.bool"); g_u32(g, 7); uint8_t b = 1; g_put(g, &b, 1);
  g_str(g, "k.str"); g_u32(g, 8); g_str(g, "hello");
  g_str(g, "k.arr"); g_u32(g, 9); g_u32(g, 5); g_u64(g, 3); g_u32(g, 1); g_u32(g, (uint32_t)-2); g_u32(g, 3);
  g_str(g, "k.u64"); g_u32(g, 10); g_u64(g, 1ull << 40);
  g_str(g, "k.i64"); g_u32(g, 11); g_u64(g, (uint64_t)-9);
  g_str(g, "k.f64"); g_u32(g, 12); double d = 0.25; g_put(g, &d, 8);
  g_str(g, "t"); g_u32(g, 1); g_u64(g, 32); g_u32(g, type); g_u64(g, offset);
  while (g->n % 32) g->n++;
  for (size_t i = 0; i < data_bytes / 4; i++) { float v = (float)i; g_put(g, &v, 4); }
  return g->n;
}

TEST(gguf_reads_every_value_type_and_a_tensor) {
  gb g;
  make_gguf(&g, 3, 0, 0, 128);
  wisp_gguf *f = NULL;
  CHECKF(wisp_gguf_parse(g.b, g.n, "mem.gguf", &f) == WISP_OK, "%s", wisp_last_error());
  int64_t v;
  double x;
  CHECK(wisp_gguf_get_int(f, "k.u8", &v) && v == 200);
  CHECK(wisp_gguf_get_int(f, "k.i8", &v) && v == -5);
  CHECK(wisp_gguf_get_int(f, "k.u16", &v) && v == 60000);
  CHECK(wisp_gguf_get_int(f, "k.i16", &v) && v == -300);
  CHECK(wisp_gguf_get_int(f, "k.u32", &v) && v == 4000000000ll);
  CHECK(wisp_gguf_get_int(f, "k.i32", &v) && v == -7);
  CHECK(wisp_gguf_get_float(f, "k.f32", &x) && x == 1.5);
  CHECK(wisp_gguf_get_int(f, "k.bool", &v) && v == 1);
  const wisp_gguf_kv *s = wisp_gguf_kv_find(f, "k.str");
  CHECK(s && s->type == WISP_GGUF_STRING && s->str.len == 5 && !memcmp(s->str.s, "hello", 5));
  const wisp_gguf_kv *a = wisp_gguf_kv_find(f, "k.arr");
  CHECK(a && a->n == 3 && wisp_gguf_arr_int(a, 1) == -2 && wisp_gguf_arr_int(a, 2) == 3);
  CHECK(wisp_gguf_get_int(f, "k.u64", &v) && v == (1ll << 40));
  CHECK(wisp_gguf_get_int(f, "k.i64", &v) && v == -9);
  CHECK(wisp_gguf_get_float(f, "k.f64", &x) && x == 0.25);
  const wisp_gguf_tensor *t = wisp_gguf_tensor_find(f, "t");
  CHECK(t && t->numel == 32 && t->bytes == 128 && f->alignment == 32);
  float out[32];
  CHECK(wisp_gguf_read_f32(f, t, out) == WISP_OK && out[0] == 0.0f && out[31] == 31.0f);
  wisp_gguf_close(f);
}

TEST(gguf_q8_0_and_q4_0_dequantize) {
  float x[64], y[64];
  for (int i = 0; i < 64; i++) x[i] = (float)((i * 37) % 23 - 11) * 0.1f;
  uint8_t q[68];
  wisp_quantize_q8_0(x, 64, q);
  gb g;
  memset(&g, 0, sizeof g);
  g_put(&g, "GGUF", 4); g_u32(&g, 3); g_u64(&g, 1); g_u64(&g, 0);
  g_str(&g, "q"); g_u32(&g, 2); g_u64(&g, 32); g_u64(&g, 2); g_u32(&g, 8); g_u64(&g, 0);
  while (g.n % 32) g.n++;
  g_put(&g, q, 68);
  wisp_gguf *f = NULL;
  CHECKF(wisp_gguf_parse(g.b, g.n, "q8.gguf", &f) == WISP_OK, "%s", wisp_last_error());
  CHECK(wisp_gguf_read_f32(f, &f->tensors[0], y) == WISP_OK);
  for (int i = 0; i < 64; i++) CHECK_NEAR(y[i], x[i], 1.1 / 127 * 1.01 + 1e-3);
  wisp_gguf_close(f);
  /* Q4_0: d = 0.5, element j low nibble of byte j, j+16 high nibble */
  uint8_t blk[18] = {0};
  uint16_t h = 0x3800; /* 0.5 */
  memcpy(blk, &h, 2);
  for (int j = 0; j < 16; j++) blk[2 + j] = (uint8_t)(j | (15 - j) << 4);
  memset(&g, 0, sizeof g);
  g_put(&g, "GGUF", 4); g_u32(&g, 3); g_u64(&g, 1); g_u64(&g, 0);
  g_str(&g, "q"); g_u32(&g, 1); g_u64(&g, 32); g_u32(&g, 2); g_u64(&g, 0);
  while (g.n % 32) g.n++;
  g_put(&g, blk, 18);
  CHECKF(wisp_gguf_parse(g.b, g.n, "q4.gguf", &f) == WISP_OK, "%s", wisp_last_error());
  CHECK(wisp_gguf_read_f32(f, &f->tensors[0], y) == WISP_OK);
  CHECK(y[0] == -4.0f && y[15] == 3.5f && y[16] == 3.5f && y[31] == -4.0f);
  wisp_gguf_close(f);
}

static int last_line_has(const char *log, const char *prefix, const char *needle) {
  const char *last = log;
  size_t n = strlen(log);
  while (n > 0 && log[n - 1] == '\n') n--;
  for (size_t i = 0; i < n; i++)
    if (log[i] == '\n' && i + 1 < n) last = log + i + 1;
  return !strncmp(last, prefix, strlen(prefix)) && strstr(last, needle) != NULL;
}

static void bad_case(const char *name, const void *data, size_t len, const char *needle, int *ok) {
  char path[600], out[600], cmd[2048], log[4096];
  snprintf(path, sizeof path, "%s/%s.gguf", test_tmpdir(), name);
  snprintf(out, sizeof out, "%s/%s_out", test_tmpdir(), name);
  fx_write_bytes(path, data, len);
  snprintf(cmd, sizeof cmd, "%s convert %s -o %s --quant f32", test_wisp_bin(), path, out);
  int rc = test_run(cmd, log, sizeof log);
  *ok = rc == 1 && last_line_has(log, "wisp convert: ", needle) && !wisp_path_exists(out);
  if (!*ok) fprintf(stderr, "case %s: rc %d, log: %s\n", name, rc, log);
}

TEST(gguf_bad_input_each_one_clear_line) {
  gb g;
  int ok;
  size_t n = make_gguf(&g, 3, 0, 0, 128);
  g.b[0] = 'X';
  bad_case("magic", g.b, n, "bad magic", &ok);
  CHECK(ok);
  n = make_gguf(&g, 7, 0, 0, 128);
  bad_case("version", g.b, n, "GGUF version 7 is not supported", &ok);
  CHECK(ok);
  make_gguf(&g, 3, 0, 0, 128);
  bad_case("short", g.b, 60, "truncated", &ok);
  CHECK(ok);
  bad_case("short2", g.b, 200, "truncated metadata", &ok);
  CHECK(ok);
  n = make_gguf(&g, 3, 0, 64, 128);
  bad_case("offset", g.b, n, "runs past the end of the file", &ok);
  CHECK(ok);
  n = make_gguf(&g, 3, 99, 0, 128);
  bad_case("type", g.b, n, "has ggml type 99 (not a ggml type), which wisp cannot read", &ok);
  CHECK(ok);
  n = make_gguf(&g, 3, 0, 0, 128);
  bad_case("arch", g.b, n, "missing string metadata 'general.architecture'", &ok);
  CHECK(ok);
}

/* ---- round trips through the CLI ---- */

static int sh(const char *cmd, char *log, size_t cap) { return test_run(cmd, log, cap); }

/* `wisp logits --tokens ... --greedy N` output of an artifact. */
static int logits_of(const char *dir, char *out, size_t cap) {
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "%s logits --backend cpu -m %s --tokens 1,5,9,3,7 --greedy 12 2>/dev/null", test_wisp_bin(), dir);
  return test_run(cmd, out, cap);
}

TEST(gguf_roundtrip_f32_lfm2_identical_logits) {
  char hf[600], a[600], gg[600], b[600], cmd[4096], log[8192];
  snprintf(hf, sizeof hf, "%s/gg_hf", test_tmpdir());
  snprintf(a, sizeof a, "%s/gg_a", test_tmpdir());
  snprintf(gg, sizeof gg, "%s/gg_a.gguf", test_tmpdir());
  snprintf(b, sizeof b, "%s/gg_b", test_tmpdir());
  CHECK(mkdir(hf, 0755) == 0);
  fx_lfm2_opts o = {.untied = 1, .seed = 3};
  CHECK(fx_write_tiny_lfm2(hf, &o) == 0);
  snprintf(cmd, sizeof cmd, "%s convert %s -o %s --quant f32 --quiet", test_wisp_bin(), hf, a);
  CHECKF(sh(cmd, log, sizeof log) == 0, "%s", log);
  snprintf(cmd, sizeof cmd, "%s export-gguf %s -o %s", test_wisp_bin(), a, gg);
  CHECKF(sh(cmd, log, sizeof log) == 0, "%s", log);
  wisp_gguf *f = NULL;
  CHECKF(wisp_gguf_open(gg, &f) == WISP_OK, "%s", wisp_last_error());
  int64_t v;
  CHECK(wisp_gguf_get_int(f, "lfm2.block_count", &v) && v == 3);
  CHECK(wisp_gguf_get_int(f, "lfm2.embedding_length", &v) && v == 64);
  CHECK(wisp_gguf_tensor_find(f, "blk.0.shortconv.in_proj.weight") && wisp_gguf_tensor_find(f, "blk.1.attn_k.weight"));
  CHECK(wisp_gguf_tensor_find(f, "output.weight") && wisp_gguf_tensor_find(f, "token_embd_norm.weight"));
  const wisp_gguf_tensor *q = wisp_gguf_tensor_find(f, "blk.1.attn_q.weight");
  CHECK(q && q->ne[0] == 64 && q->ne[1] == 64 && q->type == WISP_GGML_F32);
  wisp_gguf_close(f);
  snprintf(cmd, sizeof cmd, "%s convert %s -o %s --quant f32 --quiet", test_wisp_bin(), gg, b);
  CHECKF(sh(cmd, log, sizeof log) == 0, "%s", log);
  static char la[65536], lb[65536];
  CHECK(logits_of(a, la, sizeof la) == 0);
  CHECK(logits_of(b, lb, sizeof lb) == 0);
  CHECKF(strlen(la) > 100 && !strcmp(la, lb), "logits differ:\n%.300s\n%.300s", la, lb);
  /* and again through Q8_0: the exported blocks, decoded here from the
   * format (an f16 scale, 32 int8), are within half a step of the f32
   * weights (a step max|block| / 127, plus the f16 rounding of the scale,
   * 2^-11 of it, over up to 127 steps), and the reader dequantizes them to
   * exactly those values */
  static float orig[64 * 64], back[64 * 64];
  CHECKF(wisp_gguf_open(gg, &f) == WISP_OK, "%s", wisp_last_error());
  q = wisp_gguf_tensor_find(f, "blk.1.attn_q.weight");
  CHECK(q && wisp_gguf_read_f32(f, q, orig) == WISP_OK);
  wisp_gguf_close(f);
  snprintf(cmd, sizeof cmd, "%s export-gguf %s -o %s --q8_0 --force && %s convert %s -o %s_q8 --quant f32 --quiet",
           test_wisp_bin(), a, gg, test_wisp_bin(), gg, b);
  CHECKF(sh(cmd, log, sizeof log) == 0, "%s", log);
  CHECKF(wisp_gguf_open(gg, &f) == WISP_OK, "%s", wisp_last_error());
  q = wisp_gguf_tensor_find(f, "blk.1.attn_q.weight");
  CHECK(q && q->type == WISP_GGML_Q8_0 && q->ne[0] == 64 && q->ne[1] == 64);
  int same = wisp_gguf_read_f32(f, q, back) == WISP_OK, near = 1, nonzero = 0;
  for (int blk = 0; blk < 64 * 64 / 32; blk++) {
    const uint8_t *p = q->data + (size_t)blk * 34;
    const uint16_t h = (uint16_t)(p[0] + 256 * p[1]);
    const int e = (h >> 10) & 31, fr = h & 1023;
    const double d = (h & 0x8000 ? -1 : 1) * (e ? ldexp(1024 + fr, e - 25) : ldexp(fr, -24));
    double amax = 0;
    for (int j = 0; j < 32; j++) amax = fmax(amax, fabs(orig[blk * 32 + j]));
    for (int j = 0; j < 32; j++) {
      const double v = d * (int8_t)p[2 + j];
      same = same && back[blk * 32 + j] == (float)v;
      near = near && fabs(v - orig[blk * 32 + j]) <= amax / 127 * (0.5 + 127.0 / 2048) * 1.001 + 1e-7;
      nonzero += v != 0;
    }
  }
  wisp_gguf_close(f);
  CHECKF(near && nonzero > 64 * 64 / 2, "Q8_0 blocks are not the f32 weights within half a step");
  CHECKF(same, "the GGUF reader's Q8_0 values differ from the blocks' own");
}

static const char *greedy_of(const char *logits_json, char *buf, size_t cap) {
  cJSON *j = cJSON_Parse(logits_json);
  char *s = j ? cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(j, "greedy")) : NULL;
  snprintf(buf, cap, "%s", s ? s : "");
  free(s);
  cJSON_Delete(j);
  return buf;
}

TEST(gguf_roundtrip_synthetic_small_same_greedy_tokens) {
  char a[600], gg[600], b[600], cmd[4096], log[8192];
  snprintf(a, sizeof a, "%s/gs_a", test_tmpdir());
  snprintf(gg, sizeof gg, "%s/gs.gguf", test_tmpdir());
  snprintf(b, sizeof b, "%s/gs_b", test_tmpdir());
  snprintf(cmd, sizeof cmd, "%s gen-synthetic --small -o %s && %s export-gguf %s -o %s && %s convert %s -o %s --quant f32 --quiet",
           test_wisp_bin(), a, test_wisp_bin(), a, gg, test_wisp_bin(), gg, b);
  CHECKF(sh(cmd, log, sizeof log) == 0, "%s", log);
  static char la[65536], lb[65536];
  char ga[512], gb2[512];
  CHECK(logits_of(a, la, sizeof la) == 0);
  CHECK(logits_of(b, lb, sizeof lb) == 0);
  greedy_of(la, ga, sizeof ga);
  greedy_of(lb, gb2, sizeof gb2);
  CHECKF(strlen(ga) > 2 && !strcmp(ga, gb2), "greedy differs: %s vs %s", ga, gb2);
}

/* GGUF tensor GNAME against artifact matrix SEC (rows x cols, no row or
 * column transform): every value within the f16 rounding of its block's
 * scale (2^-8 of the block's largest magnitude: a misplaced nibble moves a
 * value by a whole scale, at least 1/8 of that). Returns the worst error
 * over that bound, or 1e9 when a tensor is missing. */
static double keep_quant_error(const wisp_gguf *f, const wisp_artifact *a, const char *gname, const char *sec,
                               int rows, int cols, uint32_t want_type) {
  const wisp_gguf_tensor *t = wisp_gguf_tensor_find(f, gname);
  wisp_matrix m;
  if (!t || t->type != want_type || t->ne[0] != (uint64_t)cols || t->ne[1] != (uint64_t)rows ||
      wisp_matrix_bind(a, sec, rows, cols, &m))
    return 1e9;
  float *g = malloc(sizeof(float) * (size_t)rows * cols), *w = malloc(sizeof(float) * (size_t)cols);
  double worst = 0;
  if (!g || !w || wisp_gguf_read_f32(f, t, g)) worst = 1e9;
  for (int r = 0; r < rows && worst < 1e9; r++) {
    wisp_matrix_row_f32(&m, r, w);
    for (int b = 0; b < cols / 32; b++) {
      double amax = 0;
      for (int e = 0; e < 32; e++) amax = fmax(amax, fabs(w[32 * b + e]));
      for (int e = 0; e < 32; e++) {
        double err = fabs(g[(size_t)r * cols + 32 * b + e] - w[32 * b + e]) / (amax / 256 + 1e-30);
        if (err > worst) worst = err;
      }
    }
  }
  free(g);
  free(w);
  return worst;
}

TEST(gguf_export_keep_quant_writes_q4_0_and_q4_1_with_the_artifacts_values) {
  char a[600], gg[600], b[600], cmd[4096], log[8192];
  snprintf(a, sizeof a, "%s/gk_a", test_tmpdir());
  snprintf(gg, sizeof gg, "%s/gk.gguf", test_tmpdir());
  snprintf(b, sizeof b, "%s/gk_b", test_tmpdir());
  snprintf(cmd, sizeof cmd, "%s gen-synthetic --small -o %s && %s export-gguf %s -o %s --keep-quant", test_wisp_bin(),
           a, test_wisp_bin(), a, gg);
  CHECKF(sh(cmd, log, sizeof log) == 0, "%s", log);
  wisp_gguf *f = NULL;
  wisp_artifact *art = NULL;
  CHECKF(wisp_gguf_open(gg, &f) == WISP_OK, "%s", wisp_last_error());
  CHECKF(wisp_artifact_open(a, &art) == WISP_OK, "%s", wisp_last_error());
  const wisp_shape *s = &art->shape;
  double e_embed = keep_quant_error(f, art, "token_embd.weight", "embed", s->vocab, s->hidden, WISP_GGML_Q4_1);
  double e_down = keep_quant_error(f, art, "blk.0.ffn_down.weight", "L0.mlp.down", s->hidden, s->ffn, WISP_GGML_Q4_0);
  CHECKF(e_embed <= 1.0, "token_embd.weight (Q4Z -> Q4_1): error %.3g of the bound", e_embed);
  CHECKF(e_down <= 1.0, "blk.0.ffn_down.weight (Q4 -> Q4_0): error %.3g of the bound", e_down);
  int64_t ft;
  CHECK(wisp_gguf_get_int(f, "general.file_type", &ft) && (ft == 2 || ft == 3));
  wisp_gguf_close(f);
  wisp_artifact_free(art);
  /* and it reads back as a model with the same greedy tokens */
  snprintf(cmd, sizeof cmd, "%s convert %s -o %s --quant f32 --quiet", test_wisp_bin(), gg, b);
  CHECKF(sh(cmd, log, sizeof log) == 0, "%s", log);
  static char la[65536], lb[65536];
  char ga[512], gb2[512];
  CHECK(logits_of(a, la, sizeof la) == 0);
  CHECK(logits_of(b, lb, sizeof lb) == 0);
  greedy_of(la, ga, sizeof ga);
  greedy_of(lb, gb2, sizeof gb2);
  CHECKF(strlen(ga) > 2 && !strcmp(ga, gb2), "greedy differs: %s vs %s", ga, gb2);
}

/* tokenizer.ggml.* -> tokenizer.json: 256 byte tokens (GPT-2 byte map), two
 * merges, a control token. */
static int byte_char(int b, char *out) {
  int cp;
  if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255)) cp = b;
  else {
    int n = 0;
    for (int x = 0; x < b; x++)
      if (!((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174 && x <= 255))) n++;
    cp = 256 + n;
  }
  if (cp < 0x80) { out[0] = (char)cp; out[1] = 0; return 1; }
  out[0] = (char)(0xC0 | cp >> 6);
  out[1] = (char)(0x80 | (cp & 63));
  out[2] = 0;
  return 2;
}

TEST(gguf_tokenizer_metadata_becomes_a_working_tokenizer) {
  static char names[260][8];
  const char *tokens[260];
  int32_t types[260];
  for (int b = 0; b < 256; b++) { byte_char(b, names[b]); tokens[b] = names[b]; types[b] = 1; }
  tokens[256] = "he"; types[256] = 1;
  tokens[257] = "hel"; types[257] = 1;
  tokens[258] = "<|end|>"; types[258] = 3;
  const char *merges[2] = {"h e", "he l"};
  wisp_gguf_writer *w = wisp_gguf_writer_new();
  wisp_gguf_put_str(w, "tokenizer.ggml.model", "gpt2");
  wisp_gguf_put_str(w, "tokenizer.ggml.pre", "llama-bpe");
  wisp_gguf_put_arr_str(w, "tokenizer.ggml.tokens", tokens, 259);
  wisp_gguf_put_arr_i32(w, "tokenizer.ggml.token_type", types, 259);
  wisp_gguf_put_arr_str(w, "tokenizer.ggml.merges", merges, 2);
  wisp_gguf_put_u32(w, "tokenizer.ggml.eos_token_id", 258);
  char path[600], dir[600];
  snprintf(path, sizeof path, "%s/tok.gguf", test_tmpdir());
  snprintf(dir, sizeof dir, "%s/tokdir", test_tmpdir());
  CHECK(wisp_gguf_writer_write(w, path) == WISP_OK);
  wisp_gguf_writer_free(w);
  CHECK(mkdir(dir, 0755) == 0);
  wisp_gguf *f = NULL;
  CHECKF(wisp_gguf_open(path, &f) == WISP_OK, "%s", wisp_last_error());
  int written = 0;
  wisp_status st = wisp_gguf_write_tokenizer(f, dir, &written);
  wisp_gguf_close(f);
  CHECKF(st == WISP_OK && written, "%s", wisp_last_error());
  char tj[700];
  snprintf(tj, sizeof tj, "%s/tokenizer.json", dir);
  wisp_tokenizer *t = NULL;
  CHECKF(wisp_tokenizer_from_file(tj, &t) == WISP_OK, "%s", wisp_last_error());
  int32_t *ids = NULL;
  int n = 0;
  CHECK(wisp_tokenizer_encode(t, "help<|end|>", &ids, &n) == WISP_OK);
  int ok = n == 3 && ids[0] == 257 && ids[1] == 'p' && ids[2] == 258;
  free(ids);
  wisp_tokenizer_free(t);
  CHECKF(ok, "encoded to %d ids", n);
}

/* ---- wisp verify ---- */

TEST(verify_reports_each_mismatch_and_missing_digest) {
  char a[600], cmd[2048], log[8192];
  snprintf(a, sizeof a, "%s/ver", test_tmpdir());
  snprintf(cmd, sizeof cmd, "%s gen-synthetic --small -o %s 2>&1 && %s verify %s", test_wisp_bin(), a, test_wisp_bin(), a);
  CHECKF(sh(cmd, log, sizeof log) == 0 && strstr(log, "verified"), "%s", log);
  /* every section carries a digest */
  char mp[700];
  snprintf(mp, sizeof mp, "%s/manifest.json", a);
  char *text = NULL;
  CHECK(wisp_read_file(mp, &text, NULL) == WISP_OK);
  cJSON *m = cJSON_Parse(text);
  free(text);
  cJSON *secs = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(m, "runtime"), "sections");
  const cJSON *e;
  int all = 1;
  cJSON_ArrayForEach(e, secs) all &= cJSON_IsString(cJSON_GetObjectItemCaseSensitive(e, "sha256"));
  CHECK(all);
  /* flip one byte of the first section, drop the digest of the second */
  cJSON *s0 = cJSON_GetArrayItem(secs, 0), *s1 = cJSON_GetArrayItem(secs, 1);
  char name0[128], name1[128];
  snprintf(name0, sizeof name0, "%s", cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(s0, "name")));
  snprintf(name1, sizeof name1, "%s", cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(s1, "name")));
  cJSON_DeleteItemFromObjectCaseSensitive(s1, "sha256");
  char *out = cJSON_Print(m);
  cJSON_Delete(m);
  CHECK(wisp_write_file_atomic(mp, out, strlen(out)) == WISP_OK);
  free(out);
  char wp[700];
  snprintf(wp, sizeof wp, "%s/weights.bin", a);
  FILE *f = fopen(wp, "r+b");
  CHECK(f);
  int c = fgetc(f);
  fseek(f, 0, SEEK_SET);
  fputc(c ^ 0x5a, f);
  fclose(f);
  snprintf(cmd, sizeof cmd, "%s verify %s", test_wisp_bin(), a);
  int rc = sh(cmd, log, sizeof log);
  char want0[300], want1[300];
  snprintf(want0, sizeof want0, "section '%s' sha256", name0);
  snprintf(want1, sizeof want1, "section '%s' has no sha256", name1);
  CHECKF(rc == 1 && strstr(log, want0) && strstr(log, want1) && strstr(log, "weights.bin sha256") &&
             strstr(log, "3 problems"),
         "rc %d: %s", rc, log);
}
