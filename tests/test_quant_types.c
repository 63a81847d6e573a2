/* F16 and Q8_0 matrices (tensor.h): quantizer round trips, the scalar and
 * AVX2 CPU kernels agreeing, `wisp convert --quant f16|q8_0` on the tiny
 * LFM2 checkpoint (st_fixture.h) giving logits close to the f32 artifact's
 * and running end to end, and the webgpu backend refusing both types with
 * one clear line. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backend/backend.h"
#include "backend/cpu/cpu_kernels.h"
#include "backend/webgpu/wgpu_backend.h"
#include "format/artifact.h"
#include "format/tensor.h"
#include "st_fixture.h"
#include "test.h"
#include "webgpu_fixture.h"
#include "wisp.h"

static void fill(float *w, size_t n, uint64_t seed) {
  for (size_t i = 0; i < n; i++) w[i] = test_rand_float(&seed) * (i % 7 == 0 ? 3.0f : 0.5f);
}

TEST(quant_f16_roundtrip) {
  /* values representable in binary16 come back exactly */
  enum { R = 3, C = 40 };
  float w[R * C], back[C];
  for (int i = 0; i < R * C; i++) w[i] = (float)(i - 60) * 0.125f + (i % 3 ? ldexpf(1.0f, -20) * 0 : 0);
  w[5] = 65504.0f;
  w[6] = -ldexpf(1.0f, -24); /* smallest subnormal */
  w[7] = ldexpf(1.0f, -14);  /* smallest normal */
  uint8_t q[R * C * 2];
  CHECK(wisp_f16_bytes(R, C) == sizeof q);
  wisp_quantize_f16(w, R, C, q);
  wisp_matrix m = {.type = WISP_W_F16, .rows = R, .cols = C, .q = q};
  for (int r = 0; r < R; r++) {
    wisp_matrix_row_f32(&m, r, back);
    for (int c = 0; c < C; c++) CHECKF(back[c] == w[r * C + c], "row %d col %d: %g vs %g", r, c, back[c], w[r * C + c]);
  }
  /* arbitrary values: relative error <= 2^-11 */
  float x[C];
  fill(x, C, 11);
  wisp_quantize_f16(x, 1, C, q);
  wisp_matrix_row_f32(&m, 0, back);
  for (int c = 0; c < C; c++) CHECK(fabsf(back[c] - x[c]) <= fabsf(x[c]) * ldexpf(1.0f, -11) + 1e-7f);
  CHECK(!strcmp(wisp_wtype_name(WISP_W_F16), "f16") && !strcmp(wisp_wtype_name(WISP_W_Q8_0), "q8_0"));
}

TEST(quant_q8_0_roundtrip) {
  enum { R = 5, C = 96 };
  float *w = malloc(sizeof(float) * R * C), back[C];
  fill(w, (size_t)R * C, 5);
  for (int c = 0; c < 32; c++) w[2 * C + c] = 0; /* an all-zero block */
  uint8_t *q = malloc(wisp_q8_0_bytes(R, C));
  CHECK(wisp_q8_0_bytes(R, C) == (size_t)R * 3 * 34);
  wisp_quantize_q8_0_rows(w, R, C, q);
  wisp_matrix m = {.type = WISP_W_Q8_0, .rows = R, .cols = C, .q = q};
  for (int r = 0; r < R; r++) {
    wisp_matrix_row_f32(&m, r, back);
    for (int b = 0; b < C / 32; b++) {
      const uint8_t *blk = q + ((size_t)r * (C / 32) + b) * 34;
      float d = wisp_f16_to_f32((uint16_t)(blk[0] | blk[1] << 8));
      float amax = 0;
      for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(w[r * C + b * 32 + i]));
      CHECK(fabsf(d - amax / 127) <= amax / 127 * ldexpf(1.0f, -10));
      for (int i = 0; i < 32; i++) {
        float err = fabsf(back[b * 32 + i] - w[r * C + b * 32 + i]);
        CHECKF(err <= d * 0.5f * 1.0001f + 1e-12f, "r %d b %d i %d: err %g d %g", r, b, i, err, d);
      }
    }
  }
  free(w);
  free(q);
}

