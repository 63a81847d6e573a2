/* Gemma 3 (architecture gemma3): a tiny Gemma3ForCausalLM checkpoint written
 * from C (3 layers: sliding, sliding, global; a window of 4 keys; rope bases
 * 1e4 and 1e6; query_pre_attn_scalar 24, not the head dim), converted (f32)
 * and run:
 *   - against an independent double-precision forward written here from
 *     the formulas (embedding * sqrt(hidden), (1 + w) RMSNorms before and
 *     after each block, q/k norm, per-kind rope, sliding-window GQA causal
 *     attention, GELU-tanh gating, tied head), prefill and greedy decode,
 *     and a check that the same reference with every layer global is far
 *     off (the window really limits attention);
 *   - WebGPU (lavapipe) against the CPU: logits and greedy tokens past the
 *     window, op by op and in the persistent decode (which must really run:
 *     its step counter), and a prompt far past the window with the
 *     persistent attention split over several key ranges, where a model
 *     whose layers are all global decodes other tokens (so the window, the
 *     second rope and the score scale all count in the persistent phases);
 *   - exported to GGUF, run from the GGUF in place, and converted back. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cJSON.h>

#include "backend/webgpu/wgpu_backend.h"
#include "engine/engine.h"
#include "tokenizer/chat.h"
#include "tokenizer/tokenizer.h"
#include "model/graph.h"
#include "util/file.h"
#include "st_fixture.h"
#include "fixtures.h"
#include "test.h"
#include "webgpu_fixture.h"
#include "wisp.h"

enum { GH = 64, GF = 96, GV = 80, GD = 32, GNH = 2, GKV = 1, GL = 3, GWIN = 4 };
#define GEPS 1e-6
static int g_qpas = 24; /* query_pre_attn_scalar */
static int g_cfg_all_global; /* 1: the checkpoint's layers are all full_attention */
static int g_max_pos = 256; /* max_position_embeddings */

/* The first n values of tensor fmt (%d = layer), from a cache of the values
 * made so far (the reference reads each weight many times). */
static const double *vals(const char *fmt, int layer, int64_t n) {
  enum { SLOTS = 64 };
  static struct { char name[128]; double *v; int64_t n; } cache[SLOTS];
  char name[128];
  snprintf(name, sizeof name, fmt, layer);
  int k = 0;
  while (k < SLOTS && cache[k].v && strcmp(cache[k].name, name)) k++;
  if (k == SLOTS) abort(); /* more tensors than the tiny model has */
  if (n > cache[k].n) {
    if (n < 2 * cache[k].n) n = 2 * cache[k].n;
    double *v = realloc(cache[k].v, sizeof(double) * (size_t)n);
    if (!v) abort();
    for (int64_t j = cache[k].n; j < n; j++) v[j] = fx_tiny_value(name, 13, j);
    snprintf(cache[k].name, sizeof cache[k].name, "%s", name);
    cache[k].v = v;
    cache[k].n = n;
  }
  return cache[k].v;
}

static double val(const char *fmt, int layer, int64_t i) { return vals(fmt, layer, i + 1)[i]; }

static int is_global(int l) { return l == GL - 1; }

static int write_tiny_gemma3(const char *dir) {
  char path[800], cfg[1400];
  snprintf(path, sizeof path, "%s/config.json", dir);
  snprintf(cfg, sizeof cfg,
           "{\"architectures\": [\"Gemma3ForCausalLM\"], \"model_type\": \"gemma3_text\", \"hidden_size\": %d, "
           "\"intermediate_size\": %d, \"num_hidden_layers\": %d, \"num_attention_heads\": %d, "
           "\"num_key_value_heads\": %d, \"head_dim\": %d, \"vocab_size\": %d, \"rms_norm_eps\": 1e-06, "
           "\"rope_theta\": 1000000.0, \"rope_local_base_freq\": 10000.0, \"rope_scaling\": null, "
           "\"sliding_window\": %d, \"layer_types\": [\"%s_attention\", \"%s_attention\", \"full_attention\"], "
           "\"query_pre_attn_scalar\": %d, \"final_logit_softcapping\": null, \"attn_logit_softcapping\": null, "
           "\"hidden_activation\": \"gelu_pytorch_tanh\", \"max_position_embeddings\": %d, "
           "\"tie_word_embeddings\": true, \"attention_bias\": false}",
           GH, GF, GL, GNH, GKV, GD, GV, GWIN, g_cfg_all_global ? "full" : "sliding",
           g_cfg_all_global ? "full" : "sliding", g_qpas, g_max_pos);
  if (fx_write_bytes(path, cfg, strlen(cfg))) return -1;
  static const fx_layer_tensor per[] = {
      {"model.layers.%d.input_layernorm.weight", 0, GH},
      {"model.layers.%d.post_attention_layernorm.weight", 0, GH},
      {"model.layers.%d.pre_feedforward_layernorm.weight", 0, GH},
      {"model.layers.%d.post_feedforward_layernorm.weight", 0, GH},
      {"model.layers.%d.self_attn.q_proj.weight", GNH * GD, GH}, {"model.layers.%d.self_attn.k_proj.weight", GKV * GD, GH},
      {"model.layers.%d.self_attn.v_proj.weight", GKV * GD, GH}, {"model.layers.%d.self_attn.o_proj.weight", GH, GNH * GD},
      {"model.layers.%d.self_attn.q_norm.weight", 0, GD},        {"model.layers.%d.self_attn.k_norm.weight", 0, GD},
      {"model.layers.%d.mlp.gate_proj.weight", GF, GH},          {"model.layers.%d.mlp.up_proj.weight", GF, GH},
      {"model.layers.%d.mlp.down_proj.weight", GH, GF}};
  return fx_write_layered_checkpoint(dir, per, (int)(sizeof per / sizeof *per), GL, GV, GH, val);
}

