/* A GGUF whose fused sections mix tensor types, as llama.cpp's Q4_K_M
 * files do (Q4_K attn_q/attn_k beside a Q6_K attn_v): run in place, each
 * tensor keeps its stored type and bytes (a matrix in row parts,
 * format/tensor.h; docs/gguf.md), on the CPU and on WebGPU, in every
 * product path, against the dequantize-to-f32 reference of the same file
 * (`convert FILE.gguf --quant f32`): its sections, each backend's products
 * by each mixed matrix, the CLI (logits, plan, the keep artifact, export),
 * and in process the logits of every decode step and batched step.
 *
 * The file: the tiny Qwen 3.5 of test_qwen3_5.c (hidden 256: the K types'
 * blocks fit) exported as f32, then rewritten with attn_q, attn_k,
 * attn_gate and ffn_gate in Q4_K, attn_v in Q6_K, attn_qkv and ffn_up in
 * Q8_0 and ssm_beta / ssm_alpha left F32, so that q|k|v, gate|up and the
 * DeltaNet in_proj [qkv|z|b|a] each mix two or three types; and a tiny
 * Llama whose q / k parts (in llama.cpp's rope order) are copied back in
 * order in their own types. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backend/backend.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/webgpu/wgpu_backend.h"
#include "backend/webgpu/wgpu_products_i8.h"
#include "format/artifact.h"
#include "format/gguf.h"
#include "format/gguf_artifact.h"
#include "format/quant.h"
#include "format/tensor.h"
#include "gguf_copy.h"
#include "parity_compare.h"
#include "st_fixture.h"
#include "test.h"
#include "webgpu_fixture.h"
#include "util/err.h"
#include "wisp.h"

/* ---- the file ---- */

/* Q6_K blocks (format/qblocks.h) for rows x cols f32 values: per 16
 * values a scale s = max|x| / 31 quantized to an int8 against the block's
 * d = max s / 127, then q = round(x / (d * sc)) + 32 in 0..63. Layout:
 * ql[128] (low nibbles), qh[64] (high two bits), sc[16] (int8), d (f16). */
static void quantize_q6k(const float *w, int rows, int cols, uint8_t *out) {
  for (int r = 0; r < rows; r++)
    for (int b = 0; b < cols / 256; b++) {
      const float *x = w + (size_t)r * cols + (size_t)b * 256;
      uint8_t *blk = out + ((size_t)r * (cols / 256) + (size_t)b) * 210;
      memset(blk, 0, 210);
      float s[16], smax = 0;
      for (int i = 0; i < 16; i++) {
        float m = 0;
        for (int k = 0; k < 16; k++) m = fmaxf(m, fabsf(x[16 * i + k]));
        s[i] = m / 31.0f;
        smax = fmaxf(smax, s[i]);
      }
      const uint16_t dh = wisp_f32_to_f16(smax / 127.0f);
      const float d = wisp_f16_to_f32(dh);
      blk[208] = (uint8_t)dh, blk[209] = (uint8_t)(dh >> 8);
      for (int i = 0; i < 16; i++) {
        const int sc = d > 0 ? (int)lrintf(s[i] / d) : 0;
        blk[192 + i] = (uint8_t)(int8_t)(sc > 127 ? 127 : sc);
      }
      for (int e = 0; e < 256; e++) {
        const float step = d * (float)(int8_t)blk[192 + e / 16];
        int q = step != 0 ? (int)lrintf(x[e] / step) + 32 : 32;
        q = q < 0 ? 0 : q > 63 ? 63 : q;
        const int h = e / 128, k = e % 128 / 32, l = e % 32;
        uint8_t *lq = &blk[64 * h + 32 * (k & 1) + l];
        *lq |= (uint8_t)(k < 2 ? (q & 15) : (q & 15) << 4);
        blk[128 + 32 * h + l] |= (uint8_t)((q >> 4) << (2 * k));
      }
    }
}

/* The GGUF type this test gives a tensor (by its name's end); F32 to keep. */
static uint32_t mixed_type(const char *name) {
  static const struct { const char *end; uint32_t type; } k[] = {
      {"attn_q.weight", WISP_GGML_Q4_K},    {"attn_k.weight", WISP_GGML_Q4_K},  {"attn_gate.weight", WISP_GGML_Q4_K},
      {"ffn_gate.weight", WISP_GGML_Q4_K},  {"attn_v.weight", WISP_GGML_Q6_K},  {"attn_qkv.weight", WISP_GGML_Q8_0},
      {"ffn_up.weight", WISP_GGML_Q8_0}};
  const size_t n = strlen(name);
  for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
    const size_t m = strlen(k[i].end);
    if (n >= m && !strcmp(name + n - m, k[i].end)) return k[i].type;
  }
  return WISP_GGML_F32;
}

