/* `-m FILE.gguf`: a GGUF run in place (format/gguf_artifact.h) gives the
 * same logits as the artifact directory it came from (f32) or as the
 * artifact `convert --quant keep` writes from it (the same bytes: Q4_0,
 * Q4_K), every command takes the file, the weights point into the file's
 * mapping, and the errors people meet are one line naming the file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "format/artifact.h"
#include "format/gguf_artifact.h"
#include "format/tensor.h"
#include "parity_compare.h"
#include "st_fixture.h"
#include "test.h"
#include "webgpu_fixture.h"
#include "util/err.h"

static int sh(const char *cmd, char *log, size_t cap) { return test_run(cmd, log, cap); }

static const char *g_backend = "cpu";

static int logits_of(const char *model, char *out, size_t cap) {
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "%s logits -m %s --backend %s --tokens 1,5,9,3,7 --greedy 12 2>&1", test_wisp_bin(), model,
           g_backend);
  return test_run(cmd, out, cap);
}

/* HF tiny model (lfm2 or qwen35) -> convert --quant Q -> export-gguf ARGS. */
static int make_gguf(const char *tag, int qwen, const char *quant, const char *export_args, char *dir, char *gguf,
                     char *log, size_t cap) {
  char hf[600], cmd[4096];
  snprintf(hf, sizeof hf, "%s/%s_hf", test_tmpdir(), tag);
  snprintf(dir, 600, "%s/%s_dir", test_tmpdir(), tag);
  snprintf(gguf, 600, "%s/%s.gguf", test_tmpdir(), tag);
  if (mkdir(hf, 0755) != 0) return -1;
  fx_lfm2_opts o = {.untied = 1, .seed = 5};
  /* qwen: 0 LFM2, 1 Qwen 3.5, 2 Qwen3, 3 Llama (llama3 rope scaling) */
  if (qwen == 1 ? fx_write_tiny_qwen35(hf) : qwen >= 2 ? fx_write_tiny_qwen3(hf, qwen == 3) : fx_write_tiny_lfm2(hf, &o))
    return -1;
  snprintf(cmd, sizeof cmd, "%s convert %s -o %s --quant %s --quiet && %s export-gguf %s -o %s %s", test_wisp_bin(), hf,
           dir, quant, test_wisp_bin(), dir, gguf, export_args);
  return sh(cmd, log, cap);
}

static void same_logits(const char *a, const char *b) {
  static char la[1 << 17], lb[1 << 17];
  CHECKF(logits_of(a, la, sizeof la) == 0, "%s: %.300s", a, la);
  CHECKF(logits_of(b, lb, sizeof lb) == 0, "%s: %.300s", b, lb);
  CHECKF(strlen(la) > 100 && !strcmp(la, lb), "logits differ:\n%s: %.300s\n%s: %.300s", a, la, b, lb);
}

/* f32, F16 and Q8_0 files hold the directory's own bytes (mapped, not
 * converted): the very logits of the directory. */
TEST(gguf_run_f32_f16_q8_0_same_logits_as_the_directory) {
  char dir[600], gguf[600], log[8192];
  CHECKF(make_gguf("gr_lf", 0, "f32", "", dir, gguf, log, sizeof log) == 0, "%s", log);
  same_logits(gguf, dir);
  CHECKF(make_gguf("gr_qf", 1, "f32", "", dir, gguf, log, sizeof log) == 0, "%s", log);
  same_logits(gguf, dir);
  CHECKF(make_gguf("gr_l16", 0, "f16", "--keep-quant", dir, gguf, log, sizeof log) == 0, "%s", log);
  same_logits(gguf, dir);
  CHECKF(make_gguf("gr_l8", 0, "q8_0", "--keep-quant", dir, gguf, log, sizeof log) == 0, "%s", log);
  same_logits(gguf, dir);
  CHECKF(make_gguf("gr_q3", 2, "f32", "", dir, gguf, log, sizeof log) == 0, "%s", log);
  same_logits(gguf, dir);
}

/* The logits of a prompt and 16 greedy tokens on g_backend (EXTRA: more
 * options) of models a and b: the same tokens, logits within tol of
 * max|logit|. */
