/* Qwen 3.5 and Q4_K.
 *
 * A tiny Qwen3_5ForCausalLM checkpoint is written from C (config.json +
 * model.safetensors), converted with `wisp convert` and run; an independent
 * double-precision forward written from the formulas of transformers'
 * modeling_qwen3_5.py (Gated DeltaNet recurrence, gated attention with
 * partial RoPE, (1 + w) RMSNorms) checks the logits. Also: prefill vs
 * token-by-token decode, Q4_K quantization error and AVX2-vs-scalar kernels,
 * and bad inputs as one-line errors. */
#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backend/cpu/cpu_kernels.h"
#include "engine/engine.h"
#include "fixtures.h"
#include "format/artifact.h"
#include "format/tensor.h"
#include "model/model.h"
#include "st_fixture.h"
#include "test.h"
#include "util/err.h"
#include "util/file.h"
#include "wisp.h"

/* ---- the tiny checkpoint ---- */

/* hidden 256 and FFN 256 so that --quant q4k has Q4_K matrices (cols 256)
 * next to Q4 fallbacks (cols 64); 2 k-heads serve 4 v-heads (GQA-style
 * repeat); partial rotary factor 0.5 (8 of 16 dims). */
enum {
  QH = 256, QF = 256, QV = 96, QD = 16, QNH = 4, QKV = 2, QL = 3, QCK = 4,
  QLK = 2, QLVH = 4, QDK = 16, QDV = 16, QRD = 8
};
enum { QK = QLK * QDK, QVW = QLVH * QDV, QCONV = 2 * QK + QVW };
static const int q_full[QL] = {0, 1, 0}; /* linear, full, linear */

/* A deterministic uniform in [-0.5, 0.5) per (name, element). */
static float unif(const char *name, int64_t i) {
  uint32_t x = 2166136261u;
  for (const char *p = name; *p; p++) x = (x ^ (uint8_t)*p) * 16777619u;
  x ^= (uint32_t)(i * 2654435761u);
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return (float)(x >> 8) / 16777216.0f - 0.5f;
}

static float qv(const char *name, int64_t i) {
  float u = unif(name, i);
  if (strstr(name, "linear_attn.norm")) return 1.0f + 0.2f * u; /* gated norm: plain weight */
  if (strstr(name, "norm")) return 0.2f * u;                     /* (1 + w) norms: w near 0 */
  /* decay per token exp(g), g = -A softplus(a + dt_bias): A in [0.02, 1]
   * and dt_bias near -2 keep g around -0.01..-0.5, so the recurrent state
   * carries over many tokens (HF's init, A in [0.01, 16] and dt_bias 1,
   * forgets most of it at once). */
  if (strstr(name, "A_log")) return logf(0.02f + 0.98f * (u + 0.5f));
  if (strstr(name, "dt_bias")) return -2.0f + 0.5f * u;
  if (strstr(name, "conv1d")) return 0.8f * u;
  if (strstr(name, "embed_tokens") || strstr(name, "lm_head")) return 0.8f * u;
  return 0.12f * u;
}

typedef struct {
  const char *bad_shape;  /* tensor written one row too many */
  const char *layer_type; /* replaces layer 1's "full_attention" */
  const char *prefix;     /* tensor prefix, default "model." */
  int value_heads;        /* linear-attention value heads, default QLVH */
} qfx_opts;

static int write_tiny_qwen(const char *dir, const qfx_opts *o) {
  char path[1024], cfg[2048];
  const int nvh = o && o->value_heads ? o->value_heads : QLVH, vw = nvh * QDV, conv = 2 * QK + vw;
  snprintf(path, sizeof path, "%s/config.json", dir);
  snprintf(cfg, sizeof cfg,
           "{\"architectures\": [\"Qwen3_5ForCausalLM\"], \"model_type\": \"qwen3_5_text\", \"hidden_size\": %d,"
           " \"intermediate_size\": %d, \"num_hidden_layers\": %d, \"num_attention_heads\": %d,"
           " \"num_key_value_heads\": %d, \"head_dim\": %d, \"linear_conv_kernel_dim\": %d,"
           " \"linear_num_key_heads\": %d, \"linear_num_value_heads\": %d, \"linear_key_head_dim\": %d,"
           " \"linear_value_head_dim\": %d, \"layer_types\": [\"linear_attention\", \"%s\", \"linear_attention\"],"
           " \"vocab_size\": %d, \"rms_norm_eps\": 1e-06, \"max_position_embeddings\": 256,"
           " \"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": 10000.0, \"partial_rotary_factor\": 0.5},"
           " \"tie_word_embeddings\": true, \"hidden_act\": \"silu\"}\n",
           QH, QF, QL, QNH, QKV, QD, QCK, QLK, nvh, QDK, QDV, o && o->layer_type ? o->layer_type : "full_attention",
           QV);
  if (o && o->prefix) {
    /* as released multimodal checkpoints: the text config nested */
    char nested[2300];
    snprintf(nested, sizeof nested,
             "{\"architectures\": [\"Qwen3_5ForConditionalGeneration\"], \"model_type\": \"qwen3_5\","
             " \"tie_word_embeddings\": true, \"vision_config\": {\"depth\": 1}, \"text_config\": %s}\n", cfg);
    if (fx_write_bytes(path, nested, strlen(nested))) return -1;
  } else if (fx_write_bytes(path, cfg, strlen(cfg))) {
    return -1;
  }
  const char *pre = o && o->prefix ? o->prefix : "model.";
  fx_tensor t[64];
  char names[64][128];
  int n = 0;
#define ADD(shape_n, s0, s1, s2, fmt, ...)                                  \
  do {                                                                     \
    snprintf(names[n], sizeof names[n], fmt, __VA_ARGS__);                 \
    t[n] = (fx_tensor){names[n], "F32", shape_n, {s0, s1, s2, 0}, NULL};   \
    n++;                                                                   \
  } while (0)
  ADD(2, QV, QH, 0, "%sembed_tokens.weight", pre);
  ADD(1, QH, 0, 0, "%snorm.weight", pre);
  for (int i = 0; i < QL; i++) {
    ADD(1, QH, 0, 0, "%slayers.%d.input_layernorm.weight", pre, i);
    ADD(1, QH, 0, 0, "%slayers.%d.post_attention_layernorm.weight", pre, i);
    ADD(2, QF, QH, 0, "%slayers.%d.mlp.gate_proj.weight", pre, i);
    ADD(2, QF, QH, 0, "%slayers.%d.mlp.up_proj.weight", pre, i);
    ADD(2, QH, QF, 0, "%slayers.%d.mlp.down_proj.weight", pre, i);
    if (q_full[i]) {
      ADD(2, QNH * 2 * QD, QH, 0, "%slayers.%d.self_attn.q_proj.weight", pre, i);
      ADD(2, QKV * QD, QH, 0, "%slayers.%d.self_attn.k_proj.weight", pre, i);
      ADD(2, QKV * QD, QH, 0, "%slayers.%d.self_attn.v_proj.weight", pre, i);
      ADD(2, QH, QNH * QD, 0, "%slayers.%d.self_attn.o_proj.weight", pre, i);
      ADD(1, QD, 0, 0, "%slayers.%d.self_attn.q_norm.weight", pre, i);
      ADD(1, QD, 0, 0, "%slayers.%d.self_attn.k_norm.weight", pre, i);
    } else {
      ADD(2, conv, QH, 0, "%slayers.%d.linear_attn.in_proj_qkv.weight", pre, i);
      ADD(2, vw, QH, 0, "%slayers.%d.linear_attn.in_proj_z.weight", pre, i);
      ADD(2, nvh, QH, 0, "%slayers.%d.linear_attn.in_proj_b.weight", pre, i);
      ADD(2, nvh, QH, 0, "%slayers.%d.linear_attn.in_proj_a.weight", pre, i);
      ADD(3, conv, 1, QCK, "%slayers.%d.linear_attn.conv1d.weight", pre, i);
      ADD(1, nvh, 0, 0, "%slayers.%d.linear_attn.dt_bias", pre, i);
      ADD(1, nvh, 0, 0, "%slayers.%d.linear_attn.A_log", pre, i);
      ADD(1, QDV, 0, 0, "%slayers.%d.linear_attn.norm.weight", pre, i);
      ADD(2, QH, vw, 0, "%slayers.%d.linear_attn.out_proj.weight", pre, i);
    }
  }
  if (o && o->prefix) { /* ignored by convert, as by Qwen3_5ForCausalLM */
    ADD(2, 8, 8, 0, "%s", "model.visual.blocks.0.attn.qkv.weight");
    ADD(2, 8, 8, 0, "%s", "mtp.fc.weight");
  }
#undef ADD
  float *data[64] = {0};
  int rc = 0;
  for (int k = 0; k < n; k++) {
    if (o && o->bad_shape && strstr(t[k].name, o->bad_shape)) t[k].shape[0] += 1;
    int64_t numel = 1;
    for (int d = 0; d < t[k].ndim; d++) numel *= t[k].shape[d];
    data[k] = malloc(sizeof(float) * (size_t)numel);
    if (!data[k]) { rc = -1; break; }
    /* values keyed by the name without the prefix, so both prefixes give one model */
    const char *key = strstr(t[k].name, "layers.") ? strstr(t[k].name, "layers.") : t[k].name;
    char kn[160];
    snprintf(kn, sizeof kn, "model.%s", strncmp(key, "model.", 6) ? key : key + 6);
    if (!strncmp(t[k].name, "model.language_model.", 21)) snprintf(kn, sizeof kn, "model.%s", t[k].name + 21);
    for (int64_t e = 0; e < numel; e++) data[k][e] = qv(kn, e);
    t[k].data = data[k];
  }
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  if (!rc) rc = fx_write_safetensors(path, t, n);
  for (int k = 0; k < n; k++) free(data[k]);
  return rc;
}

