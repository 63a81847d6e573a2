/* The seed profile's session switches on a whole Qwen 3.5 model (docs/webgpu.md, "The seed
 * profile's session switches"): for each switch, greedy tokens with it off equal those with it on
 * and the CPU backend's, and the WebGPU backend's dispatches per decoded token differ by what
 * the switch fuses (so a switch that did nothing would fail).
 *
 * The model is written here as a Hugging Face checkpoint and converted with --quant q4k: hidden
 * 256, FFN 512, 4 heads of 64 (2 KV heads), Gated DeltaNet 2 k-heads x 32 / 4 v-heads x 64, so
 * every product of every layer is Q4_K (columns 256 or 512; qwen35-small reaches Q4_K only in
 * mlp.down); layers linear, linear, full, linear; vocab 300, untied Q4Z head (a tied random head
 * mostly repeats the input token). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backend/webgpu/wgpu_backend.h"
#include "engine/engine.h"
#include "st_fixture.h"
#include "test.h"
#include "util/err.h"
#include "webgpu_fixture.h"

enum { SH = 256, SF = 512, SV = 300, SD = 64, SNH = 4, SKV = 2, SCK = 4, SLK = 2, SLVH = 4, SDK = 32, SDV = 64 };
enum { SK = SLK * SDK, SVW = SLVH * SDV, SCONV = 2 * SK + SVW };

static float sval(const char *name, int64_t i) {
  uint32_t x = 2166136261u;
  for (const char *p = name; *p; p++) x = (x ^ (uint8_t)*p) * 16777619u;
  x ^= (uint32_t)(i * 2654435761u);
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  float u = (float)(x >> 8) / 16777216.0f - 0.5f;
  if (strstr(name, "linear_attn.norm")) return 1.0f + 0.2f * u;
  if (strstr(name, "norm")) return 0.2f * u;
  if (strstr(name, "A_log")) return logf(0.02f + 0.98f * (u + 0.5f));
  if (strstr(name, "dt_bias")) return -2.0f + 0.5f * u;
  if (strstr(name, "conv1d")) return 0.8f * u;
  if (strstr(name, "embed_tokens") || strstr(name, "lm_head")) return 1.2f * u;
  return 0.15f * u;
}

/* Positions the checkpoints are made for (webgpu_qwen_persistent_grouped_long
 * makes its model for more). */
static int g_max_pos = 512;

