/* The quant-type table (format/quant.h): every type's bytes against its
 * layout written out by hand, binding an artifact's sections of every type,
 * and bench's weight bytes per decoded token equal to the bytes the
 * artifact's matrices really occupy, on a Q4_K artifact (Q4_K super-blocks
 * beside Q4 fallbacks). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/engine.h"
#include "format/artifact.h"
#include "format/gguf.h"
#include "format/quant.h"
#include "format/tensor.h"
#include "st_fixture.h"
#include "test.h"
#include "wisp.h"

TEST(quant_table_bytes_match_the_layouts) {
  /* rows x cols = 3 x 512: 1536 elements, 48 blocks of 32, 6 super-blocks of 256 */
  const int R = 3, C = 512;
  struct { wisp_wtype t; uint64_t bytes; int block; } want[] = {
      {WISP_W_F32, 1536 * 4, 1},
      {WISP_W_F16, 1536 * 2, 1},
      {WISP_W_Q8_0, 48 * 34, 32},       /* f16 d + 32 int8 */
      {WISP_W_Q4, 768 + 48 * 4, 32},    /* nibbles + one f32 scale per block */
      {WISP_W_Q4Z, 768 + 48 * 4 + 24, 32}, /* + a 4-bit zero point per block */
      {WISP_W_Q4K, 6 * 144, 256},        /* 144-byte super-blocks */
      {WISP_W_Q6K, 6 * 210, 256},        /* ql[128] qh[64] scales[16] f16 d */
      {WISP_W_Q5K, 6 * 176, 256},        /* f16 d, dmin, scales[12] qh[32] qs[128] */
      {WISP_W_Q3K, 6 * 110, 256},        /* hmask[32] qs[64] scales[12] f16 d */
      {WISP_W_Q2K, 6 * 84, 256},         /* scales[16] qs[64] f16 d, dmin */
      {WISP_W_Q4_0, 48 * 18, 32},        /* f16 d + 16 bytes of nibbles */
      {WISP_W_Q4_1, 48 * 20, 32},        /* f16 d, m + nibbles */
      {WISP_W_Q5_0, 48 * 22, 32},        /* f16 d, 4 bytes of fifth bits, nibbles */
      {WISP_W_Q5_1, 48 * 24, 32},        /* f16 d, m, fifth bits, nibbles */
      {WISP_W_BF16, 1536 * 2, 1},
  };
  int n = 0;
  wisp_quant_table(&n);
  CHECK(n == (int)(sizeof want / sizeof want[0]));
  for (int i = 0; i < n; i++) {
    const wisp_quant_traits *q = wisp_quant_traits_of(want[i].t);
    CHECK(q && q->type == want[i].t);
    CHECKF(wisp_quant_bytes(want[i].t, R, C) == want[i].bytes, "%s: %llu bytes, want %llu", q->name,
           (unsigned long long)wisp_quant_bytes(want[i].t, R, C), (unsigned long long)want[i].bytes);
    CHECKF(q->block == want[i].block, "%s: block %d", q->name, q->block);
    CHECK(q->dequant_row && q->weight_dtype && q->n_planes >= 1);
  }
  /* every CPU kernel reads the types of its registry weightDtype */
  CHECK(!strcmp(wisp_quant_of_cpu_kernel("q4k_avx2")->weight_dtype, "q4k"));
  CHECK(!strcmp(wisp_quant_of_cpu_kernel("q4_scalar")->weight_dtype, "q4"));
  CHECK(!strcmp(wisp_quant_of_cpu_kernel("q8_0_scalar")->weight_dtype, "q8_0"));
  CHECK(!strcmp(wisp_quant_of_cpu_kernel("q6k_avx2")->weight_dtype, "q6k"));
  CHECK(!strcmp(wisp_quant_of_cpu_kernel("bf16_scalar")->weight_dtype, "bf16"));
  CHECK(wisp_quant_of_cpu_kernel("nonexistent") == NULL);
}

/* Sum of the sizes of the artifact's sections BASE.<suffix> for the
 * suffixes matrices are stored under (docs/artifact.md). */
static uint64_t stored_bytes(const wisp_artifact *a, const char *base) {
  static const char *const suffixes[] = {"weight", "f16", "q8_0", "q4k", "quant", "scales", "zero_points",
                                         "q6k", "q5k", "q3k", "q2k", "q4_0", "q4_1", "q5_0", "q5_1", "bf16"};
  uint64_t total = 0;
  for (size_t i = 0; i < sizeof suffixes / sizeof suffixes[0]; i++) {
    char name[300];
    snprintf(name, sizeof name, "%s.%s", base, suffixes[i]);
    const wisp_section *s = wisp_artifact_section(a, name);
    if (s) total += s->bytes;
  }
  return total;
}