/* The tiny Llama (hidden 64: block-32 types only): q in Q8_0, k kept F32,
 * v in Q8_0, gate in Q4_0, up in Q8_0; q and k rows are in llama.cpp's rope
 * order, so those parts are copied back in order, each in its own type. */
static uint32_t llama_type(const char *name) {
  if (strstr(name, "attn_q.") || strstr(name, "attn_v.") || strstr(name, "ffn_up.")) return WISP_GGML_Q8_0;
  if (strstr(name, "ffn_gate.")) return WISP_GGML_Q4_0;
  return WISP_GGML_F32;
}

/* Q4_0 blocks (format/qblocks.h): d = max|x| / 7 as f16, q = round(x / d) + 8
 * in 0..15, element j in byte j's low nibble, j + 16 in its high one. */
static void quantize_q4_0(const float *w, int rows, int cols, uint8_t *out) {
  const size_t n = (size_t)rows * (size_t)cols;
  for (size_t b = 0; b < n / 32; b++) {
    const float *x = w + 32 * b;
    uint8_t *blk = out + 18 * b;
    float m = 0;
    for (int k = 0; k < 32; k++) m = fmaxf(m, fabsf(x[k]));
    const uint16_t dh = wisp_f32_to_f16(m / 7.0f);
    const float d = wisp_f16_to_f32(dh);
    blk[0] = (uint8_t)dh, blk[1] = (uint8_t)(dh >> 8);
    for (int k = 0; k < 16; k++) {
      int lo = d > 0 ? (int)lrintf(x[k] / d) + 8 : 8, hi = d > 0 ? (int)lrintf(x[k + 16] / d) + 8 : 8;
      lo = lo < 0 ? 0 : lo > 15 ? 15 : lo, hi = hi < 0 ? 0 : hi > 15 ? 15 : hi;
      blk[2 + k] = (uint8_t)(lo | hi << 4);
    }
  }
}

/* src (an f32 GGUF) rewritten as dst with the types type_of gives, tensors
 * in the same order. */
static int write_mixed(const char *src, const char *dst, uint32_t (*type_of)(const char *), char *err, size_t cap) {
  wisp_gguf *g = NULL;
  if (wisp_gguf_open(src, &g)) return snprintf(err, cap, "%s", wisp_last_error()), 0;
  wisp_gguf_writer *w = wisp_gguf_writer_new();
  int ok = w != NULL;
  for (uint64_t i = 0; ok && i < g->n_kv; i++)
    if (strcmp(g->kv[i].key, "general.alignment") && !gguf_copy_kv(w, &g->kv[i]))
      ok = 0, snprintf(err, cap, "metadata %s: type %u not copied", g->kv[i].key, g->kv[i].type);
  for (uint64_t i = 0; ok && i < g->n_tensors; i++) {
    const wisp_gguf_tensor *t = &g->tensors[i];
    const uint32_t type = t->n_dims == 2 ? type_of(t->name) : WISP_GGML_F32;
    const gguf_quantize_fn quantize = type == WISP_GGML_Q4_K   ? wisp_quantize_q4k
                                      : type == WISP_GGML_Q6_K ? quantize_q6k
                                      : type == WISP_GGML_Q8_0 ? wisp_quantize_q8_0_rows
                                      : type == WISP_GGML_Q4_0 ? quantize_q4_0
                                                               : NULL;
    ok = gguf_copy_tensor_as(w, g, t, type, quantize, err, cap);
  }
  if (ok && wisp_gguf_writer_write(w, dst)) ok = 0, snprintf(err, cap, "%s", wisp_last_error());
  wisp_gguf_writer_free(w);
  wisp_gguf_close(g);
  return ok;
}

/* The mixed file (made once a process), and its f32 reference directory. */
static const char *mixed_file(char *ref_dir, size_t cap) {
  static char gguf[600], ref[600];
  static int made = -1;
  if (made < 0) {
    char hf[600], dir[600], f32[600], cmd[4096], log[8192] = "";
    snprintf(hf, sizeof hf, "%s/gm_hf", test_tmpdir());
    snprintf(dir, sizeof dir, "%s/gm_dir", test_tmpdir());
    snprintf(f32, sizeof f32, "%s/gm_f32.gguf", test_tmpdir());
    snprintf(gguf, sizeof gguf, "%s/gm_mixed.gguf", test_tmpdir());
    snprintf(ref, sizeof ref, "%s/gm_ref", test_tmpdir());
    snprintf(cmd, sizeof cmd, "%s convert %s -o %s --quant f32 --quiet && %s export-gguf %s -o %s", test_wisp_bin(), hf,
             dir, test_wisp_bin(), dir, f32);
    made = mkdir(hf, 0755) == 0 && fx_write_tiny_qwen35(hf) == 0 && test_run(cmd, log, sizeof log) == 0 &&
           write_mixed(f32, gguf, mixed_type, log, sizeof log);
    if (made) {
      snprintf(cmd, sizeof cmd, "%s convert %s -o %s --quant f32 --quiet", test_wisp_bin(), gguf, ref);
      made = test_run(cmd, log, sizeof log) == 0;
    }
    if (!made) fprintf(stderr, "test_gguf_mixed: the mixed file was not made: %.2000s\n", log);
  }
  snprintf(ref_dir, cap, "%s", ref);
  return made ? gguf : NULL;
}

