/* GGUF for every architecture wisp runs: lfm2, qwen3, llama and qwen35.
 *
 * For each, a tiny Hugging Face checkpoint is converted (artifact A), written
 * as GGUF by `wisp export-gguf`, imported back by `wisp convert FILE.gguf`
 * (artifact B), and A and B must give the same greedy tokens and the same
 * logits: bit for bit for lfm2 and qwen3; within 1e-6 of the largest logit
 * for llama (its rope factors are rounded once more: 8e-7 of 4.9 seen) and
 * qwen35 (A_log goes through exp/log; identical in practice). Separately, the GGUF tensors are checked element by element
 * against the Hugging Face ones in llama.cpp's layout, computed here from
 * the formulas (not through wisp's tables): llama's q/k rows interleaved for
 * rope on adjacent pairs, rope_freqs from the llama3 parameters, qwen35's
 * value heads in tiled order, -exp(A_log), 1 + w norms. Bad files give one
 * line. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cJSON.h>

#include "format/gguf.h"
#include "format/gguf_import.h"
#include "st_fixture.h"
#include "gguf_copy.h"
#include "test.h"
#include "tokenizer/tokenizer.h"
#include "util/file.h"
#include "wisp.h"

typedef int (*fx_writer)(const char *dir);
static int w_lfm2(const char *dir) {
  fx_lfm2_opts o = {.untied = 1, .seed = 3};
  return fx_write_tiny_lfm2(dir, &o);
}
static int w_qwen3(const char *dir) { return fx_write_tiny_qwen3(dir, 0); }
static int w_llama(const char *dir) { return fx_write_tiny_qwen3(dir, 1); }
static int w_qwen35(const char *dir) { return fx_write_tiny_qwen35(dir); }

typedef struct { char hf[600], a[600], gg[600], b[600]; } paths;

static void paths_for(const char *tag, paths *p) {
  snprintf(p->hf, sizeof p->hf, "%s/%s_hf", test_tmpdir(), tag);
  snprintf(p->a, sizeof p->a, "%s/%s_a", test_tmpdir(), tag);
  snprintf(p->gg, sizeof p->gg, "%s/%s.gguf", test_tmpdir(), tag);
  snprintf(p->b, sizeof p->b, "%s/%s_b", test_tmpdir(), tag);
}

/* HF -> A (--quant QUANT) -> GGUF (export FLAGS) -> B (f32); 0 on success. */
static int chain(const char *tag, fx_writer w, const char *quant, const char *flags, paths *p) {
  static char log[1 << 16];
  char cmd[4096];
  paths_for(tag, p);
  if (mkdir(p->hf, 0755) != 0 || w(p->hf) != 0) return fprintf(stderr, "fixture %s failed\n", tag), 1;
  snprintf(cmd, sizeof cmd,
           "%s convert %s -o %s --quant %s --quiet && %s export-gguf %s -o %s %s && %s convert %s -o %s --quant f32 --quiet",
           test_wisp_bin(), p->hf, p->a, quant, test_wisp_bin(), p->a, p->gg, flags, test_wisp_bin(), p->gg, p->b);
  if (test_run(cmd, log, sizeof log) != 0) return fprintf(stderr, "%s: %s\n", tag, log), 1;
  return 0;
}

static cJSON *logits_json(const char *dir) {
  static char out[1 << 17];
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "%s logits --backend cpu -m %s --tokens 3,1,4,1,5,9,2,6 --greedy 10 2>/dev/null", test_wisp_bin(), dir);
  return test_run(cmd, out, sizeof out) == 0 ? cJSON_Parse(out) : NULL;
}

