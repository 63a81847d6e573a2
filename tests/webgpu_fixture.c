/* See webgpu_fixture.h. */
#include "webgpu_fixture.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/webgpu/wgpu_backend.h"
#include "engine/engine.h"
#include "engine/sampler.h"
#include "util/env.h"
#include "util/err.h"
#include "wisp.h"

/* [0]: the shared device; [1]: the one handed out while WISP_WEBGPU_GUARD is
 * set (re-runs under the debug guard, test_webgpu_guard.c), opened with it. */
static wisp_wgpu_device *g_dev[2];
static int g_tried[2];
static char g_why[1024];

static void close_devices(void) {
  for (int i = 0; i < 2; i++) {
    wisp_wgpu_device_close(g_dev[i]);
    g_dev[i] = NULL;
  }
}

wisp_wgpu_device *test_webgpu(void) {
  const int i = wisp_env_webgpu_guard(NULL) && g_dev[0] && !g_dev[0]->guard_bytes;
  if (!g_tried[i]) {
    g_tried[i] = 1;
    wisp_wgpu_default_vk_driver();
    if (wisp_wgpu_device_open(NULL, &g_dev[i]) != WISP_OK) {
      snprintf(g_why, sizeof g_why, "%s", wisp_last_error());
      g_dev[i] = NULL;
    } else {
      static int at_exit;
      if (!at_exit++) atexit(close_devices);
    }
  }
  return g_dev[i];
}

const char *test_webgpu_why(void) { return g_why[0] ? g_why : "not tried"; }

int test_webgpu_required(void) {
  const char *v = getenv("WISP_REQUIRE_WEBGPU");
  return v && !strcmp(v, "1");
}

uint32_t test_rand_u32(uint64_t *s) {
  /* splitmix64 */
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return (uint32_t)((z ^ (z >> 31)) >> 32);
}

float test_rand_float(uint64_t *s) { return (float)((double)test_rand_u32(s) / 2147483648.0 - 1.0); }

/* IEEE half bits to float. */
static float half_to_float(uint16_t h) {
  int e = (h >> 10) & 31, m = h & 1023;
  float v = e == 0 ? ldexpf((float)m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexpf((float)(m | 1024), e - 25);
  return (h & 0x8000) ? -v : v;
}

int test_compare_kv16(wisp_backend *cpu, const wisp_buf *c, wisp_backend *gpu, const wisp_buf *g, size_t n, double tol,
                      const char *what, double *worst_rel, char *err, size_t cap) {
  float *x = malloc(sizeof(float) * n), *w = malloc(sizeof(float) * (n / 2 + 1));
  int ok = x && w;
  if (!ok) snprintf(err, cap, "%s: out of memory", what);
  if (ok) {
    cpu->buf_read(cpu, c, 0, n, x);
    gpu->buf_read(gpu, g, 0, n / 2, w);
    if (gpu->sync(gpu)) {
      snprintf(err, cap, "%s: read: %s", what, wisp_last_error());
      ok = 0;
    }
  }
  double mx = 0, worst = 0;
  size_t wi = 0;
  float wy = 0;
  for (size_t i = 0; ok && i < n; i++) mx = fmax(mx, fabs(x[i]));
  for (size_t i = 0; ok && i < n; i++) {
    uint32_t u;
    memcpy(&u, &w[i / 2], 4);
    float y = half_to_float((uint16_t)(i & 1 ? u >> 16 : u & 0xFFFF));
    double e = fabs((double)y - x[i]);
    if (!(e <= worst)) {
      worst = isnan(e) ? INFINITY : e;
      wi = i;
      wy = y;
    }
  }
  double rel = mx > 0 ? worst / mx : worst;
  if (ok && rel > *worst_rel) *worst_rel = rel;
  if (ok && !(rel <= tol)) {
    snprintf(err, cap, "%s (f16): [%zu] gpu %.9g cpu %.9g, error %.3g of max|ref| %.4g (tol %g)", what, wi, wy, x[wi],
             rel, mx, tol);
    ok = 0;
  }
  free(x);
  free(w);
  return ok;
}

int test_decode(wisp_session *s, const int32_t *prompt, int np, int n, const wisp_generate_options *o, int32_t *out,
                uint64_t *made_bg, uint64_t *submits, char *err, size_t cap) {
  wisp_backend *be = s->backend;
  int vocab = wisp_model_vocab(s->model), made = 0;
  float *logits = malloc(sizeof(float) * (size_t)vocab);
  int ok = logits && wisp_session_eval(s, prompt, np, logits) == WISP_OK;
  wisp_wgpu_backend_stats s0 = {0}, s1 = {0};
  if (ok) {
    out[0] = (int32_t)wisp_argmax(logits, vocab);
    wisp_wgpu_backend_stats_get(be, &s0);
    ok = wisp_session_generate(s, out[0], n - 1, o, out + 1, &made) == WISP_OK && made == n - 1;
    wisp_wgpu_backend_stats_get(be, &s1);
  }
  if (!ok) snprintf(err, cap, "eval/generate (made %d of %d): %s", made, n - 1, wisp_last_error());
  if (made_bg) *made_bg = s1.bind_groups - s0.bind_groups;
  if (submits) *submits = s1.submits - s0.submits;
  free(logits);
  return ok;
}