int fx_write_tiny_qwen35(const char *dir) { return write_tiny_qwen(dir, NULL); }
int fx_write_tiny_qwen35_value_heads(const char *dir, int value_heads) {
  const qfx_opts o = {.value_heads = value_heads};
  return write_tiny_qwen(dir, &o);
}
float fx_qwen35_value(const char *name, int64_t i) { return qv(name, i); }

static const char *make_qwen(const char *name, const qfx_opts *o) {
  static char dir[4][512];
  static int k;
  k = (k + 1) % 4;
  snprintf(dir[k], sizeof dir[k], "%s/%s", test_tmpdir(), name);
  mkdir(dir[k], 0755);
  return write_tiny_qwen(dir[k], o) == 0 ? dir[k] : NULL;
}

static int convert(const char *hf, const char *art, const char *quant, char *log, size_t cap) {
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "%s convert %s -o %s --quant %s --quiet", test_wisp_bin(), hf, art, quant);
  return test_run(cmd, log, cap);
}

/* ---- the independent double-precision reference ---- */

static double W(const char *fmt, int layer, int64_t i) {
  char name[160];
  snprintf(name, sizeof name, fmt, layer);
  return (double)qv(name, i);
}

/* Qwen3_5RMSNorm: x * rsqrt(mean(x^2) + eps) * (1 + w) */
static void rms1p(const double *x, int n, const char *fmt, int layer, double *out) {
  double ss = 0;
  for (int i = 0; i < n; i++) ss += x[i] * x[i];
  double r = 1.0 / sqrt(ss / n + 1e-6);
  for (int i = 0; i < n; i++) out[i] = x[i] * r * (1.0 + W(fmt, layer, i));
}

/* The values of a whole matrix, computed once per test run (the hash per
 * element is what makes an uncached reference slow). Freed at exit. */
#define WCACHE_MAX 96
static struct { char name[160]; int64_t n; double *v; } wcache[WCACHE_MAX];
static int wcache_n;

static void wcache_free(void) {
  for (int i = 0; i < wcache_n; i++) free(wcache[i].v);
  wcache_n = 0;
}

static const double *wtab(const char *fmt, int layer, int64_t n) {
  char name[160];
  snprintf(name, sizeof name, fmt, layer);
  for (int i = 0; i < wcache_n; i++)
    if (wcache[i].n == n && !strcmp(wcache[i].name, name)) return wcache[i].v;
  if (wcache_n == WCACHE_MAX) return NULL;
  double *v = malloc(sizeof(double) * (size_t)n);
  if (!v) return NULL;
  for (int64_t i = 0; i < n; i++) v[i] = (double)qv(name, i);
  if (!wcache_n) atexit(wcache_free);
  snprintf(wcache[wcache_n].name, sizeof wcache[wcache_n].name, "%s", name);
  wcache[wcache_n].n = n;
  wcache[wcache_n].v = v;
  return wcache[wcache_n++].v;
}

static void mv(const char *fmt, int layer, int rows, int cols, const double *x, double *y) {
  const double *w = wtab(fmt, layer, (int64_t)rows * cols);
  for (int r = 0; r < rows; r++) {
    double s = 0;
    for (int c = 0; c < cols; c++) s += (w ? w[(int64_t)r * cols + c] : W(fmt, layer, (int64_t)r * cols + c)) * x[c];
    y[r] = s;
  }
}

