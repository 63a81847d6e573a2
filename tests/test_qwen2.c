/* Qwen2 / Qwen 2.5 (architecture qwen2): a tiny Qwen2ForCausalLM checkpoint
 * written from C (q/k/v biases, tied embeddings), converted (f32) and run:
 *   - against an independent double-precision forward written here from
 *     the formulas (RMSNorm, q/k/v products plus biases, rotate-half RoPE,
 *     GQA causal attention, SwiGLU, tied head), prefill and greedy decode;
 *   - WebGPU (lavapipe) against the CPU: logits and greedy tokens, op by op
 *     and in the persistent decode;
 *   - exported to GGUF and run from the GGUF in place, and converted back. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cJSON.h>

#include "backend/webgpu/wgpu_backend.h"
#include "engine/session.h"
#include "st_fixture.h"
#include "test.h"
#include "webgpu_fixture.h"
#include "wisp.h"

enum { QH = 128, QF = 96, QV = 80, QD = 32, QNH = 4, QKV = 2, QL = 2 }; /* head_dim = hidden / heads */
#define QTHETA 1000000.0
#define QEPS 1e-6
#define BIAS_SCALE 8.0 /* large biases, so that leaving them out shows */

/* The first n values of tensor fmt (%d = layer), from a cache of the values
 * made so far (the reference reads each weight many times); biases scaled. */
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
    for (int64_t j = cache[k].n; j < n; j++)
      v[j] = (strstr(name, ".bias") ? BIAS_SCALE : 1.0) * fx_tiny_value(name, 11, j);
    snprintf(cache[k].name, sizeof cache[k].name, "%s", name);
    cache[k].v = v;
    cache[k].n = n;
  }
  return cache[k].v;
}

static double val(const char *fmt, int layer, int64_t i) { return vals(fmt, layer, i + 1)[i]; }

static int write_tiny_qwen2(const char *dir) {
  char path[800], cfg[1024];
  snprintf(path, sizeof path, "%s/config.json", dir);
  snprintf(cfg, sizeof cfg,
           "{\"architectures\": [\"Qwen2ForCausalLM\"], \"model_type\": \"qwen2\", \"hidden_size\": %d, "
           "\"intermediate_size\": %d, \"num_hidden_layers\": %d, \"num_attention_heads\": %d, "
           "\"num_key_value_heads\": %d, \"vocab_size\": %d, \"rms_norm_eps\": 1e-06, "
           "\"rope_theta\": 1000000.0, \"max_position_embeddings\": 256, \"tie_word_embeddings\": true, "
           "\"hidden_act\": \"silu\", \"use_sliding_window\": false, \"sliding_window\": 32768, "
           "\"max_window_layers\": 21}",
           QH, QF, QL, QNH, QKV, QV);
  if (fx_write_bytes(path, cfg, strlen(cfg))) return -1;
  static const fx_layer_tensor per[] = {
      {"model.layers.%d.input_layernorm.weight", 0, QH},   {"model.layers.%d.post_attention_layernorm.weight", 0, QH},
      {"model.layers.%d.self_attn.q_proj.weight", QNH * QD, QH}, {"model.layers.%d.self_attn.q_proj.bias", 0, QNH * QD},
      {"model.layers.%d.self_attn.k_proj.weight", QKV * QD, QH}, {"model.layers.%d.self_attn.k_proj.bias", 0, QKV * QD},
      {"model.layers.%d.self_attn.v_proj.weight", QKV * QD, QH}, {"model.layers.%d.self_attn.v_proj.bias", 0, QKV * QD},
      {"model.layers.%d.self_attn.o_proj.weight", QH, QNH * QD}, {"model.layers.%d.mlp.gate_proj.weight", QF, QH},
      {"model.layers.%d.mlp.up_proj.weight", QF, QH},            {"model.layers.%d.mlp.down_proj.weight", QH, QF}};
  return fx_write_layered_checkpoint(dir, per, (int)(sizeof per / sizeof *per), QL, QV, QH, val);
}