TEST(quant_f16_q8_0_avx2_matches_scalar) {
  const wisp_cpu_kernels *fast = wisp_cpu_kernels_get(), *ref = wisp_cpu_kernels_scalar();
  if (!fast->avx2) SKIP("no AVX2+FMA+F16C on this CPU");
  const int R = 7, C = 8 * 37 + 5; /* f16 tail not a multiple of 8 */
  const int C8 = 320;
  float *w = malloc(sizeof(float) * R * C8), *x = malloc(sizeof(float) * C8);
  fill(w, (size_t)R * C8, 21);
  fill(x, (size_t)C8, 22);
  uint8_t *h = malloc(wisp_f16_bytes(R, C8)), *q = malloc(wisp_q8_0_bytes(R, C8));
  wisp_quantize_f16(w, R, C, h);
  wisp_quantize_q8_0_rows(w, R, C8, q);
  wisp_matrix mh = {.type = WISP_W_F16, .rows = R, .cols = C, .q = h};
  wisp_matrix mq = {.type = WISP_W_Q8_0, .rows = R, .cols = C8, .q = q};
  float a[320], b[320];
  for (int r = 0; r < R; r++) {
    float s = ref->dot_f16_row(&mh, r, x), f = fast->dot_f16_row(&mh, r, x);
    CHECKF(fabsf(s - f) <= 1e-4f * (1 + fabsf(s)), "f16 row %d: %g vs %g", r, s, f);
    s = ref->dot_q8_0_row(&mq, r, x), f = fast->dot_q8_0_row(&mq, r, x);
    CHECKF(fabsf(s - f) <= 1e-4f * (1 + fabsf(s)), "q8_0 row %d: %g vs %g", r, s, f);
    ref->row_f32(&mq, r, a);
    fast->row_f32(&mq, r, b);
    CHECK(!memcmp(a, b, sizeof(float) * C8));
    ref->row_f32(&mh, r, a);
    fast->row_f32(&mh, r, b);
    CHECK(!memcmp(a, b, sizeof(float) * C));
  }
  free(w);
  free(x);
  free(h);
  free(q);
}

/* Last-token logits of `tokens` from artifact dir (cpu backend). */
static int logits_of(const char *dir, const int32_t *tokens, int n, float *out, int *vocab) {
  wisp_model *m = NULL;
  wisp_session *s = NULL;
  if (wisp_model_open(dir, &m)) return 0;
  *vocab = wisp_model_vocab(m);
  wisp_session_options o = {.backend = "cpu", .threads = 2};
  int ok = wisp_session_new(m, &o, &s) == WISP_OK && wisp_session_eval(s, tokens, n, out) == WISP_OK;
  if (s) wisp_session_free(s);
  wisp_model_close(m);
  return ok;
}