static double sigm(double x) { return 1.0 / (1.0 + exp(-x)); }
static double silud(double x) { return x * sigm(x); }
static double softplusd(double x) { return x > 20 ? x : log1p(exp(x)); }

/* partial NEOX RoPE over the first QRD dims, theta 10000 */
static void rope_part(double *v, int pos) {
  for (int j = 0; j < QRD / 2; j++) {
    double ang = pos * pow(10000.0, -2.0 * j / QRD);
    double a = v[j], b = v[j + QRD / 2];
    v[j] = a * cos(ang) - b * sin(ang);
    v[j + QRD / 2] = b * cos(ang) + a * sin(ang);
  }
}

static void l2n(double *v, int n) {
  double ss = 0;
  for (int i = 0; i < n; i++) ss += v[i] * v[i];
  double r = 1.0 / sqrt(ss + 1e-6);
  for (int i = 0; i < n; i++) v[i] *= r;
}

#define P "model.layers.%d."
static void qwen_forward_ref(const int *tok, int T, double *logits) {
  double (*x)[QH] = calloc((size_t)T, sizeof *x), (*h)[QH] = calloc((size_t)T, sizeof *h);
  double (*y)[QH] = calloc((size_t)T, sizeof *y), (*qkv)[QCONV] = calloc((size_t)T, sizeof *qkv);
  double (*q)[QNH * 2 * QD] = calloc((size_t)T, sizeof *q), (*k)[QKV * QD] = calloc((size_t)T, sizeof *k);
  double (*v)[QKV * QD] = calloc((size_t)T, sizeof *v);
  static double S[QLVH][QDK][QDV];
  double tmp[QF + QVW], g[QF], u[QF], scores[512], z[QVW], bb[QLVH], aa[QLVH], c[QCONV];
  for (int t = 0; t < T; t++)
    for (int e = 0; e < QH; e++) x[t][e] = W("model.embed_tokens.weight%.0d", 0, (int64_t)tok[t] * QH + e);
  for (int l = 0; l < QL; l++) {
    for (int t = 0; t < T; t++) rms1p(x[t], QH, P "input_layernorm.weight", l, h[t]);
    if (!q_full[l]) {
      memset(S, 0, sizeof S);
      for (int t = 0; t < T; t++) mv(P "linear_attn.in_proj_qkv.weight", l, QCONV, QH, h[t], qkv[t]);
      for (int t = 0; t < T; t++) {
        mv(P "linear_attn.in_proj_z.weight", l, QVW, QH, h[t], z);
        mv(P "linear_attn.in_proj_b.weight", l, QLVH, QH, h[t], bb);
        mv(P "linear_attn.in_proj_a.weight", l, QLVH, QH, h[t], aa);
        for (int ch = 0; ch < QCONV; ch++) { /* causal depthwise conv, tap QCK-1 on the newest */
          double acc = 0;
          for (int kk = 0; kk < QCK; kk++) {
            int s = t + kk - (QCK - 1);
            if (s >= 0) acc += W(P "linear_attn.conv1d.weight", l, ch * QCK + kk) * qkv[s][ch];
          }
          c[ch] = silud(acc);
        }
        for (int hv = 0; hv < QLVH; hv++) {
          int kh = hv / (QLVH / QLK);
          double qq[QDK], kk[QDK], kv[QDV], o[QDV];
          for (int i = 0; i < QDK; i++) { qq[i] = c[kh * QDK + i]; kk[i] = c[QK + kh * QDK + i]; }
          l2n(qq, QDK);
          l2n(kk, QDK);
          for (int i = 0; i < QDK; i++) qq[i] /= sqrt((double)QDK);
          const double *vv = c + 2 * QK + hv * QDV;
          double beta = sigm(bb[hv]);
          double gg = -exp(W(P "linear_attn.A_log", l, hv)) * softplusd(aa[hv] + W(P "linear_attn.dt_bias", l, hv));
          for (int i = 0; i < QDK; i++)
            for (int e = 0; e < QDV; e++) S[hv][i][e] *= exp(gg);
          for (int e = 0; e < QDV; e++) {
            kv[e] = 0;
            for (int i = 0; i < QDK; i++) kv[e] += S[hv][i][e] * kk[i];
          }
          for (int e = 0; e < QDV; e++) kv[e] = (vv[e] - kv[e]) * beta;
          for (int i = 0; i < QDK; i++)
            for (int e = 0; e < QDV; e++) S[hv][i][e] += kk[i] * kv[e];
          double ss = 0;
          for (int e = 0; e < QDV; e++) {
            o[e] = 0;
            for (int i = 0; i < QDK; i++) o[e] += S[hv][i][e] * qq[i];
            ss += o[e] * o[e];
          }
          double r = 1.0 / sqrt(ss / QDV + 1e-6);
          for (int e = 0; e < QDV; e++)
            tmp[hv * QDV + e] = o[e] * r * W(P "linear_attn.norm.weight", l, e) * silud(z[hv * QDV + e]);
        }
        mv(P "linear_attn.out_proj.weight", l, QH, QVW, tmp, y[t]);
      }
    } else {
      for (int t = 0; t < T; t++) {
        mv(P "self_attn.q_proj.weight", l, QNH * 2 * QD, QH, h[t], q[t]);
        mv(P "self_attn.k_proj.weight", l, QKV * QD, QH, h[t], k[t]);
        mv(P "self_attn.v_proj.weight", l, QKV * QD, QH, h[t], v[t]);
        for (int hh = 0; hh < QNH; hh++) { /* q = first half of the head's 2*QD slice */
          rms1p(q[t] + hh * 2 * QD, QD, P "self_attn.q_norm.weight", l, tmp);
          memcpy(q[t] + hh * 2 * QD, tmp, sizeof(double) * QD);
          rope_part(q[t] + hh * 2 * QD, t);
        }
        for (int hh = 0; hh < QKV; hh++) {
          rms1p(k[t] + hh * QD, QD, P "self_attn.k_norm.weight", l, tmp);
          memcpy(k[t] + hh * QD, tmp, sizeof(double) * QD);
          rope_part(k[t] + hh * QD, t);
        }
      }
      for (int t = 0; t < T; t++) {
        for (int hh = 0; hh < QNH; hh++) {
          int kv = hh / (QNH / QKV);
          double mx = -1e300, sum = 0;
          for (int s = 0; s <= t; s++) {
            double d = 0;
            for (int e = 0; e < QD; e++) d += q[t][hh * 2 * QD + e] * k[s][kv * QD + e];
            scores[s] = d / sqrt((double)QD);
            mx = fmax(mx, scores[s]);
          }
          for (int s = 0; s <= t; s++) sum += (scores[s] = exp(scores[s] - mx));
          for (int e = 0; e < QD; e++) {
            double o = 0;
            for (int s = 0; s <= t; s++) o += scores[s] / sum * v[s][kv * QD + e];
            tmp[hh * QD + e] = o * sigm(q[t][hh * 2 * QD + QD + e]); /* gate = second half */
          }
        }
        mv(P "self_attn.o_proj.weight", l, QH, QNH * QD, tmp, y[t]);
      }
    }
    for (int t = 0; t < T; t++) {
      for (int e = 0; e < QH; e++) x[t][e] += y[t][e];
      rms1p(x[t], QH, P "post_attention_layernorm.weight", l, h[t]);
      mv(P "mlp.gate_proj.weight", l, QF, QH, h[t], g);
      mv(P "mlp.up_proj.weight", l, QF, QH, h[t], u);
      for (int f = 0; f < QF; f++) g[f] = silud(g[f]) * u[f];
      mv(P "mlp.down_proj.weight", l, QH, QF, g, y[t]);
      for (int e = 0; e < QH; e++) x[t][e] += y[t][e];
    }
  }
  rms1p(x[T - 1], QH, "model.norm.weight%.0d", 0, tmp);
  mv("model.embed_tokens.weight%.0d", 0, QV, QH, tmp, logits);
  free(x); free(h); free(y); free(qkv); free(q); free(k); free(v);
}
#undef P