/* Writes the checkpoint for layer types `full` (1 = full attention) into dir. */
static int write_model(const char *dir, const int *full, int nl) {
  char path[1024], types[1024] = "", cfg[3000];
  for (int i = 0; i < nl; i++)
    snprintf(types + strlen(types), sizeof types - strlen(types), "%s\"%s\"", i ? ", " : "",
             full[i] ? "full_attention" : "linear_attention");
  snprintf(cfg, sizeof cfg,
           "{\"architectures\": [\"Qwen3_5ForCausalLM\"], \"model_type\": \"qwen3_5_text\", \"hidden_size\": %d,"
           " \"intermediate_size\": %d, \"num_hidden_layers\": %d, \"num_attention_heads\": %d,"
           " \"num_key_value_heads\": %d, \"head_dim\": %d, \"linear_conv_kernel_dim\": %d,"
           " \"linear_num_key_heads\": %d, \"linear_num_value_heads\": %d, \"linear_key_head_dim\": %d,"
           " \"linear_value_head_dim\": %d, \"layer_types\": [%s], \"vocab_size\": %d, \"rms_norm_eps\": 1e-06,"
           " \"max_position_embeddings\": %d, \"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\":"
           " 10000000.0, \"partial_rotary_factor\": 0.25}, \"tie_word_embeddings\": false, \"hidden_act\": \"silu\"}\n",
           SH, SF, nl, SNH, SKV, SD, SCK, SLK, SLVH, SDK, SDV, types, SV, g_max_pos);
  snprintf(path, sizeof path, "%s/config.json", dir);
  if (fx_write_bytes(path, cfg, strlen(cfg))) return -1;
  int cap = 3 + 16 * nl, n = 0;
  fx_tensor *t = calloc((size_t)cap, sizeof *t);
  char(*names)[96] = calloc((size_t)cap, 96);
  float **data = calloc((size_t)cap, sizeof *data);
  if (!t || !names || !data) return -1;
#define ADD(nd, s0, s1, s2, ...)                                         \
  do {                                                                   \
    snprintf(names[n], 96, __VA_ARGS__);                                 \
    t[n] = (fx_tensor){names[n], "F32", nd, {s0, s1, s2, 0}, NULL};      \
    n++;                                                                 \
  } while (0)
  ADD(2, SV, SH, 0, "model.embed_tokens.weight");
  ADD(1, SH, 0, 0, "model.norm.weight");
  ADD(2, SV, SH, 0, "lm_head.weight");
  for (int i = 0; i < nl; i++) {
    ADD(1, SH, 0, 0, "model.layers.%d.input_layernorm.weight", i);
    ADD(1, SH, 0, 0, "model.layers.%d.post_attention_layernorm.weight", i);
    ADD(2, SF, SH, 0, "model.layers.%d.mlp.gate_proj.weight", i);
    ADD(2, SF, SH, 0, "model.layers.%d.mlp.up_proj.weight", i);
    ADD(2, SH, SF, 0, "model.layers.%d.mlp.down_proj.weight", i);
    if (full[i]) {
      ADD(2, SNH * 2 * SD, SH, 0, "model.layers.%d.self_attn.q_proj.weight", i);
      ADD(2, SKV * SD, SH, 0, "model.layers.%d.self_attn.k_proj.weight", i);
      ADD(2, SKV * SD, SH, 0, "model.layers.%d.self_attn.v_proj.weight", i);
      ADD(2, SH, SNH * SD, 0, "model.layers.%d.self_attn.o_proj.weight", i);
      ADD(1, SD, 0, 0, "model.layers.%d.self_attn.q_norm.weight", i);
      ADD(1, SD, 0, 0, "model.layers.%d.self_attn.k_norm.weight", i);
    } else {
      ADD(2, SCONV, SH, 0, "model.layers.%d.linear_attn.in_proj_qkv.weight", i);
      ADD(2, SVW, SH, 0, "model.layers.%d.linear_attn.in_proj_z.weight", i);
      ADD(2, SLVH, SH, 0, "model.layers.%d.linear_attn.in_proj_b.weight", i);
      ADD(2, SLVH, SH, 0, "model.layers.%d.linear_attn.in_proj_a.weight", i);
      ADD(3, SCONV, 1, SCK, "model.layers.%d.linear_attn.conv1d.weight", i);
      ADD(1, SLVH, 0, 0, "model.layers.%d.linear_attn.dt_bias", i);
      ADD(1, SLVH, 0, 0, "model.layers.%d.linear_attn.A_log", i);
      ADD(1, SDV, 0, 0, "model.layers.%d.linear_attn.norm.weight", i);
      ADD(2, SH, SVW, 0, "model.layers.%d.linear_attn.out_proj.weight", i);
    }
  }
#undef ADD
  int rc = 0;
  for (int k = 0; k < n && !rc; k++) {
    int64_t numel = 1;
    for (int d = 0; d < t[k].ndim; d++) numel *= t[k].shape[d];
    data[k] = malloc(sizeof(float) * (size_t)numel);
    if (!data[k]) rc = -1;
    for (int64_t e = 0; !rc && e < numel; e++) data[k][e] = sval(t[k].name, e);
    t[k].data = data[k];
  }
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  if (!rc) rc = fx_write_safetensors(path, t, n);
  for (int k = 0; k < n; k++) free(data[k]);
  free(data);
  free(names);
  free(t);
  return rc;
}

/* The q4k artifact of the layer pattern (converted once per run); NULL on failure. */
static const char *model_dir(const char *name, const int *full, int nl, char *log, size_t cap) {
  static char made[3][700];
  int slot = g_max_pos != 512 ? 2 : nl == 4 ? 0 : 1;
  if (made[slot][0]) return made[slot];
  char hf[600], art[700], cmd[2048];
  snprintf(hf, sizeof hf, "%s/%s_hf", test_tmpdir(), name);
  snprintf(art, sizeof art, "%s/%s", test_tmpdir(), name);
  mkdir(hf, 0755);
  if (write_model(hf, full, nl)) {
    snprintf(log, cap, "writing %s failed", hf);
    return NULL;
  }
  snprintf(cmd, sizeof cmd, "%s convert %s -o %s --quant q4k --quiet", test_wisp_bin(), hf, art);
  if (test_run(cmd, log, cap)) return NULL;
  snprintf(made[slot], sizeof made[slot], "%s", art);
  return made[slot];
}

/* A profile extending `parent` with the session object `session` (JSON text). */
static const char *profile(const char *name, const char *parent, const char *session) {
  static char paths[16][600];
  static int k;
  k = (k + 1) % 16;
  snprintf(paths[k], sizeof paths[k], "%s/%s.json", test_tmpdir(), name);
  FILE *f = fopen(paths[k], "w");
  if (!f) return NULL;
  fprintf(f, "{\"id\": \"qswitch/%s\", \"extends\": \"%s\", \"runtime\": {\"inference\": {\"session\": %s}}}\n", name,
          parent, session);
  fclose(f);
  return paths[k];
}

#define NPROMPT 11
#define NMEASURE 20 /* one token per submit, positions 11..30: dispatches per token */
#define NMORE 40    /* the plan's decode loop, crossing 64 positions (flash-decoding splits) */
#define NNEXT 20    /* with g_next: a second prompt after the decode loop (a prefill after decode steps)... */
#define NAFTER 4    /* ... and the greedy tokens after it, one eval each */

/* generate's second prompt (the persistent decode's test): a prefill that
 * must find the states the decode loop left, wherever it kept them. */
static int g_next;

