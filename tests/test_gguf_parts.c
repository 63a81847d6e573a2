/* A GGUF whose fused sections' tensors share a type but lie apart in the
 * file, as llama-quantize writes a layer's tensors (in name order: attn_k,
 * ..., attn_q, ..., attn_v, ffn_down, ffn_gate, ffn_norm, ffn_up): run in
 * place, each tensor is a mapped row part (nothing copied at open), and the
 * matrix runs as one matrix of its type (format/quant.h,
 * wisp_matrix_mixed): the very logits and greedy tokens of the artifact
 * `convert` writes from the file (where each such matrix is one contiguous
 * section), on the CPU and on WebGPU, op by op and through the decode loop
 * with the persistent decode on; convert and export round trip.
 *
 * The file: the tiny Qwen3 of st_fixture.h exported as f32, rewritten with
 * each layer's tensors in name order and its matrices in Q8_0, F16 or F32. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "format/artifact.h"
#include "format/gguf.h"
#include "format/gguf_artifact.h"
#include "format/quant.h"
#include "format/tensor.h"
#include "gguf_copy.h"
#include "parity_compare.h"
#include "st_fixture.h"
#include "test.h"
#include "util/err.h"
#include "webgpu_fixture.h"
#include "wisp.h"

/* ---- the files ---- */

static const struct {
  const char *tag, *suffix;
  uint32_t ggml;
  wisp_wtype type;
} k_types[] = {{"q8", "q8_0", WISP_GGML_Q8_0, WISP_W_Q8_0},
               {"f16", "f16", WISP_GGML_F16, WISP_W_F16},
               {"f32", "weight", WISP_GGML_F32, WISP_W_F32}};
#define N_TYPES (int)(sizeof k_types / sizeof k_types[0])

static int layer_of(const char *name) { return strncmp(name, "blk.", 4) ? -1 : atoi(name + 4); }

/* Global tensors first (in their order), then each layer's by name. */
static int by_layer_then_name(const void *pa, const void *pb) {
  const wisp_gguf_tensor *a = *(const wisp_gguf_tensor *const *)pa, *b = *(const wisp_gguf_tensor *const *)pb;
  const int la = layer_of(a->name), lb = layer_of(b->name);
  if (la != lb) return la < lb ? -1 : 1;
  return la < 0 ? (a < b ? -1 : a > b) : strcmp(a->name, b->name);
}

/* src (an f32 GGUF) rewritten as dst: tensors in llama-quantize's order,
 * every layer matrix in `type`. */
static int write_apart(const char *src, const char *dst, uint32_t type, char *err, size_t cap) {
  wisp_gguf *g = NULL;
  if (wisp_gguf_open(src, &g)) return snprintf(err, cap, "%s", wisp_last_error()), 0;
  wisp_gguf_writer *w = wisp_gguf_writer_new();
  const wisp_gguf_tensor **order = malloc(sizeof *order * (g->n_tensors ? g->n_tensors : 1));
  int ok = w && order;
  for (uint64_t i = 0; ok && i < g->n_kv; i++)
    if (strcmp(g->kv[i].key, "general.alignment") && !gguf_copy_kv(w, &g->kv[i]))
      ok = 0, snprintf(err, cap, "metadata %s not copied", g->kv[i].key);
  for (uint64_t i = 0; ok && i < g->n_tensors; i++) order[i] = &g->tensors[i];
  if (ok) qsort(order, g->n_tensors, sizeof *order, by_layer_then_name);
  for (uint64_t i = 0; ok && i < g->n_tensors; i++) {
    const wisp_gguf_tensor *t = order[i];
    const uint32_t ty = t->n_dims == 2 && layer_of(t->name) >= 0 ? type : WISP_GGML_F32;
    ok = gguf_copy_tensor_as(w, g, t, ty,
                             ty == WISP_GGML_Q8_0  ? wisp_quantize_q8_0_rows
                             : ty == WISP_GGML_F16 ? wisp_quantize_f16
                                                   : NULL,
                             err, cap);
  }
  if (ok && wisp_gguf_writer_write(w, dst)) ok = 0, snprintf(err, cap, "%s", wisp_last_error());
  free(order);
  wisp_gguf_writer_free(w);
  wisp_gguf_close(g);
  return ok;
}

/* The file of type i (made once a process) and the artifact `convert`
 * writes from it (keep: the file's types) into keep. */