/* ---- the sections ---- */

/* Each mixed section is a matrix in row parts, every part in its tensors'
 * stored type; q|k|v and gate|up point into the file's mapping; nothing is
 * dequantized; what is built at open is the rope tables and the in_proj
 * parts whose rows llama.cpp's converter reordered (value heads), in their
 * own types. */
TEST(gguf_mixed_sections_keep_each_tensors_type_mapped) {
  char ref[600];
  const char *gguf = mixed_file(ref, sizeof ref);
  CHECK(gguf != NULL);
  wisp_artifact *a = NULL;
  CHECKF(wisp_artifact_open(gguf, &a) == WISP_OK, "%s", wisp_last_error());
  const uint8_t *lo = a->gguf->g->map, *hi = lo + a->gguf->g->len;
  static const struct { const char *name; int mapped; } want[] = {
      {"L1.attn.qkv@0.q4k", 1},      {"L1.attn.qkv@160.q6k", 1},    {"L0.mlp.gate_up@0.q4k", 1},
      {"L0.mlp.gate_up@256.q8_0", 1}, {"L1.mlp.gate_up@256.q8_0", 1}, {"L0.lin.in_proj@0.q8_0", 0},
      {"L0.lin.in_proj@128.q4k", 0},  {"L0.lin.in_proj@192.weight", 0}};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    const wisp_section *s = wisp_artifact_section(a, want[i].name);
    CHECKF(s != NULL, "%s: no section %s", gguf, want[i].name);
    const uint8_t *p = wisp_section_data(a, s);
    const int in = p >= lo && p + s->bytes <= hi;
    CHECKF(in == want[i].mapped && (strncmp(s->origin, "mapped", 6) == 0) == want[i].mapped, "%s: inside the mapping %d, "
           "origin '%s'", want[i].name, in, s->origin);
  }
  CHECKF(strstr(wisp_artifact_section(a, "L1.attn.qkv@160.q6k")->origin, "blk.1.attn_v.weight Q6_K") != NULL, "%s",
         wisp_artifact_section(a, "L1.attn.qkv@160.q6k")->origin);
  CHECK(wisp_artifact_section(a, "L1.attn.qkv.weight") == NULL && wisp_artifact_section(a, "L0.mlp.gate_up.weight") == NULL);
  /* nothing dequantized; what is owned is exactly the sections not mapped */
  size_t built = 0, quant = 0;
  for (int i = 0; i < a->n_sections; i++) {
    const wisp_section *s = &a->sections[i];
    CHECKF(!strstr(s->origin, "dequantized"), "%s: %s", s->name, s->origin);
    if (strncmp(s->origin, "mapped", 6)) built += s->bytes;
    /* an f32 matrix only from F32 tensors */
    const size_t n = strlen(s->name);
    CHECKF(n < 7 || strcmp(s->name + n - 7, ".weight") ||
               !(strstr(s->origin, "Q4_K") || strstr(s->origin, "Q6_K") || strstr(s->origin, "Q8_0")),
           "%s: an f32 section from quantized tensors (%s)", s->name, s->origin);
  }
  CHECKF(a->gguf->owned_bytes == built, "%zu bytes owned, %zu in the sections built at open", a->gguf->owned_bytes, built);
  /* every quantized q/k/v and gate/up tensor is counted as mapped */
  for (uint64_t i = 0; i < a->gguf->g->n_tensors; i++) {
    const wisp_gguf_tensor *t = &a->gguf->g->tensors[i];
    if (t->type != WISP_GGML_F32 && (strstr(t->name, "attn_q.") || strstr(t->name, "attn_k.") ||
                                     strstr(t->name, "attn_v.") || strstr(t->name, "ffn_")))
      quant += t->bytes;
  }
  CHECKF(quant > 0 && a->gguf->mapped_bytes >= quant, "%zu bytes mapped, the quantized q/k/v and ffn tensors hold %zu",
         a->gguf->mapped_bytes, quant);
  /* bound as a model binds it: parts of their own types, rows in order */
  wisp_matrix m;
  CHECKF(wisp_matrix_bind(a, "L1.attn.qkv", 192, 256, &m) == WISP_OK, "%s", wisp_last_error());
  CHECKF(m.type == WISP_W_PARTS && m.n_parts == 2 && m.parts[0].type == WISP_W_Q4K && m.parts[0].rows == 160 &&
             m.parts[1].type == WISP_W_Q6K && m.parts[1].rows == 32 && m.parts[1].out_row0 == 160 &&
             m.parts[1].out_rows == 192,
         "L1.attn.qkv bound as type %d with %d parts", m.type, m.n_parts);
  CHECKF(wisp_matrix_bytes(&m) == 160 * 144 + 32 * 210, "%llu bytes", (unsigned long long)wisp_matrix_bytes(&m));
  /* rows past the parts: one line naming the part missing */
  CHECK(wisp_matrix_bind(a, "L1.attn.qkv", 200, 256, &m) != WISP_OK);
  CHECKF(strstr(wisp_last_error(), "no section 'L1.attn.qkv@192.*'") != NULL, "%s", wisp_last_error());
  wisp_artifact_free(a);
}

