/* Qwen3 (dense) import: a tiny Qwen3ForCausalLM checkpoint written from C,
 * converted (f32) and run, against an independent double-precision forward
 * written here from the formulas (RMSNorm, q/k per-head RMSNorm before
 * rotate-half RoPE, GQA causal attention, SwiGLU, untied head), for prefill
 * of several lengths and for greedy decoding (decode path vs a full
 * recompute of the reference at every step). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cJSON.h>

#include "engine/session.h"
#include "st_fixture.h"
#include "test.h"
#include "wisp.h"

enum { QH = 64, QF = 96, QV = 80, QD = 32, QNH = 4, QKV = 2, QL = 2 };
#define QTHETA 10000.0
#define QEPS 1e-6
/* 1: the same model as a LlamaForCausalLM: no q/k norm, llama3 rope scaling
 * (factor 8, low/high freq factors 1/4, original context 64). */
static int g_llama;

/* The config's max_position_embeddings. */
static int g_max_pos = 128;

/* The reference below (qw .. forward) is TEST_UNSANITIZED: instrumented,
 * its 4,160-token forward pass (llama_tiny_runs_past_4096_positions) was a
 * fifth of that test's time under ASan, checking only this file's
 * arithmetic. */

/* The first n values of a tensor, from a cache of the values made so far
 * (the long context test reads each weight thousands of times). */
TEST_UNSANITIZED static const double *qw(const char *fmt, int layer, int64_t n) {
  enum { SLOTS = 64 };
  static struct { char name[128]; double *v; int64_t n; } cache[SLOTS];
  char name[128];
  snprintf(name, sizeof name, fmt, layer);
  int k = 0;
  while (k < SLOTS && cache[k].v && strcmp(cache[k].name, name)) k++;
  if (k == SLOTS) abort(); /* more tensors than the tiny model has */
  if (n > cache[k].n) {
    double *v = realloc(cache[k].v, sizeof(double) * (size_t)n);
    if (!v) abort();
    for (int64_t j = cache[k].n; j < n; j++) v[j] = (double)fx_tiny_value(name, 7, j);
    snprintf(cache[k].name, sizeof cache[k].name, "%s", name);
    cache[k].v = v;
    cache[k].n = n;
  }
  return cache[k].v;
}

TEST_UNSANITIZED static double qv(const char *fmt, int layer, int64_t i) { return qw(fmt, layer, i + 1)[i]; }

