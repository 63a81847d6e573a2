/* Shared helpers for the plan/registry/profile tests (fixtures under
 * tests/data/plan, run from the repo root). */
#ifndef WISP_PLAN_TEST_UTIL_H
#define WISP_PLAN_TEST_UTIL_H

#include <stdio.h>

#include "test.h"

#define PD "tests/data/plan"
#define SEED_REGISTRY PD "/seeds/kernel-registry.json"
#define SEED_PROFILE PD "/seeds/profile-qwen-3-5-2b-metal-throughput.json"
#define SEED_MANIFEST PD "/seeds/manifest-lfm2-hybrid-q4.json"
#define FIX_KERNELS PD "/kernels"
#define FIX_PROFILES PD "/profiles"
#define FIX_REGISTRY_GPU PD "/registry-webgpu.json"

/* Runs `wisp ARGS`, returns its exit status; output (stdout+stderr) in out. */
static inline int run_wisp(char *out, size_t cap, const char *args) {
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "%s %s", test_wisp_bin(), args);
  return test_run(cmd, out, cap);
}

#endif