TEST(quant_convert_f16_q8_0_tiny_lfm2) {
  char hf[600], art[3][700], cmd[4096], log[8192];
  snprintf(hf, sizeof hf, "%s/hf_quant_types", test_tmpdir());
  CHECK(mkdir(hf, 0755) == 0);
  fx_lfm2_opts o = {.untied = 1, .seed = 9};
  CHECK(fx_write_tiny_lfm2(hf, &o) == 0);
  const char *quants[3] = {"f32", "f16", "q8_0"};
  for (int k = 0; k < 3; k++) {
    snprintf(art[k], sizeof art[k], "%s/art_qt_%s", test_tmpdir(), quants[k]);
    snprintf(cmd, sizeof cmd, "%s convert %s -o %s --quant %s --quiet", test_wisp_bin(), hf, art[k], quants[k]);
    CHECKF(test_run(cmd, log, sizeof log) == 0, "%s: %s", quants[k], log);
  }
  const int32_t toks[5] = {1, 2, 3, 95, 40};
  float ref[96], got[96];
  int V = 0, V2 = 0;
  CHECKF(logits_of(art[0], toks, 5, ref, &V), "%s", wisp_last_error());
  CHECK(V == 96);
  float amax = 0;
  for (int i = 0; i < V; i++) amax = fmaxf(amax, fabsf(ref[i]));
  for (int k = 1; k < 3; k++) {
    CHECKF(logits_of(art[k], toks, 5, got, &V2), "%s: %s", quants[k], wisp_last_error());
    CHECK(V2 == V);
    /* relative L2 error of the logit vector <= 1e-2; also the largest
     * single deviation within 2e-2 of max|logit| (q8_0 measures ~1.03e-2). */
    float worst = 0;
    double e2 = 0, r2 = 0;
    for (int i = 0; i < V; i++) {
      worst = fmaxf(worst, fabsf(got[i] - ref[i]));
      e2 += (double)(got[i] - ref[i]) * (got[i] - ref[i]);
      r2 += (double)ref[i] * ref[i];
    }
    CHECKF(sqrt(e2 / r2) <= 1e-2, "%s: relative L2 error %g", quants[k], sqrt(e2 / r2));
    CHECKF(worst <= 2e-2f * amax, "%s: max |dlogit| %g vs max |logit| %g", quants[k], worst, amax);
    if (k == 1) CHECKF(worst <= 1e-3f * amax, "f16: max |dlogit| %g vs max |logit| %g", worst, amax);
    /* section kinds: every matrix, embed and head of the one type */
    wisp_artifact *a = NULL;
    CHECKF(wisp_artifact_open(art[k], &a) == WISP_OK, "%s", wisp_last_error());
    const char *kinds[3] = {"L0.mlp.down", "embed", "head"};
    for (int i = 0; i < 3; i++) {
      char name[64];
      snprintf(name, sizeof name, "%s.%s", kinds[i], quants[k]);
      CHECKF(wisp_artifact_section(a, name) != NULL, "missing %s", name);
    }
    CHECK(!wisp_artifact_section(a, "embed.quant") && !wisp_artifact_section(a, "L0.mlp.down.kquant"));
    wisp_artifact_free(a);
    /* the CLI end to end (the tiny model's vocabulary of 96 has no tokenizer
     * for `wisp run`; `wisp logits --greedy` runs prefill and the decode loop) */
    snprintf(cmd, sizeof cmd, "%s logits --backend cpu -m %s --tokens 1,2,3,95 --greedy 4", test_wisp_bin(), art[k]);
    CHECKF(test_run(cmd, log, sizeof log) == 0 && strstr(log, "\"greedy\": ["), "%s logits: %s", quants[k], log);
    /* export-gguf reads the new section kinds too */
    snprintf(cmd, sizeof cmd, "%s export-gguf %s -o %s.gguf", test_wisp_bin(), art[k], art[k]);
    CHECKF(test_run(cmd, log, sizeof log) == 0, "%s export-gguf: %s", quants[k], log);
  }
}

TEST(quant_webgpu_refuses_f16_q8_0_of_unfit_widths) {
  /* F16 and Q8_0 run on WebGPU (test_webgpu_backend.c); the shapes their
   * kernels cannot take are one-line errors at binding, not wrong results. */
  WEBGPU_OR_SKIP(d);
  wisp_wgpu_backend_opts o = {.device = d};
  wisp_backend *g = NULL;
  CHECKF(wisp_wgpu_backend_new(&o, &g) == WISP_OK, "%s", wisp_last_error());
  uint8_t bytes[64 * 34] = {0};
  wisp_matrix mh = {.type = WISP_W_F16, .rows = 8, .cols = 60, .q = bytes};
  wisp_matrix mq = {.type = WISP_W_Q8_0, .rows = 8, .cols = 48, .q = bytes};
  CHECK(g->prepare_matrix(g, &mh) != WISP_OK);
  CHECKF(strstr(wisp_last_error(), "f16 matrix of 60 columns"), "%s", wisp_last_error());
  CHECK(g->prepare_matrix(g, &mq) != WISP_OK);
  CHECKF(strstr(wisp_last_error(), "48 columns is not a whole number of 32-blocks"), "%s", wisp_last_error());
  g->destroy(g);
}

/* A large Q4_K matrix is quantized over several threads (tensor.c): the
 * same bytes as quantizing each row on its own, and every super-block
 * written (the odd row count leaves uneven thread shares). */
TEST(quant_q4k_threaded_matches_row_by_row) {
  const int rows = 1031, cols = 1024;
  const size_t row_bytes = wisp_q4k_bytes(1, cols);
  float *w = malloc(sizeof(float) * (size_t)rows * cols);
  uint8_t *all = malloc(row_bytes * rows), *one = malloc(row_bytes);
  CHECK(w && all && one);
  fill(w, (size_t)rows * cols, 17);
  memset(all, 0xA5, row_bytes * rows);
  wisp_quantize_q4k(w, rows, cols, all);
  int bad = -1;
  for (int r = 0; r < rows && bad < 0; r++) {
    wisp_quantize_q4k(w + (size_t)r * cols, 1, cols, one);
    if (memcmp(one, all + (size_t)r * row_bytes, row_bytes)) bad = r;
  }
  free(w);
  free(all);
  free(one);
  CHECKF(bad < 0, "row %d differs from quantizing it alone", bad);
}