/* Same greedy tokens and max|logit diff| <= tol * max|logit| for A and B. */
static int same_outputs(const char *a, const char *b, double tol, char *msg, size_t cap) {
  cJSON *ja = logits_json(a), *jb = logits_json(b);
  const cJSON *la = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(ja, "logits"), 0);
  const cJSON *lb = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(jb, "logits"), 0);
  char *ga = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(ja, "greedy"));
  char *gb = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(jb, "greedy"));
  int n = cJSON_GetArraySize(la), ok = n > 10 && n == cJSON_GetArraySize(lb) && ga && gb && !strcmp(ga, gb);
  double maxdiff = 0, maxref = 0;
  for (int i = 0; ok && i < n; i++) {
    double x = cJSON_GetArrayItem(la, i)->valuedouble, y = cJSON_GetArrayItem(lb, i)->valuedouble;
    maxdiff = fmax(maxdiff, fabs(x - y));
    maxref = fmax(maxref, fabs(x));
  }
  ok = ok && maxref > 0.1 && maxdiff <= tol * maxref;
  snprintf(msg, cap, "greedy %s vs %s, %d logits, max|diff| %.3g, max|logit| %.3g", ga ? ga : "?", gb ? gb : "?", n,
           maxdiff, maxref);
  free(ga);
  free(gb);
  cJSON_Delete(ja);
  cJSON_Delete(jb);
  return ok;
}

static int gguf_arch_is(const char *path, const char *arch) {
  wisp_gguf *f = NULL;
  if (wisp_gguf_open(path, &f)) return 0;
  const wisp_gguf_kv *a = wisp_gguf_kv_find(f, "general.architecture");
  int ok = a && a->type == WISP_GGUF_STRING && a->str.len == strlen(arch) && !memcmp(a->str.s, arch, a->str.len);
  wisp_gguf_close(f);
  return ok;
}

/* The bytes of tensor `name` in two GGUF files are equal (both absent counts). */
static int same_tensor(const char *p1, const char *p2, const char *name) {
  wisp_gguf *f = NULL, *g = NULL;
  int ok = 0;
  if (!wisp_gguf_open(p1, &f) && !wisp_gguf_open(p2, &g)) {
    const wisp_gguf_tensor *a = wisp_gguf_tensor_find(f, name), *b = wisp_gguf_tensor_find(g, name);
    ok = (!a && !b) || (a && b && a->bytes == b->bytes && !memcmp(a->data, b->data, (size_t)a->bytes));
  }
  wisp_gguf_close(f);
  wisp_gguf_close(g);
  return ok;
}

static void round_trip(const char *tag, fx_writer w, const char *quant, const char *arch, double tol) {
  paths p;
  char msg[512], cmd[2048], gg2[700];
  static char log[8192];
  CHECK(chain(tag, w, quant, "", &p) == 0);
  CHECKF(gguf_arch_is(p.gg, arch), "%s is not general.architecture %s", p.gg, arch);
  CHECKF(same_outputs(p.a, p.b, tol, msg, sizeof msg), "%s", msg);
  /* the imported artifact goes out again as the same architecture */
  snprintf(gg2, sizeof gg2, "%s.again.gguf", p.b);
  snprintf(cmd, sizeof cmd, "%s export-gguf %s -o %s", test_wisp_bin(), p.b, gg2);
  CHECKF(test_run(cmd, log, sizeof log) == 0, "%s", log);
  CHECKF(gguf_arch_is(gg2, arch), "%s is not general.architecture %s", gg2, arch);
  /* and, from f32, with the same tensors (transforms undone exactly) */
  CHECK(strcmp(quant, "f32") ||
        (same_tensor(p.gg, gg2, "rope_freqs.weight") && same_tensor(p.gg, gg2, "blk.0.attn_q.weight") &&
         same_tensor(p.gg, gg2, "blk.0.attn_qkv.weight") && same_tensor(p.gg, gg2, "blk.0.ssm_out.weight")));
}

TEST(gguf_arch_lfm2_round_trip_identical) { round_trip("ga_lfm2", w_lfm2, "f32", "lfm2", 0); }
TEST(gguf_arch_qwen3_round_trip_identical) { round_trip("ga_qwen3", w_qwen3, "f32", "qwen3", 0); }
TEST(gguf_arch_llama_round_trip_same_tokens) { round_trip("ga_llama", w_llama, "f32", "llama", 1e-6); }
TEST(gguf_arch_qwen35_round_trip_same_tokens) { round_trip("ga_qwen35", w_qwen35, "f32", "qwen35", 1e-6); }
/* Q4_K matrices go out as GGUF Q4_K, their rows reordered as whole blocks. */
TEST(gguf_arch_qwen35_q4k_round_trip_same_tokens) { round_trip("ga_qwen35k", w_qwen35, "q4k", "qwen35", 1e-6); }