static const char *apart_file(int i, char *keep, size_t cap) {
  static char gguf[N_TYPES][600];
  static int made[N_TYPES] = {-1, -1, -1}, base = -1;
  char hf[600], dir[600], f32[600], cmd[4096], log[8192] = "";
  snprintf(f32, sizeof f32, "%s/gp_f32.gguf", test_tmpdir());
  snprintf(keep, cap, "%s/gp_%s_keep", test_tmpdir(), k_types[i].tag);
  if (base < 0) {
    snprintf(hf, sizeof hf, "%s/gp_hf", test_tmpdir());
    snprintf(dir, sizeof dir, "%s/gp_dir", test_tmpdir());
    snprintf(cmd, sizeof cmd, "%s convert %s -o %s --quant f32 --quiet && %s export-gguf %s -o %s", test_wisp_bin(), hf,
             dir, test_wisp_bin(), dir, f32);
    base = mkdir(hf, 0755) == 0 && fx_write_tiny_qwen3(hf, 0) == 0 && test_run(cmd, log, sizeof log) == 0;
    if (!base) fprintf(stderr, "test_gguf_parts: the f32 file was not made: %.2000s\n", log);
  }
  if (made[i] < 0) {
    snprintf(gguf[i], sizeof gguf[i], "%s/gp_%s.gguf", test_tmpdir(), k_types[i].tag);
    made[i] = base && write_apart(f32, gguf[i], k_types[i].ggml, log, sizeof log);
    snprintf(cmd, sizeof cmd, "%s convert %s -o %s --quiet --force", test_wisp_bin(), gguf[i], keep);
    if (made[i]) made[i] = test_run(cmd, log, sizeof log) == 0;
    if (!made[i]) fprintf(stderr, "test_gguf_parts: the %s file was not made: %.2000s\n", k_types[i].tag, log);
  }
  return made[i] ? gguf[i] : NULL;
}

/* ---- the sections ---- */

/* q|k|v in three mapped parts, gate|up in two, nothing built but the rope
 * tables; bound as one matrix of the type whose bytes are the tensors'
 * one after the other; the keep artifact holds each as one section. */
TEST(gguf_parts_apart_tensors_are_mapped_parts) {
  for (int ti = 0; ti < N_TYPES; ti++) {
    char keep[600], name[128];
    const char *gguf = apart_file(ti, keep, sizeof keep);
    CHECK(gguf != NULL);
    wisp_artifact *a = NULL;
    CHECKF(wisp_artifact_open(gguf, &a) == WISP_OK, "%s", wisp_last_error());
    const uint8_t *lo = a->gguf->g->map, *hi = lo + a->gguf->g->len;
    size_t built = 0;
    for (int i = 0; i < a->n_sections; i++) {
      const wisp_section *s = &a->sections[i];
      const uint8_t *p = wisp_section_data(a, s);
      const int in = p >= lo && p + s->bytes <= hi;
      CHECKF(in == !strncmp(s->origin, "mapped", 6), "%s: inside the mapping %d, origin '%s'", s->name, in, s->origin);
      if (!in) built += s->bytes;
      CHECKF(in || !strncmp(s->name, "rope.", 5), "%s: %s built at open (%s)", gguf, s->name, s->origin);
    }
    CHECKF(a->gguf->owned_bytes == built, "%zu bytes owned, %zu built", a->gguf->owned_bytes, built);
    static const char *const qkv[3] = {"attn_q", "attn_k", "attn_v"};
    const wisp_gguf_tensor *t[3];
    int rows = 0, cols = 0;
    for (int k = 0; k < 3; k++) {
      snprintf(name, sizeof name, "blk.1.%s.weight", qkv[k]);
      CHECK((t[k] = wisp_gguf_tensor_find(a->gguf->g, name)) != NULL);
      rows += (int)t[k]->ne[1];
      cols = (int)t[k]->ne[0];
    }
    /* as the file lies: q, k and v not back to back, each its own part */
    CHECK(t[0]->data + t[0]->bytes != t[1]->data && t[1]->data + t[1]->bytes != t[2]->data);
    snprintf(name, sizeof name, "L1.attn.qkv@%d.%s", (int)(t[0]->ne[1] + t[1]->ne[1]), k_types[ti].suffix);
    CHECKF(wisp_artifact_section(a, name) != NULL, "%s: no section %s", gguf, name);
    snprintf(name, sizeof name, "L1.attn.qkv.%s", k_types[ti].suffix);
    CHECKF(wisp_artifact_section(a, name) == NULL, "%s: a section %s", gguf, name);
    wisp_matrix m;
    CHECKF(wisp_matrix_bind(a, "L1.attn.qkv", rows, cols, &m) == WISP_OK, "%s", wisp_last_error());
    CHECKF(m.type == k_types[ti].type && m.n_parts == 3 && !wisp_matrix_mixed(&m),
           "L1.attn.qkv bound as type %d with %d parts", m.type, m.n_parts);
    const size_t bytes = (size_t)wisp_matrix_bytes(&m);
    uint8_t *got = malloc(bytes), *want = malloc(bytes);
    CHECK(got && want && bytes == t[0]->bytes + t[1]->bytes + t[2]->bytes);
    for (size_t k = 0, at = 0; k < 3; at += t[k]->bytes, k++) memcpy(want + at, t[k]->data, t[k]->bytes);
    wisp_matrix_copy_rows(&m, 0, rows, got);
    const int same = !memcmp(got, want, bytes);
    /* rows from the middle, across a part's end */
    const size_t rb = bytes / (size_t)rows;
    wisp_matrix_copy_rows(&m, (int)t[0]->ne[1] - 1, 2, got);
    const int across = !memcmp(got, want + rb * (size_t)(t[0]->ne[1] - 1), 2 * rb);
    free(got), free(want);
    CHECKF(same && across, "%s: the parts' rows are not the tensors' bytes in order", gguf);
    wisp_artifact_free(a);
    /* convert writes each as one section, the tensors' bytes in order */
    CHECKF(wisp_artifact_open(keep, &a) == WISP_OK, "%s", wisp_last_error());
    for (int i = 0; i < a->n_sections; i++) CHECKF(!strchr(a->sections[i].name, '@'), "%s: %s", keep, a->sections[i].name);
    snprintf(name, sizeof name, "L1.mlp.gate_up.%s", k_types[ti].suffix);
    CHECKF(wisp_artifact_section(a, name) != NULL, "%s: no section %s", keep, name);
    wisp_artifact_free(a);
  }
}