int fx_write_tiny_gemma3(const char *dir) { return write_tiny_gemma3(dir); }

/* ---- the reference forward (double) ---- */

static int g_all_global; /* 1: every layer global (to show that the window matters) */

/* Gemma3RMSNorm: x / rms(x) * (1 + w). */
static void rms(const double *x, int n, const char *fmt, int layer, double *out) {
  double ss = 0;
  for (int i = 0; i < n; i++) ss += x[i] * x[i];
  double r = 1.0 / sqrt(ss / n + GEPS);
  const double *w = vals(fmt, layer, n);
  for (int i = 0; i < n; i++) out[i] = x[i] * r * (1.0 + w[i]);
}

static void mv(const char *fmt, int layer, int rows, int cols, const double *x, double *y) {
  const double *w = vals(fmt, layer, (int64_t)rows * cols);
  for (int r = 0; r < rows; r++) {
    double s = 0;
    for (int c = 0; c < cols; c++) s += w[(int64_t)r * cols + c] * x[c];
    y[r] = s;
  }
}

static void rope(double *v, int pos, double theta) { /* rotate-half, inv_freq in f32 as transformers */
  for (int j = 0; j < GD / 2; j++) {
    double inv = (double)(1.0f / powf((float)theta, (float)(2 * j) / (float)GD));
    double ang = pos * inv, a = v[j], b = v[j + GD / 2];
    v[j] = a * cos(ang) - b * sin(ang);
    v[j + GD / 2] = b * cos(ang) + a * sin(ang);
  }
}

static double gelu_tanh(double g) { return 0.5 * g * (1.0 + tanh(sqrt(2.0 / M_PI) * (g + 0.044715 * g * g * g))); }