TEST(quant_decode_weight_bytes_are_the_stored_bytes_q4k) {
  char hf[600], art[600], cmd[2048];
  static char log[1 << 14];
  snprintf(hf, sizeof hf, "%s/qtab_hf", test_tmpdir());
  snprintf(art, sizeof art, "%s/qtab_q4k", test_tmpdir());
  CHECK(mkdir(hf, 0755) == 0);
  CHECK(fx_write_tiny_qwen35(hf) == 0);
  snprintf(cmd, sizeof cmd, "%s convert %s -o %s --quant q4k --quiet", test_wisp_bin(), hf, art);
  CHECKF(test_run(cmd, log, sizeof log) == 0, "%s", log);

  wisp_model *m = NULL;
  wisp_session *s = NULL;
  CHECKF(wisp_model_open(art, &m) == WISP_OK, "%s", wisp_last_error());
  wisp_session_options so = {.backend = "cpu"};
  if (wisp_session_new(m, &so, &s)) {
    wisp_model_close(m);
    CHECKF(0, "%s", wisp_last_error());
  }
  const wisp_plan *p = wisp_session_plan(s);
  uint64_t counted = wisp_engine_decode_weight_bytes(m, p);
  /* what decode reads: each matmul of the decode phase, its sections' sizes */
  const wisp_artifact *a = m->artifact;
  const wisp_plan_phase *ph = &p->phases[WISP_PHASE_DECODE];
  uint64_t stored = 0;
  int n_q4k = 0, n_mm = 0;
  for (int i = 0; i < ph->n_epilogue; i++)
    if (!strcmp(ph->epilogue[i].op, "matmul")) {
      const char *sec = ph->epilogue[i].section;
      stored += stored_bytes(a, wisp_matrix_present(a, sec) ? sec : "embed"); /* a tied head reads embed */
      n_mm++;
    }
  for (int g = 0; g < ph->n_groups; g++) {
    const wisp_plan_group *grp = &ph->groups[g];
    for (int l = 0; l < grp->n_layers; l++)
      for (int i = 0; i < grp->n_ops; i++) {
        if (strcmp(grp->ops[i].op, "matmul")) continue;
        char base[200], q4k[240];
        snprintf(base, sizeof base, "L%d.%s", grp->layers[l], grp->ops[i].section);
        snprintf(q4k, sizeof q4k, "%s.q4k", base);
        n_q4k += wisp_artifact_section(a, q4k) != NULL;
        stored += stored_bytes(a, base);
        n_mm++;
      }
  }
  wisp_session_free(s);
  wisp_model_close(m);
  CHECKF(n_q4k > 0 && n_mm > n_q4k, "%d Q4_K of %d matmuls: the test needs both kinds", n_q4k, n_mm);
  CHECKF(counted == stored, "decode weight bytes %llu, the matrices occupy %llu", (unsigned long long)counted,
         (unsigned long long)stored);
}

/* export-gguf keeps the bytes of every type with a GGUF twin (quant.h's
 * ggml_type): an F16 and a Q8_0 artifact go out as F16 / Q8_0 tensors whose
 * data are the sections' bytes, with llama.cpp's file type. */
TEST(quant_export_keeps_f16_and_q8_0_bytes) {
  char hf[600], art[700], gg[760], cmd[4096], log[8192];
  snprintf(hf, sizeof hf, "%s/qtab_lfm2_hf", test_tmpdir());
  CHECK(mkdir(hf, 0755) == 0);
  fx_lfm2_opts o = {.untied = 1, .seed = 5};
  CHECK(fx_write_tiny_lfm2(hf, &o) == 0);
  static const struct { const char *quant; uint32_t ggml; int64_t file_type; } cases[] = {
      {"f16", WISP_GGML_F16, 1}, {"q8_0", WISP_GGML_Q8_0, 7}};
  for (int k = 0; k < 2; k++) {
    snprintf(art, sizeof art, "%s/qtab_%s", test_tmpdir(), cases[k].quant);
    snprintf(gg, sizeof gg, "%s.gguf", art);
    snprintf(cmd, sizeof cmd, "%s convert %s -o %s --quant %s --quiet && %s export-gguf %s -o %s", test_wisp_bin(), hf,
             art, cases[k].quant, test_wisp_bin(), art, gg);
    CHECKF(test_run(cmd, log, sizeof log) == 0, "%s", log);
    wisp_artifact *a = NULL;
    wisp_gguf *f = NULL;
    CHECKF(wisp_artifact_open(art, &a) == WISP_OK, "%s", wisp_last_error());
    if (wisp_gguf_open(gg, &f)) {
      wisp_artifact_free(a);
      CHECKF(0, "%s", wisp_last_error());
    }
    char sec[64];
    snprintf(sec, sizeof sec, "L0.mlp.down.%s", cases[k].quant);
    const wisp_section *s = wisp_artifact_section(a, sec);
    const wisp_gguf_tensor *t = wisp_gguf_tensor_find(f, "blk.0.ffn_down.weight");
    int64_t ft = -1;
    wisp_gguf_get_int(f, "general.file_type", &ft);
    int same = s && t && t->type == cases[k].ggml && t->bytes == s->bytes &&
               !memcmp(t->data, a->weights + s->offset, (size_t)s->bytes);
    wisp_gguf_close(f);
    wisp_artifact_free(a);
    CHECKF(same, "%s: blk.0.ffn_down.weight is not the section's bytes", cases[k].quant);
    CHECKF(ft == cases[k].file_type, "%s: general.file_type %lld", cases[k].quant, (long long)ft);
  }
}