static void close_logits(const char *a, const char *b, const char *extra, double tol) {
  char cmd[4096], ja[700], jb[700], log[8192], msg[2048];
  snprintf(ja, sizeof ja, "%s.logits.json", a);
  snprintf(jb, sizeof jb, "%s.logits.json", b);
  const char *m[2] = {a, b}, *o[2] = {ja, jb};
  for (int i = 0; i < 2; i++) {
    snprintf(cmd, sizeof cmd, "%s logits -m %s --backend %s --tokens 1,5,9,3,7 --greedy 16 %s -o %s --force 2>&1",
             test_wisp_bin(), m[i], g_backend, extra, o[i]);
    CHECKF(sh(cmd, log, sizeof log) == 0, "%s", log);
  }
  CHECKF(parity_compare_files(jb, ja, tol, msg, sizeof msg), "%s vs %s (%s %s): %s", a, b, g_backend, extra, msg);
}

/* Llama: q/k rows in llama.cpp's rope order, run as stored (mapped: the
 * manifest says adjacent rope pairs), and llama3 scaling as
 * rope_freqs.weight: the logits of `convert FILE.gguf --quant f32`, whose
 * q/k rows are back in Hugging Face's order (rotate-half pairs). The
 * scores are the same sums in another order: equal to float rounding. */
static void llama_mapped_case(const char *tag, const char *quant, const char *args) {
  char dir[600], gguf[600], conv[700], cmd[4096], log[8192];
  CHECKF(make_gguf(tag, 3, quant, args, dir, gguf, log, sizeof log) == 0, "%s", log);
  snprintf(conv, sizeof conv, "%s_conv", dir);
  snprintf(cmd, sizeof cmd, "%s convert %s -o %s --quant f32 --quiet", test_wisp_bin(), gguf, conv);
  CHECKF(sh(cmd, log, sizeof log) == 0, "%s", log);
  wisp_artifact *a = NULL, *c = NULL;
  CHECKF(wisp_artifact_open(gguf, &a) == WISP_OK, "%s", wisp_last_error());
  CHECKF(wisp_artifact_open(conv, &c) == WISP_OK, "%s", wisp_last_error());
  CHECKF(a->shape.rope_pairs == WISP_ROPE_ADJACENT && c->shape.rope_pairs == WISP_ROPE_HALVES,
         "rope pairs: file %d, converted %d", a->shape.rope_pairs, c->shape.rope_pairs);
  for (int i = 0; i < a->n_sections; i++) /* q|k|v mapped: nothing built but the rope tables */
    if (!strncmp(a->sections[i].name, "L", 1))
      CHECKF(!strncmp(a->sections[i].origin, "mapped", 6), "%s: %s", a->sections[i].name, a->sections[i].origin);
  wisp_artifact_free(a);
  wisp_artifact_free(c);
  /* wisp plan shows the layout with the attention layers */
  static char plan[1 << 16];
  snprintf(cmd, sizeof cmd, "%s plan -m %s 2>&1", test_wisp_bin(), gguf);
  CHECKF(sh(cmd, plan, sizeof plan) == 0 && strstr(plan, "attention layers 0,1 (rope pairs adjacent"), "%.600s", plan);
  close_logits(gguf, conv, "", 1e-5);
}

TEST(gguf_run_llama_rope_order_and_freqs_same_logits_as_convert) {
  llama_mapped_case("gr_ll", "f32", "");
  llama_mapped_case("gr_ll8", "q8_0", "--keep-quant");
}

/* The same on the WebGPU backend: prefill and the decode loop (the
 * persistent decode where the plan has it) rotate adjacent pairs too. */
TEST(gguf_run_llama_rope_order_webgpu) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  char dir[600], gguf[600], conv[700], cmd[4096], log[8192];
  g_backend = "webgpu";
  CHECKF(make_gguf("gw_ll", 3, "f32", "", dir, gguf, log, sizeof log) == 0, "%s", log);
  snprintf(conv, sizeof conv, "%s_conv", dir);
  snprintf(cmd, sizeof cmd, "%s convert %s -o %s --quant f32 --quiet", test_wisp_bin(), gguf, conv);
  CHECKF(sh(cmd, log, sizeof log) == 0, "%s", log);
  close_logits(gguf, conv, "", 1e-4);
  close_logits(gguf, conv, "--decode-loop", 1e-4); /* the persistent decode */
  g_backend = "cpu";
}