static void forward(const int *tok, int T, double *logits) {
  double (*x)[GH] = calloc((size_t)T, sizeof *x), (*q)[GNH * GD] = calloc((size_t)T, sizeof *q);
  double (*k)[GKV * GD] = calloc((size_t)T, sizeof *k), (*v)[GKV * GD] = calloc((size_t)T, sizeof *v);
  double h[GH], y[GH], att[GNH * GD], g[GF], u[GF], tmp[GD], *sc = calloc((size_t)T + 1, sizeof(double));
  const double *emb = vals("model.embed_tokens.weight", 0, (int64_t)GV * GH);
  for (int t = 0; t < T; t++)
    for (int c = 0; c < GH; c++) x[t][c] = emb[(int64_t)tok[t] * GH + c] * sqrt((double)GH);
  for (int l = 0; l < GL; l++) {
    const int global = g_all_global || is_global(l);
    const double theta = global ? 1000000.0 : 10000.0;
    for (int t = 0; t < T; t++) {
      rms(x[t], GH, "model.layers.%d.input_layernorm.weight", l, h);
      mv("model.layers.%d.self_attn.q_proj.weight", l, GNH * GD, GH, h, q[t]);
      mv("model.layers.%d.self_attn.k_proj.weight", l, GKV * GD, GH, h, k[t]);
      mv("model.layers.%d.self_attn.v_proj.weight", l, GKV * GD, GH, h, v[t]);
      for (int hh = 0; hh < GNH; hh++) {
        rms(q[t] + hh * GD, GD, "model.layers.%d.self_attn.q_norm.weight", l, tmp);
        memcpy(q[t] + hh * GD, tmp, sizeof tmp);
        rope(q[t] + hh * GD, t, theta);
      }
      for (int hh = 0; hh < GKV; hh++) {
        rms(k[t] + hh * GD, GD, "model.layers.%d.self_attn.k_norm.weight", l, tmp);
        memcpy(k[t] + hh * GD, tmp, sizeof tmp);
        rope(k[t] + hh * GD, t, theta);
      }
    }
    for (int t = 0; t < T; t++) {
      const int lo = global || t < GWIN ? 0 : t - GWIN + 1;
      for (int hh = 0; hh < GNH; hh++) {
        int kv = hh / (GNH / GKV);
        double mx = -1e300, sum = 0;
        for (int s = lo; s <= t; s++) {
          double d = 0;
          for (int e = 0; e < GD; e++) d += q[t][hh * GD + e] * k[s][kv * GD + e];
          sc[s] = d / sqrt((double)g_qpas);
          mx = fmax(mx, sc[s]);
        }
        for (int s = lo; s <= t; s++) sum += (sc[s] = exp(sc[s] - mx));
        for (int e = 0; e < GD; e++) {
          double o = 0;
          for (int s = lo; s <= t; s++) o += sc[s] / sum * v[s][kv * GD + e];
          att[hh * GD + e] = o;
        }
      }
      mv("model.layers.%d.self_attn.o_proj.weight", l, GH, GNH * GD, att, y);
      rms(y, GH, "model.layers.%d.post_attention_layernorm.weight", l, h);
      for (int c = 0; c < GH; c++) x[t][c] += h[c];
      rms(x[t], GH, "model.layers.%d.pre_feedforward_layernorm.weight", l, h);
      mv("model.layers.%d.mlp.gate_proj.weight", l, GF, GH, h, g);
      mv("model.layers.%d.mlp.up_proj.weight", l, GF, GH, h, u);
      for (int f = 0; f < GF; f++) g[f] = gelu_tanh(g[f]) * u[f];
      mv("model.layers.%d.mlp.down_proj.weight", l, GH, GF, g, y);
      rms(y, GH, "model.layers.%d.post_feedforward_layernorm.weight", l, h);
      for (int c = 0; c < GH; c++) x[t][c] += h[c];
    }
  }
  rms(x[T - 1], GH, "model.norm.weight", 0, h);
  mv("model.embed_tokens.weight", 0, GV, GH, h, logits); /* tied head */
  free(x), free(q), free(k), free(v), free(sc);
}

static const char *g_quant = "f32"; /* convert's --quant */

/* TMP/NAME: the tiny checkpoint (query_pre_attn_scalar qpas) converted to an
 * artifact (g_quant); NULL on failure. */
static const char *tiny_artifact(const char *name, int qpas, char *art, size_t cap) {
  char hf[600], cmd[2048], log[4096];
  snprintf(hf, sizeof hf, "%s/%s_hf", test_tmpdir(), name);
  snprintf(art, cap, "%s/%s", test_tmpdir(), name);
  g_qpas = qpas;
  int bad = mkdir(hf, 0755) || write_tiny_gemma3(hf);
  g_qpas = 24;
  if (bad) return NULL;
  snprintf(cmd, sizeof cmd, "%s convert %s -o %s --quant %s --quiet", test_wisp_bin(), hf, art, g_quant);
  if (test_run(cmd, log, sizeof log)) {
    fprintf(stderr, "     convert: %s\n", log);
    return NULL;
  }
  return art;
}

enum { T = 16, G = 6 };

static void prompt(int32_t *tok, int n) {
  for (int t = 0; t < n; t++) tok[t] = (t * 29 + 5) % GV;
}

/* The larger of two differences; NaN when either is (fmax would drop it). */
static double worse(double d, double e) { return d != d || e <= d ? d : e; }

static double max_abs_diff(const float *a, const double *b, int n, double *maxref) {
  double d = 0;
  *maxref = 0;
  for (int i = 0; i < n; i++) { /* a NaN difference makes d NaN (fmax would drop it), failing the check */
    d = worse(d, fabs(a[i] - b[i]));
    *maxref = fmax(*maxref, fabs(b[i]));
  }
  return d;
}