typedef struct {
  int32_t tokens[1 + NMEASURE + NMORE];
  double dispatches_per_token;
  uint64_t argmax_fused, submits_more;
  uint64_t dn_split; /* one-token DeltaNet steps through the split decode core (dn_decode + dn_norm) */
  uint64_t sb;       /* products by q4k_sb.wgsl while measuring */
  uint64_t persistent; /* decode steps by the persistent decode (persist.wgsl), all of them */
  int32_t after[NAFTER]; /* with g_next: the greedy tokens after the second prompt */
  char plan_text[160];
} gen_result;

/* Prompt, first token from its logits, NMEASURE tokens one per submit, NMORE in the plan's batches. */
static int generate(const char *dir, const char *backend, const char *prof, const char *tuning, gen_result *r, char *err,
                    size_t cap) {
  memset(r, 0, sizeof *r);
  wisp_model *m = NULL;
  wisp_session *s = NULL;
  if (wisp_model_open(dir, &m)) {
    snprintf(err, cap, "open %s: %s", dir, wisp_last_error());
    return 0;
  }
  wisp_session_options o = {.backend = backend, .threads = 1, .profile = prof, .tuning = tuning};
  int ok = !wisp_session_new(m, &o, &s);
  if (!ok) snprintf(err, cap, "session (%s, profile %s): %s", backend, prof ? prof : "default", wisp_last_error());
  const int V = wisp_model_vocab(m);
  float *lg = malloc(sizeof(float) * V);
  int32_t prompt[NPROMPT];
  for (int i = 0; i < NPROMPT; i++) prompt[i] = (int32_t)((i * 53 + 7) % V);
  if (ok) ok = lg && !wisp_session_eval(s, prompt, NPROMPT, lg);
  if (ok) {
    int b = 0;
    for (int i = 1; i < V; i++)
      if (lg[i] > lg[b]) b = i;
    r->tokens[0] = b;
    wisp_wgpu_backend_stats s0 = {0}, s1 = {0}, s2 = {0};
    int gpu = wisp_wgpu_backend_stats_get(s->backend, &s0);
    /* sequential: the counts below are the forward pass's own (the pipelined loop adds one id copy a batch) */
    wisp_generate_options one = {.temperature = 0, .batch = 1, .sequential = 1}, plan = {.temperature = 0, .sequential = 1};
    int n1 = 0, n2 = 0;
    ok = !wisp_session_generate(s, r->tokens[0], NMEASURE, &one, r->tokens + 1, &n1) && n1 == NMEASURE;
    if (gpu) wisp_wgpu_backend_stats_get(s->backend, &s1);
    ok = ok && !wisp_session_generate(s, r->tokens[NMEASURE], NMORE, &plan, r->tokens + 1 + NMEASURE, &n2) &&
         n2 == NMORE;
    if (gpu) wisp_wgpu_backend_stats_get(s->backend, &s2);
    r->dispatches_per_token = (double)(s1.dispatches - s0.dispatches) / NMEASURE;
    r->argmax_fused = s1.argmax_fused - s0.argmax_fused;
    r->dn_split = s1.deltanet_split - s0.deltanet_split;
    r->sb = s1.q4k_superblock - s0.q4k_superblock;
    r->submits_more = s2.submits - s1.submits;
    r->persistent = s2.persistent_steps - s0.persistent_steps;
    int32_t next[NNEXT];
    for (int i = 0; i < NNEXT; i++) next[i] = (int32_t)((i * 29 + 3) % V);
    for (int i = 0; ok && g_next && i < NAFTER; i++) {
      ok = i ? !wisp_session_eval(s, &r->after[i - 1], 1, lg) : !wisp_session_eval(s, next, NNEXT, lg);
      int b = 0;
      for (int k = 1; ok && k < V; k++)
        if (lg[k] > lg[b]) b = k;
      r->after[i] = b;
    }
    if (!ok) snprintf(err, cap, "generate (%s): %s", backend, wisp_last_error());
  } else if (s) {
    snprintf(err, cap, "prompt: %s", wisp_last_error());
  }
  free(lg);
  wisp_session_free(s);
  wisp_model_close(m);
  return ok;
}

static const int k_layers4[4] = {0, 0, 1, 0};

typedef struct {
  const char *name, *session; /* the switch turned off */
  double extra;               /* dispatches per token more than with every switch on */
} switch_case;

/* Every switch on (the default profile) gives the CPU's tokens at 23 dispatches a token; each
 * switch off gives the same tokens at the dispatches it unfuses. The fused DeltaNet decode core
 * splits this model's 64-column v-heads over 16-column workgroups; the gated norm over each
 * whole head is computed by the out_proj product (q4k_matvec PRE 1); the stats' deltanet_split
 * counts the split steps. */