/* wisp logits for tok[0..n) via the CLI; returns malloc'd QV floats. */
static double *cli_logits(const char *art, const int *tok, int n, const char *tuning) {
  static char cmd[8192], log[1 << 16];
  size_t len = (size_t)snprintf(cmd, sizeof cmd, "%s logits --backend cpu -m %s%s%s --tokens ", test_wisp_bin(), art,
                                tuning ? " --tuning " : "", tuning ? tuning : "");
  for (int t = 0; t < n; t++) len += (size_t)snprintf(cmd + len, sizeof cmd - len, "%s%d", t ? "," : "", tok[t]);
  if (test_run(cmd, log, sizeof log) != 0) { fprintf(stderr, "  %s\n", log); return NULL; }
  cJSON *j = cJSON_Parse(log);
  const cJSON *got = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "logits"), 0);
  double *out = NULL;
  if (cJSON_GetArraySize(got) == QV && (out = malloc(sizeof(double) * QV)))
    for (int i = 0; i < QV; i++) out[i] = cJSON_GetArrayItem(got, i)->valuedouble;
  cJSON_Delete(j);
  return out;
}

static double rel_diff(const double *a, const double *ref, int n, double *maxref_out) {
  double md = 0, mr = 0;
  for (int i = 0; i < n; i++) {
    md = fmax(md, fabs(a[i] - ref[i]));
    mr = fmax(mr, fabs(ref[i]));
  }
  if (maxref_out) *maxref_out = mr;
  return mr > 0 ? md / mr : INFINITY;
}

TEST(qwen3_5_tiny_model_matches_independent_reference) {
  const char *hf = make_qwen("q35_hf", NULL);
  CHECK(hf);
  char art[600], log[8192];
  snprintf(art, sizeof art, "%s/q35_f32", test_tmpdir());
  CHECKF(convert(hf, art, "f32", log, sizeof log) == 0, "%s", log);
  enum { T = 70 };
  int tok[T];
  for (int t = 0; t < T; t++) tok[t] = (t * 37 + 11) % QV;
  int lens[3] = {1, 2, T};
  for (int c = 0; c < 3; c++) {
    double ref[QV], mr;
    double *got = cli_logits(art, tok, lens[c], NULL);
    CHECKF(got, "wisp logits failed for %d tokens", lens[c]);
    qwen_forward_ref(tok, lens[c], ref);
    double r = rel_diff(got, ref, QV, &mr);
    free(got);
    if (getenv("WISP_TEST_VERBOSE")) fprintf(stderr, "  %d tokens: max|diff|/max|ref| %.3g (max|ref| %.3g)\n", lens[c], r, mr);
    CHECKF(mr > 0.1 && r <= 1e-4, "%d tokens: max|diff|/max|ref| = %.3g (max|ref| %.3g)", lens[c], r, mr);
  }
  /* The comparison means something only if the last logits depend on the
   * distant past: change token 0 of 70 and the reference must move. */
  double a[QV], b[QV];
  qwen_forward_ref(tok, T, a);
  tok[0] = (tok[0] + 1) % QV;
  qwen_forward_ref(tok, T, b);
  double moved = rel_diff(b, a, QV, NULL);
  if (getenv("WISP_TEST_VERBOSE")) fprintf(stderr, "  token 0 changed: last logits move by %.3g (relative)\n", moved);
  CHECKF(moved > 1e-3, "the 70th token's logits hardly depend on token 0 (%.3g): the state is not exercised", moved);
}

/* Released checkpoints nest the text config (Qwen3_5ForConditionalGeneration),
 * keep the text model under model.language_model. and carry vision and MTP
 * tensors: the same model must come out. */
TEST(qwen3_5_language_model_prefix_converts_the_same) {
  qfx_opts o = {.prefix = "model.language_model."};
  const char *a = make_qwen("q35_pa", NULL), *b = make_qwen("q35_pb", &o);
  CHECK(a && b);
  char art_a[600], art_b[600], log[8192];
  snprintf(art_a, sizeof art_a, "%s/q35_pa_art", test_tmpdir());
  snprintf(art_b, sizeof art_b, "%s/q35_pb_art", test_tmpdir());
  CHECKF(convert(a, art_a, "q4", log, sizeof log) == 0, "%s", log);
  CHECKF(convert(b, art_b, "q4", log, sizeof log) == 0, "%s", log);
  char pa[700], pb[700];
  snprintf(pa, sizeof pa, "%s/weights.bin", art_a);
  snprintf(pb, sizeof pb, "%s/weights.bin", art_b);
  char *wa = NULL, *wb = NULL;
  size_t la = 0, lb = 0;
  CHECK(wisp_read_file(pa, &wa, &la) == WISP_OK && wisp_read_file(pb, &wb, &lb) == WISP_OK);
  int same = la == lb && !memcmp(wa, wb, la);
  free(wa);
  free(wb);
  CHECK(same);
}

static float *session_logits(const char *dir, const int32_t *ids, int n, int one_by_one) {
  wisp_model *m = NULL;
  wisp_session *s = NULL;
  if (wisp_model_open(dir, &m)) return NULL;
  wisp_session_options o = {.backend = "cpu", .threads = 2};
  float *out = NULL;
  if (wisp_session_new(m, &o, &s) == WISP_OK) {
    out = malloc(sizeof(float) * (size_t)wisp_model_vocab(m));
    int ok = out != NULL;
    if (one_by_one)
      for (int t = 0; ok && t < n; t++) ok = wisp_session_eval(s, ids + t, 1, t == n - 1 ? out : NULL) == WISP_OK;
    else
      ok = ok && wisp_session_eval(s, ids, n, out) == WISP_OK;
    if (!ok) { free(out); out = NULL; }
  }
  wisp_session_free(s);
  wisp_model_close(m);
  return out;
}