TEST(gemma3_tiny_matches_independent_reference_prefill_and_decode) {
  char buf[600];
  const char *art = tiny_artifact("gemma3_ref", 24, buf, sizeof buf);
  CHECK(art != NULL);
  if (!art) return;
  wisp_model *m = NULL;
  CHECKF(wisp_model_open(art, &m) == WISP_OK, "%s", wisp_last_error());
  int32_t tok[T + G];
  int ref_tok[T + G];
  prompt(tok, T);
  for (int i = 0; i < T; i++) ref_tok[i] = tok[i];
  float got[GV];
  double ref[GV], maxref;
  const int lens[3] = {1, 3, T};
  for (int c = 0; c < 3; c++) {
    wisp_session *s = NULL;
    wisp_session_options o = {.backend = "cpu", .threads = 1};
    CHECKF(wisp_session_new(m, &o, &s) == WISP_OK, "%s", wisp_last_error());
    if (!s) break;
    CHECKF(wisp_session_eval(s, tok, lens[c], got) == WISP_OK, "%s", wisp_last_error());
    forward(ref_tok, lens[c], ref);
    double d = max_abs_diff(got, ref, GV, &maxref);
    CHECKF(maxref > 0.1 && d <= 1e-4 * maxref, "%d tokens: max|diff| %.3g, max|ref| %.3g", lens[c], d, maxref);
    if (c == 2) {
      /* past the window, a model whose every layer is global is far off */
      g_all_global = 1;
      forward(ref_tok, lens[c], ref);
      g_all_global = 0;
      double off = max_abs_diff(got, ref, GV, &maxref);
      CHECKF(off > 100 * d && off > 1e-3 * maxref, "with every layer global max|diff| is only %.3g", off);
      /* greedy decode vs the reference recomputed per step */
      int32_t first = 0;
      for (int i = 1; i < GV; i++) if (got[i] > got[first]) first = i;
      int32_t gen[G];
      int made = 0;
      wisp_generate_options go = {.temperature = 0};
      CHECKF(wisp_session_generate(s, first, G, &go, gen, &made) == WISP_OK && made == G, "%s", wisp_last_error());
      ref_tok[T] = first;
      for (int st = 0; st + 1 < G; st++) {
        forward(ref_tok, T + 1 + st, ref);
        int best = 0;
        for (int i = 1; i < GV; i++) if (ref[i] > ref[best]) best = i;
        ref_tok[T + 1 + st] = best;
        CHECKF(gen[st] == best, "greedy step %d: wisp %d, reference %d", st, gen[st], best);
      }
    }
    wisp_session_free(s);
  }
  wisp_model_close(m);
}

static uint64_t persistent_steps(wisp_session *s) {
  wisp_wgpu_backend_stats st = {0};
  return wisp_wgpu_backend_stats_get(s->backend, &st) ? st.persistent_steps : 0;
}

/* n greedy tokens after the prompt: the prompt's argmax, then the decode loop. */
static int greedy(wisp_session *s, const int32_t *tok, int np, int n, int32_t *out, float *logits) {
  if (wisp_session_eval(s, tok, np, logits) != WISP_OK) return 0;
  int32_t first = 0;
  for (int i = 1; i < GV; i++) if (logits[i] > logits[first]) first = i;
  out[0] = first;
  int made = 0;
  wisp_generate_options go = {.temperature = 0, .batch = 8};
  return wisp_session_generate(s, first, n - 1, &go, out + 1, &made) == WISP_OK && made == n - 1;
}

