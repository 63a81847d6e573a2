/* Which Hugging Face tensors `wisp convert` puts in which section, pinned
 * for every architecture: each section of an f32 artifact of the tiny
 * checkpoints (st_fixture.h) must hold, byte for byte, the tensors an
 * independent list here names (concatenated in row order; 1 + w for Qwen
 * 3.5's norms). The list is written from the Hugging Face modeling code,
 * not from format/gguf_arch.c, so a renamed or mis-mapped row of the name
 * table fails here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "format/artifact.h"
#include "format/safetensors.h"
#include "st_fixture.h"
#include "test.h"
#include "util/file.h"

enum { LFM2, QWEN3, LLAMA, QWEN35, QWEN2, GEMMA3 };

/* One section of a layer: its name after "L<i>." and its tensors after
 * "model.layers.<i>.", on layers of kind `kind` (-1: every layer). */
typedef struct {
  int kind;
  const char *section;
  int plus1; /* stored as 1 + w */
  const char *hf[4];
} layer_row;

static const layer_row k_lfm2[] = {
    {WISP_LAYER_CONV, "conv.in_proj.weight", 0, {"conv.in_proj.weight"}},
    {WISP_LAYER_CONV, "conv.out_proj.weight", 0, {"conv.out_proj.weight"}},
    {WISP_LAYER_CONV, "conv.in_proj.norm", 0, {"operator_norm.weight"}},
    {WISP_LAYER_CONV, "conv.core.taps", 0, {"conv.conv.weight"}},
    {WISP_LAYER_ATTENTION, "attn.qkv.weight", 0, {"self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight"}},
    {WISP_LAYER_ATTENTION, "attn.o_proj.weight", 0, {"self_attn.out_proj.weight"}},
    {WISP_LAYER_ATTENTION, "attn.qkv.norm", 0, {"operator_norm.weight"}},
    {WISP_LAYER_ATTENTION, "attn.qkv.q_norm", 0, {"self_attn.q_layernorm.weight"}},
    {WISP_LAYER_ATTENTION, "attn.qkv.k_norm", 0, {"self_attn.k_layernorm.weight"}},
    {-1, "mlp.gate_up.weight", 0, {"feed_forward.w1.weight", "feed_forward.w3.weight"}},
    {-1, "mlp.down.weight", 0, {"feed_forward.w2.weight"}},
    {-1, "mlp.gate_up.norm", 0, {"ffn_norm.weight"}},
    {0},
};

/* Qwen3 and Llama (Llama's layout has no q/k norm sections). */
static const layer_row k_dense[] = {
    {-1, "attn.qkv.weight", 0, {"self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight"}},
    {-1, "attn.o_proj.weight", 0, {"self_attn.o_proj.weight"}},
    {-1, "attn.qkv.norm", 0, {"input_layernorm.weight"}},
    {-1, "mlp.gate_up.weight", 0, {"mlp.gate_proj.weight", "mlp.up_proj.weight"}},
    {-1, "mlp.down.weight", 0, {"mlp.down_proj.weight"}},
    {-1, "mlp.gate_up.norm", 0, {"post_attention_layernorm.weight"}},
    {-1, "attn.qkv.q_norm", 0, {"self_attn.q_norm.weight"}},
    {-1, "attn.qkv.k_norm", 0, {"self_attn.k_norm.weight"}},
    {0},
};

static const layer_row k_qwen35[] = {
    {WISP_LAYER_LINEAR, "lin.in_proj.weight", 0,
     {"linear_attn.in_proj_qkv.weight", "linear_attn.in_proj_z.weight", "linear_attn.in_proj_b.weight",
      "linear_attn.in_proj_a.weight"}},
    {WISP_LAYER_LINEAR, "lin.out_proj.weight", 0, {"linear_attn.out_proj.weight"}},
    {WISP_LAYER_LINEAR, "lin.in_proj.norm", 1, {"input_layernorm.weight"}},
    {WISP_LAYER_LINEAR, "lin.conv.taps", 0, {"linear_attn.conv1d.weight"}},
    {WISP_LAYER_LINEAR, "lin.A_log", 0, {"linear_attn.A_log"}},
    {WISP_LAYER_LINEAR, "lin.dt_bias", 0, {"linear_attn.dt_bias"}},
    {WISP_LAYER_LINEAR, "lin.norm", 0, {"linear_attn.norm.weight"}}, /* the gated norm: plain w */
    {WISP_LAYER_ATTENTION, "attn.qkv.weight", 0, {"self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight"}},
    {WISP_LAYER_ATTENTION, "attn.o_proj.weight", 0, {"self_attn.o_proj.weight"}},
    {WISP_LAYER_ATTENTION, "attn.qkv.norm", 1, {"input_layernorm.weight"}},
    {WISP_LAYER_ATTENTION, "attn.qkv.q_norm", 1, {"self_attn.q_norm.weight"}},
    {WISP_LAYER_ATTENTION, "attn.qkv.k_norm", 1, {"self_attn.k_norm.weight"}},
    {-1, "mlp.gate_up.weight", 0, {"mlp.gate_proj.weight", "mlp.up_proj.weight"}},
    {-1, "mlp.down.weight", 0, {"mlp.down_proj.weight"}},
    {-1, "mlp.gate_up.norm", 1, {"post_attention_layernorm.weight"}},
    {0},
};