/* ---- the model ---- */


/* The file against its keep artifact on one backend: the very logits and
 * greedy tokens (extra: more logits arguments). */
static void same_as_keep(int ti, const char *backend, const char *extra) {
  char keep[600], a[700], b[700], log[16384], msg[2048];
  const char *gguf = apart_file(ti, keep, sizeof keep);
  CHECK(gguf != NULL);
  snprintf(a, sizeof a, "%s/gp_%s_%s_file.json", test_tmpdir(), k_types[ti].tag, backend);
  snprintf(b, sizeof b, "%s/gp_%s_%s_keep.json", test_tmpdir(), k_types[ti].tag, backend);
  CHECKF(gguf_logits_json(gguf, backend, extra, a, log, sizeof log) == 0, "%s", log);
  CHECKF(gguf_logits_json(keep, backend, extra, b, log, sizeof log) == 0, "%s", log);
  CHECKF(parity_compare_files(b, a, 0, msg, sizeof msg), "%s %s %s: the file vs its keep artifact: %s",
         k_types[ti].tag, backend, extra, msg);
}

/* On the CPU (and its integer products); `wisp plan` shows the parts and
 * keeps the WebGPU persistent decode on; export-gguf of the keep artifact
 * gives the file's very logits again. */
TEST(gguf_parts_run_as_the_converted_artifact_cpu) {
  for (int ti = 0; ti < N_TYPES; ti++) {
    same_as_keep(ti, "cpu", "");
    same_as_keep(ti, "cpu", "--profile throughput");
    char keep[600], cmd[4096], log[16384], back[700], a[700], b[700], msg[2048];
    const char *gguf = apart_file(ti, keep, sizeof keep);
    CHECK(gguf != NULL);
    snprintf(cmd, sizeof cmd, "%s plan -m %s --backend webgpu 2>&1", test_wisp_bin(), gguf);
    CHECKF(test_run(cmd, log, sizeof log) == 0, "%s", log);
    char want[160];
    snprintf(want, sizeof want, "in 3 row parts of one type (apart in the file): runs as one %s matrix",
             wisp_wtype_name(k_types[ti].type));
    CHECKF(strstr(log, want) && strstr(log, "in 2 row parts of one type") &&
               strstr(log, "persistentDecode=persistent_decode/") && !strstr(log, "part rows 0-"),
           "wisp plan: %.4000s", log);
    snprintf(back, sizeof back, "%s/gp_%s_back.gguf", test_tmpdir(), k_types[ti].tag);
    snprintf(cmd, sizeof cmd, "%s export-gguf %s -o %s --keep-quant", test_wisp_bin(), keep, back);
    CHECKF(test_run(cmd, log, sizeof log) == 0, "%s", log);
    snprintf(a, sizeof a, "%s/gp_%s_cpu_file.json", test_tmpdir(), k_types[ti].tag);
    snprintf(b, sizeof b, "%s/gp_%s_back.json", test_tmpdir(), k_types[ti].tag);
    same_as_keep(ti, "cpu", "");
    CHECKF(gguf_logits_json(back, "cpu", "", b, log, sizeof log) == 0, "%s", log);
    CHECKF(parity_compare_files(a, b, 0, msg, sizeof msg), "%s: the file vs its export's round trip: %s",
           k_types[ti].tag, msg);
  }
}