TEST(gemma3_webgpu_matches_cpu) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  char buf[600];
  const char *art = tiny_artifact("gemma3_gpu", 24, buf, sizeof buf);
  CHECK(art != NULL);
  if (!art) return;
  wisp_model *m = NULL;
  CHECKF(wisp_model_open(art, &m) == WISP_OK, "%s", wisp_last_error());
  enum { N = 12 };
  int32_t tok[T], want[N], got[N];
  prompt(tok, T);
  float lc[GV], lg[GV];
  wisp_session *s = NULL;
  wisp_session_options cpu = {.backend = "cpu", .threads = 1};
  CHECKF(wisp_session_new(m, &cpu, &s) == WISP_OK && greedy(s, tok, T, N, want, lc), "%s", wisp_last_error());
  wisp_session_free(s);
  /* the one-token decode attention, the same on f16 caches, and the
   * persistent decode (post norms, GeGLU, the embedding scale, a window, a
   * second rope and a score scale in its phases): every decode step of
   * generate runs there */
  const char *tunings[3] = {"persist=0", "persist=0,kv=f16", "persist=1,persistGrid=1"};
  for (int c = 0; c < 3; c++) {
    wisp_session_options gpu = {.backend = "webgpu", .tuning = tunings[c]};
    s = NULL;
    CHECKF(wisp_session_new(m, &gpu, &s) == WISP_OK, "%s", wisp_last_error());
    if (!s) break;
    CHECKF(greedy(s, tok, T, N, got, lg), "%s: %s", tunings[c], wisp_last_error());
    double dmax = 0, rmax = 0;
    for (int i = 0; i < GV; i++) dmax = worse(dmax, fabs(lg[i] - lc[i])), rmax = fmax(rmax, fabs(lc[i]));
    CHECKF(dmax <= (c == 1 ? 1e-2 : 2e-3) * rmax, "%s: prompt logits max|diff| %.3g of %.3g", tunings[c], dmax, rmax);
    CHECKF(!memcmp(want, got, sizeof want), "%s: greedy tokens differ from the CPU's", tunings[c]);
    if (c == 0) { /* a prompt long enough that the window starts past the prefill's first key tile (64 keys) */
      enum { LONG = 150 };
      int32_t lt[LONG];
      float l1[GV], l2[GV];
      for (int i = 0; i < LONG; i++) lt[i] = (i * 37 + 11) % GV;
      wisp_session *sc = NULL, *sg = NULL;
      CHECKF(wisp_session_new(m, &cpu, &sc) == WISP_OK && wisp_session_eval(sc, lt, LONG, l1) == WISP_OK &&
             wisp_session_new(m, &gpu, &sg) == WISP_OK && wisp_session_eval(sg, lt, LONG, l2) == WISP_OK,
             "%s", wisp_last_error());
      double dl = 0, rl = 0;
      for (int i = 0; i < GV; i++) dl = worse(dl, fabs(l2[i] - l1[i])), rl = fmax(rl, fabs(l1[i]));
      CHECKF(rl > 0.1 && dl <= 2e-3 * rl, "%d-token prompt: max|diff| %.3g of %.3g", LONG, dl, rl);
      wisp_session_free(sc);
      wisp_session_free(sg);
    }
    const uint64_t want_steps = c == 2 ? N - 1 : 0;
    CHECKF(persistent_steps(s) == want_steps, "%s: %llu persistent steps, want %llu", tunings[c],
           (unsigned long long)persistent_steps(s), (unsigned long long)want_steps);
    wisp_session_free(s);
  }
  wisp_model_close(m);
  /* `wisp plan` says so */
  char cmd[1400], out[1 << 14];
  snprintf(cmd, sizeof cmd, "%s plan -m %s --backend webgpu 2>&1", test_wisp_bin(), art);
  CHECKF(test_run(cmd, out, sizeof out) == 0 && strstr(out, "settings persistentDecode=persistent_decode/wgsl "), "%s",
         out);
}

/* A prompt far past the window (and past a key range of the persistent
 * attention: persistSplits=4 splits the global layer's keys), on Q4
 * weights (a Q4Z embedding: the scale in the persistent embedding's Q4
 * path): the persistent decode's greedy tokens equal the op-by-op
 * decode's and the CPU's, on f32 and f16 KV caches, and a model whose
 * layers are all global (the same weights) decodes other tokens on the
 * CPU, so the window is one the tokens depend on. */
TEST(gemma3_webgpu_persistent_long_prompt_matches_op_by_op) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  char buf[600], gbuf[600];
  g_quant = "q4";
  const char *art = tiny_artifact("gemma3_persist", 24, buf, sizeof buf);
  g_cfg_all_global = 1;
  const char *glob = tiny_artifact("gemma3_persist_global", 24, gbuf, sizeof gbuf);
  g_cfg_all_global = 0;
  g_quant = "f32";
  CHECK(art != NULL && glob != NULL);
  if (!art || !glob) return;
  wisp_model *m = NULL, *mg = NULL;
  CHECKF(wisp_model_open(art, &m) == WISP_OK && wisp_model_open(glob, &mg) == WISP_OK, "%s", wisp_last_error());
  enum { LONG = 150, N = 12 };
  int32_t tok[LONG], want[N], global[N], got[N];
  for (int i = 0; i < LONG; i++) tok[i] = (i * 37 + 11) % GV;
  float lg[GV];
  wisp_session *s = NULL;
  wisp_session_options cpu = {.backend = "cpu", .threads = 1};
  CHECKF(wisp_session_new(m, &cpu, &s) == WISP_OK && greedy(s, tok, LONG, N, want, lg), "%s", wisp_last_error());
  wisp_session_free(s);
  s = NULL;
  CHECKF(wisp_session_new(mg, &cpu, &s) == WISP_OK && greedy(s, tok, LONG, N, global, lg), "%s", wisp_last_error());
  wisp_session_free(s);
  CHECK(memcmp(want, global, sizeof want) != 0); /* the window changes the tokens */
  /* the last: the grouped-query attention (persistOpt bit 32, attn_group), windows included */
  const char *tunings[5] = {"persist=0", "persist=1,persistGrid=1,persistSplits=4", "persist=0,kv=f16",
                            "persist=1,persistGrid=1,persistSplits=4,kv=f16",
                            "persist=1,persistGrid=1,persistSplits=4,persistOpt=41"};
  int32_t op_f16[N];
  for (int c = 0; c < 5; c++) {
    wisp_session_options gpu = {.backend = "webgpu", .tuning = tunings[c]};
    s = NULL;
    CHECKF(wisp_session_new(m, &gpu, &s) == WISP_OK, "%s", wisp_last_error());
    if (!s) break;
    CHECKF(greedy(s, tok, LONG, N, got, lg), "%s: %s", tunings[c], wisp_last_error());
    if (c < 2 || c == 4) CHECKF(!memcmp(want, got, sizeof want), "%s: greedy tokens differ from the CPU's", tunings[c]);
    if (c == 2) memcpy(op_f16, got, sizeof got);
    if (c == 3) CHECKF(!memcmp(op_f16, got, sizeof got), "%s: greedy tokens differ from op by op's", tunings[c]);
    const int persist = c % 2 || c == 4;
    const uint64_t want_steps = persist ? N - 1 : 0;
    CHECKF(persistent_steps(s) == want_steps, "%s: %llu persistent steps, want %llu", tunings[c],
           (unsigned long long)persistent_steps(s), (unsigned long long)want_steps);
    if (persist) { /* the sliding layers' 4 keys in one range, the global layer's 150+ in several */
      wisp_wgpu_backend_stats bs = {0};
      CHECKF(wisp_wgpu_backend_stats_get(s->backend, &bs) && bs.attn_splits > GL * (N - 1),
             "%s: %llu key ranges in %d steps of %d layers", tunings[c], (unsigned long long)bs.attn_splits, N - 1, GL);
    }
    wisp_session_free(s);
  }
  wisp_model_close(m);
  wisp_model_close(mg);
}