/* Qwen2ForCausalLM: Llama's names plus the q/k/v biases, each a section. */
static const layer_row k_qwen2[] = {
    {-1, "attn.qkv.weight", 0, {"self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight"}},
    {-1, "attn.q_bias", 0, {"self_attn.q_proj.bias"}},
    {-1, "attn.k_bias", 0, {"self_attn.k_proj.bias"}},
    {-1, "attn.v_bias", 0, {"self_attn.v_proj.bias"}},
    {-1, "attn.o_proj.weight", 0, {"self_attn.o_proj.weight"}},
    {-1, "attn.qkv.norm", 0, {"input_layernorm.weight"}},
    {-1, "mlp.gate_up.weight", 0, {"mlp.gate_proj.weight", "mlp.up_proj.weight"}},
    {-1, "mlp.down.weight", 0, {"mlp.down_proj.weight"}},
    {-1, "mlp.gate_up.norm", 0, {"post_attention_layernorm.weight"}},
    {0},
};

/* Gemma3ForCausalLM: every Gemma3RMSNorm stored as 1 + w; the norms after
 * the attention and the MLP blocks. */
static const layer_row k_gemma3[] = {
    {-1, "attn.qkv.weight", 0, {"self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight"}},
    {-1, "attn.o_proj.weight", 0, {"self_attn.o_proj.weight"}},
    {-1, "attn.qkv.norm", 1, {"input_layernorm.weight"}},
    {-1, "attn.qkv.q_norm", 1, {"self_attn.q_norm.weight"}},
    {-1, "attn.qkv.k_norm", 1, {"self_attn.k_norm.weight"}},
    {-1, "attn.o_proj.post_norm", 1, {"post_attention_layernorm.weight"}},
    {-1, "mlp.gate_up.weight", 0, {"mlp.gate_proj.weight", "mlp.up_proj.weight"}},
    {-1, "mlp.down.weight", 0, {"mlp.down_proj.weight"}},
    {-1, "mlp.gate_up.norm", 1, {"pre_feedforward_layernorm.weight"}},
    {-1, "mlp.down.post_norm", 1, {"post_feedforward_layernorm.weight"}},
    {0},
};

/* The expected tensors of artifact section `sec` (0: not a section the
 * list knows). */
static int expected(int arch, const char *final_norm, const wisp_artifact *a, const char *sec, int untied,
                    char names[4][160], int *n, int *plus1) {
  *n = 0;
  *plus1 = 0;
  if (!strcmp(sec, "embed.weight") || !strcmp(sec, "head.weight")) {
    snprintf(names[(*n)++], 160, "%s", !strcmp(sec, "head.weight") && untied ? "lm_head.weight" : "model.embed_tokens.weight");
    return 1;
  }
  if (!strcmp(sec, "head.norm")) {
    snprintf(names[(*n)++], 160, "%s", final_norm);
    *plus1 = arch == QWEN35 || arch == GEMMA3;
    return 1;
  }
  int layer, used = 0;
  if (sscanf(sec, "L%d.%n", &layer, &used) != 1 || !used || layer < 0 || layer >= a->shape.n_layers) return 0;
  const layer_row *rows = arch == LFM2     ? k_lfm2
                          : arch == QWEN35 ? k_qwen35
                          : arch == QWEN2  ? k_qwen2
                          : arch == GEMMA3 ? k_gemma3
                                           : k_dense;
  for (const layer_row *r = rows; r->section; r++) {
    if (r->kind >= 0 && r->kind != a->shape.layer_types[layer]) continue;
    if (strcmp(r->section, sec + used)) continue;
    for (int i = 0; i < 4 && r->hf[i]; i++) snprintf(names[(*n)++], 160, "model.layers.%d.%s", layer, r->hf[i]);
    *plus1 = r->plus1;
    return 1;
  }
  return 0;
}