static int write_tiny_qwen3(const char *dir) {
  char path[800];
  snprintf(path, sizeof path, "%s/config.json", dir);
  char cfg[1024];
  const char *scaling = g_llama ? ", \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0, \"low_freq_factor\": 1.0, "
                                  "\"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 64}" : "";
  snprintf(cfg, sizeof cfg,
           "{\"architectures\": [\"%s\"], \"model_type\": \"%s\", \"hidden_size\": %d, "
           "\"intermediate_size\": %d, \"num_hidden_layers\": %d, \"num_attention_heads\": %d, "
           "\"num_key_value_heads\": %d, \"head_dim\": %d, \"vocab_size\": %d, \"rms_norm_eps\": 1e-06, "
           "\"rope_theta\": 10000.0, \"max_position_embeddings\": %d, \"tie_word_embeddings\": false, "
           "\"attention_bias\": false, \"hidden_act\": \"silu\", \"use_sliding_window\": false%s}",
           g_llama ? "LlamaForCausalLM" : "Qwen3ForCausalLM", g_llama ? "llama" : "qwen3", QH, QF, QL, QNH, QKV, QD, QV,
           g_max_pos, scaling);
  if (fx_write_bytes(path, cfg, strlen(cfg))) return -1;
  enum { MAXT = 2 * 9 + 3 };
  fx_tensor t[MAXT];
  static char names[MAXT][96];
  int n = 0;
  struct { const char *fmt; int r, c; } per[] = {
      {"model.layers.%d.input_layernorm.weight", 1, QH},        {"model.layers.%d.post_attention_layernorm.weight", 1, QH},
      {"model.layers.%d.self_attn.q_proj.weight", QNH * QD, QH}, {"model.layers.%d.self_attn.k_proj.weight", QKV * QD, QH},
      {"model.layers.%d.self_attn.v_proj.weight", QKV * QD, QH}, {"model.layers.%d.self_attn.o_proj.weight", QH, QNH * QD},
      {"model.layers.%d.self_attn.q_norm.weight", 1, QD},       {"model.layers.%d.self_attn.k_norm.weight", 1, QD},
      {"model.layers.%d.mlp.gate_proj.weight", QF, QH}};
  for (int l = 0; l < QL; l++)
    for (size_t k = 0; k < sizeof per / sizeof *per; k++) {
      if (g_llama && strstr(per[k].fmt, "_norm.")) continue;
      snprintf(names[n], sizeof names[n], per[k].fmt, l);
      t[n] = (fx_tensor){names[n], "F32", per[k].r == 1 ? 1 : 2, {per[k].r == 1 ? per[k].c : per[k].r, per[k].c}, NULL};
      n++;
    }
  static fx_tensor all[64];
  static char more[64][96];
  int m = 0;
  for (int i = 0; i < n; i++) all[m++] = t[i];
  for (int l = 0; l < QL; l++) {
    snprintf(more[m], sizeof more[m], "model.layers.%d.mlp.up_proj.weight", l);
    all[m] = (fx_tensor){more[m], "F32", 2, {QF, QH}, NULL};
    m++;
    snprintf(more[m], sizeof more[m], "model.layers.%d.mlp.down_proj.weight", l);
    all[m] = (fx_tensor){more[m], "F32", 2, {QH, QF}, NULL};
    m++;
  }
  all[m++] = (fx_tensor){"model.embed_tokens.weight", "F32", 2, {QV, QH}, NULL};
  all[m++] = (fx_tensor){"lm_head.weight", "F32", 2, {QV, QH}, NULL};
  all[m++] = (fx_tensor){"model.norm.weight", "F32", 1, {QH}, NULL};
  float *data[64] = {0};
  for (int i = 0; i < m; i++) {
    int64_t ne = all[i].shape[0] * (all[i].ndim == 2 ? all[i].shape[1] : 1);
    data[i] = malloc(sizeof(float) * (size_t)ne);
    for (int64_t j = 0; j < ne; j++) data[i][j] = fx_tiny_value(all[i].name, 7, j);
    all[i].data = data[i];
  }
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  int rc = fx_write_safetensors(path, all, m);
  for (int i = 0; i < m; i++) free(data[i]);
  return rc;
}

int fx_write_tiny_qwen3(const char *dir, int llama) {
  const int keep = g_llama;
  g_llama = llama;
  int rc = write_tiny_qwen3(dir);
  g_llama = keep;
  return rc;
}

TEST_UNSANITIZED static void rms(const double *x, int n, const char *fmt, int layer, double *out) {
  const double *w = qw(fmt, layer, n);
  double ss = 0;
  for (int i = 0; i < n; i++) ss += x[i] * x[i];
  double r = 1.0 / sqrt(ss / n + QEPS);
  for (int i = 0; i < n; i++) out[i] = x[i] * r * w[i];
}

TEST_UNSANITIZED static void mv(const char *fmt, int layer, int rows, int cols, const double *x, double *y) {
  const double *w = qw(fmt, layer, (int64_t)rows * cols);
  for (int r = 0; r < rows; r++) {
    double s = 0;
    for (int c = 0; c < cols; c++) s += w[(int64_t)r * cols + c] * x[c];
    y[r] = s;
  }
}

/* inv_freq[j] = theta^(-2j/D); Llama 3 scaling as transformers'
 * _compute_llama3_parameters: wavelengths above old/low divided by factor,
 * below old/high kept, in between smoothly interpolated. */
TEST_UNSANITIZED static double inv_freq(int j) {
  double inv = pow(QTHETA, -2.0 * j / QD);
  if (!g_llama) return inv;
  const double factor = 8, low = 1, high = 4, old = 64;
  double wl = 2 * M_PI / inv;
  if (wl < old / high) return inv;
  if (wl > old / low) return inv / factor;
  double smooth = (old / wl - low) / (high - low);
  return (1 - smooth) * inv / factor + smooth * inv;
}