/* The step graph lowers to the persistent phases: the embedding scale,
 * post-norm flags on every output and down product, GeGLU on every FFN,
 * the sliding layers' window and second rope, the score scale; a post norm
 * whose sum goes elsewhere than x is not the phases' shape. */
TEST(gemma3_graph_lowers_to_the_persistent_phases) {
  char buf[600];
  const char *art = tiny_artifact("gemma3_lower", 24, buf, sizeof buf);
  CHECK(art != NULL);
  if (!art) return;
  wisp_model *m = NULL;
  CHECKF(wisp_model_open(art, &m) == WISP_OK, "%s", wisp_last_error());
  wisp_backend *be = NULL;
  wisp_graph_state *st = NULL;
  wisp_decode_graph *d = malloc(sizeof *d);
  CHECK(d && wisp_cpu_backend_new(1, &be) == WISP_OK && wisp_graph_state_new(&m->graph, be, 1, 32, &st) == WISP_OK);
  CHECK(wisp_graph_lower_decode(&m->graph, st, d) == WISP_OK && wisp_graph_lowers_to_phases(&m->graph));
  CHECK(fabs(d->embed_scale - 8.0) < 1e-6 && fabs(d->attn_scale - 1.0 / sqrt(24.0)) < 1e-6);
  CHECK(d->rope_cos_local == m->graph.rope_cos_local && d->rope_cos_local != d->rope_cos);
  CHECK(d->n_phases == 5 * GL + 1);
  /* every attention node carries its layer's norms and window: the model
   * sets them on a node the next append may move (a global layer once lost
   * its q/k norms that way, where the allocator moved the array) */
  int n_attn = 0;
  for (int i = 0; i < m->graph.n_nodes; i++) {
    const wisp_gnode *n = &m->graph.nodes[i];
    if (n->op != WISP_GOP_ATTENTION) continue;
    n_attn++;
    CHECKF(n->q_norm && n->k_norm && n->q_norm->n == GD && n->window == (is_global(n->layer) ? 0 : GWIN) &&
               n->rope_local == !is_global(n->layer),
           "layer %d's attention node: q_norm %p, k_norm %p, window %d", n->layer, (const void *)n->q_norm,
           (const void *)n->k_norm, n->window);
  }
  CHECK(n_attn == GL);
  for (int l = 0; l < GL; l++) {
    const wisp_graph_layer *L = &d->layers[l];
    CHECKF(L->mixer == WISP_MIX_ATTENTION && L->window == (is_global(l) ? 0 : GWIN) &&
           L->rope_local == !is_global(l) && L->mixer_post && L->ffn_post && L->mixer_post != L->ffn_post,
           "layer %d", l);
    const wisp_decode_phase *f = &d->phases[5 * l]; /* QKV, ATTN, OUT, FFN, DOWN */
    CHECKF(f[2].work == WISP_WORK_OUT && f[2].flags == WISP_PHASE_FLAG_POST_NORM && f[3].work == WISP_WORK_FFN &&
           f[3].flags == WISP_PHASE_FLAG_GELU && f[4].work == WISP_WORK_DOWN &&
           f[4].flags == WISP_PHASE_FLAG_POST_NORM && !f[0].flags && !f[1].flags,
           "layer %d's phase flags", l);
  }
  /* the attention block's sum written to XN instead of x */
  int at = -1;
  CHECK(wisp_graph_find(&m->graph, 1, "attn.residual", &at) != NULL);
  m->graph.nodes[at].out = WISP_ACT_XN;
  CHECK(wisp_graph_lower_decode(&m->graph, st, d) == WISP_EUNSUPPORTED && !wisp_graph_lowers_to_phases(&m->graph));
  m->graph.nodes[at].out = WISP_ACT_X;
  free(d);
  wisp_graph_state_free(st, be);
  be->destroy(be);
  wisp_model_close(m);
}