int fx_write_tiny_qwen2(const char *dir) { return write_tiny_qwen2(dir); }

/* ---- the reference forward (double) ---- */

static int g_no_bias; /* 1: the reference leaves the biases out (to show they matter) */

static void rms(const double *x, int n, const char *fmt, int layer, double *out) {
  double ss = 0;
  for (int i = 0; i < n; i++) ss += x[i] * x[i];
  double r = 1.0 / sqrt(ss / n + QEPS);
  const double *w = vals(fmt, layer, n);
  for (int i = 0; i < n; i++) out[i] = x[i] * r * w[i];
}

static void mv(const char *fmt, const char *bias, int layer, int rows, int cols, const double *x, double *y) {
  const double *w = vals(fmt, layer, (int64_t)rows * cols), *b = bias ? vals(bias, layer, rows) : NULL;
  for (int r = 0; r < rows; r++) {
    double s = b && !g_no_bias ? b[r] : 0;
    for (int c = 0; c < cols; c++) s += w[(int64_t)r * cols + c] * x[c];
    y[r] = s;
  }
}

static void rope(double *v, int pos) { /* rotate-half, inv_freq in f32 as transformers */
  for (int j = 0; j < QD / 2; j++) {
    double inv = (double)(1.0f / powf((float)QTHETA, (float)(2 * j) / (float)QD));
    double ang = pos * inv, a = v[j], b = v[j + QD / 2];
    v[j] = a * cos(ang) - b * sin(ang);
    v[j + QD / 2] = b * cos(ang) + a * sin(ang);
  }
}

static void forward(const int *tok, int T, double *logits) {
  double (*x)[QH] = calloc((size_t)T, sizeof *x), (*q)[QNH * QD] = calloc((size_t)T, sizeof *q);
  double (*k)[QKV * QD] = calloc((size_t)T, sizeof *k), (*v)[QKV * QD] = calloc((size_t)T, sizeof *v);
  double h[QH], y[QH], att[QNH * QD], g[QF], u[QF], *sc = calloc((size_t)T + 1, sizeof(double));
  for (int t = 0; t < T; t++)
    for (int c = 0; c < QH; c++) x[t][c] = val("model.embed_tokens.weight", 0, (int64_t)tok[t] * QH + c);
  for (int l = 0; l < QL; l++) {
    for (int t = 0; t < T; t++) {
      rms(x[t], QH, "model.layers.%d.input_layernorm.weight", l, h);
      mv("model.layers.%d.self_attn.q_proj.weight", "model.layers.%d.self_attn.q_proj.bias", l, QNH * QD, QH, h, q[t]);
      mv("model.layers.%d.self_attn.k_proj.weight", "model.layers.%d.self_attn.k_proj.bias", l, QKV * QD, QH, h, k[t]);
      mv("model.layers.%d.self_attn.v_proj.weight", "model.layers.%d.self_attn.v_proj.bias", l, QKV * QD, QH, h, v[t]);
      for (int hh = 0; hh < QNH; hh++) rope(q[t] + hh * QD, t);
      for (int hh = 0; hh < QKV; hh++) rope(k[t] + hh * QD, t);
    }
    for (int t = 0; t < T; t++) {
      for (int hh = 0; hh < QNH; hh++) {
        int kv = hh / (QNH / QKV);
        double mx = -1e300, sum = 0;
        for (int s = 0; s <= t; s++) {
          double d = 0;
          for (int e = 0; e < QD; e++) d += q[t][hh * QD + e] * k[s][kv * QD + e];
          sc[s] = d / sqrt((double)QD);
          mx = fmax(mx, sc[s]);
        }
        for (int s = 0; s <= t; s++) sum += (sc[s] = exp(sc[s] - mx));
        for (int e = 0; e < QD; e++) {
          double o = 0;
          for (int s = 0; s <= t; s++) o += sc[s] / sum * v[s][kv * QD + e];
          att[hh * QD + e] = o;
        }
      }
      /* layer l's attention output joins x[t] only after every row's keys
       * are made, which they are (the loop above ran over all t) */
      mv("model.layers.%d.self_attn.o_proj.weight", NULL, l, QH, QNH * QD, att, y);
      for (int c = 0; c < QH; c++) x[t][c] += y[c];
      rms(x[t], QH, "model.layers.%d.post_attention_layernorm.weight", l, h);
      mv("model.layers.%d.mlp.gate_proj.weight", NULL, l, QF, QH, h, g);
      mv("model.layers.%d.mlp.up_proj.weight", NULL, l, QF, QH, h, u);
      for (int f = 0; f < QF; f++) g[f] = g[f] / (1.0 + exp(-g[f])) * u[f];
      mv("model.layers.%d.mlp.down_proj.weight", NULL, l, QH, QF, g, y);
      for (int c = 0; c < QH; c++) x[t][c] += y[c];
    }
  }
  rms(x[T - 1], QH, "model.norm.weight", 0, h);
  mv("model.embed_tokens.weight", NULL, 0, QV, QH, h, logits); /* tied head */
  free(x), free(q), free(k), free(v), free(sc);
}

