/* Test runner: runs every registered TEST (or those whose name contains
 * FILTER) and prints "N passed, N failed". With -j N it runs them in N
 * worker processes forked before any test starts: each worker takes the
 * next test from a counter they share, so a worker that drew a slow test
 * does not hold the others up; each has its own scratch directory, device
 * and fixtures, and prints a test's output and result line in one piece
 * once the test is over. */
#include "test.h"

#include "backend/webgpu/wgpu_backend.h"
#include "backend/webgpu/wgpu_device.h"
#include "webgpu_fixture.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>
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

/* What the workers of -j N share (an anonymous shared mapping made before
 * they are forked). */
typedef struct {
  atomic_int next;                /* the next index into the selected tests */
  atomic_int passed, failed, skipped;
  atomic_int running[64];         /* per worker: 1 + the index it is running, 0 between tests */
  pthread_mutex_t out;            /* one test's output at a time on stdout */
} shared_state;

/* Runs test t and prints its result line; the counts go to *pass etc. */
static void run_one(const struct test_entry *t, int *pass, int *fail, int *skip) {
  g_current_failed = 0;
  g_current_skipped = 0;
  /* Each line ends with the test's wall time and CPU time, to find the
   * slow ones (on a shared machine the CPU time is the steadier figure:
   * `sed 's/.*, cpu //' | sort -n`); no test's verdict depends on them. */
  const double t0 = now_s(), c0 = cpu_s();
  t->fn();
  const double el = now_s() - t0, cpu = cpu_s() - c0;
  if (g_current_failed) { (*fail)++; printf("FAIL %s (%.1f s, cpu %.1f s)\n", t->name, el, cpu); }
  else if (g_current_skipped) { (*skip)++; printf("skip %s: %s (%.1f s, cpu %.1f s)\n", t->name, g_skip_reason, el, cpu); }
  else { (*pass)++; printf("ok   %s (%.1f s, cpu %.1f s)\n", t->name, el, cpu); }
  fflush(stdout);
}

static int make_tmpdir(void) {
  char cmd[1024];
  snprintf(g_tmpdir, sizeof g_tmpdir, "build/test-tmp/run-%d", (int)getpid());
  snprintf(cmd, sizeof cmd, "mkdir -p %s", g_tmpdir);
  if (system(cmd) == 0) return 1;
  fprintf(stderr, "cannot create %s\n", g_tmpdir);
  return 0;
}

static void remove_tmpdir(void) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "rm -rf %s", g_tmpdir);
  if (system(cmd) != 0) fprintf(stderr, "warning: could not remove %s\n", g_tmpdir);
}

