/* See webgpu_fixture.h. */
#include "webgpu_fixture.h"

#include <stdlib.h>
#include <string.h>

#include "wisp.h"

static wisp_wgpu_device *g_dev;
static int g_tried;
static char g_why[1024];

static void close_device(void) {
  wisp_wgpu_device_close(g_dev);
  g_dev = NULL;
}

wisp_wgpu_device *test_webgpu(void) {
  if (!g_tried) {
    g_tried = 1;
    wisp_wgpu_default_vk_driver();
    if (wisp_wgpu_device_open(NULL, &g_dev) != WISP_OK) {
      snprintf(g_why, sizeof g_why, "%s", wisp_last_error());
      g_dev = NULL;
    } else {
      atexit(close_device);
    }
  }
  return g_dev;
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