TEST(webgpu_qswitch_each_switch_off_same_tokens) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  char log[4096] = "", err[600] = "";
  const char *dir = model_dir("qswitch4", k_layers4, 4, log, sizeof log);
  CHECKF(dir, "model: %s", log);
  static gen_result cpu, on, off;
  CHECKF(generate(dir, "cpu", NULL, NULL, &cpu, err, sizeof err), "%s", err);
  CHECKF(generate(dir, "webgpu", NULL, NULL, &on, err, sizeof err), "%s", err);
  CHECKF(!memcmp(cpu.tokens, on.tokens, sizeof on.tokens), "all switches on: tokens differ from the cpu backend's");
  int distinct = 0; /* the comparison means something only if the stream is not one token repeated */
  for (int i = 0; i < 1 + NMEASURE + NMORE; i++) {
    int seen = 0;
    for (int k = 0; k < i; k++) seen |= on.tokens[k] == on.tokens[i];
    distinct += !seen;
  }
  CHECKF(distinct >= 8, "only %d distinct tokens in the greedy stream", distinct);
  printf("     all on: %d greedy tokens (%d distinct) equal to the cpu backend's\n", 1 + NMEASURE + NMORE, distinct);
  /* embed 1; per layer: norm+in_proj (or norm+qkv) 1, fused core 1 (dn_decode; the split heads'
   * gated norm is computed by the out_proj product while it stages its input, q4k_matvec PRE 1;
   * attention 1), out_proj 1, norm+gate/up+SwiGLU 1, down 1; norm+head+argmax 1; token choice 1 */
  CHECKF(on.dispatches_per_token == 23, "all on: %.2f dispatches a token", on.dispatches_per_token);
  CHECKF(on.dn_split == 3 * NMEASURE, "all on: %llu split DeltaNet steps", (unsigned long long)on.dn_split);
  CHECKF(on.argmax_fused == NMEASURE, "all on: %llu fused token choices", (unsigned long long)on.argmax_fused);
  /* the plan's decode kernel for Q4_K (wgsl_matvec_q4k_superblock): norm + in_proj / qkv,
   * norm + gate/up + SwiGLU and down of each layer, and the attention layer's o_proj (its
   * attention unsplit at these positions); the DeltaNet out_proj takes its gated norm
   * (q4k_matvec PRE 1) instead: 13 a token */
  CHECKF(on.sb == 13 * NMEASURE, "all on: %llu q4k_sb products", (unsigned long long)on.sb);
  static const switch_case cases[] = {
      {"usePostFfnNextInputRMSNormPairFusion", "{\"usePostFfnNextInputRMSNormPairFusion\": false}", 5},
      {"fusedFfnQ4K", "{\"fusedFfnQ4K\": false}", 8},
      {"useGreedyLmHeadArgmaxFusion", "{\"useGreedyLmHeadArgmaxFusion\": false}", 0},
      {"useOutputGateFusion", "{\"attentionDecodeOnline\": {\"useOutputGateFusion\": false}}", 1},
      {"useFusedQKVSplitQKNormRoPE", "{\"useFusedQKVSplitQKNormRoPE\": false}", 2},
      {"useLinearAttentionQKVZProjectionFusion", "{\"useLinearAttentionQKVZProjectionFusion\": false}", 6},
      {"useLinearAttentionABProjectionFusion", "{\"useLinearAttentionABProjectionFusion\": false}", 6},
      {"useLinearAttentionFusedDecodeCore", "{\"useLinearAttentionFusedDecodeCore\": false}", 3},
      {"useDirectContiguousKVLayout", "{\"attentionDecodeOnline\": {\"useDirectContiguousKVLayout\": false}}", 0},
      {"all", "{\"usePostFfnNextInputRMSNormPairFusion\": false, \"fusedFfnQ4K\": false, "
              "\"useGreedyLmHeadArgmaxFusion\": false, \"attentionDecodeOnline\": {\"useOutputGateFusion\": false, "
              "\"useDirectContiguousKVLayout\": false}, "
              "\"useFusedQKVSplitQKNormRoPE\": false, \"useLinearAttentionQKVZProjectionFusion\": false, "
              "\"useLinearAttentionABProjectionFusion\": false, \"useLinearAttentionFusedDecodeCore\": false}",
       28},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const char *pf = profile(cases[i].name, "profiles/default", cases[i].session);
    CHECK(pf);
    CHECKF(generate(dir, "webgpu", pf, NULL, &off, err, sizeof err), "%s off: %s", cases[i].name, err);
    int k = 0;
    while (k < 1 + NMEASURE + NMORE && off.tokens[k] == on.tokens[k]) k++;
    CHECKF(k == 1 + NMEASURE + NMORE, "%s off: tokens differ from on at %d", cases[i].name, k);
    CHECKF(off.dispatches_per_token == on.dispatches_per_token + cases[i].extra,
           "%s off: %.2f dispatches a token (on: %.2f, expected +%.0f)", cases[i].name, off.dispatches_per_token,
           on.dispatches_per_token, cases[i].extra);
    int argmax_off = !strcmp(cases[i].name, "useGreedyLmHeadArgmaxFusion") || !strcmp(cases[i].name, "all");
    CHECKF(off.argmax_fused == (argmax_off ? 0u : (uint64_t)NMEASURE), "%s off: %llu fused token choices",
           cases[i].name, (unsigned long long)off.argmax_fused);
    int core_off = !strcmp(cases[i].name, "useLinearAttentionFusedDecodeCore") || !strcmp(cases[i].name, "all");
    CHECKF(off.dn_split == (core_off ? 0u : 3u * NMEASURE), "%s off: %llu split DeltaNet steps", cases[i].name,
           (unsigned long long)off.dn_split);
    printf("     %-40s off: same %d tokens, %.0f dispatches a token (on: %.0f)\n", cases[i].name,
           1 + NMEASURE + NMORE, off.dispatches_per_token, on.dispatches_per_token);
  }
}

