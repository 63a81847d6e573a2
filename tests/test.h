/* A small test harness: each TEST registers itself at load time, so adding a
 * test file needs no list to edit. main.c runs them all (or those whose name
 * contains argv[1]) and ends with the line "N passed, N failed". */
#ifndef WISP_TEST_H
#define WISP_TEST_H

#include <math.h>
#include <stdio.h>
#include <string.h>

/* TEST_ASAN: 1 in a build under AddressSanitizer (the sanitized half of
 * `make test`, docs/testing.md), else 0. A test may do less there where
 * the sanitizers check nothing more than the optimised build already runs
 * (each such place says why). */
#if defined(__SANITIZE_ADDRESS__)
#define TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TEST_ASAN 1
#endif
#endif
#ifndef TEST_ASAN
#define TEST_ASAN 0
#endif

/* On a test's own reference arithmetic (the definition it checks wisp
 * against), heavy enough to matter: left uninstrumented under the
 * sanitizers, which are there for wisp's code. */
#define TEST_UNSANITIZED __attribute__((no_sanitize("address", "undefined")))

typedef void (*test_fn)(void);
void test_register(const char *name, test_fn fn);
void test_fail_at(const char *file, int line, const char *fmt, ...);
int test_failed_now(void);
/* Marks the current test as not run (printed as "skip NAME: why", counted as
 * skipped, neither passed nor failed). Use through SKIP(...). */
void test_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Runs the registered test `name` inside the current one (its failures are
 * the current test's too): 1 passed, 2 skipped, 0 failed, -1 no such test.
 * For re-runs of other tests under a different setting (test_webgpu_guard.c). */
int test_run_named(const char *name);
/* Directory of the wisp CLI under test (WISP_BIN, default build/wisp). */
const char *test_wisp_bin(void);
/* Runs a shell command, captures stdout+stderr (truncated to cap) and returns
 * the exit status (or -1 when it did not exit normally). */
int test_run(const char *cmd, char *out, size_t cap);
/* A fresh scratch directory under build/test-tmp, removed at the end. */
const char *test_tmpdir(void);

#define TEST(name)                                                     \
  static void name(void);                                              \
  __attribute__((constructor)) static void name##_register(void) {     \
    test_register(#name, name);                                        \
  }                                                                    \
  static void name(void)

#define CHECK(cond)                                                    \
  do {                                                                 \
    if (!(cond)) { test_fail_at(__FILE__, __LINE__, "%s", #cond); return; } \
  } while (0)

#define SKIP(...)                                                      \
  do {                                                                 \
    test_skip(__VA_ARGS__);                                            \
    return;                                                            \
  } while (0)

#define CHECKF(cond, ...)                                              \
  do {                                                                 \
    if (!(cond)) { test_fail_at(__FILE__, __LINE__, __VA_ARGS__); return; } \
  } while (0)

#define CHECK_NEAR(a, b, tol)                                          \
  do {                                                                 \
    double a_ = (a), b_ = (b);                                         \
    if (!(fabs(a_ - b_) <= (tol))) {                                   \
      test_fail_at(__FILE__, __LINE__, "%s=%g vs %s=%g (tol %g)", #a, a_, #b, b_, (double)(tol)); \
      return;                                                          \
    }                                                                  \
  } while (0)

#endif