/* Converts HF to f32 and checks every section but the rope tables;
 * returns the number of sections checked, -1 on a failed check. */
static int check_sections(const char *tag, const char *hf, int arch, const char *final_norm, int untied) {
  char out[700], cmd[2048];
  static char log[8192];
  snprintf(out, sizeof out, "%s/%s_art", test_tmpdir(), tag);
  snprintf(cmd, sizeof cmd, "%s convert %s -o %s --quant f32 --quiet", test_wisp_bin(), hf, out);
  if (test_run(cmd, log, sizeof log) != 0) {
    fprintf(stderr, "  %s: convert failed: %s\n", tag, log);
    return -1;
  }
  wisp_artifact *a = NULL;
  wisp_safetensors *st = NULL;
  int checked = 0;
  if (wisp_artifact_open(out, &a) != WISP_OK || wisp_safetensors_open_dir(hf, &st) != WISP_OK) {
    fprintf(stderr, "  %s: %s\n", tag, wisp_last_error());
    checked = -1;
  }
  for (int s = 0; checked >= 0 && s < a->n_sections; s++) {
    const wisp_section *sec = &a->sections[s];
    if (!strncmp(sec->name, "rope.", 5)) continue;
    char names[4][160];
    int n, plus1;
    if (!expected(arch, final_norm, a, sec->name, untied, names, &n, &plus1)) {
      fprintf(stderr, "  %s: section '%s' is not in the expected list\n", tag, sec->name);
      checked = -1;
      break;
    }
    float *want = malloc(sec->bytes + 4);
    uint64_t at = 0;
    int ok = want != NULL;
    for (int i = 0; ok && i < n; i++) {
      const wisp_st_tensor *t = wisp_safetensors_find(st, names[i]);
      ok = t && (at + t->numel) * 4 <= sec->bytes && wisp_safetensors_read_f32(st, t, want + at) == WISP_OK;
      if (ok) at += t->numel;
    }
    ok = ok && at * 4 == sec->bytes;
    for (uint64_t i = 0; ok && plus1 && i < at; i++) want[i] = 1.0f + want[i];
    if (!ok || memcmp(want, a->weights + sec->offset, sec->bytes)) {
      fprintf(stderr, "  %s: section '%s' does not hold %s%s%s\n", tag, sec->name, plus1 ? "1 + " : "", names[0],
                      n > 1 ? " ..." : "");
      checked = -1;
    } else {
      checked++;
    }
    free(want);
  }
  wisp_safetensors_close(st);
  wisp_artifact_free(a);
  return checked;
}

static const char *fresh_dir(const char *name) {
  static char dir[4][600];
  static int k;
  k = (k + 1) % 4;
  snprintf(dir[k], sizeof dir[k], "%s/%s", test_tmpdir(), name);
  return mkdir(dir[k], 0755) == 0 ? dir[k] : NULL;
}

/* Rewrites DIR/model.safetensors with tensor `from` renamed `to`. */
static int rename_tensor(const char *dir, const char *from, const char *to) {
  wisp_safetensors *st = NULL;
  if (wisp_safetensors_open_dir(dir, &st)) return -1;
  fx_tensor *t = calloc((size_t)st->n_tensors, sizeof *t);
  int rc = t ? 0 : -1;
  for (int i = 0; !rc && i < st->n_tensors; i++) {
    const wisp_st_tensor *s = &st->tensors[i];
    float *v = malloc(s->numel * 4);
    if (!v || wisp_safetensors_read_f32(st, s, v)) rc = -1;
    t[i] = (fx_tensor){strcmp(s->name, from) ? s->name : to, "F32", s->ndim, {0}, v};
    for (int d = 0; d < s->ndim && d < 4; d++) t[i].shape[d] = s->shape[d];
  }
  char path[700];
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  if (!rc) rc = fx_write_safetensors(path, t, st->n_tensors); /* names and data are read before the file goes */
  for (int i = 0; t && i < st->n_tensors; i++) free((void *)t[i].data);
  free(t);
  wisp_safetensors_close(st);
  return rc;
}