/* 1: the angle p * inv_freq in f32, as transformers computes it (at
 * thousands of positions the f64 angle differs by ~1e-4 rad). */
static int g_f32_angle;

TEST_UNSANITIZED static void rope(double *v, int pos) { /* rotate-half */
  for (int j = 0; j < QD / 2; j++) {
    double ang = g_f32_angle ? (double)((float)pos * (float)inv_freq(j)) : pos * inv_freq(j);
    double a = v[j], b = v[j + QD / 2];
    v[j] = a * cos(ang) - b * sin(ang);
    v[j + QD / 2] = b * cos(ang) + a * sin(ang);
  }
}

TEST_UNSANITIZED static void forward(const int *tok, int T, double *logits) {
  double (*x)[QH] = calloc((size_t)T, sizeof *x), (*h)[QH] = calloc((size_t)T, sizeof *h);
  double (*y)[QH] = calloc((size_t)T, sizeof *y);
  double (*q)[QNH * QD] = calloc((size_t)T, sizeof *q), (*k)[QKV * QD] = calloc((size_t)T, sizeof *k);
  double (*v)[QKV * QD] = calloc((size_t)T, sizeof *v);
  double tmp[QNH * QD], g[QF], u[QF], *scores = calloc((size_t)T + 1, sizeof(double));
  for (int t = 0; t < T; t++)
    for (int c = 0; c < QH; c++) x[t][c] = qv("model.embed_tokens.weight%.0d", 0, (int64_t)tok[t] * QH + c);
  for (int l = 0; l < QL; l++) {
    for (int t = 0; t < T; t++) {
      rms(x[t], QH, "model.layers.%d.input_layernorm.weight", l, h[t]);
      mv("model.layers.%d.self_attn.q_proj.weight", l, QNH * QD, QH, h[t], q[t]);
      mv("model.layers.%d.self_attn.k_proj.weight", l, QKV * QD, QH, h[t], k[t]);
      mv("model.layers.%d.self_attn.v_proj.weight", l, QKV * QD, QH, h[t], v[t]);
      for (int hh = 0; hh < QNH; hh++) {
        if (!g_llama) {
          rms(q[t] + hh * QD, QD, "model.layers.%d.self_attn.q_norm.weight", l, tmp);
          memcpy(q[t] + hh * QD, tmp, sizeof(double) * QD);
        }
        rope(q[t] + hh * QD, t);
      }
      for (int hh = 0; hh < QKV; hh++) {
        if (!g_llama) {
          rms(k[t] + hh * QD, QD, "model.layers.%d.self_attn.k_norm.weight", l, tmp);
          memcpy(k[t] + hh * QD, tmp, sizeof(double) * QD);
        }
        rope(k[t] + hh * QD, t);
      }
    }
    /* the last layer's rows but the last reach no logits */
    const int t0 = l == QL - 1 ? T - 1 : 0;
    for (int t = t0; t < T; t++) {
      for (int hh = 0; hh < QNH; hh++) {
        int kv = hh / (QNH / QKV);
        double mx = -1e300, sum = 0;
        for (int s = 0; s <= t; s++) {
          double d = 0;
          for (int e = 0; e < QD; e++) d += q[t][hh * QD + e] * k[s][kv * QD + e];
          scores[s] = d / sqrt((double)QD);
          mx = fmax(mx, scores[s]);
        }
        for (int s = 0; s <= t; s++) sum += (scores[s] = exp(scores[s] - mx));
        for (int e = 0; e < QD; e++) {
          double o = 0;
          for (int s = 0; s <= t; s++) o += scores[s] / sum * v[s][kv * QD + e];
          tmp[hh * QD + e] = o;
        }
      }
      mv("model.layers.%d.self_attn.o_proj.weight", l, QH, QNH * QD, tmp, y[t]);
    }
    for (int t = t0; t < T; t++) {
      for (int c = 0; c < QH; c++) x[t][c] += y[t][c];
      rms(x[t], QH, "model.layers.%d.post_attention_layernorm.weight", l, h[t]);
      mv("model.layers.%d.mlp.gate_proj.weight", l, QF, QH, h[t], g);
      mv("model.layers.%d.mlp.up_proj.weight", l, QF, QH, h[t], u);
      for (int f = 0; f < QF; f++) g[f] = g[f] / (1.0 + exp(-g[f])) * u[f];
      mv("model.layers.%d.mlp.down_proj.weight", l, QH, QF, g, y[t]);
      for (int c = 0; c < QH; c++) x[t][c] += y[t][c];
    }
  }
  rms(x[T - 1], QH, "model.norm.weight%.0d", 0, tmp);
  mv("lm_head.weight%.0d", 0, QV, QH, tmp, logits);
  free(x); free(h); free(y); free(q); free(k); free(v); free(scores);
}