/* The profile's kernel geometry (fusedFfnQ4K.decode.pipelineConstants, lmHeadArgmaxQ4K) changes
 * the kernels, not the tokens; decodeLoop off (disableCommandBatching) submits every token. */
TEST(webgpu_qswitch_geometry_and_decode_loop) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  char log[4096] = "", err[600] = "";
  const char *dir = model_dir("qswitch4", k_layers4, 4, log, sizeof log);
  CHECKF(dir, "model: %s", log);
  static gen_result on, geo, loop_on, loop_off;
  CHECKF(generate(dir, "webgpu", NULL, NULL, &on, err, sizeof err), "%s", err);
  const char *pg = profile("geometry", "profiles/default",
                           "{\"fusedFfnQ4K\": {\"decode\": {\"variant\": \"q4k_metal_simd16\", \"pipelineConstants\": "
                           "{\"WORKGROUP_SIZE\": 64, \"COLS_PER_WG\": 4, \"THREADS_PER_COL\": 16, "
                           "\"USE_FULL_BLOCK_FAST_PATH\": false}}}, \"lmHeadArgmaxQ4K\": {\"colsPerWorkgroup\": 32, "
                           "\"threadsPerCol\": 4, \"useFullBlockFastPath\": false}}");
  CHECKF(generate(dir, "webgpu", pg, NULL, &geo, err, sizeof err), "geometry: %s", err);
  CHECK(!memcmp(on.tokens, geo.tokens, sizeof on.tokens) && geo.dispatches_per_token == on.dispatches_per_token);
  const char *pon = profile("loop-on", "profiles/throughput", "{}");
  const char *poff = profile("loop-off", "profiles/throughput", "{\"decodeLoop\": {\"disableCommandBatching\": true}}");
  CHECKF(generate(dir, "webgpu", pon, NULL, &loop_on, err, sizeof err), "decodeLoop on: %s", err);
  CHECKF(generate(dir, "webgpu", poff, NULL, &loop_off, err, sizeof err), "decodeLoop off: %s", err);
  CHECK(!memcmp(on.tokens, loop_on.tokens, sizeof on.tokens) && !memcmp(on.tokens, loop_off.tokens, sizeof on.tokens));
  /* 40 tokens: one batch of up to 64 (a submit for the steps, one for reading the ids), or 40 of one */
  CHECKF(loop_on.submits_more <= 3 && loop_off.submits_more >= 40, "decodeLoop on: %llu submits, off: %llu",
         (unsigned long long)loop_on.submits_more, (unsigned long long)loop_off.submits_more);
  printf("     decodeLoop: 40 tokens in %llu submits (off: %llu), same tokens\n",
         (unsigned long long)loop_on.submits_more, (unsigned long long)loop_off.submits_more);
}

/* `wisp plan` shows every switch with on/off and where it came from; on the cpu backend it says
 * they do not apply; bad values are one-line errors. */