/* 70 tokens: prefill runs chunks of 64 + 6, so the conv and recurrent states
 * and the KV cache must carry across the chunk boundary. */
TEST(qwen3_5_prefill_matches_decode) {
  const char *hf = make_qwen("q35_pd", NULL);
  CHECK(hf);
  char art[600], log[8192];
  snprintf(art, sizeof art, "%s/q35_pd_art", test_tmpdir());
  CHECKF(convert(hf, art, "q4", log, sizeof log) == 0, "%s", log);
  enum { T = 70 };
  int32_t ids[T];
  for (int t = 0; t < T; t++) ids[t] = (t * 53 + 5) % QV;
  float *a = session_logits(art, ids, T, 0), *b = session_logits(art, ids, T, 1);
  CHECKF(a && b, "%s", wisp_last_error());
  double md = 0, mr = 0;
  for (int i = 0; i < QV; i++) {
    md = fmax(md, fabs((double)a[i] - b[i]));
    mr = fmax(mr, fabs((double)a[i]));
  }
  free(a);
  free(b);
  CHECKF(mr > 0.1 && md <= 1e-4 * mr, "prefill vs decode: max|diff| %.3g, max|ref| %.3g", md, mr);
}

/* A chunked prefill of 70 tokens (64 + 6), then decode steps: the CPU's
 * logits at 2, 4 and 5 threads are those of 1 thread, bit for bit
 * (tests/test_cpu_threads.c says why that holds). */
TEST(qwen3_5_cpu_logits_do_not_depend_on_the_thread_count) {
  const char *hf = make_qwen("q35_thr", NULL);
  CHECK(hf);
  char art[600], log[8192], why[300] = "";
  snprintf(art, sizeof art, "%s/q35_thr_art", test_tmpdir());
  CHECKF(convert(hf, art, "q4", log, sizeof log) == 0, "%s", log);
  int32_t ids[74];
  for (int t = 0; t < 74; t++) ids[t] = (t * 29 + 7) % QV;
  CHECKF(fixture_cpu_thread_invariant(art, ids, 70, 4, NULL, why, sizeof why), "default profile: %s", why);
  CHECKF(fixture_cpu_thread_invariant(art, ids, 70, 4, "throughput", why, sizeof why), "throughput profile: %s", why);
}

TEST(qwen3_5_q4k_artifact_runs_and_tracks_f32) {
  const char *hf = make_qwen("q35_k", NULL);
  CHECK(hf);
  char art[600], art32[600], log[8192], mpath[700];
  snprintf(art, sizeof art, "%s/q35_k_art", test_tmpdir());
  snprintf(art32, sizeof art32, "%s/q35_k_f32", test_tmpdir());
  CHECKF(convert(hf, art, "q4k", log, sizeof log) == 0, "%s", log);
  CHECKF(convert(hf, art32, "f32", log, sizeof log) == 0, "%s", log);
  snprintf(mpath, sizeof mpath, "%s/manifest.json", art);
  char *man = NULL;
  CHECK(wisp_read_file(mpath, &man, NULL) == WISP_OK);
  /* cols 256 -> Q4_K; cols 64 (lin.out_proj, attn.o_proj) stay Q4; embed Q4Z */
  int layout_ok = strstr(man, "\"L0.lin.in_proj.q4k\"") && strstr(man, "\"L1.attn.qkv.q4k\"") &&
                  strstr(man, "\"L0.mlp.down.q4k\"") && strstr(man, "\"L0.lin.out_proj.quant\"") &&
                  strstr(man, "\"L1.attn.o_proj.quant\"") && strstr(man, "\"embed.zero_points\"") &&
                  strstr(man, "\"qwen3_5\"");
  free(man);
  CHECK(layout_ok);
  enum { T = 17 };
  int tok[T];
  for (int t = 0; t < T; t++) tok[t] = (t * 29 + 3) % QV;
  double *k = cli_logits(art, tok, T, NULL), *ks = cli_logits(art, tok, T, "cpuScalar=1");
  double *f = cli_logits(art32, tok, T, NULL);
  CHECK(k && ks && f);
  double mr, r_simd = rel_diff(k, ks, QV, &mr), r_f32 = rel_diff(k, f, QV, NULL);
  free(k);
  free(ks);
  free(f);
  if (getenv("WISP_TEST_VERBOSE")) fprintf(stderr, "  q4k vs scalar %.3g, q4k vs f32 %.3g\n", r_simd, r_f32);
  CHECKF(r_simd <= 1e-4, "q4k AVX2 vs scalar: %.3g", r_simd);
  /* 0.029 for these weights and tokens (deterministic); a scale or min
   * unpacking that is off in one bit gives 0.041 or more. The exact check of
   * the unpacking is q4k_simd_kernels_match_scalar's. */
  CHECKF(r_f32 <= 0.035, "q4k vs f32 logits: relative max diff %.3g", r_f32);
}

/* --quant f16 / q8_0: every matrix (embed/head too) in that type; logits
 * track f32 (relative max diff <= 1e-3 for f16, 2e-2 for q8_0) and AVX2
 * agrees with scalar. */