static void check_against_reference(const char *tag) {
  char hf[600], art[600], cmd[8192], msg[256];
  static char log[1 << 16];
  snprintf(hf, sizeof hf, "%s/%s_hf", test_tmpdir(), tag);
  snprintf(art, sizeof art, "%s/%s_art", test_tmpdir(), tag);
  CHECK(mkdir(hf, 0755) == 0);
  CHECK(write_tiny_qwen3(hf) == 0);
  snprintf(cmd, sizeof cmd, "%s convert %s -o %s --quant f32 --quiet", test_wisp_bin(), hf, art);
  CHECKF(test_run(cmd, log, sizeof log) == 0, "%s", log);
  enum { T = 40, G = 6 };
  int tok[T + G];
  for (int t = 0; t < T; t++) tok[t] = (t * 29 + 5) % QV;
  double ref[QV];
  int lens[3] = {1, 3, T};
  for (int c = 0; c < 3; c++) {
    int n = lens[c];
    size_t len = (size_t)snprintf(cmd, sizeof cmd, "%s logits --backend cpu -m %s --greedy %d --tokens ", test_wisp_bin(), art,
                                  c == 2 ? G : 0);
    for (int t = 0; t < n; t++) len += (size_t)snprintf(cmd + len, sizeof cmd - len, "%s%d", t ? "," : "", tok[t]);
    CHECKF(test_run(cmd, log, sizeof log) == 0, "%s", log);
    cJSON *j = cJSON_Parse(log);
    CHECKF(j, "not JSON: %.200s", log);
    const cJSON *got = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "logits"), 0);
    int ok = cJSON_GetArraySize(got) == QV;
    forward(tok, n, ref);
    double maxdiff = 0, maxref = 0;
    for (int i = 0; ok && i < QV; i++) {
      maxdiff = fmax(maxdiff, fabs(cJSON_GetArrayItem(got, i)->valuedouble - ref[i]));
      maxref = fmax(maxref, fabs(ref[i]));
    }
    snprintf(msg, sizeof msg, "%d tokens: max|diff| %.3g, max|ref| %.3g", n, maxdiff, maxref);
    if (ok && c == 2) { /* greedy continuation (decode path) vs the reference recomputed per step */
      const cJSON *gr = cJSON_GetObjectItemCaseSensitive(j, "greedy");
      ok = cJSON_GetArraySize(gr) == G;
      for (int s = 0; ok && s < G; s++) {
        forward(tok, T + s, ref);
        int best = 0;
        for (int i = 1; i < QV; i++) if (ref[i] > ref[best]) best = i;
        tok[T + s] = best;
        if ((int)cJSON_GetArrayItem(gr, s)->valuedouble != best) {
          snprintf(msg, sizeof msg, "greedy step %d: wisp %d, reference %d", s, (int)cJSON_GetArrayItem(gr, s)->valuedouble, best);
          ok = 0;
        }
      }
    }
    cJSON_Delete(j);
    CHECKF(ok && maxref > 0.1 && maxdiff <= 1e-4 * maxref, "%s", msg);
  }
}

TEST(qwen3_tiny_matches_independent_reference_prefill_and_decode) {
  g_llama = 0;
  check_against_reference("q3");
}

TEST(llama_tiny_matches_independent_reference_prefill_and_decode) {
  g_llama = 1;
  check_against_reference("ll");
  g_llama = 0;
}

/* Past 4,096 positions: a model whose config allows 8,192 converts with
 * that context (rope.freq, no table of its rows) and, opened with -c 4200,
 * gives at position 4,159 (prefill in chunks, Llama 3 rope scaling) the
 * logits of the reference computed here from the rope formula. Without -c
 * the context is 4,096, and -c past the model's maximum is refused. */