TEST(webgpu_qswitch_plan_shows_switches) {
  char log[4096] = "", out[16384], cmd[2048];
  const char *dir = model_dir("qswitch4", k_layers4, 4, log, sizeof log);
  CHECKF(dir, "model: %s", log);
  const char *pf = profile("plan-off", "profiles/throughput",
                           "{\"useLinearAttentionFusedDecodeCore\": false, \"attentionDecodeOnline\": "
                           "{\"useOutputGateFusion\": false}}");
  snprintf(cmd, sizeof cmd, "%s plan -m %s --profile %s --backend cpu", test_wisp_bin(), dir, pf);
  CHECKF(test_run(cmd, out, sizeof out) == 0, "%s", out);
  CHECKF(strstr(out, "session switches (do not apply on the cpu backend") &&
             strstr(out, "useLinearAttentionFusedDecodeCore") && strstr(out, "off  [qswitch/plan-off: "
                                                                          "runtime.inference.session."
                                                                          "useLinearAttentionFusedDecodeCore]") &&
             strstr(out, "attentionDecodeOnline.useOutputGateFusion") &&
             strstr(out, "[qswitch/plan-off: runtime.inference.session.attentionDecodeOnline.useOutputGateFusion]") &&
             strstr(out, "decodeLoop") && strstr(out, "[profiles/throughput: runtime.inference.session.decodeLoop]") &&
             strstr(out, "fusedFfnQ4K.decode") && strstr(out, "[default]"),
         "%s", out);
  snprintf(cmd, sizeof cmd, "%s plan -m %s --profile %s --backend cpu --json", test_wisp_bin(), dir, pf);
  CHECKF(test_run(cmd, out, sizeof out) == 0, "%s", out);
  CHECKF(strstr(out, "\"useLinearAttentionFusedDecodeCore\":{\"from\":\"qswitch/plan-off: "
                     "runtime.inference.session.useLinearAttentionFusedDecodeCore\",\"on\":false}") &&
             strstr(out, "\"appliesTo\":\"none: the cpu backend"),
         "%s", out);
  /* bad values */
  static const char *bad[][2] = {
      {"{\"fusedFfnQ4K\": {\"decode\": {\"variant\": \"q4k_fast\"}}}", "is not a fused FFN variant wisp has"},
      {"{\"fusedFfnQ4K\": {\"decode\": {\"pipelineConstants\": {\"WORKGROUP_SIZE\": 128}}}}",
       "WORKGROUP_SIZE 128 must be COLS_PER_WG 16 x THREADS_PER_COL 16"},
      {"{\"lmHeadArgmaxQ4K\": {\"threadsPerCol\": 3}}", "threadsPerCol 3 (a power of two)"},
      {"{\"attentionDecodeOnline\": {\"useOutputGate\": true}}", "useOutputGate: unknown field"},
      {"{\"useFusedQKVSplitQKNormRoPE\": 1}", "expected a boolean"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    const char *pb = profile("bad", "profiles/default", bad[i][0]);
    snprintf(cmd, sizeof cmd, "%s profile check %s", test_wisp_bin(), pb);
    int rc = test_run(cmd, out, sizeof out);
    CHECKF(rc != 0 && strstr(out, bad[i][1]), "%s: rc %d: %s", bad[i][0], rc, out);
  }
  /* the webgpu plan's decode kernel for the Q4_K products: q4k_sb (the registry's decode rule) */
  snprintf(cmd, sizeof cmd, "%s plan --profile exact -m %s --backend webgpu", test_wisp_bin(), dir);
  int rc = test_run(cmd, out, sizeof out);
  if (rc == 0 || !strstr(out, "WebGPU")) /* the plan of a webgpu session needs a device */
    CHECKF(rc == 0 && strstr(out, "wgsl_matvec_q4k_superblock") && strstr(out, "wgsl_tiled_q4k") &&
               /* the persistent decode the registry has for the architecture, from 32 steps a batch */
               strstr(out, "persistentDecode=persistent_decode/wgsl_qwen3_5 minSteps=32"),
           "%s", out);
  snprintf(cmd, sizeof cmd, "%s plan --profile exact -m %s --backend webgpu --json", test_wisp_bin(), dir);
  rc = test_run(cmd, out, sizeof out);
  if (rc == 0 || !strstr(out, "WebGPU"))
    CHECKF(rc == 0 && strstr(out, "\"persistentDecode\":\"persistent_decode/wgsl_qwen3_5\"") &&
               strstr(out, "\"persistentDecodeMinSteps\":32"),
           "%s", out);
  snprintf(cmd, sizeof cmd, "%s plan --profile exact -m %s --backend cpu", test_wisp_bin(), dir);
  CHECKF(test_run(cmd, out, sizeof out) == 0 && strstr(out, "persistentDecode=none (the cpu backend)"), "%s", out);
  /* useDirectContiguousKVLayout false: implemented (strided cache addressing), shown off */
  const char *pk = profile("kv", "profiles/default", "{\"attentionDecodeOnline\": {\"useDirectContiguousKVLayout\": false}}");
  snprintf(cmd, sizeof cmd, "%s plan -m %s --profile %s --backend cpu", test_wisp_bin(), dir, pk);
  CHECKF(test_run(cmd, out, sizeof out) == 0 && !strstr(out, "not implemented") &&
             strstr(out, "attentionDecodeOnline.useDirectContiguousKVLayout  off"),
         "%s", out);
}

/* The 0.8B layer pattern (18 linear + 6 full: 3 linear then 1 full, six times) at this test's
 * small dimensions: dispatches per token do not depend on the dimensions. Only with
 * WISP_QSWITCH_08B=1 (outside `make test`): prints the counts for docs/webgpu.md. */
TEST(webgpu_qswitch_08b_layer_pattern_counts) {
  if (!getenv("WISP_QSWITCH_08B")) return;
  WEBGPU_OR_SKIP(d);
  (void)d;
  int full[24];
  for (int i = 0; i < 24; i++) full[i] = i % 4 == 3;
  char log[4096] = "", err[600] = "";
  const char *dir = model_dir("qswitch24", full, 24, log, sizeof log);
  CHECKF(dir, "model: %s", log);
  static gen_result on, off;
  CHECKF(generate(dir, "webgpu", NULL, NULL, &on, err, sizeof err), "%s", err);
  const char *pf = profile("all-off", "profiles/default",
                           "{\"usePostFfnNextInputRMSNormPairFusion\": false, \"fusedFfnQ4K\": false, "
                           "\"useGreedyLmHeadArgmaxFusion\": false, \"attentionDecodeOnline\": {\"useOutputGateFusion\": "
                           "false}, \"useFusedQKVSplitQKNormRoPE\": false, \"useLinearAttentionQKVZProjectionFusion\": "
                           "false, \"useLinearAttentionABProjectionFusion\": false, "
                           "\"useLinearAttentionFusedDecodeCore\": false}");
  CHECKF(generate(dir, "webgpu", pf, NULL, &off, err, sizeof err), "%s", err);
  CHECK(!memcmp(on.tokens, off.tokens, sizeof on.tokens));
  printf("     0.8B layer pattern: %.0f dispatches a token with every switch on, %.0f with every switch off\n",
         on.dispatches_per_token, off.dispatches_per_token);
}

/* Every Q4_K product of this model (256 and 512 columns) by q4k_sb.wgsl, a thread per
 * super-block (tuning q4kSbCols=256): norm + in_proj, norm + gate/up + SwiGLU and the
 * plain products; the CPU's tokens, at the same dispatches a token as the default kernels. */
TEST(webgpu_qswitch_superblock_kernel_same_tokens) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  char log[4096] = "", err[600] = "";
  const char *dir = model_dir("qswitch4", k_layers4, 4, log, sizeof log);
  CHECKF(dir, "model: %s", log);
  static gen_result cpu, sb, none;
  CHECKF(generate(dir, "cpu", NULL, NULL, &cpu, err, sizeof err), "%s", err);
  int ok = generate(dir, "webgpu", NULL, "q4kSbCols=256", &sb, err, sizeof err);
  /* the lane-group kernels (q4k_fused, q4k_matvec) */
  ok = ok && generate(dir, "webgpu", NULL, "q4kSbCols=0", &none, err, sizeof err);
  CHECKF(ok, "%s", err);
  CHECKF(!memcmp(cpu.tokens, sb.tokens, sizeof sb.tokens), "super-block kernel: tokens differ from the cpu backend's");
  CHECKF(!memcmp(cpu.tokens, none.tokens, sizeof none.tokens),
         "lane-group kernels: tokens differ from the cpu backend's");
  CHECKF(sb.dispatches_per_token == 23 && none.dispatches_per_token == 23, "%.2f / %.2f dispatches a token",
         sb.dispatches_per_token, none.dispatches_per_token);
  CHECKF(sb.sb == 13 * NMEASURE && none.sb == 0, "q4k_sb products: %llu with it, %llu without",
         (unsigned long long)sb.sb, (unsigned long long)none.sb);
}