/* Q4_0 (LFM2 q4, --keep-quant) and Q4_K (Qwen 3.5 q4k): the file against
 * the artifact convert --quant keep writes from it (the same bytes on disk),
 * and the same greedy tokens as the directory it was exported from. */
TEST(gguf_run_q4_0_and_q4_k_same_logits_as_convert_keep) {
  const struct { const char *tag; int qwen; const char *quant; } cases[] = {{"gr_l4", 0, "q4"}, {"gr_qk", 1, "q4k"}};
  for (int i = 0; i < 2; i++) {
    char dir[600], gguf[600], keep[700], cmd[4096], log[8192];
    CHECKF(make_gguf(cases[i].tag, cases[i].qwen, cases[i].quant, "--keep-quant", dir, gguf, log, sizeof log) == 0,
           "%s", log);
    snprintf(keep, sizeof keep, "%s_keep", dir);
    snprintf(cmd, sizeof cmd, "%s convert %s -o %s --quiet", test_wisp_bin(), gguf, keep);
    CHECKF(sh(cmd, log, sizeof log) == 0, "%s", log);
    same_logits(gguf, keep);
    /* the kept matrices are the stored type, not requantized */
    wisp_artifact *a = NULL;
    CHECKF(wisp_artifact_open(keep, &a) == WISP_OK, "%s", wisp_last_error());
    const char *want = cases[i].qwen ? "L0.mlp.gate_up.q4k" : "L0.mlp.gate_up.q4_0";
    CHECKF(wisp_artifact_section(a, want) != NULL, "%s: no section %s", keep, want);
    /* LFM2's Q4Z embedding went out as Q4_1 (--keep-quant) and stays Q4_1,
     * a wisp type of its own (format/qblocks.h), in the file and the copy */
    const int q41 = cases[i].qwen || wisp_artifact_section(a, "embed.q4_1") != NULL;
    wisp_artifact_free(a);
    CHECKF(q41, "%s: no section embed.q4_1", keep);
  }
}

/* Every section's bytes lie inside the file's mapping unless the plan says
 * they were built at open; for an f32 export with q|k|v and gate|up written
 * back to back, every matrix and vector is mapped, only the rope tables are
 * computed. */
TEST(gguf_run_weights_point_into_the_mapping) {
  char dir[600], gguf[600], log[8192];
  CHECKF(make_gguf("gr_map", 0, "f32", "", dir, gguf, log, sizeof log) == 0, "%s", log);
  wisp_artifact *a = NULL;
  CHECKF(wisp_artifact_open(gguf, &a) == WISP_OK, "%s", wisp_last_error());
  CHECK(a->gguf != NULL);
  const uint8_t *lo = a->gguf->g->map, *hi = lo + a->gguf->g->len;
  int mapped = 0, inside = 0;
  for (int i = 0; i < a->n_sections; i++) {
    const wisp_section *s = &a->sections[i];
    const uint8_t *p = wisp_section_data(a, s);
    const int in = p >= lo && p + s->bytes <= hi;
    const int says = s->origin && !strncmp(s->origin, "mapped", 6);
    CHECKF(in == says, "section %s: inside the mapping %d, origin '%s'", s->name, in, s->origin ? s->origin : "");
    mapped += says;
    inside += in && strstr(s->name, ".weight") != NULL;
  }
  const wisp_section *emb = wisp_artifact_section(a, "embed.weight");
  CHECK(emb && wisp_section_data(a, emb) >= lo && wisp_section_data(a, emb) < hi);
  CHECKF(inside >= 3 * 3 && mapped > a->n_sections / 2, "%d matrices and %d of %d sections mapped", inside, mapped,
         a->n_sections);
  /* what is built at open for an f32 file is the rope tables alone */
  size_t rope = 0;
  for (int i = 0; i < a->n_sections; i++)
    if (!strncmp(a->sections[i].name, "rope.", 5)) rope += a->sections[i].bytes;
  CHECKF(rope > 0 && a->gguf->owned_bytes == rope, "%zu bytes built at open for an f32 file, %zu of rope tables",
         a->gguf->owned_bytes, rope);
  wisp_artifact_free(a);
}