TEST(qwen3_5_f16_q8_0_artifacts_track_f32) {
  const char *hf = make_qwen("q35_fq", NULL);
  CHECK(hf);
  char art32[600], art[600], log[8192], mpath[700];
  snprintf(art32, sizeof art32, "%s/q35_fq_f32", test_tmpdir());
  CHECKF(convert(hf, art32, "f32", log, sizeof log) == 0, "%s", log);
  enum { T = 9 };
  int tok[T];
  for (int t = 0; t < T; t++) tok[t] = (t * 31 + 5) % QV;
  double *f = cli_logits(art32, tok, T, NULL);
  CHECK(f);
  const char *quants[2] = {"f16", "q8_0"};
  const double tol[2] = {1e-3, 2e-2};
  for (int k = 0; k < 2 && f; k++) {
    snprintf(art, sizeof art, "%s/q35_fq_%s", test_tmpdir(), quants[k]);
    CHECKF(convert(hf, art, quants[k], log, sizeof log) == 0, "%s", log);
    snprintf(mpath, sizeof mpath, "%s/manifest.json", art);
    char *man = NULL, want[3][64];
    CHECK(wisp_read_file(mpath, &man, NULL) == WISP_OK);
    snprintf(want[0], sizeof want[0], "\"L0.lin.out_proj.%s\"", quants[k]);
    snprintf(want[1], sizeof want[1], "\"L1.attn.qkv.%s\"", quants[k]);
    snprintf(want[2], sizeof want[2], "\"embed.%s\"", quants[k]);
    CHECK(man && strstr(man, want[0]) && strstr(man, want[1]) && strstr(man, want[2]) &&
          !strstr(man, "zero_points"));
    free(man);
    double *a = cli_logits(art, tok, T, NULL), *as = cli_logits(art, tok, T, "cpuScalar=1");
    CHECK(a && as);
    if (a && as) {
      double r_simd = rel_diff(a, as, QV, NULL), r_f32 = rel_diff(a, f, QV, NULL);
      CHECKF(r_simd <= 1e-4, "%s AVX2 vs scalar: %.3g", quants[k], r_simd);
      CHECKF(r_f32 <= tol[k], "%s vs f32 logits: relative max diff %.3g", quants[k], r_f32);
    }
    free(a);
    free(as);
  }
  free(f);
}

/* Each matmul op of both phases of session s's plan (the head in the
 * epilogue too) names kernel `want`: 1 when all do, and there are some. */
static int plan_matmuls_are(const wisp_session *s, const char *want) {
  const wisp_plan *p = wisp_session_plan(s);
  int n = 0, all = 1;
  for (int ph = 0; ph < 2; ph++) {
    const wisp_plan_phase *phase = &p->phases[ph];
    for (int g = 0; g < phase->n_groups; g++)
      for (int i = 0; i < phase->groups[g].n_ops; i++)
        if (!strcmp(phase->groups[g].ops[i].op, "matmul")) n++, all &= !strcmp(phase->groups[g].ops[i].kernel, want);
    for (int i = 0; i < phase->n_epilogue; i++)
      if (!strcmp(phase->epilogue[i].op, "matmul")) n++, all &= !strcmp(phase->epilogue[i].kernel, want);
  }
  return n > 0 && all;
}

/* An f16 artifact (its head tied to the embedding) under the throughput
 * profile: the plan names f16_i8 for every matrix, the head too, and the
 * logits of a 9-token prefill and of 9 one-token decodes move from the
 * default plan's exact f16 products by the rounding of weights (to Q8_0)
 * and activations (to int8): by more than nothing (the integer path ran)
 * and by at most 5% of max|logit|, the bound of the other integer paths
 * (cpu_i8_throughput_plan_runs_integer_products); this fixture measures
 * about 0.3%. */
TEST(qwen3_5_f16_throughput_runs_f16_i8) {
  const char *hf = make_qwen("q35_f16i8", NULL);
  CHECK(hf);
  char art[600], log[8192];
  snprintf(art, sizeof art, "%s/q35_f16i8_f16", test_tmpdir());
  CHECKF(convert(hf, art, "f16", log, sizeof log) == 0, "%s", log);
  enum { T = 9 };
  int32_t tok[T];
  for (int t = 0; t < T; t++) tok[t] = (t * 31 + 5) % QV;
  wisp_model *m = NULL;
  CHECKF(wisp_model_open(art, &m) == WISP_OK, "%s", wisp_last_error());
  static float out[2][2][QV]; /* [default, throughput][prefill, decode] */
  const char *profiles[2] = {"default", "throughput"};
  for (int p = 0; p < 2; p++) {
    wisp_session_options o = {.backend = "cpu", .threads = 2, .profile = profiles[p]};
    wisp_session *s = NULL;
    CHECKF(wisp_session_new(m, &o, &s) == WISP_OK, "%s", wisp_last_error());
    if (!wisp_session_plan(s)->device.has_avx2) {
      wisp_session_free(s);
      wisp_model_close(m);
      SKIP("no AVX2: the registry keeps the exact products everywhere (not run)");
    }
    const char *want = p ? "matmul/f16_i8" : "matmul/f16_avx2";
    CHECKF(plan_matmuls_are(s, want), "%s profile: not every matmul of the plan is %s", profiles[p], want);
    const wisp_matrix *head = wisp_graph_matrix(&s->graph, -1, "head");
    CHECKF(!strcmp(head->choice[WISP_PHASE_DECODE].variant, want + 7), "%s profile: the head runs %s", profiles[p],
           head->choice[WISP_PHASE_DECODE].variant);
    CHECK(wisp_session_eval(s, tok, T, out[p][0]) == WISP_OK);
    wisp_session_free(s);
    CHECK(wisp_session_new(m, &o, &s) == WISP_OK);
    for (int i = 0; i < T; i++) CHECK(wisp_session_eval(s, tok + i, 1, out[p][1]) == WISP_OK);
    wisp_session_free(s);
  }
  wisp_model_close(m);
  for (int ph = 0; ph < 2; ph++) {
    float worst = 0, scale = 0;
    for (int i = 0; i < QV; i++) {
      worst = fmaxf(worst, fabsf(out[0][ph][i] - out[1][ph][i]));
      scale = fmaxf(scale, fabsf(out[0][ph][i]));
    }
    if (getenv("WISP_TEST_VERBOSE"))
      fprintf(stderr, "  f16_i8 %s logits --backend cpu vs exact: max|diff| %.3g of max|logit| %.3g\n", ph ? "decode" : "prefill",
              worst, scale);
    CHECKF(worst > 0, "%s: the throughput plan gave the exact logits: f16_i8 did not run", ph ? "decode" : "prefill");
    CHECKF(worst <= 0.05f * scale, "%s: f16_i8 logits differ by %g of max|logit| %g", ph ? "decode" : "prefill",
           worst, scale);
  }
}

/* ---- bad inputs ---- */

static int one_line_with(const char *log, const char *a, const char *b, const char *c) {
  const char *nl = strchr(log, '\n');
  int lines = nl && nl[1] ? 2 : 1;
  return lines == 1 && strstr(log, a) && (!b || strstr(log, b)) && (!c || strstr(log, c));
}

TEST(qwen3_5_convert_rejects_bad_inputs) {
  char art[600], log[8192];
  snprintf(art, sizeof art, "%s/q35_bad_art", test_tmpdir());
  qfx_opts shape = {.bad_shape = "layers.0.linear_attn.in_proj_z"};
  const char *hf = make_qwen("q35_bad1", &shape);
  CHECK(hf);
  CHECK(convert(hf, art, "f32", log, sizeof log) != 0);
  CHECKF(one_line_with(log, "model.layers.0.linear_attn.in_proj_z.weight", "[65, 256]", "[64, 256]"), "%s", log);
  qfx_opts lt = {.layer_type = "mamba"};
  hf = make_qwen("q35_bad2", &lt);
  CHECK(hf);
  CHECK(convert(hf, art, "f32", log, sizeof log) != 0);
  CHECKF(one_line_with(log, "layer_types[1]", "mamba", NULL), "%s", log);
  CHECK(!wisp_path_exists(art));
}