/* The persistent decode (persist.wgsl: every decode step of a batch in one dispatch; on by
 * default on GPUs, asked for here because lavapipe is a CPU adapter) gives the CPU's tokens: one
 * workgroup doing every phase; three, whose phases meet at grid barriers and whose attention keys
 * are split three ways past position 64; f16 KV; and a batch whose barrier "gives up"
 * (tuning persistFail=2: its ids void, its conv rings and recurrent states scribbled on),
 * which the decode loop must redo op by op from the states backed up before it. After each, a
 * second prompt (a prefill after the persistent steps: it must see the states they left) and
 * greedy tokens after it. */
TEST(webgpu_qwen_persistent_decode_same_tokens) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  g_next = 1;
  char log[4096] = "", err[600] = "";
  const char *dir = model_dir("qswitch4", k_layers4, 4, log, sizeof log);
  CHECKF(dir, "model: %s", log);
  static gen_result cpu, run;
  CHECKF(generate(dir, "cpu", NULL, NULL, &cpu, err, sizeof err), "%s", err);
  static const struct {
    const char *tuning;
    int steps; /* decode steps the persistent kernel runs (the failed run's counted) */
  } cases[] = {{NULL, 0}, /* default: not on a CPU adapter */
               {"persist=1,persistGrid=1,persistMinSteps=2", NMORE}, /* batches of 1 op by op, the plan's (40) persistent */
               {"persist=1,persistGrid=1", NMEASURE + NMORE},
               /* grouped-query attention (persistOpt bit 32): the kernel webgpu_qwen_persistent_grouped_long runs */
               {"persist=1,persistGrid=3,persistSplits=3,persistOpt=41", NMEASURE + NMORE},
               {"persist=1,persistGrid=3,persistSplits=3,kv=f16,persistRp=1", NMEASURE + NMORE}, /* each row in quarters */
               {"persist=1,persistGrid=2,persistFail=2,persistRp=2", 2}};                       /* each row in halves */
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    /* case 1 decodes the plan's part in the throughput profile's batches (up to 64 steps) */
    const char *prof = c == 1 ? profile("persist-throughput", "profiles/throughput", "{}") : NULL;
    int ok = generate(dir, "webgpu", prof, cases[c].tuning, &run, err, sizeof err);
    CHECKF(ok, "case %zu: %s", c, err);
    CHECKF(!memcmp(cpu.tokens, run.tokens, sizeof run.tokens), "case %zu: tokens differ from the cpu backend's", c);
    CHECKF(run.persistent == (uint64_t)cases[c].steps, "case %zu: %llu persistent steps, expected %d", c,
           (unsigned long long)run.persistent, cases[c].steps);
    /* (not case 1: the throughput profile's int8 prefill products give the second prompt other logits) */
    CHECKF(c == 1 || !memcmp(cpu.after, run.after, sizeof run.after), "case %zu: after a second prompt: %d %d %d %d, cpu %d %d %d %d",
           c, run.after[0], run.after[1], run.after[2], run.after[3], cpu.after[0], cpu.after[1], cpu.after[2],
           cpu.after[3]);
  }
  g_next = 0;
}