TEST(gguf_run_every_command_takes_the_file) {
  char dir[600], gguf[600], cmd[4096], log[16384], txt[700];
  /* gen-synthetic's small model: a byte tokenizer needs 256 ids */
  snprintf(dir, sizeof dir, "%s/gr_cli", test_tmpdir());
  snprintf(gguf, sizeof gguf, "%s/gr_cli.gguf", test_tmpdir());
  snprintf(cmd, sizeof cmd, "%s gen-synthetic --small -o %s && %s export-gguf %s -o %s", test_wisp_bin(), dir,
           test_wisp_bin(), dir, gguf);
  CHECKF(sh(cmd, log, sizeof log) == 0, "%s", log);
  snprintf(txt, sizeof txt, "%s/gr_cli.txt", test_tmpdir());
  FILE *f = fopen(txt, "w");
  CHECK(f != NULL);
  fputs("hello world, a short text for perplexity. hello again.\n", f);
  fclose(f);
  const char *w = test_wisp_bin();
  const char *cmds[] = {"%s info -m %s", "%s info --verify %s", "%s plan -m %s", "%s verify %s", "%s tokenize -m %s -p hello",
                        "%s run -m %s -p hi -n 4", "%s bench --backend cpu --profile exact -m %s -p 8 -n 4 -o %s.bench.json", "%s perplexity -m %s -f %s",
                        "%s logits --backend cpu -m %s --tokens 1,2,3"};
  for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++) {
    snprintf(cmd, sizeof cmd, cmds[i], w, gguf, txt);
    strcat(cmd, " 2>&1");
    CHECKF(sh(cmd, log, sizeof log) == 0, "%s: %.600s", cmd, log);
  }
  snprintf(cmd, sizeof cmd, "%s plan --backend cpu --profile exact -m %s 2>&1", w, gguf);
  CHECK(sh(cmd, log, sizeof log) == 0);
  CHECKF(strstr(log, "mapped: blk.0.ffn_norm.weight F32") != NULL, "plan does not say where pieces came from: %.600s", log);
}

static int write_bytes(const char *path, const char *data, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  size_t w = fwrite(data, 1, n, f);
  return fclose(f) || w != n ? -1 : 0;
}

static void expect_error(const char *path, const char *what) {
  char cmd[2048], log[4096];
  snprintf(cmd, sizeof cmd, "%s info -m %s 2>&1", test_wisp_bin(), path);
  CHECKF(sh(cmd, log, sizeof log) != 0, "%s: opened", path);
  CHECKF(strstr(log, path) && strstr(log, what) && strchr(log, '\n') == log + strlen(log) - 1,
         "%s: want one line naming the file and '%s', got: %s", path, what, log);
}

TEST(gguf_run_errors_name_the_file_and_the_fix) {
  char dir[600], gguf[600], bad[700], log[8192];
  CHECKF(make_gguf("gr_err", 0, "f32", "", dir, gguf, log, sizeof log) == 0, "%s", log);
  FILE *f = fopen(gguf, "rb");
  CHECK(f != NULL);
  static char buf[1 << 21];
  size_t n = fread(buf, 1, sizeof buf, f);
  fclose(f);
  CHECK(n > 1000 && n < sizeof buf);
  /* a split part */
  snprintf(bad, sizeof bad, "%s/gr_err-00001-of-00003.gguf", test_tmpdir());
  CHECK(write_bytes(bad, buf, n) == 0);
  expect_error(bad, "llama-gguf-split --merge");
  /* truncated in the middle of the last tensor */
  snprintf(bad, sizeof bad, "%s/gr_err_trunc.gguf", test_tmpdir());
  CHECK(write_bytes(bad, buf, n - 100) == 0);
  expect_error(bad, "truncated");
  /* an architecture wisp does not know: general.architecture's value renamed */
  char *arch = NULL;
  for (size_t i = 0; i + 24 < n && !arch; i++)
    if (!memcmp(buf + i, "general.architecture", 20)) arch = buf + i + 20 + 4 + 8; /* type u32, length u64 */
  CHECK(arch && !memcmp(arch, "lfm2", 4));
  memcpy(arch, "zzz9", 4);
  snprintf(bad, sizeof bad, "%s/gr_err_arch.gguf", test_tmpdir());
  CHECK(write_bytes(bad, buf, n) == 0);
  expect_error(bad, "architecture 'zzz9'");
  memcpy(arch, "lfm2", 4);
  /* a tensor type wisp cannot read: the first tensor info's type (after its
   * name, n_dims and dims) set to 20 (IQ4_NL) */
  char *t = NULL;
  for (size_t i = 0; i + 16 < n && !t; i++)
    if (!memcmp(buf + i, "token_embd.weight", 17) && buf[i - 8] == 17) t = buf + i + 17;
  CHECK(t != NULL);
  uint32_t nd;
  memcpy(&nd, t, 4);
  CHECK(nd == 2);
  uint32_t iq4nl = 20;
  memcpy(t + 4 + 8 * nd, &iq4nl, 4);
  snprintf(bad, sizeof bad, "%s/gr_err_type.gguf", test_tmpdir());
  CHECK(write_bytes(bad, buf, n) == 0);
  expect_error(bad, "llama-quantize");
  expect_error(bad, "type 20 (IQ4_NL)");
}