/* TMP/NAME: the tiny checkpoint converted to an f32 artifact (made once). */
static const char *tiny_artifact(void) {
  static char art[600];
  static int made;
  if (made) return made > 0 ? art : NULL;
  char hf[600], cmd[2048], log[4096];
  snprintf(hf, sizeof hf, "%s/qwen2_hf", test_tmpdir());
  snprintf(art, sizeof art, "%s/qwen2_art", test_tmpdir());
  made = -1;
  if (mkdir(hf, 0755) || write_tiny_qwen2(hf)) return NULL;
  snprintf(cmd, sizeof cmd, "%s convert %s -o %s --quant f32 --quiet", test_wisp_bin(), hf, art);
  if (test_run(cmd, log, sizeof log)) {
    fprintf(stderr, "     convert: %s\n", log);
    return NULL;
  }
  made = 1;
  return art;
}

enum { T = 24, G = 6 };

static void prompt(int32_t *tok, int n) {
  for (int t = 0; t < n; t++) tok[t] = (t * 29 + 5) % QV;
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

TEST(qwen2_tiny_matches_independent_reference_prefill_and_decode) {
  const char *art = tiny_artifact();
  CHECK(art != NULL);
  if (!art) return;
  wisp_model *m = NULL;
  CHECKF(wisp_model_open(art, &m) == WISP_OK, "%s", wisp_last_error());
  if (!m) return;
  /* every layer's bias node carries its bias (set on a node the next append may move) */
  int n_bias = 0;
  for (int i = 0; i < m->graph.n_nodes; i++)
    if (m->graph.nodes[i].op == WISP_GOP_ADD_BIAS) {
      n_bias++;
      CHECKF(m->graph.nodes[i].w && m->graph.nodes[i].w->data, "layer %d's bias node has no bias",
             m->graph.nodes[i].layer);
    }
  CHECK(n_bias == m->artifact->shape.n_layers);
  int32_t tok[T + G];
  int ref_tok[T + G];
  prompt(tok, T);
  for (int i = 0; i < T; i++) ref_tok[i] = tok[i];
  float got[QV];
  double ref[QV], maxref;
  const int lens[3] = {1, 3, T};
  for (int c = 0; c < 3; c++) {
    wisp_session *s = NULL;
    wisp_session_options o = {.backend = "cpu", .threads = 1};
    CHECKF(wisp_session_new(m, &o, &s) == WISP_OK, "%s", wisp_last_error());
    CHECKF(wisp_session_eval(s, tok, lens[c], got) == WISP_OK, "%s", wisp_last_error());
    forward(ref_tok, lens[c], ref);
    double d = max_abs_diff(got, ref, QV, &maxref);
    CHECKF(maxref > 0.1 && d <= 1e-4 * maxref, "%d tokens: max|diff| %.3g, max|ref| %.3g", lens[c], d, maxref);
    if (c == 0) { /* the biases matter: without them the reference is far off */
      g_no_bias = 1;
      forward(ref_tok, lens[c], ref);
      g_no_bias = 0;
      double off = max_abs_diff(got, ref, QV, &maxref);
      CHECKF(off > 100 * d && off > 1e-3 * maxref, "without biases max|diff| is only %.3g", off);
    }
    if (c == 2) { /* greedy decode vs the reference recomputed per step */
      int32_t first = 0;
      for (int i = 1; i < QV; i++) if (got[i] > got[first]) first = i;
      int32_t gen[G];
      int made = 0;
      wisp_generate_options go = {.temperature = 0};
      CHECKF(wisp_session_generate(s, first, G, &go, gen, &made) == WISP_OK && made == G, "%s", wisp_last_error());
      ref_tok[T] = first;
      for (int st = 0; st + 1 < G; st++) {
        forward(ref_tok, T + 1 + st, ref);
        int best = 0;
        for (int i = 1; i < QV; i++) if (ref[i] > ref[best]) best = i;
        ref_tok[T + 1 + st] = best;
        CHECKF(gen[st] == best, "greedy step %d: wisp %d, reference %d", st, gen[st], best);
      }
    }
    wisp_session_free(s);
  }
  wisp_model_close(m);
}

/* n greedy tokens after the prompt: the prompt's argmax, then the decode loop. */
static int greedy(wisp_session *s, const int32_t *tok, int np, int n, int32_t *out, float *logits) {
  if (wisp_session_eval(s, tok, np, logits) != WISP_OK) return 0;
  int32_t first = 0;
  for (int i = 1; i < QV; i++) if (logits[i] > logits[first]) first = i;
  out[0] = first;
  int made = 0;
  wisp_generate_options go = {.temperature = 0, .batch = 8};
  return wisp_session_generate(s, first, n - 1, &go, out + 1, &made) == WISP_OK && made == n - 1;
}

static uint64_t persistent_steps(wisp_session *s) {
  wisp_wgpu_backend_stats st = {0};
  return wisp_wgpu_backend_stats_get(s->backend, &st) ? st.persistent_steps : 0;
}

TEST(qwen2_webgpu_matches_cpu_op_by_op_and_persistent) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  const char *art = tiny_artifact();
  CHECK(art != NULL);
  if (!art) return;
  wisp_model *m = NULL;
  CHECKF(wisp_model_open(art, &m) == WISP_OK, "%s", wisp_last_error());
  enum { N = 12 };
  int32_t tok[T], want[N], got[N];
  prompt(tok, T);
  float lc[QV], lg[QV];
  wisp_session *s = NULL;
  wisp_session_options cpu = {.backend = "cpu", .threads = 1};
  CHECKF(wisp_session_new(m, &cpu, &s) == WISP_OK && greedy(s, tok, T, N, want, lc), "%s", wisp_last_error());
  wisp_session_free(s);
  const char *tunings[2] = {"persist=0", "persist=1,persistGrid=1"};
  for (int c = 0; c < 2; c++) {
    wisp_session_options gpu = {.backend = "webgpu", .tuning = tunings[c]};
    s = NULL;
    CHECKF(wisp_session_new(m, &gpu, &s) == WISP_OK, "%s", wisp_last_error());
    if (!s) break;
    CHECKF(greedy(s, tok, T, N, got, lg), "%s: %s", tunings[c], wisp_last_error());
    double dmax = 0, rmax = 0;
    for (int i = 0; i < QV; i++) dmax = worse(dmax, fabs(lg[i] - lc[i])), rmax = fmax(rmax, fabs(lc[i]));
    CHECKF(dmax <= 2e-3 * rmax, "%s: prompt logits max|diff| %.3g of %.3g", tunings[c], dmax, rmax);
    CHECKF(!memcmp(want, got, sizeof want), "%s: greedy tokens differ from the CPU's", tunings[c]);
    if (c == 1) CHECKF(persistent_steps(s) > 0, "the persistent decode did not run the qwen2 graph");
    wisp_session_free(s);
  }
  wisp_model_close(m);
}