/* export-gguf writes architecture gemma3 (norms 1 + w, the window and its
 * pattern, the sliding layers' rope base); the GGUF runs in place with the
 * artifact's logits and converts back to them. */
TEST(gemma3_gguf_export_runs_in_place_and_converts_back) {
  char buf[600];
  const char *art = tiny_artifact("gemma3_g", GD, buf, sizeof buf); /* llama.cpp scales by 1/sqrt(head_dim) */
  CHECK(art != NULL);
  if (!art) return;
  char gg[600], back[600], cmd[4096];
  static char log[1 << 16], la[1 << 16], lb[1 << 16], lc[1 << 16];
  snprintf(gg, sizeof gg, "%s/gemma3.gguf", test_tmpdir());
  snprintf(back, sizeof back, "%s/gemma3_back", test_tmpdir());
  snprintf(cmd, sizeof cmd, "%s export-gguf %s -o %s && grep -c gemma3.attention.sliding_window_pattern %s && "
           "grep -c blk.2.post_ffw_norm %s", test_wisp_bin(), art, gg, gg, gg);
  CHECKF(test_run(cmd, log, sizeof log) == 0, "%s", log);
  snprintf(cmd, sizeof cmd, "%s convert %s -o %s --quant f32 --quiet", test_wisp_bin(), gg, back);
  CHECKF(test_run(cmd, log, sizeof log) == 0, "%s", log);
  const char *srcs[3] = {art, gg, back};
  char *outs[3] = {la, lb, lc};
  for (int i = 0; i < 3; i++) {
    snprintf(cmd, sizeof cmd, "%s logits -m %s --tokens 3,1,4,1,5,9,2,6,5,3,5 --greedy 8 2>/dev/null", test_wisp_bin(),
             srcs[i]);
    CHECKF(test_run(cmd, outs[i], sizeof la) == 0, "%s: %s", srcs[i], outs[i]);
  }
  CHECKF(strlen(la) > 100 && !strcmp(la, lb), "GGUF in place differs:\n%.300s\n%.300s", la, lb);
  CHECKF(!strcmp(la, lc), "converted back differs:\n%.300s\n%.300s", la, lc);
}

/* Chat with Gemma 3's template (tests/data/chat_templates/gemma3.json) in a
 * tokenizer_config.json whose eos_token is <eos> (the pretrained
 * checkpoints' and GGUF files' setting) and no generation_config.json:
 * a reply still stops at <end_of_turn>, the token the template ends every
 * turn with. */
TEST(gemma3_chat_stops_at_end_of_turn) {
  static char json[16384];
  fixture_byte_bpe_json(json, sizeof json, "",
                        "{\"id\": 256, \"content\": \"<eos>\", \"special\": true},"
                        "{\"id\": 257, \"content\": \"<start_of_turn>\", \"special\": true},"
                        "{\"id\": 258, \"content\": \"<end_of_turn>\", \"special\": true}");
  wisp_tokenizer *t = NULL;
  CHECKF(wisp_tokenizer_from_json(json, "gemma-chat-test", &t) == WISP_OK, "%s", wisp_last_error());
  char *text = NULL;
  CHECK(wisp_read_file("tests/data/chat_templates/gemma3.json", &text, NULL) == WISP_OK);
  cJSON *cfg = text ? cJSON_Parse(text) : NULL;
  free(text);
  CHECK(cfg != NULL);
  cJSON_ReplaceItemInObjectCaseSensitive(cfg, "eos_token", cJSON_CreateString("<eos>"));
  wisp_chat_info ci;
  wisp_status st = wisp_chat_info_from_json(cfg, NULL, "generation_config.json", t, &ci);
  CHECKF(st == WISP_OK, "%s", wisp_last_error());
  CHECK(wisp_chat_is_stop(&ci, 258) && wisp_chat_is_stop(&ci, 256) && !wisp_chat_is_stop(&ci, 257));
  cJSON_Delete(cfg);
  wisp_tokenizer_free(t);
}