/* On WebGPU (lavapipe here): op by op, and through the decode loop, where
 * the persistent decode runs the matrices from its weight blob. */
TEST(webgpu_gguf_parts_run_as_the_converted_artifact) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  /* (each run compiles its kernels on lavapipe: the decode loop for the
   * block type and f16, op by op for the block type and f32) */
  same_as_keep(0, "webgpu", "");
  same_as_keep(0, "webgpu", "--decode-loop");
  same_as_keep(1, "webgpu", "--decode-loop");
  same_as_keep(2, "webgpu", "");
}

/* ---- Qwen 3.5 with as many value heads as key heads ---- */

/* llama.cpp's converter tiles Qwen 3.5's value heads (docs/gguf.md); with as
 * many value heads as key heads (the released 0.8B and 2B) that order is
 * the Hugging Face one, so the file's linear-attention tensors are mapped
 * as they lie (only A_log, stored as -exp(A_log), is computed), and the file
 * gives the very logits of the artifact converted from it. With more
 * value heads than key heads (the fixture's default) they are reordered. */
TEST(gguf_parts_qwen35_equal_value_heads_mapped_as_they_lie) {
  char hf[600], art[600], gguf[600], cmd[4096], log[16384], a[700], b[700], msg[2048];
  snprintf(hf, sizeof hf, "%s/gp_q35eq_hf", test_tmpdir());
  snprintf(art, sizeof art, "%s/gp_q35eq_art", test_tmpdir());
  snprintf(gguf, sizeof gguf, "%s/gp_q35eq.gguf", test_tmpdir());
  CHECK(mkdir(hf, 0755) == 0 && fx_write_tiny_qwen35_value_heads(hf, 2) == 0);
  snprintf(cmd, sizeof cmd, "%s convert %s -o %s --quant f32 --quiet && %s export-gguf %s -o %s --q8_0 2>&1",
           test_wisp_bin(), hf, art, test_wisp_bin(), art, gguf);
  CHECKF(test_run(cmd, log, sizeof log) == 0, "%s", log);
  wisp_artifact *m = NULL;
  CHECKF(wisp_artifact_open(gguf, &m) == WISP_OK, "%s", wisp_last_error());
  int lin = 0;
  for (int i = 0; i < m->n_sections; i++) {
    const wisp_section *s = &m->sections[i];
    if (!strstr(s->name, ".lin.")) continue;
    lin++;
    const int computed = strstr(s->name, ".lin.A_log") != NULL;
    CHECKF(computed == !!strncmp(s->origin, "mapped", 6), "%s: %s", s->name, s->origin);
  }
  CHECKF(lin >= 8, "%d linear-attention sections", lin);
  wisp_artifact_free(m);
  /* the file in place and the artifact convert makes of it (each matrix one
   * contiguous section, its type kept) */
  snprintf(cmd, sizeof cmd, "%s convert %s -o %s_q8 --quiet 2>&1", test_wisp_bin(), gguf, art);
  CHECKF(test_run(cmd, log, sizeof log) == 0, "%s", log);
  snprintf(a, sizeof a, "%s/gp_q35eq_file.json", test_tmpdir());
  snprintf(b, sizeof b, "%s/gp_q35eq_art.json", test_tmpdir());
  char q8[640];
  snprintf(q8, sizeof q8, "%s_q8", art);
  CHECKF(gguf_logits_json(gguf, "cpu", "--profile exact", a, log, sizeof log) == 0, "%s", log);
  CHECKF(gguf_logits_json(q8, "cpu", "--profile exact", b, log, sizeof log) == 0, "%s", log);
  CHECKF(parity_compare_files(b, a, 0, msg, sizeof msg), "the file vs the converted artifact: %s", msg);
}