TEST(llama_tiny_runs_past_4096_positions) {
  g_llama = 1;
  g_max_pos = 8192;
  char hf[600], art[600], msg[256];
  static char cmd[65536], log[1 << 16];
  snprintf(hf, sizeof hf, "%s/long_hf", test_tmpdir());
  snprintf(art, sizeof art, "%s/long_art", test_tmpdir());
  CHECK(mkdir(hf, 0755) == 0);
  int wrote = write_tiny_qwen3(hf);
  g_max_pos = 128;
  CHECK(wrote == 0);
  snprintf(cmd, sizeof cmd, "%s convert %s -o %s --quant f32 --quiet && grep maxPositions %s/manifest.json",
           test_wisp_bin(), hf, art, art);
  CHECKF(test_run(cmd, log, sizeof log) == 0 && strstr(log, "8192"), "%s", log);
  enum { T = 4160 };
  static int tok[T];
  for (int t = 0; t < T; t++) tok[t] = (t * 29 + 5 + t / 97) % QV;
  /* the ids go in a --prompts file: a command line is at most 8 KB here (test_run) */
  char prompts[700];
  snprintf(prompts, sizeof prompts, "%s/long_prompt.json", test_tmpdir());
  FILE *f = fopen(prompts, "w");
  CHECK(f);
  fprintf(f, "{\"prompts\": [[");
  for (int t = 0; t < T; t++) fprintf(f, "%s%d", t ? "," : "", tok[t]);
  fprintf(f, "]]}\n");
  CHECK(fclose(f) == 0);
  snprintf(cmd, sizeof cmd, "%s logits --backend cpu -m %s -c 4200 --prompts %s", test_wisp_bin(), art, prompts);
  int rc = test_run(cmd, log, sizeof log);
  cJSON *j = rc == 0 ? cJSON_Parse(log) : NULL;
  const cJSON *got = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "logits"), 0);
  int ok = cJSON_GetArraySize(got) == QV;
  double ref[QV], maxdiff = 0, maxref = 0;
  g_f32_angle = 1;
  forward(tok, T, ref);
  g_f32_angle = 0;
  for (int i = 0; ok && i < QV; i++) {
    maxdiff = fmax(maxdiff, fabs(cJSON_GetArrayItem(got, i)->valuedouble - ref[i]));
    maxref = fmax(maxref, fabs(ref[i]));
  }
  snprintf(msg, sizeof msg, "%d tokens: max|diff| %.3g, max|ref| %.3g", T, maxdiff, maxref);
  cJSON_Delete(j);
  char why[200];
  snprintf(why, sizeof why, "%.190s", log);
  /* the default context (4,096) is too short; -c past 8,192 is refused */
  snprintf(cmd, sizeof cmd, "%s logits --backend cpu -m %s --prompts %s", test_wisp_bin(), art, prompts);
  int dflt = test_run(cmd, log, sizeof log);
  int dflt_full = dflt != 0 && strstr(log, "4096") != NULL;
  snprintf(cmd, sizeof cmd, "%s logits --backend cpu -m %s -c 9000 --tokens 1,2", test_wisp_bin(), art);
  int over = test_run(cmd, log, sizeof log);
  int over_refused = over != 0 && strstr(log, "maximum context of 8192") != NULL;
  /* wisp plan and the bench receipt say the context and the KV bytes: 2 attention layers x K and V x
   * positions x 2 kv heads x 32 dims x 4 bytes */
  snprintf(cmd, sizeof cmd, "%s plan --backend cpu --profile exact -m %s -c 8000", test_wisp_bin(), art);
  int plan_ok = test_run(cmd, log, sizeof log) == 0 &&
                strstr(log, "context: 8000 positions (the model's maximum 8192); KV caches: 7.8 MiB a sequence (f32)") &&
                strstr(log, "prefill: 128 tokens a forward call in a session of one slot, 128 in one of several");
  char plan_log[200];
  snprintf(plan_log, sizeof plan_log, "%.190s", log);
  snprintf(cmd, sizeof cmd, "%s bench --backend cpu --profile exact -m %s -p 8 -n 2 --no-warmup -o %s/long_bench.json >/dev/null && cat %s/long_bench.json",
           test_wisp_bin(), art, test_tmpdir(), test_tmpdir());
  int bench_rc = test_run(cmd, log, sizeof log);
  cJSON *bj = bench_rc == 0 ? cJSON_Parse(log) : NULL;
  const cJSON *bctx = cJSON_GetObjectItemCaseSensitive(bj, "context"), *bkv = cJSON_GetObjectItemCaseSensitive(bj, "kv_bytes");
  int bench_ok = cJSON_IsNumber(bctx) && bctx->valuedouble == 4096 && cJSON_IsNumber(bkv) &&
                 bkv->valuedouble == 4096.0 * 2 * 2 * QKV * QD * 4;
  cJSON_Delete(bj);
  g_llama = 0;
  CHECKF(rc == 0 && ok && maxref > 0.1 && maxdiff <= 1e-4 * maxref, "%s (%s)", msg, why);
  CHECKF(plan_ok, "wisp plan -c 8000: %s", plan_log);
  CHECKF(bench_ok, "bench receipt: context/kv_bytes missing or wrong");
  CHECKF(dflt_full, "without -c: %.200s", log);
  CHECKF(over_refused, "-c 9000: %.200s", log);
}

