/* prod_probe: what each prefill product kernel reaches on this device, in
 * GFLOP/s and as a fraction of the FP32 FMA peak (the f32-activation
 * product, matmul.wgsl) or of the DP4A peak (the integer product,
 * matmul_i8.wgsl, and its input quantization quant_x8.wgsl). GPU time comes
 * from timestamp queries (the per-kernel profiler, wgpu_profile.h): each
 * product runs REPS times on random weights and inputs, and the kernel's
 * mean time per dispatch counts (2 * rows * cols * tokens operations a
 * product, a multiply-add being two). A device without timestamp-query
 * (lavapipe) gets wall-clock times of the product and its quantization
 * together ("timing": "wall"). Prints one JSON receipt on stdout:
 *   prod_probe [--fp32-peak TFLOPS] [--dp4a-peak TOPS] [--reps N]
 *              [--shape ROWSxCOLS]... [--tokens N]... [--types t,t,...] [--tuning KEY=VALUE,...]
 *              [--int8-only]
 * Defaults: peaks 67 (H200 FP32) and 134 (DP4A, four int8 multiply-adds an
 * instruction at half the FMA issue rate), 5 reps, the Qwen 3.5 0.8B
 * shapes (2048x1024, 7168x1024, 1024x3584) x 512 and 2048 tokens, types
 * f32,f16,q4,q4z,q4k,q8_0 (the integer path for q4, q4z, q4k, q8_0). Run
 * from the repository root (tools/device.sh products). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/tuning.h"
#include "backend/tuning_fields.h"
#include "backend/webgpu/wgpu_backend.h"
#include "backend/webgpu/wgpu_core.h"
#include "backend/webgpu/wgpu_products_i8.h"
#include "backend/webgpu/wgpu_profile.h"
#include "format/quant.h"
#include "format/tensor.h"
#include "util/clock.h"
#include "util/err.h"

enum { MAX_SHAPES = 16, MAX_TOKENS = 8, MAX_KEEP = 3 * 6 * MAX_SHAPES };

/* Host weights stay until the backend is gone (it knows a weight by its
 * host address). */
static void *g_keep[MAX_KEEP];
static int g_nkeep;

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static float frand(void) { /* uniform in [-1, 1) */
  g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
  return (float)((g_rng >> 40) & 0xFFFFFF) / 8388608.0f - 1.0f;
}

/* Random weights of one type as the converter stores them (host memory the
 * backend keeps pointing at until it is destroyed). */
static int make_matrix(wisp_matrix *m, wisp_wtype type, int rows, int cols, void *keep[3]) {
  memset(m, 0, sizeof *m);
  *m = (wisp_matrix){.type = type, .rows = rows, .cols = cols};
  const size_t n = (size_t)rows * cols;
  if (type == WISP_W_Q4 || type == WISP_W_Q4Z) {
    uint8_t *q = malloc(wisp_q4_quant_bytes(rows, cols)), *z = malloc(wisp_q4_zp_bytes(rows, cols) + 1);
    float *s = malloc(sizeof(float) * (n / 32));
    keep[0] = q, keep[1] = s, keep[2] = z;
    if (!q || !s || !z) return 0;
    for (size_t i = 0; i < wisp_q4_quant_bytes(rows, cols); i++) q[i] = (uint8_t)(frand() * 127 + 128);
    for (size_t i = 0; i < wisp_q4_zp_bytes(rows, cols); i++) z[i] = (uint8_t)(frand() * 127 + 128);
    for (size_t i = 0; i < n / 32; i++) s[i] = 0.01f;
    m->q = q, m->scales = s, m->zp = type == WISP_W_Q4Z ? z : NULL;
    return 1;
  }
  float *f = malloc(sizeof(float) * n);
  if (!f) return 0;
  for (size_t i = 0; i < n; i++) f[i] = 0.05f * frand();
  if (type == WISP_W_F32) {
    m->f32 = f;
    keep[0] = f;
    return 1;
  }
  size_t bytes = type == WISP_W_F16 ? wisp_f16_bytes(rows, cols) : type == WISP_W_Q8_0 ? wisp_q8_0_bytes(rows, cols)
                                                                                      : wisp_q4k_bytes(rows, cols);
  uint8_t *q = malloc(bytes);
  if (q && type == WISP_W_F16) wisp_quantize_f16(f, rows, cols, q);
  if (q && type == WISP_W_Q8_0) wisp_quantize_q8_0_rows(f, rows, cols, q);
  if (q && type == WISP_W_Q4K) wisp_quantize_q4k(f, rows, cols, q);
  free(f);
  m->q = q;
  keep[0] = q;
  return q != NULL;
}