/* The persistent decode's gated attention past one chunk of keys, on a
 * 530-token prompt: the grouped-query kernel (persistOpt bit 32,
 * attn_group: a task per KV head and split, its two query heads together)
 * past 16 splits a head (17 here, in 32-key blocks), whose merge then
 * reads the splits from the arena (stage_attn_gated_long); and the
 * streamed one (bit 256, the default: attn_stream, 2 splits of 265+ keys,
 * each two chunks of 256), with f32 and f16 K/V. Each against a
 * reference's greedy tokens and logits of one more token (which read the
 * K/V rows the decode wrote): the CPU backend's, and for f16 K/V the
 * op-by-op decode's with f16 K/V. */
enum { GL_PROMPT = 530, GL_STEPS = 16, GL_RUNS = 5 };
TEST(webgpu_qwen_persistent_grouped_long) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  char log[4096] = "";
  g_max_pos = 1024;
  const char *dir = model_dir("qswitch4long", k_layers4, 4, log, sizeof log);
  g_max_pos = 512;
  CHECKF(dir, "model: %s", log);
  static const char *tunings[GL_RUNS] = {NULL, "persist=1,persistGrid=3,persistSplits=20,persistOpt=41",
                                         "persist=1,persistGrid=2,persistSplits=2",
                                         "persist=0,kv=f16", "persist=1,persistGrid=2,persistSplits=2,kv=f16"};
  static const char *names[GL_RUNS] = {"cpu", "persistent grouped", "persistent streamed", "op by op f16",
                                       "persistent streamed f16"};
  static const int ref[GL_RUNS] = {0, 0, 0, 3, 3}, persistent[GL_RUNS] = {0, 1, 1, 0, 1};
  static int32_t tok[GL_RUNS][GL_STEPS];
  static float after[GL_RUNS][SV]; /* the logits of one more token: the caches the decode wrote, read back */
  for (int b = 0; b < GL_RUNS; b++) {
    wisp_model *m = NULL;
    wisp_session *s = NULL;
    CHECKF(wisp_model_open(dir, &m) == WISP_OK, "%s", wisp_last_error());
    wisp_session_options o = {.backend = b ? "webgpu" : "cpu", .threads = 1, .tuning = tunings[b]};
    wisp_status st = wisp_session_new(m, &o, &s);
    const int V = wisp_model_vocab(m);
    static int32_t prompt[GL_PROMPT];
    static float lg[SV];
    for (int i = 0; i < GL_PROMPT; i++) prompt[i] = (int32_t)((i * 53 + 7) % V);
    if (!st) st = wisp_session_eval(s, prompt, GL_PROMPT, lg);
    int best = 0;
    for (int i = 1; i < V; i++)
      if (lg[i] > lg[best]) best = i;
    tok[b][0] = best;
    int n = 0;
    wisp_generate_options go = {.temperature = 0, .batch = 8};
    if (!st) st = wisp_session_generate(s, best, GL_STEPS - 1, &go, tok[b] + 1, &n);
    if (!st) st = wisp_session_eval(s, &tok[b][GL_STEPS - 1], 1, after[b]);
    wisp_wgpu_backend_stats stats = {0};
    if (!st && b) wisp_wgpu_backend_stats_get(s->backend, &stats);
    const char *why = st ? wisp_last_error() : "";
    wisp_session_free(s);
    wisp_model_close(m);
    CHECKF(!st && n == GL_STEPS - 1, "%s: %s (%d tokens)", names[b], why, n);
    CHECKF(stats.persistent_steps == (persistent[b] ? GL_STEPS - 1 : 0), "%s: %llu persistent steps", names[b],
           (unsigned long long)stats.persistent_steps);
    const int r = ref[b];
    int at = 0;
    while (at < GL_STEPS && tok[r][at] == tok[b][at]) at++;
    CHECKF(at == GL_STEPS, "token %d: %s %d, %s %d", at, names[r], tok[r][at], names[b], tok[b][at]);
    double worst = 0, mx = 0;
    for (int i = 0; i < SV; i++) worst = fmax(worst, fabs((double)after[r][i] - after[b][i])), mx = fmax(mx, fabs(after[r][i]));
    CHECKF(worst <= 1e-3 * mx, "%s: logits after the decode: max|diff| %g of max|%s| %g", names[b], worst, names[r], mx);
  }
}