TEST(convert_names_lfm2_every_section_holds_its_hf_tensors) {
  const char *tied = fresh_dir("nm_lfm2"), *untied = fresh_dir("nm_lfm2u");
  fx_lfm2_opts u = {.untied = 1, .seed = 4};
  CHECK(tied && untied && fx_write_tiny_lfm2(tied, NULL) == 0 && fx_write_tiny_lfm2(untied, &u) == 0);
  /* 3 layers (conv, attention, conv): 2 * 4 + 5 + 3 * 3 + embed, head, head.norm */
  int n = check_sections("nm_lfm2", tied, LFM2, "model.embedding_norm.weight", 0);
  CHECKF(n == 25, "%d sections checked", n);
  n = check_sections("nm_lfm2u", untied, LFM2, "model.embedding_norm.weight", 1);
  CHECKF(n == 25, "%d sections checked", n);
  /* older checkpoints name the final norm model.norm */
  const char *old = fresh_dir("nm_lfm2old");
  CHECK(old && fx_write_tiny_lfm2(old, NULL) == 0);
  CHECK(rename_tensor(old, "model.embedding_norm.weight", "model.norm.weight") == 0);
  n = check_sections("nm_lfm2old", old, LFM2, "model.norm.weight", 0);
  CHECKF(n == 25, "%d sections checked", n);
}

TEST(convert_names_qwen3_and_llama_every_section_holds_its_hf_tensors) {
  const char *q = fresh_dir("nm_qwen3"), *l = fresh_dir("nm_llama");
  CHECK(q && l && fx_write_tiny_qwen3(q, 0) == 0 && fx_write_tiny_qwen3(l, 1) == 0);
  int n = check_sections("nm_qwen3", q, QWEN3, "model.norm.weight", 1);
  CHECKF(n == 2 * 8 + 3, "%d sections checked", n); /* untied */
  n = check_sections("nm_llama", l, LLAMA, "model.norm.weight", 1);
  CHECKF(n == 2 * 6 + 3, "%d sections checked", n);
}

TEST(convert_names_qwen3_5_every_section_holds_its_hf_tensors) {
  const char *q = fresh_dir("nm_qwen35");
  CHECK(q && fx_write_tiny_qwen35(q) == 0);
  /* layers linear, full, linear: 2 * (7 + 3) + (5 + 3) + embed, head (tied), head.norm */
  int n = check_sections("nm_qwen35", q, QWEN35, "model.norm.weight", 0);
  CHECKF(n == 31, "%d sections checked", n);
}

/* A config that unties the head needs lm_head.weight, whatever the
 * architecture: an absent head is an error, never a silent tie. */
TEST(convert_names_qwen2_and_gemma3_every_section_holds_its_hf_tensors) {
  const char *q = fresh_dir("nm_qwen2"), *g = fresh_dir("nm_gemma3");
  CHECK(q && g && fx_write_tiny_qwen2(q) == 0 && fx_write_tiny_gemma3(g) == 0);
  /* 2 layers of 9 sections + embed, head (tied: the same bytes), head.norm */
  int n = check_sections("nm_qwen2", q, QWEN2, "model.norm.weight", 0);
  CHECKF(n == 21, "%d sections checked", n);
  /* 3 layers of 10 + embed, head, head.norm */
  n = check_sections("nm_gemma3", g, GEMMA3, "model.norm.weight", 0);
  CHECKF(n == 33, "%d sections checked", n);
}

TEST(convert_names_untied_config_without_a_head_fails) {
  const char *d = fresh_dir("nm_nohead");
  CHECK(d && fx_write_tiny_lfm2(d, NULL) == 0);
  char path[700], *text = NULL, cmd[2048], edited[4096];
  static char log[8192];
  snprintf(path, sizeof path, "%s/config.json", d);
  CHECK(wisp_read_file(path, &text, NULL) == WISP_OK);
  const char *key = "\"tie_word_embeddings\": true";
  const char *tie = strstr(text, key);
  const int found = tie != NULL;
  if (found) snprintf(edited, sizeof edited, "%.*s\"tie_word_embeddings\": false%s", (int)(tie - text), text, tie + strlen(key));
  free(text);
  CHECK(found && fx_write_bytes(path, edited, strlen(edited)) == 0);
  snprintf(cmd, sizeof cmd, "%s convert %s -o %s/nm_nohead_art --quiet", test_wisp_bin(), d, test_tmpdir());
  CHECK(test_run(cmd, log, sizeof log) == 1);
  CHECKF(strstr(log, "missing tensor 'lm_head.weight'") != NULL, "%s", log);
}