/* ---- the GGUF tensors, element by element ---- */

/* Tensor `name` of an open GGUF as f32 (malloc'd), checking its ne. */
static float *tensor_f32(const wisp_gguf *f, const char *name, uint64_t ne0, uint64_t ne1) {
  const wisp_gguf_tensor *t = wisp_gguf_tensor_find(f, name);
  if (!t || t->ne[0] != ne0 || t->ne[1] != ne1) {
    fprintf(stderr, "tensor %s: %s\n", name, t ? "wrong shape" : "missing");
    return NULL;
  }
  float *v = malloc(sizeof(float) * (size_t)t->numel);
  if (v && wisp_gguf_read_f32(f, t, v)) { free(v); return NULL; }
  return v;
}

/* llama.cpp's llama rope rotates adjacent pairs (2i, 2i+1); Hugging Face
 * rotates (i, i + D/2). So GGUF row h*D + 2i + s must be HF row
 * h*D + s*D/2 + i, for q (4 heads) and k (2 heads) but not v. */
static int rope_rows_ok(const float *g, const char *hf, int heads) {
  enum { H = 64, D = 32 };
  int differs = 0;
  for (int r = 0; r < heads * D; r++) {
    int h = r / D, w = r % D, src = h * D + (w % 2) * (D / 2) + w / 2;
    for (int c = 0; c < H; c++) {
      if (g[r * H + c] != fx_tiny_value(hf, 7, (int64_t)src * H + c)) return 0;
      differs |= g[r * H + c] != fx_tiny_value(hf, 7, (int64_t)r * H + c);
    }
  }
  return differs; /* the permutation is not the identity */
}

TEST(gguf_arch_llama_q_k_rows_permuted_for_llama_cpp_rope) {
  paths p;
  CHECK(chain("ga_llperm", w_llama, "f32", "", &p) == 0);
  wisp_gguf *f = NULL;
  CHECKF(wisp_gguf_open(p.gg, &f) == WISP_OK, "%s", wisp_last_error());
  float *q = tensor_f32(f, "blk.1.attn_q.weight", 64, 128), *k = tensor_f32(f, "blk.1.attn_k.weight", 64, 64);
  float *v = tensor_f32(f, "blk.1.attn_v.weight", 64, 64), *rf = tensor_f32(f, "rope_freqs.weight", 16, 1);
  int ok = q && k && v && rf && rope_rows_ok(q, "model.layers.1.self_attn.q_proj.weight", 4) &&
           rope_rows_ok(k, "model.layers.1.self_attn.k_proj.weight", 2);
  for (int i = 0; ok && i < 64 * 64; i++) ok = v[i] == fx_tiny_value("model.layers.1.self_attn.v_proj.weight", 7, i);
  /* rope_freqs: llama3 divisors for theta 1e4, D 32, factor 8, low 1, high 4, original context 64 */
  int kinds[3] = {0};
  for (int i = 0; ok && i < 16; i++) {
    double wl = 2 * M_PI * pow(10000.0, 2.0 * i / 32), want = 1;
    if (wl > 64) want = 8;
    else if (wl >= 16) want = 1 / ((1 - (64 / wl - 1) / 3) / 8 + (64 / wl - 1) / 3);
    kinds[want == 1 ? 0 : want == 8 ? 2 : 1]++;
    ok = fabs(rf[i] - want) <= 1e-5 * want;
  }
  int64_t rot = 0;
  ok = ok && kinds[0] && kinds[1] && kinds[2] && wisp_gguf_get_int(f, "llama.rope.dimension_count", &rot) && rot == 32 &&
       !wisp_gguf_tensor_find(f, "blk.0.attn_q_norm.weight");
  free(q); free(k); free(v); free(rf);
  wisp_gguf_close(f);
  CHECK(ok);
}

/* qwen35 value heads: GGUF head j*NK + g is HF head g*(NV/NK) + j (NK 2, NV 4). */
static int vhead(int tiled) { return (tiled % 2) * 2 + tiled / 2; }

static double qv35(const char *fmt, int layer, int64_t i) {
  char n[160];
  snprintf(n, sizeof n, fmt, layer);
  return fx_qwen35_value(n, i);
}