/* ---- the products, on each backend ---- */

/* The worst error of y = W x (n tokens, or n rows through matmul_rows;
 * accumulate adds into y = 1) against double sums of the dequantized
 * rows, over sum |w x|. */
static double product_error(wisp_backend *be, const wisp_matrix *W, const float *x, int n, int rows_op, int acc) {
  const int R = W->rows, C = W->cols;
  wisp_buf *bx = be->buf_new(be, (size_t)n * C), *by = be->buf_new(be, (size_t)n * R);
  float *y = malloc(sizeof(float) * (size_t)n * R), *w = malloc(sizeof(float) * (size_t)C);
  if (!bx || !by || !y || !w) return INFINITY;
  for (int i = 0; i < n * R; i++) y[i] = acc ? 1.0f : 0.0f;
  be->buf_write(be, bx, 0, (size_t)n * C, x);
  be->buf_write(be, by, 0, (size_t)n * R, y);
  if (rows_op) be->matmul_rows(be, W, bx, n, by, acc);
  else be->matmul(be, W, bx, 0, n, by, acc);
  be->buf_read(be, by, 0, (size_t)n * R, y);
  double worst = be->sync(be) == WISP_OK ? 0 : INFINITY;
  for (int r = 0; r < R; r++) {
    wisp_matrix_row_f32(W, r, w);
    for (int t = 0; t < n; t++) {
      double s = acc, mag = 1e-30;
      for (int c = 0; c < C; c++) s += (double)w[c] * x[(size_t)t * C + c], mag += fabs((double)w[c] * x[(size_t)t * C + c]);
      const double e = fabs(y[(size_t)t * R + r] - s) / mag;
      if (!(e <= worst)) worst = e; /* NaN counts as the worst */
    }
  }
  be->buf_free(be, bx), be->buf_free(be, by);
  free(y), free(w);
  return worst;
}

/* The graph's rmsnorm+matmul by W as the backend's fused op (one token:
 * matmul_fused, else rmsnorm_matmul):
 * the worst error of y over sum |w x'| and of the normalized x' it writes,
 * against double sums (x' = x / rms(x) * nw). */
static double fused_norm_error(wisp_backend *be, const wisp_matrix *W, const float *x) {
  const int R = W->rows, C = W->cols;
  float *nw = malloc(sizeof(float) * (size_t)C), *xn = malloc(sizeof(float) * (size_t)C);
  float *y = malloc(sizeof(float) * (size_t)R), *w = malloc(sizeof(float) * (size_t)C);
  double *want = malloc(sizeof(double) * (size_t)C), ss = 0, worst = 0;
  wisp_buf *bx = be->buf_new(be, (size_t)C), *bxn = be->buf_new(be, (size_t)C), *by = be->buf_new(be, (size_t)R);
  if (!nw || !xn || !y || !w || !want || !bx || !bxn || !by) return INFINITY;
  for (int c = 0; c < C; c++) nw[c] = 0.5f + 0.1f * (float)(c % 7), ss += (double)x[c] * x[c];
  const float eps = 1e-6f;
  for (int c = 0; c < C; c++) want[c] = x[c] / sqrt(ss / C + eps) * nw[c];
  wisp_vector v = {C, nw, NULL};
  if (be->prepare_vector(be, &v)) return INFINITY;
  be->buf_write(be, bx, 0, (size_t)C, x);
  wisp_fused_matmul f = {.pre = WISP_PRE_RMSNORM, .pre_in = bx, .pre_dim = C, .norm = &v, .eps = eps, .W = W,
                         .x = bxn, .y = by};
  if (be->matmul_fused) be->matmul_fused(be, &f);
  else be->rmsnorm_matmul(be, bx, &v, eps, 1, bxn, W, by, 0);
  be->buf_read(be, by, 0, (size_t)R, y);
  be->buf_read(be, bxn, 0, (size_t)C, xn);
  if (be->sync(be) != WISP_OK) worst = INFINITY;
  for (int c = 0; c < C; c++) {
    const double e = fabs(xn[c] - want[c]) / (fabs(want[c]) + 1e-3);
    if (!(e <= worst)) worst = e;
  }
  for (int r = 0; r < R; r++) {
    wisp_matrix_row_f32(W, r, w);
    double s = 0, mag = 1e-30;
    for (int c = 0; c < C; c++) s += (double)w[c] * want[c], mag += fabs((double)w[c] * want[c]);
    const double e = fabs(y[r] - s) / mag;
    if (!(e <= worst)) worst = e;
  }
  be->buf_free(be, bx), be->buf_free(be, bxn), be->buf_free(be, by);
  free(nw), free(xn), free(y), free(w), free(want);
  return worst;
}