/* The same on the WebGPU backend (lavapipe here): the file's f32, Q8_0,
 * Q4_0 and Q4_K tensors against the directories. */
TEST(gguf_run_webgpu_same_logits_as_the_directory) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  char dir[600], gguf[600], keep[700], cmd[4096], log[8192];
  g_backend = "webgpu";
  const struct { const char *tag; int qwen; const char *quant, *args; } cases[] = {
      {"gw_lf", 0, "f32", ""}, {"gw_l8", 0, "q8_0", "--keep-quant"}, {"gw_l4", 0, "q4", "--keep-quant"},
      {"gw_qk", 1, "q4k", "--keep-quant"}};
  for (int i = 0; i < 4 && !test_failed_now(); i++) {
    CHECKF(make_gguf(cases[i].tag, cases[i].qwen, cases[i].quant, cases[i].args, dir, gguf, log, sizeof log) == 0,
           "%s", log);
    if (i < 2) { /* f32, Q8_0: the directory's bytes */
      same_logits(gguf, dir);
      continue;
    }
    snprintf(keep, sizeof keep, "%s_keep", dir);
    snprintf(cmd, sizeof cmd, "%s convert %s -o %s --quiet", test_wisp_bin(), gguf, keep);
    CHECKF(sh(cmd, log, sizeof log) == 0, "%s", log);
    same_logits(gguf, keep);
  }
  g_backend = "cpu";
}

/* The default model (a byte-level BPE vocabulary and an LFM2 chat
 * template) as a GGUF: its tokenizer and chat template come from the
 * file's metadata (held in memory): the same prompt tokens as the
 * directory, the same chat as the artifact convert writes from the file;
 * and a vocabulary longer than the embedding is refused in one line. */