/* The tiny Llama converted with max_position_embeddings 8192 into
 * TMP/NAME; 0 on success. */
static int long_artifact(const char *name, char *art, size_t cap) {
  char hf[600], cmd[2048], log[4096];
  snprintf(hf, sizeof hf, "%s/%s_hf", test_tmpdir(), name);
  snprintf(art, cap, "%s/%s", test_tmpdir(), name);
  const int keep_llama = g_llama, keep_max = g_max_pos;
  g_llama = 1;
  g_max_pos = 8192;
  int rc = mkdir(hf, 0755) != 0 || write_tiny_qwen3(hf) != 0;
  g_llama = keep_llama;
  g_max_pos = keep_max;
  if (rc) return -1;
  snprintf(cmd, sizeof cmd, "%s convert %s -o %s --quant f32 --quiet", test_wisp_bin(), hf, art);
  return test_run(cmd, log, sizeof log);
}

/* KV caches that grow with the sequence (the cpu: from 256 positions,
 * doubling) give the very logits and tokens of caches made for the whole
 * context (tuning kvGrow=0), through prefill chunks that cross several
 * doublings and a decode loop; and they start small. */
TEST(kv_growth_bit_identical_to_preallocated_cpu) {
  /* a context that is not a power of two, so the last growth stops at it */
  enum { CTX = 1100, T = 1060 };
  char art[600];
  CHECK(long_artifact("grow_art", art, sizeof art) == 0);
  wisp_model *m = NULL;
  CHECKF(wisp_model_open(art, &m) == WISP_OK, "%s", wisp_last_error());
  wisp_session *s[2] = {NULL, NULL};
  const char *tuning[2] = {NULL, "kvGrow=0"};
  for (int i = 0; i < 2; i++) {
    wisp_session_options o = {.backend = "cpu", .threads = 1, .max_context = CTX, .tuning = tuning[i]};
    CHECKF(wisp_session_new(m, &o, &s[i]) == WISP_OK, "%s", wisp_last_error());
  }
  const uint64_t full = wisp_session_kv_bytes(s[1]);
  int ok = full == (uint64_t)CTX * 2 * 2 * QKV * QD * 4 && wisp_session_kv_bytes_held(s[1]) == full &&
           wisp_session_kv_bytes_held(s[0]) == 256ull * 2 * 2 * QKV * QD * 4;
  static int32_t tok[T];
  for (int t = 0; t < T; t++) tok[t] = (t * 37 + 11 + t / 101) % QV;
  static float lg[2][QV];
  static const int cuts[] = {0, 100, 300, 700, T};
  int same = 1;
  for (int c = 0; ok && c + 1 < (int)(sizeof cuts / sizeof *cuts); c++)
    for (int i = 0; i < 2; i++) {
      if (wisp_session_eval(s[i], tok + cuts[c], cuts[c + 1] - cuts[c], lg[i]) != WISP_OK) ok = 0;
      if (i == 1) same &= !memcmp(lg[0], lg[1], sizeof lg[0]);
    }
  int32_t gen[2][16];
  int n_gen[2] = {0, 0};
  wisp_generate_options go = {.temperature = 0};
  for (int i = 0; ok && i < 2; i++)
    ok = wisp_session_generate(s[i], 3, 16, &go, gen[i], &n_gen[i]) == WISP_OK;
  same &= n_gen[0] == 16 && n_gen[1] == 16 && !memcmp(gen[0], gen[1], sizeof gen[0]);
  int grown = wisp_session_kv_bytes_held(s[0]) == full; /* 256 doubling up to 1024, then the context */
  for (int i = 0; i < 2; i++) wisp_session_free(s[i]);
  wisp_model_close(m);
  CHECKF(ok, "%s", wisp_last_error());
  CHECK(same);
  CHECK(grown);
}