/* Each part with the variant `fmt` names for its type (a printf format of
 * the type's name) for both phases: the CPU's "%s_scalar", "%s_i8" (f32
 * parts have the one kernel "f32"), WebGPU's int8 prefill "wgsl_tiled_%s_i8"
 * (Q4_K and Q8_0 parts; the others keep the default); "" the defaults. */
static void choose(wisp_matrix *m, const char *fmt) {
  const int gpu = !strncmp(fmt, "wgsl", 4);
  for (int i = 0; i < m->n_parts; i++)
    for (int ph = 0; ph < 2; ph++) {
      wisp_kernel_choice *c = &m->parts[i].choice[ph];
      const wisp_wtype t = m->parts[i].type;
      memset(c, 0, sizeof *c);
      if (!*fmt || (gpu && t != WISP_W_Q4K && t != WISP_W_Q8_0)) continue;
      if (t == WISP_W_F32) snprintf(c->variant, sizeof c->variant, "f32");
      else snprintf(c->variant, sizeof c->variant, fmt, wisp_wtype_name(t));
    }
}

static void check_products(wisp_backend *be, const char *what, const char *kind, double tol) {
  /* kind: a variant format for choose() */
  char ref[600];
  const char *gguf = mixed_file(ref, sizeof ref);
  CHECK(gguf != NULL);
  wisp_artifact *a = NULL;
  CHECKF(wisp_artifact_open(gguf, &a) == WISP_OK, "%s", wisp_last_error());
  static const struct { const char *name; int rows; } mats[] = {{"L1.attn.qkv", 192}, {"L0.lin.in_proj", 200},
                                                                 {"L0.mlp.gate_up", 512}};
  const int N = 5, C = 256;
  float *x = malloc(sizeof(float) * (size_t)N * C);
  CHECK(x);
  uint64_t seed = 31;
  for (int i = 0; i < N * C; i++) x[i] = test_rand_float(&seed);
  for (size_t k = 0; k < sizeof mats / sizeof mats[0] && !test_failed_now(); k++) {
    wisp_matrix m;
    CHECKF(wisp_matrix_bind(a, mats[k].name, mats[k].rows, C, &m) == WISP_OK, "%s", wisp_last_error());
    /* the backend's own copy of the parts (as a session's bound graph has) */
    wisp_matrix parts[WISP_MATRIX_MAX_PARTS];
    memcpy(parts, m.parts, sizeof *parts * (size_t)m.n_parts);
    m.parts = parts;
    choose(&m, kind);
    CHECKF(be->prepare_matrix(be, &m) == WISP_OK, "%s %s: %s", what, mats[k].name, wisp_last_error());
    const double e1 = product_error(be, &m, x, 1, 0, 0), en = product_error(be, &m, x, N, 0, 0);
    const double ea = product_error(be, &m, x, N, 0, 1), er = product_error(be, &m, x, 3, 1, 0);
    CHECKF(e1 < tol && en < tol && ea < tol && er < tol,
           "%s %s (%s): one token %g, %d tokens %g, accumulated %g, rows %g (tolerance %g)", what, mats[k].name,
           *kind ? kind : "default kernels", e1, N, en, ea, er, tol);
    if ((be->matmul_fused || be->rmsnorm_matmul) && !*kind) { /* WebGPU: the norm inside the first part's product */
      const double ef = fused_norm_error(be, &m, x);
      CHECKF(ef < 1e-4, "%s %s: rmsnorm+matmul %g", what, mats[k].name, ef);
    }
  }
  free(x);
  wisp_artifact_free(a);
}

/* One token, a prefill's tokens, a residual product and a batched step's
 * rows by each mixed matrix: every part's output lands in its rows. */
TEST(gguf_mixed_products_cpu) {
  wisp_backend *be = NULL;
  CHECK(wisp_cpu_backend_new(2, &be) == WISP_OK);
  check_products(be, "cpu", "", 1e-5);
  check_products(be, "cpu", "%s_scalar", 1e-5);
  if (wisp_cpu_kernels_get()->avx2) check_products(be, "cpu", "%s_i8", 2e-2); /* activations rounded to int8 */
  be->destroy(be);
}

/* The plain kernels, the subgroup ones, and each part split again into
 * bindings of a few rows (a binding limit of 8 KiB): a binding's rows land
 * at its part's place plus its own. */