/* Two sequences decoded together (wisp_session_step: the batched step's
 * products over both rows, the windowed attention row by row) get the very
 * tokens each gets alone, past the window, on backend `be`. */
static void two_slots_match_alone(const char *be, const char *tuning) {
  char buf[600];
  const char *art = tiny_artifact(!strcmp(be, "cpu") ? "gemma3_slots_cpu" : "gemma3_slots_gpu", 24, buf, sizeof buf);
  CHECK(art != NULL);
  if (!art) return;
  wisp_model *m = NULL;
  CHECKF(wisp_model_open(art, &m) == WISP_OK, "%s", wisp_last_error());
  enum { P = 9, N = 8 };
  int32_t p[2][P], alone[2][N], both[2][N];
  for (int k = 0; k < 2; k++)
    for (int i = 0; i < P; i++) p[k][i] = (i * (31 + 6 * k) + 3 + k) % GV;
  float lg[GV];
  for (int k = 0; k < 2; k++) { /* each alone: its prompt, then one token at a time */
    wisp_session *s = NULL;
    wisp_session_options o = {.backend = be, .threads = 1, .tuning = tuning};
    CHECKF(wisp_session_new(m, &o, &s) == WISP_OK && greedy(s, p[k], P, N, alone[k], lg), "%s", wisp_last_error());
    wisp_session_free(s);
  }
  wisp_session *s = NULL;
  wisp_session_options o = {.backend = be, .threads = 1, .tuning = tuning, .slots = 2};
  CHECKF(wisp_session_new(m, &o, &s) == WISP_OK, "%s", wisp_last_error());
  int ok = s != NULL;
  for (int k = 0; ok && k < 2; k++) {
    ok = wisp_slot_eval(s, k, p[k], P, lg) == WISP_OK;
    int32_t first = 0;
    for (int i = 1; i < GV; i++) if (lg[i] > lg[first]) first = i;
    both[k][0] = first;
  }
  const int slots[2] = {0, 1};
  for (int st = 1; ok && st < N; st++) {
    int32_t in[2] = {both[0][st - 1], both[1][st - 1]}, next[2];
    ok = wisp_session_step(s, slots, in, 2, NULL, next, NULL) == WISP_OK;
    both[0][st] = next[0];
    both[1][st] = next[1];
  }
  wisp_session_free(s);
  wisp_model_close(m);
  CHECKF(ok, "%s: %s", be, wisp_last_error());
  CHECKF(!memcmp(alone, both, sizeof alone), "%s: the tokens of two slots stepped together differ from each alone", be);
}

TEST(gemma3_two_slots_step_like_each_alone_cpu) { two_slots_match_alone("cpu", NULL); }

TEST(gemma3_two_slots_step_like_each_alone_webgpu) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  two_slots_match_alone("webgpu", "persist=0");
}

/* A context longer than the rope rows convert stores (1,024): the session
 * builds both ropes' tables (the sliding layers' from rope.freq_local) for
 * its own context, and a 1,100-token prompt matches the reference. */
TEST(gemma3_context_past_the_stored_rope_rows) {
  char buf[600];
  g_max_pos = 2048;
  const char *art = tiny_artifact("gemma3_long", 24, buf, sizeof buf);
  g_max_pos = 256;
  CHECK(art != NULL);
  if (!art) return;
  wisp_model *m = NULL;
  CHECKF(wisp_model_open(art, &m) == WISP_OK, "%s", wisp_last_error());
  enum { LONG = 1100 };
  static int32_t tok[LONG];
  static int rt[LONG];
  for (int i = 0; i < LONG; i++) rt[i] = tok[i] = (i * 37 + 11 + i / 89) % GV;
  wisp_session *s = NULL;
  wisp_session_options o = {.backend = "cpu", .threads = 1, .max_context = 1200};
  float got[GV];
  double ref[GV], maxref;
  CHECKF(wisp_session_new(m, &o, &s) == WISP_OK && wisp_session_eval(s, tok, LONG, got) == WISP_OK, "%s",
         wisp_last_error());
  forward(rt, LONG, ref);
  double d = max_abs_diff(got, ref, GV, &maxref);
  CHECKF(maxref > 0.1 && d <= 1e-4 * maxref, "%d tokens: max|diff| %.3g, max|ref| %.3g", LONG, d, maxref);
  wisp_session_free(s);
  wisp_model_close(m);
}