/* export-gguf writes architecture qwen2 with the bias tensors; the GGUF runs
 * in place with the artifact's logits and converts back to them. */
TEST(qwen2_gguf_export_runs_in_place_and_converts_back) {
  const char *art = tiny_artifact();
  CHECK(art != NULL);
  if (!art) return;
  char gg[600], back[600], cmd[4096];
  static char log[1 << 16], la[1 << 16], lb[1 << 16], lc[1 << 16];
  snprintf(gg, sizeof gg, "%s/qwen2.gguf", test_tmpdir());
  snprintf(back, sizeof back, "%s/qwen2_back", test_tmpdir());
  snprintf(cmd, sizeof cmd, "%s export-gguf %s -o %s && grep -c qwen2.block_count %s && grep -c blk.1.attn_v.bias %s",
           test_wisp_bin(), art, gg, gg, gg);
  CHECKF(test_run(cmd, log, sizeof log) == 0, "%s", log);
  snprintf(cmd, sizeof cmd, "%s convert %s -o %s --quant f32 --quiet", test_wisp_bin(), gg, back);
  CHECKF(test_run(cmd, log, sizeof log) == 0, "%s", log);
  const char *srcs[3] = {art, gg, back};
  char *outs[3] = {la, lb, lc};
  for (int i = 0; i < 3; i++) {
    snprintf(cmd, sizeof cmd, "%s logits -m %s --tokens 3,1,4,1,5,9,2,6 --greedy 8 2>/dev/null", test_wisp_bin(), srcs[i]);
    CHECKF(test_run(cmd, outs[i], sizeof la) == 0, "%s: %s", srcs[i], outs[i]);
  }
  CHECKF(strlen(la) > 100 && !strcmp(la, lb), "GGUF in place differs:\n%.300s\n%.300s", la, lb);
  CHECKF(!strcmp(la, lc), "converted back differs:\n%.300s\n%.300s", la, lc);
}