#define L_QKV "model.layers.%d.linear_attn.in_proj_qkv.weight"
#define L_CONV "model.layers.%d.linear_attn.conv1d.weight"
#define L_Z "model.layers.%d.linear_attn.in_proj_z.weight"
#define L_OUT "model.layers.%d.linear_attn.out_proj.weight"
#define L_ALOG "model.layers.%d.linear_attn.A_log"
#define L_DT "model.layers.%d.linear_attn.dt_bias"

/* The linear layer 0: in_proj_qkv (q, k rows kept, value rows tiled), the
 * conv kernel likewise per channel, out_proj columns, A_log, dt_bias. */
static int qwen35_linear_ok(const wisp_gguf *f) {
  enum { H = 256, K = 32, LV = 64, C = 2 * K + LV, DV = 16, L = 4 };
  float *qkv = tensor_f32(f, "blk.0.attn_qkv.weight", H, C), *conv = tensor_f32(f, "blk.0.ssm_conv1d.weight", L, C);
  float *out = tensor_f32(f, "blk.0.ssm_out.weight", LV, H), *a = tensor_f32(f, "blk.0.ssm_a", 4, 1);
  float *dt = tensor_f32(f, "blk.0.ssm_dt.bias", 4, 1), *z = tensor_f32(f, "blk.0.attn_gate.weight", H, LV);
  int ok = qkv && conv && out && a && dt && z;
  for (int r = 0; ok && r < C; r++) {
    int src = r < 2 * K ? r : 2 * K + vhead((r - 2 * K) / DV) * DV + (r - 2 * K) % DV;
    for (int c = 0; ok && c < H; c++) ok = qkv[r * H + c] == (float)qv35(L_QKV, 0, (int64_t)src * H + c);
    for (int t = 0; ok && t < L; t++) ok = conv[r * L + t] == (float)qv35(L_CONV, 0, (int64_t)src * L + t);
  }
  for (int r = 0; ok && r < LV; r++)
    for (int c = 0; ok && c < H; c++)
      ok = z[r * H + c] == (float)qv35(L_Z, 0, (int64_t)(vhead(r / DV) * DV + r % DV) * H + c);
  for (int r = 0; ok && r < H; r++)
    for (int c = 0; ok && c < LV; c++)
      ok = out[r * LV + c] == (float)qv35(L_OUT, 0, (int64_t)r * LV + vhead(c / DV) * DV + c % DV);
  for (int h = 0; ok && h < 4; h++)
    ok = fabs(a[h] + exp(qv35(L_ALOG, 0, vhead(h)))) <= 1e-6 * fabs(a[h]) && dt[h] == (float)qv35(L_DT, 0, vhead(h));
  free(qkv); free(conv); free(out); free(a); free(dt); free(z);
  return ok;
}

/* Norms: Qwen3_5RMSNorm weights as 1 + w (f32), the gated norm plain; the
 * full layer's q rows keep HF's per-head [q | gate] order. */
static int qwen35_norms_ok(const wisp_gguf *f) {
  float *n0 = tensor_f32(f, "blk.0.attn_norm.weight", 256, 1), *p1 = tensor_f32(f, "blk.1.post_attention_norm.weight", 256, 1);
  float *qn = tensor_f32(f, "blk.1.attn_q_norm.weight", 16, 1), *sn = tensor_f32(f, "blk.0.ssm_norm.weight", 16, 1);
  float *on = tensor_f32(f, "output_norm.weight", 256, 1), *q = tensor_f32(f, "blk.1.attn_q.weight", 256, 128);
  int ok = n0 && p1 && qn && sn && on && q && !wisp_gguf_tensor_find(f, "output.weight");
  for (int i = 0; ok && i < 256; i++)
    ok = n0[i] == 1.0f + (float)qv35("model.layers.%d.input_layernorm.weight", 0, i) &&
         p1[i] == 1.0f + (float)qv35("model.layers.%d.post_attention_layernorm.weight", 1, i) &&
         on[i] == 1.0f + fx_qwen35_value("model.norm.weight", i);
  for (int i = 0; ok && i < 16; i++)
    ok = qn[i] == 1.0f + (float)qv35("model.layers.%d.self_attn.q_norm.weight", 1, i) &&
         sn[i] == (float)qv35("model.layers.%d.linear_attn.norm.weight", 0, i);
  for (int i = 0; ok && i < 128 * 256; i++) ok = q[i] == (float)qv35("model.layers.%d.self_attn.q_proj.weight", 1, i);
  free(n0); free(p1); free(qn); free(sn); free(on); free(q);
  return ok;
}

