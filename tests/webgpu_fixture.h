/* Shared WebGPU device for the test suite (tests/test_webgpu*.c).
 *
 * The device is opened once per process (lavapipe takes ~0.3 s) with
 * VK_DRIVER_FILES pointed at Mesa's lavapipe when unset and present. When no
 * adapter can be had, a test calls WEBGPU_OR_SKIP(): with
 * WISP_REQUIRE_WEBGPU=1 the test fails with the reason; otherwise it is
 * reported as skipped (not run, not passed). */
#ifndef WISP_TEST_WEBGPU_FIXTURE_H
#define WISP_TEST_WEBGPU_FIXTURE_H

#include "backend/backend.h"
#include "backend/webgpu/wgpu_device.h"
#include "test.h"
#include "wisp.h"

/* The shared device, or NULL (then test_webgpu_why() says why). */
wisp_wgpu_device *test_webgpu(void);
const char *test_webgpu_why(void);
int test_webgpu_required(void);
/* Deterministic random numbers for the tests. */
uint32_t test_rand_u32(uint64_t *state);
float test_rand_float(uint64_t *state); /* uniform in [-1, 1) */

/* Compares a packed-f16 KV cache on the GPU (n halves in the first n/2
 * words; element e is half e & 1 of word e >> 1) with the CPU's f32 cache:
 * 1 when the worst error is within tol of max|cpu|; *worst_rel keeps the
 * largest relative error seen; otherwise err names the worst element. */
int test_compare_kv16(wisp_backend *cpu, const wisp_buf *c, wisp_backend *gpu, const wisp_buf *g, size_t n, double tol,
                      const char *what, double *worst_rel, char *err, size_t cap);

/* Evaluates the prompt, takes its argmax as out[0], then n - 1 greedy
 * tokens through the decode loop (options o). *made_bg and *submits (may be
 * NULL) get the bind groups made and the submits during the decode loop on
 * a webgpu session (0 on others). 0 on failure, err filled. */
int test_decode(wisp_session *s, const int32_t *prompt, int np, int n, const wisp_generate_options *o, int32_t *out,
                uint64_t *made_bg, uint64_t *submits, char *err, size_t cap);

#define WEBGPU_OR_SKIP(d)                                                          \
  wisp_wgpu_device *d = test_webgpu();                                             \
  do {                                                                             \
    if (!d) {                                                                      \
      if (test_webgpu_required()) {                                                \
        test_fail_at(__FILE__, __LINE__, "WISP_REQUIRE_WEBGPU=1 but no WebGPU: %s", \
                     test_webgpu_why());                                           \
        return;                                                                    \
      }                                                                            \
      SKIP("WebGPU not available: %s", test_webgpu_why());                         \
    }                                                                              \
  } while (0)

#endif
