/* Shared WebGPU device for the test suite (tests/test_webgpu*.c).
 *
 * The device is opened once per process (lavapipe takes ~0.3 s) with
 * VK_DRIVER_FILES pointed at Mesa's lavapipe when unset and present. When no
 * adapter can be had, a test calls WEBGPU_OR_SKIP(): with
 * WISP_REQUIRE_WEBGPU=1 the test fails with the reason; otherwise it is
 * reported as skipped (not run, not passed). */
#ifndef WISP_TEST_WEBGPU_FIXTURE_H
#define WISP_TEST_WEBGPU_FIXTURE_H

#include "backend/webgpu/wgpu_device.h"
#include "test.h"

/* The shared device, or NULL (then test_webgpu_why() says why). */
wisp_wgpu_device *test_webgpu(void);
const char *test_webgpu_why(void);
int test_webgpu_required(void);
/* Deterministic random numbers for the tests. */
uint32_t test_rand_u32(uint64_t *state);
float test_rand_float(uint64_t *state); /* uniform in [-1, 1) */

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