TEST(webgpu_gguf_mixed_products) {
  WEBGPU_OR_SKIP(d);
  static const char *const names[3] = {"webgpu (plain)", "webgpu (subgroups)", "webgpu (8 KiB bindings)"};
  for (int pass = 0; pass < 3 && !test_failed_now(); pass++) {
    wisp_wgpu_backend_opts opts = {.device = d, .subgroups = pass ? -1 : 0, .max_binding = pass == 2 ? 8192 : 0};
    wisp_backend *g = NULL;
    CHECKF(wisp_wgpu_backend_new(&opts, &g) == WISP_OK, "%s", wisp_last_error());
    check_products(g, names[pass], "", 1e-5);
    uint64_t before, after, quantized;
    wisp_wgpu_mm8_counts(g, &before, &quantized);
    check_products(g, names[pass], "wgsl_tiled_%s_i8", 2e-2); /* prefill: activations rounded to int8 */
    wisp_wgpu_mm8_counts(g, &after, &quantized);
    CHECKF(after > before, "%s: no int8 product ran (%llu)", names[pass], (unsigned long long)after);
    g->destroy(g);
  }
}

/* ---- the model ---- */


/* The file's logits and greedy tokens against its dequantized f32
 * reference; `wisp plan` shows a kernel a part and the persistent decode
 * off and each part's section, type and that it is mapped; the artifact
 * `convert --quant keep` writes keeps the parts and gives the file's very
 * logits (the integer products of the throughput profile too), and
 * export-gguf writes its parts back as their tensors. */
TEST(gguf_mixed_runs_as_its_f32_reference_cpu) {
  char ref[600], got[700], want[700], keep[700], cmd[4096], log[16384], msg[2048];
  const char *gguf = mixed_file(ref, sizeof ref);
  CHECK(gguf != NULL);
  snprintf(want, sizeof want, "%s/gm_ref.json", test_tmpdir());
  snprintf(got, sizeof got, "%s/gm_got.json", test_tmpdir());
  CHECKF(gguf_logits_json(ref, "cpu", "", want, log, sizeof log) == 0, "%s", log);
  CHECKF(gguf_logits_json(gguf, "cpu", "", got, log, sizeof log) == 0, "%s", log);
  CHECKF(parity_compare_files(want, got, 1e-4, msg, sizeof msg), "mixed file vs its f32 reference: %s", msg);
  snprintf(cmd, sizeof cmd, "%s plan -m %s --backend webgpu 2>&1", test_wisp_bin(), gguf);
  CHECKF(test_run(cmd, log, sizeof log) == 0, "%s", log);
  CHECKF(strstr(log, "part rows 0-159 q4k") && strstr(log, "part rows 160-191 q6k") &&
             strstr(log, "part rows 256-511 q8_0") && strstr(log, "L1.attn.qkv@160.q6k") &&
             strstr(log, "mapped: blk.1.attn_v.weight Q6_K") &&
             strstr(log, "in row parts of different types"),
         "wisp plan: %.3000s", log);
  snprintf(keep, sizeof keep, "%s/gm_keep", test_tmpdir());
  snprintf(cmd, sizeof cmd, "%s convert %s -o %s --quiet --force", test_wisp_bin(), gguf, keep);
  CHECKF(test_run(cmd, log, sizeof log) == 0, "%s", log);
  wisp_artifact *a = NULL;
  CHECKF(wisp_artifact_open(keep, &a) == WISP_OK, "%s", wisp_last_error());
  const int parted = wisp_artifact_section(a, "L1.attn.qkv@160.q6k") != NULL;
  wisp_artifact_free(a);
  CHECKF(parted, "%s: no section L1.attn.qkv@160.q6k", keep);
  /* and export-gguf writes each part back as its tensors, in their types:
   * the very file's logits again */
  char back[700], gc[700], ga0[700];
  snprintf(back, sizeof back, "%s/gm_back.gguf", test_tmpdir());
  snprintf(cmd, sizeof cmd, "%s export-gguf %s -o %s", test_wisp_bin(), keep, back);
  CHECKF(test_run(cmd, log, sizeof log) == 0, "%s", log);
  snprintf(gc, sizeof gc, "%s/gm_back.json", test_tmpdir());
  snprintf(ga0, sizeof ga0, "%s/gm_file.json", test_tmpdir());
  CHECKF(gguf_logits_json(back, "cpu", "", gc, log, sizeof log) == 0, "%s", log);
  CHECKF(gguf_logits_json(gguf, "cpu", "", ga0, log, sizeof log) == 0, "%s", log);
  CHECKF(parity_compare_files(ga0, gc, 0, msg, sizeof msg), "the file vs its export's round trip: %s", msg);
  wisp_gguf *g = NULL;
  CHECKF(wisp_gguf_open(back, &g) == WISP_OK, "%s", wisp_last_error());
  const wisp_gguf_tensor *v = wisp_gguf_tensor_find(g, "blk.1.attn_v.weight");
  const int q6 = v && v->type == WISP_GGML_Q6_K;
  wisp_gguf_close(g);
  CHECKF(q6, "%s: blk.1.attn_v.weight is not Q6_K", back);
  for (int p = 0; p < 2; p++) {
    const char *extra = p ? "--profile throughput" : "";
    char ga[700], gb[700];
    snprintf(ga, sizeof ga, "%s/gm_file%d.json", test_tmpdir(), p);
    snprintf(gb, sizeof gb, "%s/gm_keep%d.json", test_tmpdir(), p);
    CHECKF(gguf_logits_json(gguf, "cpu", extra, ga, log, sizeof log) == 0, "%s", log);
    CHECKF(gguf_logits_json(keep, "cpu", extra, gb, log, sizeof log) == 0, "%s", log);
    CHECKF(parity_compare_files(ga, gb, 0, msg, sizeof msg), "%s: the file vs its keep artifact: %s", extra, msg);
  }
  /* the throughput profile's integer products, part by part, stay near the
   * reference (its logits; the int8 rounding may turn a greedy token) */
  snprintf(got, sizeof got, "%s/gm_file1.json", test_tmpdir());
  const int near = parity_compare_files(want, got, 1e-2, msg, sizeof msg);
  CHECKF(near || (!strstr(msg, "prompt") && !strstr(msg, "missing")), "throughput vs the f32 reference: %s", msg);
}

