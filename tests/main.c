/* Test runner: runs every registered TEST and prints "N passed, N failed". */
#include "test.h"

#include <stdarg.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_TESTS 1024
struct test_entry { const char *name; test_fn fn; };
static struct test_entry g_tests[MAX_TESTS];
static int g_count;
static int g_current_failed;
static int g_current_skipped;
static char g_skip_reason[512];
static char g_tmpdir[512];

void test_register(const char *name, test_fn fn) {
  if (g_count < MAX_TESTS) { g_tests[g_count].name = name; g_tests[g_count].fn = fn; g_count++; }
}

void test_fail_at(const char *file, int line, const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "  FAIL %s:%d: ", file, line);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  g_current_failed = 1;
}

int test_failed_now(void) { return g_current_failed; }

void test_skip(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(g_skip_reason, sizeof g_skip_reason, fmt, ap);
  va_end(ap);
  g_current_skipped = 1;
}

int test_run_named(const char *name) {
  for (int i = 0; i < g_count; i++) {
    if (strcmp(g_tests[i].name, name)) continue;
    const int failed_before = g_current_failed, skipped_before = g_current_skipped;
    g_current_failed = 0;
    g_current_skipped = 0;
    g_tests[i].fn();
    const int failed = g_current_failed, skipped = g_current_skipped;
    g_current_failed = failed_before || failed;
    g_current_skipped = skipped_before;
    return failed ? 0 : skipped ? 2 : 1;
  }
  return -1;
}

const char *test_wisp_bin(void) {
  const char *b = getenv("WISP_BIN");
  return b && *b ? b : "build/wisp";
}

int test_run(const char *cmd, char *out, size_t cap) {
  char full[8192];
  snprintf(full, sizeof full, "%s 2>&1", cmd);
  FILE *p = popen(full, "r");
  if (!p) return -1;
  size_t n = 0;
  int c;
  while ((c = fgetc(p)) != EOF) {
    if (out && n + 1 < cap) out[n++] = (char)c;
  }
  if (out && cap) out[n] = 0;
  int st = pclose(p);
  if (st == -1 || !WIFEXITED(st)) return -1;
  return WEXITSTATUS(st);
}

const char *test_tmpdir(void) { return g_tmpdir; }

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* CPU seconds of this process (lavapipe's threads included) and of the
 * commands it ran and waited for (the CLI under test). */
static double cpu_s(void) {
  struct rusage self, kids;
  getrusage(RUSAGE_SELF, &self);
  getrusage(RUSAGE_CHILDREN, &kids);
  const struct timeval t[4] = {self.ru_utime, self.ru_stime, kids.ru_utime, kids.ru_stime};
  double s = 0;
  for (int i = 0; i < 4; i++) s += (double)t[i].tv_sec + (double)t[i].tv_usec * 1e-6;
  return s;
}

static int by_name(const void *a, const void *b) {
  return strcmp(((const struct test_entry *)a)->name, ((const struct test_entry *)b)->name);
}

int main(int argc, char **argv) {
  const char *filter = argc > 1 ? argv[1] : NULL;
  snprintf(g_tmpdir, sizeof g_tmpdir, "build/test-tmp/run-%d", (int)getpid());
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "mkdir -p %s", g_tmpdir);
  if (system(cmd) != 0) { fprintf(stderr, "cannot create %s\n", g_tmpdir); return 2; }
  qsort(g_tests, (size_t)g_count, sizeof g_tests[0], by_name);
  int passed = 0, failed = 0, skipped = 0;
  for (int i = 0; i < g_count; i++) {
    if (filter && !strstr(g_tests[i].name, filter)) continue;
    g_current_failed = 0;
    g_current_skipped = 0;
    /* Each line ends with the test's wall time and CPU time, to find the
     * slow ones (on a shared machine the CPU time is the steadier figure:
     * `sed 's/.*, cpu //' | sort -n`); no test's verdict depends on them. */
    const double t0 = now_s(), c0 = cpu_s();
    g_tests[i].fn();
    const double el = now_s() - t0, cpu = cpu_s() - c0;
    if (g_current_failed) { failed++; printf("FAIL %s (%.1f s, cpu %.1f s)\n", g_tests[i].name, el, cpu); }
    else if (g_current_skipped) { skipped++; printf("skip %s: %s (%.1f s, cpu %.1f s)\n", g_tests[i].name, g_skip_reason, el, cpu); }
    else { passed++; printf("ok   %s (%.1f s, cpu %.1f s)\n", g_tests[i].name, el, cpu); }
    fflush(stdout);
  }
  snprintf(cmd, sizeof cmd, "rm -rf %s", g_tmpdir);
  if (system(cmd) != 0) fprintf(stderr, "warning: could not remove %s\n", g_tmpdir);
  if (skipped) printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
  else printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