/* Two sequences decoded together (wisp_session_step: the batched step's
 * products and bias adds over both rows, each row's attention on its own
 * caches) get the very tokens each gets alone. */
TEST(qwen2_two_slots_step_like_each_alone_cpu) {
  const char *art = tiny_artifact();
  CHECK(art != NULL);
  if (!art) return;
  wisp_model *m = NULL;
  CHECKF(wisp_model_open(art, &m) == WISP_OK, "%s", wisp_last_error());
  enum { P = 7, N = 6 };
  int32_t p[2][P], alone[2][N], both[2][N];
  for (int k = 0; k < 2; k++)
    for (int i = 0; i < P; i++) p[k][i] = (i * (31 + 6 * k) + 3 + k) % QV;
  float lg[QV];
  wisp_session_options o = {.backend = "cpu", .threads = 1};
  for (int k = 0; k < 2; k++) {
    wisp_session *s = NULL;
    CHECKF(wisp_session_new(m, &o, &s) == WISP_OK && greedy(s, p[k], P, N, alone[k], lg), "%s", wisp_last_error());
    wisp_session_free(s);
  }
  wisp_session *s = NULL;
  o.slots = 2;
  CHECKF(wisp_session_new(m, &o, &s) == WISP_OK, "%s", wisp_last_error());
  int ok = s != NULL;
  for (int k = 0; ok && k < 2; k++) {
    ok = wisp_slot_eval(s, k, p[k], P, lg) == WISP_OK;
    int32_t first = 0;
    for (int i = 1; i < QV; i++) if (lg[i] > lg[first]) first = i;
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
  CHECKF(ok, "%s", wisp_last_error());
  CHECK(!memcmp(alone, both, sizeof alone));
}