/* The same on WebGPU (lavapipe here): op by op, and through the decode
 * loop (where the persistent decode would run: the plan turns it off). */
TEST(webgpu_gguf_mixed_runs_as_its_f32_reference) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  char ref[600], got[700], want[700], log[16384], msg[2048];
  const char *gguf = mixed_file(ref, sizeof ref);
  CHECK(gguf != NULL);
  snprintf(want, sizeof want, "%s/gm_ref.json", test_tmpdir());
  CHECKF(gguf_logits_json(ref, "cpu", "", want, log, sizeof log) == 0, "%s", log);
  for (int loop = 0; loop < 2; loop++) {
    snprintf(got, sizeof got, "%s/gm_gpu%d.json", test_tmpdir(), loop);
    CHECKF(gguf_logits_json(gguf, "webgpu", loop ? "--decode-loop" : "", got, log, sizeof log) == 0, "%s", log);
    CHECKF(parity_compare_files(want, got, 1e-4, msg, sizeof msg), "webgpu%s vs the f32 reference: %s",
           loop ? " (decode loop)" : "", msg);
  }
}

/* A Llama file whose q and k rows llama.cpp's converter put in its rope
 * order: the q part (Q8_0), the k part (F32) and the v part (Q8_0) run as
 * stored (adjacent rope pairs), each mapped in its own type, as gate|up
 * (Q4_0 | Q8_0); the logits and greedy tokens of its f32 reference (which
 * convert put back in Hugging Face's order, rotate-half pairs). */
TEST(gguf_mixed_llama_rope_order_parts) {
  char hf[600], dir[600], f32[600], gguf[600], ref[600], want[700], got[700], cmd[4096], log[16384], msg[2048];
  snprintf(hf, sizeof hf, "%s/gml_hf", test_tmpdir());
  snprintf(dir, sizeof dir, "%s/gml_dir", test_tmpdir());
  snprintf(f32, sizeof f32, "%s/gml_f32.gguf", test_tmpdir());
  snprintf(gguf, sizeof gguf, "%s/gml_mixed.gguf", test_tmpdir());
  snprintf(ref, sizeof ref, "%s/gml_ref", test_tmpdir());
  CHECK(mkdir(hf, 0755) == 0 && fx_write_tiny_qwen3(hf, 1) == 0);
  snprintf(cmd, sizeof cmd, "%s convert %s -o %s --quant f32 --quiet && %s export-gguf %s -o %s", test_wisp_bin(), hf,
           dir, test_wisp_bin(), dir, f32);
  CHECKF(test_run(cmd, log, sizeof log) == 0, "%s", log);
  CHECKF(write_mixed(f32, gguf, llama_type, log, sizeof log), "%s", log);
  snprintf(cmd, sizeof cmd, "%s convert %s -o %s --quant f32 --quiet", test_wisp_bin(), gguf, ref);
  CHECKF(test_run(cmd, log, sizeof log) == 0, "%s", log);
  wisp_artifact *a = NULL;
  CHECKF(wisp_artifact_open(gguf, &a) == WISP_OK, "%s", wisp_last_error());
  static const struct { const char *name, *origin; } want_sec[] = {
      {"L0.attn.qkv@0.q8_0", "mapped"}, {"L0.attn.qkv@128.weight", "mapped"}, {"L0.attn.qkv@192.q8_0", "mapped"},
      {"L1.mlp.gate_up@0.q4_0", "mapped"}, {"L1.mlp.gate_up@96.q8_0", "mapped"}};
  for (size_t i = 0; i < sizeof want_sec / sizeof want_sec[0]; i++) {
    const wisp_section *sec = wisp_artifact_section(a, want_sec[i].name);
    CHECKF(sec && !strncmp(sec->origin, want_sec[i].origin, strlen(want_sec[i].origin)), "%s: %s", want_sec[i].name,
           sec ? sec->origin : "no such section");
  }
  wisp_artifact_free(a);
  snprintf(want, sizeof want, "%s/gml_ref.json", test_tmpdir());
  snprintf(got, sizeof got, "%s/gml_got.json", test_tmpdir());
  CHECKF(gguf_logits_json(ref, "cpu", "", want, log, sizeof log) == 0, "%s", log);
  CHECKF(gguf_logits_json(gguf, "cpu", "", got, log, sizeof log) == 0, "%s", log);
  CHECKF(parity_compare_files(want, got, 1e-4, msg, sizeof msg), "mixed llama file vs its f32 reference: %s", msg);
}