/* A scheduler of 4 slots at context 8192 holds 256 positions a slot up
 * front, not 4 x 8192. */
TEST(kv_growth_scheduler_reserves_little_up_front) {
  char art[600];
  CHECK(long_artifact("sched_art", art, sizeof art) == 0);
  wisp_model *m = NULL;
  CHECKF(wisp_model_open(art, &m) == WISP_OK, "%s", wisp_last_error());
  wisp_sched_options o = {.backend = "cpu", .parallel = 4, .context = 8192, .threads = 1};
  wisp_sched *S = NULL;
  wisp_status st = wisp_sched_new(m, &o, &S);
  uint64_t full = 0, held = st == WISP_OK ? wisp_sched_kv_bytes_held(S, &full) : 0;
  int ctx = st == WISP_OK ? wisp_sched_context(S) : 0;
  wisp_sched_free(S);
  wisp_model_close(m);
  CHECKF(st == WISP_OK, "%s", wisp_last_error());
  CHECK(ctx == 8192);
  CHECKF(full == 4ull * 8192 * 2 * 2 * QKV * QD * 4 && held == 4ull * 256 * 2 * 2 * QKV * QD * 4,
         "held %llu of %llu", (unsigned long long)held, (unsigned long long)full);
}

TEST(qwen3_gguf_roundtrip_identical_logits) {
  g_llama = 0;
  char hf[600], a[600], gg[600], b[600], cmd[4096];
  static char log[1 << 16], la[1 << 16], lb[1 << 16];
  snprintf(hf, sizeof hf, "%s/q3g_hf", test_tmpdir());
  snprintf(a, sizeof a, "%s/q3g_a", test_tmpdir());
  snprintf(gg, sizeof gg, "%s/q3g.gguf", test_tmpdir());
  snprintf(b, sizeof b, "%s/q3g_b", test_tmpdir());
  CHECK(mkdir(hf, 0755) == 0);
  CHECK(write_tiny_qwen3(hf) == 0);
  snprintf(cmd, sizeof cmd, "%s convert %s -o %s --quant f32 --quiet && %s export-gguf %s -o %s && grep -c qwen3.block_count %s",
           test_wisp_bin(), hf, a, test_wisp_bin(), a, gg, gg);
  CHECKF(test_run(cmd, log, sizeof log) == 0, "%s", log);
  snprintf(cmd, sizeof cmd, "%s convert %s -o %s --quant f32 --quiet", test_wisp_bin(), gg, b);
  CHECKF(test_run(cmd, log, sizeof log) == 0, "%s", log);
  snprintf(cmd, sizeof cmd, "%s logits --backend cpu -m %s --tokens 3,1,4,1,5,9,2,6 --greedy 8 2>/dev/null", test_wisp_bin(), a);
  CHECK(test_run(cmd, la, sizeof la) == 0);
  snprintf(cmd, sizeof cmd, "%s logits --backend cpu -m %s --tokens 3,1,4,1,5,9,2,6 --greedy 8 2>/dev/null", test_wisp_bin(), b);
  CHECK(test_run(cmd, lb, sizeof lb) == 0);
  CHECKF(strlen(la) > 100 && !strcmp(la, lb), "logits differ:\n%.300s\n%.300s", la, lb);
}