static int meta_is(const wisp_gguf *f, const char *key, int64_t want) {
  int64_t v;
  return wisp_gguf_get_int(f, key, &v) && v == want;
}

TEST(gguf_arch_qwen35_tensors_in_llama_cpp_layout) {
  paths p;
  CHECK(chain("ga_q35lay", w_qwen35, "f32", "", &p) == 0);
  wisp_gguf *f = NULL;
  CHECKF(wisp_gguf_open(p.gg, &f) == WISP_OK, "%s", wisp_last_error());
  const wisp_gguf_kv *sec = wisp_gguf_kv_find(f, "qwen35.rope.dimension_sections");
  int ok = qwen35_linear_ok(f) && qwen35_norms_ok(f) && meta_is(f, "qwen35.ssm.group_count", 2) &&
           meta_is(f, "qwen35.ssm.time_step_rank", 4) && meta_is(f, "qwen35.ssm.state_size", 16) &&
           meta_is(f, "qwen35.ssm.inner_size", 64) && meta_is(f, "qwen35.ssm.conv_kernel", 4) &&
           meta_is(f, "qwen35.full_attention_interval", 2) && meta_is(f, "qwen35.rope.dimension_count", 8) &&
           meta_is(f, "qwen35.attention.key_length", 16) && sec && sec->n == 4 && wisp_gguf_arr_int(sec, 0) == 2 &&
           wisp_gguf_arr_int(sec, 3) == 0;
  wisp_gguf_close(f);
  CHECK(ok);
}

/* ---- bad input ---- */

static int last_line_has(const char *log, const char *needle) {
  const char *last = log;
  size_t n = strlen(log);
  while (n > 0 && log[n - 1] == '\n') n--;
  for (size_t i = 0; i + 1 < n; i++)
    if (log[i] == '\n') last = log + i + 1;
  return !strncmp(last, "wisp convert: ", 14) && strstr(last, needle) && !memchr(last, '\n', (size_t)(log + n - last));
}

static void add_zeros(wisp_gguf_writer *w, const char *name, uint64_t ne0, uint64_t ne1) {
  static float zero[64 * 64];
  uint64_t ne[2] = {ne0, ne1};
  wisp_gguf_add_tensor(w, name, ne1 > 1 ? 2 : 1, ne, WISP_GGML_F32, zero, sizeof(float) * ne0 * ne1);
}

/* A one-layer llama (hidden 64, 2 heads of 32, FFN 32, vocab 8) of zeros,
 * with `drop` left out and `extra` added; converts it. 0 when it converted. */
static int convert_llama(const char *tag, const char *arch, const char *drop, const char *extra, char *log, size_t cap) {
  static const struct { const char *n; uint64_t a, b; } t[] = {
      {"token_embd.weight", 64, 8},      {"output_norm.weight", 64, 1},    {"blk.0.attn_norm.weight", 64, 1},
      {"blk.0.attn_q.weight", 64, 64},   {"blk.0.attn_k.weight", 64, 64}, {"blk.0.attn_v.weight", 64, 64},
      {"blk.0.attn_output.weight", 64, 64}, {"blk.0.ffn_norm.weight", 64, 1}, {"blk.0.ffn_gate.weight", 64, 32},
      {"blk.0.ffn_up.weight", 64, 32},   {"blk.0.ffn_down.weight", 32, 64}};
  wisp_gguf_writer *w = wisp_gguf_writer_new();
  char key[64], path[600], out[600], cmd[2048];
  wisp_gguf_put_str(w, "general.architecture", arch);
#define PUT(k, v) (snprintf(key, sizeof key, "%s.%s", arch, k), wisp_gguf_put_u32(w, key, v))
  PUT("block_count", 1);
  PUT("embedding_length", 64);
  PUT("attention.head_count", 2);
#undef PUT
  for (size_t i = 0; i < sizeof t / sizeof *t; i++)
    if (!drop || strcmp(drop, t[i].n)) add_zeros(w, t[i].n, t[i].a, t[i].b);
  if (extra) add_zeros(w, extra, 16, 1);
  snprintf(path, sizeof path, "%s/%s.gguf", test_tmpdir(), tag);
  snprintf(out, sizeof out, "%s/%s_out", test_tmpdir(), tag);
  wisp_status st = wisp_gguf_writer_write(w, path);
  wisp_gguf_writer_free(w);
  if (st) return snprintf(log, cap, "write failed"), -1;
  snprintf(cmd, sizeof cmd, "%s convert %s -o %s --quant f32 --quiet", test_wisp_bin(), path, out);
  int rc = test_run(cmd, log, cap);
  if (rc && wisp_path_exists(out)) return -2; /* a failure must leave nothing behind */
  return rc;
}