/* ---- token by token and several sequences a step, in process ---- */

/* The worst |a - b| over max |b| of n values. */
static double rel_diff(const float *a, const float *b, size_t n) {
  double d = 0, m = 1e-30;
  for (size_t i = 0; i < n; i++) d = fmax(d, fabs((double)a[i] - b[i])), m = fmax(m, fabs((double)b[i]));
  return isfinite(d) ? d / m : INFINITY;
}

/* The mixed file on `backend` against its f32 reference on the CPU, two
 * sequences: slot 0's prompt, then one token at a time (a decode step: on
 * WebGPU the graph's fused ops), then steps of both slots together (each
 * product over the rows of a batched step); the logits of every step. */
static void check_steps(const char *backend) {
  char ref[600];
  const char *gguf = mixed_file(ref, sizeof ref);
  CHECK(gguf != NULL);
  wisp_model *mm = NULL, *mr = NULL;
  wisp_session *sm = NULL, *sr = NULL;
  CHECKF(wisp_model_open(gguf, &mm) == WISP_OK && wisp_model_open(ref, &mr) == WISP_OK, "%s", wisp_last_error());
  wisp_session_options o = {.backend = backend, .threads = 2, .max_context = 64, .slots = 2};
  wisp_session_options orf = {.backend = "cpu", .threads = 2, .max_context = 64, .slots = 2};
  CHECKF(wisp_session_new(mm, &o, &sm) == WISP_OK && wisp_session_new(mr, &orf, &sr) == WISP_OK, "%s",
         wisp_last_error());
  const int V = wisp_model_vocab(mm);
  float *a = malloc(sizeof(float) * 2 * (size_t)V), *b = malloc(sizeof(float) * 2 * (size_t)V);
  CHECK(a && b);
  const int32_t prompt[7] = {1, 5, 9, 3, 7, 11, 2}, other[4] = {4, 8, 15, 16};
  CHECK(wisp_slot_eval(sm, 0, prompt, 7, a) == WISP_OK && wisp_slot_eval(sr, 0, prompt, 7, b) == WISP_OK);
  CHECKF(rel_diff(a, b, (size_t)V) < 1e-4, "%s: the prompt's logits differ by %g", backend, rel_diff(a, b, (size_t)V));
  for (int t = 0; t < 6 && !test_failed_now(); t++) {
    const int32_t tok = (int32_t)(20 + 7 * t);
    CHECK(wisp_slot_eval(sm, 0, &tok, 1, a) == WISP_OK && wisp_slot_eval(sr, 0, &tok, 1, b) == WISP_OK);
    CHECKF(rel_diff(a, b, (size_t)V) < 1e-4, "%s: decode step %d: logits differ by %g", backend, t,
           rel_diff(a, b, (size_t)V));
  }
  CHECK(wisp_slot_eval(sm, 1, other, 4, NULL) == WISP_OK && wisp_slot_eval(sr, 1, other, 4, NULL) == WISP_OK);
  const int slots[2] = {0, 1};
  int32_t toks[2] = {33, 42}, nm[2], nr[2];
  for (int t = 0; t < 4 && !test_failed_now(); t++) {
    CHECK(wisp_session_step(sm, slots, toks, 2, NULL, nm, a) == WISP_OK &&
          wisp_session_step(sr, slots, toks, 2, NULL, nr, b) == WISP_OK);
    CHECKF(rel_diff(a, b, 2 * (size_t)V) < 1e-4 && nm[0] == nr[0] && nm[1] == nr[1],
           "%s: batched step %d: logits differ by %g, tokens %d %d vs %d %d", backend, t,
           rel_diff(a, b, 2 * (size_t)V), nm[0], nm[1], nr[0], nr[1]);
    toks[0] = nr[0], toks[1] = nr[1];
  }
  free(a), free(b);
  wisp_session_free(sm), wisp_session_free(sr);
  wisp_model_close(mm), wisp_model_close(mr);
}

TEST(gguf_mixed_steps_cpu) { check_steps("cpu"); }

TEST(webgpu_gguf_mixed_steps) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  check_steps("webgpu");
}