TEST(qwen3_5_artifact_and_backend_checks) {
  const char *hf = make_qwen("q35_chk", NULL);
  CHECK(hf);
  char art[600], log[8192], mpath[700];
  snprintf(art, sizeof art, "%s/q35_chk_art", test_tmpdir());
  CHECKF(convert(hf, art, "f32", log, sizeof log) == 0, "%s", log);
  /* a backend without the Gated DeltaNet op: a clear error at prepare */
  wisp_artifact *a = NULL;
  CHECKF(wisp_artifact_open(art, &a) == WISP_OK, "%s", wisp_last_error());
  const wisp_arch *arch = wisp_arch_find(a->architecture);
  CHECK(arch && !strcmp(arch->name, "qwen3_5"));
  void *w = NULL;
  wisp_backend *be = NULL;
  wisp_model_shape shape;
  wisp_graph g = {0};
  int ok = arch->bind(a, &w) == WISP_OK && arch->plan_shape(w, &shape) == WISP_OK &&
           arch->describe(&shape, w, &g) == WISP_OK && wisp_cpu_backend_new(1, &be) == WISP_OK;
  wisp_status st = WISP_OK;
  if (ok) {
    be->gated_deltanet = NULL;
    st = wisp_graph_prepare(&g, be);
  }
  if (be) be->destroy(be);
  wisp_graph_free(&g);
  if (w) arch->free_weights(w);
  wisp_artifact_free(a);
  CHECK(ok);
  CHECKF(st != WISP_OK && strstr(wisp_last_error(), "gated_deltanet"), "%s", wisp_last_error());
  /* an LFM2 "conv" layer in a qwen3_5 artifact */
  snprintf(mpath, sizeof mpath, "%s/manifest.json", art);
  char *man = NULL;
  CHECK(wisp_read_file(mpath, &man, NULL) == WISP_OK);
  cJSON *j = cJSON_Parse(man);
  free(man);
  cJSON *types = cJSON_GetObjectItemCaseSensitive(
      cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "runtime"), "shape"), "layerTypes");
  cJSON_ReplaceItemInArray(types, 0, cJSON_CreateString("conv"));
  char *text = cJSON_Print(j);
  cJSON_Delete(j);
  CHECK(fx_write_bytes(mpath, text, strlen(text)) == 0);
  free(text);
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "%s logits --backend cpu -m %s --tokens 1,2", test_wisp_bin(), art);
  CHECK(test_run(cmd, log, sizeof log) != 0);
  CHECKF(one_line_with(log, "layer 0 is 'conv'", "qwen3_5", NULL), "%s", log);
}

/* ---- Q4_K ---- */

static float frand_k(unsigned *s) {
  *s = *s * 1103515245u + 12345u;
  return ((*s >> 8) & 0xFFFF) / 32768.0f - 1.0f;
}

TEST(q4k_layout_roundtrip_and_error_bound) {
  /* f16 conversion round trip on representable values */
  const float f16s[6] = {0.0f, 1.0f, -2.5f, 65504.0f, 6.103515625e-05f, 5.960464477539063e-08f};
  for (int i = 0; i < 6; i++) CHECK(wisp_f16_to_f32(wisp_f32_to_f16(f16s[i])) == f16s[i]);
  CHECK(wisp_f32_to_f16(1.0f + 1.0f / 4096.0f) == 0x3c00); /* ties to even */
  const int cols_list[3] = {256, 512, 2560};
  for (int ci = 0; ci < 3; ci++) {
    const int R = 7, C = cols_list[ci];
    float *w = malloc(sizeof(float) * (size_t)R * C), *back = malloc(sizeof(float) * (size_t)C);
    uint8_t *q = malloc(wisp_q4k_bytes(R, C));
    CHECK(w && back && q);
    unsigned s = 9u + (unsigned)ci;
    for (int i = 0; i < R * C; i++) {
      float scale = 0.05f * (float)(1 + (i / 32) % 7); /* sub-blocks of different ranges */
      w[i] = frand_k(&s) * scale + ((i / 32) % 3 == 0 ? 0.03f : 0.0f);
    }
    wisp_quantize_q4k(w, R, C, q);
    wisp_matrix m = {.type = WISP_W_Q4K, .rows = R, .cols = C, .q = q};
    double se = 0, sx = 0;
    int bound_ok = 1;
    for (int r = 0; r < R && bound_ok; r++) {
      wisp_matrix_row_f32(&m, r, back);
      for (int j = 0; j < C / 32; j++) {
        const float *x = w + (size_t)r * C + 32 * j;
        /* Half a step (d*sc), half a min unit (dmin), up to 15 * d/2 where a
         * rounded-down 6-bit scale makes the top clamp, and another step
         * because the least-squares fit may trade an end value's clamp for
         * a lower total error: a loose bound; the rms check below is the
         * quality measure. */
        const uint8_t *blk = q + ((size_t)r * (C / 256) + (size_t)j / 8) * WISP_Q4K_BYTES;
        float d = wisp_f16_to_f32((uint16_t)(blk[0] | blk[1] << 8)), dmin = wisp_f16_to_f32((uint16_t)(blk[2] | blk[3] << 8));
        int sc, mn;
        wisp_q4k_scale_min(blk + 4, j % 8, &sc, &mn);
        double bound = 1.5 * d * sc + 0.5 * dmin + 7.5 * d + 1e-6;
        for (int e = 0; e < 32; e++) {
          double err = fabs((double)back[32 * j + e] - x[e]);
          se += err * err;
          sx += (double)x[e] * x[e];
          if (err > bound) {
            fprintf(stderr, "  cols %d row %d sub-block %d: err %g > bound %g\n", C, r, j, err, bound);
            bound_ok = 0;
            break;
          }
        }
        if (!bound_ok) break;
      }
    }
    free(w);
    free(back);
    free(q);
    CHECK(bound_ok);
    CHECKF(sqrt(se / sx) < 0.08, "cols %d: relative rms error %.3g", C, sqrt(se / sx));
  }
}

/* A binary16 value, decoded from its fields (not through src/format). */
static double half_value(uint16_t h) {
  const int e = (h >> 10) & 31, f = h & 1023;
  const double v = e ? ldexp(1024 + f, e - 25) : ldexp(f, -24);
  return h & 0x8000 ? -v : v;
}