TEST(gguf_arch_bad_input_each_one_clear_line) {
  char log[4096];
  CHECKF(convert_llama("ga_ok", "llama", NULL, NULL, log, sizeof log) == 0, "%s", log);
  CHECKF(convert_llama("ga_arch", "gpt2", NULL, NULL, log, sizeof log) == 1 &&
             last_line_has(log, "GGUF architecture 'gpt2' is not supported"), "%s", log);
  CHECKF(convert_llama("ga_miss", "llama", "blk.0.attn_k.weight", NULL, log, sizeof log) == 1 &&
             last_line_has(log, "missing tensor 'blk.0.attn_k.weight'"), "%s", log);
  CHECKF(convert_llama("ga_norm", "llama", "output_norm.weight", NULL, log, sizeof log) == 1 &&
             last_line_has(log, "missing tensor 'output_norm.weight'"), "%s", log);
  CHECKF(convert_llama("ga_extra", "llama", NULL, "blk.0.attn_q_norm.weight", log, sizeof log) == 1 &&
             last_line_has(log, "tensor 'blk.0.attn_q_norm.weight' is not part of the Llama graph"), "%s", log);
  CHECKF(convert_llama("ga_freqs", "llama", NULL, "rope_freqs.weight", log, sizeof log) == 1 &&
             last_line_has(log, "rope_freqs.weight[0] is not a positive number"), "%s", log);
  CHECKF(convert_llama("ga_q35", "qwen35", NULL, NULL, log, sizeof log) == 1 &&
             last_line_has(log, "missing integer metadata 'qwen35.ssm.conv_kernel'"), "%s", log);
}

/* tokenizer.ggml.pre "qwen35" gets Qwen 3.5's split regex (words may hold
 * combining marks), which wisp's tokenizer compiles. */
TEST(gguf_arch_qwen35_pre_tokenizer_regex) {
  const char *tokens[4] = {"a", "b", "ab", "<|end|>"};
  int32_t types[4] = {1, 1, 1, 3};
  const char *merges[1] = {"a b"};
  wisp_gguf_writer *w = gguf_gpt2_vocab_writer("qwen35", tokens, types, 4, merges, 1);
  CHECK(w != NULL);
  char path[600], dir[600], tj[700];
  snprintf(path, sizeof path, "%s/q35tok.gguf", test_tmpdir());
  snprintf(dir, sizeof dir, "%s/q35tok", test_tmpdir());
  snprintf(tj, sizeof tj, "%s/tokenizer.json", dir);
  CHECK(wisp_gguf_writer_write(w, path) == WISP_OK);
  wisp_gguf_writer_free(w);
  CHECK(mkdir(dir, 0755) == 0);
  wisp_gguf *f = NULL;
  CHECKF(wisp_gguf_open(path, &f) == WISP_OK, "%s", wisp_last_error());
  int written = 0;
  wisp_status st = wisp_gguf_write_tokenizer(f, dir, &written);
  wisp_gguf_close(f);
  CHECKF(st == WISP_OK && written, "%s", wisp_last_error());
  char *text = NULL;
  CHECK(wisp_read_file(tj, &text, NULL) == WISP_OK);
  int has = strstr(text, "[\\\\p{L}\\\\p{M}]+") != NULL;
  free(text);
  CHECK(has);
  wisp_tokenizer *t = NULL;
  CHECKF(wisp_tokenizer_from_file(tj, &t) == WISP_OK, "%s", wisp_last_error());
  wisp_tokenizer_free(t);
}