TEST(gguf_run_tokenizer_and_chat_template_from_the_metadata) {
  char gguf[600], keep[600], cmd[4096], log[8192], ta[4096], tb[4096];
  snprintf(gguf, sizeof gguf, "%s/gr_def.gguf", test_tmpdir());
  snprintf(keep, sizeof keep, "%s/gr_def_keep", test_tmpdir());
  snprintf(cmd, sizeof cmd, "%s export-gguf models/default -o %s --keep-quant && %s convert %s -o %s --quiet",
           test_wisp_bin(), gguf, test_wisp_bin(), gguf, keep);
  CHECKF(sh(cmd, log, sizeof log) == 0, "%s", log);
  snprintf(cmd, sizeof cmd, "%s tokenize -m models/default -p 'In the beginning, caf\xc3\xa9 <|im_end|>' 2>/dev/null",
           test_wisp_bin());
  CHECK(sh(cmd, ta, sizeof ta) == 0);
  snprintf(cmd, sizeof cmd, "%s tokenize -m %s -p 'In the beginning, caf\xc3\xa9 <|im_end|>' 2>/dev/null",
           test_wisp_bin(), gguf);
  CHECK(sh(cmd, tb, sizeof tb) == 0);
  CHECKF(!strncmp(ta, "[1,", 3) && !strcmp(ta, tb), "prompt tokens differ:\n%s\n%s", ta, tb);
  /* stderr names the template; stdout is the reply */
  const char *chat = "{ { printf 'Who art thou?\\n' | %s run --backend cpu --profile exact -m %s --chat -sys 'Answer briefly.' -n 12 --temp 0; } %s; }";
  snprintf(cmd, sizeof cmd, chat, test_wisp_bin(), gguf, "2>&1");
  CHECKF(sh(cmd, ta, sizeof ta) == 0 && strstr(ta, "chat (the model's lfm2 template"), "not the model's template: %s", ta);
  snprintf(cmd, sizeof cmd, chat, test_wisp_bin(), gguf, "2>/dev/null");
  CHECKF(sh(cmd, ta, sizeof ta) == 0, "%s", ta);
  snprintf(cmd, sizeof cmd, chat, test_wisp_bin(), keep, "2>/dev/null");
  CHECKF(sh(cmd, tb, sizeof tb) == 0, "%s", tb);
  CHECKF(strlen(ta) > 4 && !strcmp(ta, tb), "chat differs:\n%s\n---\n%s", ta, tb);

  /* token_embd.weight one row shorter than the vocabulary */
  FILE *f = fopen(gguf, "rb");
  CHECK(f != NULL);
  static char buf[8 << 20];
  size_t n = fread(buf, 1, sizeof buf, f);
  fclose(f);
  CHECK(n > 1000 && n < sizeof buf);
  char *t = NULL;
  for (size_t i = 8; i + 40 < n && !t; i++)
    if (!memcmp(buf + i, "token_embd.weight", 17) && buf[i - 8] == 17) t = buf + i + 17;
  CHECK(t != NULL);
  uint64_t rows;
  memcpy(&rows, t + 4 + 8, 8);
  rows--;
  memcpy(t + 4 + 8, &rows, 8);
  char bad[700];
  snprintf(bad, sizeof bad, "%s/gr_def_vocab.gguf", test_tmpdir());
  f = fopen(bad, "wb");
  CHECK(f && fwrite(buf, 1, n, f) == n);
  fclose(f);
  expect_error(bad, "the vocab does not belong to these weights");
}

/* The model's longest context is the file's context_length, not a cap of
 * wisp's: a file that says 100000 opens with 100000 positions, rope.freq
 * and only the plan's rows of tables, and `-c 6000` (past the old 4096 cap)
 * runs, its tables built by the session. */
TEST(gguf_run_context_is_the_files_context_length) {
  char dir[600], gguf[600], big[700], cmd[4096], log[8192];
  CHECKF(make_gguf("gr_ctx", 0, "f32", "", dir, gguf, log, sizeof log) == 0, "%s", log);
  FILE *f = fopen(gguf, "rb");
  CHECK(f != NULL);
  static char buf[1 << 21];
  size_t n = fread(buf, 1, sizeof buf, f);
  fclose(f);
  CHECK(n > 1000 && n < sizeof buf);
  char *v = NULL; /* "lfm2.context_length", then its type (u32 = 4) and value */
  for (size_t i = 8; i + 27 < n && !v; i++)
    if (!memcmp(buf + i, "lfm2.context_length", 19)) v = buf + i + 19;
  CHECK(v != NULL);
  uint32_t type, ctx = 100000;
  memcpy(&type, v, 4);
  CHECKF(type == 4, "context_length has GGUF type %u, not u32", type);
  memcpy(v + 4, &ctx, 4);
  snprintf(big, sizeof big, "%s/gr_ctx_big.gguf", test_tmpdir());
  CHECK(write_bytes(big, buf, n) == 0);
  wisp_artifact *a = NULL;
  CHECKF(wisp_artifact_open(big, &a) == WISP_OK, "%s", wisp_last_error());
  CHECKF(a->max_positions == 100000, "max positions %d, the file says 100000", a->max_positions);
  const wisp_section *freq = wisp_artifact_section(a, "rope.freq"), *cs = wisp_artifact_section(a, "rope.cos");
  CHECKF(freq && cs && !wisp_artifact_section(a, "rope.cos_ext") && cs->bytes <= freq->bytes * 1024,
         "rope sections: freq %p, cos %llu bytes", (const void *)freq, cs ? (unsigned long long)cs->bytes : 0ULL);
  wisp_artifact_free(a);
  snprintf(cmd, sizeof cmd, "%s logits --backend cpu -m %s -c 6000 --tokens 1,5,9 --greedy 3 2>&1", test_wisp_bin(), big);
  CHECKF(sh(cmd, log, sizeof log) == 0, "%s", log);
}