static wisp_wtype type_of(const char *s) {
  static const struct {
    const char *name;
    wisp_wtype t;
  } k[] = {{"f32", WISP_W_F32}, {"f16", WISP_W_F16}, {"q4", WISP_W_Q4},
           {"q4z", WISP_W_Q4Z}, {"q4k", WISP_W_Q4K}, {"q8_0", WISP_W_Q8_0}};
  for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
    if (!strcmp(s, k[i].name)) return k[i].t;
  return (wisp_wtype)-1;
}

/* GPU ns and dispatches of kernel `label` so far. */
static uint64_t kernel_ns(wisp_wgpu_device *d, const char *label, uint64_t *disp) {
  uint64_t ns = 0;
  *disp = label && label[0] ? wisp_wgpu_profile_dispatches(d->profile, label, &ns) : 0;
  return ns;
}

int main(int argc, char **argv) {
  double fp32_peak = 67, dp4a_peak = 134;
  int reps = 5, nshapes = 0, ntok = 0;
  int shapes[MAX_SHAPES][2], tokens[MAX_TOKENS];
  const char *types = "f32,f16,q4,q4z,q4k,q8_0", *tuning = NULL;
  int int8_only = 0; /* the integer path alone (tile sweeps of matmul_i8) */
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--fp32-peak") && v) fp32_peak = atof(argv[++i]);
    else if (!strcmp(a, "--dp4a-peak") && v) dp4a_peak = atof(argv[++i]);
    else if (!strcmp(a, "--reps") && v) reps = atoi(argv[++i]);
    else if (!strcmp(a, "--types") && v) types = argv[++i];
    else if (!strcmp(a, "--tuning") && v) tuning = argv[++i];
    else if (!strcmp(a, "--int8-only")) int8_only = 1;
    else if (!strcmp(a, "--shape") && v && nshapes < MAX_SHAPES &&
             sscanf(argv[++i], "%dx%d", &shapes[nshapes][0], &shapes[nshapes][1]) == 2)
      nshapes++;
    else if (!strcmp(a, "--tokens") && v && ntok < MAX_TOKENS) tokens[ntok++] = atoi(argv[++i]);
    else {
      fprintf(stderr, "usage: prod_probe [--fp32-peak TFLOPS] [--dp4a-peak TOPS] [--reps N] [--shape ROWSxCOLS]... "
                      "[--tokens N]... [--types f32,f16,q4,q4z,q4k,q8_0] [--tuning KEY=VALUE,...] [--int8-only]\n");
      return 2;
    }
  }
  if (!nshapes) {
    static const int def[][2] = {{2048, 1024}, {7168, 1024}, {1024, 3584}};
    for (int i = 0; i < 3; i++) shapes[i][0] = def[i][0], shapes[i][1] = def[i][1];
    nshapes = 3;
  }
  if (!ntok) tokens[0] = 512, tokens[1] = 2048, ntok = 2;
  if (reps < 1) reps = 1;
  for (int i = 0; i < nshapes; i++)
    if (shapes[i][0] < 1 || shapes[i][1] < 256 || shapes[i][1] % 256) {
      fprintf(stderr, "prod_probe: shape %dx%d: columns must be a positive multiple of 256\n", shapes[i][0],
              shapes[i][1]);
      return 2;
    }
  wisp_wgpu_default_vk_driver();
  wisp_wgpu_device_opts dopts = {0};
  dopts.profile = 1;
  wisp_wgpu_device *d = NULL;
  if (wisp_wgpu_device_open(&dopts, &d)) {
    fprintf(stderr, "prod_probe: %s\n", wisp_last_error());
    return 1;
  }
  const int timed = d->profile != NULL; /* else wall clock */
  static wisp_tuning tu; /* the backend options of --tuning */
  wisp_backend *be = NULL;
  wisp_status st = wisp_tuning_parse(tuning, &tu);
  if (!st) {
    tu.webgpu.device = d;
    tu.webgpu.subgroups = -1;
    st = wisp_wgpu_backend_new(&tu.webgpu, &be);
  }
  if (st) {
    fprintf(stderr, "prod_probe: %s\n", wisp_last_error());
    wisp_wgpu_device_close(d);
    return 1;
  }
  printf("{\"tool\": \"prod_probe\", \"device\": \"%s\", \"timing\": \"%s\", \"fp32_peak_tflops\": %g, "
         "\"dp4a_peak_tops\": %g, \"reps\": %d, \"results\": [",
         d->info.name, timed ? "gpu timestamps" : "wall", fp32_peak, dp4a_peak, reps);
  int first = 1, ok = 1;
  char tlist[256];
  snprintf(tlist, sizeof tlist, "%s", types);
  for (char *tname = strtok(tlist, ","); ok && tname; tname = strtok(NULL, ",")) {
    const wisp_wtype type = type_of(tname);
    if ((int)type < 0) {
      fprintf(stderr, "prod_probe: unknown type %s\n", tname);
      ok = 0;
      break;
    }
    const int has_i8 = type == WISP_W_Q4 || type == WISP_W_Q4Z || type == WISP_W_Q4K || type == WISP_W_Q8_0;
    for (int si = 0; ok && si < nshapes; si++) {
      const int rows = shapes[si][0], cols = shapes[si][1];
      wisp_matrix m;
      void *keep[3] = {NULL, NULL, NULL};
      ok = make_matrix(&m, type, rows, cols, keep) && !be->prepare_matrix(be, &m);
      for (int ti = 0; ok && ti < ntok; ti++) {
        const int n = tokens[ti];
        wisp_buf *x = be->buf_new(be, (size_t)n * cols), *y = be->buf_new(be, (size_t)n * rows);
        float *hx = malloc(sizeof(float) * (size_t)n * cols);
        ok = x && y && hx;
        for (size_t i = 0; ok && i < (size_t)n * cols; i++) hx[i] = frand();
        if (ok) be->buf_write(be, x, 0, (size_t)n * cols, hx);
        free(hx);
        for (int path = int8_only ? 1 : 0; ok && path <= has_i8; path++) { /* 0 f32 activations, 1 int8 */
          wisp_wgpu_mm8_opts mo = {.mode = path ? 2 : 3};
          ok = !wisp_wgpu_mm8_configure(be, &mo);
          for (int r = 0; r < 3; r++) be->matmul(be, &m, x, 0, n, y, 0); /* warm-up: pipelines, buffers, clocks */
          ok = ok && !be->sync(be);
          char label[160], qlabel[160];
          snprintf(label, sizeof label, "%s", ok && as_g(be)->last_kernel ? as_g(be)->last_kernel : "");
          snprintf(qlabel, sizeof qlabel, "quant_x8:64");
          uint64_t d0, d1, q0, q1;
          uint64_t ns0 = 0, qns0 = 0, ns1 = 0, qns1 = 0;
          d0 = q0 = d1 = q1 = 0;
          if (timed) ns0 = kernel_ns(d, label, &d0), qns0 = kernel_ns(d, qlabel, &q0);
          const double t0 = wisp_now_s();
          /* back to back, one wait at the end: a GPU idle between products
           * lowers its clocks and the times scatter */
          for (int r = 0; ok && r < reps; r++) be->matmul(be, &m, x, 0, n, y, 0);
          ok = ok && !be->sync(be);
          if (timed) ns1 = kernel_ns(d, label, &d1), qns1 = kernel_ns(d, qlabel, &q1);
          else ns1 = (uint64_t)((wisp_now_s() - t0) * 1e9), d1 = 1;
          if (!ok || d1 <= d0) {
            fprintf(stderr, "prod_probe: %s %dx%d n %d: %s\n", tname, rows, cols, n,
                    ok ? "the product's kernel was not timed" : wisp_last_error());
            ok = 0;
            break;
          }
          /* per product: the kernel's dispatches of one product (parts of
           * a split weight) summed, averaged over the reps */
          const double ms = (double)(ns1 - ns0) / reps / 1e6, qms = (double)(qns1 - qns0) / reps / 1e6;
          const double ops = 2.0 * rows * cols * (double)n, gflops = ops / (ms * 1e6);
          const double peak = path ? dp4a_peak : fp32_peak;
          printf("%s\n  {\"type\": \"%s\", \"path\": \"%s\", \"kernel\": \"%s\", \"rows\": %d, \"cols\": %d, "
                 "\"tokens\": %d, \"ms\": %.4f, \"gflops\": %.1f, \"fraction_of_peak\": %.4f",
                 first ? "" : ",", tname, path ? "int8" : "f32", label, rows, cols, n, ms, gflops, gflops / (peak * 1e3));
          if (path && timed)
            printf(", \"quantize_ms\": %.4f, \"gflops_with_quantize\": %.1f", qms, ops / ((ms + qms) * 1e6));
          printf("}");
          first = 0;
        }
        if (x) be->buf_free(be, x);
        if (y) be->buf_free(be, y);
      }
      for (int k = 0; k < 3; k++) {
        if (g_nkeep < MAX_KEEP) g_keep[g_nkeep++] = keep[k];
        else ok = 0; /* more types x shapes than kept: stop rather than free a weight in use */
      }
    }
  }
  printf("\n]}\n");
  be->destroy(be);
  wisp_wgpu_device_close(d);
  for (int k = 0; k < g_nkeep; k++) free(g_keep[k]);
  return ok ? 0 : 1;
}