/* Copies the file at fd (from its start) to out_fd. */
static void copy_out(int fd, int out_fd) {
  char buf[65536];
  ssize_t n;
  lseek(fd, 0, SEEK_SET);
  while ((n = read(fd, buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR)) {
    for (ssize_t o = 0; n > 0 && o < n;) {
      ssize_t w = write(out_fd, buf + o, (size_t)(n - o));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return;
      o += w;
    }
  }
}

/* One worker of -j N: takes tests from the shared counter until none is
 * left. A test's stdout and stderr (the commands it runs included) go to a
 * file in the worker's scratch directory, which is copied to the real
 * stdout, under the shared lock, once the test is over. */
static int worker(shared_state *sh, int me, struct test_entry **sel, int n) {
  if (!make_tmpdir()) return 2;
  char path[600];
  snprintf(path, sizeof path, "%s/.output", g_tmpdir);
  const int cap = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
  const int out_fd = dup(1);
  if (cap < 0 || out_fd < 0) { fprintf(stderr, "cannot open %s\n", path); return 2; }
  setvbuf(stdout, NULL, _IOLBF, 0);
  for (;;) {
    int pass = 0, fail = 0, skip = 0;
    const int i = atomic_fetch_add(&sh->next, 1);
    if (i >= n) break;
    fflush(stdout);
    fflush(stderr);
    if (ftruncate(cap, 0) != 0 || lseek(cap, 0, SEEK_SET) < 0 || dup2(cap, 1) < 0 || dup2(cap, 2) < 0) {
      fprintf(stderr, "cannot capture the output of %s\n", sel[i]->name);
      return 2;
    }
    atomic_store(&sh->running[me], i + 1);
    run_one(sel[i], &pass, &fail, &skip);
    atomic_store(&sh->running[me], 0);
    fflush(stdout);
    fflush(stderr);
    pthread_mutex_lock(&sh->out);
    copy_out(cap, out_fd);
    pthread_mutex_unlock(&sh->out);
    atomic_fetch_add(&sh->passed, pass);
    atomic_fetch_add(&sh->failed, fail);
    atomic_fetch_add(&sh->skipped, skip);
  }
  /* Output after the last test (the device's closing report, a leak
   * report) goes straight out. */
  dup2(out_fd, 1);
  dup2(out_fd, 2);
  remove_tmpdir();
  return 0;
}

static void usage(void) { fprintf(stderr, "usage: wisp_tests [-j N] [FILTER]\n"); }

int main(int argc, char **argv) {
  const char *filter = NULL;
  int jobs = 1;
  for (int a = 1; a < argc; a++) {
    if (!strcmp(argv[a], "-j") && a + 1 < argc) {
      char *end = NULL;
      long j = strtol(argv[++a], &end, 10);
      if (!end || *end || j < 1 || j > 64) { usage(); return 2; }
      jobs = (int)j;
    } else if (!filter && argv[a][0] != '-') {
      filter = argv[a];
    } else {
      usage();
      return 2;
    }
  }
  /* Every command the tests run picks its backend by --backend auto, which
   * opens Vulkan: pin it to lavapipe (when VK_DRIVER_FILES is unset and
   * lavapipe is there, as the WebGPU fixture does) before any test, so no
   * child probes the machine's other Mesa drivers, whose unloaded one-time
   * allocations LeakSanitizer cannot attribute (scripts/lsan-webgpu.supp). */
  wisp_wgpu_default_vk_driver();
  /* Sessions the tests open on WebGPU share the worker's device (the
   * fixture's), so a worker compiles each kernel once (wgpu_backend.h). */
  wisp_wgpu_set_device_hook(test_webgpu);
  qsort(g_tests, (size_t)g_count, sizeof g_tests[0], by_name);
  static struct test_entry *sel[MAX_TESTS];
  int n = 0;
  for (int i = 0; i < g_count; i++)
    if (!filter || strstr(g_tests[i].name, filter)) sel[n++] = &g_tests[i];
  if (jobs > n) jobs = n > 0 ? n : 1;
  int passed = 0, failed = 0, skipped = 0;
  if (jobs == 1) {
    if (!make_tmpdir()) return 2;
    for (int i = 0; i < n; i++) run_one(sel[i], &passed, &failed, &skipped);
    remove_tmpdir();
  } else {
    shared_state *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED) { perror("mmap"); return 2; }
    memset(sh, 0, sizeof *sh);
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
    pthread_mutex_init(&sh->out, &ma);
    fflush(stdout);
    fflush(stderr);
    pid_t pids[64];
    for (int w = 0; w < jobs; w++) {
      pids[w] = fork();
      if (pids[w] == 0) exit(worker(sh, w, sel, n)); /* exit, not _exit: atexit handlers and the leak check run */
      if (pids[w] < 0) { perror("fork"); return 2; }
    }
    /* A worker that did not end with status 0 (a crash, a sanitizer or
     * leak report at its exit) fails the run, whatever its tests said; the
     * output it had captured (the test it died in) is shown. */
    int bad_workers = 0;
    for (int w = 0; w < jobs; w++) {
      int st = 0;
      if (pids[w] <= 0) continue;
      while (waitpid(pids[w], &st, 0) < 0 && errno == EINTR) {}
      if (WIFEXITED(st) && WEXITSTATUS(st) == 0) continue;
      bad_workers++;
      snprintf(g_tmpdir, sizeof g_tmpdir, "build/test-tmp/run-%d", (int)pids[w]);
      char path[600];
      snprintf(path, sizeof path, "%s/.output", g_tmpdir);
      const int fd = open(path, O_RDONLY);
      if (fd >= 0) {
        fflush(stdout);
        copy_out(fd, 1);
        close(fd);
      }
      const int r = atomic_load(&sh->running[w]);
      const char *in = r > 0 ? sel[r - 1]->name : "(between tests)";
      if (WIFEXITED(st)) printf("FAIL worker %d ended with status %d in %s\n", w + 1, WEXITSTATUS(st), in);
      else printf("FAIL worker %d ended by signal %d in %s\n", w + 1, WIFSIGNALED(st) ? WTERMSIG(st) : 0, in);
      remove_tmpdir();
    }
    passed = atomic_load(&sh->passed);
    failed = atomic_load(&sh->failed);
    skipped = atomic_load(&sh->skipped);
    /* tests a dead worker took and never reported count as failed */
    const int lost = n - (passed + failed + skipped);
    if (lost > 0) printf("%d test(s) did not report: their worker died\n", lost);
    failed += (lost > 0 ? lost : 0) + (bad_workers && lost <= 0 ? 1 : 0);
  }
  if (skipped) printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
  else printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