/* One Q4_K super-block dequantized from the layout in tensor.h, written
 * independently of src/format/tensor.c (whose scale/min helper both CPU
 * kernels share): the 12 bytes of 6-bit scales and mins, the nibbles of
 * sub-block pairs. */
static void q4k_block_independent(const uint8_t *blk, double *out) {
  const double d = half_value((uint16_t)(blk[0] + 256 * blk[1])), dmin = half_value((uint16_t)(blk[2] + 256 * blk[3]));
  int sc[8], mn[8];
  for (int j = 0; j < 4; j++) {
    sc[j] = blk[4 + j] % 64;
    mn[j] = blk[8 + j] % 64;
    sc[j + 4] = blk[12 + j] % 16 + blk[4 + j] / 64 * 16;
    mn[j + 4] = blk[12 + j] / 16 + blk[8 + j] / 64 * 16;
  }
  for (int e = 0; e < 256; e++) {
    const int sub = e / 32, byte = blk[16 + 32 * (e / 64) + e % 32];
    const int nibble = sub % 2 ? byte / 16 : byte % 16;
    out[e] = d * sc[sub] * nibble - dmin * mn[sub];
  }
}

/* The SIMD and scalar Q4_K kernels (dot and row dequantization) against
 * q4k_block_independent. */
TEST(q4k_simd_kernels_match_scalar) {
  const wisp_cpu_kernels *fast = wisp_cpu_kernels_get(), *ref = wisp_cpu_kernels_scalar();
  const int cols_list[3] = {256, 512, 2560};
  for (int ci = 0; ci < 3; ci++) {
    const int R = 5, C = cols_list[ci]; /* odd row count */
    float *w = malloc(sizeof(float) * (size_t)R * C), *x = malloc(sizeof(float) * (size_t)C);
    float *a = malloc(sizeof(float) * (size_t)C), *b = malloc(sizeof(float) * (size_t)C);
    uint8_t *q = malloc(wisp_q4k_bytes(R, C));
    CHECK(w && x && a && b && q);
    unsigned s = 77u + (unsigned)ci;
    for (int i = 0; i < R * C; i++) w[i] = frand_k(&s);
    for (int i = 0; i < C; i++) x[i] = frand_k(&s);
    wisp_quantize_q4k(w, R, C, q);
    wisp_matrix m = {.type = WISP_W_Q4K, .rows = R, .cols = C, .q = q};
    int ok = 1;
    double *v = malloc(sizeof(double) * (size_t)C);
    CHECK(v);
    for (int r = 0; r < R && ok; r++) {
      double want = 0;
      for (int sb = 0; sb < C / 256; sb++)
        q4k_block_independent(q + ((size_t)r * (C / 256) + (size_t)sb) * WISP_Q4K_BYTES, v + 256 * sb);
      for (int c = 0; c < C; c++) want += v[c] * x[c];
      float f = fast->dot_q4k_row(&m, r, x), g = ref->dot_q4k_row(&m, r, x);
      if (fabs(f - want) > 1e-3 || fabs(g - want) > 1e-3) {
        fprintf(stderr, "  cols %d row %d: simd %g scalar %g dequantized independently %g\n", C, r, f, g, want);
        ok = 0;
      }
      ref->row_f32(&m, r, b);
      fast->row_f32(&m, r, a);
      for (int c = 0; c < C && ok; c++) {
        ok = a[c] == b[c] && fabs(b[c] - v[c]) <= 1e-6 * (fabs(v[c]) + 1e-3);
        if (!ok) fprintf(stderr, "  cols %d row %d col %d: simd %g scalar %g independent %g\n", C, r, c, a[c], b[c], v[c]);
      }
    }
    free(v);
    free(w);
    free(x);
    free(a);
    free(b);
    free(q);
    CHECKF(ok, "cols %d (%s vs scalar)", C, fast->name);
  }
}

/* The plan names the Qwen ops and the Q4_K variants; LFM2 plans keep their
 * op lists (test_plan.c covers them). */
TEST(qwen3_5_plan_lists_the_new_ops) {
  const char *hf = make_qwen("q35_plan", NULL);
  CHECK(hf);
  char art[600], cmd[1024];
  static char log[1 << 16];
  snprintf(art, sizeof art, "%s/q35_plan_art", test_tmpdir());
  CHECKF(convert(hf, art, "q4k", log, sizeof log) == 0, "%s", log);
  snprintf(cmd, sizeof cmd, "%s plan --backend cpu --profile exact -m %s", test_wisp_bin(), art);
  CHECKF(test_run(cmd, log, sizeof log) == 0, "%s", log);
  CHECKF(strstr(log, "linear_attention layers 0,2") && strstr(log, "gated_deltanet lin.core") &&
             strstr(log, "attention_gated attn.core") && strstr(log, "matmul/q4k_") &&
             strstr(log, "matmul lin.out_proj") && strstr(log, "embed/q4_asym_gather"),
         "%.2000s", log);
}

/* LFM2 with --quant q4k: the tiny LFM2 (hidden 64, FFN 64) has no matrix
 * with 256-multiple columns, so every matrix stays Q4 and, without the
 * optional transposed down copy, the logits equal the q4 artifact's.
 * (cli_logits expects QV = 96 logits: the tiny LFM2's vocabulary too.) */
TEST(q4k_lfm2_convert_runs) {
  char hf[512], a4[600], ak[600], log[8192];
  snprintf(hf, sizeof hf, "%s/lfm2_k_hf", test_tmpdir());
  mkdir(hf, 0755);
  CHECK(fx_write_tiny_lfm2(hf, NULL) == 0);
  snprintf(a4, sizeof a4, "%s/lfm2_k_q4", test_tmpdir());
  snprintf(ak, sizeof ak, "%s/lfm2_k_q4k", test_tmpdir());
  CHECKF(convert(hf, a4, "q4", log, sizeof log) == 0, "%s", log);
  CHECKF(convert(hf, ak, "q4k", log, sizeof log) == 0, "%s", log);
  int tok[9] = {1, 5, 9, 33, 2, 7, 80, 4, 11};
  double *x = cli_logits(a4, tok, 9, NULL), *y = cli_logits(ak, tok, 9, NULL);
  CHECK(x && y);
  int same = 1;
  for (int i = 0; i < QV; i++) same &= x[i] == y[i];
  free(x);
  free(y);
  CHECK(same);
  char mpath[700], *man = NULL;
  snprintf(mpath, sizeof mpath, "%s/manifest.json", ak);
  CHECK(wisp_read_file(mpath, &man, NULL) == WISP_OK);
  int no_kquant = strstr(man, "kquant") == NULL;
  free(man);
  CHECK(no_kquant);
}
